"""Uncertainty on a fit: ``bse``, ``conf_int``, ``summary()`` and the HTML display.

The statistical claims are checked by Monte Carlo over fresh clients, phases and
noise (fixed seeds): the 95% intervals of the one-shot fit cover 95 +/- 1% of
the time (the pooled coverage's standard error, from the per-fit coverage
fractions, is below a quarter of that 1%), ``bse`` agrees with the spread of
the coefficients within four standard errors of the Monte-Carlo SD, and a
ridge's intervals cover the ridge's target, not ``beta``.

The setting keeps the estimator approximately unbiased and its linearisation
good: features uniform on ``[0, 1]^3`` (``||x|| <= 1.74``: the clipping to
``R = 2`` never binds; not centred, so the intercept path is exercised), so
the population least-squares coefficients are exactly ``(INTERCEPT, BETA)``
and the centred ``Sigma = I / 12``; ``K = 2000`` clients at ``rho = 200``
(the debiased covariance is within a few percent of ``Sigma``: the PSD
projection never binds), ``alpha = 0.2`` and two modulation directions; no
ridge and no norm cap.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np
import pytest

from spatialdp.exceptions import InvalidInput
from spatialdp.privacy import Simulation
from spatialdp.regression import (
    Modulation,
    RegressionFit,
    fit_dpsgd,
    fit_iterative,
    fit_one_shot,
    transform_clients,
)

BETA = np.array([1.0, -1.0, 0.5])
INTERCEPT = 0.3
K = 2_000
RHO = 200.0
MOD = Modulation(alpha=0.2, lam=0.5, omega=1.0, n_directions=2, radius=2.0)
FEATURE_MEAN = 0.5  # of U[0, 1]: not centred, so the intercept's covariance with beta matters
FEATURE_VARIANCE = 1.0 / 12.0
LEVEL = 0.95


def _clients(rng: np.random.Generator, intercept: float = INTERCEPT, k: int = K
             ) -> tuple[np.ndarray, np.ndarray]:
    X = rng.uniform(0.0, 1.0, size=(k, BETA.size))
    return X, intercept + X @ BETA + 0.5 * rng.normal(size=k)


def _fit(rng: np.random.Generator, *, intercept: float = INTERCEPT, ridge: float | None = None,
         fit_intercept: bool = True, label_bound: float | None = None, k: int = K,
         rho: float = RHO) -> RegressionFit:
    X, y = _clients(rng, intercept, k)
    labels = {} if label_bound is None else {"label_bound": label_bound, "label_rho": rho}
    reports = transform_clients(X, y, modulation=MOD, rho=rho, target=Simulation(rng=rng),
                                **labels)
    return fit_one_shot(reports, ridge=ridge, norm_cap=None, fit_intercept=fit_intercept)


@functools.cache
def _replications(n: int, seed: int, ridge: float | None = None, fit_intercept: bool = True,
                  label_bound: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(params, bse)`` of ``n`` independent fits, each ``(n, d + 1)``."""
    rng = np.random.default_rng(seed)
    fits = [_fit(rng, ridge=ridge, fit_intercept=fit_intercept, label_bound=label_bound,
                 intercept=INTERCEPT if fit_intercept else 0.0) for _ in range(n)]
    return np.array([f.params for f in fits]), np.array([f.bse for f in fits])


