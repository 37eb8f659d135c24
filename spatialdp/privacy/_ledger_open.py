"""Opening a :class:`~spatialdp.privacy.ledger.PrivacyLedger`: connect, then resume.

:func:`connect` returns a connection to a checked file (creating a new ledger
atomically when the path does not exist); :func:`resume` reads and checks what
the file stores and compares it with what the caller passed.
"""

from __future__ import annotations

import os
import sqlite3
import warnings
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from spatialdp.exceptions import LedgerError
from spatialdp.privacy import _ledger_caps as caps
from spatialdp.privacy import _ledger_checks as checks
from spatialdp.privacy import _ledger_files as files
from spatialdp.privacy import _ledger_schema as schema
from spatialdp.privacy.budget import BudgetSplit, BudgetSplitWarning, LineItem


@dataclass(frozen=True)
class Opened:
    """What an opened ledger works with: its stored configuration and base caps."""

    accounting: str
    epoch_budget: Decimal
    split: BudgetSplit
    base: dict[LineItem, Decimal]
    ledger_id: str


def open_ledger(path: str, timeout: float, read_only: bool, budget: Decimal | None,
                accounting: str | None, split: BudgetSplit | None
                ) -> tuple[sqlite3.Connection, Opened]:
    """Return a connection to the checked ledger at ``path`` and what it stores.

    Nothing is left open on failure; every raw error becomes a LedgerError.
    """
    conn: sqlite3.Connection | None = None
    try:
        with files.guard(path, "opening the ledger", timeout):
            conn = connect(path, timeout, read_only, budget, accounting, split)
            if not read_only:
                upgrade(conn, path, timeout)
            opened = resume(conn, path, budget, accounting, split)
            if not read_only and path != files.MEMORY:
                files.use_wal(conn)
    except BaseException:
        if conn is not None:
            conn.close()
        raise
    return conn, opened


def connect(path: str, timeout: float, read_only: bool, budget: Decimal | None,
            accounting: str | None, split: BudgetSplit | None) -> sqlite3.Connection:
    """Return a connection to the ledger at ``path``, creating it if it does not exist.

    Raises
    ------
    LedgerError
        A new ledger without ``budget``, or a path that cannot hold a ledger
        (see :func:`~spatialdp.privacy._ledger_files.check_file`), or a file
        this process may not write unless ``read_only``.
    """
    def config() -> dict[str, str]:
        if budget is None:
            raise LedgerError(
                f"ledger {path!r} is a new ledger and epoch_budget was not given; "
                "pass epoch_budget=<per-client budget per epoch> to create it")
        sp = split if split is not None else BudgetSplit()
        return {"accounting": accounting or "pure", "epoch_budget": schema.fmt(budget),
                "evaluation_share": repr(sp.evaluation_share),
                "global_share": repr(sp.global_share), "created_at": schema.now(),
                "ledger_id": schema.new_ledger_id()}

    if path == files.MEMORY:
        settings = config()
        conn = files.connect(files.MEMORY, timeout)
        try:
            schema.initialise(conn, settings)
        except BaseException:
            conn.close()
            raise
        return conn
    if not read_only and not os.path.lexists(path):
        files.create(path, config(), timeout)
    files.check_file(path)
    if not read_only and not os.access(path, os.W_OK):
        raise files.ledger_error(
            path, "is read-only for this process",
            "open it with read_only=True to read it, or give this process write access")
    return files.connect(path, timeout, read_only=read_only)


def upgrade(conn: sqlite3.Connection, path: str, timeout: float) -> None:
    """Migrate a writable ledger of an older schema version, in one transaction.

    The version is read first without a write lock (a current file is never
    locked for writing on open); an older file's settings are checked again
    under the write lock (a foreign or damaged file is refused, not altered).
    """
    with files.transaction(conn, path, "reading the ledger's schema version", timeout):
        current = checks.read_settings(conn, path).version >= schema.SCHEMA_VERSION
    if current:
        return
    with files.transaction(conn, path, "upgrading the ledger's schema", timeout,
                           "IMMEDIATE"):
        stored = checks.read_settings(conn, path)
        if stored.version < schema.SCHEMA_VERSION:
            schema.migrate(conn, stored.version)


def resume(conn: sqlite3.Connection, path: str, budget: Decimal | None,
           accounting: str | None, split: BudgetSplit | None) -> Opened:
    """Check what the file stores, compare it with the arguments, and return it.

    Raises
    ------
    LedgerError
        A stored setting or amount fails its check, or an argument differs
        from the stored value.
    """
    conn.execute("BEGIN DEFERRED")  # one snapshot: concurrent charges cannot tear the check
    try:
        return _resume(conn, path, budget, accounting, split)
    finally:
        if conn.in_transaction:
            conn.execute("ROLLBACK")  # nothing was written


def _resume(conn: sqlite3.Connection, path: str, budget: Decimal | None,
            accounting: str | None, split: BudgetSplit | None) -> Opened:
    stored = checks.read_settings(conn, path)
    with warnings.catch_warnings():  # warned when the split was first made
        warnings.simplefilter("ignore", BudgetSplitWarning)
        kept_split = BudgetSplit(stored.evaluation_share, stored.global_share)
    given: dict[str, Any] = {"epoch_budget": budget, "accounting": accounting, "split": split}
    kept: dict[str, Any] = {"epoch_budget": stored.epoch_budget,
                            "accounting": stored.accounting, "split": kept_split}
    for key, value in given.items():
        if value is not None and value != kept[key]:
            shown = str if key == "epoch_budget" else repr
            raise files.ledger_error(
                path, f"was created with {key}={shown(kept[key])}, but {key}={shown(value)} "
                "was passed", f"omit {key} to resume the stored ledger, or use a new file "
                "for a different configuration")
    base = caps.base_caps(stored.epoch_budget, stored.evaluation_share, stored.global_share)
    checks.check_contents(conn, path, base)
    return Opened(stored.accounting, stored.epoch_budget, kept_split, base, stored.ledger_id)
