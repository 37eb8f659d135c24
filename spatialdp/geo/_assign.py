"""Points to regions: the vectorised lookups behind :meth:`Partition.assign`.

H3 partitions index all points at once (h3ronpy) and find the cells in a hash
table of the partition's cells; after :data:`spatialdp.geo._h3grid.MIN_POINTS`
points they build, once, a raster of pure pixels (:mod:`spatialdp.geo._h3grid`)
that answers most points by arithmetic and sends only the others to H3.
Polygon partitions test small batches exactly (STRtree bounding boxes, then
prepared geometries); once a partition has seen :data:`GRID_MIN_POINTS` points
(more for intricate polygons) it builds, once, a grid index
(:mod:`spatialdp.geo._grid`) that labels most points by arithmetic and sends only
points near a border to the exact test.

A batch in which most points fall outside every region is almost always a
mistake (lon and lat swapped, points in another CRS or another country), so it
raises :class:`UnassignedPointsWarning`.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from spatialdp.exceptions import InvalidInput
from spatialdp.geo import h3cells
from spatialdp.geo._checks import check_lonlat, points_lonlat
from spatialdp.geo._grid import exact_positions
from spatialdp.geo._h3grid import UNKNOWN, H3PixelIndex

if TYPE_CHECKING:
    from spatialdp.geo.partition import Partition

__all__ = [
    "GRID_MIN_POINTS",
    "GRID_POINTS_PER_VERTEX",
    "UNASSIGNED_WARN_MIN_POINTS",
    "UNASSIGNED_WARN_SHARE",
    "UnassignedPointsWarning",
    "lookup_cells",
    "positions_of",
]

#: Warn when more than this share of a batch falls in no region...
UNASSIGNED_WARN_SHARE = 0.5
#: ...and the batch holds at least this many points (a few strays prove nothing).
UNASSIGNED_WARN_MIN_POINTS = 100
#: A polygon partition builds its grid index once it has been asked about this many
#: points in all, plus GRID_POINTS_PER_VERTEX per vertex of its polygons: the exact
#: test costs about 2 us a point, building the grid about 0.1 s plus 3 us a vertex
#: (0.1 s for the 48 states, 1.5 s for 30,000 hexagons), and the grid then labels a
#: million points in under 0.1 s. Building only once the exact test has cost about
#: as much as the build never costs more than twice the better choice.
GRID_MIN_POINTS = 50_000
GRID_POINTS_PER_VERTEX = 2
_SWAP_SAMPLE = 10_000


class UnassignedPointsWarning(UserWarning):
    """Most points of a batch fell outside every region of the partition.

    Usually lon and lat are swapped, or the points are in another CRS than the
    one they are labelled with. Silence it, when points far from the partition
    are expected, with ``warnings.simplefilter("ignore", UnassignedPointsWarning)``.
    """


def read_points(points: Any, lon: Any, lat: Any
                ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return checked lon/lat arrays from either a point frame or ``lon=``/``lat=``."""
    if points is not None:
        if lon is not None or lat is not None:
            raise InvalidInput("give either a point GeoDataFrame or lon= and lat=, not both")
        return points_lonlat(points)
    if lon is None or lat is None:
        raise InvalidInput("give a point GeoDataFrame, or both lon= and lat=")
    return check_lonlat(lon, lat)


def lookup_cells(own: NDArray[np.uint64], cells: NDArray[np.uint64]) -> NDArray[np.int64]:
    """Return the position of each cell in the sorted ``own`` cells, -1 if absent."""
    if own.size == 0:
        return np.full(cells.size, -1, dtype=np.int64)
    positions = np.searchsorted(own, cells)
    clipped = np.minimum(positions, own.size - 1)
    found = own[clipped] == cells
    return np.where(found, clipped, -1).astype(np.int64)


def positions_of(partition: Partition, lon: NDArray[np.float64], lat: NDArray[np.float64]
                 ) -> NDArray[np.int64]:
    """Return the region position of each (checked) point, -1 outside every region."""
    partition._points_seen += lon.size
    grid = partition._grid
    if grid is None and partition._points_seen >= partition._grid_min_points():
        grid = partition._grid_index()
    if partition._cells is not None:
        return _h3_positions(partition, grid if isinstance(grid, H3PixelIndex) else None,
                             lon, lat)
    if grid is None or isinstance(grid, H3PixelIndex):
        return exact_positions(partition._prepared_geometries(), partition.tree, lon, lat)
    return grid.lookup(lon, lat)


def _h3_positions(partition: Partition, grid: H3PixelIndex | None,
                  lon: NDArray[np.float64], lat: NDArray[np.float64]) -> NDArray[np.int64]:
    """Positions in an H3 partition: pure pixels by arithmetic, the other points by H3."""
    resolution = int(partition.resolution or 0)
    if grid is None:
        return partition._cell_positions(h3cells._latlng_to_cells(lat, lon, resolution))
    positions = grid.lookup(lon, lat)
    ask = np.flatnonzero(positions == UNKNOWN)
    if ask.size:
        cells = h3cells._latlng_to_cells(lat[ask], lon[ask], resolution)
        positions[ask] = partition._cell_positions(cells)
    return positions


def warn_if_mostly_unassigned(partition: Partition, positions: NDArray[np.int64],
                              lon: NDArray[np.float64], lat: NDArray[np.float64]) -> None:
    """Warn when more than half of a batch of 100+ points fell in no region."""
    n = positions.size
    if n < UNASSIGNED_WARN_MIN_POINTS or (
            np.count_nonzero(positions < 0) <= UNASSIGNED_WARN_SHARE * n):
        return
    outside = np.flatnonzero(positions < 0)
    hint = "are lon and lat swapped (lon is x, lat is y), or the points in another CRS?"
    sample = outside[np.abs(lon[outside]) <= 90.0][:_SWAP_SAMPLE]
    if sample.size:
        placed = int((positions_of(partition, lat[sample], lon[sample]) >= 0).sum())
        if placed > sample.size / 2:
            hint = (f"lon and lat look swapped: swapped, {placed:,} of the {sample.size:,} "
                    "checked fall in a region; pass lon=x (east-west), lat=y (north-south)")
    west, south, east, north = partition.regions.total_bounds
    warnings.warn(
        f"{outside.size:,} of {n:,} points ({outside.size / n:.0%}) fall in no region of "
        f"{partition.key!r}, whose regions span lon [{west:.2f}, {east:.2f}] and lat "
        f"[{south:.2f}, {north:.2f}]; {hint}",
        UnassignedPointsWarning,
        stacklevel=3,
    )
