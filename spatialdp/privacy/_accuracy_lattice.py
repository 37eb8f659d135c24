"""Error figures of a sum of ``m`` integer (lattice) noise draws (private helpers).

The discrete Laplace and the discrete Gaussian: variance, mean absolute error,
tail probabilities and integer half-widths, by the lattice inversion of
:mod:`spatialdp.privacy._accuracy_numerics` (the methods are described in
:mod:`spatialdp.privacy.accuracy`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from spatialdp.privacy._accuracy_numerics import (
    CACHE,
    contour_log_tail,
    inv_expm1,
    lattice_mae,
    logsumexp_c,
    saddle,
    smallest_k,
)

_POISSON_SIGMA = 8.0  # discrete Gaussian: variance and phi by their sigma -> inf forms above
# Below this sigma, P(Z != 0) <= 2 exp(-1 / (2 sigma**2)) = 2 exp(-800): every figure of a
# sum of up to 1e10 draws is 0 in double precision (and sigma**2 may underflow).
_DG_NOISELESS = 0.025


# ---------------------------------------------------------------------------
# discrete Laplace
# ---------------------------------------------------------------------------


def _dlap_params(b: float) -> tuple[float, float]:
    """Return (a, 1 - a) with a = exp(-1/b), 1 - a computed without cancellation."""
    return math.exp(-1.0 / b), -math.expm1(-1.0 / b)


def dlap_var(b: float) -> float:
    """Return the variance of one discrete Laplace(b) draw."""
    a, oma = _dlap_params(b)
    return 2.0 * a / oma**2


def _dlap_one_minus_phi(b: float) -> Callable[[NDArray[Any]], NDArray[Any]]:
    a, oma = _dlap_params(b)

    def fn(u: NDArray[np.float64]) -> NDArray[np.float64]:
        c = 4.0 * a * np.sin(u / 2) ** 2  # 2a (1 - cos u)
        return c / (oma**2 + c)

    return fn


@lru_cache(maxsize=CACHE)
def dlap_mae(m: int, b: float) -> float:
    """Return E|S| for S a sum of m discrete Laplace(b) draws."""
    a, oma = _dlap_params(b)
    if m == 1:
        return 2.0 * a / (oma * (1.0 + a))
    return lattice_mae(m, _dlap_one_minus_phi(b), math.sqrt(m * dlap_var(b)))


def _dlap_log_tail_nb(m: int, j: int, b: float) -> float:
    """Return log P(S >= j) for j >= m: P(NegBin(j-m, a) + NegBin(m, a/(1+a)) <= m-1)."""
    from scipy import special  # lazy: scipy is slow to import
    a, oma = _dlap_params(b)
    q = a / (1.0 + a)
    r = j - m
    if r == 0:
        with np.errstate(divide="ignore"):
            return float(np.log(special.betainc(m, m, q)))
    mean = r * oma / a
    sd = math.sqrt(r * oma) / a
    k = np.arange(
        max(0, int(mean - 15 * sd - 60)), min(m - 1, int(mean + 15 * sd + 60)) + 1, dtype=np.float64
    )
    if k.size == 0:
        return -math.inf
    # log C(k + r - 1, k) = -log k - log B(k, r) (k >= 1): betaln has no log-gamma cancellation
    kk = np.maximum(k, 1.0)
    log_binom = np.where(k == 0, 0.0, -np.log(kk) - special.betaln(kk, r))
    log_pmf = log_binom - r / b + k * math.log(oma)
    with np.errstate(divide="ignore"):
        log_cdf = np.log(special.betainc(m, m - k, q))
    return float(logsumexp_c(log_pmf + log_cdf))


def _dlap_log_tail_contour(m: int, j: int, b: float) -> float:
    """Return log P(S >= j) by lattice inversion through the saddle point."""
    _, oma = _dlap_params(b)
    inv_b = 1.0 / b
    log_norm = 2.0 * math.log(oma)

    def k1(t: float) -> float:
        return math.exp(t - inv_b) / -math.expm1(t - inv_b) - math.exp(-t - inv_b) / -math.expm1(
            -t - inv_b
        )

    theta = saddle(m, j, k1, inv_b * (1 - 1e-12))
    x1, x2 = math.exp(theta - inv_b), math.exp(-theta - inv_b)
    d1, d2 = -math.expm1(theta - inv_b), -math.expm1(-theta - inv_b)
    k_theta = log_norm - math.log(d1) - math.log(d2)
    k2_theta = x1 / d1**2 + x2 / d2**2

    def kc(z: NDArray[Any]) -> NDArray[Any]:
        out: NDArray[Any] = (
            np.log(d1) - np.log(-np.expm1(z - inv_b)) + np.log(d2) - np.log(-np.expm1(-z - inv_b))
        )
        return out

    return contour_log_tail(m, j, theta, k_theta, k2_theta, kc)


@lru_cache(maxsize=CACHE * 8)
def dlap_log_tail(m: int, j: int, b: float) -> float:
    """Return log P(S >= j), S a sum of m discrete Laplace(b), integer j >= 1."""
    # union bound: S >= j needs some |Z_i| >= ceil(j/m); below e^-800 report 0 (underflow)
    if math.log(2.0 * m) - math.ceil(j / m) / b < -800:
        return -math.inf
    if m == 1:
        a, _ = _dlap_params(b)
        return -j / b - math.log1p(a)
    if j >= m:
        return _dlap_log_tail_nb(m, j, b)
    return _dlap_log_tail_contour(m, j, b)


@lru_cache(maxsize=CACHE)
def dlap_half_width(m: int, b: float, alpha: float) -> int:
    """Return the smallest integer h with P(|S| <= h) >= 1 - alpha (m discrete Laplace(b))."""
    from scipy import special  # lazy: scipy is slow to import
    a, _ = _dlap_params(b)
    if m == 1:  # smallest k with log P(|Z| > k) = log 2 + (k + 1) log a - log(1 + a) <= log alpha
        excess = math.log(2.0) - math.log1p(a) - math.log(alpha)

        def misses(k: int) -> bool:
            return -(k + 1) / b + excess > 0

        k = max(0, math.ceil(b * excess) - 1)
        for _ in range(4):  # rounding of b * excess: a step at most
            if misses(k):
                k += 1
            elif k > 0 and not misses(k - 1):
                k -= 1
            else:
                break
        return k
    guess = -special.ndtri(alpha / 2) * math.sqrt(m * dlap_var(b))
    return smallest_k(lambda k: math.log(2) + dlap_log_tail(m, k + 1, b), math.log(alpha), guess)


# ---------------------------------------------------------------------------
# discrete Gaussian
# ---------------------------------------------------------------------------


@lru_cache(maxsize=256)
def _dg_weights(sigma: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return the support k = 0..L and normalised pmf p_k (for sigma <= 8)."""
    top = math.ceil(40 * sigma) + 2
    k = np.arange(0, top + 1, dtype=np.float64)
    w = np.exp(-(k**2) / (2 * sigma**2))
    w /= w[0] + 2 * w[1:].sum()
    return k, w


