"""Along/across-track decomposition of position errors, vectorised (device side).

With a heading (or for the total error only) and no ``metric_crs``, the error is
the chord between true and predicted positions on the WGS 84 ellipsoid, rotated
into east/north metres of the true position's tangent plane
(:func:`~spatialdp.federated._projection.enu_offsets`): no projection, valid
anywhere on Earth, a few trigonometric array operations per example.

With roads (whose tangents need a planar geometry) or an explicit
``metric_crs``, true and predicted positions are projected to a metric CRS, and every projected
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

The metric CRS and the Jacobian live in :mod:`spatialdp.federated._projection`,
the nearest-road search in :mod:`spatialdp.federated._roads`, the argument
checks in :mod:`spatialdp.federated._checks`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyproj
import shapely
from numpy.typing import ArrayLike

from spatialdp._validation import check_text
from spatialdp.exceptions import CRSError, InvalidInput
from spatialdp.federated._checks import (
    FloatArray,
    _check_range,
    _refuse_rows,
    finite_column,
    positive_number,
)
from spatialdp.federated._projection import (
    _LONLAT,
    UTM_REACH_DEG,
    _apply,
    _enu_inverse_jacobian,
    _project,
    enu_offsets,
    resolve_metric_crs,
)
from spatialdp.federated._roads import TANGENT_HALF_WINDOW_M, _road_tangents, _roads_in

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

#: Point geometry columns of the true and the predicted position.
POSITION_COLUMNS = ("true_geometry", "pred_geometry")
#: The same positions as lon/lat columns (EPSG:4326).
LONLAT_COLUMNS = ("true_lon", "true_lat", "pred_lon", "pred_lat")
#: An RMSE at or below this many metres counts as zero in the ratio.
RMSE_ATOL_M = 1e-9


# --------------------------------------------------------------------------- inputs


def has_positions(frame: pd.DataFrame) -> bool:
    """Whether the frame holds true and predicted positions in either form."""
    return set(POSITION_COLUMNS) <= set(frame.columns) or set(LONLAT_COLUMNS) <= set(
        frame.columns
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
    _refuse_rows(missing, InvalidInput, lambda first: (
        f"column {column!r} has {int(missing.sum())} missing or empty points (first at "
        f"row {first}); drop those examples"
    ))
    not_point = shapely.get_type_id(geoms) != shapely.GeometryType.POINT
    _refuse_rows(not_point, InvalidInput, lambda first: (
        f"column {column!r} must hold Point geometries; row {first} is a "
        f"{geoms[first].geom_type}: use .centroid or .representative_point() for other shapes"
    ))
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
    pred_lon = true_lon + (pred_lon - true_lon + 180.0) % 360.0 - 180.0  # across 180 deg
    if roads is None and metric_crs is None:
        # No road geometry to project: the error in the tangent plane directly.
        error = enu_offsets(true_lon, true_lat, pred_lon, pred_lat)
        return _split(error, heading_deg)
    crs = resolve_metric_crs(metric_crs, true_lon, true_lat)
    transformer = pyproj.Transformer.from_crs(_LONLAT, crs, always_xy=True)
    true_xy = _project(transformer, true_lon, true_lat, round_trip=True)
    inverse = _enu_inverse_jacobian(transformer, true_lon, true_lat, true_xy)
    pred_xy = _project(transformer, pred_lon, pred_lat, round_trip=True)
    error = _apply(inverse, pred_xy - true_xy)
    if roads is None:
        return _split(error, heading_deg)
    reach_m = positive_number(max_road_distance, "max_road_distance")
    scale = 1.0 / np.sqrt(np.abs(np.linalg.det(inverse)))  # projected units per metre
    tangent = _apply(inverse, _road_tangents(true_xy, _roads_in(roads, crs), reach_m, scale))
    return _split(error, None, tangent / np.hypot(tangent[:, 0], tangent[:, 1])[:, None])


def _split(error: FloatArray, heading_deg: FloatArray | None, unit: FloatArray | None = None
           ) -> tuple[FloatArray | None, FloatArray | None, FloatArray]:
    """Along, across (None without a direction) and total error from east/north metres."""
    distance = np.hypot(error[:, 0], error[:, 1])
    if unit is None and heading_deg is not None:
        rad = np.radians(heading_deg)
        unit = np.column_stack([np.sin(rad), np.cos(rad)])  # (east, north)
    if unit is None:
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

    The error ``pred - true``, in east/north ground metres at the true position,
    is split relative to the direction of travel (``heading_column``, degrees
    clockwise from north) or, when ``roads`` is given, the tangent of the road
    nearest to the TRUE position. Without roads and ``metric_crs`` the error is
    taken on the WGS 84 ellipsoid directly (valid anywhere, poles included). With
    roads, or a ``metric_crs`` you choose, the positions are projected to
    ``metric_crs`` (default: the data's UTM zone) and projected vectors are mapped
    back to local east/north ground metres through the projection's Jacobian, so
    grid-north and scale offsets of the projection do not leak into the split.
    Across-track is positive to the right of the direction (for roads: of the
    direction they are digitised in).

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
    repeated = frame.columns[frame.columns.duplicated()]
    if len(repeated):
        raise InvalidInput(f"the examples frame repeats the column names {list(repeated)[:5]}; "
                           "give each column once")
    heading = None
    if roads is None:
        check_text(heading_column, "heading_column")
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
    across = np.atleast_1d(finite_column(across_rmse, "across_rmse"))
    along = np.atleast_1d(finite_column(along_rmse, "along_rmse"))
    if across.shape != along.shape or across.ndim != 1:
        raise InvalidInput(
            f"across_rmse has shape {across.shape} and along_rmse {along.shape}; give one "
            "RMSE of each per client, as two 1-D arrays of the same length")
    if (across < 0).any() or (along < 0).any():
        raise InvalidInput("an RMSE is negative; give root-mean-square errors (>= 0)")
    moving = along > RMSE_ATOL_M
    ratio = np.where(across > RMSE_ATOL_M, clip, min(1.0, clip))
    with np.errstate(over="ignore"):  # a huge quotient is clipped below anyway
        np.divide(across, along, out=ratio, where=moving)
    return np.clip(ratio, 0.0, clip)
