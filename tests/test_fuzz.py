"""Every public callable, fuzzed: it returns (and its result holds up) or refuses cleanly.

The registry :data:`FUZZ` maps each public callable of spatialdp (the ``__all__``
of ``spatialdp``, ``spatialdp.federated``, ``spatialdp.privacy``, ``spatialdp.geo``,
``spatialdp.viz``, ``spatialdp.datasets`` and ``spatialdp.simulation``, and the
public methods of their classes) to a hypothesis strategy of calls that mixes
valid arguments with wrong types, bools for numbers, numbers as strings, NaN,
infinities, 0, negatives, 1e308, numpy scalars, empty and object arrays, ``None``,
wrong shapes, repeated and unknown ids. Each call must

- return, or raise a :class:`~spatialdp.exceptions.SpatialDPError` (never a bare
  TypeError/KeyError/ValueError from numpy, pandas or sqlite);
- finish within a few seconds (SIGALRM);
- warn only with spatialdp's own warnings;
- when it returns, pass the invariants its result promises (``check``).

:func:`test_every_public_callable_is_fuzzed` fails when a public callable has
neither an entry nor a reasoned place in :data:`SKIP`. Ledger refusals are in
``test_fuzz_ledger.py``, accepted inputs in ``test_fuzz_accept.py`` and the
regressions of what this suite found in ``test_fuzz_fixed_defects.py``. Defects
in files this suite may not edit are listed, with their owner, in
``test_fuzz_support.OPEN_DEFECTS``.

The examples are derandomized (the same every run). To hunt for new defects::

    SPATIALDP_FUZZ_RANDOM=1 SPATIALDP_FUZZ_SCALE=10 pytest tests/test_fuzz.py
"""

from __future__ import annotations

import dataclasses
import math
import os
import tempfile
from collections.abc import Callable
from typing import Any

import geopandas as gpd
import h3
import numpy as np
import pandas as pd
import pytest
import shapely
from hypothesis import strategies as st

import spatialdp
from spatialdp import datasets, geo, privacy, simulation, viz
from spatialdp import federated as fed
from spatialdp.federated import device as dev
from spatialdp.federated.health import HEALTH_STATUSES
from spatialdp.geo import Partition
from spatialdp.privacy import PrivacyLedger
from tests.test_fuzz_support import (
    HIST,
    JUNK,
    LOSS,
    RATIO,
    Call,
    arg,
    base_coverage,
    base_histogram,
    base_history,
    base_ratio_release,
    base_regional,
    base_release,
    base_reports,
    boxes,
    check_census,
    flag,
    fresh_ledger,
    fuzz_only_spatialdp_errors,
    junk,
    maybe,
    mutated,
    number,
    other_boxes,
    public_callables,
    targets,
    text,
    working_directory,
)

PACKAGES = ("spatialdp", "spatialdp.federated", "spatialdp.privacy", "spatialdp.geo",
            "spatialdp.viz", "spatialdp.datasets", "spatialdp.simulation")

#: Public names that are not fuzzed, each with the reason.
SKIP: dict[str, str] = {
    # Exception and warning classes: raised by spatialdp, never called with user input.
    **{name: "exception class" for name in (
        "BudgetExceeded", "CRSError", "ClippingFailure", "CohortTooSmall", "InvalidCells",
        "InvalidInput", "InvalidSpec", "LedgerError", "PartitionMismatch", "SpatialDPError")},
    "UninformativeReleaseWarning": "warning class",
    "BudgetSplitWarning": "warning class",
    "UnassignedPointsWarning": "warning class",
    "ReprojectedLayerWarning": "warning class",
    # Constants.
    "__version__": "constant",
    "DEVICE_MODULE_VERSION": "constant",
    "MAX_SCALE": "constant",
    "NOISE_KINDS": "constant",
    "MAX_PARTITION_CELLS": "constant",
    # An Enum: LineItem("x") is Python's Enum lookup; the ledger parses items itself
    # (LineItem.parse is fuzzed).
    "LineItem": "enum (LineItem.parse is fuzzed)",
    # Result records: built by the library and returned; their methods are fuzzed on
    # real instances (the constructors validate nothing, see the report).
    **{name: "result record (its methods are fuzzed on returned instances)" for name in (
        "MetricRelease", "HistogramRelease", "RegionalReport", "CoverageRelease", "RoundHealth",
        "SecureSum", "Incident", "Accuracy", "CadencePlan", "Charge", "Assignment",
        "CellIncidence")},
    # Zero-argument methods of results: called on every instance the fuzz returns.
    **{name: "no argument: called on every instance the fuzz returns (check)" for name in (
        "MetricRelease.summary", "MetricRelease.bounded_display", "HistogramRelease.summary",
        "RegionalReport.metadata", "RegionalReport.summary", "RegionalReport.to_frame",
        "CoverageRelease.summary", "RoundHealth.no_contact", "RoundHealth.summary",
        "Assignment.counts", "Assignment.ids", "Partition.summary", "Partition.adjacency",
        "PrivacyLedger.epochs", "PrivacyLedger.verify", "PrivacyLedger.borrows",
        "PrivacyLedger.close", "Disjoint.describe", "Single.describe", "Overlapping.describe",
        "PrivacyLoss.as_zcdp", "ReleaseTarget.metadata", "Simulation.metadata",
        "Unaccounted.metadata")},
    # Datasets without arguments: loading the shipped files.
    "data_dir": "no argument (reads SPATIALDP_DATA)",
    "load_us_cities": "no argument",
    "load_us_states": "no argument",
    "us_states_partition": "no argument",
    "worker_environment": "no argument (Dask's worker environment with glibc settings)",
}


# --------------------------------------------------------------------------- helpers


def call(label: str, fn: Callable[..., Any], *args: Any,
         check: Callable[[Any], None] | None = None, **kwargs: Any) -> Call:
    return Call(label, fn, args, kwargs, check)


def finite(x: Any) -> bool:
    return bool(np.all(np.isfinite(np.asarray(x, dtype=np.float64))))


TMP = tempfile.mkdtemp(prefix="spatialdp-fuzz-")


@pytest.fixture(autouse=True, scope="module")
def _in_a_scratch_folder() -> Any:
    """Run in a scratch folder: a fuzzed relative path ("abc", "1.0") lands there."""
    with working_directory(TMP):
        yield


# --------------------------------------------------------------------------- invariants


def check_metric_spec(spec: fed.MetricSpec) -> None:
    assert math.isfinite(spec.clip_low)
    assert math.isfinite(spec.clip_high)
    assert spec.clip_low < spec.clip_high
    assert 0 < spec.sensitivity < math.inf
    assert 0 < spec.sensitivity_under("add_remove") < math.inf
    assert ";" not in spec.name
    assert "=" not in spec.name


def check_histogram_spec(spec: fed.HistogramSpec) -> None:
    assert spec.n_buckets == len(spec.edges) + 1 == len(spec.labels) == len(spec.columns)
    assert all(a < b for a, b in zip(spec.edges, spec.edges[1:], strict=False))
    assert 0 < spec.mass_cap < math.inf
    assert 0 < spec.sensitivity_under("replace") < math.inf


def check_metric_release(rel: Any, *, floor: Any = None, simulated: bool | None = None) -> None:
    if rel.suppressed:  # a ratio whose noised count fell below the floor: charged, not shown
        assert rel.estimator == "ratio", rel
        assert rel.cohort == 0, rel
        assert math.isnan(rel.value)
        assert all(math.isnan(x) for x in rel.conf_int())
        assert "suppressed" in rel.summary()
        return
    assert math.isfinite(rel.value), rel
    assert math.isfinite(rel.error_bar), "infinite error bar"
    assert rel.error_bar > 0, rel
    assert rel.cohort >= 1
    if floor is not None:
        assert rel.cohort >= int(floor), (rel.cohort, floor)
    if simulated is not None:
        assert rel.simulated is simulated
    low, high = rel.conf_int()
    assert math.isfinite(low), "infinite interval"
    assert math.isfinite(high), "infinite interval"
    assert low <= high
    if rel.estimator == "mean":
        assert low <= rel.value <= high
        assert rel.noise_scale > 0
    shown = rel.bounded_display()
    assert rel.clip_low <= shown.value <= rel.clip_high
    assert isinstance(rel.summary(), str)


