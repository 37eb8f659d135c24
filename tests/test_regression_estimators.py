"""Estimators against the planner: consistency in K, regularisation, DP-SGD, Cramér-Rao."""

from __future__ import annotations

import math

import numpy as np
import pytest

from spatialdp.privacy import Simulation
from spatialdp.regression import (
    FeasibilityWarning,
    Modulation,
    fit_dpsgd,
    fit_iterative,
    fit_one_shot,
    plan_regression,
    reconstruction_bound,
    reconstruction_table,
    transform_clients,
    tune_dpsgd,
)
from spatialdp.regression._blocks import single_blas

D = 20
SIGNAL_SCALE = 0.5  # x ~ N(0, 0.25 I): E||x||^2 = 5, rarely clipped at R = 3
BETA = np.linspace(-0.5, 0.5, D)
NOISE = 0.5


def _population(K: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = SIGNAL_SCALE * rng.normal(size=(K, D))
    return X, X @ BETA + NOISE * rng.normal(size=K)


def _excess(coef: np.ndarray, X: np.ndarray, y: np.ndarray) -> float:
    """(beta^ - beta_ols)^T Sigma_c (beta^ - beta_ols): the excess risk against OLS."""
    mean = X.mean(axis=0)
    S = X.T @ X / X.shape[0] - np.outer(mean, mean)
    ols = np.linalg.solve(S, (y - y.mean()) @ X / X.shape[0])
    diff = coef - ols
    return float(diff @ S @ diff)


def _plan(K: int, mod: Modulation, rho: float, **kw):
    signal = SIGNAL_SCALE**2 * float(BETA @ BETA)
    y2 = signal + NOISE**2
    return plan_regression(K, D, rho=rho, modulation=mod, feature_second_moment=D * SIGNAL_SCALE**2,
                           label_second_moment=y2, r_squared=signal / y2, warn=False, **kw)


@pytest.fixture(autouse=True)
def _one_blas_thread():
    """The test's own big products on one BLAS thread (threads spin on a shared machine)."""
    with single_blas():
        yield


def test_one_shot_error_falls_at_the_planners_rate():
    mod = Modulation(lam=1.0, omega=1.0, radius=3.0)
    rho = 8.0
    measured, predicted = [], []
    for K, reps in ((10_000, 8), (100_000, 3), (1_000_000, 1)):
        errs = []
        for r in range(reps):
            X, y = _population(K, seed=r)
            rep = transform_clients(X, y, modulation=mod, rho=rho, target=Simulation(rng=100 + r))
            errs.append(_excess(fit_one_shot(rep).coef, X, y))
        measured.append(np.mean(errs))
        plan = _plan(K, mod, rho)
        predicted.append(plan.predicted("one_shot") - plan.predicted("ols") / (1 + D / K))
    ratio = np.array(measured) / np.array(predicted)
    assert np.all((ratio > 0.5) & (ratio < 2.0)), ratio
    # from 10^5 to 10^6 clients both fall by about 10 (the 1/K regime)
    assert 5 < measured[1] / measured[2] < 20
    assert 5 < predicted[1] / predicted[2] < 20


def test_unregularised_one_shot_is_nonsense_and_the_regularised_one_is_not():
    K, d = 3000, 8
    rng = np.random.default_rng(3)
    X = rng.normal(size=(2 * K, d))
    y = X @ rng.normal(scale=0.3, size=d) + rng.normal(size=2 * K)
    mod = Modulation(radius=3.0)
    with pytest.warns(FeasibilityWarning, match="no private estimator is predicted to beat"):
        plan_regression(K, d, epsilon=1.0, delta=1e-6, modulation=mod)
    plan = plan_regression(K, d, epsilon=4.0, delta=1e-6, modulation=mod,
                           feature_second_moment=7.0, r_squared=0.45, warn=False)
    assert plan.predicted("one_shot_unregularised") > 2 * plan.zero_mse
    assert plan.predicted("one_shot") < plan.zero_mse
    zero = float(np.mean((y[K:] - y[:K].mean()) ** 2))
    raw, reg = [], []
    for r in range(20):
        rep = transform_clients(X[:K], y[:K], modulation=mod, epsilon=4.0, delta=1e-6,
                                target=Simulation(rng=r))
        for out, kw in ((raw, {"ridge": None, "norm_cap": None, "psd": False}), (reg, {})):
            fit = fit_one_shot(rep, **kw)
            out.append(np.mean((fit.predict(X[K:]) - y[K:]) ** 2))
    # a near-singular noisy Sigma^ makes the raw solve heavy-tailed: a few fits explode
    assert np.mean(raw) > 2 * zero
    assert np.max(raw) > 10 * zero
    assert np.mean(reg) < zero


def test_planner_does_not_warn_when_a_fit_can_beat_zero():
    plan = plan_regression(1_000_000, D, rho=1.0, radius=3.0)
    assert plan.feasible
    assert plan.table.loc["one_shot", "beats_zero"]


@pytest.mark.parametrize("how", ["once", "every"])
def test_iterative_recovers_the_coefficients_at_a_large_budget(how):
    X, y = _population(50_000, seed=1)
    fit = fit_iterative(X, y, modulation=Modulation(lam=1.0, radius=3.0, n_directions=2),
                        rho=200.0, rounds=6, participation=how, target=Simulation(rng=2))
    assert _excess(fit.coef, X, y) < 0.02
    assert len(fit.history) == 6
    # v_t orthogonal to beta_t is possible for m <= d - 1
    assert fit.method == "iterative"


def test_dpsgd_central_beats_local_noise_at_the_same_budget():
    X, y = _population(20_000, seed=4)
    errs = {}
    for noise in ("local", "central"):
        fit = fit_dpsgd(X, y, rho=0.05, noise=noise, rounds=20, clip=1.0, step=1.0,
                        target=Simulation(rng=5))
        errs[noise] = _excess(fit.coef, X, y)
    assert errs["central"] < 0.1
    assert errs["local"] > 2 * errs["central"]


def test_dpsgd_tuning_picks_a_grid_point_on_validation():
    X, y = _population(6000, seed=6)
    params, fit = tune_dpsgd(X[:4000], y[:4000], X[4000:], y[4000:], rho=1.0, noise="central",
                             target_factory=lambda: Simulation(rng=0), clips=(0.5, 2.0),
                             steps=(0.3, 1.0), rounds=(5,))
    assert params["clip"] in (0.5, 2.0)
    assert params["step"] in (0.3, 1.0)
    val = np.mean((fit.predict(X[4000:]) - y[4000:]) ** 2)
    assert val < np.var(y[4000:])


def test_cramer_rao_bound_is_attained_without_modulation_and_holds_with_it():
    rng = np.random.default_rng(8)
    d, n = 5, 40_000
    x = rng.normal(size=(1, d)) * 0.3
    X = np.repeat(x, n, axis=0)
    for mod, attained in ((Modulation(alpha=0.4, radius=1.0), True),
                          (Modulation(alpha=0.4, lam=1.0, omega=2.0, n_directions=2,
                                      radius=1.0), False)):
        rep = transform_clients(X, np.zeros(n), modulation=mod, rho=1.0,
                                target=Simulation(rng=9))
        est = rep.features / (1 - mod.alpha)  # unbiased over phases and noise
        err = np.sum((est - x) ** 2, axis=1)
        bound = reconstruction_bound(mod, sigma=rep.sigma, n_features=d)
        se = err.std() / math.sqrt(n)
        if attained:
            assert abs(err.mean() - bound) < 4 * se
        else:
            assert err.mean() > bound + 4 * se


def test_reconstruction_table_reports_the_bound_next_to_epsilon():
    table = reconstruction_table(Modulation(lam=1.0, radius=1.0), 8, epsilons=(1.0, 4.0))
    assert table["crb"].is_monotonic_decreasing
    assert list(table["epsilon"]) == [1.0, 4.0]


# --------------------------------------------------------------------------- refusals


def _small_reports():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(50, 3)) / 2
    return transform_clients(X, X @ [1.0, 0.0, -1.0], modulation=Modulation(), rho=1.0,
                             target=Simulation(rng=0))


