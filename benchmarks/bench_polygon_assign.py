"""Points -> polygon regions: Partition.assign vs the strongest plain-shapely/geopandas code.

Two partitions, in one run:

- ``states``: the 48 contiguous states (11,469 vertices, multipolygons).
- ``hexagons``: thousands of regions, the H3 cells (``--hex-resolution``, default
  4: about 4,600 cells) covering the states, turned into an ordinary polygon
  partition with ``Partition.from_geodataframe`` (the shipped data has no
  counties; these are just many small polygons, not an H3 partition).

Points (``--points``): ``fleet`` (default) draws them with ``synthetic_fleet``
(population-weighted around cities, so many near coasts and state borders);
``uniform`` spreads them uniformly over the states' bounding box (about 40 %
fall outside every state).

Contenders, all returning the same answer (the first region in partition order
that the point intersects, -1 if none; checked before timing, except sjoin
"within", which leaves border points out and is timed only):

- ours: ``Partition.assign(lon=, lat=)`` on a partition that has built its grid
  index (warm); the first call on a fresh partition (cold, index built inside) is
  printed too.
- prepared-xy: the states, prepared once (``shapely.prepare``); per state, a
  numpy bounding-box mask, then ``shapely.intersects_xy`` on the points inside
  the box. (For thousands of regions this loop is not what anyone would write,
  and is skipped.)
- strtree-prepared: ``STRtree(regions).query(points)`` (bounding boxes only),
  then ``shapely.intersects_xy`` of the prepared region with each candidate pair.
  The Point array is built before timing (favours the baseline).
- sjoin: ``geopandas.sjoin(points, regions, predicate=...)`` with the point
  GeoDataFrame built before timing (favours the baseline), plus the numpy step
  that keeps the first region of each point.

The strong baseline is the fastest of those for the partition; the ``ratio:``
line (last) is strong-baseline time / our time for the states, and a
``ratio (hexagons):`` line precedes it. Times are the best of ``--repeats``
interleaved runs; peak memory is from one separate run of each
(see ``_common.MEMORY_METHOD``). ``--scaling`` prints a Markdown table over
``--sizes`` (default 10^4 .. 10^7) instead.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import geopandas as gpd
import numpy as np
import shapely
from _common import MEMORY_METHOD, measure, peak_memory_mb, ratio_line, scaling_table

from spatialdp.datasets import load_us_states, synthetic_fleet
from spatialdp.geo import h3cells
from spatialdp.geo.partition import Partition

Positions = np.ndarray


def make_points(n: int, kind: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    if kind == "uniform":
        west, south, east, north = load_us_states().total_bounds
        rng = np.random.default_rng(seed)
        return rng.uniform(west, east, n), rng.uniform(south, north, n)
    lon, lat = [], []
    for i, start in enumerate(range(0, n, 1_000_000)):  # chunks keep the Point objects few
        fleet = synthetic_fleet(min(1_000_000, n - start), rng=seed + i)
        lon.append(fleet.lon.to_numpy())
        lat.append(fleet.lat.to_numpy())
    return np.concatenate(lon), np.concatenate(lat)


def states_frame() -> gpd.GeoDataFrame:
    return load_us_states()[["state", "geometry"]].rename(columns={"state": "region_id"})


def hexagon_frame(resolution: int) -> gpd.GeoDataFrame:
    states = load_us_states()
    _, cells = h3cells.polygons_to_cell_lists(states.geometry.to_numpy(), resolution, "overlap")
    cells = np.unique(cells)
    return gpd.GeoDataFrame({"region_id": h3cells.cells_to_str(cells)},
                            geometry=h3cells.cell_polygons(cells), crs=4326)


def first_per_point(n: int, point_idx: np.ndarray, region_idx: np.ndarray) -> Positions:
    """Keep, for each point, the lowest region among its matches."""
    out = np.full(n, -1, dtype=np.int64)
    order = np.lexsort((region_idx, point_idx))
    point_idx, region_idx = point_idx[order], region_idx[order]
    first = np.ones(point_idx.size, dtype=bool)
    first[1:] = point_idx[1:] != point_idx[:-1]
    out[point_idx[first]] = region_idx[first]
    return out


def prepared_xy(geoms: np.ndarray, lon: np.ndarray, lat: np.ndarray) -> Positions:
    """The per-polygon loop: bounding-box mask, then prepared intersects_xy."""
    shapely.prepare(geoms)  # a no-op once prepared
    bounds = shapely.bounds(geoms)
    out = np.full(lon.size, -1, dtype=np.int64)
    for i in range(len(geoms) - 1, -1, -1):  # reversed: the first region wins on borders
        west, south, east, north = bounds[i]
        cand = np.flatnonzero((lon >= west) & (lon <= east) & (lat >= south) & (lat <= north))
        out[cand[shapely.intersects_xy(geoms[i], lon[cand], lat[cand])]] = i
    return out


def strtree_prepared(tree: shapely.STRtree, geoms: np.ndarray, points: np.ndarray,
                     lon: np.ndarray, lat: np.ndarray) -> Positions:
    point_idx, region_idx = tree.query(points)
    hit = shapely.intersects_xy(geoms[region_idx], lon[point_idx], lat[point_idx])
    return first_per_point(lon.size, point_idx[hit], region_idx[hit])


def sjoin(points: gpd.GeoDataFrame, regions: gpd.GeoDataFrame, predicate: str) -> Positions:
    joined = gpd.sjoin(points, regions, how="inner", predicate=predicate)
    return first_per_point(len(points), joined.index.to_numpy(),
                           joined["index_right"].to_numpy())


def contenders(frame: gpd.GeoDataFrame, lon: np.ndarray, lat: np.ndarray, *,
               with_loop: bool, with_sjoin: bool
               ) -> tuple[Partition, dict[str, Callable[[], Positions]]]:
    part = Partition.from_geodataframe(frame, "region_id")
    regions = part.regions.reset_index()  # partition order
    geoms = np.asarray(regions.geometry.values, dtype=object).copy()  # our own objects
    shapely.prepare(geoms)
    tree = shapely.STRtree(geoms)
    points = shapely.points(lon, lat)
    part.assign(lon=lon[:10], lat=lat[:10])
    part._grid_index()  # warm: the index every call after the first 50,000 points uses
    runs: dict[str, Callable[[], Positions]] = {
        "ours": lambda: part.assign(lon=lon, lat=lat).positions,
        "strtree-prepared": lambda: strtree_prepared(tree, geoms, points, lon, lat),
    }
    if with_loop:
        runs["prepared-xy"] = lambda: prepared_xy(geoms, lon, lat)
    if with_sjoin:
        frame_points = gpd.GeoDataFrame(geometry=gpd.GeoSeries(points, crs=4326))
        runs["sjoin-intersects"] = lambda: sjoin(frame_points, regions, "intersects")
        runs["sjoin-within"] = lambda: sjoin(frame_points, regions, "within")
    expected = runs["ours"]()
    for name, run in runs.items():
        if name != "sjoin-within" and not np.array_equal(run(), expected):
            raise SystemExit(f"{name} disagrees with Partition.assign: the benchmark is void")
    return part, runs


def cold_run(frame: gpd.GeoDataFrame, lon: np.ndarray, lat: np.ndarray
             ) -> tuple[float, float, bool]:
    """Time and memory of the first call on fresh partitions, and whether it built the grid."""
    import time

    fresh = Partition.from_geodataframe(frame, "region_id")
    start = time.perf_counter()
    fresh.assign(lon=lon, lat=lat)
    seconds = time.perf_counter() - start
    other = Partition.from_geodataframe(frame, "region_id")
    return seconds, peak_memory_mb(lambda: other.assign(lon=lon, lat=lat)), fresh._grid_tried


def run_case(label: str, frame: gpd.GeoDataFrame, lon: np.ndarray, lat: np.ndarray,
             repeats: int, with_loop: bool, with_sjoin: bool) -> dict[str, Any]:
    part, runs = contenders(frame, lon, lat, with_loop=with_loop, with_sjoin=with_sjoin)
    results = measure(runs, repeats)
    cold_s, cold_mb, built = cold_run(frame, lon, lat)
    grid = part._grid
    assert grid is not None
    print(f"\n[{label}] {part.n_regions:,} regions, {lon.size:,} points; grid "
          f"{grid.nx}x{grid.ny} cells, {grid.n_mixed:,} mixed, {grid.nbytes / 2**20:.1f} MB")
    for name, (seconds, mb) in results.items():
        print(f"  {name:<17} {seconds:8.3f} s   peak {mb:8.1f} MB")
    how = ("grid built inside" if built else
           f"exact test only: the grid waits for {part._grid_min_points():,} points")
    print(f"  {'ours (cold)':<17} {cold_s:8.3f} s   peak {cold_mb:8.1f} MB  "
          f"(first call on a fresh partition, {how})")
    strong = min((n for n in results if n not in ("ours", "sjoin-within")),
                 key=lambda n: results[n][0])
    strongest = min((n for n in results if n != "ours"), key=lambda n: results[n][0])
    print(f"  strong baseline: {strong}" + (f" (sjoin-within, not equivalent on borders, "
                                           f"would be {results[strongest][0]:.3f} s)"
                                           if strongest != strong else ""))
    return {"results": results, "strong": strong, "cold": (cold_s, cold_mb)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000, help="number of points")
    parser.add_argument("--points", choices=("fleet", "uniform"), default="fleet")
    parser.add_argument("--hex-resolution", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scaling", action="store_true",
                        help="print a Markdown table over --sizes (states and hexagons)")
    parser.add_argument("--sizes", type=int, nargs="+",
                        default=[10_000, 100_000, 1_000_000, 10_000_000])
    parser.add_argument("--sjoin-max", type=int, default=1_000_000,
                        help="skip sjoin above this many points (its Point frame and time)")
    args = parser.parse_args()
    print(f"points: {args.points}; memory: {MEMORY_METHOD}")
    frames = {"states": states_frame(), f"hexagons-r{args.hex_resolution}":
              hexagon_frame(args.hex_resolution)}

    if args.scaling:
        rows = []
        for n in args.sizes:
            lon, lat = make_points(n, args.points, args.seed)
            for label, frame in frames.items():
                case = run_case(label, frame, lon, lat, args.repeats if n < 10**7 else 3,
                                with_loop=label == "states", with_sjoin=n <= args.sjoin_max)
                res, strong = case["results"], case["strong"]
                rows.append({"regions": label, "N": n,
                             "ours s": res["ours"][0], "ours MB": res["ours"][1],
                             "ours cold s": case["cold"][0],
                             "baseline": strong, "baseline s": res[strong][0],
                             "baseline MB": res[strong][1],
                             "ratio": res[strong][0] / res["ours"][0]})
            del lon, lat
        print()
        print(scaling_table(rows, ["regions", "N", "ours s", "ours MB", "ours cold s",
                                   "baseline", "baseline s", "baseline MB", "ratio"]))
        return

    lon, lat = make_points(args.n, args.points, args.seed)
    ratios = {}
    for label, frame in frames.items():
        case = run_case(label, frame, lon, lat, args.repeats, with_loop=label == "states",
                        with_sjoin=args.n <= args.sjoin_max)
        res, strong = case["results"], case["strong"]
        ratios[label] = (res[strong][0], res["ours"][0])
    hex_label = f"hexagons-r{args.hex_resolution}"
    print(f"\nratio (hexagons): {ratios[hex_label][0] / ratios[hex_label][1]:.2f}")
    print(ratio_line(*ratios["states"]))


if __name__ == "__main__":
    main()
