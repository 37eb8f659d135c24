"""Unbiasedness of the debiased moments and gradient (single and multi-vector), by Monte Carlo.

Features are fixed; the replications redraw the phases and the noise. A
coordinate passes when its mean error is within 3 standard errors.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from spatialdp.privacy import Simulation
from spatialdp.regression import (
    Modulation,
    clip_rows,
    debiased_covariance,
    debiased_cross_moment,
    random_directions,
    transform_clients,
    unbiased_gradient,
)
from spatialdp.regression.regularization import noise_variances

K, D, REPS = 300, 4, 1500

BETA = np.array([0.5, 0.2, -0.1, 0.4])

MODULATIONS = {
    "single": Modulation(alpha=0.3, lam=2.0, omega=1.5, n_directions=1, radius=1.5),
    "multi": Modulation(alpha=0.3, lam=2.0, omega=1.5, n_directions=3, radius=1.5),
}


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    X = clip_rows(rng.normal(size=(K, D)), 1.5)
    y = X @ np.array([1.0, -0.5, 0.3, 0.0]) + 0.3 * rng.normal(size=K)
    return X, y


def _replicate(X: np.ndarray, y: np.ndarray, mod: Modulation, beta: np.ndarray,
               **kwargs) -> dict[str, np.ndarray]:
    """One transform of REPS stacked copies of the clients, then the estimators per copy."""
    V = random_directions(D, mod.n_directions, rng=3)
    big = transform_clients(np.tile(X, (REPS, 1)), np.tile(y, REPS), modulation=mod,
                            directions=V, rho=2.0, target=Simulation(rng=1000), **kwargs)
    out: dict[str, list[np.ndarray]] = {"S": [], "S_raw": [], "b": [], "G": []}
    for r in range(REPS):
        rows = slice(r * K, (r + 1) * K)
        rep = replace(big, features=big.features[rows], labels=big.labels[rows])
        out["S"].append(debiased_covariance(rep))
        out["S_raw"].append(debiased_covariance(rep, modulation_correction=False))
        out["b"].append(debiased_cross_moment(rep))
        out["G"].append(unbiased_gradient(rep, beta))
    return {k: np.array(v) for k, v in out.items()}


@pytest.fixture(scope="module")
def replications(data) -> dict[str, dict[str, np.ndarray]]:
    X, y = data
    return {name: _replicate(X, y, mod, BETA) for name, mod in MODULATIONS.items()}


def _z(samples: np.ndarray, truth: np.ndarray) -> np.ndarray:
    se = samples.std(axis=0, ddof=1) / math.sqrt(samples.shape[0])
    return np.abs(samples.mean(axis=0) - truth) / se




@pytest.mark.parametrize("name", sorted(MODULATIONS))
def test_debiased_moments_and_gradient_are_unbiased(data, replications, name):
    X, y = data
    beta = BETA
    out = replications[name]
    Sigma = X.T @ X / K
    cross = y @ X / K
    assert _z(out["S"], Sigma).max() < 3.0
    assert _z(out["b"], cross).max() < 3.0
    assert _z(out["G"], Sigma @ beta - cross).max() < 3.0


@pytest.mark.parametrize("name", sorted(MODULATIONS))
def test_negative_control_without_the_lambda_squared_correction_is_biased(data, replications,
                                                                         name):
    X, _ = data
    mod = MODULATIONS[name]
    out = {"S": replications[name]["S_raw"]}
    z = _z(out["S"], X.T @ X / K)
    assert z.max() > 10.0  # fails the 3-SE test by far
    # the bias is exactly lambda^2 / (2m (1-alpha)^2) along each direction
    V = random_directions(D, mod.n_directions, rng=3)
    expected = mod.modulation_variance / (1 - mod.alpha) ** 2 * (V.T @ V)
    bias = out["S"].mean(axis=0) - X.T @ X / K
    se = out["S"].std(axis=0, ddof=1) / math.sqrt(REPS)
    assert np.all(np.abs(bias - expected) < 3.0 * se)


def test_noise_model_matches_monte_carlo(data, replications):
    X, y = data
    mod = MODULATIONS["single"]
    out = replications["single"]
    rep = transform_clients(X, y, modulation=mod, rho=2.0, target=Simulation(rng=0))
    v_S, v_b = noise_variances(K, D, sigma=rep.sigma, alpha=mod.alpha, lam=mod.lam,
                               feature_scale=float(np.trace(X.T @ X / K)) / D,
                               label_second_moment=float(np.mean(y**2)))
    off = ~np.eye(D, dtype=bool)
    measured_S = out["S"].var(axis=0, ddof=1)[off].mean()
    measured_b = out["b"].var(axis=0, ddof=1).mean()
    # variance estimates from 1500 replications: relative SE about 4%
    assert abs(measured_S / v_S - 1) < 0.15
    assert abs(measured_b / v_b - 1) < 0.15


def test_private_labels_keep_the_cross_moment_unbiased(data):
    X, y = data
    mod = Modulation(alpha=0.0, lam=1.0, radius=1.5)
    b = _replicate(X, y, mod, BETA, label_bound=3.0, label_rho=0.5)["b"]
    assert _z(b, np.clip(y, -3, 3) @ X / K).max() < 3.0


def test_sensitivity_bounds_every_pair_and_is_tighter_than_the_lipschitz_bound():
    rng = np.random.default_rng(5)
    mod = Modulation(alpha=0.2, lam=1.0, omega=3.0, n_directions=2, radius=1.0)
    V = random_directions(4, 2, rng=1)
    worst = 0.0
    for _ in range(5):
        x1 = clip_rows(rng.normal(size=(100_000, 4)) * 3, 1.0)
        x2 = clip_rows(rng.normal(size=(100_000, 4)) * 3, 1.0)
        x2[::2] = -x1[::2]  # antipodal pairs, the worst case of the linear part
        ph = rng.uniform(0, 2 * np.pi, (100_000, 2))
        gap = np.linalg.norm(
            _mod(x1, V, mod, ph) - _mod(x2, V, mod, ph), axis=1).max()
        worst = max(worst, gap)
    assert worst <= mod.sensitivity
    assert worst > 0.85 * mod.sensitivity  # the bound is nearly attained
    assert mod.sensitivity < 0.7 * mod.lipschitz_sensitivity


def _mod(x, V, mod, ph):
    from spatialdp.regression import modulate
    return modulate(x, V, mod, ph)


def test_multi_vector_noise_reduction_factor():
    """The noise falls by the ratio of sensitivities: sqrt(m) only in a limit."""
    m = 4
    single = Modulation(alpha=0.5, lam=1.0, omega=1.0, radius=1.0)
    multi = Modulation(alpha=0.5, lam=1.0, omega=1.0, n_directions=m, radius=1.0)
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 6)), rng.normal(size=50)
    s1 = transform_clients(X, y, modulation=single, rho=0.5, target=Simulation(rng=0)).sigma
    s4 = transform_clients(X, y, modulation=multi, rho=0.5, target=Simulation(rng=0)).sigma
    factor = s1 / s4
    # (2R(1-a) + 2 lam min(1, R w)) / (2R(1-a) + 2 lam min(1, R w / sqrt m)) = 3 / 2
    assert factor == pytest.approx(1.5, rel=1e-6)
    assert factor < math.sqrt(m)
    # the stated sqrt(m) is approached only when the (1 - alpha) term vanishes and R w <= 1
    limit = (Modulation(alpha=0.999999, lam=1.0, omega=1.0, radius=1.0).sensitivity
             / Modulation(alpha=0.999999, lam=1.0, omega=1.0, n_directions=m,
                          radius=1.0).sensitivity)
    assert limit == pytest.approx(math.sqrt(m), rel=1e-5)
    # measured: the empirical noise of the reports scales the same way
    zeros = np.zeros((20_000, 6))
    n1 = transform_clients(zeros, np.zeros(20_000), modulation=Modulation(
        alpha=0.5, radius=1.0), rho=0.5, target=Simulation(rng=1)).features.std()
    assert n1 == pytest.approx(Modulation(alpha=0.5, radius=1.0).sensitivity, rel=0.02)


# --------------------------------------------------------------------------- refusals


def test_clip_rows_refuses_junk_and_clips_huge_rows_without_overflow():
    from spatialdp.exceptions import InvalidInput
    from spatialdp.regression import clip_rows

    with pytest.raises(InvalidInput, match=r"radius=\[2.0\] is a list"):
        clip_rows(np.ones((2, 2)), [2.0])
    with pytest.raises(InvalidInput, match="radius=inf is not finite"):
        clip_rows(np.ones((2, 2)), math.inf)
    with pytest.raises(InvalidInput, match="radius=np.True_ is a bool"):
        clip_rows(np.ones((2, 2)), np.True_)
    with pytest.raises(InvalidInput, match="X has 1 NaN"):
        clip_rows(np.array([[np.nan, 1.0]]), 1.0)
    with pytest.raises(InvalidInput, match="X has shape"):
        clip_rows(0, 1.0)
    out = clip_rows(np.array([[1e308, 1e308], [0.0, 0.0], [0.3, 0.4]]), 1.0)
    assert np.linalg.norm(out[0]) == pytest.approx(1.0)
    assert out[1:].tolist() == [[0.0, 0.0], [0.3, 0.4]]


def test_projections_refuse_junk():
    from spatialdp.exceptions import InvalidInput
    from spatialdp.regression import project_ball, project_psd

    with pytest.raises(InvalidInput, match="floor=-1 is below the limit >= 0"):
        project_psd(np.array([[1.0, 2.0], [2.0, 1.0]]), floor=-1)
    with pytest.raises(InvalidInput, match=r"S=\(2, 3\) is not a square matrix"):
        project_psd(np.ones((2, 3)))
    with pytest.raises(InvalidInput, match="S has shape"):
        project_psd(0.5)
    with pytest.raises(InvalidInput, match="S has 4 NaN"):
        project_psd(np.full((2, 2), np.nan))
    with pytest.raises(InvalidInput, match="beta has 1 NaN"):
        project_ball([math.nan, 1.0], math.inf)
    with pytest.raises(InvalidInput, match="radius=-1.0 is below"):
        project_ball([1.0, 1.0], -1.0)
    assert np.linalg.norm(project_ball([1e308, 1e308], 2.0)) == pytest.approx(2.0)
    assert project_psd(np.array([[1.0, 0.0], [0.0, -2.0]]), floor=0.5).tolist() == [
        [1.0, 0.0], [0.0, 0.5]]


def test_modulate_and_random_directions_refuse_junk():
    from spatialdp.exceptions import InvalidInput
    from spatialdp.regression import modulate, random_directions

    X = np.ones((4, 3)) / 2
    with pytest.raises(InvalidInput, match="modulation='mod' is a str, not a Modulation"):
        modulate(X, np.eye(3)[:1], "mod", np.zeros((4, 1)))
    with pytest.raises(InvalidInput, match="phases has 4 NaN"):
        modulate(X, np.eye(3)[:1], Modulation(lam=1.0), np.full((4, 1), np.nan))
    with pytest.raises(InvalidInput, match=r"phases=\(4, 2\) is not \(4, 1\)"):
        modulate(X, np.eye(3)[:1], Modulation(lam=1.0), np.zeros((4, 2)))
    with pytest.raises(InvalidInput, match=r"orthogonal_to=\(2,\) has length 2 for "
                                           "n_features=3"):
        random_directions(3, 1, rng=0, orthogonal_to=np.ones(2))
    with pytest.raises(InvalidInput, match="n_features=9223372036854775808 is above the limit"):
        random_directions(2**63, 1)
    V = random_directions(3, 1, rng=0, orthogonal_to=[1e308, 0.0, 1e308])
    assert abs(float(V[0] @ [1.0, 0.0, 1.0])) < 1e-12
