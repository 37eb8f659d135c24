"""The sparse spatial Fay-Herriot model agrees with the dense one, and the dispatch uses it."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse

from spatialdp._blas import single_blas
from spatialdp.datasets import us_states_partition
from spatialdp.exceptions import InvalidInput
from spatialdp.smooth import estimate as estimate_module
from spatialdp.smooth import small_area_estimates
from spatialdp.smooth.fay_herriot import AreaFit
from spatialdp.smooth.sparse_spatial import (
    SparseAreaModel,
    _exact_diagonal,
    _sampled_diagonal,
    fit_sparse,
    sparse_predict,
)
from spatialdp.smooth.spatial import SarModel, fit_sar, sar_predict
from spatialdp.smooth.weights import row_standardised
from tests._loss_report import simulated_loss_report

SIDE = 12  # a 12 x 12 lattice: 144 areas, about 60% of them published


def lattice(side: int) -> sparse.csr_array:
    """The rook adjacency of a side x side lattice."""
    path = sparse.diags_array([np.ones(side - 1), np.ones(side - 1)], offsets=[-1, 1])
    eye = sparse.identity(side)
    return sparse.csr_array(sparse.kron(path, eye) + sparse.kron(eye, path))


def simulated(side: int, seed: int, kind: str = "sar", rho: float = 0.6, s2u: float = 0.3,
              beta: tuple[float, float] = (1.0, 0.5), share: float = 0.6
              ) -> tuple[SparseAreaModel, np.ndarray]:
    """A sparse model with SAR or CAR effects drawn with ``(s2u, rho)``; and the truths."""
    rng = np.random.default_rng(seed)
    A = lattice(side)
    n = A.shape[0]
    W = row_standardised(A)
    X = np.column_stack([np.ones(n), rng.normal(size=n)])
    probe = SparseAreaModel(np.zeros(1), X, np.ones(1), W, np.eye(1, n, dtype=bool)[0], kind)
    Q = probe.precision(rho).toarray()
    u = np.linalg.cholesky(s2u * np.linalg.inv(Q)) @ rng.normal(size=n)
    truth = X @ np.array(beta) + u
    observed = rng.random(n) < share
    d = rng.uniform(0.05, 0.5, n)[observed]
    y = truth[observed] + rng.normal(0.0, np.sqrt(d))
    return SparseAreaModel(y, X, d, W, observed, kind), truth


@pytest.fixture(scope="module")
def pair() -> tuple[SparseAreaModel, SarModel]:
    model, _ = simulated(SIDE, 0)
    dense = SarModel(model.y, model.X_all, model.d, model.W.toarray(), model.observed)
    return model, dense


@pytest.fixture(scope="module")
def dense_fit(pair) -> AreaFit:
    with single_blas():
        return fit_sar(pair[1])


@pytest.mark.parametrize("method", ["REML", "ML"])
def test_the_sparse_likelihood_equals_the_dense_one(pair, method):
    sparse_model, dense = pair
    for s2u, rho in ((0.3, 0.6), (0.05, -0.4), (1.0, 0.95), (0.0, 0.3)):
        assert sparse_model.loglik(s2u, rho, method) == pytest.approx(
            dense.loglik(s2u, rho, method), rel=1e-10, abs=1e-8)


def test_the_sparse_fit_finds_the_dense_maximum(pair, dense_fit):
    ours, theirs = fit_sparse(pair[0]), dense_fit
    assert ours.s2u == pytest.approx(theirs.s2u, rel=1e-4)
    assert ours.rho == pytest.approx(theirs.rho, abs=1e-4)
    assert ours.loglik == pytest.approx(theirs.loglik, abs=1e-6)  # 1e-6: about 1e-6 SE^2
    # the observed information is the expected one to first order: SEs within 30%
    assert ours.parameter_se == pytest.approx(theirs.parameter_se, rel=0.3)


def test_sparse_eblups_and_known_parameter_mse_equal_the_dense_ones(pair, dense_fit):
    sparse_model, dense = pair
    fit = dense_fit
    eblup, mse, own, synthetic, _ = sparse_predict(sparse_model, fit)
    dense_eblup, dense_mse, dense_own, dense_synthetic = sar_predict(dense, fit)
    np.testing.assert_allclose(eblup, dense_eblup, rtol=0, atol=1e-8)
    np.testing.assert_allclose(own, dense_own, rtol=0, atol=1e-8)
    np.testing.assert_allclose(synthetic, dense_synthetic, rtol=0, atol=1e-12)
    g1, g2 = _dense_g1_g2(dense, fit)
    np.testing.assert_allclose(mse, g1 + g2, rtol=1e-8)
    # what the sparse MSE leaves out (2 g3 - g4) is small with a few hundred areas
    gap = dense_mse / mse - 1.0
    assert gap.min() > -1e-8
    assert gap.max() < 0.10


def _dense_g1_g2(dense: SarModel, fit: AreaFit) -> tuple[np.ndarray, np.ndarray]:
    """The dense ``g1`` (conditional variance of u) and ``g2`` (cost of estimating beta)."""
    obs = dense.observed
    C = fit.s2u * dense.structure(fit.rho)
    V = C[np.ix_(obs, obs)] + np.diag(dense.d)
    weight = C[:, obs] @ np.linalg.inv(V)
    g1 = np.diag(C) - np.einsum("ij,ij->i", weight, C[:, obs])
    dmat = dense.X_all - weight @ dense.X
    return g1, np.einsum("ij,jk,ik->i", dmat, fit.beta_cov, dmat)


@pytest.mark.parametrize("kind", ["sar", "car"])
def test_the_sampled_inverse_diagonal_is_unbiased_within_its_standard_error(kind):
    model, _ = simulated(12, 3, kind=kind, rho=0.8 if kind == "sar" else 0.9)
    K, lu = model.posterior(0.3, 0.8 if kind == "sar" else 0.9)
    exact = _exact_diagonal(lu, K.shape[0])
    samples = 400
    estimate = _sampled_diagonal(K, lu, samples)
    # the estimate is 1/K_ii + a mean of squares: its SE is at most sd(square) / sqrt(S),
    # and sd <= sqrt(2) * mean for a squared normal
    se = np.sqrt(2.0) * (exact - 1.0 / K.diagonal()) / np.sqrt(samples)
    z = (estimate - exact) / se
    assert np.abs(z).max() < 4.5


@pytest.fixture(scope="module")
def states_report():
    states = us_states_partition()
    return states, simulated_loss_report(states)


def test_the_spatial_model_goes_sparse_beyond_the_dense_limit(states_report, monkeypatch):
    states, report = states_report
    dense = small_area_estimates(report, model="sfh", weights=states, include_suppressed=True,
                                 client_variance=1 / 3)
    monkeypatch.setattr(estimate_module, "DENSE_LIMIT", 10)
    sparse_fit = small_area_estimates(report, model="sfh", weights=states,
                                      include_suppressed=True, client_variance=1 / 3)
    assert "sparse" in sparse_fit.mse_method
    assert "sparse" not in dense.mse_method
    assert sparse_fit.rho == pytest.approx(dense.rho, abs=1e-4)
    np.testing.assert_allclose(sparse_fit.frame.eblup, dense.frame.eblup, atol=1e-5)
    assert (sparse_fit.frame.mse <= dense.frame.mse * (1 + 1e-6)).all()
    assert sparse_fit.spatial_test is not None
    assert sparse_fit.moran is None


def test_a_sparse_fit_refuses_the_bootstrap_mse(states_report, monkeypatch):
    states, report = states_report
    monkeypatch.setattr(estimate_module, "DENSE_LIMIT", 10)
    with pytest.raises(InvalidInput, match="only available for the dense models"):
        small_area_estimates(report, model="sfh", weights=states, mse="bootstrap",
                             client_variance=1 / 3)
    with pytest.raises(InvalidInput, match="only available for the dense models"):
        small_area_estimates(report, model="car", weights=states, mse="bootstrap",
                             client_variance=1 / 3)
