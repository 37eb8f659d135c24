"""Along/across-track decomposition of position errors, vectorised (device side).

True and predicted positions are projected to a metric CRS, and every projected
vector (the error ``pred - true`` and a road's tangent) is mapped back into
local east/north ground metres at the true position through the projection's
Jacobian, estimated by finite differences. That correction makes the split
independent of where the data lie in the projection: a single UTM zone over a
continent has grid north several degrees (tens, far from its central meridian)
away from true north, and a scale a few percent off, and a ``heading_deg``
measured from true north would otherwise leak along-track error into the
across-track component.

The reference direction is either the direction of travel (``heading_deg``,
clockwise from north) or the tangent of the nearest road at the point of the
road nearest to the TRUE position (where the vehicle was). Across-track error is
positive to the right of the reference direction; for roads the direction is the
one the road is digitised in (the RMSEs do not depend on it). The map to ground
metres is linearised at the true position: exact to first order, with a relative
error of about ``|error| / R`` times the projection's scale gradient (below 1e-6
for metre-scale errors in UTM).
"""

from __future__ import annotations

from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import pyproj
import shapely
from numpy.typing import ArrayLike, NDArray

from spatialdp.exceptions import CRSError, InvalidInput

__all__ = [
    "LONLAT_COLUMNS",
    "POSITION_COLUMNS",
    "RMSE_ATOL_M",
    "TANGENT_HALF_WINDOW_M",
    "UTM_REACH_DEG",
    "clipped_ratio",
    "decompose_errors",
    "finite_column",
    "has_positions",
    "positions_from_frame",
    "positive_number",
    "resolve_metric_crs",
    "track_errors",
]

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: Point geometry columns of the true and the predicted position.
POSITION_COLUMNS = ("true_geometry", "pred_geometry")
#: The same positions as lon/lat columns (EPSG:4326).
LONLAT_COLUMNS = ("true_lon", "true_lat", "pred_lon", "pred_lat")
#: The default metric CRS is the data's UTM zone when every point is this close
#: (degrees of longitude) to the centre, a Mercator centred on the data otherwise.
UTM_REACH_DEG = 30.0
#: An RMSE at or below this many metres counts as zero in the ratio.
RMSE_ATOL_M = 1e-9
#: The road tangent is the chord from 1 m before to 1 m after the nearest point:
#: the segment's direction on a straight stretch, the bisector exactly at a bend.
TANGENT_HALF_WINDOW_M = 1.0

_LONLAT = pyproj.CRS.from_epsg(4326)
_STEP_DEG = 1e-5  # finite-difference step of the Jacobian, about 1 m
_WGS84_A = 6_378_137.0
_WGS84_E2 = 0.0066943799901413165


# --------------------------------------------------------------------------- inputs


def has_positions(frame: pd.DataFrame) -> bool:
    """Whether the frame holds true and predicted positions in either form."""
    return set(POSITION_COLUMNS) <= set(frame.columns) or set(LONLAT_COLUMNS) <= set(
        frame.columns
    )


def finite_column(values: ArrayLike, column: str) -> FloatArray:
    """Values as float64; refuse non-numeric, NaN and infinite values, naming the column."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInput(f"column {column!r} is not numeric; give numbers") from None
    bad = ~np.isfinite(arr)
    if bad.any():
        raise InvalidInput(
            f"column {column!r} has {int(bad.sum())} NaN or infinite values (first at row "
            f"{int(np.flatnonzero(bad)[0])}); drop or repair those examples on the device"
        )
    return arr


def positive_number(value: Any, name: str) -> float:
    """A positive, finite float, or InvalidInput naming the argument."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"{name}={value!r} is not a number") from None
    if not (np.isfinite(number) and number > 0):
        raise InvalidInput(f"{name}={value!r} must be a positive, finite number")
    return number


def _check_range(lon: FloatArray, lat: FloatArray, what: str) -> None:
    for values, limit, name in ((lat, 90.0, "latitude"), (lon, 180.0, "longitude")):
        out = np.abs(values) > limit
        if out.any():
            first = int(np.flatnonzero(out)[0])
            raise CRSError(
                f"{what}: {name} {values[first]} at row {first} is outside "
                f"[-{limit:g}, {limit:g}]; the values look projected: give lon/lat "
                "(EPSG:4326), or a GeoSeries carrying its CRS"
            )


