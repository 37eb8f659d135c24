"""A fast first pass for point-in-polygon: H3 cells safely inside one region.

Most points of a national fleet lie far from any border. Cells of a fine H3
grid that lie wholly inside a region shrunk by a margin can only hold points
of that region, so those points are labelled by one vectorised H3 index and a
binary search; only the rest (near borders, outside every region) go through
the exact STRtree test. The margin makes the shortcut exact: it is far wider
than the gap between an H3 cell's geodesic edges and its lon/lat polygon.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import shapely
from numpy.typing import NDArray

from spatialdp.geo import _cover, h3cells

#: Shrink regions by this many degrees (about 2 km) before taking their interior cells.
MARGIN_DEGREES = 0.02
#: Aim for about this many interior cells: finer costs memory and build time.
TARGET_CELLS = 200_000
_RES0_CELL_KM2 = 4.36e6  # mean H3 cell area at resolution 0; each level divides by 7
_KM2_PER_DEG2_AT_EQUATOR = 111.32**2


@dataclass(frozen=True)
class InteriorCellIndex:
    """Sorted interior cells and the region position each belongs to."""

    resolution: int
    cells: NDArray[np.uint64]
    regions: NDArray[np.int64]

    @classmethod
    def build(cls, geoms: NDArray[np.object_], tree: shapely.STRtree) -> InteriorCellIndex:
        """Build the interior cells of every region, minus any cell another region overlaps."""
        lat_mid = np.radians(np.mean(shapely.bounds(geoms)[:, [1, 3]]))
        area_km2 = float(shapely.area(geoms).sum()) * _KM2_PER_DEG2_AT_EQUATOR * np.cos(lat_mid)
        resolution = int(np.clip(np.round(np.log(TARGET_CELLS * _RES0_CELL_KM2 / max(area_km2, 1.0))
                                          / np.log(7.0)), 0, 10))
        shrunk = np.asarray(shapely.buffer(geoms, -MARGIN_DEGREES), dtype=object)
        # Regions that overlap (sloppy digitising) must not claim each other's points.
        left, right = tree.query(geoms, predicate="overlaps")
        for i in np.unique(left):
            shrunk[i] = shapely.difference(shrunk[i], shapely.union_all(geoms[right[left == i]]))
        shrunk = np.asarray(shapely.make_valid(shrunk, method="structure",
                                               keep_collapsed=False), dtype=object)
        usable = ~shapely.is_empty(shrunk)
        offsets, cells = _cover.cell_lists(shrunk[usable], resolution, "full")
        regions = np.repeat(np.flatnonzero(usable), np.diff(offsets)).astype(np.int64)
        order = np.argsort(cells, kind="stable")
        cells, regions = cells[order], regions[order]
        unique = np.ones(cells.size, dtype=bool)
        unique[1:] = cells[1:] != cells[:-1]
        unique[:-1] &= cells[:-1] != cells[1:]
        return cls(resolution, cells[unique], regions[unique])

    def lookup(self, lon: NDArray[np.float64], lat: NDArray[np.float64]) -> NDArray[np.int64]:
        """Return the region position of each point in an interior cell, -1 elsewhere."""
        if self.cells.size == 0:
            return np.full(lon.size, -1, dtype=np.int64)
        cells = h3cells._latlng_to_cells(lat, lon, self.resolution)
        pos = np.minimum(np.searchsorted(self.cells, cells), self.cells.size - 1)
        return np.where(self.cells[pos] == cells, self.regions[pos], -1).astype(np.int64)
