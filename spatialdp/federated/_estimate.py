"""Per-group estimates of one metric: planned before the charge, finished after the noise.

:func:`plan_estimate` does everything that can fail or that needs only public
quantities (secure sums, the floor, the clipping check, the mechanisms and their
scales, the error bars, the warning about an uninformative bar); the pipeline then
charges the ledger, draws the noise of :attr:`EstimatePlan.draws`, and calls
:meth:`EstimatePlan.finish` with the noisy sums. Nothing in the plan looks at noise,
nothing after the charge can refuse.

Two estimators:

- **mean**: noised sum / cohort; the cohort is participation, public. The
  ``(1 - alpha)`` half-width is the exact Laplace quantile ``b ln(1/alpha) / n``.
- **ratio** (a :class:`MetricSpec` with ``present``): noised sum of values over
  the noised count of clients that have the metric. Epsilon is split between the
  two sums (:func:`split_epsilon`). The interval is conservative: with
  probability at least ``1 - alpha`` both noises lie within their
  ``1 - alpha/2`` quantiles ``b ln(2/alpha)`` (union bound), and then the true
  ratio lies in the interval-division of the two noisy sums' ranges, intersected
  with the clip range.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from decimal import Decimal

import numpy as np
from numpy.typing import NDArray

from spatialdp.exceptions import SpatialDPError
from spatialdp.federated._tags import refuse_non_finite
from spatialdp.federated.group_sums import Groups, SecureSum, check_clipping
from spatialdp.federated.metrics import HistogramSpec, MetricSpec
from spatialdp.privacy.noise import LaplaceMechanism
from spatialdp.privacy.pipeline import ReleasePlan

__all__ = ["Estimate", "EstimatePlan", "UninformativeReleaseWarning", "plan_estimate",
           "ratio_interval", "split_epsilon"]

FloatArray = NDArray[np.float64]


class UninformativeReleaseWarning(UserWarning):
    """The predicted error bar is wider than the metric's whole clip range."""


def split_epsilon(epsilon: float, spec: MetricSpec) -> tuple[float, float]:
    """Split a ratio metric's epsilon between its value sum and its presence count.

    The count gets the share ``1 / (1 + (w / r) ** (2/3))`` with ``w`` the
    value sum's sensitivity and ``r = max(|clip_low|, |clip_high|)``: it minimises
    the delta-method variance ``(b_sum**2 + r**2 b_count**2)`` of the ratio at its
    largest value. The two parts add up to at most ``epsilon`` exactly, in the
    decimal arithmetic the ledger charges.

    Examples
    --------
    >>> split_epsilon(1.0, MetricSpec("ratio", 0.0, 10.0, present="track_present"))
    (0.5, 0.5)
    """
    largest = max(abs(spec.clip_low), abs(spec.clip_high))
    share = 1.0 / (1.0 + (spec.sensitivity / largest) ** (2.0 / 3.0))
    total = Decimal(repr(float(epsilon)))
    count_part = float(f"{float(total) * share:.6g}")
    value_part = float(total - Decimal(repr(count_part)))
    while Decimal(repr(value_part)) + Decimal(repr(count_part)) > total:
        value_part = math.nextafter(value_part, 0.0)
    return value_part, count_part


def ratio_interval(num: FloatArray, den: FloatArray, half_num: FloatArray | float,
                   half_den: FloatArray | float, low: float, high: float
                   ) -> tuple[FloatArray, FloatArray]:
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


@dataclass(frozen=True)
class Estimate:
    """One metric per group after the noise: what a release publishes."""

    spec: MetricSpec | HistogramSpec
    values: FloatArray          # (g,) or (g, k); NaN where suppressed
    ci_low: FloatArray
    ci_high: FloatArray
    error_bar: FloatArray       # (g,): half-width (ratio: the larger side)
    noise_scale: FloatArray     # (g,): Laplace scale on the published mean (NaN for ratios)
    noise_std: FloatArray       # (g,): sd of the noise (ratios: delta method, approximate)
    cohort: NDArray[np.int64]   # (g,): clients behind each value (ratio: noised, rounded)
    suppressed: NDArray[np.bool_]
    epsilon: float
    estimator: str              # "mean" or "ratio"
    state: dict[str, FloatArray]  # what conf_int(alpha) needs to recompute the interval


EstimatePlan = ReleasePlan[Estimate]


def _mechanism(epsilon: float, sensitivity: float) -> LaplaceMechanism:
    try:
        return LaplaceMechanism(epsilon, sensitivity)
    except SpatialDPError:
        raise
    except (OverflowError, ValueError, ZeroDivisionError) as err:
        from spatialdp.exceptions import InvalidInput

        raise InvalidInput(
            f"the noise scale sensitivity / epsilon = {sensitivity!r} / {epsilon!r} cannot be "
            "represented; narrow the clip range or raise epsilon") from err


