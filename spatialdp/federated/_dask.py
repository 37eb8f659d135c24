"""The Dask paths of the device module and the regional report: exact sums on the workers.

:func:`spatialdp.federated.device_report` and
:func:`spatialdp.federated.regional_report` accept a Dask DataFrame and hand it
here. Per-example rows -> :func:`device_report_on_dask` (one row per client,
the in-memory device module run on whole clients) -> :func:`totals_on_dask`:
each worker validates its partition of client reports with the library's
:func:`~spatialdp.federated.client_reports.read_reports` and reduces it to per-region
sums and counts with :class:`~spatialdp.federated.group_sums.Groups`; those
bounded arrays (regions x metrics) are added up in a tree. The driver then
plans the release from the totals exactly as in memory
(:class:`~spatialdp.federated.regional.RegionalRequest`) and hands it to the
one release pipeline: one ledger charge, one noise draw per region. No worker
ever draws noise or touches the ledger.
"""

from __future__ import annotations

import operator
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp._clients import CLIENT_COLUMN, canonical_ids, id_kind, one_kind
from spatialdp._dask_frames import (
    Shared,
    _add,
    compute,
    first_rows,
    graph_results,
    parquet_source,
    require_frame,
    tree_sum,
    worker_threads,
)
from spatialdp._validation import check_flag, fail
from spatialdp.exceptions import InvalidInput
from spatialdp.federated.client_reports import read_reports, refuse_non_finite
from spatialdp.federated.group_sums import Groups
from spatialdp.federated.metrics import HistogramSpec, MetricSpec, Spec
from spatialdp.geo.partition import Partition

__all__ = ["RegionTotals", "device_report_on_dask", "region_totals", "totals_on_dask"]

#: ``report(examples)``: the in-memory device module with its settings bound, run on whole clients.
Reporter = Callable[..., pd.DataFrame]



@dataclass(frozen=True)
class _SortedRecipe:
    """How :func:`device_report_on_dask` made client reports from examples sorted by client.

    Every client is in exactly one partition of such reports by construction
    (checked on the data, see :func:`_edge_reports`), so the cross-partition id
    count is skipped; and :func:`totals_on_dask` reduces each partition of
    ``examples`` to region totals in the task that reports it
    (:func:`_fused_totals`), without building the reports' collection.
    """

    examples: Any
    report: Reporter
    meta: pd.DataFrame


#: The recipes of the client-report collections built by device_report_on_dask from examples
#: with known divisions, by collection name (a deterministic expression token); the oldest are
#: dropped beyond _MAX_RECIPES (a dropped one still computes, through its collection).
_SORTED_REPORTS: dict[str, _SortedRecipe] = {}
_MAX_RECIPES = 64


def _remember(name: str, recipe: _SortedRecipe) -> None:
    _SORTED_REPORTS.pop(name, None)
    _SORTED_REPORTS[name] = recipe
    while len(_SORTED_REPORTS) > _MAX_RECIPES:
        del _SORTED_REPORTS[next(iter(_SORTED_REPORTS))]


@dataclass
class RegionTotals:
    """What one partition (or a sum of partitions) of client reports ships to the driver.

    Bounded: its size is regions x metric columns (plus two ids per
    partition), whatever the number of clients. Exact per-region sums of the
    clients' clipped values, the clients per region, the number of rows whose
    values were not finite, and for the one-client-one-row checks each
    partition's smallest and largest client id and the kinds of id seen
    (``"integer"``, ``"string"``).
    """

    n_rows: int
    counts: NDArray[np.int64]
    sums: dict[str, NDArray[np.float64]]
    present: dict[str, NDArray[np.float64]]
    non_finite: dict[str, int]
    id_ranges: tuple[tuple[Any, Any], ...] = ()
    id_kinds: frozenset[str] = frozenset()

    def __add__(self, other: RegionTotals) -> RegionTotals:
        return RegionTotals(
            self.n_rows + other.n_rows, self.counts + other.counts,
            {k: v + other.sums[k] for k, v in self.sums.items()},
            {k: v + other.present[k] for k, v in self.present.items()},
            {k: v + other.non_finite[k] for k, v in self.non_finite.items()},
            self.id_ranges + other.id_ranges, self.id_kinds | other.id_kinds)


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

    The same checks as the in-memory release (:func:`read_reports`: ids and
    their type, device specs, partition version, region ids, presence flags)
    and the same sums (:class:`Groups`).

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
    kinds = frozenset([table.id_kind] if table.id_kind else [])
    return RegionTotals(len(reports), groups.counts, sums, present, bad,
                        (_id_range(table.client_ids),), kinds)


