"""Tests of spatialdp.privacy.cadence (cost and detection latency of a publishing cadence)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from spatialdp.exceptions import InvalidInput
from spatialdp.privacy.cadence import (
    cadence_table,
    detection_probability,
    half_width_for_spend,
    plan_cadence,
    spend_for_half_width,
)

BASE = {"sensitivity": 1.0, "cohort": 500, "rounds_per_epoch": 24}


def test_laplace_half_width_is_b_ln_one_over_alpha_on_the_mean() -> None:
    h = half_width_for_spend(sensitivity=2.0, cohort=400, spend=0.5, alpha=0.05)
    b = 2.0 / 0.5 / 400  # b = sensitivity / epsilon, divided by n for the mean
    assert h == pytest.approx(b * math.log(20))
    # error on the mean shrinks as 1/n, not 1/sqrt(n)
    assert half_width_for_spend(sensitivity=2.0, cohort=800, spend=0.5) == pytest.approx(h / 2)


def test_gaussian_half_width_uses_rho() -> None:
    h = half_width_for_spend(sensitivity=1.0, cohort=100, spend=0.125, mechanism="gaussian")
    sigma = 1.0 / (100 * math.sqrt(2 * 0.125))
    assert h == pytest.approx(norm.ppf(0.975) * sigma)


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_epsilon_and_half_width_are_inverse(mechanism: str) -> None:
    eps = spend_for_half_width(sensitivity=1.0, cohort=300, half_width=0.02, mechanism=mechanism)
    h = half_width_for_spend(sensitivity=1.0, cohort=300, spend=eps, mechanism=mechanism)
    assert h == pytest.approx(0.02)


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
@pytest.mark.parametrize("ratio", [0.0, 0.5, 1.0, 2.0])
def test_detection_probability_matches_simulation(mechanism: str, ratio: float) -> None:
    rng = np.random.default_rng(7)
    h, alpha = 0.05, 0.05
    if mechanism == "laplace":
        noise = rng.laplace(0.0, h / math.log(1 / alpha), 200_000)
    else:
        noise = rng.normal(0.0, h / norm.ppf(1 - alpha / 2), 200_000)
    simulated = float(np.mean(np.abs(ratio * h + noise) > h))
    p = detection_probability(ratio * h, h, alpha=alpha, mechanism=mechanism)
    assert p == pytest.approx(simulated, abs=0.005)
    if ratio == 0.0:
        assert p == pytest.approx(alpha)  # no shift: the false-alarm rate


def test_cost_per_epoch_adds_up_releases() -> None:
    p = plan_cadence(every=5, shift=0.1, half_width=0.05, **BASE)
    assert p.releases_per_epoch == 5  # rounds 0, 5, 10, 15, 20 of 24
    assert p.spend_per_epoch == pytest.approx(5 * p.spend_per_release)
    assert p.unit == "epsilon"


def test_fixed_budget_mode_spreads_the_budget_over_releases() -> None:
    p = plan_cadence(every=2, shift=0.1, epoch_budget=1.2, **BASE)
    assert p.spend_per_release == pytest.approx(0.1)
    bar = half_width_for_spend(sensitivity=1.0, cohort=500, spend=0.1)
    assert p.half_width == pytest.approx(bar)


@pytest.mark.parametrize("latency_alpha", [0.05, 0.01])
def test_latency_formulas_match_simulation(latency_alpha: float) -> None:
    k, p_hat = 4, 0.3
    h = 0.05  # find the shift with detection probability p_hat by bisection
    lo, hi = 0.0, 10 * h
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if detection_probability(mid, h) < p_hat else (lo, mid)
    plan = plan_cadence(every=k, shift=lo, half_width=h, latency_alpha=latency_alpha, **BASE)
    assert plan.detection_probability == pytest.approx(p_hat, abs=1e-9)
    rng = np.random.default_rng(3)
    wait = rng.integers(0, k, 100_000)  # rounds until the next release
    misses = rng.geometric(p_hat, 100_000) - 1
    latency = wait + k * misses
    assert plan.expected_latency_rounds == pytest.approx(latency.mean(), rel=0.02)
    worst_case = latency[wait == k - 1]
    # the worst case is exceeded with probability at most latency_alpha, one release less more often
    assert np.mean(worst_case <= plan.worst_latency_rounds) >= 1 - latency_alpha
    assert np.mean(worst_case <= plan.worst_latency_rounds - k) < 1 - latency_alpha


def test_certain_detection_latency_is_the_wait_for_the_next_release() -> None:
    p = plan_cadence(every=6, shift=1.0, half_width=0.01, **BASE)
    assert p.detection_probability == 1.0
    assert (p.expected_latency_rounds, p.worst_latency_rounds) == (2.5, 5.0)


def test_fixed_precision_every_fourth_round_costs_a_quarter() -> None:
    """The true half of the seed's Step 4 claim: same precision, a quarter of the releases."""
    t = cadence_table([1, 4], shift=0.1, half_width=0.05, **BASE)
    assert t.loc[4, "spend_per_epoch"] == pytest.approx(t.loc[1, "spend_per_epoch"] / 4)
    assert t.loc[4, "half_width"] == t.loc[1, "half_width"]


