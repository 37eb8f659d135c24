"""Shapes that span the antimeridian or a pole, read one way by GeoPandas and H3.

spatialdp reads every polygon the way GeoPandas and shapely draw it: on the flat
lon/lat plane, with coordinates inside ``[-180, 180] x [-90, 90]``. H3 reads a
polygon edge that spans more than 180 degrees of longitude as crossing the
antimeridian instead. The two readings agree once no edge spans 180 degrees, so

* an edge that jumps more than 180 degrees between two longitudes that are not
  both on the antimeridian is refused as ambiguous (:func:`check_edges`): it is
  either a shape meant to cross the antimeridian (give it split at +-180) or a
  very wide shape (give it with intermediate vertices);
* a polygon 180 degrees wide or more (a polar cap, a band around the globe, a
  shape split at the antimeridian) is cut into overlapping 90-degree strips
  before H3 sees it (:func:`cut_into_strips`);
* H3 cells that straddle the antimeridian or hold a pole come back from h3ronpy
  as rings that jump across the map; :func:`repair_cell_polygons` redraws them
  as the (Multi)Polygons GeoPandas expects.
"""

from __future__ import annotations

import numpy as np
import shapely
from numpy.typing import NDArray

from spatialdp.exceptions import InvalidInput

__all__ = ["check_edges", "cut_into_strips", "is_wide", "repair_cell_polygons"]

#: Strips overlap by this many degrees, so a cell centre on a cut is in a strip.
_STRIP_OVERLAP = 1e-6
_STRIP_WEST = np.array([-180.0, -90.0, 0.0, 90.0])
_STRIP_WIDTH = 90.0


def _ring_coordinates(geoms: NDArray[np.object_]
                      ) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.int64]]:
    """Return the vertices of every ring, the ring of each vertex and its geometry."""
    parts, part_owner = shapely.get_parts(geoms, return_index=True)
    rings, ring_part = shapely.get_rings(parts, return_index=True)
    coords, vertex_ring = shapely.get_coordinates(rings, return_index=True)
    return coords, vertex_ring.astype(np.int64), part_owner[ring_part].astype(np.int64)


def check_edges(geoms: NDArray[np.object_], what: str) -> None:
    """Refuse edges that jump more than 180 degrees of longitude (ambiguous shapes).

    An edge between two points of the antimeridian (``-180`` to ``180``, as in
    ``box(-180, 80, 180, 90)``) is not ambiguous and is accepted.

    Raises
    ------
    InvalidInput
        Naming the first ambiguous edge, its geometry, and both ways to fix it.
    """
    if geoms.size == 0:
        return
    coords, vertex_ring, ring_owner = _ring_coordinates(geoms)
    if coords.shape[0] < 2:
        return
    same_ring = vertex_ring[1:] == vertex_ring[:-1]
    lon = coords[:, 0]
    jump = np.abs(np.diff(lon)) > 180.0
    on_antimeridian = (np.abs(lon[1:]) == 180.0) & (np.abs(lon[:-1]) == 180.0)
    bad = np.flatnonzero(same_ring & jump & ~on_antimeridian)
    if bad.size:
        first = int(bad[0])
        row = int(ring_owner[vertex_ring[first]])
        start, stop = coords[first].tolist(), coords[first + 1].tolist()
        raise InvalidInput(
            f"{what}: geometry at row {row} has an edge from {start} to {stop}, which "
            "spans more than 180 degrees of longitude; GeoPandas reads it the long way "
            "round and H3 as crossing the antimeridian. If the shape crosses the "
            "antimeridian, split it into parts on either side of +-180 (a MultiPolygon, "
            "as GeoJSON RFC 7946 asks; e.g. the antimeridian package's fix_polygon); if "
            "it really is that wide, add vertices with shapely.segmentize(geom, 90)"
        )


def is_wide(geoms: NDArray[np.object_]) -> NDArray[np.bool_]:
    """Mark the geometries 180 degrees of longitude wide or more (cut before H3)."""
    bounds = shapely.bounds(geoms)
    return np.asarray((bounds[:, 2] - bounds[:, 0]) >= 180.0)


