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

Timing follows the convention of ``benchmarks/_common.py`` (median of
``--repeats`` interleaved runs, min and max, wall and CPU; answers asserted equal
before timing; peak memory from one separate run of each):

- ``ratio:`` (steady state) -- each side warmed by one untimed call. Ours is
  ``Partition.assign(lon=, lat=)``: after its warm-up it holds the lookup structures
  its own cost model chose for that many points (prepared geometries, the regions'
  bounding boxes filed in bins when there are more than 64, and a grid index sized
  to the points seen, see ``spatialdp.geo.partition``).
  Baselines, all returning the same answer (the first region in partition order
  that the point intersects, -1 if none):

  - prepared-xy (states only): the regions prepared once; per region a numpy
    bounding-box mask, then ``shapely.intersects_xy`` on the points in the box;
  - strtree-prepared: ``STRtree(regions).query(points)``, then prepared
    ``intersects_xy`` per candidate pair (Point array built before timing);
  - sjoin-intersects: ``geopandas.sjoin`` (point frame built before timing) plus
    the numpy step that keeps each point's first region; sjoin-within (drops
    border points: not equivalent) is timed but never the baseline.

- ``ratio_cold:`` -- the first call, every one-off build inside the timing: ours on
  a fresh Partition (built untimed from fresh, unprepared geometry copies: the
  partition is the data a spatialdp user loads, as the GeoDataFrame is the
  baseline's; its prepared geometries, STRtree and grid are built inside the
  call), the baselines on fresh unprepared geometry copies (prepare, bounds,
  STRtree, Point array or point frame all inside). Same repeats, median. (Leaving
  the geometries unprepared is no stronger baseline: ``shapely.intersects_xy``
  prepares a single geometry itself, and an array of unprepared regions tests
  points several times slower.)

The strongest baseline is the fastest equivalent one, chosen separately for the
warm and the cold comparison. Lines: ``ratio (hexagons):``,
``ratio_cold (hexagons):``, then ``ratio:`` and ``ratio_cold:`` for the states.
``--scaling`` prints a Markdown table over ``--sizes`` (default 10^4 .. 10^7)
with both sides' medians, CPU and peak memory.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import geopandas as gpd
import numpy as np
import shapely
from _common import (
    Contender,
    Timing,
    compare,
    fastest,
    machine_line,
    print_results,
    ratio_line,
    scaling_table,
)

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


def fresh_geometries(frame: gpd.GeoDataFrame) -> np.ndarray:
    """Unprepared copies of the region geometries (new GEOS objects), in frame order."""
    return np.asarray(shapely.from_wkb(shapely.to_wkb(frame.geometry.to_numpy())), dtype=object)


def fresh_frame(frame: gpd.GeoDataFrame) -> gpd.GeoDataFrame:
    return frame.set_geometry(gpd.GeoSeries(fresh_geometries(frame), index=frame.index,
                                            crs=frame.crs))


def strtree_cold(geoms: np.ndarray, lon: np.ndarray, lat: np.ndarray) -> Positions:
    shapely.prepare(geoms)
    return strtree_prepared(shapely.STRtree(geoms), geoms, shapely.points(lon, lat), lon, lat)


def sjoin_cold(regions: gpd.GeoDataFrame, lon: np.ndarray, lat: np.ndarray) -> Positions:
    points = gpd.GeoDataFrame(geometry=gpd.points_from_xy(lon, lat), crs=4326)
    return sjoin(points, regions, "intersects")


def warm_contenders(frame: gpd.GeoDataFrame, lon: np.ndarray, lat: np.ndarray, *,
                    with_loop: bool, with_sjoin: bool) -> dict[str, Callable[[], Positions]]:
    part = Partition.from_geodataframe(frame, "region_id")
    regions = part.regions.reset_index()  # partition order
    geoms = fresh_geometries(regions)  # the baselines' own GEOS objects
    shapely.prepare(geoms)
    tree = shapely.STRtree(geoms)
    points = shapely.points(lon, lat)
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
    return runs


