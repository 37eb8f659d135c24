"""Round-health counters: every published count noised, coarsened and charged once."""

from __future__ import annotations

import numpy as np
import pytest

from spatialdp.exceptions import BudgetExceeded, InvalidInput
from spatialdp.federated.health import HEALTH_STATUSES, round_health
from spatialdp.geo.partition import Partition
from spatialdp.privacy.ledger import PrivacyLedger
from spatialdp.privacy.target import ReleaseTarget, Simulation

Z6 = 4.89  # two-sided normal quantile at alpha = 1e-6


def _round(partition: Partition, rng: np.random.Generator, n: int = 20_000
           ) -> tuple[np.ndarray, np.ndarray]:
    region = rng.choice(np.asarray(partition.region_ids)[:40], size=n)
    status = rng.choice(list(HEALTH_STATUSES), size=n, p=[0.9, 0.08, 0.02])
    return status, region


def test_round_health_noised_coarsened_and_charged(states_partition: Partition) -> None:
    rng = np.random.default_rng(0)
    status, region = _round(states_partition, rng)
    ledger = PrivacyLedger(epoch_budget=10.0)
    health = round_health(status, region, states_partition, epsilon=0.5, granularity=5,
                          target=ReleaseTarget(ledger, 0))
    table = health.table
    assert ledger.spent(0, "evaluation.regional") == pytest.approx(0.5)
    assert len(ledger.audit(0)) == 1
    counts = table[list(HEALTH_STATUSES)]
    assert (counts % 5 == 0).all().all()
    # Unclamped (unbiased): with ~0 true counts, some noised cells are negative.
    assert (counts < 0).any().any()
    # Selected is no longer published exactly (selected - cohort would give the exact
    # dropout of every published region): it is the sum of the noised counts.
    assert (table.selected == counts.sum(axis=1)).all()
    exact = np.bincount(states_partition.region_ids.get_indexer(region), minlength=48)
    assert (table.selected.to_numpy() != exact).any()
    assert 6 <= len(health.no_contact()) <= 10  # 8 regions had nobody, up to the noise
    assert "selected" in health.summary()
    assert not health.simulated
    ledger.close()


def test_round_health_counts_within_error_bar(states_partition: Partition) -> None:
    rng = np.random.default_rng(1)
    status, region = _round(states_partition, rng)
    pos = states_partition.region_ids.get_indexer(region)
    truth = np.stack([np.bincount(pos[status == s], minlength=48) for s in HEALTH_STATUSES],
                     axis=1)
    sim = Simulation(rng)
    within, within_noise_only = [], []
    for _ in range(200):
        health = round_health(status, region, states_partition, epsilon=0.5, target=sim)
        got = health.table[list(HEALTH_STATUSES)].to_numpy()
        bar = health.table.error_bar.to_numpy()[:, None]
        within.append(np.abs(got - truth) <= bar)
        within_noise_only.append(np.abs(got - truth) <= bar - health.granularity)
    # The bar is the integer 95% half-width of the noise plus half the rounding
    # step, so it covers at least 95% (rounding can only add slack) ...
    rate = np.mean(within)
    assert rate >= 0.95 - Z6 * np.sqrt(0.05 * 0.95 / np.size(within))
    # ... and it is not vacuously wide: without the rounding slack it misses more often.
    assert np.mean(within_noise_only) < rate


def test_round_health_refusals_charge_nothing(states_partition: Partition) -> None:
    ledger = PrivacyLedger(epoch_budget=1.0)
    target = ReleaseTarget(ledger, 0)
    one = (np.array(["dropped"]), np.array(["CO"]))
    cases: list[tuple[type[Exception], str, dict[str, object]]] = [
        (InvalidInput, "unknown statuses \\['lost'\\]", {"status": np.array(["lost"])}),
        (InvalidInput, "not in 'us48-states@", {"region_id": np.array(["XX"])}),
        (BudgetExceeded, "evaluation.regional", {"epsilon": 5.0}),
        (InvalidInput, "granularity=nan is not finite", {"granularity": float("nan")}),
        (InvalidInput, "granularity=0 is below", {"granularity": 0}),
        (InvalidInput, "granularity=2.5 is not a whole number", {"granularity": 2.5}),
        (InvalidInput, "epsilon=nan is not finite", {"epsilon": float("nan")}),
        (InvalidInput, "one status and one region_id", {"status": "dropped"}),
        (InvalidInput, "target=None is not a release target", {"target": None}),
    ]
    for error, message, change in cases:
        kwargs: dict[str, object] = {"status": one[0], "region_id": one[1],
                                     "partition": states_partition, "epsilon": 0.1,
                                     "target": target, **change}
        with pytest.raises(error, match=message):
            round_health(**kwargs)  # type: ignore[arg-type]
    assert ledger.spent(0) == 0.0
    assert len(ledger.audit()) == 0
    ledger.close()
