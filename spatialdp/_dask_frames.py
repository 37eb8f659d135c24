"""Dask collections: recognise them, read Parquet partition by partition, compute with a bar.

The shared base of the Dask paths of :func:`spatialdp.federated.device_report`,
:func:`spatialdp.federated.regional_report`, :func:`spatialdp.queries.truth_grid`
and :func:`spatialdp.queries.measure_query_error` (see ``docs/scale.md``).
:func:`read_parquet` and :func:`worker_environment` are public as
``spatialdp.read_parquet`` and ``spatialdp.worker_environment``.

Dask stays optional: :func:`is_dask` answers without importing dask (a Dask
object cannot exist unless dask was imported), so the in-memory paths can ask
it on every call for free. Everything else here imports dask on use.

The engine is the caller's choice, never a guess:

- a Dask collection runs on Dask: on the active ``distributed.Client`` if
  there is one, else on dask's default local scheduler;
- a pandas/GeoPandas object runs in memory, even when a Client is active:
  pandas data are never shipped to a cluster behind the caller's back. To use
  the cluster, make the choice explicit with ``dask.dataframe.from_pandas``
  (or read the data with :func:`read_parquet` in the first place);
- query error has no frame to carry the choice: ``chunks=`` of
  :func:`~spatialdp.queries.measure_query_error` splits its draws over Dask.
"""

from __future__ import annotations

import operator
import pickle
import sys
import threading
import uuid
from collections.abc import Mapping, Sequence
from functools import partial, reduce
from pathlib import Path
from typing import Any, Generic, TypeVar

from spatialdp._validation import check_flag, check_text, fail

__all__ = ["Shared", "active_client", "compute", "first_rows", "graph_results", "is_dask",
           "parquet_source", "read_parquet", "require_frame", "tree_sum",
           "worker_environment", "worker_threads"]


def is_dask(obj: object) -> bool:
    """Return True if ``obj`` is a Dask collection (DataFrame, Series, Array, Bag, ...).

    Never imports dask: when dask is not imported yet, no Dask object exists.

    Examples
    --------
    >>> import pandas as pd
    >>> is_dask(pd.DataFrame({"a": [1]}))
    False
    >>> import dask.dataframe as dd
    >>> is_dask(dd.from_pandas(pd.DataFrame({"a": [1]}), npartitions=1))
    True
    """
    if "dask" not in sys.modules:
        return False
    from dask import is_dask_collection

    return bool(is_dask_collection(obj))


def active_client() -> Any:
    """Return the active ``distributed.Client``, or None (dask's local scheduler is used).

    Examples
    --------
    >>> active_client() is None or hasattr(active_client(), "compute")
    True
    """
    if "distributed" not in sys.modules:
        return None
    from distributed import default_client

    try:
        return default_client()
    except ValueError:  # no client
        return None


#: glibc settings for worker processes: freed arrays stay in the heap for reuse.
WORKER_MALLOC = {"MALLOC_TRIM_THRESHOLD_": str(1 << 26), "MALLOC_MMAP_THRESHOLD_": str(1 << 24)}


def worker_environment() -> dict[str, str]:
    """Return Dask's worker environment with glibc settings for array work.

    ``distributed`` spawns workers with ``MALLOC_TRIM_THRESHOLD_=65536`` (to hand
    freed memory back to the system). Setting it also switches off glibc's
    adaptive mmap threshold, so every array above 128 KiB is a fresh ``mmap``
    whose pages fault in again: the device module runs about 2x slower on such a
    worker than in a plain process (30 ms against 66 ms for 500,000 examples).
    The returned mapping keeps Dask's other settings and lets freed arrays below
    16 MiB come back from the heap (64 MiB may stay unreturned per worker).
    Pass it as ``distributed.nanny.pre-spawn-environ`` before the cluster
    starts; a value already in ``os.environ`` wins, as Dask reads it from there.

    Returns
    -------
    dict of str to str
        ``distributed.nanny.pre-spawn-environ`` with ``MALLOC_TRIM_THRESHOLD_``
        (64 MiB) and ``MALLOC_MMAP_THRESHOLD_`` (16 MiB).

    Examples
    --------
    >>> import dask
    >>> env = worker_environment()
    >>> env["MALLOC_MMAP_THRESHOLD_"]
    '16777216'
    >>> with dask.config.set({"distributed.nanny.pre-spawn-environ": env}):
    ...     pass  # start the LocalCluster (or dask-jobqueue cluster) here
    """
    import dask
    import distributed  # noqa: F401  (registers its configuration defaults)

    base = dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {}
    return {**{k: str(v) for k, v in base.items() if v is not None}, **WORKER_MALLOC}


