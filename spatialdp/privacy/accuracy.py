"""Error bars from a noise scale: one noisy value, or the sum of ``m`` of them.

A released statistic over a polygon is often the sum of ``m`` independently
noised cells, so its error is the sum ``S`` of ``m`` iid noise draws. For the
four noise kinds

* ``"laplace"`` - Laplace(b), density ``exp(-|x|/b) / (2b)``;
* ``"gaussian"`` - N(0, sigma**2);
* ``"discrete_laplace"`` - ``P(z)`` proportional to ``exp(-|z|/b)`` on the integers;
* ``"discrete_gaussian"`` - ``P(z)`` proportional to ``exp(-z**2 / (2 sigma**2))``,

this module gives the standard deviation, the mean absolute error ``E|S|`` and
the two-sided ``(1 - alpha)`` half-width ``h`` (``P(|S| <= h) >= 1 - alpha``),
for any ``m >= 1`` (vectorised over an array of ``m``; the work is done once per
distinct ``m`` and cached).

Methods - all exact up to quadrature/rounding error (relative error well below
1e-6 in the tests), never a normal approximation:

* Gaussian: closed forms.
* Laplace: ``std = b sqrt(2m)``; ``E|S| = 2 m b C(2m, m) / 4**m`` (note: NOT
  ``sqrt(2m) b``, which is the RMS); the tail uses the exact identity
  ``P(S > x) = P(N + K <= m - 1)`` with ``N ~ Poisson(x/b)`` and
  ``K ~ NegBin(m, 1/2)`` independent, a finite sum of positive terms (a
  window of it for large ``m``). At ``m = 1`` the half-width is
  ``b ln(1/alpha)``.
* Discrete Laplace (``a = exp(-1/b)``): for ``j >= m``,
  ``P(S >= j) = P(K1 + K2 <= m - 1)`` with ``K1 ~ NegBin(j - m, a)`` and
  ``K2 ~ NegBin(m, a / (1 + a))`` (residue of the rational generating
  function at its pole ``1/a``); for ``j < m`` the lattice inversion below.
* Discrete Gaussian: lattice inversion on a circle through the saddle point ``t``,
  ``P(S >= j) = (1/pi) Re int_0^pi M(t+iu)**m e^{-(t+iu) j} / (1 - e^{-(t+iu)}) du``,
  with ``M`` the moment generating function (Poisson summation for
  ``sigma >= 1``, a direct sum below), integrated by composite Gauss-Legendre
  on the range where ``|M|**m`` is not negligible. The discrete Laplace uses
  the same inversion for ``j < m``.
* Mean absolute error of the lattice kinds:
  ``E|S| = (1/pi) int_0^pi (1 - phi(u)**m) / (1 - cos u) du``.

Discrete half-widths are integers: the smallest ``k`` with ``P(|S| <= k) >=
1 - alpha``, so the interval covers AT LEAST ``1 - alpha`` (usually a bit more).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal, TypeAlias, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, special

from spatialdp.exceptions import InvalidInput

__all__ = [
    "NOISE_KINDS",
    "Accuracy",
    "NoiseKind",
    "accuracy",
    "half_width",
    "mean_abs_error",
    "noise_std",
    "scale_for_half_width",
    "tail_probability",
]

NoiseKind: TypeAlias = Literal["laplace", "gaussian", "discrete_laplace", "discrete_gaussian"]
NOISE_KINDS: tuple[str, ...] = ("laplace", "gaussian", "discrete_laplace", "discrete_gaussian")
FloatOrArray: TypeAlias = "float | NDArray[np.float64]"
ScalarInt: TypeAlias = "int | np.integer[Any]"

_GL_X, _GL_W = np.polynomial.legendre.leggauss(20)
_LOG_NEGLIGIBLE = -80.0  # exp(-80) ~ 2e-35: integrand below this relative size is dropped
_POISSON_SIGMA = 8.0  # discrete Gaussian: variance and phi by their sigma -> inf forms above
_CACHE = 4096


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------


def _check_kind(kind: str) -> str:
    if kind not in NOISE_KINDS:
        raise InvalidInput(
            f"noise kind {kind!r} is not supported; use one of {', '.join(NOISE_KINDS)}"
        )
    return kind


def _check_scale(scale: Any, name: str = "scale") -> float:
    try:
        s = float(scale)
    except (TypeError, ValueError):
        raise InvalidInput(f"{name}={scale!r} is not a number; pass the noise scale") from None
    if not math.isfinite(s) or s <= 0 or s > 1e15:
        raise InvalidInput(
            f"{name}={scale!r} must be finite, > 0 and <= 1e15; pass the noise scale "
            "(b = sensitivity / epsilon, or sigma)"
        )
    return s


def _check_alpha(alpha: Any) -> float:
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise InvalidInput(f"alpha={alpha!r} is not a number; pass e.g. 0.05") from None
    if not (1e-15 <= a < 1):
        raise InvalidInput(
            f"alpha={alpha!r} must lie in [1e-15, 1); pass the miss probability of the "
            "interval, e.g. 0.05 for a 95% error bar"
        )
    return a


def _check_m(m: ArrayLike) -> tuple[NDArray[np.int64], bool]:
    arr = np.asarray(m)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.number):
        raise InvalidInput(f"m={m!r} must be integer cell counts >= 1; pass e.g. m=1")
    f = arr.astype(np.float64)
    bad = ~np.isfinite(f) | (f < 1) | (f != np.round(f)) | (f > 1e12)
    if bad.any():
        v = f.ravel()[int(np.flatnonzero(bad.ravel())[0])]
        raise InvalidInput(
            f"m must be whole numbers in [1, 1e12] (cells summed per polygon), got {v!r}; "
            "pass the number of noisy cells in the sum, e.g. m=1"
        )
    return f.astype(np.int64), arr.ndim == 0 and not isinstance(m, np.ndarray)


def _per_m(m: ArrayLike, fn: Callable[[int], float]) -> FloatOrArray:
    arr, scalar = _check_m(m)
    if scalar:
        return float(fn(int(arr)))
    uniq, inv = np.unique(arr, return_inverse=True)
    vals = np.array([fn(int(u)) for u in uniq], dtype=np.float64)
    return vals[inv].reshape(arr.shape)


# ---------------------------------------------------------------------------
# shared numerics
# ---------------------------------------------------------------------------


def _gl_nodes(breaks: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Composite 20-point Gauss-Legendre nodes and weights over consecutive breakpoints."""
    lo, hi = breaks[:-1, None], breaks[1:, None]
    half = (hi - lo) / 2
    return (lo + half * (_GL_X + 1)).ravel(), (half * _GL_W).ravel()


