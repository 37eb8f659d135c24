"""Exact binomial confidence bounds, and the epsilon and rho lower bounds built on them.

An output event ``E`` has probability ``p1`` under one input and ``p0`` under
its neighbour. Any epsilon-DP release satisfies ``p1 <= exp(epsilon) p0 +
delta`` for every event, and any rho-zCDP release satisfies
``D_a(Bern(p1) || Bern(p0)) <= rho a`` for every ``a > 1`` (Renyi divergences
only shrink under post-processing, and the indicator of ``E`` is
post-processing). With a one-sided Clopper-Pearson lower bound on ``p1`` and
upper bound on ``p0``, each wrong with probability at most ``alpha / 2``, the
smallest epsilon (or rho) consistent with the rectangle is a lower bound on the
true one that fails with probability at most ``alpha``: the epsilon of a
Bernoulli pair increases in ``p1`` and decreases in ``p0`` when ``p1 > p0``, so
the rectangle's corner ``(p1_lower, p0_upper)`` is the minimum.

``alpha`` is the one name of a significance level in spatialdp (a bound or a
bar fails with probability at most ``alpha``; it covers ``1 - alpha``).

Examples
--------
>>> lo, hi = clopper_pearson(50, 100, 0.05)
>>> bool(lo < 0.5 < hi)
True
>>> round(epsilon_lower_bound(5000, 10000, 1000, 10000, 0.01), 2)
1.51

Counts that cannot come from draws are refused, never turned into a bound of 0:

>>> epsilon_lower_bound(10, 5, 1, 5, 0.01)
Traceback (most recent call last):
...
spatialdp.exceptions.InvalidInput: k1=10 exceeds its number of draws n1=5; pass the draws that fell in the event (k1) out of all the draws counted (n1), with 0 <= k1 <= n1
"""  # noqa: E501

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from spatialdp._validation import check_number, fail

__all__ = [
    "bernoulli_renyi",
    "clopper_pearson",
    "epsilon_lower_bound",
    "rho_lower_bound",
]

#: Renyi orders searched by :func:`rho_lower_bound` (zCDP bounds every a > 1).
RENYI_ORDERS = np.geomspace(1.0 + 1e-3, 256.0, 400)

FloatArray = NDArray[np.float64]


def _real_array(value: ArrayLike, name: str, fix: str) -> FloatArray:
    """Return ``value`` as a float array of real numbers, or refuse it naming the value."""
    if isinstance(value, (str, bytes)):
        raise fail(name, value, "is text, not a number", fix)
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError):
        raise fail(name, value, "is not a number or an array of numbers", fix) from None
    if raw.dtype.kind not in "iuf":
        raise fail(name, value, f"has dtype {raw.dtype}, not real numbers (bools, text and "
                   "objects are not numbers)", fix)
    return raw.astype(np.float64)


def _whole_numbers(value: ArrayLike, name: str, fix: str) -> FloatArray:
    """Return ``value`` as a float array of whole numbers, or refuse it naming the value."""
    arr = _real_array(value, name, fix)
    bad = ~np.isfinite(arr) | (arr != np.round(arr))
    if bad.any():
        raise fail(name, value, _first_bad(arr, bad) + "is not a whole number", fix)
    return arr


def _first_bad(arr: FloatArray, bad: NDArray[np.bool_]) -> str:
    """Name the first bad element of an array argument (``''`` for a scalar)."""
    if arr.ndim == 0:
        return ""
    i = int(np.flatnonzero(bad.ravel())[0])
    return f"has {float(arr.ravel()[i])!r} at flat index {i}, which "