def require_frame(obj: object, name: str) -> Any:
    """Return ``obj`` if it is a Dask DataFrame, else refuse it naming ``name``."""
    import dask.dataframe as dd

    if not isinstance(obj, dd.DataFrame):
        raise fail(name, type(obj).__name__, "is not a Dask DataFrame",
                   "pass dask.dataframe.read_parquet(...) or spatialdp.read_parquet(...)")
    if obj.npartitions < 1:
        raise fail(name, "0 partitions", "holds no partitions", "pass a frame with data")
    return obj


def _add(parts: list[Any]) -> Any:
    return reduce(operator.add, parts)


def tree_sum(items: list[Any], fan_in: int = 8) -> Any:
    """Add delayed objects with ``+`` in a tree of fan-in 8: the driver receives one object.

    Examples
    --------
    >>> import dask
    >>> tree_sum([dask.delayed(i) for i in range(20)]).compute()
    190
    """
    from dask import delayed

    while True:  # at least one level: a single item is still made a Delayed
        items = [delayed(_add, pure=True)(items[i:i + fan_in])
                 for i in range(0, len(items), fan_in)]
        if len(items) == 1:
            return items[0]


def graph_results(keys: Sequence[Any], tasks: dict[Any, Any], *, layer: str,
                  dependencies: Sequence[Any] = ()) -> list[Any]:
    """Return a Delayed for each of ``keys`` in ``tasks``, a graph in dask's custom-graph form.

    ``tasks`` maps keys to data or to tasks ``(function, *arguments)``, in which an
    argument that is a key of the graph (or a list of them) stands for its value
    (dask's "custom graphs"). Building a graph of n tasks this way costs a few
    microseconds a task; ``dask.delayed`` calls tokenise their arguments and merge
    graphs, about a millisecond a task on the driver. The Delayed objects share one
    graph. ``dependencies`` are collections whose keys ``tasks`` refers to (e.g.
    one partition of ``frame.to_delayed()``: all of them share the frame's graph).

    Examples
    --------
    >>> import operator
    >>> graph = {"data": [1, 2, 3], ("double", 0): (operator.mul, 2, "data"),
    ...          "total": (sum, ("double", 0))}
    >>> [d.compute() for d in graph_results(["total", "data"], graph, layer="demo")]
    [12, [1, 2, 3]]
    """
    from dask.delayed import Delayed
    from dask.highlevelgraph import HighLevelGraph

    graph = HighLevelGraph.from_collections(layer, tasks, dependencies=list(dependencies))
    return [Delayed(key, graph, layer=layer) for key in keys]


T = TypeVar("T")

#: The values of the Shared arguments this process has unpickled, by token, newest last;
#: at most _MAX_SHARED are kept (an evicted one is unpickled again if a task still needs it).
_SHARED: dict[str, Any] = {}
_MAX_SHARED = 8
_SHARED_LOCK = threading.Lock()


