"""The fast one-shot fit gives the answers of the straightforward computation.

* the fused pass over the reports (``A^T A``, ``w @ A``, column sums) equals three
  separate numpy products, for any block size, and bit for bit the sums of adding
  block after block; the centred moments of a fit equal their textbook formulas;
* the ridge rule's risk table, now five sums per (ridge, draw) on a cached
  unit-scale spectrum, equals the direct simulation (every draw rotated and solved)
  to 1e-7 relative, and the chosen ridge is the same grid point;
* the sandwich covariance is computed only when the standard errors are asked
  for, once, and equals the eager computation; its per-client moments equal their
  definition;
* the whole fit (coefficients, intercept, ridge, cap) equals the straightforward
  computation (three separate products over all reports, the label mean twice, the
  ridge rule always run) to 1e-12 relative, with and without an intercept, public or
  noised labels, a chosen or a given ridge; a given ridge and cap skip the ridge rule;
  reports holding NaN or infinity are refused.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from spatialdp.exceptions import InvalidInput
from spatialdp.privacy import Simulation
from spatialdp.regression import Modulation, fit_one_shot, transform_clients
from spatialdp.regression import covariance as covariance_module
from spatialdp.regression import oneshot as oneshot_module
from spatialdp.regression._blocks import (
    block_gram,
    block_rows,
    fused_moments,
    symmetric_from_upper,
)
from spatialdp.regression.covariance import fit_covariance, sandwich_covariance
from spatialdp.regression.oneshot import centered_moments, mean_noise_covariance
from spatialdp.regression.regularization import (
    RIDGE_GRID,
    RISK_DRAWS,
    _risk_table,
    _standard_draws,
    bayes_ridge,
    regularization_from_moments,
    signal_posterior,
)


def _reports(K: int = 20_000, d: int = 3, rho: float = 20.0, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-0.5, 0.5, size=(K, d)) + 0.3
    y = X @ np.linspace(1.0, -1.0, d) + 0.5 * rng.normal(size=K) + 2.0
    return transform_clients(X, y, modulation=Modulation(alpha=0.1, lam=0.5, radius=2.0),
                             rho=rho, target=Simulation(rng=seed + 1))


# --------------------------------------------------------------------------- fused pass


@pytest.mark.parametrize(("K", "d", "block"), [(10_000, 5, None), (1_000, 3, 7), (3, 4, None),
                                               (5_000, 300, None), (4_096, 20, 4_096)])
def test_fused_pass_equals_three_separate_products(K, d, block):
    rng = np.random.default_rng(K + d)
    A, w = rng.normal(size=(K, d)) + 1.0, rng.normal(size=K)
    second, cross, total = fused_moments(A, w, block=block)
    scale = np.abs(A).max() ** 2 * K
    assert np.abs(second - A.T @ A).max() < 1e-13 * scale
    assert np.abs(cross - w @ A).max() < 1e-13 * scale
    assert np.abs(total - A.sum(axis=0)).max() < 1e-13 * scale


@pytest.mark.parametrize(("K", "d", "block"), [(200_000, 20, 4_096), (30_000, 300, None),
                                               (70_000, 1, 1_000), (5, 2, 2)])
def test_fused_sums_equal_adding_block_after_block_exactly(K, d, block):
    # the per-block products wait in slots (several blocks per call) and are summed in
    # block order: bit for bit the sums of adding each block's products, one block at a
    # time, to running totals (several collections)
    rng = np.random.default_rng(d)
    A, w = rng.normal(size=(K, d)) + 0.5, rng.normal(size=K)
    rows = block_rows(d) if block is None else block
    second, cross, total = np.zeros((d, d)), np.zeros(d), np.zeros(d)
    gram = np.zeros((d, d))
    for start in range(0, K, rows):
        part = A[start:start + rows]
        cross += w[start:start + rows] @ part
        block_gram(part, gram)
        second += np.triu(gram)
        total += np.ones(part.shape[0]) @ part
    second = symmetric_from_upper(second)
    got = fused_moments(A, w, block=block)
    for value, expected in zip(got, (second, cross, total), strict=True):
        np.testing.assert_array_equal(value, expected)


@pytest.mark.parametrize("layout", ["fortran", "column_view", "row_step"])
def test_fused_pass_reads_strided_reports_without_copying_them(layout):
    # the full blocks are strided views of the reports, whatever their memory layout
    rng = np.random.default_rng(5)
    base, w = rng.normal(size=(2 * 9_000, 23)) + 1.0, rng.normal(size=2 * 9_000)
    A = {"fortran": np.asfortranarray(base[:9_000, :20]), "column_view": base[:9_000, 2:22],
         "row_step": base[::2, :20]}[layout]
    w = w[::2] if layout == "row_step" else w[:9_000]
    second, cross, total = fused_moments(A, w, block=1_000)
    np.testing.assert_allclose(second, A.T @ A, rtol=1e-13)
    np.testing.assert_allclose(cross, w @ A, rtol=1e-12)
    np.testing.assert_allclose(total, A.sum(axis=0), rtol=1e-13)
    np.testing.assert_array_equal(second, second.T)


def test_blocks_stay_near_640_kB_whatever_the_number_of_features():
    assert block_rows(20) == 4_096
    assert block_rows(1) * 8 <= 640 * 1024
    assert block_rows(10_000) == 256  # never fewer rows than that


def test_centred_moments_equal_their_textbook_formulas():
    rep = _reports()
    G, y, K = rep.features, rep.labels, rep.n_clients
    mod = rep.modulation
    scale = 1.0 / (1.0 - mod.alpha)
    x_mean = G.mean(axis=0) * scale
    S = (G.T @ G / K - mod.modulation_variance * rep.directions.T @ rep.directions
         - rep.sigma**2 * np.eye(3)) * scale**2
    S = S - np.outer(x_mean, x_mean) + mean_noise_covariance(rep)
    b = (G.T @ y / K) * scale - y.mean() * x_mean
    mom = centered_moments(rep)
    np.testing.assert_allclose(mom.x_mean, x_mean, rtol=0, atol=1e-12)
    np.testing.assert_allclose(mom.S, S, rtol=0, atol=1e-11)
    np.testing.assert_allclose(mom.b, b, rtol=0, atol=1e-11)


# --------------------------------------------------------------------------- the ridge rule


def _direct_risk_table(d, s, signal_norm2s, v_S, v_b, ridges, *, cap, psd, draws, seed):
    """The simulation as first written: rotate every draw, solve every ridge, no algebra."""
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((draws, d, d)) * math.sqrt(v_S / 2.0)
    S = s * np.eye(d) + noise + np.swapaxes(noise, 1, 2)
    e = rng.standard_normal((draws, d)) * math.sqrt(v_b)
    w, Q = np.linalg.eigh(S)
    if psd:
        w = np.maximum(w, 0.0)
    size = np.sqrt(np.maximum(signal_norm2s, 0.0))[:, None, None, None]
    q1 = Q[:, 0, :][None, None]
    qb = np.einsum("nji,nj->ni", Q, e)[None, None] + s * size * q1
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        z = qb / (w[None, None] + ridges[None, :, None, None])
        norm2 = np.sum(z * z, axis=3)
        shrink = np.minimum(1.0, cap / np.maximum(np.sqrt(norm2), 1e-300))
        cross = np.sum(z * q1, axis=3) * size[..., 0]
        risk = s * (shrink**2 * norm2 - 2.0 * shrink * cross + size[..., 0] ** 2)
    risk = np.where(np.isfinite(risk), np.maximum(risk, 0.0), 1e300)
    return risk.mean(axis=2)


@pytest.mark.parametrize("seed", range(40))
def test_risk_table_and_chosen_ridge_equal_the_direct_simulation(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 25))
    s, v_S, v_b = (float(10 ** rng.uniform(lo, hi)) for lo, hi in ((-3, 1), (-8, 1), (-8, 1)))
    y2 = float(10 ** rng.uniform(-1, 1))
    cap = math.inf if seed % 3 == 0 else 2.0 * math.sqrt(y2 / s)
    grid, weights = signal_posterior(d, s, y2, v_b, float(10 ** rng.uniform(-6, 1)))
    ridges = s * RIDGE_GRID
    for psd in (True, False):
        new = _risk_table(d, s, grid, v_S, v_b, ridges, cap=cap, psd=psd, draws=RISK_DRAWS,
                          seed=0)
        old = _direct_risk_table(d, s, grid, v_S, v_b, ridges, cap=cap, psd=psd,
                                 draws=RISK_DRAWS, seed=0)
        np.testing.assert_allclose(new, old, rtol=1e-7, atol=1e-12 * s * max(grid.max(), 1.0))
    mu, _ = bayes_ridge(d, s, v_S, v_b, grid, weights, cap=cap)
    old = _direct_risk_table(d, s, grid, v_S, v_b, ridges, cap=cap, psd=True, draws=RISK_DRAWS,
                             seed=0)
    assert mu == ridges[int(np.argmin(weights @ old))]


def test_the_cached_draws_are_read_only_and_reused():
    w0, terms = _standard_draws(4, RISK_DRAWS, 0)
    assert _standard_draws(4, RISK_DRAWS, 0)[0] is w0
    assert terms.shape == (3, RISK_DRAWS, 4)
    with pytest.raises(ValueError, match="read-only"):
        w0[0] = 1.0


# --------------------------------------------------------------------------- deferred covariance


def test_fit_defers_the_sandwich_pass_until_standard_errors_are_asked(monkeypatch):
    calls = []
    real = covariance_module._weighted_moments

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(covariance_module, "_weighted_moments", counted)
    rep = _reports()
    fit = fit_one_shot(rep, ridge=None, norm_cap=None)
    assert calls == []  # the fit itself made no pass for its covariance
    assert fit.inference_note.startswith("intervals:")  # known at once
    copy = replace(fit, feature_names=("a", "b", "c"))
    bse = fit.bse
    assert calls == [1]
    fit.conf_int()
    fit.summary()
    assert calls == [1]  # computed once, then kept
    assert isinstance(fit.covariance, np.ndarray)
    np.testing.assert_array_equal(copy.bse, bse)  # a copy made before computes the same

    mom = centered_moments(rep)
    eager, note = fit_covariance(rep, mom.S, fit.coef, float(np.linalg.norm(fit.coef)),
                                 ridge=0.0, cap=np.inf, psd=True, fit_intercept=True)
    np.testing.assert_allclose(fit.cov_params, eager, rtol=1e-12, atol=0)
    assert note == fit.inference_note


def test_a_fit_without_standard_errors_makes_no_pass_and_says_why(monkeypatch):
    calls = []
    monkeypatch.setattr(covariance_module, "_weighted_moments",
                        lambda *a, **k: calls.append(1))
    fit = fit_one_shot(_reports(K=50, rho=0.01))  # noise swamps the signal: PSD binds
    assert np.isnan(fit.bse).all()
    assert fit.inference_note.startswith("no standard errors")
    assert calls == []


def test_sandwich_with_the_fits_mean_equals_the_one_it_computes():
    rep = _reports()
    fit = fit_one_shot(rep, ridge=None, norm_cap=None)
    mom = centered_moments(rep)
    bread = (mom.S + mom.S.T) / 2.0
    np.testing.assert_allclose(sandwich_covariance(rep, fit.coef, bread, x_mean=mom.x_mean),
                               sandwich_covariance(rep, fit.coef, bread), rtol=1e-12, atol=0)


def test_per_client_moments_of_the_sandwich_equal_their_definition():
    rep = _reports(K=10_001, d=4)
    coef, offset = np.array([0.5, -1.0, 0.25, 2.0]), 0.7
    mean, second = covariance_module._weighted_moments(rep, coef, offset)
    r = rep.labels - offset - rep.features @ coef / (1.0 - rep.modulation.alpha)
    z = r[:, None] * np.c_[np.ones(rep.n_clients), rep.features]
    np.testing.assert_allclose(mean, z.mean(axis=0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(second, z.T @ z / rep.n_clients, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- label moment


def test_label_moment_is_exact_and_makes_no_client_sized_temporary():
    import tracemalloc

    from spatialdp.regression._blocks import centred_squares
    from spatialdp.regression.server import debiased_label_moment

    rng = np.random.default_rng(3)
    y = rng.normal(size=100_003) * 2.0 + 1e3  # a mean far from 0: centring matters
    assert math.isclose(centred_squares(y, float(y.mean()), block=1_000),
                        float(np.sum((y - y.mean()) ** 2)), rel_tol=1e-12)
    K = 400_000
    rep = transform_clients(np.zeros((K, 1)), rng.normal(size=K), modulation=Modulation(),
                            rho=1.0, target=Simulation(rng=0))
    expected = float(np.mean((rep.labels - rep.labels.mean()) ** 2))
    tracemalloc.start()
    try:
        got = debiased_label_moment(rep, bounded=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert math.isclose(got, expected, rel_tol=1e-12)
    assert peak < K * 8 / 4  # blocks of 32,768 labels, not a copy of all K (3.2 MB)


# --------------------------------------------------------------------------- whole fit


def _straightforward_fit(rep, *, fit_intercept, ridge, cap):
    """The one-shot fit as first written: separate products over all K reports, no blocks."""
    G, y, K, d = rep.features, rep.labels, rep.n_clients, rep.n_features
    mod, V = rep.modulation, rep.directions
    scale = 1.0 / (1.0 - mod.alpha)
    known = mod.modulation_variance * (V.T @ V) + rep.sigma**2 * np.eye(d)
    S, b = (G.T @ G / K - known) * scale**2, (G.T @ y / K) * scale
    x_mean, y_mean = np.zeros(d), 0.0
    tau2 = rep.label_sigma**2
    y2 = float(np.mean(y**2)) - tau2
    if fit_intercept:
        x_mean, y_mean = G.mean(axis=0) * scale, float(y.mean())
        S = S - np.outer(x_mean, x_mean) + known * scale**2 / K
        b = b - y_mean * x_mean
        y2 = float(np.mean((y - y_mean) ** 2)) - tau2 * (1.0 - 1.0 / K)
    y2 = min(max(y2, 0.0), rep.label_bound**2)
    reg = regularization_from_moments(S, b, n_clients=K, sigma=rep.sigma, alpha=mod.alpha,
                                      lam=mod.lam, radius=mod.radius, label_second_moment=y2,
                                      label_sigma=rep.label_sigma)
    mu = reg.ridge if ridge == "auto" else ridge
    cap = reg.norm_cap if cap == "auto" else cap
    w, Q = np.linalg.eigh((S + S.T) / 2.0)
    beta = np.linalg.lstsq((Q * np.maximum(w, 0.0)) @ Q.T + mu * np.eye(d), b, rcond=None)[0]
    norm = float(np.linalg.norm(beta))
    beta = beta if norm <= cap else beta * (cap / norm)
    return beta, y_mean - float(x_mean @ beta), mu, cap


@pytest.mark.parametrize("fit_intercept", [True, False])
@pytest.mark.parametrize("noised_labels", [False, True])
@pytest.mark.parametrize("given", [False, True])
def test_fit_equals_the_straightforward_computation(fit_intercept, noised_labels, given):
    K, d = 30_011, 20  # several fused blocks of 4,096 rows and a partial one
    rng = np.random.default_rng(7)
    X = rng.normal(size=(K, d)) * 0.5 + 0.2
    y = X @ np.linspace(-1.0, 1.0, d) + 0.5 * rng.normal(size=K) + 3.0
    labels = {"label_bound": 6.0, "label_rho": 4.0} if noised_labels else {}
    rep = transform_clients(X, y, modulation=Modulation(alpha=0.1, lam=1.0, radius=3.0),
                            rho=50.0, target=Simulation(rng=1), **labels)
    ridge, cap = (0.05, 4.0) if given else ("auto", "auto")
    fit = fit_one_shot(rep, ridge=ridge, norm_cap=cap, fit_intercept=fit_intercept)
    coef, intercept, mu, cap_used = _straightforward_fit(rep, fit_intercept=fit_intercept,
                                                         ridge=ridge, cap=cap)
    assert np.linalg.norm(coef) > 0.1  # a real fit, not the zero vector
    np.testing.assert_allclose(fit.coef, coef, rtol=1e-12, atol=1e-12 * np.abs(coef).max())
    assert math.isclose(fit.intercept, intercept, rel_tol=1e-12, abs_tol=1e-12)
    assert math.isclose(fit.ridge, mu, rel_tol=1e-12)  # the same point of the rule's grid
    assert math.isclose(fit.norm_cap, cap_used, rel_tol=1e-12)


def test_a_given_ridge_and_cap_skip_the_ridge_rule(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the ridge rule ran although ridge and cap were given")

    monkeypatch.setattr(oneshot_module, "regularization_from_moments", refuse)
    rep = _reports()
    fit_one_shot(rep, ridge=0.1, norm_cap=5.0)
    fit_one_shot(rep, ridge=None, norm_cap=None)
    with pytest.raises(AssertionError, match="the ridge rule ran"):
        fit_one_shot(rep, ridge=0.1)  # the cap is still chosen by the rule


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_reports_holding_nan_or_infinity_are_refused(bad):
    rep = _reports(K=1_000)
    features = rep.features.copy()
    features[17, 1] = bad
    with pytest.raises(InvalidInput, match="hold NaN or infinite features or labels"):
        fit_one_shot(replace(rep, features=features))
    labels = rep.labels.copy()
    labels[3] = bad
    with pytest.raises(InvalidInput, match="hold NaN or infinite features or labels"):
        centered_moments(replace(rep, labels=labels))
