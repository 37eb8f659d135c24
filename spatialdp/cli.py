"""The ``spatialdp`` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

__all__ = ["main"]


def _info(_: argparse.Namespace) -> int:
    from spatialdp.datasets import load_us_cities, us_states_partition

    partition = us_states_partition()
    print(partition.summary())
    adjacency = partition.adjacency()
    cities = load_us_cities()
    print(f"  neighbour pairs {int(adjacency.sum()) // 2} (shared borders)")
    print(f"  cities          {len(cities):,} with 15,000+ inhabitants, "
          f"{int(cities.population.sum()):,} people")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from spatialdp.demo import run_demo
    from spatialdp.exceptions import InvalidInput

    if args.devices < 1_000:
        raise InvalidInput(
            f"--devices {args.devices} is too small for a regional round over 48 states; "
            "use at least 1,000 (the documented run uses 200,000)"
        )
    result = run_demo(args.out, devices=args.devices, seed=args.seed)
    print(result.ledger_summary)
    print("wrote:")
    for path in result.files:
        print(f"  {path}")
    print(f"done in {result.seconds:.1f} s")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``spatialdp`` command."""
    parser = argparse.ArgumentParser(
        prog="spatialdp",
        description="Differential privacy for federated spatial models.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="load the shipped partition and print its summary")
    info.set_defaults(run=_info)
    demo = sub.add_parser(
        "demo",
        help="run one private regional evaluation round on the shipped 48-state partition",
    )
    demo.add_argument("--out", default="spatialdp-demo", help="output folder")
    demo.add_argument("--devices", type=int, default=200_000, help="synthetic fleet size")
    demo.add_argument("--seed", type=int, default=0,
                      help="seed of the simulation (release noise never takes a seed)")
    demo.set_defaults(run=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``spatialdp`` console script.

    A refusal (a :class:`~spatialdp.exceptions.SpatialDPError`) is printed as one
    line on stderr with exit status 2, not as a traceback.
    """
    from spatialdp.exceptions import SpatialDPError

    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except SpatialDPError as err:
        print(f"spatialdp: {type(err).__name__}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