def check_histogram_release(rel: Any, spec: fed.HistogramSpec, floor: Any = None) -> None:
    assert len(rel.values) == spec.n_buckets == len(rel.labels)
    assert finite(rel.values)
    assert math.isfinite(rel.error_bar), "infinite error bar"
    assert rel.error_bar > 0
    if floor is not None:
        assert rel.cohort >= int(floor)
    low, high = rel.conf_int()
    assert (low <= high).all()
    assert isinstance(rel.summary(), str)


def check_regional(report: Any, metrics: list[Any], floor: Any) -> None:
    assert set(report.frames) == {m.name for m in metrics}
    for spec in metrics:
        frame = report[spec.name]
        shown = ~frame.suppressed.to_numpy(dtype=bool)
        # Suppressed regions publish nothing: no value, no cohort, no bar.
        assert frame.value[~shown].isna().all()
        assert frame.cohort[~shown].isna().all()
        assert (frame.reliability[~shown] == "suppressed").all()
        # Published regions have a finite value, a positive bar, a cohort at the floor.
        assert np.isfinite(frame.value[shown]).all()
        bars = frame.error_bar[shown]
        assert np.isfinite(bars).all(), "infinite error bar"
        assert (bars > 0).all(), "error bar not positive"
        assert (frame.cohort[shown].astype(float) >= int(floor)).all()
        assert (frame.ci_low[shown] <= frame.ci_high[shown]).all()
        if isinstance(spec, fed.HistogramSpec):
            assert set(spec.labels) <= set(frame.columns)
        ci = report.conf_int(spec.name)
        assert (ci.ci_low[shown] <= ci.ci_high[shown]).all()
        bounded = report.bounded(spec.name)
        low, high = frame.clip_low.iloc[0], frame.clip_high.iloc[0]
        assert bounded.value[shown].between(low, high).all()
    assert isinstance(report.summary(), str)
    assert isinstance(report.metadata(), dict)
    assert len(report.to_frame()) == len(next(iter(report.frames.values())))


def check_device_report(report: pd.DataFrame) -> None:
    assert report.index.is_unique
    assert "device_specs" in report.columns
    for column, (low, high) in report.attrs["bounds"].items():
        values = report[column].to_numpy(dtype=np.float64)
        assert np.isfinite(values).all(), column
        assert ((values >= low) & (values <= high)).all(), (column, low, high)


# --------------------------------------------------------------------------- specs


names = arg(st.sampled_from(["loss", "err", "x1"]), "a;b", "a=b", " x", "", 3)
versions = arg(st.sampled_from(["1", "2"]), 1, "", None)


@st.composite
def metric_spec_calls(draw: st.DrawFn) -> Call:
    low = draw(arg(number(-10, 10), -1e308))
    high = draw(arg(number(-10, 100), 1e308))
    present = draw(st.one_of(st.none(), st.none(), st.just("flag"), junk))
    return call("MetricSpec", fed.MetricSpec, draw(names), low, high, version=draw(versions),
                present=present, check=check_metric_spec)


edge_lists = st.one_of(
    st.lists(number(-100, 100), min_size=0, max_size=5).map(tuple),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=4),
    st.builds(np.asarray, st.lists(st.floats(-5, 5), max_size=4)),
    junk)


@st.composite
def histogram_spec_calls(draw: st.DrawFn) -> Call:
    return call("HistogramSpec", fed.HistogramSpec, draw(names), draw(edge_lists),
                mass_cap=draw(arg(number(0, 10, exclude_low=True), 1e308)),
                version=draw(versions),
                check=check_histogram_spec)


values_arrays = st.one_of(
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=5),
    st.lists(st.floats(-5, 5), min_size=1, max_size=5).map(np.asarray),
    junk)


@st.composite
def spec_clip_calls(draw: st.DrawFn) -> Call:
    values = draw(values_arrays)

    def check(out: Any) -> None:
        assert ((out >= LOSS.clip_low) & (out <= LOSS.clip_high)).all()

    return call("MetricSpec.clip", LOSS.clip, values, check=check)


@st.composite
def sensitivity_under_calls(draw: st.DrawFn, name: str) -> Call:
    spec = LOSS if name.startswith("MetricSpec") else HIST
    relation = draw(arg(st.sampled_from(["replace", "add_remove"]), "add-remove", None))

    def check(out: float) -> None:
        assert 0 < out < math.inf
        assert out <= spec.sensitivity  # adding one client never moves more than replacing

    return call(name, spec.sensitivity_under, relation, check=check)


@st.composite
def bucket_of_calls(draw: st.DrawFn) -> Call:
    def check(out: Any) -> None:
        assert ((out >= 0) & (out < HIST.n_buckets)).all()

    return call("HistogramSpec.bucket_of", HIST.bucket_of, draw(values_arrays), check=check)


spec_values = arg(st.sampled_from([LOSS, HIST, RATIO, fed.MetricSpec("loss", 0, 3.0)]))


@st.composite
def registry_calls(draw: st.DrawFn) -> Call:
    specs = draw(st.one_of(st.lists(spec_values, max_size=3), junk))
    return call("MetricRegistry", fed.MetricRegistry, specs)


@st.composite
def register_calls(draw: st.DrawFn) -> Call:
    reg = fed.MetricRegistry([LOSS])
    spec = draw(spec_values)
    key = draw(arg(st.just("loss")))

    def both() -> Any:
        reg.register(spec)
        return reg[key]

    return call("MetricRegistry.register", both)


# --------------------------------------------------------------------------- device


def examples_frame() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 12
    lon = rng.uniform(0.1, 2.9, n)
    lat = rng.uniform(0.1, 0.9, n)
    clients = np.repeat(np.arange(4), 3)
    return pd.DataFrame({
        "client_id": clients, "loss": rng.uniform(0, 5, n), "error": rng.uniform(0, 3, n),
        "true_lon": lon, "true_lat": lat, "pred_lon": lon + rng.normal(0, 1e-5, n),
        "pred_lat": lat + rng.normal(0, 1e-5, n), "heading_deg": rng.uniform(0, 360, n),
        "p_pred": rng.uniform(0, 1, n), "outcome": rng.integers(0, 2, n),
        "region_id": np.array(["a", "b", "c", "a"])[clients]})


EXAMPLES = examples_frame()
ROADS = gpd.GeoSeries([shapely.LineString([(0, 0.5), (3, 0.5)]),
                       shapely.LineString([(1.5, 0), (1.5, 1)])], crs=4326)
partitions = arg(st.sampled_from([None, boxes()]), other_boxes())
crs_values = arg(st.sampled_from([None, None, 32631, "EPSG:3857"]), 4326, "EPSG:4326",
                 "not a crs")
road_values = arg(st.sampled_from([None, None, ROADS]), [shapely.Point(0, 0)],
                  [shapely.LineString([(0, 0), (0, 0)])], np.array([None], dtype=object),
                  gpd.GeoSeries([shapely.LineString([(0, 0), (1, 1)])]))
count_edges = arg(st.sampled_from([(1, 10, 100), (1,), [1, 2, 3]]), (0, 1), (1, 1),
                  (1, 1.5), ("1", "10"), (True, 2))


@st.composite
def device_report_calls(draw: st.DrawFn) -> Call:
    frame = draw(mutated(EXAMPLES, protect=("client_id",)))
    if draw(st.booleans()):
        frame = frame.drop(columns=draw(st.sets(st.sampled_from(
            ["loss", "error", "heading_deg", "p_pred", "true_lon"]), max_size=3)),
            errors="ignore")
    kwargs = {
        "loss_spec": draw(maybe(spec_values)),
        "hist_spec": draw(maybe(arg(st.just(HIST)))),
        "ratio_clip": draw(arg(number(0.5, 20))),
        "rmse_spec": draw(st.one_of(st.none(), st.just(fed.MetricSpec("rmse", 0, 50)), junk)),
        "roads": draw(road_values),
        "metric_crs": draw(crs_values),
        "max_road_distance": draw(arg(number(1, 1e5))),
        "partition": draw(partitions),
        "coverage_partition": draw(partitions),
        "max_cells": draw(arg(number(1, 5, integer=True))),
        "count_edges": draw(count_edges),
        "calibration_buckets": draw(arg(number(1, 6, integer=True))),
    }
    return call("device_report", fed.device_report, draw(arg(st.just(frame))),
                check=check_device_report, **kwargs)


