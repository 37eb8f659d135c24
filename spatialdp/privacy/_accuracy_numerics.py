"""Shared numerics for the accuracy of sums of noise draws (private helpers).

Composite Gauss-Legendre quadrature, the lattice inversion through a saddle
point, the lattice mean absolute error and an integer search for the smallest
half-width; the methods are described in :mod:`spatialdp.privacy.accuracy`.
Roots are found by :func:`scipy.optimize.brentq` and log-sum-exps by
:func:`scipy.special.logsumexp`; every bracket search is bounded.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

_GL_X, _GL_W = np.polynomial.legendre.leggauss(20)
_LOG_NEGLIGIBLE = -80.0  # exp(-80) ~ 2e-35: integrand below this relative size is dropped
CACHE = 4096  # lru_cache size of the per-(m, scale) figures


def _gl_nodes(breaks: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return composite 20-point Gauss-Legendre nodes and weights over consecutive breakpoints."""
    lo, hi = breaks[:-1, None], breaks[1:, None]
    half = (hi - lo) / 2
    return (lo + half * (_GL_X + 1)).ravel(), (half * _GL_W).ravel()


def _subdivide(breaks: NDArray[np.float64], rate: float) -> NDArray[np.float64]:
    """Return breakpoints split so a phase advancing at ``rate`` turns <= ~2 radians a panel."""
    widths = np.diff(breaks)
    pieces = np.maximum(1, np.ceil(widths * rate / 2.0)).astype(np.int64)
    if int(pieces.sum()) > 200_000:  # pragma: no cover - guard against absurd inputs
        pieces = np.maximum(1, (pieces * (200_000 / pieces.sum())).astype(np.int64))
    if (pieces == 1).all():
        return breaks
    start = np.repeat(breaks[:-1], pieces)
    step = np.repeat(widths / pieces, pieces)
    offset = np.arange(int(pieces.sum())) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    return np.concatenate([start + offset * step, breaks[-1:]])


def _cut_range(
    u_scale: float, logmod: Callable[[NDArray[Any]], NDArray[Any]]
) -> NDArray[np.float64]:
    """Return geometric breakpoints from ``u_scale/256`` to where ``logmod`` stays negligible."""
    grid = u_scale * 2.0 ** np.arange(-8, 64)
    grid = grid[grid < math.pi]
    if grid.size == 0:
        return np.array([0.0, math.pi])
    lm = logmod(grid)
    # suffix maximum: the first grid point beyond which the modulus stays negligible
    suffix = np.maximum.accumulate(lm[::-1])[::-1]
    below = np.flatnonzero(suffix < _LOG_NEGLIGIBLE)
    if below.size:
        stop = int(below[0])
        return np.concatenate([[0.0], grid[: stop + 1]])
    return np.concatenate([[0.0], grid, [math.pi]])


def lattice_mae(
    m: int,
    one_minus_phi: Callable[[NDArray[Any]], NDArray[Any]],
    sd_total: float,
) -> float:
    """Return ``E|S| = (1/pi) int_0^pi (1 - phi^m) / (1 - cos u) du`` for an integer symmetric S."""

    def logphi_m(u: NDArray[np.float64]) -> NDArray[np.float64]:
        with np.errstate(divide="ignore"):
            out: NDArray[np.float64] = m * np.log1p(-np.minimum(one_minus_phi(u), 1.0))
        return out

    breaks = _cut_range(min(1.0, 1.0 / sd_total) if sd_total > 0 else 1.0, logphi_m)
    u, w = _gl_nodes(breaks)
    vals = -np.expm1(logphi_m(u)) / (2.0 * np.sin(u / 2) ** 2)
    total = float(np.dot(w, vals))
    top = breaks[-1]
    if top < math.pi:  # beyond `top`, phi^m is negligible: integrate 1/(1 - cos u) exactly
        total += 1.0 / math.tan(top / 2)
    return total / math.pi


