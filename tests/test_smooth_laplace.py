"""The Laplace-aware predictor: closed form, limits and behaviour against simulation.

Every statistical tolerance is three standard errors of the Monte Carlo
estimate it bounds (fixed seeds).
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scipy.signal import fftconvolve

from spatialdp.exceptions import InvalidInput
from spatialdp.smooth import SmallAreaModelWarning, small_area_estimates
from spatialdp.smooth.laplace import (
    laplace_bayes_risk,
    laplace_posterior,
    laplace_predict,
    leave_one_out_prior,
)
from spatialdp.smooth.weights import row_standardised

CLIP = (0.0, 4.0)
CLIENT_SD = 0.6


def _noise_density(var: float, b: float, reach: float, points: int = 2**17 + 1
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Density of ``N(0, var) + Laplace(b)`` on a fine grid, by numerical convolution.

    Independent of the closed form: the two densities are sampled and
    convolved (FFT, trapezoid weights), on ``points`` (odd: centred) points over
    ``[-reach, reach]``.
    """
    u = np.linspace(-reach, reach, points)
    laplace = np.exp(-np.abs(u) / b) / (2 * b)
    if var == 0.0:
        return u, laplace
    normal = np.exp(-(u**2) / (2 * var)) / math.sqrt(2 * math.pi * var)
    return u, fftconvolve(normal, laplace, mode="same") * (u[1] - u[0])


@pytest.mark.parametrize(("y", "m", "tau2", "s2", "b"), [
    (3.0, 0.0, 1.0, 0.0, 1.0),            # pure Laplace noise, a far value
    (0.3, 0.1, 0.01, 0.0025, 0.05),       # a region near the floor at epsilon 0.5
    (-0.5, 0.2, 0.02, 0.003, 0.3),        # noise far larger than the prior
    (0.12, 0.1, 0.01, 0.002, 0.005),      # noise far smaller: almost normal
])
def test_the_closed_form_is_the_posterior_by_quadrature(y, m, tau2, s2, b):
    """Posterior mean and variance against the prior times the convolved likelihood."""
    r, likelihood = _noise_density(s2, b, 14 * math.sqrt(tau2 + s2) + 45 * b + abs(y - m))
    z = y - r
    weight = stats.norm.pdf(z, m, math.sqrt(tau2)) * likelihood
    q_mean = np.trapezoid(weight * z, r) / np.trapezoid(weight, r)
    q_var = np.trapezoid(weight * (z - q_mean) ** 2, r) / np.trapezoid(weight, r)
    mean, var = laplace_posterior(np.array([y]), np.array([m]), np.array([tau2]),
                                  np.array([s2]), np.array([b]))
    assert mean[0] == pytest.approx(q_mean, rel=1e-6, abs=1e-8)
    assert var[0] == pytest.approx(q_var, rel=1e-5)


@pytest.mark.parametrize("ratio", [0.05, 0.5, 2.0, 5.0, 20.0])
def test_the_bayes_risk_quadrature_is_the_expected_posterior_variance(ratio):
    """Hermite x Laguerre nodes against the posterior variance integrated on a fine grid."""
    tau2, s2 = 0.02, 0.005
    sigma = math.sqrt(tau2 + s2)
    b = ratio * sigma
    u, density = _noise_density(tau2 + s2, b, 14 * sigma + 45 * b)
    full = np.full(u.size, 1.0)
    _, variance = laplace_posterior(u, 0 * full, tau2 * full, s2 * full, b * full)
    expected = np.trapezoid(density * variance, u) / np.trapezoid(density, u)
    risk = laplace_bayes_risk(np.array([tau2]), np.array([s2]), np.array([b]))[0]
    assert risk == pytest.approx(expected, rel=1e-5)
    linear = tau2 * (s2 + 2 * b**2) / (tau2 + s2 + 2 * b**2)
    assert risk < linear


