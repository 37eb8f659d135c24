"""The ledger's file: opening, atomic creation, and errors in spatialdp's words.

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
and starting afresh would forget the budget already spent).
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from decimal import DecimalException
from pathlib import Path

from spatialdp.exceptions import LedgerError, SpatialDPError
from spatialdp.privacy import _ledger_schema as schema

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
            schema.initialise(conn, config)
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
