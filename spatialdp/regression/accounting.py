"""Privacy parameters of the regression releases (zCDP); they are charged by the pipeline.

Every release here is a Gaussian mechanism, accounted in zCDP rho. A caller
gives either ``rho`` or ``(epsilon, delta)``, never both and never neither
(:func:`resolve_rho` refuses them); :func:`rho_for_epsilon` turns the latter
into the largest rho whose exact conversion
(:func:`~spatialdp.privacy.budget.rho_to_epsilon`) is at most epsilon.

Examples
--------
>>> rho = rho_for_epsilon(1.0, 1e-6)
>>> round(rho, 5)
0.02436
>>> from spatialdp.privacy.budget import rho_to_epsilon
>>> rho_to_epsilon(rho, 1e-6) <= 1.0
True
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from spatialdp._validation import check_epsilon, check_number, fail, short_repr
from spatialdp.privacy.budget import rho_to_epsilon

__all__ = ["LINE_ITEM", "resolve_rho", "rho_for_epsilon"]

#: The ledger line item of every regression release (they train a model).
LINE_ITEM = "training"

#: Smallest (epsilon, delta) budget converted to rho: below it the conversion's
#: bracket search runs for ever (rho underflows) and nothing can be learnt anyway.
MIN_EPSILON = 1e-6


@lru_cache(maxsize=256)
def _rho_for_epsilon(epsilon: float, delta: float) -> float:
    # rho + 2 sqrt(rho ln(1/delta)) = epsilon (the classic bound) is always feasible;
    # its root in the form that does not cancel when epsilon << ln(1/delta).
    log_inv = -math.log(delta)  # not log(1 / delta): 1 / a subnormal delta is inf
    root = epsilon / (math.sqrt(log_inv + epsilon) + math.sqrt(log_inv))
    lo = root * root
    hi = 4.0 * lo
    while rho_to_epsilon(hi, delta) <= epsilon:
        lo, hi = hi, 2.0 * hi
    for _ in range(30):
        mid = (lo + hi) / 2.0
        if rho_to_epsilon(mid, delta) <= epsilon:
            lo = mid
        else:
            hi = mid
    return lo


def rho_for_epsilon(epsilon: Any, delta: Any) -> float:
    """Return the largest rho that is ``(epsilon, delta)``-DP (30 bisection steps).

    Uses the exact zCDP to approximate-DP conversion (OpenDP, rounded up), so
    ``rho_to_epsilon(rho_for_epsilon(e, d), d) <= e``.

    Examples
    --------
    >>> rho_for_epsilon(8.0, 1e-6) > rho_for_epsilon(1.0, 1e-6)
    True
    """
    eps = check_epsilon(epsilon)
    if eps < MIN_EPSILON:
        raise fail("epsilon", epsilon, f"is below {MIN_EPSILON:g}: no fit can learn anything at "
                   "this budget, and the matching rho leaves the range of the exact "
                   "conversion", f"pass epsilon >= {MIN_EPSILON:g}, or give rho= directly")
    d = check_number(delta, "delta", low=0.0, high=1.0, low_open=True, high_open=True,
                     fix="pass a small failure probability such as 1e-6")
    return _rho_for_epsilon(eps, d)


def resolve_rho(rho: Any = None, epsilon: Any = None, delta: Any = None) -> float:
    """Return rho from exactly one budget: ``rho`` alone, or ``epsilon`` with ``delta``.

    Contradictory or missing budgets are refused, never resolved: ``rho`` with
    ``epsilon`` (two budgets for one release), ``rho`` with ``delta`` (a zCDP
    budget has no delta), neither, and ``epsilon`` without ``delta``.

    Examples
    --------
    >>> resolve_rho(rho=0.5)
    0.5
    >>> resolve_rho(epsilon=1.0, delta=1e-6) == rho_for_epsilon(1.0, 1e-6)
    True
    >>> resolve_rho(rho=0.5, epsilon=1.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: rho=0.5 and epsilon=1.0 were both given...
    >>> resolve_rho(epsilon=1.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: delta=None is missing...
    """
    if rho is not None:
        if epsilon is not None:
            with_delta = "" if delta is None else f" (with delta={short_repr(delta)})"
            raise fail("rho", rho, f"and epsilon={short_repr(epsilon)}{with_delta} were both "
                       "given: two budgets for one release, and nothing says which to charge",
                       "give rho= (zCDP) or epsilon= with delta=, not both")
        if delta is not None:
            raise fail("delta", delta, f"was given with rho={short_repr(rho)}: a zCDP budget "
                       "has no delta (rho is charged as it is)",
                       "drop delta, or give epsilon= and delta= instead of rho")
        return check_epsilon(rho, "rho")
    if epsilon is None:
        with_delta = "" if delta is None else f" (only delta={short_repr(delta)})"
        raise fail("rho", None, f"and epsilon=None{with_delta}: no privacy budget was given",
                   "give rho= (zCDP), or epsilon= and delta=")
    if delta is None:
        raise fail("delta", None, "is missing: a Gaussian release needs delta > 0 for an "
                   "epsilon", "pass delta, e.g. 1e-6, or give rho")
    return rho_for_epsilon(epsilon, delta)
