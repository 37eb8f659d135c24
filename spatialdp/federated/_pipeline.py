"""The one release order: validate, compute what can fail, charge, draw noise, publish.

Every release function first builds :class:`ReleasePlan` objects (validation and
every computation that can refuse: sums, floors, clipping checks, noise scales,
error bars), then hands them to :func:`run_release`, the only place that charges
and draws noise. A refusal therefore never leaves a trace in the ledger, and no
noise is drawn for a release that was not charged.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Generic, TypeVar

import numpy as np
from numpy.typing import NDArray

from spatialdp.privacy.target import Accounting, Mechanism

__all__ = ["ReleasePlan", "check_draws", "exact_total", "run_release"]

T = TypeVar("T")


@dataclass
class ReleasePlan(Generic[T]):
    """A release ready to charge: its epsilon, the noise draws, and how to finish."""

    epsilon: float
    draws: list[tuple[Mechanism, NDArray[Any]]]
    finish: Callable[[list[NDArray[Any]]], T]


def exact_total(epsilons: Sequence[float]) -> float:
    """Return the float to charge for several epsilons: never below their exact decimal sum.

    Examples
    --------
    >>> exact_total([0.1, 0.2])
    0.3
    """
    exact = sum((Decimal(repr(float(e))) for e in epsilons), Decimal(0))
    total = float(exact)
    while Decimal(repr(total)) < exact:
        total = math.nextafter(total, math.inf)
    return total


def check_draws(plans: Sequence[ReleasePlan[Any]]) -> None:
    """Run the noise samplers' own checks on public parameters, before anything is charged.

    A real-valued release puts its values on a fixed-point lattice whose step
    depends on the number of values; a release too large for the lattice is
    refused here, never after the charge.
    """
    for plan in plans:
        for mechanism, values in plan.draws:
            step = getattr(mechanism, "lattice_step", None)
            if step is not None and not getattr(mechanism, "discrete", True):
                step(int(np.size(values)))


def run_release(plans: Sequence[ReleasePlan[T]], *, target: Accounting, structure: Any,
                what: str, default_line_item: str) -> list[T]:
    """Check the draws, charge the plans' total epsilon once, then draw each plan's noise."""
    check_draws(plans)
    target.charge(structure=structure, epsilon=exact_total([p.epsilon for p in plans]),
                  what=what, default_line_item=default_line_item)
    return [plan.finish([target.add_noise(mech, values) for mech, values in plan.draws])
            for plan in plans]
