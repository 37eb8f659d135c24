"""Input checks shared by the geography layer: CRS, coordinates, geometries.

Coordinates are lon/lat degrees (EPSG:4326 or OGC:CRS84) inside
``[-180, 180] x [-90, 90]``. A layer labelled EPSG:4326 whose coordinates are
far outside that range is really projected (metres): it is refused with
:class:`~spatialdp.exceptions.CRSError` rather than turned into a partition of
area zero. Polygons are read as GeoPandas draws them; see
:mod:`spatialdp.geo._antimeridian` for shapes that cross the antimeridian.
"""

from __future__ import annotations

import reprlib
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from numpy.typing import ArrayLike, NDArray

from spatialdp._validation import check_ids
from spatialdp.exceptions import CRSError, InvalidInput
from spatialdp.geo._antimeridian import check_edges

__all__ = [
    "LONLAT_EPSG",
    "as_array",
    "check_lonlat",
    "check_polygons",
    "geometry_array",
    "kind_name",
    "points_lonlat",
    "region_ids_of",
    "require_lonlat_crs",
    "short_repr",
]

LONLAT_EPSG = 4326

_NUMERIC_KINDS = ("floating", "integer", "mixed-integer-float", "decimal", "empty")


_KIND_NAMES = {"U": "string", "S": "bytes", "b": "bool", "c": "complex", "M": "datetime",
               "m": "timedelta", "V": "raw", "O": "object", "f": "float", "i": "integer",
               "u": "integer"}


def kind_name(dtype: np.dtype[Any]) -> str:
    """Return a plain name for the kind of values a numpy dtype holds ("string", "bool"...)."""
    return _KIND_NAMES.get(dtype.kind, str(dtype))


def short_repr(value: Any) -> str:
    """Return a repr short enough for an error message."""
    short = reprlib.Repr()
    short.maxstring = short.maxother = 60
    short.maxlist = short.maxtuple = 4
    return short.repr(value)


def require_lonlat_crs(frame: gpd.GeoDataFrame | gpd.GeoSeries, what: str) -> None:
    """Refuse a GeoDataFrame whose CRS is missing or is not lon/lat EPSG:4326."""
    crs = frame.crs
    if crs is None:
        raise CRSError(
            f"{what} has no CRS; H3 and spatialdp partitions work in lon/lat EPSG:4326. "
            "If the coordinates are lon/lat, call .set_crs(4326); otherwise set the "
            "CRS they are in and call .to_crs(4326)"
        )
    if crs.to_epsg() != LONLAT_EPSG and not crs.equals("OGC:CRS84"):
        kind = "geographic" if crs.is_geographic else "projected"
        raise CRSError(
            f"{what} is in {kind} CRS {crs.to_string()!r}, but H3 and spatialdp "
            "partitions need lon/lat EPSG:4326; convert it with .to_crs(4326)"
        )


