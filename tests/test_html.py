"""Jupyter display: every result object an analyst meets shows its summary (and table)."""

from __future__ import annotations

from spatialdp.datasets import synthetic_fleet, us_states_partition
from spatialdp.privacy.budget import Single
from spatialdp.privacy.ledger import PrivacyLedger
from spatialdp.privacy.target import Simulation
from spatialdp.sampling import ParticipationPolicy, Strata, StratifiedSampler
from spatialdp.sampling.coverage import epoch_coverage


def test_partition_shows_its_summary_and_first_ids() -> None:
    states = us_states_partition()
    block = states._repr_html_()
    assert states.version in block
    assert "48" in block
    assert "AL, AR, AZ" in block
    assert "..." in block
    assert "<script" not in block


def test_ledger_shows_the_latest_epoch_by_line_item() -> None:
    ledger = PrivacyLedger(":memory:", epoch_budget=2.0)
    assert "0 charges" in ledger._repr_html_()
    assert "<table" not in ledger._repr_html_()
    ledger.spend(3, "evaluation.regional", structure=Single("national loss"),
                 who="analyst", what="loss", why="test", epsilon=0.25)
    block = ledger._repr_html_()
    assert "epoch 3 by line item" in block
    assert "<table" in block
    assert "evaluation.regional" in block
    assert "0.25" in block


def test_cohort_and_coverage_show_seats_and_merges() -> None:
    strata = Strata(us_states_partition(), basis="administrative")
    fleet = synthetic_fleet(20_000, rng=3)
    policy = ParticipationPolicy(participation_cap=1, epsilon_per_round=0.25,
                                 rounds_per_epoch=4)
    sampler = StratifiedSampler(strata, cohort=150, policy=policy, mode="proportional",
                                min_stratum_cohort=110)
    state = sampler.new_state(strata.positions(fleet.region_id.to_numpy()),
                              target=Simulation(rng=1))
    cohort = sampler.select(state, 0)
    block = cohort._repr_html_()
    assert "RoundCohort(round_index=0" in block
    assert "<table" in block
    assert "shortfall" in block
    assert "not a release" in block
    coverage = epoch_coverage(sampler, state)
    block = coverage._repr_html_()
    assert "blind spots" in block
    assert "per-client epsilon" in block
    assert ("merged strata and why" in block) == bool(coverage.merges)
