"""The ledger's SQLite file: schema, opening, the checks of what it stores, caps and borrows.

Everything :class:`~spatialdp.privacy.ledger.PrivacyLedger` keeps on disk goes
through this module; the class itself holds no SQL beyond what it reads for its
reports.

Exact amounts
-------------
Amounts are stored as decimal strings, not REAL: ``Decimal(repr(x))`` keeps the
value the caller wrote (``0.1`` is 0.1, not 0.1000000000000000055...), so ten
charges of 0.1 exactly fill a cap of 1.0 and no float drift lets a charge slip
past a cap. Charges are rounded up and caps down, so rounding never overspends.

The file
--------
Every failure a user can cause (a wrong path, a damaged or foreign file, a lock
held by another process, a read-only file) reaches them as a
:class:`~spatialdp.exceptions.LedgerError` of one shape::

    ledger {path!r} {what is wrong}; {how to fix it}

with the original exception chained (``raise ... from err``).

Opening never writes to a file that is not a ledger: the file is recognised
from its first bytes before SQLite touches it, and read by SQLite before the
ledger switches it to WAL mode. A new ledger is built in a temporary file and
hard-linked into place, so a ledger path either does not exist or holds a
complete ledger; an *existing* file that is empty or has no ledger tables is
refused rather than started afresh (it may be a ledger whose content was lost,
and starting afresh would forget the budget already spent). On open
(:func:`open_ledger`) a file of an older schema is upgraded, and what it
stores is compared with what the caller passed.

A file is never trusted: on open, every stored setting is checked with the
rules that applied when it was written (epoch budget finite, positive and at
most ``MAX_EPSILON``; shares in [0, 1]; a known accounting kind and schema
version), and so is every stored amount (finite and non-negative, line-item
totals equal to the sum of their charges, spent within cap, borrows within the
rule below). A failure is a :class:`~spatialdp.exceptions.LedgerError` naming
the file, the setting or row, the stored value and the fix. The scan is linear
in the number of charges.

The borrowing rule
------------------
Evaluation may move part of the next epoch's allowance into the current
epoch, with a named approver. To keep that from compounding:

* an epoch borrows at most once (one line item, one approved amount);
* an epoch that lent budget (its predecessor borrowed from it) cannot borrow;
* an epoch that borrowed cannot lend (its predecessor cannot borrow from it);
* the amount is at most what the lending epoch has left on that line item.

So there are no chains: every epoch is a borrower, a lender or neither. A
lender's cap is its base cap minus the loan; a borrower's cap is its base cap
plus one approved borrow, which is at most the lender's (unborrowed) base cap,
so no cap ever exceeds twice its base cap. Borrowing moves budget between two
adjacent epochs and never creates any: over all epochs, caps sum to base caps.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal, DecimalException
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from spatialdp._validation import check_epsilon, check_probability
from spatialdp.exceptions import BudgetExceeded, BudgetSplitWarning, LedgerError, SpatialDPError
from spatialdp.privacy.budget import NEIGHBOURS, BudgetSplit, LineItem

#: Largest epoch or round index: ``epoch + 1`` must fit SQLite's 64-bit integers.
MAX_INDEX = 2**62
#: The accounting kinds a ledger keeps.
ACCOUNTING = ("pure", "zcdp")
_EDITED = "the file was edited outside PrivacyLedger or is damaged: restore it from a backup"

# -- schema and exact amounts ------------------------------------------------------------

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


# ======================================================================================
# the file: errors, connections, creation
# ======================================================================================


MEMORY = ":memory:"
_MAGIC = b"SQLite format 3\x00"
_RESTORE = "restore the ledger from a backup, or pass the ledger's own file"

#: Errors that, inside a ledger operation, can only come from the file's content or state.
_RAW_ERRORS = (sqlite3.Error, ArithmeticError, KeyError, ValueError, TypeError, OSError)


def ledger_error(path: str, problem: str, fix: str) -> LedgerError:
    """Build the one message shape, ``ledger 'path' problem; fix`` (returned, for ``raise``).

    Examples
    --------
    >>> str(ledger_error("l.db", "is locked", "retry"))
    "ledger 'l.db' is locked; retry"
    """
    return LedgerError(f"ledger {path!r} {problem}; {fix}")


def translate(err: BaseException, path: str, action: str, timeout: float) -> LedgerError:
    """Return the :class:`LedgerError` that explains ``err``, raised while ``action``.

    Examples
    --------
    >>> err = sqlite3.OperationalError("database is locked")
    >>> err.sqlite_errorname = "SQLITE_BUSY"
    >>> print(translate(err, "l.db", "charging", 0.5))  # doctest: +ELLIPSIS
    ledger 'l.db' is locked by another connection: charging waited timeout=0.5 s ...
    """
    name = str(getattr(err, "sqlite_errorname", "") or "")
    detail = f"({type(err).__name__}: {err})"
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return ledger_error(
            path, f"is locked by another connection: {action} waited timeout={timeout:g} s "
            f"{detail}", "retry when the other process has committed, or pass a longer timeout=")
    if name.startswith(("SQLITE_NOTADB", "SQLITE_CORRUPT")):
        return ledger_error(path, f"is damaged or not an SQLite database {detail}", _RESTORE)
    if name.startswith("SQLITE_READONLY"):
        return ledger_error(
            path, f"cannot be written while {action} {detail}",
            "open it with read_only=True to read it, or give this process write access to the "
            "file and its folder")
    if name.startswith(("SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")):
        return ledger_error(
            path, f"cannot be opened {detail}",
            "check that the path is a file in an existing folder and that this process may read "
            "it; a WAL ledger also needs its folder writable (for the -wal and -shm files)")
    if name.startswith("SQLITE_FULL"):
        return ledger_error(path, f"cannot grow: the disk is full {detail}", "free disk space")
    if name.startswith("SQLITE_IOERR") or isinstance(err, OSError):
        return ledger_error(path, f"hit an I/O error while {action} {detail}",
                            "check the disk and the file system, then retry")
    if isinstance(err, sqlite3.Error):
        return ledger_error(path, f"could not be read or written while {action} {detail}",
                            f"run verify() on it, or {_RESTORE}")
    if isinstance(err, DecimalException):
        detail = f"(a stored amount is not a decimal number; {type(err).__name__})"
    return ledger_error(
        path, f"holds a value spatialdp cannot read while {action} {detail}",
        f"the file was edited outside PrivacyLedger: {_RESTORE}")


@contextmanager
def guard(path: str, action: str, timeout: float) -> Iterator[None]:
    """Turn raw SQLite, decimal and lookup errors into :class:`LedgerError` (chained).

    spatialdp's own errors pass through unchanged. Use it only around code
    whose arguments are already checked, so anything raw comes from the file.
    """
    try:
        yield
    except SpatialDPError:
        raise
    except _RAW_ERRORS as err:
        raise translate(err, path, action, timeout) from err


@contextmanager
def transaction(conn: sqlite3.Connection, path: str, action: str, timeout: float,
                mode: str = "DEFERRED") -> Iterator[sqlite3.Connection]:
    """Run the block in one SQLite transaction, guarded; roll back on any error.

    ``mode`` is ``"DEFERRED"`` to read, ``"IMMEDIATE"`` to write (the write
    lock is taken at ``BEGIN``, so the check and the write see the same state).
    """
    with guard(path, action, timeout):
        conn.execute(f"BEGIN {mode}")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                with suppress(sqlite3.Error):  # keep the original error
                    conn.execute("ROLLBACK")
            raise


def _uri(path: str, mode: str) -> str:
    return f"{Path(os.path.abspath(path)).as_uri()}?mode={mode}"


def connect(path: str, timeout: float, *, read_only: bool = False) -> sqlite3.Connection:
    """Open ``path`` in autocommit mode (transactions are explicit) with a busy timeout.

    The file must exist (SQLite never creates it here); ``read_only`` opens it
    with SQLite's ``mode=ro``, so no statement can write it.
    """
    if path == MEMORY:
        target, uri = MEMORY, False
    else:
        target, uri = _uri(path, "ro" if read_only else "rw"), True
    # Any thread may use it: PrivacyLedger serialises every use under its own lock.
    conn = sqlite3.connect(target, timeout=timeout, isolation_level=None, uri=uri,
                           check_same_thread=False)
    try:
        conn.execute("PRAGMA trusted_schema = OFF")  # no functions run from a foreign schema
        conn.execute("PRAGMA synchronous = FULL")
        if read_only:
            conn.execute("PRAGMA query_only = ON")
    except BaseException:
        conn.close()
        raise
    return conn


def use_wal(conn: sqlite3.Connection) -> None:
    """Switch a ledger to WAL mode (persistent; a no-op when it already is)."""
    mode = str(conn.execute("PRAGMA journal_mode").fetchone()[0]).lower()
    if mode != "wal":
        mode = str(conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]).lower()
        if mode != "wal":  # pragma: no cover - e.g. network file systems
            conn.execute("PRAGMA journal_mode = DELETE")


def tidy_side_files(path: str, timeout: float) -> None:
    """Let SQLite remove the ``-wal`` and ``-shm`` files a read-only connection left.

    A read-only connection to a WAL ledger creates them and, being read-only,
    cannot remove them when it closes; a read-write connection that is the last
    one to close checkpoints the (empty) log and removes both. So after a
    read-only ledger closes, one read-write connection opens, reads and closes:
    nothing is written, and a ledger another connection still has open keeps its
    side files (they are in use). Best effort: a ledger on read-only storage
    keeps them.
    """
    if path == MEMORY:
        return
    real = os.path.realpath(path)  # SQLite keeps them beside the file a link points to
    if not any(os.path.exists(real + side) for side in ("-wal", "-shm")):
        return
    with suppress(sqlite3.Error, OSError):
        with closing(connect(path, timeout)) as conn:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()


def check_file(path: str) -> None:
    """Refuse, before SQLite opens it, a path that cannot hold a ledger.

    Checks that ``path`` is a regular, non-empty file starting with the SQLite
    header, of a length its header agrees with (when no ``-wal`` file holds
    pages not yet copied back).
    """
    try:
        info = os.stat(path)
    except FileNotFoundError as err:
        raise ledger_error(path, "does not exist", "pass the path of an existing ledger, "
                           "or epoch_budget= (and not read_only=True) to create one") from err
    except OSError as err:
        raise ledger_error(path, f"cannot be inspected ({err.strerror})",
                           "check the path and this process's permissions") from err
    if stat.S_ISDIR(info.st_mode):
        raise ledger_error(path, "is a directory, not a ledger file",
                           "pass the ledger file's path, e.g. 'folder/ledger.sqlite'")
    if not stat.S_ISREG(info.st_mode):
        raise ledger_error(path, "is not a regular file", "pass the ledger file's path")
    if info.st_size == 0:
        raise ledger_error(
            path, "is an empty file (0 bytes): it may be a ledger whose content was lost, and "
            "starting afresh would forget the budget already spent",
            "restore the ledger from a backup, or delete the empty file to start a new ledger")
    try:
        with open(path, "rb") as fh:
            header = fh.read(100)
    except OSError as err:
        raise ledger_error(path, f"cannot be read ({err.strerror})",
                           "give this process read access to the file") from err
    if len(header) < len(_MAGIC) and _MAGIC.startswith(header):
        raise ledger_error(path, f"is truncated ({len(header)} bytes of an SQLite header)",
                           _RESTORE)
    if not header.startswith(_MAGIC):
        raise ledger_error(path, f"is not an SQLite database (it starts with {header[:16]!r})",
                           _RESTORE)
    _check_length(path, header, info.st_size)


def _check_length(path: str, header: bytes, size: int) -> None:
    if len(header) < 100:
        raise ledger_error(
            path, f"is truncated ({size} bytes, shorter than the 100-byte SQLite header)",
            _RESTORE)
    page = int.from_bytes(header[16:18], "big")
    page = 65536 if page == 1 else page
    if page < 512 or page & (page - 1):
        raise ledger_error(path, f"has a damaged SQLite header (page size {page})", _RESTORE)
    wal = f"{path}-wal"
    if os.path.exists(wal) and os.path.getsize(wal) > 0:
        return  # the main file may legitimately lag its header until the next checkpoint
    pages = int.from_bytes(header[28:32], "big")
    if size % page:
        raise ledger_error(
            path, f"is truncated ({size} bytes, not a whole number of {page}-byte pages)",
            _RESTORE)
    if header[24:28] == header[92:96] and pages * page > size:  # the header's size is valid
        raise ledger_error(
            path, f"is truncated ({size} bytes; its header records {pages} pages of {page} "
            "bytes)", _RESTORE)


def create(path: str, config: dict[str, str], timeout: float) -> bool:
    """Create a complete ledger at ``path`` atomically, unless a file is already there.

    The ledger is built in a temporary file in the same folder, then
    hard-linked to ``path``; a concurrent creator that loses the race resumes
    the winner's file. Returns whether this call created the file.
    """
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{uuid.uuid4().hex}.creating")
    try:
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    except FileNotFoundError as err:
        raise ledger_error(path, f"cannot be created: its folder {folder!r} does not exist",
                           "create the folder first, or pass another path") from err
    except OSError as err:
        raise ledger_error(path, f"cannot be created in {folder!r} ({err.strerror})",
                           "pass a path in a folder this process may write") from err
    try:
        conn = connect(tmp, timeout)
        try:
            initialise(conn, config)
            use_wal(conn)
        finally:
            conn.close()
        return _publish(tmp, path)
    finally:
        for leftover in (tmp, f"{tmp}-wal", f"{tmp}-shm", f"{tmp}-journal"):
            with suppress(FileNotFoundError):
                os.unlink(leftover)


def _publish(tmp: str, path: str) -> bool:
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    except OSError as err:  # pragma: no cover - file systems without hard links
        if err.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        if os.path.lexists(path):
            return False
        os.replace(tmp, path)  # not exclusive: a creator racing in this instant may be lost
    return True


# ======================================================================================
# caps and borrows
# ======================================================================================


class Borrow(NamedTuple):
    """One stored borrow: ``epoch`` took ``amount`` of ``line_item`` from ``epoch + 1``."""

    epoch: int
    line_item: str
    amount: Decimal
    approver: str


def base_caps(budget: Decimal, evaluation_share: float, global_share: float
              ) -> dict[LineItem, Decimal]:
    """Return each line item's cap before borrowing, rounded down.

    Examples
    --------
    >>> {k.value: str(v) for k, v in base_caps(Decimal("1"), 0.3, 0.2).items()}
    {'training': '0.7', 'evaluation.global': '0.06', 'evaluation.regional': '0.24'}
    """
    evaluation = DOWN.multiply(budget, dec(evaluation_share))
    glob = DOWN.multiply(evaluation, dec(global_share))
    return {
        LineItem.TRAINING: DOWN.subtract(budget, evaluation),
        LineItem.EVALUATION_GLOBAL: glob,
        LineItem.EVALUATION_REGIONAL: DOWN.subtract(evaluation, glob),
    }


def cap_from(base: Mapping[LineItem, Decimal], borrows: Mapping[int, Borrow], epoch: int,
             item: LineItem) -> tuple[Decimal, Decimal]:
    """Return ``(cap, adjustment)`` of ``item`` in ``epoch`` given the borrows by epoch."""
    adjustment = Decimal(0)
    took, lent = borrows.get(epoch), borrows.get(epoch - 1)
    if took is not None and took.line_item == item.value:
        adjustment = UP.add(adjustment, took.amount)
    if lent is not None and lent.line_item == item.value:
        adjustment = UP.subtract(adjustment, lent.amount)
    return DOWN.add(base[item], adjustment), adjustment


def borrows_near(conn: sqlite3.Connection, epoch: int) -> dict[int, Borrow]:
    """Return the stored borrows of ``epoch - 1``, ``epoch`` and ``epoch + 1``, by epoch."""
    rows = conn.execute(
        "SELECT epoch, line_item, amount, approver FROM borrows WHERE epoch BETWEEN ? AND ?",
        (epoch - 1, epoch + 1),
    )
    return {int(e): Borrow(int(e), str(i), Decimal(a), str(p)) for e, i, a, p in rows}


def cap(conn: sqlite3.Connection, base: Mapping[LineItem, Decimal], epoch: int,
        item: LineItem) -> tuple[Decimal, Decimal]:
    """Return ``(cap, adjustment from borrowing)`` of ``item`` in ``epoch``."""
    return cap_from(base, borrows_near(conn, epoch), epoch, item)


def spent(conn: sqlite3.Connection, epoch: int, item: LineItem) -> tuple[Decimal, int]:
    """Return ``(spent, number of charges)`` of ``item`` in ``epoch``."""
    row = conn.execute(
        "SELECT spent, n_charges FROM spend WHERE epoch = ? AND line_item = ?",
        (epoch, item.value),
    ).fetchone()
    return (Decimal(row[0]), int(row[1])) if row else (Decimal(0), 0)


def charged(loss: Decimal, unit: str, accounting: str, multiplier: int) -> Decimal:
    """Return what a release costs in the ledger's unit, rounded up.

    A zCDP ledger counts a pure ``epsilon`` as ``epsilon**2 / 2`` per part;
    the structure's multiplier (k for uncalibrated overlapping parts) applies.

    Examples
    --------
    >>> charged(Decimal("0.2"), "epsilon", "zcdp", 3)
    Decimal('0.060')
    """
    per_part = (UP.multiply(UP.power(loss, 2), Decimal("0.5"))
                if unit == "epsilon" and accounting == "zcdp" else loss)
    return UP.multiply(per_part, Decimal(multiplier))


def epoch_rows(conn: sqlite3.Connection, base: Mapping[LineItem, Decimal], epoch: int
               ) -> dict[str, dict[str, Decimal]]:
    """Return, per line item, base cap, borrowed, cap, spent, remaining and charge count."""
    rows: dict[str, dict[str, Decimal]] = {}
    for item in LineItem:
        limit, adjustment = cap(conn, base, epoch, item)
        so_far, n = spent(conn, epoch, item)
        rows[item.value] = {"base_cap": base[item], "borrowed": adjustment, "cap": limit,
                            "spent": so_far, "remaining": limit - so_far,
                            "n_charges": Decimal(n)}
    return rows


def fit(conn: sqlite3.Connection, base: Mapping[LineItem, Decimal], *, epoch: int,
        item: LineItem, charged: Decimal, unit: str, release_id: str, label: str
        ) -> tuple[Decimal, Decimal]:
    """Return ``(cap, new total)`` if a new release fits in ``item``'s cap, else refuse.

    Raises
    ------
    LedgerError
        ``release_id`` is already charged.
    BudgetExceeded
        The charge does not fit; the message says what is left and what to do.
    """
    if conn.execute("SELECT 1 FROM charges WHERE release_id = ?", (release_id,)).fetchone():
        raise LedgerError(
            f"release_id={release_id!r} is already charged; a release is charged once. "
            "Use a new id for a new release (look the old one up with audit())."
        )
    limit, _ = cap(conn, base, epoch, item)
    so_far, _ = spent(conn, epoch, item)
    new_total = UP.add(so_far, charged)
    if new_total > limit:
        remaining = DOWN.subtract(limit, so_far)
        hint = (f"or borrow from epoch {epoch + 1} once with a named approver"
                if item.is_evaluation else "or let training back off until the next epoch")
        raise BudgetExceeded(
            f"charge of {float(charged):.6g} {unit} for {label} to epoch {epoch} line item "
            f"{item.value!r} exceeds its cap: {float(so_far):.6g} of {float(limit):.6g} spent, "
            f"{float(remaining):.6g} remaining. Reduce the loss (publish less often or at "
            f"coarser precision), {hint}."
        )
    return limit, new_total


def borrow(conn: sqlite3.Connection, base: Mapping[LineItem, Decimal], *, epoch: int,
           item: LineItem, amount: Decimal, unit: str, audit: tuple[str, str, str]) -> None:
    """Apply the borrowing rule (module docstring) and record the borrow, or refuse.

    Call inside a write transaction. ``audit`` is ``(approver, who, why)``.
    """
    if not item.is_evaluation:
        raise LedgerError(
            f"line_item={item.value!r} cannot borrow: only evaluation may borrow from the "
            "next epoch. Let training back off instead."
        )
    near = borrows_near(conn, epoch)
    rule = "an epoch borrows once, a lender cannot borrow, a borrower cannot lend"
    prior, lent, next_took = near.get(epoch), near.get(epoch - 1), near.get(epoch + 1)
    if prior is not None:
        raise LedgerError(
            f"epoch {epoch} already borrowed {prior.amount} {unit} for {prior.line_item!r} "
            f"(approved by {prior.approver!r}); evaluation may borrow once per epoch ({rule}). "
            f"Wait for epoch {epoch + 1}."
        )
    if lent is not None:
        raise LedgerError(
            f"epoch {epoch} cannot borrow: it lent {lent.amount} {unit} of {lent.line_item!r} "
            f"to epoch {epoch - 1} ({rule}, so no cap exceeds its base cap plus one borrow). "
            f"Reduce the release, or wait for epoch {epoch + 1}."
        )
    if next_took is not None:
        raise LedgerError(
            f"epoch {epoch} cannot borrow from epoch {epoch + 1}: epoch {epoch + 1} borrowed "
            f"{next_took.amount} {unit} from epoch {epoch + 2} ({rule}, so no cap exceeds its "
            f"base cap plus one borrow). Reduce the release, or wait for epoch {epoch + 1}."
        )
    lender_cap, _ = cap_from(base, near, epoch + 1, item)
    left = DOWN.subtract(lender_cap, spent(conn, epoch + 1, item)[0])
    if amount > left:
        raise BudgetExceeded(
            f"borrowing {float(amount):.6g} {unit} for epoch {epoch} {item.value!r} exceeds "
            f"what epoch {epoch + 1} has left on that item ({float(left):.6g}); borrow at "
            "most that much."
        )
    approver, who, why = audit
    conn.execute(
        "INSERT INTO borrows (epoch, line_item, amount, approver, who, why, recorded_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (epoch, item.value, fmt(amount), approver, who, why, now()),
    )


# ======================================================================================
# checks of what the file stores
# ======================================================================================


# -- stored settings ----------------------------------------------------------------------


@dataclass(frozen=True)
class Settings:
    """The configuration a ledger file stores."""

    accounting: str
    epoch_budget: Decimal
    evaluation_share: float
    global_share: float
    version: int
    ledger_id: str


def _tables(conn: sqlite3.Connection) -> set[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    return {str(r[0]) for r in rows} - {"sqlite_sequence"}


def _check_columns(conn: sqlite3.Connection, path: str, table: str,
                   version: int = SCHEMA_VERSION) -> None:
    have = {str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")}
    missing = [c for c in columns_of_version(version)[table] if c not in have]
    if missing:
        raise ledger_error(path, f"has a table {table!r} without the column(s) {missing} "
                           f"(it has {sorted(have)})", _EDITED)


def _stored(path: str, meta: dict[str, Any], key: str, check: Callable[[Any, str], object],
            requirement: str) -> Decimal:
    text = meta.get(key)
    if text is None:
        raise ledger_error(path, f"stores no {key!r} setting", _EDITED)
    try:
        value = Decimal(text) if isinstance(text, str) else None
        if value is None:
            raise TypeError(key)
        check(value, key)
    except (ArithmeticError, ValueError, TypeError) as err:
        raise ledger_error(path, f"stores the setting {key}={text!r}, which is not "
                           f"{requirement}", _EDITED) from err
    return value


def read_settings(conn: sqlite3.Connection, path: str) -> Settings:
    """Return the stored settings after checking the tables, the version and every setting.

    Raises
    ------
    LedgerError
        A database of another application, a newer or damaged schema, a
        missing table or column, or a setting out of its valid range.
    """
    tables = _tables(conn)
    restore = "pass the ledger's own file, or restore it from a backup"
    if not tables:
        raise ledger_error(path, "is an SQLite database with no tables, not a ledger",
                           "delete it to start a new ledger, or " + restore)
    if "meta" not in tables:
        raise ledger_error(path, f"is an SQLite database with tables {sorted(tables)} but no "
                           "'meta' table, so it is not a spatialdp privacy ledger", restore)
    _check_columns(conn, path, "meta")
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    if meta.get("application") != APPLICATION:
        raise ledger_error(path, f"has application={meta.get('application')!r} in its meta "
                           f"table, not {APPLICATION!r}: it is not a spatialdp privacy "
                           "ledger", restore)
    for key in SETTINGS:
        if key not in meta:
            raise ledger_error(path, f"stores no {key!r} setting", _EDITED)
    version = meta.get("schema_version")
    if not (isinstance(version, str) and version.isdigit() and len(version) < 10):
        raise ledger_error(path, f"stores the setting schema_version={version!r}, which is "
                           "not a whole number", _EDITED)
    if int(version) > SCHEMA_VERSION:
        raise ledger_error(path, f"has ledger schema version {version}, newer than the "
                           f"{SCHEMA_VERSION} this spatialdp understands",
                           "upgrade spatialdp to read it")
    if int(version) < 1:
        raise ledger_error(path, f"stores the setting schema_version={version!r}; versions "
                           "start at 1", _EDITED)
    for table in table_columns():
        if table not in tables:
            raise ledger_error(path, f"has no {table!r} table", _EDITED)
        _check_columns(conn, path, table, int(version))
    accounting = meta.get("accounting")
    if accounting not in ACCOUNTING:
        raise ledger_error(path, f"stores the setting accounting={accounting!r}, which is not "
                           f"one of {list(ACCOUNTING)}", _EDITED)
    budget = _stored(path, meta, "epoch_budget", check_epsilon,
                     "a positive finite budget of at most 1e6")
    shares = [float(_stored(path, meta, k, check_probability, "a share in [0, 1]"))
              for k in ("evaluation_share", "global_share")]
    ledger_id = meta.get("ledger_id") or ledger_id_from(str(meta.get("created_at", "")))
    return Settings(str(accounting), budget, shares[0], shares[1], int(version),
                    str(ledger_id))


# -- stored amounts -----------------------------------------------------------------------


def _row_value(path: str, where: str, column: str, value: object, *, positive: bool = False,
               integer: bool = False) -> Decimal:
    ok = False
    number = Decimal(0)
    if integer:
        ok = isinstance(value, int) and 0 <= value <= MAX_INDEX
        number = Decimal(value) if ok else number  # type: ignore[arg-type]
    elif isinstance(value, str):
        try:
            number = Decimal(value)
            ok = number.is_finite() and (number > 0 if positive else number >= 0)
        except ArithmeticError:
            ok = False
    if not ok:
        kind = ("a whole number >= 0" if integer else
                "a finite amount > 0" if positive else "a finite amount >= 0")
        raise ledger_error(path, f"stores {column}={value!r} in {where}, which is not {kind}",
                           _EDITED)
    return number


def _line_item(path: str, where: str, value: object) -> LineItem:
    if value not in {i.value for i in LineItem}:
        raise ledger_error(path, f"stores line_item={value!r} in {where}, which is not one of "
                           f"{[i.value for i in LineItem]}", _EDITED)
    return LineItem(str(value))


def check_contents(conn: sqlite3.Connection, path: str,
                   base: dict[LineItem, Decimal]) -> dict[str, int]:
    """Check every stored amount and the ledger's invariants; return row counts.

    Charges and totals are finite and non-negative, each line-item total
    equals the sum and count of its charges, borrows follow the borrowing
    rule, and no line item has spent more than its cap.
    """
    sums: dict[tuple[int, LineItem], tuple[Decimal, int]] = {}
    n_charges = 0
    relation = column_or_default(conn, "charges", "neighbours")
    for seq, ep, it, charged, loss, neighbours in conn.execute(
            f"SELECT seq, epoch, line_item, charged, loss, {relation} FROM charges ORDER BY seq"):
        where = f"charge #{seq}"
        key = (int(_row_value(path, where, "epoch", ep, integer=True)),
               _line_item(path, where, it))
        amount = _row_value(path, where, "charged", charged)
        _row_value(path, where, "loss", loss)
        if neighbours not in NEIGHBOURS:
            raise ledger_error(path, f"stores neighbours={neighbours!r} in {where}, which is "
                               f"not one of {list(NEIGHBOURS)}", _EDITED)
        total, count = sums.get(key, (Decimal(0), 0))
        sums[key] = (UP.add(total, amount), count + 1)
        n_charges += 1
    totals: dict[tuple[int, LineItem], tuple[Decimal, int]] = {}
    for ep, it, spent, n in conn.execute("SELECT epoch, line_item, spent, n_charges FROM spend"):
        where = f"the total of epoch {ep!r} {it!r}"
        key = (int(_row_value(path, where, "epoch", ep, integer=True)),
               _line_item(path, where, it))
        totals[key] = (_row_value(path, where, "spent", spent),
                       int(_row_value(path, where, "n_charges", n, integer=True)))
    for key in sorted(set(sums) | set(totals), key=lambda k: (k[0], k[1].value)):
        (rows, n_rows), (total, n_total) = (sums.get(key, (Decimal(0), 0)),
                                            totals.get(key, (Decimal(0), 0)))
        if rows != total or n_rows != n_total:
            raise ledger_error(
                path, f"has a total for epoch {key[0]} {key[1].value!r} of {total} over "
                f"{n_total} charges, but its audit rows add up to {rows} over {n_rows}", _EDITED)
    borrows = _stored_borrows(conn, path, base)
    for (ep, item), (total, _) in totals.items():
        limit, _ = cap_from(base, borrows, ep, item)
        if total > limit:
            raise ledger_error(path, f"has epoch {ep} line item {item.value!r} spent {total}, "
                               f"above its cap {limit}", _EDITED)
    return {"charges": n_charges, "line_items": len(totals), "borrows": len(borrows)}


def _stored_borrows(conn: sqlite3.Connection, path: str,
                    base: dict[LineItem, Decimal]) -> dict[int, Borrow]:
    borrows: dict[int, Borrow] = {}
    for ep, it, amount, approver in conn.execute(
            "SELECT epoch, line_item, amount, approver FROM borrows ORDER BY epoch"):
        where = f"the borrow of epoch {ep!r}"
        epoch = int(_row_value(path, where, "epoch", ep, integer=True))
        item = _line_item(path, where, it)
        value = _row_value(path, where, "amount", amount, positive=True)
        if not item.is_evaluation:
            raise ledger_error(path, f"stores a borrow for {item.value!r} in epoch {epoch}, "
                               "but only evaluation line items borrow", _EDITED)
        if value > base[item]:
            raise ledger_error(path, f"stores a borrow of {amount!r} for {item.value!r} in "
                               f"epoch {epoch}, above that item's base cap {base[item]}",
                               _EDITED)
        if epoch - 1 in borrows:
            raise ledger_error(path, f"stores borrows in both epoch {epoch - 1} and epoch "
                               f"{epoch}: epoch {epoch} lent and borrowed (a chain)", _EDITED)
        borrows[epoch] = Borrow(epoch, item.value, value, str(approver))
    return borrows


def integrity(conn: sqlite3.Connection, path: str) -> None:
    """Run SQLite's ``integrity_check`` on the file; raise :class:`LedgerError` if it fails."""
    check = [str(r[0]) for r in conn.execute("PRAGMA integrity_check")]
    if check != ["ok"]:
        raise ledger_error(path, f"fails SQLite's integrity_check: {check[:5]}",
                           "restore the ledger from a backup")


