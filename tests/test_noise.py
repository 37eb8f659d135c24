"""Tests of the noise samplers (release and simulate paths) and the mechanisms."""

from __future__ import annotations

import importlib
import inspect
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse
from scipy import stats

import spatialdp.exceptions
import spatialdp.privacy
from spatialdp.exceptions import InvalidInput
from spatialdp.privacy import accuracy as acc
from spatialdp.privacy import calibration, noise, release, simulate
from spatialdp.privacy.exact import random_bits, uniform_below
from spatialdp.privacy.noise import (
    GaussianMechanism,
    LaplaceMechanism,
    PrivacyLoss,
    rational_scale,
    release_discrete_gaussian,
    release_discrete_laplace,
    release_gaussian,
    release_laplace,
    simulate_discrete_gaussian,
    simulate_discrete_laplace,
    simulate_gaussian,
    simulate_laplace,
)

P_MIN = 1e-6  # goodness-of-fit tests fail only below this p-value


# ---------------------------------------------------------------------------
# helpers: exact pmfs and a pooled chi-square test
# ---------------------------------------------------------------------------


def dlap_pmf(k: np.ndarray, scale: float) -> np.ndarray:
    a = math.exp(-1.0 / scale)
    return (1 - a) / (1 + a) * a ** np.abs(k)


def dlap_cdf(k: np.ndarray, scale: float) -> np.ndarray:
    """P(Z <= k), accurate at any scale (powers of a as exponentials)."""
    a = math.exp(-1.0 / scale)
    k = np.asarray(k, dtype=np.float64)
    with np.errstate(over="ignore"):
        return np.where(k >= 0, 1 - np.exp(-(k + 1) / scale) / (1 + a),
                        np.exp(k / scale) / (1 + a))


def dgauss_pmf(k: np.ndarray, sigma: float) -> np.ndarray:
    support = np.arange(-int(40 * sigma) - 5, int(40 * sigma) + 6)
    z = np.exp(-(support**2) / (2 * sigma**2)).sum()
    return np.exp(-(np.asarray(k, dtype=np.float64) ** 2) / (2 * sigma**2)) / z


def chi2_pvalue(sample: np.ndarray, pmf, min_expected: float = 5.0) -> float:
    """Chi-square p-value of an integer sample; sparse tail bins are pooled."""
    n = sample.size
    lo, hi = int(sample.min()), int(sample.max())
    ks = np.arange(lo - 200, hi + 201)
    p = pmf(ks)
    exp = n * p
    keep = exp >= min_expected
    inner = ks[keep]
    counts = np.bincount(sample - (lo - 200), minlength=ks.size)
    obs_inner = counts[keep]
    obs_rest = n - obs_inner.sum()
    exp_rest = n * (1.0 - p[keep].sum())
    observed = list(obs_inner)
    expected = list(exp[keep])
    assert inner.size == len(observed)
    if exp_rest >= 1e-9 or obs_rest > 0:
        observed.append(obs_rest)
        expected.append(max(exp_rest, 1e-12))
    observed_a, expected_a = np.array(observed, float), np.array(expected, float)
    if observed_a.size < 2:
        return 1.0
    chi2 = float((((observed_a - expected_a) ** 2) / expected_a).sum())
    return float(stats.chi2.sf(chi2, observed_a.size - 1))


def binned_chi2_pvalue(sample: np.ndarray, scale: float, bins: int = 200) -> float:
    """Chi-square p-value of an integer discrete Laplace sample in ~equiprobable bins.

    The edges are integer points near the Laplace quantiles (fixed in advance);
    the bin probabilities come from the exact discrete Laplace cdf.
    """
    n = sample.size
    q = np.linspace(0, 1, bins + 1)[1:-1]
    quantiles = np.where(q < 0.5, scale * np.log(2 * q), -scale * np.log(2 * (1 - q)))
    edges = np.unique(np.floor(quantiles).astype(np.int64))  # bin i: (edges[i-1], edges[i]]
    cdf = lambda k: dlap_cdf(k, scale)  # noqa: E731
    probs = np.diff(np.concatenate([[0.0], cdf(edges), [1.0]]))
    observed = np.bincount(np.searchsorted(edges, sample, side="left"), minlength=probs.size)
    keep = probs * n >= 5
    assert keep.sum() >= bins // 2
    expected = probs * n
    chi2 = float((((observed - expected) ** 2 / expected)[keep]).sum())
    chi2 += float((observed[~keep].sum() - expected[~keep].sum()) ** 2
                  / max(expected[~keep].sum(), 1e-12))
    return float(stats.chi2.sf(chi2, int(keep.sum())))


