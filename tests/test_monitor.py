from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spatialdp.exceptions import InvalidInput, PartitionMismatch
from spatialdp.federated.aggregate import aggregate_metric
from spatialdp.federated.metrics import MetricSpec
from spatialdp.federated.monitor import (
    compare_releases,
    compare_reports,
    drift,
    latest_baseline,
)
from spatialdp.federated.release import MetricRelease
from spatialdp.privacy.combined_noise import difference_threshold
from spatialdp.privacy.target import Simulation
from tests._clients import tagged

LOSS = MetricSpec("loss", 0.0, 2.5)
Z6 = 4.89  # two-sided normal quantile at alpha = 1e-6


@pytest.mark.parametrize(("a", "b"), [(1.0, 1.0), (1.0, 3.0), (0.2, 5.0)])
def test_difference_threshold_is_exact_quantile(a: float, b: float) -> None:
    rng = np.random.default_rng(7)
    alpha = 0.01
    t = float(difference_threshold(a, b, alpha))
    draws = np.abs(rng.laplace(0, a, 400_000) - rng.laplace(0, b, 400_000))
    rate = (draws > t).mean()
    assert abs(rate - alpha) < Z6 * np.sqrt(alpha * (1 - alpha) / draws.size)


def _release(value: float, scale: float, n: int = 100, *, metric: str = "loss@1",
             partition: str = "v1") -> MetricRelease:
    return MetricRelease(metric=metric, value=value, error_bar=scale * np.log(20), alpha=0.05,
                         noise_scale=scale, cohort=n, epsilon=0.5, clip_low=LOSS.clip_low,
                         clip_high=LOSS.clip_high, partition_version=partition)


def test_false_alarm_rate_equals_alpha_for_the_same_clients() -> None:
    rng = np.random.default_rng(8)
    sim = Simulation(rng)
    clients = tagged({"loss": LOSS.clip(rng.gamma(2, 0.3, 200))}, [LOSS])
    trials = 4000
    fired = sum(
        compare_releases(aggregate_metric(clients, LOSS, epsilon=0.5, target=sim),
                         aggregate_metric(clients, LOSS, epsilon=0.5, target=sim),
                         alpha=0.02, same_clients=True).fired
        for _ in range(trials)
    )
    assert abs(fired / trials - 0.02) < Z6 * np.sqrt(0.02 * 0.98 / trials)


@settings(max_examples=200, deadline=None)
@given(
    value=st.floats(0, 2.5), scale_a=st.floats(1e-4, 1.0), scale_b=st.floats(1e-4, 1.0),
    frac=st.floats(-1.0, 1.0), same=st.booleans(),
)
def test_within_bar_movement_never_fires(value: float, scale_a: float, scale_b: float,
                                         frac: float, same: bool) -> None:
    a = _release(value, scale_a)
    bar = max(a.error_bar, _release(0, scale_b).error_bar)
    b = _release(value + frac * bar, scale_b)
    assert not compare_releases(b, a, same_clients=same).fired


def test_beyond_bar_movement_fires() -> None:
    a, b = _release(1.0, 0.01), _release(1.2, 0.01)
    result = compare_releases(b, a, same_clients=True)
    assert result.fired
    assert result.difference == pytest.approx(0.2)
    # With fresh cohorts of 100 the sampling error alone is about 0.18: no alarm.
    assert not compare_releases(b, a)
    assert compare_releases(_release(1.6, 0.01), a)


def test_compare_refuses_mixed_baselines() -> None:
    a = _release(1.0, 0.01)
    with pytest.raises(PartitionMismatch, match="new partition starts a new comparison"):
        compare_releases(a, _release(1.0, 0.01, partition="v2"))
    with pytest.raises(PartitionMismatch, match="new spec version starts a new"):
        compare_releases(a, _release(1.0, 0.01, metric="loss@2"))
    with pytest.raises(InvalidInput, match=r"alpha=1.5"):
        difference_threshold(1.0, 1.0, 1.5)
    with pytest.raises(InvalidInput, match="alpha=0 is below"):
        compare_releases(a, a, alpha=0)
    with pytest.raises(InvalidInput, match="contradict each other"):
        compare_releases(a, a, sampling_sd=0.3, same_clients=True)
    with pytest.raises(InvalidInput, match="sampling_sd=-1 is below"):
        compare_releases(a, a, sampling_sd=-1)


def _frame(values: list[float], suppressed: list[bool], *, partition: str = "v") -> pd.DataFrame:
    idx = pd.Index(["a", "b", "c"], name="region_id")
    return pd.DataFrame({"value": values, "noise_std": [0.01] * 3, "cohort": [10_000] * 3,
                         "suppressed": suppressed, "clip_low": 0.0, "clip_high": 2.5,
                         "estimator": "mean", "metric": "loss@1",
                         "partition_version": partition}, index=idx)


def test_compare_reports_per_region() -> None:
    prev = _frame([1.0, 1.0, 1.0], [False, False, True])
    now = _frame([1.0, 1.5, 9.0], [False, False, False])
    out = compare_reports(now, prev)
    assert out.fired.to_dict() == {"a": False, "b": True}
    with pytest.raises(PartitionMismatch, match="differ in partition_version"):
        compare_reports(_frame([1.0] * 3, [False] * 3, partition="w"), prev)
    with pytest.raises(InvalidInput, match=r"the ratio-estimate frame lacks \['count_scale'"):
        compare_reports(now.assign(estimator="ratio"), prev)
    with pytest.raises(InvalidInput, match="expected a regional report frame"):
        compare_reports(now.drop(columns="metric"), prev)