def _subdivide(breaks: NDArray[np.float64], rate: float) -> NDArray[np.float64]:
    """Split panels so a phase advancing at ``rate`` turns at most ~2 radians per panel."""
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
    """Geometric breakpoints from ``u_scale/256`` to where ``logmod`` stays negligible (<= pi)."""
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


def _lattice_mae(
    m: int,
    one_minus_phi: Callable[[NDArray[Any]], NDArray[Any]],
    sd_total: float,
) -> float:
    """``E|S| = (1/pi) int_0^pi (1 - phi^m) / (1 - cos u) du`` for an integer symmetric S."""

    def logphi_m(u: NDArray[np.float64]) -> NDArray[np.float64]:
        with np.errstate(divide="ignore"):
            return m * np.log1p(-np.minimum(one_minus_phi(u), 1.0))

    breaks = _cut_range(min(1.0, 1.0 / sd_total) if sd_total > 0 else 1.0, logphi_m)
    u, w = _gl_nodes(breaks)
    vals = -np.expm1(logphi_m(u)) / (2.0 * np.sin(u / 2) ** 2)
    total = float(np.dot(w, vals))
    top = breaks[-1]
    if top < math.pi:  # beyond `top`, phi^m is negligible: integrate 1/(1 - cos u) exactly
        total += 1.0 / math.tan(top / 2)
    return total / math.pi


def _contour_log_tail(
    m: int,
    j: int,
    theta: float,
    k_theta: float,
    k2_theta: float,
    kc: Callable[[NDArray[Any]], NDArray[Any]],
) -> float:
    """``log P(S >= j)`` for an integer S with cumulant function ``K`` (``m`` iid terms).

    ``P(S >= j) = exp(m K(t) - t j) (1/pi) int_0^pi Re[exp(m (K(t+iu) - K(t)) - i u j)
    / (1 - exp(-t - iu))] du`` for any ``t > 0`` inside the domain of ``K``; ``t``
    is the saddle point. ``kc`` evaluates ``K(t + iu) - K(t)`` at complex arguments.
    """
    sd_t = math.sqrt(m * k2_theta)
    u_scale = min(theta, 1.0 / sd_t) if sd_t > 0 else theta

    def logmod(u: NDArray[np.float64]) -> NDArray[np.float64]:
        return m * kc(theta + 1j * u).real

    breaks = _subdivide(_cut_range(u_scale, logmod), 2.0 * j + 1.0)
    u, w = _gl_nodes(breaks)
    z = theta + 1j * u
    vals = (np.exp(m * kc(z) - 1j * u * j) / -np.expm1(-z)).real
    integral = float(np.dot(w, vals)) / math.pi
    if not integral > 0:  # pragma: no cover - would signal a quadrature failure
        raise ArithmeticError(f"lattice inversion failed (m={m}, j={j}, theta={theta})")
    return m * k_theta - theta * j + math.log(integral)