def dkw_ok(sample: np.ndarray, cdf, grid: np.ndarray) -> bool:
    """Kolmogorov-Smirnov-type test on a grid, DKW bound at P_MIN."""
    eps = math.sqrt(math.log(2 / P_MIN) / (2 * sample.size))
    s = np.sort(sample)
    emp = np.searchsorted(s, grid, side="right") / s.size
    return bool(np.max(np.abs(emp - cdf(grid))) <= eps)


# ---------------------------------------------------------------------------
# entropy primitives
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [2, 3, 5, 7, 16, 200, 1000, 70_001, 2**33 + 5])
def test_uniform_below_is_uniform(n: int) -> None:
    draws = uniform_below(n, 120_000).astype(np.int64)
    assert draws.min() >= 0
    assert draws.max() < n
    if n <= 1000:
        counts = np.bincount(draws, minlength=n)
        assert stats.chisquare(counts).pvalue > P_MIN
    else:
        u = (draws + 0.5) / n
        assert stats.kstest(u, "uniform").pvalue > P_MIN


def test_random_bits_fair() -> None:
    bits = random_bits(400_000)
    assert abs(bits.mean() - 0.5) < 5 * 0.5 / math.sqrt(bits.size)


# ---------------------------------------------------------------------------
# release: discrete Laplace
# ---------------------------------------------------------------------------


# realistic scales: 1 / 0.5, 2.5, 1 / 0.1, 19 / 0.4, 250, 1e4 (and more)
@pytest.mark.parametrize(
    "scale", [0.05, 0.1, 0.3, 1.0, 2.0, 2.5, 7.3, 10.0, 40.0, 47.5, 250.0, 1 / 3])
def test_release_discrete_laplace_matches_pmf(scale: float) -> None:
    n = 200_000
    sample = release_discrete_laplace(np.zeros(n, dtype=np.int64), scale)
    # the noise has exactly the float's scale (no rounding of the scale any more)
    assert chi2_pvalue(sample, lambda k: dlap_pmf(k, scale)) > P_MIN


@pytest.mark.parametrize("scale", [250.0, 1e4, 12_345.678, 3.5e6, 2.0**40 + 1, 1e15])
def test_release_discrete_laplace_large_scale_binned(scale: float) -> None:
    sample = release_discrete_laplace(np.zeros(200_000, dtype=np.int64), scale)
    assert sample.dtype == np.int64
    assert binned_chi2_pvalue(sample, scale) > P_MIN
    var = 2 * scale**2  # 2a / (1 - a)**2, to within 1 / (6 scale**2) relative
    assert abs(sample.mean()) < 6 * math.sqrt(var / sample.size)
    assert abs(sample.var() / var - 1) < 6 * math.sqrt(5 / sample.size)  # kurtosis 6


@pytest.mark.parametrize("scale", [1e4, 3.5e6])
def test_release_discrete_laplace_large_scale_cdf(scale: float) -> None:
    sample = release_discrete_laplace(np.zeros(200_000, dtype=np.int64), scale)
    grid = np.round(scale * np.linspace(-12, 12, 481))
    assert dkw_ok(sample, lambda k: dlap_cdf(k, scale), grid)
    # symmetric and integer
    assert sample.dtype == np.int64
    assert abs(np.mean(sample > 0) - np.mean(sample < 0)) < 0.02


def test_release_discrete_laplace_tiny_scale_is_mostly_exact() -> None:
    out = release_discrete_laplace(np.arange(1000), 0.05)
    # P(noise != 0) = 2a/(1+a) with a = e^-20, about 4e-9
    assert np.array_equal(out, np.arange(1000))


def test_release_adds_to_counts_and_keeps_shape() -> None:
    counts = np.arange(12).reshape(3, 4) * 1000
    out = release_discrete_laplace(counts, 1.0)
    assert out.shape == (3, 4)
    assert out.dtype == np.int64
    assert np.all(np.abs(out - counts) < 100)
    assert isinstance(release_discrete_laplace(7, 1.0), int)
    assert release_discrete_laplace(np.array([], dtype=np.int64), 1.0).size == 0


