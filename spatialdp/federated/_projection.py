"""The metric CRS and the map from projected metres to local east/north ground metres.

Projected vectors are mapped back into local east/north ground metres at each
point through the projection's Jacobian, estimated by finite differences (see
:mod:`spatialdp.federated._geometry` for why).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyproj

from spatialdp._validation import short_repr
from spatialdp.exceptions import CRSError
from spatialdp.federated._checks import FloatArray, _refuse_rows

__all__ = ["UTM_REACH_DEG", "enu_offsets", "resolve_metric_crs"]

#: The default metric CRS is the data's UTM zone when every point is this close
#: (degrees of longitude) to the centre, a Mercator centred on the data otherwise.
UTM_REACH_DEG = 30.0

_LONLAT = pyproj.CRS.from_epsg(4326)
_STEP_DEG = 1e-5  # finite-difference step of the Jacobian, about 1 m
_WGS84_A = 6_378_137.0
_WGS84_E2 = 0.0066943799901413165


def resolve_metric_crs(metric_crs: Any, lon: FloatArray, lat: FloatArray) -> pyproj.CRS:
    """Return the projected, metre-based CRS to work in; by default chosen for the data.

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
    if isinstance(metric_crs, (bool, np.bool_, float, np.floating, np.ndarray)):
        raise CRSError(
            f"metric_crs={short_repr(metric_crs)} is a {type(metric_crs).__name__}, not a "
            "CRS; pass an EPSG code, a CRS string or a pyproj.CRS in metres, or None")
    try:
        crs = pyproj.CRS.from_user_input(metric_crs)
    except (pyproj.exceptions.CRSError, TypeError, ValueError, OverflowError) as err:
        raise CRSError(f"metric_crs={short_repr(metric_crs)} is not a CRS pyproj knows: "
                       f"{err}") from None
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
    _refuse_rows(bad, CRSError, lambda first: (
        f"{int(bad.sum())} positions cannot be projected to the metric CRS (first at row "
        f"{first}: lon {lon[first]}, lat {lat[first]}); choose a metric_crs whose area "
        "of use covers the data, or None to pick one"
    ))
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


def _ecef(lon: FloatArray, lat: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Earth-centred, Earth-fixed coordinates (m) of points on the WGS 84 ellipsoid."""
    phi, lam = np.radians(lat), np.radians(lon)
    prime = _WGS84_A / np.sqrt(1.0 - _WGS84_E2 * np.sin(phi) ** 2)
    return (prime * np.cos(phi) * np.cos(lam), prime * np.cos(phi) * np.sin(lam),
            prime * (1.0 - _WGS84_E2) * np.sin(phi))


def enu_offsets(true_lon: FloatArray, true_lat: FloatArray, pred_lon: FloatArray,
                pred_lat: FloatArray) -> FloatArray:
    """East/north ground metres of each predicted position in the true position's tangent plane.

    The chord between the two points on the WGS 84 ellipsoid (ECEF), rotated into
    the local east/north/up frame at the true point; the up part is dropped. No
    projection is involved, so it holds anywhere on Earth, poles and antimeridian
    included. Against the geodesic's azimuth and distance it differs by about
    ``d**3 / R**2`` (1e-11 m for a 100 m error).

    Examples
    --------
    >>> east_north = enu_offsets(np.array([0.0]), np.array([0.0]), np.array([1e-5]),
    ...                          np.array([0.0]))
    >>> np.round(east_north, 3).tolist()
    [[1.113, 0.0]]
    """
    tx, ty, tz = _ecef(true_lon, true_lat)
    px, py, pz = _ecef(pred_lon, pred_lat)
    dx, dy, dz = px - tx, py - ty, pz - tz
    phi, lam = np.radians(true_lat), np.radians(true_lon)
    east = -np.sin(lam) * dx + np.cos(lam) * dy
    north = -np.sin(phi) * (np.cos(lam) * dx + np.sin(lam) * dy) + np.cos(phi) * dz
    return np.column_stack([east, north])


def _apply(inverse: FloatArray, vectors: FloatArray) -> FloatArray:
    return np.einsum("nij,nj->ni", inverse, vectors)

