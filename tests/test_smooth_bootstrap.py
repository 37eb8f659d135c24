"""The parametric bootstrap MSE of small-area estimates (``mse="bootstrap"``)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from spatialdp.datasets import us_states_partition
from spatialdp.exceptions import InvalidInput
from spatialdp.smooth import SmallAreaModelWarning, small_area_estimates
from spatialdp.smooth.bootstrap import bootstrap_mse
from spatialdp.smooth.direct import DirectEstimates
from spatialdp.smooth.fay_herriot import fay_herriot_predict, fit_fay_herriot


def _frame(n: int, seed: int, epsilon: float = 0.5) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A published frame of ``n`` regions (replace-one Laplace noise) and one covariate."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    cohort = rng.integers(100, 2000, n)
    truth = 1.5 + 0.3 * x + rng.normal(0, 0.15, n)
    scale = 4.0 / (epsilon * cohort)
    value = truth + rng.normal(0, 0.6 / np.sqrt(cohort)) + rng.laplace(0, scale)
    ids = [f"r{i}" for i in range(n)]
    frame = pd.DataFrame({"value": value, "noise_std": np.sqrt(2) * scale, "cohort": cohort,
                          "suppressed": False, "clip_low": 0.0, "clip_high": 4.0}, index=ids)
    return frame, pd.DataFrame({"x": x}, index=ids)


def test_bootstrap_keeps_the_eblup_is_seeded_and_says_so():
    frame, cov = _frame(60, 0)
    analytic = small_area_estimates(frame, covariates=cov, client_variance=0.36)
    boot = small_area_estimates(frame, covariates=cov, client_variance=0.36, mse="bootstrap",
                                replicates=50, rng=7)
    again = small_area_estimates(frame, covariates=cov, client_variance=0.36,
                                 mse="bootstrap", replicates=50, rng=7)
    assert np.array_equal(boot.frame.eblup, analytic.frame.eblup)
    assert np.array_equal(boot.frame.mse, again.frame.mse)
    assert not np.allclose(boot.frame.mse, analytic.frame.mse)
    assert boot.mse_method == ("parametric bootstrap: 50 replicates with the release's "
                               "Laplace noise")
    assert analytic.mse_method.startswith("analytic: Prasad-Rao")
    half = boot.frame.ci_high - boot.frame.eblup
    assert np.all(half >= 1.95 * boot.frame.rmse)     # the Laplace-aware factor, >= 1.96


def test_bootstrap_mse_agrees_with_the_analytic_mse_on_many_areas():
    """With 300 areas the second-order formula is accurate: the bootstrap must match it.

    The bootstrap's mean over areas is an average of B independent replicates;
    its Monte-Carlo standard error comes from their spread.
    """
    frame, cov = _frame(300, 1)
    fit_frame = small_area_estimates(frame, covariates=cov, client_variance=0.36)
    n = len(frame)
    noise = frame.noise_std.to_numpy() ** 2
    sampling = 0.36 / frame.cohort.to_numpy()
    direct = DirectEstimates(frame.index, np.ones(n, dtype=bool), frame.value.to_numpy(),
                             noise, sampling, "known")
    X = np.column_stack([np.ones(n), cov.x.to_numpy()])
    fit = fit_fay_herriot(direct.value, X, direct.variance)
    assert np.allclose(fay_herriot_predict(fit, direct.value, X, direct.variance,
                                           direct.observed)[1], fit_frame.frame.mse)
    rng = np.random.default_rng(3)
    singles = np.array([bootstrap_mse("fh", "REML", direct, X, None, fit, 1, rng).mean()
                        for _ in range(400)])
    whole = bootstrap_mse("fh", "REML", direct, X, None, fit, 400, np.random.default_rng(3))
    assert whole.mean() == pytest.approx(singles.mean(), rel=1e-12)
    se = singles.std(ddof=1) / np.sqrt(singles.size)
    assert abs(singles.mean() - fit_frame.frame.mse.mean()) < 3 * se


def test_bootstrap_refusals():
    frame, cov = _frame(30, 2)
    with pytest.raises(InvalidInput, match="mse='boot'"):
        small_area_estimates(frame, covariates=cov, mse="boot")
    with pytest.raises(InvalidInput, match="replicates=5"):
        small_area_estimates(frame, covariates=cov, mse="bootstrap", replicates=5)
    with pytest.raises(InvalidInput, match="rng=1.5 is a float"):
        small_area_estimates(frame, covariates=cov, mse="bootstrap", rng=1.5)


def test_the_spatial_bootstrap_gives_modelled_regions_an_mse():
    states = us_states_partition()
    rng = np.random.default_rng(4)
    n = states.n_regions
    cohort = rng.integers(100, 3000, n)
    cohort[::8] = 60                         # six suppressed states
    shown = cohort >= 100
    scale = 4.0 / (0.5 * cohort)
    value = 1.0 + rng.normal(0, 0.1, n) + rng.laplace(0, scale)
    frame = pd.DataFrame({
        "value": np.where(shown, value, np.nan),
        "noise_std": np.where(shown, np.sqrt(2) * scale, np.nan),
        "cohort": pd.arrays.IntegerArray(cohort, ~shown), "suppressed": ~shown,
        "clip_low": 0.0, "clip_high": 4.0}, index=states.region_ids.astype(str))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SmallAreaModelWarning)
        out = small_area_estimates(frame, model="sfh", weights=states, include_suppressed=True,
                                   client_variance=0.36, mse="bootstrap", replicates=30, rng=0)
    assert np.isfinite(out.frame.mse).all()
    assert (out.frame.mse > 0).all()
    assert list(out.frame.label[~shown]) == ["modelled"] * 6
