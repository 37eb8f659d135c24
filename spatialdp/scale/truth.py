"""The truth grid from a Dask DataFrame of points, clipped per device across partitions.

One device's points may sit in many partitions (a day of pings written hour by
hour), so clipping cannot happen per partition: a device clipped to ``k`` cells
in each of ``P`` partitions could still count in ``P k`` cells. The work is
therefore split in three steps, each on the workers:

1. per input partition: place the points with the library's own assignment
   (:meth:`Partition.assign` for an H3 partition, the same lookup as
   :func:`spatialdp.queries.truth_grid` for an array of cells) and keep each
   distinct (device, cell) pair once, with the position of its first point in
   the whole input (partition number, row);
2. shuffle the pairs by device (dask's shuffle), so each device's pairs meet in
   one partition;
3. per shuffled partition: keep each device's first ``k`` distinct cells in
   input order and count devices per cell, with the in-memory clipping code
   (:func:`spatialdp.queries.truth._clip_and_count`); the per-cell counts
   (one integer per cell) are added in a tree.

The result is the :class:`~spatialdp.queries.TruthGrid` the in-memory
function returns for the concatenated partitions, exactly: the same counts,
the same "first ``k`` cells in input order", the same bookkeeping. Device ids
are integers or strings, one type in every partition (an int ``7`` and a str
``"7"`` would be two devices): refused otherwise, as in memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp._validation import check_flag, check_text, fail
from spatialdp.federated._clients import canonical_ids, id_kind, one_kind
from spatialdp.geo import Partition, h3cells
from spatialdp.queries.truth import (
    TruthGrid,
    _check_clipping,
    _clip_and_count,
    _grid_of,
    _positions,
)
from spatialdp.scale.frames import compute, require_frame

__all__ = ["truth_grid"]

_ROW_BITS = 40  # order = partition number << 40 | row: 10^12 rows per partition


@dataclass
class _Stats:
    n_points: int = 0
    n_unassigned: int = 0
    n_missing: int = 0
    n_devices: int = 0
    n_clipped_pairs: int = 0
    n_clipped_devices: int = 0
    id_kinds: frozenset[str] = field(default_factory=frozenset)

    def __add__(self, other: _Stats) -> _Stats:
        counts = {k: v + getattr(other, k) for k, v in vars(self).items() if k != "id_kinds"}
        return _Stats(**counts, id_kinds=self.id_kinds | other.id_kinds)


def _pairs(part: pd.DataFrame, number: int, cells: NDArray[np.uint64],
           partition: Partition | None, device: str, lon: str | None, lat: str | None
           ) -> tuple[pd.DataFrame, _Stats]:
    """Distinct (device, cell) pairs of one partition with their first position (a worker).

    The device ids are refused unless all integers or all strings, and given one
    dtype per kind, so that the shuffle sends a device's pairs from every
    partition to one place (:func:`~spatialdp.federated._clients.canonical_ids`).
    """
    ids = part[device]
    n_missing = int(ids.isna().sum())
    if n_missing:  # the driver refuses the grid with the count of all of them: no pairs
        return _no_pairs(), _Stats(n_points=len(part), n_missing=n_missing)
    kind = id_kind(ids, device)
    if len(part) == 0:
        positions = np.empty(0, dtype=np.int64)
    elif lon is None or lat is None:
        positions = _positions(cells, partition, part.geometry, None, None)
    else:
        positions = _positions(cells, partition, None, part[lon].to_numpy(),
                               part[lat].to_numpy())
    order = (np.int64(number) << _ROW_BITS) + np.arange(len(part), dtype=np.int64)
    pairs = pd.DataFrame({"device": canonical_ids(ids, device).to_numpy(), "pos": positions,
                          "order": order})
    pairs = pairs.drop_duplicates(["device", "pos"])  # keeps the first: min order
    stats = _Stats(n_points=len(part), n_unassigned=int((positions < 0).sum()),
                   id_kinds=frozenset([kind] if kind else []))
    return pairs, stats


def _no_pairs(device: Any = ()) -> pd.DataFrame:
    """Return an empty pairs frame (or the meta, with the devices' dtype)."""
    return pd.DataFrame({"device": np.asarray(device), "pos": np.empty(0, dtype=np.int64),
                         "order": np.empty(0, dtype=np.int64)})


def _clip(pairs: pd.DataFrame, n_cells: int, k: int) -> tuple[NDArray[np.int64], _Stats]:
    """Clip the devices of one shuffled partition (all of their pairs are here)."""
    if len(pairs) == 0:
        return np.zeros(n_cells, dtype=np.int64), _Stats()
    ordered = pairs.sort_values("order", kind="stable")
    codes, uniques = pd.factorize(ordered["device"].to_numpy())
    counts, dropped, lost = _clip_and_count(codes, ordered["pos"].to_numpy(dtype=np.int64),
                                            n_cells, k)
    return counts, _Stats(n_devices=len(uniques), n_clipped_pairs=dropped,
                          n_clipped_devices=lost)


def _add(parts: list[tuple[Any, _Stats]]) -> tuple[Any, _Stats]:
    total = parts[0]
    for counts, stats in parts[1:]:
        total = (total[0] + counts, total[1] + stats)
    return total


def _tree(items: list[Any], fan_in: int = 8) -> Any:
    from dask import delayed

    while True:  # at least one level: a single item is still made a Delayed
        items = [delayed(_add, pure=True)(items[i:i + fan_in])
                 for i in range(0, len(items), fan_in)]
        if len(items) == 1:
            return items[0]


def truth_grid(
    grid: Partition | Any,
    points: Any,
    *,
    device_ids: Any,
    max_cells_per_device: int = 1,
    lon: Any = None,
    lat: Any = None,
    name: str = "h3",
    progress: bool = False,
) -> TruthGrid:
    """Count distinct devices per H3 cell from a Dask DataFrame, each device clipped to ``k`` cells.

    The result equals :func:`spatialdp.queries.truth_grid` on the concatenated
    partitions (input order = partition order, then row order), whichever
    partitions a device's points sit in.

    Parameters
    ----------
    grid : Partition or array-like of H3 cells
        As :func:`spatialdp.queries.truth_grid`.
    points : dask.dataframe.DataFrame or dask_geopandas.GeoDataFrame
        The points: ``lon``/``lat`` columns, or Point geometries in EPSG:4326.
    device_ids : str
        The column holding each point's device. Required.
    max_cells_per_device : int, default 1
        ``k``: a device counts in at most its first ``k`` distinct cells.
    lon, lat : str, optional
        Coordinate columns; default ``"lon"``/``"lat"``, or the geometry of a
        Dask GeoDataFrame when neither is given.
    name : str
        Label of a grid given as cells.
    progress : bool, default False
        Print a progress bar.

    Returns
    -------
    TruthGrid

    Raises
    ------
    InvalidInput, CRSError, ClippingFailure
        As in memory.

    Examples
    --------
    >>> import dask.dataframe as dd
    >>> cells = h3cells.parse_cells(["85283473fffffff", "85283477fffffff"])
    >>> points = pd.DataFrame({"lon": [-121.9764] * 3, "lat": [37.3458] * 3,
    ...                        "device": [1, 1, 2]})
    >>> truth = truth_grid(cells, dd.from_pandas(points, npartitions=2), device_ids="device")
    >>> truth.counts.tolist(), truth.sensitivity  # device 1 counts once
    ([2, 0], 1)
    """
    k = _check_clipping(max_cells_per_device, device_ids)
    show = check_flag(progress, "progress")
    frame = require_frame(points, "points")
    device = check_text(device_ids, "device_ids")
    if device not in frame.columns:
        raise fail("device_ids", device, "is not a column of the points",
                   f"pass the name of the device column, one of {list(frame.columns)[:8]}")
    geometric = lon is None and lat is None and hasattr(frame, "geometry")
    lon_col = lat_col = None
    if not geometric:
        lon_col, lat_col = check_text(lon or "lon", "lon"), check_text(lat or "lat", "lat")
        absent = [c for c in (lon_col, lat_col) if c not in frame.columns]
        if absent:
            raise fail("points", f"columns {list(frame.columns)[:8]}", f"lack {absent}",
                       "pass lon= and lat= column names, or a dask_geopandas GeoDataFrame")
    cells, version, key, partition = _grid_of(grid, name)
    import dask.dataframe as dd
    from dask import delayed

    keep = [device] if geometric else [device, lon_col, lat_col]
    columns = [*keep, "geometry"] if geometric else keep
    parts = frame[columns].to_delayed()
    cells_d, part_d = delayed(cells, pure=True), delayed(partition, pure=True)
    placed = [delayed(_pairs, pure=True, nout=2)(p, i, cells_d, part_d, device, lon_col,
                                                 lat_col) for i, p in enumerate(parts)]
    meta = _no_pairs(frame._meta[device].to_numpy())
    pairs = dd.from_delayed([pair for pair, _ in placed], meta=meta, verify_meta=False)
    shuffled = pairs.shuffle(on="device", npartitions=max(1, len(parts)))
    clipped = [delayed(_clip, pure=True)(p, cells.size, k) for p in shuffled.to_delayed()]
    read_stats = _tree([(0, stats) for _, stats in placed])
    (counts, clip_stats), (_, stats) = compute(_tree(clipped), read_stats, progress=show)
    if stats.n_missing:
        raise fail("device_ids", f"{stats.n_missing} missing", "are missing values",
                   "give every point its device id")
    one_kind(stats.id_kinds, device)
    return TruthGrid(
        counts=np.asarray(counts, dtype=np.int64), cells=cells,
        resolution=h3cells.single_resolution(cells[:1]), partition_version=version,
        partition_key=key, max_cells_per_device=k, n_points=stats.n_points,
        n_unassigned=stats.n_unassigned, n_devices=clip_stats.n_devices,
        n_clipped_pairs=clip_stats.n_clipped_pairs,
        n_clipped_devices=clip_stats.n_clipped_devices, partition=partition)
