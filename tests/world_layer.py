"""A synthetic world countries layer, generated like a real one (Natural Earth).

Tests that take a layer "as it comes" use it: from layer to partition, report,
map, file, :func:`read_report` and card, with no manual fix. It reproduces what
makes real world layers hard, on a dozen simple countries:

* float noise at the antimeridian: longitudes ``180.00000000000006`` and
  ``-180.00000000000003`` (and ``-179.99999999999994`` inside the range), as
  Natural Earth's ``ne_110m_admin_0_countries`` has them;
* an edge along the south pole: Antarctica's ring runs along latitude -90 from
  +180 to -180, as Natural Earth closes it;
* countries split at the antimeridian into MultiPolygons with parts at +180 and
  -180 (``RUS`` and ``FJI``, like Russia and Fiji);
* a ``NAME`` column with the names, an ``ISO_A3`` column with codes such as
  ``"-99"`` (repeated, so not an id), and a unique ``ADM0_A3`` id column;
* neighbours that share borders exactly (touching, never overlapping).

:func:`world_layer` returns it in lon/lat or in any projected CRS (an
equal-area one such as ``"EPSG:6933"`` or ``"EPSG:8857"``, or Web Mercator
``"EPSG:3857"``, clipped like real Web Mercator layers to its latitude range).
:func:`world_points` places points in its countries.

Examples
--------
>>> layer = world_layer()
>>> layer.crs.to_epsg(), len(layer), layer.ISO_A3.tolist().count("-99")
(4326, 12, 2)
>>> world_layer("EPSG:6933").crs.to_epsg()
6933
"""

from __future__ import annotations

import geopandas as gpd
import numpy as np
import pandas as pd
import pyproj
import shapely

__all__ = ["EAST", "NOISE_EAST", "NOISE_WEST", "WEST", "world_layer", "world_points"]

#: The float noise of an exported world layer at the antimeridian.
NOISE_EAST = 180.00000000000006
NOISE_WEST = -180.00000000000003
#: Noise inside the range (Natural Earth's Antarctica has it).
INSIDE_WEST = -179.99999999999994
EAST, WEST = 180.0, -180.0


def _box(west: float, south: float, east: float, north: float) -> shapely.Polygon:
    return shapely.Polygon([(west, south), (east, south), (east, north), (west, north)])


def _antarctica() -> shapely.Polygon:
    """A ring that runs along the coast, down the antimeridian and along the pole."""
    coast = [(-180.0, -65.0), (-120.0, -72.0), (-60.0, -63.0), (0.0, -70.0),
             (60.0, -67.0), (120.0, -66.0), (180.0, -68.0)]
    ring = [(NOISE_WEST, -65.0), *coast[1:-1], (NOISE_EAST, -68.0), (NOISE_EAST, -90.0),
            (INSIDE_WEST, -90.0), (NOISE_WEST, -65.0)]
    return shapely.Polygon(ring)


def _countries() -> list[tuple[str, str, str, shapely.Geometry]]:
    """(ADM0_A3, ISO_A3, NAME, geometry) of each country, in lon/lat degrees."""
    return [
        ("USA", "USA", "United States of America", _box(-125.0, 25.0, -67.0, 49.0)),
        ("CAN", "CAN", "Canada", _box(-140.0, 49.0, -60.0, 70.0)),
        ("MEX", "MEX", "Mexico", _box(-117.0, 15.0, -87.0, 25.0)),
        ("BRA", "BRA", "Brazil", _box(-74.0, -33.0, -35.0, 5.0)),
        ("FRA", "FRA", "France", _box(-5.0, 42.0, 8.0, 51.0)),
        ("DEU", "DEU", "Germany", _box(8.0, 47.0, 15.0, 55.0)),
        ("KOS", "-99", "Kosovo", _box(20.0, 42.0, 21.5, 43.2)),
        ("CYN", "-99", "N. Cyprus", _box(32.5, 35.1, 34.6, 35.7)),
        ("AUS", "AUS", "Australia", _box(113.0, -39.0, 153.0, -11.0)),
        ("RUS", "RUS", "Russia", shapely.MultiPolygon([
            _box(30.0, 50.0, NOISE_EAST, 75.0), _box(NOISE_WEST, 60.0, -170.0, 70.0)])),
        ("FJI", "FJI", "Fiji", shapely.MultiPolygon([
            _box(177.0, -19.0, NOISE_EAST, -16.0), _box(NOISE_WEST, -19.0, -178.0, -16.0)])),
        ("ATA", "ATA", "Antarctica", _antarctica()),
    ]


