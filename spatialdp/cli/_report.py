"""``spatialdp report``: a private regional report from a user's own client table."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from spatialdp._validation import fail

DESCRIPTION = """\
Publish a private regional report from your own client table: one row per
client with a client_id column, the client's location (a region_id column of
the partition, or lon/lat columns, or point geometry) and one column per
metric, the client's own value (e.g. its mean loss). Each --metric NAME:LOW:HIGH
is clipped into [LOW, HIGH] per client (what a device would do before
reporting), summed per region, noised once and published with 95% error bars
(--epsilon is the total of the release, split equally over the metrics);
regions below --min-cohort are suppressed. The release is charged to --ledger
(epoch --epoch) before any noise is drawn; --unaccounted REASON releases without
a ledger, visibly. Writes regional_report.gpkg/.parquet/.csv/.json (and a
choropleth per metric with --plot) into --out, with run.json: `spatialdp card
OUT` (with --ledger LEDGER for the privacy section) then writes its model
card, and spatialdp.read_report(OUT/regional_report.gpkg) reads it back."""

EXAMPLE = """\
example:
  spatialdp report clients.parquet --partition counties.gpkg --id-column GEOID \\
      --metric loss:0:19 --epsilon 0.5 --ledger ledger.sqlite --out report/"""


def add_parser(sub: Any) -> None:
    """Add the ``report`` subcommand."""
    rep = sub.add_parser("report", help="regional report from your own client table",
                         description=DESCRIPTION, epilog=EXAMPLE,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    rep.add_argument("clients", metavar="CLIENTS",
                     help="client table: Parquet, CSV, GeoPackage or GeoJSON")
    rep.add_argument("--partition", required=True, metavar="REGIONS",
                     help="polygon layer of the report regions (GeoPackage, GeoJSON, ...)")
    rep.add_argument("--id-column", metavar="NAME", help="region id column of REGIONS")
    rep.add_argument("--name-column", metavar="NAME",
                     help="region name column of REGIONS (kept for labels and tooltips)")
    rep.add_argument("--metric", action="append", required=True, metavar="NAME:LOW:HIGH",
                     help="a metric column and its clipping range (repeatable)")
    rep.add_argument("--epsilon", type=float, required=True,
                     help="total epsilon of the release, what the ledger is charged; split "
                          "equally over the --metric columns (as demo --epsilon is the total "
                          "of each round)")
    target = rep.add_mutually_exclusive_group(required=True)
    target.add_argument("--ledger", metavar="LEDGER.sqlite",
                        help="charge the release to this ledger (created if missing)")
    target.add_argument("--unaccounted", metavar="REASON",
                        help="release without a ledger, saying why (marked on every file)")
    rep.add_argument("--epoch", type=int, default=None,
                     help="ledger epoch (default: the ledger's last epoch, 0 when new)")
    rep.add_argument("--epoch-budget", type=float, default=None,
                     help="epoch budget of a NEW ledger (default 10); an existing ledger "
                          "keeps its own")
    rep.add_argument("--min-cohort", type=int, default=50,
                     help="publication floor: clients a region needs (default 50)")
    rep.add_argument("--alpha", type=float, default=0.05, help="error-bar level (default 0.05)")
    rep.add_argument("--why", default=None,
                     help="reason recorded in the ledger (default: 'regional report "
                          "(spatialdp report)')")
    rep.add_argument("--neighbours", choices=("replace", "add_remove"), default="replace",
                     help="neighbouring relation of the release: replace (default; each "
                          "client's values protected, cohorts published exactly) or "
                          "add_remove (participation protected too: noised cohorts)")
    rep.add_argument("--out", default="spatialdp-report", metavar="DIR",
                     help="output folder (default spatialdp-report)")
    rep.add_argument("--plot", action="store_true", help="also draw a choropleth per metric")
    rep.set_defaults(run=run)


def _specs(metrics: list[str]) -> list[Any]:
    from spatialdp.federated import MetricSpec

    specs = []
    for text in metrics:
        parts = text.split(":")
        if len(parts) != 3:
            raise fail("--metric", text, "is not NAME:LOW:HIGH",
                       "pass e.g. --metric loss:0:19")
        name, low, high = parts
        try:
            lo, hi = float(low), float(high)
        except ValueError:
            raise fail("--metric", text, "has bounds that are not numbers",
                       "pass e.g. --metric loss:0:19") from None
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise fail("--metric", text, "has bounds that are not finite",
                       "pass finite bounds, e.g. --metric loss:0:19")
        specs.append(MetricSpec(name, lo, hi))
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise fail("--metric", names, "names a metric twice", "pass each metric once")
    return specs


def client_reports(table: pd.DataFrame, partition: Any, specs: list[Any]) -> pd.DataFrame:
    """Turn a user's client table into clipped, tagged client reports (one row per client)."""
    from spatialdp.cli._common import lon_lat
    from spatialdp.federated.client_reports import spec_tag

    if "client_id" not in table.columns:
        raise fail("CLIENTS", sorted(map(str, table.columns))[:12], "has no client_id column",
                   "add a client_id column (one row per client)")
    ids = table["client_id"]
    if ids.isna().any() or not ids.is_unique:
        raise fail("CLIENTS", f"{len(table)} rows", "repeats or lacks client ids",
                   "pass one row per client (aggregate each client's examples first)")
    if "region_id" in table.columns:
        regions = table["region_id"].astype(str)
        unknown = ~regions.isin(partition.region_ids.astype(str))
        if unknown.any():
            raise fail("CLIENTS", f"{int(unknown.sum())} rows", "name regions not in the "
                       f"partition (first: {regions[unknown].iloc[0]!r})",
                       "pass the partition the region ids come from, or lon/lat columns")
    else:
        lon, lat = lon_lat(table, "CLIENTS")
        where = partition.assign(lon=lon, lat=lat).positions
        if (where < 0).all():
            raise fail("CLIENTS", f"{len(table)} rows", "lie in no region of the partition",
                       "check the coordinates (lon/lat in degrees) and the partition")
        regions = pd.Series(np.where(where >= 0, np.asarray(partition.region_ids,
                                                              dtype=object)[where], None),
                            index=table.index)
        table, regions = table[where >= 0], regions[where >= 0]
    out = pd.DataFrame(index=pd.Index(table["client_id"].to_numpy(), name="client_id"))
    for spec in specs:
        if spec.name not in table.columns:
            raise fail("--metric", spec.name, "is not a column of CLIENTS",
                       f"pick from {sorted(map(str, table.columns))[:12]}")
        values = pd.to_numeric(table[spec.name], errors="coerce").to_numpy(dtype=float)
        if not np.isfinite(values).all():
            raise fail("--metric", spec.name, "has missing or non-finite values",
                       "drop or fill those clients first")
        out[spec.name] = np.clip(values, spec.clip_low, spec.clip_high)
    out["region_id"] = regions.to_numpy()
    out["partition_version"] = partition.version
    out["device_specs"] = spec_tag(specs)
    return out


