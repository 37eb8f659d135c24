"""Secure sum then noise once: error bars, 1/n shape, unbiasedness, refusals."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from spatialdp.exceptions import BudgetExceeded, ClippingFailure, CohortTooSmall, InvalidInput
from spatialdp.federated.aggregate import (
    aggregate_histogram,
    aggregate_metric,
    release_noise,
    secure_sum,
    simulation_noise,
)
from spatialdp.federated.metrics import HistogramSpec, MetricSpec
from spatialdp.privacy.ledger import PrivacyLedger

LOSS = MetricSpec("loss", 0.0, 2.5)
HIST = HistogramSpec("abs_error_m", edges=(0.5, 1, 2, 5, 10, 25))


def _clients(n: int, rng: np.random.Generator) -> np.ndarray:
    return LOSS.clip(rng.gamma(2.0, 0.3, n))


def test_error_bar_covers_true_mean_95_percent_over_10000_rounds() -> None:
    rng = np.random.default_rng(20261129)
    noise = simulation_noise(rng)
    rounds = 10_000
    covered = 0
    for r in range(rounds):
        values = _clients(100 + (r % 7) * 50, rng)
        rel = aggregate_metric(values, LOSS, epsilon=0.5, noise=noise)
        covered += abs(rel.value - values.mean()) <= rel.error_bar
    rate = covered / rounds
    assert abs(rate - 0.95) <= 0.01, rate  # the tolerance; SE = 0.0022


def test_error_bar_shrinks_as_one_over_n_not_root_n() -> None:
    rng = np.random.default_rng(3)
    noise = simulation_noise(rng)
    sizes = [100, 400, 1600]
    bars, rms = [], []
    for n in sizes:
        values = _clients(n, rng)
        errs = np.array([aggregate_metric(values, LOSS, epsilon=1.0, noise=noise).value
                         for _ in range(3000)]) - values.mean()
        rms.append(np.sqrt(np.mean(errs**2)))
        bars.append(aggregate_metric(values, LOSS, epsilon=1.0, noise=noise).error_bar)
    # The published bar is exactly proportional to 1/n ...
    np.testing.assert_allclose(np.array(bars) * sizes, bars[0] * sizes[0], rtol=1e-12)
    # ... and so is the realised error: quadrupling n divides it by 4, not by 2.
    # RMS of 3000 Laplace draws has relative SE about sqrt(5/4/3000) = 2%.
    ratios = np.array(rms[:-1]) / np.array(rms[1:])
    assert np.all(np.abs(ratios - 4.0) < 4.0 * 5 * 0.02 * np.sqrt(2)), ratios
    assert np.all(ratios > 3.0)  # a 1/sqrt(n) shape would give 2


def test_aggregation_is_unbiased() -> None:
    rng = np.random.default_rng(11)
    noise = simulation_noise(rng)
    values = _clients(300, rng)
    rounds = 4000
    est = np.array([aggregate_metric(values, LOSS, epsilon=0.3, noise=noise).value
                    for _ in range(rounds)])
    scale = LOSS.sensitivity / 0.3 / values.size
    se = np.sqrt(2) * scale / np.sqrt(rounds)
    assert abs(est.mean() - values.mean()) < 3 * se


def test_histogram_is_unbiased_and_one_release() -> None:
    rng = np.random.default_rng(5)
    hists = rng.dirichlet(np.ones(HIST.n_buckets), size=600)
    truth = hists.mean(axis=0)
    noise = simulation_noise(rng)
    draws = np.array([aggregate_histogram(hists, HIST, epsilon=1.0, noise=noise).values
                      for _ in range(3000)])
    scale = HIST.sensitivity / 1.0 / 600
    se = np.sqrt(2) * scale / np.sqrt(3000)
    assert np.all(np.abs(draws.mean(axis=0) - truth) < 3.5 * se)
    # Per-bucket noise does not depend on the number of buckets (no epsilon split).
    fine = HistogramSpec("fine", edges=tuple(0.5 * i for i in range(1, 20)))
    one_hot = np.zeros((600, fine.n_buckets))
    one_hot[:, 2] = 1.0
    fine_draws = np.array([aggregate_histogram(one_hot, fine, epsilon=1.0, noise=noise).values
                           for _ in range(3000)])
    np.testing.assert_allclose(fine_draws.std(axis=0).mean(), np.sqrt(2) * scale, rtol=0.05)


def test_release_path_takes_no_seed_and_charges_ledger() -> None:
    assert "rng" not in inspect.signature(release_noise).parameters
    ledger = PrivacyLedger(epoch_budget=10.0)
    values = np.full(500, 1.0)
    a = aggregate_metric(values, LOSS, epsilon=0.25, ledger=ledger, epoch=0)
    b = aggregate_metric(values, LOSS, epsilon=0.25, ledger=ledger, epoch=0)
    assert a.value != b.value  # fresh OS entropy each time
    assert ledger.spent(0, "evaluation.global") == pytest.approx(0.5)
    assert len(ledger.audit(0)) == 2


def test_refusals_charge_nothing() -> None:
    ledger = PrivacyLedger(epoch_budget=1.0)
    with pytest.raises(CohortTooSmall, match="cohort of 8 is below the floor of 50"):
        aggregate_metric(np.ones(8), LOSS, epsilon=0.1, ledger=ledger, epoch=0)
    unclipped = np.ones(100)
    unclipped[0] = 1e6
    with pytest.raises(ClippingFailure, match="beyond \\[0, 2.5\\] x cohort"):
        aggregate_metric(unclipped, LOSS, epsilon=0.1, ledger=ledger, epoch=0)
    heavy = np.tile([10.0, 0, 0, 0, 0, 0, 0], (100, 1))
    with pytest.raises(ClippingFailure, match="mass_cap 1 x cohort"):
        aggregate_histogram(heavy, HIST, epsilon=0.1, ledger=ledger, epoch=0)
    cap = ledger.remaining(0, "evaluation.global")
    with pytest.raises(BudgetExceeded, match="evaluation.global"):
        aggregate_metric(np.ones(100), LOSS, epsilon=cap * 2, ledger=ledger, epoch=0)
    assert ledger.spent(0) == 0.0 and len(ledger.audit()) == 0
    with pytest.raises(InvalidInput, match="epsilon=0 must be a positive"):
        aggregate_metric(np.ones(100), LOSS, epsilon=0)
    with pytest.raises(InvalidInput, match="NaN or infinite"):
        aggregate_metric(np.array([np.nan] * 100), LOSS, epsilon=1)
    with pytest.raises(InvalidInput, match="has 7 buckets"):
        aggregate_histogram(np.ones((100, 3)), HIST, epsilon=1)


def test_secure_sum_groups() -> None:
    s = secure_sum(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), [0, 1, 1], 3)
    assert s.sums.tolist() == [[1.0, 0.0], [1.0, 2.0], [0.0, 0.0]]
    assert s.counts.tolist() == [1, 2, 0]
    with pytest.raises(InvalidInput, match="position in 0..1"):
        secure_sum([1.0, 2.0], [0, 2], 2)


def test_seeded_noise_never_reaches_a_charged_release() -> None:
    ledger = PrivacyLedger(epoch_budget=10.0)
    with pytest.raises(InvalidInput, match="take no seed: drop noise= to release"):
        aggregate_metric(np.ones(100), LOSS, epsilon=0.1, ledger=ledger, epoch=0,
                         noise=simulation_noise(1))
    assert ledger.spent(0) == 0.0


def test_laplace_scale_never_undercharges() -> None:
    from decimal import Decimal

    from spatialdp.federated.aggregate import laplace_scale

    for sensitivity, eps in [(10.0, 0.7), (1.0, 0.1), (2.5, 0.3), (19.03, 0.4), (1e-3, 3e-7)]:
        scale = laplace_scale(sensitivity, eps)
        # the real loss sensitivity/scale is at most the epsilon the ledger charges
        assert Decimal(sensitivity) / Decimal(scale) <= Decimal(repr(eps))
        assert scale == pytest.approx(sensitivity / eps, rel=1e-15)
