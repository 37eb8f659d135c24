"""Secure sum, then noise once: private global metrics over a whole cohort.

Devices send clipped, bounded numbers (:mod:`spatialdp.federated.device`).
Secure aggregation gives the server only the sums and the number of clients
(:mod:`spatialdp.federated.group_sums`); Laplace noise is added once to each sum
(never per client), at scale ``sensitivity / epsilon``, and the noised sum
divided by the cohort is published with its error bar. A histogram's buckets are
one release. Per-region releases are :func:`spatialdp.federated.regional_report`.

Every release follows one order (:mod:`spatialdp.privacy.pipeline`): validate
everything, compute everything that can fail, charge the target, draw the noise,
publish. Nothing is charged for a refused release.

Neighbouring relation (``neighbours=``): ``"replace"`` (the default) replaces
one client's data by another's, with the cohort (which clients take part)
chosen by the server's stratified selection and therefore public; the clip
width is then the sensitivity of a sum, and ``2 * mass_cap`` that of a
histogram, and the floor applies to the exact cohort. ``"add_remove"`` adds or
removes one client: the count of clients is noised too (the sum at sensitivity
``max(|clip_low|, |clip_high|)`` or ``mass_cap``), the value is a ratio
estimate, and the floor applies to the noised count after the release (a
suppressed result is charged, and shows nothing).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from spatialdp._validation import check_alpha, check_cohort_floor, check_epsilon
from spatialdp.exceptions import CohortTooSmall, InvalidInput
from spatialdp.federated._estimate import Estimate, NoisyCohort, plan_estimate
from spatialdp.federated.client_reports import read_reports
from spatialdp.federated.group_sums import Groups
from spatialdp.federated.metrics import HistogramSpec, MetricSpec
from spatialdp.federated.release import HistogramRelease, MetricRelease
from spatialdp.privacy.budget import Neighbours, Single, check_neighbours
from spatialdp.privacy.pipeline import ReleasePlan, run_release
from spatialdp.privacy.target import Accounting, check_target

__all__ = ["aggregate_histogram", "aggregate_metric"]

GLOBAL_LINE_ITEM = "evaluation.global"


def _release_one(client_reports: pd.DataFrame, spec: MetricSpec | HistogramSpec, *,
                 epsilon: float, target: Accounting, min_cohort: int, alpha: float,
                 neighbours: Neighbours) -> Estimate:
    """Validate, plan, charge and noise one metric over the whole cohort."""
    account = check_target(target)
    eps = check_epsilon(epsilon)
    floor = check_cohort_floor(min_cohort)
    level = check_alpha(alpha)
    relation = check_neighbours(neighbours)
    table = read_reports(client_reports, [spec])
    values = table.values(spec)
    presence = table.presence(spec) if isinstance(spec, MetricSpec) else None
    n = values.shape[0]
    groups = Groups(np.zeros(n, dtype=np.int64), 1)
    cohort = None
    if relation == "replace" and n < floor:  # the cohort is public under replace-one
        raise CohortTooSmall(
            f"{spec.key}: cohort={n} is below the floor min_cohort={floor}; publishing it "
            "would expose individual clients. Wait for more clients or widen the window")
    if relation == "add_remove":  # nothing before the noise looks at the count
        cohort = NoisyCohort.split([spec], {spec.name: eps})
    plans: list[ReleasePlan[Any]] = [] if cohort is None else [cohort.plan(groups.counts)]
    plans.append(plan_estimate(spec, values, presence, groups, epsilon=eps, min_cohort=floor,
                               alpha=level, neighbours=relation, cohort=cohort))
    *_, estimate = run_release(plans, target=account, structure=Single(spec.key),
                               what=spec.key, default_line_item=GLOBAL_LINE_ITEM,
                               neighbours=relation)
    return estimate


def aggregate_metric(
    client_reports: pd.DataFrame,
    spec: MetricSpec,
    *,
    epsilon: float,
    target: Accounting,
    min_cohort: int = 50,
    alpha: float = 0.05,
    neighbours: Neighbours = "replace",
) -> MetricRelease:
    """Securely summed, noised mean of one clipped metric over a whole cohort.

    Noise is added once, to the sum, at scale ``spec.sensitivity / epsilon``; the
    published error bar is fixed before the round from the clip width, epsilon
    and the cohort size, and shrinks as 1/n. A spec with ``present`` is
    published as a ratio estimator (noised sum over noised count of clients that
    have the metric).

    Parameters
    ----------
    client_reports : DataFrame
        From :func:`~spatialdp.federated.device_report` under this same spec (its
        ``device_specs`` column is checked), one row per client.
    spec : MetricSpec
        The released metric.
    epsilon : float
        Privacy loss of this release.
    target : ReleaseTarget, Simulation or Unaccounted
        Where the release is charged and how its noise is drawn; required.
    min_cohort : int
        Publication floor (a whole number >= 1).
    alpha : float
        Error bars are (1 - alpha) intervals of the noise.
    neighbours : {"replace", "add_remove"}, default "replace"
        The neighbouring relation ``epsilon`` holds for (see the module docstring).

    Returns
    -------
    MetricRelease

    Raises
    ------
    InvalidInput, CohortTooSmall, ClippingFailure, BudgetExceeded
        Nothing is charged when any is raised before the noise. ``CohortTooSmall``
        only under replace-one (the cohort is public); under add/remove a noised
        count below the floor gives a suppressed, charged result.

    Examples
    --------
    >>> from spatialdp.federated import device_report
    >>> from spatialdp.privacy import Simulation
    >>> examples = pd.DataFrame({"client_id": np.arange(1000), "loss": 0.8})
    >>> spec = MetricSpec("loss", 0.0, 2.5)
    >>> rel = aggregate_metric(device_report(examples, loss_spec=spec), spec, epsilon=1.0,
    ...                        target=Simulation(rng=0))
    >>> rel.cohort, round(rel.error_bar, 4)
    (1000, 0.0075)
    """
    if not isinstance(spec, MetricSpec):
        raise InvalidInput(f"spec={spec!r} is not a MetricSpec; histograms use "
                           "aggregate_histogram")
    est = _release_one(client_reports, spec, epsilon=epsilon, target=target,
                       min_cohort=min_cohort, alpha=alpha, neighbours=neighbours)
    account = check_target(target)
    if est.suppressed[0]:
        # A NOISED count below the floor: charged (the noise was drawn), but neither
        # value nor count is shown.
        return MetricRelease(
            metric=spec.key, value=math.nan, error_bar=math.nan, alpha=float(alpha),
            noise_scale=math.nan, cohort=0, epsilon=est.epsilon, clip_low=spec.clip_low,
            clip_high=spec.clip_high, estimator=est.estimator, round_index=account.round_index,
            accounting=account.metadata(), suppressed=True, neighbours=neighbours)
    return MetricRelease(
        metric=spec.key, value=float(est.values[0]), error_bar=float(est.error_bar[0]),
        alpha=float(alpha), noise_scale=float(est.noise_scale[0]), cohort=int(est.cohort[0]),
        epsilon=est.epsilon, clip_low=spec.clip_low, clip_high=spec.clip_high,
        estimator=est.estimator, round_index=account.round_index,
        accounting=account.metadata(), neighbours=neighbours,
        _state={k: float(v[0]) for k, v in est.state.items()},
    )


def aggregate_histogram(
    client_reports: pd.DataFrame,
    spec: HistogramSpec,
    *,
    epsilon: float,
    target: Accounting,
    min_cohort: int = 50,
    alpha: float = 0.05,
    neighbours: Neighbours = "replace",
) -> HistogramRelease:
    """Securely summed, noised histogram: the buckets are ONE release at full epsilon.

    Each bucket gets Laplace noise at scale ``spec.sensitivity / epsilon``
    (``2 * mass_cap`` in L1 under replace-one), whatever the bucket count. The
    published values are mean mass per client per bucket, unclamped so that they
    stay unbiased (clamp negatives yourself for display: it is post-processing).

    Parameters are those of :func:`aggregate_metric`.

    Examples
    --------
    >>> from spatialdp.federated import device_report
    >>> from spatialdp.privacy import Simulation
    >>> spec = HistogramSpec("err", edges=(1.0, 2.0))
    >>> examples = pd.DataFrame({"client_id": np.arange(400), "error": 0.5})
    >>> rel = aggregate_histogram(device_report(examples, hist_spec=spec), spec,
    ...                           epsilon=1.0, target=Simulation(rng=1))
    >>> rel.labels, rel.cohort
    (('<=1', '(1, 2]', '>2'), 400)
    """
    if not isinstance(spec, HistogramSpec):
        raise InvalidInput(f"spec={spec!r} is not a HistogramSpec; scalar metrics use "
                           "aggregate_metric")
    est = _release_one(client_reports, spec, epsilon=epsilon, target=target,
                       min_cohort=min_cohort, alpha=alpha, neighbours=neighbours)
    account = check_target(target)
    return HistogramRelease(
        metric=spec.key, labels=tuple(spec.labels), values=est.values[0],
        error_bar=float(est.error_bar[0]), alpha=float(alpha),
        noise_scale=float(est.noise_scale[0]), cohort=int(est.cohort[0]),
        epsilon=est.epsilon, round_index=account.round_index, accounting=account.metadata(),
        estimator=est.estimator, suppressed=bool(est.suppressed[0]), neighbours=neighbours,
        mass_cap=spec.mass_cap,
        _state={k: float(v[0]) for k, v in est.state.items()},
    )
