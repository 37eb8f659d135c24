"""Small-area models against simulation: parameters, intervals, MSEs (fixed seeds, SE tolerances).

Every tolerance is three standard errors of the Monte Carlo estimate it bounds.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from spatialdp._blas import single_blas
from spatialdp.smooth import SmallAreaModelWarning, small_area_estimates
from spatialdp.smooth.fay_herriot import fit_fay_herriot
from spatialdp.smooth.spatial import SarModel, fit_sar
from spatialdp.smooth.weights import row_standardised

CLIP = (0.0, 4.0)
CLIENT_SD = 0.6


def lattice(side: int) -> np.ndarray:
    """Rook neighbours on a ``side x side`` grid, row-standardised."""
    n = side * side
    A = np.zeros((n, n))
    for i in range(side):
        for j in range(side):
            k = i * side + j
            if j + 1 < side:
                A[k, k + 1] = A[k + 1, k] = 1.0
            if i + 1 < side:
                A[k, k + side] = A[k + side, k] = 1.0
    return row_standardised(A).toarray()


def sar_effects(W: np.ndarray, rho: float, s2u: float, rng: np.random.Generator) -> np.ndarray:
    """Draw ``u = (I - rho W)^-1 v``, ``v ~ N(0, s2u I)``."""
    return np.linalg.solve(np.eye(W.shape[0]) - rho * W,
                           rng.normal(0.0, math.sqrt(s2u), W.shape[0]))


def test_fay_herriot_recovers_beta_and_the_area_variance():
    rng = np.random.default_rng(11)
    n, reps, beta, s2u = 200, 200, np.array([1.0, 2.0]), 0.5
    X = np.column_stack([np.ones(n), rng.normal(size=n)])
    d = rng.uniform(0.1, 1.0, n)
    draws, ses = [], []
    for _ in range(reps):
        y = X @ beta + rng.normal(0, math.sqrt(s2u), n) + rng.normal(0, np.sqrt(d))
        fit = fit_fay_herriot(y, X, d)
        draws.append([*fit.beta, fit.s2u])
        ses.append([*np.sqrt(np.diag(fit.beta_cov)), fit.parameter_se[0]])
    draws, ses = np.array(draws), np.array(ses)
    truth = np.array([*beta, s2u])
    spread = draws.std(axis=0, ddof=1)
    assert (np.abs(draws.mean(axis=0) - truth) < 3 * spread / math.sqrt(reps)).all()
    # The reported standard errors are the spread of the estimates (sd of an sd: 1/sqrt(2R)).
    assert (np.abs(ses.mean(axis=0) / spread - 1) < 3 / math.sqrt(2 * (reps - 1))).all()


def test_spatial_fay_herriot_recovers_rho_and_the_area_variance():
    rng = np.random.default_rng(7)
    W = lattice(12)
    n, reps, rho, s2u = W.shape[0], 40, 0.6, 1.0
    X = np.column_stack([np.ones(n), rng.normal(size=n)])
    d = rng.uniform(0.2, 0.8, n)
    draws, ses = [], []
    for _ in range(reps):
        y = X @ [1.0, 2.0] + sar_effects(W, rho, s2u, rng) + rng.normal(0, np.sqrt(d))
        with single_blas():
            fit = fit_sar(SarModel(y, X, d, W, np.ones(n, dtype=bool)))
        draws.append([fit.s2u, fit.rho])
        ses.append(fit.parameter_se)
    draws, ses = np.array(draws), np.array(ses)
    spread = draws.std(axis=0, ddof=1)
    assert (np.abs(draws.mean(axis=0) - [s2u, rho]) < 3 * spread / math.sqrt(reps)).all()
    # Each fit's standard errors cover the truth as a 95% Wald interval does.
    inside = (np.abs(draws - [s2u, rho]) < 1.96 * ses).mean(axis=0)
    assert (np.abs(inside - 0.95) < 3 * math.sqrt(0.95 * 0.05 / reps)).all()


def _frame(truth: np.ndarray, cohort: np.ndarray, epsilon: float,
           rng: np.random.Generator) -> pd.DataFrame:
    """A report-like frame: a fresh cohort's mean plus the Laplace noise of a mean."""
    width = CLIP[1] - CLIP[0]
    scale = width / (epsilon * cohort)             # replace-one sensitivity of a mean
    value = (truth + rng.normal(0.0, CLIENT_SD / np.sqrt(cohort))
             + rng.laplace(0.0, scale))
    return pd.DataFrame({"value": value, "noise_std": math.sqrt(2) * scale, "cohort": cohort,
                         "suppressed": False, "clip_low": CLIP[0], "clip_high": CLIP[1]},
                        index=[f"r{i}" for i in range(truth.size)])