def test_a_vanishing_laplace_scale_gives_the_linear_blup_and_variance():
    rng = np.random.default_rng(0)
    y, m = rng.normal(size=50), rng.normal(size=50)
    tau2, s2 = rng.uniform(0.01, 1.0, 50), rng.uniform(0.01, 1.0, 50)
    sd = np.sqrt(tau2 + s2)
    previous = np.inf
    for relative in (0.2, 0.05, 0.02):   # the closed form, converging to the linear answer
        b = relative * sd
        d = s2 + 2 * b**2
        mean, var = laplace_posterior(y, m, tau2, s2, b)
        gap = np.abs(mean - (m + tau2 / (tau2 + d) * (y - m))).max() / sd.max()
        assert gap < previous
        previous = gap
    assert previous < 1e-4
    assert np.allclose(var, tau2 * d / (tau2 + d), rtol=1e-4)
    assert np.allclose(laplace_bayes_risk(tau2, s2, b), tau2 * d / (tau2 + d), rtol=1e-6)
    b = 1e-3 * sd                         # below NORMAL_LIMIT: the linear answer itself
    d = s2 + 2 * b**2
    mean, var = laplace_posterior(y, m, tau2, s2, b)
    assert np.allclose(mean, m + tau2 / (tau2 + d) * (y - m), rtol=1e-12, atol=0)
    assert np.allclose(var, tau2 * d / (tau2 + d), rtol=1e-12)


@pytest.mark.parametrize("model", ["fh", "sfh", "car"])
def test_without_laplace_noise_small_area_estimates_are_the_linear_ones(model):
    """A release whose noise is negligible: the predictor and the MSE are the EBLUP's."""
    rng = np.random.default_rng(3)
    side = 6
    n = side * side
    truth = 1.0 + rng.normal(0.0, 0.15, n)
    frame = _frame(truth, np.full(n, 400), 0.5, rng)
    frame["noise_std"] = 1e-9
    W = _lattice(side) if model != "fh" else None
    linear = _smooth(frame, None, model, W, "linear")
    laplace = _smooth(frame, None, model, W, "laplace")
    assert np.allclose(laplace.eblup, linear.eblup, rtol=0, atol=1e-12)
    assert np.allclose(laplace.mse, linear.mse, rtol=1e-10)
    assert np.allclose(laplace.ci_low, linear.ci_low)
    # Averaged over the variance parameters: the linear posterior mean of the mixture.
    smooth = small_area_estimates(frame, model=model, weights=W, predictor="laplace-mixture",
                                  client_variance=CLIENT_SD**2) if model != "car" else None
    if smooth is not None:
        assert smooth.mixture is not None
        np.testing.assert_allclose(smooth.frame.eblup, smooth.mixture.weight @ smooth.mixture.mean,
                                   rtol=0, atol=1e-12)


def test_the_leave_one_out_prior_rebuilds_the_blup():
    rng = np.random.default_rng(1)
    m, tau2, d, y = rng.normal(size=20), rng.uniform(0.1, 1, 20), rng.uniform(0.1, 1, 20), \
        rng.normal(size=20)
    blup = m + tau2 / (tau2 + d) * (y - m)
    variance = tau2 * d / (tau2 + d)
    m2, tau22 = leave_one_out_prior(blup, variance, y, d)
    assert np.allclose(m2, m)
    assert np.allclose(tau22, tau2)
    # A BLUP that is the direct estimate: a flat prior, and the predictor keeps the value.
    pred, mse = laplace_predict(np.array([2.0]), np.array([1.0]), np.array([2.0]),
                                np.array([0.5]), np.array([0.5]))
    assert float(pred[0]) == 2.0
    assert float(mse[0]) == pytest.approx(1.0)


def test_the_posterior_mean_is_unbiased_and_its_risk_is_the_mse():
    """Against simulation from the prior: no bias, MSE = Bayes risk, below the linear MSE."""
    rng = np.random.default_rng(2)
    n, tau2, s2, b = 200_000, 0.01, 0.0025, 0.08
    z = rng.normal(0.3, math.sqrt(tau2), n)
    y = z + rng.normal(0.0, math.sqrt(s2), n) + rng.laplace(0.0, b, n)
    mean, var = laplace_posterior(y, np.full(n, 0.3), np.full(n, tau2), np.full(n, s2),
                                  np.full(n, b))
    error = mean - z
    assert abs(error.mean()) < 3 * error.std() / math.sqrt(n)
    sq = error**2
    risk = laplace_bayes_risk(np.array([tau2]), np.array([s2]), np.array([b]))[0]
    assert abs(sq.mean() - risk) < 3 * sq.std() / math.sqrt(n)
    assert abs(var.mean() - risk) < 3 * var.std() / math.sqrt(n)
    d = s2 + 2 * b**2
    linear = 0.3 + tau2 / (tau2 + d) * (y - 0.3) - z
    gain = linear**2 - sq
    assert gain.mean() > 3 * gain.std() / math.sqrt(n)