def cut_into_strips(geoms: NDArray[np.object_]
                    ) -> tuple[NDArray[np.object_], NDArray[np.int64]]:
    """Cut polygons into overlapping 90-degree strips of longitude.

    Every piece is narrower than 180 degrees, so H3 reads it as GeoPandas does.
    The strips overlap by a hair, so a point inside a polygon is inside the
    interior of one of its pieces.

    Returns
    -------
    pieces : numpy.ndarray of Polygons
    owner : numpy.ndarray of int64
        Position in ``geoms`` of the polygon each piece was cut from.
    """
    n = geoms.size
    strips = shapely.box(_STRIP_WEST - _STRIP_OVERLAP, -90.0,
                         _STRIP_WEST + _STRIP_WIDTH + _STRIP_OVERLAP, 90.0)
    owner = np.repeat(np.arange(n), strips.size)
    cut = shapely.intersection(geoms[owner], np.tile(strips, n))
    parts, part_index = shapely.get_parts(cut, return_index=True)
    polygonal = shapely.get_type_id(parts) == shapely.GeometryType.POLYGON
    keep = polygonal & ~shapely.is_empty(parts)
    return (np.asarray(parts[keep], dtype=object),
            owner[part_index[keep]].astype(np.int64))


def repair_cell_polygons(polys: NDArray[np.object_]) -> NDArray[np.object_]:
    """Redraw cell polygons that straddle the antimeridian or hold a pole.

    h3ronpy writes such a cell as one ring whose longitudes jump from about 180
    to about -180, which GeoPandas reads as a band across the whole map. The
    ring is unwrapped (longitudes made continuous), closed over the pole when it
    goes once round the globe, and split at +-180 into a MultiPolygon.
    Other polygons are returned unchanged.
    """
    out = np.asarray(polys, dtype=object).copy()
    bounds = shapely.bounds(out)
    bad = np.flatnonzero((bounds[:, 2] - bounds[:, 0]) > 180.0)
    if bad.size == 0:
        return out
    coords, vertex_ring = shapely.get_coordinates(
        shapely.get_exterior_ring(out[bad]), return_index=True)
    lon = coords[:, 0]
    step = np.zeros(lon.size)
    same_ring = vertex_ring[1:] == vertex_ring[:-1]
    diff = np.diff(lon)
    step[1:] = np.where(same_ring & (np.abs(diff) > 180.0), -360.0 * np.sign(diff), 0.0)
    shift = np.cumsum(step)
    ring_start = np.searchsorted(vertex_ring, np.arange(bad.size))
    shift -= np.repeat(shift[ring_start], np.diff(np.append(ring_start, lon.size)))
    unwrapped = np.column_stack([lon + shift, coords[:, 1]])
    ring_end = np.append(ring_start[1:], lon.size) - 1
    net = unwrapped[ring_end, 0] - unwrapped[ring_start, 0]
    redrawn = np.empty(bad.size, dtype=object)
    closed = np.abs(net) < 1.0
    if closed.any():
        keep = np.isin(vertex_ring, np.flatnonzero(closed))
        redrawn[closed] = shapely.polygons(
            shapely.linearrings(unwrapped[keep],
                                indices=np.unique(vertex_ring[keep], return_inverse=True)[1]))
    for i in np.flatnonzero(~closed):  # a cell around a pole: one per pole and resolution
        ring = unwrapped[ring_start[i]:ring_end[i] + 1]
        pole = 90.0 if ring[:, 1].mean() > 0 else -90.0
        redrawn[i] = shapely.Polygon(np.vstack(
            [ring, [[ring[-1, 0], pole], [ring[0, 0], pole]]]))
    world = shapely.box(-180.0, -90.0, 180.0, 90.0)
    middle = shapely.intersection(redrawn, world)
    west_part = shapely.intersection(_translate(redrawn, 360.0), world)
    east_part = shapely.intersection(_translate(redrawn, -360.0), world)
    joined = shapely.union(shapely.union(middle, west_part), east_part)
    out[bad] = shapely.make_valid(joined, method="structure", keep_collapsed=False)
    return out


def _translate(geoms: NDArray[np.object_], dlon: float) -> NDArray[np.object_]:
    return np.asarray(shapely.transform(geoms, lambda xy: xy + np.array([dlon, 0.0])),
                      dtype=object)
