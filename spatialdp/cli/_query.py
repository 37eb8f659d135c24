"""``spatialdp query-error``: how wrong private counts would be for your polygons."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Literal

import numpy as np

from spatialdp._validation import fail

DESCRIPTION = """\
Measure, by seeded simulation (nothing is released or charged), the error of
private device counts answered for your polygons from a noised H3 grid: the
points are counted on an H3 grid at --grid resolution covering the polygons
(each device in one cell), the grid release is simulated --draws times at
--epsilon (flat, hierarchical or both), and the error is reported per bucket of
cells covered, next to its analytic expectation. Points come from --points (a
table with lon/lat or point geometry, optionally a device id column) or, for
US polygons, a synthetic fleet of --devices placed by city population."""


def add_parser(sub: Any) -> None:
    """Add the ``query-error`` subcommand."""
    q = sub.add_parser("query-error", help="error of private polygon counts (simulation)",
                       description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="example:\n  spatialdp query-error districts.gpkg --grid 7 "
                              "--points pings.parquet --out qe/")
    q.add_argument("polygons", metavar="POLYGONS",
                   help="polygon layer of the queries (GeoPackage, GeoJSON, Shapefile)")
    q.add_argument("--grid", type=int, required=True, metavar="RES",
                   help="H3 resolution of the grid (0-15; about 5 km^2 cells at 7)")
    q.add_argument("--points", metavar="FILE", help="device locations (Parquet, CSV, GPKG)")
    q.add_argument("--device-column", metavar="NAME",
                   help="device id column of --points (default: one device per row)")
    q.add_argument("--devices", type=int, default=200_000,
                   help="synthetic fleet size without --points (default 200,000)")
    q.add_argument("--epsilon", type=float, default=1.0, help="grid epsilon (default 1)")
    q.add_argument("--method", choices=("flat", "hierarchical", "both"), default="both")
    q.add_argument("--levels", type=int, default=4, help="hierarchy levels (default 4)")
    q.add_argument("--draws", type=int, default=100, help="simulated releases (default 100)")
    q.add_argument("--seed", type=int, default=0, help="seed of the simulation")
    q.add_argument("--out", metavar="DIR",
                   help="also write query_error.csv and the sqrt(m) plot query_error.png here")
    q.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Measure and print the error table."""
    import geopandas as gpd
    import pandas as pd

    from spatialdp._validation import check_resolution
    from spatialdp.cli._common import lon_lat, read_table
    from spatialdp.geo import Partition
    from spatialdp.queries import measure_query_error, query_corpus, truth_grid

    res = check_resolution(args.grid, "--grid")
    polygons = read_table(args.polygons, "POLYGONS")
    if not isinstance(polygons, gpd.GeoDataFrame) or polygons.crs is None:
        raise fail("POLYGONS", args.polygons, "is not a polygon layer with a CRS",
                   "pass a GeoPackage, GeoJSON or Shapefile of polygons")
    polygons = polygons.to_crs(4326)
    if not polygons.geom_type.isin(["Polygon", "MultiPolygon"]).all():
        raise fail("POLYGONS", args.polygons, "holds geometries that are not polygons",
                   "pass a layer of (multi)polygons")
    grid = Partition.from_h3_cover(gpd.GeoDataFrame(geometry=polygons.geometry.to_numpy(),
                                                    crs=4326), res, containment="overlap",
                                   name=f"h3r{res}")
    if args.points is not None:
        points = read_table(args.points, "--points")
        lon, lat = lon_lat(points, "--points")
        if args.device_column is None:
            ids = np.arange(len(points))
        elif args.device_column in points.columns:
            ids = points[args.device_column].to_numpy()
        else:
            raise fail("--device-column", args.device_column, "is not a column of --points",
                       f"pick from {sorted(map(str, points.columns))[:12]}")
        inside = grid.assign(lon=lon, lat=lat).positions >= 0
        lon, lat, ids = lon[inside], lat[inside], ids[inside]
        source = f"{int(inside.sum()):,} of {len(points):,} points on the grid"
    else:
        from spatialdp.datasets import synthetic_fleet

        fleet = synthetic_fleet(args.devices, rng=args.seed, partition=grid)
        lon, lat, ids = (fleet.lon.to_numpy(), fleet.lat.to_numpy(),
                         fleet.device_id.to_numpy())
        source = f"{len(fleet):,} synthetic devices (seed {args.seed})"
    truth = truth_grid(grid, lon=lon, lat=lat, device_ids=ids, max_cells_per_device=1)
    keep = grid.polygons_to_cells(polygons).cells_per_query > 0
    if not keep.any():
        raise fail("--grid", res, "is too coarse: no polygon holds a cell centre",
                   "pass a finer resolution")
    corpus = query_corpus(grid, polygons[keep])
    methods: list[Literal["flat", "hierarchical"]] = (
        ["flat", "hierarchical"] if args.method == "both" else [args.method])
    rng = np.random.default_rng(args.seed)
    reports = {}
    for method in methods:
        label = "flat (clamped)" if method == "flat" else f"hierarchical ({args.levels} levels)"
        extra = {} if method == "flat" else {"levels": args.levels, "clamp_negative": False}
        reports[label] = measure_query_error(truth, corpus, epsilon=args.epsilon,
                                             method=method, draws=args.draws, rng=rng, **extra)
    cols = ["bucket", "n_queries", "mean_cells", "rms", "expected_rms", "mean_abs_error",
            "p95_abs_error", "mean_rel_error"]
    table = pd.concat([r[[c for c in cols if c in r]].assign(method=k)
                       for k, r in reports.items()], ignore_index=True)
    print(f"query error (simulation, {args.draws} draws, epsilon {args.epsilon:g}): "
          f"{int(keep.sum())} polygons ({int((~keep).sum())} hold no cell centre), "
          f"{grid.n_regions:,} H3 r{res} cells, {source}")
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(table.round(3).to_string(index=False))
    if args.out is not None:
        _write(Path(args.out), table, reports, args.epsilon)
    return 0


def _write(out: Path, table: Any, reports: dict[str, Any], epsilon: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from spatialdp.privacy.accuracy import noise_std
    from spatialdp.queries.figures import plot_error_vs_cells
    from spatialdp.viz.maps import save_figure

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise fail("--out", str(out), f"cannot be created ({err.strerror})",
                   "pass a writable folder") from err
    table.to_csv(out / "query_error.csv", index=False)
    fig, ax = plt.subplots(figsize=(7.5, 5.2))
    plot_error_vs_cells(reports, ax=ax, cell_sd=float(noise_std("discrete_laplace",
                                                                1.0 / epsilon)))
    path = save_figure(fig, out / "query_error.png")
    plt.close(fig)
    print(f"wrote:\n  {out / 'query_error.csv'}\n  {path}")
