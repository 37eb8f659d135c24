"""One cartographic style for every map: an equal-area projection chosen from the extent.

Every map spatialdp draws (choropleths, significance, bivariate, margin of
error, coverage maps, H3 layers, the demo's maps) goes through this module:

* :func:`plotting_crs` / ``projection="auto"`` chooses an **equal-area**
  projection from the layer's lon/lat extent, so that areas compare honestly:

  ======================================================  ==================================
  extent (smallest longitude arc holding every vertex)     drawn in
  ======================================================  ==================================
  more than 180 degrees of longitude (the world)          Equal Earth (EPSG:8857)
  inside the contiguous US (130-60 W, 20-55 N)            CONUS Albers (EPSG:5070)
  inside Europe (ETRS89-LAEA's area of use)               ETRS89 LAEA Europe (EPSG:3035)
  any other region (Alaska and Hawaii with the            Lambert azimuthal equal-area
  lower 48, a continent, Fiji across the antimeridian)    centred on the extent
  ======================================================  ==================================

  The extent's longitude arc is measured round the circle, so a layer split at
  the antimeridian (Fiji, Chukotka, the Aleutians) is one narrow region, not
  the whole world. A layer in a projected CRS is placed by its lon/lat extent
  too.
* Regions split at the antimeridian, and rings that cross it (longitudes that
  jump from 179.9 to -179.9), are unwrapped and cut at the projection's own
  seam (the meridian opposite its centre) before projecting, so nothing
  streaks across the map; where the projection is centred on the layer, the
  parts of a region split at +-180 are joined after projecting, so it is
  drawn whole, without a seam line.
* Maps have no lon/lat axes: the axes are off and the drawing CRS is named in
  the bottom-right corner (gid ``"crs"``) so an overlay can match it.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import shapely
from numpy.typing import NDArray

from spatialdp.exceptions import CRSError

if TYPE_CHECKING:
    import geopandas as gpd
    import pyproj
    from matplotlib.axes import Axes

__all__ = ["auto_crs", "lonlat_extent", "map_axes", "plotting_crs", "project_layer",
           "resolve_crs", "split_at_seam"]

#: Lon/lat box of the contiguous US: maps inside it default to CONUS Albers.
CONUS_BOUNDS = (-130.0, 20.0, -60.0, 55.0)
CONUS_CRS = "EPSG:5070"
#: ETRS89-LAEA Europe's area of use (EPSG:3035), west, south, east, north.
EUROPE_BOUNDS = (-35.58, 24.6, 44.83, 84.73)
EUROPE_CRS = "EPSG:3035"
WORLD_CRS = "EPSG:8857"
#: A layer spanning more longitude than this is drawn as the world.
WORLD_SPAN_DEG = 180.0
_BIN_DEG = 0.25  # resolution of the longitude-coverage circle
_DENSIFY_DEG = 1.0  # longest lon/lat edge drawn straight
_SEAM_GAP_DEG = 1e-7  # keep pieces this far off the seam, so PROJ never wraps them


# ---------------------------------------------------------------------------- extent
def _lonlat_rings(geoms: NDArray[np.object_]) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Return the vertices of every ring and the ring each belongs to."""
    parts = shapely.get_parts(geoms)
    rings = shapely.get_rings(parts[shapely.get_type_id(parts) == 3]) if parts.size else parts
    if rings.size == 0:
        lines = parts[~shapely.is_empty(parts)] if parts.size else parts
        xy, idx = shapely.get_coordinates(lines, return_index=True)
        return np.asarray(xy, dtype=np.float64), np.asarray(idx, dtype=np.int64)
    xy, idx = shapely.get_coordinates(rings, return_index=True)
    return np.asarray(xy, dtype=np.float64), np.asarray(idx, dtype=np.int64)


def _along_antimeridian(start: NDArray[np.float64], end: NDArray[np.float64]
                        ) -> NDArray[np.bool_]:
    """Edges from -180 to +180 (or back): they run the whole way round, not across."""
    return np.asarray((np.abs(start) == 180.0) & (np.abs(end) == 180.0) & (start != end))