def _logsumexp_c(x: NDArray[Any]) -> NDArray[Any]:
    """log(sum(exp(x), axis=-1)) for complex or real ``x`` (shifted by the max real part)."""
    mx = x.real.max(axis=-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(x - mx).sum(axis=-1)) + mx[..., 0]


def _inv_expm1(t: float) -> float:
    """``1 / (e^t - 1)`` without overflow."""
    return 0.0 if t > 700 else 1.0 / math.expm1(t)


def _saddle(m: int, j: int, k1: Callable[[float], float], upper: float) -> float:
    """Root in (0, upper) of ``m K'(t) - j - 1/(e^t - 1)`` (saddle point incl. the pole term)."""

    def h(t: float) -> float:
        return m * k1(t) - j - _inv_expm1(t)

    lo = min(1e-300 + 1e-12 * upper, upper / 4)
    hi = upper
    while h(lo) > 0:  # pragma: no cover - extremely small j/m
        lo /= 1e3
    return float(optimize.brentq(h, lo, hi, xtol=1e-14 * hi, rtol=1e-10, maxiter=200))


def _smallest_k(log_tail: Callable[[int], float], log_target: float, guess: float) -> int:
    """Smallest integer ``k >= 0`` with ``log_tail(k) <= log_target`` (``log_tail`` decreasing)."""
    cache: dict[int, float] = {}

    def f(k: int) -> float:
        if k not in cache:
            cache[k] = log_tail(k) - log_target
        return cache[k]

    if f(0) <= 0:
        return 0
    g = max(1, round(guess))
    lo, hi = 0, g
    if f(g) > 0:
        lo = g
        hi = int(g * 1.2) + 1
        while f(hi) > 0:
            lo, hi = hi, int(hi * 1.5) + 1
    else:
        k = int(g / 1.2)
        while k > 0 and f(k) <= 0:
            hi, k = k, int(k / 1.5)
        lo = k
    side = 0
    while hi - lo > 1:
        flo, fhi = f(lo), f(hi)
        if side >= 2 or side <= -2 or not math.isfinite(flo - fhi):  # safeguard: bisect
            k = (lo + hi) // 2
            side = 0
        else:
            k = round(lo + (hi - lo) * flo / (flo - fhi))
            k = min(max(k, lo + 1), hi - 1)
        if f(k) <= 0:
            hi = k
            side = side + 1 if side >= 0 else 1
            if k - 1 > lo and f(k - 1) > 0:
                lo = k - 1
        else:
            lo = k
            side = side - 1 if side <= 0 else -1
            if k + 1 < hi and f(k + 1) <= 0:
                hi = k + 1
    return hi


# ---------------------------------------------------------------------------
# Laplace
# ---------------------------------------------------------------------------


def _lap_mae(m: int) -> float:
    """E|S| / b for S a sum of m Laplace(1): 2 m C(2m, m) / 4**m."""
    return (
        2.0
        * m
        * math.exp(special.gammaln(2 * m + 1) - 2 * special.gammaln(m + 1) - 2 * m * math.log(2))
    )


def _lap_log_sf(m: int, x: float) -> float:
    """log P(S > x), S a sum of m Laplace(1), x >= 0: P(Poisson(x) + NegBin(m, 1/2) <= m - 1)."""
    if x <= 0:
        return math.log(0.5)
    if m == 1:
        return math.log(0.5) - x
    spread = 15.0 * math.sqrt(x) + 60.0
    k = np.arange(max(0, int(x - spread)), min(m - 1, int(x + spread)) + 1, dtype=np.float64)
    if k.size == 0:
        return -math.inf
    log_pmf = k * math.log(x) - x - special.gammaln(k + 1)
    with np.errstate(divide="ignore"):
        log_cdf = np.log(special.betainc(m, m - k, 0.5))
    return float(_logsumexp_c(log_pmf + log_cdf))


