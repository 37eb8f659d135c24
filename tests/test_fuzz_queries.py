"""Every public callable of :mod:`spatialdp.queries`, fuzzed (the contract of ``test_fuzz.py``).

The registry :data:`FUZZ` maps each public callable of ``spatialdp.queries``
(its ``__all__`` and the public methods of its classes) to a hypothesis strategy
of calls mixing valid arguments with junk. Each call must return (and its
result pass its invariants) or raise a :class:`~spatialdp.exceptions.SpatialDPError`,
within the time limit, warning only with spatialdp's own warnings
(:func:`tests.test_fuzz_support.run`).

:func:`test_every_public_callable_is_fuzzed` fails when a public callable has
neither an entry nor a reasoned place in :data:`SKIP`.
:func:`test_refused_releases_leave_the_ledger_untouched` holds the three
releases (``release_flat``, ``release_hierarchical``, ``answer_fresh``) to "a
refusal charges nothing; a release charges its epsilon once".

Defects found in ``spatialdp/queries`` (its author's files) are not fixed here:
each failing example is pinned with ``xfail(strict=True)`` in :data:`OPEN`, so
the suite turns red when the owner fixes it (then delete the entry).

Hunt for new defects with ``SPATIALDP_FUZZ_RANDOM=1 SPATIALDP_FUZZ_SCALE=10``.
"""

from __future__ import annotations

import functools
import math
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

import geopandas as gpd
import h3
import numpy as np
import pandas as pd
import pytest
import shapely
from hypothesis import given
from hypothesis import strategies as st

from spatialdp.geo import CellIncidence, Partition
from spatialdp.privacy import ReleaseTarget, Simulation
from spatialdp.queries import (
    NoisyGrid,
    QueryCorpus,
    TruthGrid,
    answer_fresh,
    answer_polygons,
    flat_or_hierarchical,
    grid_version,
    level_epsilons,
    measure_query_error,
    query_corpus,
    recommend_resolution,
    release_flat,
    release_hierarchical,
    require_publishable,
    truth_grid,
)
from tests.test_fuzz_support import (
    Call,
    Open,
    arg,
    check_census,
    flag,
    fuzz_only_spatialdp_errors,
    fuzz_settings,
    ledger_targets,
    mixed,
    number,
    public_callables,
    run,
    strict,
    targets,
    working_directory,
)

PACKAGE = "spatialdp.queries"

#: Public names that are not fuzzed, each with the reason.
SKIP: dict[str, str] = {
    # Result records: built by the library (truth_grid, release_*, query_corpus) and
    # returned; their methods are fuzzed or called in the checks on real instances.
    "NoisyGrid": "result record (built by release_flat / release_hierarchical)",
    "QueryCorpus": "result record (built by query_corpus)",
    "TruthGrid": "result record (built by truth_grid; its __post_init__ is exercised there)",
    "NoisyGrid.cell_std": "no argument: called on every grid the fuzz builds (check)",
    "NoisyGrid.summary": "no argument: checked on real grids in tests/test_results.py",
}


def call(label: str, fn: Callable[..., Any], /, *args: Any,
         check: Callable[[Any], None] | None = None, **kwargs: Any) -> Call:
    return Call(label, fn, args, kwargs, None if check is None else strict(check))


TMP = tempfile.mkdtemp(prefix="spatialdp-fuzz-queries-")


@pytest.fixture(autouse=True, scope="module")
def _in_a_scratch_folder() -> Any:
    with working_directory(TMP):
        yield


def teardown_module() -> None:
    shutil.rmtree(TMP, ignore_errors=True)


# --------------------------------------------------------------------------- open defects


# --------------------------------------------------------------------------- valid inputs

AREA = shapely.box(-100, 40, -99, 41)


@functools.cache
def part() -> Partition:
    """35 H3 cells of resolution 5 covering a 1-degree box."""
    return Partition.from_h3_cover(gpd.GeoDataFrame(geometry=[AREA], crs=4326), 5)


@functools.cache
def other_part() -> Partition:
    return Partition.from_h3_cover(
        gpd.GeoDataFrame(geometry=[shapely.box(-90, 40, -89, 41)], crs=4326), 5)


@functools.cache
def points() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (rng.uniform(-100, -99, 300), rng.uniform(40, 41, 300), rng.integers(0, 150, 300))


@functools.cache
def truth(k: int = 2) -> TruthGrid:
    lon, lat, ids = points()
    return truth_grid(part(), lon=lon, lat=lat, device_ids=ids, max_cells_per_device=k)