class Shared(Generic[T]):
    """A task argument pickled once on the driver and unpickled once per process.

    Dask pickles a task's arguments with every task it sends (``distributed``:
    the scheduler pickles each task for its worker), and a worker unpickles them
    with every task. For a large argument shared by all the tasks of one graph
    (settings holding a partition's polygons: a few hundred kB, a few
    milliseconds of CPU a task) this one is pickled to bytes once, here; a task
    carries the bytes (copied, never re-encoded), and each process turns them
    into the value once, on first use (:attr:`value`), keyed by a token fresh
    for each Shared (one graph: never a stale value from another call).

    Examples
    --------
    >>> import pickle
    >>> settings = Shared({"scale": 2})
    >>> copy = pickle.loads(pickle.dumps(settings))
    >>> copy.value, copy.value is pickle.loads(pickle.dumps(settings)).value
    ({'scale': 2}, True)
    """

    def __init__(self, value: T) -> None:
        self._value = value
        self._token = uuid.uuid4().hex
        self._data: bytes | None = None
        self._held = True  # False: unpickled here, the value is in _SHARED

    @property
    def value(self) -> T:
        """The value (in another process: unpickled on first use there, then kept)."""
        if self._held:
            return self._value
        value = _SHARED.get(self._token, _SHARED)
        if value is _SHARED:  # not yet in this process (or evicted)
            assert self._data is not None
            value = pickle.loads(self._data)
            with _SHARED_LOCK:  # a worker may run tasks in several threads
                _SHARED[self._token] = value
                while len(_SHARED) > _MAX_SHARED:
                    del _SHARED[next(iter(_SHARED))]
        return value

    def __reduce__(self) -> tuple[Any, ...]:
        if self._data is None:  # cloudpickle, as dask: functions defined in __main__ too
            import cloudpickle

            self._data = cloudpickle.dumps(self._value, protocol=pickle.HIGHEST_PROTOCOL)
        return (_unpickled_shared, (self._token, self._data))


def _unpickled_shared(token: str, data: bytes) -> Shared[Any]:
    """Rebuild a Shared from its pickle: the bytes kept, the value read on first use."""
    shared: Shared[Any] = Shared.__new__(Shared)
    shared._value, shared._token, shared._data, shared._held = None, token, data, False
    return shared


def compute(*collections: Any, progress: bool = False) -> tuple[Any, ...]:
    """Compute Dask collections together (shared work runs once), optionally with a bar.

    On an active ``distributed.Client`` the work runs on its workers and the bar
    is :func:`distributed.progress`; otherwise it runs on dask's local scheduler
    and the bar is :class:`dask.diagnostics.ProgressBar`. Either prints to stdout.

    Examples
    --------
    >>> import dask
    >>> compute(dask.delayed(sum)([1, 2]), dask.delayed(max)([1, 2]))
    (3, 2)
    """
    show = check_flag(progress, "progress")
    client = active_client()
    if client is not None:
        futures = client.compute(list(collections))
        if show:
            from distributed import progress as bar

            bar(futures)
        return tuple(client.gather(futures))
    import dask

    if show:
        from dask.diagnostics import ProgressBar

        with ProgressBar():
            return tuple(dask.compute(*collections))
    return tuple(dask.compute(*collections))


def worker_threads() -> int:
    """Return the threads that run tasks: the active Client's workers', else the local scheduler's.

    0 when a Client has no worker yet (an adaptive cluster before it scales up).

    Examples
    --------
    >>> worker_threads() >= 1
    True
    """
    client = active_client()
    if client is not None:
        return sum(client.nthreads().values())
    from dask.system import CPU_COUNT

    return int(CPU_COUNT)


def _filesystem(path: str, storage_options: Mapping[str, Any] | None) -> tuple[Any, str]:
    """Return the fsspec file system of ``path`` and the path on it.

    A local path comes back absolute (resolved against the caller's working
    directory: a worker started elsewhere reads the same file); a URL
    (``s3://``, ``gs://``, ``https://``, any fsspec protocol) comes back on its
    own file system, unchanged but for the protocol, which fsspec strips.
    """
    from fsspec.core import url_to_fs

    try:
        return url_to_fs(path, **(storage_options or {}))
    except (ImportError, ValueError) as error:  # an unknown protocol, or its package missing
        raise fail("path", path, f"names a file system fsspec cannot open ({error})",
                   "install the fsspec implementation of its protocol (e.g. s3fs, gcsfs) "
                   "or pass a local path") from None


def _is_local(fs: Any) -> bool:
    from fsspec.implementations.local import LocalFileSystem

    return isinstance(fs, LocalFileSystem)


