"""Synthetic fleet generation: spatialdp's vectorised generator vs a per-device loop.

The issue's target is 1,000,000 devices in under 5 s; that time is printed
first. The ratio compares the same number of devices (``--compare``, default
20,000, as the loop would take minutes for a million): the baseline places each
device around a population-weighted city (or uniformly for the rural share)
and finds its state with a shapely ``contains`` test per state, retrying
points that land outside every state. Ends with ``ratio: X`` = loop / ours.
"""

from __future__ import annotations

import argparse
import math
import random
import time

import pandas as pd
import shapely

from spatialdp.datasets import data_dir, load_us_states, synthetic_fleet, us_states_partition


def loop_fleet(n: int, seed: int, rural_share: float = 0.15) -> list[tuple[float, float, str]]:
    rnd = random.Random(seed)
    cities = pd.read_csv(data_dir() / "us_cities.csv")
    rows = list(cities.itertuples(index=False))
    weights = [c.population for c in rows]
    states = load_us_states()
    shapes = list(zip(states.state, states.geometry, strict=True))
    west, south, east, north = states.total_bounds
    out = []
    while len(out) < n:
        if rnd.random() >= rural_share:
            city = rnd.choices(rows, weights)[0]
            dist = rnd.expovariate(1.0 / (2.0 + 7.5 * math.sqrt(city.population / 1e6)))
            bearing = rnd.uniform(0, 2 * math.pi)
            lat = city.latitude + math.degrees(dist * math.cos(bearing) / 6371.0088)
            lon = city.longitude + math.degrees(dist * math.sin(bearing) / 6371.0088) / math.cos(
                math.radians(city.latitude))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--devices", type=int, default=1_000_000)
    parser.add_argument("--compare", type=int, default=20_000)
    args = parser.parse_args()
    partition = us_states_partition()

    start = time.perf_counter()
    synthetic_fleet(args.devices, rng=0, partition=partition)
    full_s = time.perf_counter() - start
    print(f"synthetic_fleet({args.devices:,}): {full_s:.2f} s (target: under 5 s)")

    start = time.perf_counter()
    loop_fleet(args.compare, seed=0)
    loop_s = time.perf_counter() - start
    fresh = us_states_partition()  # no cached spatial index from the run above
    start = time.perf_counter()
    synthetic_fleet(args.compare, rng=0, partition=fresh)
    ours_s = time.perf_counter() - start
    print(f"{args.compare:,} devices: per-device loop {loop_s:.2f} s, "
          f"synthetic_fleet {ours_s:.3f} s")
    print(f"ratio: {loop_s / ours_s:.1f}")


if __name__ == "__main__":
    main()