def contour_log_tail(
    m: int,
    j: int,
    theta: float,
    k_theta: float,
    k2_theta: float,
    kc: Callable[[NDArray[Any]], NDArray[Any]],
) -> float:
    """Return ``log P(S >= j)`` for an integer S with cumulant function ``K`` (``m`` iid terms).

    ``P(S >= j) = exp(m K(t) - t j) (1/pi) int_0^pi Re[exp(m (K(t+iu) - K(t)) - i u j)
    / (1 - exp(-t - iu))] du`` for any ``t > 0`` inside the domain of ``K``; ``t``
    is the saddle point. ``kc`` evaluates ``K(t + iu) - K(t)`` at complex arguments.
    """
    sd_t = math.sqrt(m * k2_theta)
    u_scale = min(theta, 1.0 / sd_t) if sd_t > 0 else theta

    def logmod(u: NDArray[np.float64]) -> NDArray[np.float64]:
        out: NDArray[np.float64] = m * kc(theta + 1j * u).real
        return out

    breaks = _subdivide(_cut_range(u_scale, logmod), 2.0 * j + 1.0)
    u, w = _gl_nodes(breaks)
    z = theta + 1j * u
    vals = (np.exp(m * kc(z) - 1j * u * j) / -np.expm1(-z)).real
    integral = float(np.dot(w, vals)) / math.pi
    if not integral > 0:  # pragma: no cover - would signal a quadrature failure
        raise ArithmeticError(f"lattice inversion failed (m={m}, j={j}, theta={theta})")
    return m * k_theta - theta * j + math.log(integral)


def logsumexp_c(x: NDArray[Any]) -> NDArray[Any]:
    """Return ``log(sum(exp(x), axis=-1))`` for complex or real ``x`` (scipy's logsumexp)."""
    from scipy import special  # lazy: scipy is slow to import
    with np.errstate(divide="ignore"):
        out: NDArray[Any] = np.asarray(special.logsumexp(x, axis=-1))
    return out


def _stirlerr(k: NDArray[np.float64]) -> NDArray[np.float64]:
    """Return ``log(k!) - [(k + 1/2) log k - k + log(2 pi) / 2]`` (k >= 1), without cancellation."""
    from scipy import special  # lazy: scipy is slow to import
    big = k >= 15
    kb = np.where(big, k, 15.0)
    series = (1 / 12 - (1 / 360 - (1 / 1260 - 1 / (1680 * kb * kb)) / (kb * kb)) / (kb * kb)) / kb
    ks = np.where(big, 1.0, k)
    direct = special.gammaln(ks + 1) - (ks + 0.5) * np.log(ks) + ks - 0.5 * math.log(2 * math.pi)
    out: NDArray[np.float64] = np.where(big, series, direct)
    return out


def _bd0(k: NDArray[np.float64], x: float) -> NDArray[np.float64]:
    """Return ``k log(k / x) + x - k`` (the Poisson deviance term), accurate for k near x."""
    d = (k - x) / x
    small = np.abs(d) < 0.1
    ds = np.where(small, d, 0.0)
    series = np.zeros_like(ds)
    power = ds * ds
    for n in range(2, 30):  # sum_{n >= 2} (-1)**n d**n / (n (n - 1)); |d| < 0.1: 1e-30 at n = 30
        series += (-1) ** n * power / (n * (n - 1))
        power = power * ds
    dl = np.where(small, 0.0, d)
    direct = (1 + dl) * np.log1p(dl) - dl
    out: NDArray[np.float64] = x * np.where(small, series, direct)
    return out