def test_release_accepts_integral_floats_and_bools() -> None:
    assert release_discrete_laplace(np.array([1.0, 2.0]), 1e-9).tolist() == [1, 2]
    assert release_discrete_laplace(np.array([True, False]), 1e-9).tolist() == [1, 0]


def test_two_release_calls_differ() -> None:
    zeros = np.zeros(1000, dtype=np.int64)
    assert not np.array_equal(
        release_discrete_laplace(zeros, 1.0), release_discrete_laplace(zeros, 1.0)
    )
    z = np.zeros(50)
    assert not np.array_equal(release_laplace(z, 1.0), release_laplace(z, 1.0))
    assert not np.array_equal(release_gaussian(z, 1.0), release_gaussian(z, 1.0))
    assert not np.array_equal(
        release_discrete_gaussian(zeros[:200], 2.0), release_discrete_gaussian(zeros[:200], 2.0)
    )


@pytest.mark.parametrize(
    "fn", [release_discrete_laplace, release_laplace, release_gaussian, release_discrete_gaussian]
)
def test_release_functions_take_no_seed(fn) -> None:
    params = inspect.signature(fn).parameters
    assert len(params) == 2
    forbidden = {"seed", "rng", "random_state", "generator", "random"}
    assert not forbidden & set(params)
    for mech in (LaplaceMechanism(1.0), GaussianMechanism(1.0)):
        assert list(inspect.signature(mech.release).parameters) == ["x"]


def test_release_one_million_cells() -> None:
    # Speed is measured by benchmarks/bench_discrete_laplace.py, not asserted here.
    noisy = release_discrete_laplace(np.zeros(1_000_000, dtype=np.int64), 1.0)
    assert noisy.shape == (1_000_000,)
    assert noisy.dtype == np.int64
    var = 2 * math.exp(-1.0) / (1 - math.exp(-1.0)) ** 2
    assert abs(noisy.mean()) < 5 * math.sqrt(var / noisy.size)


# ---------------------------------------------------------------------------
# scale rounding
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [2.5, 1.0, 3.0, 1e4, 0.375, 1e9])
def test_rational_scale_exact_when_representable(scale: float) -> None:
    assert rational_scale(scale) == Fraction(scale)


@pytest.mark.parametrize("scale", [0.1, 1 / 3, 0.05, 37.3, math.pi * 1e5, 1e-7, 1e-30, 1e12 + 0.5])
def test_rational_scale_rounds_up_not_down(scale: float) -> None:
    r = rational_scale(scale)
    assert r >= Fraction(scale)
    assert r.denominator & (r.denominator - 1) == 0  # a power of two
    assert r.denominator <= 2**62
    if scale > 1e-12:
        assert float(r / Fraction(scale)) - 1 <= 2.0**-19


# ---------------------------------------------------------------------------
# release: OpenDP paths
# ---------------------------------------------------------------------------


def test_release_laplace_distribution() -> None:
    out = release_laplace(np.full(200_000, 3.0), 2.0)
    assert out.dtype == np.float64
    assert stats.kstest(out - 3.0, stats.laplace(scale=2.0).cdf).pvalue > P_MIN
    assert isinstance(release_laplace(1.0, 1.0), float)


def test_release_gaussian_distribution() -> None:
    out = release_gaussian(np.zeros(8000), 1.5)
    assert stats.kstest(out, stats.norm(scale=1.5).cdf).pvalue > P_MIN
    assert isinstance(release_gaussian(0.0, 1.0), float)


def test_release_discrete_gaussian_distribution() -> None:
    out = release_discrete_gaussian(np.zeros(8000, dtype=np.int64), 2.0)
    assert out.dtype == np.int64
    assert chi2_pvalue(out, lambda k: dgauss_pmf(k, 2.0)) > P_MIN
    assert isinstance(release_discrete_gaussian(5, 1.0), int)


# ---------------------------------------------------------------------------
# sparse input
# ---------------------------------------------------------------------------


def test_sparse_input_noises_every_entry() -> None:
    dense = np.zeros(2000, dtype=np.int64)
    dense[[3, 50, 700]] = [10, 20, 30]
    sp = scipy.sparse.csr_array(dense.reshape(1, -1))
    out = release_discrete_laplace(sp, 5.0)
    assert isinstance(out, np.ndarray)
    assert out.shape == (1, 2000)
    # zeros of the domain get noise too: most of them are no longer zero
    assert np.mean(out[0, dense == 0] != 0) > 0.8
    sim = simulate_discrete_laplace(scipy.sparse.coo_matrix(dense.reshape(-1, 1)), 5.0, rng=0)
    assert sim.shape == (2000, 1)
    real = release_laplace(scipy.sparse.csr_matrix(np.eye(3)), 1.0)
    assert real.shape == (3, 3)
    assert np.all(real != np.eye(3))


# ---------------------------------------------------------------------------
# simulation path
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [0.05, 0.7, 3.0, 60.0])
def test_simulate_discrete_laplace_matches_pmf(scale: float) -> None:
    sample = simulate_discrete_laplace(np.zeros(200_000, dtype=np.int64), scale, rng=11)
    assert chi2_pvalue(sample, lambda k: dlap_pmf(k, scale)) > P_MIN


@pytest.mark.parametrize("sigma", [0.05, 0.4, 1.0, 3.7, 25.0])
def test_simulate_discrete_gaussian_matches_pmf(sigma: float) -> None:
    sample = simulate_discrete_gaussian(np.zeros(200_000, dtype=np.int64), sigma, rng=5)
    assert chi2_pvalue(sample, lambda k: dgauss_pmf(k, sigma)) > P_MIN


def test_simulate_discrete_gaussian_huge_sigma_cdf() -> None:
    sigma = 1e4
    sample = simulate_discrete_gaussian(np.zeros(100_000, dtype=np.int64), sigma, rng=3)
    grid = np.round(sigma * np.linspace(-6, 6, 241))
    assert dkw_ok(sample, lambda k: stats.norm.cdf((k + 0.5) / sigma), grid)


def test_simulate_continuous() -> None:
    lap = simulate_laplace(np.zeros(50_000), 2.0, rng=1)
    assert stats.kstest(lap, stats.laplace(scale=2.0).cdf).pvalue > P_MIN
    gau = simulate_gaussian(np.zeros(50_000), 0.5, rng=np.random.default_rng(2))
    assert stats.kstest(gau, stats.norm(scale=0.5).cdf).pvalue > P_MIN
    assert isinstance(simulate_laplace(1.0, 1.0, rng=0), float)


def test_simulate_is_reproducible() -> None:
    x = np.arange(10)
    for fn in (simulate_discrete_laplace, simulate_discrete_gaussian):
        assert np.array_equal(fn(x, 2.0, rng=42), fn(x, 2.0, rng=42))
    for real_fn in (simulate_laplace, simulate_gaussian):
        assert np.array_equal(real_fn(x, 2.0, rng=42), real_fn(x, 2.0, rng=42))


# ---------------------------------------------------------------------------
# mechanisms
# ---------------------------------------------------------------------------


def test_laplace_mechanism() -> None:
    mech = LaplaceMechanism(epsilon=0.5, sensitivity=2.0, discrete=True)
    assert mech.scale == 4.0
    assert mech.kind == "discrete_laplace"
    assert mech.privacy_loss == PrivacyLoss("pure", 0.5)
    assert mech.privacy_loss.rho == 0.125
    out = mech.release(np.array([10, 20, 30]))
    assert out.dtype == np.int64
    sim = mech.simulate(np.array([10, 20, 30]), rng=3)
    assert np.array_equal(sim, mech.simulate(np.array([10, 20, 30]), rng=3))
    assert mech.std(9) == acc.noise_std("discrete_laplace", 4.0, 9)
    assert mech.mean_abs_error(3) == acc.mean_abs_error("discrete_laplace", 4.0, 3)
    assert mech.error_bar(5, 0.1) == acc.half_width("discrete_laplace", 4.0, 5, 0.1)
    bars = mech.error_bar(np.array([1, 5, 5]))
    assert bars.shape == (3,)
    assert bars[1] == bars[2]
    assert mech.accuracy(4).half_width == mech.error_bar(4)
    real = LaplaceMechanism(1.0)
    assert real.kind == "laplace"
    assert real.release(np.zeros(3)).dtype == np.float64
    assert "epsilon=1.0" in repr(real)


def test_gaussian_mechanism() -> None:
    mech = GaussianMechanism(rho=0.5, sensitivity=3.0)
    assert mech.scale == 3.0
    assert mech.kind == "gaussian"
    assert mech.privacy_loss == PrivacyLoss("zcdp", 0.5)
    assert mech.privacy_loss.epsilon is None
    assert mech.error_bar(4) == pytest.approx(1.959963984540054 * 6)
    disc = GaussianMechanism(rho=0.125, sensitivity=1.0, discrete=True)
    assert disc.scale == 2.0
    assert disc.kind == "discrete_gaussian"
    assert disc.release(np.array([1, 2])).dtype == np.int64
    assert disc.simulate(np.array([1, 2]), rng=0).dtype == np.int64


