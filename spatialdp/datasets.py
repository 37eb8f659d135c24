"""Real geography shipped in ``data/``, and synthetic fleets placed on it.

The files come from public sources named in ``data/README.md``: the 48
contiguous US states (libpysal's ``us_income`` example, from the US Census) and
US cities with 15,000+ inhabitants (GeoNames, CC BY 4.0).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd

from spatialdp._random import RandomLike, as_generator
from spatialdp._validation import check_integer, check_probability
from spatialdp.exceptions import InvalidInput
from spatialdp.geo._assign import positions_of
from spatialdp.geo._checks import short_repr
from spatialdp.geo.partition import Partition

__all__ = [
    "data_dir",
    "load_us_cities",
    "load_us_states",
    "synthetic_fleet",
    "us_states_partition",
]

_EARTH_RADIUS_KM = 6371.0088


def data_dir() -> Path:
    """Return the folder of the shipped data files (``SPATIALDP_DATA`` overrides it)."""
    env = os.environ.get("SPATIALDP_DATA")
    folder = Path(env) if env else Path(__file__).resolve().parent / "_data"
    if not (folder / "us48_states.gpkg").exists():
        raise FileNotFoundError(
            f"spatialdp's data files are not in {folder}; reinstall spatialdp (they ship "
            "inside the package, in spatialdp/_data) or point SPATIALDP_DATA at a folder "
            "holding them"
        )
    return folder


@lru_cache(maxsize=1)
def _states() -> gpd.GeoDataFrame:
    return gpd.read_file(data_dir() / "us48_states.gpkg")


def load_us_states() -> gpd.GeoDataFrame:
    """Load the 48 contiguous US states, EPSG:4326.

    Columns: ``state`` (two-letter code), ``state_name``, ``state_fips``,
    ``sub_region`` (census division), ``geometry``.

    Examples
    --------
    >>> states = load_us_states()
    >>> len(states), states.crs.to_epsg()
    (48, 4326)
    """
    return _states().copy()


def load_us_cities() -> gpd.GeoDataFrame:
    """Load the US cities of 15,000+ inhabitants (GeoNames), as points in EPSG:4326.

    Examples
    --------
    >>> cities = load_us_cities()
    >>> int(cities.population.max()) > 8_000_000
    True
    """
    frame = pd.read_csv(data_dir() / "us_cities.csv")
    return gpd.GeoDataFrame(
        frame, geometry=gpd.points_from_xy(frame.longitude, frame.latitude), crs=4326
    )


def us_states_partition() -> Partition:
    """Build the shipped national partition: one region per contiguous US state.

    Examples
    --------
    >>> us_states_partition().n_regions
    48
    """
    return Partition.from_geodataframe(load_us_states(), "state", name="us48-states")


@lru_cache(maxsize=1)
def _fleet_partition() -> Partition:
    """Return the states partition :func:`synthetic_fleet` places devices on by default.

    Kept for the process, so that its lookup index is built once, not on every call.
    """
    return us_states_partition()


def synthetic_fleet(
    n: int,
    *,
    rng: RandomLike = None,
    rural_share: float = 0.15,
    partition: Partition | None = None,
) -> gpd.GeoDataFrame:
    """``n`` devices over the contiguous US, placed by real city population.

    A share ``1 - rural_share`` of the devices sits around cities chosen with
    probability proportional to population, at a distance that grows with the
    city's size (a dense core, a suburban tail); the rest is a rural background
    spread uniformly over the land. Density therefore runs from dense urban to
    remote, as a national fleet's does. Deterministic for a given seed.

    Devices that land in no region (at sea, abroad) are drawn again, in rounds,
    each round placed with one vectorised point-in-polygon pass (the lookup of
    :meth:`Partition.assign`, whose index is built once per partition).

    Parameters
    ----------
    n : int
        Number of devices.
    rng : numpy.random.Generator, int or None
        Simulation randomness (this is synthetic data, not a release).
    rural_share : float
        Share of devices in the uniform rural background.
    partition : Partition, optional
        The partition that gives each device its ``region_id``; default the 48 states.

    Returns
    -------
    GeoDataFrame
        Columns ``device_id``, ``lon``, ``lat``, ``heading_deg`` (direction of
        travel, degrees clockwise from north), ``region_id``, ``geometry``. Every
        device lies in a region of the partition.

    Raises
    ------
    InvalidInput
        Bad ``n``, ``rural_share`` or ``partition``, or a partition too far from the
        contiguous US to receive the devices.

    Examples
    --------
    >>> fleet = synthetic_fleet(1000, rng=7)
    >>> len(fleet), int(fleet.region_id.isna().sum())
    (1000, 0)
    """
    n = check_integer(n, "n", low=1, high=10**9,
                      fix="give a positive whole number of devices, at most 1e9")
    rural_share = check_probability(rural_share, "rural_share")
    if partition is not None and not isinstance(partition, Partition):
        raise InvalidInput(f"partition={short_repr(partition)} is a "
                           f"{type(partition).__name__}, not a Partition; pass one built "
                           "with Partition.from_geodataframe or from_h3_cover, or None")
    gen = as_generator(rng)
    part = partition if partition is not None else _fleet_partition()
    cities = pd.read_csv(data_dir() / "us_cities.csv")
    weights = cities.population.to_numpy(dtype=float)
    city_lon = cities.longitude.to_numpy()
    city_lat = cities.latitude.to_numpy()
    # Spread (km) grows with the square root of population: 2 km for a small town,
    # about 25 km for a city of ten million.
    spread_km = 2.0 + 7.5 * np.sqrt(weights / 1e6)

    lon = np.empty(n)
    lat = np.empty(n)
    region = np.full(n, -1, dtype=np.int64)
    pending = np.arange(n)
    west, south, east, north = part.regions.total_bounds
    for _ in range(50):  # resampling rounds for points that fell outside every region
        k = pending.size
        urban = gen.random(k) >= rural_share
        u_idx = pending[urban]
        r_idx = pending[~urban]
        pick = gen.choice(weights.size, size=u_idx.size, p=weights / weights.sum())
        dist = gen.exponential(spread_km[pick])
        bearing = gen.uniform(0.0, 2 * np.pi, u_idx.size)
        dlat = np.degrees(dist * np.cos(bearing) / _EARTH_RADIUS_KM)
        dlon = np.degrees(dist * np.sin(bearing) / _EARTH_RADIUS_KM) / np.cos(
            np.radians(city_lat[pick])
        )
        lat[u_idx] = city_lat[pick] + dlat
        lon[u_idx] = city_lon[pick] + dlon
        # Uniform on the sphere within the bounding box (area-true), then rejected
        # outside the land by the assignment below.
        sin_lat = gen.uniform(np.sin(np.radians(south)), np.sin(np.radians(north)), r_idx.size)
        lat[r_idx] = np.degrees(np.arcsin(sin_lat))
        lon[r_idx] = gen.uniform(west, east, r_idx.size)
        # Rejection sampling: points outside every region are expected, so this
        # uses the lookup behind Partition.assign, which does not warn about them.
        region[pending] = positions_of(part, lon[pending], lat[pending])
        pending = pending[region[pending] < 0]
        if pending.size == 0:
            break
    if pending.size:
        raise InvalidInput(
            f"partition={part.key!r} received only {n - pending.size:,} of {n:,} devices "
            "after 50 rounds: devices are placed around US cities and over the "
            "partition's bounding box, and too few of them land in its regions; pass a "
            "partition that covers much of the contiguous US"
        )
    heading = gen.uniform(0.0, 360.0, n)
    return gpd.GeoDataFrame(
        {
            "device_id": np.arange(n, dtype=np.int64),
            "lon": lon,
            "lat": lat,
            "heading_deg": heading,
            "region_id": np.asarray(part.region_ids)[region],
        },
        geometry=gpd.points_from_xy(lon, lat),
        crs=4326,
    )
