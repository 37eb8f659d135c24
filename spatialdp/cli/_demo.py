"""``spatialdp demo``: the monitored epoch (:func:`spatialdp.demo.run_demo`)."""

from __future__ import annotations

import argparse
from typing import Any

DESCRIPTION = """\
Run a monitored private evaluation epoch on the shipped 48-state partition (or
your own polygon layer) and publish its outputs atomically into --out: per round
a stratified cohort (sqrt allocation, participation cap, merges), device-side
metrics of a simulated positioning model, one noised regional release charged
to the SQLite ledger in --out; then alerts and a drift test, a query-error audit
on real polygons, maps, a time-series dashboard and the model card. Each run is
a new ledger epoch. The fleet and the model are simulated from --seed; the
cohort selection and every published number use OS entropy. By default every
release holds for add/remove neighbours (whether and where a device took part
is protected: cohorts, floors and coverage are noised counts);
--neighbours replace protects only each device's values and publishes
participation exactly."""


def add_parser(sub: Any) -> None:
    """Add the ``demo`` subcommand."""
    demo = sub.add_parser("demo", help="run a monitored private evaluation epoch end to end",
                          description=DESCRIPTION,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    demo.add_argument("--out", default="spatialdp-demo", metavar="DIR",
                      help="output folder (default: spatialdp-demo); holds the ledger")
    demo.add_argument("--partition", metavar="FILE",
                      help="report regions: any polygon layer (GeoPackage, GeoJSON, "
                           "Shapefile); default the shipped 48 states")
    demo.add_argument("--id-column", metavar="NAME",
                      help="region id column of --partition (default: the first unique one)")
    demo.add_argument("--name-column", metavar="NAME",
                      help="region name column of --partition (kept for labels and tooltips)")
    demo.add_argument("--devices", type=int, default=200_000,
                      help="simulated fleet size (default 200,000)")
    demo.add_argument("--epsilon", type=float, default=0.4,
                      help="total epsilon charged for each round's regional release, split "
                           "over its metrics (ratio 50%%, loss 37.5%%, error histogram "
                           "12.5%%), as report --epsilon is the total of its release "
                           "(default 0.4; rounds x epsilon <= 2.4 beside the coverage and "
                           "query-error releases)")
    demo.add_argument("--rounds", type=int, default=6, help="rounds in the epoch (default 6)")
    demo.add_argument("--seed", type=int, default=0,
                      help="seed of the simulation (release noise never takes a seed)")
    demo.add_argument("--neighbours", choices=("add_remove", "replace"), default="add_remove",
                      help="neighbouring relation of every release (default add_remove: "
                           "participation protected; replace: participation public)")
    demo.add_argument("--quiet", action="store_true", help="no progress bars")
    demo.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the demo and print its summary and files."""
    from spatialdp.demo import run_demo
    from spatialdp.exceptions import InvalidInput

    if args.devices < 10_000:
        raise InvalidInput(
            f"--devices {args.devices} is too small for a regional epoch over 48 states; use "
            "at least 10,000 (the documented run uses 200,000)")
    result = run_demo(args.out, partition=args.partition, id_column=args.id_column,
                      name_column=args.name_column,
                      devices=args.devices, epsilon=args.epsilon, rounds=args.rounds,
                      seed=args.seed, quiet=args.quiet, neighbours=args.neighbours)
    print(result.summary)
    print(f"wrote {len(result.files)} files into {result.out}/ (+ ledger.sqlite):")
    top = [p for p in result.files if p.parent == result.out]
    for path in top:
        print(f"  {path.name}")
    nested = len(result.files) - len(top)
    if nested:
        print(f"  reports/ ({nested} files: every round's report)")
    return 0
