"""``spatialdp ledger show``: what a privacy ledger holds, per epoch and line item."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

DESCRIPTION = """\
Print a privacy ledger (opened read-only): its settings, and per epoch the
spent, cap and remaining budget of every line item; --audit adds every charge
(who, what, why, structure). Next to a demo's ledger, each epoch is marked
complete (its run published) or interrupted (charged by a run that never
published; its charges stand)."""


def add_parser(sub: Any) -> None:
    """Add the ``ledger`` subcommand group (``ledger show``)."""
    led = sub.add_parser("ledger", help="inspect a privacy ledger",
                         description="Inspect a privacy ledger.")
    actions = led.add_subparsers(dest="action", required=True, metavar="ACTION")
    show = actions.add_parser("show", help="print a ledger's epochs and line items",
                              description=DESCRIPTION,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    show.add_argument("ledger", metavar="LEDGER.sqlite", help="the ledger file")
    show.add_argument("--epoch", type=int, action="append",
                      help="only this epoch (repeatable; default every epoch)")
    show.add_argument("--audit", action="store_true", help="also list every charge")
    show.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Print the ledger."""
    import pandas as pd

    from spatialdp._validation import fail
    from spatialdp.demo import runs_table
    from spatialdp.privacy.ledger import PrivacyLedger

    path = Path(args.ledger)
    if not path.is_file():
        raise fail("LEDGER", str(path), "does not exist", "pass the ledger's .sqlite file")
    status = runs_table(path.parent)
    complete = set(status.loc[status.status == "complete", "epoch"].astype(int))
    with PrivacyLedger(path, read_only=True) as ledger:
        epochs = ledger.epochs()
        print(f"ledger {path}: {ledger.accounting} accounting, epoch budget "
              f"{ledger.epoch_budget:g} {ledger.unit}, {len(epochs)} epoch(s)")
        wanted = epochs if not args.epoch else [e for e in epochs if e in set(args.epoch)]
        if args.epoch and not wanted:
            raise fail("--epoch", args.epoch, f"is not an epoch of the ledger ({epochs})",
                       "pass one of them")
        with pd.option_context("display.width", 160, "display.max_columns", 20,
                               "display.max_colwidth", 60):
            demo_epochs = _demo_epochs(ledger)
            for epoch in wanted:
                mark = ""
                if epoch in complete:
                    mark = " (demo run: complete)"
                elif epoch in demo_epochs:
                    mark = " (no published demo run: interrupted; its charges stand)"
                print(f"\nepoch {epoch}{mark}")
                print(ledger.summary(epoch).to_string())
                if args.audit:
                    audit = ledger.audit(epoch)
                    cols = [c for c in ("when", "line_item", "charged", "who", "what", "why",
                                        "structure_kind", "round_index") if c in audit]
                    print(audit[cols].to_string(index=False))
    return 0


def _demo_epochs(ledger: Any) -> set[int]:
    """Epochs holding charges made by ``spatialdp demo`` runs."""
    from spatialdp.demo.epoch import WHO

    audit = ledger.audit()
    if audit.empty:
        return set()
    return {int(e) for e in audit.epoch[audit.who.astype(str).str.startswith(WHO)]}
