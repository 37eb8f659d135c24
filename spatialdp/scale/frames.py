"""Dask collections: recognise them, read Parquet partition by partition, compute with a bar.

Dask stays optional: :func:`is_dask` answers without importing dask (a Dask
object cannot exist unless dask was imported), so the in-memory paths can ask
it on every call for free. Everything else here imports dask on use.

The engine is the caller's choice, never a guess:

- a Dask collection runs on Dask: on the active ``distributed.Client`` if
  there is one, else on dask's default local scheduler;
- a pandas/GeoPandas object runs in memory, even when a Client is active:
  pandas data are never shipped to a cluster behind the caller's back. To use
  the cluster, make the choice explicit with ``dask.dataframe.from_pandas``
  (or read the data with :func:`read_parquet` in the first place).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from spatialdp._validation import check_flag, fail
from spatialdp.exceptions import InvalidInput

__all__ = ["active_client", "compute", "is_dask", "read_parquet", "require_frame"]


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


def require_frame(obj: object, name: str) -> Any:
    """Return ``obj`` if it is a Dask DataFrame, else refuse it naming ``name``."""
    import dask.dataframe as dd

    if not isinstance(obj, dd.DataFrame):
        raise fail(name, type(obj).__name__, "is not a Dask DataFrame",
                   "pass dask.dataframe.read_parquet(...) or spatialdp.scale.read_parquet(...)")
    if obj.npartitions < 1:
        raise fail(name, "0 partitions", "holds no partitions", "pass a frame with data")
    return obj


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


def read_parquet(path: str | Path | Sequence[str | Path], *, columns: Sequence[str] | None = None,
                 geometry: bool = False, index: str | None = None, **kwargs: Any) -> Any:
    """Open Parquet (or GeoParquet) files as a lazy Dask DataFrame, one partition per row group.

    Nothing is read here: each partition is read by the worker that processes
    it, when the result is computed (pass ``progress=True`` to the function
    that computes it for a progress bar). Memory is therefore bounded by a few
    partitions per worker, not by the size of the data set.

    Parameters
    ----------
    path : str, Path or list of them
        A file, a folder of files, or a glob.
    columns : list of str, optional
        Read only these (Parquet is columnar: the others are never touched).
    geometry : bool, default False
        GeoParquet: read with ``dask_geopandas`` (a Dask GeoDataFrame, CRS kept).
    index : str, optional
        Column to use as the index. For per-example data sorted by ``client_id``
        pass ``index="client_id"``: dask reads the divisions from the Parquet
        statistics and each client's rows are then known to be in one partition,
        so :func:`spatialdp.scale.device_report` needs no shuffle.
    **kwargs
        Passed to ``dask.dataframe.read_parquet``.

    Returns
    -------
    dask.dataframe.DataFrame or dask_geopandas.GeoDataFrame
    """
    if isinstance(path, (list, tuple)):
        paths: Any = [str(p) for p in path]
        if not paths:
            raise InvalidInput("path=[] names no files; pass a file, folder or glob")
    elif isinstance(path, (str, Path)):
        paths = str(path)
    else:
        raise fail("path", type(path).__name__, "is not a path",
                   "pass a str or pathlib.Path (file, folder or glob), or a list of them")
    opts = dict(kwargs)
    if columns is not None:
        opts["columns"] = list(columns)
    if index is not None:
        opts["index"] = index
        opts.setdefault("calculate_divisions", True)
    if check_flag(geometry, "geometry"):
        import dask_geopandas

        return dask_geopandas.read_parquet(paths, **opts)
    import dask.dataframe as dd

    return dd.read_parquet(paths, **opts)
