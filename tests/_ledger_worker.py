"""Subprocess helper for tests/test_ledger.py (not a test module).

Usage::

    python _ledger_worker.py hammer PATH TAG N AMOUNT GOFILE
        open the ledger, create GOFILE.TAG.ready, wait for GOFILE to exist, then
        try N charges of AMOUNT on evaluation.regional in epoch 0 with release
        ids TAG-0 ... TAG-(N-1); print JSON {"ok": [ids], "refused": [ids]}.
    python _ledger_worker.py crash PATH TAG N_BEFORE HANG_AT
        commit N_BEFORE charges (ids TAG-0 ...), then start charge TAG-N_BEFORE
        with a hook on the ledger's schema function HANG_AT ("insert_charge" or
        "add_to_total"): the hook runs the real write, checks the connection is
        inside an open write transaction, prints "in-transaction TAG-N_BEFORE"
        and blocks (the parent kills this process with SIGKILL at that moment).
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import sqlite3
import sys
import time
import types
from typing import Any


def _skip_package_inits() -> None:
    """Import spatialdp's modules without running ``spatialdp/__init__`` and its privacy twin.

    Those import the whole package (geopandas, h3, ...), seconds per process on
    a loaded 2-core machine; the worker needs only the ledger's own modules,
    which are imported for real.
    """
    spec = importlib.util.find_spec("spatialdp")
    if spec is None or spec.submodule_search_locations is None:
        raise SystemExit("spatialdp is not importable")
    root = next(iter(spec.submodule_search_locations))
    for name, folder in (("spatialdp", root), ("spatialdp.privacy", os.path.join(root, "privacy"))):
        package = types.ModuleType(name)
        package.__path__ = [folder]
        sys.modules[name] = package


if __name__ == "__main__":  # never when pytest imports this file for doctests
    _skip_package_inits()

from spatialdp.exceptions import BudgetExceeded  # noqa: E402
from spatialdp.privacy import _ledger_store  # noqa: E402
from spatialdp.privacy.budget import Disjoint  # noqa: E402
from spatialdp.privacy.ledger import PrivacyLedger  # noqa: E402

STATES = Disjoint(name="partition:us48@ab12cd", parts=48)


def hammer(path: str, tag: str, n: int, amount: float, gofile: str) -> None:
    """Try ``n`` charges as fast as possible once ``gofile`` appears."""
    with PrivacyLedger(path, timeout=60.0) as ledger:
        open(f"{gofile}.{tag}.ready", "w").close()  # imports done: the test may start the race
        deadline = time.monotonic() + 60.0
        while not os.path.exists(gofile):
            if time.monotonic() > deadline:
                raise SystemExit("the go file never appeared")
            time.sleep(0.001)
        ok: list[str] = []
        refused: list[str] = []
        for i in range(n):
            rid = f"{tag}-{i}"
            try:
                ledger.spend(0, "evaluation.regional", epsilon=amount, structure=STATES,
                             who=f"worker-{tag}", what="mean loss by state",
                             why="concurrency test", release_id=rid)
                ok.append(rid)
            except BudgetExceeded:
                refused.append(rid)
            time.sleep(random.uniform(0.0, 0.002))  # let the other processes interleave
    print(json.dumps({"ok": ok, "refused": refused}), flush=True)


def crash(path: str, tag: str, n_before: int, hang_at: str) -> None:
    """Commit ``n_before`` charges, then block inside the next charge's transaction."""
    real = getattr(_ledger_store, hang_at)

    def hang(conn: sqlite3.Connection, *args: Any, **kwargs: Any) -> None:
        real(conn, *args, **kwargs)
        state = "in-transaction" if conn.in_transaction else "NOT-in-transaction"
        print(f"{state} {tag}-{n_before}", flush=True)
        time.sleep(120)  # the parent kills us here
        raise SystemExit("was not killed")

    items = ("training", "evaluation.global", "evaluation.regional")
    ledger = PrivacyLedger(path, timeout=60.0)
    for i in range(n_before + 1):
        if i == n_before:
            setattr(_ledger_store, hang_at, hang)
        ledger.spend(i % 2, items[i % 3], epsilon=0.01, structure=STATES, who=f"looper-{tag}",
                     what="loss", why="crash test", release_id=f"{tag}-{i}")
    ledger.close()


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "hammer":
        hammer(args[0], args[1], int(args[2]), float(args[3]), args[4])
    elif mode == "crash":
        crash(args[0], args[1], int(args[2]), args[3])
    else:
        raise SystemExit(f"unknown mode {mode!r}")
