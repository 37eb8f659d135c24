"""Synthetic evaluation data: a positioning model's predictions over a fleet.

This is the simulation side (seeded, never a release): it produces the
per-example predictions that the device module turns into bounded per-client
metrics, so that the whole private pipeline can be run end to end on the
shipped geography.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp._random import RandomLike, as_generator
from spatialdp._validation import (
    check_count,
    check_finite_array,
    check_ids,
    check_number,
    fail,
    short_repr,
)
from spatialdp.exceptions import InvalidInput

__all__ = ["positioning_predictions"]

_METRES_PER_DEGREE = 111_320.0
#: Limits that keep a simulation in memory and its errors in metres meaningful.
MAX_EXAMPLES_PER_CLIENT = 10_000
MAX_EXAMPLES = 50_000_000
MAX_ERROR_SD_M = 1e4
MAX_FACTOR = 100.0


def positioning_predictions(
    fleet: gpd.GeoDataFrame,
    *,
    examples_per_client: int = 5,
    along_sd_m: float = 1.0,
    across_sd_m: float = 1.0,
    region_error_factor: Mapping[str, float] | None = None,
    sideways_drift: Mapping[str, float] | None = None,
    rng: RandomLike = None,
) -> pd.DataFrame:
    """Per-example true and predicted positions of a simulated positioning model.

    Each device drives ``examples_per_client`` short hops along its heading; the
    model's error is Gaussian along and across the direction of travel.

    Parameters
    ----------
    fleet : GeoDataFrame
        From :func:`spatialdp.datasets.synthetic_fleet` (``device_id``, ``lon``,
        ``lat``, ``heading_deg``, ``region_id``).
    along_sd_m, across_sd_m : float
        Error standard deviations in metres, along and across the track.
    region_error_factor : mapping region -> factor, optional
        Regions where the model is worse (both components multiplied).
    sideways_drift : mapping region -> factor, optional
        Regions where the model drifts sideways: the across-track error is
        multiplied by the factor.

    Returns
    -------
    DataFrame
        One row per example: ``client_id``, ``region_id``, ``true_lon``, ``true_lat``,
        ``pred_lon``, ``pred_lat``, ``heading_deg``, ``loss`` (squared error in m^2).

    Examples
    --------
    >>> from spatialdp.datasets import synthetic_fleet
    >>> preds = positioning_predictions(synthetic_fleet(100, rng=1), rng=2)
    >>> len(preds), preds.client_id.nunique()
    (500, 100)
    """
    k = check_count(examples_per_client, "examples_per_client", low=1,
                    high=MAX_EXAMPLES_PER_CLIENT)
    along_sd = check_number(along_sd_m, "along_sd_m", low=0.0, high=MAX_ERROR_SD_M,
                            fix="pass a standard deviation in metres, >= 0")
    across_sd = check_number(across_sd_m, "across_sd_m", low=0.0, high=MAX_ERROR_SD_M,
                             fix="pass a standard deviation in metres, >= 0")
    factors = _factors(region_error_factor, "region_error_factor")
    drifts = _factors(sideways_drift, "sideways_drift")
    gen = as_generator(rng)
    devices, lon_home, lat_home, heading_home, regions = _fleet_columns(fleet)
    n = devices.size
    if n * k > MAX_EXAMPLES:
        raise fail("examples_per_client", examples_per_client,
                   f"makes {n * k:,} examples for {n:,} devices, above {MAX_EXAMPLES:,}",
                   "simulate fewer devices or fewer examples per device")
    client = np.repeat(devices, k)
    region = np.repeat(regions, k)
    heading = np.repeat(heading_home, k) + gen.normal(0, 5, n * k)
    rad = np.radians(heading)
    # Hops of up to 2 km along the heading from the device's home position.
    hop = gen.uniform(0, 2000, n * k)
    lat0 = np.repeat(lat_home, k)
    lon0 = np.repeat(lon_home, k)
    metres_lon = _METRES_PER_DEGREE * np.cos(np.radians(lat0))
    true_lat = lat0 + hop * np.cos(rad) / _METRES_PER_DEGREE
    true_lon = lon0 + hop * np.sin(rad) / metres_lon

    factor = _per_example(region, factors)
    drift = _per_example(region, drifts)
    along = gen.normal(0, along_sd, n * k) * factor
    across = gen.normal(0, across_sd, n * k) * factor * drift
    # Unit vectors (east, north) of the heading and of its right-hand normal.
    east = along * np.sin(rad) + across * np.cos(rad)
    north = along * np.cos(rad) - across * np.sin(rad)
    pred_lat = true_lat + north / _METRES_PER_DEGREE
    if (np.abs(pred_lat) > 90.0).any():
        raise InvalidInput(
            "the simulated errors carry predictions beyond the poles; lower along_sd_m, "
            "across_sd_m or the regional factors (errors are meant in metres, not degrees)")
    pred_lon = _wrap(true_lon + east / metres_lon)
    return pd.DataFrame({
        "client_id": client,
        "region_id": region,
        "true_lon": _wrap(true_lon),
        "true_lat": true_lat,
        "pred_lon": pred_lon,
        "pred_lat": pred_lat,
        "heading_deg": np.mod(heading, 360.0),
        "loss": along**2 + across**2,
    })


def _wrap(lon: NDArray[np.float64]) -> NDArray[np.float64]:
    """Longitudes beyond +/-180 degrees (a hop across the antimeridian) wrapped back in."""
    return np.where(np.abs(lon) > 180.0, (lon + 180.0) % 360.0 - 180.0, lon)


def _factors(value: Any, name: str) -> dict[Any, float]:
    """Return ``{region: factor}`` with positive finite factors (``None``: no region)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise fail(name, value, f"is a {type(value).__name__}, not a mapping",
                   "pass {region_id: factor}, e.g. {'CO': 2.0}, or None")
    out: dict[Any, float] = {}
    for region, factor in value.items():
        out[region] = check_number(factor, f"{name}[{short_repr(region)}]", low=0.0,
                                   low_open=True, high=MAX_FACTOR,
                                   fix=f"pass a positive factor, at most {MAX_FACTOR:g}")
    return out