def _lattice(side: int) -> np.ndarray:
    A = np.zeros((side * side, side * side))
    for i in range(side):
        for j in range(side):
            k = i * side + j
            if j + 1 < side:
                A[k, k + 1] = A[k + 1, k] = 1.0
            if i + 1 < side:
                A[k, k + side] = A[k + side, k] = 1.0
    return row_standardised(A).toarray()


def _frame(truth: np.ndarray, cohort: np.ndarray, epsilon: float, rng: np.random.Generator
           ) -> pd.DataFrame:
    scale = (CLIP[1] - CLIP[0]) / (epsilon * cohort)
    value = truth + rng.normal(0.0, CLIENT_SD / np.sqrt(cohort)) + rng.laplace(0.0, scale)
    return pd.DataFrame({"value": value, "noise_std": math.sqrt(2) * scale, "cohort": cohort,
                         "suppressed": False, "clip_low": CLIP[0], "clip_high": CLIP[1]},
                        index=[f"r{i}" for i in range(truth.size)])


def _smooth(frame: pd.DataFrame, covariates: pd.DataFrame | None, model: str, W: np.ndarray | None,
            predictor: str, interval: str = "mixture") -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallAreaModelWarning)
        return small_area_estimates(frame, covariates=covariates, model=model, weights=W,
                                    client_variance=CLIENT_SD**2, predictor=predictor,
                                    interval=interval).frame


def _runs(model: str, reps: int, seed: int, epsilon: float) -> pd.DataFrame:
    """Rounds of a Fay-Herriot (or SAR) truth near the floor; both predictors per round."""
    rng = np.random.default_rng(seed)
    side = 10
    n = side * side
    W = _lattice(side) if model == "sfh" else None
    cohort = np.round(np.exp(rng.uniform(np.log(60), np.log(2000), n))).astype(int)
    x = rng.normal(size=n)
    covariates = pd.DataFrame({"x": x}, index=[f"r{i}" for i in range(n)])
    rows = []
    for rep in range(reps):
        u = rng.normal(0.0, math.sqrt(0.02), n)
        if W is not None:
            u = np.linalg.solve(np.eye(n) - 0.5 * W, u)
        truth = 1.5 + 0.2 * x + u
        frame = _frame(truth, cohort, epsilon, rng)
        linear = _smooth(frame, covariates, model, W, "linear", "plug-in")
        mixed = _smooth(frame, covariates, model, W, "laplace-mixture")
        plug_in = _smooth(frame, covariates, model, W, "laplace", "plug-in")
        rows.append(pd.DataFrame({
            "round": rep, "near": cohort < 200,
            "linear": linear.eblup.to_numpy() - truth,
            "laplace": plug_in.eblup.to_numpy() - truth,
            "laplace-mixture": mixed.eblup.to_numpy() - truth, "mse": plug_in.mse.to_numpy(),
            "linear_mse": linear.mse.to_numpy(),
            "covered": (mixed.ci_low.to_numpy() <= truth) & (truth <= mixed.ci_high),
            "plug_in": (plug_in.ci_low.to_numpy() <= truth) & (truth <= plug_in.ci_high)}))
    return pd.concat(rows, ignore_index=True)


@pytest.mark.parametrize("model", ["fh", "sfh"])
def test_the_laplace_predictor_against_simulation(model):
    """Unbiased, its MSE estimated without bias, intervals that cover, and better near the floor.

    Paired on the rounds (Fay-Herriot, 40 rounds): the Laplace predictor's
    squared error near the floor is below the linear EBLUP's by more than 3 SEs
    of the difference (per-round means, the rounds independent). The spatial
    model's 12 rounds do not resolve its gain; the rest holds.
    """
    reps = 40 if model == "fh" else 12
    runs = _runs(model, reps, seed=5, epsilon=0.2)
    for (near, part), name in itertools.product(runs.groupby("near"),
                                                ("laplace", "laplace-mixture")):
        k = len(part)
        err = part[name]
        per_round = err.groupby(part["round"]).mean()
        assert abs(per_round.mean()) < 3 * per_round.std() / math.sqrt(reps), (near, name)
        sq = err**2
        rounds = sq.groupby(part["round"]).mean()
        assert abs(part.mse.mean() - sq.mean()) < 3 * rounds.std() / math.sqrt(reps), (
            near, name)
        for column in ("covered", "plug_in"):
            assert abs(part[column].mean() - 0.95) < 3 * math.sqrt(0.95 * 0.05 / k), (
                near, column, part[column].mean())
        assert part.mse.mean() < part.linear_mse.mean()
    if model == "fh":
        near = runs[runs.near]
        for name in ("laplace", "laplace-mixture"):
            gain = (near.linear**2 - near[name] ** 2).groupby(near["round"]).mean()
            assert gain.mean() > 3 * gain.std() / math.sqrt(reps), (name, gain.mean())