@st.composite
def spec_helper_calls(draw: st.DrawFn) -> Call:
    which = draw(st.sampled_from(["track_ratio_spec", "calibration_specs", "count_bucket_spec",
                                  "coverage_spec"]))
    if which == "track_ratio_spec":
        return call(which, fed.track_ratio_spec, draw(arg(number(0, 50, exclude_low=True))),
                    roads=draw(flag()), check=check_metric_spec)
    if which == "calibration_specs":
        return call(which, fed.calibration_specs, draw(arg(number(1, 8, integer=True))),
                    check=lambda specs: [check_metric_spec(s) for s in specs])
    if which == "count_bucket_spec":
        return call(which, fed.count_bucket_spec, draw(count_edges), check=check_metric_spec)
    return call(which, fed.coverage_spec, draw(arg(number(1, 50, integer=True))),
                check=check_metric_spec)


def spec_helper(name: str) -> Callable[[], st.SearchStrategy[Call]]:
    return lambda: spec_helper_calls().filter(lambda c: c.name == name)


# --------------------------------------------------------------------------- releases


epsilons = arg(number(0.01, 10, exclude_low=True), 0, -1, 1e7)
alphas = arg(number(0.001, 0.5), 0, 1, 1.0)
floors = arg(number(1, 80, integer=True), 0, 50.5, -1)


def pick(draw: st.DrawFn, target_strategy: Any) -> Any:
    """Draw a release target: from ``target_strategy`` if given, else any (valid or not)."""
    return draw(targets() if target_strategy is None else target_strategy)


def client_reports() -> st.SearchStrategy[Any]:
    return arg(mutated(base_reports(), index_ids=True))


@st.composite
def aggregate_metric_calls(draw: st.DrawFn, target_strategy: Any = None) -> Call:
    spec = draw(spec_values)
    floor = draw(floors)
    target = pick(draw, target_strategy)

    def check(rel: Any) -> None:
        check_metric_release(rel, floor=floor, simulated=getattr(target, "simulated", None))

    return call("aggregate_metric", fed.aggregate_metric, draw(client_reports()), spec,
                epsilon=draw(epsilons), target=target, min_cohort=floor, alpha=draw(alphas),
                check=check)


@st.composite
def aggregate_histogram_calls(draw: st.DrawFn, target_strategy: Any = None) -> Call:
    spec = draw(spec_values)
    floor = draw(floors)
    target = pick(draw, target_strategy)
    return call("aggregate_histogram", fed.aggregate_histogram, draw(client_reports()), spec,
                epsilon=draw(epsilons), target=target, min_cohort=floor,
                alpha=draw(alphas), check=lambda rel: check_histogram_release(rel, spec, floor))


metric_lists = st.one_of(
    st.lists(st.sampled_from([LOSS, HIST, RATIO]), min_size=1, max_size=3, unique=True),
    st.lists(spec_values, max_size=3), junk)


@st.composite
def regional_report_calls(draw: st.DrawFn, target_strategy: Any = None) -> Call:
    metrics = draw(metric_lists)
    floor = draw(floors)
    if draw(st.booleans()) and isinstance(metrics, list):
        eps: Any = {getattr(m, "name", "?"): draw(epsilons) for m in metrics}
        if draw(st.booleans()):
            eps[draw(st.sampled_from(["extra", "loss"]))] = draw(epsilons)
    else:
        eps = draw(epsilons)

    target = pick(draw, target_strategy)

    def check(report: Any) -> None:
        check_regional(report, metrics, floor)
        assert report.simulated is target.simulated
        assert all(f.attrs["spatialdp"]["simulated"] is target.simulated
                   for f in report.frames.values())

    return call("regional_report", fed.regional_report, draw(client_reports()),
                draw(arg(st.just(boxes()), other_boxes())), metrics, epsilon=eps,
                target=target, min_cohort=floor, alpha=draw(alphas), check=check)


def unhashable(values: list[Any]) -> Any:
    """An object array whose first element is a list (unhashable), the rest as given."""
    out = np.empty(len(values), dtype=object)
    out[:] = values
    if len(values):
        out[0] = [values[0]]
    return out


@st.composite
def round_health_calls(draw: st.DrawFn, target_strategy: Any = None) -> Call:
    n = draw(st.integers(0, 40))
    status = draw(st.one_of(
        st.lists(st.sampled_from(HEALTH_STATUSES), min_size=n, max_size=n).map(np.asarray),
        st.lists(st.sampled_from([*HEALTH_STATUSES, "lost", None, 1]), min_size=n,
                 max_size=n),
        st.lists(st.sampled_from(HEALTH_STATUSES), min_size=n, max_size=n).map(unhashable),
        junk))
    regions = draw(st.one_of(
        st.lists(st.sampled_from(["a", "b", "c"]), min_size=n, max_size=n),
        st.lists(st.sampled_from(["a", "z", None, math.nan, 3, ("a",), frozenset()]),
                 min_size=n, max_size=n),
        st.lists(st.sampled_from(["a", "b"]), min_size=n, max_size=n).map(unhashable),
        st.lists(st.sampled_from(["a", "b"]), min_size=n + 1, max_size=n + 1),
        junk))
    step = draw(arg(number(1, 10, integer=True), 0, 10**7, 2.5))
    target = pick(draw, target_strategy)

    def check(health: Any) -> None:
        assert health.simulated is target.simulated
        table = health.table
        counts = table[list(HEALTH_STATUSES)].to_numpy()
        assert (counts % health.granularity == 0).all()
        assert (table.selected.to_numpy() == counts.sum(axis=1)).all()
        assert (table.error_bar > 0).all()
        assert np.isfinite(table.error_bar).all()
        assert list(table.index) == list(boxes().region_ids)
        assert isinstance(health.summary(), str)
        health.no_contact()

    return call("round_health", fed.round_health, status, regions,
                draw(arg(st.just(boxes()))), epsilon=draw(epsilons),
                target=target, granularity=step, alpha=draw(alphas), check=check)


@st.composite
def release_coverage_calls(draw: st.DrawFn, target_strategy: Any = None) -> Call:
    other = dev.coverage([5.5], [5.5], [1], other_boxes())
    coverage = draw(arg(st.just(base_coverage()), other))
    target = pick(draw, target_strategy)

    def check(out: Any) -> None:
        assert out.accounting["simulated"] is target.simulated
        frame = out.frame
        assert (frame.covered == (frame.clients > frame.error_bar)).all()
        assert np.isfinite(frame.error_bar).all()
        assert (frame.error_bar >= 0).all()  # discrete noise: 0 at a high alpha
        assert 0 <= out.covered_share <= 1
        assert isinstance(out.summary(), str)

    return call("release_coverage", fed.release_coverage, coverage,
                draw(arg(st.just(boxes()), other_boxes())), epsilon=draw(epsilons),
                target=target, alpha=draw(alphas), check=check)


# --------------------------------------------------------------------------- results


@st.composite
def metric_release_conf_int_calls(draw: st.DrawFn) -> Call:
    rel = draw(st.sampled_from([base_release(), base_ratio_release()]))
    alpha = draw(maybe(alphas))

    def check(ci: Any) -> None:
        assert math.isfinite(ci[0]), "infinite interval"
        assert math.isfinite(ci[1]), "infinite interval"
        assert ci[0] <= ci[1]

    return call("MetricRelease.conf_int", rel.conf_int, alpha, check=check)


@st.composite
def histogram_release_conf_int_calls(draw: st.DrawFn) -> Call:
    def check(ci: Any) -> None:
        assert finite(ci[0]), "infinite interval"
        assert finite(ci[1]), "infinite interval"
        assert (ci[0] <= ci[1]).all()

    return call("HistogramRelease.conf_int", base_histogram().conf_int, draw(maybe(alphas)),
                check=check)


