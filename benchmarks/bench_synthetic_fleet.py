"""Synthetic fleet: synthetic_fleet(n) vs the same sampler written with numpy + shapely.

Target: ``synthetic_fleet(1_000_000)`` under 3 s on the development machine.

- ours: ``synthetic_fleet(n, rng=seed)`` with the default partition (the 48
  states, kept for the process after the first call, so its lookup index is
  built once).
- numpy+prepared (the strong baseline, ``_fleet_baseline.NumpyFleet``): the same
  distribution drawn with the same numpy calls in the same order from the same seed
  (population-weighted cities, exponential distance, uniform bearing; uniform-on-
  the-sphere rural background over the states' bounding box), then one point-in-
  polygon pass per resampling round: the states prepared once (``shapely.prepare``),
  and per state a numpy bounding-box mask and ``shapely.intersects_xy``. Points
  outside every state are drawn again. It builds the same GeoDataFrame; the two
  outputs are checked equal (``DataFrame.equals``) before timing.
- per-device loop (``--loop-n`` devices, default 20,000, scaled to N): Python
  ``random`` + a shapely ``contains`` per state; printed for reference only.

Timing follows the convention of ``benchmarks/_common.py``: ``ratio:`` is the
steady state (median of ``--repeats`` interleaved runs after one warm-up call
each, wall and CPU; outputs checked equal first); ``ratio_cold:`` times the first
call in a fresh Python process for each side (``_common.fresh_process``: numpy,
pandas, geopandas and shapely are imported untimed; everything else -- importing
spatialdp or the baseline module, reading the data, building indexes -- is
inside), the same number of times, interleaved. ``--scaling`` prints a Markdown
table over ``--sizes``.
"""

from __future__ import annotations

import argparse
import math
import random
import time

import pandas as pd
import shapely
from _common import (
    Timing,
    compare,
    compare_fresh,
    fresh_process,
    machine_line,
    print_results,
    ratio_line,
    scaling_table,
)
from _fleet_baseline import EARTH_RADIUS_KM, NumpyFleet

from spatialdp.datasets import data_dir, load_us_states, synthetic_fleet

STATES = data_dir() / "us48_states.gpkg"
CITIES = data_dir() / "us_cities.csv"


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


def run(n: int, seed: int, repeats: int, baseline: NumpyFleet) -> dict[str, dict[str, Timing]]:
    warm = compare({"ours": lambda: synthetic_fleet(n, rng=seed),
                    "numpy+prepared": lambda: baseline(n, seed)}, repeats=repeats)
    print_results(warm, f"n = {n:,}, steady state (one warm-up call each):")
    paths = f"{str(STATES)!r}, {str(CITIES)!r}"
    cold = compare_fresh({
        "ours": fresh_process("from spatialdp.datasets import synthetic_fleet",
                              f"synthetic_fleet({n}, rng={seed})"),
        "numpy+prepared": fresh_process("from _fleet_baseline import NumpyFleet",
                                        f"NumpyFleet({paths})({n}, {seed})"),
    }, repeats=repeats)
    print_results(cold, "first call in a fresh process (imports beyond numpy, pandas, "
                  "geopandas, shapely and every build inside):")
    return {"ratio": warm, "ratio_cold": cold}


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
    print(machine_line())
    baseline = NumpyFleet(STATES, CITIES)

    if args.scaling:
        rows = []
        for n in args.sizes:
            res = run(n, args.seed, args.repeats if n < 10**7 else 2, baseline)
            warm, cold = res["ratio"], res["ratio_cold"]
            rows.append({"N": n, "ours s": warm["ours"].median,
                         "ours CPU s": warm["ours"].cpu_median, "ours MB": warm["ours"].peak_mb,
                         "baseline s": warm["numpy+prepared"].median,
                         "baseline CPU s": warm["numpy+prepared"].cpu_median,
                         "baseline MB": warm["numpy+prepared"].peak_mb,
                         "ratio": warm["numpy+prepared"].median / warm["ours"].median,
                         "ours cold s": cold["ours"].median,
                         "baseline cold s": cold["numpy+prepared"].median,
                         "ratio_cold": cold["numpy+prepared"].median / cold["ours"].median})
        print(scaling_table(rows, list(rows[0])))
        return

    res = run(args.n, args.seed, args.repeats, baseline)
    if args.loop_n:
        m = min(args.loop_n, args.n)
        start = time.perf_counter()
        loop_fleet(m, args.seed)
        loop_s = (time.perf_counter() - start) * args.n / m
        print(f"  per-device loop {loop_s:8.3f} s   (measured on {m:,} devices, scaled; "
              f"loop / ours = {loop_s / res['ratio']['ours'].median:.1f})")
    print(ratio_line(res["ratio"], "numpy+prepared"))
    print(ratio_line(res["ratio_cold"], "numpy+prepared", label="ratio_cold"))


if __name__ == "__main__":
    main()
