"""The truth grid: device counts per H3 cell, with each device clipped to ``k`` cells.

A device that shows up in many cells within one release breaks the
sensitivity a grid release is calibrated to: the noise must cover the largest
change ONE device can make to the whole grid. :func:`truth_grid` therefore
clips before it bins. Each device counts at most once per cell (the grid counts
devices, not pings) and in at most ``max_cells_per_device`` cells (its first
``k`` distinct cells in input order: pass the points in time order to keep
each device's earliest cells). The L1 sensitivity of the grid is then exactly
``k``, and :class:`TruthGrid` carries that bound so no release can claim less.

The grid is an H3 :class:`~spatialdp.geo.Partition` (points are placed with
:meth:`~spatialdp.geo.Partition.assign`) or, for grids too large to hold a
hexagon polygon per cell (10^7 cells), a plain array of H3 cells at one
resolution; both carry the same partition version.

The points may be a Dask DataFrame (billions of pings). One device's points
may then sit in many partitions (a day of pings written hour by hour), so
clipping cannot happen per partition: a device clipped to ``k`` cells in each
of ``P`` partitions could still count in ``P k`` cells. The work is split in
three steps, each on the workers:

1. per input partition: place the points with the in-memory lookup
   (:func:`_positions`) and keep each distinct (device, cell) pair once, with
   the position of its first point in the whole input (partition number, row);
2. shuffle the pairs by device (dask's shuffle), so each device's pairs meet in
   one partition;
3. per shuffled partition: keep each device's first ``k`` distinct cells in
   input order and count devices per cell with the in-memory clipping code
   (:func:`_clip_and_count`); the per-cell counts are added in a tree.

The result is the grid the in-memory path returns for the concatenated
partitions, exactly: the same counts, the same "first ``k`` cells in input
order", the same bookkeeping.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, fields
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from spatialdp._clients import canonical_ids, id_kind, one_kind
from spatialdp._dask_frames import compute, is_dask, require_frame, tree_sum
from spatialdp._validation import check_flag, check_integer, check_text, fail
from spatialdp.exceptions import ClippingFailure
from spatialdp.geo import Partition, h3cells
from spatialdp.geo.lonlat import read_points

__all__ = ["TruthGrid", "grid_version", "truth_grid"]

#: Largest contribution bound accepted (a device in more cells than this is not a count).
MAX_CELLS_PER_DEVICE = 10_000


def grid_version(cells: NDArray[np.uint64]) -> str:
    """Return the partition version of a sorted array of H3 cells at one resolution.

    The same content hash as :attr:`Partition.version` for
    ``Partition.from_h3_cells(cells)``, computed without building a hexagon
    polygon per cell.

    Examples
    --------
    >>> cells = h3cells.parse_cells(["85283473fffffff", "85283477fffffff"])
    >>> grid_version(cells) == Partition.from_h3_cells(cells).version
    True
    """
    return _version(h3cells.parse_cells(cells), "cells")


def _version(cells: NDArray[np.uint64], name: str) -> str:
    """Return the version of parsed, sorted, unique cells; refuse a mix of resolutions."""
    if cells.size == 0:
        raise fail(name, "[]", "holds no H3 cells", "give at least one cell")
    res = h3cells.cells_resolution_unchecked(cells)
    if int(res.min()) != int(res.max()):
        raise fail(name, f"{cells.size} cells", f"mix resolutions {int(res.min())} to "
                   f"{int(res.max())}", "give cells of one resolution")
    resolution = int(res[0])
    digest = hashlib.sha256(f"h3|{resolution}|".encode())
    digest.update(np.ascontiguousarray(cells, dtype=np.uint64).tobytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True, eq=False)
class TruthGrid:
    """Unprotected device counts per cell, clipped to ``max_cells_per_device`` cells a device.

    Never publish it: it is the input of a release and the reference of an
    error measurement. Build it with :func:`truth_grid`.

    Attributes
    ----------
    counts : numpy.ndarray of int64
        Distinct devices per cell, in grid order (sorted cells).
    cells : numpy.ndarray of uint64
        The grid's H3 cells, sorted.
    resolution : int
    partition_version, partition_key : str
        The version of the grid (equal to the Partition's), and ``name@version``.
    max_cells_per_device : int
        The bound ``k`` clipping guarantees: the grid's L1 sensitivity.
    n_points, n_unassigned, n_devices : int
        Points given, points in no cell (dropped, reported), devices seen.
    n_clipped_pairs, n_clipped_devices : int
        Device-cell pairs dropped by clipping, and the devices that lost some.
    """

    counts: NDArray[np.int64]
    cells: NDArray[np.uint64]
    resolution: int
    partition_version: str
    partition_key: str
    max_cells_per_device: int
    n_points: int
    n_unassigned: int
    n_devices: int
    n_clipped_pairs: int
    n_clipped_devices: int
    partition: Partition | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        # The server can only detect gross violations of the bound: more device-cell
        # pairs than devices x k, or more devices in a cell than devices.
        total = int(self.counts.sum())
        if (self.counts < 0).any() or total > self.n_devices * self.max_cells_per_device or (
                self.counts.size and int(self.counts.max()) > self.n_devices):
            raise ClippingFailure(
                f"max_cells_per_device={self.max_cells_per_device} is not guaranteed: the grid "
                f"holds {total} device-cell pairs for {self.n_devices} devices; build the grid "
                "with truth_grid(...), which clips each device to k cells")

    @property
    def sensitivity(self) -> int:
        """The grid's L1 sensitivity when a device is added or removed: ``k`` cells change by 1.

        A replaced device changes up to ``2 k``: the released grid's own
        ``sensitivity`` is the one under its relation
        (:func:`~spatialdp.queries.flat.neighbour_sensitivity`).
        """
        return self.max_cells_per_device

    @property
    def n_cells(self) -> int:
        """Number of cells of the grid."""
        return int(self.cells.size)

    def __repr__(self) -> str:
        return (f"TruthGrid(cells={self.n_cells:,}, devices={self.n_devices:,}, "
                f"max_cells_per_device={self.max_cells_per_device}, "
                f"clipped_pairs={self.n_clipped_pairs:,}, partition={self.partition_key!r})")


def _check_clipping(max_cells_per_device: Any, device_ids: Any) -> int:
    """Return the per-device cell cap; refuse points without device ids (no clipping)."""
    k = check_integer(max_cells_per_device, "max_cells_per_device", low=1,
                      high=MAX_CELLS_PER_DEVICE,
                      fix="pass the most cells one device may count in, e.g. 1")
    if device_ids is None:
        raise ClippingFailure(
            "device_ids=None: without device ids clipping cannot guarantee that a device "
            f"counts in at most max_cells_per_device={k} cells; pass the device of every point")
    return k


def _grid_of(grid: Any, name: str) -> tuple[NDArray[np.uint64], str, str, Partition | None]:
    if isinstance(grid, Partition):
        cells = grid.cells  # refuses a polygon partition
        return cells, grid.version, grid.key, grid
    if isinstance(grid, (gpd.GeoDataFrame, gpd.GeoSeries, pd.DataFrame)):
        raise fail("grid", grid, "is a frame, not a grid",
                   "pass an H3 Partition or an array of H3 cells at one resolution")
    parsed = h3cells.parse_cells(grid)
    cells = np.sort(parsed)
    if cells.size > 1:
        cells = cells[np.r_[True, cells[1:] != cells[:-1]]]
    if cells.size != parsed.size:
        raise fail("grid", f"{parsed.size} cells", f"repeats {parsed.size - cells.size} cells",
                   "pass np.unique(cells)")
    version = _version(cells, "grid")
    return cells, version, f"{name}@{version}", None


def _positions(cells: NDArray[np.uint64], partition: Partition | None,
               points: Any, lon: Any, lat: Any) -> NDArray[np.int64]:
    if partition is not None:
        return partition.assign(points, lon=lon, lat=lat).positions
    lon_arr, lat_arr = read_points(points, lon, lat)  # the partition's own reader
    res = h3cells.single_resolution(cells[:1])
    found = h3cells.latlng_to_cells_unchecked(lat_arr, lon_arr, res)
    lookup: Any = pd.Index(cells).get_indexer  # a hash table: faster than searchsorted here
    return np.asarray(lookup(found), dtype=np.int64)


def truth_grid(
    grid: Partition | ArrayLike,
    points: gpd.GeoDataFrame | gpd.GeoSeries | Any | None = None,
    *,
    device_ids: ArrayLike,
    max_cells_per_device: int = 1,
    lon: ArrayLike | None = None,
    lat: ArrayLike | None = None,
    name: str = "h3",
    progress: bool = False,
) -> TruthGrid:
    """Count distinct devices per H3 cell, each device clipped to ``max_cells_per_device`` cells.

    Parameters
    ----------
    grid : Partition or array-like of H3 cells
        An H3 partition, or its cells (one resolution) when a partition with a
        polygon per cell would not fit in memory.
    points : GeoDataFrame or GeoSeries of Points in EPSG:4326, optional
        Or give ``lon`` and ``lat``. A Dask DataFrame (or dask-geopandas
        GeoDataFrame) runs on Dask, clipping each device across partitions: the
        same grid exactly as in memory on the concatenated partitions.
        ``device_ids``, ``lon`` and ``lat`` then name its columns (default
        ``"lon"``/``"lat"``, or the geometry of a Dask GeoDataFrame).
    device_ids : array-like
        The device of each point (any hashable ids). Required: without them
        clipping cannot bound what one device contributes.
    max_cells_per_device : int, default 1
        ``k``: a device counts in at most its first ``k`` distinct cells (input
        order). The grid's L1 sensitivity is ``k``.
    lon, lat : array-like of float, optional
    name : str
        Label of a grid given as cells (a Partition keeps its own name).
    progress : bool, default False
        With Dask points, print a progress bar while the workers run.

    Returns
    -------
    TruthGrid

    Raises
    ------
    InvalidInput, CRSError
        A polygon partition, bad points or coordinates, device ids of another
        length or with missing values, a bad ``k``.
    ClippingFailure
        If ``device_ids`` is None (no bound can be guaranteed).

    Examples
    --------
    >>> cells = h3cells.parse_cells(["85283473fffffff", "85283477fffffff"])
    >>> lon, lat = [-121.9764, -121.9764, -121.9764], [37.3458, 37.3458, 37.3458]
    >>> truth = truth_grid(cells, lon=lon, lat=lat, device_ids=[1, 1, 2])
    >>> truth.counts.tolist(), truth.sensitivity  # device 1 counts once
    ([2, 0], 1)

    The same points as a Dask DataFrame, the device a column (any partitioning
    gives the same grid):

    >>> import dask.dataframe as dd
    >>> points = pd.DataFrame({"lon": lon, "lat": lat, "device": [1, 1, 2]})
    >>> truth_grid(cells, dd.from_pandas(points, npartitions=2), device_ids="device").counts
    array([2, 0])
    """
    k = _check_clipping(max_cells_per_device, device_ids)
    show = check_flag(progress, "progress")
    if is_dask(points):  # device_ids, lon and lat name its columns
        return _truth_grid_on_dask(grid, points, device_ids, k, lon, lat, name, show)
    cells, version, key, partition = _grid_of(grid, name)
    positions = _positions(cells, partition, points, lon, lat)
    ids = pd.Index(np.asarray(device_ids).ravel() if not isinstance(device_ids, pd.Index)
                   else device_ids)
    if len(ids) != positions.size:
        raise fail("device_ids", f"{len(ids)} ids", f"do not match the {positions.size} points",
                   "give one device id per point")
    if ids.hasnans:
        raise fail("device_ids", f"{int(np.sum(ids.isna()))} missing", "are missing values",
                   "give every point its device id")
    id_kind(ids, "device_ids")  # an int 7 and a str "7" would be two devices
    codes, uniques = pd.factorize(ids)
    counts, dropped, clipped_devices = _clip_and_count(codes, positions, cells.size, k)
    return _grid(cells, version, key, partition, k, _Counts(
        counts=counts, n_points=int(positions.size), n_unassigned=int((positions < 0).sum()),
        n_devices=len(uniques), n_clipped_pairs=dropped, n_clipped_devices=clipped_devices))


def _clip_and_count(device: NDArray[np.intp], positions: NDArray[np.int64], n_cells: int,
                    k: int) -> tuple[NDArray[np.int64], int, int]:
    """Return the clipped counts, the dropped pairs and the devices that lost some (vectorised)."""
    ok = positions >= 0
    dev, pos = device[ok].astype(np.int64), positions[ok]
    key = dev * np.int64(n_cells) + pos
    pairs, first = np.unique(key, return_index=True)  # distinct (device, cell) pairs
    order = np.lexsort((first, pairs // n_cells))  # by device, then first appearance
    pair_dev = (pairs // n_cells)[order]
    pair_pos = (pairs % n_cells)[order]
    start = np.r_[0, np.flatnonzero(np.diff(pair_dev)) + 1]
    rank = np.arange(pair_dev.size) - np.repeat(start, np.diff(np.r_[start, pair_dev.size]))
    keep = rank < k
    counts = np.bincount(pair_pos[keep], minlength=n_cells).astype(np.int64)
    lost = pair_dev[~keep]  # sorted by device: count the runs (np.unique hashes slowly)
    n_lost = int(lost.size and 1 + np.count_nonzero(np.diff(lost)))
    return counts, int(lost.size), n_lost


@dataclass
class _Counts:
    """A grid's per-cell device counts and bookkeeping; partial ones add up (on Dask)."""

    counts: NDArray[np.int64] | int = 0
    n_points: int = 0
    n_unassigned: int = 0
    n_missing: int = 0
    n_devices: int = 0
    n_clipped_pairs: int = 0
    n_clipped_devices: int = 0
    id_kinds: frozenset[str] = frozenset()

    def __add__(self, other: _Counts) -> _Counts:
        summed = {f.name: getattr(self, f.name) + getattr(other, f.name)
                  for f in fields(self) if f.name != "id_kinds"}
        return _Counts(**summed, id_kinds=self.id_kinds | other.id_kinds)


def _grid(cells: NDArray[np.uint64], version: str, key: str, partition: Partition | None,
          k: int, c: _Counts) -> TruthGrid:
    return TruthGrid(
        counts=np.asarray(c.counts, dtype=np.int64), cells=cells,
        resolution=h3cells.single_resolution(cells[:1]), partition_version=version,
        partition_key=key, max_cells_per_device=k, n_points=c.n_points,
        n_unassigned=c.n_unassigned, n_devices=c.n_devices,
        n_clipped_pairs=c.n_clipped_pairs, n_clipped_devices=c.n_clipped_devices,
        partition=partition)


# --------------------------------------------------------------------------- on Dask

_ROW_BITS = 40  # order = partition number << 40 | row: 10^12 rows per partition


def _pairs(part: pd.DataFrame, number: int, cells: NDArray[np.uint64],
           partition: Partition | None, device: str, lon: str | None, lat: str | None
           ) -> tuple[pd.DataFrame, _Counts]:
    """Distinct (device, cell) pairs of one partition with their first position (a worker).

    The device ids are refused unless all integers or all strings, and given one
    dtype per kind, so that the shuffle sends a device's pairs from every
    partition to one place (:func:`~spatialdp._clients.canonical_ids`).
    """
    ids = part[device]
    n_missing = int(ids.isna().sum())
    if n_missing:  # the driver refuses the grid with the count of all of them: no pairs
        return _no_pairs(), _Counts(n_points=len(part), n_missing=n_missing)
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
    return pairs, _Counts(n_points=len(part), n_unassigned=int((positions < 0).sum()),
                          id_kinds=frozenset([kind] if kind else []))


def _no_pairs(device: Any = ()) -> pd.DataFrame:
    """Return an empty pairs frame (or the meta, with the devices' dtype)."""
    return pd.DataFrame({"device": np.asarray(device), "pos": np.empty(0, dtype=np.int64),
                         "order": np.empty(0, dtype=np.int64)})


def _clip(pairs: pd.DataFrame, n_cells: int, k: int) -> _Counts:
    """Clip the devices of one shuffled partition (all of their pairs are here)."""
    if len(pairs) == 0:
        return _Counts(counts=np.zeros(n_cells, dtype=np.int64))
    ordered = pairs.sort_values("order", kind="stable")
    codes, uniques = pd.factorize(ordered["device"].to_numpy())
    counts, dropped, lost = _clip_and_count(codes, ordered["pos"].to_numpy(dtype=np.int64),
                                            n_cells, k)
    return _Counts(counts=counts, n_devices=len(uniques), n_clipped_pairs=dropped,
                   n_clipped_devices=lost)


def _point_columns(frame: Any, device_ids: Any, lon: Any, lat: Any
                   ) -> tuple[str, str | None, str | None]:
    """Return the device column and the lon/lat columns (None: the frame's geometry)."""
    device = check_text(device_ids, "device_ids")
    if device not in frame.columns:
        raise fail("device_ids", device, "is not a column of the points",
                   f"pass the name of the device column, one of {list(frame.columns)[:8]}")
    if lon is None and lat is None and hasattr(frame, "geometry"):
        return device, None, None
    lon_col, lat_col = check_text(lon or "lon", "lon"), check_text(lat or "lat", "lat")
    absent = [c for c in (lon_col, lat_col) if c not in frame.columns]
    if absent:
        raise fail("points", f"columns {list(frame.columns)[:8]}", f"lack {absent}",
                   "pass lon= and lat= column names, or a dask_geopandas GeoDataFrame")
    return device, lon_col, lat_col


def _truth_grid_on_dask(grid: Any, points: Any, device_ids: Any, k: int, lon: Any, lat: Any,
                        name: str, progress: bool) -> TruthGrid:
    """:func:`truth_grid` of a Dask DataFrame of points, clipped per device across partitions."""
    frame = require_frame(points, "points")
    device, lon_col, lat_col = _point_columns(frame, device_ids, lon, lat)
    cells, version, key, partition = _grid_of(grid, name)
    import dask.dataframe as dd
    from dask import delayed

    columns = [device, "geometry"] if lon_col is None else [device, lon_col, lat_col]
    parts = frame[columns].to_delayed()
    cells_d, part_d = delayed(cells, pure=True), delayed(partition, pure=True)
    placed = [delayed(_pairs, pure=True, nout=2)(p, i, cells_d, part_d, device, lon_col,
                                                 lat_col) for i, p in enumerate(parts)]
    meta = _no_pairs(frame._meta[device].to_numpy())
    pairs = dd.from_delayed([pair for pair, _ in placed], meta=meta, verify_meta=False)
    shuffled = pairs.shuffle(on="device", npartitions=max(1, len(parts)))
    clipped = [delayed(_clip, pure=True)(p, cells.size, k) for p in shuffled.to_delayed()]
    read, kept = compute(tree_sum([c for _, c in placed]), tree_sum(clipped),
                         progress=progress)
    if read.n_missing:
        raise fail("device_ids", f"{read.n_missing} missing", "are missing values",
                   "give every point its device id")
    one_kind(read.id_kinds, device)
    return _grid(cells, version, key, partition, k, _Counts(
        counts=kept.counts, n_points=read.n_points, n_unassigned=read.n_unassigned,
        n_devices=kept.n_devices, n_clipped_pairs=kept.n_clipped_pairs,
        n_clipped_devices=kept.n_clipped_devices))