def _ids(reports: pd.DataFrame) -> pd.Series:
    ids = reports[CLIENT_COLUMN] if CLIENT_COLUMN in reports.columns else reports.index
    return pd.Series(np.asarray(ids), name=CLIENT_COLUMN)


def _distinct_ids(reports: Any, parts: list[Any]) -> Any:
    """Lazy count of distinct client ids over all partitions (a hash reduction on the workers).

    Computed from the same partitions as the sums (together, they are read
    once): only the count reaches the driver.
    """
    import dask.dataframe as dd
    from dask import delayed

    meta = _ids(reports._meta)
    ids = dd.from_delayed([delayed(_ids, pure=True)(p) for p in parts], meta=meta,
                          verify_meta=False)
    return ids.nunique().to_delayed()


def _count_upfront(reports: Any) -> bool:
    """Whether the distinct ids are counted with the sums (else the id ranges may prove it).

    Not for device_report's own output (one client, one partition by
    construction), nor for client reports indexed by ``client_id`` with known
    divisions: their partitions should hold disjoint id ranges, which the
    workers' smallest and largest ids show after the fact (divisions are a
    claim, not a proof: Parquet statistics put a client whose rows two files
    share on both sides of a boundary). Nor without ids: :func:`read_reports`
    refuses each partition with the in-memory message.
    """
    if reports._name in _SORTED_REPORTS:
        return False
    if reports.index.name == CLIENT_COLUMN:
        return not reports.known_divisions
    return CLIENT_COLUMN in reports.columns


def _disjoint(ranges: Sequence[tuple[Any, Any]]) -> bool:
    """Return True if no two (smallest, largest) id ranges share an id (touching ends do).

    Examples
    --------
    >>> _disjoint([(5, 9), (0, 4)]), _disjoint([(0, 5), (5, 9)]), _disjoint([(0, 9), (3, 4)])
    (True, False, False)
    """
    ordered = sorted(ranges)
    return all(low > high for (_, high), (low, _) in pairwise(ordered))


def _repeated_ids(reports: Any) -> Any:
    """Return a lazy repeated id (computed only to word a refusal)."""
    ids = (reports[CLIENT_COLUMN] if CLIENT_COLUMN in reports.columns
           else reports.index.to_series())
    counts = ids.value_counts()
    return counts[counts > 1].head(1, npartitions=-1, compute=False).index


def totals_on_dask(client_reports: Any, metrics: Sequence[Spec], partition: Partition, *,
                   progress: bool = False) -> RegionTotals:
    """Validate a Dask DataFrame of client reports and sum it per region on the workers.

    The checks of the in-memory release, per partition (:func:`region_totals`)
    and across partitions: a client id repeated across partitions is refused
    whatever the divisions claim; so are client ids of more than one type
    (ints in one partition, strs in another) and non-finite sums. Only the
    bounded totals reach the driver.

    Examples
    --------
    Client 1's report in two partitions: refused, as a repeated client is in memory.

    >>> import dask.dataframe as dd
    >>> from spatialdp.datasets import us_states_partition
    >>> from spatialdp.federated import device_report
    >>> states = us_states_partition()
    >>> spec = MetricSpec("loss", 0.0, 4.0)
    >>> reports = device_report(pd.DataFrame({"client_id": [1, 2], "region_id": "CA",
    ...                                       "loss": 1.0}), loss_spec=spec, partition=states)
    >>> twice = dd.from_pandas(pd.concat([reports, reports.iloc[:1]]), npartitions=2,
    ...                        sort=False)
    >>> totals_on_dask(twice, [spec], states)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: client_id has 1 repeated value across partitions ...
    """
    show = check_flag(progress, "progress")
    reports = require_frame(client_reports, "client_reports")
    from dask import delayed

    recipe = _SORTED_REPORTS.get(reports._name)
    if recipe is not None:  # straight from sorted examples: one task per partition
        (totals,) = compute(_fused_totals(recipe, metrics, partition), progress=show)
        _refuse_empty_or_mixed(totals)
        return _refuse_non_finite_sums(totals, metrics)
    spec_d, part_d = delayed(list(metrics), pure=True), delayed(partition, pure=True)
    parts = reports.to_delayed()
    totals_d = tree_sum([delayed(region_totals, pure=True)(chunk, spec_d, part_d)
                         for chunk in parts])
    if _count_upfront(reports):
        totals, n_ids = compute(totals_d, _distinct_ids(reports, parts), progress=show)
    else:
        (totals,) = compute(totals_d, progress=show)
        n_ids = None
    _refuse_empty_or_mixed(totals)
    if n_ids is None and reports._name not in _SORTED_REPORTS \
            and not _disjoint(totals.id_ranges):  # the divisions were wrong: count now
        (n_ids,) = compute(_distinct_ids(reports, parts), progress=show)
    if n_ids is not None:
        _refuse_repeats(reports, totals.n_rows - int(n_ids))
    return _refuse_non_finite_sums(totals, metrics)


