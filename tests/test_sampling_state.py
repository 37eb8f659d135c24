"""Participation state on disk: round trip at 10^6 clients, version, truncation, edits."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

from spatialdp.exceptions import PartitionMismatch
from spatialdp.geo import Partition
from spatialdp.privacy.target import Simulation
from spatialdp.sampling import (
    ParticipationPolicy,
    ParticipationState,
    StateFileError,
    Strata,
    StratifiedSampler,
)
from spatialdp.sampling.simulation import row_strata


@pytest.fixture(scope="module")
def national() -> tuple[StratifiedSampler, np.ndarray]:
    import h3

    cells = sorted(h3.grid_disk(h3.latlng_to_cell(40.0, -100.0, 4), 8))[:200]
    strata = Strata(Partition.from_h3_cells(cells, name="h3-200"), basis="h3")
    gen = np.random.default_rng(0)
    fleet = gen.integers(0, 200, 1_000_000)
    policy = ParticipationPolicy(participation_cap=2, epsilon_per_round=0.1,
                                 rounds_per_epoch=50)
    return StratifiedSampler(strata, cohort=1000, policy=policy), fleet


def test_a_million_client_state_survives_save_and_load(
        national: tuple[StratifiedSampler, np.ndarray], tmp_path: Path) -> None:
    sampler, fleet = national
    state = sampler.new_state(fleet, target=Simulation(rng=1))
    for r in range(3):
        sampler.select(state, r)
    path = sampler_path = state.save(tmp_path / "participation.npz")
    loaded = ParticipationState.load(sampler_path, strata_version=sampler.strata.version)
    assert path.stat().st_size < 8_000_000
    assert np.array_equal(loaded.used, state.used)
    assert loaded.rounds == [0, 1, 2]
    assert loaded.entropy == state.entropy
    assert loaded.history == state.history
    # The loaded state continues the epoch exactly as the original would.
    assert np.array_equal(sampler.select(loaded, 3).clients, sampler.select(state, 3).clients)


def _saved(tmp_path: Path) -> tuple[StratifiedSampler, Path]:
    strata, fleet = row_strata({"a": 300, "b": 40, "c": 3})
    policy = ParticipationPolicy(participation_cap=1, epsilon_per_round=0.5,
                                 rounds_per_epoch=4)
    sampler = StratifiedSampler(strata, cohort=20, policy=policy)
    state = sampler.new_state(fleet, target=Simulation(rng=0))
    sampler.select(state, 0)
    return sampler, state.save(tmp_path / "state.npz")


def test_merges_and_charge_are_restored(tmp_path: Path) -> None:
    sampler, path = _saved(tmp_path)
    loaded = ParticipationState.load(path, strata_version=sampler.strata.version)
    assert loaded.merges[0].members == ("c",)
    assert "below the floor" in loaded.merges[0].reason
    assert loaded.charge["accounting"] == "simulation"
    assert loaded.charge["epsilon_per_client_epoch"] == pytest.approx(0.5)


def test_a_truncated_file_is_detected(tmp_path: Path) -> None:
    sampler, path = _saved(tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(StateFileError, match="truncated or not a participation state file"):
        ParticipationState.load(path, strata_version=sampler.strata.version)


def test_an_edited_file_is_detected(tmp_path: Path) -> None:
    sampler, path = _saved(tmp_path)
    # Rewrite the archive with one participation count reset: a valid zip, a wrong digest.
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    arrays["used"] = arrays["used"].copy()
    arrays["used"][np.flatnonzero(arrays["used"])[0]] = 0
    with open(path, "wb") as handle:
        np.savez(handle, **arrays)
    with pytest.raises(StateFileError, match="was edited or damaged"):
        ParticipationState.load(path, strata_version=sampler.strata.version)


def test_a_flipped_byte_is_detected(tmp_path: Path) -> None:
    sampler, path = _saved(tmp_path)
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("used.npy")
    raw[info.header_offset + 30 + len(info.filename) + 128 + 5] ^= 0x01  # inside the data
    path.write_bytes(bytes(raw))
    with pytest.raises(StateFileError):
        ParticipationState.load(path, strata_version=sampler.strata.version)


def test_a_state_of_another_partition_version_is_refused(tmp_path: Path) -> None:
    _, path = _saved(tmp_path)
    other, _ = row_strata({"a": 1, "b": 1, "d": 1})
    with pytest.raises(PartitionMismatch, match="was made on strata version"):
        ParticipationState.load(path, strata_version=other.version)


def test_a_missing_or_foreign_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StateFileError, match="is not a participation state file"):
        ParticipationState.load(tmp_path / "nope.npz", strata_version="x")
    foreign = tmp_path / "foreign.npz"
    foreign.write_text("hello")
    with pytest.raises(StateFileError, match="truncated or not a participation state file"):
        ParticipationState.load(foreign, strata_version="x")