def _warn_uninformative(spec: MetricSpec | HistogramSpec, bar: FloatArray) -> None:
    width = spec.sensitivity if isinstance(spec, MetricSpec) else spec.mass_cap
    if bar.size and float(np.min(bar)) > width:
        warnings.warn(
            f"{spec.key}: the predicted error bar ({float(np.min(bar)):.3g} at best) exceeds "
            f"the whole clip range ({width:g}); the published values will be dominated by "
            "noise. Raise epsilon, pool rounds or merge regions; for display use "
            "bounded() (clamped, biased)", UninformativeReleaseWarning, stacklevel=4)


def plan_estimate(
    spec: MetricSpec | HistogramSpec,
    values: FloatArray,
    presence: FloatArray | None,
    groups: Groups,
    *,
    epsilon: float,
    min_cohort: int,
    alpha: float,
) -> EstimatePlan:
    """Plan one metric's release over groups (see the module docstring).

    ``groups`` is shared by the metrics of one release (counts computed once).
    A NaN or infinity in any value makes its group's sum non-finite, so finiteness
    is checked on the sums (the values are scanned only to explain a refusal).
    """
    n_groups = groups.n_groups
    total = SecureSum(groups.sum(values), groups.counts)
    if not np.isfinite(total.sums).all():
        refuse_non_finite(values, spec.key)
    check_clipping(spec, total.sums, total.counts, absent_allowed=presence is not None)
    cohort = total.counts
    shown = cohort >= min_cohort
    n = np.maximum(cohort[shown], 1).astype(np.float64)
    if presence is None or not isinstance(spec, MetricSpec):
        mech = _mechanism(epsilon, spec.sensitivity)
        scale = mech.scale / n
        bar = scale * -math.log(alpha)
        _warn_uninformative(spec, bar)

        def finish_mean(noisy: list[FloatArray]) -> Estimate:
            shape = (n_groups, *total.sums.shape[1:])
            out = np.full(shape, np.nan)
            out[shown] = noisy[0] / (n[:, None] if noisy[0].ndim == 2 else n)
            half = _scatter(bar, shown, n_groups)
            lo = out - (half[:, None] if out.ndim == 2 else half)
            hi = out + (half[:, None] if out.ndim == 2 else half)
            spread = _scatter(scale, shown, n_groups)
            return Estimate(spec, out, lo, hi, half, spread, np.sqrt(2.0) * spread,
                            np.where(shown, cohort, 0), ~shown, epsilon, "mean",
                            {"scale": _scatter(scale, shown, n_groups)})

        return ReleasePlan(epsilon, [(mech, total.sums[shown])], finish_mean)

    present = groups.sum(presence)
    eps_value, eps_count = split_epsilon(epsilon, spec)
    mech_value = _mechanism(eps_value, spec.sensitivity)
    mech_count = _mechanism(eps_count, 1.0)
    q = math.log(2.0) - math.log(alpha)
    half_num, half_den = mech_value.scale * q, mech_count.scale * q
    _warn_uninformative(spec, np.atleast_1d(half_num / np.maximum(present[shown], 1.0)))

    def finish_ratio(noisy: list[FloatArray]) -> Estimate:
        num, den = noisy
        ratio = num / np.where(den > 0, den, np.nan)
        lo, hi = ratio_interval(num, den, half_num, half_den, spec.clip_low, spec.clip_high)
        published = shown.copy()
        published[shown] = np.round(den) >= min_cohort  # post-processing of the noisy count
        keep = published[shown]
        value = np.full(n_groups, np.nan)
        value[published] = ratio[keep]
        low, high = np.full(n_groups, np.nan), np.full(n_groups, np.nan)
        low[published], high[published] = lo[keep], hi[keep]
        half = np.fmax(value - low, high - value)
        counts = np.zeros(n_groups, dtype=np.int64)
        counts[published] = np.round(den[keep]).astype(np.int64)
        nums, dens = np.full(n_groups, np.nan), np.full(n_groups, np.nan)
        nums[shown], dens[shown] = num, den
        with np.errstate(divide="ignore", invalid="ignore"):
            sd = np.sqrt(2.0 * mech_value.scale**2 + 2.0 * (value * mech_count.scale) ** 2
                         ) / np.where(published, dens, np.nan)
        return Estimate(spec, value, low, high, half, np.full(n_groups, np.nan), sd, counts,
                        ~published, epsilon, "ratio",
                        {"num": nums, "den": dens,
                         "scale_num": np.full(n_groups, mech_value.scale),
                         "scale_den": np.full(n_groups, mech_count.scale)})

    return ReleasePlan(epsilon, [(mech_value, total.sums[shown]),
                                 (mech_count, present[shown])], finish_ratio)


def _scatter(values: FloatArray, shown: NDArray[np.bool_], n_groups: int) -> FloatArray:
    out = np.full(n_groups, np.nan)
    out[shown] = values
    return out