# ======================================================================================
# opening
# ======================================================================================


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
        with guard(path, "opening the ledger", timeout):
            conn = connect_or_create(path, timeout, read_only, budget, accounting, split)
            if not read_only:
                upgrade(conn, path, timeout)
            opened = resume(conn, path, budget, accounting, split)
            if not read_only and path != MEMORY:
                use_wal(conn)
    except BaseException:
        if conn is not None:
            conn.close()
        raise
    return conn, opened


def connect_or_create(path: str, timeout: float, read_only: bool, budget: Decimal | None,
            accounting: str | None, split: BudgetSplit | None) -> sqlite3.Connection:
    """Return a connection to the ledger at ``path``, creating it if it does not exist.

    Raises
    ------
    LedgerError
        A new ledger without ``budget``, or a path that cannot hold a ledger
        (see :func:`check_file`), or a file
        this process may not write unless ``read_only``.
    """
    def config() -> dict[str, str]:
        if budget is None:
            raise LedgerError(
                f"ledger {path!r} is a new ledger and epoch_budget was not given; "
                "pass epoch_budget=<per-client budget per epoch> to create it")
        sp = split if split is not None else BudgetSplit()
        return {"accounting": accounting or "pure", "epoch_budget": fmt(budget),
                "evaluation_share": repr(sp.evaluation_share),
                "global_share": repr(sp.global_share), "created_at": now(),
                "ledger_id": new_ledger_id()}

    if path == MEMORY:
        settings = config()
        conn = connect(MEMORY, timeout)
        try:
            initialise(conn, settings)
        except BaseException:
            conn.close()
            raise
        return conn
    if not read_only and not os.path.lexists(path):
        create(path, config(), timeout)
    check_file(path)
    if not read_only and not os.access(path, os.W_OK):
        raise ledger_error(
            path, "is read-only for this process",
            "open it with read_only=True to read it, or give this process write access")
    return connect(path, timeout, read_only=read_only)