def _refuse_empty_or_mixed(totals: RegionTotals) -> None:
    """Refuse totals of no client, or of client ids of more than one kind."""
    if totals.n_rows == 0:
        raise InvalidInput("the client reports are empty; there is nothing to release")
    one_kind(totals.id_kinds)


def _refuse_non_finite_sums(totals: RegionTotals, metrics: Sequence[Spec]) -> RegionTotals:
    """Return ``totals`` if every metric's sums are finite; else refuse, as in memory."""
    for spec in metrics:
        if not np.isfinite(totals.sums[spec.name]).all():
            # the in-memory wording: the count of bad clients, or an overflow
            bad = totals.non_finite[spec.name]
            refuse_non_finite(np.full(bad, np.nan) if bad else np.zeros(1), spec.key)
    return totals


def _refuse_repeats(reports: Any, n: int) -> None:
    """Refuse ``n`` client ids repeated across partitions (computing the first, to name it)."""
    if n:
        (first,) = compute(_repeated_ids(reports))
        raise InvalidInput(
            f"{CLIENT_COLUMN} has {n} repeated value{'s' if n > 1 else ''} across "
            f"partitions (first: {first.tolist()[0]!r}); one client, one row: drop or "
            "merge the repeats before the release")


def _one_client_each(part: pd.DataFrame, report: Reporter, meta: pd.DataFrame
                     ) -> pd.DataFrame:
    if len(part) == 0:
        return meta
    if part.index.name == CLIENT_COLUMN:
        part = part.reset_index()
    return report(part)


def _with_canonical_ids(part: pd.DataFrame) -> pd.DataFrame:
    """Give the ids one dtype per kind, so that the shuffle hashes equal ids alike."""
    return part.assign(**{CLIENT_COLUMN: canonical_ids(part[CLIENT_COLUMN])})


@dataclass(frozen=True)
class _Edges:
    """What one partition of examples sorted by client hands over: its id range, edge rows.

    ``low`` and ``high`` are the smallest and largest client id in the
    partition's data (not its divisions); ``rows`` are the examples of those
    two clients, the only ones that may also have rows in another partition.
    """

    low: Any
    high: Any
    kind: str | None
    rows: pd.DataFrame


def _inner_reports(part: pd.DataFrame, report: Reporter, meta: pd.DataFrame
                   ) -> tuple[pd.DataFrame, _Edges | None]:
    """Report the partition's clients but its first and last; hand over theirs (a worker)."""
    if len(part) == 0:
        return meta, None
    examples = part.reset_index() if part.index.name == CLIENT_COLUMN else part
    ids = examples[CLIENT_COLUMN]
    kind = id_kind(ids)
    reports = report(examples)  # refuses missing ids, as in memory
    low, high = _id_range(reports.index)  # its clients: the distinct ids of the examples
    if reports.index.is_monotonic_increasing and _is_sorted(ids):
        # sorted (as Parquet sorted by client is): the edge clients are the ends
        values = ids.to_numpy()
        first, last = np.searchsorted(values, low, "right"), np.searchsorted(values, high)
        ends = np.r_[0:first, max(first, last):values.size]  # one copy of the edge rows
        return reports.iloc[1:-1], _Edges(low, high, kind, examples.take(ends))
    edge = ((ids == low) | (ids == high)).to_numpy()
    inner = reports[~reports.index.isin([low, high])]
    return inner, _Edges(low, high, kind, examples[edge])


