"""Fault injection on the files spatialdp keeps: truncated or edited files are detected on load.

For the cohort participation state (``.npz``), partitions (GeoParquet, H3 and
polygons) and the privacy ledger (SQLite), every truncation and every flipped
byte of a seeded sweep must either be refused on load with the library's own
error (``StateFileError``, ``InvalidInput``, ``PartitionMismatch``,
``LedgerError``: never a raw Arrow, GEOS or SQLite exception) or load exactly
the original content (a flip in unused bytes). Edits made through the formats'
own tools (a re-saved archive, a rewritten Parquet file, an SQL UPDATE) are
detected too. The ledger checkpoints its write-ahead log after every charge,
so a plain copy of the ledger file without its ``-wal`` holds every charge.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from spatialdp.exceptions import InvalidInput, LedgerError, PartitionMismatch, SpatialDPError
from spatialdp.geo import Partition
from spatialdp.privacy import Disjoint, PrivacyLedger
from spatialdp.privacy.target import Simulation
from spatialdp.sampling import ParticipationPolicy, ParticipationState, StratifiedSampler
from spatialdp.sampling.simulation import row_strata

CUTS = 12


def _faults(data: bytes, seed: int, flips: int) -> list[tuple[str, bytes]]:
    """Return truncations (header, middle, tail) and single-byte flips at seeded positions."""
    gen = np.random.default_rng(seed)
    size = len(data)
    cuts = sorted({0, 1, 8, 100, size // 2, size - 1, *gen.integers(1, size, CUTS).tolist()})
    out = [(f"truncated to {c} bytes", data[:c]) for c in cuts if c < size]
    for pos in gen.integers(0, size, flips).tolist():
        raw = bytearray(data)
        raw[pos] ^= 0xFF
        out.append((f"byte {pos} flipped", bytes(raw)))
    return out


def _sweep(path: Path, seed: int, load: Callable[[Path], Any], same: Callable[[Any], bool],
           errors: tuple[type[Exception], ...], flips: int = 40) -> dict[str, int]:
    """Apply every fault to a copy of ``path``.

    Every truncation must be refused; a flipped byte must be refused or load
    exactly the original content (flips in unused bytes: padding, free pages).
    """
    data = path.read_bytes()
    outcome = {"refused": 0, "unchanged": 0}
    for what, blob in _faults(data, seed, flips):
        broken = path.with_name(f"broken{path.suffix}")
        for leftover in path.parent.glob(f"broken{path.suffix}*"):
            leftover.unlink()
        broken.write_bytes(blob)
        try:
            loaded = load(broken)
        except errors:
            outcome["refused"] += 1
            continue
        except Exception as err:  # a raw exception is a failure of detection too
            pytest.fail(f"{path.name} {what}: raw {type(err).__name__}: {err}")
        assert not what.startswith("truncated"), f"{path.name} {what}: loaded"
        assert same(loaded), f"{path.name} {what}: loaded different content silently"
        outcome["unchanged"] += 1
    return outcome


# --- participation state -----------------------------------------------------------------------

def _state(tmp_path: Path) -> tuple[StratifiedSampler, ParticipationState, Path]:
    strata, fleet = row_strata({"a": 300, "b": 40, "c": 3})
    policy = ParticipationPolicy(participation_cap=1, epsilon_per_round=0.5, rounds_per_epoch=4)
    sampler = StratifiedSampler(strata, cohort=20, policy=policy)
    state = sampler.new_state(fleet, target=Simulation(rng=0))
    sampler.select(state, 0)
    return sampler, state, state.save(tmp_path / "state.npz")


def test_state_file_faults_are_detected(tmp_path: Path) -> None:
    sampler, state, path = _state(tmp_path)

    def same(loaded: ParticipationState) -> bool:
        return (np.array_equal(loaded.used, state.used) and loaded.rounds == state.rounds
                and loaded.entropy == state.entropy
                and np.array_equal(loaded.client_stratum, state.client_stratum))

    outcome = _sweep(path, 1, lambda p: ParticipationState.load(
        p, strata_version=sampler.strata.version), same, (InvalidInput,))
    assert outcome["refused"] > CUTS


# --- partitions ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def partitions() -> dict[str, Partition]:
    import h3

    from spatialdp.datasets import load_us_states

    cells = sorted(h3.grid_disk(h3.latlng_to_cell(39.7, -105.0, 5), 3))
    states = load_us_states()
    four = states[states.state.isin(["CO", "UT", "WY", "NM"])]
    return {"h3": Partition.from_h3_cells(cells, name="denver"),
            "polygons": Partition.from_geodataframe(four, "state", name="four")}


@pytest.mark.parametrize("kind", ["h3", "polygons"])
def test_partition_file_faults_are_detected(tmp_path: Path, partitions: dict[str, Partition],
                                            kind: str) -> None:
    part = partitions[kind]
    path = tmp_path / f"{kind}.parquet"
    part.to_file(str(path))

    def same(loaded: Partition) -> bool:
        return loaded.version == part.version and loaded.regions.equals(part.regions)

    outcome = _sweep(path, 2, lambda p: Partition.read_file(str(p)), same,
                     (InvalidInput, PartitionMismatch), flips=25)
    assert outcome["refused"] > CUTS


def test_a_partition_rewritten_with_its_metadata_is_detected(
        tmp_path: Path, partitions: dict[str, Partition]) -> None:
    """An edit through Parquet's own tools (one region id changed, metadata kept)."""
    path = tmp_path / "h3.parquet"
    partitions["h3"].to_file(str(path))
    table = pq.read_table(path)
    ids = table.column("region_id").to_pylist()
    ids[0], ids[1] = ids[1], ids[0]  # swapped ids: same set, different geography order
    others = sorted(set(ids))
    ids[0] = others[-1] if ids[0] != others[-1] else others[0]  # one cell replaced
    import pyarrow as pa

    edited = table.set_column(table.schema.get_field_index("region_id"), "region_id",
                              pa.array(ids, type=table.schema.field("region_id").type))
    pq.write_table(edited, path)
    with pytest.raises((PartitionMismatch, InvalidInput)):
        Partition.read_file(str(path))


# --- the ledger ---------------------------------------------------------------------------------

def _ledger(folder: Path, charges: int = 5) -> tuple[Path, PrivacyLedger]:
    path = folder / "ledger.sqlite"
    ledger = PrivacyLedger(str(path), epoch_budget=10.0)
    for i in range(charges):
        ledger.spend(0, "evaluation.regional", structure=Disjoint("us48", parts=48),
                     epsilon=0.25, who="test", what=f"metric {i}", why="fault test")
    return path, ledger


def _content(ledger: PrivacyLedger) -> tuple[Any, ...]:
    return (ledger.audit().to_dict("list"), ledger.spent(0),
            ledger.remaining(0, "evaluation.regional"), ledger.epochs())


def test_ledger_file_faults_are_detected(tmp_path: Path) -> None:
    path, ledger = _ledger(tmp_path)
    expected = _content(ledger)
    ledger.close()

    def load(p: Path) -> tuple[Any, ...]:
        with PrivacyLedger(str(p), read_only=True) as copy:
            return _content(copy)

    outcome = _sweep(path, 3, load, lambda got: got == expected, (LedgerError,), flips=60)
    assert outcome["refused"] > CUTS


def test_a_damaged_index_cannot_hide_charges(tmp_path: Path) -> None:
    """Regression: a flipped byte in the spend index made spent() read 0 (budget reset)."""
    path, ledger = _ledger(tmp_path)
    ledger.close()
    conn = sqlite3.connect(path)
    pages = {name: int(page) for name, page in conn.execute(
        "SELECT name, rootpage FROM sqlite_master WHERE type = 'index'")}
    page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
    conn.close()
    raw = bytearray(path.read_bytes())
    for root in pages.values():  # damage one byte inside every index root page's cells
        start = (root - 1) * page_size
        cells = raw[start:start + page_size]
        last = max(i for i, b in enumerate(cells) if b)
        raw[start + last] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(LedgerError, match="integrity_check|damaged|malformed"):
        PrivacyLedger(str(path), read_only=True)


@pytest.mark.parametrize("edit", [
    "UPDATE charges SET charged = '0.01'",
    "DELETE FROM charges WHERE rowid = (SELECT MAX(rowid) FROM charges)",
    "UPDATE spend SET spent = '0'",
])
def test_a_ledger_edited_with_sql_is_detected(tmp_path: Path, edit: str) -> None:
    path, ledger = _ledger(tmp_path)
    ledger.close()
    conn = sqlite3.connect(path)
    conn.execute(edit)
    conn.commit()
    conn.close()
    with pytest.raises(LedgerError):
        with PrivacyLedger(str(path), read_only=True) as reopened:
            reopened.verify()


def test_a_plain_copy_without_the_wal_holds_every_charge(tmp_path: Path) -> None:
    """The ledger checkpoints after every charge: copying the main file alone is enough."""
    path, ledger = _ledger(tmp_path, charges=7)
    try:
        assert Path(f"{path}-wal").stat().st_size == 0  # everything is in the main file
        copy = tmp_path / "backup" / "ledger.sqlite"
        copy.parent.mkdir()
        shutil.copyfile(path, copy)  # the ledger is still open; no -wal copied
        assert not Path(f"{copy}-wal").exists()
        with PrivacyLedger(str(copy), read_only=True) as backup:
            assert _content(backup) == _content(ledger)
            assert len(backup.audit()) == 7
        ledger.spend(0, "evaluation.regional", structure=Disjoint("us48", parts=48),
                     epsilon=0.25, who="test", what="after the copy", why="fault test")
        shutil.copyfile(path, copy)
        with PrivacyLedger(str(copy), read_only=True) as backup:
            assert len(backup.audit()) == 8
    finally:
        ledger.close()


def test_refusals_are_library_errors() -> None:
    assert issubclass(LedgerError, SpatialDPError)
    assert issubclass(PartitionMismatch, SpatialDPError)
