"""The one release order: validate, compute what can fail, charge, draw noise, publish.

Every function that publishes a private number builds :class:`ReleasePlan`
objects first (validation and every computation that can refuse: sums, floors,
clipping checks, noise scales, error bars), then hands them to
:func:`run_release`, the only code in spatialdp that charges a ledger (a test
walks the package's syntax trees to keep it so). :func:`run_release` checks the
target and the draws, charges the plans' total once, and only then draws the
noise and calls each plan's ``finish``. A refusal therefore never leaves a
trace in the ledger, and no noise is drawn for a release that was not charged.

A plan charges pure epsilon or zCDP rho (a Gaussian release), never both, and
names the neighbouring relation its privacy loss holds for
(:data:`NEIGHBOURS`): ``"replace"`` (one client's values replaced, its
participation fixed and public) or ``"add_remove"`` (one client added or
removed: participation itself is protected).

Examples
--------
>>> import numpy as np
>>> from spatialdp.privacy import LaplaceMechanism, PrivacyLedger, ReleaseTarget
>>> from spatialdp.privacy.budget import Single
>>> counts = np.array([12, 30])
>>> plan = ReleasePlan(0.5, [(LaplaceMechanism(0.5, 1.0, discrete=True), counts)],
...                    finish=lambda noisy: noisy[0])
>>> with PrivacyLedger(":memory:", epoch_budget=20.0) as ledger:
...     (noisy,) = run_release([plan], target=ReleaseTarget(ledger, epoch=0),
...                            structure=Single("two counts"), what="two counts",
...                            default_line_item="evaluation.global")
...     ledger.spent(0)
0.5
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

from spatialdp._validation import fail
from spatialdp.privacy.budget import NEIGHBOURS, Neighbours, Structure, check_neighbours
from spatialdp.privacy.target import Accounting, Mechanism, check_target

__all__ = ["NEIGHBOURS", "ReleasePlan", "check_affordable", "check_draws", "check_neighbours",
           "exact_total", "run_release", "split_exactly"]

T = TypeVar("T")

#: What a plan's draws produce: noisy arrays (or what a custom ``sample`` returns).
Draws = list[Any]


@dataclass
class ReleasePlan(Generic[T]):
    """A release ready to charge: its loss, the noise draws, and how to finish.

    Parameters
    ----------
    epsilon : float or None
        Pure-DP loss of the plan (``None`` when it charges ``rho``).
    draws : sequence of (mechanism, values)
        The noise to draw after the charge: each mechanism noises its values.
    finish : callable
        Called with the list of noisy arrays (in ``draws`` order, or what
        ``sample`` returned); its result is what the release publishes.
    rho : float, optional
        zCDP loss instead of ``epsilon`` (a Gaussian release).
    sample : callable, optional
        Draws the noise itself, given the target (for noise drawn in blocks
        while the values are computed, as the modulated transform does); it
        must draw only through ``target.add_noise`` or a Simulation's generator.
    """

    epsilon: float | None
    draws: Sequence[tuple[Mechanism, NDArray[Any]]]
    finish: Callable[[Draws], T]
    rho: float | None = None
    sample: Callable[[Accounting], Draws] | None = field(default=None, repr=False)

    def loss(self) -> tuple[str, float]:
        """Return ``("epsilon" | "rho", amount)``; exactly one must be given."""
        if (self.epsilon is None) == (self.rho is None):
            raise fail("ReleasePlan", self, "must charge exactly one of epsilon and rho",
                       "give epsilon= for a pure-DP release or rho= for a zCDP one")
        return ("epsilon", float(self.epsilon)) if self.epsilon is not None else (
            "rho", float(self.rho))  # type: ignore[arg-type]

    def draw(self, target: Accounting) -> Draws:
        """Draw this plan's noise from ``target`` (only after the charge)."""
        if self.sample is not None:
            return self.sample(target)
        return [target.add_noise(mech, values) for mech, values in self.draws]


def exact_total(amounts: Sequence[float], *, at_most: bool = False) -> float:
    """Return the float nearest the exact decimal sum of ``amounts``, on the safe side.

    Parameters
    ----------
    amounts : sequence of float
        Losses, read as the decimals the ledger records (``repr``).
    at_most : bool, default False
        By default the float is never below the exact sum: what to charge for
        several releases. ``True``: never above it: what one release may spend
        of amounts it was lent.

    Examples
    --------
    >>> exact_total([0.1, 0.2])
    0.3
    >>> exact_total([1.0, 1e-17]), exact_total([1.0, 1e-17], at_most=True)
    (1.0000000000000002, 1.0)
    """
    exact = sum((Decimal(repr(float(e))) for e in amounts), Decimal(0))
    total = float(exact)
    toward = 0.0 if at_most else math.inf
    while (Decimal(repr(total)) > exact) if at_most else (Decimal(repr(total)) < exact):
        total = math.nextafter(total, toward)
    return total