def geometry_array(frame: Any, name: str, what: str) -> NDArray[np.object_]:
    """Return the geometries of a lon/lat GeoDataFrame or GeoSeries as an object array.

    Raises
    ------
    InvalidInput
        If ``frame`` is neither (a bare shapely geometry, a list, a DataFrame...).
    CRSError
        If its CRS is missing or not lon/lat.
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
    require_lonlat_crs(geometry, what)
    return np.asarray(geometry.values, dtype=object)


def as_array(values: Any, name: str, fix: str) -> NDArray[Any]:
    """Return ``np.asarray(values)``, refusing what numpy cannot hold as one array."""
    try:
        return np.asarray(values)
    except (TypeError, ValueError, UnicodeError):  # ragged lists, undecodable bytes...
        raise InvalidInput(f"{name}={short_repr(values)} cannot be read as one array; "
                           f"{fix}") from None


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

    Raises
    ------
    InvalidInput
        Non-numeric values, different lengths, NaN or infinities.
    CRSError
        Values outside ``[-180, 180] x [-90, 90]`` (projected data, swapped axes).
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
    """Return lon/lat arrays of a point GeoDataFrame/GeoSeries (checked CRS and types)."""
    geoms = geometry_array(points, "points", what)
    missing = shapely.is_missing(geoms)
    if missing.any():
        raise InvalidInput(
            f"{what}: {int(missing.sum())} geometries are missing (None) (first at row "
            f"{int(np.flatnonzero(missing)[0])}); drop those rows before assigning them"
        )
    types = shapely.get_type_id(geoms)
    if (types != shapely.GeometryType.POINT).any():
        found = sorted(set(types[types != shapely.GeometryType.POINT].tolist()))
        names = [shapely.GeometryType(t).name.title() for t in found]
        raise InvalidInput(
            f"{what} must hold Point geometries only; found {names}. "
            "Use .centroid or .representative_point() for other shapes"
        )
    empty = shapely.is_empty(geoms)
    if empty.any():
        raise InvalidInput(
            f"{what}: {int(empty.sum())} points are empty (first at row "
            f"{int(np.flatnonzero(empty)[0])}); drop those rows before assigning them"
        )
    return check_lonlat(shapely.get_x(geoms), shapely.get_y(geoms))


def check_polygons(geoms: NDArray[np.object_], what: str) -> None:
    """Refuse missing, empty, invalid, non-polygonal or out-of-range geometries.

    Raises
    ------
    InvalidInput
        Missing, empty, non-polygonal (GeometryCollections included) or invalid
        geometries, and edges that jump across the antimeridian.
    CRSError
        Coordinates outside lon/lat degrees (a projected layer labelled EPSG:4326).
    """
    not_geometry = ~shapely.is_valid_input(geoms)
    if not_geometry.any():
        first = int(np.flatnonzero(not_geometry)[0])
        raise InvalidInput(
            f"{what}: row {first} holds {short_repr(geoms[first])}, not a shapely geometry; "
            "give (Multi)Polygons"
        )
    missing = shapely.is_missing(geoms)
    if missing.any():
        raise InvalidInput(
            f"{what}: {int(missing.sum())} geometries are missing (None) "
            f"(first at row {int(np.flatnonzero(missing)[0])}); drop those rows"
        )
    empty = shapely.is_empty(geoms)
    if empty.any():
        raise InvalidInput(
            f"{what}: {int(empty.sum())} geometries are empty (first at row "
            f"{int(np.flatnonzero(empty)[0])}); drop those rows"
        )
    types = shapely.get_type_id(geoms)
    collection = types == shapely.GeometryType.GEOMETRYCOLLECTION
    if collection.any():
        raise InvalidInput(
            f"{what}: geometry at row {int(np.flatnonzero(collection)[0])} is a "
            "GeometryCollection; keep its polygonal parts, e.g. with "
            "shapely.make_valid(geom, method='structure', keep_collapsed=False) or "
            ".explode() and a filter on geom_type"
        )
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
    check_degrees(geoms, what)
    check_edges(geoms, what)


def check_degrees(geoms: NDArray[np.object_], what: str) -> None:
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
    bad_lat = (np.abs(lat) > 90).any(axis=1)
    if bad_lat.any():
        row = int(np.flatnonzero(bad_lat)[0])
        value = float(lat[row][np.argmax(np.abs(lat[row]))])
        raise CRSError(
            f"{what}: latitude={value!r} at row {row} is outside [-90, 90]; are lon and "
            "lat swapped? shapely and GeoPandas take (x, y) = (lon, lat)"
        )
    bad_lon = (np.abs(lon) > 180).any(axis=1)
    if bad_lon.any():
        row = int(np.flatnonzero(bad_lon)[0])
        value = float(lon[row][np.argmax(np.abs(lon[row]))])
        raise CRSError(
            f"{what}: longitude={value!r} at row {row} is outside [-180, 180]; wrap "
            "longitudes into that range, and give a shape that crosses the antimeridian "
            "split into parts on either side of +-180 (a MultiPolygon, as GeoJSON RFC 7946 "
            "asks; e.g. the antimeridian package's fix_polygon)"
        )


def region_ids_of(frame: gpd.GeoDataFrame, id_column: Any) -> NDArray[np.object_]:
    """Return the region ids of ``frame[id_column]`` as strings: present and unique.

    Raises
    ------
    InvalidInput
        A column that is missing or repeated, missing ids, or ids repeated once
        turned into strings.
    """
    try:
        present = id_column in frame.columns
    except TypeError:
        present = False
    if not present:
        raise InvalidInput(
            f"id_column {short_repr(id_column)} is not a column; columns are "
            f"{list(frame.columns)}"
        )
    column = frame[id_column]
    if isinstance(column, pd.DataFrame):
        raise InvalidInput(f"id_column {id_column!r} names {column.shape[1]} columns; "
                           "rename the repeats so that it names one")
    check_ids(column, f"id_column {id_column!r}", unique=False)  # no missing ids
    ids = column.astype(str).to_numpy(dtype=object)
    duplicated = pd.Index(ids).duplicated()
    if duplicated.any():
        raise InvalidInput(
            f"duplicate region ids {sorted(set(ids[duplicated]))[:5]} in column "
            f"{id_column!r}; each region needs a unique id (dissolve the duplicates "
            "with frame.dissolve(by=id_column))"
        )
    return np.asarray(ids, dtype=object)