def dg_var(sigma: float) -> float:
    """Return the variance of one discrete Gaussian(sigma) draw."""
    if sigma < _DG_NOISELESS:
        return 0.0
    if sigma > _POISSON_SIGMA:
        return sigma**2
    k, p = _dg_weights(sigma)
    return float(2 * np.dot(k[1:] ** 2, p[1:]))


def _dg_one_minus_phi(sigma: float) -> Callable[[NDArray[Any]], NDArray[Any]]:
    if sigma > _POISSON_SIGMA:
        return lambda u: -np.expm1(-(sigma**2) * u**2 / 2)
    k, p = _dg_weights(sigma)

    def fn(u: NDArray[np.float64]) -> NDArray[np.float64]:
        out: NDArray[np.float64] = 4.0 * (np.sin(np.outer(u, k[1:]) / 2) ** 2 @ p[1:])
        return out

    return fn


@lru_cache(maxsize=CACHE)
def dg_mae(m: int, sigma: float) -> float:
    """Return E|S| for S a sum of m discrete Gaussian(sigma) draws."""
    if sigma < _DG_NOISELESS:
        return 0.0
    if m == 1 and sigma <= _POISSON_SIGMA:
        k, p = _dg_weights(sigma)
        return float(2 * np.dot(k, p))
    return lattice_mae(m, _dg_one_minus_phi(sigma), math.sqrt(m * dg_var(sigma)))