def world_layer(crs: str | int = "EPSG:4326") -> gpd.GeoDataFrame:
    """Return the synthetic world countries layer, in ``crs``.

    In lon/lat (the default) it carries the float noise of a real export. In
    another CRS it is the same layer reprojected by pyproj, as a GIS would save it:
    first clipped to the latitudes the CRS covers (Web Mercator stops at about
    +-85.05 degrees; equal-area CRSs cover the whole globe).

    Parameters
    ----------
    crs : str or int
        Any CRS pyproj knows: ``"EPSG:4326"``, ``"EPSG:6933"``, ``"EPSG:8857"``,
        ``"EPSG:3857"``...

    Returns
    -------
    geopandas.GeoDataFrame
        Columns ``ADM0_A3`` (unique id), ``ISO_A3`` (with ``"-99"`` codes),
        ``NAME``, ``POP_EST`` and ``geometry``; one row per country.

    Examples
    --------
    >>> world_layer().set_index("ADM0_A3").loc["FJI", "NAME"]
    'Fiji'
    """
    rows = _countries()
    frame = gpd.GeoDataFrame(
        {"ADM0_A3": [r[0] for r in rows], "ISO_A3": [r[1] for r in rows],
         "NAME": [r[2] for r in rows],
         "POP_EST": np.arange(1, len(rows) + 1, dtype=np.int64) * 1_000_000},
        geometry=[r[3] for r in rows], crs="EPSG:4326")
    target = pyproj.CRS.from_user_input(crs)
    if target.to_epsg() == 4326:
        return frame
    area = target.area_of_use
    if area is not None and (area.south > -90.0 or area.north < 90.0):
        frame = frame.set_geometry(frame.geometry.clip_by_rect(-180.0, area.south,
                                                               180.0, area.north))
    return frame.to_crs(target)


def world_points(n: int, seed: int = 0) -> pd.DataFrame:
    """Return ``n`` points spread over the countries (``lon``, ``lat``, ``ADM0_A3``).

    Each country gets about ``n / 12`` points, uniform in its bounding box and kept
    when inside it (so Russia's and Fiji's parts on both sides of the antimeridian
    and Antarctica down to the pole all get points).

    Examples
    --------
    >>> points = world_points(240, seed=1)
    >>> len(points), points.ADM0_A3.nunique()
    (240, 12)
    """
    rng = np.random.default_rng(seed)
    layer = world_layer()
    per = np.full(len(layer), n // len(layer))
    per[: n - int(per.sum())] += 1
    parts = []
    for (code, geom), want in zip(zip(layer.ADM0_A3, layer.geometry, strict=True), per,
                                  strict=True):
        west, south, east, north = shapely.bounds(geom)
        west, east = max(west, -180.0), min(east, 180.0)
        lon, lat = np.empty(0), np.empty(0)
        while lon.size < want:
            x = rng.uniform(west, east, 4 * want + 16)
            y = rng.uniform(max(south, -90.0), min(north, 90.0), x.size)
            inside = shapely.contains_xy(geom, x, y)
            lon, lat = np.concatenate([lon, x[inside]]), np.concatenate([lat, y[inside]])
        parts.append(pd.DataFrame({"lon": lon[:want], "lat": lat[:want], "ADM0_A3": code}))
    return pd.concat(parts, ignore_index=True)
