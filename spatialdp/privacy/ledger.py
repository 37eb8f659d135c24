"""A durable record of privacy spent: :class:`PrivacyLedger`, on SQLite.

The ledger holds the worst-case loss of any single client, per epoch, in one
accounting unit (pure epsilon or zCDP rho, see :mod:`spatialdp.privacy.budget`).
Every charge is checked against its line-item cap and recorded in the same
``BEGIN IMMEDIATE`` transaction, so concurrent processes cannot overspend and a
process killed mid-charge leaves the whole charge or none of it.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from typing import TYPE_CHECKING

from spatialdp.exceptions import BudgetExceeded, InvalidInput, LedgerError
from spatialdp.privacy import _ledger_reports as reports
from spatialdp.privacy import _ledger_schema as schema
from spatialdp.privacy._ledger_schema import DOWN, UP, dec, fmt
from spatialdp.privacy.budget import (
    Accounting,
    BudgetSplit,
    BudgetSplitWarning,
    LineItem,
    Structure,
    rho_to_epsilon,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Charge", "PrivacyLedger"]

_UNIT = {"pure": "epsilon", "zcdp": "rho"}


@dataclass(frozen=True)
class Charge:
    """The receipt of a recorded charge (amounts in the ledger's unit)."""

    release_id: str
    epoch: int
    line_item: str
    charged: float
    remaining: float
    recorded_at: str


class PrivacyLedger:
    """Per-client privacy spent per epoch, by line item, durable and concurrency-safe.

    Parameters
    ----------
    path : str or os.PathLike, default ":memory:"
        SQLite file (created if missing, resumed if it exists) or ``":memory:"``.
    epoch_budget : float, optional
        Per-client budget of each epoch, in the ledger's unit. Required for a
        new ledger; when reopening, omit it or pass the stored value.
    accounting : {"pure", "zcdp"}, optional
        Unit of the ledger: pure epsilon or zCDP rho. New ledgers default to "pure".
    split : BudgetSplit, optional
        Training/evaluation and global/regional shares (default 70/30, 20% global).
    timeout : float, default 30.0
        Seconds to wait for another process's transaction before giving up.

    Examples
    --------
    >>> from spatialdp.privacy.budget import Disjoint
    >>> with PrivacyLedger(":memory:", epoch_budget=1.0) as ledger:
    ...     c = ledger.spend(0, "evaluation.regional", epsilon=0.1,
    ...                      structure=Disjoint("partition:us48@ab12cd", parts=48),
    ...                      who="ana", what="mean loss by state", why="daily dashboard")
    ...     round(ledger.remaining(0, "evaluation.regional"), 6)
    0.14
    """

    def __init__(
        self,
        path: str | os.PathLike[str] = ":memory:",
        *,
        epoch_budget: float | None = None,
        accounting: Accounting | None = None,
        split: BudgetSplit | None = None,
        timeout: float = 30.0,
    ) -> None:
        self._path = os.fspath(path)
        self._conn: sqlite3.Connection | None = schema.connect(self._path, timeout)
        try:
            self._open(epoch_budget, accounting, split)
        except BaseException:
            self.close()
            raise

    def _open(
        self, epoch_budget: float | None, accounting: str | None, split: BudgetSplit | None
    ) -> None:
        conn = self._live()
        meta = schema.read_meta(conn)
        if not meta:
            if epoch_budget is None:
                raise LedgerError(
                    f"{self._path!r} is a new ledger and epoch_budget was not given; pass "
                    "epoch_budget=<per-client budget per epoch> to create it."
                )
            acc = accounting or "pure"
            if acc not in _UNIT:
                raise InvalidInput(f"accounting={acc!r} is not 'pure' or 'zcdp'; pick one.")
            budget = schema.check_positive("epoch_budget", epoch_budget)
            sp = split if split is not None else BudgetSplit()
            config = {
                "accounting": acc,
                "epoch_budget": fmt(budget),
                "evaluation_share": repr(sp.evaluation_share),
                "global_share": repr(sp.global_share),
                "created_at": schema.now(),
            }
            meta = schema.initialise(conn, config)
        schema.check_version(meta, self._path)
        self._accounting: str = meta["accounting"]
        self._budget = Decimal(meta["epoch_budget"])
        with warnings.catch_warnings():  # warned when the split was first made
            warnings.simplefilter("ignore", BudgetSplitWarning)
            self._split = BudgetSplit(float(meta["evaluation_share"]), float(meta["global_share"]))
        given = {
            "epoch_budget": None if epoch_budget is None else dec(epoch_budget),
            "accounting": accounting,
            "split": split,
        }
        stored = {
            "epoch_budget": self._budget,
            "accounting": self._accounting,
            "split": self._split,
        }
        for key, value in given.items():
            if value is not None and value != stored[key]:
                raise LedgerError(
                    f"{self._path!r} was created with {key}={stored[key]!r}, but {key}="
                    f"{value!r} was passed; omit {key} to resume the stored ledger, or use a "
                    "new file for a different configuration."
                )
        ev = DOWN.multiply(self._budget, dec(self._split.evaluation_share))
        gl = DOWN.multiply(ev, dec(self._split.global_share))
        self._base = {
            LineItem.TRAINING: DOWN.subtract(self._budget, ev),
            LineItem.EVALUATION_GLOBAL: gl,
            LineItem.EVALUATION_REGIONAL: DOWN.subtract(ev, gl),
        }

    # -- plumbing ---------------------------------------------------------------------

    def _live(self) -> sqlite3.Connection:
        if self._conn is None:
            raise LedgerError(
                f"the ledger {self._path!r} is closed; open a new PrivacyLedger on the file."
            )
        return self._conn

    @contextmanager
    def _transaction(self, mode: str = "IMMEDIATE") -> Iterator[sqlite3.Connection]:
        conn = self._live()
        conn.execute(f"BEGIN {mode}")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _cap(self, conn: sqlite3.Connection, epoch: int, item: LineItem) -> tuple[Decimal, Decimal]:
        """(cap, adjustment from borrowing) of ``item`` in ``epoch``."""
        adj = Decimal(0)
        for ep, amount in conn.execute(
            "SELECT epoch, amount FROM borrows WHERE epoch IN (?, ?) AND line_item = ?",
            (epoch, epoch - 1, item.value),
        ):
            adj = UP.add(adj, Decimal(amount)) if ep == epoch else UP.subtract(adj, Decimal(amount))
        return DOWN.add(self._base[item], adj), adj

    def _spent(self, conn: sqlite3.Connection, epoch: int, item: LineItem) -> tuple[Decimal, int]:
        row = conn.execute(
            "SELECT spent, n_charges FROM spend WHERE epoch = ? AND line_item = ?",
            (epoch, item.value),
        ).fetchone()
        return (Decimal(row[0]), int(row[1])) if row else (Decimal(0), 0)

    # -- properties ---------------------------------------------------------------------

    @property
    def path(self) -> str:
        """The SQLite file (or ``":memory:"``)."""
        return self._path

    @property
    def accounting(self) -> str:
        """``"pure"`` or ``"zcdp"``."""
        return self._accounting

    @property
    def unit(self) -> str:
        """Unit of every amount the ledger reports: ``"epsilon"`` or ``"rho"``."""
        return _UNIT[self._accounting]

    @property
    def epoch_budget(self) -> float:
        """Per-client budget of each epoch, in :attr:`unit`."""
        return float(self._budget)

    @property
    def split(self) -> BudgetSplit:
        """The training/evaluation and global/regional shares."""
        return self._split

    # -- charging ---------------------------------------------------------------------

    def spend(
        self,
        epoch: int,
        line_item: str | LineItem,
        *,
        structure: Structure,
        who: str,
        what: str,
        why: str,
        epsilon: float | None = None,
        rho: float | None = None,
        round_index: int | None = None,
        release_id: str | None = None,
    ) -> Charge:
        """Check a release against its cap and record it, atomically; refuse if it does not fit.

        Parameters
        ----------
        epoch : int
            Epoch the release belongs to.
        line_item : str or LineItem
            ``"training"``, ``"evaluation.global"`` or ``"evaluation.regional"``.
        structure : Single, Disjoint or Overlapping
            What the release covers; it sets the multiplier (1 for disjoint
            parts, k for overlapping ones) and is recorded.
        who, what, why : str
            Audit fields: the person or service, the released quantity, the reason.
        epsilon, rho : float
            Exactly one: the per-release loss (per part, for uncalibrated
            :class:`Overlapping`). A pure ledger refuses ``rho``; a zCDP ledger
            counts ``epsilon`` as ``epsilon**2 / 2``.
        round_index : int, optional
            Training round the release belongs to (recorded).
        release_id : str, optional
            Unique id of the release (default: a random UUID). Charging the same
            id twice raises :class:`LedgerError`, which makes retries safe.

        Returns
        -------
        Charge
            The amount charged (ledger unit) and what remains on the line item.

        Raises
        ------
        BudgetExceeded
            The charge does not fit in the remaining cap; nothing is recorded.
        LedgerError
            ``rho`` on a pure ledger, or a duplicate ``release_id``.
        """
        ep = schema.check_epoch(epoch)
        item = LineItem.parse(line_item)
        who, what, why = (
            schema.check_text("who", who, "who='ana@example.org'"),
            schema.check_text("what", what, "what='mean loss by region'"),
            schema.check_text("why", why, "why='daily regional dashboard'"),
        )
        if (epsilon is None) == (rho is None):
            raise InvalidInput(
                f"spend got epsilon={epsilon!r} and rho={rho!r}; pass exactly one of them."
            )
        if rho is not None and self._accounting == "pure":
            raise LedgerError(
                f"rho={rho!r} cannot be charged to a pure-epsilon ledger: zCDP does not imply "
                "pure DP. Charge the release's pure epsilon, or keep this workload in a "
                "ledger created with accounting='zcdp'."
            )
        unit, loss = (
            ("rho", schema.check_positive("rho", rho))
            if rho is not None
            else ("epsilon", schema.check_positive("epsilon", epsilon))
        )
        per_part = (
            UP.multiply(UP.power(loss, 2), Decimal("0.5"))
            if (unit == "epsilon" and self._accounting == "zcdp")
            else loss
        )
        charged = UP.multiply(per_part, Decimal(structure.multiplier))
        rid = release_id if release_id is not None else uuid.uuid4().hex
        schema.check_text("release_id", rid, "release_id='round-12/regional-loss'")
        when = schema.now()
        with self._transaction() as conn:
            if conn.execute("SELECT 1 FROM charges WHERE release_id = ?", (rid,)).fetchone():
                raise LedgerError(
                    f"release_id={rid!r} is already charged; a release is charged once. "
                    "Use a new id for a new release (look the old one up with audit())."
                )
            cap, _ = self._cap(conn, ep, item)
            spent, _ = self._spent(conn, ep, item)
            new_total = UP.add(spent, charged)
            if new_total > cap:
                remaining = DOWN.subtract(cap, spent)
                hint = (
                    f"or borrow from epoch {ep + 1} once with a named approver"
                    if item.is_evaluation
                    else "or let training back off until the next epoch"
                )
                raise BudgetExceeded(
                    f"charge of {float(charged):.6g} {self.unit} for {what!r} "
                    f"({structure.describe()}) to epoch {ep} line item {item.value!r} exceeds "
                    f"its cap: {float(spent):.6g} of {float(cap):.6g} spent, "
                    f"{float(remaining):.6g} remaining. Reduce the loss (publish less often or "
                    f"at coarser precision), {hint}."
                )
            schema.insert_charge(
                conn,
                release_id=rid, epoch=ep, line_item=item.value, charged=fmt(charged),
                loss=fmt(loss), loss_unit=unit, structure_kind=structure.kind,
                structure_name=structure.name, parts=structure.parts,
                max_parts_per_client=structure.max_parts_per_client,
                multiplier=structure.multiplier, structure=structure.describe(),
                who=who, what=what, why=why, round=round_index, recorded_at=when,
            )  # fmt: skip
            schema.add_to_total(conn, ep, item.value, new_total)
        return Charge(rid, ep, item.value, float(charged), float(cap - new_total), when)

    def borrow(
        self,
        epoch: int,
        amount: float,
        *,
        approver: str,
        who: str,
        why: str,
        line_item: str | LineItem = LineItem.EVALUATION_REGIONAL,
    ) -> None:
        """Move ``amount`` of next epoch's evaluation allowance into ``epoch``; once per epoch.

        The cap of ``line_item`` grows by ``amount`` in ``epoch`` and shrinks by
        the same in ``epoch + 1``. Only evaluation items may borrow.

        Raises
        ------
        InvalidInput
            Empty approver, non-positive amount.
        LedgerError
            A second borrow for ``epoch``, or a training line item.
        BudgetExceeded
            ``epoch + 1`` has less than ``amount`` left on ``line_item``.
        """
        ep = schema.check_epoch(epoch)
        item = LineItem.parse(line_item)
        approver = schema.check_text("approver", approver, "approver='head-of-privacy@example.org'")
        who = schema.check_text("who", who, "who='ana@example.org'")
        why = schema.check_text("why", why, "why='incident 4411: regional drift'")
        value = schema.check_positive("amount", amount)
        if not item.is_evaluation:
            raise LedgerError(
                f"line_item={item.value!r} cannot borrow: only evaluation may borrow from the "
                "next epoch. Let training back off instead."
            )
        with self._transaction() as conn:
            prior = conn.execute(
                "SELECT line_item, amount, approver FROM borrows WHERE epoch = ?", (ep,)
            ).fetchone()
            if prior:
                raise LedgerError(
                    f"epoch {ep} already borrowed {prior[1]} {self.unit} for {prior[0]!r} "
                    f"(approved by {prior[2]!r}); evaluation may borrow once per epoch. "
                    f"Wait for epoch {ep + 1}."
                )
            cap, _ = self._cap(conn, ep + 1, item)
            spent, _ = self._spent(conn, ep + 1, item)
            left = DOWN.subtract(cap, spent)
            if value > left:
                raise BudgetExceeded(
                    f"borrowing {float(value):.6g} {self.unit} for epoch {ep} {item.value!r} "
                    f"exceeds what epoch {ep + 1} has left on that item ({float(left):.6g}); "
                    "borrow at most that much."
                )
            conn.execute(
                "INSERT INTO borrows (epoch, line_item, amount, approver, who, why, "
                "recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (ep, item.value, fmt(value), approver, who, why, schema.now()),
            )

    # -- reading ----------------------------------------------------------------------

    def cap(self, epoch: int, line_item: str | LineItem) -> float:
        """The cap of ``line_item`` in ``epoch``, after borrowing."""
        with self._transaction("DEFERRED") as conn:
            return float(self._cap(conn, schema.check_epoch(epoch), LineItem.parse(line_item))[0])

    def spent(self, epoch: int, line_item: str | LineItem | None = None) -> float:
        """Spent on ``line_item`` in ``epoch`` (all items if ``None``)."""
        items = list(LineItem) if line_item is None else [LineItem.parse(line_item)]
        with self._transaction("DEFERRED") as conn:
            total = sum(
                (self._spent(conn, schema.check_epoch(epoch), i)[0] for i in items), Decimal(0)
            )
        return float(total)

    def remaining(self, epoch: int, line_item: str | LineItem) -> float:
        """What ``line_item`` can still spend in ``epoch``."""
        ep, item = schema.check_epoch(epoch), LineItem.parse(line_item)
        with self._transaction("DEFERRED") as conn:
            return float(self._cap(conn, ep, item)[0] - self._spent(conn, ep, item)[0])

    def epochs(self) -> list[int]:
        """Epochs with at least one charge or borrow."""
        rows = self._live().execute(
            "SELECT epoch FROM spend UNION SELECT epoch FROM borrows ORDER BY epoch"
        )
        return [int(r[0]) for r in rows]

    def summary(self, epoch: int, *, delta: float | None = None) -> pd.DataFrame:
        """Line items x (base_cap, borrowed, cap, spent, remaining, n_charges) for ``epoch``.

        Rows are the three line items, then the ``evaluation`` subtotal and the
        ``total`` (amounts in :attr:`unit`). For a zCDP ledger, ``delta`` adds
        ``spent_epsilon``: each row's spent rho converted to epsilon at that delta.

        Examples
        --------
        >>> with PrivacyLedger(epoch_budget=2.0) as ledger:
        ...     caps = ledger.summary(0)["cap"]
        >>> [round(float(caps[k]), 6) for k in ("training", "evaluation", "total")]
        [1.4, 0.6, 2.0]
        """
        ep = schema.check_epoch(epoch)
        rows: dict[str, dict[str, Decimal]] = {}
        with self._transaction("DEFERRED") as conn:
            for item in LineItem:
                cap, adj = self._cap(conn, ep, item)
                spent, n = self._spent(conn, ep, item)
                rows[item.value] = {
                    "base_cap": self._base[item],
                    "borrowed": adj,
                    "cap": cap,
                    "spent": spent,
                    "remaining": cap - spent,
                    "n_charges": Decimal(n),
                }
        conv = None
        if delta is not None and self._accounting == "zcdp":
            conv = partial(rho_to_epsilon, delta=delta)
        return reports.summary_frame(rows, self.unit, conv)

    def audit(self, epoch: int | None = None) -> pd.DataFrame:
        """Every charge (who / what / when / why, structure, amounts), oldest first."""
        ep = None if epoch is None else schema.check_epoch(epoch)
        return reports.audit_frame(self._live(), self.unit, ep)

    def borrows(self) -> pd.DataFrame:
        """Every borrow: epoch, line item, amount, approver, who, why, when."""
        return reports.borrows_frame(self._live())

    def verify(self) -> dict[str, int]:
        """Check the file: SQLite integrity, line-item totals = audit rows, spent <= cap.

        Returns counts (``charges``, ``line_items``, ``borrows``) or raises
        :class:`LedgerError` describing the first inconsistency.
        """
        with self._transaction("DEFERRED") as conn:
            return reports.verify(
                conn, self._path, lambda ep, item: self._cap(conn, ep, LineItem.parse(item))[0]
            )

    # -- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> PrivacyLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        split = (
            f"{1 - self._split.evaluation_share:.0%}/{self._split.evaluation_share:.0%} "
            f"training/evaluation, {self._split.global_share:.0%} of evaluation global"
        )
        state = "closed"
        if self._conn is not None:
            n = self._conn.execute("SELECT COUNT(*) FROM charges").fetchone()[0]
            state = f"{len(self.epochs())} epochs, {n} charges"
        return (
            f"PrivacyLedger({self._path!r}, accounting={self._accounting!r}, "
            f"epoch_budget={float(self._budget):g} {self.unit}, {split}; {state})"
        )