def lonlat_extent(geoms: Any) -> tuple[float, float, float, float]:
    """Return ``(centre_lon, lon_span, south, north)`` of lon/lat geometries.

    The longitude arc is the smallest one round the circle that holds every
    edge; an edge that jumps more than 180 degrees crosses the antimeridian and
    covers the short way round. A layer split at +-180 is therefore narrow.

    Examples
    --------
    >>> from shapely.geometry import box, MultiPolygon
    >>> fiji = MultiPolygon([box(177, -19, 180, -16), box(-180, -18, -179, -16)])
    >>> lon, span, south, north = lonlat_extent([fiji])
    >>> round(lon), round(span), south, north
    (179, 4, -19.0, -16.0)
    """
    geoms = np.asarray(geoms, dtype=object)
    xy, ring = _lonlat_rings(geoms)
    if xy.size == 0:
        return 0.0, 0.0, 0.0, 0.0
    south, north = float(xy[:, 1].min()), float(xy[:, 1].max())
    same = ring[1:] == ring[:-1]
    if np.any(_along_antimeridian(xy[:-1, 0][same], xy[1:, 0][same])):
        return 0.0, 360.0, south, north  # an edge from -180 to 180: all the way round
    lon = ((xy[:, 0] + 180.0) % 360.0) - 180.0  # on the circle (190 is -170)
    start, end = lon[:-1][same], lon[1:][same]
    step = end - start
    step = np.where(step > 180.0, step - 360.0, np.where(step < -180.0, step + 360.0, step))
    lo, hi = np.minimum(start, start + step), np.maximum(start, start + step)
    if lo.size == 0:  # points only: each covers its own longitude
        lo, hi = lon, lon
    n_bins = round(360.0 / _BIN_DEG)
    # Each edge covers the bins from lo to hi, on a circle unrolled twice (a difference array).
    first = np.floor((lo + 180.0) / _BIN_DEG).astype(np.int64)
    last = np.maximum(first, np.ceil((hi + 180.0) / _BIN_DEG).astype(np.int64) - 1)
    back = first // n_bins * n_bins  # into the first turn of the circle
    first, last = first - back, last - back
    diff = np.zeros(2 * n_bins + 2, dtype=np.int64)
    np.add.at(diff, first, 1)
    np.add.at(diff, np.minimum(last + 1, 2 * n_bins + 1), -1)
    count = np.cumsum(diff)[: 2 * n_bins]
    hit = (count[:n_bins] + count[n_bins:]) > 0
    if hit.all():
        return 0.0, 360.0, south, north
    # The longest run of empty bins round the circle is the gap; the rest is the extent.
    empty = np.concatenate([~hit, ~hit])
    edges = np.diff(np.concatenate([[0], empty.astype(np.int8), [0]]))
    runs_start = np.flatnonzero(edges == 1)
    runs_len = np.flatnonzero(edges == -1) - runs_start
    best = int(np.argmax(np.minimum(runs_len, n_bins)))
    gap_mid = -180.0 + (runs_start[best] + min(runs_len[best], n_bins) / 2) * _BIN_DEG
    # Exact ends: every vertex measured eastwards from the middle of the gap.
    east_of_gap = (lon - gap_mid) % 360.0
    west, east = gap_mid + east_of_gap.min(), gap_mid + east_of_gap.max()
    centre = (((west + east) / 2 + 180.0) % 360.0) - 180.0
    return float(centre), float(east - west), south, north


def _lonlat_geoms(frame: gpd.GeoDataFrame) -> NDArray[np.object_]:
    """Return the frame's geometries in lon/lat (EPSG:4326 axis order)."""
    geoms = np.asarray(frame.geometry.values, dtype=object)
    if frame.crs is not None and not frame.crs.is_geographic:
        geoms = np.asarray(frame.geometry.to_crs(4326).values, dtype=object)
    return geoms


def _inside(span: float, centre: float, south: float, north: float,
            box: tuple[float, float, float, float]) -> bool:
    west, east = centre - span / 2, centre + span / 2
    bw, bs, be, bn = box
    return bool(west >= bw and east <= be and south >= bs and north <= bn)


