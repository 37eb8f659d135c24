"""Secure sum then noise once: error bars, 1/n shape, unbiasedness, one release order."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from spatialdp.exceptions import (
    BudgetExceeded,
    ClippingFailure,
    CohortTooSmall,
    InvalidInput,
    InvalidSpec,
)
from spatialdp.federated import (
    HistogramSpec,
    MetricSpec,
    UninformativeReleaseWarning,
    aggregate_histogram,
    aggregate_metric,
    device_report,
    secure_sum,
)
from spatialdp.federated.group_sums import Groups
from spatialdp.privacy.ledger import PrivacyLedger
from spatialdp.privacy.target import ReleaseTarget, Simulation, Unaccounted
from tests._clients import histogram_columns, tagged

LOSS = MetricSpec("loss", 0.0, 2.5)
HIST = HistogramSpec("abs_error_m", edges=(0.5, 1, 2, 5, 10, 25))
Z6 = 4.89  # two-sided normal quantile at alpha = 1e-6


def _clients(n: int, rng: np.random.Generator) -> pd.DataFrame:
    return tagged({"loss": LOSS.clip(rng.gamma(2.0, 0.3, n))}, [LOSS])


def test_error_bar_shrinks_as_one_over_n_not_root_n() -> None:
    rng = np.random.default_rng(3)
    sim = Simulation(rng)
    sizes = [100, 400, 1600]
    draws = 2000
    bars, rms = [], []
    for n in sizes:
        clients = _clients(n, rng)
        errs = np.array([aggregate_metric(clients, LOSS, epsilon=1.0, target=sim).value
                         for _ in range(draws)]) - clients.loss.mean()
        rms.append(np.sqrt(np.mean(errs**2)))
        bars.append(aggregate_metric(clients, LOSS, epsilon=1.0, target=sim).error_bar)
    # The published bar is exactly proportional to 1/n ...
    np.testing.assert_allclose(np.array(bars) * sizes, bars[0] * sizes[0], rtol=1e-12)
    # ... and so is the realised error: quadrupling n divides it by 4, not by 2.
    # The RMS of Laplace draws has relative SE sqrt((kurtosis - 1) / 4 / draws) =
    # sqrt(5 / 4 / draws); a ratio of two has sqrt(2) times that.
    se = 4.0 * np.sqrt(2 * 5 / 4 / draws)
    ratios = np.array(rms[:-1]) / np.array(rms[1:])
    assert np.all(np.abs(ratios - 4.0) < Z6 * se), ratios
    assert np.all(ratios > 3.0)  # a 1/sqrt(n) shape would give 2


def test_aggregation_is_unbiased() -> None:
    rng = np.random.default_rng(11)
    sim = Simulation(rng)
    clients = _clients(300, rng)
    rounds = 4000
    est = np.array([aggregate_metric(clients, LOSS, epsilon=0.3, target=sim).value
                    for _ in range(rounds)])
    scale = LOSS.sensitivity / 0.3 / len(clients)
    se = np.sqrt(2) * scale / np.sqrt(rounds)
    assert abs(est.mean() - clients.loss.mean()) < Z6 * se


def test_histogram_is_unbiased_and_one_release() -> None:
    rng = np.random.default_rng(5)
    hists = rng.dirichlet(np.ones(HIST.n_buckets), size=600)
    clients = tagged(histogram_columns(HIST, hists), [HIST])
    sim = Simulation(rng)
    draws = np.array([aggregate_histogram(clients, HIST, epsilon=1.0, target=sim).values
                      for _ in range(3000)])
    scale = HIST.sensitivity / 1.0 / 600
    se = np.sqrt(2) * scale / np.sqrt(3000)
    assert np.all(np.abs(draws.mean(axis=0) - hists.mean(axis=0)) < Z6 * se)
    # Per-bucket noise does not depend on the number of buckets (no epsilon split):
    # the sd of 3000 Laplace draws has relative SE sqrt(5/4/3000) = 2%.
    fine = HistogramSpec("fine", edges=tuple(0.5 * i for i in range(1, 20)))
    one_hot = np.zeros((600, fine.n_buckets))
    one_hot[:, 2] = 1.0
    fine_clients = tagged(histogram_columns(fine, one_hot), [fine])
    fine_draws = np.array([aggregate_histogram(fine_clients, fine, epsilon=1.0, target=sim).values
                           for _ in range(3000)])
    sd = fine_draws.std(axis=0)
    assert np.all(np.abs(sd / (np.sqrt(2) * scale) - 1) < Z6 * np.sqrt(5 / 4 / 3000))


def test_release_charges_the_ledger_and_draws_fresh_entropy() -> None:
    ledger = PrivacyLedger(epoch_budget=10.0)
    clients = tagged({"loss": np.full(500, 1.0)}, [LOSS])
    target = ReleaseTarget(ledger, 0, why="test")
    a = aggregate_metric(clients, LOSS, epsilon=0.25, target=target)
    b = aggregate_metric(clients, LOSS, epsilon=0.25, target=target)
    assert a.value != b.value  # fresh OS entropy each time
    assert ledger.spent(0, "evaluation.global") == pytest.approx(0.5)
    assert len(ledger.audit(0)) == 2
    assert a.accounting["accounting"] == "ledger"
    assert not a.simulated
    ledger.close()


def test_accounting_is_never_optional() -> None:
    clients = _clients(100, np.random.default_rng(0))
    with pytest.raises(TypeError, match="target"):
        aggregate_metric(clients, LOSS, epsilon=0.1)  # type: ignore[call-arg]
    with pytest.raises(InvalidInput, match="target=None is not a release target"):
        aggregate_metric(clients, LOSS, epsilon=0.1, target=None)
    with pytest.raises(InvalidInput, match="target=.* is not a release target"):
        aggregate_metric(clients, LOSS, epsilon=0.1, target=lambda v, s: v)
    with pytest.raises(InvalidInput, match="ledger=None is not a PrivacyLedger"):
        ReleaseTarget(None, 0)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="reason='' is empty"):
        Unaccounted("")
    # The two opt-outs are visible on the result.
    sim = aggregate_metric(clients, LOSS, epsilon=0.1, target=Simulation(rng=0))
    assert sim.simulated
    assert "SIMULATION" in sim.summary()
    free = aggregate_metric(clients, LOSS, epsilon=0.1, target=Unaccounted("synthetic data"))
    assert not free.simulated
    assert "UNACCOUNTED: synthetic data" in free.summary()
    assert free.accounting == {"accounting": "unaccounted", "simulated": False,
                               "reason": "synthetic data", "round_index": None}


def _refusals(ledger: PrivacyLedger) -> list[tuple[type[Exception], str, object]]:
    target = ReleaseTarget(ledger, 0)
    ok = _clients(100, np.random.default_rng(1))
    unclipped = ok.copy()
    unclipped.iloc[0, 0] = 1e6
    heavy = tagged(histogram_columns(HIST, np.tile([10.0, 0, 0, 0, 0, 0, 0], (100, 1))), [HIST])
    cap = ledger.remaining(0, "evaluation.global")
    call = aggregate_metric
    return [
        (CohortTooSmall, "cohort=8 is below the floor min_cohort=50",
         lambda: call(_clients(8, np.random.default_rng(2)), LOSS, epsilon=0.1, target=target)),
        (ClippingFailure, "beyond \\[0, 2.5\\] x cohort",
         lambda: call(unclipped, LOSS, epsilon=0.1, target=target)),
        (ClippingFailure, "mass_cap 1 x cohort",
         lambda: aggregate_histogram(heavy, HIST, epsilon=0.1, target=target)),
        (BudgetExceeded, "evaluation.global",
         lambda: call(ok, LOSS, epsilon=cap * 2, target=target)),
        (InvalidInput, "epsilon=0 is below the limit > 0",
         lambda: call(ok, LOSS, epsilon=0, target=target)),
        (InvalidInput, "epsilon=True is a bool",
         lambda: call(ok, LOSS, epsilon=True, target=target)),
        (InvalidInput, "epsilon='0.1' is a string",
         lambda: call(ok, LOSS, epsilon="0.1", target=target)),
        (InvalidInput, "alpha=1.5 is above the limit < 1",
         lambda: call(ok, LOSS, epsilon=0.1, alpha=1.5, target=target)),
        (InvalidInput, "alpha=0 is below the limit >= 1e-15",
         lambda: call(ok, LOSS, epsilon=0.1, alpha=0, target=target)),
        (InvalidInput, "min_cohort=nan is not finite",
         lambda: call(ok, LOSS, epsilon=0.1, min_cohort=float("nan"), target=target)),
        (InvalidInput, "min_cohort=0 is below the limit >= 1",
         lambda: call(ok, LOSS, epsilon=0.1, min_cohort=0, target=target)),
        (InvalidInput, "min_cohort=-5 is below the limit >= 1",
         lambda: call(ok, LOSS, epsilon=0.1, min_cohort=-5, target=target)),
        (InvalidInput, "NaN or infinite",
         lambda: call(ok.assign(loss=np.nan), LOSS, epsilon=0.1, target=target)),
        (InvalidInput, "clipped under no spec for 'abs_error_m'",
         lambda: aggregate_histogram(ok, HIST, epsilon=0.1, target=target)),
        (InvalidInput, "lack columns \\['loss'\\]",
         lambda: call(ok.drop(columns="loss"), LOSS, epsilon=0.1, target=target)),
        (InvalidInput, "repeated value",
         lambda: call(pd.concat([ok, ok]), LOSS, epsilon=0.1, target=target)),
        (InvalidInput, "carry no device_specs",
         lambda: call(ok.drop(columns="device_specs"), LOSS, epsilon=0.1, target=target)),
        (InvalidInput, "no client_id",
         lambda: call(ok.reset_index(drop=True), LOSS, epsilon=0.1, target=target)),
        (InvalidInput, "clipped under another spec",
         lambda: call(ok, MetricSpec("loss", 0.0, 19.0), epsilon=0.1, target=target)),
        (InvalidInput, "is not a MetricSpec",
         lambda: call(ok, HIST, epsilon=0.1, target=target)),
    ]


def test_every_refusal_charges_nothing() -> None:
    ledger = PrivacyLedger(epoch_budget=1.0)
    for error, message, release in _refusals(ledger):
        with pytest.raises(error, match=message):
            release()
    assert ledger.spent(0) == 0.0
    assert len(ledger.audit()) == 0
    ledger.close()


def test_infinite_sensitivity_is_refused_at_the_spec() -> None:
    with pytest.raises(InvalidSpec, match="sensitivity"):
        MetricSpec("m", -1e308, 1e308)


def test_device_clip_bounds_bind_the_release() -> None:
    # Devices clipped to [0, 100]; releasing under a [0, 19] spec would undercharge 5x.
    wide = MetricSpec("loss", 0.0, 100.0)
    examples = pd.DataFrame({"client_id": np.arange(400), "loss": np.linspace(0, 100, 400)})
    clients = device_report(examples, loss_spec=wide)
    narrow = MetricSpec("loss", 0.0, 19.0)
    with pytest.raises(InvalidInput, match="400 client reports were clipped under another spec"):
        aggregate_metric(clients, narrow, epsilon=0.4, target=Simulation(0))
    # A report produced under no spec for this metric is refused too.
    with pytest.raises(InvalidInput, match="clipped under no spec for 'ratio'"):
        aggregate_metric(clients.assign(ratio=1.0), MetricSpec("ratio", 0, 10), epsilon=0.4,
                         target=Simulation(0))
    assert aggregate_metric(clients, wide, epsilon=0.4, target=Simulation(0)).cohort == 400


def test_uninformative_epsilon_warns_before_charging() -> None:
    ledger = PrivacyLedger(epoch_budget=10.0)
    clients = _clients(100, np.random.default_rng(4))
    target = ReleaseTarget(ledger, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UninformativeReleaseWarning)
        with pytest.raises(UninformativeReleaseWarning, match="exceeds the whole clip range"):
            aggregate_metric(clients, LOSS, epsilon=0.001, target=target)
    assert ledger.spent(0) == 0.0  # the warning came before the charge
    with pytest.warns(UninformativeReleaseWarning, match="bounded"):
        rel = aggregate_metric(clients, LOSS, epsilon=0.001, target=target)
    shown = rel.bounded_display()
    assert LOSS.clip_low <= shown.value <= LOSS.clip_high
    assert shown.bounded
    assert "clamped for display, biased" in shown.summary()
    ledger.close()


def test_conf_int_is_exact_for_any_alpha() -> None:
    rng = np.random.default_rng(8)
    clients = _clients(400, rng)
    truth = clients.loss.mean()
    sim = Simulation(rng)
    draws = 4000
    for alpha in (0.01, 0.2):
        hits = np.mean([
            (lambda ci: ci[0] <= truth <= ci[1])(
                aggregate_metric(clients, LOSS, epsilon=0.5, target=sim).conf_int(alpha))
            for _ in range(draws)])
        assert abs(hits - (1 - alpha)) < Z6 * np.sqrt(alpha * (1 - alpha) / draws), (alpha, hits)


def test_secure_sum_groups() -> None:
    s = secure_sum(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), [0, 1, 1], 3)
    assert s.sums.tolist() == [[1.0, 0.0], [1.0, 2.0], [0.0, 0.0]]
    assert s.counts.tolist() == [1, 2, 0]
    with pytest.raises(InvalidInput, match="position in 0..1"):
        secure_sum([1.0, 2.0], [0, 2], 2)


@pytest.mark.parametrize(("n_groups", "skew", "lanes"),
                         [(2, 5.0, 8), (48, 1.2, 8), (200, 50.0, 1), (9000, 1.2, 1)])
@pytest.mark.parametrize("order", ["C", "F"])
def test_group_sums_equal_bincount_with_and_without_lanes(n_groups: int, skew: float,
                                                          lanes: int, order: str) -> None:
    # Skewed fleets take interleaved accumulators (lanes), flat ones and many groups
    # do not; every layout, index width and path must give numpy's per-group sums.
    rng = np.random.default_rng(n_groups)
    weights = rng.pareto(skew, n_groups) + 0.01
    positions = rng.choice(n_groups, size=20_011, p=weights / weights.sum())
    values = np.asarray(rng.normal(size=(positions.size, 3)), order=order)
    for index in (positions.astype(np.int32), positions.astype(np.int64)):
        groups = Groups(index, n_groups)
        sums = groups.sum(values)
        reference = np.stack([np.bincount(positions, weights=values[:, k], minlength=n_groups)
                              for k in range(3)], axis=1)
        np.testing.assert_allclose(sums, reference, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(groups.sum(values[:, 1]), reference[:, 1],
                                   rtol=1e-12, atol=1e-9)
        assert groups.counts.tolist() == np.bincount(positions, minlength=n_groups).tolist()
        assert groups._lanes == lanes  # both summing paths are exercised


def test_ratio_below_floor_after_noise_is_published_as_suppressed_and_charged() -> None:
    # 200 clients, 3 have the metric: the noised count of those is far below the floor
    spec = MetricSpec("ratio", 0.0, 10.0, present="track_present")
    present = np.zeros(200)
    present[:3] = 1.0
    clients = tagged({"ratio": present * 2.0, "track_present": present}, [spec])
    with PrivacyLedger(":memory:", epoch_budget=100.0) as ledger:
        target = ReleaseTarget(ledger, epoch=0, why="test")
        # No warning: the count of clients with the metric is private; from the public
        # cohort (200) the predicted bar is informative.
        release = aggregate_metric(clients, spec, epsilon=1.0, min_cohort=50, target=target)
        assert ledger.spent(0) == pytest.approx(1.0)  # the noise was drawn: it is charged
    assert release.suppressed
    assert release.cohort == 0
    assert np.isnan(release.value)
    assert np.isnan(release.error_bar)
    assert all(np.isnan(release.conf_int(alpha=0.1)))
