"""The auditor's statistics: exact bounds, coverage by Monte Carlo, power, refusals, results."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from spatialdp.audit import (
    NoiseTap,
    audit,
    audit_sampler,
    bernoulli_renyi,
    clopper_pearson,
    drop_device,
    epsilon_lower_bound,
    extreme_pairs,
    replace_client,
    rho_lower_bound,
    select_event,
    status_pair,
    tapped,
)
from spatialdp.exceptions import InvalidInput
from spatialdp.privacy import LaplaceMechanism


def _laplace_release(x: object, target: object) -> object:
    return target.add_noise(LaplaceMechanism(1.0), np.asarray(x, dtype=float))  # type: ignore[attr-defined]


# --- bounds -----------------------------------------------------------------------------------

def test_clopper_pearson_matches_scipy_exact_interval() -> None:
    for k, n in [(0, 50), (3, 50), (25, 50), (50, 50), (1234, 100_000)]:
        lo, hi = clopper_pearson(k, n, 0.975)
        ref = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        assert float(lo) == pytest.approx(ref.low, rel=1e-9, abs=1e-12)
        assert float(hi) == pytest.approx(ref.high, rel=1e-9, abs=1e-12)


def test_epsilon_bound_covers_at_its_level_by_monte_carlo() -> None:
    """The bound exceeds the true epsilon in at most 1 - confidence of repetitions.

    The event is the optimal one of a Laplace shift (ratio exactly e^eps), so
    the bound sits close to the truth and the check is not vacuous.
    """
    eps, n, reps, confidence = 1.0, 20_000, 20_000, 0.9
    gen = np.random.default_rng(0)
    k1 = gen.binomial(n, 0.5, reps)
    k0 = gen.binomial(n, 0.5 * math.exp(-eps), reps)
    bounds = epsilon_lower_bound(k1, n, k0, n, confidence)
    rate = float(np.mean(bounds > eps))
    assert rate <= (1 - confidence) + 5 * math.sqrt(0.1 * 0.9 / reps)
    assert float(np.median(bounds)) > 0.9 * eps  # and it is close to the truth


def test_rho_bound_covers_by_monte_carlo() -> None:
    """Gaussian shift mu: rho = mu^2 / 2; the event {x > mu/2} is near its best."""
    mu, n, reps, confidence = 1.0, 20_000, 5_000, 0.9
    rho = mu**2 / 2
    p1, p0 = stats.norm.sf(-mu / 2), stats.norm.sf(mu / 2)
    gen = np.random.default_rng(1)
    bounds = rho_lower_bound(gen.binomial(n, p1, reps), n, gen.binomial(n, p0, reps), n,
                             confidence)
    assert float(np.mean(bounds > rho)) <= 0.1 + 5 * math.sqrt(0.09 / reps)
    assert float(np.median(bounds)) > 0.4 * rho


def test_bernoulli_renyi_is_monotone_away_from_the_diagonal() -> None:
    """Why the corner (p1_lower, p0_upper) of the confidence rectangle is the minimum."""
    p = np.linspace(0.31, 0.99, 60)
    for order in (1.01, 2.0, 10.0, 200.0):
        assert np.all(np.diff(bernoulli_renyi(p, 0.3, order)) > 0)
        assert np.all(np.diff(bernoulli_renyi(0.9, np.linspace(0.01, 0.89, 60), order)) < 0)


def test_bounds_of_an_impossible_ratio_are_zero() -> None:
    assert epsilon_lower_bound(10, 100, 90, 100, 0.99) == 0.0
    assert epsilon_lower_bound(5, 100, 0, 100, 0.99, delta=0.5) == 0.0
    assert rho_lower_bound(10, 100, 90, 100, 0.99) == 0.0


# --- the auditor, end to end on a correct Laplace ----------------------------------------------

def test_a_correct_laplace_stays_below_its_claim_over_many_seeds() -> None:
    """50 audits at confidence 0.9: violations are binomial(50, <= 0.1) at most."""
    def sampler(x: float, n: int, rng: np.random.Generator) -> np.ndarray:
        return x + rng.laplace(0.0, 1.0, size=(n, 1))

    measured = [audit_sampler(sampler, (0.0, 1.0), epsilon=1.0, draws=4_000, rng=seed,
                              confidence=0.9).measured for seed in range(50)]
    violations = sum(m > 1.0 for m in measured)
    assert violations <= stats.binom.ppf(1 - 1e-6, 50, 0.1)
    assert np.median(measured) > 0.6


def test_the_bound_approaches_the_claim_at_large_n() -> None:
    result = audit(_laplace_release, ([0.0], [1.0]), epsilon=1.0, draws=1_000_000, rng=3)
    assert result.passed
    assert result.measured > 0.97


def test_multivariate_laplace_uses_the_likelihood_ratio_event() -> None:
    """Two values moving by half the sensitivity each: single-coordinate events reach only
    half the epsilon; the Laplace likelihood-ratio event reaches the whole of it."""
    mech = LaplaceMechanism(1.0, sensitivity=2.0)

    def release(x: object, target: object) -> object:
        return target.add_noise(mech, np.asarray(x, dtype=float))  # type: ignore[attr-defined]

    result = audit(release, ([0.0, 1.0, 5.0], [1.0, 0.0, 5.0]), epsilon=1.0, draws=300_000,
                   rng=4)
    assert result.passed
    assert result.measured > 0.85
    assert "Laplace LLR" in result.event or "Gaussian LLR" in result.event


def test_float_low_bits_are_not_mistaken_for_leakage() -> None:
    """Regression: |x - m0| - |x - m1| computed as a difference rounds by x's low bits
    (x + 1.0 differs from x there), which an event could pick up: ratio 4.7 for epsilon 1."""
    gen = np.random.default_rng(0)
    worst = 0.0
    for _ in range(3):
        a, b = gen.laplace(0.0, 1.0, (20_000, 3)), gen.laplace(0.0, 1.0, (20_000, 3))
        b[:, 1] += 1.0
        event = select_event(a, b, bound=lambda *c: epsilon_lower_bound(*c, 1 - 1e-6))
        a, b = gen.laplace(0.0, 1.0, (200_000, 3)), gen.laplace(0.0, 1.0, (200_000, 3))
        b[:, 1] += 1.0
        k = [int(event.contains(x).sum()) for x in (a, b)]
        k_first, k_second = (k[1], k[0]) if event.first == 1 else (k[0], k[1])
        worst = max(worst, epsilon_lower_bound(k_first, 200_000, k_second, 200_000, 1 - 1e-6))
    assert worst <= 1.0


def test_identical_outputs_measure_zero() -> None:
    result = audit_sampler(lambda x, n, rng: np.zeros((n, 2)), (0, 1), epsilon=0.0, draws=500)
    assert result.measured == 0.0
    assert result.passed
    assert "no output value differs" in result.event


def test_several_pairs_report_the_worst_and_split_the_confidence() -> None:
    def sampler(x: tuple[float, float], n: int, rng: np.random.Generator) -> np.ndarray:
        noise = rng.laplace(0.0, 1.0, size=(n, 2))
        noise[:, 1] = 0.0  # the second value is never noised
        return np.asarray(x) + noise

    pairs = [((0.0, 0.0), (1.0, 0.0)), ((0.0, 0.0), (0.0, 1.0))]
    result = audit_sampler(sampler, pairs, epsilon=1.0, draws=20_000, rng=5)
    assert not result.passed
    assert result.worst.index == 1
    assert len(result.table()) == 2
    assert result.measured > 5


def test_release_path_uses_os_entropy_and_says_so() -> None:
    result = audit(_laplace_release, ([0.0], [1.0]), epsilon=1.0, path="release", draws=400)
    assert result.path == "release"
    assert result.passed


def test_a_seeded_release_is_caught_on_the_release_path() -> None:
    from spatialdp.privacy.target import Simulation

    def seeded(x: object, target: object) -> object:
        return _laplace_release(x, Simulation(rng=7))

    result = audit(seeded, ([0.0], [1.0]), epsilon=1.0, path="release", draws=150)
    assert not result.passed


# --- results ----------------------------------------------------------------------------------

def test_result_summary_html_and_dict() -> None:
    result = audit(_laplace_release, ([0.0], [1.0]), epsilon=1.0, draws=5_000, rng=0,
                   name="toy")
    text = result.summary()
    assert "PASS" in text
    assert "claimed epsilon 1" in text
    assert "confidence 0.999999" in text
    assert "path: simulation" in text
    assert "PASS" in result._repr_html_()
    assert "toy" in result._repr_html_()
    d = result.to_dict()
    assert d["passed"] is True
    assert d["loss"] == "epsilon"
    assert d["draws"] + d[
        "selection_draws"] == 5_000


# --- taps and neighbours ----------------------------------------------------------------------

def test_noise_tap_draws_rows_of_the_mechanism() -> None:
    tap = NoiseTap(20_000, rng=1)
    out = tap.add_noise(LaplaceMechanism(1.0, sensitivity=2.0, discrete=True),
                        np.array([5, 7]))
    draws = tap.draws()
    assert out.shape == (2,)
    assert draws.shape == (20_000, 2)
    # discrete Laplace of scale 2: variance 2 e^(-1/2) / (1 - e^(-1/2))^2
    q = math.exp(-0.5)
    var = 2 * q / (1 - q) ** 2
    assert abs(draws[:, 0].mean() - 5) < 5 * math.sqrt(var / 20_000)


def test_a_release_that_draws_no_noise_cannot_be_tapped() -> None:
    with pytest.raises(InvalidInput, match="drew no noise"):
        tapped(lambda x, target: x)(1.0, 10, np.random.default_rng(0))


def test_neighbours_keep_participation() -> None:
    from spatialdp.federated import HistogramSpec, MetricSpec

    reports = pd.DataFrame({"loss": [1.0, 2.0, 3.0], "err_0": 0.5, "err_1": 0.5,
                            "region_id": ["a", "a", "b"]},
                           index=pd.Index([1, 2, 3], name="client_id"))
    pairs = list(extreme_pairs(reports, MetricSpec("loss", 0.0, 4.0)))
    assert len(pairs) == 2  # one per region
    for low, high in pairs:
        assert low.region_id.equals(reports.region_id)
        assert high.index.equals(reports.index)
        assert (high.loss - low.loss).abs().sum() == 4.0
    spec = HistogramSpec("err", edges=(1.0,))
    low, high = next(extreme_pairs(reports, spec, clients=[3]))
    moved = (high[list(spec.columns)] - low[list(spec.columns)]).abs().to_numpy().sum()
    assert moved == 2 * spec.mass_cap
    a, b = status_pair(np.array(["returned"] * 3, dtype=object), 2)
    assert (a != b).sum() == 1
    pings = pd.DataFrame({"device_id": [1, 1, 2]})
    assert len(drop_device(pings, 1)) == 1


@pytest.mark.parametrize(("call", "match"), [
    (lambda r: replace_client(r, 99, loss=1.0), "client_id=99"),
    (lambda r: replace_client(r, 1, region_id="b"), "participation"),
    (lambda r: replace_client(r, 1, nope=1.0), "not a column"),
    (lambda r: replace_client(r, 1), "is empty"),
    (lambda r: status_pair(["returned"], 3), "outside"),
    (lambda r: drop_device(pd.DataFrame({"device_id": [1]}), 2), "has no rows"),
    (lambda r: drop_device(pd.DataFrame({"d": [1]}), 1), "not a column"),
])
def test_neighbour_refusals(call: object, match: str) -> None:
    reports = pd.DataFrame({"loss": [1.0], "region_id": ["a"]},
                           index=pd.Index([1], name="client_id"))
    with pytest.raises(InvalidInput, match=match):
        call(reports)  # type: ignore[operator]


@pytest.mark.parametrize(("kwargs", "match"), [
    ({}, "exactly one claim"),
    ({"epsilon": 1.0, "rho": 1.0}, "exactly one claim"),
    ({"rho": 1.0, "delta": 0.1}, "no meaning"),
    ({"epsilon": -1.0}, "epsilon"),
    ({"epsilon": 1.0, "confidence": 1.0}, "confidence"),
    ({"epsilon": 1.0, "draws": 10}, "draws"),
    ({"epsilon": 1.0, "path": "fast"}, "not an audit path"),
    ({"epsilon": 1.0, "selection": 0.99}, "selection"),
    ({"epsilon": 1.0, "path": "release", "rewrite": lambda m, i: m}, "simulation path"),
])
def test_audit_refusals(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        audit(_laplace_release, ([0.0], [1.0]), **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("pairs", ["ab", [], [(1, 2, 3)], 5])
def test_bad_pairs_are_refused(pairs: object) -> None:
    with pytest.raises(InvalidInput, match="pairs"):
        audit(_laplace_release, pairs, epsilon=1.0)


def test_outputs_of_different_sizes_are_refused() -> None:
    with pytest.raises(InvalidInput, match="differs in size"):
        audit(_laplace_release, ([0.0], [1.0, 2.0]), epsilon=1.0, draws=200, rng=0)


def _gaussian_delta(eps: float, mu: float) -> float:
    """The exact (eps, delta) curve of a Gaussian shift mu / sigma = mu (Balle and Wang)."""
    return float(stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * stats.norm.cdf(
        -eps / mu - mu / 2))


def test_approximate_dp_claims_use_the_hockey_stick_bound() -> None:
    """Gaussian noise of sd 1 on a shift of 1 is exactly (1, delta(1))-DP: it passes; with
    half the noise (shift 2 sd) the same claim is violated and caught."""
    delta = _gaussian_delta(1.0, 1.0)

    def sampler(scale: float):  # type: ignore[no-untyped-def]
        return lambda x, n, rng: x + rng.normal(0.0, scale, size=(n, 1))

    ok = audit_sampler(sampler(1.0), (0.0, 1.0), epsilon=1.0, delta=delta, draws=200_000, rng=6)
    assert ok.passed, ok.summary()
    assert "delta" in ok.summary()
    broken = audit_sampler(sampler(0.5), (0.0, 1.0), epsilon=1.0, delta=delta, draws=200_000,
                           rng=7)
    assert not broken.passed, broken.summary()