def _files(path: str | Path | Sequence[str | Path],
           storage_options: Mapping[str, Any] | None = None) -> list[str]:
    """Return the Parquet files of a file, a folder (its ``*.parquet``, sorted) or a glob.

    Local paths come back absolute (resolved on the driver), URLs with their
    protocol (``s3://bucket/key``): each names the same file on every worker.
    """
    if isinstance(path, (list, tuple)):
        given = [str(p) for p in path]
    elif isinstance(path, (str, Path)):
        given = [str(path)]
    else:
        raise fail("path", type(path).__name__, "is not a path",
                   "pass a str or pathlib.Path (file, folder or glob), or a list of them")
    found: list[str] = []
    missing: list[str] = []
    for text in given:
        fs, where = _filesystem(text, storage_options)
        if fs.isdir(where):
            names = sorted(fs.glob(where.rstrip("/") + "/*.parquet"))
        elif any(ch in text for ch in "*?[") and isinstance(path, (str, Path)):
            names = sorted(fs.glob(where))
        else:
            names = [where]
        missing += [n for n in names if not fs.isfile(n)]
        found += [n if _is_local(fs) else fs.unstrip_protocol(n) for n in names]
    if not found or missing:
        which = f" ({missing[0]})" if missing else ""
        raise fail("path", str(path), f"names no Parquet file{which}",
                   "pass an existing file, a folder of *.parquet files, or a glob")
    return found


def _source(file: Any, storage_options: Mapping[str, Any] | None) -> tuple[Any, Any]:
    """Return what pyarrow opens for ``file`` and its file system (None: a local path, a buffer).

    An absolute POSIX path without a protocol (what :func:`_files` makes of a
    local file) is opened as it is: asking fsspec costs about 50 us a file, on
    the driver (each footer) and on the workers (each read).

    Examples
    --------
    >>> _source("/data/a.parquet", None)
    ('/data/a.parquet', None)
    """
    if not isinstance(file, str):
        return file, None
    if storage_options is None and file.startswith("/") and "::" not in file:
        return file, None  # no protocol ("s3://..." does not start with "/"), no chain
    fs, where = _filesystem(file, storage_options)
    return (where, None) if _is_local(fs) else (where, fs)


def _read_file(file: Any, columns: list[str] | None, index: str | None,
               geometry: bool, storage_options: Mapping[str, Any] | None = None,
               rows: int | None = None) -> Any:
    """Read one Parquet file (path, URL or buffer) into pandas (runs on a worker).

    ``rows``: only the first rows of plain Parquet (one batch of the first row
    group: a sample, read without touching the rest of the file).
    """
    source, filesystem = _source(file, storage_options)
    if geometry:
        import geopandas as gpd

        frame = gpd.read_parquet(source, columns=columns, filesystem=filesystem)
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        handle = pq.ParquetFile(source, filesystem=filesystem)
        if rows is None:  # one thread: a worker's parallelism is its tasks (files)
            table = handle.read(columns=columns, use_threads=False)
        else:
            batch = next(handle.iter_batches(batch_size=rows, columns=columns), None)
            empty = handle.schema_arrow.empty_table()
            table = (pa.Table.from_batches([batch]) if batch is not None
                     else empty if columns is None else empty.select(columns))
        frame = table.to_pandas(use_threads=False)
    return frame if index is None else frame.set_index(index)


def _footer(file: str, storage_options: Mapping[str, Any] | None = None) -> Any:
    """Return a Parquet file's footer (``pyarrow.parquet.FileMetaData``); refuse other files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    source, filesystem = _source(file, storage_options)
    try:
        return pq.read_metadata(source, filesystem=filesystem)
    except (pa.ArrowException, OSError):
        raise fail("path", file, "is not a Parquet file (its footer cannot be read)",
                   "pass Parquet files only (a folder: its *.parquet files)") from None


def _check_schema(file: str, footer: Any, columns: list[str] | None, index: str | None,
                  geometry: bool) -> None:
    """Refuse columns, an index or GeoParquet that the first file's footer does not have."""
    names = footer.schema.names
    if index is not None and index not in names:
        raise fail("index", index, f"is not a column of {file}", f"pass one of {names[:8]}")
    absent = [c for c in columns or [] if c not in names]
    if absent:
        raise fail("columns", absent, f"are not columns of {file}", f"pass some of {names[:8]}")
    if geometry and b"geo" not in (footer.metadata or {}):
        raise fail("geometry", True, f"asks for GeoParquet, but {file} has no geo metadata",
                   "pass geometry=False for plain Parquet (or write the files with "
                   "GeoDataFrame.to_parquet)")