report_metrics = arg(st.sampled_from(["loss", "err", "ratio"]), "nope", ["loss"])


@st.composite
def regional_conf_int_calls(draw: st.DrawFn) -> Call:
    return call("RegionalReport.conf_int", base_regional().conf_int, draw(report_metrics),
                draw(maybe(alphas)))


@st.composite
def regional_bounded_calls(draw: st.DrawFn) -> Call:
    return call("RegionalReport.bounded", base_regional().bounded, draw(report_metrics))


@st.composite
def regional_write_calls(draw: st.DrawFn) -> Call:
    folder = draw(arg(st.just(TMP), os.path.join(TMP, "sub")))
    stem = draw(arg(st.sampled_from(["report", "r1"])))
    return call("RegionalReport.write", base_regional().write, folder, stem)


def _report_files() -> list[str]:
    """The files of base_regional() in two layouts, and a GeoPackage that is no report."""
    folder = os.path.join(TMP, "read")
    if not os.path.isdir(folder):
        paths = base_regional().write(folder, "wide", names="sql")
        paths += base_regional().write(folder, "long", names="dotted", layout="long")
        boxes().regions.reset_index().to_file(os.path.join(folder, "plain.gpkg"),
                                              layer="regional_report", engine="pyogrio")
        return [os.fspath(p) for p in paths]
    return sorted(os.path.join(folder, name) for name in os.listdir(folder)
                  if name.startswith(("wide", "long")))


@st.composite
def read_report_calls(draw: st.DrawFn) -> Call:
    files = _report_files()
    folder = os.path.dirname(files[0])
    path = draw(arg(st.sampled_from(files), os.path.join(folder, "plain.gpkg"),
                    os.path.join(folder, "missing.csv"), os.path.join(TMP, "f.unknown"),
                    TMP, 3, None))
    partition = draw(maybe(arg(st.just(boxes()), other_boxes(), "boxes")))

    def check(report: Any) -> None:
        assert report.accounting["read_from"] == os.fspath(path)
        pd.testing.assert_series_equal(report["loss"].value, base_regional()["loss"].value)

    return call("read_report", fed.read_report, path, partition=partition, check=check)


# --------------------------------------------------------------------------- helpers


held_out = st.one_of(
    st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=30).map(np.asarray),
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=5),
    st.lists(st.floats(-5, 5), min_size=1, max_size=5).map(pd.Series),
    junk)
percentiles = arg(number(0, 100, exclude_low=True), 0, 101, -5)


@st.composite
def calibrate_clip_calls(draw: st.DrawFn) -> Call:
    low = draw(arg(number(-10, 10)))

    def check(bound: float) -> None:
        assert math.isfinite(bound)
        assert bound > float(low)

    return call("calibrate_clip", fed.calibrate_clip, draw(held_out), draw(percentiles),
                low=low, check=check)


@st.composite
def clip_tradeoff_calls(draw: st.DrawFn) -> Call:
    pct = draw(st.one_of(st.lists(percentiles, max_size=4), junk))

    def check(table: pd.DataFrame) -> None:
        assert np.isfinite(table.to_numpy(dtype=np.float64)).all()
        assert table.share_clipped.between(0, 1).all()
        assert (table.noise_half_width > 0).all()

    return call("clip_tradeoff", fed.clip_tradeoff, draw(held_out), epsilon=draw(epsilons),
                cohort=draw(arg(number(1, 10**6, integer=True))), percentiles=pct,
                low=draw(arg(number(-10, 10))), alpha=draw(alphas), check=check)


@st.composite
def min_cohort_for_calls(draw: st.DrawFn) -> Call:
    def check(n: int) -> None:
        assert isinstance(n, int)
        assert n >= 1

    return call("min_cohort_for", fed.min_cohort_for, draw(arg(number(1e-9, 10))),
                draw(spec_values), draw(epsilons), alpha=draw(alphas), check=check)


@st.composite
def predicted_error_bar_calls(draw: st.DrawFn) -> Call:
    def check(bar: float) -> None:
        assert math.isfinite(bar), "infinite error bar"
        assert bar > 0, "error bar not positive"

    return call("predicted_error_bar", fed.predicted_error_bar,
                draw(arg(number(1e-6, 100, exclude_low=True))), draw(epsilons),
                draw(arg(number(1, 10**6, integer=True))), draw(alphas), check=check)


@st.composite
def secure_sum_calls(draw: st.DrawFn) -> Call:
    n = draw(st.integers(0, 6))
    values = draw(st.one_of(
        st.lists(st.floats(-5, 5), min_size=n, max_size=n).map(np.asarray),
        st.lists(st.lists(st.floats(0, 1), min_size=2, max_size=2), min_size=n, max_size=n),
        values_arrays))
    groups = draw(st.one_of(st.none(), st.lists(st.integers(-1, 3), min_size=n, max_size=n),
                            junk))
    return call("secure_sum", fed.secure_sum, values, groups,
                draw(arg(number(1, 4, integer=True))))


@st.composite
def check_clipping_calls(draw: st.DrawFn) -> Call:
    sums = draw(st.one_of(st.lists(st.floats(-10, 10), min_size=1, max_size=3).map(np.asarray),
                          junk))
    counts = draw(st.one_of(st.lists(st.integers(0, 5), min_size=1, max_size=3).map(np.asarray),
                            junk))
    return call("check_clipping", fed.check_clipping, draw(spec_values), sums, counts,
                absent_allowed=draw(flag()))


# --------------------------------------------------------------------------- monitoring


def releases() -> st.SearchStrategy[Any]:
    rel = base_release()
    edits = [dataclasses.replace(rel, noise_scale=0.0),
             dataclasses.replace(rel, noise_scale=math.nan),
             dataclasses.replace(rel, value=math.inf),
             dataclasses.replace(rel, cohort=0),
             dataclasses.replace(rel, metric="other@1"),
             dataclasses.replace(rel, partition_version="v9"),
             dataclasses.replace(rel, value="0.5")]
    return arg(st.sampled_from([rel, rel, base_ratio_release()]), *edits)


sampling_sds = st.one_of(st.none(), st.none(), arg(number(0, 10)))


@st.composite
def compare_releases_calls(draw: st.DrawFn) -> Call:
    def check(cmp: Any) -> None:
        assert math.isfinite(cmp.threshold)
        assert cmp.threshold > 0
        assert cmp.fired == (abs(cmp.difference) > cmp.threshold)

    return call("compare_releases", fed.compare_releases, draw(releases()), draw(releases()),
                alpha=draw(alphas), sampling_sd=draw(sampling_sds), same_clients=draw(flag()),
                check=check)


def report_frames() -> st.SearchStrategy[Any]:
    return arg(mutated(base_regional()["loss"], protect=("geometry",)))


@st.composite
def compare_reports_calls(draw: st.DrawFn) -> Call:
    def check(out: pd.DataFrame) -> None:
        assert (np.isfinite(out.threshold) & (out.threshold > 0)).all()
        assert (out.fired == (out.difference.abs() > out.threshold)).all()

    return call("compare_reports", fed.compare_reports, draw(report_frames()),
                draw(report_frames()), alpha=draw(alphas), sampling_sd=draw(sampling_sds),
                same_clients=draw(flag()), check=check)


@st.composite
def drift_calls(draw: st.DrawFn) -> Call:
    hist = draw(arg(mutated(base_history())))

    def check(out: pd.DataFrame) -> None:
        assert (out.threshold >= 0).all()
        assert (out.rounds >= 1).all()

    return call("drift", fed.drift, hist, window=draw(arg(number(3, 10, integer=True), 2)),
                alpha=draw(alphas), sampling_sd=draw(sampling_sds), same_clients=draw(flag()),
                check=check)


def incidents_check(out: Any) -> None:
    assert isinstance(out, list)
    assert all(isinstance(i, fed.Incident) and isinstance(str(i), str) for i in out)


@st.composite
def ratio_pinned_calls(draw: st.DrawFn) -> Call:
    return call("ratio_pinned_at_clip", fed.ratio_pinned_at_clip, draw(report_frames()),
                draw(arg(number(0.1, 20))), tolerance=draw(arg(number(0, 0.9))),
                check=incidents_check)