def _check_counts(k: ArrayLike, n: ArrayLike, k_name: str, n_name: str
                  ) -> tuple[FloatArray, FloatArray]:
    """Return event counts ``k`` of ``n`` draws as float arrays, refusing impossible ones.

    ``k`` must be a whole number in ``[0, n]`` and ``n >= 1`` (elementwise,
    broadcast): anything else cannot come from counting draws, and a bound
    computed from it would be meaningless (NaN, or a silent 0).
    """
    fix = (f"pass the draws that fell in the event ({k_name}) out of all the draws counted "
           f"({n_name}), with 0 <= {k_name} <= {n_name}")
    k_arr, n_arr = _whole_numbers(k, k_name, fix), _whole_numbers(n, n_name, fix)
    try:
        k_arr, n_arr = np.broadcast_arrays(k_arr, n_arr)
    except ValueError:
        raise fail(f"{k_name}/{n_name}", (k_arr.shape, n_arr.shape), "have shapes that do not "
                   "broadcast", "pass one n for all counts or one n per count") from None
    problems = ((n_arr < 1, n_name, "has no draws (it must be >= 1)"),
                (k_arr < 0, k_name, "is negative"),
                (k_arr > n_arr, k_name, "exceeds its number of draws"))
    for bad, name, problem in problems:
        if bad.any():
            i = int(np.flatnonzero(bad.ravel())[0])
            k_i, n_i = int(k_arr.ravel()[i]), int(n_arr.ravel()[i])
            if problem.startswith("exceeds"):
                problem += f" {n_name}={n_i}"
            where = "" if k_arr.ndim == 0 else f" (at flat index {i})"
            raise fail(name, k_i if name == k_name else n_i, problem + where, fix)
    return k_arr, n_arr


def _check_level(alpha: float) -> float:
    """Return a bound's ``alpha``, strictly between 0 and 1.

    Not :func:`~spatialdp._validation.check_alpha`: its floor of 1e-15 is for
    bars computed at ``1 - alpha``, while these bounds take ``alpha`` itself, so
    any positive level works (an audit's Bonferroni split can go below 1e-15).
    """
    return check_number(alpha, "alpha", low=0.0, high=1.0, low_open=True, high_open=True,
                        fix="pass a level strictly between 0 and 1, e.g. 0.01")


def _one_sided(k: FloatArray, n: FloatArray, alpha: float) -> tuple[FloatArray, FloatArray]:
    """Clopper-Pearson bounds of checked counts (see :func:`clopper_pearson`)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = np.where(k > 0, special.betaincinv(k, n - k + 1, alpha), 0.0)
        upper = np.where(k < n, special.betaincinv(k + 1, n - k, 1.0 - alpha), 1.0)
    return lower, upper


def _event_bounds(k1: ArrayLike, n1: ArrayLike, k0: ArrayLike, n0: ArrayLike,
                  alpha: float) -> tuple[FloatArray, FloatArray]:
    """Return ``(p1_lower, p0_upper)``, each at ``alpha / 2``, counts checked."""
    half = _check_level(alpha) / 2.0
    k1_arr, n1_arr = _check_counts(k1, n1, "k1", "n1")
    k0_arr, n0_arr = _check_counts(k0, n0, "k0", "n0")
    p1, _ = _one_sided(k1_arr, n1_arr, half)
    _, p0 = _one_sided(k0_arr, n0_arr, half)
    return p1, p0


def clopper_pearson(k: ArrayLike, n: ArrayLike, alpha: float
                    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return one-sided Clopper-Pearson bounds ``(lower, upper)`` of a binomial proportion.

    Each bound alone fails with probability at most ``alpha`` (they are
    one-sided; use ``alpha / 2`` for a two-sided interval of level ``1 - alpha``).

    Parameters
    ----------
    k, n : array_like of int
        Successes and trials (``0 <= k <= n``, ``n >= 1``).
    alpha : float
        In ``(0, 1)``: each bound covers ``1 - alpha``.

    Raises
    ------
    InvalidInput
        Counts that are not whole numbers, negative ``k``, ``k > n``, ``n < 1``
        or an alpha outside ``(0, 1)``.

    Examples
    --------
    >>> lo, hi = clopper_pearson(0, 1000, 0.05)
    >>> float(lo), round(float(hi), 5)   # 1 - 0.05 ** (1 / 1000)
    (0.0, 0.00299)
    """
    level = _check_level(alpha)
    k_arr, n_arr = _check_counts(k, n, "k", "n")
    return _one_sided(k_arr, n_arr, level)


