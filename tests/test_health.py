from __future__ import annotations

import numpy as np
import pytest

from spatialdp.exceptions import BudgetExceeded, InvalidInput
from spatialdp.federated.health import round_health
from spatialdp.geo.partition import Partition
from spatialdp.privacy.ledger import PrivacyLedger


def _round(partition: Partition, rng: np.random.Generator, n: int = 20_000):  # type: ignore[no-untyped-def]
    region = rng.choice(np.asarray(partition.region_ids)[:40], size=n)
    status = rng.choice(["returned", "dropped", "rejected"], size=n, p=[0.9, 0.08, 0.02])
    return status, region


def test_round_health_noised_coarsened_and_charged(states_partition: Partition) -> None:
    rng = np.random.default_rng(0)
    status, region = _round(states_partition, rng)
    ledger = PrivacyLedger(epoch_budget=10.0)
    health = round_health(status, region, states_partition, epsilon=0.5, granularity=5,
                          ledger=ledger, epoch=0)
    table = health.table
    assert ledger.spent(0, "evaluation.regional") == pytest.approx(0.5)
    assert (table[["returned", "dropped", "rejected"]] % 5 == 0).all().all()
    # Unclamped (unbiased): with ~0 true counts, some noised cells are negative.
    assert (table[["returned", "dropped", "rejected"]] < 0).any().any()
    # Selected is the server's own choice, published as is; 8 regions had nobody.
    assert table.selected.sum() == status.size
    assert len(health.no_contact()) == 8


def test_round_health_counts_within_error_bar(states_partition: Partition) -> None:
    rng = np.random.default_rng(1)
    status, region = _round(states_partition, rng)
    truth = np.zeros((48, 3))
    pos = states_partition.region_ids.get_indexer(region)
    for j, s in enumerate(("returned", "dropped", "rejected")):
        truth[:, j] = np.bincount(pos[status == s], minlength=48)
    hits = []
    for _ in range(200):
        health = round_health(status, region, states_partition, epsilon=0.5,
                              simulate_with=rng)
        got = health.table[["returned", "dropped", "rejected"]].to_numpy()
        # clamping at 0 only moves values toward the truth for zero cells
        hits.append(np.abs(got - truth) <= health.table.error_bar.to_numpy()[:, None])
    # The bar is the integer 95% half-width of the noise plus half the rounding
    # step, so it covers at least 95% (rounding can only add slack).
    rate = np.mean(hits)
    assert rate >= 0.95 - 4 * np.sqrt(0.05 * 0.95 / np.size(hits))
    # and it is not vacuously wide: without the rounding slack it misses more often
    noise_only = health.table.error_bar.to_numpy()[:, None] - health.granularity
    assert np.mean(np.abs(got - truth) <= noise_only) < rate


def test_round_health_refusals(states_partition: Partition) -> None:
    ledger = PrivacyLedger(epoch_budget=1.0)
    with pytest.raises(InvalidInput, match="unknown statuses \\['lost'\\]"):
        round_health(["lost"], ["CO"], states_partition, epsilon=0.1)
    with pytest.raises(InvalidInput, match="not in 'us48-states@"):
        round_health(["dropped"], ["XX"], states_partition, epsilon=0.1)
    with pytest.raises(BudgetExceeded, match="evaluation.regional"):
        round_health(["dropped"], ["CO"], states_partition, epsilon=5.0, ledger=ledger, epoch=0)
    assert ledger.spent(0) == 0.0


def test_round_health_refuses_seeded_noise_with_ledger(states_partition: Partition) -> None:
    ledger = PrivacyLedger(epoch_budget=1.0)
    with pytest.raises(InvalidInput, match="simulate_with= .* together with a ledger"):
        round_health(["dropped"], ["CO"], states_partition, epsilon=0.1, ledger=ledger, epoch=0,
                     simulate_with=np.random.default_rng(0))