@functools.cache
def other_truth() -> TruthGrid:
    return truth_grid(other_part(), lon=[-89.5], lat=[40.5], device_ids=[1])


POLYGONS = gpd.GeoDataFrame({"name": ["a", "b"]}, crs=4326, geometry=[
    shapely.box(-99.8, 40.2, -99.4, 40.6), shapely.box(-99.6, 40.4, -99.2, 40.9)])
OUTSIDE = gpd.GeoDataFrame({"name": ["far"]}, crs=4326,
                           geometry=[shapely.box(-99.5, 40.5, -98.0, 42.0)])
TINY = gpd.GeoDataFrame({"name": ["dot"]}, crs=4326,
                        geometry=[shapely.box(-99.5, 40.5, -99.4999, 40.5001)])


@functools.cache
def incidence() -> CellIncidence:
    return part().polygons_to_cells(POLYGONS)


@functools.cache
def other_incidence() -> CellIncidence:
    return other_part().polygons_to_cells(
        gpd.GeoDataFrame(geometry=[shapely.box(-89.8, 40.2, -89.4, 40.6)], crs=4326))


@functools.cache
def corpus() -> QueryCorpus:
    return query_corpus(part(), POLYGONS)


@functools.cache
def grids() -> tuple[NoisyGrid, NoisyGrid]:
    return (release_flat(truth(), epsilon=1.0, target=Simulation(rng=0)),
            release_hierarchical(truth(), epsilon=1.0, target=Simulation(rng=0), levels=3))


def polygon_frames() -> st.SearchStrategy[Any]:
    return arg(st.sampled_from([POLYGONS, POLYGONS.geometry, POLYGONS.iloc[:1]]),
               OUTSIDE, TINY, POLYGONS.to_crs(3857), POLYGONS.set_crs(None, allow_override=True),
               POLYGONS.iloc[:0], pd.DataFrame({"a": [1]}),
               gpd.GeoDataFrame(geometry=[shapely.Point(-99.5, 40.5)], crs=4326),
               gpd.GeoDataFrame(geometry=[None], crs=4326))


epsilons = arg(number(0.05, 5), 1e7, -1.0)
levels_ = arg(number(1, 4, integer=True), 6, 7)
splits = arg(st.sampled_from(["geometric", "uniform", (1.0, 2.0, 3.0), [1, 1, 1]]),
             "nope", (1.0, -1.0, 1.0), (math.nan, 1.0, 1.0), (), (1.0,) * 9, {"a": 1}, b"x")
containments = arg(st.sampled_from(["center", "overlap", "full"]), "nope", "CENTER")
alphas = arg(st.sampled_from([0.05, 0.1, 0.32]), 1.0, 1e-16)


# --------------------------------------------------------------------------- invariants


def check_grid(truth_: TruthGrid, method: str) -> Callable[[NoisyGrid], None]:
    def check(grid: NoisyGrid) -> None:
        assert grid.method == method
        assert grid.values.shape == truth_.counts.shape
        assert np.isfinite(np.asarray(grid.values, dtype=float)).all()
        assert grid.partition_version == truth_.partition_version
        assert math.isfinite(grid.epsilon)
        assert grid.epsilon > 0
        assert sum(grid.level_epsilons) == pytest.approx(grid.epsilon, rel=1e-9)
        assert all(s > 0 and math.isfinite(s) for s in grid.scales)
        if method == "flat":
            assert 0 < grid.cell_std() < math.inf
        assert isinstance(repr(grid), str)

    return check


def check_answers(out: Any, n: int) -> None:
    assert len(out) == n
    for col in ("answer", "error_bar", "std"):
        assert np.isfinite(out[col].to_numpy(dtype=float)).all(), col
    assert (out.error_bar >= 0).all()  # an exact integer bar may be 0
    assert (out.lower <= out.answer).all()
    assert (out.answer <= out.upper).all()
    assert (out.cells >= 1).all()


# --------------------------------------------------------------------------- strategies


