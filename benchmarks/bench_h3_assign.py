"""Points -> H3 partition: Partition.assign vs h3ronpy used directly.

The partition is the H3 cover of the 48 states (``--resolution``, default 5:
about 31,000 cells, containment "overlap"). Points (``--points``): ``uniform``
(default) over the states' bounding box, or ``fleet`` (``synthetic_fleet``).

Contenders, all returning the same region positions (checked before timing):

- ours: ``Partition.assign(lon=, lat=)``: checks the coordinates, answers the points
  in pure pixels of its raster by arithmetic (``spatialdp.geo._h3grid``: about 80 % of
  points at resolution 5), sends the rest to h3ronpy and a hash lookup. The raster
  is built once per partition, after 2M points; its one-off build time is printed.
- h3ronpy+searchsorted: ``h3ronpy.vector.coordinates_to_cells`` -> numpy, then
  ``np.searchsorted`` into the sorted cell ids and an equality check.
- h3ronpy+get_indexer: the same cells looked up with ``pandas.Index.get_indexer``
  (its hash table built once, outside the timing).
- per-point loop (``--loop-n`` points, default 100,000, scaled to N): ``h3.latlng_to_cell``
  and a dict; printed for reference, never the ratio.

The last line is ``ratio: X`` = the faster h3ronpy baseline's time / our time.
Times are the best of ``--repeats`` interleaved runs; peak memory is from one
separate run of each (see ``_common.MEMORY_METHOD``). ``--scaling`` prints a
Markdown table over ``--sizes`` (default 10^4 .. 10^7) instead.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import h3
import numpy as np
import pandas as pd
from _common import MEMORY_METHOD, measure, ratio_line, scaling_table
from h3ronpy import vector as h3vector

from spatialdp.datasets import load_us_states, synthetic_fleet
from spatialdp.geo.partition import Partition


def make_points(n: int, kind: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    if kind == "uniform":
        west, south, east, north = load_us_states().total_bounds
        rng = np.random.default_rng(seed)
        return rng.uniform(west, east, n), rng.uniform(south, north, n)
    lon, lat = [], []
    for i, start in enumerate(range(0, n, 1_000_000)):
        fleet = synthetic_fleet(min(1_000_000, n - start), rng=seed + i)
        lon.append(fleet.lon.to_numpy())
        lat.append(fleet.lat.to_numpy())
    return np.concatenate(lon), np.concatenate(lat)


def h3ronpy_cells(lon: np.ndarray, lat: np.ndarray, resolution: int) -> np.ndarray:
    return np.asarray(h3vector.coordinates_to_cells(lat, lon, resolution).to_numpy())


def searchsorted_positions(own: np.ndarray, lon: np.ndarray, lat: np.ndarray,
                           resolution: int) -> np.ndarray:
    cells = h3ronpy_cells(lon, lat, resolution)
    pos = np.minimum(np.searchsorted(own, cells), own.size - 1)
    return np.where(own[pos] == cells, pos, -1)


def contenders(partition: Partition, lon: np.ndarray, lat: np.ndarray
               ) -> dict[str, Callable[[], np.ndarray]]:
    resolution = int(partition.resolution or 0)
    own = np.asarray(partition.cells).copy()
    index = pd.Index(own)
    index.get_indexer(own[:1])  # build the hash table outside the timing
    # Ours builds its cell table and, once it has seen 2M points, its pure-pixel raster,
    # once per partition; both are built here, outside the timing (the build is timed
    # on its own by build_seconds), as the baseline's hash table is.
    partition.assign(lon=lon[:1], lat=lat[:1])
    partition._grid_index()
    runs: dict[str, Callable[[], np.ndarray]] = {
        "ours": lambda: partition.assign(lon=lon, lat=lat).positions,
        "h3ronpy+searchsorted": lambda: searchsorted_positions(own, lon, lat, resolution),
        "h3ronpy+get_indexer": lambda: index.get_indexer(h3ronpy_cells(lon, lat, resolution)),
    }
    expected = runs["ours"]()
    for name, run in runs.items():
        if not np.array_equal(run(), expected):
            raise SystemExit(f"{name} disagrees with Partition.assign: the benchmark is void")
    return runs


def build_seconds(resolution: int) -> tuple[float, float]:
    """Time the one-off build of the raster on a fresh partition; return (s, raster MB)."""
    fresh = Partition.from_h3_cover(load_us_states(), resolution, containment="overlap")
    start = time.perf_counter()
    grid = fresh._grid_index()
    seconds = time.perf_counter() - start
    return seconds, (grid.nbytes if grid is not None else 0) / 2**20


def loop_seconds(partition: Partition, lon: np.ndarray, lat: np.ndarray) -> float:
    resolution = int(partition.resolution or 0)
    position_of = {cell: i for i, cell in enumerate(partition.region_ids)}
    start = time.perf_counter()
    looped = np.array([position_of.get(h3.latlng_to_cell(la, lo, resolution), -1)
                       for la, lo in zip(lat.tolist(), lon.tolist(), strict=True)])
    seconds = time.perf_counter() - start
    if not np.array_equal(looped, partition.assign(lon=lon, lat=lat).positions):
        raise SystemExit("the per-point loop disagrees with Partition.assign")
    return seconds


def run(partition: Partition, lon: np.ndarray, lat: np.ndarray, repeats: int
        ) -> tuple[dict[str, tuple[float, float]], str]:
    results = measure(contenders(partition, lon, lat), repeats)
    strong = min((n for n in results if n != "ours"), key=lambda n: results[n][0])
    return results, strong


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", "--points-n", type=int, default=1_000_000, dest="n")
    parser.add_argument("--points", choices=("uniform", "fleet"), default="uniform")
    parser.add_argument("--resolution", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--loop-n", type=int, default=100_000)
    parser.add_argument("--scaling", action="store_true")
    parser.add_argument("--sizes", type=int, nargs="+",
                        default=[10_000, 100_000, 1_000_000, 10_000_000])
    args = parser.parse_args()

    partition = Partition.from_h3_cover(load_us_states(), args.resolution, containment="overlap")
    print(f"partition: {partition}")
    print(f"points: {args.points}; memory: {MEMORY_METHOD}")

    if args.scaling:
        rows = []
        for n in args.sizes:
            lon, lat = make_points(n, args.points, args.seed)
            results, strong = run(partition, lon, lat, args.repeats if n < 10**7 else 3)
            rows.append({"N": n, "ours s": results["ours"][0], "ours MB": results["ours"][1],
                         "baseline": strong, "baseline s": results[strong][0],
                         "baseline MB": results[strong][1],
                         "ratio": results[strong][0] / results["ours"][0]})
            del lon, lat
        print(scaling_table(rows, ["N", "ours s", "ours MB", "baseline", "baseline s",
                                   "baseline MB", "ratio"]))
        return

    lon, lat = make_points(args.n, args.points, args.seed)
    results, strong = run(partition, lon, lat, args.repeats)
    print(f"points: {args.n:,}  unassigned: "
          f"{int((partition.assign(lon=lon, lat=lat).positions < 0).sum()):,}")
    for name, (seconds, mb) in results.items():
        print(f"  {name:<21} {seconds:8.3f} s   peak {mb:8.1f} MB")
    seconds, megabytes = build_seconds(args.resolution)
    print(f"  one-off raster build (per partition, after 2M points): {seconds:.2f} s, "
          f"kept: {megabytes:.0f} MB")
    m = min(args.loop_n, args.n)
    if m:
        loop_s = loop_seconds(partition, lon[:m], lat[:m]) * args.n / m
        print(f"  per-point h3 loop     {loop_s:8.3f} s   (measured on {m:,} points, scaled; "
              f"loop / ours = {loop_s / results['ours'][0]:.1f})")
    print(f"strong baseline: {strong}")
    print(ratio_line(results[strong][0], results["ours"][0]))


if __name__ == "__main__":
    main()