def test_at_equal_spend_laplace_cadence_beats_quarter_precision_for_bar_sized_shifts() -> None:
    """The seed says every 4th round at full precision detects 'about as fast' as every round
    at a quarter of the precision. At equal epsilon per epoch (pure DP, Laplace) the per-round
    bar is 4x wider; for a regression twice the full-precision bar the 4-round cadence is
    several times faster, and every round only wins for shifts beyond ~4x the bar."""
    h4 = plan_cadence(every=4, shift=0.0, epoch_budget=1.0, **BASE).half_width
    t = cadence_table([1, 4], shift=2 * h4, epoch_budget=1.0, **BASE)
    assert t.loc[1, "spend_per_epoch"] == pytest.approx(t.loc[4, "spend_per_epoch"])
    assert t.loc[1, "half_width"] == pytest.approx(4 * h4)
    assert t.loc[4, "expected_latency_rounds"] * 4 < t.loc[1, "expected_latency_rounds"]
    assert t.loc[1, "false_alarms_per_epoch"] == pytest.approx(
        4 * t.loc[4, "false_alarms_per_epoch"]
    )
    big = cadence_table([1, 4], shift=8 * h4, epoch_budget=1.0, **BASE)
    assert big.loc[1, "expected_latency_rounds"] < big.loc[4, "expected_latency_rounds"]


def test_at_equal_spend_zcdp_quarter_rho_only_doubles_the_bar() -> None:
    """Under zCDP (Gaussian) a quarter of the rho widens the bar by sqrt(4) = 2, not 4, so
    publishing every round is about as fast at the full bar and faster above it."""
    kw = {**BASE, "epoch_budget": 0.5, "mechanism": "gaussian"}
    h4 = plan_cadence(every=4, shift=0.0, **kw).half_width
    t = cadence_table([1, 4], shift=h4, **kw)
    assert t.loc[1, "half_width"] == pytest.approx(2 * h4)
    e1, e4 = t.loc[1, "expected_latency_rounds"], t.loc[4, "expected_latency_rounds"]
    assert abs(e1 - e4) < 1.0
    t2 = cadence_table([1, 4], shift=2 * h4, **kw)
    assert t2.loc[1, "expected_latency_rounds"] < t2.loc[4, "expected_latency_rounds"]


def test_cadence_table_is_indexed_by_cadence() -> None:
    t = cadence_table([1, 2, 4, 8], shift=0.05, epoch_budget=1.0, **BASE)
    assert list(t.index) == [1, 2, 4, 8]
    assert {
        "spend_per_release",
        "spend_per_epoch",
        "half_width",
        "detection_probability",
        "expected_latency_rounds",
        "worst_latency_rounds",
    } <= set(t.columns)
    assert np.allclose(t["spend_per_epoch"], 1.0)


