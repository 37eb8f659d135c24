"""Line-item caps and the borrowing rule of :mod:`spatialdp.privacy.ledger`.

The rule
--------
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

import sqlite3
from collections.abc import Mapping
from decimal import Decimal
from typing import NamedTuple

from spatialdp.exceptions import BudgetExceeded, LedgerError
from spatialdp.privacy._ledger_schema import DOWN, UP, dec, fmt, now
from spatialdp.privacy.budget import LineItem


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
