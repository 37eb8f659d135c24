"""Synthetic fleet: synthetic_fleet(n) vs the same sampler written with numpy + shapely.

Target: ``synthetic_fleet(1_000_000)`` under 3 s on the development machine.

- ours: ``synthetic_fleet(n, rng=seed)`` with the default partition (the 48
  states, kept for the process after the first call, so its lookup index is
  built once). The first call in a fresh process (index built inside) is
  printed too.
- numpy+prepared (the strong baseline): the same distribution drawn with the
  same numpy calls in the same order from the same seed (population-weighted
  cities, exponential distance, uniform bearing; uniform-on-the-sphere rural
  background over the states' bounding box), then one point-in-polygon pass per
  resampling round: the states prepared once (``shapely.prepare``), and per state
  a numpy bounding-box mask and ``shapely.intersects_xy``. Points outside every
  state are drawn again. It builds the same GeoDataFrame; the two outputs are
  checked equal (``DataFrame.equals``) before timing.
- per-device loop (``--loop-n`` devices, default 20,000, scaled to N): Python
  ``random`` + a shapely ``contains`` per state; printed for reference only.

The last line is ``ratio: X`` = baseline time / our time. Times are the best of
``--repeats`` interleaved runs; peak memory from one separate run of each (see
``_common.MEMORY_METHOD``). ``--scaling`` prints a Markdown table over ``--sizes``.
"""

from __future__ import annotations

import argparse
import math
import random
import time

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from _common import MEMORY_METHOD, measure, ratio_line, scaling_table

from spatialdp.datasets import data_dir, load_us_states, synthetic_fleet

EARTH_RADIUS_KM = 6371.0088


class NumpyFleet:
    """The fleet sampler as a competent numpy/shapely user would write it."""

    def __init__(self) -> None:
        states = load_us_states().sort_values("state", kind="stable").reset_index(drop=True)
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
        cities = pd.read_csv(data_dir() / "us_cities.csv")
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


def loop_fleet(n: int, seed: int, rural_share: float = 0.15) -> list[tuple[float, float, str]]:
    """The per-device Python loop (reference only)."""
    rnd = random.Random(seed)
    cities = pd.read_csv(data_dir() / "us_cities.csv")
    rows = list(cities.itertuples(index=False))
    weights = [c.population for c in rows]
    states = load_us_states()
    shapes = list(zip(states.state, states.geometry, strict=True))
    west, south, east, north = states.total_bounds
    out: list[tuple[float, float, str]] = []
    while len(out) < n:
        if rnd.random() >= rural_share:
            city = rnd.choices(rows, weights)[0]
            dist = rnd.expovariate(1.0 / (2.0 + 7.5 * math.sqrt(city.population / 1e6)))
            bearing = rnd.uniform(0, 2 * math.pi)
            lat = city.latitude + math.degrees(dist * math.cos(bearing) / EARTH_RADIUS_KM)
            lon = city.longitude + math.degrees(
                dist * math.sin(bearing) / EARTH_RADIUS_KM) / math.cos(math.radians(city.latitude))
        else:
            lat = math.degrees(math.asin(rnd.uniform(math.sin(math.radians(south)),
                                                     math.sin(math.radians(north)))))
            lon = rnd.uniform(west, east)
        point = shapely.Point(lon, lat)
        for code, shape in shapes:
            if shape.contains(point):
                out.append((lon, lat, code))
                break
    return out


def run(n: int, seed: int, repeats: int, baseline: NumpyFleet
        ) -> tuple[dict[str, tuple[float, float]], float]:
    start = time.perf_counter()
    ours = synthetic_fleet(n, rng=seed)  # the first call of the process builds the index
    first_s = time.perf_counter() - start
    theirs = baseline(n, seed)
    if not ours.equals(theirs):
        raise SystemExit("the numpy baseline's fleet differs from synthetic_fleet's: void")
    del ours, theirs
    results = measure({"ours": lambda: synthetic_fleet(n, rng=seed),
                       "numpy+prepared": lambda: baseline(n, seed)}, repeats)
    return results, first_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", "--devices", type=int, default=1_000_000, dest="n")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--loop-n", type=int, default=20_000)
    parser.add_argument("--scaling", action="store_true")
    parser.add_argument("--sizes", type=int, nargs="+",
                        default=[10_000, 100_000, 1_000_000, 10_000_000])
    args = parser.parse_args()
    print(f"memory: {MEMORY_METHOD}")
    baseline = NumpyFleet()

    if args.scaling:
        rows = []
        for n in args.sizes:
            results, first_s = run(n, args.seed, args.repeats if n < 10**7 else 2, baseline)
            rows.append({"N": n, "ours s": results["ours"][0], "ours MB": results["ours"][1],
                         "baseline s": results["numpy+prepared"][0],
                         "baseline MB": results["numpy+prepared"][1],
                         "ratio": results["numpy+prepared"][0] / results["ours"][0]})
        print(scaling_table(rows, ["N", "ours s", "ours MB", "baseline s", "baseline MB",
                                   "ratio"]))
        return

    results, first_s = run(args.n, args.seed, args.repeats, baseline)
    ours_s = results["ours"][0]
    print(f"synthetic_fleet({args.n:,}): {ours_s:.3f} s (first call of the process, index "
          f"built inside: {first_s:.3f} s; target: under 3 s)")
    for name, (seconds, mb) in results.items():
        print(f"  {name:<15} {seconds:8.3f} s   peak {mb:8.1f} MB")
    if args.loop_n:
        m = min(args.loop_n, args.n)
        start = time.perf_counter()
        loop_fleet(m, args.seed)
        loop_s = (time.perf_counter() - start) * args.n / m
        print(f"  per-device loop {loop_s:8.3f} s   (measured on {m:,} devices, scaled; "
              f"loop / ours = {loop_s / ours_s:.1f})")
    print(ratio_line(results["numpy+prepared"][0], ours_s))


if __name__ == "__main__":
    main()