def _is_sorted(ids: pd.Series) -> bool:
    """Return True if ``ids`` never decrease (integers: one numpy pass, ~7x pandas' check).

    Examples
    --------
    >>> _is_sorted(pd.Series([1, 1, 2])), _is_sorted(pd.Series([2, 1]))
    (True, False)
    >>> _is_sorted(pd.Series(["a", "b"])), _is_sorted(pd.Series(["b", "a"]))
    (True, False)
    """
    values = ids.to_numpy() if isinstance(ids.dtype, np.dtype) else None
    if values is not None and values.dtype.kind in "iu":
        return bool((values[1:] >= values[:-1]).all())
    return bool(ids.is_monotonic_increasing)


def _id_range(ids: pd.Index) -> tuple[Any, Any]:
    """Return the smallest and largest id (of a categorical index: of its values)."""
    if isinstance(ids.dtype, pd.CategoricalDtype):
        ids = ids.astype(ids.dtype.categories.dtype)
    elif ids.is_monotonic_increasing:  # the device module's output: sorted, no pass
        return ids[0], ids[-1]
    return ids.min(), ids.max()


def _edge_reports(edges: list[_Edges | None], report: Reporter, meta: pd.DataFrame
                  ) -> pd.DataFrame:
    """Report the clients at the partitions' edges, from all of their rows (one task).

    Proves on the data what the divisions only claim: sorted by (smallest,
    largest) id, each partition's ids start where the previous one's end or
    later. Then a client strictly inside a partition's range has no row
    elsewhere, and one at an edge has rows only at other partitions' edges,
    all gathered here. Parquet statistics put a client whose rows two files
    share on both sides of a boundary (dask's divisions then say
    ``[.., 5), [5, ..)`` though the first file ends with client 5): that
    client is reported here once, from all of its rows.
    """
    found = _refuse_unsorted(edges)
    if not found:
        return meta
    return report(pd.concat([e.rows for e in found], ignore_index=True))


def _refuse_unsorted(edges: list[_Edges | None]) -> list[_Edges]:
    """Return the partitions' edges if their id ranges share at most their ends; else refuse.

    Also refuses ids of another kind in another partition.
    """
    found = [e for e in edges if e is not None]
    one_kind([e.kind for e in found])
    ordered = sorted(found, key=lambda e: (e.low, e.high))
    for before, after in pairwise(ordered):
        if after.low < before.high:
            low, high, other = (_plain(v) for v in (before.low, before.high, after.low))
            raise InvalidInput(
                f"the examples' partitions are not sorted by {CLIENT_COLUMN} (one holds ids "
                f"{low!r} to {high!r}, another from {other!r}), although "
                "their divisions say so; drop the divisions (frame.clear_divisions()) and "
                "device_report gathers each client's examples with a shuffle")
    return found


def _plain(value: Any) -> Any:
    """Return a numpy scalar as the Python value it holds (for a message)."""
    return value.item() if isinstance(value, np.generic) else value


