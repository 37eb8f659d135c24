"""One evaluation round's release, from the clients' bounded reports: no Flower needed.

:func:`release_evaluation` is everything the server does with a round's replies:
decode and check each reply (:func:`~spatialdp.flower.codec.decode_reports`),
release every metric per region with :func:`spatialdp.federated.regional_report`
(noise added once per region and metric, the round charged once to the target,
regions below the floor suppressed), then derive the global values Flower's
``History`` records from the published regional values alone (post-processing:
no further charge). :class:`~spatialdp.flower.strategy.SpatialDPStrategy`
calls it from ``aggregate_evaluate``; an audit can call it directly with a
``Simulation`` target.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spatialdp._validation import check_text, fail
from spatialdp.federated.metrics import HistogramSpec, MetricSpec, Spec, check_specs
from spatialdp.federated.regional import RegionalReport, regional_report
from spatialdp.flower.codec import decode_reports
from spatialdp.geo.partition import Partition
from spatialdp.privacy.budget import Neighbours, check_neighbours
from spatialdp.privacy.target import Accounting

__all__ = ["RELIABILITY_CODES", "EvaluationRelease", "published_metrics", "release_evaluation"]



@dataclass(frozen=True)
class EvaluationRelease:
    """What one evaluation round published, and how it got there.

    Attributes
    ----------
    report : RegionalReport
        Per metric and region: noised value, error bar, reliability, suppression.
    loss : float
        The published global value of the loss metric (NaN without one): what
        Flower's ``History.losses_distributed`` records.
    metrics : dict of str -> float or str
        The published values Flower's ``History.metrics_distributed`` records
        (see :func:`published_metrics`).
    received, used : int
        Replies received and replies that entered the release.
    dropped : dict of str -> int
        Replies left out, by reason (never published; kept on the server).
    """

    report: RegionalReport
    loss: float
    metrics: dict[str, float | int | str]
    received: int
    used: int
    dropped: dict[str, int] = field(default_factory=dict)

    @property
    def epsilon(self) -> float:
        """What the round cost each client (the sum of the metrics' epsilons)."""
        return self.report.epsilon_total


def _weighted(values: np.ndarray, noise_std: np.ndarray, weights: np.ndarray
              ) -> tuple[float, float]:
    total = float(weights.sum())
    if total <= 0:
        return math.nan, math.nan
    mean = float((weights * values).sum() / total)
    return mean, float(np.sqrt((weights**2 * noise_std**2).sum()) / total)


#: The number Flower's History records for each reliability class (``m/<region>/reliability``).
RELIABILITY_CODES: dict[str, int] = {"high": 0, "medium": 1, "low": 2}


def _region_keys(name: str, report: RegionalReport, shown: Any) -> dict[str, float | int]:
    """Per published region: unbiased value, error bar, interval, reliability, display."""
    display = report.bounded(name).loc[shown.index]
    out: dict[str, float | int] = {}
    for region in shown.index:
        row, shown_row = display.loc[region], shown.loc[region]
        key = f"{name}/{region}"
        out[key] = float(shown_row.value)
        out[f"{key}/error_bar"] = float(shown_row.error_bar)
        out[f"{key}/ci_low"] = float(shown_row.ci_low)
        out[f"{key}/ci_high"] = float(shown_row.ci_high)
        out[f"{key}/reliability"] = RELIABILITY_CODES[str(shown_row.reliability)]
        out[f"{key}/display"] = float(row.value)
        out[f"{key}/display_low"] = float(row.ci_low)
        out[f"{key}/display_high"] = float(row.ci_high)
    return out


def published_metrics(report: RegionalReport) -> dict[str, float | int | str]:
    """Return the Flower metrics dict of a regional report: published numbers only.

    Keys, per metric ``m`` (a histogram's buckets as ``m[label]``):

    - ``m``: the mean of the published regional values weighted by their
      published cohorts (regions below the floor are left out, so this is the mean
      over the published regions, not over every client), and ``m.noise_std``,
      the standard deviation of its noise; ``m.display``: ``m`` clamped into the
      metric's range (display only, BIASED);
    - per published region ``r`` (suppressed regions have no key at all):

      - ``m/r``: the region's published value, UNBIASED (noise can take it
        outside the metric's range: average and compare these);
      - ``m/r/error_bar``, ``m/r/ci_low``, ``m/r/ci_high``: its error bar and
        ``1 - alpha`` interval (unbiased, unclamped);
      - ``m/r/reliability``: its reliability class as a number
        (:data:`RELIABILITY_CODES`: 0 high, 1 medium, 2 low);
      - ``m/r/display``, ``m/r/display_low``, ``m/r/display_high``: value and
        interval clamped into the metric's range
        (:meth:`~spatialdp.federated.RegionalReport.bounded`): for plots only,
        BIASED (never average them);

    plus ``epsilon`` (the round's per-client cost), ``regions_published``,
    ``suppressed_regions`` and ``neighbours`` (the relation the round's epsilon
    holds for). Everything is computed from the published frames (under
    add/remove the cohort weights are the noised cohorts): post-processing, no
    further privacy cost.
    """
    out: dict[str, float | int | str] = {}
    published_regions = 0
    for name, frame in report.frames.items():
        shown = frame[~frame.suppressed.to_numpy(dtype=bool)]
        published_regions = max(published_regions, len(shown))
        weights = shown.cohort.to_numpy(dtype=np.float64, na_value=0.0)
        std = shown.noise_std.to_numpy(dtype=np.float64)
        spec = report.estimates[name].spec
        if isinstance(spec, HistogramSpec):
            for label in spec.labels:
                out[f"{name}[{label}]"] = _weighted(
                    shown[label].to_numpy(dtype=np.float64), std, weights)[0]
        value, noise = _weighted(shown.value.to_numpy(dtype=np.float64), std, weights)
        low, high = spec.value_range
        out[name] = value
        out[f"{name}.noise_std"] = noise
        out[f"{name}.display"] = float(np.clip(value, low, high)) if math.isfinite(value) else value
        out.update(_region_keys(name, report, shown))
    out["epsilon"] = report.epsilon_total
    out["regions_published"] = published_regions
    out["suppressed_regions"] = report.suppressed_regions
    out["neighbours"] = report.neighbours
    return out


def _loss_metric(specs: Sequence[Spec], loss_metric: str | None) -> str | None:
    if loss_metric is None:
        plain = [s.name for s in specs if isinstance(s, MetricSpec)]
        return plain[0] if plain else None
    name = check_text(loss_metric, "loss_metric")
    match = [s for s in specs if s.name == name]
    if not match or not isinstance(match[0], MetricSpec):
        raise fail("loss_metric", loss_metric, "is not a released MetricSpec",
                   f"pass one of {[s.name for s in specs if isinstance(s, MetricSpec)]}")
    return name


def release_evaluation(
    replies: Mapping[str, Mapping[str, Any]],
    *,
    partition: Partition,
    metrics: Sequence[Spec],
    epsilon: float | Mapping[str, float],
    target: Accounting,
    min_cohort: int = 50,
    alpha: float = 0.05,
    regions: Mapping[str, str] | None = None,
    loss_metric: str | None = None,
    neighbours: Neighbours = "replace",
) -> EvaluationRelease:
    """Release one evaluation round from the clients' bounded reports.

    Parameters
    ----------
    replies : mapping client id -> metrics dict
        Each client's evaluation metrics as Flower delivers them
        (:func:`spatialdp.flower.client.bounded_report` builds them).
    partition : Partition
        The fixed geography of the regional release.
    metrics : sequence of MetricSpec / HistogramSpec
        The released specs (the devices clipped under exactly these).
    epsilon : float or mapping name -> float
        Per-client privacy loss of this round's release, all metrics together: one
        number is split equally over the metrics, a mapping gives the split.
    target : ReleaseTarget, Simulation or Unaccounted
        Where the round is charged (once, line item ``evaluation.regional`` by
        default) and how the noise is drawn.
    min_cohort : int
        Publication floor per region.
    alpha : float
        Level of the published error bars.
    regions : mapping client id -> region id, optional
        The registered (frozen) regions; replies from another region are dropped.
    loss_metric : str, optional
        The MetricSpec published as Flower's loss (default: the first MetricSpec).
    neighbours : {"replace", "add_remove"}, default "replace"
        The neighbouring relation of the regional release
        (:func:`~spatialdp.federated.regional_report`): under ``"add_remove"``
        which clients answered, and from where, is protected too.

    Returns
    -------
    EvaluationRelease

    Raises
    ------
    InvalidInput
        Bad arguments, no usable reply, or every region below the floor.
    BudgetExceeded
        The ledger cannot pay the round.
        Nothing is charged or published when anything is raised.

    Examples
    --------
    >>> import pandas as pd
    >>> from spatialdp.datasets import synthetic_fleet, us_states_partition
    >>> from spatialdp.federated import device_report
    >>> from spatialdp.flower.codec import encode_report
    >>> from spatialdp.privacy import Simulation
    >>> states, spec = us_states_partition(), MetricSpec("loss", 0.0, 4.0)
    >>> fleet = synthetic_fleet(1_000, rng=0)
    >>> rows = device_report(pd.DataFrame({"client_id": fleet.device_id, "loss": 1.0,
    ...                                    "region_id": fleet.region_id}),
    ...                      loss_spec=spec, partition=states)
    >>> replies = {str(c): encode_report(rows.loc[[c]], [spec]) for c in rows.index}
    >>> out = release_evaluation(replies, partition=states, metrics=[spec], epsilon=1.0,
    ...                          target=Simulation(rng=0), min_cohort=50)
    >>> out.used, round(out.loss, 1), out.metrics["regions_published"]
    (1000, 1.0, 5)
    """
    specs = check_specs(metrics)
    relation = check_neighbours(neighbours)
    loss_name = _loss_metric(specs, loss_metric)
    frame, dropped = decode_reports(replies, specs, partition, regions=regions)
    if len(frame) == 0:
        # Under add/remove how many clients answered, and why they were dropped, is
        # private: the refusal names neither.
        value, why = ((f"{len(replies)} replies", f" (dropped: {dropped})")
                      if relation == "replace" else ("<count withheld: add/remove>", ""))
        raise fail("replies", value, f"hold no usable bounded report{why}",
                   "have the clients answer with spatialdp.flower.client.bounded_report")
    report = regional_report(frame, partition, specs, epsilon=epsilon, target=target,
                             min_cohort=min_cohort, alpha=alpha, neighbours=relation)
    published = published_metrics(report)
    loss = math.nan if loss_name is None else float(published[loss_name])
    return EvaluationRelease(report=report, loss=loss, metrics=published,
                             received=len(replies), used=len(frame), dropped=dropped)