def _coverage(params: np.ndarray, bse: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """Return the pooled coverage of the 95% intervals and its standard error.

    The coefficients of one fit are correlated, so the SE comes from the per-fit
    coverage fractions (independent across fits), not from ``n (d + 1)`` Bernoullis.
    """
    z = 1.959963984540054
    covered = np.abs(params - truth) <= z * bse
    per_fit = covered.mean(axis=1)
    return float(per_fit.mean()), float(per_fit.std(ddof=1) / np.sqrt(per_fit.size))


def _ratio_bound(params: np.ndarray, bse: np.ndarray, j: int) -> tuple[float, float]:
    """Return ``mean(bse) / MC SD`` of coefficient ``j`` and the SE of that ratio."""
    err = params[:, j] - params[:, j].mean()
    n = err.size
    kurtosis = float(np.mean(err**4) / np.mean(err**2) ** 2)  # SE of an SD: sqrt((k - 1) / 4n)
    se_sd = np.sqrt((kurtosis - 1.0) / (4.0 * n))
    se_mean_bse = bse[:, j].std(ddof=1) / bse[:, j].mean() / np.sqrt(n)
    ratio = bse[:, j].mean() / err.std(ddof=1)
    return float(ratio), float(ratio * np.hypot(se_sd, se_mean_bse))


# --------------------------------------------------------------------------- Monte Carlo

def test_95_percent_intervals_cover_95_plus_or_minus_1_percent() -> None:
    params, bse = _replications(3_000, seed=25)
    assert np.isfinite(bse).all()
    coverage, se = _coverage(params, bse, np.r_[INTERCEPT, BETA])
    assert se < 0.01 / 4  # the 1% band is at least 4 standard errors wide
    assert abs(coverage - LEVEL) < 0.01, (coverage, se)
    per_coef_se = np.sqrt(LEVEL * (1 - LEVEL) / params.shape[0])
    covered = np.abs(params - np.r_[INTERCEPT, BETA]) <= 1.959963984540054 * bse
    assert np.all(np.abs(covered.mean(axis=0) - LEVEL) < 4 * per_coef_se), covered.mean(axis=0)


def test_standard_errors_match_the_monte_carlo_spread() -> None:
    params, bse = _replications(3_000, seed=25)
    for j in range(params.shape[1]):
        ratio, se = _ratio_bound(params, bse, j)
        assert abs(ratio - 1.0) < 4 * se, (j, ratio, se)


def test_without_intercept_and_with_noised_labels_the_intervals_still_cover() -> None:
    params, bse = _replications(1_000, seed=7, fit_intercept=False, label_bound=4.0)
    assert np.isnan(bse[:, 0]).all()  # the intercept is fixed at 0, not estimated
    coverage, se = _coverage(params[:, 1:], bse[:, 1:], BETA)
    assert abs(coverage - LEVEL) < 4 * se, (coverage, se)


def test_a_ridges_intervals_cover_its_target_not_beta() -> None:
    ridge = 0.05
    params, bse = _replications(400, seed=3, ridge=ridge)
    shrunk = BETA * FEATURE_VARIANCE / (FEATURE_VARIANCE + ridge)
    target = np.r_[INTERCEPT + FEATURE_MEAN * np.sum(BETA - shrunk), shrunk]
    coverage, se = _coverage(params, bse, target)
    assert abs(coverage - LEVEL) < 4 * se, (coverage, se)
    wrong, _ = _coverage(params[:, 1:], bse[:, 1:], BETA)
    assert wrong < 0.5  # the shrinkage bias is not in the intervals: the summary says so


# --------------------------------------------------------------------------- the face


@functools.cache
def _one_fit() -> RegressionFit:
    return _fit(np.random.default_rng(1))


def test_conf_int_has_one_named_row_per_parameter() -> None:
    fit = _one_fit()
    ci = fit.conf_int()
    assert ci.shape == (4, 2)
    assert list(ci.columns) == ["ci_low", "ci_high"]
    assert list(ci.index) == ["intercept", "x1", "x2", "x3"]
    assert np.allclose((ci["ci_low"] + ci["ci_high"]) / 2, fit.params)
    assert np.allclose(ci["ci_high"] - ci["ci_low"], 2 * 1.959963984540054 * fit.bse)
    wide = fit.conf_int(alpha=0.01)
    assert np.allclose((wide["ci_high"] - wide["ci_low"]) / (ci["ci_high"] - ci["ci_low"]),
                       2.5758293035489 / 1.959963984540054)
    named = replace(fit, feature_names=("age", "income", "distance"))
    assert list(named.conf_int().index) == ["intercept", "age", "income", "distance"]


def test_bse_is_the_root_of_the_covariance_diagonal() -> None:
    fit = _one_fit()
    assert fit.bse.shape == (4,)
    assert np.allclose(fit.bse**2, np.diag(fit.cov_params))
    assert np.allclose(fit.cov_params, fit.cov_params.T)
    assert np.all(np.linalg.eigvalsh(fit.cov_params) > 0)


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1, "0.05", np.nan])
def test_conf_int_refuses_a_level_outside_0_1(alpha: object) -> None:
    with pytest.raises(InvalidInput, match="alpha"):
        _one_fit().conf_int(alpha=alpha)  # type: ignore[arg-type]