def split_exactly(epsilon: float, share: float) -> tuple[float, float]:
    """Split ``epsilon`` into ``(rest, part)`` with ``part`` about ``share`` of it.

    ``part`` is rounded to 6 significant digits (readable in the ledger) and
    ``rest`` is rounded down so that the two add up to at most ``epsilon``
    exactly, in the decimal arithmetic the ledger charges.

    Parameters
    ----------
    epsilon : float
        The loss to split.
    share : float
        The share of ``part``, in (0, 1).

    Examples
    --------
    >>> split_exactly(1.0, 0.3)
    (0.7, 0.3)
    >>> rest, part = split_exactly(3.8137776114651305, 0.01206393228408848)
    >>> Decimal(repr(rest)) + Decimal(repr(part)) <= Decimal("3.8137776114651305")
    True
    """
    total = Decimal(repr(float(epsilon)))
    part = float(f"{float(total) * share:.6g}")
    rest = float(total - Decimal(repr(part)))
    while Decimal(repr(rest)) + Decimal(repr(part)) > total:
        rest = math.nextafter(rest, 0.0)
    return rest, part


def check_draws(plans: Sequence[ReleasePlan[Any]]) -> None:
    """Run the noise samplers' own checks on public parameters, before anything is charged.

    A real-valued release puts its values on a fixed-point lattice whose step
    depends on the number of values; a release too large for the lattice is
    refused here, never after the charge.

    Parameters
    ----------
    plans : sequence of ReleasePlan
        The plans of one release.

    Raises
    ------
    InvalidInput
        A real-valued draw with more values than its lattice allows.

    Examples
    --------
    >>> from spatialdp.privacy import LaplaceMechanism
    >>> check_draws([ReleasePlan(1.0, [(LaplaceMechanism(1.0, 1.0), np.zeros(3))],
    ...                          finish=list)])
    """
    for plan in plans:
        for mechanism, values in plan.draws:
            step = getattr(mechanism, "lattice_step", None)
            if step is not None and not getattr(mechanism, "discrete", True):
                step(int(np.size(values)))


def _total(plans: Sequence[ReleasePlan[Any]]) -> tuple[str, float]:
    losses = [plan.loss() for plan in plans]
    units = {unit for unit, _ in losses}
    if len(units) != 1:
        raise fail("plans", sorted(units), "mix epsilon and rho in one release",
                   "charge a pure-DP and a zCDP release separately")
    return units.pop(), exact_total([amount for _, amount in losses])


def run_release(plans: Sequence[ReleasePlan[T]], *, target: Accounting, structure: Structure,
                what: str, default_line_item: str, neighbours: Neighbours = "replace",
                round_index: int | None = None) -> list[T]:
    """Check, charge the plans' total once, then draw each plan's noise and finish it.

    Parameters
    ----------
    plans : sequence of ReleasePlan
        Everything that could refuse has been computed already.
    target : ReleaseTarget, Simulation or Unaccounted
        Where the release is charged and how its noise is drawn.
    structure : Single, Disjoint or Overlapping
        What the release covers (recorded with the charge).
    what : str
        What is released, for the audit trail.
    default_line_item : str
        The line item, unless the target names its own.
    neighbours : {"replace", "add_remove"}
        The neighbouring relation the plans' loss holds for (recorded).
    round_index : int, optional
        Overrides the target's round for this charge (a protocol's rounds).

    Returns
    -------
    list
        Each plan's ``finish`` result, in order.

    Raises
    ------
    InvalidInput, BudgetExceeded, LedgerError
        Before anything is charged or drawn.
    """
    account = check_target(target)
    relation = check_neighbours(neighbours)
    unit, amount = _total(plans)
    epsilon, rho = (amount, None) if unit == "epsilon" else (None, amount)
    account.check_affordable(default_line_item=default_line_item, structure=structure,
                             epsilon=epsilon, rho=rho)
    check_draws(plans)
    account.charge(structure=structure, what=what, default_line_item=default_line_item,
                   epsilon=epsilon, rho=rho, neighbours=relation, round_index=round_index)
    return [plan.finish(plan.draw(account)) for plan in plans]


def check_affordable(target: Accounting, *, default_line_item: str,
                     epsilon: float | None = None, rho: float | None = None,
                     charges: int = 1) -> None:
    """Refuse, charging nothing, when the target cannot pay ``charges`` equal charges.

    For a protocol of several rounds, each charged before its own noise: it is
    never refused half-way. Simulations and unaccounted releases always pass.

    Parameters
    ----------
    target : ReleaseTarget, Simulation or Unaccounted
        Where the rounds will be charged.
    default_line_item : str
        The line item, unless the target names its own.
    epsilon, rho : float, optional
        One round's loss (exactly one of them).
    charges : int, default 1
        How many such charges the protocol will make.

    Raises
    ------
    BudgetExceeded
        The line item or the epoch cannot pay all ``charges``.

    Examples
    --------
    >>> from spatialdp.privacy import PrivacyLedger, ReleaseTarget
    >>> from spatialdp.exceptions import BudgetExceeded
    >>> with PrivacyLedger(":memory:", epoch_budget=10.0) as ledger:   # global line: 0.6
    ...     target = ReleaseTarget(ledger, epoch=0)
    ...     check_affordable(target, default_line_item="evaluation.global", epsilon=0.2,
    ...                      charges=3)
    ...     try:
    ...         check_affordable(target, default_line_item="evaluation.global", epsilon=0.2,
    ...                          charges=4)
    ...     except BudgetExceeded:
    ...         print("refused; spent", ledger.spent(0))
    refused; spent 0.0
    """
    check_target(target).check_affordable(default_line_item=default_line_item,
                                          epsilon=epsilon, rho=rho, charges=charges)