@st.composite
def suspicious_calls(draw: st.DrawFn) -> Call:
    return call("suspiciously_good_region", fed.suspiciously_good_region, draw(report_frames()),
                lower_is_better=draw(flag()), check=incidents_check)


@st.composite
def empty_buckets_calls(draw: st.DrawFn) -> Call:
    hist = base_histogram()
    edited = [dataclasses.replace(hist, values=np.array([math.nan, 1.0, 0.0])),
              dataclasses.replace(hist, values=np.array([1.0])),
              dataclasses.replace(hist, metric="other")]
    rels = draw(st.one_of(st.lists(arg(st.just(hist), *edited), max_size=5), junk))
    return call("persistently_empty_buckets", fed.persistently_empty_buckets, rels,
                rounds=draw(arg(number(1, 4, integer=True))),
                min_share=draw(arg(number(0, 1))), check=incidents_check)


@st.composite
def stale_clip_calls(draw: st.DrawFn) -> Call:
    return call("stale_clip_bound", fed.stale_clip_bound,
                draw(arg(st.just(base_histogram()))),
                draw(arg(st.just(HIST), fed.HistogramSpec("err", (1.0, 3.0)))),
                draw(arg(number(0.1, 100))), percentile=draw(percentiles),
                factor=draw(arg(number(0.1, 1))), check=incidents_check)


# --------------------------------------------------------------------------- privacy


@st.composite
def mechanism_calls(draw: st.DrawFn, kind: str) -> Call:
    cls = privacy.LaplaceMechanism if kind == "laplace" else privacy.GaussianMechanism
    return call(cls.__name__, cls, draw(epsilons), draw(arg(number(1e-3, 100))),
                discrete=draw(flag()))


mechanisms = st.sampled_from([
    privacy.LaplaceMechanism(1.0), privacy.LaplaceMechanism(0.5, 2.0, discrete=True),
    privacy.GaussianMechanism(0.5), privacy.GaussianMechanism(0.5, discrete=True)])
mech_inputs = st.one_of(
    st.lists(st.integers(-5, 5), max_size=4).map(np.asarray),
    st.lists(st.floats(-5, 5), max_size=4).map(np.asarray),
    st.floats(allow_nan=True, allow_infinity=True), junk)
sizes = arg(number(1, 10**6, integer=True), 0, -1)


@st.composite
def mechanism_method_calls(draw: st.DrawFn, method: str) -> Call:
    mech = draw(mechanisms)
    if method == "lattice_step":
        mech = privacy.LaplaceMechanism(1.0, discrete=draw(st.booleans()))
        return call("LaplaceMechanism.lattice_step", mech.lattice_step, draw(sizes))
    owner = type(mech).__name__
    fn = getattr(mech, method)
    if method in ("release", "simulate"):
        kwargs = {"rng": draw(arg(st.integers(0, 5)))} if method == "simulate" else {}
        return call(f"{owner}.{method}", fn, draw(mech_inputs), **kwargs)
    if method in ("accuracy", "error_bar"):
        return call(f"{owner}.{method}", fn, draw(sizes), draw(alphas))
    return call(f"{owner}.{method}", fn, draw(sizes))


@st.composite
def privacy_function_calls(draw: st.DrawFn, name: str) -> Call:
    fn = getattr(privacy, name)
    kinds = arg(st.sampled_from(privacy.NOISE_KINDS), "cauchy")
    scales = arg(number(1e-3, 100, exclude_low=True))
    if name in ("laplace_scale", "gaussian_sigma"):
        return call(name, fn, draw(arg(number(1e-3, 100))), draw(epsilons))
    if name == "epsilon_to_rho":
        return call(name, fn, draw(epsilons))
    if name == "rho_to_epsilon":
        rho = draw(epsilons)

        def check(eps: float) -> None:
            assert math.isfinite(eps)
            assert eps > 0, "a positive rho became zero epsilon"

        return call(name, fn, rho, draw(arg(number(1e-12, 0.5))), check=check)
    if name in ("mean_abs_error", "noise_std"):
        return call(name, fn, draw(kinds), draw(scales), draw(sizes))
    if name == "half_width":
        return call(name, fn, draw(kinds), draw(scales), draw(sizes), draw(alphas))
    if name == "scale_for_half_width":
        return call(name, fn, draw(kinds), draw(scales), draw(sizes), draw(alphas))
    if name == "tail_probability":
        return call(name, fn, draw(kinds), draw(scales), draw(arg(number(0, 100))),
                    draw(sizes))
    if name.startswith("release_"):
        return call(name, fn, draw(mech_inputs), draw(scales))
    assert name.startswith("simulate_")
    return call(name, fn, draw(mech_inputs), draw(scales),
                rng=draw(arg(st.integers(0, 5))))


@st.composite
def cadence_calls(draw: st.DrawFn, table: bool) -> Call:
    kwargs = {
        "sensitivity": draw(arg(number(0.1, 10))), "cohort": draw(sizes),
        "rounds_per_epoch": draw(arg(number(1, 50, integer=True))),
        "shift": draw(arg(number(0.01, 5))), "alpha": draw(alphas),
    }
    if draw(st.booleans()):
        kwargs["half_width"] = draw(arg(number(0.01, 5)))
    else:
        kwargs["epoch_budget"] = draw(epsilons)
    if table:
        every = draw(st.one_of(st.lists(arg(number(1, 8, integer=True)), max_size=3), junk))
        return call("cadence_table", privacy.cadence_table, every, **kwargs)
    return call("plan_cadence", privacy.plan_cadence,
                every=draw(arg(number(1, 8, integer=True))), **kwargs)


def described(structure: Any) -> None:
    assert isinstance(structure.describe(), str)
    assert structure.multiplier >= 1


@st.composite
def budget_calls(draw: st.DrawFn, name: str) -> Call:
    if name == "BudgetSplit":
        return call(name, privacy.BudgetSplit, draw(arg(number(0, 1))), draw(arg(number(0, 1))))
    if name == "BudgetSplit.allocate":
        return call(name, privacy.BudgetSplit().allocate, draw(epsilons))
    if name == "Single":
        return call(name, privacy.Single, draw(text()), check=described)
    if name == "Disjoint":
        return call(name, privacy.Disjoint, draw(text()), draw(sizes), check=described)
    if name == "Overlapping":
        return call(name, privacy.Overlapping, draw(text()), draw(sizes), draw(sizes),
                    calibrated=draw(flag()), check=described)
    if name == "PrivacyLoss":
        def check(loss: Any) -> None:
            zcdp = loss.as_zcdp()
            assert zcdp.kind == "zcdp"
            assert math.isfinite(zcdp.value)
            assert zcdp.value > 0 or loss.value == 0, "a positive loss became zero rho"

        return call(name, privacy.PrivacyLoss, draw(arg(st.sampled_from(["pure", "zcdp"]))),
                    draw(epsilons), check=check)
    assert name == "LineItem.parse"
    return call(name, privacy.LineItem.parse,
                draw(arg(st.sampled_from(["training", "evaluation.regional"]))))


structures = arg(st.sampled_from([privacy.Single("s"), privacy.Disjoint("d", 3)]))
epochs = arg(number(0, 3, integer=True))
line_items = arg(st.sampled_from(["training", "evaluation.global", "evaluation.regional",
                                  privacy.LineItem.TRAINING]), "marketing")
neighbours = arg(st.sampled_from(["replace", "add_remove"]), "add-remove", "both")