def _points_lonlat(series: pd.Series, column: str) -> tuple[FloatArray, FloatArray]:
    crs = getattr(series.array, "crs", None)
    if crs is None:
        raise CRSError(
            f"column {column!r} has no CRS, so its coordinates cannot be put in metres; "
            f"if they are lon/lat, set it with frame[{column!r}] = "
            f"frame[{column!r}].set_crs(4326); otherwise set the CRS they are in"
        )
    geoms = np.asarray(series.array, dtype=object)
    missing = shapely.is_missing(geoms) | shapely.is_empty(geoms)
    if missing.any():
        raise InvalidInput(
            f"column {column!r} has {int(missing.sum())} missing or empty points (first at "
            f"row {int(np.flatnonzero(missing)[0])}); drop those examples"
        )
    not_point = shapely.get_type_id(geoms) != shapely.GeometryType.POINT
    if not_point.any():
        raise InvalidInput(
            f"column {column!r} must hold Point geometries; row "
            f"{int(np.flatnonzero(not_point)[0])} is a {geoms[not_point][0].geom_type}: "
            "use .centroid or .representative_point() for other shapes"
        )
    x = finite_column(shapely.get_x(geoms), column)
    y = finite_column(shapely.get_y(geoms), column)
    crs = pyproj.CRS.from_user_input(crs)
    if crs.equals(_LONLAT) or crs.equals("OGC:CRS84"):
        lon, lat = x, y
    else:
        lon, lat = pyproj.Transformer.from_crs(crs, _LONLAT, always_xy=True).transform(x, y)
        lon, lat = np.asarray(lon, dtype=np.float64), np.asarray(lat, dtype=np.float64)
    _check_range(lon, lat, f"column {column!r}")
    return lon, lat


def positions_from_frame(frame: pd.DataFrame) -> tuple[FloatArray, FloatArray, FloatArray,
                                                       FloatArray]:
    """``true_lon, true_lat, pred_lon, pred_lat`` from point columns or lon/lat columns.

    Point columns (``true_geometry``, ``pred_geometry``) must carry a CRS (any;
    they are converted to lon/lat); lon/lat columns are EPSG:4326 by name.

    Raises
    ------
    CRSError
        A point column without a CRS, or lon/lat values out of range.
    InvalidInput
        Neither form present, NaN/inf values, missing or non-point geometries.
    """
    if set(POSITION_COLUMNS) <= set(frame.columns):
        tlon, tlat = _points_lonlat(frame[POSITION_COLUMNS[0]], POSITION_COLUMNS[0])
        plon, plat = _points_lonlat(frame[POSITION_COLUMNS[1]], POSITION_COLUMNS[1])
        return tlon, tlat, plon, plat
    if set(LONLAT_COLUMNS) <= set(frame.columns):
        tlon, tlat, plon, plat = (finite_column(frame[c], c) for c in LONLAT_COLUMNS)
        _check_range(tlon, tlat, "columns 'true_lon'/'true_lat'")
        _check_range(plon, plat, "columns 'pred_lon'/'pred_lat'")
        return tlon, tlat, plon, plat
    raise InvalidInput(
        f"no positions: give point columns {list(POSITION_COLUMNS)} (with a CRS) or lon/lat "
        f"columns {list(LONLAT_COLUMNS)}; the frame has {list(frame.columns)[:10]}"
    )


# --------------------------------------------------------------------------- metric CRS