def auto_crs(frame: gpd.GeoDataFrame) -> pyproj.CRS | None:
    """Return the equal-area CRS ``projection="auto"`` draws ``frame`` in.

    The rule (see the module docstring): more than 180 degrees of longitude:
    Equal Earth (EPSG:8857); inside the contiguous US: CONUS Albers
    (EPSG:5070); inside Europe: ETRS89 LAEA (EPSG:3035); any other extent: a
    Lambert azimuthal equal-area projection centred on it. ``None`` for a
    frame without a CRS or without geometry.

    Examples
    --------
    >>> import geopandas as gpd
    >>> from shapely.geometry import box
    >>> def layer(*b): return gpd.GeoDataFrame(geometry=[box(*b)], crs=4326)
    >>> auto_crs(layer(-120, 30, -80, 45)).to_epsg(), auto_crs(layer(0, 45, 20, 55)).to_epsg()
    (5070, 3035)
    >>> auto_crs(layer(-180, -60, 180, 80)).to_epsg()
    8857
    >>> auto_crs(layer(100, -40, 150, -10)).name
    'Lambert azimuthal equal-area centred on 125°E 25°S'
    """
    import pyproj

    if frame.crs is None:
        return None
    geoms = _lonlat_geoms(frame)
    if not shapely.get_num_coordinates(geoms).any():  # no geometry: nothing to centre on
        return None
    centre, span, south, north = lonlat_extent(geoms)
    if span > WORLD_SPAN_DEG:
        return pyproj.CRS.from_user_input(WORLD_CRS)
    if _inside(span, centre, south, north, CONUS_BOUNDS):
        return pyproj.CRS.from_user_input(CONUS_CRS)
    if _inside(span, centre, south, north, EUROPE_BOUNDS):
        return pyproj.CRS.from_user_input(EUROPE_CRS)
    return _laea(centre, (south + north) / 2)


def _laea(lon: float, lat: float) -> pyproj.CRS:
    """Lambert azimuthal equal-area on WGS 84, centred on (lon, lat), named for it."""
    from pyproj.crs import GeographicCRS, ProjectedCRS
    from pyproj.crs.coordinate_operation import LambertAzimuthalEqualAreaConversion

    lon, lat = round(lon, 1), round(lat, 1)
    ew = "E" if lon >= 0 else "W"
    ns = "N" if lat >= 0 else "S"
    name = f"Lambert azimuthal equal-area centred on {abs(lon):g}°{ew} {abs(lat):g}°{ns}"
    conversion = LambertAzimuthalEqualAreaConversion(latitude_natural_origin=lat,
                                                     longitude_natural_origin=lon)
    return ProjectedCRS(conversion=conversion, geodetic_crs=GeographicCRS(), name=name)


# ---------------------------------------------------------------------------- resolving
def resolve_crs(report: gpd.GeoDataFrame, projection: Any = "auto") -> Any:
    """Return the CRS a map draws ``report`` in for ``projection`` (``None``: as it is).

    ``"auto"`` is :func:`auto_crs`; ``None`` keeps the layer's CRS (returns
    ``None``); anything else is read by pyproj.

    Raises
    ------
    CRSError
        ``projection`` is not a CRS, or the layer has no CRS to reproject from.

    Examples
    --------
    >>> import geopandas as gpd
    >>> from shapely.geometry import box
    >>> layer = gpd.GeoDataFrame(geometry=[box(0, 45, 20, 55)], crs=4326)
    >>> resolve_crs(layer).to_epsg(), resolve_crs(layer, None), resolve_crs(layer, 3857).to_epsg()
    (3035, None, 3857)
    """
    if projection is None:
        return None
    if isinstance(projection, str) and projection == "auto":
        return auto_crs(report)
    if report.crs is None:
        raise CRSError(
            f"the report has no CRS, so it cannot be drawn in projection={projection!r:.60}; "
            "set its CRS with .set_crs(4326) (reports are lon/lat) or pass projection=None"
        )
    import pyproj

    fix = "pass 'auto', None, an EPSG code or a CRS string such as 'EPSG:5070'"
    if isinstance(projection, (bool, np.bool_, float, np.floating, np.ndarray)):
        raise CRSError(f"projection={projection!r:.60} is not a CRS; {fix}")
    try:
        return pyproj.CRS.from_user_input(projection)
    except (pyproj.exceptions.CRSError, TypeError, ValueError, OverflowError) as err:
        raise CRSError(f"projection={projection!r:.60} is not a CRS pyproj knows ({err}); "
                       f"{fix}") from None