def run(args: argparse.Namespace) -> int:
    """Build and publish the report."""
    from spatialdp._validation import check_count
    from spatialdp.cli._common import check_out_folder, read_table, release_target
    from spatialdp.demo import load_partition
    from spatialdp.federated import regional_report

    specs = _specs(args.metric)
    partition = load_partition(args.partition, args.id_column, args.name_column)
    table = read_table(args.clients, "CLIENTS")
    clients = client_reports(table, partition, specs)
    min_cohort = check_count(args.min_cohort, "--min-cohort", low=1)
    out = check_out_folder(args.out)
    with release_target(args, who="spatialdp report",
                        why="regional report (spatialdp report)") as charged:
        report = regional_report(clients, partition, specs, epsilon=args.epsilon,
                                 min_cohort=min_cohort, alpha=args.alpha,
                                 target=charged.target, neighbours=args.neighbours)
    ledger_line = charged.line
    files = report.write(out)
    plots = _plots(report, out) if args.plot else {}
    files += [*plots.values(), _run_manifest(report, partition, specs, out, files, plots)]
    print(report.summary())
    print(ledger_line)
    print("wrote:")
    for path in files:
        print(f"  {path}")
    return 0


def _run_manifest(report: Any, partition: Any, specs: list[Any], out: Path,
                  files: list[Path], plots: dict[str, Path]) -> Path:
    """Write ``run.json``: the folder is then a run folder that ``spatialdp card`` reads.

    It records the partition, the specs, epsilon, alpha, the floor, the charged
    epoch and the report (its JSON sidecar) and figures; never the ledger's path.
    """
    from spatialdp.cards import RunFolder

    epoch = report.accounting.get("epoch")
    return RunFolder(out).write_manifest(
        partition=partition, specs=specs, epsilon=report.epsilon, rounds=1,
        epochs=[] if epoch is None else [int(epoch)], alpha=report.alpha,
        min_cohort=report.min_cohort, ledger=False,
        figures={f"{metric}_choropleth": path.name for metric, path in plots.items()},
        reports=[p.name for p in files if p.suffix == ".json"])


def _plots(report: Any, out: Path) -> dict[str, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from spatialdp.viz.maps import plot_uncertainty_choropleth, save_figure

    paths = {}
    label = {"unaccounted": ".UNACCOUNTED"}.get(str(report.accounting.get("accounting")), "")
    for metric in report.frames:
        fig, ax = plt.subplots(figsize=(11, 6.5))
        plot_uncertainty_choropleth(report[metric], ax=ax)
        paths[metric] = save_figure(fig, out / f"{metric}_choropleth{label}.png")
        plt.close(fig)
    return paths
