"""The device module: bounded per-client metrics, computed where the data are.

The server aggregates numbers, it never computes them: everything it would want
from raw examples is computed here, on the phone or vehicle, and leaves only as
bounded numbers, one row per client. The module is versioned on its own
(:data:`DEVICE_MODULE_VERSION`, recorded with every report): the clipping that
makes each release accountable happens here and cannot be checked from the
server.

Input is one row per example with a ``client_id`` column (a simulation holds
many clients in one frame; a device holds one). Every function is vectorised
over clients and examples, and its output does not depend on the order of the
rows. The columns read:

=====================  ======================================================
``client_id``          the client (any sortable ids; output is sorted by it)
``loss``               per-example loss, for :func:`clipped_mean_loss`
``true_geometry``,     true and predicted positions as Point columns with a
``pred_geometry``      CRS, or as ``true_lon``, ``true_lat``, ``pred_lon``,
                       ``pred_lat`` columns in EPSG:4326
``heading_deg``        direction of travel, degrees clockwise from north
``error``              per-example error for the histogram (default: the
                       position error in metres when positions are given)
``p_pred``, ``outcome``  predicted probability and observed 0/1 outcome
=====================  ======================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from spatialdp._clients import (
    CLIENT_COLUMN,
    IntArray,
    check_examples_frame,
    check_same_length,
    client_codes,
)
from spatialdp._dask_frames import is_dask
from spatialdp._validation import check_instance, check_text
from spatialdp.exceptions import InvalidInput
from spatialdp.federated._checks import (
    MAX_CALIBRATION_BUCKETS,
    MAX_COVERAGE_CELLS,
    FloatArray,
    _positive_int,
    _refuse_rows,
)
from spatialdp.federated._geometry import (
    clipped_ratio,
    decompose_errors,
    finite_column,
    has_positions,
    positions_from_frame,
    positive_number,
    track_errors,
)
from spatialdp.federated.client_reports import (
    DEVICE_SPECS,
    PARTITION_VERSION,
    REGION_ID,
    client_regions,
    constant_tag,
    spec_tag,
)
from spatialdp.federated.coverage import CellCoverage, _coverage, coverage
from spatialdp.federated.device_specs import (
    DEFAULT_COUNT_EDGES,
    _count_edges,
    calibration_specs,
    count_bucket_spec,
    coverage_spec,
    track_ratio_spec,
)
from spatialdp.federated.metrics import HistogramSpec, MetricSpec
from spatialdp.geo.partition import Partition

__all__ = [
    "DEVICE_MODULE_VERSION",
    "CellCoverage",
    "along_across_rmse",
    "calibration_by_bucket",
    "calibration_specs",
    "clipped_mean_loss",
    "clipped_ratio",
    "count_bucket_spec",
    "coverage",
    "coverage_spec",
    "device_report",
    "error_histogram",
    "sample_count_bucket",
    "track_errors",
    "track_ratio_spec",
]

#: Version of the on-device computation, recorded with every report.
DEVICE_MODULE_VERSION = "1.0"



# --------------------------------------------------------------------------- helpers


def _spec(value: Any, name: str, kind: type[MetricSpec] | type[HistogramSpec]) -> Any:
    """Return ``value`` if it is a spec of ``kind`` (``None`` passes: the metric is off)."""
    if value is None:
        return None
    return check_instance(value, name, kind, f"pass a {kind.__name__} or None")


def _partition(value: Any, name: str) -> Partition | None:
    if value is None:
        return None
    return check_instance(value, name, Partition,
                          "pass a Partition (e.g. spatialdp.datasets.us_states_partition()) "
                          "or None")


def _group_mean(codes: IntArray, values: FloatArray, n_clients: int) -> FloatArray:
    totals = np.bincount(codes, weights=values, minlength=n_clients)
    return totals / np.bincount(codes, minlength=n_clients)


# --------------------------------------------------------------------------- loss


def clipped_mean_loss(frame: pd.DataFrame, spec: MetricSpec, loss_column: str = "loss"
                      ) -> pd.Series:
    """Per-client mean of the per-example loss, each example clipped into the spec.

    Each example is clipped to ``[spec.clip_low, spec.clip_high]`` before the
    mean, so the mean lies in the range too. Clipping the per-client mean
    instead would bound it equally well; clipping each example is chosen because
    then one pathological example (a loss of 1e6 the seed warns about) moves its
    client's value by at most ``sensitivity / n`` instead of pinning the client at
    the clip, and a client's value is an ordinary mean of bounded numbers. The
    price: examples above the bound are clipped in every client, so calibrate
    ``clip_high`` on held-out per-EXAMPLE losses.

    Returns
    -------
    pandas.Series
        Named ``spec.name``, indexed by sorted ``client_id``.

    Examples
    --------
    >>> frame = pd.DataFrame({"client_id": ["a", "a", "b"], "loss": [1.0, 50.0, 0.5]})
    >>> clipped_mean_loss(frame, MetricSpec("loss", 0.0, 2.0)).to_dict()
    {'a': 1.5, 'b': 0.5}
    """
    _spec(spec, "spec", MetricSpec)
    if spec is None:
        raise InvalidInput("spec=None: clipped_mean_loss needs the MetricSpec to clip into")
    check_examples_frame(frame, [CLIENT_COLUMN, check_text(loss_column, "loss_column")],
                   "clipped_mean_loss")
    codes, clients = client_codes(frame[CLIENT_COLUMN])
    mean = _mean_loss(codes, clients.size, finite_column(frame[loss_column], loss_column), spec)
    return pd.Series(mean, index=clients, name=spec.name)


def _mean_loss(codes: IntArray, n_clients: int, loss: FloatArray, spec: MetricSpec
               ) -> FloatArray:
    mean = _group_mean(codes, spec.clip(loss), n_clients)
    return np.clip(mean, spec.clip_low, spec.clip_high)  # float rounding stays in range


# --------------------------------------------------------------------------- along/across


def _track_by_client(codes: IntArray, n_clients: int, along: FloatArray, across: FloatArray,
                     ratio_clip: float) -> tuple[FloatArray, FloatArray, FloatArray,
                                                 NDArray[np.bool_]]:
    usable = np.isfinite(along)  # NaN: the example was not on a road
    counts = np.bincount(codes[usable], minlength=n_clients)
    present = counts > 0
    safe = np.maximum(counts, 1)
    along_rmse = np.sqrt(np.bincount(codes[usable], weights=along[usable] ** 2,
                                     minlength=n_clients) / safe)
    across_rmse = np.sqrt(np.bincount(codes[usable], weights=across[usable] ** 2,
                                      minlength=n_clients) / safe)
    return along_rmse, across_rmse, clipped_ratio(across_rmse, along_rmse, ratio_clip), present


def along_across_rmse(
    frame: pd.DataFrame,
    *,
    ratio_clip: float = 10.0,
    roads: Any = None,
    heading_column: str = "heading_deg",
    metric_crs: Any = None,
    max_road_distance: float = 50.0,
) -> pd.DataFrame:
    """Per-client along-track RMSE, across-track RMSE and their clipped ratio.

    The ratio ``across / along`` is clipped to ``[0, ratio_clip]`` (see
    :func:`clipped_ratio`: along RMSE ~ 0 gives the clip). The RMSEs are NOT
    bounded: they stay on the device unless clipped with a spec (see
    :func:`device_report`). A client with no usable example (with roads: none
    within ``max_road_distance``) is not in the output. Parameters as in
    :func:`track_errors`.

    Returns
    -------
    DataFrame
        ``along_rmse``, ``across_rmse``, ``ratio``, indexed by sorted ``client_id``.

    Examples
    --------
    >>> frame = pd.DataFrame({"client_id": ["a", "a"], "true_lon": [10.0, 10.0],
    ...                       "true_lat": [50.0, 50.0], "pred_lon": [10.0, 10.0],
    ...                       "pred_lat": [50.00003, 49.99997], "heading_deg": [90.0, 90.0]})
    >>> along_across_rmse(frame).round(2).to_dict("records")
    [{'along_rmse': 0.0, 'across_rmse': 3.34, 'ratio': 10.0}]
    """
    check_examples_frame(frame, [CLIENT_COLUMN], "along_across_rmse")
    codes, clients = client_codes(frame[CLIENT_COLUMN])
    errors = track_errors(frame, roads=roads, heading_column=heading_column,
                          metric_crs=metric_crs, max_road_distance=max_road_distance)
    along, across, ratio, present = _track_by_client(
        codes, clients.size, errors.along.to_numpy(), errors.across.to_numpy(), ratio_clip)
    return pd.DataFrame({"along_rmse": along, "across_rmse": across, "ratio": ratio},
                        index=clients)[present]


# --------------------------------------------------------------------------- histogram


def error_histogram(errors: ArrayLike, client_ids: ArrayLike, spec: HistogramSpec
                    ) -> tuple[FloatArray, pd.Index]:
    """Per-client fixed-edge histogram, its L1 mass capped at ``spec.mass_cap``.

    A client's histogram is its counts, scaled down to total mass ``mass_cap``
    when it holds more: with the default cap of 1 every client adds a
    distribution; with a larger cap a light client keeps its counts (it is not
    inflated) and a heavy one cannot outweigh it. Replacing one client moves the
    summed histogram by at most ``2 * mass_cap`` in L1 (``spec.sensitivity``).

    Returns
    -------
    histograms : numpy.ndarray, shape (n_clients, spec.n_buckets)
    client_ids : pandas.Index
        The rows' clients, sorted.

    Examples
    --------
    >>> spec = HistogramSpec("abs_error_m", edges=(1.0, 5.0), mass_cap=2.0)
    >>> hist, clients = error_histogram([0.5, 3, 3, 9, 0.5], ["a", "a", "a", "a", "b"], spec)
    >>> hist.tolist(), list(clients)
    ([[0.5, 1.0, 0.5], [1.0, 0.0, 0.0]], ['a', 'b'])
    """
    if _spec(spec, "spec", HistogramSpec) is None:
        raise InvalidInput("spec=None: error_histogram needs the HistogramSpec of its buckets")
    codes, clients = client_codes(client_ids)
    values = finite_column(np.asarray(errors).ravel(), "errors")
    check_same_length(values, codes, "errors")
    return _histograms(codes, clients.size, values, spec), clients


def _histograms(codes: IntArray, n_clients: int, values: FloatArray, spec: HistogramSpec
                ) -> FloatArray:
    k = spec.n_buckets
    counts = np.bincount(codes * k + spec.bucket_of(values), minlength=n_clients * k)
    counts = counts.reshape(n_clients, k).astype(np.float64)
    scale = np.minimum(1.0, spec.mass_cap / counts.sum(axis=1))
    return counts * scale[:, None]


# --------------------------------------------------------------------------- calibration


def calibration_by_bucket(p_pred: ArrayLike, outcome: ArrayLike, client_ids: ArrayLike,
                          n_buckets: int = 5) -> pd.DataFrame:
    """Per client and confidence bucket: mean predicted, mean outcome, gap, presence.

    Bucket ``b`` holds predictions in ``[b / n, (b + 1) / n)`` (1.0 in the last).
    ``cal_gap_b`` = mean predicted - mean outcome, in ``[-1, 1]``; positive means
    over-confident. A bucket the client has no example in gets 0 in its mean and
    gap columns and ``cal_present_b = 0``, so summing clients' rows gives the
    bucket's gap total over the clients that have examples there (divide by the
    summed presence). Every column is bounded: means and presence in ``[0, 1]``.

    Returns
    -------
    DataFrame
        ``cal_pred_b``, ``cal_outcome_b``, ``cal_gap_b``, ``cal_present_b`` for
        ``b = 0 .. n_buckets - 1``, indexed by sorted ``client_id``.

    Examples
    --------
    >>> cal = calibration_by_bucket([0.9, 0.9, 0.1], [0, 1, 0], ["a", "a", "a"], n_buckets=2)
    >>> cal.loc["a", ["cal_gap_0", "cal_gap_1", "cal_present_1"]].round(2).tolist()
    [0.1, 0.4, 1.0]
    """
    n = _positive_int(n_buckets, "n_buckets", high=MAX_CALIBRATION_BUCKETS)
    codes, clients = client_codes(client_ids)
    p = finite_column(np.asarray(p_pred).ravel(), "p_pred")
    y = finite_column(np.asarray(outcome).ravel(), "outcome", allow_bool=True)
    check_same_length(p, codes, "p_pred")
    check_same_length(y, codes, "outcome")
    return _calibration(codes, clients, p, y, n)


def _calibration(codes: IntArray, clients: pd.Index, p: FloatArray, y: FloatArray, n: int
                 ) -> pd.DataFrame:
    _refuse_rows((p < 0) | (p > 1), InvalidInput, lambda first: (
        f"p_pred {p[first]} at row {first} is outside [0, 1]; give probabilities "
        "(apply the sigmoid/softmax first)"
    ))
    _refuse_rows((y != 0) & (y != 1), InvalidInput, lambda first: (
        f"outcome {y[first]} at row {first} is not 0 or 1; give the observed binary outcome"
    ))
    cell = codes * n + np.minimum((p * n).astype(np.int64), n - 1)
    size = clients.size * n
    count = np.bincount(cell, minlength=size).reshape(clients.size, n)
    safe = np.maximum(count, 1)
    mean_p = np.bincount(cell, weights=p, minlength=size).reshape(clients.size, n) / safe
    mean_y = np.bincount(cell, weights=y, minlength=size).reshape(clients.size, n) / safe
    parts = {
        "cal_pred": np.clip(mean_p, 0.0, 1.0),
        "cal_outcome": mean_y,
        "cal_gap": np.clip(mean_p - mean_y, -1.0, 1.0),
        "cal_present": (count > 0).astype(np.int64),
    }
    return pd.DataFrame(
        {f"{name}_{b}": values[:, b] for name, values in parts.items() for b in range(n)},
        index=clients,
    )


# --------------------------------------------------------------------------- counts


def sample_count_bucket(client_ids: ArrayLike, edges: Sequence[int] = DEFAULT_COUNT_EDGES
                        ) -> pd.Series:
    """Each client's number of examples as a bucket index, never the exact count.

    An exact count fingerprints a small client; the aggregate only needs the
    bucket. ``edges`` are the buckets' lower bounds, starting at 1: bucket ``i``
    holds ``edges[i] <= count < edges[i + 1]`` and the last one everything from
    ``edges[-1]`` up. The index is bounded by ``len(edges) - 1``.

    Examples
    --------
    >>> ids = ["a"] * 12 + ["b"] * 3
    >>> sample_count_bucket(ids).to_dict()
    {'a': 1, 'b': 0}
    """
    lower = _count_edges(edges)
    codes, clients = client_codes(client_ids)
    return pd.Series(_count_buckets(codes, clients.size, lower), index=clients,
                     name="count_bucket")


def _count_buckets(codes: IntArray, n_clients: int, lower: FloatArray) -> IntArray:
    counts = np.bincount(codes, minlength=n_clients)
    return (np.searchsorted(lower, counts, side="right") - 1).astype(np.int64)


# --------------------------------------------------------------------------- report


def device_report(
    examples: pd.DataFrame | Any,
    *,
    loss_spec: MetricSpec | None = None,
    hist_spec: HistogramSpec | None = None,
    ratio_clip: float = 10.0,
    rmse_spec: MetricSpec | None = None,
    roads: Any = None,
    metric_crs: Any = None,
    max_road_distance: float = 50.0,
    partition: Partition | None = None,
    coverage_partition: Partition | None = None,
    max_cells: int = 10,
    count_edges: Sequence[int] = DEFAULT_COUNT_EDGES,
    calibration_buckets: int = 5,
) -> pd.DataFrame | Any:
    """Everything a device reports: one row per client, bounded numbers only.

    Runs each metric whose inputs are present; a spec given without its input
    column is refused. The provenance travels in columns, so it survives
    ``pd.concat`` and files (see :mod:`spatialdp.federated.client_reports`): the index is
    ``client_id``; ``device_specs`` names the fingerprint of every spec the
    device clipped under (the server refuses to release a metric under another
    spec); with ``partition``, ``region_id`` (from the examples' ``region_id``
    column, one region per client) and ``partition_version``. Metric columns
    (every one bounded; ``attrs["bounds"]`` lists the bounds):

    - ``<loss_spec.name>``: :func:`clipped_mean_loss` of the ``loss`` column.
    - ``ratio`` in ``[0, ratio_clip]`` and ``track_present`` (0/1), from positions
      with ``heading_deg`` or ``roads``: :func:`along_across_rmse`. With roads, a
      client with no example near a road has ``track_present = 0`` and ratio 0,
      and the spec (:func:`track_ratio_spec`) has ``present="track_present"``:
      such a client leaves the ratio's cohort instead of pulling it towards 0.
    - ``along_rmse``, ``across_rmse``: only with ``rmse_spec``, clipped into it.
      The raw RMSEs are unbounded, so they never leave the device unclipped.
    - ``<hist_spec.name>_0 .. _k``: :func:`error_histogram` of the ``error``
      column, or of the position error in metres when there is none.
    - ``cal_pred_b``, ``cal_outcome_b``, ``cal_gap_b``, ``cal_present_b``: from
      ``p_pred`` and ``outcome`` (:func:`calibration_by_bucket`).
    - ``count_bucket``: :func:`sample_count_bucket`, always.
    - ``coverage_cells``: with ``coverage_partition``, the number of its regions
      the client has samples in, capped at ``max_cells`` (:func:`coverage` gives
      the indicator itself). Its version is ``attrs["coverage_partition_version"]``.

    ``attrs`` also records ``device_module_version`` and the spec keys. The metric
    CRS is not recorded: a UTM zone would locate the device.

    A Dask DataFrame of examples (``client_id`` a column, or the index; e.g.
    :func:`spatialdp.read_parquet` of files sorted by client) gives lazy client
    reports, the same rows as in memory: each client's examples are gathered
    first (without a shuffle when the divisions are known, checked on the
    data), then reported here on a worker (``docs/scale.md``). ``attrs`` do not
    travel through Dask; the columns carry the provenance.

    Examples
    --------
    >>> examples = pd.DataFrame({"client_id": ["a", "a", "b"], "loss": [0.5, 9.0, 1.0],
    ...                          "error": [0.2, 3.0, 0.7]})
    >>> report = device_report(examples, loss_spec=MetricSpec("loss", 0, 2),
    ...                        hist_spec=HistogramSpec("err", edges=(1.0,)))
    >>> list(report.columns)
    ['loss', 'err_0', 'err_1', 'count_bucket', 'device_specs']
    >>> report.loc["a", ["loss", "err_0", "err_1", "count_bucket"]].tolist()
    [1.25, 0.5, 0.5, 0.0]
    >>> report.attrs["device_module_version"]
    '1.0'

    The same call on a Dask DataFrame (lazy; one row per client however the
    examples are partitioned):

    >>> import dask.dataframe as dd
    >>> lazy = device_report(dd.from_pandas(examples, npartitions=2),
    ...                      loss_spec=MetricSpec("loss", 0, 2))
    >>> lazy.compute().sort_index()["loss"].to_dict()
    {'a': 1.25, 'b': 1.0}
    """
    if is_dask(examples):  # the in-memory report below, on each client's whole examples
        from spatialdp.federated._dask import device_report_on_dask

        return device_report_on_dask(examples, partial(
            device_report, loss_spec=loss_spec, hist_spec=hist_spec, ratio_clip=ratio_clip,
            rmse_spec=rmse_spec, roads=roads, metric_crs=metric_crs,
            max_road_distance=max_road_distance, partition=partition,
            coverage_partition=coverage_partition, max_cells=max_cells,
            count_edges=count_edges, calibration_buckets=calibration_buckets))
    check_examples_frame(examples, [CLIENT_COLUMN], "device_report")
    clip = positive_number(ratio_clip, "ratio_clip")
    lower_edges = _count_edges(count_edges)
    loss_spec = _spec(loss_spec, "loss_spec", MetricSpec)
    hist_spec = _spec(hist_spec, "hist_spec", HistogramSpec)
    rmse_spec = _spec(rmse_spec, "rmse_spec", MetricSpec)
    partition = _partition(partition, "partition")
    coverage_partition = _partition(coverage_partition, "coverage_partition")
    n_cal = _positive_int(calibration_buckets, "calibration_buckets",
                          high=MAX_CALIBRATION_BUCKETS)
    cap_cells = _positive_int(max_cells, "max_cells", high=MAX_COVERAGE_CELLS)
    codes, clients = client_codes(examples[CLIENT_COLUMN])
    n = clients.size
    columns: dict[str, ArrayLike] = {}
    bounds: dict[str, tuple[float, float]] = {}
    attrs: dict[str, Any] = {"device_module_version": DEVICE_MODULE_VERSION, "specs": {}}
    used: list[MetricSpec | HistogramSpec] = []

    def add(name: str, values: ArrayLike, low: float, high: float) -> None:
        columns[name], bounds[name] = values, (float(low), float(high))

    region_ids = None if partition is None else client_regions(examples, codes, n, partition)

    if loss_spec is not None:
        check_examples_frame(examples, ["loss"], "loss_spec=")
        add(loss_spec.name, _mean_loss(codes, n, finite_column(examples["loss"], "loss"),
                                       loss_spec), *loss_spec.value_range)
        attrs["specs"][loss_spec.name] = loss_spec.key
        used.append(loss_spec)

    along = across = distance = None
    positions = positions_from_frame(examples) if has_positions(examples) else None
    if positions is not None:
        heading = None
        if roads is None and "heading_deg" in examples.columns:
            heading = finite_column(examples["heading_deg"], "heading_deg")
        along, across, distance = decompose_errors(
            *positions, heading_deg=heading, roads=roads, metric_crs=metric_crs,
            max_road_distance=max_road_distance)
    if along is not None and across is not None:
        along_rmse, across_rmse, ratio, present = _track_by_client(codes, n, along, across,
                                                                   clip)
        add("ratio", np.where(present, ratio, 0.0), 0.0, clip)
        add("track_present", present.astype(np.int64), 0, 1)
        used.append(track_ratio_spec(clip, roads=roads is not None))
        if rmse_spec is not None:
            for name, rmse in (("along_rmse", along_rmse), ("across_rmse", across_rmse)):
                add(name, np.where(present, rmse_spec.clip(rmse), rmse_spec.clip_low),
                    *rmse_spec.value_range)
                used.append(replace(rmse_spec, name=name))
            attrs["specs"]["rmse"] = rmse_spec.key
    elif roads is not None or rmse_spec is not None:
        raise InvalidInput(
            "roads= and rmse_spec= need true and predicted positions (and, without roads, a "
            f"'heading_deg' column); the frame has {list(examples.columns)[:10]}"
        )

    if hist_spec is not None:
        if "error" in examples.columns:
            source = finite_column(examples["error"], "error")
        elif distance is not None:
            source = distance
        else:
            raise InvalidInput(
                "hist_spec= needs an 'error' column or true and predicted positions; the "
                f"frame has {list(examples.columns)[:10]}"
            )
        hist = _histograms(codes, n, source, hist_spec)
        for b in range(hist_spec.n_buckets):
            add(f"{hist_spec.name}_{b}", hist[:, b], *hist_spec.value_range)
        attrs["specs"][hist_spec.name] = hist_spec.key
        used.append(hist_spec)

    if {"p_pred", "outcome"} <= set(examples.columns):
        cal = _calibration(codes, clients, finite_column(examples["p_pred"], "p_pred"),
                           finite_column(examples["outcome"], "outcome", allow_bool=True),
                           n_cal)
        for name in cal.columns:
            add(name, cal[name].to_numpy(), -1.0 if name.startswith("cal_gap") else 0.0, 1.0)
        used.extend(calibration_specs(n_cal))

    add("count_bucket", _count_buckets(codes, n, lower_edges), 0, lower_edges.size - 1)
    used.append(count_bucket_spec(count_edges))

    if coverage_partition is not None:
        if positions is None:
            raise InvalidInput(
                "coverage_partition= needs true positions to find the covered regions")
        place = coverage_partition.assign(lon=positions[0], lat=positions[1]).positions
        cov = _coverage(codes, clients, place, coverage_partition, cap_cells)
        add("coverage_cells", cov.cells_per_client, 0, cov.max_cells)
        used.append(coverage_spec(cov.max_cells))
        attrs["coverage_partition_version"] = cov.partition_version

    report = pd.DataFrame(columns, index=clients)
    report[DEVICE_SPECS] = constant_tag(spec_tag(used), n)
    if partition is not None and region_ids is not None:
        report[REGION_ID] = region_ids
        report[PARTITION_VERSION] = constant_tag(partition.version, n)
    report.attrs.update(attrs, bounds=bounds)
    return report