@st.composite
def truth_grid_calls(draw: st.DrawFn) -> Call:
    lon, lat, ids = points()
    cells = part().cells
    grid = draw(arg(st.sampled_from([part(), cells, [str(c) for c in cells[:5]]]),
                    cells[[0, 0]], np.array([], dtype=np.uint64), Partition, POLYGONS,
                    ["zz"], np.array([cells[0], 0x85283473fffffff], dtype=np.uint64)))
    n = draw(st.sampled_from([300, 5]))
    ids_given = draw(arg(st.sampled_from([ids[:n], [str(i) for i in ids[:n]],
                                          pd.Series(ids[:n])]),
                         None, ids[:3], np.r_[ids[: n - 1], math.nan], [[1], [1, 2]] * (n // 2)))
    use_points = draw(st.booleans())
    pts = gpd.GeoDataFrame(geometry=gpd.points_from_xy(lon[:n], lat[:n]), crs=4326)
    k = draw(arg(number(1, 4, integer=True), 10**4 + 1, 2**70))

    def check(out: TruthGrid) -> None:
        assert out.counts.dtype == np.int64
        assert (out.counts >= 0).all()
        assert int(out.counts.sum()) <= out.n_devices * out.max_cells_per_device
        assert out.n_unassigned <= out.n_points

    if use_points:
        return call("truth_grid", truth_grid, grid, draw(arg(st.just(pts), pts.to_crs(3857),
                                                             pts.geometry.iloc[:0])),
                    device_ids=ids_given, max_cells_per_device=k, check=check)
    bad = (None, [math.nan] * n, [1e308] * n, ["a"] * n, lon[:2])
    return call("truth_grid", truth_grid, grid, device_ids=ids_given, max_cells_per_device=k,
                lon=draw(arg(st.just(lon[:n]), *bad)), lat=draw(arg(st.just(lat[:n]), *bad)),
                name=draw(arg(st.just("grid"), "", None)), check=check)


def pick(target_strategy: Any) -> st.SearchStrategy[Any]:
    """The fuzzed targets, or the ledger targets of the ledger test."""
    return targets() if target_strategy is None else target_strategy


def truths() -> st.SearchStrategy[Any]:
    return arg(st.sampled_from([1, 2, 3]).map(truth), other_truth(), grids()[0])


def queries() -> st.SearchStrategy[Any]:
    return arg(st.just(incidence()), other_incidence(), corpus(), POLYGONS)


@st.composite
def release_flat_calls(draw: st.DrawFn, target_strategy: Any = None) -> Call:
    t = draw(truths())
    return call("release_flat", release_flat, t, epsilon=draw(epsilons),
                target=draw(pick(target_strategy)),
                check=check_grid(t, "flat") if isinstance(t, TruthGrid) else None)


@st.composite
def release_hierarchical_calls(draw: st.DrawFn, target_strategy: Any = None) -> Call:
    t = draw(truths())
    return call("release_hierarchical", release_hierarchical, t, epsilon=draw(epsilons),
                target=draw(pick(target_strategy)), levels=draw(levels_),
                split=draw(splits),
                check=check_grid(t, "hierarchical") if isinstance(t, TruthGrid) else None)


@st.composite
def answer_fresh_calls(draw: st.DrawFn, target_strategy: Any = None) -> Call:
    given_queries = draw(queries())

    def check(out: pd.DataFrame) -> None:
        assert len(out) == given_queries.matrix.shape[0]
        assert np.isfinite(out.answer.to_numpy(dtype=float)).all()
        assert (out.error_bar >= 0).all()  # an exact integer bar may be 0

    return call("answer_fresh", answer_fresh, draw(truths()), given_queries,
                epsilon=draw(epsilons), target=draw(pick(target_strategy)),
                alpha=draw(alphas), check=check)


@st.composite
def answer_polygons_calls(draw: st.DrawFn) -> Call:
    grid = draw(arg(st.sampled_from(list(grids())), truth()))
    polys = draw(polygon_frames())
    n = len(polys) if isinstance(polys, (pd.DataFrame, gpd.GeoSeries)) else -1
    return call("answer_polygons", answer_polygons, grid, polys,
                draw(arg(st.just(part()), other_part())), containment=draw(containments),
                alpha=draw(alphas), check=lambda out: check_answers(out, n))


@st.composite
def query_variance_calls(draw: st.DrawFn) -> Call:
    grid = draw(st.sampled_from(list(grids())))

    given_queries = draw(queries())

    def check(var: np.ndarray) -> None:
        assert var.shape == (given_queries.matrix.shape[0],)
        assert np.isfinite(var).all()
        assert (var > 0).all()

    return call("NoisyGrid.query_variance", grid.query_variance, given_queries,
                check=check)


@st.composite
def compare_releases_calls(draw: st.DrawFn) -> Call:
    given_queries = draw(queries())

    def check(out: pd.DataFrame) -> None:
        assert len(out) == given_queries.matrix.shape[0]
        assert np.isfinite(out[["flat_std", "hierarchical_std", "std_ratio"]]
                           .to_numpy(dtype=float)).all()
        assert set(out.better) <= {"flat", "hierarchical"}

    return call("flat_or_hierarchical", flat_or_hierarchical, draw(truths()), given_queries,
                epsilon=draw(epsilons), levels=draw(levels_), split=draw(splits), check=check)


def mixed_resolutions() -> np.ndarray:
    """A cell and its parent: two resolutions."""
    cell = h3.int_to_str(int(part().cells[0]))
    return np.array([int(part().cells[0]), h3.str_to_int(h3.cell_to_parent(cell, 4))],
                    dtype=np.uint64)


@st.composite
def grid_version_calls(draw: st.DrawFn) -> Call:
    cells = part().cells
    given_cells = draw(arg(st.sampled_from([cells, cells[:3], [str(c) for c in cells[:2]]]),
                           np.array([], dtype=np.uint64), ["zz"], cells[[1, 0]],
                           mixed_resolutions(),
                           np.array([cells[0], 0x85283473fffffff], dtype=np.uint64)))

    def check(version: str) -> None:
        assert isinstance(version, str)
        assert len(version) == 16

    return call("grid_version", grid_version, given_cells, check=check)


@st.composite
def level_epsilons_calls(draw: st.DrawFn) -> Call:
    eps = draw(epsilons)
    levels = draw(levels_)

    def check(out: tuple[float, ...]) -> None:
        assert len(out) == int(levels)
        assert all(e > 0 and math.isfinite(e) for e in out)
        assert sum(out) == pytest.approx(float(eps), rel=1e-9)

    return call("level_epsilons", level_epsilons, eps, levels, draw(splits), check=check)


@st.composite
def measure_calls(draw: st.DrawFn) -> Call:
    def check(out: pd.DataFrame) -> None:
        assert len(out) >= 1
        for col in ("mean_abs_error", "p95_abs_error", "rms"):
            values = out[col].to_numpy(dtype=float)
            assert (np.isnan(values) | (values >= 0)).all(), col
        assert out.attrs["internal"] is True  # the truth, or a simulated grid: internal

    # The reference: the truth (internal) or a released grid (a plug-in truth).
    references = st.one_of(st.sampled_from([1, 2, 3]).map(truth),
                           st.sampled_from([0, 1]).map(lambda i: grids()[i]))
    return call(
        "measure_query_error", measure_query_error, draw(arg(references, other_truth())),
        draw(arg(st.sampled_from([incidence(), corpus()]), other_incidence(), POLYGONS)),
        epsilon=draw(epsilons),
        method=draw(arg(st.sampled_from(["flat", "hierarchical"]), "nope")),
        levels=draw(levels_), split=draw(splits),
        draws=draw(arg(number(1, 20, integer=True), 10**5 + 1, 2**70)),
        report_floor=draw(arg(number(0, 30))), clamp_negative=draw(flag()),
        buckets=draw(arg(st.sampled_from([(1, 4, 16), [1, 10], np.array([1.0, 100.0])]),
                         (), (4, 1), (1, math.nan), ("a",), (0, 4), (-1, 4), [[1, 2]])),
        bucket_by=draw(arg(st.sampled_from(["cells", "area"]), "nope")),
        expected=draw(flag()), rng=draw(arg(st.integers(0, 9))), check=check)


@st.composite
def query_corpus_calls(draw: st.DrawFn) -> Call:
    polys = draw(polygon_frames())

    def check(out: QueryCorpus) -> None:
        assert len(out) == len(polys)
        assert (out.cells_per_query >= 1).all()
        assert np.isfinite(out.polygon_area_km2).all()  # type: ignore[arg-type]

    return call("query_corpus", query_corpus, draw(arg(st.just(part()), other_part())), polys,
                containment=draw(containments), check=check)


@st.composite
def recommend_calls(draw: st.DrawFn) -> Call:
    def check(advice: Any) -> None:
        assert 0 <= advice.resolution <= 15
        assert isinstance(advice.reasoning, str)
        assert len(advice.table) == 16

    return call("recommend_resolution", recommend_resolution,
                draw(arg(number(1, 10**7, integer=True))), draw(epsilons),
                draw(arg(number(1e-3, 1e7))),
                max_cells_per_device=draw(arg(number(1, 5, integer=True))),
                c=draw(arg(number(0.1, 100), 5e-324, 1e308)), check=check)


@st.composite
def require_publishable_calls(draw: st.DrawFn) -> Call:
    released = pd.DataFrame({"bucket": ["[1, 4)"]})
    released.attrs.update(reference="released grid", internal=False, title="t")
    internal = pd.DataFrame({"bucket": ["[1, 4)"]})
    internal.attrs.update(reference="truth", internal=True, title="INTERNAL")

    def check(out: dict[str, Any]) -> None:
        assert out["reference"] == "released grid"
        assert out["internal"] is False

    return call("require_publishable", require_publishable,
                draw(arg(st.sampled_from([released, dict(released.attrs)]), internal,
                         dict(internal.attrs), pd.DataFrame(), {"reference": "released grid"},
                         [("reference", "truth")])),
                draw(arg(st.just("query_error"))), check=check)


# --------------------------------------------------------------------------- registry

#: Public callable -> (strategy of calls, number of examples).
FUZZ: dict[str, tuple[Callable[[], st.SearchStrategy[Call]], int]] = {
    "truth_grid": (truth_grid_calls, 30),
    "release_flat": (release_flat_calls, 25),
    "release_hierarchical": (release_hierarchical_calls, 25),
    "answer_fresh": (answer_fresh_calls, 25),
    "answer_polygons": (answer_polygons_calls, 20),
    "NoisyGrid.query_variance": (query_variance_calls, 15),
    "flat_or_hierarchical": (compare_releases_calls, 20),
    "grid_version": (grid_version_calls, 20),
    "level_epsilons": (level_epsilons_calls, 30),
    "measure_query_error": (measure_calls, 30),
    "query_corpus": (query_corpus_calls, 20),
    "recommend_resolution": (recommend_calls, 30),
    "require_publishable": (require_publishable_calls, 20),
}


#: Open defects (spatialdp/queries is its author's; see the module docstring).
OPEN: tuple[Open, ...] = ()


# --------------------------------------------------------------------------- tests


def test_every_public_callable_is_fuzzed() -> None:
    check_census(public_callables(PACKAGE), FUZZ, SKIP, OPEN)


@pytest.mark.slow  # a long fuzz run (hypothesis, every public callable)
@pytest.mark.parametrize("name", sorted(FUZZ))
def test_only_spatialdp_errors(name: str) -> None:
    fuzz_only_spatialdp_errors(*FUZZ[name], OPEN)


@pytest.mark.parametrize("defect", [
    pytest.param(d, id=f"{d.callable}-{i}",
                 marks=pytest.mark.xfail(strict=True, raises=d.kind, reason=d.reason))
    for i, d in enumerate(OPEN) if d.pinned])
def test_open_defect_reproduces(defect: Open) -> None:
    """Each open defect, on its exact input: XFAIL now; XPASS (a failure) once fixed."""
    run(defect.reproduce())


# --------------------------------------------------------------------------- the ledger

EPOCHS = (0, 1, 2)


def fuzz_targets() -> st.SearchStrategy[ReleaseTarget]:
    """A ReleaseTarget on a fresh in-memory ledger; small budgets make BudgetExceeded likely."""
    return ledger_targets(budgets=(0.05, 0.5, 5.0), accountings=("pure", "pure", "zcdp"),
                          items=(None, None, "evaluation.regional", "training", "marketing"),
                          epochs=EPOCHS)


RELEASES: dict[str, Callable[..., st.SearchStrategy[Call]]] = {
    "release_flat": release_flat_calls,
    "release_hierarchical": release_hierarchical_calls,
    "answer_fresh": answer_fresh_calls,
}


@pytest.mark.parametrize("name", sorted(RELEASES))
def test_refused_releases_leave_the_ledger_untouched(name: str) -> None:
    """A refused release charges nothing; a release charges its epsilon once."""

    @fuzz_settings(30)
    @given(mixed(RELEASES[name](fuzz_targets())))
    def fuzz(one: Call) -> None:
        target = one.kwargs["target"]
        ledger = target.ledger
        try:
            result, refusal = run(one)
        except Exception as err:
            if not any(d.matches(one.name, err) for d in OPEN):
                raise
            result, refusal = None, err
        if refusal is not None:
            assert all(ledger.spent(e) == 0 for e in EPOCHS), "a refusal was charged"
            assert len(ledger.audit()) == 0, "a refusal left an audit row"
            return
        eps = float(one.kwargs["epsilon"])  # a success: the epsilon was valid
        amount = eps if ledger.accounting == "pure" else eps**2 / 2
        assert len(ledger.audit()) == 1, "a release must be one charge"
        assert ledger.spent(target.epoch) == pytest.approx(amount, rel=1e-9)
        assert result is not None

    fuzz()

