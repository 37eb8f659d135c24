"""Per-group estimates of one metric: planned before the charge, finished after the noise.

:func:`plan_estimate` does everything that can fail or that needs only public
quantities (secure sums, the floor, the clipping check, the mechanisms and their
scales, the error bars, the warning about an uninformative bar); the pipeline then
charges the ledger, draws the noise of :attr:`EstimatePlan.draws`, and calls
:meth:`EstimatePlan.finish` with the noisy sums. Nothing in the plan looks at noise,
nothing after the charge can refuse.

Two estimators:

- **mean**: noised sum / cohort; under replace-one neighbours the cohort is
  participation, public. The ``(1 - alpha)`` half-width is the exact Laplace
  quantile ``b ln(1/alpha) / n``.
- **ratio**: a noised sum of values over a noised count. It is used for a
  :class:`MetricSpec` with ``present`` (the count of clients that have the
  metric), and for every metric under add/remove neighbours, where the count of
  clients itself is private (the report's shared :class:`NoisyCohort`).
  Epsilon is split between the two sums (:func:`split_epsilon`). The interval is
  conservative: with probability at least ``1 - alpha`` both noises lie within
  their ``1 - alpha/2`` quantiles ``b ln(2/alpha)`` (union bound), and then the
  true ratio lies in the interval-division of the two noisy sums' ranges,
  intersected with the clip range.

What depends on a count of clients before the noise (which groups are noised,
the predicted bar of the warning) uses only public counts: the cohort under
replace-one, nothing under add/remove (every group is noised, and the warning
is decided on the published bars).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from spatialdp.exceptions import SpatialDPError, UninformativeReleaseWarning
from spatialdp.federated.client_reports import refuse_non_finite
from spatialdp.federated.group_sums import Groups, SecureSum, check_clipping
from spatialdp.federated.metrics import HistogramSpec, MetricSpec
from spatialdp.privacy.budget import Neighbours, check_neighbours
from spatialdp.privacy.combined_noise import ratio_interval
from spatialdp.privacy.noise import LaplaceMechanism
from spatialdp.privacy.pipeline import ReleasePlan, exact_total, split_exactly

__all__ = ["Estimate", "EstimatePlan", "NoisyCohort", "UninformativeReleaseWarning",
           "plan_estimate", "split_epsilon"]

FloatArray = NDArray[np.float64]




def split_epsilon(epsilon: float, spec: MetricSpec | HistogramSpec,
                  neighbours: Neighbours = "replace") -> tuple[float, float]:
    """Split a ratio estimator's epsilon between its value sum and its count.

    The count gets the share ``1 / (1 + (w / r) ** (2/3))`` with ``w`` the
    value sum's sensitivity under ``neighbours`` and ``r`` the largest value a
    client can hold (``max(|clip_low|, |clip_high|)``; a histogram bucket:
    ``mass_cap``): it minimises the delta-method variance ``(b_sum**2 + R**2
    b_count**2)`` of the ratio at its largest value ``R = r``, the worst case.
    Under add/remove ``w = r``, so the split is even. The two parts add up to at
    most ``epsilon`` exactly, in the decimal arithmetic the ledger charges.

    Examples
    --------
    >>> split_epsilon(1.0, MetricSpec("ratio", 0.0, 10.0, present="track_present"))
    (0.5, 0.5)
    >>> split_epsilon(1.0, MetricSpec("loss", -1.0, 3.0, present="p"))   # w = 4, r = 3
    (0.547801, 0.452199)
    """
    if isinstance(spec, HistogramSpec):
        largest = spec.mass_cap
    else:
        largest = max(abs(spec.clip_low), abs(spec.clip_high))
    share = 1.0 / (1.0 + (spec.sensitivity_under(neighbours) / largest) ** (2.0 / 3.0))
    return split_exactly(epsilon, share)


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


def _mechanism(epsilon: float, sensitivity: float, *, discrete: bool = False
               ) -> LaplaceMechanism:
    try:
        return LaplaceMechanism(epsilon, sensitivity, discrete=discrete)
    except SpatialDPError:
        raise
    except (OverflowError, ValueError, ZeroDivisionError) as err:
        from spatialdp.exceptions import InvalidInput

        raise InvalidInput(
            f"the noise scale sensitivity / epsilon = {sensitivity!r} / {epsilon!r} cannot be "
            "represented; narrow the clip range or raise epsilon") from err


def _warn_uninformative(spec: MetricSpec | HistogramSpec, bar: FloatArray) -> None:
    """Warn before the charge when even the best region's predicted bar exceeds the clip range.

    ``bar`` must come from public quantities only: the warning is published
    with the report, and raised (under ``filterwarnings = error``) before anything
    is charged.
    """
    width = spec.sensitivity if isinstance(spec, MetricSpec) else spec.mass_cap
    if bar.size and float(np.min(bar)) > width:
        warnings.warn(
            f"{spec.key}: the predicted error bar ({float(np.min(bar)):.3g} at best) exceeds "
            f"the whole clip range ({width:g}); the published values will be dominated by "
            "noise. Raise epsilon, pool rounds or merge regions; for display use "
            "bounded() (clamped, biased)", UninformativeReleaseWarning, stacklevel=5)


def _warn_spans_range(est: Estimate) -> None:
    """Warn after the release when every published interval spans the whole clip range.

    Decided on the published intervals only (post-processing): under add/remove
    no count is public before the noise.
    """
    spec = est.spec
    low, high = ((spec.clip_low, spec.clip_high) if isinstance(spec, MetricSpec)
                 else (0.0, spec.mass_cap))
    shown = ~est.suppressed
    lo = est.ci_low[:, -1] if est.ci_low.ndim == 2 else est.ci_low
    hi = est.ci_high[:, -1] if est.ci_high.ndim == 2 else est.ci_high
    if shown.any() and bool(np.all(hi[shown] - lo[shown] >= (high - low) * (1 - 1e-9))):
        warnings.warn(
            f"{spec.key}: every published error bar spans the whole clip range "
            f"[{low:g}, {high:g}]; the published values are dominated by noise. Raise "
            "epsilon, pool rounds or merge regions; for display use bounded() (clamped, "
            "biased)", UninformativeReleaseWarning, stacklevel=5)


@dataclass
class NoisyCohort:
    """The noised client count of every group: one release, shared by a report's metrics.

    Under add/remove neighbours the number of clients in a region is private.
    Each mean metric (no ``present``) lends the count share of
    :func:`split_epsilon` (one half: under add/remove the value sum's
    sensitivity equals the largest value) to one shared count per group, noised
    once with discrete Laplace noise of scale ``1 / epsilon``; every mean metric
    divides by it, decides its floor on it and publishes it (rounded) as the
    cohort, so one region shows one cohort. Its plan must be finished before
    the metrics' plans (:func:`~spatialdp.privacy.pipeline.run_release`
    finishes plans in order).

    Build it with :meth:`split`.
    """

    parts: dict[str, tuple[float, float]]  # metric name -> (value part, count part)
    epsilon: float = field(init=False)
    mechanism: LaplaceMechanism = field(init=False, repr=False)
    noisy: FloatArray | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.epsilon = exact_total([c for _, c in self.parts.values()], at_most=True)
        self.mechanism = _mechanism(self.epsilon, 1.0, discrete=True)

    @classmethod
    def split(cls, specs: Sequence[MetricSpec | HistogramSpec],
              epsilons: Mapping[str, float]) -> NoisyCohort | None:
        """Return the shared count of the mean metrics among ``specs`` (None if there is none).

        Examples
        --------
        >>> cohort = NoisyCohort.split([MetricSpec("loss", 0, 4),
        ...                             HistogramSpec("err", edges=(1.0,))],
        ...                            {"loss": 0.2, "err": 0.1})
        >>> cohort.parts, cohort.epsilon
        ({'loss': (0.1, 0.1), 'err': (0.05, 0.05)}, 0.15)
        """
        means = [s for s in specs if not (isinstance(s, MetricSpec) and s.present)]
        if not means:
            return None
        return cls({s.name: split_epsilon(epsilons[s.name], s, "add_remove") for s in means})

    def plan(self, counts: NDArray[np.int64]) -> ReleasePlan[None]:
        """Return the plan that noises ``counts`` and keeps the noisy counts here."""
        def keep(noisy: list[FloatArray]) -> None:
            self.noisy = np.asarray(noisy[0], dtype=np.float64)

        return ReleasePlan(self.epsilon, [(self.mechanism, counts)], keep)

    def released(self) -> FloatArray:
        """Return the noisy counts (after the release)."""
        if self.noisy is None:  # pragma: no cover - run_release finishes plans in order
            raise SpatialDPError("the cohort counts are read before their release was drawn")
        return self.noisy


def plan_estimate(
    spec: MetricSpec | HistogramSpec,
    values: FloatArray,
    presence: FloatArray | None,
    groups: Groups,
    *,
    epsilon: float,
    min_cohort: int,
    alpha: float,
    neighbours: Neighbours = "replace",
    cohort: NoisyCohort | None = None,
) -> EstimatePlan:
    """Plan one metric's release over groups (see the module docstring).

    ``groups`` is shared by the metrics of one release (counts computed once).
    A NaN or infinity in any value makes its group's sum non-finite, so finiteness
    is checked on the sums (the values are scanned only to explain a refusal).

    Under ``neighbours="add_remove"`` every group is noised (which groups hold
    clients is private), a metric without ``present`` divides by ``cohort``
    (the shared :class:`NoisyCohort`, released in the same call) and
    ``epsilon`` is what its value sums get; a ratio metric splits ``epsilon``
    between its value sum and its own present count. Nothing before the noise
    looks at a count of clients.
    """
    total = SecureSum(groups.sum(values), groups.counts)
    if not np.isfinite(total.sums).all():
        refuse_non_finite(values, spec.key)
    check_clipping(spec, total.sums, total.counts, absent_allowed=presence is not None)
    relation = check_neighbours(neighbours)
    if isinstance(spec, MetricSpec) and presence is not None:
        return _plan_ratio(spec, total, groups.sum(presence), epsilon=epsilon,
                           min_cohort=min_cohort, alpha=alpha, neighbours=relation)
    if relation == "replace":
        return _plan_mean(spec, total, epsilon=epsilon, min_cohort=min_cohort, alpha=alpha)
    if cohort is None:
        raise SpatialDPError("an add/remove mean needs the release's NoisyCohort")
    return _plan_shared_mean(spec, total.sums, epsilon=epsilon, min_cohort=min_cohort,
                             alpha=alpha, cohort=cohort)


def _plan_mean(spec: MetricSpec | HistogramSpec, total: SecureSum, *, epsilon: float,
               min_cohort: int, alpha: float) -> EstimatePlan:
    """Replace-one mean: noised sum over the cohort, which participation makes public."""
    cohort = total.counts
    n_groups = cohort.size
    shown = cohort >= min_cohort
    n = np.maximum(cohort[shown], 1).astype(np.float64)
    mech = _mechanism(epsilon, spec.sensitivity)
    scale = mech.scale / n
    bar = scale * -math.log(alpha)
    _warn_uninformative(spec, bar)  # from the cohort: public under replace-one

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
                        {})  # a mean's interval needs only its noise scale

    return ReleasePlan(epsilon, [(mech, total.sums[shown])], finish_mean)


def _plan_ratio(spec: MetricSpec, total: SecureSum, present: FloatArray, *, epsilon: float,
                min_cohort: int, alpha: float, neighbours: Neighbours) -> EstimatePlan:
    """Plan a metric's own ratio estimate: noised value sum over its noised present count.

    Replace-one: the groups to noise come from the public cohort, and the
    uninformative warning from its best case before the charge. Add/remove:
    every group is noised, and the warning comes from the published intervals.
    """
    replace = neighbours == "replace"
    shown = total.counts >= min_cohort if replace else np.ones(total.counts.size, dtype=bool)
    eps_value, eps_count = split_epsilon(epsilon, spec, neighbours)
    mech_value = _mechanism(eps_value, spec.sensitivity_under(neighbours))
    mech_count = _mechanism(eps_count, 1.0)
    if replace:
        half_num, _ = _ratio_halves(mech_value, mech_count, alpha)
        # The best case over what the (private) count of clients with the metric could
        # be: every client of the cohort has it. The cohort is public under replace-one.
        best = half_num / np.maximum(total.counts[shown], 1.0)
        _warn_uninformative(spec, np.atleast_1d(best))

    def finish(noisy: list[FloatArray]) -> Estimate:
        est = _ratio_estimate(spec, noisy[0], noisy[1], shown, mech_value, mech_count,
                              epsilon, min_cohort, alpha)
        if not replace:
            _warn_spans_range(est)
        return est

    return ReleasePlan(epsilon, [(mech_value, total.sums[shown]),
                                 (mech_count, present[shown])], finish)


def _plan_shared_mean(spec: MetricSpec | HistogramSpec, sums: FloatArray, *, epsilon: float,
                      min_cohort: int, alpha: float, cohort: NoisyCohort) -> EstimatePlan:
    """Add/remove mean: every group's value sum noised, over the release's shared noised count."""
    value_part, _ = cohort.parts[spec.name]
    mech = _mechanism(value_part, spec.sensitivity_under("add_remove"))

    def finish(noisy: list[FloatArray]) -> Estimate:
        den = cohort.released()
        shown = np.round(den) >= min_cohort  # post-processing of the noisy cohort
        est = _ratio_estimate(spec, noisy[0][shown], den[shown], shown, mech,
                              cohort.mechanism, epsilon, min_cohort, alpha)
        _warn_spans_range(est)
        return est

    return ReleasePlan(value_part, [(mech, sums)], finish)


def _ratio_halves(mech_num: LaplaceMechanism, mech_den: LaplaceMechanism,
                  alpha: float) -> tuple[float, float]:
    """Half-widths of the two noises at ``1 - alpha/2`` each (union bound)."""
    q = math.log(2.0) - math.log(alpha)
    return mech_num.scale * q, mech_den.scale * q


def _ratio_estimate(spec: MetricSpec | HistogramSpec, num: FloatArray, den: FloatArray,
                    shown: NDArray[np.bool_], mech_num: LaplaceMechanism,
                    mech_den: LaplaceMechanism, epsilon: float, min_cohort: int,
                    alpha: float) -> Estimate:
    """Return the ratio estimate of the ``shown`` groups' noisy sums ``num`` over counts ``den``.

    A group is published when its rounded noisy count clears the floor
    (post-processing). ``num`` is ``(shown,)`` or ``(shown, buckets)``; a
    histogram's ``error_bar``, state and noise sd are those of its top bucket,
    the report's ``value``.
    """
    n_groups = shown.size
    low, high = ((spec.clip_low, spec.clip_high) if isinstance(spec, MetricSpec)
                 else (0.0, spec.mass_cap))
    half_num, half_den = _ratio_halves(mech_num, mech_den, alpha)
    dens = np.full(n_groups, np.nan)
    dens[shown] = den
    published = shown & (np.round(np.nan_to_num(dens, nan=-1.0)) >= min_cohort)
    nums = np.full((n_groups, *num.shape[1:]), np.nan)
    nums[shown] = num
    col = dens[:, None] if nums.ndim == 2 else dens
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = nums / np.where(col > 0, col, np.nan)
    lo, hi = ratio_interval(nums, col, half_num, half_den, low, high)
    mask = published[:, None] if nums.ndim == 2 else published
    value = np.where(mask, ratio, np.nan)
    lo, hi = np.where(mask, lo, np.nan), np.where(mask, hi, np.nan)
    top = (lambda a: a[:, -1]) if nums.ndim == 2 else (lambda a: a)
    half = np.fmax(top(value) - top(lo), top(hi) - top(value))
    counts = np.zeros(n_groups, dtype=np.int64)
    counts[published] = np.round(dens[published]).astype(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        sd = np.sqrt(2.0 * mech_num.scale**2 + 2.0 * (top(value) * mech_den.scale) ** 2
                     ) / np.where(published, dens, np.nan)
    return Estimate(spec, value, lo, hi, half, np.full(n_groups, np.nan), sd, counts,
                    ~published, epsilon, "ratio",
                    {"num": top(nums), "den": dens,
                     "scale_num": np.full(n_groups, mech_num.scale),
                     "scale_den": np.full(n_groups, mech_den.scale)})


def _scatter(values: FloatArray, shown: NDArray[np.bool_], n_groups: int) -> FloatArray:
    out = np.full(n_groups, np.nan)
    out[shown] = values
    return out
