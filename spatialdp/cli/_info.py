"""``spatialdp info``: the shipped partition and data."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    """Add the ``info`` subcommand."""
    info = sub.add_parser("info", help="load the shipped partition and print its summary",
                          description="Load the shipped 48-state partition and the city "
                                      "table, and print their summary.")
    info.set_defaults(run=run)


def run(_: argparse.Namespace) -> int:
    """Print the shipped partition's summary."""
    from spatialdp.datasets import load_us_cities, us_states_partition

    partition = us_states_partition()
    print(partition.summary())
    adjacency = partition.adjacency()
    cities = load_us_cities()
    print(f"  neighbour pairs {int(adjacency.sum()) // 2} (shared borders)")
    print(f"  cities          {len(cities):,} with 15,000+ inhabitants, "
          f"{int(cities.population.sum()):,} people")
    return 0