def _coverage_run(model: str, seed: int, reps: int, epsilon: float, area_var: float = 0.02
                  ) -> tuple[pd.DataFrame, int]:
    """Simulate ``reps`` rounds on fixed truths; return per-round errors, MSEs, hits and sizes."""
    rng = np.random.default_rng(seed)
    side = 12
    W = lattice(side)
    n = side * side
    cohort = np.round(np.exp(rng.uniform(np.log(60), np.log(3000), n))).astype(int)
    x = rng.normal(size=n)
    covariates = pd.DataFrame({"x": x}, index=[f"r{i}" for i in range(n)])
    rows, alarms = [], 0
    for _ in range(reps):
        if model == "sfh":
            u = sar_effects(W, 0.5, area_var, rng)
        else:
            u = rng.normal(0.0, math.sqrt(area_var), n)
        truth = 1.5 + 0.2 * x + u
        frame = _frame(truth, cohort, epsilon, rng)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", SmallAreaModelWarning)
            smooth = small_area_estimates(frame, covariates=covariates, model=model,
                                          weights=W, client_variance=CLIENT_SD**2)
        alarms += any(issubclass(w.category, SmallAreaModelWarning) for w in caught)
        out = smooth.frame
        rows.append(pd.DataFrame({
            "size": np.where(cohort < 120, "near floor", np.where(cohort < 600, "mid", "large")),
            "direct_error": frame.value.to_numpy() - truth,
            "error": out.eblup.to_numpy() - truth, "mse": out.mse.to_numpy(),
            "covered": (out.ci_low.to_numpy() <= truth) & (truth <= out.ci_high.to_numpy()),
            "normal_covered": np.abs(out.eblup.to_numpy() - truth)
            <= 1.959964 * out.rmse.to_numpy()}))
    return pd.concat(rows, ignore_index=True), alarms


@pytest.mark.parametrize("model", ["fh", "sfh"])
def test_intervals_cover_and_mse_matches_the_empirical_error(model):
    reps = 60 if model == "fh" else 25
    runs, alarms = _coverage_run(model, seed=3, reps=reps, epsilon=0.2)
    for size, part in runs.groupby("size"):
        k = len(part)
        cover = part.covered.mean()
        assert abs(cover - 0.95) < 3 * math.sqrt(0.95 * 0.05 / k), (size, cover)
        sq = part.error**2
        # The estimated MSE is the mean squared error, within 3 SE of the latter's mean.
        assert abs(part.mse.mean() - sq.mean()) < 3 * sq.std() / math.sqrt(k), size
        # Smoothing helps most where the noise is largest.
        if size == "near floor":
            assert sq.mean() < 0.7 * (part.direct_error**2).mean()
    assert alarms <= reps * 0.01 + 3 * math.sqrt(reps * 0.01 * 0.99) + 1


def test_normal_intervals_undercover_where_laplace_noise_dominates():
    """Why the intervals use the Laplace-plus-normal quantile: the normal one falls short.

    Large regions at epsilon 0.1, with area effects far larger than their noise,
    keep their direct estimate (little shrinkage), whose error is mostly
    Laplace noise (sampling is small).
    """
    runs, _ = _coverage_run("fh", seed=4, reps=300, epsilon=0.1, area_var=0.5)
    laplace = runs[runs["size"] == "large"]
    k = len(laplace)
    se = math.sqrt(0.95 * 0.05 / k)
    assert abs(laplace.covered.mean() - 0.95) < 3 * se
    assert laplace.normal_covered.mean() < 0.95 - 3 * se


def test_a_spatial_pattern_left_in_the_residuals_warns():
    rng = np.random.default_rng(5)
    W = lattice(12)
    n = W.shape[0]
    truth = 1.5 + sar_effects(W, 0.9, 0.3, rng)
    frame = _frame(truth, np.full(n, 2000), 2.0, rng)
    with pytest.warns(SmallAreaModelWarning, match="Moran's I"):
        small_area_estimates(frame, weights=W, client_variance=CLIENT_SD**2)


def test_an_outlying_region_warns():
    rng = np.random.default_rng(6)
    n = 100
    frame = _frame(np.full(n, 1.5), np.full(n, 2000), 2.0, rng)
    frame.loc["r0", "value"] += 2.0
    with pytest.warns(SmallAreaModelWarning, match="whitened residual"):
        small_area_estimates(frame, client_variance=CLIENT_SD**2)