@pytest.mark.parametrize(("eps", "sens"), [(3.0, 1.0), (0.7, 0.3), (1e-3, 7.0), (0.1, 1.0)])
def test_laplace_scale_never_rounds_down(eps: float, sens: float) -> None:
    counts = LaplaceMechanism(eps, sens, discrete=True)
    # against the DECIMAL epsilon the ledger charges, not the binary float
    assert Decimal(counts.scale) * Decimal(repr(eps)) >= Decimal(sens)
    assert counts.scale == calibration.laplace_scale(sens, eps)
    real = LaplaceMechanism(eps, sens)  # headroom 2**-24 for the lattice rounding
    assert Decimal(real.scale) * Decimal(repr(eps)) >= Decimal(sens) * (1 + Decimal(2) ** -24)
    assert real.scale == calibration.headroom_scale(sens, eps)
    assert 0 < real.scale / counts.scale - 1 <= 2.0**-24 + 2.0**-51


@pytest.mark.parametrize(("rho", "sens"), [(0.3, 1.0), (0.01, 2.0), (1.7, 0.9), (0.5, 1.0)])
def test_gaussian_scale_never_rounds_down(rho: float, sens: float) -> None:
    mech = GaussianMechanism(rho, sens)
    assert Fraction(mech.scale) ** 2 * 2 * Fraction(Decimal(repr(rho))) >= Fraction(sens) ** 2
    assert mech.scale == calibration.gaussian_sigma(sens, rho)


def test_privacy_loss() -> None:
    loss = PrivacyLoss("pure", 1.0)
    assert loss.as_zcdp() == PrivacyLoss("zcdp", 0.5)
    assert loss.epsilon == 1.0
    with pytest.raises(InvalidInput, match="kind='approx'"):
        PrivacyLoss("approx", 1.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="value=-1"):
        PrivacyLoss("pure", -1)
    with pytest.raises(InvalidInput, match="value=nan"):
        PrivacyLoss("zcdp", float("nan"))


# ---------------------------------------------------------------------------
# refusals
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), "abc", None, True])
def test_refuses_bad_scale(bad) -> None:
    with pytest.raises(InvalidInput, match="scale="):
        release_discrete_laplace([1, 2], bad)
    with pytest.raises(InvalidInput, match="scale="):
        release_laplace([1.0], bad)
    with pytest.raises(InvalidInput, match="scale="):
        simulate_laplace([1.0], bad, rng=0)
    with pytest.raises(InvalidInput, match="sigma="):
        release_gaussian([1.0], bad)
    with pytest.raises(InvalidInput, match="sigma="):
        simulate_discrete_gaussian([1], bad, rng=0)


