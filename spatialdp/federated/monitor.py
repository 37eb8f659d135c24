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

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, stats

from spatialdp.exceptions import InvalidInput, PartitionMismatch
from spatialdp.federated.release import MetricRelease

__all__ = [
    "Comparison",
    "compare_releases",
    "compare_reports",
    "difference_threshold",
    "drift",
]


def _laplace_difference_tail(t: NDArray[np.float64], a: NDArray[np.float64],
                             b: NDArray[np.float64]) -> NDArray[np.float64]:
    """P(|X - Y| > t) for independent Laplace X, Y with scales a, b (t >= 0)."""
    hi, lo = np.maximum(a, b), np.minimum(a, b)
    equal = np.isclose(hi, lo, rtol=1e-6)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        distinct = (hi**2 * np.exp(-t / hi) - lo**2 * np.exp(-t / lo)) / (hi**2 - lo**2)
    same = np.exp(-t / hi) * (1.0 + t / (2.0 * hi))
    return np.where(equal, same, distinct)


def difference_threshold(scale_a: ArrayLike, scale_b: ArrayLike, alpha: float = 0.01
                         ) -> NDArray[np.float64]:
    """Exact ``1 - alpha`` quantile of ``|X - Y|`` for independent Laplace noises.

    Vectorised over arrays of scales (one pair per region).

    Examples
    --------
    >>> t = difference_threshold(1.0, 1.0, 0.01)
    >>> round(float(t), 4)
    5.9902
    """
    if not 0 < alpha < 1:
        raise InvalidInput(f"alpha={alpha} must lie in (0, 1)")
    a = np.atleast_1d(np.asarray(scale_a, dtype=np.float64))
    b = np.atleast_1d(np.asarray(scale_b, dtype=np.float64))
    a, b = np.broadcast_arrays(a, b)
    if (a <= 0).any() or (b <= 0).any():
        raise InvalidInput("noise scales must be positive")
    high = (a + b) * (np.log(1.0 / alpha) + 2.0) * 2.0
    if a.size == 1:
        root = optimize.brentq(
            lambda t: float(_laplace_difference_tail(np.array(t), a, b)[0]) - alpha,
            0.0, float(high[0]), xtol=1e-12 * float(high[0]), rtol=1e-14,
        )
        out = np.array([root])
        return out if np.ndim(scale_a) or np.ndim(scale_b) else out.reshape(())
    low = np.zeros(a.shape)
    for _ in range(64):  # vectorised bisection: 64 halvings reach double precision
        mid = 0.5 * (low + high)
        above = _laplace_difference_tail(mid, a, b) > alpha
        low = np.where(above, mid, low)
        high = np.where(above, high, mid)
    out = 0.5 * (low + high)
    return out if np.ndim(scale_a) or np.ndim(scale_b) else out.reshape(())


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


def compare_releases(current: MetricRelease, previous: MetricRelease, *, alpha: float = 0.01
                     ) -> Comparison:
    """Fire only when two releases differ by more than their combined uncertainty.

    The threshold is the exact ``1 - alpha`` quantile of the difference of the two
    releases' Laplace noises, so with no real change the alert fires with
    probability ``alpha``. (The rule "difference > bar_a + bar_b" is a looser
    version of the same idea with an uncalibrated false-alarm rate.)

    Raises
    ------
    PartitionMismatch
        The releases belong to different metric or partition versions.
    """
    _same_baseline(current, previous)
    threshold = float(difference_threshold(current.noise_scale, previous.noise_scale, alpha))
    diff = current.value - previous.value
    return Comparison(diff, threshold, alpha, bool(abs(diff) > threshold))


def compare_reports(current: pd.DataFrame, previous: pd.DataFrame, *, alpha: float = 0.01
                    ) -> pd.DataFrame:
    """Region-by-region comparison of two regional report frames of one metric.

    Parameters
    ----------
    current, previous : GeoDataFrame
        Frames of :class:`~spatialdp.federated.regional.RegionalReport` for the same
        metric and partition (their ``attrs["spatialdp"]`` are checked).

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
    both = (~current.suppressed) & (~previous.suppressed)
    scale_now = current.noise_std[both].to_numpy() / np.sqrt(2.0)
    scale_then = previous.noise_std[both].to_numpy() / np.sqrt(2.0)
    diff = (current.value - previous.value)[both]
    threshold = difference_threshold(scale_now, scale_then, alpha)
    return pd.DataFrame(
        {"difference": diff, "threshold": threshold, "fired": np.abs(diff) > threshold},
        index=diff.index,
    )


def drift(history: pd.DataFrame, *, window: int = 8, alpha: float = 0.01) -> pd.DataFrame:
    """Trend over the last ``window`` releases of each region, tested against the noise.

    A weighted least-squares slope of value on round (weights 1 / noise variance)
    with its standard error from the published noise scales; the drift is flagged
    when ``|slope| / se`` exceeds the normal ``1 - alpha/2`` quantile. (A weighted
    sum of several Laplace noises is close to normal; the test measures the
    false-alarm rate by simulation.)

    Parameters
    ----------
    history : DataFrame
        Columns ``region_id``, ``round``, ``value``, ``noise_std`` (suppressed rounds
        are NaN and skipped).
    window : int
        Number of most recent published rounds per region (at least 3).

    Returns
    -------
    DataFrame indexed by region: ``slope`` (per round), ``se``, ``z``, ``rounds``, ``drifting``.
    """
    needed = {"region_id", "round", "value", "noise_std"}
    if not needed <= set(history.columns):
        raise InvalidInput(f"history lacks columns {sorted(needed - set(history.columns))}")
    if window < 3:
        raise InvalidInput(f"window={window} is too short for a trend; use at least 3 rounds")
    data = history.dropna(subset=["value", "noise_std"]).sort_values(["region_id", "round"])
    data = data.groupby("region_id", sort=False).tail(window)
    w = 1.0 / data.noise_std.to_numpy() ** 2
    x = data["round"].to_numpy(dtype=np.float64)
    y = data.value.to_numpy(dtype=np.float64)
    g = data.region_id.to_numpy()
    frame = pd.DataFrame({"g": g, "w": w, "wx": w * x, "wy": w * y, "wxx": w * x * x,
                          "wxy": w * x * y, "n": 1})
    s = frame.groupby("g", sort=True).sum()
    sxx = s.wxx - s.wx**2 / s.w
    slope = (s.wxy - s.wx * s.wy / s.w) / sxx
    se = np.sqrt(1.0 / sxx)
    z = slope / se
    critical = stats.norm.ppf(1 - alpha / 2)
    out = pd.DataFrame({"slope": slope, "se": se, "z": z, "rounds": s.n})
    out["drifting"] = (out.rounds >= 3) & (out.z.abs() > critical)
    out.index.name = "region_id"
    return out