@st.composite
def ledger_calls(draw: st.DrawFn, method: str) -> Call:
    if method == "PrivacyLedger":
        def check(ledger: PrivacyLedger) -> None:
            assert ledger.epochs() == []
            assert isinstance(ledger.verify(), dict)
            assert len(ledger.borrows()) == 0
            ledger.close()

        return call(method, PrivacyLedger, draw(arg(st.just(":memory:"))),
                    epoch_budget=draw(maybe(epsilons)),
                    accounting=draw(maybe(arg(st.sampled_from(["pure", "zcdp"])))),
                    split=draw(maybe(arg(st.just(privacy.BudgetSplit())))),
                    timeout=draw(arg(number(0.1, 60))), read_only=draw(flag()), check=check)
    ledger = fresh_ledger() if draw(st.booleans()) else PrivacyLedger(
        ":memory:", epoch_budget=5.0, accounting="zcdp")
    name = method.split(".")[1]
    fn = getattr(ledger, name)
    if name == "spend":
        def check(charge: Any) -> None:
            assert charge.charged > 0, "a positive loss charged nothing"
            assert ledger.spent(charge.epoch) == charge.charged

        return call(method, fn, draw(epochs), draw(line_items), structure=draw(structures),
                    who=draw(text()), what=draw(text()), why=draw(text()),
                    epsilon=draw(maybe(epsilons)), rho=draw(st.one_of(st.none(), st.none(),
                                                                     epsilons)),
                    round_index=draw(maybe(epochs)), release_id=draw(maybe(text())),
                    neighbours=draw(neighbours), check=check)
    if name == "check_charge":
        def unchanged(_: None) -> None:
            assert ledger.audit().empty, "check_charge recorded a charge"

        return call(method, fn, draw(epochs), draw(line_items),
                    structure=draw(maybe(structures)), epsilon=draw(maybe(epsilons)),
                    rho=draw(st.one_of(st.none(), st.none(), epsilons)),
                    charges=draw(arg(number(1, 50, integer=True), 0)), check=unchanged)
    if name == "borrow":
        return call(method, fn, draw(epochs), draw(epsilons), approver=draw(text()),
                    who=draw(text()), why=draw(text()), line_item=draw(line_items))
    if name in ("cap", "remaining"):
        return call(method, fn, draw(epochs), draw(line_items))
    if name == "spent":
        return call(method, fn, draw(epochs), draw(maybe(line_items)))
    if name == "summary":
        return call(method, fn, draw(epochs), delta=draw(maybe(arg(number(1e-12, 0.1)))))
    assert name == "audit"
    return call(method, fn, draw(maybe(epochs)))


@st.composite
def target_calls(draw: st.DrawFn, name: str) -> Call:
    if name == "ReleaseTarget":
        return call(name, privacy.ReleaseTarget, draw(arg(st.just(fresh_ledger()))),
                    draw(epochs), line_item=draw(maybe(line_items)), who=draw(text()),
                    why=draw(text()), round_index=draw(maybe(epochs)))
    if name == "Simulation":
        return call(name, privacy.Simulation, draw(arg(st.integers(0, 9))),
                    round_index=draw(maybe(epochs)))
    if name == "Unaccounted":
        return call(name, privacy.Unaccounted, draw(text()), round_index=draw(maybe(epochs)))
    owner, method = name.split(".")
    target = {"ReleaseTarget": lambda: privacy.ReleaseTarget(fresh_ledger(), 0),
              "Simulation": lambda: privacy.Simulation(rng=0),
              "Unaccounted": lambda: privacy.Unaccounted("fuzz")}[owner]()
    fn = getattr(target, method)
    if method == "check_affordable":
        return call(name, fn, default_line_item=draw(line_items),
                    structure=draw(maybe(structures)), epsilon=draw(maybe(epsilons)),
                    rho=draw(st.one_of(st.none(), st.none(), epsilons)),
                    charges=draw(arg(number(1, 50, integer=True), 0)))
    if method == "for_round":
        def same_kind(out: Any) -> None:
            assert type(out) is type(target), "for_round changed the kind of target"

        return call(name, fn, draw(maybe(epochs)), check=same_kind)
    if method == "charge":
        return call(name, fn, structure=draw(structures), epsilon=draw(epsilons),
                    what=draw(text()), default_line_item=draw(line_items),
                    neighbours=draw(neighbours), round_index=draw(maybe(epochs)))
    assert method == "add_noise"
    return call(name, fn, draw(arg(mechanisms)), draw(mech_inputs))


# --------------------------------------------------------------------------- geo


GOOD_CELLS = [h3.latlng_to_cell(0.5, 0.5, 5), h3.latlng_to_cell(0.5, 1.5, 5)]
cells = arg(st.sampled_from([GOOD_CELLS, GOOD_CELLS[:1], np.asarray(GOOD_CELLS)]),
            [0], ["zz"], [GOOD_CELLS[0], GOOD_CELLS[0]])
resolutions = arg(number(0, 6, integer=True), 16, -1)


@st.composite
def geo_calls(draw: st.DrawFn, name: str) -> Call:
    if name == "parse_cells":
        return call(name, geo.parse_cells, draw(cells))
    if name == "cells_to_str":
        return call(name, geo.cells_to_str, draw(cells))
    if name == "cell_polygons":
        return call(name, geo.cell_polygons, draw(cells))
    if name == "cell_parents":
        return call(name, geo.cell_parents, draw(cells), draw(resolutions))
    if name == "rollup_counts":
        counts = draw(st.one_of(st.lists(st.integers(0, 9), min_size=1, max_size=2), junk))
        return call(name, geo.rollup_counts, draw(cells), counts, draw(resolutions))
    part = boxes()
    if name == "Partition":
        return call(name, Partition.from_geodataframe, draw(arg(st.just(
            gpd.GeoDataFrame({"id": ["a"]}, geometry=[shapely.box(0, 0, 1, 1)], crs=4326)))),
            draw(arg(st.just("id"))), name=draw(text()))
    if name == "Partition.from_geodataframe":
        frame = gpd.GeoDataFrame({"id": ["a", "b"]}, crs=4326,
                                 geometry=[shapely.box(0, 0, 1, 1), shapely.box(1, 0, 2, 1)])
        def check(part: Partition) -> None:
            assert isinstance(part.summary(), str)
            assert part.adjacency().shape == (part.n_regions, part.n_regions)

        return call(name, Partition.from_geodataframe, draw(arg(mutated(frame))),
                    draw(arg(st.just("id"))), name=draw(text()), check=check)
    if name == "Partition.from_h3_cells":
        return call(name, Partition.from_h3_cells, draw(cells), name=draw(text()))
    if name == "Partition.from_h3_cover":
        area = gpd.GeoSeries([shapely.box(0.4, 0.4, 0.6, 0.6)], crs=4326)
        return call(name, Partition.from_h3_cover, draw(arg(st.just(area))),
                    draw(arg(number(0, 5, integer=True))),
                    containment=draw(arg(st.sampled_from(["center", "overlap", "full"]))),
                    name=draw(text()), max_cells=draw(arg(number(1, 10**4, integer=True))))
    coords = st.one_of(st.lists(st.floats(-1, 4), max_size=4), junk)
    if name == "Partition.assign":
        def check(a: Any) -> None:
            assert len(a.ids()) == len(a.positions)
            assert int(a.counts().sum()) + a.n_unassigned == len(a.positions)

        return call(name, part.assign, lon=draw(coords), lat=draw(coords), check=check)
    if name == "Partition.join":
        table = draw(arg(st.sampled_from([{"a": 1.0}, pd.Series({"a": 1.0, "b": 2.0}),
                                          pd.DataFrame({"v": [1.0]}, index=["c"])]),
                         {"zz": 1.0}, pd.Series([1.0, 2.0], index=["a", "a"])))
        return call(name, part.join, table)
    if name == "Partition.neighbours":
        return call(name, part.neighbours, draw(arg(st.sampled_from(["a", "b"]), "zz")))
    if name == "Partition.require_version":
        return call(name, part.require_version, draw(arg(st.just(part.version), "v0")),
                    draw(text()))
    if name == "Partition.coarsen":
        hexes = Partition.from_h3_cells(GOOD_CELLS)
        return call(name, hexes.coarsen, draw(resolutions))
    if name == "Partition.rollup":
        hexes = Partition.from_h3_cells(GOOD_CELLS)
        return call(name, hexes.rollup, draw(st.one_of(
            st.lists(st.floats(0, 5), min_size=2, max_size=2), junk)), draw(resolutions))
    if name == "Partition.polygons_to_cells":
        hexes = Partition.from_h3_cells(GOOD_CELLS)
        queries = gpd.GeoSeries([shapely.box(0.3, 0.3, 0.7, 0.7)], crs=4326)
        return call(name, hexes.polygons_to_cells, draw(arg(st.just(queries))),
                    draw(arg(st.sampled_from(["center", "overlap", "full"]))),
                    max_cells=draw(arg(number(1, 10**5, integer=True))))
    if name in ("Partition.to_file", "Partition.read_file"):
        path = os.path.join(TMP, draw(st.sampled_from(["p.parquet", "q.parquet"])))
        if name == "Partition.to_file":
            return call(name, part.to_file, draw(arg(st.just(path))))
        part.to_file(os.path.join(TMP, "p.parquet"))
        return call(name, Partition.read_file, draw(arg(st.just(path))),
                    expected_version=draw(maybe(arg(st.just(part.version)))))
    incidence = Partition.from_h3_cells(GOOD_CELLS).polygons_to_cells(
        gpd.GeoSeries([shapely.box(0.3, 0.3, 0.7, 0.7)], crs=4326))
    if name == "CellIncidence.answer":
        return call(name, incidence.answer, draw(st.one_of(
            st.lists(st.floats(0, 5), min_size=2, max_size=2), junk)))
    assert name == "CellIncidence.cell_indices"
    return call(name, incidence.cell_indices, draw(arg(number(0, 1, integer=True), 5)))


