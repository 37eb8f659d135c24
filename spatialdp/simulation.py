"""Synthetic evaluation data: a positioning model's predictions over a fleet.

This is the simulation side (seeded, never a release): it produces the
per-example predictions that the device module turns into bounded per-client
metrics, so that the whole private pipeline can be run end to end on the
shipped geography.
"""

from __future__ import annotations

from collections.abc import Mapping

import geopandas as gpd
import numpy as np
import pandas as pd

from spatialdp._random import RandomLike, as_generator
from spatialdp._validation import check_count
from spatialdp.exceptions import InvalidInput

__all__ = ["positioning_predictions"]

_METRES_PER_DEGREE = 111_320.0


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
    k = check_count(examples_per_client, "examples_per_client", low=1)
    gen = as_generator(rng)
    n = len(fleet)
    client = np.repeat(fleet.device_id.to_numpy(), k)
    region = np.repeat(fleet[_region_column(fleet)].to_numpy(), k)
    heading = np.repeat(fleet.heading_deg.to_numpy(), k) + gen.normal(0, 5, n * k)
    rad = np.radians(heading)
    # Hops of up to 2 km along the heading from the device's home position.
    hop = gen.uniform(0, 2000, n * k)
    lat0 = np.repeat(fleet.lat.to_numpy(), k)
    lon0 = np.repeat(fleet.lon.to_numpy(), k)
    metres_lon = _METRES_PER_DEGREE * np.cos(np.radians(lat0))
    true_lat = lat0 + hop * np.cos(rad) / _METRES_PER_DEGREE
    true_lon = lon0 + hop * np.sin(rad) / metres_lon

    factor = pd.Series(region).map(region_error_factor or {}).fillna(1.0).to_numpy()
    drift = pd.Series(region).map(sideways_drift or {}).fillna(1.0).to_numpy()
    along = gen.normal(0, along_sd_m, n * k) * factor
    across = gen.normal(0, across_sd_m, n * k) * factor * drift
    # Unit vectors (east, north) of the heading and of its right-hand normal.
    east = along * np.sin(rad) + across * np.cos(rad)
    north = along * np.cos(rad) - across * np.sin(rad)
    return pd.DataFrame({
        "client_id": client,
        "region_id": region,
        "true_lon": true_lon,
        "true_lat": true_lat,
        "pred_lon": true_lon + east / metres_lon,
        "pred_lat": true_lat + north / _METRES_PER_DEGREE,
        "heading_deg": np.mod(heading, 360.0),
        "loss": along**2 + across**2,
    })


def _region_column(fleet: pd.DataFrame) -> str:
    if "region_id" in fleet.columns:
        return "region_id"
    raise InvalidInput("the fleet has no region_id column; place it with synthetic_fleet")