def epsilon_lower_bound(k1: ArrayLike, n1: ArrayLike, k0: ArrayLike, n0: ArrayLike,
                        alpha: float, delta: float = 0.0) -> Any:
    """Return ``log((p1_lower - delta) / p0_upper)``, floored at 0: a lower bound on epsilon.

    ``k1`` of ``n1`` draws of one input and ``k0`` of ``n0`` draws of its
    neighbour fell in the event. Each proportion gets a one-sided bound at
    ``alpha / 2``, so the returned epsilon exceeds the true epsilon of an
    ``(epsilon, delta)``-DP release with probability at most ``alpha``.
    Vectorised over the counts.

    Raises
    ------
    InvalidInput
        Impossible counts (see :func:`clopper_pearson`), an alpha outside
        ``(0, 1)`` or a delta outside ``[0, 1)``.

    Examples
    --------
    >>> round(float(epsilon_lower_bound(100, 100, 0, 100, 1e-6)), 3)  # always apart
    1.857
    """
    d = check_number(delta, "delta", low=0.0, high=1.0, high_open=True,
                     fix="pass the claim's delta, in [0, 1)")
    p1, p0 = _event_bounds(k1, n1, k0, n0, alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.log(np.maximum(p1 - d, 0.0) / p0)
    out = np.where(eps > 0, eps, 0.0)  # -inf (p1_lower <= delta) and NaN give 0
    return float(out) if out.ndim == 0 else out


def bernoulli_renyi(p: ArrayLike, q: ArrayLike, order: ArrayLike) -> NDArray[np.float64]:
    """Return ``D_a(Bern(p) || Bern(q))`` (natural log), broadcast over the arguments.

    ``p`` and ``q`` are probabilities (in ``[0, 1]``) and the order ``a`` is
    positive and not 1 (the order-1 divergence is the KL divergence, a limit this
    formula does not take); anything else is refused.

    Examples
    --------
    >>> round(float(bernoulli_renyi(0.5, 0.5, 2.0)), 12)
    0.0
    >>> round(float(bernoulli_renyi(0.9, 0.1, 2.0)), 4)  # log(0.81/0.1 + 0.01/0.9)
    2.0932
    """
    p_arr = _probabilities(p, "p")
    q_arr = _probabilities(q, "q")
    a = _real_array(order, "order", "pass Renyi orders a > 0, a != 1 (e.g. 2.0)")
    bad = ~(a > 0) | (a == 1.0)
    if bad.any():
        raise fail("order", order, _first_bad(a, bad) + "is not a Renyi order (a > 0, a != 1)",
                   "pass orders a > 0, a != 1 (e.g. 2.0)")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # log(p^a q^(1-a) + (1-p)^a (1-q)^(1-a)) / (a - 1), via logaddexp for tiny q
        t1 = special.xlogy(a, p_arr) + special.xlogy(1.0 - a, q_arr)
        t2 = special.xlogy(a, 1.0 - p_arr) + special.xlogy(1.0 - a, 1.0 - q_arr)
        out = np.logaddexp(t1, t2) / (a - 1.0)
    return np.where(np.isnan(out), np.inf, np.maximum(out, 0.0))


def _probabilities(value: ArrayLike, name: str) -> FloatArray:
    fix = "pass probabilities in [0, 1]"
    arr = _real_array(value, name, fix)
    bad = ~((arr >= 0.0) & (arr <= 1.0))  # NaN is bad too
    if bad.any():
        raise fail(name, value, _first_bad(arr, bad) + "is outside [0, 1]", fix)
    return arr


def rho_lower_bound(k1: ArrayLike, n1: ArrayLike, k0: ArrayLike, n0: ArrayLike,
                    alpha: float) -> Any:
    """Return a lower bound on the zCDP rho, failing with probability ``alpha``, from event counts.

    ``max_a D_a(Bern(p1_lower) || Bern(p0_upper)) / a`` over Renyi orders
    ``a`` in ``(1, 256]``, and 0 when ``p1_lower <= p0_upper``. Vectorised
    over the counts.

    Raises
    ------
    InvalidInput
        Impossible counts (see :func:`clopper_pearson`) or an alpha outside ``(0, 1)``.

    Examples
    --------
    >>> round(float(rho_lower_bound(8000, 10000, 2000, 10000, 0.01)), 2)
    0.77
    """
    p1, p0 = _event_bounds(k1, n1, k0, n0, alpha)
    p1 = np.asarray(p1)[..., None]
    p0 = np.asarray(p0)[..., None]
    div = bernoulli_renyi(p1, p0, RENYI_ORDERS) / RENYI_ORDERS
    rho = np.where(p1[..., 0] > p0[..., 0], div.max(axis=-1), 0.0)
    rho = np.where(np.isfinite(rho), rho, math.inf)
    return float(rho) if rho.ndim == 0 else rho
