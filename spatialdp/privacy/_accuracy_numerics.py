"""The numerics of :mod:`spatialdp.privacy.accuracy`: error figures of sums of noise draws.

Shared tools first - composite Gauss-Legendre quadrature, the lattice
inversion through a saddle point, the lattice mean absolute error and an
integer search for the smallest half-width - then the figures they serve:
the continuous Laplace (unit scale ``b = 1``; the caller multiplies by ``b``,
an exact Poisson/negative binomial identity for the tail), and the two lattice
kinds, discrete Laplace and discrete Gaussian (variance, mean absolute error,
tail probabilities, integer half-widths). The methods are described in
:mod:`spatialdp.privacy.accuracy`. Roots are found by
:func:`scipy.optimize.brentq` and log-sum-exps by
:func:`scipy.special.logsumexp`; every bracket search is bounded.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

_LOG_NEGLIGIBLE = -80.0  # exp(-80) ~ 2e-35: integrand below this relative size is dropped
CACHE = 4096  # lru_cache size of the per-(m, scale) figures
_POISSON_SIGMA = 8.0  # discrete Gaussian: variance and phi by their sigma -> inf forms above
# Below this sigma, P(Z != 0) <= 2 exp(-1 / (2 sigma**2)) = 2 exp(-800): every figure of a
# sum of up to 1e10 draws is 0 in double precision (and sigma**2 may underflow).
_DG_NOISELESS = 0.025


def _gl_nodes(breaks: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return composite 20-point Gauss-Legendre nodes and weights over consecutive breakpoints."""
    lo, hi = breaks[:-1, None], breaks[1:, None]
    half = (hi - lo) / 2
    nodes, weights = _gauss_legendre()
    return (lo + half * (nodes + 1)).ravel(), (half * weights).ravel()


@lru_cache(maxsize=1)
def _gauss_legendre() -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return the 20-point Gauss-Legendre rule on [-1, 1] (numpy.polynomial loads on first use)."""
    from numpy.polynomial.legendre import leggauss  # lazy: slow to import, rarely needed

    nodes, weights = leggauss(20)
    return nodes, weights


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


# ---------------------------------------------------------------------------
# continuous Laplace (unit scale)
# ---------------------------------------------------------------------------


def lap_mae(m: int) -> float:
    """Return E|S| / b for S a sum of m Laplace(1): 2 m C(2m, m) / 4**m.

    ``C(2m, m) / 4**m = Gamma(m + 1/2) / (sqrt(pi) Gamma(m + 1))``, a ratio taken by
    :func:`scipy.special.poch` (no cancellation of two huge log-gammas at large m).
    """
    from scipy import special  # lazy: scipy is slow to import
    return 2.0 * m * float(special.poch(m + 1, -0.5)) / math.sqrt(math.pi)


def lap_log_sf(m: int, x: float) -> float:
    """Return log P(S > x), S a sum of m Laplace(1), x >= 0.

    ``P(S > x) = P(Poisson(x) + NegBin(m, 1/2) <= m - 1)``.
    """
    from scipy import special  # lazy: scipy is slow to import
    if x <= 0:
        return math.log(0.5)
    if math.isinf(x):  # a threshold beyond every float multiple of a tiny scale
        return -math.inf
    if m == 1:
        return math.log(0.5) - x
    spread = 15.0 * math.sqrt(x) + 60.0
    first, last = max(0, int(x - spread)), min(m - 1, int(x + spread))
    if first > last:  # P(Poisson(x) <= m - 1) is below exp(-100): negligible
        return -math.inf
    k = np.arange(first, last + 1, dtype=np.float64)
    log_pmf = poisson_logpmf(k, x)
    with np.errstate(divide="ignore"):
        log_cdf = np.log(special.betainc(m, m - k, 0.5))
    return float(logsumexp_c(log_pmf + log_cdf))


@lru_cache(maxsize=CACHE)
def lap_half_width(m: int, alpha: float) -> float:
    """Return the half-width / b for the sum of m Laplace(1)."""
    if m == 1:  # closed form: no scipy import for the common single-value error bar
        return math.log(1.0 / alpha)
    from scipy import optimize, special  # lazy: scipy is slow to import
    target = math.log(alpha / 2)

    def f(x: float) -> float:
        return lap_log_sf(m, x) - target

    hi = 1.01 * min(math.sqrt(2 * m / alpha), 2 * (math.log(2 / alpha) + 0.2877 * m))
    lo = 0.0
    # the Laplace sum has heavier tails than the normal of equal variance: bracket from there
    z = -float(special.ndtri(alpha / 2)) * math.sqrt(2 * m)
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
    # union bound as for the discrete Laplace; a float, so that k * k overflows to inf
    # (the bound then says -inf) where an int would not convert (j near 1e154 and up)
    k = float(math.ceil(j / m))
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
