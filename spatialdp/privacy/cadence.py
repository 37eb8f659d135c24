"""Cadence planning: what publishing a regional metric every k rounds costs and buys.

Model (stated so it can be argued with)
---------------------------------------
* A region of ``cohort`` clients reports a clipped metric; one client can move
  the regional *sum* by at most ``sensitivity`` (the clip width). The published
  value is the mean, so its noise scale is the sum's divided by ``cohort``.
* Laplace (pure epsilon): ``b = sensitivity / (cohort * epsilon)`` on the mean;
  the 95% two-sided half-width is ``h = b ln(1/alpha)`` because
  ``P(|Laplace(b)| > t) = exp(-t/b)``. Gaussian (zCDP rho):
  ``sigma = sensitivity / (cohort * sqrt(2 rho))``, ``h = z_{1-alpha/2} sigma``.
* The release is made every ``every`` rounds: ``ceil(rounds_per_epoch / every)``
  releases per epoch, whose epsilons (or rhos) add up (sequential composition: the same client may
  be in every release). Regions are disjoint, so the number of regions does not
  enter: a release over all regions costs one region's epsilon.
* Alert rule: a release alerts when it differs from a well-known baseline by
  more than its half-width ``h`` (false-alarm rate ``alpha`` per release). A
  regression of size ``shift`` starts at a uniformly random round and persists;
  each later release alerts independently with probability ``p``.
* Latency is the number of rounds from the first affected round to the
  alerting release: waiting for the next release (0 to ``every - 1`` rounds),
  then ``every`` rounds per missed release. Expected:
  ``(every - 1)/2 + every (1 - p)/p``. Worst case (exceeded with probability
  ``latency_alpha``): ``(every - 1) + every (m - 1)`` with ``m`` the releases
  needed to alert with probability ``1 - latency_alpha``,
  ``m = ceil(ln(latency_alpha) / ln(1 - p))``.

Privacy is counted in the ledger's unit: a *spend* is the pure-DP epsilon for
``"laplace"`` and the zCDP rho for ``"gaussian"`` (``CadencePlan.unit`` says
which), as in :meth:`~spatialdp.privacy.ledger.PrivacyLedger.summary`.

Comparing to a *noisy* baseline (e.g. the previous release) widens the combined
error bar; this planner assumes the baseline is averaged over many releases.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal

from spatialdp._validation import (
    check_alpha,
    check_choice,
    check_count,
    check_number,
    check_positive,
    fail,
)
from spatialdp.privacy.accuracy import half_width as accuracy_half_width

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CadencePlan",
    "NoiseFamily",
    "cadence_table",
    "detection_probability",
    "half_width_for_spend",
    "plan_cadence",
    "spend_for_half_width",
]

#: The noise a cadence is planned for: Laplace (spends pure epsilon) or Gaussian (zCDP rho).
NoiseFamily = Literal["laplace", "gaussian"]


def _pos(name: str, value: Any) -> float:
    return check_positive(value, name)


def _count(name: str, value: Any) -> int:
    return check_count(value, name, low=1)


def _check_mechanism(mechanism: Any) -> NoiseFamily:
    return check_choice(mechanism, "mechanism", ("laplace", "gaussian"))


def _width_factor(alpha: float, mechanism: NoiseFamily) -> float:
    """Return half-width / noise scale: ln(1/alpha) for Laplace, z_{1-alpha/2} for Gaussian."""
    mechanism = _check_mechanism(mechanism)
    return float(accuracy_half_width(mechanism, 1.0, m=1, alpha=check_alpha(alpha)))


def half_width_for_spend(
    *,
    sensitivity: float,
    cohort: int,
    spend: float,
    alpha: float = 0.05,
    mechanism: NoiseFamily = "laplace",
) -> float:
    """Return the half-width of the (1 - alpha) error bar on a regional mean released at ``spend``.

    Parameters
    ----------
    sensitivity : float
        How far one client can move the regional sum (the clip width), > 0.
    cohort : int
        Clients in the region, >= 1.
    spend : float
        What the release charges, in its unit: epsilon for ``"laplace"``, the
        zCDP rho for ``"gaussian"`` (the ledger's ``spend``).
    alpha : float, default 0.05
        One minus the bar's coverage.
    mechanism : {"laplace", "gaussian"}
        The noise added.

    Returns
    -------
    float
        The half-width, in the metric's unit.

    Examples
    --------
    >>> round(half_width_for_spend(sensitivity=1.0, cohort=500, spend=0.1), 5)
    0.05991
    """
    mechanism = _check_mechanism(mechanism)
    d, n, e = _pos("sensitivity", sensitivity), _count("cohort", cohort), _pos("spend", spend)
    scale = d / (n * e) if mechanism == "laplace" else d / (n * math.sqrt(2.0 * e))
    return _width_factor(alpha, mechanism) * scale


def spend_for_half_width(
    *,
    sensitivity: float,
    cohort: int,
    half_width: float,
    alpha: float = 0.05,
    mechanism: NoiseFamily = "laplace",
) -> float:
    """Return the per-release spend giving a target half-width: epsilon (Laplace) or rho (Gaussian).

    Parameters
    ----------
    sensitivity : float
        How far one client can move the regional sum (the clip width), > 0.
    cohort : int
        Clients in the region, >= 1.
    half_width : float
        The target half-width of the (1 - alpha) error bar on the mean, > 0.
    alpha : float, default 0.05
        One minus the bar's coverage.
    mechanism : {"laplace", "gaussian"}
        The noise added.

    Returns
    -------
    float
        Epsilon for ``"laplace"``, rho for ``"gaussian"``.

    Examples
    --------
    >>> round(spend_for_half_width(sensitivity=1.0, cohort=500, half_width=0.05), 4)
    0.1198
    """
    mechanism = _check_mechanism(mechanism)
    d, n, h = (
        _pos("sensitivity", sensitivity),
        _count("cohort", cohort),
        _pos("half_width", half_width),
    )
    scale = h / _width_factor(alpha, mechanism)  # noise scale on the mean
    return d / (n * scale) if mechanism == "laplace" else (d / (n * scale)) ** 2 / 2.0


def detection_probability(
    shift: float, half_width: float, *, alpha: float = 0.05, mechanism: NoiseFamily = "laplace"
) -> float:
    """Return P(one release alerts) for a true shift, alerting when |value - baseline| > h.

    Parameters
    ----------
    shift : float
        The true regression (either sign), in the metric's unit.
    half_width : float
        The alert threshold h: the release's (1 - alpha) half-width, > 0.
    alpha : float, default 0.05
        The false-alarm rate per release.
    mechanism : {"laplace", "gaussian"}
        The noise added.

    Returns
    -------
    float
        The probability, in [0, 1].

    Examples
    --------
    >>> round(detection_probability(0.0, 0.06), 3)  # no shift: the false-alarm rate
    0.05
    >>> round(detection_probability(0.12, 0.06), 3)
    0.975
    """
    mechanism = _check_mechanism(mechanism)
    s = abs(check_number(shift, "shift", fix="pass the regression size, a finite number"))
    h = _pos("half_width", half_width)
    scale = h / _width_factor(alpha, mechanism)

    def tail(x: float) -> float:  # P(noise > x)
        if mechanism == "gaussian":
            from scipy.special import ndtr  # lazy: scipy is slow to import

            return float(ndtr(-x / scale))
        return 0.5 * math.exp(-x / scale) if x >= 0 else 1.0 - 0.5 * math.exp(x / scale)

    return min(1.0, tail(h - s) + tail(h + s))


@dataclass(frozen=True)
class CadencePlan:
    """Cost and detection latency of one cadence (see the module docstring for the model).

    Attributes
    ----------
    every, releases_per_epoch : int
        The cadence (a release every ``every`` rounds) and the releases it makes per epoch.
    spend_per_release, spend_per_epoch : float
        What one release and one epoch's releases charge, in ``unit``.
    unit : {"epsilon", "rho"}
        Pure-DP epsilon (Laplace) or zCDP rho (Gaussian).
    half_width, shift : float
        The error bar of one release, and the regression to detect.
    detection_probability, false_alarms_per_epoch : float
        P(one release alerts on the shift), and ``alpha`` times the releases per epoch.
    expected_latency_rounds, worst_latency_rounds : float
        Rounds from the first affected round to the alert: on average, and the
        worst case, exceeded with probability ``latency_alpha``.
    latency_alpha : float
        The miss probability of ``worst_latency_rounds``.
    """

    every: int
    releases_per_epoch: int
    spend_per_release: float
    spend_per_epoch: float
    unit: str
    half_width: float
    shift: float
    detection_probability: float
    false_alarms_per_epoch: float
    expected_latency_rounds: float
    worst_latency_rounds: float
    latency_alpha: float


def plan_cadence(
    *,
    every: int,
    sensitivity: float,
    cohort: int,
    rounds_per_epoch: int,
    shift: float,
    half_width: float | None = None,
    epoch_budget: float | None = None,
    alpha: float = 0.05,
    latency_alpha: float = 0.05,
    mechanism: NoiseFamily = "laplace",
) -> CadencePlan:
    """Plan a regional metric published every ``every`` rounds.

    Give exactly one of ``half_width`` (fixed precision per release: the cost
    follows) or ``epoch_budget`` (fixed spend per epoch on this metric, epsilon
    or rho: the precision follows).

    Parameters
    ----------
    every : int
        Publish every ``every`` rounds, >= 1.
    sensitivity : float
        How far one client can move the regional sum (the clip width), > 0.
    cohort : int
        Clients in the region, >= 1.
    rounds_per_epoch : int
        Training rounds per epoch, >= 1.
    shift : float
        The regression to detect, in the metric's unit.
    half_width, epoch_budget : float, optional
        Exactly one: precision per release, or spend per epoch.
    alpha : float, default 0.05
        False-alarm rate per release (one minus the bar's coverage).
    latency_alpha : float, default 0.05
        Probability that the worst-case latency is exceeded (it is stated at
        probability ``1 - latency_alpha``).
    mechanism : {"laplace", "gaussian"}
        Laplace spends epsilon, Gaussian spends rho.

    Returns
    -------
    CadencePlan
        Cost, precision and latency of the cadence.

    Examples
    --------
    >>> p = plan_cadence(every=4, sensitivity=1.0, cohort=500, rounds_per_epoch=24,
    ...                  shift=0.1, half_width=0.05)
    >>> p.releases_per_epoch, round(p.spend_per_epoch, 3), round(p.expected_latency_rounds, 2)
    (6, 0.719, 1.6)
    """
    k = _count("every", every)
    rounds = _count("rounds_per_epoch", rounds_per_epoch)
    alpha = check_alpha(alpha)
    mechanism = _check_mechanism(mechanism)
    miss = check_alpha(latency_alpha, "latency_alpha")
    if (half_width is None) == (epoch_budget is None):
        raise fail("half_width", half_width, f"was passed with epoch_budget={epoch_budget!r}",
                   "pass exactly one (precision per release, or spend per epoch)")
    releases = math.ceil(rounds / k)
    common = {"sensitivity": sensitivity, "cohort": cohort, "alpha": alpha, "mechanism": mechanism}
    if half_width is not None:
        h = _pos("half_width", half_width)
        spend = spend_for_half_width(half_width=h, **common)  # type: ignore[arg-type]
    else:
        spend = _pos("epoch_budget", epoch_budget) / releases
        h = half_width_for_spend(spend=spend, **common)  # type: ignore[arg-type]
    p = detection_probability(shift, h, alpha=alpha, mechanism=mechanism)
    if p <= 0.0:
        expected = worst = math.inf
    else:
        expected = (k - 1) / 2 + k * (1 - p) / p
        misses = 1 if p >= 1.0 else max(1, math.ceil(math.log(miss) / math.log1p(-p)))
        worst = float((k - 1) + k * (misses - 1))
    return CadencePlan(
        every=k,
        releases_per_epoch=releases,
        spend_per_release=spend,
        spend_per_epoch=spend * releases,
        unit="epsilon" if mechanism == "laplace" else "rho",
        half_width=h,
        shift=abs(float(shift)),  # checked by detection_probability
        detection_probability=p,
        false_alarms_per_epoch=alpha * releases,
        expected_latency_rounds=expected,
        worst_latency_rounds=worst,
        latency_alpha=miss,
    )


def cadence_table(every: Iterable[int], **kwargs: object) -> pd.DataFrame:
    """Return :func:`plan_cadence` for several cadences, one row each, indexed by ``every``.

    Parameters
    ----------
    every : iterable of int
        The cadences to compare (at least one).
    **kwargs
        The other arguments of :func:`plan_cadence`.

    Returns
    -------
    pandas.DataFrame
        One row per cadence, the fields of :class:`CadencePlan` as columns.

    Examples
    --------
    >>> t = cadence_table([1, 2, 4, 8], sensitivity=1.0, cohort=500, rounds_per_epoch=24,
    ...                   shift=0.1, epoch_budget=1.0)
    >>> t["releases_per_epoch"].tolist()
    [24, 12, 6, 3]
    """
    import pandas as pd

    if isinstance(every, str | bytes) or not isinstance(every, Iterable):
        raise fail("every", every, f"is a {type(every).__name__}, not a list of cadences",
                   "pass whole numbers >= 1, e.g. [1, 2, 4]")
    cadences = list(every)
    if not cadences:
        raise fail("every", every, "is empty", "pass at least one cadence, e.g. [1, 2, 4]")
    plans = [plan_cadence(every=k, **kwargs) for k in cadences]  # type: ignore[arg-type]
    return pd.DataFrame([asdict(p) for p in plans]).set_index("every")
