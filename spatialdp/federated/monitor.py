"""Alerts that respect error bars, drift across releases, and incident detectors.

Every published metric carries Laplace noise of a known scale, so the
distribution of a difference between two releases under "nothing changed" is
known exactly. An alert fires only when the observed difference exceeds the
``1 - alpha`` quantile of that noise difference: with no real change it fires
with probability ``alpha`` exactly, and a movement well inside the error bars
cannot fire.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import integrate, optimize, special

from spatialdp.exceptions import InvalidInput, PartitionMismatch
from spatialdp.federated.release import MetricRelease

__all__ = [
    "Comparison",
    "compare_releases",
    "compare_reports",
    "difference_threshold",
    "drift",
    "noise_sum_quantile",
]


def _sum_tail(t: float, laplace_scales: NDArray[np.float64], normal_sd: float) -> float:
    """P(|S| > t) for S = sum of independent Laplace(c_i) plus N(0, normal_sd^2).

    Gil-Pelaez inversion of the characteristic function
    ``prod_i 1 / (1 + c_i^2 u^2) * exp(-normal_sd^2 u^2 / 2)``; the oscillating
    tail of the integral goes to QUADPACK's Fourier routine.
    """
    c = laplace_scales

    def phi(u: float) -> float:
        return float(np.exp(-0.5 * (normal_sd * u) ** 2 - np.log1p((c * u) ** 2).sum()))

    u0 = 1.0 / max(float(c.max(initial=0.0)), normal_sd)
    head = integrate.quad(lambda u: (np.sin(u * t) / u if u > 0 else t) * phi(u), 0.0, u0,
                          limit=200)[0]
    rest = integrate.quad(lambda u: phi(u) / u, u0, np.inf, weight="sin", wvar=t,
                          limlst=200)[0]
    return 1.0 - 2.0 / np.pi * (head + rest)


@lru_cache(maxsize=4096)
def _unit_quantile(relative_scales: tuple[float, ...], relative_normal: float, alpha: float
                   ) -> float:
    c = np.asarray(relative_scales)
    upper = 10.0 * (c.sum() + relative_normal) * np.log(2.0 / alpha) + 1.0
    return float(optimize.brentq(lambda t: _sum_tail(t, c, relative_normal) - alpha,
                                 0.0, upper, xtol=1e-10))


def noise_sum_quantile(laplace_scales: ArrayLike, normal_sd: float = 0.0, alpha: float = 0.01
                       ) -> float:
    """Exact ``1 - alpha`` quantile of ``|sum_i c_i L_i + normal_sd Z|``.

    The ``L_i`` are independent standard Laplace noises (scale 1, times ``c_i``)
    and ``Z`` standard normal: the DP noise of a difference or a trend of
    releases, plus, when cohorts change between rounds, their sampling error.
    Computed by characteristic-function inversion (not a normal approximation:
    Laplace sums have heavier tails) and cached by shape.

    Examples
    --------
    >>> round(noise_sum_quantile([1.0], alpha=0.01), 4)   # ln(100)
    4.6052
    >>> round(noise_sum_quantile([1.0, 1.0], alpha=0.01), 4)
    5.9902
    """
    if not 0 < alpha < 1:
        raise InvalidInput(f"alpha={alpha} must lie in (0, 1)")
    c = np.abs(np.atleast_1d(np.asarray(laplace_scales, dtype=np.float64)))
    c = c[c > 0]
    if normal_sd < 0 or not np.isfinite(normal_sd) or not np.isfinite(c).all():
        raise InvalidInput("noise scales must be finite and non-negative")
    unit = float(c.sum() + normal_sd)
    if unit == 0:
        raise InvalidInput("noise scales must be positive")
    # Normalise and round (6 significant digits) so that regions of one shape share a cache.
    rel = tuple(sorted(float(f"{x / unit:.6g}") for x in c))
    return unit * _unit_quantile(rel, float(f"{normal_sd / unit:.6g}"), float(alpha))


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
    a, b, s = np.broadcast_arrays(np.asarray(scale_a, dtype=np.float64),
                                  np.asarray(scale_b, dtype=np.float64),
                                  np.asarray(sampling_sd, dtype=np.float64))
    if (a <= 0).any() or (b <= 0).any():
        raise InvalidInput("noise scales must be positive")
    if not 0 < alpha < 1:
        raise InvalidInput(f"alpha={alpha} must lie in (0, 1)")
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
    return 0.5 * (low + high)


# Probabilists' Gauss-Hermite rule (expectations over a standard normal) and
# Gauss-Laguerre rules (expectations over Exp(1), and over Gamma(2) via the x factor).
_GH_NODES, _GH_WEIGHTS = np.polynomial.hermite_e.hermegauss(96)
_GH_WEIGHTS = _GH_WEIGHTS / np.sqrt(2.0 * np.pi)
_GL_NODES, _GL_WEIGHTS = np.polynomial.laguerre.laggauss(96)


def _laplace_difference_sf(x: NDArray[np.float64], a: NDArray[np.float64],
                           b: NDArray[np.float64]) -> NDArray[np.float64]:
    """P(X - Y > x) for independent Laplace X, Y of scales a, b (closed form, any x)."""
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
    return special.ndtr((d - t) / s) + special.ndtr((-t - d) / s)


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
    return 2.0 * (_laplace_difference_sf(x, hi[:, None], lo[:, None]) * _GH_WEIGHTS).sum(axis=-1)


def _mean_over_exponential(t: NDArray[np.float64], scale: NDArray[np.float64],
                           s: NDArray[np.float64], gamma2: bool = False) -> NDArray[np.float64]:
    """E[P(|D + s Z| > t)] for D = +/- scale * E, E ~ Exp(1) (or Gamma(2)), sign fair."""
    d = scale[:, None] * _GL_NODES
    both = _normal_two_sided(t[:, None], d, s[:, None]) + _normal_two_sided(t[:, None], -d,
                                                                            s[:, None])
    weights = _GL_WEIGHTS * _GL_NODES if gamma2 else _GL_WEIGHTS
    return (both * weights).sum(axis=-1) / 2.0


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


@dataclass(frozen=True)
class Comparison:
    """The outcome of comparing two releases of one metric."""

    difference: float
    threshold: float
    alpha: float
    fired: bool

    def __bool__(self) -> bool:
        return self.fired


def _same_baseline(a: MetricRelease, b: MetricRelease) -> None:
    if a.metric != b.metric:
        raise PartitionMismatch(
            f"cannot compare {a.metric} with {b.metric}: a new spec version starts a new "
            "comparison baseline"
        )
    if a.partition_version != b.partition_version:
        raise PartitionMismatch(
            f"cannot compare releases on partition versions {a.partition_version!r} and "
            f"{b.partition_version!r}: a new partition starts a new comparison baseline"
        )


def _sampling_sd(sampling_sd: ArrayLike | None, cohort_a: ArrayLike, cohort_b: ArrayLike
                 ) -> NDArray[np.float64]:
    """Standard deviation of the sampling error of a difference of two cohort means."""
    if sampling_sd is None:
        return np.zeros(np.shape(cohort_a))
    sd = np.asarray(sampling_sd, dtype=np.float64)
    if (sd < 0).any() or not np.isfinite(sd).all():
        raise InvalidInput(f"sampling_sd={sampling_sd!r} must be finite and non-negative")
    a = np.asarray(cohort_a, dtype=np.float64)
    b = np.asarray(cohort_b, dtype=np.float64)
    return np.asarray(sd * np.sqrt(1.0 / a + 1.0 / b))


def compare_releases(current: MetricRelease, previous: MetricRelease, *, alpha: float = 0.01,
                     sampling_sd: float | None = None) -> Comparison:
    """Fire only when two releases differ by more than their combined uncertainty.

    The threshold is the exact ``1 - alpha`` quantile of what the difference would
    be if nothing had changed, so the false-alarm rate is ``alpha``:

    - ``sampling_sd=None``: the two releases measure the same clients (a fixed
      panel, or a re-release); only the two Laplace noises differ.
    - ``sampling_sd=s``: each round draws a fresh cohort from an unchanged
      population whose per-client values have standard deviation ``s`` (from a
      public pilot, a published histogram, or the bound ``(high - low) / 2``);
      the sampling error ``s * sqrt(1/n_a + 1/n_b)`` is added to the noise.
      Without it, fresh cohorts of thousands of clients raise false alarms far
      more often than ``alpha``: the DP noise shrinks as 1/n, sampling error only
      as 1/sqrt(n).

    (The seed's rule "difference > bar_a + bar_b" is a looser version of the first
    case with an uncalibrated false-alarm rate.)

    Raises
    ------
    PartitionMismatch
        The releases belong to different metric or partition versions.
    """
    _same_baseline(current, previous)
    spread = _sampling_sd(sampling_sd, current.contributors, previous.contributors)
    threshold = float(difference_threshold(current.noise_scale, previous.noise_scale, alpha,
                                           spread))
    diff = current.value - previous.value
    return Comparison(diff, threshold, alpha, bool(abs(diff) > threshold))


def compare_reports(current: pd.DataFrame, previous: pd.DataFrame, *, alpha: float = 0.01,
                    sampling_sd: float | None = None) -> pd.DataFrame:
    """Region-by-region comparison of two regional report frames of one metric.

    Parameters
    ----------
    current, previous : GeoDataFrame
        Frames of :class:`~spatialdp.federated.regional.RegionalReport` for the same
        metric and partition (their ``attrs["spatialdp"]`` are checked).
    alpha : float
        False-alarm rate per region when nothing changed.
    sampling_sd : float, optional
        Per-client standard deviation when the rounds draw fresh cohorts; see
        :func:`compare_releases`.

    Returns
    -------
    DataFrame
        Per region published in both: ``difference``, ``threshold``, ``fired``.
    """
    meta_now = current.attrs.get("spatialdp", {})
    meta_then = previous.attrs.get("spatialdp", {})
    for key in ("partition_version", "metric"):
        if meta_now.get(key) != meta_then.get(key):
            raise PartitionMismatch(
                f"the two reports differ in {key}: {meta_now.get(key)!r} vs "
                f"{meta_then.get(key)!r}; a new version starts a new comparison baseline"
            )
    if meta_now.get("metrics") != meta_then.get("metrics"):
        raise PartitionMismatch(
            "the two reports use different metric spec versions; a new spec version starts "
            "a new comparison baseline"
        )
    both = ((~current.suppressed) & (~previous.suppressed)).to_numpy()
    scale_now = current.noise_std.to_numpy()[both] / np.sqrt(2.0)
    scale_then = previous.noise_std.to_numpy()[both] / np.sqrt(2.0)
    spread = (_sampling_sd(sampling_sd, current.cohort.to_numpy(dtype=float)[both],
                           previous.cohort.to_numpy(dtype=float)[both])
              if sampling_sd is not None else 0.0)
    diff = (current.value - previous.value)[both]
    threshold = difference_threshold(scale_now, scale_then, alpha, spread)
    return pd.DataFrame(
        {"difference": diff, "threshold": threshold, "fired": np.abs(diff) > threshold},
        index=diff.index,
    )


def drift(history: pd.DataFrame, *, window: int = 8, alpha: float = 0.01,
          sampling_sd: float | None = None) -> pd.DataFrame:
    """Trend over the last ``window`` releases of each region, tested against the noise.

    A weighted least-squares slope of value on round (weights 1 / variance of
    each release's error). Its noise is a weighted sum of the releases' Laplace
    noises (plus, with ``sampling_sd``, the normal sampling error of fresh
    cohorts); the drift is flagged when ``|slope|`` exceeds the exact
    ``1 - alpha`` quantile of that sum (:func:`noise_sum_quantile`), not a normal
    approximation, whose lighter tails would raise too many alarms.

    Parameters
    ----------
    history : DataFrame
        Columns ``region_id``, ``round``, ``value``, ``noise_std`` (and ``cohort``
        with ``sampling_sd``); suppressed rounds are NaN and skipped.
    window : int
        Number of most recent published rounds per region (at least 3).
    sampling_sd : float, optional
        Per-client standard deviation when each round draws a fresh cohort.

    Returns
    -------
    DataFrame indexed by region: ``slope`` (per round), ``se``, ``z``, ``threshold``,
    ``rounds``, ``drifting``.
    """
    needed = {"region_id", "round", "value", "noise_std"} | (
        {"cohort"} if sampling_sd is not None else set())
    if not needed <= set(history.columns):
        raise InvalidInput(f"history lacks columns {sorted(needed - set(history.columns))}")
    if window < 3:
        raise InvalidInput(f"window={window} is too short for a trend; use at least 3 rounds")
    data = history.dropna(subset=["value", "noise_std"]).sort_values(["region_id", "round"])
    data = data.groupby("region_id", sort=True).tail(window)
    laplace = data.noise_std.to_numpy(dtype=np.float64) / np.sqrt(2.0)
    sampling_var = (float(sampling_sd) ** 2 / data.cohort.to_numpy(dtype=np.float64)
                    if sampling_sd is not None else np.zeros(len(data)))
    w = 1.0 / (2.0 * laplace**2 + sampling_var)
    x = data["round"].to_numpy(dtype=np.float64)
    y = data.value.to_numpy(dtype=np.float64)
    codes, regions = pd.factorize(data.region_id, sort=True)
    sums = {name: np.bincount(codes, weights=v) for name, v in
            {"w": w, "wx": w * x, "wy": w * y, "wxx": w * x * x, "wxy": w * x * y}.items()}
    rounds = np.bincount(codes)
    xbar = sums["wx"] / sums["w"]
    sxx = sums["wxx"] - sums["wx"] * xbar
    slope = (sums["wxy"] - xbar * sums["wy"]) / sxx
    # slope = sum_i c_i y_i with c_i = w_i (x_i - xbar) / sxx: its noise is sum_i c_i e_i.
    c = w * (x - xbar[codes]) / sxx[codes]
    # Rows are sorted by region, so each region's rows are one contiguous block.
    blocks = np.cumsum(rounds)[:-1]
    threshold = np.array([
        noise_sum_quantile(cr * lr, float(np.sqrt(np.sum(cr**2 * vr))), alpha)
        if cr.size >= 3 else np.inf
        for cr, lr, vr in zip(np.split(c, blocks), np.split(laplace, blocks),
                              np.split(sampling_var, blocks), strict=True)
    ])  # one exact quantile per region, cached by shape
    out = pd.DataFrame({"slope": slope, "se": 1.0 / np.sqrt(sxx), "rounds": rounds,
                        "threshold": threshold}, index=pd.Index(regions, name="region_id"))
    out["z"] = out.slope / out.se
    out["drifting"] = (out.rounds >= 3) & (out.slope.abs() > out.threshold)
    return out
