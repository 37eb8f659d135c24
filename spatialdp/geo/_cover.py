"""Polygons to H3 cells: the size guard, and shapes wider than 180 degrees.

:func:`cell_lists` is the one place spatialdp asks H3 for the cells of
polygons. Before it asks, :func:`check_size` estimates how many cells the
answer holds (area over the mean cell area, plus one cell per edge length of
boundary) and refuses an answer too large to hold in memory. Polygons 180
degrees wide or more are cut into strips first (see
:mod:`spatialdp.geo._antimeridian`), so that H3 covers the shape GeoPandas draws.
"""

from __future__ import annotations

from typing import Any

import h3
import h3ronpy
import numpy as np
import pandas as pd
import pyarrow as pa
import shapely
from h3ronpy import vector as h3vector
from numpy.typing import NDArray
from scipy import sparse

from spatialdp._validation import check_choice
from spatialdp.exceptions import InvalidInput
from spatialdp.geo import _antimeridian

__all__ = ["CONTAINMENT_MODES", "MAX_LIST_CELLS", "cell_lists", "cell_polygons_of",
           "check_containment", "check_size", "estimate_cells", "incidence"]

#: The containment modes, named as in h3-py's ``h3shape_to_cells_experimental``:
#: a cell belongs to a polygon when its centre lies inside (``center``), when it
#: intersects the polygon at all (``overlap``), or when it lies wholly inside (``full``).
CONTAINMENT_MODES: dict[str, Any] = {
    "center": h3ronpy.ContainmentMode.ContainsCentroid,
    "overlap": h3ronpy.ContainmentMode.IntersectsBoundary,
    "full": h3ronpy.ContainmentMode.ContainsBoundary,
}

#: Most cells one call may list (estimated before H3 builds them). A cell list
#: costs about 30 bytes a cell at its peak, so this caps a call near 0.6 GB.
MAX_LIST_CELLS = 20_000_000

_EARTH_RADIUS_KM = 6371.0088
_KM_PER_DEGREE = np.pi * _EARTH_RADIUS_KM / 180.0


def estimate_cells(geoms: NDArray[np.object_], resolution: int) -> float:
    """Estimate how many H3 cells at ``resolution`` the polygons touch, in all.

    The area on the sphere (through an equal-area cylindrical projection of the
    lon/lat shape, edges densified to 1 degree) over the mean cell area, plus the
    boundary length over the mean edge length: thin shapes have little area but
    still touch one cell per edge length along their border.
    """
    if geoms.size == 0:
        return 0.0
    dense = shapely.segmentize(geoms, 1.0)
    equal_area = shapely.transform(dense, lambda xy: np.column_stack(
        [np.radians(xy[:, 0]), np.sin(np.radians(np.clip(xy[:, 1], -90.0, 90.0)))]))
    area_km2 = float(shapely.area(equal_area).sum()) * _EARTH_RADIUS_KM**2
    local_km = shapely.transform(dense, lambda xy: np.column_stack(
        [xy[:, 0] * np.cos(np.radians(xy[:, 1])), xy[:, 1]]) * _KM_PER_DEGREE)
    boundary_km = float(shapely.length(shapely.boundary(local_km)).sum())
    return float(area_km2 / h3.average_hexagon_area(resolution, "km^2")
                 + boundary_km / h3.average_hexagon_edge_length(resolution, "km"))


def check_size(geoms: NDArray[np.object_], resolution: int, max_cells: int, what: str) -> None:
    """Refuse a cover estimated to hold more than ``max_cells`` cells.

    Raises
    ------
    InvalidInput
        Naming the estimate, the limit and the finest resolution that fits.
    """
    estimate = estimate_cells(geoms, resolution)
    if estimate <= max_cells:
        return
    fits = [r for r in range(resolution) if estimate_cells(geoms, r) <= max_cells]
    advice = (f"use resolution={fits[-1]} or coarser" if fits
              else "cover a smaller area")
    raise InvalidInput(
        f"resolution={resolution} {what} would take about {estimate:,.0f} H3 cells, above "
        f"the limit of {max_cells:,} (about {estimate * 8 / 1e9:,.1f} GB for the ids "
        f"alone); {advice}, or split the area into parts"
    )