def test_the_default_intervals_do_not_depend_on_the_predictor():
    """The mixture intervals integrate the linear model's posterior; only the estimate moves."""
    rng = np.random.default_rng(6)
    frame = _frame(1.0 + rng.normal(0.0, 0.15, 30), np.full(30, 120), 0.2, rng)
    linear = _smooth(frame, None, "fh", None, "linear")
    laplace = _smooth(frame, None, "fh", None, "laplace")
    assert np.array_equal(laplace.ci_low, linear.ci_low)
    assert np.array_equal(laplace.ci_high, linear.ci_high)
    assert not np.allclose(laplace.eblup, linear.eblup)


def test_an_unknown_predictor_and_a_bootstrap_of_the_laplace_predictor_are_refused():
    frame = _frame(np.full(9, 1.0), np.full(9, 300), 0.5, np.random.default_rng(0))
    with pytest.raises(InvalidInput, match="predictor='median' is not one of"):
        small_area_estimates(frame, client_variance=CLIENT_SD**2, predictor="median")
    with pytest.raises(InvalidInput, match="predictor='laplace-mixture' needs the posterior"):
        small_area_estimates(frame, client_variance=CLIENT_SD**2, predictor="laplace-mixture",
                             interval="plug-in")
    with pytest.raises(InvalidInput, match="mse='bootstrap' is the linear EBLUP's"):
        small_area_estimates(frame, client_variance=CLIENT_SD**2, predictor="laplace",
                             mse="bootstrap", rng=0)


def test_the_result_records_the_predictor():
    frame = _frame(1.0 + np.random.default_rng(7).normal(0.0, 0.15, 20), np.full(20, 120), 0.2,
                   np.random.default_rng(8))
    smooth = small_area_estimates(frame, client_variance=CLIENT_SD**2, predictor="laplace")
    assert smooth.predictor == "laplace"
    assert "Laplace-aware predictor" in smooth.mse_method
    assert small_area_estimates(frame, client_variance=CLIENT_SD**2).predictor == "linear"


def test_the_sparse_spatial_fit_gives_the_dense_laplace_predictions(monkeypatch):
    """Beyond DENSE_LIMIT (patched) the prior comes from the sparse g1 + g2: same predictions."""
    from spatialdp.smooth import estimate as estimate_module

    rng = np.random.default_rng(9)
    side = 6
    n = side * side
    W = _lattice(side)
    truth = 1.0 + np.linalg.solve(np.eye(n) - 0.6 * W, rng.normal(0.0, 0.15, n))
    frame = _frame(truth, np.round(np.exp(rng.uniform(np.log(60), np.log(600), n))), 0.2, rng)
    dense = small_area_estimates(frame, model="sfh", weights=W, client_variance=CLIENT_SD**2,
                                 predictor="laplace", interval="plug-in")
    monkeypatch.setattr(estimate_module, "DENSE_LIMIT", 10)
    sparse_fit = small_area_estimates(frame, model="sfh", weights=W,
                                      client_variance=CLIENT_SD**2, predictor="laplace",
                                      interval="plug-in")
    assert "sparse" in sparse_fit.mse_method
    np.testing.assert_allclose(sparse_fit.frame.eblup, dense.frame.eblup, atol=1e-5)
    linear = small_area_estimates(frame, model="sfh", weights=W, client_variance=CLIENT_SD**2,
                                  interval="plug-in")
    assert np.abs(sparse_fit.frame.eblup - linear.frame.eblup).max() > 1e-3
