"""Published results: a value with its error bar, cohort, privacy loss and versions.

Modelled on statsmodels results: the estimate and its uncertainty travel
together, with ``conf_int()`` and ``summary()``. The error bar is fixed before
the round from the clip bound, epsilon and the cohort size (it does not look
at the data), and is published with the value.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

__all__ = ["HistogramRelease", "MetricRelease", "predicted_error_bar"]


def predicted_error_bar(sensitivity: float, epsilon: float, cohort: int, alpha: float = 0.05
                        ) -> float:
    """(1 - alpha) half-width of the Laplace noise on a published mean, before the round.

    The sum of clipped values gets Laplace noise of scale ``sensitivity / epsilon``
    once; dividing by the cohort ``n`` gives the mean, so the bar shrinks as 1/n.

    Examples
    --------
    >>> round(predicted_error_bar(2.5, 1.0, 500), 5)   # 2.5 * ln(20) / 500
    0.01498
    """
    from spatialdp.privacy.cadence import half_width_for_loss

    return half_width_for_loss(sensitivity=sensitivity, cohort=cohort, loss=epsilon, alpha=alpha)


@dataclass(frozen=True)
class MetricRelease:
    """One published scalar metric (a cohort mean), with its uncertainty.

    Attributes
    ----------
    metric : str
        The spec key (``name@version``).
    value : float
        The noised mean.
    error_bar : float
        Half-width of the (1 - alpha) interval from the noise alone.
    alpha : float
    noise_scale : float
        Laplace scale of the noise on ``value`` (sensitivity / (epsilon * n)).
    contributors : int
    epsilon : float
        Privacy loss of this release.
    partition_version : str or None
    region : str or None
    round_index : int or None
    """

    metric: str
    value: float
    error_bar: float
    alpha: float
    noise_scale: float
    contributors: int
    epsilon: float
    partition_version: str | None = None
    region: str | None = None
    round_index: int | None = None

    @property
    def noise_std(self) -> float:
        """Standard deviation of the noise on ``value`` (sqrt(2) x scale)."""
        return float(np.sqrt(2.0) * self.noise_scale)

    def conf_int(self) -> tuple[float, float]:
        """The (1 - alpha) interval ``value +/- error_bar``."""
        return (self.value - self.error_bar, self.value + self.error_bar)

    def summary(self) -> str:
        """One readable line."""
        where = f" in {self.region}" if self.region is not None else ""
        return (
            f"{self.metric}{where}: {self.value:.4g} +/- {self.error_bar:.3g} "
            f"({100 * (1 - self.alpha):.0f}%), n={self.contributors}, eps={self.epsilon:g}"
        )

    def __repr__(self) -> str:
        return f"MetricRelease({self.summary()})"


@dataclass(frozen=True)
class HistogramRelease:
    """One published histogram: mean mass per client in each fixed bucket.

    The buckets are one release (one client's mass is bounded in L1 across all
    of them), so every bucket carries the same error bar.
    """

    metric: str
    labels: tuple[str, ...]
    values: NDArray[np.float64] = field(repr=False)
    error_bar: float
    alpha: float
    noise_scale: float
    contributors: int
    epsilon: float
    partition_version: str | None = None
    region: str | None = None
    round_index: int | None = None

    def conf_int(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Per-bucket (1 - alpha) intervals."""
        return (self.values - self.error_bar, self.values + self.error_bar)

    def summary(self) -> str:
        """One readable line per bucket."""
        head = (f"{self.metric}: n={self.contributors}, eps={self.epsilon:g}, "
                f"+/- {self.error_bar:.3g} per bucket")
        rows = [f"  {label:>12}  {v:.4f}" for label, v in
                zip(self.labels, self.values, strict=True)]
        return "\n".join([head, *rows])