def test_summary_is_a_statsmodels_table_with_the_record() -> None:
    fit = _one_fit()
    text = fit.summary()
    header = next(line for line in text.splitlines() if "std err" in line)
    assert header.split() == ["coef", "std", "err", "z", "P>|z|", "[0.025", "0.975]"]
    for name in ("intercept", "x1", "x2", "x3"):
        assert any(line.split()[0] == name for line in text.splitlines() if line.strip())
    flat = " ".join(text.split())
    assert f"Clients (K): {K}" in flat
    assert "rho (zCDP): 200" in flat
    assert "Ridge: 0" in flat
    assert "Norm cap: none" in flat
    assert "Protects: features (clipped, modulated and noised on the device); labels public" \
        in flat
    assert "cover the population least-squares coefficients" in flat
    assert text.splitlines()[0] == fit.headline()
    assert text.endswith("[SIMULATION: not a release]")
    assert repr(fit) == f"RegressionFit({fit.headline()})"


def test_the_html_display_shows_the_table() -> None:
    block = _one_fit()._repr_html_()
    assert block.startswith("<div class='spatialdp'><strong>RegressionFit</strong>")
    assert "<table" in block
    assert "std err" in block
    assert "P&gt;|z|" in block
    assert "coefficients (95% intervals)" in block


def test_noised_labels_are_stated_as_protected() -> None:
    fit = _fit(np.random.default_rng(2), label_bound=4.0, k=500)
    assert "and labels (clipped, noised)" in " ".join(fit.summary().split())


def test_a_ridge_fit_states_that_its_intervals_miss_the_shrinkage() -> None:
    text = " ".join(_fit(np.random.default_rng(1), ridge=0.05).summary().split())
    assert "cover the ridge's target" in text
    assert "NOT beta" in text


# --------------------------------------------------------------------------- no honest SE


def test_no_standard_errors_where_the_norm_cap_binds() -> None:
    rng = np.random.default_rng(4)
    X, y = _clients(rng)
    reports = transform_clients(X, y, modulation=MOD, rho=RHO, target=Simulation(rng=rng))
    fit = fit_one_shot(reports, ridge=None, norm_cap=0.1)
    assert np.isnan(fit.bse).all()
    assert np.isnan(fit.conf_int().to_numpy()).all()
    assert "the norm cap binds" in " ".join(fit.summary().split())


def test_no_standard_errors_where_the_psd_projection_binds() -> None:
    fit = _fit(np.random.default_rng(5), k=200, rho=0.5)
    assert np.isnan(fit.bse).all()
    assert "the PSD projection binds" in " ".join(fit.summary().split())


def test_one_client_has_no_standard_errors() -> None:
    reports = transform_clients(np.full((1, 3), 0.1), np.ones(1), modulation=MOD, rho=RHO,
                                target=Simulation(rng=0))
    fit = fit_one_shot(reports, ridge=1.0, norm_cap=None, psd=False)
    assert np.isnan(fit.bse).all()
    assert "one client" in fit.summary()


def test_iterative_and_dpsgd_fits_say_they_have_no_standard_errors() -> None:
    rng = np.random.default_rng(6)
    X, y = _clients(rng, k=4_000)
    iterative = fit_iterative(X, y, modulation=MOD, rho=RHO, rounds=4,
                              target=Simulation(rng=1))
    dpsgd = fit_dpsgd(X, y, rho=RHO, rounds=4, target=Simulation(rng=1))
    for fit, why in ((iterative, "no standard errors for the iterative protocol"),
                     (dpsgd, "no standard errors for DP-SGD")):
        assert np.isnan(fit.bse).all()
        assert np.isnan(fit.conf_int().to_numpy()).all()
        assert why in " ".join(fit.summary().split())
    assert "features and labels" in " ".join(dpsgd.summary().split())


def test_the_estimator_names_its_fits_rows_after_the_dataframes_columns() -> None:
    import pandas as pd

    from spatialdp.regression import ModulatedRegression

    X, y = _clients(np.random.default_rng(8), k=500)
    frame = pd.DataFrame(X, columns=["age", "income", "distance"])
    model = ModulatedRegression(rho=RHO, radius=2.0, ridge=None, norm_cap=None,
                                target=Simulation(rng=0)).fit(frame, y)
    assert list(model.fit_.conf_int().index) == ["intercept", "age", "income", "distance"]
    unnamed = ModulatedRegression(rho=RHO, radius=2.0, target=Simulation(rng=0)).fit(X, y)
    assert list(unnamed.fit_.conf_int().index) == ["intercept", "x1", "x2", "x3"]
