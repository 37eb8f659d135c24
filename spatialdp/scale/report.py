"""The regional report on Dask: exact sums on the workers, noise once on the driver.

Per-example predictions -> :func:`device_report` (one row per client, the
library's own :func:`spatialdp.federated.device_report` run on whole clients)
-> :func:`regional_report`: each worker validates its partition of client
reports with the library's :func:`~spatialdp.federated._tags.read_reports` and
reduces it to per-region sums and counts with
:class:`~spatialdp.federated.group_sums.Groups`; those bounded arrays (regions x
metrics) are added up in a tree; the driver then plans the release exactly as
:func:`spatialdp.federated.regional_report` does and hands it to the one
release pipeline (:func:`~spatialdp.privacy.pipeline.run_release`): one
ledger charge, one noise draw per region, the same floors, suppression and
error bars. No worker ever draws noise or touches the ledger.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp._validation import check_flag, fail
from spatialdp.exceptions import InvalidInput
from spatialdp.federated._clients import CLIENT_COLUMN
from spatialdp.federated._tags import read_reports, refuse_non_finite
from spatialdp.federated.device import device_report as _device_report
from spatialdp.federated.group_sums import Groups
from spatialdp.federated.metrics import HistogramSpec, MetricSpec
from spatialdp.federated.regional import RegionalReport, RegionalRequest
from spatialdp.geo.partition import Partition
from spatialdp.privacy.budget import Neighbours
from spatialdp.privacy.target import Accounting
from spatialdp.scale.frames import compute, require_frame

__all__ = ["RegionTotals", "device_report", "region_totals", "regional_report"]

Spec = MetricSpec | HistogramSpec

#: Names (deterministic expression tokens) of the client-report collections built by
#: device_report after a shuffle by client_id: each client sits in exactly one of
#: their partitions, so the cross-partition id count is known to pass and is skipped.
_ONE_PARTITION_PER_CLIENT: set[str] = set()


@dataclass
class RegionTotals:
    """What one partition (or a sum of partitions) of client reports ships to the driver.

    Bounded: its size is regions x metric columns, whatever the number of
    clients. Exact per-region sums of the clients' clipped values, the clients
    per region, and the number of rows whose values were not finite.
    """

    n_rows: int
    counts: NDArray[np.int64]
    sums: dict[str, NDArray[np.float64]]
    present: dict[str, NDArray[np.float64]]
    non_finite: dict[str, int]

    def __add__(self, other: RegionTotals) -> RegionTotals:
        return RegionTotals(
            self.n_rows + other.n_rows, self.counts + other.counts,
            {k: v + other.sums[k] for k, v in self.sums.items()},
            {k: v + other.present[k] for k, v in self.present.items()},
            {k: v + other.non_finite[k] for k, v in self.non_finite.items()})


def _zero(specs: Sequence[Spec], n_regions: int) -> RegionTotals:
    def shape(spec: Spec) -> tuple[int, ...]:
        return (n_regions, spec.n_buckets) if isinstance(spec, HistogramSpec) else (n_regions,)

    return RegionTotals(
        0, np.zeros(n_regions, dtype=np.int64),
        {s.name: np.zeros(shape(s)) for s in specs},
        {s.name: np.zeros(n_regions) for s in specs
         if isinstance(s, MetricSpec) and s.present is not None},
        {s.name: 0 for s in specs})


def region_totals(reports: pd.DataFrame, specs: Sequence[Spec], partition: Partition
                  ) -> RegionTotals:
    """Validate one partition of client reports and reduce it to per-region sums (on a worker).

    The same checks as the in-memory release (:func:`read_reports`: ids,
    device specs, partition version, region ids, presence flags) and the same
    sums (:class:`Groups`).

    Examples
    --------
    >>> from spatialdp.datasets import us_states_partition
    >>> from spatialdp.federated import device_report
    >>> states = us_states_partition()
    >>> spec = MetricSpec("loss", 0.0, 4.0)
    >>> examples = pd.DataFrame({"client_id": [1, 2, 3], "region_id": ["CA", "CA", "NV"],
    ...                          "loss": [1.0, 2.0, 3.0]})
    >>> totals = region_totals(device_report(examples, loss_spec=spec, partition=states),
    ...                        [spec], states)
    >>> int(totals.counts.sum()), float(totals.sums["loss"].sum())
    (3, 6.0)
    """
    if len(reports) == 0:  # a shuffle or a filter leaves empty partitions: they add nothing
        return _zero(specs, partition.n_regions)
    table = read_reports(reports, specs, partition)
    assert table.positions is not None
    groups = Groups(table.positions, partition.n_regions)
    sums, present, bad = {}, {}, {}
    for spec in specs:
        values = table.values(spec)
        sums[spec.name] = groups.sum(values)
        finite = np.isfinite(sums[spec.name]).all()
        bad[spec.name] = 0 if finite else int(
            (~np.isfinite(values)).reshape(len(values), -1).any(axis=1).sum())
        if isinstance(spec, MetricSpec):
            flags = table.presence(spec)
            if flags is not None:
                present[spec.name] = groups.sum(flags)
    return RegionTotals(len(reports), groups.counts, sums, present, bad)


def _add(parts: list[RegionTotals]) -> RegionTotals:
    total = parts[0]
    for part in parts[1:]:
        total = total + part
    return total


def _tree_sum(items: list[Any], fan_in: int = 8) -> Any:
    """Add delayed totals in a tree of fan-in 8: the driver receives one bounded object."""
    from dask import delayed

    while True:  # at least one level: a single item is still made a Delayed
        items = [delayed(_add, pure=True)(items[i:i + fan_in])
                 for i in range(0, len(items), fan_in)]
        if len(items) == 1:
            return items[0]


def _ids(reports: pd.DataFrame) -> pd.Series:
    ids = reports[CLIENT_COLUMN] if CLIENT_COLUMN in reports.columns else reports.index
    return pd.Series(np.asarray(ids), name=CLIENT_COLUMN)


def _distinct_ids(reports: Any, parts: list[Any]) -> Any:
    """Lazy count of distinct client ids over all partitions, or None when it is implied.

    With ``client_id`` as the index and known divisions each id lives in one
    partition, and :func:`read_reports` on each partition already proves
    uniqueness. Otherwise the ids are counted in a hash reduction on the
    workers, from the same partitions as the sums (computed once): only the
    count reaches the driver.
    """
    if reports.index.name == CLIENT_COLUMN and reports.known_divisions:
        return None
    if reports._name in _ONE_PARTITION_PER_CLIENT:
        return None
    if CLIENT_COLUMN not in reports.columns and reports.index.name != CLIENT_COLUMN:
        return None  # read_reports refuses each partition with the in-memory message
    import dask.dataframe as dd
    from dask import delayed

    meta = _ids(reports._meta)
    ids = dd.from_delayed([delayed(_ids, pure=True)(p) for p in parts], meta=meta,
                          verify_meta=False)
    return ids.nunique().to_delayed()


def _repeated_ids(reports: Any) -> Any:
    """Return a lazy repeated id (computed only to word a refusal)."""
    ids = (reports[CLIENT_COLUMN] if CLIENT_COLUMN in reports.columns
           else reports.index.to_series())
    counts = ids.value_counts()
    return counts[counts > 1].head(1, npartitions=-1, compute=False).index


def regional_report(
    client_reports: Any,
    partition: Partition,
    metrics: Sequence[MetricSpec | HistogramSpec],
    *,
    epsilon: float | Mapping[str, float],
    target: Accounting,
    min_cohort: int = 50,
    alpha: float = 0.05,
    progress: bool = False,
    neighbours: Neighbours = "replace",
) -> RegionalReport:
    """Private per-region metrics from a Dask DataFrame of client reports: one charge, one noise.

    The same release as :func:`spatialdp.federated.regional_report` (same
    arguments, checks, refusals, floors, error bars, ledger entry), computed on
    Dask: the workers validate and sum their partitions, the driver adds noise
    once. A client id repeated across partitions is refused, as a repeat is in
    memory. With ``target=Simulation(rng=s)`` and sums that are exact in
    floating point (or equal for any order of addition) the result is
    bit-identical to the in-memory report with the same seed.

    Parameters
    ----------
    client_reports : dask.dataframe.DataFrame
        Client reports (e.g. from :func:`device_report`): ``client_id`` (index or
        column), ``region_id``, ``partition_version``, ``device_specs``, metrics.
    partition, metrics, epsilon, target, min_cohort, alpha, neighbours
        As in :func:`spatialdp.federated.regional_report`.
    progress : bool, default False
        Print a progress bar while the workers run.

    Returns
    -------
    RegionalReport

    Raises
    ------
    InvalidInput, PartitionMismatch, ClippingFailure, BudgetExceeded
        Nothing is charged or published when any of them is raised.

    Examples
    --------
    >>> import dask.dataframe as dd
    >>> from spatialdp.datasets import synthetic_fleet, us_states_partition
    >>> from spatialdp.privacy import Simulation
    >>> states = us_states_partition()
    >>> fleet = synthetic_fleet(5_000, rng=1)
    >>> examples = pd.DataFrame({"client_id": fleet.device_id, "region_id": fleet.region_id,
    ...                          "loss": 1.5})
    >>> spec = MetricSpec("loss", 0.0, 4.0)
    >>> clients = device_report(dd.from_pandas(examples, npartitions=3), loss_spec=spec,
    ...                         partition=states)
    >>> report = regional_report(clients, states, [spec], epsilon=0.5, min_cohort=100,
    ...                          target=Simulation(rng=0))
    >>> report.epsilon_total, bool(abs(report["loss"].loc["CA", "value"] - 1.5) < 0.1)
    (0.5, True)
    """
    request = RegionalRequest.check(partition, metrics, epsilon, target, min_cohort, alpha,
                                    neighbours)
    show = check_flag(progress, "progress")
    reports = require_frame(client_reports, "client_reports")
    from dask import delayed

    specs = request.metrics
    spec_d, part_d = delayed(specs, pure=True), delayed(partition, pure=True)
    parts = reports.to_delayed()
    totals_d = _tree_sum([delayed(region_totals, pure=True)(chunk, spec_d, part_d)
                          for chunk in parts])
    distinct = _distinct_ids(reports, parts)
    if distinct is None:
        (totals,) = compute(totals_d, progress=show)
    else:
        totals, n_ids = compute(totals_d, distinct, progress=show)
        n = totals.n_rows - int(n_ids)
        if n:
            (first,) = compute(_repeated_ids(reports))
            raise InvalidInput(
                f"{CLIENT_COLUMN} has {n} repeated value{'s' if n > 1 else ''} across "
                f"partitions (first: {first.tolist()[0]!r}); one client, one row: drop or "
                "merge the repeats before the release")
    if totals.n_rows == 0:
        raise InvalidInput("the client reports are empty; there is nothing to release")
    return _release(totals, request)


def _release(totals: RegionTotals, request: RegionalRequest) -> RegionalReport:
    """Plan, charge once, draw once, publish: the in-memory release's own tail."""
    for spec in request.metrics:
        if not np.isfinite(totals.sums[spec.name]).all():
            # the in-memory wording: the count of bad clients, or an overflow
            refuse_non_finite(np.full(totals.non_finite[spec.name], np.nan)
                              if totals.non_finite[spec.name] else np.zeros(1), spec.key)
    return request.publish(Groups.of_totals(totals.counts),
                           lambda spec: totals.sums[spec.name],
                           lambda spec: totals.present.get(spec.name))


