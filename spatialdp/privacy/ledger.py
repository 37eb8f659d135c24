"""A durable record of privacy spent: :class:`PrivacyLedger`, on SQLite.

The ledger holds the worst-case loss of any single client, per epoch, in one
accounting unit (pure epsilon or zCDP rho, see :mod:`spatialdp.privacy.budget`).
Every charge is checked against its line-item cap and recorded in the same
``BEGIN IMMEDIATE`` transaction, so concurrent processes cannot overspend and a
process killed mid-charge leaves the whole charge or none of it.

The file is in WAL mode, and after every committed charge or borrow the ledger
checkpoints the WAL into the main file and empties it, so a plain copy of the
ledger file alone (``cp ledger.sqlite backup.sqlite``) taken between charges
holds every charge. A copy taken while another process is in the middle of a
charge, or holds a read snapshot, may lag; use ``sqlite3 ledger.sqlite
".backup copy.sqlite"`` (or ``sqlite3.Connection.backup``) for a copy during activity.

The file is checked on open; every failure a user can cause is a
:class:`~spatialdp.exceptions.LedgerError` or ``InvalidInput`` naming the file,
what is wrong and the fix. This module holds the class, the checks of its
arguments and its reports (DataFrames); the file itself - schema, opening,
stored-content checks, caps and the borrowing rule - is the private
``_ledger_store``.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from typing import TYPE_CHECKING, Any

from spatialdp._validation import (
    check_choice,
    check_count,
    check_delta,
    check_epsilon,
    check_flag,
    check_instance,
    check_number,
    check_text,
    fail,
)
from spatialdp.exceptions import BudgetExceeded, LedgerError, SpatialDPError
from spatialdp.privacy import _ledger_store as store
from spatialdp.privacy.budget import (
    Accounting,
    BudgetSplit,
    Disjoint,
    LineItem,
    Neighbours,
    Overlapping,
    Single,
    Structure,
    check_neighbours,
    rho_to_epsilon,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Charge", "PrivacyLedger"]

_UNIT = {"pure": "epsilon", "zcdp": "rho"}


#: Longest wait for another process's lock, in seconds (one day).
MAX_TIMEOUT = 86_400.0


@dataclass(frozen=True)
class Charge:
    """The receipt of a recorded charge (amounts in the ledger's unit).

    Attributes
    ----------
    release_id, line_item : str
        The release's unique id, and the line item charged.
    epoch : int
        The epoch charged.
    charged, remaining : float
        The amount charged, and what the line item has left after it.
    recorded_at : str
        UTC time stamp, ISO 8601.
    """

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
        SQLite file or ``":memory:"``. A path that does not exist is created
        (atomically); an existing file must be a ledger: an empty or foreign
        file is refused, never overwritten.
    epoch_budget : float, optional
        Per-client budget of each epoch, in the ledger's unit (at most 1e6).
        Required for a new ledger; when reopening, omit it or pass the stored value.
    accounting : {"pure", "zcdp"}, optional
        Unit of the ledger: pure epsilon or zCDP rho. New ledgers default to "pure".
    split : BudgetSplit, optional
        Training/evaluation and global/regional shares (default 70/30, 20% global).
    timeout : float, default 30.0
        Seconds to wait for another process's transaction before giving up
        with a :class:`LedgerError`.
    read_only : bool, default False
        Open an existing file with SQLite's ``mode=ro``: reading works, charges
        and borrows are refused. A file this process may not write must be
        opened this way (a WAL ledger also needs its folder writable, or its
        ``-wal`` and ``-shm`` files present, for SQLite to read it).

    Raises
    ------
    InvalidInput
        An argument of the wrong type or out of range.
    LedgerError
        The file is missing (read-only), empty, foreign, damaged, locked, edited
        (a stored setting or amount out of range) or configured differently.

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
        read_only: bool = False,
    ) -> None:
        self._lock = threading.RLock()  # one connection, used by any thread, one at a time
        self._conn: sqlite3.Connection | None = None
        self._path = _check_path(path)
        self._timeout = _check_timeout(timeout)
        self._read_only = _check_read_only(read_only, self._path)
        budget, acc, sp = _check_configuration(epoch_budget, accounting, split)
        self._conn, stored = store.open_ledger(self._path, self._timeout, self._read_only,
                                               budget, acc, sp)
        if self._path != store.MEMORY:
            # A damaged index can hide charges from the budget checks (an edited byte in
            # the spend table's index made spent() read 0): SQLite's full check on open.
            try:
                with self._transaction("checking the file"):
                    store.integrity(self._conn, self._path)
            except BaseException:
                self.close()
                raise
        self._accounting = stored.accounting
        self._budget = stored.epoch_budget
        self._split = stored.split
        self._base = stored.base
        self._id = stored.ledger_id

    # -- plumbing ---------------------------------------------------------------------

    def _live(self) -> sqlite3.Connection:
        if self._conn is None:
            raise store.ledger_error(self._path, "is closed",
                                     "open a new PrivacyLedger on the file")
        return self._conn

    def _writable(self, action: str) -> None:
        if self._read_only:
            raise store.ledger_error(self._path, f"was opened with read_only=True, so "
                                     f"{action} is refused", "open it with read_only=False")

    @contextmanager
    def _transaction(self, action: str, mode: str = "DEFERRED"
                     ) -> Iterator[sqlite3.Connection]:
        """Hold the ledger's lock for one SQLite transaction.

        Every read and charge is one transaction, so threads sharing a ledger
        (a Flower server thread, a notebook's workers) take turns; processes
        sharing the file are serialised by SQLite's own locks.
        """
        with self._lock, store.transaction(self._live(), self._path, action, self._timeout,
                                           mode) as conn:
            yield conn

    def _checkpoint(self) -> None:
        """Copy the WAL into the main file after a committed write, and empty the WAL.

        A plain copy of the ledger file (without its ``-wal``) is then complete.
        Best effort: while another connection holds a read snapshot the WAL
        cannot be emptied, and the next write or close completes the checkpoint.
        """
        if self._path != store.MEMORY:
            with self._lock, suppress(sqlite3.Error):
                self._live().execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    # -- properties ---------------------------------------------------------------------

    @property
    def path(self) -> str:
        """The SQLite file (or ``":memory:"``)."""
        return self._path

    @property
    def ledger_id(self) -> str:
        """The ledger's identifier (``ledger-`` and 16 hex digits), stable for its file.

        Results and published files name the ledger by this identifier, never
        by its path (a path names a machine's folders).
        """
        return self._id

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

    @property
    def read_only(self) -> bool:
        """Whether charges and borrows are refused (the file was opened ``mode=ro``)."""
        return self._read_only

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
        neighbours: Neighbours = "replace",
    ) -> Charge:
        """Check a release against its cap and record it, atomically; refuse if it does not fit.

        Parameters
        ----------
        epoch : int
            Epoch the release belongs to (a whole number >= 0).
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
        neighbours : {"replace", "add_remove"}, default "replace"
            The neighbouring relation the loss holds for (recorded with the charge).

        Returns
        -------
        Charge
            The amount charged (ledger unit) and what remains on the line item.

        Raises
        ------
        BudgetExceeded
            The charge does not fit in the remaining cap; nothing is recorded.
        InvalidInput
            An argument of the wrong type or out of range.
        LedgerError
            ``rho`` on a pure ledger, a duplicate ``release_id``, a read-only
            ledger, or a file that is locked or damaged.

        Examples
        --------
        >>> from spatialdp.privacy.budget import Overlapping
        >>> with PrivacyLedger(epoch_budget=1.0) as ledger:
        ...     c = ledger.spend(0, "evaluation.regional", epsilon=0.05, round_index=3,
        ...                      structure=Overlapping("h3:res7@v2", parts=900,
        ...                                            max_parts_per_client=2),
        ...                      who="ana", what="loss by cell", why="drift check")
        >>> round(c.charged, 6), round(c.remaining, 6)
        (0.1, 0.14)
        """
        ep = _check_index(epoch, "epoch")
        item = LineItem.parse(line_item)
        structure = _check_structure(structure)
        who, what, why = (_check_audit_text(v, k)
                          for k, v in (("who", who), ("what", what), ("why", why)))
        unit, loss = _check_loss(epsilon, rho, self._accounting)
        rounds = None if round_index is None else _check_index(round_index, "round_index")
        relation = check_neighbours(neighbours)
        rid = uuid.uuid4().hex if release_id is None else _check_audit_text(
            release_id, "release_id")
        self._writable("charging")
        charged = store.charged(loss, unit, self._accounting, structure.multiplier)
        when = store.now()
        with self._transaction("charging", "IMMEDIATE") as conn:
            cap, new_total = store.fit(conn, self._base, epoch=ep, item=item, charged=charged,
                                       unit=self.unit, release_id=rid,
                                       label=f"{what!r} ({structure.describe()})")
            store.insert_charge(
                conn,
                release_id=rid, epoch=ep, line_item=item.value, charged=store.fmt(charged),
                loss=store.fmt(loss), loss_unit=unit, structure_kind=structure.kind,
                structure_name=structure.name, parts=structure.parts,
                max_parts_per_client=structure.max_parts_per_client,
                multiplier=structure.multiplier, structure=structure.describe(),
                who=who, what=what, why=why, round=rounds, recorded_at=when,
                neighbours=relation,
            )  # fmt: skip
            store.add_to_total(conn, ep, item.value, new_total)
        self._checkpoint()
        return Charge(rid, ep, item.value, float(charged), float(cap - new_total), when)

    def check_charge(
        self,
        epoch: int,
        line_item: str | LineItem,
        *,
        structure: Structure | None = None,
        epsilon: float | None = None,
        rho: float | None = None,
        charges: int = 1,
    ) -> None:
        """Refuse, recording nothing, when ``charges`` such charges would not fit now.

        The amounts are computed exactly as :meth:`spend` records them. A
        protocol of several rounds, each charged before its own noise, checks
        its whole cost first, so it is never refused half-way. Passing is no
        reservation: :meth:`spend` checks again, atomically.

        Raises
        ------
        BudgetExceeded
            The charges do not fit in what the line item has left.
        LedgerError
            ``rho`` on a pure-epsilon ledger.

        Examples
        --------
        >>> with PrivacyLedger(epoch_budget=1.0) as ledger:
        ...     ledger.check_charge(0, "training", epsilon=0.2, charges=3)   # 0.6 of 0.7: fits
        ...     ledger.check_charge(0, "training", epsilon=0.2, charges=4)   # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        spatialdp.exceptions.BudgetExceeded: 4 charge(s) of 0.2 epsilon (0.8 in all) ...
        """
        ep = _check_index(epoch, "epoch")
        item = LineItem.parse(line_item)
        multiplier = 1 if structure is None else _check_structure(structure).multiplier
        unit, loss = _check_loss(epsilon, rho, self._accounting)
        n = _check_index(charges, "charges")
        one = store.charged(loss, unit, self._accounting, multiplier)
        total = store.UP.multiply(one, Decimal(n))
        with self._transaction("checking a charge") as conn:
            limit, _ = store.cap(conn, self._base, ep, item)
            so_far, _ = store.spent(conn, ep, item)
        left = store.DOWN.subtract(limit, so_far)
        if total > left:
            raise BudgetExceeded(
                f"{n} charge(s) of {float(one):.6g} {self.unit} ({float(total):.6g} in all) "
                f"to epoch {ep} line item {item.value!r} exceeds its cap: "
                f"{float(so_far):.6g} of {float(limit):.6g} spent, {float(left):.6g} "
                "remaining; nothing was charged. Lower the loss or the number of rounds, or "
                "use a later epoch")

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
        """Move ``amount`` of the next epoch's evaluation allowance into ``epoch``.

        The cap of ``line_item`` grows by ``amount`` in ``epoch`` and shrinks by
        the same in ``epoch + 1``. The rule: only evaluation items borrow; an
        epoch borrows at most once; an epoch that lent cannot borrow and an
        epoch that borrowed cannot lend (no chains), so no epoch's cap ever
        exceeds its base cap plus one approved borrow, and ``amount`` is at
        most what ``epoch + 1`` has left on ``line_item``.

        Parameters
        ----------
        epoch : int
            The borrowing epoch; ``epoch + 1`` lends.
        amount : float
            How much to move, in the ledger's unit.
        approver, who, why : str
            Who approved the borrow, who asked, and why (all recorded).
        line_item : str or LineItem, default "evaluation.regional"
            An evaluation line item.

        Raises
        ------
        InvalidInput
            Empty approver, non-positive amount, or another bad argument.
        LedgerError
            A second borrow for ``epoch``, a borrow by an epoch that lent or from
            an epoch that borrowed, a training line item, or a read-only ledger.
        BudgetExceeded
            ``epoch + 1`` has less than ``amount`` left on ``line_item``.

        Examples
        --------
        >>> with PrivacyLedger(epoch_budget=1.0) as ledger:
        ...     ledger.borrow(0, 0.1, approver="lead@example.org", who="ana", why="incident 7")
        ...     [round(ledger.cap(e, "evaluation.regional"), 6) for e in (0, 1)]
        [0.34, 0.14]
        """
        ep = _check_index(epoch, "epoch")
        value = _check_amount(amount, "amount")
        item = LineItem.parse(line_item)
        approver, who, why = (_check_audit_text(v, k) for k, v in
                              (("approver", approver), ("who", who), ("why", why)))
        self._writable("borrowing")
        with self._transaction("borrowing", "IMMEDIATE") as conn:
            store.borrow(conn, self._base, epoch=ep, item=item, amount=value, unit=self.unit,
                         audit=(approver, who, why))
        self._checkpoint()

    # -- reading ----------------------------------------------------------------------

    def cap(self, epoch: int, line_item: str | LineItem) -> float:
        """Return the cap of ``line_item`` in ``epoch``, after borrowing.

        Parameters
        ----------
        epoch : int
        line_item : str or LineItem

        Returns
        -------
        float
            The cap, in :attr:`unit`.
        """
        ep, item = _check_index(epoch, "epoch"), LineItem.parse(line_item)
        with self._transaction("reading a cap") as conn:
            return float(store.cap(conn, self._base, ep, item)[0])

    def spent(self, epoch: int, line_item: str | LineItem | None = None) -> float:
        """Return what was spent on ``line_item`` in ``epoch`` (all items if ``None``).

        Parameters
        ----------
        epoch : int
        line_item : str or LineItem, optional
            One line item; by default the sum over all three.

        Returns
        -------
        float
            The amount spent, in :attr:`unit`.
        """
        ep = _check_index(epoch, "epoch")
        items = list(LineItem) if line_item is None else [LineItem.parse(line_item)]
        with self._transaction("reading spent budget") as conn:
            total = sum((store.spent(conn, ep, i)[0] for i in items), Decimal(0))
        return float(total)

    def remaining(self, epoch: int, line_item: str | LineItem) -> float:
        """Return what ``line_item`` can still spend in ``epoch`` (cap minus spent).

        Parameters
        ----------
        epoch : int
        line_item : str or LineItem

        Returns
        -------
        float
            The amount left, in :attr:`unit`.
        """
        ep, item = _check_index(epoch, "epoch"), LineItem.parse(line_item)
        with self._transaction("reading remaining budget") as conn:
            return float(store.cap(conn, self._base, ep, item)[0] - store.spent(conn, ep, item)[0])

    def epochs(self) -> list[int]:
        """Return the epochs with at least one charge or borrow, in order."""
        with self._transaction("listing epochs") as conn:
            rows = conn.execute(
                "SELECT epoch FROM spend UNION SELECT epoch FROM borrows ORDER BY epoch")
            return [int(r[0]) for r in rows]

    def summary(self, epoch: int, *, delta: float | None = None) -> pd.DataFrame:
        """Return line items x (base_cap, borrowed, cap, spent, remaining, n_charges).

        Parameters
        ----------
        epoch : int
            The epoch to summarise.
        delta : float, optional
            For a zCDP ledger, adds ``spent_epsilon``: each row's spent rho
            converted to epsilon at this delta.

        Returns
        -------
        pandas.DataFrame
            Rows are the three line items, then the ``evaluation`` subtotal and
            the ``total`` (amounts in :attr:`unit`).

        Examples
        --------
        >>> with PrivacyLedger(epoch_budget=2.0) as ledger:
        ...     caps = ledger.summary(0)["cap"]
        >>> [round(float(caps[k]), 6) for k in ("training", "evaluation", "total")]
        [1.4, 0.6, 2.0]
        """
        ep = _check_index(epoch, "epoch")
        conv = None
        if delta is not None:
            d = check_delta(delta)
            if self._accounting == "zcdp":
                conv = partial(rho_to_epsilon, delta=d)
        with self._transaction("summarising an epoch") as conn:
            rows = store.epoch_rows(conn, self._base, ep)
        return _summary_frame(rows, self.unit, conv)

    def audit(self, epoch: int | None = None) -> pd.DataFrame:
        """Return every charge (who / what / when / why, structure, amounts), oldest first.

        Parameters
        ----------
        epoch : int, optional
            Only this epoch's charges.

        Returns
        -------
        pandas.DataFrame
            One row per charge; ``recorded_at`` in UTC.
        """
        ep = None if epoch is None else _check_index(epoch, "epoch")
        with self._transaction("reading the audit trail") as conn:
            return _audit_frame(conn, self.unit, ep)

    def borrows(self) -> pd.DataFrame:
        """Return every borrow: epoch, line item, amount, approver, who, why, when."""
        with self._transaction("reading the borrows") as conn:
            return _borrows_frame(conn)

    def verify(self) -> dict[str, int]:
        """Check the whole file: SQLite integrity, amounts, totals, borrows and caps.

        Returns
        -------
        dict of str to int
            Counts of ``charges``, ``line_items`` (epoch x item totals) and ``borrows``.

        Raises
        ------
        LedgerError
            Describing the first inconsistency.

        Examples
        --------
        >>> with PrivacyLedger(epoch_budget=1.0) as ledger:
        ...     ledger.verify()
        {'charges': 0, 'line_items': 0, 'borrows': 0}
        """
        with self._transaction("verifying the file") as conn:
            store.integrity(conn, self._path)
            return store.check_contents(conn, self._path, self._base)

    # -- lifecycle ----------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection (idempotent; waits for another thread's transaction).

        A read-only ledger then lets SQLite remove the ``-wal``/``-shm`` files its
        connection created (:func:`~spatialdp.privacy._ledger_store.tidy_side_files`).
        """
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
                if self._read_only:
                    store.tidy_side_files(self._path, self._timeout)

    def __enter__(self) -> PrivacyLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- copies and pickles: one ledger is one budget ------------------------------------

    def __copy__(self) -> PrivacyLedger:
        """Return this ledger itself: a copy would be a second budget for the same clients."""
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> PrivacyLedger:
        """Return this ledger itself (``copy.deepcopy``, scikit-learn's ``clone``): shared.

        Examples
        --------
        >>> import copy
        >>> with PrivacyLedger(epoch_budget=1.0) as ledger:
        ...     copy.deepcopy({"ledger": ledger})["ledger"] is ledger
        True
        """
        return self

    def __reduce__(self) -> tuple[Callable[..., PrivacyLedger], tuple[str, str, float, bool]]:
        """Pickle a ledger file as its path: unpickling re-opens the same file.

        So a worker process (joblib, ``n_jobs=2``) charges the same SQLite file,
        whose transactions keep concurrent charges within the caps. An in-memory
        ledger cannot be shared with another process and a closed one is no
        longer in use: both are refused with a :class:`LedgerError`.

        Examples
        --------
        >>> import pickle
        >>> with PrivacyLedger(epoch_budget=1.0) as ledger:
        ...     pickle.dumps(ledger)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        spatialdp.exceptions.LedgerError: ledger ':memory:' is in memory, so it cannot be ...
        """
        if self._path == store.MEMORY:
            raise store.ledger_error(
                self._path, "is in memory, so it cannot be pickled (another process would get a "
                "second, empty budget)", "keep it in one process (e.g. n_jobs=1), or use a "
                "ledger file, PrivacyLedger('ledger.sqlite', ...), which pickles as its path")
        if self._conn is None:
            raise store.ledger_error(self._path, "is closed, so it cannot be pickled",
                                     "pickle an open ledger, or open the file again")
        return _reopen, (os.path.abspath(self._path), self._id, self._timeout, self._read_only)

    def __del__(self) -> None:
        conn = getattr(self, "_conn", None)
        if conn is not None:
            with suppress(Exception):
                conn.close()

    def _repr_html_(self) -> str:
        from spatialdp._results import summary_html

        epochs = self.epochs() if self._conn is not None else []
        if not epochs:
            return summary_html("PrivacyLedger", repr(self))
        latest = epochs[-1]
        return summary_html("PrivacyLedger", repr(self), self.summary(latest),
                            caption=f"epoch {latest} by line item ({self.unit})")

    def __repr__(self) -> str:
        state = "closed"
        if self._conn is not None:
            try:
                with self._transaction("describing the ledger") as conn:
                    state = _state(conn)
            except SpatialDPError:
                state = "unreadable"
        return (f"PrivacyLedger({self._path!r}, accounting={self._accounting!r}, "
                f"epoch_budget={float(self._budget):g} {self.unit}, "
                f"{_describe_split(self._split)}; {state})")


def _reopen(path: str, ledger_id: str, timeout: float, read_only: bool) -> PrivacyLedger:
    """Re-open a pickled ledger file, refusing a file that now holds another ledger."""
    ledger = PrivacyLedger(path, timeout=timeout, read_only=read_only)
    if ledger.ledger_id != ledger_id:
        ledger.close()
        raise store.ledger_error(path, f"now holds {ledger.ledger_id}, not the pickled "
                                 f"{ledger_id}", "unpickle where the same ledger file is found")
    return ledger


# -- the checks of the arguments ----------------------------------------------------------


def _check_index(value: Any, name: str) -> int:
    """Return an epoch or round index: a whole number in ``[0, 2**62]``.

    Examples
    --------
    >>> import numpy as np
    >>> _check_index(np.int64(3), "epoch")
    3
    """
    return check_count(value, name, high=store.MAX_INDEX)


def _check_audit_text(value: Any, name: str) -> str:
    r"""Return audit text (who, what, why, approver, release id), stripped.

    Besides :func:`~spatialdp._validation.check_text`, refuses text SQLite
    cannot store (lone surrogates).

    Examples
    --------
    >>> _check_audit_text(" ana ", "who")
    'ana'
    >>> _check_audit_text("\ud800", "who")  # doctest: +ELLIPSIS
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


def _check_amount(value: Any, name: str) -> Decimal:
    """Return a privacy amount (epsilon, rho, budget) as the decimal the caller wrote.

    Examples
    --------
    >>> import numpy as np
    >>> _check_amount(np.float64(0.1), "epsilon")
    Decimal('0.1')
    """
    return store.dec(check_epsilon(value, name))


def _check_loss(epsilon: Any, rho: Any, accounting: str) -> tuple[str, Decimal]:
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
        return "epsilon", _check_amount(epsilon, "epsilon")
    if accounting == "pure":
        raise LedgerError(
            f"rho={rho!r} cannot be charged to a pure-epsilon ledger: zCDP does not imply "
            "pure DP. Charge the release's pure epsilon, or keep this workload in a "
            "ledger created with accounting='zcdp'.")
    return "rho", _check_amount(rho, "rho")


def _check_path(value: Any) -> str:
    """Return a ledger path as text: ``":memory:"`` or a file path (str or os.PathLike)."""
    try:
        path = os.fspath(value)
    except TypeError:
        path = None
    if not isinstance(path, str):
        raise fail("path", value, f"is a {type(value).__name__}, not a path",
                   "pass a str or pathlib.Path naming the ledger file, or ':memory:'")
    return check_text(path, "path")


def _check_timeout(value: Any) -> float:
    """Return seconds to wait for a lock: finite, ``>= 0``, at most a day."""
    return check_number(value, "timeout", low=0.0, high=MAX_TIMEOUT,
                        fix="pass seconds to wait for another process's lock, e.g. 30.0")


def _check_read_only(value: Any, path: str) -> bool:
    """Return ``read_only``: a ``True``/``False`` switch, refused for an in-memory ledger."""
    read_only = check_flag(value, "read_only")
    if read_only and path == store.MEMORY:
        raise fail("read_only", value, "cannot apply to a new in-memory ledger",
                   "pass the path of a ledger file, or read_only=False")
    return read_only


def _check_configuration(epoch_budget: Any, accounting: Any, split: Any
                         ) -> tuple[Decimal | None, str | None, BudgetSplit | None]:
    """Return the checked ``(epoch_budget, accounting, split)``; ``None`` stays ``None``."""
    budget = None if epoch_budget is None else _check_amount(epoch_budget, "epoch_budget")
    kind = None if accounting is None else check_choice(accounting, "accounting",
                                                        store.ACCOUNTING)
    fix = "pass e.g. BudgetSplit(evaluation_share=0.3, global_share=0.2)"
    shares = None if split is None else check_instance(split, "split", BudgetSplit, fix)
    return budget, kind, shares


def _check_structure(value: Any) -> Structure:
    """Return a release structure: a Single, Disjoint or Overlapping instance."""
    if not isinstance(value, Single | Disjoint | Overlapping):
        raise fail("structure", value, f"is a {type(value).__name__}, not a release structure",
                   "pass Single(name), Disjoint(name, parts) or "
                   "Overlapping(name, parts, max_parts_per_client)")
    return value


# -- reports ------------------------------------------------------------------------------


_AUDIT_COLUMNS = (
    "release_id, recorded_at, epoch, round, line_item, who, what, why, loss, loss_unit, "
    "charged, structure, structure_kind, structure_name, parts, max_parts_per_client, multiplier"
)


def _summary_frame(
    rows: dict[str, dict[str, Decimal]],
    unit: str,
    to_epsilon: Callable[[float], float] | None,
) -> pd.DataFrame:
    """Return line items plus ``evaluation`` subtotal and ``total`` rows, as floats."""
    import pandas as pd

    keys = ("base_cap", "borrowed", "cap", "spent", "remaining", "n_charges")
    groups = {
        "evaluation": [i.value for i in LineItem if i.is_evaluation],
        "total": [i.value for i in LineItem],
    }
    for name, members in groups.items():
        rows[name] = {k: sum((rows[m][k] for m in members), Decimal(0)) for k in keys}
    df = pd.DataFrame.from_dict(rows, orient="index").astype(float)
    df["n_charges"] = df["n_charges"].astype(int)
    df.index.name = "line_item"
    if to_epsilon is not None:
        df["spent_epsilon"] = [to_epsilon(float(s)) for s in df["spent"]]
    df.attrs["unit"] = unit
    return df


def _audit_frame(conn: sqlite3.Connection, unit: str, epoch: int | None) -> pd.DataFrame:
    """Return the ``charges`` table, oldest first, amounts as floats, times as UTC datetimes."""
    import pandas as pd

    relation = store.column_or_default(conn, "charges", "neighbours")
    sql = f"SELECT {_AUDIT_COLUMNS}, {relation} FROM charges"
    args: tuple[int, ...] = ()
    if epoch is not None:
        sql, args = sql + " WHERE epoch = ?", (epoch,)
    cur = conn.execute(sql + " ORDER BY seq", args)
    df = pd.DataFrame(cur.fetchall(), columns=[d[0] for d in cur.description])
    df = df.rename(columns={"round": "round_index"})
    df["recorded_at"] = pd.to_datetime(df["recorded_at"], utc=True, format="ISO8601")
    df["loss"] = df["loss"].astype(float)
    df["charged"] = df["charged"].astype(float)
    df.attrs["unit"] = unit
    return df


def _borrows_frame(conn: sqlite3.Connection) -> pd.DataFrame:
    """Return the ``borrows`` table, by epoch."""
    import pandas as pd

    cur = conn.execute("SELECT * FROM borrows ORDER BY epoch")
    df = pd.DataFrame(cur.fetchall(), columns=[d[0] for d in cur.description])
    df["amount"] = df["amount"].astype(float)
    df["recorded_at"] = pd.to_datetime(df["recorded_at"], utc=True, format="ISO8601")
    return df


def _describe_split(split: BudgetSplit) -> str:
    """Return the split in words, e.g. ``70%/30% training/evaluation, 20% of evaluation global``.

    Examples
    --------
    >>> _describe_split(BudgetSplit())
    '70%/30% training/evaluation, 20% of evaluation global'
    """
    return (f"{1 - split.evaluation_share:.0%}/{split.evaluation_share:.0%} "
            f"training/evaluation, {split.global_share:.0%} of evaluation global")


def _state(conn: sqlite3.Connection) -> str:
    """Return ``"<n> epochs, <m> charges"`` (call inside a read transaction)."""
    epochs, charges = conn.execute(
        "SELECT (SELECT COUNT(*) FROM (SELECT epoch FROM spend UNION SELECT epoch FROM "
        "borrows)), (SELECT COUNT(*) FROM charges)").fetchone()
    return f"{int(epochs)} epochs, {int(charges)} charges"