def _history(slopes: dict[str, float], rounds: int, rng: np.random.Generator,
             scale: float = 0.02, cohort: int = 10**9) -> pd.DataFrame:
    regions = np.repeat(list(slopes), rounds)
    r = np.tile(np.arange(rounds), len(slopes))
    slope = np.repeat(list(slopes.values()), rounds)
    return pd.DataFrame({"region_id": regions, "round_index": r,
                         "value": 1.0 + slope * r + rng.laplace(0, scale, r.size),
                         "noise_std": np.sqrt(2) * scale, "cohort": cohort,
                         "clip_low": 0.0, "clip_high": 2.5, "metric": "loss@1",
                         "partition_version": "v"})


def test_drift_detects_trend_and_controls_false_alarms() -> None:
    rng = np.random.default_rng(9)
    flagged = drift(_history({"steady": 0.0, "sliding": 0.03}, 10, rng), window=8,
                    same_clients=True)
    assert flagged.loc["sliding", "drifting"]
    assert not flagged.loc["steady", "drifting"]
    regions = 20_000
    null = _history({f"r{i}": 0.0 for i in range(regions)}, 8, rng)
    rate = drift(null, window=8, alpha=0.01, same_clients=True).drifting.mean()
    # exact critical values: the rate is alpha (two-sided test at alpha = 1e-6)
    assert abs(rate - 0.01) < Z6 * np.sqrt(0.01 * 0.99 / regions), rate
    with pytest.raises(InvalidInput, match="window=2 is below the limit >= 3"):
        drift(null, window=2)
    with pytest.raises(InvalidInput, match="lacks columns \\['noise_std'\\]"):
        drift(null.drop(columns="noise_std"))


def test_a_new_partition_or_spec_starts_a_new_baseline() -> None:
    rng = np.random.default_rng(13)
    old = _history({"a": 0.0}, 6, rng)
    new = _history({"a": 0.0}, 4, rng).assign(partition_version="w")
    new["round_index"] += 6
    new["value"] += 1.0  # a step that the old baseline would read as drift
    both = pd.concat([old, new], ignore_index=True)
    assert len(latest_baseline(both)) == 4
    out = drift(both, window=8, same_clients=True)
    assert out.loc["a", "rounds"] == 4
    assert not out.loc["a", "drifting"]
    spec_change = pd.concat([old, new.assign(partition_version="v", metric="loss@2")])
    assert drift(spec_change, window=8, same_clients=True).loc["a", "rounds"] == 4


def _fresh_rounds(rng: np.random.Generator, trials: int, n: int, sd: float, scale: float
                  ) -> list[MetricRelease]:
    """Releases of fresh cohorts of n from an unchanged population with spread sd."""
    means = 1.0 + rng.normal(0, sd / np.sqrt(n), trials) + rng.laplace(0, scale, trials)
    return [_release(float(v), scale, n) for v in means]


def test_the_default_null_is_valid_for_fresh_cohorts() -> None:
    """Rounds that draw new clients from an unchanged population (the seeds' normal mode)."""
    rng = np.random.default_rng(10)
    n, trials, alpha, sd, scale = 2000, 20_000, 0.01, 0.6, 0.002
    a = _fresh_rounds(rng, trials, n, sd, scale)
    b = _fresh_rounds(rng, trials, n, sd, scale)
    se = np.sqrt(alpha * (1 - alpha) / trials)
    pairs = list(zip(a, b, strict=True))
    default = np.mean([compare_releases(x, y, alpha=alpha).fired for x, y in pairs])
    known = np.mean([compare_releases(x, y, alpha=alpha, sampling_sd=sd).fired
                     for x, y in zip(a, b, strict=True)])
    panel = np.mean([compare_releases(x, y, alpha=alpha, same_clients=True).fired
                     for x, y in zip(a, b, strict=True)])
    assert default <= alpha + Z6 * se, default  # conservative: the bound (high - low) / 2
    assert abs(known - alpha) < Z6 * se, known  # exact with the true spread
    assert panel > 10 * alpha  # the same-clients null is wrong for fresh cohorts


def test_drift_with_fresh_cohorts() -> None:
    rng = np.random.default_rng(12)
    regions, rounds, n, sd, scale = 4000, 6, 500, 0.5, 0.004
    frame = _history({f"r{i}": 0.0 for i in range(regions)}, rounds, rng, scale=scale,
                     cohort=n)
    frame["value"] += rng.normal(0, sd / np.sqrt(n), len(frame))
    rate = drift(frame, window=rounds, alpha=0.05, sampling_sd=sd).drifting.mean()
    assert abs(rate - 0.05) < Z6 * np.sqrt(0.05 * 0.95 / regions), rate
    conservative = drift(frame, window=rounds, alpha=0.05).drifting.mean()
    assert conservative <= 0.05 + Z6 * np.sqrt(0.05 * 0.95 / regions)


def test_vectorised_threshold_matches_exact_inversion() -> None:
    """The per-region bisection (closed form + quadrature) equals the Gil-Pelaez quantile."""
    from spatialdp.privacy.combined_noise import noise_sum_quantile

    cases = [(1.0, 1.0, 0.0), (1.0, 3.0, 0.0), (0.2, 5.0, 0.5), (0.01, 0.02, 0.3),
             (2.0, 0.5, 3.0), (1.0, 1.0, 2.0), (0.3, 0.3, 0.1)]
    a, b, s = (np.array(col) for col in zip(*cases, strict=True))
    fast = difference_threshold(a, b, 0.01, s)
    exact = np.array([noise_sum_quantile([x, y], z, 0.01) for x, y, z in cases])
    np.testing.assert_allclose(fast, exact, rtol=1e-5)
