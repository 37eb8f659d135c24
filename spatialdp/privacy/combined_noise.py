"""The noise on sums, differences and ratios of released values.

Every published value carries noise of a known law, so the noise on a
difference of two releases, a trend over several, or a ratio of a noisy sum to
a noisy count is known too. These functions give its exact quantiles (by
characteristic-function inversion, not a normal approximation: Laplace sums
have heavier tails) and the linearised scales of a ratio estimate. They are
post-processing: they read published values and public scales only.

A ratio estimate (a ``present`` metric, and every metric under add/remove
neighbours) is a noisy sum over a noisy count, ``(S + L_s) / (n + L_n)``. Its
noise is, to first order, ``(L_s - R L_n) / n``: two Laplace noises of scales
``b_s / n`` and ``|R| b_n / n``, read from the published noisy sum, count,
value and scales (the delta method; the second-order term is of relative size
``b_n / n``, below 2% at the demo's floor).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from spatialdp._validation import check_alpha, check_real
from spatialdp.exceptions import InvalidInput

__all__ = ["difference_threshold", "laplace_difference_sf", "linearised_scales",
           "noise_sum_quantile", "noise_sum_quantiles", "ratio_interval", "ratio_noise_scales"]

FloatArray = NDArray[np.float64]


def linearised_scales(value: ArrayLike, noisy_count: ArrayLike, sum_scale: ArrayLike,
                      count_scale: ArrayLike) -> FloatArray:
    """Return the Laplace scales ``(b_s / n, |R| b_n / n)`` of ratio estimates, one row each.

    A ratio estimate ``R = (S + L_s) / (n + L_n)`` has, to first order, the
    noise ``(L_s - R L_n) / n``: two Laplace noises of these scales, from the
    published value, noisy count and scales alone.

    Examples
    --------
    >>> linearised_scales([1.5], [200.0], [8.0], [2.0]).round(3).tolist()
    [[0.04, 0.015]]
    """
    n = np.asarray(noisy_count, dtype=np.float64)
    return np.column_stack([np.asarray(sum_scale, dtype=np.float64) / n,
                            np.abs(np.asarray(value, dtype=np.float64))
                            * np.asarray(count_scale, dtype=np.float64) / n])


def ratio_interval(num: FloatArray, den: FloatArray, half_num: FloatArray | float,
                   half_den: FloatArray | float, low: FloatArray | float,
                   high: FloatArray | float) -> tuple[FloatArray, FloatArray]:
    """Conservative interval of ``S / C`` from noisy ``num``, ``den`` and noise half-widths.

    ``S`` lies in ``num +/- half_num`` and ``C`` in ``den +/- half_den``; the ratio
    then lies between the extreme quotients (when ``C``'s range stays above 0),
    intersected with ``[low, high]``. Where ``den - half_den <= 0`` the interval is
    the whole clip range.

    Examples
    --------
    >>> lo, hi = ratio_interval(np.array([50.0]), np.array([100.0]), 5.0, 10.0, 0.0, 1.0)
    >>> round(float(lo[0]), 4), round(float(hi[0]), 4)
    (0.4091, 0.6111)
    """
    s_lo, s_hi = num - half_num, num + half_num
    c_lo, c_hi = den - half_den, den + half_den
    positive = c_lo > 0
    safe_lo = np.where(positive, c_lo, 1.0)
    quotients = np.stack([s_lo / safe_lo, s_lo / c_hi, s_hi / safe_lo, s_hi / c_hi])
    lower = np.where(positive, quotients.min(axis=0), low)
    upper = np.where(positive, quotients.max(axis=0), high)
    return np.clip(lower, low, high), np.clip(upper, low, high)


def _sum_tail(t: float, laplace_scales: NDArray[np.float64], normal_sd: float) -> float:
    """P(|S| > t) for S = sum of independent Laplace(c_i) plus N(0, normal_sd^2).

    Gil-Pelaez inversion of the characteristic function
    ``prod_i 1 / (1 + c_i^2 u^2) * exp(-normal_sd^2 u^2 / 2)``; the oscillating
    tail of the integral goes to QUADPACK's Fourier routine.
    """
    squares = [float(x) ** 2 for x in laplace_scales]  # scalar math: quad calls phi ~1e4 times
    half_var = 0.5 * normal_sd**2

    def phi(u: float) -> float:
        uu = u * u
        return math.exp(-half_var * uu - sum([math.log1p(c2 * uu) for c2 in squares]))

    u0 = 1.0 / max(math.sqrt(max(squares, default=0.0)), normal_sd)
    from scipy import integrate  # lazy: scipy is slow to import

    head = integrate.quad(lambda u: (np.sin(u * t) / u if u > 0 else t) * phi(u), 0.0, u0,
                          limit=200)[0]
    rest = integrate.quad(lambda u: phi(u) / u, u0, np.inf, weight="sin", wvar=t,
                          limlst=200)[0]
    return float(1.0 - 2.0 / np.pi * (head + rest))


@lru_cache(maxsize=4096)
def _unit_quantile(relative_scales: tuple[float, ...], relative_normal: float, alpha: float
                   ) -> float:
    c = np.asarray(relative_scales)
    upper = 10.0 * (c.sum() + relative_normal) * np.log(2.0 / alpha) + 1.0
    from scipy import optimize

    return float(optimize.brentq(lambda t: _sum_tail(t, c, relative_normal) - alpha,
                                 0.0, upper, xtol=1e-10))


def noise_sum_quantile(laplace_scales: ArrayLike, normal_sd: float = 0.0, alpha: float = 0.01
                       ) -> float:
    """Exact ``1 - alpha`` quantile of ``|sum_i c_i L_i + normal_sd Z|``.

    The ``L_i`` are independent standard Laplace noises (scale 1, times ``c_i``)
    and ``Z`` standard normal: the DP noise of a difference or a trend of
    releases, plus, when cohorts change between rounds, their sampling error.
    Exact, not a normal approximation (Laplace sums have heavier tails): in
    closed form when the scales are distinct (:mod:`spatialdp.privacy.laplace_sum`),
    by characteristic-function inversion (cached by shape) when two nearly coincide.

    Examples
    --------
    >>> round(noise_sum_quantile([1.0], alpha=0.01), 4)   # ln(100)
    4.6052
    >>> round(noise_sum_quantile([1.0, 1.0], alpha=0.01), 4)
    5.9902
    """
    alpha = check_alpha(alpha)
    normal_sd = check_real(normal_sd, "normal_sd")
    try:
        c = np.abs(np.atleast_1d(np.asarray(laplace_scales, dtype=np.float64)))
    except (TypeError, ValueError):
        raise InvalidInput("laplace_scales are not numbers; give the noise scales") from None
    if normal_sd < 0 or not np.isfinite(normal_sd) or not np.isfinite(c).all():
        raise InvalidInput("noise scales must be finite and non-negative")
    c = c[c > 0]
    unit = float(c.sum() + normal_sd)
    if unit == 0:
        raise InvalidInput("noise scales must be positive")
    return float(_quantiles(c[None, :] if c.size else np.zeros((1, 1)),
                            np.array([normal_sd]), float(alpha))[0])


def noise_sum_quantiles(laplace_scales: ArrayLike, normal_sd: ArrayLike = 0.0,
                        alpha: float = 0.01) -> FloatArray:
    """:func:`noise_sum_quantile` for many rows at once: one scale vector per row.

    Parameters
    ----------
    laplace_scales : array-like (n, k)
        Laplace scales per row (zeros pad shorter rows).
    normal_sd : float or array-like (n,)
    alpha : float

    Examples
    --------
    >>> noise_sum_quantiles([[1.0, 0.0], [1.0, 1.0]], 0.0, 0.01).round(4).tolist()
    [4.6052, 5.9902]
    """
    alpha = check_alpha(alpha)
    try:
        c = np.abs(np.asarray(laplace_scales, dtype=np.float64))
        s = np.broadcast_to(np.asarray(normal_sd, dtype=np.float64), (len(c),))
    except (TypeError, ValueError):
        raise InvalidInput("laplace_scales must be numbers, one row of scales per value, "
                           "and normal_sd one number or one per row") from None
    if c.ndim != 2 or not (np.isfinite(c).all() and np.isfinite(s).all() and (s >= 0).all()):
        raise InvalidInput("noise scales must be a finite, non-negative (rows, scales) array")
    if ((c.sum(axis=1) + s) == 0).any():
        raise InvalidInput("noise scales must be positive")
    return _quantiles(c, np.asarray(s, dtype=np.float64), float(alpha))


def _quantiles(c: FloatArray, s: FloatArray, alpha: float) -> FloatArray:
    """Return the quantiles: closed form for distinct scales, numerical inversion otherwise."""
    from spatialdp.privacy.laplace_sum import laplace_sum_quantile, well_separated

    out = np.empty(len(c))
    closed = well_separated(c)
    if closed.any():
        out[closed] = laplace_sum_quantile(c[closed], s[closed], alpha)
    for i in np.flatnonzero(~closed):
        row = c[i][c[i] > 0]
        unit = float(row.sum() + s[i])
        # Normalise and round (6 significant digits) so that rows of one shape share a cache.
        rel = tuple(sorted(float(f"{x / unit:.6g}") for x in row))
        out[i] = unit * _unit_quantile(rel, float(f"{s[i] / unit:.6g}"), alpha)
    return out


def difference_threshold(scale_a: ArrayLike, scale_b: ArrayLike, alpha: float = 0.01,
                         sampling_sd: ArrayLike = 0.0) -> NDArray[np.float64]:
    """Exact ``1 - alpha`` quantile of the noise on a difference of two releases.

    ``scale_a``, ``scale_b``: Laplace scales of the two releases' noise;
    ``sampling_sd``: standard deviation of the difference's sampling error (0
    when both releases measure the same clients). Vectorised over regions: the
    Laplace difference has a closed-form tail, the sampling error is averaged
    with a 96-node Gauss-Hermite rule, and one bisection runs for all regions.

    Examples
    --------
    >>> t = difference_threshold(1.0, 1.0, 0.01)
    >>> round(float(t), 4)
    5.9902
    """
    try:
        a, b, s = np.broadcast_arrays(np.asarray(scale_a, dtype=np.float64),
                                      np.asarray(scale_b, dtype=np.float64),
                                      np.asarray(sampling_sd, dtype=np.float64))
    except (TypeError, ValueError):
        raise InvalidInput("the noise scales and sampling_sd must be numbers of one shape "
                           "(one per region)") from None
    if not (np.isfinite(a).all() and np.isfinite(b).all() and (a > 0).all()
            and (b > 0).all()):
        raise InvalidInput("noise scales must be positive and finite")
    if not (np.isfinite(s).all() and (s >= 0).all()):
        raise InvalidInput("the sampling error's sd must be finite and non-negative (cohorts "
                           "of at least one client)")
    alpha = check_alpha(alpha)
    if a.size == 1:  # one comparison: the exact inversion, cached by shape
        return np.full(a.shape, noise_sum_quantile([float(a.flat[0]), float(b.flat[0])],
                                                   float(s.flat[0]), alpha))
    low = np.zeros(a.shape)
    high = (a + b + 4.0 * s) * (np.log(2.0 / alpha) + 2.0) * 2.0
    for _ in range(64):  # vectorised bisection over all regions at once
        mid = 0.5 * (low + high)
        above = _difference_tail(mid, a, b, s) > alpha
        low = np.where(above, mid, low)
        high = np.where(above, high, mid)
    return np.asarray(0.5 * (low + high), dtype=np.float64)


# Probabilists' Gauss-Hermite rule (expectations over a standard normal) and
# Gauss-Laguerre rules (expectations over Exp(1), and over Gamma(2) via the x factor).
_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite_e.hermegauss(96)
_GH_WEIGHTS = _GH_WEIGHTS / np.sqrt(2.0 * np.pi)
_GL_NODES, _GL_WEIGHTS = np.polynomial.laguerre.laggauss(96)


def laplace_difference_sf(x: NDArray[np.float64], a: NDArray[np.float64],
                           b: NDArray[np.float64]) -> NDArray[np.float64]:
    """P(X - Y > x) for independent Laplace X, Y of scales a, b (closed form, any x).

    Examples
    --------
    >>> float(laplace_difference_sf(np.array(0.0), np.array(1.0), np.array(2.0)))
    0.5
    """
    t = np.abs(x)
    hi, lo = np.maximum(a, b), np.minimum(a, b)
    equal = np.isclose(hi, lo, rtol=1e-6)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        distinct = (hi**2 * np.exp(-t / hi) - lo**2 * np.exp(-t / lo)) / (hi**2 - lo**2)
    two_sided = np.where(equal, np.exp(-t / hi) * (1.0 + t / (2.0 * hi)), distinct)
    return np.where(x >= 0, two_sided / 2.0, 1.0 - two_sided / 2.0)


def _normal_two_sided(t: NDArray[np.float64], d: NDArray[np.float64], s: NDArray[np.float64]
                      ) -> NDArray[np.float64]:
    """P(|d + s Z| > t) for a standard normal Z."""
    from scipy.special import ndtr

    return np.asarray(ndtr((d - t) / s) + ndtr((-t - d) / s), dtype=np.float64)


def _difference_tail(t: NDArray[np.float64], a: NDArray[np.float64], b: NDArray[np.float64],
                     s: NDArray[np.float64]) -> NDArray[np.float64]:
    """P(|X - Y + s Z| > t), X, Y Laplace of scales a, b and Z standard normal.

    Whichever part is smoother is integrated numerically: over the normal (the
    Laplace difference has a closed-form tail) when it is the narrower one, and
    over the Laplace difference (its density is a mix of exponentials, so
    Gauss-Laguerre rules fit it) when the normal dominates.
    """
    a, b, s, t = np.broadcast_arrays(a, b, s, t)
    hi, lo = np.maximum(a, b), np.minimum(a, b)
    out = np.empty(t.shape)
    narrow = s <= hi
    out[narrow] = _tail_over_normal(t[narrow], hi[narrow], lo[narrow], s[narrow])
    out[~narrow] = _tail_over_laplace(t[~narrow], hi[~narrow], lo[~narrow], s[~narrow])
    return out


def _tail_over_normal(t: NDArray[np.float64], hi: NDArray[np.float64], lo: NDArray[np.float64],
                      s: NDArray[np.float64]) -> NDArray[np.float64]:
    x = t[:, None] - s[:, None] * _GH_NODES
    weighted = laplace_difference_sf(x, hi[:, None], lo[:, None]) * _GH_WEIGHTS
    return np.asarray(2.0 * weighted.sum(axis=-1), dtype=np.float64)


def _mean_over_exponential(t: NDArray[np.float64], scale: NDArray[np.float64],
                           s: NDArray[np.float64], gamma2: bool = False) -> NDArray[np.float64]:
    """E[P(|D + s Z| > t)] for D = +/- scale * E, E ~ Exp(1) (or Gamma(2)), sign fair."""
    d = scale[:, None] * _GL_NODES
    both = _normal_two_sided(t[:, None], d, s[:, None]) + _normal_two_sided(t[:, None], -d,
                                                                            s[:, None])
    weights = _GL_WEIGHTS * _GL_NODES if gamma2 else _GL_WEIGHTS
    return np.asarray((both * weights).sum(axis=-1) / 2.0, dtype=np.float64)


def _tail_over_laplace(t: NDArray[np.float64], hi: NDArray[np.float64], lo: NDArray[np.float64],
                       s: NDArray[np.float64]) -> NDArray[np.float64]:
    # The density of X - Y is hi^2/(hi^2-lo^2) Laplace(hi) - lo^2/(hi^2-lo^2) Laplace(lo);
    # for equal scales, half Laplace(hi) and half a two-sided Gamma(2, hi).
    out = np.empty(t.shape)
    e = np.isclose(hi, lo, rtol=1e-6)
    out[e] = 0.5 * (_mean_over_exponential(t[e], hi[e], s[e])
                    + _mean_over_exponential(t[e], hi[e], s[e], gamma2=True))
    d = ~e
    w = hi[d] ** 2 / (hi[d] ** 2 - lo[d] ** 2)
    out[d] = (w * _mean_over_exponential(t[d], hi[d], s[d])
              + (1.0 - w) * _mean_over_exponential(t[d], lo[d], s[d]))
    return out


def ratio_noise_scales(frame: Any) -> NDArray[np.float64]:
    """Return the linearised Laplace scales ``(b_s / n, |R| b_n / n)`` of each ratio row.

    A ratio estimate ``(S + L_s) / (n + L_n)`` has, to first order, the noise
    ``(L_s - R L_n) / n``: two Laplace noises of these scales, read from the
    frame's published ``noisy_count``, ``value``, ``sum_scale`` and ``count_scale``.

    Parameters
    ----------
    frame : DataFrame
        Rows of a report frame whose ``estimator`` is a ratio estimate (any frame
        with the columns ``value``, ``noisy_count``, ``sum_scale``, ``count_scale``).

    Returns
    -------
    ndarray of shape (n_rows, 2)
        The sum noise's and the count noise's linearised scales, per row.

    Examples
    --------
    >>> import pandas as pd
    >>> frame = pd.DataFrame({"noisy_count": [200.0], "value": [1.5], "sum_scale": [8.0],
    ...                       "count_scale": [2.0]})
    >>> ratio_noise_scales(frame).round(3).tolist()
    [[0.04, 0.015]]
    """
    return linearised_scales(frame.value, frame.noisy_count, frame.sum_scale, frame.count_scale)
