"""Input checks shared by the geography layer: CRS, coordinates, geometries."""

from __future__ import annotations

from typing import Any

import geopandas as gpd
import numpy as np
import shapely
from numpy.typing import ArrayLike, NDArray

from spatialdp.exceptions import CRSError, InvalidInput

LONLAT_EPSG = 4326


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


def check_lonlat(lon: ArrayLike, lat: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return lon/lat as float arrays; refuse NaN/inf and out-of-range values."""
    lon_arr = np.asarray(lon, dtype=np.float64).ravel()
    lat_arr = np.asarray(lat, dtype=np.float64).ravel()
    if lon_arr.shape != lat_arr.shape:
        raise InvalidInput(
            f"lon has {lon_arr.size} values but lat has {lat_arr.size}; give one lat per lon"
        )
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
        raise InvalidInput(
            f"latitude {lat_arr[first]} at position {first} is outside [-90, 90]; "
            "are lon and lat swapped, or the data projected (use .to_crs(4326))?"
        )
    if (np.abs(lon_arr) > 180).any():
        first = int(np.flatnonzero(np.abs(lon_arr) > 180)[0])
        raise InvalidInput(
            f"longitude {lon_arr[first]} at position {first} is outside [-180, 180]; "
            "are the coordinates projected? convert them with .to_crs(4326)"
        )
    return lon_arr, lat_arr


def points_lonlat(
    points: Any, what: str = "points"
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """lon/lat arrays of a point GeoDataFrame/GeoSeries (checked CRS and types)."""
    require_lonlat_crs(points, what)
    geoms = points.geometry if isinstance(points, gpd.GeoDataFrame) else points
    types = shapely.get_type_id(geoms.values)
    if (types != shapely.GeometryType.POINT).any():
        raise InvalidInput(
            f"{what} must hold Point geometries only; found {sorted(set(geoms.geom_type))}. "
            "Use .centroid or .representative_point() for other shapes"
        )
    return check_lonlat(shapely.get_x(geoms.values), shapely.get_y(geoms.values))


def check_polygons(geoms: NDArray[np.object_], what: str) -> None:
    """Refuse missing, empty, invalid or non-polygonal geometries."""
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
    polygonal = np.isin(
        shapely.get_type_id(geoms),
        [shapely.GeometryType.POLYGON, shapely.GeometryType.MULTIPOLYGON],
    )
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