def _per_example(region: NDArray[Any], factors: dict[Any, float]) -> NDArray[np.float64]:
    if not factors:
        return np.ones(region.size)
    try:
        mapped = pd.Series(region, dtype=object).map(factors)
    except TypeError:  # pragma: no cover - region ids are hashable (checked)
        raise InvalidInput("region ids must be hashable to look their factors up") from None
    return mapped.fillna(1.0).to_numpy(dtype=np.float64)


def _fleet_columns(fleet: Any) -> tuple[NDArray[Any], NDArray[np.float64], NDArray[np.float64],
                                        NDArray[np.float64], NDArray[Any]]:
    """Return the fleet's device ids, home lon/lat, headings and region ids, checked."""
    fix = "pass a fleet from spatialdp.datasets.synthetic_fleet"
    if not isinstance(fleet, pd.DataFrame):
        raise fail("fleet", fleet, f"is a {type(fleet).__name__}, not a (Geo)DataFrame", fix)
    needed = ["device_id", "lon", "lat", "heading_deg", "region_id"]
    missing = [c for c in needed if c not in fleet.columns]
    if missing:
        raise InvalidInput(
            f"the fleet has no column(s) {missing} (it has {list(fleet.columns)[:10]}); {fix}")
    repeated = fleet.columns[fleet.columns.duplicated()]
    if len(repeated):
        raise InvalidInput(f"the fleet repeats the columns {list(repeated)[:5]}; {fix}")
    if len(fleet) == 0:
        raise InvalidInput(f"the fleet is empty: no device to simulate; {fix}")
    devices = check_ids(fleet["device_id"].to_numpy(), "device_id",
                        fix="give every device its own id")
    columns = {}
    for name, limit in (("lon", 180.0), ("lat", 90.0), ("heading_deg", None)):
        values = check_finite_array(fleet[name].to_numpy(), f"fleet column {name!r}")
        if limit is not None and (np.abs(values) > limit).any():
            raise InvalidInput(
                f"fleet column {name!r} has values beyond +/-{limit:g} degrees; the fleet is "
                f"in lon/lat (EPSG:4326); {fix}")
        columns[name] = values
    if np.abs(columns["lat"]).max() >= 89.0:
        raise InvalidInput(
            "the fleet has devices within 1 degree of a pole, where a hop east-west is not "
            f"defined in lon/lat; {fix}")
    regions = fleet["region_id"].to_numpy(dtype=object)
    check_ids(regions, "region_id", unique=False)
    try:
        pd.Index(regions).is_unique  # noqa: B018 - hashability check
    except TypeError:
        raise InvalidInput(f"region_id holds unhashable values; {fix}") from None
    return (np.asarray(devices), columns["lon"], columns["lat"], columns["heading_deg"],
            regions)