def plotting_crs(report: gpd.GeoDataFrame, projection: Any = "auto") -> Any:
    """Return the CRS a map of ``report`` is drawn in, to overlay your own layers in it.

    :func:`~spatialdp.viz.plot_uncertainty_choropleth` and every other map
    reproject the report (``"auto"``: an equal-area projection chosen from the
    extent, see :func:`auto_crs`: CONUS Albers EPSG:5070 for the contiguous
    US, ETRS89 LAEA EPSG:3035 for Europe, Equal Earth EPSG:8857 for the world,
    a Lambert azimuthal equal-area centred on any other extent). Anything
    drawn on the same axes must be in this CRS:
    ``layer.to_crs(plotting_crs(report)).plot(ax=ax)``. The map also names it
    in its bottom-right corner.

    Returns
    -------
    pyproj.CRS or None
        ``None`` when the report has no CRS.

    Examples
    --------
    >>> import pandas as pd
    >>> from spatialdp.datasets import us_states_partition
    >>> part = us_states_partition()
    >>> table = pd.DataFrame({"value": 1.0, "error_bar": 0.1, "cohort": 90,
    ...                       "reliability": "high", "suppressed": False},
    ...                      index=part.region_ids)
    >>> plotting_crs(part.join(table)).to_epsg()
    5070
    >>> plotting_crs(part.join(table), projection=None).to_epsg()
    4326
    """
    import pyproj

    from spatialdp.viz._report import _check_report

    report = _check_report(report)
    crs = resolve_crs(report, projection)
    if crs is None:
        return report.crs
    return pyproj.CRS.from_user_input(crs)


_resolve_crs = resolve_crs  # the name the map modules import


# ---------------------------------------------------------------------------- projecting
def _seam(crs: Any) -> float:
    """Return the longitude opposite the projection's centre (where it wraps)."""
    lon0 = 0.0
    operation = getattr(crs, "coordinate_operation", None)
    for param in getattr(operation, "params", []):
        name = param.name.lower()
        if "longitude" in name and ("origin" in name or "centre" in name
                                    or "center" in name or "central meridian" in name):
            lon0 = float(param.value)
            break
    return ((lon0 + 360.0) % 360.0) - 180.0 if lon0 else 180.0


def _unwrap_ring(xy: NDArray[np.float64]) -> NDArray[np.float64]:
    """Make a ring's longitudes continuous (a jump of more than 180 degrees wraps)."""
    out = xy.copy()
    jumps = np.diff(out[:, 0])
    jumps[_along_antimeridian(out[:-1, 0], out[1:, 0])] = 0.0
    shift = np.concatenate([[0.0], np.cumsum(np.where(jumps > 180.0, -360.0,
                                                      np.where(jumps < -180.0, 360.0, 0.0)))])
    out[:, 0] += shift
    return out


def _crosses(geom: Any) -> bool:
    """Whether a polygon has an edge that jumps more than 180 degrees of longitude."""
    for part in getattr(geom, "geoms", [geom]):
        if part.geom_type != "Polygon" or part.is_empty:
            continue
        for ring in (part.exterior, *part.interiors):
            lon = np.asarray(ring.coords)[:, 0]
            jumps = np.abs(np.diff(lon)) > 180.0
            if np.any(jumps & ~_along_antimeridian(lon[:-1], lon[1:])):
                return True
    return False


def _cut_at_seam(geom: Any, seam: float) -> Any:
    """Return ``geom`` unwrapped and cut at longitude ``seam``, each piece within +-180."""
    from shapely.geometry import MultiPolygon, Polygon, box

    polygons = []
    for part in getattr(geom, "geoms", [geom]):
        if part.geom_type != "Polygon" or part.is_empty:
            continue
        shell = _unwrap_ring(np.asarray(part.exterior.coords, dtype=np.float64))
        holes = [_unwrap_ring(np.asarray(r.coords, dtype=np.float64)) for r in part.interiors]
        polygons.append(Polygon(shell, holes))
    pieces: list[Any] = []
    for poly in polygons:
        west, _, east, _ = poly.bounds
        # Windows of 360 degrees between two seams, wide enough to hold any unwrapped ring.
        k_lo = math.floor((west - seam) / 360.0)
        k_hi = math.floor((east - seam) / 360.0)
        for k in range(k_lo, k_hi + 1):
            left = seam + 360.0 * k
            window = box(left + _SEAM_GAP_DEG, -90.0, left + 360.0 - _SEAM_GAP_DEG, 90.0)
            piece = poly.intersection(window) if k_lo != k_hi else poly
            if piece.is_empty:
                continue
            centre = (piece.bounds[0] + piece.bounds[2]) / 2
            shift = -360.0 * math.floor((centre + 180.0) / 360.0)
            shifted = shapely.transform(piece, lambda c, s=shift: c + np.array([s, 0.0]))
            pieces.extend(p for p in getattr(shifted, "geoms", [shifted])
                          if p.geom_type == "Polygon" and not p.is_empty)
    return MultiPolygon(pieces) if len(pieces) != 1 else pieces[0]