@lru_cache(maxsize=_CACHE)
def _lap_half_width(m: int, alpha: float) -> float:
    """Half-width / b for the sum of m Laplace(1)."""
    if m == 1:
        return math.log(1.0 / alpha)
    target = math.log(alpha / 2)

    def f(x: float) -> float:
        return _lap_log_sf(m, x) - target

    hi = 1.01 * min(math.sqrt(2 * m / alpha), 2 * (math.log(2 / alpha) + 0.2877 * m))
    lo = 0.0
    # the Laplace sum has heavier tails than the normal of equal variance: bracket from there
    z = float(special.ndtri(1 - alpha / 2)) * math.sqrt(2 * m)
    if z < hi and f(z) > 0:
        lo = z
        step = 1.25 * z
        if step < hi and f(step) <= 0:
            hi = step
    return float(optimize.brentq(f, lo, hi, xtol=1e-10, rtol=1e-11))


# ---------------------------------------------------------------------------
# discrete Laplace
# ---------------------------------------------------------------------------


def _dlap_params(b: float) -> tuple[float, float]:
    """(a, 1 - a) with a = exp(-1/b), 1 - a computed without cancellation."""
    return math.exp(-1.0 / b), -math.expm1(-1.0 / b)


def _dlap_var(b: float) -> float:
    a, oma = _dlap_params(b)
    return 2.0 * a / oma**2


def _dlap_one_minus_phi(b: float) -> Callable[[NDArray[Any]], NDArray[Any]]:
    a, oma = _dlap_params(b)

    def fn(u: NDArray[np.float64]) -> NDArray[np.float64]:
        c = 4.0 * a * np.sin(u / 2) ** 2  # 2a (1 - cos u)
        return c / (oma**2 + c)

    return fn


@lru_cache(maxsize=_CACHE)
def _dlap_mae(m: int, b: float) -> float:
    a, oma = _dlap_params(b)
    if m == 1:
        return 2.0 * a / (oma * (1.0 + a))
    return _lattice_mae(m, _dlap_one_minus_phi(b), math.sqrt(m * _dlap_var(b)))


def _dlap_log_tail_nb(m: int, j: int, b: float) -> float:
    """log P(S >= j) for j >= m: P(NegBin(j-m, a) + NegBin(m, a/(1+a)) <= m-1)."""
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
    log_pmf = (
        special.gammaln(k + r)
        - special.gammaln(r)
        - special.gammaln(k + 1)
        - r / b
        + k * math.log(oma)
    )
    with np.errstate(divide="ignore"):
        log_cdf = np.log(special.betainc(m, m - k, q))
    return float(_logsumexp_c(log_pmf + log_cdf))


def _dlap_log_tail_contour(m: int, j: int, b: float) -> float:
    """log P(S >= j) by lattice inversion through the saddle point."""
    _, oma = _dlap_params(b)
    inv_b = 1.0 / b
    log_norm = 2.0 * math.log(oma)

    def k1(t: float) -> float:
        return math.exp(t - inv_b) / -math.expm1(t - inv_b) - math.exp(-t - inv_b) / -math.expm1(
            -t - inv_b
        )

    theta = _saddle(m, j, k1, inv_b * (1 - 1e-12))
    x1, x2 = math.exp(theta - inv_b), math.exp(-theta - inv_b)
    d1, d2 = -math.expm1(theta - inv_b), -math.expm1(-theta - inv_b)
    k_theta = log_norm - math.log(d1) - math.log(d2)
    k2_theta = x1 / d1**2 + x2 / d2**2

    def kc(z: NDArray[Any]) -> NDArray[Any]:
        return (
            np.log(d1) - np.log(-np.expm1(z - inv_b)) + np.log(d2) - np.log(-np.expm1(-z - inv_b))
        )

    return _contour_log_tail(m, j, theta, k_theta, k2_theta, kc)


@lru_cache(maxsize=_CACHE * 8)
def _dlap_log_tail(m: int, j: int, b: float) -> float:
    """log P(S >= j), S a sum of m discrete Laplace(b), integer j >= 1."""
    # union bound: S >= j needs some |Z_i| >= ceil(j/m); below e^-800 report 0 (underflow)
    if math.log(2.0 * m) - math.ceil(j / m) / b < -800:
        return -math.inf
    if m == 1:
        a, _ = _dlap_params(b)
        return -j / b - math.log1p(a)
    if j >= m:
        return _dlap_log_tail_nb(m, j, b)
    return _dlap_log_tail_contour(m, j, b)


