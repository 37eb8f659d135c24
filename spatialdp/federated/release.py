"""Published results: a value with its error bar, cohort, privacy loss and versions.

Modelled on statsmodels results: the estimate and its uncertainty travel
together, with ``conf_int(alpha=...)`` (exact for any alpha, from the noise
scale the release used) and ``summary()`` (text, and HTML in Jupyter). The error
bar is fixed before the round from the clip bound, epsilon and the cohort size
(it does not look at the data), and is published with the value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from spatialdp._results import Result
from spatialdp._validation import check_alpha, check_epsilon
from spatialdp.exceptions import InvalidInput
from spatialdp.privacy.combined_noise import linearised_scales, ratio_interval

__all__ = ["HistogramRelease", "MetricRelease", "predicted_error_bar"]


def predicted_error_bar(sensitivity: float, epsilon: float, cohort: int, alpha: float = 0.05
                        ) -> float:
    """Return the (1 - alpha) half-width of the Laplace noise on a mean, before the round.

    The sum of clipped values gets Laplace noise of scale ``sensitivity / epsilon``
    once; dividing by the cohort ``n`` gives the mean, so the bar shrinks as 1/n.

    Examples
    --------
    >>> round(predicted_error_bar(2.5, 1.0, 500), 5)   # 2.5 * ln(20) / 500
    0.01498
    """
    from spatialdp.privacy.cadence import half_width_for_spend

    bar = half_width_for_spend(sensitivity=sensitivity, cohort=cohort,
                               spend=check_epsilon(epsilon), alpha=check_alpha(alpha))
    if not (math.isfinite(bar) and bar > 0):
        raise InvalidInput(
            f"the error bar of sensitivity={sensitivity!r} at epsilon={epsilon!r} for "
            f"cohort={cohort!r} is not a positive finite number; use values of ordinary size")
    return bar


@dataclass(frozen=True)
class MetricRelease(Result):
    """One published scalar metric (a cohort mean, or a ratio estimate), with its uncertainty.

    Attributes
    ----------
    metric : str
        The spec key (``name@version``).
    value : float
        The noised estimate.
    error_bar : float
        Half-width of the (1 - alpha) interval from the noise alone (for a ratio
        estimate, the larger side of its conservative interval).
    alpha : float
        The level of ``error_bar``.
    noise_scale : float
        Laplace scale of the noise on ``value`` (sensitivity / (epsilon * cohort));
        NaN for ratio estimates, whose noise is not a single Laplace.
    cohort : int
        Clients behind the value (for a ratio estimate: the noised count of clients
        that have the metric).
    epsilon : float
        Privacy loss of this release.
    clip_low, clip_high : float
        The spec's clip range (the value's possible range).
    estimator : str
        ``"mean"`` or ``"ratio"``.
    accounting : dict
        How it was charged: ``{"accounting": "ledger" | "unaccounted" | "simulation", ...}``.
    bounded : bool
        True when the value was clamped into the clip range for display (biased).
    suppressed : bool
        True when a ratio estimate's noised count (of clients with the metric, or
        under add/remove of all clients) fell below the cohort floor: the release
        was charged, but ``value``, ``error_bar`` and ``noise_scale`` are NaN and
        ``cohort`` is 0 (not shown).
    neighbours : {"replace", "add_remove"}
        The neighbouring relation ``epsilon`` holds for.

    Examples
    --------
    >>> from spatialdp.federated import MetricSpec, aggregate_metric, device_report
    >>> from spatialdp.privacy import Simulation
    >>> import pandas as pd
    >>> examples = pd.DataFrame({"client_id": np.arange(600), "loss": 0.8})
    >>> spec = MetricSpec("loss", 0.0, 2.5)
    >>> clients = device_report(examples, loss_spec=spec)
    >>> rel = aggregate_metric(clients, spec, epsilon=1.0, target=Simulation(rng=0))
    >>> rel.cohort, round(rel.error_bar, 4), rel.simulated
    (600, 0.0125, True)
    >>> low, high = rel.conf_int(alpha=0.01)   # exact for any alpha
    >>> round(high - low, 4)          # 2 x 2.5 / 600 x ln(100)
    0.0384
    """

    metric: str
    value: float
    error_bar: float
    alpha: float
    noise_scale: float
    cohort: int
    epsilon: float
    clip_low: float = -math.inf
    clip_high: float = math.inf
    estimator: str = "mean"
    partition_version: str | None = None
    region_id: str | None = None
    round_index: int | None = None
    accounting: dict[str, Any] = field(default_factory=dict, compare=False)
    bounded: bool = False
    suppressed: bool = False
    neighbours: str = "replace"
    _state: dict[str, float] = field(default_factory=dict, repr=False, compare=False)


    @property
    def noise_std(self) -> float:
        """Standard deviation of the Laplace noise on ``value`` (sqrt(2) x scale)."""
        return float(np.sqrt(2.0) * self.noise_scale)

    @property
    def noise_scales(self) -> list[float]:
        """The Laplace scales of the noise on ``value``: a mean's one, a ratio estimate's two.

        A ratio estimate's are linearised
        (:func:`~spatialdp.privacy.combined_noise.linearised_scales`).
        """
        if self.estimator != "ratio":
            return [float(self.noise_scale)]
        return [float(s) for s in linearised_scales(
            self.value, self._state["den"], self._state["scale_num"], self._state["scale_den"])[0]]

    def conf_int(self, alpha: float | None = None) -> tuple[float, float]:
        """Return the exact ``(1 - alpha)`` interval from the noise (default: the release's alpha).

        A mean's interval is ``value +/- noise_scale * ln(1 / alpha)``; a ratio
        estimate's is the conservative interval of
        :func:`~spatialdp.privacy.combined_noise.ratio_interval`.
        """
        level = self.alpha if alpha is None else check_alpha(alpha)
        if self.suppressed:
            return (math.nan, math.nan)
        if self.estimator == "ratio":
            q = math.log(2.0) - math.log(level)
            lo, hi = ratio_interval(np.array([self._state["num"]]), np.array([self._state["den"]]),
                                    self._state["scale_num"] * q, self._state["scale_den"] * q,
                                    self.clip_low, self.clip_high)
            return float(lo[0]), float(hi[0])
        half = self.noise_scale * -math.log(level)
        return (self.value - half, self.value + half)

    def bounded_display(self) -> MetricRelease:
        """Return a copy with the value clamped into the clip range: for display, BIASED.

        Clamping a noisy value pulls it towards the range, so averages of clamped
        values are biased; publish the unclamped value, show this one.
        """
        return replace(self, value=float(np.clip(self.value, self.clip_low, self.clip_high)),
                       bounded=True)

    def summary(self) -> str:
        """Return one readable line."""
        where = f" in {self.region_id}" if self.region_id is not None else ""
        clamp = " (clamped for display, biased)" if self.bounded else ""
        if self.suppressed:
            return (f"{self.metric}{where}: suppressed (noised count of clients with the "
                    f"metric below the floor; charged), epsilon={self.epsilon:g}"
                    f"{self.accounting_note}")
        return (
            f"{self.metric}{where}: {self.value:.4g} +/- {self.error_bar:.3g} "
            f"({100 * (1 - self.alpha):.0f}%){clamp}, cohort={self.cohort}"
            f"{' (noised)' if self.neighbours == 'add_remove' else ''}, "
            f"epsilon={self.epsilon:g} ({self.neighbours}){self.accounting_note}"
        )


    def __repr__(self) -> str:
        return f"MetricRelease({self.summary()})"


@dataclass(frozen=True)
class HistogramRelease(Result):
    """One published histogram: mean mass per client in each fixed bucket.

    The buckets are one release (one client's mass is bounded in L1 across all
    of them), so every bucket carries the same error bar.

    Examples
    --------
    >>> from spatialdp.federated import HistogramSpec, aggregate_histogram, device_report
    >>> from spatialdp.privacy import Simulation
    >>> import pandas as pd
    >>> spec = HistogramSpec("err", edges=(1.0, 2.0))
    >>> examples = pd.DataFrame({"client_id": np.arange(400), "error": 1.5})
    >>> clients = device_report(examples, hist_spec=spec)
    >>> rel = aggregate_histogram(clients, spec, epsilon=1.0, target=Simulation(rng=1))
    >>> rel.labels, rel.cohort
    (('<=1', '(1, 2]', '>2'), 400)
    """

    metric: str
    labels: tuple[str, ...]
    values: NDArray[np.float64] = field(repr=False)
    error_bar: float
    alpha: float
    noise_scale: float
    cohort: int
    epsilon: float
    partition_version: str | None = None
    region_id: str | None = None
    round_index: int | None = None
    accounting: dict[str, Any] = field(default_factory=dict, compare=False)
    estimator: str = "mean"
    suppressed: bool = False
    neighbours: str = "replace"
    mass_cap: float = math.inf
    _state: dict[str, float] = field(default_factory=dict, repr=False, compare=False)


    def conf_int(self, alpha: float | None = None
                 ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Return per-bucket exact ``(1 - alpha)`` intervals (default: the release's alpha).

        A ratio estimate (add/remove neighbours) gets the conservative interval
        of its noisy bucket sums over its noisy count, bucket by bucket.
        """
        level = self.alpha if alpha is None else check_alpha(alpha)
        if self.suppressed:
            nan = np.full(self.values.shape, np.nan)
            return nan, nan.copy()
        if self.estimator == "ratio":
            q = math.log(2.0) - math.log(level)
            den = self._state["den"]
            return ratio_interval(self.values * den, np.full(self.values.shape, den),
                                  self._state["scale_num"] * q, self._state["scale_den"] * q,
                                  0.0, self.mass_cap)
        half = self.noise_scale * -math.log(level)
        return (self.values - half, self.values + half)

    def summary(self) -> str:
        """Return one readable line per bucket."""
        if self.suppressed:
            return (f"{self.metric}: suppressed (noised count below the floor; charged), "
                    f"epsilon={self.epsilon:g} ({self.neighbours})"
                    f"{self.accounting_note}")
        head = (f"{self.metric}: cohort={self.cohort}, epsilon={self.epsilon:g} "
                f"({self.neighbours}), +/- {self.error_bar:.3g} "
                f"{'in the top bucket' if self.estimator == 'ratio' else 'per bucket'}"
                f"{self.accounting_note}")
        rows = [f"  {label:>12}  {v:.4f}" for label, v in
                zip(self.labels, self.values, strict=True)]
        return "\n".join([head, *rows])

