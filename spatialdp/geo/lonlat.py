"""Lon/lat input, checked: CRS, coordinates, points and polygons.

Coordinates are lon/lat degrees (EPSG:4326 or OGC:CRS84) inside
``[-180, 180] x [-90, 90]``. A layer labelled EPSG:4326 whose coordinates are
far outside that range is really projected (metres): it is refused with
:class:`~spatialdp.exceptions.CRSError` rather than turned into a partition of
area zero. Polygons are read as GeoPandas draws them, on the flat lon/lat
plane; an edge that jumps more than 180 degrees of longitude, which GeoPandas
reads the long way round and H3 as crossing the antimeridian, is refused as
ambiguous (see :mod:`spatialdp.geo.h3cells` for how wide shapes are covered).

Layers come as they are exported, so three things are repaired rather than
refused:

* a layer in any other CRS is reprojected to EPSG:4326, with a
  :class:`~spatialdp.exceptions.ReprojectedLayerWarning` (:func:`to_lonlat`, the
  one reprojection path of the Python API and the CLI); a layer without a CRS
  is refused;
* coordinates within :data:`SNAP_DEGREES` of +-180 longitude or +-90 latitude
  (float noise such as ``180.00000000000006`` in Natural Earth) are snapped onto
  the limit; beyond it they are refused;
* an edge along a pole (two vertices at latitude -90, as Natural Earth's
  Antarctica closes its ring) is a point on the sphere, not a jump across the
  map, and is accepted.

Every check returns the checked values or raises a
:class:`~spatialdp.exceptions.SpatialDPError` naming the value and the fix.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from numpy.typing import ArrayLike, NDArray

from spatialdp._validation import as_array, kind_name, short_repr
from spatialdp.exceptions import CRSError, InvalidInput, ReprojectedLayerWarning

__all__ = [
    "LONLAT_EPSG",
    "SNAP_DEGREES",
    "check_lonlat",
    "check_polygons",
    "geometry_array",
    "points_lonlat",
    "read_points",
    "to_lonlat",
]

#: The EPSG code of lon/lat degrees (WGS 84), the one CRS the geography works in.
LONLAT_EPSG = 4326
#: Coordinates within this many degrees of +-180 (longitude) or +-90 (latitude) are
#: snapped onto the limit: float noise of an exported layer (``180.00000000000006``),
#: 0.1 mm on the ground. Farther beyond the limit they are refused.
SNAP_DEGREES = 1e-9

_NUMERIC_KINDS = ("floating", "integer", "mixed-integer-float", "decimal", "empty")


def to_lonlat(frame: gpd.GeoDataFrame | gpd.GeoSeries, what: str
              ) -> gpd.GeoDataFrame | gpd.GeoSeries:
    """Return ``frame`` in lon/lat EPSG:4326, reprojecting (and saying so) when needed.

    The one reprojection path of spatialdp: the Python API
    (:meth:`~spatialdp.geo.Partition.from_geodataframe`, ``from_h3_cover``,
    ``assign``...) and the CLI's layer readers all call it. A frame already in
    EPSG:4326 or OGC:CRS84 is returned as it is.

    Raises
    ------
    CRSError
        If ``frame`` has no CRS (its coordinates could be anything), or the
        reprojection fails.

    Warns
    -----
    ReprojectedLayerWarning
        When the frame was in another CRS and has been reprojected.

    Examples
    --------
    >>> import warnings
    >>> metres = gpd.GeoSeries([shapely.Point(1113194.9, 0.0)], crs=3857)
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore", ReprojectedLayerWarning)
    ...     to_lonlat(metres, "the points").round(6).to_wkt().tolist()
    ['POINT (10 0)']
    """
    crs = frame.crs
    if crs is None:
        raise CRSError(
            f"{what} has no CRS, so its coordinates could be degrees or metres; H3 and "
            "spatialdp partitions work in lon/lat EPSG:4326. If the coordinates are lon/lat, "
            "call .set_crs(4326); otherwise set the CRS they are in with .set_crs(<EPSG code>)"
        )
    if crs.to_epsg() == LONLAT_EPSG or crs.equals("OGC:CRS84"):
        return frame
    try:
        converted = frame.to_crs(LONLAT_EPSG)
    except Exception as err:  # pyproj: a CRS without a transformation to WGS 84
        raise CRSError(f"{what} is in CRS {crs.to_string()!r}, which cannot be converted to "
                       f"lon/lat EPSG:4326 ({type(err).__name__}: {short_repr(str(err))}); "
                       "convert it with .to_crs(4326) in the tool that made it") from None
    _refuse_unconvertible(converted, crs.to_string(), what)
    kind = "geographic" if crs.is_geographic else "projected"
    warnings.warn(
        f"{what} is in {kind} CRS {crs.to_string()!r}; spatialdp reprojected it to lon/lat "
        "EPSG:4326, in which H3 and partitions work (its vertices are transformed, and "
        "its edges are then straight lines in lon/lat). Pass .to_crs(4326) yourself to "
        "silence this",
        ReprojectedLayerWarning,
        stacklevel=_caller_stacklevel(),
    )
    return converted


def _refuse_unconvertible(converted: gpd.GeoDataFrame | gpd.GeoSeries, crs: str,
                          what: str) -> None:
    """Refuse a reprojection that left coordinates infinite (outside the CRS's domain)."""
    bounds = np.asarray(converted.bounds, dtype=np.float64)
    present = ~np.isnan(bounds).all(axis=1)  # missing and empty geometries have NaN bounds
    lost = present & ~np.isfinite(bounds).all(axis=1)
    if lost.any():
        row = int(np.flatnonzero(lost)[0])
        raise CRSError(
            f"{what}: {int(lost.sum())} geometries (first at row {row}) have coordinates "
            f"that CRS {crs!r} cannot convert to lon/lat (they come out infinite: points "
            "outside the area the projection covers); repair the layer in its own CRS, or "
            "export it again in lon/lat EPSG:4326"
        )


def _caller_stacklevel() -> int:
    """Return the ``stacklevel`` of the first frame outside spatialdp (the user's line)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    level, frame = 1, sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package):
        level, frame = level + 1, frame.f_back  # type: ignore[assignment]
    return level


def geometry_array(frame: Any, name: str, what: str) -> NDArray[np.object_]:
    """Return the geometries of a GeoDataFrame or GeoSeries, in lon/lat, as an object array.

    A frame in another CRS is reprojected by :func:`to_lonlat` (with a warning).

    Raises
    ------
    InvalidInput
        If ``frame`` is neither (a bare shapely geometry, a list, a DataFrame...).
    CRSError
        If it has no CRS.

    Examples
    --------
    >>> frame = gpd.GeoSeries([shapely.box(0, 0, 1, 1)], crs=4326)
    >>> geometry_array(frame, "area", "the area").tolist()
    [<POLYGON ((1 0, 1 1, 0 1, 0 0, 1 0))>]
    """
    if not isinstance(frame, (gpd.GeoDataFrame, gpd.GeoSeries)):
        hint = ("wrap it: geopandas.GeoSeries([geom], crs=4326)"
                if isinstance(frame, shapely.Geometry)
                else "pass a geopandas.GeoDataFrame or GeoSeries in EPSG:4326")
        raise InvalidInput(f"{name}={short_repr(frame)} is a {type(frame).__name__}, not a "
                           f"GeoDataFrame or GeoSeries; {hint}")
    try:
        geometry = frame.geometry
    except AttributeError:
        raise InvalidInput(f"{name} has no active geometry column; set one with "
                           ".set_geometry(column)") from None
    return np.asarray(to_lonlat(geometry, what).values, dtype=object)


def _coordinates(values: Any, name: str) -> NDArray[np.float64]:
    fix = "pass longitudes and latitudes in degrees as numbers"
    if values is None or isinstance(values, (str, bytes)):
        raise InvalidInput(f"{name}={short_repr(values)} is not an array of numbers; {fix}")
    arr = as_array(values, name, fix)
    if arr.dtype.kind == "O":
        kind = pd.api.types.infer_dtype(arr.ravel(), skipna=True)
        if kind not in _NUMERIC_KINDS:
            raise InvalidInput(f"{name} holds {kind} values, not numbers; {fix}")
        return np.asarray(pd.Series(arr.ravel()).astype(np.float64), dtype=np.float64)
    if arr.dtype.kind not in "iuf":
        raise InvalidInput(f"{name} holds {kind_name(arr.dtype)} values, not numbers; {fix}")
    return np.asarray(arr, dtype=np.float64).ravel()


def _all_within(values: NDArray[np.float64], limit: float) -> bool:
    """Return True if every value is finite and within ``[-limit, limit]`` (NaN: False)."""
    low, high = float(values.min()), float(values.max())
    return -limit <= low and high <= limit


def check_lonlat(lon: ArrayLike, lat: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return lon/lat as float arrays; refuse non-numbers, NaN/inf and out-of-range values.

    Values within :data:`SNAP_DEGREES` beyond +-180 / +-90 (float noise) are snapped
    onto the limit.

    Raises
    ------
    InvalidInput
        Non-numeric values, different lengths, NaN or infinities.
    CRSError
        Values outside ``[-180, 180] x [-90, 90]`` (projected data, swapped axes).

    Examples
    --------
    >>> check_lonlat([10, 11.5], [45, 46])
    (array([10. , 11.5]), array([45., 46.]))
    >>> check_lonlat([180.00000000000006], [-90.00000000000001])
    (array([180.]), array([-90.]))
    """
    lon_arr = _coordinates(lon, "lon")
    lat_arr = _coordinates(lat, "lat")
    if lon_arr.shape != lat_arr.shape:
        raise InvalidInput(
            f"lon has {lon_arr.size} values but lat has {lat_arr.size}; give one lat per lon"
        )
    if lon_arr.size and _all_within(lon_arr, 180.0) and _all_within(lat_arr, 90.0):
        return lon_arr, lat_arr  # the usual case, checked without temporary arrays
    for name, values in (("lon", lon_arr), ("lat", lat_arr)):
        bad = ~np.isfinite(values)
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            raise InvalidInput(
                f"{int(bad.sum())} {name} values are NaN or infinite (first at position "
                f"{first}); drop or repair those points before assigning them"
            )
    lon_arr, lat_arr = _snap_values(lon_arr, 180.0), _snap_values(lat_arr, 90.0)
    if (np.abs(lat_arr) > 90).any():
        first = int(np.flatnonzero(np.abs(lat_arr) > 90)[0])
        raise CRSError(
            f"latitude {lat_arr[first]} at position {first} is outside [-90, 90]; "
            "are lon and lat swapped, or the data projected (use .to_crs(4326))?"
        )
    if (np.abs(lon_arr) > 180).any():
        first = int(np.flatnonzero(np.abs(lon_arr) > 180)[0])
        raise CRSError(
            f"longitude {lon_arr[first]} at position {first} is outside [-180, 180]; "
            "are the coordinates projected? convert them with .to_crs(4326)"
        )
    return lon_arr, lat_arr


def points_lonlat(
    points: Any, what: str = "points"
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return lon/lat arrays of a point GeoDataFrame/GeoSeries (checked CRS and types).

    Raises
    ------
    InvalidInput, CRSError
        Not a lon/lat frame, missing, empty or non-point geometries, bad coordinates.

    Examples
    --------
    >>> points_lonlat(gpd.GeoSeries(gpd.points_from_xy([10.0], [45.0]), crs=4326))
    (array([10.]), array([45.]))
    """
    geoms = geometry_array(points, "points", what)
    fix = "drop those rows before assigning them"
    _refuse_rows(shapely.is_missing(geoms), what, "geometries are missing (None)", fix)
    types = shapely.get_type_id(geoms)
    if (types != shapely.GeometryType.POINT).any():
        found = sorted(set(types[types != shapely.GeometryType.POINT].tolist()))
        names = [shapely.GeometryType(t).name.title() for t in found]
        raise InvalidInput(
            f"{what} must hold Point geometries only; found {names}. "
            "Use .centroid or .representative_point() for other shapes"
        )
    _refuse_rows(shapely.is_empty(geoms), what, "points are empty", fix)
    return check_lonlat(shapely.get_x(geoms), shapely.get_y(geoms))


def read_points(points: Any, lon: Any, lat: Any
                ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return checked lon/lat arrays from either a point frame or ``lon=``/``lat=``.

    Raises
    ------
    InvalidInput, CRSError
        Both or neither given, or what :func:`points_lonlat` and
        :func:`check_lonlat` refuse.

    Examples
    --------
    >>> read_points(None, [10.0], [45.0])
    (array([10.]), array([45.]))
    """
    if points is not None:
        if lon is not None or lat is not None:
            raise InvalidInput("give either a point GeoDataFrame or lon= and lat=, not both")
        return points_lonlat(points)
    if lon is None or lat is None:
        raise InvalidInput("give a point GeoDataFrame, or both lon= and lat=")
    return check_lonlat(lon, lat)


def check_polygons(geoms: NDArray[np.object_], what: str) -> NDArray[np.object_]:
    """Return the polygons with float noise at +-180 and +-90 snapped; refuse bad ones.

    Refuses missing, empty, invalid, non-polygonal or out-of-range geometries.
    Coordinates within :data:`SNAP_DEGREES` of a limit are snapped onto it first
    (:func:`snap_to_limits`), so a Natural Earth layer passes as it comes.

    Returns
    -------
    numpy.ndarray of shapely geometries
        ``geoms``, with the snapped rows replaced.

    Raises
    ------
    InvalidInput
        Missing, empty, non-polygonal (GeometryCollections included) or invalid
        geometries, and edges that jump across the antimeridian.
    CRSError
        Coordinates outside lon/lat degrees (a projected layer labelled EPSG:4326).

    Examples
    --------
    >>> check_polygons(np.array([shapely.box(0, 0, 180.00000000000006, 1)]), "the regions")
    array([<POLYGON ((180 0, 180 1, 0 1, 0 0, 180 0))>], dtype=object)
    >>> check_polygons(np.array([shapely.Point(0, 0)]), "the regions")
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: the regions: geometry at row 0 is not a (Multi)Polygon; ...
    """
    not_geometry = ~shapely.is_valid_input(geoms)
    if not_geometry.any():
        first = int(np.flatnonzero(not_geometry)[0])
        raise InvalidInput(
            f"{what}: row {first} holds {short_repr(geoms[first])}, not a shapely geometry; "
            "give (Multi)Polygons"
        )
    _refuse_rows(shapely.is_missing(geoms), what, "geometries are missing (None)",
                 "drop those rows")
    _refuse_rows(shapely.is_empty(geoms), what, "geometries are empty", "drop those rows")
    types = shapely.get_type_id(geoms)
    collection = types == shapely.GeometryType.GEOMETRYCOLLECTION
    if collection.any():
        raise InvalidInput(
            f"{what}: geometry at row {int(np.flatnonzero(collection)[0])} is a "
            "GeometryCollection; keep its polygonal parts, e.g. with "
            "shapely.make_valid(geom, method='structure', keep_collapsed=False) or "
            ".explode() and a filter on geom_type"
        )
    geoms = snap_to_limits(geoms)
    polygonal = np.isin(types, [shapely.GeometryType.POLYGON, shapely.GeometryType.MULTIPOLYGON])
    if not polygonal.all():
        raise InvalidInput(
            f"{what}: geometry at row {int(np.flatnonzero(~polygonal)[0])} is not a "
            "(Multi)Polygon; regions and query shapes must be areas"
        )
    invalid = ~shapely.is_valid(geoms)
    if invalid.any():
        first = int(np.flatnonzero(invalid)[0])
        raise InvalidInput(
            f"{what}: {int(invalid.sum())} geometries are invalid (first at row {first}: "
            f"{shapely.is_valid_reason(geoms[first])}); repair them with .make_valid()"
        )
    _check_degrees(geoms, what)
    _check_edges(geoms, what)
    return geoms


def _snap_values(values: NDArray[np.float64], limit: float) -> NDArray[np.float64]:
    """Return ``values`` with those within :data:`SNAP_DEGREES` of +-``limit`` on it."""
    near = np.abs(np.abs(values) - limit) <= SNAP_DEGREES
    if not near.any():
        return values
    return np.where(near, np.copysign(limit, values), values)


def _snap_coordinates(coords: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.column_stack([_snap_values(coords[:, 0], 180.0),
                            _snap_values(coords[:, 1], 90.0)])


def snap_to_limits(geoms: NDArray[np.object_]) -> NDArray[np.object_]:
    """Snap coordinates within :data:`SNAP_DEGREES` of +-180 / +-90 onto the limit.

    Only geometries whose bounds come that close are rewritten; the others are
    returned as they are (the same objects).

    Examples
    --------
    >>> ring = shapely.box(179.5, -90.00000000000001, 180.00000000000006, -89)
    >>> snap_to_limits(np.array([ring])).tolist()
    [<POLYGON ((180 -90, 180 -89, 179.5 -89, 179.5 -90, 180 -90))>]
    """
    if geoms.size == 0:
        return geoms
    bounds = np.abs(shapely.bounds(geoms))
    near = (np.abs(bounds[:, [0, 2]] - 180.0) <= SNAP_DEGREES).any(axis=1) | (
        np.abs(bounds[:, [1, 3]] - 90.0) <= SNAP_DEGREES).any(axis=1)
    if not near.any():
        return geoms
    out = geoms.copy()
    out[near] = shapely.transform(geoms[near], _snap_coordinates)
    return out


def _refuse_rows(bad: NDArray[np.bool_], what: str, problem: str, fix: str) -> None:
    """Refuse the rows marked ``bad``, counting them and naming the first."""
    if bad.any():
        raise InvalidInput(f"{what}: {int(bad.sum())} {problem} (first at row "
                           f"{int(np.flatnonzero(bad)[0])}); {fix}")


def _check_degrees(geoms: NDArray[np.object_], what: str) -> None:
    """Refuse geometries with coordinates outside ``[-180, 180] x [-90, 90]``.

    Raises
    ------
    CRSError
        Naming the first offending coordinate and its row; coordinates far outside
        degrees are called projected, with the fix (set the real CRS, then convert).
    """
    if geoms.size == 0:
        return
    bounds = shapely.bounds(geoms)
    lon = bounds[:, [0, 2]]
    lat = bounds[:, [1, 3]]
    if (np.abs(lon) > 360).any() or (np.abs(lat) > 180).any():
        far = (np.abs(lon) > 360).any(axis=1) | (np.abs(lat) > 180).any(axis=1)
        row = int(np.flatnonzero(far)[0])
        raise CRSError(
            f"{what}: coordinates at row {row} reach {bounds[row].tolist()} "
            "(min x, min y, max x, max y), far outside lon/lat degrees: the layer looks "
            "projected (metres or feet) although its CRS says lon/lat. Set the CRS it is "
            "really in with .set_crs(<its EPSG code>, allow_override=True), then convert "
            "it with .to_crs(4326)"
        )
    _refuse_beyond(lat, 90.0, "latitude", what,
                   "are lon and lat swapped? shapely and GeoPandas take (x, y) = (lon, lat)")
    _refuse_beyond(lon, 180.0, "longitude", what,
                   "wrap longitudes into that range, and give a shape that crosses the "
                   "antimeridian split into parts on either side of +-180 (a MultiPolygon, as "
                   "GeoJSON RFC 7946 asks; e.g. the antimeridian package's fix_polygon)")


def _refuse_beyond(bounds: NDArray[np.float64], limit: float, axis: str, what: str,
                   advice: str) -> None:
    """Refuse the first row of ``bounds`` (min and max of one axis) beyond +-``limit``."""
    beyond = (np.abs(bounds) > limit).any(axis=1)
    if beyond.any():
        row = int(np.flatnonzero(beyond)[0])
        value = float(bounds[row][np.argmax(np.abs(bounds[row]))])
        raise CRSError(f"{what}: {axis}={value!r} at row {row} is outside "
                       f"[-{limit:g}, {limit:g}] by more than the {SNAP_DEGREES:g} degrees "
                       f"snapped onto the limit; {advice}")


def _ring_coordinates(geoms: NDArray[np.object_]
                      ) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.int64]]:
    """Return the vertices of every ring, the ring of each vertex and its geometry."""
    parts, part_owner = shapely.get_parts(geoms, return_index=True)
    rings, ring_part = shapely.get_rings(parts, return_index=True)
    coords, vertex_ring = shapely.get_coordinates(rings, return_index=True)
    return coords, vertex_ring.astype(np.int64), part_owner[ring_part].astype(np.int64)


def _check_edges(geoms: NDArray[np.object_], what: str) -> None:
    """Refuse edges that jump more than 180 degrees of longitude (ambiguous shapes).

    An edge between two points of the antimeridian (``-180`` to ``180``, as in
    ``box(-180, 80, 180, 90)``) is not ambiguous and is accepted, and so is an edge
    along a pole (both ends at latitude 90, or both at -90, as Natural Earth
    closes Antarctica): on the sphere it is a single point.

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
    lat = coords[:, 1]
    on_pole = (np.abs(lat[1:]) == 90.0) & (lat[1:] == lat[:-1])
    bad = np.flatnonzero(same_ring & jump & ~on_antimeridian & ~on_pole)
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
