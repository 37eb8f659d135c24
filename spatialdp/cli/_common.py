"""Shared helpers of the subcommands: reading tables and layers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

from spatialdp._validation import fail


def read_table(path: str | os.PathLike[str], what: str) -> pd.DataFrame:
    """Read a Parquet, CSV or vector file into a (Geo)DataFrame; one-line refusals."""
    file = Path(path)
    if not file.is_file():
        raise fail(what, os.fspath(path), "does not exist",
                   "pass a Parquet, CSV, GeoPackage or GeoJSON file")
    suffix = file.suffix.lower()
    try:
        if suffix in (".parquet", ".pq", ".geoparquet"):
            try:
                import geopandas as gpd

                return gpd.read_parquet(file)
            except (ValueError, ImportError):
                return pd.read_parquet(file)
        if suffix in (".csv", ".txt"):
            return pd.read_csv(file)
        import geopandas as gpd

        return gpd.read_file(file)
    except Exception as err:
        first = (str(err).splitlines() or [type(err).__name__])[0]
        raise fail(what, os.fspath(path), f"cannot be read ({first})",
                   "pass a Parquet, CSV, GeoPackage or GeoJSON file") from None


def lon_lat(frame: Any, what: str) -> tuple[Any, Any]:
    """Return longitude and latitude columns (``lon``/``lat`` or point geometry, EPSG:4326)."""
    import geopandas as gpd

    if {"lon", "lat"} <= set(frame.columns):
        return frame["lon"].to_numpy(dtype=float), frame["lat"].to_numpy(dtype=float)
    if isinstance(frame, gpd.GeoDataFrame) and frame.geometry is not None:
        points = frame.geometry if frame.crs is None else frame.geometry.to_crs(4326)
        if not (points.geom_type == "Point").all():
            raise fail(what, f"{len(frame)} rows", "holds geometries that are not points",
                       "pass points, or lon/lat columns")
        return points.x.to_numpy(), points.y.to_numpy()
    raise fail(what, sorted(map(str, frame.columns))[:12], "has no lon/lat columns and no "
               "point geometry", "add lon and lat columns (degrees, EPSG:4326)")
