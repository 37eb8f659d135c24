from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spatialdp.exceptions import InvalidInput, PartitionMismatch
from spatialdp.federated.aggregate import aggregate_metric, simulation_noise
from spatialdp.federated.metrics import MetricSpec
from spatialdp.federated.monitor import (
    compare_releases,
    compare_reports,
    difference_threshold,
    drift,
)
from spatialdp.federated.release import MetricRelease

LOSS = MetricSpec("loss", 0.0, 2.5)


@pytest.mark.parametrize(("a", "b"), [(1.0, 1.0), (1.0, 3.0), (0.2, 5.0)])
def test_difference_threshold_is_exact_quantile(a: float, b: float) -> None:
    rng = np.random.default_rng(7)
    alpha = 0.01
    t = float(difference_threshold(a, b, alpha))
    draws = np.abs(rng.laplace(0, a, 400_000) - rng.laplace(0, b, 400_000))
    rate = (draws > t).mean()
    assert abs(rate - alpha) < 5 * np.sqrt(alpha * (1 - alpha) / draws.size)


def test_false_alarm_rate_equals_alpha() -> None:
    rng = np.random.default_rng(8)
    noise = simulation_noise(rng)
    values = LOSS.clip(rng.gamma(2, 0.3, 200))
    trials = 10_000
    fired = sum(
        compare_releases(aggregate_metric(values, LOSS, epsilon=0.5, noise=noise),
                         aggregate_metric(values, LOSS, epsilon=0.5, noise=noise),
                         alpha=0.02).fired
        for _ in range(trials)
    )
    assert abs(fired / trials - 0.02) < 5 * np.sqrt(0.02 * 0.98 / trials)


def _release(value: float, scale: float, n: int = 100) -> MetricRelease:
    return MetricRelease("loss@1", value, scale * np.log(20), 0.05, scale, n, 0.5, "v1")


@settings(max_examples=200, deadline=None)
@given(
    value=st.floats(0, 2.5), scale_a=st.floats(1e-4, 1.0), scale_b=st.floats(1e-4, 1.0),
    frac=st.floats(-1.0, 1.0),
)
def test_within_bar_movement_never_fires(value: float, scale_a: float, scale_b: float,
                                         frac: float) -> None:
    a = _release(value, scale_a)
    bar = max(a.error_bar, _release(0, scale_b).error_bar)
    b = _release(value + frac * bar, scale_b)
    assert not compare_releases(b, a).fired


def test_beyond_bar_movement_fires() -> None:
    a, b = _release(1.0, 0.01), _release(1.2, 0.01)
    result = compare_releases(b, a)
    assert result.fired and result.difference == pytest.approx(0.2)


def test_compare_refuses_mixed_baselines() -> None:
    a = _release(1.0, 0.01)
    other_partition = MetricRelease("loss@1", 1.0, 0.03, 0.05, 0.01, 100, 0.5, "v2")
    with pytest.raises(PartitionMismatch, match="new partition starts a new comparison"):
        compare_releases(a, other_partition)
    other_spec = MetricRelease("loss@2", 1.0, 0.03, 0.05, 0.01, 100, 0.5, "v1")
    with pytest.raises(PartitionMismatch, match="new spec version starts a new"):
        compare_releases(a, other_spec)
    with pytest.raises(InvalidInput, match=r"alpha=1.5 must lie in \(0, 1\)"):
        difference_threshold(1.0, 1.0, 1.5)


def test_compare_reports_per_region() -> None:
    idx = pd.Index(["a", "b", "c"], name="region_id")
    meta = {"partition_version": "v", "metric": "loss", "metrics": {"loss": "loss@1"}}
    prev = pd.DataFrame({"value": [1.0, 1.0, 1.0], "noise_std": [0.01] * 3,
                         "suppressed": [False, False, True]}, index=idx)
    now = prev.assign(value=[1.0, 1.5, 9.0], suppressed=[False, False, False])
    prev.attrs["spatialdp"] = meta
    now.attrs["spatialdp"] = meta
    out = compare_reports(now, prev)
    assert out.fired.to_dict() == {"a": False, "b": True}
    now.attrs["spatialdp"] = {**meta, "partition_version": "w"}
    with pytest.raises(PartitionMismatch, match="differ in partition_version"):
        compare_reports(now, prev)