@st.composite
def fleet_calls(draw: st.DrawFn) -> Call:
    def check(fleet: gpd.GeoDataFrame) -> None:
        assert fleet.device_id.is_unique
        assert fleet.region_id.notna().all()

    return call("synthetic_fleet", datasets.synthetic_fleet,
                draw(arg(number(1, 60, integer=True), 0, -5, 10**12)),
                rng=draw(arg(st.integers(0, 9))), rural_share=draw(arg(number(0, 1))),
                partition=draw(maybe(arg(st.just(boxes())))), check=check)


def fleet_frame() -> pd.DataFrame:
    return pd.DataFrame({"device_id": np.arange(6), "lon": np.linspace(-100, -90, 6),
                         "lat": np.linspace(30, 40, 6), "heading_deg": np.linspace(0, 300, 6),
                         "region_id": list("aabbcc")})


@st.composite
def positioning_calls(draw: st.DrawFn) -> Call:
    k = draw(arg(number(1, 4, integer=True), 10**9))
    factors = arg(st.sampled_from([None, {"a": 2.0}, {"b": np.float32(1.5)}]),
                  {"a": "2"}, {"a": -1.0}, {"a": math.nan}, {"a": True})

    def check(out: pd.DataFrame) -> None:
        assert np.isfinite(out[["true_lon", "true_lat", "pred_lon", "pred_lat", "loss"]]
                           .to_numpy()).all()
        assert (out.loss >= 0).all()
        assert out.true_lat.abs().le(90).all()
        assert out.pred_lon.abs().le(180).all()

    return call("positioning_predictions", simulation.positioning_predictions,
                draw(arg(mutated(fleet_frame()))), examples_per_client=k,
                along_sd_m=draw(arg(number(0, 100))), across_sd_m=draw(arg(number(0, 100))),
                region_error_factor=draw(factors), sideways_drift=draw(factors),
                rng=draw(arg(st.integers(0, 9))), check=check)


# --------------------------------------------------------------------------- viz


def map_frame() -> gpd.GeoDataFrame:
    return base_regional()["loss"]


@st.composite
def choropleth_calls(draw: st.DrawFn) -> Call:
    import matplotlib.pyplot as plt

    report = draw(arg(mutated(map_frame(), protect=("geometry",))))
    ax = draw(st.one_of(st.none(), st.none(), st.builds(lambda: plt.subplots()[1]), junk))
    return call(
        "plot_uncertainty_choropleth", viz.plot_uncertainty_choropleth, report,
        column=draw(arg(st.sampled_from(["value", "cohort", "cv", "error_bar"]), "reliability",
                        "nope")),
        ax=ax, cmap=draw(arg(st.sampled_from(["viridis", "cividis"]), "nope")),
        legend=draw(flag()), annotate_cohort=draw(flag()),
        projection=draw(arg(st.sampled_from(["auto", None, "EPSG:3857"]), "EPSG:32601",
                            "nope", 4326)),
        vmin=draw(maybe(arg(number(-1, 1)))), vmax=draw(maybe(arg(number(-1, 3)))),
        robust=draw(flag()), show_reliability=draw(maybe(flag())),
        missing_kwds=draw(maybe(arg(st.sampled_from([{"color": "pink"}, {"hatch": "xx"}]),
                                    {"nope": 1}, {"label": 3}))),
        title=draw(maybe(text())),
        figsize=draw(arg(st.just((4.0, 3.0)), (0, 1), (1e6, 1), (1, 2, 3))))


@st.composite
def explore_calls(draw: st.DrawFn) -> Call:
    return call("explore_report", viz.explore_report,
                draw(arg(mutated(map_frame(), protect=("geometry",)))),
                column=draw(arg(st.sampled_from(["value", "cohort"]), "nope")))


def ts_history() -> pd.DataFrame:
    frame = base_history().copy()
    frame["error_bar"] = frame["error_bar"].fillna(0.1)
    return frame


@st.composite
def timeseries_calls(draw: st.DrawFn) -> Call:
    import matplotlib.pyplot as plt

    alerts = draw(maybe(arg(st.sampled_from([[1], {"a": [2]}, (1, 2)]), ["x"], {"a": "x"},
                            [math.inf])))
    return call("plot_region_timeseries", viz.plot_region_timeseries,
                draw(arg(mutated(ts_history()))),
                regions=draw(maybe(arg(st.sampled_from([["a"], ["a", "b"], "a"]), ["zz"], [],
                                       3))),
                alert_rounds=alerts, ncols=draw(arg(number(1, 4, integer=True), 0, 10**9)),
                sharey=draw(flag()), panel_size=draw(arg(st.just((2.0, 1.5)), (0, 1), ())),
                fig=draw(st.one_of(st.none(), st.none(), st.builds(plt.figure), junk)),
                title=draw(maybe(text())), legend=draw(flag()))


@st.composite
def cohort_label_calls(draw: st.DrawFn) -> Call:
    cohorts = draw(st.one_of(
        st.lists(st.one_of(st.integers(0, 10**6), st.just(math.nan)), max_size=4),
        st.lists(st.integers(0, 99), max_size=3).map(pd.Series), junk))
    return call("cohort_label", viz.cohort_label, cohorts,
                check=lambda label: label.startswith("n="))


@st.composite
def clip_plot_calls(draw: st.DrawFn) -> Call:
    table = fed.clip_tradeoff(np.arange(1.0, 21.0), epsilon=1.0, cohort=100)
    return call("plot_clip_tradeoff", viz.plot_clip_tradeoff, draw(arg(mutated(table))),
                ax=draw(st.one_of(st.none(), junk)))


@st.composite
def save_figure_calls(draw: st.DrawFn) -> Call:
    import matplotlib.pyplot as plt

    fig = draw(arg(st.builds(lambda: plt.subplots()[0])))
    path = draw(arg(st.sampled_from([os.path.join(TMP, "f.png"), os.path.join(TMP, "f.svg")]),
                    os.path.join(TMP, "missing", "f.png"), TMP,
                    os.path.join(TMP, "f.unknown")))
    return call("save_figure", viz.save_figure, fig, path, dpi=draw(arg(number(10, 100))),
                bbox_inches=draw(arg(st.sampled_from(["tight", None]))))


def _parquet_folder() -> str:
    """A folder of two small Parquet files sorted by client, and one file that is not Parquet."""
    folder = os.path.join(TMP, "parquet")
    if not os.path.isdir(folder):
        os.makedirs(folder)
        for i in range(2):
            pd.DataFrame({"client_id": [2 * i, 2 * i + 1], "loss": 1.0}).to_parquet(
                os.path.join(folder, f"part-{i}.parquet"), index=False)
        with open(os.path.join(TMP, "text.parquet"), "w") as out:
            out.write("not parquet")
    return folder