def poisson_logpmf(k: NDArray[np.float64], x: float) -> NDArray[np.float64]:
    """Return ``log P(Poisson(x) = k)`` for integers ``k >= 0``, accurate for huge k and x.

    Loader's saddle-point form ``-bd0(k, x) - log(2 pi k) / 2 - stirlerr(k)``:
    the naive ``k log x - x - log(k!)`` loses every digit once ``x`` nears 1e12.
    """
    from scipy import special  # lazy: scipy is slow to import
    kk = np.maximum(k, 1.0)
    if x < 1.0:  # the naive form is accurate here, and (k - x) / x would overflow for tiny x
        naive: NDArray[np.float64] = kk * math.log(x) - x - special.gammaln(kk + 1)
        return np.where(k == 0, -x, naive)
    out: NDArray[np.float64] = np.where(
        k == 0, -x, -_bd0(kk, x) - 0.5 * np.log(2 * math.pi * kk) - _stirlerr(kk))
    return out


def inv_expm1(t: float) -> float:
    """Return ``1 / (e^t - 1)`` without overflow."""
    return 0.0 if t > 700 else 1.0 / math.expm1(t)


def saddle(m: int, j: int, k1: Callable[[float], float], upper: float) -> float:
    """Return the root in (0, upper) of ``m K'(t) - j - 1/(e^t - 1)`` (saddle point incl. pole).

    ``h(t) -> -inf`` as ``t -> 0``: the lower end of the bracket is pulled
    towards 0 (at most 100 times) until ``h`` is negative there.
    """
    from scipy import optimize  # lazy: scipy is slow to import

    def h(t: float) -> float:
        return m * k1(t) - j - inv_expm1(t)

    lo = min(1e-300 + 1e-12 * upper, upper / 4)
    hi = upper
    for _ in range(100):
        if h(lo) <= 0:
            break
        lo /= 1e3  # pragma: no cover - extremely small j/m
    else:  # pragma: no cover - h(t) -> -inf as t -> 0
        raise ArithmeticError(f"no saddle point bracket (m={m}, j={j})")
    return float(optimize.brentq(h, lo, hi, xtol=1e-14 * hi, rtol=1e-10, maxiter=200))


def smallest_k(log_tail: Callable[[int], float], log_target: float, guess: float) -> int:
    """Return the smallest integer ``k >= 0`` with ``log_tail(k) <= log_target`` (decreasing).

    ``f(k) = log_tail(k) - log_target`` is extended to real ``k`` by linear
    interpolation between integers (continuous, decreasing): the bracket is
    grown geometrically from ``guess`` (bounded), the crossing is found by
    :func:`scipy.optimize.brentq`, and the integer next to it is checked.
    """
    from scipy import optimize  # lazy: scipy is slow to import
    cache: dict[int, float] = {}

    def f(k: int) -> float:  # clipped below so that brentq never sees -inf
        if k not in cache:
            cache[k] = max(log_tail(k) - log_target, -1e4)
        return cache[k]

    def f_real(x: float) -> float:
        k = math.floor(x)
        return f(k) + (x - k) * (f(k + 1) - f(k))

    if f(0) <= 0:
        return 0
    lo, hi = 0, max(1, round(guess))  # invariant: f(lo) > 0 >= f(hi)
    for _ in range(200):  # grow the bracket from the guess (x1.5 a step)
        if f(hi) <= 0:
            break
        lo, hi = hi, int(hi * 1.5) + 1
    else:  # pragma: no cover - log_tail decreases to -inf
        raise ArithmeticError("no half-width bracket")
    for _ in range(200):  # or shrink it (/1.5 a step)
        k = int(hi / 1.5)
        if k <= lo or f(k) > 0:
            lo = max(lo, k)
            break
        hi = k
    if hi - lo == 1:
        return hi
    x = float(optimize.brentq(f_real, lo, hi, xtol=0.25, rtol=1e-12))
    k = min(max(math.ceil(x), lo + 1), hi)
    for _ in range(hi - lo):  # a step at most: f_real is exact at the integers
        if f(k) > 0:
            k += 1
        elif k - 1 > lo and f(k - 1) <= 0:
            k -= 1
        else:
            break
    return k
