"""Checks for :mod:`spatialdp.privacy.ledger`: its arguments, and what its file stores.

Arguments go through :mod:`spatialdp._validation` (message shape
``name=value problem; fix``, :class:`~spatialdp.exceptions.InvalidInput`).

A file is never trusted: on open, every stored setting is checked with the
rules that applied when it was written (epoch budget finite, positive and at
most ``MAX_EPSILON``; shares in [0, 1]; a known accounting kind and schema
version), and so is every stored amount (finite and non-negative, line-item
totals equal to the sum of their charges, spent within cap, borrows within the
rule of :mod:`~spatialdp.privacy._ledger_caps`). A failure is a
:class:`~spatialdp.exceptions.LedgerError` naming the file, the setting or row,
the stored value and the fix. The scan is linear in the number of charges.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np

from spatialdp._validation import (
    check_choice,
    check_count,
    check_epsilon,
    check_number,
    check_probability,
    check_text,
    fail,
)
from spatialdp.exceptions import LedgerError
from spatialdp.privacy import _ledger_schema as schema
from spatialdp.privacy._ledger_caps import Borrow, cap_from
from spatialdp.privacy._ledger_files import ledger_error
from spatialdp.privacy._ledger_schema import UP, dec
from spatialdp.privacy.budget import (
    NEIGHBOURS,
    BudgetSplit,
    Disjoint,
    LineItem,
    Overlapping,
    Single,
    Structure,
)

#: Largest epoch or round index: ``epoch + 1`` must fit SQLite's 64-bit integers.
MAX_INDEX = 2**62
#: Longest wait for another process's lock, in seconds (one day).
MAX_TIMEOUT = 86_400.0
ACCOUNTING = ("pure", "zcdp")
_EDITED = "the file was edited outside PrivacyLedger or is damaged: restore it from a backup"

# -- arguments --------------------------------------------------------------------------


def check_index(value: Any, name: str) -> int:
    """Return an epoch or round index: a whole number in ``[0, 2**62]``.

    Examples
    --------
    >>> import numpy as np
    >>> check_index(np.int64(3), "epoch")
    3
    """
    return check_count(value, name, high=MAX_INDEX)


def check_audit_text(value: Any, name: str) -> str:
    r"""Return audit text (who, what, why, approver, release id), stripped.

    Besides :func:`~spatialdp._validation.check_text`, refuses text SQLite
    cannot store (lone surrogates). Should move to ``_validation``.

    Examples
    --------
    >>> check_audit_text(" ana ", "who")
    'ana'
    >>> check_audit_text("\ud800", "who")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: who='\ud800' is not valid Unicode text ...
    """
    text = check_text(value, name)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise fail(name, value, "is not valid Unicode text (it holds a lone surrogate)",
                   "pass text that encodes as UTF-8") from None
    return text.strip()


def check_amount(value: Any, name: str) -> Decimal:
    """Return a privacy amount (epsilon, rho, budget) as the decimal the caller wrote.

    Examples
    --------
    >>> import numpy as np
    >>> check_amount(np.float64(0.1), "epsilon")
    Decimal('0.1')
    """
    return dec(check_epsilon(value, name))


def check_loss(epsilon: Any, rho: Any, accounting: str) -> tuple[str, Decimal]:
    """Return ``(unit, loss)`` from exactly one of ``epsilon`` and ``rho``.

    Raises
    ------
    InvalidInput
        Neither or both given, or the one given is not a valid privacy amount.
    LedgerError
        ``rho`` for a pure-epsilon ledger (zCDP does not imply pure DP).
    """
    if epsilon is None and rho is None:
        raise fail("epsilon", None, "and rho=None: no loss was given",
                   "pass exactly one of epsilon= and rho=")
    if epsilon is not None and rho is not None:
        raise fail("epsilon", epsilon, f"was passed with rho={rho!r}",
                   "pass exactly one of epsilon= and rho=")
    if rho is None:
        return "epsilon", check_amount(epsilon, "epsilon")
    if accounting == "pure":
        raise LedgerError(
            f"rho={rho!r} cannot be charged to a pure-epsilon ledger: zCDP does not imply "
            "pure DP. Charge the release's pure epsilon, or keep this workload in a "
            "ledger created with accounting='zcdp'.")
    return "rho", check_amount(rho, "rho")


def check_path(value: Any) -> str:
    """Return a ledger path as text: ``":memory:"`` or a file path (str or os.PathLike)."""
    try:
        path = os.fspath(value)
    except TypeError:
        path = None
    if not isinstance(path, str):
        raise fail("path", value, f"is a {type(value).__name__}, not a path",
                   "pass a str or pathlib.Path naming the ledger file, or ':memory:'")
    return check_text(path, "path")


def check_timeout(value: Any) -> float:
    """Return seconds to wait for a lock: finite, ``>= 0``, at most a day."""
    return check_number(value, "timeout", low=0.0, high=MAX_TIMEOUT,
                        fix="pass seconds to wait for another process's lock, e.g. 30.0")


def check_flag(value: Any, name: str, *, memory: str = "") -> bool:
    """Return a ``True``/``False`` option (numpy bools accepted, nothing else).

    ``read_only=True`` is refused for an in-memory ledger (pass its ``path`` as ``memory``).
    """
    if not isinstance(value, bool | np.bool_):
        raise fail(name, value, f"is a {type(value).__name__}, not a bool", "pass True or False")
    if value and memory == ":memory:":
        raise fail(name, value, "cannot apply to a new in-memory ledger",
                   "pass the path of a ledger file, or read_only=False")
    return bool(value)


def check_configuration(epoch_budget: Any, accounting: Any, split: Any
                        ) -> tuple[Decimal | None, str | None, BudgetSplit | None]:
    """Return the checked ``(epoch_budget, accounting, split)``; ``None`` stays ``None``."""
    return (None if epoch_budget is None else check_amount(epoch_budget, "epoch_budget"),
            None if accounting is None else check_choice(accounting, "accounting", ACCOUNTING),
            None if split is None else check_split(split))


def check_structure(value: Any) -> Structure:
    """Return a release structure: a Single, Disjoint or Overlapping instance."""
    if not isinstance(value, Single | Disjoint | Overlapping):
        raise fail("structure", value, f"is a {type(value).__name__}, not a release structure",
                   "pass Single(name), Disjoint(name, parts) or "
                   "Overlapping(name, parts, max_parts_per_client)")
    return value


def check_split(value: Any) -> BudgetSplit:
    """Return a :class:`BudgetSplit`."""
    if not isinstance(value, BudgetSplit):
        raise fail("split", value, f"is a {type(value).__name__}, not a BudgetSplit",
                   "pass e.g. BudgetSplit(evaluation_share=0.3, global_share=0.2)")
    return value


def check_delta(value: Any) -> float:
    """Return a failure probability strictly between 0 and 1."""
    return check_number(value, "delta", low=0.0, high=1.0, low_open=True, high_open=True,
                        fix="pass a small failure probability such as 1e-6")


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
                   version: int = schema.SCHEMA_VERSION) -> None:
    have = {str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")}
    missing = [c for c in schema.columns_of_version(version)[table] if c not in have]
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
    if meta.get("application") != schema.APPLICATION:
        raise ledger_error(path, f"has application={meta.get('application')!r} in its meta "
                           f"table, not {schema.APPLICATION!r}: it is not a spatialdp privacy "
                           "ledger", restore)
    for key in schema.SETTINGS:
        if key not in meta:
            raise ledger_error(path, f"stores no {key!r} setting", _EDITED)
    version = meta.get("schema_version")
    if not (isinstance(version, str) and version.isdigit() and len(version) < 10):
        raise ledger_error(path, f"stores the setting schema_version={version!r}, which is "
                           "not a whole number", _EDITED)
    if int(version) > schema.SCHEMA_VERSION:
        raise ledger_error(path, f"has ledger schema version {version}, newer than the "
                           f"{schema.SCHEMA_VERSION} this spatialdp understands",
                           "upgrade spatialdp to read it")
    if int(version) < 1:
        raise ledger_error(path, f"stores the setting schema_version={version!r}; versions "
                           "start at 1", _EDITED)
    for table in schema.table_columns():
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
    ledger_id = meta.get("ledger_id") or schema.ledger_id_from(str(meta.get("created_at", "")))
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
    relation = schema.column_or_default(conn, "charges", "neighbours")
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