@lru_cache(maxsize=_CACHE)
def _dlap_half_width(m: int, b: float, alpha: float) -> int:
    a, _ = _dlap_params(b)
    if m == 1:  # smallest k with 2 a^(k+1) / (1 + a) <= alpha
        k = max(0, math.ceil(b * math.log(2 / (alpha * (1 + a)))) - 1)
        while k > 0 and -(k / b) + math.log(2 / (1 + a)) <= math.log(alpha):
            k -= 1
        while -((k + 1) / b) + math.log(2 / (1 + a)) > math.log(alpha):
            k += 1
        return k
    guess = special.ndtri(1 - alpha / 2) * math.sqrt(m * _dlap_var(b))
    return _smallest_k(lambda k: math.log(2) + _dlap_log_tail(m, k + 1, b), math.log(alpha), guess)


# ---------------------------------------------------------------------------
# discrete Gaussian
# ---------------------------------------------------------------------------


@lru_cache(maxsize=256)
def _dg_weights(sigma: float) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Support k = 0..L and normalised pmf p_k (for sigma <= 8)."""
    top = math.ceil(40 * sigma) + 2
    k = np.arange(0, top + 1, dtype=np.float64)
    w = np.exp(-(k**2) / (2 * sigma**2))
    w /= w[0] + 2 * w[1:].sum()
    return k, w


def _dg_var(sigma: float) -> float:
    if sigma > _POISSON_SIGMA:
        return sigma**2
    k, p = _dg_weights(sigma)
    return float(2 * np.dot(k[1:] ** 2, p[1:]))


def _dg_one_minus_phi(sigma: float) -> Callable[[NDArray[Any]], NDArray[Any]]:
    if sigma > _POISSON_SIGMA:
        return lambda u: -np.expm1(-(sigma**2) * u**2 / 2)
    k, p = _dg_weights(sigma)

    def fn(u: NDArray[np.float64]) -> NDArray[np.float64]:
        return 4.0 * (np.sin(np.outer(u, k[1:]) / 2) ** 2 @ p[1:])

    return fn


@lru_cache(maxsize=_CACHE)
def _dg_mae(m: int, sigma: float) -> float:
    if m == 1 and sigma <= _POISSON_SIGMA:
        k, p = _dg_weights(sigma)
        return float(2 * np.dot(k, p))
    return _lattice_mae(m, _dg_one_minus_phi(sigma), math.sqrt(m * _dg_var(sigma)))


def _dg_log_tail(m: int, j: int, sigma: float) -> float:
    """log P(S >= j), S a sum of m discrete Gaussian(sigma), integer j >= 1."""
    s2 = sigma**2
    if sigma >= 1.0:
        # Poisson summation:
        # sum_k e^{wk - k^2/(2 s2)} = sigma sqrt(2 pi) sum_l e^{s2 (w - 2 pi i l)^2 / 2}
        ls = np.arange(-4, 5) if sigma < 3.0 else np.arange(-1, 3)  # aliases that matter
        shifts = 1j * 2 * math.pi * ls
        log_norm = float(_logsumexp_c(-2 * math.pi**2 * s2 * np.arange(-4, 5.0) ** 2))
        theta = _saddle(m, j, lambda t: s2 * t, (j + 1.0) / (m * s2) + 1.0)
        log_m_theta = float(_logsumexp_c(s2 * (theta - shifts) ** 2 / 2).real)

        def kc(z: NDArray[Any]) -> NDArray[Any]:
            return _logsumexp_c(s2 * (z[..., None] - shifts) ** 2 / 2) - log_m_theta

        return _contour_log_tail(m, j, theta, log_m_theta - log_norm, s2, kc)

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
    while m * k1(upper) - j - _inv_expm1(upper) <= 0:
        upper *= 2
    theta = _saddle(m, j, k1, upper)
    k, w, log_mt = moments(theta)
    w = w / w.sum()
    mean = float(np.dot(k, w))
    k2 = float(np.dot((k - mean) ** 2, w))
    k_theta = log_mt - log_z

    def kc_direct(z: NDArray[Any]) -> NDArray[Any]:
        # only called on the contour Re z = theta: K(z) - K(theta) = log sum_k w_k e^{iuk}
        uk = np.outer(z.imag, k)
        with np.errstate(divide="ignore"):
            return np.log(np.cos(uk) @ w + 1j * (np.sin(uk) @ w))

    return _contour_log_tail(m, j, theta, k_theta, max(k2, 1e-300), kc_direct)


@lru_cache(maxsize=_CACHE * 8)
def _dg_log_tail_cached(m: int, j: int, sigma: float) -> float:
    k = math.ceil(j / m)  # union bound as for the discrete Laplace
    if math.log(2.0 * m) - k * k / (2 * sigma**2) - math.log(-math.expm1(-k / sigma**2)) < -800:
        return -math.inf
    if m == 1 and sigma <= _POISSON_SIGMA:
        kk, p = _dg_weights(sigma)
        tail = p[j:].sum() if j < kk.size else 0.0
        if tail > 0:
            return float(math.log(tail))
    return _dg_log_tail(m, j, sigma)


@lru_cache(maxsize=_CACHE)
def _dg_half_width(m: int, sigma: float, alpha: float) -> int:
    guess = special.ndtri(1 - alpha / 2) * math.sqrt(m * _dg_var(sigma))
    return _smallest_k(
        lambda k: math.log(2) + _dg_log_tail_cached(m, k + 1, sigma), math.log(alpha), guess
    )


# ---------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------


@overload
def noise_std(kind: NoiseKind | str, scale: float, m: ScalarInt = 1) -> float: ...
@overload
def noise_std(kind: NoiseKind | str, scale: float, m: ArrayLike) -> NDArray[np.float64]: ...


def noise_std(kind: NoiseKind | str, scale: float, m: ArrayLike = 1) -> FloatOrArray:
    """Standard deviation of the sum of ``m`` iid noise draws.

    Parameters
    ----------
    kind : {"laplace", "gaussian", "discrete_laplace", "discrete_gaussian"}
        Noise distribution.
    scale : float
        ``b`` for the Laplace kinds, ``sigma`` for the Gaussian kinds.
    m : int or array_like of int, default 1
        Number of noisy values summed (cells in a polygon).

    Returns
    -------
    float or numpy.ndarray
        Same shape as ``m``.

    Examples
    --------
    >>> noise_std("laplace", 2.0)  # b * sqrt(2)
    2.8284271247461903
    >>> noise_std("gaussian", 1.0, [1, 4])
    array([1., 2.])
    """
    kind = _check_kind(kind)
    s = _check_scale(scale)
    if kind == "laplace":
        var1 = 2 * s * s
    elif kind == "gaussian":
        var1 = s * s
    elif kind == "discrete_laplace":
        var1 = _dlap_var(s)
    else:
        var1 = _dg_var(s)
    arr, scalar = _check_m(m)
    out = np.sqrt(arr * var1)
    return float(out) if scalar else out


@overload
def mean_abs_error(kind: NoiseKind | str, scale: float, m: ScalarInt = 1) -> float: ...
@overload
def mean_abs_error(kind: NoiseKind | str, scale: float, m: ArrayLike) -> NDArray[np.float64]: ...


def mean_abs_error(kind: NoiseKind | str, scale: float, m: ArrayLike = 1) -> FloatOrArray:
    """Mean absolute error ``E|S|`` of the sum ``S`` of ``m`` iid noise draws.

    For Laplace this is ``2 m b C(2m, m) / 4**m`` (``b`` at ``m = 1``,
    about ``sqrt(4m/pi) b`` for large ``m``), not the RMS ``sqrt(2m) b``.

    Parameters
    ----------
    kind : {"laplace", "gaussian", "discrete_laplace", "discrete_gaussian"}
        Noise distribution.
    scale : float
        ``b`` or ``sigma``.
    m : int or array_like of int, default 1
        Number of noisy values summed.

    Returns
    -------
    float or numpy.ndarray

    Examples
    --------
    >>> mean_abs_error("laplace", 3.0)
    3.0
    >>> round(mean_abs_error("laplace", 1.0, 2), 6)  # 2*2*C(4,2)/16
    1.5
    """
    kind = _check_kind(kind)
    s = _check_scale(scale)
    if kind == "laplace":
        return _per_m(m, lambda k: s * _lap_mae(k))
    if kind == "gaussian":
        return _per_m(m, lambda k: s * math.sqrt(2 * k / math.pi))
    if kind == "discrete_laplace":
        return _per_m(m, lambda k: _dlap_mae(k, s))
    return _per_m(m, lambda k: _dg_mae(k, s))


@overload
def half_width(
    kind: NoiseKind | str, scale: float, m: ScalarInt = 1, alpha: float = 0.05
) -> float: ...
@overload
def half_width(
    kind: NoiseKind | str, scale: float, m: ArrayLike, alpha: float = 0.05
) -> NDArray[np.float64]: ...


def half_width(
    kind: NoiseKind | str, scale: float, m: ArrayLike = 1, alpha: float = 0.05
) -> FloatOrArray:
    """Two-sided half-width ``h`` with ``P(|S| <= h) >= 1 - alpha`` for a sum of ``m`` draws.

    For the continuous kinds ``P(|S| <= h) = 1 - alpha`` exactly. For the
    discrete kinds ``h`` is the smallest INTEGER with coverage at least
    ``1 - alpha`` (the interval ``[x - h, x + h]`` around an integer release).

    Parameters
    ----------
    kind : {"laplace", "gaussian", "discrete_laplace", "discrete_gaussian"}
        Noise distribution.
    scale : float
        ``b`` or ``sigma``.
    m : int or array_like of int, default 1
        Number of noisy values summed; computed once per distinct value.
    alpha : float, default 0.05
        Miss probability, in ``[1e-15, 1)``.

    Returns
    -------
    float or numpy.ndarray
        Same shape as ``m`` (integral values for the discrete kinds).

    Examples
    --------
    >>> round(half_width("laplace", 1.0, alpha=0.01), 6)  # b ln(1/alpha)
    4.60517
    >>> half_width("discrete_laplace", 1.0, [1, 1, 100])
    array([ 3.,  3., 27.])
    """
    kind = _check_kind(kind)
    s = _check_scale(scale)
    a = _check_alpha(alpha)
    if kind == "laplace":
        return _per_m(m, lambda k: s * _lap_half_width(k, a))
    if kind == "gaussian":
        z = float(special.ndtri(1 - a / 2))
        return _per_m(m, lambda k: s * z * math.sqrt(k))
    if kind == "discrete_laplace":
        return _per_m(m, lambda k: float(_dlap_half_width(k, s, a)))
    return _per_m(m, lambda k: float(_dg_half_width(k, s, a)))


@overload
def tail_probability(
    kind: NoiseKind | str, scale: float, threshold: float, m: ScalarInt = 1
) -> float: ...
@overload
def tail_probability(
    kind: NoiseKind | str, scale: float, threshold: float, m: ArrayLike
) -> NDArray[np.float64]: ...


def tail_probability(
    kind: NoiseKind | str, scale: float, threshold: float, m: ArrayLike = 1
) -> FloatOrArray:
    """``P(|S| > threshold)`` for the sum ``S`` of ``m`` iid noise draws.

    Parameters
    ----------
    kind : {"laplace", "gaussian", "discrete_laplace", "discrete_gaussian"}
        Noise distribution.
    scale : float
        ``b`` or ``sigma``.
    threshold : float
        Finite and >= 0.
    m : int or array_like of int, default 1
        Number of noisy values summed.

    Returns
    -------
    float or numpy.ndarray

    Examples
    --------
    >>> round(tail_probability("laplace", 1.0, 2.0), 6)  # exp(-2)
    0.135335
    >>> round(tail_probability("discrete_laplace", 1.0, 0), 6)  # 2a/(1+a), a = 1/e
    0.537883
    """
    kind = _check_kind(kind)
    s = _check_scale(scale)
    try:
        x = float(threshold)
    except (TypeError, ValueError):
        raise InvalidInput(f"threshold={threshold!r} is not a number; pass e.g. 10.0") from None
    if not math.isfinite(x) or x < 0:
        raise InvalidInput(f"threshold={threshold!r} must be finite and >= 0; pass e.g. 10.0")
    if kind == "laplace":
        return _per_m(m, lambda k: 2 * math.exp(_lap_log_sf(k, x / s)))
    if kind == "gaussian":
        return _per_m(m, lambda k: 2 * float(special.ndtr(-x / (s * math.sqrt(k)))))
    j = math.floor(x) + 1  # |S| > x  <=>  |S| >= j for integer S
    if kind == "discrete_laplace":
        return _per_m(m, lambda k: min(1.0, 2 * math.exp(_dlap_log_tail(k, j, s))))
    return _per_m(m, lambda k: min(1.0, 2 * math.exp(_dg_log_tail_cached(k, j, s))))


@dataclass(frozen=True)
class Accuracy:
    """Error figures of the sum of ``m`` noisy values.

    Attributes
    ----------
    kind : str
        Noise kind.
    scale : float
        ``b`` or ``sigma``.
    m : int or numpy.ndarray
        Number of values summed.
    alpha : float
        Miss probability of the interval.
    std, mean_abs_error, half_width : float or numpy.ndarray
        Standard deviation, ``E|S|`` and the ``(1 - alpha)`` half-width.

    Examples
    --------
    >>> acc = accuracy("gaussian", 2.0, m=1, alpha=0.05)
    >>> acc.std, round(acc.half_width, 4)
    (2.0, 3.9199)
    """

    kind: str
    scale: float
    m: int | NDArray[np.int64]
    alpha: float
    std: float | NDArray[np.float64]
    mean_abs_error: float | NDArray[np.float64]
    half_width: float | NDArray[np.float64]


def accuracy(
    kind: NoiseKind | str, scale: float, m: ArrayLike = 1, alpha: float = 0.05
) -> Accuracy:
    """Standard deviation, mean absolute error and half-width together.

    Parameters
    ----------
    kind : {"laplace", "gaussian", "discrete_laplace", "discrete_gaussian"}
        Noise distribution.
    scale : float
        ``b`` or ``sigma``.
    m : int or array_like of int, default 1
        Number of noisy values summed.
    alpha : float, default 0.05
        Miss probability of the interval.

    Returns
    -------
    Accuracy

    Examples
    --------
    >>> accuracy("discrete_laplace", 1.0, m=[1, 100]).half_width
    array([ 3., 27.])
    """
    arr, scalar = _check_m(m)
    return Accuracy(
        kind=_check_kind(kind),
        scale=_check_scale(scale),
        m=int(arr) if scalar else arr,
        alpha=_check_alpha(alpha),
        std=noise_std(kind, scale, m),
        mean_abs_error=mean_abs_error(kind, scale, m),
        half_width=half_width(kind, scale, m, alpha),
    )


def scale_for_half_width(
    kind: NoiseKind | str, target: float, m: int = 1, alpha: float = 0.05
) -> float:
    """Largest noise scale whose ``(1 - alpha)`` half-width for a sum of ``m`` is <= ``target``.

    The largest scale means the least privacy spent for the wanted accuracy
    (``epsilon = sensitivity / scale`` or ``rho = sensitivity**2 / (2 scale**2)``).
    For the discrete kinds the half-width is an integer step function of the
    scale; the result is accurate to a relative 1e-9.

    Parameters
    ----------
    kind : {"laplace", "gaussian", "discrete_laplace", "discrete_gaussian"}
        Noise distribution.
    target : float
        Wanted half-width (finite, > 0; >= 1 is sensible for the discrete kinds).
    m : int, default 1
        Number of noisy values summed.
    alpha : float, default 0.05
        Miss probability of the interval.

    Returns
    -------
    float

    Raises
    ------
    InvalidInput
        On an unknown kind, a non-positive target, a bad ``alpha`` or an array ``m``.

    Examples
    --------
    >>> round(scale_for_half_width("laplace", 2.995732273553991, alpha=0.05), 9)
    1.0
    >>> b = scale_for_half_width("discrete_laplace", 27, m=100)
    >>> half_width("discrete_laplace", b, m=100)
    27.0
    """
    kind = _check_kind(kind)
    t = _check_scale(target, "target")
    a = _check_alpha(alpha)
    arr, scalar = _check_m(m)
    if not scalar:
        raise InvalidInput(f"m={m!r} must be a single integer here; call once per m")
    mm = int(arr)
    if kind in ("laplace", "gaussian"):
        unit = float(half_width(kind, 1.0, mm, a))
        return t / unit

    def ok(scale: float) -> bool:
        return float(half_width(kind, scale, mm, a)) <= t

    lo = 1e-6  # half-width 0 here for any m <= 1e12 and alpha >= 1e-15
    if not ok(lo):  # pragma: no cover - defensive
        raise InvalidInput(f"target half-width {target!r} is not reachable; ask for more")
    sd1 = float(noise_std(kind, 1.0, mm))
    hi = max(2 * t / sd1, 1.0)
    while ok(hi):
        lo, hi = hi, hi * 2
    while hi / lo > 1 + 1e-9:
        mid = math.sqrt(lo * hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo
