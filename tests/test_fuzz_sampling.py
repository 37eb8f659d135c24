"""Every public callable of :mod:`spatialdp.sampling`, fuzzed (the contract of ``test_fuzz.py``).

The registry :data:`FUZZ` maps each public callable of ``spatialdp.sampling``
(its ``__all__`` and the public methods of its classes) to a hypothesis strategy
of calls mixing valid arguments with junk (wrong types, bools for numbers,
numbers as strings, NaN, infinities, 0, negatives, 1e308, numpy scalars, empty
and object arrays, ``None``, wrong shapes, repeated and unknown ids). Each call
must return (and its result pass its invariants) or raise a
:class:`~spatialdp.exceptions.SpatialDPError`, within the time limit, warning
only with spatialdp's own warnings (:func:`tests.test_fuzz_support.run`).

:func:`test_every_public_callable_is_fuzzed` fails when a public callable has
neither an entry nor a reasoned place in :data:`SKIP`.
:func:`test_refused_epochs_leave_the_ledger_untouched` holds the two entry
points that charge a ledger (``StratifiedSampler.new_state`` and ``next_epoch``)
to "a refusal charges nothing; a success charges ``cap x epsilon_per_round``
once". The regressions of what this suite found and fixed are at the end.

Hunt for new defects with ``SPATIALDP_FUZZ_RANDOM=1 SPATIALDP_FUZZ_SCALE=10``.
"""

from __future__ import annotations

import functools
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h3
import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import sparse

from spatialdp.exceptions import InvalidInput, SpatialDPError
from spatialdp.geo import Partition
from spatialdp.privacy import ReleaseTarget, Simulation
from spatialdp.sampling import (
    MODES,
    Coverage,
    ParticipationPolicy,
    ParticipationState,
    RoundCohort,
    Strata,
    StratifiedSampler,
    allocate,
    allocation_table,
    coverage_score,
    density_cells,
    density_strata,
    epoch_coverage,
    explore_coverage,
    largest_remainder,
    merge_small_groups,
    merge_suppressed_regions,
    plot_allocation,
    plot_coverage_map,
    plot_coverage_maps,
    plot_staircase,
    published_composition,
    release_epoch_coverage,
    row_strata,
    simulate_rounds,
)
from tests.test_fuzz_support import (
    Call,
    arg,
    boxes,
    check_census,
    fuzz_only_spatialdp_errors,
    fuzz_settings,
    junk,
    ledger_targets,
    maybe,
    mixed,
    mutated,
    number,
    other_boxes,
    public_callables,
    run,
    targets,
    text,
    working_directory,
)

PACKAGE = "spatialdp.sampling"

#: Public names that are not fuzzed, each with the reason.
SKIP: dict[str, str] = {
    **{name: "constant" for name in ("DEFAULT_MODE", "DENSITY_CLASSES", "MODES",
                                     "SEED_POPULATIONS")},
    "StateFileError": "exception class",
    # Result records: built by the library and returned; their methods are fuzzed (or
    # called in the checks) on real instances.
    **{name: "result record (built by the library; checked on returned instances)"
       for name in ("Allocation", "Coverage", "Merge", "RoundCohort", "ParticipationState",
                    "ReleasedCoverage")},
    # Zero-argument methods: called on every instance the fuzz returns (the checks).
    **{name: "no argument: called on every instance the fuzz returns (check)" for name in (
        "Allocation.to_frame", "Coverage.merges_table", "Coverage.summary", "Coverage.to_dict",
        "ReleasedCoverage.summary",
        "Coverage.to_geodataframe", "Merge.to_dict", "ParticipationPolicy.describe",
        "Strata.adjacency", "Strata.centroids")},
}


def call(label: str, fn: Callable[..., Any], /, *args: Any,
         check: Callable[[Any], None] | None = None, **kwargs: Any) -> Call:
    return Call(label, fn, args, kwargs, check)


TMP = tempfile.mkdtemp(prefix="spatialdp-fuzz-sampling-")


@pytest.fixture(autouse=True, scope="module")
def _in_a_scratch_folder() -> Any:
    """Run in a scratch folder: a fuzzed relative path ("abc", "1.0") lands there."""
    with working_directory(TMP):
        yield


# --------------------------------------------------------------------------- valid inputs

#: Three strata in a row (a-b-c adjacent); c is below the default merge floor of 5.
ROW = {"a": 300, "b": 40, "c": 3}


@functools.cache
def row() -> tuple[Strata, np.ndarray]:
    return row_strata(ROW)


def policy(cap: int = 2, eps: float = 0.1, rounds: int = 5) -> ParticipationPolicy:
    return ParticipationPolicy(participation_cap=cap, epsilon_per_round=eps,
                               rounds_per_epoch=rounds)


@functools.cache
def sampler(mode: str = "sqrt", floor: int = 5, cohort: int = 20) -> StratifiedSampler:
    sigma = {"a": 1.0, "b": 2.0, "c": 0.5} if mode == "neyman" else None
    return StratifiedSampler(row()[0], cohort=cohort, policy=policy(), mode=mode, sigma=sigma,
                             min_stratum_cohort=floor)


def state(smp: StratifiedSampler | None = None, rounds: int = 0, seed: int = 0
          ) -> ParticipationState:
    """A fresh state (states are mutable: never share one between calls)."""
    smp = smp or sampler()
    out = smp.new_state(row()[1], target=Simulation(rng=seed))
    for r in range(rounds):
        try:
            smp.select(out, r)
        except SpatialDPError:  # the fleet ran dry or is below the floor: fewer rounds
            break
    return out


@functools.cache
def cells() -> tuple[Partition, np.ndarray]:
    """Seven H3 cells over the three boxes, each mapped to a stratum (derived strata)."""
    ring = sorted(h3.grid_disk(h3.latlng_to_cell(0.5, 1.5, 4), 1))
    return Partition.from_h3_cells(ring), np.arange(len(ring)) % 3


@functools.cache
def cell_strata() -> Strata:
    part, mapping = cells()
    return Strata(row()[0].partition, basis="density", cell_partition=part,
                  cell_stratum=mapping)


@functools.cache
def cell_fleet() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(client cell positions, client strata, client report regions) of 200 clients."""
    rng = np.random.default_rng(3)
    client_cells = rng.integers(0, 7, 200)
    return client_cells, cells()[1][client_cells], rng.integers(0, 3, 200)


@functools.cache
def cell_sampler() -> StratifiedSampler:
    return StratifiedSampler(cell_strata(), cohort=10, policy=policy(cap=1, rounds=3))


def row_coverage() -> Coverage:
    smp = sampler()
    return epoch_coverage(smp, state(smp, rounds=2))


@functools.cache
def cell_coverage() -> Coverage:
    smp = cell_sampler()
    st_ = smp.new_state(cell_fleet()[1], target=Simulation(rng=1))
    smp.select(st_, 0)
    client_cells, _, regions = cell_fleet()
    return epoch_coverage(smp, st_, client_cells=client_cells, report=boxes(),
                          client_regions=regions)


@functools.cache
def base_coverage() -> Coverage:
    return row_coverage()


@functools.cache
def rounds_table() -> pd.DataFrame:
    return simulate_rounds(row()[0], row()[1], cohort=20, rounds=3, participation_cap=1,
                           min_stratum_cohort=0, rng=0)


@functools.cache
def cohorts() -> list[RoundCohort]:
    smp = sampler()
    st_ = state(smp)
    return [smp.select(st_, r) for r in range(3)]


# --------------------------------------------------------------------------- invariants


def check_allocation(alloc: Any, cohort: Any) -> None:
    seats = alloc.seats.to_numpy()
    shares = alloc.shares.to_numpy()
    assert seats.dtype.kind == "i"
    assert int(seats.sum()) == alloc.cohort == int(cohort)
    assert (seats >= 0).all()
    assert np.isfinite(shares).all()
    assert (np.abs(seats - shares) < 1 + 1e-6).all(), (seats, shares)
    assert len(alloc.to_frame()) == len(seats)
    assert isinstance(repr(alloc), str)


def check_coverage(cov: Coverage, n_strata: int) -> None:
    assert len(cov.table) == n_strata
    assert 0.0 <= cov.share_strata_sampled <= 1.0
    if cov.share_cells_sampled is not None:
        assert 0.0 <= cov.share_cells_sampled <= 1.0, cov.share_cells_sampled
    assert set(cov.blind_spots) <= set(cov.table.index)
    assert isinstance(cov.summary(), str)
    text_ = cov.to_json(allow_nan=False)  # a model card's JSON: strict, no NaN
    assert json.loads(text_)["epoch"] == cov.epoch
    assert isinstance(cov.merges_table(), pd.DataFrame)
    assert len(cov.to_geodataframe()) == n_strata
    if cov.report_table is not None:
        assert len(cov.report_table) == cov.report_partition.n_regions  # type: ignore[union-attr]


def check_round(smp: StratifiedSampler, st_: ParticipationState) -> Callable[[Any], None]:
    def check(result: RoundCohort) -> None:
        c = result.counts
        assert np.unique(result.clients).size == result.clients.size, "a client drawn twice"
        assert result.clients.size == int(c["filled"].sum())
        assert int(c["wanted"].sum()) == smp.cohort
        assert (c["filled"] <= c["wanted"]).all()
        assert (c["shortfall"] == c["wanted"] - c["filled"]).all()
        assert (c["filled"] <= c["eligible_before"]).all()
        assert 0.0 <= result.score <= 1.0
        assert (st_.used <= smp.policy.participation_cap).all(), "a client over the cap"
        assert len(result.table) == len(result.groups)
        assert isinstance(result.alerts, list)
        assert set(result.notes) <= set(result.groups)
        assert isinstance(repr(result), str)

    return check


def check_state(smp: StratifiedSampler, n: int) -> Callable[[Any], None]:
    def check(st_: ParticipationState) -> None:
        assert st_.n_clients == n
        assert (st_.used == 0).all()
        assert st_.strata_version == smp.strata.version
        assert st_.charge["epsilon_per_client_epoch"] == pytest.approx(
            smp.policy.epsilon_per_client_epoch)

    return check


# --------------------------------------------------------------------------- strategies

populations = arg(st.sampled_from([ROW, {"u": 420, "r": 18}, pd.Series({"x": 5, "y": 0}),
                                   {"a": np.int64(7), "b": 3.0}]),
                  {}, {"a": 0}, {"a": -1}, {"a": "3"}, {"a": math.nan}, {"a": True},
                  {"a": 2**70}, {"a": 1e308}, {"a": 1.5}, {"a": 2**62, "b": 2**62},
                  pd.Series([1, 2], index=["a", "a"]), [1, 2], {"a": 3, None: 2})
modes = arg(st.sampled_from(list(MODES)), "nope", "SQRT")
sigmas = maybe(arg(st.sampled_from([{"a": 1.0, "b": 2.0, "c": 0.5}, {"u": 1, "r": 3},
                                    {"x": 1.0, "y": 1.0}, pd.Series({"a": 1.0, "b": 1.0})]),
                   {"a": -1.0}, {"a": math.nan}, {"a": "1"}, {"a": 1e308, "b": 1e308},
                   {"zz": 1.0}, {"a": 0.0, "b": 0.0, "c": 0.0}))


@st.composite
def allocate_calls(draw: st.DrawFn) -> Call:
    cohort = draw(arg(number(1, 5, integer=True), 61, 10**4))
    return call("allocate", allocate, draw(populations), cohort, mode=draw(modes),
                sigma=draw(sigmas), check=lambda a: check_allocation(a, cohort))


@st.composite
def allocation_table_calls(draw: st.DrawFn) -> Call:
    chosen = draw(arg(st.sampled_from([("proportional", "sqrt", "equal"), ("sqrt",),
                                       ("neyman", "sqrt")]), (), ["sqrt"], ("nope",)))

    def check(table: pd.DataFrame) -> None:
        for m in chosen:
            assert np.isfinite(table[(m, "share")].to_numpy(dtype=float)).all()

    return call("allocation_table", allocation_table, draw(populations),
                draw(arg(number(1, 5, integer=True), 61)), modes=chosen, sigma=draw(sigmas),
                check=check)


@st.composite
def largest_remainder_calls(draw: st.DrawFn) -> Call:
    shares = draw(st.one_of(
        st.lists(st.floats(0, 20), min_size=1, max_size=5).map(np.array),
        st.sampled_from([np.array([2.5, 2.5, 1.0]), np.array([1e308]), np.array([2.0**70]),
                         np.array([-1.0, 2.0]), np.array([0.0])]), junk))
    total = draw(st.one_of(st.just(None), arg(number(0, 60, integer=True), 2**70)))
    if total is None:  # the total the shares sum to (the valid case)
        try:
            with np.errstate(all="ignore"):
                total = round(float(np.sum(shares)))
        except (TypeError, ValueError, OverflowError, np.exceptions.ComplexWarning):
            total = 1

    def check(seats: np.ndarray) -> None:
        assert int(seats.sum()) == int(total)
        assert (seats >= 0).all()
        assert (np.abs(seats - np.asarray(shares, dtype=float)) < 1 + 1e-6).all()

    return call("largest_remainder", largest_remainder, shares, total, check=check)


@st.composite
def coverage_score_calls(draw: st.DrawFn) -> Call:
    valid = st.lists(st.integers(0, 50), min_size=3, max_size=3)
    bad = ([1e308, 1.0, 1.0], [0.5, 0.5, 0.5], [math.nan, 1, 1], [-1, 2, 3], [1, 2],
           [0, 0, 0], [2**70, 1, 1], ["a", "b", "c"])
    filled = draw(arg(valid, *bad))
    pops = draw(arg(valid, *bad))
    return call("coverage_score", coverage_score, filled, pops,
                check=lambda s: (isinstance(s, float) and 0.0 <= s <= 1.0) or _fail(s))


def _fail(value: Any) -> None:
    raise AssertionError(f"out of range: {value!r}")


@st.composite
def policy_calls(draw: st.DrawFn) -> Call:
    def check(p: ParticipationPolicy) -> None:
        assert 0 < p.epsilon_per_client_epoch < math.inf
        assert 1 <= p.participation_cap <= p.rounds_per_epoch
        assert isinstance(p.describe(), str)

    return call("ParticipationPolicy", ParticipationPolicy,
                participation_cap=draw(arg(number(1, 4, integer=True), 65_536, 2.5)),
                epsilon_per_round=draw(arg(number(0.01, 3))),
                rounds_per_epoch=draw(arg(number(1, 10, integer=True))), check=check)


@st.composite
def policy_structure_calls(draw: st.DrawFn) -> Call:
    def check(s: Any) -> None:
        assert (s.parts, s.max_parts_per_client, s.multiplier) == (5, 2, 2)

    return call("ParticipationPolicy.structure", policy().structure, draw(text()), check=check)


@st.composite
def strata_calls(draw: st.DrawFn) -> Call:
    part, mapping = cells()
    derived = draw(st.booleans())
    cell_part = draw(arg(st.just(part))) if derived else draw(maybe(arg(st.just(part))))
    stratum = draw(arg(st.sampled_from([mapping, mapping.astype(np.int32)]),
                       mapping[:3], mapping + 5, -mapping - 1, mapping.astype(float),
                       mapping.astype(object))) if derived else None
    return call("Strata", Strata, draw(arg(st.sampled_from([boxes(), row()[0].partition]))),
                basis=draw(arg(st.sampled_from(["administrative", "h3", "density"]),
                               "model_error", "loss", "ADMINISTRATIVE")),
                cell_partition=cell_part, cell_stratum=stratum,
                order=draw(maybe(arg(st.sampled_from([["c", "b", "a"], ["a", "b", "c"]]),
                                     ["a", "a", "b"], ["a", "b"], ("a", "b", "c")))),
                check=lambda s: None if len(s.order) == s.n_strata else _fail(s))


coords = arg(st.lists(st.floats(-1, 4), min_size=1, max_size=4), [math.nan], [1e308],
             ["a"], [[0.5, 0.5]], [])


@st.composite
def strata_assign_calls(draw: st.DrawFn) -> Call:
    strata = draw(st.sampled_from([row()[0], cell_strata()]))
    lon, lat = draw(coords), draw(coords)

    def check(out: np.ndarray) -> None:
        assert out.dtype.kind == "i"
        assert ((out >= -1) & (out < strata.n_strata)).all()

    return call("Strata.assign", strata.assign, lon=lon, lat=lat, check=check)


@st.composite
def strata_positions_calls(draw: st.DrawFn) -> Call:
    strata = row()[0]
    ids = draw(arg(st.lists(st.sampled_from(["a", "b", "c"]), max_size=5),
                   ["zz"], [None], [math.nan], ["a", None], [1], np.array(["a"], dtype=object),
                   pd.Series(["a", "b"]), [["a"], ["b", "c"]]))

    def check(out: np.ndarray) -> None:
        assert ((out >= 0) & (out < strata.n_strata)).all()
        assert list(strata.ids[out]) == [str(x) for x in np.asarray(ids, dtype=object).ravel()]

    return call("Strata.positions", strata.positions, ids, check=check)


@st.composite
def strata_population_calls(draw: st.DrawFn) -> Call:
    strata = row()[0]
    positions = draw(arg(st.lists(st.integers(0, 2), max_size=6).map(np.array),
                         np.array([-1, 0]), np.array([3]), np.array([0.0, 1.0]),
                         np.array([[0, 1]]), [0, 1, 2], [[0], [1, 2]], np.array([True])))

    def check(out: pd.Series) -> None:
        assert int(out.sum()) == np.asarray(positions).size
        assert len(out) == strata.n_strata

    return call("Strata.population", strata.population, positions, check=check)


@st.composite
def strata_crosswalk_calls(draw: st.DrawFn) -> Call:
    strata = draw(st.sampled_from([row()[0], cell_strata()]))
    weights = draw(maybe(arg(st.just(np.ones(7)), np.ones(3), [math.nan] * 7, ["a"] * 7)))

    def check(table: pd.DataFrame) -> None:
        assert {"stratum", "region_id", "weight"} <= set(table.columns)
        assert np.isfinite(table["weight"].to_numpy(dtype=float)).all()

    return call("Strata.crosswalk", strata.crosswalk,
                draw(arg(st.sampled_from([boxes(), other_boxes()]))), weights=weights,
                check=check)


@st.composite
def sampler_calls(draw: st.DrawFn) -> Call:
    def check(smp: StratifiedSampler) -> None:
        assert smp.cohort >= 1
        assert isinstance(repr(smp), str)

    return call("StratifiedSampler", StratifiedSampler,
                draw(arg(st.sampled_from([row()[0], cell_strata()]), boxes())),
                cohort=draw(arg(number(1, 40, integer=True))),
                policy=draw(arg(st.just(policy()), {"participation_cap": 1})),
                mode=draw(modes), sigma=draw(sigmas),
                min_stratum_cohort=draw(arg(number(0, 10, integer=True))), check=check)


def samplers() -> st.SearchStrategy[StratifiedSampler]:
    return st.sampled_from([("sqrt", 5, 20), ("equal", 5, 20), ("proportional", 0, 20),
                            ("neyman", 5, 20), ("sqrt", 50, 20), ("sqrt", 1000, 20),
                            ("equal", 0, 300)]).map(lambda a: sampler(*a))


client_strata_values = arg(
    st.sampled_from(["positions", "ids", "int32"]).map(
        lambda k: {"positions": row()[1], "ids": row()[0].ids[row()[1]].to_numpy(),
                   "int32": row()[1].astype(np.int32)}[k]),
    np.array([-1, 0, 1]), np.array([0, 3]), np.array(["a", "zz"]), np.array([0.0, 1.0]),
    np.array([], dtype=np.int64), np.array([[0, 1]]), np.array([True, False]),
    ["a", None], [["a"], ["b", "c"]])


def other_states() -> tuple[ParticipationState, ParticipationState]:
    """A state of other strata (PartitionMismatch) and one of another policy (refused)."""
    other = StratifiedSampler(row()[0], cohort=20, policy=policy(cap=1))
    return (cell_sampler().new_state(cell_fleet()[1], target=Simulation(rng=0)),
            other.new_state(row()[1], target=Simulation(rng=0)))


@st.composite
def new_state_calls(draw: st.DrawFn, target_strategy: Any = None) -> Call:
    smp = draw(samplers())
    values = draw(client_strata_values)
    target = draw(target_strategy if target_strategy is not None else targets())
    return call("StratifiedSampler.new_state", smp.new_state, values, target=target,
                epoch=draw(arg(st.sampled_from([0, 1, 2]), 2**70)),
                check=check_state(smp, int(np.asarray(values, dtype=object).size)))


@st.composite
def next_epoch_calls(draw: st.DrawFn, target_strategy: Any = None) -> Call:
    smp = draw(samplers())
    previous = draw(arg(st.builds(lambda: state(smp, rounds=1)), *other_states()))
    target = draw(target_strategy if target_strategy is not None else targets())
    return call("StratifiedSampler.next_epoch", smp.next_epoch, previous, target=target,
                check=check_state(smp, row()[1].size))


@st.composite
def select_calls(draw: st.DrawFn) -> Call:
    smp = draw(samplers())
    done = draw(st.integers(0, 5))
    st_ = state(smp, rounds=done, seed=draw(st.integers(0, 3)))
    given_state = draw(arg(st.just(st_), *other_states()))
    return call("StratifiedSampler.select", smp.select, given_state,
                draw(arg(number(0, 6, integer=True), 2**70)), check=check_round(smp, st_))


@st.composite
def group_names_calls(draw: st.DrawFn) -> Call:
    smp = draw(samplers())

    def check(names: pd.Series) -> None:
        assert len(names) == smp.strata.n_strata
        assert names.map(lambda g: isinstance(g, str) and len(g) > 0).all()

    return call("StratifiedSampler.group_names", smp.group_names,
                draw(arg(st.builds(lambda: state(smp, rounds=1)), *other_states())),
                check=check)


@st.composite
def eligible_calls(draw: st.DrawFn) -> Call:
    st_ = state(rounds=draw(st.integers(0, 2)))
    n = draw(arg(number(0, 5, integer=True)))

    def check(out: np.ndarray) -> None:
        assert int(out.sum()) == int((st_.used < st_.policy.participation_cap).sum())

    return call("ParticipationState.eligible_per_stratum", st_.eligible_per_stratum, n,
                check=check)


@functools.cache
def state_files() -> dict[str, str]:
    """A saved state and damaged or foreign files next to it."""
    folder = Path(TMP) / "states"
    folder.mkdir(exist_ok=True)
    good = folder / "good.npz"
    state(rounds=2).save(good)
    data = good.read_bytes()
    (folder / "truncated.npz").write_bytes(data[: len(data) // 2])
    edited = bytearray(data)
    edited[len(edited) // 3] ^= 0xFF
    (folder / "edited.npz").write_bytes(bytes(edited))
    (folder / "text.npz").write_text("not a state")
    np.savez(folder / "foreign.npz", meta=np.arange(3))
    boxes().to_file(str(folder / "partition.parquet"))
    return {"good": str(good), **{k: str(folder / f"{k}.npz") for k in
                                  ("truncated", "edited", "text", "foreign")},
            "partition": str(folder / "partition.parquet"), "folder": str(folder),
            "missing": str(folder / "missing.npz")}


@st.composite
def load_calls(draw: st.DrawFn) -> Call:
    files = state_files()
    path = draw(arg(st.sampled_from([files["good"], Path(files["good"])]),
                    *(files[k] for k in ("truncated", "edited", "text", "foreign",
                                         "partition", "folder", "missing"))))
    version = draw(arg(st.just(row()[0].version), "other", cell_strata().version))

    def check(loaded: ParticipationState) -> None:
        assert loaded.strata_version == row()[0].version
        assert loaded.rounds == [0, 1]
        assert int(loaded.used.sum()) == int(loaded.selected.sum())

    return call("ParticipationState.load", ParticipationState.load, path,
                strata_version=version, check=check)


@st.composite
def save_calls(draw: st.DrawFn) -> Call:
    st_ = state(rounds=1)
    path = draw(arg(st.sampled_from([os.path.join(TMP, "s.npz"), Path(TMP) / "t.npz"]),
                    os.path.join(TMP, "missing", "s.npz"), TMP, "", "  "))

    def check(out: Path) -> None:
        back = ParticipationState.load(out, strata_version=st_.strata_version)
        assert np.array_equal(back.used, st_.used)

    return call("ParticipationState.save", st_.save, path, check=check)


@st.composite
def epoch_coverage_calls(draw: st.DrawFn) -> Call:
    derived = draw(st.booleans())
    if derived:
        smp = cell_sampler()
        st_ = smp.new_state(cell_fleet()[1], target=Simulation(rng=1))
        smp.select(st_, 0)
        client_cells, _, regions = cell_fleet()
        n = client_cells.size
    else:
        smp = draw(samplers())
        st_ = state(smp, rounds=1)
        n = st_.n_clients
        rng = np.random.default_rng(0)
        client_cells, regions = rng.integers(0, 7, n), rng.integers(0, 3, n)
    bad_cells = (np.full(n, -1), np.full(n, 9), client_cells.astype(float),
                 client_cells[:3], ["a"] * n)
    cells_given = draw(maybe(arg(st.just(client_cells), *bad_cells)))
    with_report = draw(st.booleans())
    report = draw(arg(st.just(boxes()), other_boxes())) if with_report else None
    regions_given = draw(arg(st.just(regions), np.full(n, 7), regions[:2],
                             regions.astype(float))) if with_report else draw(
        maybe(arg(st.just(regions))))
    return call("epoch_coverage", epoch_coverage,
                draw(arg(st.just(smp), sampler("equal", 5, 20))),
                draw(arg(st.just(st_), *other_states())),
                client_cells=cells_given,
                n_cells=draw(maybe(arg(number(7, 10, integer=True), 3))),
                report=report, client_regions=regions_given,
                score_threshold=draw(arg(number(0, 1))),
                check=lambda cov: check_coverage(cov, smp.strata.n_strata))


@st.composite
def release_epoch_coverage_calls(draw: st.DrawFn) -> Call:
    smp = draw(samplers())
    st_ = state(smp, rounds=1)
    n = st_.n_clients
    rng = np.random.default_rng(0)
    regions = rng.integers(0, 3, n)
    relation = draw(arg(st.sampled_from(["add_remove", "replace"]), "both"))

    def check(out: Any) -> None:
        frame = out.regions.frame
        assert len(frame) == boxes().n_regions
        assert out.neighbours == relation
        assert (frame.covered == (frame.clients > frame.error_bar)).all()
        assert out.blind_regions == [str(r) for r in frame.index[~frame.covered]]
        out.summary()

    return call("release_epoch_coverage", release_epoch_coverage,
                draw(arg(st.just(st_), *other_states())),
                report=draw(arg(st.just(boxes()), other_boxes())),
                client_regions=draw(arg(st.just(regions), np.full(n, 7), regions[:2],
                                        regions.astype(float))),
                epsilon=draw(arg(number(0.01, 5), 0.0, -1.0)),
                target=draw(arg(st.just(Simulation(rng=2)), None)),
                neighbours=relation, check=check)


coverages = st.one_of(st.builds(row_coverage), st.just(cell_coverage()))


@st.composite
def to_json_calls(draw: st.DrawFn) -> Call:
    cov = draw(coverages)
    # The keywords are json.dumps's own (they pass through): valid values only.
    kwargs = {"indent": draw(maybe(st.integers(0, 3))), "sort_keys": draw(st.booleans())}
    return call("Coverage.to_json", cov.to_json, **kwargs,
                check=lambda t: None if json.loads(t)["epoch"] == cov.epoch else _fail(t))


@st.composite
def density_cells_calls(draw: st.DrawFn) -> Call:
    def check(out: tuple[Partition, pd.DataFrame]) -> None:
        part, table = out
        assert len(table) == part.n_regions
        assert (table.population >= 0).all()

    return call("density_cells", density_cells, draw(arg(number(0, 2, integer=True), 6, 16)),
                draw(arg(st.just((1_000_000, 200_000, 50_000, 1)), (1, 2, 3, 4),
                         (4, 3, 2, 0), [4, 3, 2, 1], (4.0, 3.0, 2.0, 1.0), (True, 3, 2, 1))),
                check=check)


@st.composite
def density_strata_calls(draw: st.DrawFn) -> Call:
    def check(s: Strata) -> None:
        assert s.basis == "density"
        assert s.cell_partition is not None

    return call("density_strata", density_strata,
                draw(arg(st.sampled_from([2, 3]), 6, 7, 16, 2.5)),
                draw(arg(st.just((1_000_000, 200_000, 50_000, 1)), (1, 2, 3, 4))),
                check=check)


@st.composite
def merge_small_calls(draw: st.DrawFn) -> Call:
    adj = sparse.csr_array(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=bool))
    ids = pd.Index(["a", "b", "c"])

    def check(out: tuple[np.ndarray, list[Any]]) -> None:
        labels, merges = out
        assert labels.shape == (3,)
        assert all(isinstance(m.to_dict(), dict) for m in merges)
        json.dumps([m.to_dict() for m in merges])

    return call(
        "merge_small_groups", merge_small_groups,
        draw(arg(st.just(adj), adj.toarray(), sparse.csr_array((2, 2)))),
        draw(arg(st.lists(st.integers(0, 60), min_size=3, max_size=3).map(np.array),
                 np.array([1.0, math.nan, 3.0]), np.array([1.0, math.inf, 3.0]),
                 np.array([1, -1, 3]), np.array(["a", "b", "c"]), np.array([1.5, 2.5, 3.0]),
                 np.array([[1, 2, 3]]), np.array([1e308, 1e308, 1.0]))),
        draw(arg(number(0, 60, integer=True))),
        draw(arg(st.sampled_from([ids, ["a", "b", "c"]]), 5, None, ["a"], ids[:2])),
        groups=draw(maybe(arg(st.just(np.array([0, 0, 2])), np.array([0.0, 1.0, 2.0]),
                              np.array([0, 1]), np.array([9, -4, 9])))),
        centroids=draw(maybe(arg(st.just(np.array([[0.5, 0.5], [1.5, 0.5], [2.5, 0.5]])),
                                 np.zeros((2, 2)), np.zeros((3, 3)),
                                 np.full((3, 2), math.nan), "abc"))),
        what=draw(arg(text())), round_index=draw(maybe(arg(number(0, 5, integer=True)))),
        check=check)


@st.composite
def merge_suppressed_calls(draw: st.DrawFn) -> Call:
    part = boxes()
    history = draw(arg(st.lists(st.sets(st.sampled_from(["a", "b", "c"])), max_size=4),
                       [{"zz"}], ["a"], "a", [None], [[1.0]], [{math.nan}], [["a", "a"]]))
    counts = draw(maybe(arg(st.just({"a": 50, "b": 3, "c": 0}), {"zz": 1}, {"a": -1},
                            {"a": 2**70}, {"a": "3"}, {"a": math.nan}, [("a", 1)])))

    def check(out: tuple[Partition, pd.DataFrame]) -> None:
        merged, membership = out
        assert len(membership) == part.n_regions
        assert merged.n_regions <= part.n_regions

    return call("merge_suppressed_regions", merge_suppressed_regions,
                draw(arg(st.just(part))), history, draw(arg(number(1, 3, integer=True))),
                counts=counts, check=check)


@st.composite
def plot_allocation_calls(draw: st.DrawFn) -> Call:
    import matplotlib.pyplot as plt

    return call("plot_allocation", plot_allocation, draw(populations),
                draw(arg(number(1, 5, integer=True), 41)),
                modes=draw(arg(st.sampled_from([("proportional", "sqrt", "equal"),
                                                ("sqrt",)]), ("nope",), ())),
                sigma=draw(sigmas),
                order=draw(maybe(arg(st.sampled_from([["c", "b", "a"], ["r", "u"]]),
                                     ["a"], "abc"))),
                ax=draw(st.one_of(st.none(), st.builds(lambda: plt.subplots()[1]), junk)))


@st.composite
def plot_coverage_map_calls(draw: st.DrawFn) -> Call:
    import matplotlib.pyplot as plt

    cov = draw(arg(coverages))
    return call("plot_coverage_map", plot_coverage_map, cov,
                column=draw(arg(st.sampled_from(["clients_sampled", "selections"]), "nope")),
                level=draw(arg(st.sampled_from(["strata", "report", "cells"]))),
                cells=draw(maybe(arg(st.just(cells()[0]), boxes()))),
                ax=draw(st.one_of(st.none(), st.builds(lambda: plt.subplots()[1]), junk)),
                cmap=draw(arg(st.sampled_from(["viridis", "cividis"]), "nope", "")),
                projection=draw(arg(st.sampled_from(["auto", None, "EPSG:3857"]),
                                    "EPSG:99999", 3.5)))


@st.composite
def plot_coverage_maps_calls(draw: st.DrawFn) -> Call:
    cov = draw(coverages)
    panel = st.one_of(st.just(cov), st.tuples(st.just(cov), arg(
        st.sampled_from(["strata", "report", "cells"]))))
    return call("plot_coverage_maps", plot_coverage_maps,
                draw(arg(st.lists(panel, min_size=1, max_size=2), [], cov, [cov, 3], "ab")),
                cells=draw(maybe(arg(st.just(cells()[0]), boxes()))),
                titles=draw(maybe(arg(st.just(["a", "b"]), "ab", 3, ["a"]))),
                figsize=draw(maybe(arg(st.just((8.0, 4.0)), (0.0, 1.0), "big", (1.0,)))),
                projection=draw(arg(st.sampled_from(["auto", None]), "EPSG:99999")))


@st.composite
def explore_coverage_calls(draw: st.DrawFn) -> Call:
    return call("explore_coverage", explore_coverage, draw(arg(coverages)))


@st.composite
def plot_staircase_calls(draw: st.DrawFn) -> Call:
    import matplotlib.pyplot as plt

    return call("plot_staircase", plot_staircase, draw(arg(mutated(rounds_table()))),
                draw(arg(st.sampled_from(["a", "b", "c"]), "zz", np.array([1.0, 2.0]))),
                ax=draw(st.one_of(st.none(), st.builds(lambda: plt.subplots()[1]), junk)))


@st.composite
def composition_calls(draw: st.DrawFn) -> Call:
    items = draw(arg(st.just(cohorts()), [], [cohorts()[0], "x"], (cohorts()[0],), "abc",
                     {"a": 1}))
    rounding = draw(arg(number(1, 20, integer=True), 10**30))

    def check(frame: pd.DataFrame) -> None:
        if len(frame):
            assert all(int(c) % int(rounding) == 0 for c in frame.clients)

    return call("published_composition", published_composition, items,
                current_round=draw(arg(number(0, 5, integer=True))),
                delay_rounds=draw(arg(number(0, 3, integer=True))), rounding=rounding,
                check=check)


@st.composite
def row_strata_calls(draw: st.DrawFn) -> Call:
    pops = draw(arg(st.sampled_from([ROW, {"x": 1}, {"a": np.int64(2), "b": 0}]),
                    {}, {"": 1}, {"a": -1}, {"a": "2"}, {1: 1, "1": 2}, {"a": 1.5},
                    {"a": 10**12}, [("a", 1)]))

    def check(out: tuple[Strata, np.ndarray]) -> None:
        strata, fleet = out
        assert fleet.size == sum(int(v) for v in pops.values())
        assert ((fleet >= 0) & (fleet < strata.n_strata)).all()

    return call("row_strata", row_strata, pops, check=check)


@st.composite
def simulate_rounds_calls(draw: st.DrawFn) -> Call:
    strata, fleet = row()
    cohort = draw(arg(number(1, 30, integer=True)))

    def check(table: pd.DataFrame) -> None:
        assert (table.filled <= table.wanted).all()
        assert table.score.between(0, 1).all()
        assert (table.groupby(["mode", "round_index"]).wanted.sum() == int(cohort)).all()

    return call("simulate_rounds", simulate_rounds, draw(arg(st.just(strata), boxes())),
                draw(arg(st.just(fleet), np.array(["a", "zz"]), np.array([-1]))),
                cohort=cohort, rounds=draw(arg(number(1, 4, integer=True))),
                participation_cap=draw(arg(number(1, 2, integer=True))),
                modes=draw(arg(st.sampled_from([("sqrt",), ("equal", "proportional")]),
                               ("neyman",), ["sqrt"], ("nope",))),
                sigma=draw(sigmas), min_stratum_cohort=draw(arg(number(0, 8, integer=True))),
                epsilon_per_round=draw(arg(number(0.1, 2))),
                rng=draw(arg(st.integers(0, 9))), check=check)


# --------------------------------------------------------------------------- registry

#: Public callable -> (strategy of calls, number of examples).
FUZZ: dict[str, tuple[Callable[[], st.SearchStrategy[Call]], int]] = {
    "allocate": (allocate_calls, 40),
    "allocation_table": (allocation_table_calls, 20),
    "largest_remainder": (largest_remainder_calls, 40),
    "coverage_score": (coverage_score_calls, 40),
    "ParticipationPolicy": (policy_calls, 40),
    "ParticipationPolicy.structure": (policy_structure_calls, 15),
    "ParticipationState.eligible_per_stratum": (eligible_calls, 20),
    "ParticipationState.save": (save_calls, 15),
    "ParticipationState.load": (load_calls, 25),
    "Strata": (strata_calls, 30),
    "Strata.assign": (strata_assign_calls, 20),
    "Strata.positions": (strata_positions_calls, 25),
    "Strata.population": (strata_population_calls, 25),
    "Strata.crosswalk": (strata_crosswalk_calls, 12),
    "StratifiedSampler": (sampler_calls, 30),
    "StratifiedSampler.new_state": (new_state_calls, 30),
    "StratifiedSampler.next_epoch": (next_epoch_calls, 20),
    "StratifiedSampler.select": (select_calls, 40),
    "StratifiedSampler.group_names": (group_names_calls, 10),
    "epoch_coverage": (epoch_coverage_calls, 30),
    "release_epoch_coverage": (release_epoch_coverage_calls, 20),
    "Coverage.to_json": (to_json_calls, 8),
    "density_cells": (density_cells_calls, 8),
    "density_strata": (density_strata_calls, 8),
    "merge_small_groups": (merge_small_calls, 40),
    "merge_suppressed_regions": (merge_suppressed_calls, 30),
    "plot_allocation": (plot_allocation_calls, 15),
    "plot_coverage_map": (plot_coverage_map_calls, 8),
    "plot_coverage_maps": (plot_coverage_maps_calls, 8),
    "explore_coverage": (explore_coverage_calls, 3),
    "plot_staircase": (plot_staircase_calls, 20),
    "published_composition": (composition_calls, 25),
    "row_strata": (row_strata_calls, 20),
    "simulate_rounds": (simulate_rounds_calls, 20),
}


# --------------------------------------------------------------------------- tests


def test_every_public_callable_is_fuzzed() -> None:
    check_census(public_callables(PACKAGE), FUZZ, SKIP)


@pytest.mark.slow  # a long fuzz run (hypothesis, every public callable)
@pytest.mark.parametrize("name", sorted(FUZZ))
def test_only_spatialdp_errors(name: str) -> None:
    fuzz_only_spatialdp_errors(*FUZZ[name])


# --------------------------------------------------------------------------- the ledger

EPOCHS = (0, 1, 2)


def fuzz_targets() -> st.SearchStrategy[ReleaseTarget]:
    """A ReleaseTarget on a fresh in-memory ledger; small budgets make BudgetExceeded likely."""
    return ledger_targets(budgets=(0.05, 0.5, 5.0), accountings=("pure", "pure", "zcdp"),
                          items=(None, None, "training", "evaluation.global", "marketing"),
                          epochs=EPOCHS)


EPOCH_STARTS: dict[str, Callable[..., st.SearchStrategy[Call]]] = {
    "StratifiedSampler.new_state": new_state_calls,
    "StratifiedSampler.next_epoch": next_epoch_calls,
}


@pytest.mark.parametrize("name", sorted(EPOCH_STARTS))
def test_refused_epochs_leave_the_ledger_untouched(name: str) -> None:
    """A refused epoch start charges nothing; a started one charges cap x epsilon once."""

    @fuzz_settings(30)
    @given(mixed(EPOCH_STARTS[name](fuzz_targets())))
    def fuzz(one: Call) -> None:
        target = one.kwargs["target"]
        ledger = target.ledger
        result, refusal = run(one)
        if refusal is not None:
            assert all(ledger.spent(e) == 0 for e in EPOCHS), "a refusal was charged"
            assert len(ledger.audit()) == 0, "a refusal left an audit row"
            return
        assert isinstance(result, ParticipationState)
        pol = one.fn.__self__.policy
        eps = pol.epsilon_per_round
        amount = (pol.participation_cap * eps if ledger.accounting == "pure"
                  else pol.participation_cap * eps**2 / 2)
        assert len(ledger.audit()) == 1, "an epoch start must be one charge"
        assert ledger.spent(target.epoch) == pytest.approx(amount, rel=1e-9)
        assert result.epoch == target.epoch

    fuzz()


# --------------------------------------------------------------------------- regressions


def teardown_module() -> None:
    shutil.rmtree(TMP, ignore_errors=True)


# --------------------------------------------------------------------------- regressions
# One plain example per defect this suite found in spatialdp/sampling and fixed: each was
# a bare TypeError/ValueError/OverflowError/IsADirectoryError/MemoryError from numpy,
# pandas, matplotlib or the OS, a RuntimeWarning, or a call running for minutes.


def _adjacency() -> sparse.csr_array:
    return sparse.csr_array(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=bool))


@pytest.mark.parametrize(("thunk", "match"), [
    # ParticipationState.eligible_per_stratum: TypeError / OverflowError from np.bincount
    (lambda: state().eligible_per_stratum(np.float64(0.5)), "n_strata=.* whole number"),
    (lambda: state().eligible_per_stratum(2**70), "n_strata=.* above the limit"),
    (lambda: state().eligible_per_stratum(2), "n_strata=2 is at most the largest stratum"),
    # ParticipationState.save onto a folder: IsADirectoryError from os.replace
    (lambda: state().save(TMP), "path=.* is a folder"),
    # allocate / largest_remainder: OverflowError converting to int64, invalid casts
    (lambda: allocate({"a": 2**70}, 1), r"populations\['a'\]=.* above the limit"),
    (lambda: allocate({"a": 2**62, "b": 2**62}, 1), "above the limit"),
    (lambda: largest_remainder(np.array([1e308]), int(1e308)), "total=.* above the limit"),
    # coverage_score: RuntimeWarnings (0/0, invalid cast) for fractional or huge counts
    (lambda: coverage_score([1, 1, 1], [0.5, 0.5, 0.5]), "populations=.* whole counts"),
    (lambda: coverage_score([1e308, 1, 1], [3, 3, 3]), "filled=.* whole counts"),
    # merge_small_groups: TypeError (len(None)), ValueError (int(nan)), TypeError
    # (indexing a string), and a round index that the Merge record could not serialise
    (lambda: merge_small_groups(_adjacency(), np.array([0, 0, 0]), 0, None),
     "one id per region"),
    (lambda: merge_small_groups(_adjacency(), np.array([1.0, math.nan, 3.0]), 5,
                                pd.Index(list("abc"))), "sizes has 1 NaN"),
    (lambda: merge_small_groups(_adjacency(), np.array([1, 9, 9]), 5, pd.Index(list("abc")),
                                centroids="abc"), "centroids"),
    (lambda: merge_small_groups(_adjacency(), np.array([1, 9, 9]), 5, pd.Index(list("abc")),
                                centroids=np.zeros((2, 2))), r"(?s)centroids=.* shape \(2, 2\)"),
    (lambda: merge_small_groups(_adjacency(), np.array([1, 9, 9]), 5, pd.Index(list("abc")),
                                round_index=0.5), "round_index=0.5"),
    # plot_coverage_map: ValueError from matplotlib for an unknown colour map
    (lambda: plot_coverage_map(base_coverage(), cmap="nope"), "cmap='nope' is not a matplotlib"),
    # plot_staircase: AttributeError (missing column), ValueError (array group, repeated
    # column) from pandas
    (lambda: plot_staircase(rounds_table().drop(columns="filled"), "a"),
     "not a simulate_rounds table"),
    (lambda: plot_staircase(rounds_table(), np.array([1.0, 2.0])), "group=.* not a string"),
    (lambda: plot_staircase(pd.concat([rounds_table(), rounds_table()[["mode"]]], axis=1), "a"),
     "not a simulate_rounds table"),
    # epoch_coverage: ZeroDivisionError (n_cells=0, no client located), ValueError from
    # pandas (region positions beyond the report partition)
    (lambda: epoch_coverage(sampler(), state(rounds=1), client_cells=np.zeros(343, int),
                            n_cells=0), "n_cells=0"),
    (lambda: epoch_coverage(sampler(), state(rounds=1), client_cells=np.full(343, -1)),
     "(?s)client_cells=.* locates no client"),
    (lambda: epoch_coverage(sampler(), state(rounds=1), client_cells=np.full(343, 9),
                            n_cells=7), "(?s)client_cells=.* outside 0..6"),
    (lambda: epoch_coverage(sampler(), state(rounds=1), report=boxes(),
                            client_regions=np.full(343, 7)), "(?s)client_regions=.* beyond"),
    # ragged nests: ValueError from np.asarray
    (lambda: row()[0].population([[0], [1, 2]]), "stratum_positions=.* whole-number"),
    (lambda: sampler().new_state([["a"], ["b", "c"]], target=Simulation(rng=0)),
     "client_strata=.* 1-d array"),
    # group_names(None): AttributeError
    (lambda: sampler().group_names(None), "state=None is a NoneType"),
    # row_strata of a trillion clients: MemoryError (3.6 TiB of names)
    (lambda: row_strata({"a": 10**12}), r"populations\['a'\]=.* above the limit"),
    # density strata at resolution 6+: 40 s (6) to minutes (7) of dissolving hexagons
    (lambda: density_strata(6), "resolution=6 is above the limit <= 5"),
    (lambda: density_cells(7), "resolution=7 is above the limit <= 5"),
])
def test_fixed_defects_now_refuse_cleanly(thunk: Callable[[], Any], match: str) -> None:
    import matplotlib.pyplot as plt

    try:
        with pytest.raises(InvalidInput, match=match):
            thunk()
    finally:
        plt.close("all")


def test_fixed_defects_keep_valid_inputs() -> None:
    """The new checks refuse nothing the old code handled right."""
    assert state().eligible_per_stratum(3).tolist() == [300, 40, 3]
    assert merge_small_groups(_adjacency(), np.array([50, 40, 3]), 5, pd.Index(list("abc")),
                              round_index=np.int64(2))[1][0].round_index == 2
    _, fleet = row_strata({"a": 2, "b": 0, "c": 1})
    assert fleet.tolist() == [0, 0, 2]
    assert coverage_score(np.array([27.0, 22, 15, 10, 6]), [420, 260, 120, 55, 18]) == 1.0
