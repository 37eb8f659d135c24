"""SQLite schema, versioning and exact arithmetic for :mod:`spatialdp.privacy.ledger`.

Amounts are stored as decimal strings, not REAL: ``Decimal(repr(x))`` keeps the
value the caller wrote (``0.1`` is 0.1, not 0.1000000000000000055...), so ten
charges of 0.1 exactly fill a cap of 1.0 and no float drift lets a charge slip
past a cap. Charges are rounded up and caps down, so rounding never overspends.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import UTC, datetime
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from functools import cache

SCHEMA_VERSION = 2
APPLICATION = "spatialdp.PrivacyLedger"

#: Columns each schema version added, and what a file of an older version reads in
#: their place. Version 2 records each charge's neighbouring relation; charges of a
#: version-1 file were all replace-one (the only relation version 1 knew).
ADDED_COLUMNS = {2: {"charges": {"neighbours": "'replace'"}}}

#: Rounding for amounts that are charged (up) and for caps (down).
UP = Context(prec=40, rounding=ROUND_CEILING)
DOWN = Context(prec=40, rounding=ROUND_FLOOR)

#: Settings every ledger stores in its ``meta`` table.
SETTINGS = (
    "application",
    "schema_version",
    "accounting",
    "epoch_budget",
    "evaluation_share",
    "global_share",
)

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
    recorded_at          TEXT    NOT NULL,
    neighbours           TEXT    NOT NULL DEFAULT 'replace'
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


@cache
def table_columns() -> dict[str, tuple[str, ...]]:
    """Return the columns of every ledger table, read from :data:`DDL` itself.

    Examples
    --------
    >>> table_columns()["spend"]
    ('epoch', 'line_item', 'spent', 'n_charges')
    """
    with closing(sqlite3.connect(":memory:")) as conn:
        conn.executescript(DDL)
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
            "ORDER BY rowid")]
        return {t: tuple(r[1] for r in conn.execute(f"PRAGMA table_info({t})")) for t in tables}


def columns_of_version(version: int) -> dict[str, tuple[str, ...]]:
    """Return the columns a file of schema ``version`` has, table by table.

    Examples
    --------
    >>> [("neighbours" in columns_of_version(v)["charges"]) for v in (1, 2)]
    [False, True]
    """
    later = {col for v, tables in ADDED_COLUMNS.items() if v > version
             for cols in tables.values() for col in cols}
    return {t: tuple(c for c in cols if c not in later) for t, cols in table_columns().items()}


def column_or_default(conn: sqlite3.Connection, table: str, column: str) -> str:
    """Return ``column`` as an SQL expression: itself, or its default in an older file.

    An older file, opened read-only, lacks the columns later versions added
    (:data:`ADDED_COLUMNS`); it reads as if it had them with their defaults.

    Examples
    --------
    >>> conn = sqlite3.connect(":memory:")
    >>> _ = conn.execute("CREATE TABLE charges (seq INTEGER)")
    >>> column_or_default(conn, "charges", "neighbours")
    "'replace' AS neighbours"
    """
    present = {str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")}
    if column in present:
        return column
    default = next(cols[column] for tables in ADDED_COLUMNS.values()
                   for name, cols in tables.items() if name == table and column in cols)
    return f"{default} AS {column}"


def ledger_id_from(created_at: str) -> str:
    """Return the identifier of a ledger created at ``created_at`` (version-1 files).

    A version-2 file stores a random identifier; a version-1 file gets one
    derived from its creation time, so the identifier of a file never changes.

    Examples
    --------
    >>> ledger_id_from("2026-01-01T00:00:00.000000+00:00")
    'ledger-96f0af0766c9cd51'
    """
    import hashlib

    return "ledger-" + hashlib.sha256(created_at.encode("utf-8")).hexdigest()[:16]


def new_ledger_id() -> str:
    """Return a random ledger identifier (``ledger-`` and 16 hex digits)."""
    import secrets

    return "ledger-" + secrets.token_hex(8)


def migrate(conn: sqlite3.Connection, version: int) -> None:
    """Bring a writable file of an older schema to :data:`SCHEMA_VERSION` (inside a transaction).

    Adds the later versions' columns with their defaults, and the ledger
    identifier (derived from the creation time, as a reader of the old file sees it).
    """
    for v in range(version + 1, SCHEMA_VERSION + 1):
        for table, cols in ADDED_COLUMNS.get(v, {}).items():
            for col, default in cols.items():
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {col} TEXT NOT NULL "
                             f"DEFAULT {default}")
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    if "ledger_id" not in meta:
        conn.execute("INSERT INTO meta (key, value) VALUES ('ledger_id', ?)",
                     (ledger_id_from(str(meta.get("created_at", ""))),))
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                 (str(SCHEMA_VERSION),))


def dec(x: float | str | Decimal) -> Decimal:
    """Return the decimal the caller wrote: ``dec(0.1) == Decimal('0.1')``.

    Examples
    --------
    >>> dec(0.1)
    Decimal('0.1')
    """
    if isinstance(x, Decimal):
        return x
    if isinstance(x, str):
        return Decimal(x)
    return Decimal(repr(float(x)))


def fmt(x: Decimal) -> str:
    """Return exact, round-trippable text for storage."""
    return str(x)


def initialise(conn: sqlite3.Connection, config: dict[str, str]) -> None:
    """Create the schema in an empty database and store ``config`` in ``meta``.

    Parameters
    ----------
    conn : sqlite3.Connection
        Connection in autocommit mode to a database nobody else can see yet
        (a temporary file, or ``":memory:"``).
    config : dict of str to str
        The settings to store besides ``application`` and ``schema_version``.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        for stmt in DDL.split(";"):
            if stmt.strip():
                conn.execute(stmt)
        rows = {"application": APPLICATION, "schema_version": str(SCHEMA_VERSION), **config}
        conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", sorted(rows.items()))
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def now() -> str:
    """Return the UTC time, ISO 8601 with microseconds."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


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