def cell_polygons_of(cells: NDArray[np.uint64]) -> NDArray[np.object_]:
    """Return the polygons of valid cells, redrawn where they span +-180 or a pole."""
    wkb = pa.array(h3vector.cells_to_wkb_polygons(np.asarray(cells, dtype=np.uint64)))
    polys = np.asarray(shapely.from_wkb(wkb.to_numpy(zero_copy_only=False)), dtype=object)
    return _antimeridian.repair_cell_polygons(polys)


def _h3_lists(geoms: NDArray[np.object_], resolution: int, containment: str
              ) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    wkb = pa.array(shapely.to_wkb(geoms), type=pa.binary())
    lists = pa.array(h3vector.wkb_to_cells(wkb, resolution,
                                           containment_mode=CONTAINMENT_MODES[containment]))
    offsets = lists.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    cells = lists.values.to_numpy(zero_copy_only=False).astype(np.uint64)
    # Sliced arrow lists may not start at 0.
    return offsets - offsets[0], cells[offsets[0]:offsets[-1]]


def _owned(offsets: NDArray[np.int64], owner: NDArray[np.int64]) -> NDArray[np.int64]:
    return np.repeat(owner, np.diff(offsets))


def cell_lists(geoms: NDArray[np.object_], resolution: int, containment: str
               ) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    """Cells of each (checked) polygon as CSR-style ``(offsets, cells)``.

    Polygons narrower than 180 degrees go to H3 as they are. Wider ones are cut
    into strips; their cells are the union of the strips' cells, sorted. In
    ``full`` mode a cell that straddles a cut is in no strip wholly, so the
    strips' overlapping cells are also tested against the whole polygon.
    """
    if geoms.size == 0:
        return np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.uint64)
    wide = _antimeridian.is_wide(geoms)
    if not wide.any():
        return _h3_lists(geoms, resolution, containment)
    narrow = np.flatnonzero(~wide)
    strips, strip_owner = _antimeridian.cut_into_strips(geoms[wide])
    strip_owner = np.flatnonzero(wide)[strip_owner]
    pieces = np.concatenate([geoms[narrow], strips])
    piece_owner = np.concatenate([narrow, strip_owner])
    offsets, cells = _h3_lists(pieces, resolution, containment)
    owner = _owned(offsets, piece_owner)
    if containment == "full" and strips.size:
        over_offsets, over_cells = _h3_lists(strips, resolution, "overlap")
        over_owner = _owned(over_offsets, strip_owner)
        known = pd.MultiIndex.from_arrays([over_owner, over_cells]).isin(
            pd.MultiIndex.from_arrays([owner, cells]))  # already wholly in a strip
        test_cells, test_owner = over_cells[~known], over_owner[~known]
        covered = shapely.covers(geoms[test_owner], cell_polygons_of(test_cells))
        cells = np.concatenate([cells, test_cells[covered]])
        owner = np.concatenate([owner, test_owner[covered]])
    order = np.lexsort((cells, owner))
    cells, owner = cells[order], owner[order]
    first = np.ones(cells.size, dtype=bool)
    first[1:] = (cells[1:] != cells[:-1]) | (owner[1:] != owner[:-1])
    cells, owner = cells[first], owner[first]
    return np.searchsorted(owner, np.arange(geoms.size + 1)).astype(np.int64), cells


def check_containment(containment: Any) -> str:
    """Return a containment mode, refusing anything else."""
    return check_choice(containment, "containment", tuple(CONTAINMENT_MODES))


def incidence(offsets: NDArray[np.int64], columns: NDArray[np.int64], n_cells: int
              ) -> tuple[sparse.csr_array, NDArray[np.int64]]:
    """Return the 0/1 query-by-cell matrix and, per query, its cells outside the partition.

    ``columns`` holds the partition position of each listed cell (-1 when absent).
    """
    n_queries = offsets.size - 1
    row = np.repeat(np.arange(n_queries), np.diff(offsets))
    inside = columns >= 0
    outside = np.bincount(row[~inside], minlength=n_queries).astype(np.int64)
    matrix = sparse.csr_array(
        (np.ones(int(inside.sum()), dtype=np.int8), (row[inside], columns[inside])),
        shape=(n_queries, n_cells),
    )
    matrix.sum_duplicates()
    matrix.data[:] = 1  # incidence, not multiplicity
    return matrix, outside
