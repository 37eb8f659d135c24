"""H3 point assignment: spatialdp's vectorised Partition.assign vs a per-point h3 loop.

Prints both times for the same 1,000,000 points (default) and ends with
``ratio: X`` where X = loop time / our time. The baseline is the plain thing an
analyst would write: ``h3.latlng_to_cell`` per point, then a dict lookup of the
cell's region position.
"""

from __future__ import annotations

import argparse
import time

import h3
import numpy as np

from spatialdp.datasets import load_us_states
from spatialdp.geo.partition import Partition


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--resolution", type=int, default=5)
    args = parser.parse_args()

    partition = Partition.from_h3_cover(load_us_states(), args.resolution, containment="overlap")
    rng = np.random.default_rng(0)
    lat = rng.uniform(25.0, 49.0, args.points)
    lon = rng.uniform(-124.0, -67.0, args.points)

    position_of = {cell: i for i, cell in enumerate(partition.region_ids)}
    start = time.perf_counter()
    baseline = np.array(
        [position_of.get(h3.latlng_to_cell(la, lo, args.resolution), -1)
         for la, lo in zip(lat.tolist(), lon.tolist(), strict=True)]
    )
    loop_s = time.perf_counter() - start

    start = time.perf_counter()
    ours = partition.assign(lon=lon, lat=lat)
    ours_s = time.perf_counter() - start

    if not np.array_equal(baseline, ours.positions):
        raise SystemExit("the two methods disagree: the benchmark is void")
    print(f"partition: {partition}")
    print(f"points: {args.points:,}  unassigned: {ours.n_unassigned:,}")
    print(f"per-point h3 loop: {loop_s:.3f} s")
    print(f"Partition.assign:  {ours_s:.3f} s")
    print(f"ratio: {loop_s / ours_s:.2f}")


if __name__ == "__main__":
    main()
