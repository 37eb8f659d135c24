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
  releases per epoch, which add up (sequential composition: the same client may
  be in every release). Regions are disjoint, so the number of regions does not
  enter: a release over all regions costs one region's loss.
* Alert rule: a release alerts when it differs from a well-known baseline by
  more than its half-width ``h`` (false-alarm rate ``alpha`` per release). A
  regression of size ``shift`` starts at a uniformly random round and persists;
  each later release alerts independently with probability ``p``.
* Latency is the number of rounds from the first affected round to the
  alerting release: waiting for the next release (0 to ``every - 1`` rounds),
  then ``every`` rounds per missed release. Expected:
  ``(every - 1)/2 + every (1 - p)/p``. Worst case (at ``confidence``):
  ``(every - 1) + every (m - 1)`` with ``m`` the releases needed to alert with
  that probability, ``m = ceil(ln(1 - confidence) / ln(1 - p))``.

Comparing to a *noisy* baseline (e.g. the previous release) widens the combined
error bar; this planner assumes the baseline is averaged over many releases.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Literal

from scipy.stats import norm

from spatialdp.exceptions import InvalidInput
from spatialdp.privacy.accuracy import half_width as accuracy_half_width

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CadencePlan",
    "Mechanism",
    "cadence_table",
    "detection_probability",
    "half_width_for_loss",
    "loss_for_half_width",
    "plan_cadence",
]

Mechanism = Literal["laplace", "gaussian"]


