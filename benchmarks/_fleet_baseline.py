"""The synthetic-fleet baseline of bench_synthetic_fleet.py: numpy + prepared shapely.

Kept apart from the benchmark so that a fresh process can import it without
importing spatialdp (its cold time counts only what the baseline needs).
"""

from __future__ import annotations

from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

EARTH_RADIUS_KM = 6371.0088


class NumpyFleet:
    """The fleet sampler as a competent numpy/shapely user would write it."""

    def __init__(self, states_path: str | Path, cities_path: str | Path) -> None:
        states = gpd.read_file(states_path).sort_values("state", kind="stable")
        states = states.reset_index(drop=True)
        self.cities_path = cities_path
        self.codes = states.state.to_numpy(dtype=object)
        self.geoms = np.asarray(states.geometry.values, dtype=object).copy()
        shapely.prepare(self.geoms)
        self.bounds = shapely.bounds(self.geoms)
        self.total = shapely.total_bounds(self.geoms)

    def locate(self, lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
        out = np.full(lon.size, -1, dtype=np.int64)
        for i in range(len(self.geoms) - 1, -1, -1):  # the first state wins on borders
            west, south, east, north = self.bounds[i]
            cand = np.flatnonzero((lon >= west) & (lon <= east) & (lat >= south)
                                  & (lat <= north))
            out[cand[shapely.intersects_xy(self.geoms[i], lon[cand], lat[cand])]] = i
        return out

    def __call__(self, n: int, seed: int, rural_share: float = 0.15) -> gpd.GeoDataFrame:
        gen = np.random.default_rng(seed)
        cities = pd.read_csv(self.cities_path)
        weights = cities.population.to_numpy(dtype=float)
        city_lon, city_lat = cities.longitude.to_numpy(), cities.latitude.to_numpy()
        spread_km = 2.0 + 7.5 * np.sqrt(weights / 1e6)
        lon, lat = np.empty(n), np.empty(n)
        region = np.full(n, -1, dtype=np.int64)
        pending = np.arange(n)
        west, south, east, north = self.total
        while pending.size:
            k = pending.size
            urban = gen.random(k) >= rural_share
            u_idx, r_idx = pending[urban], pending[~urban]
            pick = gen.choice(weights.size, size=u_idx.size, p=weights / weights.sum())
            dist = gen.exponential(spread_km[pick])
            bearing = gen.uniform(0.0, 2 * np.pi, u_idx.size)
            lat[u_idx] = city_lat[pick] + np.degrees(dist * np.cos(bearing) / EARTH_RADIUS_KM)
            lon[u_idx] = city_lon[pick] + np.degrees(
                dist * np.sin(bearing) / EARTH_RADIUS_KM) / np.cos(np.radians(city_lat[pick]))
            sin_lat = gen.uniform(np.sin(np.radians(south)), np.sin(np.radians(north)),
                                  r_idx.size)
            lat[r_idx] = np.degrees(np.arcsin(sin_lat))
            lon[r_idx] = gen.uniform(west, east, r_idx.size)
            region[pending] = self.locate(lon[pending], lat[pending])
            pending = pending[region[pending] < 0]
        heading = gen.uniform(0.0, 360.0, n)
        return gpd.GeoDataFrame(
            {"device_id": np.arange(n, dtype=np.int64), "lon": lon, "lat": lat,
             "heading_deg": heading, "region_id": self.codes[region]},
            geometry=gpd.points_from_xy(lon, lat), crs=4326)
