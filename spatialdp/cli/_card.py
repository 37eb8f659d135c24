"""``spatialdp card``: write the model card of a run folder."""

from __future__ import annotations

import argparse
from typing import Any

DESCRIPTION = """\
Rebuild the model card of a run from its folder alone (the layout of
spatialdp.cards.RunFolder: run.json and the artefacts it lists, e.g. the output
folder of `spatialdp demo` or of `spatialdp report`) and write model_card.md
(for people, the coverage map embedded) and model_card.json (for machines,
validated against the shipped JSON schema) into --out (default: the run
folder). A run whose ledger is kept outside its folder (`spatialdp report
--ledger`) gets its privacy section with --ledger."""


def add_parser(sub: Any) -> None:
    """Add the ``card`` subcommand."""
    card = sub.add_parser("card", help="write the model card of a run folder",
                          description=DESCRIPTION,
                          formatter_class=argparse.RawDescriptionHelpFormatter)
    card.add_argument("run_dir", metavar="RUN_DIR", help="the run folder (holds run.json)")
    card.add_argument("--out", metavar="DIR", help="where to write the card (default RUN_DIR)")
    card.add_argument("--ledger", metavar="LEDGER.sqlite",
                      help="the ledger the run was charged to, when it is not RUN_DIR's own "
                           "(opened read-only)")
    card.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Build and write the card."""
    from spatialdp.cards import ModelCard

    card = ModelCard.from_run(args.run_dir, ledger=args.ledger)
    files = card.write(args.out or args.run_dir)
    print(card.summary())
    print("wrote:")
    for path in files:
        print(f"  {path}")
    return 0
