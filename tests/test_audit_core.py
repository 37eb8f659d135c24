"""The auditor's statistics: exact bounds, coverage by Monte Carlo, power, refusals, results."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from spatialdp.audit import (
    NoiseTap,
    add_client,
    audit,
    audit_sampler,
    bernoulli_renyi,
    capture,
    clopper_pearson,
    drop_device,
    epsilon_lower_bound,
    extreme_pairs,
    publication,
    read_files,
    remove_client,
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
        lo, hi = clopper_pearson(k, n, 0.025)
        ref = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        assert float(lo) == pytest.approx(ref.low, rel=1e-9, abs=1e-12)
        assert float(hi) == pytest.approx(ref.high, rel=1e-9, abs=1e-12)


def test_epsilon_bound_covers_at_its_level_by_monte_carlo() -> None:
    """The bound exceeds the true epsilon in at most alpha of repetitions.

    The event is the optimal one of a Laplace shift (ratio exactly e^eps), so
    the bound sits close to the truth and the check is not vacuous.
    """
    eps, n, reps, alpha = 1.0, 20_000, 20_000, 0.1
    gen = np.random.default_rng(0)
    k1 = gen.binomial(n, 0.5, reps)
    k0 = gen.binomial(n, 0.5 * math.exp(-eps), reps)
    bounds = epsilon_lower_bound(k1, n, k0, n, alpha)
    rate = float(np.mean(bounds > eps))
    assert rate <= alpha + 5 * math.sqrt(alpha * (1 - alpha) / reps)
    assert float(np.median(bounds)) > 0.9 * eps  # and it is close to the truth


def test_rho_bound_covers_by_monte_carlo() -> None:
    """Gaussian shift mu: rho = mu^2 / 2; the event {x > mu/2} is near its best."""
    mu, n, reps, alpha = 1.0, 20_000, 5_000, 0.1
    rho = mu**2 / 2
    p1, p0 = stats.norm.sf(-mu / 2), stats.norm.sf(mu / 2)
    gen = np.random.default_rng(1)
    bounds = rho_lower_bound(gen.binomial(n, p1, reps), n, gen.binomial(n, p0, reps), n,
                             alpha)
    assert float(np.mean(bounds > rho)) <= alpha + 5 * math.sqrt(alpha * (1 - alpha) / reps)
    assert float(np.median(bounds)) > 0.4 * rho


def test_bernoulli_renyi_is_monotone_away_from_the_diagonal() -> None:
    """Why the corner (p1_lower, p0_upper) of the confidence rectangle is the minimum."""
    p = np.linspace(0.31, 0.99, 60)
    for order in (1.01, 2.0, 10.0, 200.0):
        assert np.all(np.diff(bernoulli_renyi(p, 0.3, order)) > 0)
        assert np.all(np.diff(bernoulli_renyi(0.9, np.linspace(0.01, 0.89, 60), order)) < 0)


@pytest.mark.parametrize(("call", "match"), [
    # the two reproduced in issue 21: (nan, 1) and 0.0, i.e. "no violation", on bad counts
    (lambda: clopper_pearson(5, 3, 0.01), r"k=5 exceeds its number of draws n=3"),
    (lambda: epsilon_lower_bound(10, 5, 1, 5, 0.01), r"k1=10 exceeds its number of draws n1=5"),
    (lambda: epsilon_lower_bound(1, 5, 9, 5, 0.01), r"k0=9 exceeds its number of draws n0=5"),
    (lambda: rho_lower_bound(1, 5, 9, 5, 0.01), r"k0=9 exceeds"),
    (lambda: rho_lower_bound(-1, 5, 1, 5, 0.01), r"k1=-1 is negative"),
    (lambda: clopper_pearson(0, 0, 0.01), r"n=0 has no draws"),
    (lambda: clopper_pearson(1.5, 3, 0.01), r"k=1.5 is not a whole number"),
    (lambda: clopper_pearson([1, 7], [5, 5], 0.01), r"k=7 exceeds .* n=5 \(at flat index 1\)"),
    (lambda: clopper_pearson(True, 3, 0.01), r"k=True has dtype bool"),
    (lambda: clopper_pearson("3", 5, 0.01), r"k='3' is text"),
    (lambda: clopper_pearson(float("nan"), 5, 0.01), r"k=nan is not a whole number"),
    (lambda: clopper_pearson(1, 5, 1.0), r"alpha=1.0 is above"),
    (lambda: clopper_pearson(1, 5, 0.0), r"alpha=0.0 is below"),
    (lambda: epsilon_lower_bound(1, 5, 1, 5, 1.5), r"alpha=1.5"),
    (lambda: rho_lower_bound(1, 5, 1, 5, -0.1), r"alpha=-0.1 is below"),
    (lambda: epsilon_lower_bound(1, 5, 1, 5, 0.1, delta=1.0), r"delta=1.0 is above"),
    (lambda: clopper_pearson([1, 2], [3, 4, 5], 0.1), r"do not broadcast"),
    (lambda: bernoulli_renyi(1.2, 0.5, 2.0), r"p=1.2 is outside \[0, 1\]"),
    (lambda: bernoulli_renyi(0.2, [0.5, -0.1], 2.0), r"q=.* has -0.1 at flat index 1"),
    (lambda: bernoulli_renyi(0.2, 0.5, 1.0), r"order=1.0 is not a Renyi order"),
    (lambda: bernoulli_renyi(0.2, 0.5, -2.0), r"order=-2.0 is not a Renyi order"),
])
def test_bound_functions_refuse_impossible_counts(call: object, match: str) -> None:
    """Regression (issue 21): bad counts gave a number (NaN, or 0 = "no violation")."""
    with pytest.raises(InvalidInput, match=match):
        call()  # type: ignore[operator]


def test_bounds_of_an_impossible_ratio_are_zero() -> None:
    assert epsilon_lower_bound(10, 100, 90, 100, 0.01) == 0.0
    assert epsilon_lower_bound(5, 100, 0, 100, 0.01, delta=0.5) == 0.0
    assert rho_lower_bound(10, 100, 90, 100, 0.01) == 0.0


# --- the auditor, end to end on a correct Laplace ----------------------------------------------

def test_a_correct_laplace_stays_below_its_claim_over_many_seeds() -> None:
    """50 audits at alpha 0.1: violations are binomial(50, <= 0.1) at most."""
    def sampler(x: float, n: int, rng: np.random.Generator) -> np.ndarray:
        return x + rng.laplace(0.0, 1.0, size=(n, 1))

    measured = [audit_sampler(sampler, (0.0, 1.0), epsilon=1.0, draws=4_000, rng=seed,
                              alpha=0.1).measured for seed in range(50)]
    violations = sum(m > 1.0 for m in measured)
    assert violations <= stats.binom.ppf(1 - 1e-6, 50, 0.1)
    assert np.median(measured) > 0.6


def test_the_bound_approaches_the_claim_at_large_n() -> None:
    result = audit(_laplace_release, ([0.0], [1.0]), epsilon=1.0, draws=1_000_000, rng=3,
                   path="tap")
    assert result.passed
    assert result.measured > 0.97


def test_multivariate_laplace_uses_the_likelihood_ratio_event() -> None:
    """Two values moving by half the sensitivity each: single-coordinate events reach only
    half the epsilon; the Laplace likelihood-ratio event reaches the whole of it."""
    mech = LaplaceMechanism(1.0, sensitivity=2.0)

    def release(x: object, target: object) -> object:
        return target.add_noise(mech, np.asarray(x, dtype=float))  # type: ignore[attr-defined]

    result = audit(release, ([0.0, 1.0, 5.0], [1.0, 0.0, 5.0]), epsilon=1.0, draws=300_000,
                   rng=4, path="tap")
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
        event = select_event(a, b, bound=lambda *c: epsilon_lower_bound(*c, 1e-6))
        a, b = gen.laplace(0.0, 1.0, (200_000, 3)), gen.laplace(0.0, 1.0, (200_000, 3))
        b[:, 1] += 1.0
        k = [int(event.contains(x).sum()) for x in (a, b)]
        k_first, k_second = (k[1], k[0]) if event.first == 1 else (k[0], k[1])
        worst = max(worst, epsilon_lower_bound(k_first, 200_000, k_second, 200_000, 1e-6))
    assert worst <= 1.0


def test_identical_outputs_measure_zero() -> None:
    result = audit_sampler(lambda x, n, rng: np.zeros((n, 2)), (0, 1), epsilon=0.0, draws=500)
    assert result.measured == 0.0
    assert result.passed
    assert "no output value differs" in result.event


def test_several_pairs_report_the_worst_and_split_alpha() -> None:
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


def test_alpha_is_split_over_the_pairs_and_the_two_proportions() -> None:
    """Each pair's bound is taken at alpha / pairs, each proportion at alpha / pairs / 2.

    A conversion that read alpha as a confidence level, or forgot either split,
    gives other bounds from the same counts.
    """
    def sampler(x: float, n: int, rng: np.random.Generator) -> np.ndarray:
        return x + rng.laplace(0.0, 1.0, size=(n, 1))

    alpha, pairs = 0.01, [(0.0, 1.0), (0.0, 0.5)]
    result = audit_sampler(sampler, pairs, epsilon=1.0, draws=20_000, rng=6, alpha=alpha)
    assert result.alpha == alpha
    each = alpha / len(pairs)
    for p in result.pairs:
        lo, _ = clopper_pearson(p.k_first, p.n_first, each / 2)
        _, hi = clopper_pearson(p.k_second, p.n_second, each / 2)
        assert p.p_first_lower == float(lo)
        assert p.p_second_upper == float(hi)
        assert p.measured == epsilon_lower_bound(p.k_first, p.n_first, p.k_second,
                                                 p.n_second, each)
        assert 0 < p.measured == pytest.approx(math.log(p.p_first_lower / p.p_second_upper))


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
                   name="toy", neighbours="replace")
    text = result.summary()
    assert "PASS" in text
    assert "claimed epsilon 1" in text
    assert "at alpha 1e-06" in text
    assert "path: published" in text
    assert "(replace)" in text
    assert "PASS" in result._repr_html_()
    assert "toy" in result._repr_html_()
    d = result.to_dict()
    assert d["passed"] is True
    assert d["unit"] == "epsilon"
    assert d["alpha"] == 1e-6
    assert d["path"] == "published"
    assert d["neighbours"] == "replace"
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


def _device_reports() -> pd.DataFrame:
    from spatialdp.federated import HistogramSpec, MetricSpec, device_report

    examples = pd.DataFrame({"client_id": [1, 2, 3], "loss": [1.0, 2.0, 3.0],
                             "error": [0.2, 1.5, 3.0]})
    frame = device_report(examples, loss_spec=MetricSpec("loss", 0.0, 4.0),
                          hist_spec=HistogramSpec("err", edges=(1.0, 2.0)))
    frame["region_id"] = ["a", "a", "b"]  # device_report sets it from a partition
    return frame


@pytest.mark.parametrize(("call", "match"), [
    # issue 21: replace_client(frame, 0, loss=50.0) built a neighbour outside the clip
    (lambda r: replace_client(r, 1, loss=50.0),
     r"loss=50.0 is outside the clip range \[0, 4\] of column 'loss'"),
    (lambda r: replace_client(r, 1, loss=-0.5), r"loss=-0.5 is outside the clip range"),
    (lambda r: replace_client(r, 1, loss=float("nan")), r"loss=nan is not finite"),
    (lambda r: replace_client(r, 1, loss="2"), r"loss='2' is a string, not a number"),
    (lambda r: replace_client(r, 1, err_0=1.0, err_1=1.0), r"histogram mass=.* above the mass "
     r"cap 1"),
    (lambda r: replace_client(r, 1, err_0=1.5), r"err_0=1.5 is outside the clip range \[0, 1\]"),
    (lambda r: add_client(r, 9, region_id="a", loss=5.0, err_0=0.0, err_1=0.0, err_2=1.0,
                          count_bucket=0), r"loss=5.0 is outside the clip range"),
])
def test_neighbours_must_be_valid_inputs(call: object, match: str) -> None:
    """Regression (issue 21): a neighbour is a report a correct device can send."""
    with pytest.raises(InvalidInput, match=match):
        call(_device_reports())  # type: ignore[operator]


def test_a_range_comes_from_the_spec_when_the_frame_has_none() -> None:
    from spatialdp.federated import MetricSpec

    plain = pd.DataFrame({"loss": [1.0, 2.0]}, index=pd.Index([1, 2], name="client_id"))
    with pytest.raises(InvalidInput, match="column='loss' has no recorded clip range"):
        replace_client(plain, 1, loss=3.0)
    with pytest.raises(InvalidInput, match="outside the clip range"):
        replace_client(plain, 1, spec=MetricSpec("loss", 0.0, 2.0), loss=3.0)
    out = replace_client(plain, 1, spec=MetricSpec("loss", 0.0, 4.0), loss=3.0)
    assert out.loss.tolist() == [3.0, 2.0]
    assert plain.loss.tolist() == [1.0, 2.0]  # a copy


def test_add_and_remove_one_client() -> None:
    reports = _device_reports()
    more = add_client(reports, 9, region_id="b", loss=4.0, err_0=0.0, err_1=0.0, err_2=1.0,
                      count_bucket=0)
    assert more.index.tolist() == [1, 2, 3, 9]
    assert more.loc[9, "region_id"] == "b"
    assert more.loc[9, "device_specs"] == reports.loc[1, "device_specs"]  # same provenance
    assert more.dtypes.equals(reports.dtypes)
    assert more.attrs["bounds"] == reports.attrs["bounds"]
    less = remove_client(reports, 2)
    assert less.index.tolist() == [1, 3]
    assert less.attrs["bounds"] == reports.attrs["bounds"]


def test_extreme_pairs_under_add_remove_add_the_farthest_value() -> None:
    from spatialdp.federated import HistogramSpec, MetricSpec

    reports = _device_reports()
    pairs = list(extreme_pairs(reports, MetricSpec("loss", 0.0, 4.0), neighbours="add_remove"))
    assert len(pairs) == 2  # one per region
    for (without, with_), client in zip(pairs, [1, 3], strict=True):
        assert client not in without.index
        assert with_.loc[client, "loss"] == 4.0
        assert with_.drop(index=[client]).equals(without)
    (_, with_), *_ = extreme_pairs(reports, MetricSpec("loss", -8.0, 4.0),
                                   neighbours="add_remove")
    assert with_.loc[1, "loss"] == -8.0  # the clip end farther from 0
    (_, with_), *_ = extreme_pairs(reports, HistogramSpec("err", edges=(1.0, 2.0)),
                                   neighbours="add_remove")
    assert with_.loc[1, ["err_0", "err_1", "err_2"]].tolist() == [0.0, 0.0, 1.0]
    with pytest.raises(InvalidInput, match="neighbours='add-remove'"):
        next(extreme_pairs(reports, MetricSpec("loss", 0.0, 4.0), neighbours="add-remove"))


@pytest.mark.parametrize(("call", "match"), [
    (lambda r: add_client(r, 1, region_id="a", loss=1.0, err_0=0.0, err_1=0.0, err_2=0.0,
                          count_bucket=0), "client_id=1 already reports"),
    (lambda r: add_client(r, "9", region_id="a", loss=1.0, err_0=0.0, err_1=0.0, err_2=0.0,
                          count_bucket=0), "client_id='9' is not of the kind"),
    (lambda r: add_client(r, 9, region_id="a", loss=1.0), r"miss the value columns \['err_0'"),
    (lambda r: add_client(r, 9, loss=1.0, err_0=0.0, err_1=0.0, err_2=0.0, count_bucket=0),
     "region_id=None is missing"),
    (lambda r: add_client(r, 9, region_id="a", region=1, loss=1.0), "not a column"),
    (lambda r: remove_client(r, 7), "client_id=7 is not in the reports"),
    (lambda r: remove_client(r.iloc[:1], 1), "is the only client"),
])
def test_add_remove_refusals(call: object, match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        call(_device_reports())  # type: ignore[operator]


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
    ({"epsilon": 1.0, "alpha": 0.0}, r"alpha=0.0 is below the limit > 0"),
    ({"epsilon": 1.0, "alpha": 0.6}, r"alpha=0.6 is above the limit <= 0.5"),
    # a confidence level where alpha is meant (the old parameter's meaning) is refused
    ({"epsilon": 1.0, "alpha": 1 - 1e-6}, r"alpha=0.999999 is above the limit <= 0.5"),
    ({"epsilon": 1.0, "draws": 10}, "draws"),
    ({"epsilon": 1.0, "path": "fast"}, "not an audit path"),
    ({"epsilon": 1.0, "path": "simulation"}, "old name of the noise-tap path"),
    ({"epsilon": 1.0, "selection": 0.99}, "selection"),
    ({"epsilon": 1.0, "path": "release", "rewrite": lambda m, i: m}, "published and tap"),
    ({"epsilon": 1.0, "neighbours": "add-remove"}, "neighbours"),
    ({"epsilon": 1.0, "chunk": 0}, "chunk"),
])
def test_audit_refusals(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        audit(_laplace_release, ([0.0], [1.0]), **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("pairs", ["ab", [], [(1, 2, 3)], 5])
def test_bad_pairs_are_refused(pairs: object) -> None:
    with pytest.raises(InvalidInput, match="pairs"):
        audit(_laplace_release, pairs, epsilon=1.0)


def test_outputs_of_different_sizes_are_refused_at_the_tap() -> None:
    with pytest.raises(InvalidInput, match="differs in size"):
        audit(_laplace_release, ([0.0], [1.0, 2.0]), epsilon=1.0, draws=200, rng=0, path="tap")


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

    ok = audit_sampler(sampler(1.0), (0.0, 1.0), epsilon=1.0, delta=delta, draws=200_000,
                       rng=6)
    assert ok.passed, ok.summary()
    assert "delta" in ok.summary()
    broken = audit_sampler(sampler(0.5), (0.0, 1.0), epsilon=1.0, delta=delta, draws=200_000,
                           rng=7)
    assert not broken.passed, broken.summary()


# --- published outputs ------------------------------------------------------------------------

def _toy(x: float, target: object, *, extra: object = None) -> dict[str, object]:
    noisy = target.add_noise(LaplaceMechanism(1.0), np.array([x]))  # type: ignore[attr-defined]
    return {"value": float(noisy[0]), "class": "high" if noisy[0] > 0 else "low",
            "extra": extra}


def test_publication_reads_every_published_column_of_a_report() -> None:
    from spatialdp.audit.cases import _loss, _regional_release, _reports
    from spatialdp.privacy import Simulation

    report = _regional_release(_loss())(_reports(), Simulation(rng=0))
    pub = publication(report)
    frame = "result.frames.loss"
    for column in ("value", "error_bar", "ci_low", "ci_high", "noise_std", "cohort", "cv",
                   "clip_low", "clip_high"):
        assert f"{frame}.{column}[CO]" in pub.numbers, column
    assert pub.numbers[f"{frame}.value[CO]"] == report["loss"].loc["CO", "value"]
    reliability = report["loss"].loc["CO", "reliability"]
    for token in (f"{frame}.reliability[CO]={reliability}", f"{frame}.suppressed[CO]=False",
                  f"{frame}.metric[CO]=loss@#", f"{frame}.estimator[CO]=mean",
                  "result.accounting.accounting=simulation"):
        assert token in pub.tokens, token
    assert any(t.startswith("result.summary():0=") for t in pub.tokens)  # the summary text
    assert any(k.startswith(f"{frame}.attrs.spatialdp.epsilon") for k in pub.numbers)  # metadata
    assert f"{frame}.geometry[CO].minx" in pub.numbers


def test_capture_records_warnings_and_logs_with_their_numbers_taken_out() -> None:
    import logging
    import warnings

    def release(x: int, target: object) -> int:
        warnings.warn(f"only {x} clients have the metric", UserWarning, stacklevel=1)
        logging.getLogger("spatialdp.test").debug("checked %d rows", x)
        return 0

    pub = capture(release, 57, None)
    assert pub.numbers["warning UserWarning#0#0"] == 57.0
    assert "warning UserWarning#0=only # clients have the metric" in pub.tokens
    assert pub.numbers["log spatialdp.test DEBUG#0#0"] == 57.0  # spatialdp's loggers at DEBUG
    assert logging.getLogger("spatialdp").level == logging.NOTSET  # restored


def test_read_files_reads_the_written_report_and_card(tmp_path: object) -> None:
    from spatialdp.audit.cases import _loss, _regional_release, _reports, _states
    from spatialdp.cards import ModelCard
    from spatialdp.privacy import Simulation

    report = _regional_release(_loss())(_reports(), Simulation(rng=0))
    paths = report.write(tmp_path)  # type: ignore[arg-type]
    paths += ModelCard.build(partition=_states(), specs=[_loss()], report=report).write(
        tmp_path)  # type: ignore[arg-type]
    pub = read_files(paths, tmp_path)  # type: ignore[arg-type]
    value = float(report["loss"].loc["CO", "value"])
    names = {t.removeprefix("file=") for t in pub.tokens if t.startswith("file=")}
    assert names == {p.name for p in paths}
    csv = "file regional_report.SIMULATION.csv"
    row = list(report["loss"].index).index("CO")
    assert pub.numbers[f"{csv}.loss_value[{row}]"] == pytest.approx(value, rel=1e-12)
    gpkg = "file regional_report.SIMULATION.gpkg"
    assert pub.numbers[f"{gpkg}.loss_value[{row}]"] == pytest.approx(value, rel=1e-12)
    assert any(k.startswith(f"{gpkg}.layer_metadata.spatialdp.") for k in pub.numbers)
    assert any(k.startswith("file model_card.SIMULATION.md:") for k in pub.numbers)
    assert any(k.startswith("file model_card.SIMULATION.json.") for k in pub.numbers)
    with pytest.raises(InvalidInput, match="is not a written file"):
        read_files([tmp_path / "gone.csv"])  # type: ignore[operator]


def test_a_token_seen_under_one_input_only_is_a_categorical_event() -> None:
    gen = np.random.default_rng(0)
    x0, x1 = gen.laplace(0, 1, (4000, 3)), gen.laplace(0, 1, (4000, 3))
    x0[:, 2], x1[:, 2] = 0.0, 1.0  # column 2: a token seen under input 1 only
    event = select_event(x0, x1, bound=lambda *c: epsilon_lower_bound(*c, 1 - 1e-6),
                         categorical=[2], labels=["a", "b", "token c=yes"])
    assert event.statistic == "token"
    assert event.describe() == "output token 'c=yes' seen (ratio P1/P0)"
    assert event.contains(x1).all()
    assert not event.contains(x0).any()
    with pytest.raises(InvalidInput, match="categorical"):
        select_event(x0, x1, bound=lambda *c: epsilon_lower_bound(*c, 0.1), categorical=[3])


def test_the_schema_keeps_numbers_and_the_tokens_that_tell_the_inputs_apart() -> None:
    from spatialdp.audit.published import PublicationSchema

    a = [publication({"v": 1.0, "c": "x", "same": "s"}) for _ in range(4)]
    b = [publication({"v": 2.0, "c": "y", "same": "s", "only_b": 3.0}) for _ in range(4)]
    schema = PublicationSchema(a, b)
    assert schema.labels == ("result.v", "result.only_b", "token result.c=x",
                             "token result.c=y")
    assert list(schema.categorical) == [2, 3]
    rows = schema.matrix(a)
    assert np.isnan(rows[:, 1]).all()  # a number the draw lacks is NaN
    assert rows[0].tolist()[2:] == [1.0, 0.0]


def test_the_published_path_catches_what_the_tap_cannot_see() -> None:
    """The defect of issue 21: an exact count published beside the noisy value passed the
    noise-tap audit. The published path reads it; the tap reads only the noise."""
    def leaky(x: float, target: object) -> dict[str, object]:
        return _toy(x, target, extra=int(x > 0.5))  # exact: 0 under one input, 1 under other

    pair = (0.0, 1.0)
    published = audit(leaky, pair, epsilon=1.0, draws=400, rng=1)
    assert published.path == "published"
    assert not published.passed, published.summary()
    assert published.event.startswith("result.extra"), published.event
    tap = audit(leaky, pair, epsilon=1.0, draws=20_000, rng=1, path="tap")
    assert tap.passed, tap.summary()


def test_a_label_that_depends_on_the_private_input_is_caught() -> None:
    def leaky(x: float, target: object) -> dict[str, object]:
        return _toy(x, target, extra="many clients" if x > 0.5 else "few clients")

    result = audit(leaky, (0.0, 1.0), epsilon=1.0, draws=400, rng=2)
    assert not result.passed, result.summary()
    assert "output token 'result.extra=" in result.event


def test_a_warning_with_a_private_number_is_caught() -> None:
    import warnings

    def leaky(x: float, target: object) -> dict[str, object]:
        warnings.warn(f"{int(100 + x)} clients have the metric", UserWarning, stacklevel=1)
        return _toy(x, target)

    result = audit(leaky, (0.0, 1.0), epsilon=1.0, draws=400, rng=3)
    assert not result.passed, result.summary()
    assert result.event.startswith("warning UserWarning#0#0"), result.event


def test_a_correct_release_passes_on_the_published_path() -> None:
    result = audit(_toy, (0.0, 1.0), epsilon=1.0, draws=6_000, rng=4)
    assert result.passed, result.summary()
    assert result.measured > 0.5, result.summary()


def test_audit_sampler_takes_publications() -> None:
    def sampler(x: float, n: int, rng: np.random.Generator) -> list[object]:
        return [publication({"v": x + rng.laplace(0.0, 1.0), "leak": x}) for _ in range(n)]

    result = audit_sampler(sampler, (0.0, 1.0), epsilon=1.0, draws=400, rng=5,
                           path="published (rows)")
    assert not result.passed
    assert result.path == "published (rows)"


def test_a_tap_for_another_round_is_still_the_tap() -> None:
    # A strategy asks its target for each round's target: a tap must keep tapping.
    halve = lambda mech, i: LaplaceMechanism(mech.epsilon * 2, mech.sensitivity)  # noqa: E731
    tap = NoiseTap(4, rng=0, rewrite=halve)
    later = tap.for_round(3)
    assert isinstance(later, NoiseTap)
    assert later.round_index == 3
    assert later.rewrite is halve
    assert later.rng is tap.rng
    later.add_noise(LaplaceMechanism(1.0, 1.0), np.zeros(2))
    assert tap.draws().shape == (4, 2)  # the draws are the tap's
    assert tap.round_index is None
