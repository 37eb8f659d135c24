"""Exact binomial confidence bounds and the privacy-loss lower bounds built on them.

An output event ``E`` has probability ``p1`` under one input and ``p0`` under
its neighbour. Any epsilon-DP release satisfies ``p1 <= exp(epsilon) p0 +
delta`` for every event, and any rho-zCDP release satisfies
``D_a(Bern(p1) || Bern(p0)) <= rho a`` for every ``a > 1`` (Renyi divergences
only shrink under post-processing, and the indicator of ``E`` is
post-processing). With a one-sided Clopper-Pearson lower bound on ``p1`` and
upper bound on ``p0``, each at level ``1 - beta / 2``, the smallest loss
consistent with the rectangle is a lower bound on the true loss that holds with
probability at least ``1 - beta``: the loss of a Bernoulli pair increases in
``p1`` and decreases in ``p0`` when ``p1 > p0``, so the rectangle's corner
``(p1_lower, p0_upper)`` is the minimum.

Examples
--------
>>> lo, hi = clopper_pearson(50, 100, 0.95)
>>> bool(lo < 0.5 < hi)
True
>>> round(epsilon_lower_bound(5000, 10000, 1000, 10000, 0.99), 2)
1.51
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

__all__ = [
    "bernoulli_renyi",
    "clopper_pearson",
    "epsilon_lower_bound",
    "rho_lower_bound",
]

#: Renyi orders searched by :func:`rho_lower_bound` (zCDP bounds every a > 1).
RENYI_ORDERS = np.geomspace(1.0 + 1e-3, 256.0, 400)


def clopper_pearson(k: ArrayLike, n: ArrayLike, confidence: float
                    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return one-sided Clopper-Pearson bounds ``(lower, upper)`` of a binomial proportion.

    Each bound alone holds with probability at least ``confidence`` (they are
    one-sided; use ``1 - beta / 2`` for a two-sided interval of level ``1 - beta``).

    Parameters
    ----------
    k, n : array_like of int
        Successes and trials (``0 <= k <= n``, ``n >= 1``).
    confidence : float
        In ``(0, 1)``.

    Examples
    --------
    >>> lo, hi = clopper_pearson(0, 1000, 0.95)
    >>> float(lo), round(float(hi), 5)   # 1 - 0.05 ** (1 / 1000)
    (0.0, 0.00299)
    """
    k_arr = np.asarray(k, dtype=np.float64)
    n_arr = np.asarray(n, dtype=np.float64)
    beta = 1.0 - confidence
    with np.errstate(invalid="ignore", divide="ignore"):
        lower = np.where(k_arr > 0, special.betaincinv(k_arr, n_arr - k_arr + 1, beta), 0.0)
        upper = np.where(k_arr < n_arr,
                         special.betaincinv(k_arr + 1, n_arr - k_arr, 1.0 - beta), 1.0)
    return lower, upper


def epsilon_lower_bound(k1: ArrayLike, n1: ArrayLike, k0: ArrayLike, n0: ArrayLike,
                        confidence: float, delta: float = 0.0) -> Any:
    """Return ``log((p1_lower - delta) / p0_upper)``, floored at 0, at level ``confidence``.

    ``k1`` of ``n1`` draws of one input and ``k0`` of ``n0`` draws of its
    neighbour fell in the event. Each proportion gets a one-sided bound at
    ``1 - (1 - confidence) / 2``, so the returned epsilon is below the true
    epsilon of an ``(epsilon, delta)``-DP release with probability at least
    ``confidence``. Vectorised over the counts.

    Examples
    --------
    >>> round(float(epsilon_lower_bound(100, 100, 0, 100, 1 - 1e-6)), 3)  # always apart
    1.857
    """
    half = 1.0 - (1.0 - confidence) / 2.0
    p1, _ = clopper_pearson(k1, n1, half)
    _, p0 = clopper_pearson(k0, n0, half)
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.log(np.maximum(p1 - delta, 0.0) / p0)
    out = np.where(eps > 0, eps, 0.0)  # -inf (p1_lower <= delta) and NaN give 0
    return float(out) if out.ndim == 0 else out


def bernoulli_renyi(p: ArrayLike, q: ArrayLike, order: ArrayLike) -> NDArray[np.float64]:
    """Return ``D_a(Bern(p) || Bern(q))`` (natural log), broadcast over the arguments.

    Examples
    --------
    >>> round(float(bernoulli_renyi(0.5, 0.5, 2.0)), 12)
    0.0
    >>> round(float(bernoulli_renyi(0.9, 0.1, 2.0)), 4)  # log(0.81/0.1 + 0.01/0.9)
    2.0932
    """
    p_arr = np.asarray(p, dtype=np.float64)
    q_arr = np.asarray(q, dtype=np.float64)
    a = np.asarray(order, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # log(p^a q^(1-a) + (1-p)^a (1-q)^(1-a)) / (a - 1), via logaddexp for tiny q
        t1 = special.xlogy(a, p_arr) + special.xlogy(1.0 - a, q_arr)
        t2 = special.xlogy(a, 1.0 - p_arr) + special.xlogy(1.0 - a, 1.0 - q_arr)
        out = np.logaddexp(t1, t2) / (a - 1.0)
    return np.where(np.isnan(out), np.inf, np.maximum(out, 0.0))


def rho_lower_bound(k1: ArrayLike, n1: ArrayLike, k0: ArrayLike, n0: ArrayLike,
                    confidence: float) -> Any:
    """Return a lower bound on the zCDP rho, at level ``confidence``, from event counts.

    ``max_a D_a(Bern(p1_lower) || Bern(p0_upper)) / a`` over Renyi orders
    ``a`` in ``(1, 256]``, and 0 when ``p1_lower <= p0_upper``. Vectorised
    over the counts.

    Examples
    --------
    >>> round(float(rho_lower_bound(8000, 10000, 2000, 10000, 0.99)), 2)
    0.77
    """
    half = 1.0 - (1.0 - confidence) / 2.0
    p1, _ = clopper_pearson(k1, n1, half)
    _, p0 = clopper_pearson(k0, n0, half)
    p1 = np.asarray(p1)[..., None]
    p0 = np.asarray(p0)[..., None]
    div = bernoulli_renyi(p1, p0, RENYI_ORDERS) / RENYI_ORDERS
    rho = np.where(p1[..., 0] > p0[..., 0], div.max(axis=-1), 0.0)
    rho = np.where(np.isfinite(rho), rho, math.inf)
    return float(rho) if rho.ndim == 0 else rho
