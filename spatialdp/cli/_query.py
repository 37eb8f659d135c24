"""``spatialdp query-error``: how wrong private counts are for your polygons."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Literal

import numpy as np

from spatialdp._validation import fail

DESCRIPTION = """\
Measure, by seeded simulation, the error of private device counts answered for
your polygons from a noised H3 grid: the points are counted on an H3 grid at
--grid resolution covering the polygons (each device in one cell), the grid
release is simulated --draws times at --epsilon (flat, hierarchical or both),
and the error is reported per bucket of cells covered, next to its analytic
expectation.

With --ledger (or --unaccounted) the grid is first released once, flat at
--epsilon, charged to the ledger before its noise is drawn, and the error is
measured against that released grid, used as a plug-in truth: the table and
plot are post-processing of the release and --out may write them. Without
either, the error is measured against the truth of your points: an INTERNAL
table for planning, printed labelled so, never written (--out is refused).

Points come from --points (a table with lon/lat or point geometry, optionally a
device id column) or, for US polygons, a synthetic fleet of --devices placed by
city population."""


def add_parser(sub: Any) -> None:
    """Add the ``query-error`` subcommand."""
    q = sub.add_parser("query-error", help="error of private polygon counts (simulation)",
                       description=DESCRIPTION,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="example:\n  spatialdp query-error districts.gpkg --grid 7 "
                              "--points pings.parquet --ledger ledger.sqlite --out qe/")
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
    target = q.add_mutually_exclusive_group()
    target.add_argument("--ledger", metavar="LEDGER.sqlite",
                        help="release the grid once, charged to this ledger (created if "
                             "missing), and measure against it")
    target.add_argument("--unaccounted", metavar="REASON",
                        help="release the grid without a ledger, saying why (marked on the "
                             "files and the plot), and measure against it")
    q.add_argument("--epoch", type=int, default=None,
                   help="ledger epoch (default: the ledger's last epoch, 0 when new)")
    q.add_argument("--epoch-budget", type=float, default=None,
                   help="epoch budget of a NEW ledger (default 10; an existing ledger "
                        "keeps its own)")
    q.add_argument("--why", default=None,
                   help="reason recorded in the ledger (default: query-error grid)")
    q.add_argument("--out", metavar="DIR",
                   help="also write query_error.csv, its settings query_error.json and the "
                        "sqrt(m) plot query_error.png here (needs --ledger or --unaccounted; "
                        "query_error.UNACCOUNTED.* with --unaccounted)")
    q.set_defaults(run=run)


def _check_out(args: argparse.Namespace) -> None:
    """Refuse --out for an internal measurement, before anything is read or charged."""
    if args.out is not None and args.ledger is None and args.unaccounted is None:
        raise fail("--out", args.out, "would write an INTERNAL table: without --ledger the "
                   "error is measured against the truth of your points",
                   "release the grid first: pass --ledger LEDGER.sqlite (or --unaccounted "
                   "REASON) to release it and measure against it, or drop --out")


def run(args: argparse.Namespace) -> int:
    """Measure and print the error table (and write it when it may be published)."""
    import geopandas as gpd
    import pandas as pd

    from spatialdp._validation import check_resolution
    from spatialdp.cli._common import check_out_folder, lon_lat, read_table, release_target
    from spatialdp.geo import Partition
    from spatialdp.geo.lonlat import to_lonlat
    from spatialdp.queries import measure_query_error, query_corpus, release_flat, truth_grid
    from spatialdp.queries.measure import check_measure_settings

    _check_out(args)
    if args.out is not None:
        check_out_folder(args.out)
    res = check_resolution(args.grid, "--grid")
    released = args.ledger is not None or args.unaccounted is not None
    polygons = read_table(args.polygons, "POLYGONS")
    if not isinstance(polygons, gpd.GeoDataFrame) or polygons.crs is None:
        raise fail("POLYGONS", args.polygons, "is not a polygon layer with a CRS",
                   "pass a GeoPackage, GeoJSON or Shapefile of polygons")
    polygons = to_lonlat(polygons, "POLYGONS")  # the API's reprojection, with its warning
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
        # An exact count of the points is shown only beside an internal table.
        source = (f"points from {args.points}" if released else
                  f"{int(inside.sum()):,} of {len(points):,} points on the grid")
    else:
        from spatialdp.datasets import synthetic_fleet

        fleet = synthetic_fleet(args.devices, rng=args.seed, partition=grid)
        lon, lat, ids = (fleet.lon.to_numpy(), fleet.lat.to_numpy(),
                         fleet.device_id.to_numpy())
        source = f"{args.devices:,} synthetic devices (seed {args.seed})"
    truth = truth_grid(grid, lon=lon, lat=lat, device_ids=ids, max_cells_per_device=1)
    keep = grid.polygons_to_cells(polygons).cells_per_query > 0
    if not keep.any():
        raise fail("--grid", res, "is too coarse: no polygon holds a cell centre",
                   "pass a finer resolution")
    corpus = query_corpus(grid, polygons[keep])
    methods: list[Literal["flat", "hierarchical"]] = (
        ["flat", "hierarchical"] if args.method == "both" else [args.method])
    settings = {("flat (clamped)" if method == "flat" else
                 f"hierarchical ({args.levels} levels)"):
                {"method": method, "epsilon": args.epsilon, "draws": args.draws,
                 **({} if method == "flat" else {"levels": args.levels,
                                                  "clamp_negative": False})}
                for method in methods}
    for setting in settings.values():  # refused here, before the grid is charged
        check_measure_settings(truth, corpus, **setting)
    reference: Any = truth
    where = ("INTERNAL: measured against the truth of your points, never publish "
             "(--ledger releases a grid to measure against)")
    if released:
        with release_target(args, who="spatialdp query-error",
                            why="query-error grid (spatialdp query-error)") as charged:
            reference = release_flat(truth, epsilon=args.epsilon, target=charged.target)
        where = charged.line
        del truth  # from here on only the released grid
    rng = np.random.default_rng(args.seed)
    reports = {label: measure_query_error(reference, corpus, rng=rng, **setting)
               for label, setting in settings.items()}
    cols = ["bucket", "n_queries", "mean_cells", "rms", "expected_rms", "mean_abs_error",
            "p95_abs_error", "mean_rel_error"]
    table = pd.concat([r[[c for c in cols if c in r]].assign(method=k)
                       for k, r in reports.items()], ignore_index=True)
    print(f"{next(iter(reports.values())).attrs['title']}\n"
          f"query error ({args.draws} simulated draws, epsilon {args.epsilon:g}): "
          f"{int(keep.sum())} polygons ({int((~keep).sum())} hold no cell centre), "
          f"{grid.n_regions:,} H3 r{res} cells, {source}\n  grid: {where}")
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(table.round(3).to_string(index=False))
    if args.out is not None:
        _write(Path(args.out), table, reports)
    return 0


def _write(out: Path, table: Any, reports: dict[str, Any]) -> None:
    """Write the table, its settings and the plot; refuse internal reports (nothing written).

    An unaccounted grid's files are named ``query_error.UNACCOUNTED.*``.
    """
    import json

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from spatialdp.queries import require_publishable
    from spatialdp.queries.figures import flat_cell_sd, plot_error_vs_cells
    from spatialdp.viz.maps import save_figure

    settings = {label: require_publishable(report, f"query-error table {label!r}")
                for label, report in reports.items()}
    unaccounted = any(s.get("reference_accounting") == "unaccounted"
                      for s in settings.values())
    stem = "query_error.UNACCOUNTED" if unaccounted else "query_error"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise fail("--out", str(out), f"cannot be created ({err.strerror})",
                   "pass a writable folder") from err
    table.to_csv(out / f"{stem}.csv", index=False)
    (out / f"{stem}.json").write_text(json.dumps(settings, indent=2, default=str) + "\n",
                                      encoding="utf-8")
    fig, ax = plt.subplots(figsize=(7.5, 5.2))
    plot_error_vs_cells(reports, ax=ax, publishable=True, cell_sd=flat_cell_sd(reports))
    path = save_figure(fig, out / f"{stem}.png")
    plt.close(fig)
    print(f"wrote:\n  {out / f'{stem}.csv'}\n  {out / f'{stem}.json'}\n  {path}")