def test_refuses_too_large_scale() -> None:
    with pytest.raises(InvalidInput, match=r"scale=2251799813685248\.0 is above the limit <= 1e"):
        release_discrete_laplace([1], 2.0**51)
    with pytest.raises(InvalidInput, match="largest supported noise scale 1e"):
        GaussianMechanism(rho=1e-40)
    with pytest.raises(InvalidInput, match=r"sensitivity / epsilon=1e\+20 exceeds the largest"):
        LaplaceMechanism(1e-20, discrete=True)


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ([1, 2.5], "got 2.5 at flat index 1"),
        ([1.0, float("nan")], "got nan"),
        ([float("inf")], "got inf"),
        ([2.0**60], "2\\*\\*53"),
        (np.array([2**60], dtype=np.int64), "2\\*\\*53"),
        (np.array(["a", "b"]), "not a numeric array"),
        ([1 + 2j], "complex"),
        ([[1], [1, 2]], "ragged"),
        (np.array([1, None], dtype=object), "dtype object"),
        ([2**70], "dtype object"),
        ("12", "is a string"),
        (True, "is a bool"),
    ],
)
def test_refuses_bad_counts(bad, match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        release_discrete_laplace(bad, 1.0)
    with pytest.raises(InvalidInput, match=match):
        simulate_discrete_laplace(bad, 1.0, rng=0)


def test_discrete_gaussian_refuses_non_integers() -> None:
    with pytest.raises(InvalidInput, match="integer"):
        release_discrete_gaussian([0.5], 1.0)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_refuses_non_finite_values(bad: float) -> None:
    with pytest.raises(InvalidInput, match="must be finite"):
        release_laplace([0.0, bad], 1.0)
    with pytest.raises(InvalidInput, match="must be finite"):
        release_gaussian(bad, 1.0)
    with pytest.raises(InvalidInput, match="must be finite"):
        simulate_gaussian([bad], 1.0, rng=0)


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ("seed", "rng='seed' is a str"),
        (1.5, "rng=1.5 is a float"),
        (True, "rng=True is a bool"),
        (np.bool_(False), "is a bool"),
        (-3, "rng=-3 is a negative seed"),
        (np.random.RandomState(0), "legacy RandomState"),
        ([1, 2], "is a list"),
    ],
)
def test_refuses_bad_rng(bad: object, match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        simulate_laplace([0.0], 1.0, rng=bad)  # type: ignore[call-overload]
    with pytest.raises(InvalidInput, match=match):
        LaplaceMechanism(1.0).simulate([0.0], rng=bad)  # type: ignore[arg-type]


def test_rng_accepts_numpy_integers_and_is_keyword_only() -> None:
    assert np.array_equal(simulate_laplace([0.0], 1.0, rng=np.int64(5)),
                          simulate_laplace([0.0], 1.0, rng=5))
    with pytest.raises(TypeError, match="positional"):
        simulate_laplace([0.0], 1.0, 5)  # type: ignore[misc]


@pytest.mark.parametrize("bad", [0, -0.5, float("nan"), float("inf")])
def test_mechanisms_refuse_bad_parameters(bad: float) -> None:
    with pytest.raises(InvalidInput, match="epsilon="):
        LaplaceMechanism(bad)
    with pytest.raises(InvalidInput, match="sensitivity="):
        LaplaceMechanism(1.0, bad)
    with pytest.raises(InvalidInput, match="rho="):
        GaussianMechanism(bad)
    with pytest.raises(InvalidInput, match="sensitivity="):
        GaussianMechanism(1.0, bad)


def test_mechanism_refuses_non_integer_counts_for_discrete() -> None:
    with pytest.raises(InvalidInput, match="integers"):
        LaplaceMechanism(1.0, discrete=True).release([1.5])


NOISE_MODULES = {"accuracy", "calibration", "noise", "release", "simulate"}


def _defining_module(obj: object) -> str:
    return getattr(obj, "__module__", "")


@pytest.mark.parametrize("name", spatialdp.privacy.__all__)
def test_privacy_exports_are_documented_and_canonical(name: str) -> None:
    """Every public name is its defining module's object, documented with an Examples section."""
    obj = getattr(spatialdp.privacy, name)
    if isinstance(obj, type) and issubclass(obj, Exception | Warning):
        # every error and warning class lives in spatialdp.exceptions, re-exported here
        assert _defining_module(obj) == "spatialdp.exceptions", name
        assert getattr(spatialdp.exceptions, name) is obj
    elif callable(obj):
        module = _defining_module(obj)
        assert module.startswith("spatialdp.privacy."), (name, module)
        assert not module.rsplit(".", 1)[-1].startswith("_"), (name, module)  # a public module
        assert getattr(importlib.import_module(module), name) is obj
        if module.rsplit(".", 1)[-1] in NOISE_MODULES:  # the ledger/budget modules are not ours
            doc = inspect.getdoc(obj) or ""
            assert "Examples\n--------" in doc, name
    else:  # constants: exported from a public module of the package
        assert any(getattr(m, name, None) is obj and name in getattr(m, "__all__", ())
                   for m in (acc, calibration)), name


def test_noise_module_reexports_the_paths() -> None:
    """``from spatialdp.privacy.noise import release_laplace`` keeps working (same objects)."""
    for name in release.__all__:
        assert getattr(noise, name) is getattr(release, name)
    for name in simulate.__all__:
        if name.startswith("simulate_"):
            assert getattr(noise, name) is getattr(simulate, name)
    assert set(noise.__all__) >= {"LaplaceMechanism", "GaussianMechanism", "PrivacyLoss"}


@pytest.mark.parametrize("module", [release, simulate, noise, calibration])
def test_random_path_modules_explain_themselves(module: object) -> None:
    doc = inspect.getdoc(module) or ""
    assert "Examples\n--------" in doc
    if module in (release, simulate):
        assert "OS entropy" in doc
        assert "seed" in doc