def cold_contenders(frame: gpd.GeoDataFrame, lon: np.ndarray, lat: np.ndarray, *,
                    with_loop: bool, with_sjoin: bool) -> dict[str, Contender]:
    order = Partition.from_geodataframe(frame, "region_id").regions.reset_index()
    runs: dict[str, Contender] = {
        "ours": (lambda: Partition.from_geodataframe(fresh_frame(frame), "region_id"),
                 lambda part: part.assign(lon=lon, lat=lat).positions),
        "strtree-prepared": (lambda: fresh_geometries(order),
                             lambda geoms: strtree_cold(geoms, lon, lat)),
    }
    if with_loop:
        runs["prepared-xy"] = (lambda: fresh_geometries(order),
                               lambda geoms: prepared_xy(geoms, lon, lat))
    if with_sjoin:
        runs["sjoin-intersects"] = (lambda: fresh_frame(order),
                                    lambda regions: sjoin_cold(regions, lon, lat))
    return runs


def run_case(label: str, frame: gpd.GeoDataFrame, lon: np.ndarray, lat: np.ndarray,
             repeats: int, with_loop: bool, with_sjoin: bool
             ) -> tuple[dict[str, Timing], dict[str, Timing]]:
    print(f"\n[{label}] {len(frame):,} regions, {lon.size:,} points")
    warm = compare(warm_contenders(frame, lon, lat, with_loop=with_loop,
                                   with_sjoin=with_sjoin),
                   repeats=repeats, unchecked=("sjoin-within",))
    print_results(warm, "  steady state (one warm-up call each):")
    cold = compare(cold_contenders(frame, lon, lat, with_loop=with_loop,
                                   with_sjoin=with_sjoin),
                   repeats=repeats, warmup=0)
    print_results(cold, "  first call, one-off builds inside:")
    return warm, cold


def strongest(results: dict[str, Timing]) -> str:
    return fastest(results, exclude=("ours", "sjoin-within"))


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
    print(f"points: {args.points}; {machine_line()}")
    frames = {"states": states_frame(), f"hexagons-r{args.hex_resolution}":
              hexagon_frame(args.hex_resolution)}

    if args.scaling:
        rows = []
        for n in args.sizes:
            lon, lat = make_points(n, args.points, args.seed)
            for label, frame in frames.items():
                warm, cold = run_case(label, frame, lon, lat,
                                      args.repeats if n < 10**7 else 3,
                                      with_loop=label == "states",
                                      with_sjoin=n <= args.sjoin_max)
                base, base_cold = strongest(warm), strongest(cold)
                rows.append({"regions": label, "N": n,
                             "ours s": warm["ours"].median, "ours CPU s": warm["ours"].cpu_median,
                             "ours MB": warm["ours"].peak_mb,
                             "baseline": base, "baseline s": warm[base].median,
                             "baseline CPU s": warm[base].cpu_median,
                             "baseline MB": warm[base].peak_mb,
                             "ratio": warm[base].median / warm["ours"].median,
                             "ours cold s": cold["ours"].median,
                             "baseline cold s": cold[base_cold].median,
                             "ratio_cold": cold[base_cold].median / cold["ours"].median})
            del lon, lat
        print()
        print(scaling_table(rows, list(rows[0])))
        return

    lon, lat = make_points(args.n, args.points, args.seed)
    lines = []
    for label, frame in frames.items():
        warm, cold = run_case(label, frame, lon, lat, args.repeats,
                              with_loop=label == "states", with_sjoin=args.n <= args.sjoin_max)
        suffix = "" if label == "states" else " (hexagons)"
        lines.append(ratio_line(warm, strongest(warm), label="ratio" + suffix))
        lines.append(ratio_line(cold, strongest(cold), label="ratio_cold" + suffix))
    print()
    print("\n".join(lines[2:] + lines[:2]))


if __name__ == "__main__":
    main()