def _empty_like(footer: Any) -> Any:
    """Return an in-memory Parquet file of no rows with ``footer``'s schema and metadata.

    Read with :func:`_read_file`, it gives the frame's meta (dtypes, index,
    CRS) by the very code that reads the data, without reading any data page.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = pa.BufferOutputStream()
    pq.write_table(footer.schema.to_arrow_schema().empty_table(), sink)
    return pa.BufferReader(sink.getvalue())


def _divisions(files: list[str], index: str,
               storage_options: Mapping[str, Any] | None = None) -> tuple[Any, ...] | None:
    """Divisions from the files' footers (min/max statistics): None unless sorted, disjoint."""
    lows, highs = [], []
    for file in files:
        meta = _footer(file, storage_options)
        names = [meta.schema.column(i).name for i in range(meta.num_columns)]
        if index not in names or meta.num_rows == 0:
            return None
        col = names.index(index)
        stats = [meta.row_group(g).column(col).statistics for g in range(meta.num_row_groups)]
        if any(st is None or not st.has_min_max for st in stats):
            return None
        lows.append(min(st.min for st in stats))
        highs.append(max(st.max for st in stats))
    if all(lows[i + 1] > highs[i] for i in range(len(files) - 1)):
        return (*lows, highs[-1])
    return None


def read_parquet(path: str | Path | Sequence[str | Path], *, columns: Sequence[str] | None = None,
                 geometry: bool = False, index: str | None = None,
                 storage_options: Mapping[str, Any] | None = None) -> Any:
    """Open Parquet (or GeoParquet) files as a lazy Dask DataFrame, one partition per file.

    Nothing is read here but the files' footers (the columns and their types
    come from the first file's Parquet metadata, not from its data): each file
    is read by the worker that processes it, when the result is computed (pass
    ``progress=True`` to the function that computes it for a progress bar).
    Memory is therefore bounded by a few files per worker, not by the size of
    the data set: write files of a size a worker holds comfortably.

    Paths are resolved here, on the driver: a relative local path becomes
    absolute against the driver's working directory, so workers started in
    another directory read the same files (they must see them at the same
    absolute path: a shared file system or volume). URLs (``s3://``, ``gs://``,
    ``https://``, any fsspec protocol) are passed to the workers as they are
    and read there with fsspec.

    (Built on ``dask.dataframe.from_map`` and pyarrow rather than
    ``dask.dataframe.read_parquet``, which with pandas 3.1 calls the
    deprecated ``inplace=True`` on every partition.)

    Parameters
    ----------
    path : str, Path or list of them
        A file, a folder of ``*.parquet`` files (in name order), or a glob;
        local, or a URL of any fsspec file system.
    columns : list of str, optional
        Read only these (Parquet is columnar: the others are never touched).
    geometry : bool, default False
        GeoParquet: each file is read with ``geopandas.read_parquet`` (a Dask
        GeoDataFrame, CRS kept).
    index : str, optional
        Column to use as the index. For per-example data written sorted by
        ``client_id`` pass ``index="client_id"``: when the files' min/max
        statistics show sorted, disjoint ranges they become the divisions and
        :func:`spatialdp.federated.device_report` needs no shuffle (it does not
        trust them: it checks each partition's real id range on the data).
        Otherwise the divisions stay unknown and a shuffle gathers the clients.
    storage_options : mapping, optional
        Options of the URL's fsspec file system (credentials, endpoint), as for
        ``fsspec.open``; they travel to the workers with the task graph.

    Returns
    -------
    dask.dataframe.DataFrame or dask_geopandas.GeoDataFrame
        Categorical columns have unknown categories (each file has its own), as
        with ``dask.dataframe.read_parquet``.

    Examples
    --------
    >>> import tempfile, pandas as pd
    >>> folder = Path(tempfile.mkdtemp())
    >>> for i in range(3):
    ...     pd.DataFrame({"client_id": [2 * i, 2 * i + 1], "loss": 1.0}).to_parquet(
    ...         folder / f"part-{i}.parquet", index=False)
    >>> frame = read_parquet(folder, index="client_id")
    >>> frame.npartitions, frame.divisions
    (3, (0, 2, 4, 5))
    >>> read_parquet(folder, columns=["region_id"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: columns=['region_id'] are not columns of ...part-0.parquet...
    """
    options = _check_options(storage_options)
    files = _files(path, options)
    if columns is not None and (isinstance(columns, (str, bytes))
                                or not hasattr(columns, "__iter__")):
        raise fail("columns", columns, "is not a list of column names",
                   "pass e.g. columns=['region_id', 'loss']")
    cols = None if columns is None else [check_text(c, "columns") for c in columns]
    geo = check_flag(geometry, "geometry")
    key = None if index is None else check_text(index, "index")
    footer = _footer(files[0], options)
    _check_schema(files[0], footer, cols, key, geo)
    if cols is not None and key is not None and key not in cols:
        cols = [key, *cols]
    import dask.dataframe as dd

    if geo:
        import dask_geopandas  # noqa: F401  (registers the GeoDataFrame collection)
    from dask.dataframe.utils import clear_known_categories

    # each file has its own categories: the first file's would be a claim about all of them
    meta = clear_known_categories(_read_file(_empty_like(footer), cols, key, geo))
    divisions = None if key is None else _divisions(files, key, options)
    reader = partial(_read_file, columns=cols, index=key, geometry=geo, storage_options=options)
    frame = dd.from_map(reader, files, meta=meta, divisions=divisions, label="read-parquet",
                        enforce_metadata=False)
    _remember_files(frame._name, files, reader)
    return frame


