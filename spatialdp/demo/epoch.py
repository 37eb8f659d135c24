"""One monitored epoch: cohorts, device metrics, charged regional releases, alerts, drift.

The world (fleet, model errors, drift) comes from the seeded simulation
(:mod:`spatialdp.demo.world`); everything published is a release: the cohort
selection secret and every noise draw come from OS entropy, and every release
is charged to the ledger before its noise is drawn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from spatialdp.federated import (
    HistogramSpec,
    MetricSpec,
    RegionalReport,
    aggregate_metric,
    calibrate_clip,
    compare_reports,
    device_report,
    drift,
    min_cohort_for,
    regional_report,
    track_ratio_spec,
)
from spatialdp.federated.incidents import Incident, ratio_pinned_at_clip
from spatialdp.privacy.budget import Neighbours
from spatialdp.privacy.ledger import PrivacyLedger
from spatialdp.privacy.target import ReleaseTarget
from spatialdp.sampling import (
    ParticipationPolicy,
    ReleasedCoverage,
    RoundCohort,
    StratifiedSampler,
    release_epoch_coverage,
)
from spatialdp.simulation import positioning_predictions

from .world import World, round_examples

__all__ = ["EpochPlan", "EpochResult", "plan_epoch", "run_epoch"]

RATIO_CLIP = 10.0
#: Published error bar (95%) the ratio's cohort floor is set for.
RATIO_ERROR_BAR = 0.5
#: Family-wise false-alarm rate of one round's comparison over all regions (Bonferroni).
FAMILY_ALPHA = 0.01
#: The drift test looks at the last rounds, at most this many, and needs this many at least.
DRIFT_WINDOW = 8
MIN_DRIFT_ROUNDS = 3
#: Share of each round's regional epsilon per metric.
METRIC_SHARES = {"ratio": 0.5, "loss": 0.375, "abs_error_m": 0.125}
#: A region merges when its eligible pool falls below the report floor / MERGE_SHARE.
MERGE_SHARE = 4
#: Participation: each device at most this many rounds of an epoch, at this training epsilon.
PARTICIPATION_CAP = 2
TRAINING_EPSILON_PER_ROUND = 1.0
#: Devices that drop out of a round or whose update is rejected.
DROP_SHARE = 0.06
#: Epsilon of the national loss of the last round (line item evaluation.global).
NATIONAL_EPSILON = 0.1
#: Epsilon of the epoch's coverage release (regions and H3 cells; line item
#: evaluation.regional).
COVERAGE_EPSILON = 0.3
WHO = "spatialdp demo"


@dataclass(frozen=True)
class EpochPlan:
    """Everything decided before the first charge (public parameters only)."""

    rounds: int
    epsilon_per_round: float
    epsilons: dict[str, float]
    cohort: int
    participation_cap: int
    min_stratum_cohort: int
    min_cohort: int
    alpha: float
    loss_spec: MetricSpec
    ratio_spec: MetricSpec
    hist_spec: HistogramSpec
    ratio_sd: float
    loss_sd: float
    neighbours: Neighbours = "add_remove"

    @property
    def specs(self) -> list[MetricSpec | HistogramSpec]:
        """The released metrics, in release order."""
        return [self.ratio_spec, self.loss_spec, self.hist_spec]


@dataclass
class EpochResult:
    """What an epoch produced."""

    reports: list[RegionalReport]
    cohorts: list[RoundCohort]
    coverage: ReleasedCoverage
    alerts: pd.DataFrame
    trend: pd.DataFrame
    history: dict[str, pd.DataFrame]
    incidents: list[Incident] = field(default_factory=list)
    sampler: Any = None
    state: Any = None
    national: Any = None


def plan_epoch(world: World, *, rounds: int, epsilon_per_round: float,
               rng: np.random.Generator, neighbours: Neighbours = "add_remove") -> EpochPlan:
    """Fix the epoch's public parameters: clip bounds from a held-out pilot fleet, floors."""
    from spatialdp.datasets import synthetic_fleet

    pilot_fleet = synthetic_fleet(min(20_000, max(2_000, len(world.fleet) // 10)), rng=rng,
                                  partition=world.partition)
    pilot = positioning_predictions(pilot_fleet, rng=rng, region_error_factor=world.worse)
    # Devices clip each example's loss: the bound comes from a public pilot, never the cohort.
    loss_spec = MetricSpec("loss", 0.0, round(calibrate_clip(pilot.loss, 99.0), 2))
    ratio_spec = track_ratio_spec(RATIO_CLIP)
    hist_spec = HistogramSpec("abs_error_m", edges=(0.25, 0.5, 1.0, 2.0, 4.0, 8.0))
    pilot_clients = device_report(pilot, loss_spec=loss_spec)
    ratio_sd = float(pilot_clients.ratio.std())
    loss_sd = float(pilot_clients[loss_spec.name].std())
    epsilons = {name: round(epsilon_per_round * share, 9) for name, share in METRIC_SHARES.items()}
    n = len(world.fleet)
    cohort = int(min(30_000, max(200, n * 3 // 10)))
    n_regions = world.partition.n_regions
    min_cohort = min_cohort_for(RATIO_ERROR_BAR, ratio_spec, epsilons["ratio"])
    return EpochPlan(
        rounds=rounds, epsilon_per_round=epsilon_per_round, epsilons=epsilons, cohort=cohort,
        participation_cap=min(PARTICIPATION_CAP, rounds),
        min_stratum_cohort=max(5, min_cohort // MERGE_SHARE),
        min_cohort=min_cohort,
        alpha=FAMILY_ALPHA / n_regions, loss_spec=loss_spec, ratio_spec=ratio_spec,
        hist_spec=hist_spec, ratio_sd=ratio_sd, loss_sd=loss_sd, neighbours=neighbours)


def run_epoch(world: World, plan: EpochPlan, ledger: PrivacyLedger, epoch: int, *,
              run_id: str, rng: np.random.Generator,
              tick: Callable[[int], None] | None = None) -> EpochResult:
    """Run the epoch's rounds, each one charged to ``ledger`` before its noise is drawn.

    ``rng`` drives the simulation only (the model's errors on each device and
    who drops out); the cohort's secret and every noise draw come from OS entropy.
    """
    part = world.partition
    who = f"{WHO} run {run_id}"
    policy = ParticipationPolicy(participation_cap=plan.participation_cap,
                                 epsilon_per_round=TRAINING_EPSILON_PER_ROUND,
                                 rounds_per_epoch=plan.rounds)
    sampler = StratifiedSampler(world.strata, cohort=plan.cohort, policy=policy,
                                mode="sqrt", min_stratum_cohort=plan.min_stratum_cohort)
    state = sampler.new_state(world.client_strata, epoch=epoch, target=ReleaseTarget(
        ledger, epoch, who=who, why="per-client participation of the epoch's training rounds"),
        neighbours=plan.neighbours)
    reports: list[RegionalReport] = []
    cohorts: list[RoundCohort] = []
    alerts = []
    national = None
    for round_index in range(1, plan.rounds + 1):
        cohort = sampler.select(state, round_index)
        cohorts.append(cohort)
        clients = cohort.clients[rng.random(cohort.clients.size) >= DROP_SHARE]
        examples = round_examples(world, clients, round_index, rng)
        # On the devices: bounded per-client numbers only, tagged with specs and partition.
        device = device_report(examples, loss_spec=plan.loss_spec, hist_spec=plan.hist_spec,
                               ratio_clip=RATIO_CLIP, partition=part)
        report = regional_report(
            device, part, plan.specs, epsilon=plan.epsilons, min_cohort=plan.min_cohort,
            target=ReleaseTarget(ledger, epoch, who=who, round_index=round_index,
                                 why=f"regional evaluation, round {round_index}"),
            neighbours=plan.neighbours)
        if reports:
            compared = compare_reports(report["ratio"], reports[-1]["ratio"], alpha=plan.alpha,
                                       sampling_sd=plan.ratio_sd)
            compared = compared.assign(round=round_index)
            alerts.append(compared)
        reports.append(report)
        if round_index == plan.rounds:  # the national value the regions are compared with
            national = aggregate_metric(device, plan.loss_spec, epsilon=NATIONAL_EPSILON,
                                        target=ReleaseTarget(
                                            ledger, epoch, who=who, round_index=round_index,
                                            why=f"national loss, round {round_index}"),
                                        neighbours=plan.neighbours)
        if tick is not None:
            tick(1)
    history = {name: _history(reports, name) for name in ("ratio", "loss")}
    table = (pd.concat(alerts).reset_index() if alerts else pd.DataFrame(
        columns=["region_id", "difference", "threshold", "fired", "round"]))
    trend = drift(pd.concat([r["ratio"] for r in reports]).drop(columns="geometry")
                  .reset_index(), window=drift_window(plan.rounds), alpha=plan.alpha,
                  sampling_sd=plan.ratio_sd) if plan.rounds >= MIN_DRIFT_ROUNDS else pd.DataFrame()
    # Who was sampled, and where: a release in both modes. The fleet's locations below the
    # report regions (the H3 cells) are private even when participation per region is
    # public (replace-one), so the demo never publishes the server's exact records of them.
    coverage = release_epoch_coverage(
        state, report=part, client_regions=world.client_regions, cells=world.cells,
        client_cells=None if world.cells is None else world.client_cells,
        epsilon=COVERAGE_EPSILON, neighbours=plan.neighbours,
        target=ReleaseTarget(ledger, epoch, who=who, why="coverage of the epoch's cohorts"))
    incidents = ratio_pinned_at_clip(reports[-1]["ratio"], RATIO_CLIP)
    return EpochResult(reports=reports, cohorts=cohorts, coverage=coverage, alerts=table,
                       trend=trend, history=history, incidents=incidents, sampler=sampler,
                       state=state, national=national)


def drift_window(rounds: int) -> int:
    """Return how many of the last rounds the epoch's drift test looks at."""
    return min(rounds, DRIFT_WINDOW)


def _history(reports: list[RegionalReport], metric: str) -> pd.DataFrame:
    """Return the long table (region x round) of one metric, as the dashboard draws it."""
    frames = [r[metric].drop(columns="geometry") for r in reports]
    history = pd.concat(frames).reset_index()
    history.attrs = dict(frames[-1].attrs)
    return history