def _whole_clients_sorted(frame: Any, report: Reporter, meta: pd.DataFrame) -> Any:
    """Client reports of examples with known divisions, without a shuffle, each client once.

    One partition per input partition holds the reports of its inner clients;
    one more holds the clients at the partitions' edges, gathered from every
    partition (:func:`_edge_reports`): a client split across files is reported
    once, from all of its examples, whatever the divisions say. The graph is
    built by hand (:func:`~spatialdp._dask_frames.graph_results`): the regional
    report of these reports never computes it (:func:`_fused_totals`), and
    ``dask.delayed`` calls cost the driver about a millisecond a task.
    """
    import dask.dataframe as dd

    token = uuid.uuid4().hex  # fresh keys: tokenising the device module's settings
    # (the partition's polygons included) cost more than the rest of the graph
    name, split = f"client-reports-{token}", f"client-reports-split-{token}"
    report_key, meta_key = f"client-reports-device-{token}", f"client-reports-meta-{token}"
    tasks: dict[Any, Any] = {report_key: report, meta_key: meta}
    source = parquet_source(frame)
    parts: list[Any] = []
    if source is not None:  # each file read in the task that reports it
        files, read = source
        read_key = f"client-reports-read-{token}"
        tasks[read_key] = read
        inputs: list[Any] = [(_read_with_ids, file, read_key) for file in files]
    else:
        parts = frame.to_delayed()
        inputs = [part.key for part in parts]
    for i, part in enumerate(inputs):
        tasks[(split, i)] = (_inner_reports, part, report_key, meta_key)
        tasks[(name, i)] = (operator.getitem, (split, i), 0)
    tasks[(name, len(inputs))] = (
        _edge_reports, [(operator.getitem, (split, i), 1) for i in range(len(inputs))],
        report_key, meta_key)
    outputs = graph_results([(name, i) for i in range(len(inputs) + 1)], tasks, layer=name,
                            dependencies=parts[:1])
    return dd.from_delayed(outputs, meta=meta, verify_meta=False)


def _read_with_ids(file: str, read: Callable[..., pd.DataFrame]) -> pd.DataFrame:
    """Read a Parquet file with the frame's reader, ``client_id`` left a column (a worker).

    The device module wants it there, and a frame made by ``reset_index`` shares
    its arrays, which copy-on-write then copies (about 30% more time in the
    device module).
    """
    return read(file, index=None)


@dataclass(frozen=True)
class _FileJob:
    """What every task of :func:`_fused_totals` needs, in one argument.

    The device module with its settings, the reports' empty frame, the metrics,
    the partition, and the reader of a Parquet file (None: the partitions come
    from the frame's own tasks).
    """

    report: Reporter
    meta: pd.DataFrame
    specs: tuple[Spec, ...]
    partition: Partition
    read: Callable[..., pd.DataFrame] | None = None


#: What a fused task hands on: the totals of its partitions' inner clients, their edge rows.
_Pair = tuple[RegionTotals, list["_Edges | None"]]

#: Tasks per worker thread when Parquet files are read in batches (:func:`_file_batches`):
#: enough for the threads to finish together within about a quarter of a share, few
#: enough that Dask's cost per task (about 4 ms of CPU on driver and worker) stays small.
TASKS_PER_THREAD = 4


def _file_totals(part: pd.DataFrame, shared: Shared[_FileJob]) -> _Pair:
    """Region totals of one partition's inner clients, and its edge rows (one task, a worker)."""
    job = shared.value
    inner, edges = _inner_reports(part, job.report, job.meta)
    return region_totals(inner, job.specs, job.partition), [edges]


def _read_files_totals(files: list[str], shared: Shared[_FileJob]) -> _Pair:
    """:func:`_file_totals` of Parquet files, each read and reported in turn in the same task.

    One file is in memory at a time; what stays is small (each file's inner
    client reports and its edge rows). The inner reports of all the files are
    then summed at once (one :func:`region_totals`: its checks cost about 0.5 ms
    a call whatever the rows), after their id ranges are checked as
    :func:`_edge_reports` checks them (an inner client is in one file only).
    ``job.read`` is the frame's reader
    (:func:`~spatialdp._dask_frames.parquet_source`; see :func:`_read_with_ids`).
    """
    job = shared.value
    assert job.read is not None
    inner, edges = [], []
    for file in files:
        reports, edge = _inner_reports(_read_with_ids(file, job.read), job.report, job.meta)
        inner.append(reports)
        edges.append(edge)
    _refuse_unsorted(edges)
    return region_totals(pd.concat(inner), job.specs, job.partition), edges


