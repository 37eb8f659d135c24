"""The road nearest to each point and its tangent there: a vectorised segment search.

Roads are cut into short segments, an STRtree of their (grown) bounding boxes
yields the candidates within reach of each point, and exact point-segment
distances pick the nearest.
"""

from __future__ import annotations

from typing import Any

import geopandas as gpd
import numpy as np
import pyproj
import shapely
from numpy.typing import NDArray

from spatialdp.exceptions import CRSError, InvalidInput
from spatialdp.federated._checks import FloatArray, _check_range, _refuse_rows
from spatialdp.federated._projection import _LONLAT

__all__ = ["TANGENT_HALF_WINDOW_M"]

IntArray = NDArray[np.int64]

#: The road tangent is the chord from 1 m before to 1 m after the nearest point:
#: the segment's direction on a straight stretch, the bisector exactly at a bend.
TANGENT_HALF_WINDOW_M = 1.0


def _roads_in(roads: Any, crs: pyproj.CRS) -> NDArray[np.object_]:
    if isinstance(roads, gpd.GeoDataFrame):
        roads = roads.geometry
    if isinstance(roads, gpd.GeoSeries):
        if roads.crs is None:
            raise CRSError(
                "the roads GeoSeries has no CRS; set it with roads.set_crs(4326) if the "
                "coordinates are lon/lat, otherwise the CRS they are in"
            )
        geoms = np.asarray(roads.to_crs(crs).values, dtype=object)
    else:
        if isinstance(roads, (str, bytes)):
            raise InvalidInput("roads is a string; give LineStrings (a GeoSeries with a CRS)")
        try:
            geoms = np.asarray(roads, dtype=object).ravel()
        except (TypeError, ValueError):
            raise InvalidInput("roads is not an array of LineStrings; give a GeoSeries of "
                               "lines with a CRS") from None
        not_geometry = [g for g in geoms if g is not None and not isinstance(
            g, shapely.Geometry)]
        if not_geometry:
            raise InvalidInput(
                f"roads holds {len(not_geometry)} values that are not geometries (first: "
                f"{type(not_geometry[0]).__name__}); give LineStrings")
        if geoms.size and not shapely.is_missing(geoms).any():
            coords = shapely.get_coordinates(geoms)
            _check_range(coords[:, 0], coords[:, 1], "roads (an array is taken as lon/lat)")
        geoms = np.asarray(gpd.GeoSeries(geoms, crs=_LONLAT).to_crs(crs).values, dtype=object)
    if geoms.size == 0:
        raise InvalidInput("roads is empty; give at least one LineString")
    bad = shapely.is_missing(geoms) | shapely.is_empty(geoms)
    _refuse_rows(bad, InvalidInput, lambda first: (
        f"{int(bad.sum())} roads are missing or empty (first at position {first}); drop them"
    ))
    lines = np.isin(shapely.get_type_id(geoms),
                    [shapely.GeometryType.LINESTRING, shapely.GeometryType.MULTILINESTRING])
    _refuse_rows(~lines, InvalidInput, lambda first: (
        f"road at position {first} is not a (Multi)LineString; roads must be lines"
    ))
    _refuse_rows(shapely.length(geoms) <= 0, InvalidInput, lambda first: (
        f"road at position {first} has zero length; a road needs a direction: drop it"
    ))
    return geoms


def _road_tangents(xy: FloatArray, roads: NDArray[np.object_], reach_m: float,
                   scale: FloatArray) -> FloatArray:
    """Tangent (projected) of the road nearest to each point; NaN beyond ``reach_m``.

    ``scale`` is the projection's scale at each point (projected units per ground
    metre): distances are compared in ground metres. Roads are cut into segments
    no longer than twice the largest reach; an STRtree of their bounding boxes,
    grown by that reach, yields every segment within reach, and exact
    point-segment distances pick the nearest (ties: the lower segment index, i.e.
    road order). The tangent is the chord between the road points
    ``TANGENT_HALF_WINDOW_M`` before and after the nearest point, located on the
    road's cumulative length: what ``line_locate_point`` and
    ``line_interpolate_point`` compute, without creating a geometry per example.
    """
    reach = reach_m * scale
    max_distance = float(reach.max())
    parts = shapely.segmentize(shapely.get_parts(roads), max(2.0 * max_distance, 1.0))
    coords, part = shapely.get_coordinates(parts, return_index=True)
    same = part[1:] == part[:-1]
    a, b, seg_part = coords[:-1][same], coords[1:][same], part[:-1][same]
    length = np.hypot(*(b - a).T)
    keep = length > 0  # repeated vertices
    a, b, seg_part, length = a[keep], b[keep], seg_part[keep], length[keep]
    end = np.cumsum(length)
    start = end - length
    first = np.searchsorted(seg_part, seg_part, side="left")
    last = np.searchsorted(seg_part, seg_part, side="right") - 1

    low, high = np.minimum(a, b) - max_distance, np.maximum(a, b) + max_distance
    tree = shapely.STRtree(shapely.box(low[:, 0], low[:, 1], high[:, 0], high[:, 1]))
    point, seg = tree.query(shapely.points(xy))  # grouped by point, ascending
    tangents = np.full_like(xy, np.nan)
    if point.size == 0:
        return tangents
    direction = b - a
    inv_len2 = 1.0 / length**2

    def nearest_on_segment(p: IntArray, k: IntArray) -> tuple[FloatArray, FloatArray]:
        gx, gy = xy[p, 0] - a[k, 0], xy[p, 1] - a[k, 1]
        t = np.clip((gx * direction[k, 0] + gy * direction[k, 1]) * inv_len2[k], 0.0, 1.0)
        gx -= t * direction[k, 0]
        gy -= t * direction[k, 1]
        return t, gx * gx + gy * gy

    _, dist2 = nearest_on_segment(point, seg)
    group = np.flatnonzero(np.r_[True, point[1:] != point[:-1]])
    size = np.diff(np.r_[group, point.size])
    nearest = np.minimum.reduceat(dist2, group)
    tied = dist2 == np.repeat(nearest, size)
    seg = np.minimum.reduceat(np.where(tied, seg, seg.max() + 1), group)
    point = point[group]
    near = nearest <= reach[point] ** 2
    point, seg = point[near], seg[near]
    t, _ = nearest_on_segment(point, seg)
    window = TANGENT_HALF_WINDOW_M * scale[point]

    along = start[seg] + t * length[seg]
    lo, hi = start[first[seg]], end[last[seg]]

    def at(distance: FloatArray) -> FloatArray:
        k = np.clip(np.searchsorted(end, distance, side="left"), first[seg], last[seg])
        frac = np.clip((distance - start[k]) / length[k], 0.0, 1.0)
        return a[k] + frac[:, None] * direction[k]

    chord = at(np.clip(along + window, lo, hi)) - at(np.clip(along - window, lo, hi))
    tiny = np.hypot(*chord.T) <= 1e-9 * np.maximum(1.0, hi - lo)  # a closed loop under 2 m
    chord[tiny] = direction[seg][tiny]
    tangents[point] = chord
    return tangents