def test_transform_clients_refuses_a_non_modulation_before_charging():
    from spatialdp.exceptions import InvalidInput
    from spatialdp.privacy import PrivacyLedger, ReleaseTarget

    X = np.ones((10, 2)) / 2
    with PrivacyLedger(":memory:", epoch_budget=2.0, accounting="zcdp") as ledger:
        target = ReleaseTarget(ledger, epoch=0)
        before = ledger.remaining(0, "training")
        with pytest.raises(InvalidInput, match=r"modulation=\(0.1,\) is a tuple, not a "
                                               "Modulation"):
            transform_clients(X, np.ones(10), modulation=(0.1,), rho=1.0, target=target)
        with pytest.raises(InvalidInput, match="label_rho=1.0 needs label_bound"):
            transform_clients(X, np.ones(10), modulation=Modulation(), rho=1.0,
                              label_rho=1.0, target=target)
        assert ledger.remaining(0, "training") == before


def test_server_estimators_check_reports_and_shapes():
    from spatialdp.exceptions import InvalidInput
    from spatialdp.regression import (
        debiased_covariance,
        debiased_cross_moment,
        unbiased_gradient,
    )

    rep = _small_reports()
    with pytest.raises(InvalidInput, match="reports=1e\\+308 is a float, not a ClientReports"):
        fit_one_shot(1e308)
    with pytest.raises(InvalidInput, match="fit_intercept=(?s:.*) not a bool"):
        fit_one_shot(rep, fit_intercept=np.zeros((2, 2)))
    with pytest.raises(InvalidInput, match="reports=.* not a ClientReports"):
        debiased_covariance({"features": 1})
    with pytest.raises(InvalidInput, match="second=.*is not 3 x 3"):
        debiased_covariance(rep, second=np.eye(2))
    with pytest.raises(InvalidInput, match="second has 9 NaN"):
        debiased_covariance(rep, second=np.full((3, 3), np.nan))
    with pytest.raises(InvalidInput, match="reports=.* not a ClientReports"):
        debiased_cross_moment(0)
    with pytest.raises(InvalidInput, match=r"cross=\(2,\) has length 2 for 3 features"):
        debiased_cross_moment(rep, cross=np.ones(2))
    with pytest.raises(InvalidInput, match=r"beta=\(2,\) has length 2 for 3 features"):
        unbiased_gradient(rep, np.ones(2))
    with pytest.raises(InvalidInput, match="reports=0 is a int"):
        unbiased_gradient(0, np.ones(3))
    fit = fit_one_shot(rep)
    with pytest.raises(InvalidInput, match=r"X=\(4, 1\) has 1 columns for a fit on 3"):
        fit.predict(np.ones((4, 1)))
    assert fit.predict(np.ones((4, 3))).shape == (4,)