def _one_client_each(part: pd.DataFrame, kwargs: dict[str, Any], meta: pd.DataFrame
                     ) -> pd.DataFrame:
    if len(part) == 0:
        return meta
    if part.index.name == CLIENT_COLUMN:
        part = part.reset_index()
    return _device_report(part, **kwargs)


def device_report(examples: Any, **kwargs: Any) -> Any:
    """Client reports from a Dask DataFrame of per-example rows, lazily, one row per client.

    Runs :func:`spatialdp.federated.device_report` on whole clients: when
    ``client_id`` is the index with known divisions (Parquet sorted by client,
    read with ``index="client_id"``) each client already sits in one partition;
    otherwise the rows are first shuffled by ``client_id`` (a client whose
    examples are spread over partitions is gathered, exactly as in memory,
    where one client's examples may be anywhere in the frame).

    Parameters
    ----------
    examples : dask.dataframe.DataFrame
        One row per example, ``client_id`` as a column or the index.
    **kwargs
        As :func:`spatialdp.federated.device_report` (``loss_spec``,
        ``partition``, ``hist_spec``, ...).

    Returns
    -------
    dask.dataframe.DataFrame
        Lazy client reports indexed by ``client_id``; pass them to
        :func:`regional_report`. ``attrs`` (bounds, module version) do not
        travel through Dask; the columns carry the provenance.

    Examples
    --------
    >>> import dask.dataframe as dd
    >>> examples = pd.DataFrame({"client_id": ["a", "b", "a"], "loss": [1.0, 3.0, 2.0]})
    >>> clients = device_report(dd.from_pandas(examples, npartitions=2),
    ...                         loss_spec=MetricSpec("loss", 0.0, 4.0))
    >>> clients.compute().sort_index()["loss"].to_dict()
    {'a': 1.5, 'b': 3.0}
    """
    frame = require_frame(examples, "examples")
    if frame.index.name == CLIENT_COLUMN and frame.known_divisions:
        grouped = frame
    elif CLIENT_COLUMN in frame.columns:
        grouped = frame.shuffle(on=CLIENT_COLUMN)
    elif frame.index.name == CLIENT_COLUMN:
        grouped = frame.reset_index().shuffle(on=CLIENT_COLUMN)
    else:
        raise fail("examples", f"columns {list(frame.columns)[:8]}", "have no client_id",
                   "give each example its client in a 'client_id' column or index")
    # The output's columns depend on the data's columns and the specs, not on the
    # values: run the device module on one real row of the first partition for the meta.
    sample = frame.partitions[0].head(1)
    if len(sample) == 0:
        sample = frame.head(1, npartitions=-1)
    if len(sample) == 0:
        raise InvalidInput(
            "the examples frame is empty; a client with no examples reports nothing: skip it")
    if sample.index.name == CLIENT_COLUMN:
        sample = sample.reset_index()
    meta = _device_report(sample, **kwargs).iloc[:0]
    meta.attrs.clear()
    out = grouped.map_partitions(partial(_one_client_each, kwargs=kwargs, meta=meta),
                                 meta=meta, align_dataframes=False)
    if grouped is not frame:
        _ONE_PARTITION_PER_CLIENT.add(out._name)
    return out
