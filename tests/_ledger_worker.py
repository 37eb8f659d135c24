"""Subprocess helper for tests/test_ledger.py (not a test module).

Usage::

    python _ledger_worker.py hammer PATH TAG N AMOUNT GOFILE
        wait for GOFILE to exist, then try N charges of AMOUNT on
        evaluation.regional in epoch 0; print JSON {"ok": .., "refused": ..}.
    python _ledger_worker.py loop PATH TAG AMOUNT
        charge AMOUNT forever, cycling over line items; print "ready" after
        the first charge (the parent kills this process with SIGKILL).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

from spatialdp.exceptions import BudgetExceeded
from spatialdp.privacy.budget import Disjoint
from spatialdp.privacy.ledger import PrivacyLedger

STATES = Disjoint(name="partition:us48@ab12cd", parts=48)


def hammer(path: str, tag: str, n: int, amount: float, gofile: str) -> None:
    """Try ``n`` charges as fast as possible once ``gofile`` appears."""
    ledger = PrivacyLedger(path, timeout=60.0)
    open(f"{gofile}.{tag}.ready", "w").close()  # imports done: the test may start the race
    deadline = time.monotonic() + 60.0
    while not os.path.exists(gofile) and time.monotonic() < deadline:
        time.sleep(0.001)
    ok = refused = 0
    for i in range(n):
        try:
            ledger.spend(
                0,
                "evaluation.regional",
                epsilon=amount,
                structure=STATES,
                who=f"worker-{tag}",
                what="mean loss by state",
                why="concurrency test",
                release_id=f"{tag}-{i}",
            )
            ok += 1
        except BudgetExceeded:
            refused += 1
        time.sleep(random.uniform(0.0, 0.002))  # let the other processes interleave
    ledger.close()
    print(json.dumps({"ok": ok, "refused": refused}), flush=True)


def loop(path: str, tag: str, amount: float) -> None:
    """Charge forever (until killed), cycling epochs and line items."""
    ledger = PrivacyLedger(path, timeout=60.0)
    items = ("training", "evaluation.global", "evaluation.regional")
    i = 0
    while True:
        ledger.spend(
            i % 3,
            items[i % 3],
            epsilon=amount,
            structure=STATES,
            who=f"looper-{tag}",
            what="loss",
            why="crash test",
            release_id=f"{tag}-{i}",
        )
        if i == 0:
            print("ready", flush=True)
        i += 1


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "hammer":
        hammer(args[0], args[1], int(args[2]), float(args[3]), args[4])
    elif mode == "loop":
        loop(args[0], args[1], float(args[2]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
