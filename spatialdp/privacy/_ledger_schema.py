"""SQLite schema, versioning and exact arithmetic for :mod:`spatialdp.privacy.ledger`.

Amounts are stored as decimal strings, not REAL: ``Decimal(repr(x))`` keeps the
value the caller wrote (``0.1`` is 0.1, not 0.1000000000000000055...), so ten
charges of 0.1 exactly fill a cap of 1.0 and no float drift lets a charge slip
past a cap. Charges are rounded up and caps down, so rounding never overspends.
"""

from __future__ import annotations

import math
import sqlite3
from datetime import UTC, datetime
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal

from spatialdp.exceptions import InvalidInput, LedgerError

SCHEMA_VERSION = 1
APPLICATION = "spatialdp.PrivacyLedger"

#: Rounding for amounts that are charged (up) and for caps (down).
UP = Context(prec=40, rounding=ROUND_CEILING)
DOWN = Context(prec=40, rounding=ROUND_FLOOR)

DDL = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS spend (
    epoch     INTEGER NOT NULL,
    line_item TEXT    NOT NULL,
    spent     TEXT    NOT NULL,
    n_charges INTEGER NOT NULL,
    PRIMARY KEY (epoch, line_item)
);
CREATE TABLE IF NOT EXISTS charges (
    seq                  INTEGER PRIMARY KEY AUTOINCREMENT,
    release_id           TEXT    NOT NULL UNIQUE,
    epoch                INTEGER NOT NULL,
    line_item            TEXT    NOT NULL,
    charged              TEXT    NOT NULL,
    loss                 TEXT    NOT NULL,
    loss_unit            TEXT    NOT NULL,
    structure_kind       TEXT    NOT NULL,
    structure_name       TEXT    NOT NULL,
    parts                INTEGER NOT NULL,
    max_parts_per_client INTEGER NOT NULL,
    multiplier           INTEGER NOT NULL,
    structure            TEXT    NOT NULL,
    who                  TEXT    NOT NULL,
    what                 TEXT    NOT NULL,
    why                  TEXT    NOT NULL,
    round                INTEGER,
    recorded_at          TEXT    NOT NULL
);
CREATE INDEX IF NOT EXISTS charges_epoch ON charges (epoch, line_item);
CREATE TABLE IF NOT EXISTS borrows (
    epoch       INTEGER PRIMARY KEY,
    line_item   TEXT    NOT NULL,
    amount      TEXT    NOT NULL,
    approver    TEXT    NOT NULL,
    who         TEXT    NOT NULL,
    why         TEXT    NOT NULL,
    recorded_at TEXT    NOT NULL
);
"""


def dec(x: float | int | str | Decimal) -> Decimal:
    """The decimal the caller wrote: ``dec(0.1) == Decimal('0.1')``."""
    if isinstance(x, Decimal):
        return x
    if isinstance(x, str):
        return Decimal(x)
    return Decimal(repr(float(x)))


def fmt(x: Decimal) -> str:
    """Exact, round-trippable text for storage."""
    return str(x)


def connect(path: str, timeout: float) -> sqlite3.Connection:
    """Open ``path`` in autocommit mode (transactions are explicit) with a busy timeout."""
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
    if path != ":memory:" and not path.startswith("file::memory:"):
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":  # pragma: no cover - e.g. network filesystems
            conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def read_meta(conn: sqlite3.Connection) -> dict[str, str]:
    """The meta table as a dict, or ``{}`` for a fresh database."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "meta" not in tables:
        if tables - {"sqlite_sequence"}:
            raise LedgerError(
                f"the database holds tables {sorted(tables)} but no 'meta' table, so it is not "
                "a spatialdp privacy ledger; open a new file or the ledger's own file."
            )
        return {}
    return dict(conn.execute("SELECT key, value FROM meta").fetchall())


def check_version(meta: dict[str, str], path: str) -> None:
    """Refuse files written by another application or a newer schema."""
    if meta.get("application") != APPLICATION:
        raise LedgerError(
            f"{path!r} has application={meta.get('application')!r} in its meta table, "
            f"expected {APPLICATION!r}; it is not a spatialdp privacy ledger."
        )
    version = int(meta.get("schema_version", "0"))
    if version > SCHEMA_VERSION:
        raise LedgerError(
            f"{path!r} has ledger schema version {version}, newer than the {SCHEMA_VERSION} "
            "this spatialdp understands; upgrade spatialdp to read it."
        )
    if version < 1:
        raise LedgerError(
            f"{path!r} has ledger schema version {version}; versions start at 1. "
            "The file is damaged or not a ledger."
        )


def initialise(conn: sqlite3.Connection, config: dict[str, str]) -> dict[str, str]:
    """Create the schema and store ``config`` unless another process got there first.

    Returns the stored meta (which may differ from ``config`` if the file was
    created concurrently; the caller compares).
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        for stmt in DDL.split(";"):
            if stmt.strip():
                conn.execute(stmt)
        rows = {"application": APPLICATION, "schema_version": str(SCHEMA_VERSION), **config}
        conn.executemany(
            "INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", sorted(rows.items())
        )
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return meta


def now() -> str:
    """UTC time stamp, ISO 8601 with microseconds."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def check_text(label: str, value: object, example: str) -> str:
    """A non-empty audit string, stripped."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{label}={value!r} is empty; the audit trail needs it, e.g. {example}.")
    return value.strip()


def check_epoch(epoch: object) -> int:
    """An epoch number (int >= 0)."""
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise InvalidInput(f"epoch={epoch!r} is not an integer >= 0; number epochs 0, 1, 2, ...")
    return epoch


def check_positive(label: str, value: object) -> Decimal:
    """A finite loss > 0, as the decimal the caller wrote."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInput(f"{label}={value!r} is not a finite number; pass a positive loss.")
    if value <= 0:
        raise InvalidInput(f"{label}={value!r} is not > 0; a charge must be a positive loss.")
    return dec(value)


def add_to_total(conn: sqlite3.Connection, epoch: int, item: str, new_total: Decimal) -> None:
    """Set the running total of a line item (same transaction as its audit row)."""
    conn.execute(
        "INSERT INTO spend (epoch, line_item, spent, n_charges) VALUES (?, ?, ?, 1) "
        "ON CONFLICT (epoch, line_item) DO UPDATE SET spent = excluded.spent, "
        "n_charges = n_charges + 1",
        (epoch, item, fmt(new_total)),
    )


def insert_charge(conn: sqlite3.Connection, **row: object) -> None:
    """Insert one audit row into ``charges`` (columns named by keyword)."""
    cols = ", ".join(row)
    marks = ", ".join(f":{c}" for c in row)
    conn.execute(f"INSERT INTO charges ({cols}) VALUES ({marks})", row)