def test_no_shift_only_false_alarms_fire() -> None:
    p = plan_cadence(every=2, shift=0.0, half_width=0.05, alpha=0.05, **BASE)
    assert p.detection_probability == pytest.approx(0.05)
    assert p.expected_latency_rounds == pytest.approx(0.5 + 2 * 0.95 / 0.05)


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"half_width": 0.05, "epoch_budget": 1.0}, "pass exactly one"),
        ({}, "pass exactly one"),
        ({"half_width": 0.05, "every": 0}, "every=0 is below the limit >= 1; pass a whole"),
        ({"half_width": 0.05, "every": 2.5}, "every=2.5 is not a whole number"),
        ({"half_width": 0.05, "every": True}, "every=True is a bool, not a number"),
        ({"half_width": 0.05, "alpha": 1.5}, r"alpha=1.5 is above the limit < 1; pass a level"),
        ({"half_width": -1.0}, r"half_width=-1.0 is below the limit > 0"),
        ({"half_width": "0.05"}, r"half_width='0.05' is a string, not a number"),
        ({"half_width": math.inf}, r"half_width=inf is not finite"),
        ({"epoch_budget": math.nan}, r"epoch_budget=nan is not finite"),
        ({"half_width": 0.05, "shift": math.nan}, r"shift=nan is not finite"),
        ({"half_width": 0.05, "latency_alpha": 0.0}, r"latency_alpha=0.0 is below the limit"),
        ({"half_width": 0.05, "mechanism": "exponential"}, "mechanism='exponential' is not one"),
        ({"half_width": 0.05, "cohort": 0}, "cohort=0 is below the limit >= 1"),
        ({"half_width": 0.05, "sensitivity": np.float64(-1)}, "sensitivity=.*below the limit"),
    ],
)
def test_invalid_plans_are_refused(kwargs: dict[str, object], pattern: str) -> None:
    args: dict[str, object] = {"every": 4, "shift": 0.1, **BASE, **kwargs}
    with pytest.raises(InvalidInput, match=pattern):
        plan_cadence(**args)


def test_numpy_scalars_are_accepted_like_python_numbers() -> None:
    plain = plan_cadence(every=4, shift=0.1, half_width=0.05, **BASE)
    numpy = plan_cadence(every=np.int64(4), shift=np.float32(0.1), half_width=np.float64(0.05),
                         sensitivity=np.float64(1.0), cohort=np.int32(500),
                         rounds_per_epoch=np.int64(24), alpha=np.float64(0.05))
    assert numpy.spend_per_epoch == pytest.approx(plain.spend_per_epoch)
    assert isinstance(numpy.every, int)
    assert numpy.releases_per_epoch == plain.releases_per_epoch


@pytest.mark.parametrize(
    ("call", "pattern"),
    [
        (lambda: half_width_for_spend(sensitivity=1.0, cohort=500, spend=0.1, mechanism="x"),
         "mechanism='x' is not one of the accepted values"),
        (lambda: spend_for_half_width(sensitivity=1.0, cohort=0, half_width=0.1),
         "cohort=0 is below the limit"),
        (lambda: detection_probability("0.1", 0.05), "shift='0.1' is a string"),
        (lambda: detection_probability(0.1, 0.05, alpha=0.0), "alpha=0.0 is below the limit"),
        (lambda: cadence_table([], shift=0.1, epoch_budget=1.0, **BASE), "every=.* is empty"),
        (lambda: cadence_table(4, shift=0.1, epoch_budget=1.0, **BASE),
         "every=4 is a int, not a list of cadences"),
    ],
)
def test_every_public_function_uses_the_validation_layer(call: object, pattern: str) -> None:
    with pytest.raises(InvalidInput, match=pattern):
        call()  # type: ignore[operator]