#: The files and reader of each frame made by read_parquet, by collection name (a
#: deterministic token of both), newest last; at most _MAX_SOURCES are kept.
_PARQUET_SOURCES: dict[str, tuple[list[str], partial[Any]]] = {}
_MAX_SOURCES = 64


def _remember_files(name: str, files: list[str], reader: partial[Any]) -> None:
    _PARQUET_SOURCES.pop(name, None)
    _PARQUET_SOURCES[name] = (files, reader)
    while len(_PARQUET_SOURCES) > _MAX_SOURCES:
        del _PARQUET_SOURCES[next(iter(_PARQUET_SOURCES))]


def parquet_source(frame: Any) -> tuple[list[str], partial[Any]] | None:
    """Return the files and the reader of a frame straight from :func:`read_parquet`, else None.

    ``reader(file)`` is the pandas partition of ``file``: a task that reads a
    file and reduces it at once needs no task of its own for the read (nor the
    frame's expression optimised into a graph). Any other frame (filtered,
    re-indexed, or from elsewhere) gives None: use its partitions.

    Examples
    --------
    >>> import tempfile, pandas as pd
    >>> folder = Path(tempfile.mkdtemp())
    >>> pd.DataFrame({"client_id": [0, 1], "loss": 1.0}).to_parquet(folder / "a.parquet")
    >>> files, reader = parquet_source(read_parquet(folder))
    >>> [Path(f).name for f in files], len(reader(files[0]))
    (['a.parquet'], 2)
    >>> parquet_source(read_parquet(folder)[["loss"]]) is None
    True
    """
    return _PARQUET_SOURCES.get(getattr(frame, "_name", None) or "")


def first_rows(frame: Any, rows: int = 1) -> Any:
    """Return the first ``rows`` rows of a Dask DataFrame, read here if it is plain Parquet.

    A frame straight from :func:`read_parquet` (without ``geometry``) gives the
    first rows of its first file, read on the driver without reading the rest of
    the file; any other frame computes its first partition's head (on the
    cluster, if a Client is active).

    Examples
    --------
    >>> import tempfile, pandas as pd
    >>> folder = Path(tempfile.mkdtemp())
    >>> pd.DataFrame({"client_id": [4, 5, 6], "loss": 1.0}).to_parquet(folder / "a.parquet")
    >>> first_rows(read_parquet(folder, index="client_id"), 2).index.tolist()
    [4, 5]
    """
    source = parquet_source(frame)
    if source is not None and not source[1].keywords.get("geometry"):
        files, reader = source
        head = reader(files[0], rows=rows)
        if len(head) == rows:
            return head
    return frame.partitions[0].head(rows)


def _check_options(storage_options: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Return ``storage_options`` as a dict (None stays None); refuse anything else."""
    if storage_options is None:
        return None
    if not isinstance(storage_options, Mapping):
        raise fail("storage_options", type(storage_options).__name__, "is not a mapping",
                   "pass a dict of fsspec options, e.g. {'anon': True}")
    return dict(storage_options)
