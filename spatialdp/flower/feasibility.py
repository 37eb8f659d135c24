"""Feasibility of a Flower run's plan, checked before anything is charged or trained.

:class:`~spatialdp.flower.SpatialDPStrategy` checks here, when it is built (and
again when the fleet registers, before the first selection), what would
otherwise fail rounds into a run: a stratified cohort the fleet cannot fill
under the participation cap for the planned rounds, more rounds than the
sampler's epoch, an evaluation cohort below the publication floor, and a
ledger that cannot pay the planned evaluation rounds. Each refusal names the
numbers and the fix; nothing is charged.

Examples
--------
>>> from spatialdp.datasets import us_states_partition
>>> from spatialdp.exceptions import InvalidInput
>>> from spatialdp.sampling import ParticipationPolicy, Strata, StratifiedSampler
>>> policy = ParticipationPolicy(participation_cap=1, epsilon_per_round=0.1,
...                              rounds_per_epoch=3)
>>> sampler = StratifiedSampler(Strata(us_states_partition(), basis="administrative"),
...                             cohort=20, policy=policy)
>>> check_fleet(sampler, "fit", 60, rounds=3)      # 20 x 3 seats, 60 x 1 available
>>> try:
...     check_fleet(sampler, "fit", 50, rounds=3)
... except InvalidInput as err:
...     print(str(err).split(": ")[1].split(";")[0])
3 x 20 = 60 seats, the fleet has 50 x 1 = 50
"""

from __future__ import annotations

from collections.abc import Mapping

from spatialdp._validation import fail
from spatialdp.federated.regional import REGIONAL_LINE_ITEM
from spatialdp.privacy.pipeline import check_affordable, exact_total
from spatialdp.privacy.target import Accounting
from spatialdp.sampling.sampler import StratifiedSampler

__all__ = ["check_evaluation_plan", "check_fleet", "planned_rounds"]


def planned_rounds(sampler: StratifiedSampler, kind: str, num_rounds: int | None) -> int:
    """Return the rounds a sampler will select in the run, refusing more than its epoch."""
    epoch = sampler.policy.rounds_per_epoch
    if num_rounds is not None and num_rounds > epoch:
        raise fail("num_rounds", num_rounds, f"exceeds the {kind} sampler's rounds_per_epoch="
                   f"{epoch}: one Flower run is one sampler epoch, so rounds "
                   f"{epoch + 1}..{num_rounds} could select no one",
                   f"pass num_rounds <= {epoch}, or a ParticipationPolicy with "
                   f"rounds_per_epoch >= {num_rounds}")
    return epoch if num_rounds is None else num_rounds


def check_fleet(sampler: StratifiedSampler, kind: str, fleet: int, rounds: int) -> None:
    """Refuse a cohort the fleet cannot fill, under the cap, in every planned round.

    ``rounds`` cohorts of ``cohort`` clients need ``cohort x rounds`` seats; a
    fleet of ``fleet`` clients capped at ``participation_cap`` rounds each has
    ``fleet x cap`` (and no round can take more than ``fleet`` clients). A plan
    within these bounds can still fall short in a round (seats concentrated on
    few clients, clients offline): the strategy then shrinks that round's cohort
    and records it.
    """
    cap = sampler.policy.participation_cap
    need, have = sampler.cohort * rounds, fleet * cap
    if sampler.cohort > fleet or need > have:
        most = min(fleet, have // rounds)
        raise fail(f"{kind}_sampler.cohort", sampler.cohort,
                   f"cannot be filled for the {rounds} planned rounds by a fleet of {fleet} "
                   f"clients under participation_cap={cap}: {rounds} x {sampler.cohort} = "
                   f"{need} seats, the fleet has {fleet} x {cap} = {have}",
                   f"lower the cohort to at most {most}, raise the participation cap to "
                   f"{-(-need // max(fleet, 1))}, plan fewer rounds (num_rounds), or enlarge "
                   "the fleet")


def check_evaluation_plan(target: Accounting, epsilon: Mapping[str, float],
                          sampler: StratifiedSampler | None, *, num_rounds: int | None,
                          min_cohort: int) -> None:
    """Refuse an evaluation plan that cannot publish or cannot be paid, before any round.

    A stratified evaluation cohort below ``min_cohort`` leaves every region
    below the floor in every round. With a known number of rounds (``num_rounds``,
    else the evaluation sampler's epoch) a ledger target must afford every
    round's charge (:func:`~spatialdp.privacy.pipeline.check_affordable`:
    ``BudgetExceeded`` otherwise, nothing charged).
    """
    if sampler is not None and sampler.cohort < min_cohort:
        raise fail("evaluate_sampler.cohort", sampler.cohort,
                   f"is below min_cohort={min_cohort}: every region would be below the "
                   "publication floor in every round, so no evaluation round could publish",
                   f"raise the evaluation cohort to at least {min_cohort} (a region needs "
                   "min_cohort clients of its own), or lower min_cohort")
    rounds = num_rounds if num_rounds is not None else (
        None if sampler is None else sampler.policy.rounds_per_epoch)
    if rounds is not None:
        check_affordable(target, default_line_item=REGIONAL_LINE_ITEM,
                         epsilon=exact_total(list(epsilon.values())), charges=rounds)