def test_reconstruction_refuses_a_non_modulation_and_a_bare_epsilon():
    from spatialdp.exceptions import InvalidInput

    with pytest.raises(InvalidInput, match="modulation=-1 is a int, not a Modulation"):
        reconstruction_bound(-1, sigma=1.0, n_features=3)
    with pytest.raises(InvalidInput, match="modulation=None is a NoneType"):
        reconstruction_table(None, 3)
    with pytest.raises(InvalidInput, match="epsilons=1.0 is a float, not a sequence"):
        reconstruction_table(Modulation(), 3, 1.0, 1e-6)
    with pytest.raises(InvalidInput, match=r"epsilons=\(\) is empty"):
        reconstruction_table(Modulation(), 3, ())


def test_planner_refuses_a_bad_margin_and_a_non_modulation():
    from decimal import Decimal

    from spatialdp.exceptions import InvalidInput

    with pytest.raises(InvalidInput, match="margin=1.5 is above the limit < 1"):
        plan_regression(1000, 3, rho=1.0, margin=1.5)
    with pytest.raises(InvalidInput, match="modulation=np.True_ is a bool_?, not a Modulation"):
        plan_regression(1000, 3, rho=1.0, modulation=np.True_)
    with pytest.warns(FeasibilityWarning):
        plan = plan_regression(1000, 3, rho=1.0, margin=Decimal("0.27"))
    assert plan.n_features == 3


def test_optimal_ridge_refuses_junk_and_overflow():
    from decimal import Decimal

    from spatialdp.exceptions import InvalidInput
    from spatialdp.regression import optimal_ridge

    with pytest.raises(InvalidInput, match="feature_scale=0.0 is below the limit > 0"):
        optimal_ridge(1, 0.0, 0.0, 0.0)
    with pytest.raises(InvalidInput, match="n_features='abc' is a string"):
        optimal_ridge("abc", 1.0, 1.0, 1.0)
    with pytest.raises(InvalidInput, match="beyond float range"):
        optimal_ridge(5, 1e-308, 1e308, 1.0)
    assert optimal_ridge(4, Decimal("0.25"), 1.0, 1.0) == pytest.approx(16.0)


def test_tune_dpsgd_refuses_bad_grids_and_factories():
    from spatialdp.exceptions import InvalidInput

    X, y = _population(200, 7)
    kw = {"rho": 1.0, "noise": "local", "target_factory": lambda: Simulation(rng=0)}
    with pytest.raises(InvalidInput, match="clips=1.0 is a float, not a sequence"):
        tune_dpsgd(X[:100], y[:100], X[100:], y[100:], **kw, clips=1.0)
    with pytest.raises(InvalidInput, match=r"steps=\(\) is empty"):
        tune_dpsgd(X[:100], y[:100], X[100:], y[100:], **kw, steps=())
    with pytest.raises(InvalidInput, match=r"X_val=\(100, 1\) has 1 columns for 20 in X"):
        tune_dpsgd(X[:100], y[:100], X[100:, :1], y[100:], **kw)
    with pytest.raises(InvalidInput, match="target_factory=.* is not callable"):
        tune_dpsgd(X[:100], y[:100], X[100:], y[100:], rho=1.0, noise="local",
                   target_factory=Simulation(rng=0))