def resolve_metric_crs(metric_crs: Any, lon: FloatArray, lat: FloatArray) -> pyproj.CRS:
    """The projected, metre-based CRS to work in; by default chosen for the data.

    The default is the WGS 84 UTM zone of the data's centre (circular mean
    longitude, so data straddling the antimeridian are centred correctly), the
    standard 6-degree zone ``GeoSeries.estimate_utm_crs`` picks, when every
    point lies within :data:`UTM_REACH_DEG` degrees of longitude of that centre;
    wider data (a global fleet) get an ellipsoidal Mercator centred on the data.
    Both are conformal: they keep local angles, which is what an along/across
    split needs, and the Jacobian correction removes their scale and grid-north
    offsets.
    """
    if metric_crs is None:
        centre_lon = float(np.degrees(np.angle(np.exp(1j * np.radians(lon)).mean())))
        spread = np.abs((lon - centre_lon + 180.0) % 360.0 - 180.0).max()
        centre_lat = float(lat.mean())
        if spread > UTM_REACH_DEG:
            if np.abs(lat).max() > 85.0:
                raise CRSError(
                    f"the data span {2 * spread:.0f} degrees of longitude and reach latitude "
                    f"{np.abs(lat).max():.1f}; no default projection fits: pass metric_crs="
                )
            # Mercator without longitude wrapping (+over): x is linear in longitude,
            # so no pair of nearby points is torn apart at a seam.
            return pyproj.CRS.from_proj4(
                f"+proj=merc +lon_0={centre_lon:.6f} +datum=WGS84 +units=m +over +no_defs")
        if not -80.0 <= centre_lat <= 84.0:
            raise CRSError(
                f"no UTM zone covers the data's centre ({centre_lon:.3f}, {centre_lat:.3f}); "
                "pass metric_crs=, e.g. a polar stereographic CRS (EPSG:3413 or EPSG:3031)"
            )
        zone = int((centre_lon + 180.0) // 6.0) % 60 + 1
        return pyproj.CRS.from_epsg((32600 if centre_lat >= 0 else 32700) + zone)
    try:
        crs = pyproj.CRS.from_user_input(metric_crs)
    except pyproj.exceptions.CRSError as err:
        raise CRSError(f"metric_crs={metric_crs!r} is not a CRS pyproj knows: {err}") from None
    units = {axis.unit_name for axis in crs.axis_info}
    if not crs.is_projected or not units <= {"metre", "meter"}:
        raise CRSError(
            f"metric_crs={crs.to_string()!r} is not a projected CRS in metres (units "
            f"{sorted(units)}); errors need metres: pass a UTM zone, or None to pick one"
        )
    return crs


def _project(transformer: pyproj.Transformer, lon: FloatArray, lat: FloatArray,
             *, round_trip: bool = False) -> FloatArray:
    """Projected coordinates; with ``round_trip``, refuse points the CRS cannot hold.

    A transverse Mercator returns finite but wrong coordinates far from its
    central meridian, so finiteness alone is no test: the round trip is.
    """
    x, y = transformer.transform(lon, lat)
    xy = np.column_stack([x, y]).astype(np.float64)
    bad = ~np.isfinite(xy).all(axis=1)
    if round_trip and not bad.any():
        back_lon, back_lat = transformer.transform(x, y, direction="INVERSE")
        off_lon = np.abs((np.asarray(back_lon) - lon + 180.0) % 360.0 - 180.0)
        bad = (off_lon > 1e-6) | (np.abs(np.asarray(back_lat) - lat) > 1e-6)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise CRSError(
            f"{int(bad.sum())} positions cannot be projected to the metric CRS (first at row "
            f"{first}: lon {lon[first]}, lat {lat[first]}); choose a metric_crs whose area "
            "of use covers the data, or None to pick one"
        )
    return xy


def _enu_inverse_jacobian(transformer: pyproj.Transformer, lon: FloatArray, lat: FloatArray,
                          xy: FloatArray) -> FloatArray:
    """Per point, the 2x2 map from projected metres to local east/north metres."""
    phi = np.radians(lat)
    w = np.sqrt(1.0 - _WGS84_E2 * np.sin(phi) ** 2)
    east_m = np.radians(_STEP_DEG) * _WGS84_A * np.cos(phi) / w  # prime-vertical radius
    north_m = np.radians(_STEP_DEG) * _WGS84_A * (1.0 - _WGS84_E2) / w**3  # meridian radius
    d_east = (_project(transformer, lon + _STEP_DEG, lat) - xy) / east_m[:, None]
    d_north = (_project(transformer, lon, lat + _STEP_DEG) - xy) / north_m[:, None]
    # J = [[dx/dE, dx/dN], [dy/dE, dy/dN]]; inverse of a 2x2 matrix.
    a, b, c, d = d_east[:, 0], d_north[:, 0], d_east[:, 1], d_north[:, 1]
    det = a * d - b * c
    return np.stack([np.stack([d, -b], axis=-1), np.stack([-c, a], axis=-1)], axis=1) / det[
        :, None, None
    ]


def _apply(inverse: FloatArray, vectors: FloatArray) -> FloatArray:
    return np.einsum("nij,nj->ni", inverse, vectors)


# --------------------------------------------------------------------------- roads


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
        geoms = np.asarray(roads, dtype=object).ravel()
        if geoms.size and not shapely.is_missing(geoms).any():
            coords = shapely.get_coordinates(geoms)
            _check_range(coords[:, 0], coords[:, 1], "roads (an array is taken as lon/lat)")
        geoms = np.asarray(gpd.GeoSeries(geoms, crs=_LONLAT).to_crs(crs).values, dtype=object)
    if geoms.size == 0:
        raise InvalidInput("roads is empty; give at least one LineString")
    bad = shapely.is_missing(geoms) | shapely.is_empty(geoms)
    if bad.any():
        raise InvalidInput(
            f"{int(bad.sum())} roads are missing or empty (first at position "
            f"{int(np.flatnonzero(bad)[0])}); drop them"
        )
    lines = np.isin(shapely.get_type_id(geoms),
                    [shapely.GeometryType.LINESTRING, shapely.GeometryType.MULTILINESTRING])
    if not lines.all():
        raise InvalidInput(
            f"road at position {int(np.flatnonzero(~lines)[0])} is not a (Multi)LineString; "
            "roads must be lines"
        )
    flat = shapely.length(geoms) <= 0
    if flat.any():
        raise InvalidInput(
            f"road at position {int(np.flatnonzero(flat)[0])} has zero length; a road "
            "needs a direction: drop it"
        )
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


# --------------------------------------------------------------------------- decomposition


def decompose_errors(
    true_lon: FloatArray,
    true_lat: FloatArray,
    pred_lon: FloatArray,
    pred_lat: FloatArray,
    *,
    heading_deg: FloatArray | None = None,
    roads: Any = None,
    metric_crs: Any = None,
    max_road_distance: float = 50.0,
) -> tuple[FloatArray | None, FloatArray | None, FloatArray]:
    """Signed along-track and across-track error and total error of every example, in m.

    With ``roads`` the reference is the nearest road (``heading_deg`` is not used);
    examples whose true position is farther than ``max_road_distance`` metres from
    every road get NaN along/across (they were not on a road). With neither,
    along/across are None and only the total error (ground metres) is returned.
    """
    crs = resolve_metric_crs(metric_crs, true_lon, true_lat)
    pred_lon = true_lon + (pred_lon - true_lon + 180.0) % 360.0 - 180.0  # across 180 deg
    transformer = pyproj.Transformer.from_crs(_LONLAT, crs, always_xy=True)
    true_xy = _project(transformer, true_lon, true_lat, round_trip=True)
    inverse = _enu_inverse_jacobian(transformer, true_lon, true_lat, true_xy)
    pred_xy = _project(transformer, pred_lon, pred_lat, round_trip=True)
    error = _apply(inverse, pred_xy - true_xy)
    distance = np.hypot(error[:, 0], error[:, 1])
    if roads is not None:
        reach_m = positive_number(max_road_distance, "max_road_distance")
        scale = 1.0 / np.sqrt(np.abs(np.linalg.det(inverse)))  # projected units per metre
        tangent = _apply(inverse, _road_tangents(true_xy, _roads_in(roads, crs), reach_m,
                                                 scale))
        unit = tangent / np.hypot(tangent[:, 0], tangent[:, 1])[:, None]
    elif heading_deg is not None:
        rad = np.radians(heading_deg)
        unit = np.column_stack([np.sin(rad), np.cos(rad)])  # (east, north)
    else:
        return None, None, distance
    along = error[:, 0] * unit[:, 0] + error[:, 1] * unit[:, 1]
    across = error[:, 0] * unit[:, 1] - error[:, 1] * unit[:, 0]  # right-hand normal
    return along, across, distance


# --------------------------------------------------------------------------- public


def track_errors(
    frame: pd.DataFrame,
    *,
    roads: Any = None,
    heading_column: str = "heading_deg",
    metric_crs: Any = None,
    max_road_distance: float = 50.0,
) -> pd.DataFrame:
    """Signed along-track and across-track error of every example, in metres.

    The positions are projected to ``metric_crs`` (default: the data's UTM zone)
    and the error ``pred - true`` is split relative to the direction of travel
    (``heading_column``, degrees clockwise from north) or, when ``roads`` is
    given, the tangent of the road nearest to the TRUE position. Projected
    vectors are mapped back to local east/north ground metres through the
    projection's Jacobian, so grid-north and scale offsets of the projection do
    not leak into the split. Across-track is positive to the right of the
    direction (for roads: of the direction they are digitised in).

    Parameters
    ----------
    frame : DataFrame
        Positions as ``true_geometry``/``pred_geometry`` Point columns carrying a
        CRS, or ``true_lon``/``true_lat``/``pred_lon``/``pred_lat`` (EPSG:4326).
    roads : GeoSeries, GeoDataFrame or array of (Multi)LineStrings, optional
        A GeoSeries must carry a CRS; a plain array is taken as lon/lat.
    heading_column : str
    metric_crs : CRS-like, optional
        A projected CRS in metres; prefer a conformal one (UTM).
    max_road_distance : float
        Metres. Examples farther from every road get NaN along/across: they were
        not on a road.

    Returns
    -------
    DataFrame
        ``along``, ``across`` and ``distance`` (total error, m), on the frame's index.

    Raises
    ------
    CRSError
        A point column or roads without a CRS; a metric_crs that is not projected
        in metres or does not cover the data.
    InvalidInput
        Missing columns, NaN/inf values, bad geometries.

    Examples
    --------
    >>> import pyproj
    >>> east_lon, east_lat, _ = pyproj.Geod(ellps="WGS84").fwd(-105.0, 40.0, 90.0, 3.0)
    >>> frame = pd.DataFrame({"true_lon": [-105.0], "true_lat": [40.0], "pred_lon": [east_lon],
    ...                       "pred_lat": [east_lat], "heading_deg": [0.0]})
    >>> (track_errors(frame).round(6) + 0.0).iloc[0].to_dict()
    {'along': 0.0, 'across': 3.0, 'distance': 3.0}
    """
    if not isinstance(frame, pd.DataFrame) or len(frame) == 0:
        raise InvalidInput("track_errors needs a non-empty DataFrame of examples")
    heading = None
    if roads is None:
        if heading_column not in frame.columns:
            raise InvalidInput(
                f"no {heading_column!r} column and no roads=: give the direction of travel "
                "(degrees clockwise from north) or the roads to split the errors against"
            )
        heading = finite_column(frame[heading_column], heading_column)
    along, across, distance = decompose_errors(
        *positions_from_frame(frame), heading_deg=heading, roads=roads,
        metric_crs=metric_crs, max_road_distance=max_road_distance,
    )
    return pd.DataFrame({"along": along, "across": across, "distance": distance},
                        index=frame.index)


def clipped_ratio(across_rmse: ArrayLike, along_rmse: ArrayLike, ratio_clip: float = 10.0
                  ) -> FloatArray:
    """``across / along`` clipped to ``[0, ratio_clip]``, defined for every client.

    A client whose along-track RMSE is zero (at most :data:`RMSE_ATOL_M`) gets
    ``ratio_clip``: it only drifts sideways. A client with no error in either
    direction gets ``min(1, ratio_clip)``: it is not anisotropic, and pinning a
    perfect client at the clip would raise the "drifting sideways" alarm.

    Examples
    --------
    >>> clipped_ratio([1.0, 6.0, 500.0, 0.0], [1.0, 1.0, 0.0, 0.0]).tolist()
    [1.0, 6.0, 10.0, 1.0]
    """
    clip = positive_number(ratio_clip, "ratio_clip")
    across = finite_column(across_rmse, "across_rmse")
    along = finite_column(along_rmse, "along_rmse")
    if (across < 0).any() or (along < 0).any():
        raise InvalidInput("an RMSE is negative; give root-mean-square errors (>= 0)")
    moving = along > RMSE_ATOL_M
    ratio = np.where(across > RMSE_ATOL_M, clip, min(1.0, clip))
    with np.errstate(over="ignore"):  # a huge quotient is clipped below anyway
        np.divide(across, along, out=ratio, where=moving)
    return np.clip(ratio, 0.0, clip)