def _pos(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInput(f"{name}={value!r} is not a finite number; pass a value > 0.")
    if value <= 0:
        raise InvalidInput(f"{name}={value!r} is not > 0; pass a positive value.")
    return float(value)


def _count(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(f"{name}={value!r} is not an integer >= 1; pass a whole number.")
    return value


def _prob(name: str, value: float) -> float:
    if not 0.0 < value < 1.0:
        raise InvalidInput(f"{name}={value!r} is not in (0, 1); e.g. alpha=0.05 for 95% bars.")
    return value


def _check_mechanism(mechanism: str) -> None:
    if mechanism not in ("laplace", "gaussian"):
        raise InvalidInput(
            f"mechanism={mechanism!r} is not 'laplace' (pure epsilon) or 'gaussian' (zCDP rho)."
        )


def _width_factor(alpha: float, mechanism: Mechanism) -> float:
    """Half-width / noise scale: ln(1/alpha) for Laplace, z_{1-alpha/2} for Gaussian."""
    _check_mechanism(mechanism)
    return float(accuracy_half_width(mechanism, 1.0, m=1, alpha=_prob("alpha", alpha)))


def half_width_for_loss(
    *,
    sensitivity: float,
    cohort: int,
    loss: float,
    alpha: float = 0.05,
    mechanism: Mechanism = "laplace",
) -> float:
    """Half-width of the (1 - alpha) error bar on a regional mean released at ``loss``.

    ``loss`` is epsilon for ``"laplace"`` and rho for ``"gaussian"``.

    Examples
    --------
    >>> round(half_width_for_loss(sensitivity=1.0, cohort=500, loss=0.1), 5)
    0.05991
    """
    d, n, lo = _pos("sensitivity", sensitivity), _count("cohort", cohort), _pos("loss", loss)
    scale = d / (n * lo) if mechanism == "laplace" else d / (n * math.sqrt(2.0 * lo))
    return _width_factor(alpha, mechanism) * scale


def loss_for_half_width(
    *,
    sensitivity: float,
    cohort: int,
    half_width: float,
    alpha: float = 0.05,
    mechanism: Mechanism = "laplace",
) -> float:
    """The per-release epsilon (Laplace) or rho (Gaussian) giving a target half-width.

    Examples
    --------
    >>> round(loss_for_half_width(sensitivity=1.0, cohort=500, half_width=0.05), 4)
    0.1198
    """
    d, n, h = (
        _pos("sensitivity", sensitivity),
        _count("cohort", cohort),
        _pos("half_width", half_width),
    )
    scale = h / _width_factor(alpha, mechanism)  # noise scale on the mean
    return d / (n * scale) if mechanism == "laplace" else (d / (n * scale)) ** 2 / 2.0


def detection_probability(
    shift: float, half_width: float, *, alpha: float = 0.05, mechanism: Mechanism = "laplace"
) -> float:
    """P(one release alerts) for a true shift, alerting when |value - baseline| > half_width.

    Examples
    --------
    >>> round(detection_probability(0.0, 0.06), 3)  # no shift: the false-alarm rate
    0.05
    >>> round(detection_probability(0.12, 0.06), 3)
    0.975
    """
    s = abs(float(shift))
    h = _pos("half_width", half_width)
    scale = h / _width_factor(alpha, mechanism)

    def tail(x: float) -> float:  # P(noise > x)
        if mechanism == "gaussian":
            return float(norm.sf(x / scale))
        return 0.5 * math.exp(-x / scale) if x >= 0 else 1.0 - 0.5 * math.exp(x / scale)

    return min(1.0, tail(h - s) + tail(h + s))


@dataclass(frozen=True)
class CadencePlan:
    """Cost and detection latency of one cadence (see the module docstring for the model)."""

    every: int
    releases_per_epoch: int
    loss_per_release: float
    loss_per_epoch: float
    unit: str
    half_width: float
    shift: float
    detection_probability: float
    false_alarms_per_epoch: float
    expected_latency_rounds: float
    worst_latency_rounds: float
    confidence: float


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
    confidence: float = 0.95,
    mechanism: Mechanism = "laplace",
) -> CadencePlan:
    """Plan a regional metric published every ``every`` rounds.

    Give exactly one of ``half_width`` (fixed precision per release: the cost
    follows) or ``epoch_budget`` (fixed spend per epoch on this metric, epsilon
    or rho: the precision follows).

    Examples
    --------
    >>> p = plan_cadence(every=4, sensitivity=1.0, cohort=500, rounds_per_epoch=24,
    ...                  shift=0.1, half_width=0.05)
    >>> p.releases_per_epoch, round(p.loss_per_epoch, 3), round(p.expected_latency_rounds, 2)
    (6, 0.719, 1.6)
    """
    k = _count("every", every)
    rounds = _count("rounds_per_epoch", rounds_per_epoch)
    c = _prob("confidence", confidence)
    if (half_width is None) == (epoch_budget is None):
        raise InvalidInput(
            f"plan_cadence got half_width={half_width!r} and epoch_budget={epoch_budget!r}; "
            "pass exactly one (precision per release, or spend per epoch)."
        )
    releases = math.ceil(rounds / k)
    common = {"sensitivity": sensitivity, "cohort": cohort, "alpha": alpha, "mechanism": mechanism}
    if half_width is not None:
        h = _pos("half_width", half_width)
        loss = loss_for_half_width(half_width=h, **common)  # type: ignore[arg-type]
    else:
        loss = _pos("epoch_budget", epoch_budget) / releases
        h = half_width_for_loss(loss=loss, **common)  # type: ignore[arg-type]
    p = detection_probability(shift, h, alpha=alpha, mechanism=mechanism)
    if p <= 0.0:
        expected = worst = math.inf
    else:
        expected = (k - 1) / 2 + k * (1 - p) / p
        misses = 1 if p >= 1.0 else max(1, math.ceil(math.log1p(-c) / math.log1p(-p)))
        worst = float((k - 1) + k * (misses - 1))
    return CadencePlan(
        every=k,
        releases_per_epoch=releases,
        loss_per_release=loss,
        loss_per_epoch=loss * releases,
        unit="epsilon" if mechanism == "laplace" else "rho",
        half_width=h,
        shift=abs(float(shift)),
        detection_probability=p,
        false_alarms_per_epoch=alpha * releases,
        expected_latency_rounds=expected,
        worst_latency_rounds=worst,
        confidence=c,
    )


def cadence_table(every: Iterable[int], **kwargs: object) -> pd.DataFrame:
    """:func:`plan_cadence` for several cadences, one row each, indexed by ``every``.

    Examples
    --------
    >>> t = cadence_table([1, 2, 4, 8], sensitivity=1.0, cohort=500, rounds_per_epoch=24,
    ...                   shift=0.1, epoch_budget=1.0)
    >>> t["releases_per_epoch"].tolist()
    [24, 12, 6, 3]
    """
    import pandas as pd

    plans = [plan_cadence(every=k, **kwargs) for k in every]  # type: ignore[arg-type]
    return pd.DataFrame([asdict(p) for p in plans]).set_index("every")