def _dg_log_tail_contour(m: int, j: int, sigma: float) -> float:
    """Return log P(S >= j) by lattice inversion.

    Poisson summation for sigma >= 1, else a direct sum.
    """
    s2 = sigma**2
    if sigma >= 1.0:
        # Poisson summation:
        # sum_k e^{wk - k^2/(2 s2)} = sigma sqrt(2 pi) sum_l e^{s2 (w - 2 pi i l)^2 / 2}
        ls = np.arange(-4, 5) if sigma < 3.0 else np.arange(-1, 3)  # aliases that matter
        shifts = 1j * 2 * math.pi * ls
        log_norm = float(logsumexp_c(-2 * math.pi**2 * s2 * np.arange(-4, 5.0) ** 2))
        theta = saddle(m, j, lambda t: s2 * t, (j + 1.0) / (m * s2) + 1.0)
        log_m_theta = float(logsumexp_c(s2 * (theta - shifts) ** 2 / 2).real)

        def kc(z: NDArray[Any]) -> NDArray[Any]:
            return logsumexp_c(s2 * (z[..., None] - shifts) ** 2 / 2) - log_m_theta

        return contour_log_tail(m, j, theta, log_m_theta - log_norm, s2, kc)

    _, p = _dg_weights(sigma)
    log_z = math.log(p[0]) * -1.0  # log of the normaliser relative to weight 1 at k = 0

    def moments(t: float) -> tuple[NDArray[np.float64], NDArray[np.float64], float]:
        c = round(t * s2)
        half = math.ceil(13 * sigma) + 3
        k = np.arange(c - half, c + half + 1, dtype=np.float64)
        e = t * k - k**2 / (2 * s2)
        mx = float(e.max())
        w = np.exp(e - mx)
        return k, w, mx + math.log(w.sum())

    def k1(t: float) -> float:
        k, w, _ = moments(t)
        return float(np.dot(k, w) / w.sum())

    upper = 1.0
    for _ in range(64):  # m K'(t) grows like m t sigma**2: a few doublings
        if m * k1(upper) - j - inv_expm1(upper) > 0:
            break
        upper *= 2
    else:  # pragma: no cover
        raise ArithmeticError(f"no saddle point bracket (m={m}, j={j}, sigma={sigma})")
    theta = saddle(m, j, k1, upper)
    k, w, log_mt = moments(theta)
    w = w / w.sum()
    mean = float(np.dot(k, w))
    k2 = float(np.dot((k - mean) ** 2, w))
    k_theta = log_mt - log_z

    def kc_direct(z: NDArray[Any]) -> NDArray[Any]:
        # only called on the contour Re z = theta: K(z) - K(theta) = log sum_k w_k e^{iuk}
        uk = np.outer(z.imag, k)
        with np.errstate(divide="ignore"):
            out: NDArray[Any] = np.log(np.cos(uk) @ w + 1j * (np.sin(uk) @ w))
        return out

    return contour_log_tail(m, j, theta, k_theta, max(k2, 1e-300), kc_direct)


@lru_cache(maxsize=CACHE * 8)
def dg_log_tail(m: int, j: int, sigma: float) -> float:
    """Return log P(S >= j), S a sum of m discrete Gaussian(sigma), integer j >= 1 (cached)."""
    if sigma < _DG_NOISELESS:
        return -math.inf
    k = math.ceil(j / m)  # union bound as for the discrete Laplace
    if math.log(2.0 * m) - k * k / (2 * sigma**2) - math.log(-math.expm1(-k / sigma**2)) < -800:
        return -math.inf
    if m == 1 and sigma <= _POISSON_SIGMA:
        kk, p = _dg_weights(sigma)
        tail = p[j:].sum() if j < kk.size else 0.0
        if tail > 0:
            return float(math.log(tail))
    return _dg_log_tail_contour(m, j, sigma)


@lru_cache(maxsize=CACHE)
def dg_half_width(m: int, sigma: float, alpha: float) -> int:
    """Return the smallest integer h with P(|S| <= h) >= 1 - alpha (m discrete Gaussians)."""
    from scipy import special  # lazy: scipy is slow to import
    if sigma < _DG_NOISELESS:
        return 0
    guess = -special.ndtri(alpha / 2) * math.sqrt(m * dg_var(sigma))
    return smallest_k(lambda k: math.log(2) + dg_log_tail(m, k + 1, sigma), math.log(alpha), guess)