@st.composite
def read_parquet_calls(draw: st.DrawFn) -> Call:
    folder = _parquet_folder()
    path = draw(arg(st.sampled_from([folder, os.path.join(folder, "part-0.parquet"),
                                     os.path.join(folder, "*.parquet")]),
                    os.path.join(TMP, "text.parquet"), os.path.join(folder, "missing.parquet"),
                    [os.path.join(folder, "part-1.parquet")], TMP))
    columns = draw(maybe(arg(st.sampled_from([["loss"], ["client_id", "loss"]]),
                             ["nope"], "loss", [None])))
    index = draw(maybe(arg(st.just("client_id"), "nope")))
    return call("read_parquet", spatialdp.read_parquet, path, columns=columns,
                geometry=draw(flag()), index=index, check=check_read_parquet)


def check_read_parquet(frame: Any) -> None:
    rows = frame.compute()
    assert len(rows) in (2, 4)
    assert set(rows.columns) <= {"client_id", "loss"}


# --------------------------------------------------------------------------- registry


def strategy(factory: Callable[..., st.SearchStrategy[Call]], *args: Any
             ) -> Callable[[], st.SearchStrategy[Call]]:
    return lambda: factory(*args)


#: Public callable -> (strategy of calls, number of examples).
FUZZ: dict[str, tuple[Callable[[], st.SearchStrategy[Call]], int]] = {
    # specs
    "MetricSpec": (metric_spec_calls, 60),
    "HistogramSpec": (histogram_spec_calls, 60),
    "MetricSpec.clip": (spec_clip_calls, 30),
    "HistogramSpec.bucket_of": (bucket_of_calls, 30),
    **{name: (strategy(sensitivity_under_calls, name), 20) for name in (
        "MetricSpec.sensitivity_under", "HistogramSpec.sensitivity_under")},
    "MetricRegistry": (registry_calls, 30),
    "MetricRegistry.register": (register_calls, 30),
    "track_ratio_spec": (spec_helper("track_ratio_spec"), 30),
    "calibration_specs": (spec_helper("calibration_specs"), 30),
    "count_bucket_spec": (spec_helper("count_bucket_spec"), 30),
    "coverage_spec": (spec_helper("coverage_spec"), 30),
    # device
    "device_report": (device_report_calls, 60),
    # releases
    "aggregate_metric": (aggregate_metric_calls, 80),
    "aggregate_histogram": (aggregate_histogram_calls, 60),
    "regional_report": (regional_report_calls, 80),
    "round_health": (round_health_calls, 60),
    "release_coverage": (release_coverage_calls, 40),
    "MetricRelease.conf_int": (metric_release_conf_int_calls, 30),
    "HistogramRelease.conf_int": (histogram_release_conf_int_calls, 30),
    "RegionalReport.conf_int": (regional_conf_int_calls, 30),
    "RegionalReport.bounded": (regional_bounded_calls, 30),
    "RegionalReport.write": (regional_write_calls, 10),
    # helpers
    "calibrate_clip": (calibrate_clip_calls, 60),
    "clip_tradeoff": (clip_tradeoff_calls, 50),
    "min_cohort_for": (min_cohort_for_calls, 50),
    "predicted_error_bar": (predicted_error_bar_calls, 50),
    "secure_sum": (secure_sum_calls, 50),
    "check_clipping": (check_clipping_calls, 50),
    # monitoring
    "compare_releases": (compare_releases_calls, 50),
    "compare_reports": (compare_reports_calls, 40),
    "drift": (drift_calls, 40),
    "ratio_pinned_at_clip": (ratio_pinned_calls, 40),
    "suspiciously_good_region": (suspicious_calls, 40),
    "persistently_empty_buckets": (empty_buckets_calls, 40),
    "stale_clip_bound": (stale_clip_calls, 40),
    # privacy
    "LaplaceMechanism": (strategy(mechanism_calls, "laplace"), 40),
    "GaussianMechanism": (strategy(mechanism_calls, "gaussian"), 40),
    **{f"{owner}.{m}": (strategy(mechanism_method_calls, m), 15)
       for owner in ("LaplaceMechanism", "GaussianMechanism")
       for m in ("accuracy", "error_bar", "mean_abs_error", "release", "simulate", "std")},
    "LaplaceMechanism.lattice_step": (strategy(mechanism_method_calls, "lattice_step"), 20),
    **{name: (strategy(privacy_function_calls, name), 30) for name in (
        "laplace_scale", "gaussian_sigma", "epsilon_to_rho", "rho_to_epsilon",
        "mean_abs_error", "noise_std", "half_width", "scale_for_half_width",
        "tail_probability", "release_laplace", "release_gaussian", "release_discrete_laplace",
        "release_discrete_gaussian", "simulate_laplace", "simulate_gaussian",
        "simulate_discrete_laplace", "simulate_discrete_gaussian")},
    "plan_cadence": (strategy(cadence_calls, False), 40),
    "cadence_table": (strategy(cadence_calls, True), 30),
    **{name: (strategy(budget_calls, name), 30) for name in (
        "BudgetSplit", "BudgetSplit.allocate", "Single", "Disjoint", "Overlapping",
        "PrivacyLoss", "LineItem.parse")},
    **{name: (strategy(ledger_calls, name), 30) for name in (
        "PrivacyLedger", "PrivacyLedger.spend", "PrivacyLedger.borrow", "PrivacyLedger.cap",
        "PrivacyLedger.remaining", "PrivacyLedger.spent", "PrivacyLedger.summary",
        "PrivacyLedger.audit", "PrivacyLedger.check_charge")},
    **{name: (strategy(target_calls, name), 30) for name in (
        "ReleaseTarget", "Simulation", "Unaccounted",
        *(f"{t}.{m}" for t in ("ReleaseTarget", "Simulation", "Unaccounted")
          for m in ("check_affordable", "charge", "add_noise", "for_round")))},
    # geo
    **{name: (strategy(geo_calls, name), 25) for name in (
        "parse_cells", "cells_to_str", "cell_polygons", "cell_parents", "rollup_counts",
        "Partition", "Partition.from_geodataframe", "Partition.from_h3_cells",
        "Partition.from_h3_cover", "Partition.assign", "Partition.join",
        "Partition.neighbours", "Partition.require_version", "Partition.coarsen",
        "Partition.rollup", "Partition.polygons_to_cells", "Partition.to_file",
        "Partition.read_file", "CellIncidence.answer", "CellIncidence.cell_indices")},
    # datasets, simulation
    "synthetic_fleet": (fleet_calls, 20),
    "positioning_predictions": (positioning_calls, 50),
    # viz
    "plot_uncertainty_choropleth": (choropleth_calls, 25),
    "explore_report": (explore_calls, 10),
    "plot_region_timeseries": (timeseries_calls, 20),
    "cohort_label": (cohort_label_calls, 40),
    "plot_clip_tradeoff": (clip_plot_calls, 20),
    "save_figure": (save_figure_calls, 15),
    "read_parquet": (read_parquet_calls, 20),
    "read_report": (read_report_calls, 20),
}


# --------------------------------------------------------------------------- tests


SKIP.update({name: "fuzzed in tests/test_viz_fuzz.py (VIZ_FUZZ)" for name in (
    "HistogramSpec.describe", "MetricSpec.describe", "RegionalReport.column_names",
    "RegionalReport.explore", "RegionalReport.plot", "RegionalReport.to_long",
    "classify_report", "plot_bivariate", "plot_moe_companion", "plot_significance",
    "plotting_crs", "significance_table")})


def test_every_public_callable_is_fuzzed() -> None:
    check_census(public_callables(*PACKAGES), FUZZ, SKIP)


@pytest.mark.slow  # a long fuzz run (hypothesis, every public callable)
@pytest.mark.parametrize("name", sorted(FUZZ))
def test_only_spatialdp_errors(name: str) -> None:
    fuzz_only_spatialdp_errors(*FUZZ[name])


def test_junk_is_varied() -> None:
    """The shared junk covers the kinds the review found mishandled."""
    kinds = {type(v) for v in JUNK}
    assert {bool, str, bytes, float, int, complex, list, tuple, dict, np.ndarray, pd.Series,
            pd.DataFrame, type(None)} <= kinds
    assert issubclass(spatialdp.InvalidInput, spatialdp.SpatialDPError)