def _straddles(bounds: NDArray[np.float64], seam: float) -> NDArray[np.bool_]:
    """Geometries whose lon/lat bounds reach across the seam (not just touch it)."""
    west, east = bounds[:, 0], bounds[:, 2]
    inner = seam if abs(seam) < 180.0 else None
    if inner is None:
        return np.zeros(len(bounds), dtype=bool)
    return np.asarray((west < inner - _SEAM_GAP_DEG) & (east > inner + _SEAM_GAP_DEG))


def split_at_seam(geoms: Any, crs: Any) -> NDArray[np.object_]:
    """Return lon/lat geometries cut at the seam of ``crs``, ready to project whole.

    A ring whose longitudes jump across the antimeridian is unwrapped first; any
    polygon that then reaches across the meridian opposite the projection's
    centre is cut there, each piece shifted into [-180, 180]. Geometries that
    need neither are returned as they are.
    """
    geoms = np.asarray(geoms, dtype=object).copy()
    seam = _seam(crs)
    present = ~shapely.is_missing(geoms) & ~shapely.is_empty(geoms)
    bounds = np.full((len(geoms), 4), np.nan)
    bounds[present] = shapely.bounds(geoms[present])
    todo = present & _straddles(np.nan_to_num(bounds), seam)
    wide = present & ((bounds[:, 2] - bounds[:, 0]) > 180.0)
    for i in np.flatnonzero(todo | wide):
        if todo[i] or _crosses(geoms[i]):
            geoms[i] = _cut_at_seam(geoms[i], seam)
    return geoms


def _split_at_antimeridian(geoms: NDArray[np.object_]) -> list[int]:
    """Positions of multipolygons with parts on both sides of +-180 (Fiji, split cells)."""
    present = ~shapely.is_missing(geoms) & ~shapely.is_empty(geoms)
    multi = present & (shapely.get_type_id(geoms) == 6)
    bounds = np.full((len(geoms), 4), np.nan)
    bounds[multi] = shapely.bounds(geoms[multi])
    return [int(i) for i in np.flatnonzero(multi & (bounds[:, 0] <= -180.0 + _SEAM_GAP_DEG)
                                           & (bounds[:, 2] >= 180.0 - _SEAM_GAP_DEG))]


def _join_parts(frame: gpd.GeoDataFrame, positions: list[int]) -> None:
    """Merge the parts of split regions that the projection made adjacent (no seam line).

    Both sides of +-180 project to the same points up to rounding, so the parts
    are merged on a grid a ten-millionth of the region's size.
    """
    if not positions:
        return
    geoms = np.asarray(frame.geometry.values, dtype=object).copy()
    for i in positions:
        west, south, east, north = shapely.bounds(geoms[i])
        grid = 1e-7 * max(east - west, north - south)
        geoms[i] = shapely.union_all(shapely.get_parts(geoms[i]), grid_size=grid)
    frame[frame.geometry.name] = type(frame.geometry)(geoms, index=frame.index, crs=frame.crs)


def _project(report: gpd.GeoDataFrame, crs: Any) -> gpd.GeoDataFrame:
    """Return the report in ``crs`` (as it is for None); refuse a CRS that cannot hold it.

    A lon/lat layer is cut at the projection's seam first (:func:`split_at_seam`),
    so regions split at, or crossing, the antimeridian are drawn whole, and its
    edges longer than a degree get intermediate vertices, so they curve as the
    projection bends them.
    """
    if crs is None:
        return report
    frame = report
    try:
        if report.crs is not None and report.crs.is_geographic:
            import geopandas as gpd

            # Long edges get vertices every degree, so they curve as the projection bends
            # them (a parallel in Albers, a box's side in Equal Earth).
            cut = shapely.segmentize(split_at_seam(report.geometry.values, crs), _DENSIFY_DEG)
            frame = report.copy()
            frame[report.geometry.name] = gpd.GeoSeries(cut, index=report.index, crs=report.crs)
            split = _split_at_antimeridian(cut) if abs(_seam(crs)) < 180.0 else []
            frame = frame.to_crs(crs)
            _join_parts(frame, split)
        else:
            frame = frame.to_crs(crs)
    except CRSError:
        raise
    except Exception as err:  # pyproj raises several kinds for a CRS that cannot hold the data
        raise CRSError(f"the report cannot be drawn in {str(crs)[:60]!r}: {err}; pass "
                       "projection=None or a CRS that covers the regions") from None
    bounds = np.asarray(frame.total_bounds, dtype=np.float64)
    if not frame.geometry.is_empty.all() and not np.isfinite(bounds).all():
        raise CRSError(f"the report's regions fall outside the area {str(crs)[:60]!r} can draw "
                       "(infinite coordinates); pass projection=None or a CRS that covers them")
    return frame