def upgrade(conn: sqlite3.Connection, path: str, timeout: float) -> None:
    """Migrate a writable ledger of an older schema version, in one transaction.

    The version is read first without a write lock (a current file is never
    locked for writing on open); an older file's settings are checked again
    under the write lock (a foreign or damaged file is refused, not altered).
    """
    with transaction(conn, path, "reading the ledger's schema version", timeout):
        current = read_settings(conn, path).version >= SCHEMA_VERSION
    if current:
        return
    with transaction(conn, path, "upgrading the ledger's schema", timeout,
                           "IMMEDIATE"):
        stored = read_settings(conn, path)
        if stored.version < SCHEMA_VERSION:
            migrate(conn, stored.version)


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
    stored = read_settings(conn, path)
    with warnings.catch_warnings():  # warned when the split was first made
        warnings.simplefilter("ignore", BudgetSplitWarning)
        kept_split = BudgetSplit(stored.evaluation_share, stored.global_share)
    given: dict[str, Any] = {"epoch_budget": budget, "accounting": accounting, "split": split}
    kept: dict[str, Any] = {"epoch_budget": stored.epoch_budget,
                            "accounting": stored.accounting, "split": kept_split}
    for key, value in given.items():
        if value is not None and value != kept[key]:
            shown = str if key == "epoch_budget" else repr
            raise ledger_error(
                path, f"was created with {key}={shown(kept[key])}, but {key}={shown(value)} "
                "was passed", f"omit {key} to resume the stored ledger, or use a new file "
                "for a different configuration")
    base = base_caps(stored.epoch_budget, stored.evaluation_share, stored.global_share)
    check_contents(conn, path, base)
    return Opened(stored.accounting, stored.epoch_budget, kept_split, base, stored.ledger_id)