def _history(slopes: dict[str, float], rounds: int, rng: np.random.Generator,
             scale: float = 0.02) -> pd.DataFrame:
    regions = np.repeat(list(slopes), rounds)
    r = np.tile(np.arange(rounds), len(slopes))
    slope = np.repeat(list(slopes.values()), rounds)
    return pd.DataFrame({"region_id": regions, "round": r,
                         "value": 1.0 + slope * r + rng.laplace(0, scale, r.size),
                         "noise_std": np.sqrt(2) * scale})


def test_drift_detects_trend_and_controls_false_alarms() -> None:
    rng = np.random.default_rng(9)
    flagged = drift(_history({"steady": 0.0, "sliding": 0.03}, 10, rng), window=8)
    assert flagged.loc["sliding", "drifting"] and not flagged.loc["steady", "drifting"]
    regions = 20_000
    null = _history({f"r{i}": 0.0 for i in range(regions)}, 8, rng)
    rate = drift(null, window=8, alpha=0.01).drifting.mean()
    # exact critical values: the rate is alpha, two-sided within 4 standard errors
    assert abs(rate - 0.01) < 4 * np.sqrt(0.01 * 0.99 / regions), rate
    with pytest.raises(InvalidInput, match="window=2 is too short"):
        drift(null, window=2)
    with pytest.raises(InvalidInput, match="lacks columns \\['noise_std'\\]"):
        drift(null.drop(columns="noise_std"))


def test_fresh_cohorts_need_the_sampling_term() -> None:
    """Rounds that draw new clients from an unchanged population."""
    rng = np.random.default_rng(10)
    population_sd = 0.6
    n, trials, alpha = 2000, 4000, 0.01

    def release() -> MetricRelease:
        values = LOSS.clip(rng.normal(1.0, population_sd, n))
        return aggregate_metric(values, LOSS, epsilon=1.0, noise=simulation_noise(rng))

    pairs = [(release(), release()) for _ in range(trials)]
    sd = float(np.std(LOSS.clip(rng.normal(1.0, population_sd, 10**6))))
    with_term = np.mean([compare_releases(a, b, alpha=alpha, sampling_sd=sd).fired
                         for a, b in pairs])
    without = np.mean([compare_releases(a, b, alpha=alpha).fired for a, b in pairs])
    se = np.sqrt(alpha * (1 - alpha) / trials)
    assert abs(with_term - alpha) < 4 * se, with_term
    assert without > 10 * alpha  # the DP-only null is wrong for fresh cohorts


def test_drift_with_fresh_cohorts() -> None:
    rng = np.random.default_rng(12)
    regions, rounds, n, sd, scale = 4000, 6, 500, 0.5, 0.004
    frame = _history({f"r{i}": 0.0 for i in range(regions)}, rounds, rng, scale=scale)
    frame["value"] += rng.normal(0, sd / np.sqrt(n), len(frame))
    frame["cohort"] = n
    rate = drift(frame, window=rounds, alpha=0.05, sampling_sd=sd).drifting.mean()
    assert abs(rate - 0.05) < 4 * np.sqrt(0.05 * 0.95 / regions), rate
    with pytest.raises(InvalidInput, match="lacks columns \\['cohort'\\]"):
        drift(frame.drop(columns="cohort"), sampling_sd=sd)


def test_vectorised_threshold_matches_exact_inversion() -> None:
    """The per-region bisection (closed form + quadrature) equals the Gil-Pelaez quantile."""
    from spatialdp.federated.monitor import noise_sum_quantile

    cases = [(1.0, 1.0, 0.0), (1.0, 3.0, 0.0), (0.2, 5.0, 0.5), (0.01, 0.02, 0.3),
             (2.0, 0.5, 3.0), (1.0, 1.0, 2.0), (0.3, 0.3, 0.1)]
    a, b, s = (np.array(col) for col in zip(*cases, strict=True))
    fast = difference_threshold(a, b, 0.01, s)
    exact = np.array([noise_sum_quantile([x, y], z, 0.01) for x, y, z in cases])
    np.testing.assert_allclose(fast, exact, rtol=1e-5)