def _sum_with_edges(pairs: list[_Pair], shared: Shared[_FileJob]) -> RegionTotals:
    """Add the tasks' inner totals and those of the clients at the partitions' edges.

    The edge clients are reported from all of their rows (:func:`_edge_reports`).
    """
    job = shared.value
    inner = _add([totals for totals, _ in pairs])
    reports = _edge_reports([e for _, edges in pairs for e in edges], job.report, job.meta)
    return inner + region_totals(reports, job.specs, job.partition)


def _file_batches(files: list[str], threads: int) -> list[list[str]]:
    """Split ``files`` (in order) into about :data:`TASKS_PER_THREAD` batches a thread.

    ``threads`` 0 (no worker yet, e.g. an adaptive cluster): a file a batch.

    Examples
    --------
    >>> [len(b) for b in _file_batches([f"{i}.parquet" for i in range(40)], threads=2)]
    [5, 5, 5, 5, 5, 5, 5, 5]
    >>> [len(b) for b in _file_batches(["a", "b", "c"], threads=2)]
    [1, 1, 1]
    >>> len(_file_batches(["a"] * 9, threads=0))
    9
    """
    size = -(-len(files) // (TASKS_PER_THREAD * threads)) if threads > 0 else 1
    return [files[i:i + size] for i in range(0, len(files), size)]


def _same_partition(report: Reporter, partition: Partition) -> Partition:
    """Return the device module's partition if it is ``partition`` (same regions and name).

    The release's partition and the device module's are usually two objects of
    one partition (two calls of ``us_states_partition()``): shipped once, not
    twice (the polygons are most of the settings' bytes). Same version (the ids
    and geometries) and same name: every check and message is the same.
    """
    mine = report.keywords.get("partition") if isinstance(report, partial) else None
    if (isinstance(mine, Partition) and mine.version == partition.version
            and mine.name == partition.name):
        return mine
    return partition


def _fused_totals(recipe: _SortedRecipe, specs: Sequence[Spec], partition: Partition) -> Any:
    """Lazy region totals of the reports of sorted examples, each partition in one task.

    The same functions as the reports' collection (:func:`_inner_reports`,
    :func:`_edge_reports`) then :func:`region_totals`, but the reports of a
    partition never leave the task that makes them: a partition of examples
    becomes one small pair (totals of its inner clients, its edge rows); one more
    task adds the pairs and reports their edge rows. Parquet files from
    :func:`~spatialdp.read_parquet` are read in the tasks that reduce them, a
    batch of files a task (:func:`_file_batches`: Dask's cost per task, not the
    work, decided the CPU time). The settings travel as one :class:`_FileJob`,
    an argument of every task rather than a key of the graph: tasks that depend
    on one key are run where it is, all on one worker when work stealing is off.
    It is a :class:`~spatialdp._dask_frames.Shared`: pickled once on the driver
    and unpickled once per worker (a few hundred kB with the partitions'
    polygons; pickled and unpickled with every task, it cost about 3 ms of CPU
    a task). The graph is built by hand, with fresh keys (it is computed at
    once, by one caller): no argument is tokenised on the driver.
    """
    token = uuid.uuid4().hex
    # named as the read tasks they replace (dashboards, task streams)
    name, total = f"read-parquet-totals-{token}", f"region-totals-{token}"
    source = parquet_source(recipe.examples)
    tasks: dict[Any, Any] = {}
    dependencies: list[Any] = []
    partition = _same_partition(recipe.report, partition)
    if source is not None:  # read and reduce the files in batches, one batch a task
        files, read = source
        job = Shared(_FileJob(recipe.report, recipe.meta, tuple(specs), partition, read))
        for i, batch in enumerate(_file_batches(files, worker_threads())):
            tasks[(name, i)] = (_read_files_totals, batch, job)
    else:
        job = Shared(_FileJob(recipe.report, recipe.meta, tuple(specs), partition))
        dependencies = recipe.examples.to_delayed()
        for i, part in enumerate(dependencies):
            tasks[(name, i)] = (_file_totals, part.key, job)
    pairs = list(tasks)
    tasks[total] = (_sum_with_edges, pairs, job)
    (totals,) = graph_results([total], tasks, layer=name,
                              dependencies=dependencies[:1])
    return totals


def device_report_on_dask(examples: Any, report: Reporter) -> Any:
    """Client reports from a Dask DataFrame of per-example rows, lazily, one row per client.

    Runs ``report`` (the in-memory :func:`spatialdp.federated.device_report`
    with its settings bound) on whole clients, one row per client whatever the
    partitions look like:

    - ``client_id`` the index with known divisions (Parquet sorted by client,
      read with ``index="client_id"``): no shuffle. Each partition reports its
      clients but the first and the last; those (the only ones that may have
      rows in a neighbouring file, e.g. when ``dask.dataframe.read_parquet``
      puts a client whose rows two files share on both sides of a division)
      are gathered from every partition and reported once, in one extra
      partition. Divisions are taken as a hint, never trusted: the partitions'
      real smallest and largest ids are compared, and partitions that are not
      sorted after all are refused when the reports are computed.
    - otherwise the rows are first shuffled by ``client_id`` (a client whose
      examples are spread over partitions is gathered, exactly as in memory,
      where one client's examples may be anywhere in the frame).

    Client ids must be integers or strings, one type in every partition
    (:func:`~spatialdp._clients.id_kind`). (Dask turns object
    columns into strings when it converts pandas data, so ``7`` and ``"7"``
    given to ``dask.dataframe.from_pandas`` arrive as one client ``"7"``.)

    Parameters
    ----------
    examples : dask.dataframe.DataFrame
        One row per example, ``client_id`` as a column or the index.
    report : callable
        ``report(examples)`` on a pandas frame of whole clients: the device
        module with its arguments bound (``functools.partial``).

    Returns
    -------
    dask.dataframe.DataFrame
        Lazy client reports indexed by ``client_id``. ``attrs`` (bounds, module
        version) do not travel through Dask; the columns carry the provenance.

    Examples
    --------
    Client 1's examples in two partitions whose divisions say they do not
    share a client (as Parquet statistics make them): still one report, from
    both rows.

    >>> import dask.dataframe as dd
    >>> from dask import delayed
    >>> from spatialdp.federated import device_report
    >>> rows = pd.DataFrame({"loss": [1.0, 3.0, 2.0]},
    ...                     index=pd.Index([0, 1, 1], name="client_id"))
    >>> split = dd.from_delayed([delayed(rows.iloc[:2]), delayed(rows.iloc[2:])],
    ...                         meta=rows.iloc[:0], divisions=(0, 1, 1))
    >>> run = partial(device_report, loss_spec=MetricSpec("loss", 0.0, 4.0))
    >>> device_report_on_dask(split, run).compute()["loss"].to_dict()
    {0: 1.0, 1: 2.5}
    """
    frame = require_frame(examples, "examples")
    if CLIENT_COLUMN not in frame.columns and frame.index.name != CLIENT_COLUMN:
        raise fail("examples", f"columns {list(frame.columns)[:8]}", "have no client_id",
                   "give each example its client in a 'client_id' column or index")
    meta = _meta(frame, report)
    if frame.index.name == CLIENT_COLUMN and frame.known_divisions:
        out = _whole_clients_sorted(frame, report, meta)
        _remember(out._name, _SortedRecipe(frame, report, meta))
        return out
    rows = frame if CLIENT_COLUMN in frame.columns else frame.reset_index()
    rows = rows.map_partitions(_with_canonical_ids, meta=_with_canonical_ids(rows._meta))
    return rows.shuffle(on=CLIENT_COLUMN).map_partitions(
        partial(_one_client_each, report=report, meta=meta), meta=meta,
        align_dataframes=False)


def _meta(frame: Any, report: Reporter) -> pd.DataFrame:
    """Return the reports' empty frame: the device module run on one row of the examples.

    The output's columns depend on the data's columns and the specs, not on the
    values; a bad argument or a bad id type is refused here, eagerly.
    """
    sample = first_rows(frame)
    if len(sample) == 0:
        sample = frame.head(1, npartitions=-1)
    if len(sample) == 0:
        raise InvalidInput(
            "the examples frame is empty; a client with no examples reports nothing: skip it")
    if sample.index.name == CLIENT_COLUMN:
        sample = sample.reset_index()
    meta = report(sample).iloc[:0]
    meta.attrs.clear()
    return meta