def project_layer(frame: gpd.GeoDataFrame, projection: Any = "auto") -> gpd.GeoDataFrame:
    """Return ``frame`` in the CRS a map draws it in (``projection`` as for the maps).

    The layer is cut at the projection's seam and densified first (see
    :func:`split_at_seam`), so what comes back draws without streaks.

    Examples
    --------
    >>> import geopandas as gpd
    >>> from shapely.geometry import box
    >>> layer = gpd.GeoDataFrame(geometry=[box(-120, 30, -100, 45)], crs=4326)
    >>> project_layer(layer).crs.to_epsg()
    5070
    """
    return _project(frame, resolve_crs(frame, projection))


# ---------------------------------------------------------------------------- axes
def _crs_text(crs: Any) -> str:
    if crs is None:
        return "CRS: unknown"
    epsg = crs.to_epsg()
    code = f"EPSG:{epsg}" if epsg else "custom CRS"
    return f"{code} ({crs.name})"


def _new_map_axes(figsize: tuple[float, float]) -> Axes:
    """Return the axes of a new map figure, laid out so that a legend to its right fits.

    Constrained layout reserves the legend's width, and the map (whose equal
    aspect leaves it narrower than its slot) is anchored to the left of its slot,
    so the legend beside it stays inside the figure: a plain ``savefig`` (no
    ``bbox_inches="tight"``) cuts nothing off.
    """
    import matplotlib.pyplot as plt

    _, ax = plt.subplots(figsize=figsize, layout="constrained")
    ax.set_anchor("W")
    return ax


def _name_crs(ax: Axes, crs: Any) -> None:
    """Name the drawing CRS under the map's bottom-right corner, so an overlay can match it.

    Below the axes, not inside them: inside, it sat on the land of a world map's
    southern edge (Antarctica in Equal Earth).
    """
    text = ax.annotate(_crs_text(crs), xy=(1.0, 0.0), xycoords="axes fraction",
                       xytext=(0, -2), textcoords="offset points", ha="right", va="top",
                       fontsize=6.5, color="#6b6b6b", annotation_clip=False)
    text.set_gid("crs")


def _set_map_aspect(ax: Axes, frame: gpd.GeoDataFrame) -> None:
    """Equal scale on both axes (lon/lat: at the mid latitude), no axes drawn.

    A map has no lon/lat ticks or labels (they run into legends and mean
    nothing in an equal-area projection); the CRS is named on the map instead.
    """
    crs = frame.crs
    if crs is not None and crs.is_geographic:
        south, north = frame.total_bounds[1], frame.total_bounds[3]
        mid = math.radians((south + north) / 2)
        ax.set_aspect(1 / max(math.cos(mid), 1e-6))
    else:
        ax.set_aspect("equal")
    ax.set_axis_off()


def map_axes(ax: Axes, frame: gpd.GeoDataFrame) -> None:
    """Give a drawn map the house style: equal aspect, no axes, its CRS named.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import geopandas as gpd, matplotlib.pyplot as plt
    >>> from shapely.geometry import box
    >>> layer = project_layer(gpd.GeoDataFrame(geometry=[box(0, 45, 20, 55)], crs=4326))
    >>> ax = layer.plot()
    >>> map_axes(ax, layer)
    >>> ax.axison, [t.get_text()[:9] for t in ax.texts]
    (False, ['EPSG:3035'])
    >>> plt.close(ax.figure)
    """
    _set_map_aspect(ax, frame)
    _name_crs(ax, frame.crs)
