"""Points -> H3 partition: Partition.assign vs h3ronpy used directly.

The partition is the H3 cover of the 48 states (``--resolution``, default 5:
about 31,000 cells, containment "overlap"). Points (``--points``): ``uniform``
(default) over the states' bounding box, or ``fleet`` (``synthetic_fleet``).

Timing follows the convention of ``benchmarks/_common.py`` (median of
``--repeats`` interleaved runs with min and max, wall and CPU; answers asserted
equal before timing; peak memory from one separate run of each).

- ``ratio:`` (steady state, one warm-up call each). Ours: ``Partition.assign(lon=,
  lat=)`` with whatever its own policy built by then: a direct-address table of
  its cells (``_h3grid.H3CellTable``) behind h3ronpy at first; the face-lattice
  table of ``spatialdp.geo._h3lattice`` once the partition has seen
  ``_h3lattice.MIN_POINTS_PER_CELL`` points per cell (the first call builds it
  when its batch has ``_h3lattice.FIRST_BATCH_PER_CELL`` points per cell; at 10^4
  points a call on 30,772 cells, during the second timed run, whose time is then
  ours' printed maximum, and the median is the table's); the
  pure-pixel raster of ``spatialdp.geo._h3grid`` once it has seen
  ``_h3grid.MIN_POINTS`` points. Baselines:

  - h3ronpy+searchsorted: ``h3ronpy.vector.coordinates_to_cells`` -> numpy, then
    ``np.searchsorted`` into the sorted cell ids and an equality check;
  - h3ronpy+get_indexer: the same cells looked up with ``pandas.Index.get_indexer``
    (its hash table built before timing).

- ``ratio_lattice:`` ours with the lattice table forced
  (``partition._lattice_table(force=True)``, as after ``MIN_POINTS_PER_CELL``): the
  steady state of a partition used a few times, without the raster's 32 MB.
- ``ratio_raster:`` ours with the raster forced (``partition._grid_index()``, as
  after ``MIN_POINTS`` points) against the same baselines: the steady state of a
  long-lived partition. Its one-off build time is printed on its own line.
- ``ratio_cold:`` the first call, one-off builds inside: ours on a fresh partition
  (built untimed from the same cells: the partition is the data a user loads),
  with the per-process cache of H3's face lattices cleared;
  the baselines sort the cell ids / build the hash table inside.
- ``ratio_first_calls:`` the total of the first ``--calls`` calls (default 10) on a
  fresh partition, every build inside, whenever its policy makes it: the cost
  model's amortisation made visible (at 10^4 points a call the lattice table is
  built inside one of them). The baselines build their sorted array / hash table
  once, in the first call, and reuse it.
- per-point loop (``--loop-n`` points, scaled to N): ``h3.latlng_to_cell`` and a
  dict; printed for reference, never a ratio.

``--scaling`` prints a Markdown table over ``--sizes`` (default 10^4 .. 10^7).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import h3
import numpy as np
import pandas as pd
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
from h3ronpy import vector as h3vector

from spatialdp.datasets import load_us_states, synthetic_fleet
from spatialdp.geo import _h3grid, _h3lattice
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
    own = np.sort(np.asarray(partition.cells))
    index = pd.Index(own)
    index.get_indexer(own[:1])  # build the hash table outside the timing
    return {
        "ours": lambda: partition.assign(lon=lon, lat=lat).positions,
        "h3ronpy+searchsorted": lambda: searchsorted_positions(own, lon, lat, resolution),
        "h3ronpy+get_indexer": lambda: index.get_indexer(h3ronpy_cells(lon, lat, resolution)),
    }


def cold_contenders(cells: np.ndarray, resolution: int, lon: np.ndarray, lat: np.ndarray
                    ) -> dict[str, Contender]:
    def get_indexer(own: np.ndarray) -> np.ndarray:
        return pd.Index(own).get_indexer(h3ronpy_cells(lon, lat, resolution))

    def searchsorted(own: np.ndarray) -> np.ndarray:
        return searchsorted_positions(np.sort(own), lon, lat, resolution)

    def fresh_partition() -> Partition:
        _h3lattice.face_lattices.cache_clear()  # H3's face lattices, read once per process
        return Partition.from_h3_cells(cells.copy())

    return {
        "ours": (fresh_partition, lambda part: part.assign(lon=lon, lat=lat).positions),
        "h3ronpy+searchsorted": (cells.copy, searchsorted),
        "h3ronpy+get_indexer": (cells.copy, get_indexer),
    }


def first_calls_contenders(cells: np.ndarray, resolution: int, lon: np.ndarray,
                           lat: np.ndarray, calls: int) -> dict[str, Contender]:
    """The first ``calls`` calls on fresh state, each side building what it builds once."""
    def ours(part: Partition) -> np.ndarray:
        for _ in range(calls):
            positions = part.assign(lon=lon, lat=lat).positions
        return positions

    def get_indexer(own: np.ndarray) -> np.ndarray:
        index = pd.Index(own)
        for _ in range(calls):
            positions = index.get_indexer(h3ronpy_cells(lon, lat, resolution))
        return positions

    def searchsorted(own: np.ndarray) -> np.ndarray:
        ordered = np.sort(own)
        for _ in range(calls):
            positions = searchsorted_positions(ordered, lon, lat, resolution)
        return positions

    fresh = cold_contenders(cells, resolution, lon, lat)["ours"]
    assert isinstance(fresh, tuple)
    return {"ours": (fresh[0], ours), "h3ronpy+searchsorted": (cells.copy, searchsorted),
            "h3ronpy+get_indexer": (cells.copy, get_indexer)}


def build_seconds(cells: np.ndarray) -> tuple[float, float]:
    """Time the one-off build of the raster on a fresh partition; return (s, raster MB)."""
    fresh = Partition.from_h3_cells(cells.copy())
    start = time.perf_counter()
    grid = fresh._grid_index()
    seconds = time.perf_counter() - start
    return seconds, (grid.nbytes if grid is not None else 0) / 2**20


def lattice_build_seconds(cells: np.ndarray, lon: np.ndarray, lat: np.ndarray
                          ) -> tuple[float, float, float]:
    """Time the one-off build of the lattice table on a fresh partition.

    Returns (s, table MB, share of the points it answers without H3).
    """
    fresh = Partition.from_h3_cells(cells.copy())
    start = time.perf_counter()
    table = fresh._lattice_table(force=True)
    seconds = time.perf_counter() - start
    if table is None:
        return seconds, 0.0, 0.0
    known = float(np.mean(table.lookup(lon, lat) != _h3lattice.ASK_H3))
    return seconds, table.labels.nbytes / 2**20, known


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
        ) -> dict[str, dict[str, Timing]]:
    cells = np.asarray(partition.cells)
    resolution = int(partition.resolution or 0)
    fresh = Partition.from_h3_cells(cells.copy())
    out = {"ratio": compare(contenders(fresh, lon, lat), repeats=repeats)}
    print_results(out["ratio"], "steady state (one warm-up call each):")
    lattice = Partition.from_h3_cells(cells.copy())
    lattice._lattice_table(force=True)
    out["ratio_lattice"] = compare(contenders(lattice, lon, lat), repeats=repeats)
    print_results(out["ratio_lattice"], "ours with its lattice table built:")
    forced = Partition.from_h3_cells(cells.copy())
    forced._grid_index()
    out["ratio_raster"] = compare(contenders(forced, lon, lat), repeats=repeats)
    print_results(out["ratio_raster"], "ours with its raster built (a long-lived partition):")
    out["ratio_cold"] = compare(cold_contenders(cells, resolution, lon, lat), repeats=repeats,
                                warmup=0)
    print_results(out["ratio_cold"], "first call, one-off builds inside:")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", "--points-n", type=int, default=1_000_000, dest="n")
    parser.add_argument("--points", choices=("uniform", "fleet"), default="uniform")
    parser.add_argument("--resolution", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--loop-n", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=10,
                        help="calls timed together for ratio_first_calls (0: skip it)")
    parser.add_argument("--scaling", action="store_true")
    parser.add_argument("--sizes", type=int, nargs="+",
                        default=[10_000, 100_000, 1_000_000, 10_000_000])
    args = parser.parse_args()

    partition = Partition.from_h3_cover(load_us_states(), args.resolution, containment="overlap")
    print(f"partition: {partition}")
    print(f"points: {args.points}; {machine_line()}")

    if args.scaling:
        rows = []
        for n in args.sizes:
            print(f"\nN = {n:,}")
            lon, lat = make_points(n, args.points, args.seed)
            res = run(partition, lon, lat, args.repeats if n < 10**7 else 3)
            row: dict[str, object] = {"N": n}
            for key, results in res.items():
                base = fastest(results)
                row[f"{key} ours s"] = results["ours"].median
                row[f"{key} baseline s"] = results[base].median
                row[key] = results[base].median / results["ours"].median
            row["ours MB"] = res["ratio"]["ours"].peak_mb
            row["baseline MB"] = res["ratio"][fastest(res["ratio"])].peak_mb
            rows.append(row)
            del lon, lat
        print(scaling_table(rows, list(rows[0])))
        return

    lon, lat = make_points(args.n, args.points, args.seed)
    res = run(partition, lon, lat, args.repeats)
    if args.calls:
        res["ratio_first_calls"] = compare(
            first_calls_contenders(np.asarray(partition.cells), int(partition.resolution or 0),
                                   lon, lat, args.calls),
            repeats=max(3, args.repeats // 2), warmup=0, memory=False)
        print_results(res["ratio_first_calls"], f"the first {args.calls} calls on a fresh "
                      "partition, every build inside (their total):")
    seconds, megabytes, known = lattice_build_seconds(np.asarray(partition.cells), lon, lat)
    per_cell = _h3lattice.MIN_POINTS_PER_CELL
    print(f"  one-off lattice table build (per partition, after {per_cell} "
          f"point{'' if per_cell == 1 else 's'} per cell): {seconds:.3f} s, "
          f"kept: {megabytes:.1f} MB; it answers {known:.2%} of the points without H3")
    seconds, megabytes = build_seconds(np.asarray(partition.cells))
    print(f"  one-off raster build (per partition, after {_h3grid.MIN_POINTS:,} points): "
          f"{seconds:.2f} s, kept: {megabytes:.0f} MB")
    m = min(args.loop_n, args.n)
    if m:
        loop_s = loop_seconds(partition, lon[:m], lat[:m]) * args.n / m
        print(f"  per-point h3 loop     {loop_s:8.3f} s   (measured on {m:,} points, scaled; "
              f"loop / ours = {loop_s / res['ratio']['ours'].median:.1f})")
    for key, results in res.items():
        print(ratio_line(results, fastest(results), label=key))


if __name__ == "__main__":
    main()
