"""Both sparse Cholesky backends give the same log-determinants, solves and samples."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse

from spatialdp.exceptions import InvalidInput
from spatialdp.smooth import cholesky
from spatialdp.smooth.cholesky import BACKENDS, NotPositiveDefinite, sparse_cholesky
from tests.test_smooth_sparse import simulated


def spd(n: int, seed: int) -> sparse.csc_array:
    """A sparse symmetric positive definite matrix."""
    B = sparse.random(n, n, density=0.08, random_state=seed)
    return sparse.csc_array(B @ B.T + 2.0 * sparse.identity(n))


@pytest.mark.parametrize("backend", BACKENDS)
def test_log_determinant_solve_and_inverse_root_are_exact(backend):
    A = spd(60, 1)
    dense = A.toarray()
    factor = sparse_cholesky(A, backend)
    assert factor.logdet == pytest.approx(np.linalg.slogdet(dense)[1], abs=1e-10)
    rhs = np.random.default_rng(0).normal(size=(60, 3))
    np.testing.assert_allclose(factor.solve(rhs), np.linalg.solve(dense, rhs), atol=1e-12)
    np.testing.assert_allclose(factor.solve(rhs[:, 0]), np.linalg.solve(dense, rhs[:, 0]),
                               atol=1e-12)
    root = factor.inverse_root(np.eye(60))
    np.testing.assert_allclose(root @ root.T, np.linalg.inv(dense), atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_indefinite_matrix_is_refused(backend):
    A = sparse.csc_array(np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(NotPositiveDefinite):
        sparse_cholesky(A, backend)


def test_a_factor_stays_right_after_another_matrix_of_its_pattern_is_factored():
    # CHOLMOD's symbolic analysis is shared by pattern; the numeric values are not.
    A = spd(50, 2)
    first = sparse_cholesky(A, "cholmod")
    second = sparse_cholesky(sparse.csc_array(A * 3.0), "cholmod")
    rhs = np.ones(50)
    np.testing.assert_allclose(first.solve(rhs), np.linalg.solve(A.toarray(), rhs), atol=1e-12)
    np.testing.assert_allclose(second.solve(rhs), np.linalg.solve(3 * A.toarray(), rhs),
                               atol=1e-12)
    np.testing.assert_allclose(first.solve(rhs), np.linalg.solve(A.toarray(), rhs), atol=1e-12)


def test_an_unknown_backend_is_refused():
    with pytest.raises(InvalidInput, match=r"backend='umfpack' is not one of .*\[sparse\]"):
        sparse_cholesky(sparse.identity(2, format="csc"), "umfpack")


@pytest.mark.parametrize("kind", ["sar", "car"])
def test_the_spatial_fit_is_the_same_on_both_backends(kind, monkeypatch):
    from spatialdp.smooth.sparse_spatial import fit_sparse

    fits = {}
    for backend in BACKENDS:
        monkeypatch.setattr(cholesky, "default_backend", lambda b=backend: b)
        model, _ = simulated(10, 4, kind=kind, rho=0.7)
        fits[backend] = fit_sparse(model)
    a, b = fits["cholmod"], fits["superlu"]
    assert a.loglik == pytest.approx(b.loglik, abs=1e-9)
    assert (a.s2u, a.rho) == pytest.approx((b.s2u, b.rho), rel=1e-6)
    np.testing.assert_allclose(a.fisher, b.fisher, rtol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_diagonal_matrix_needs_no_factorisation(backend):
    A = sparse.csc_array(sparse.diags_array([1.0, 4.0, 9.0]) + 0.0 * spd(3, 0))
    factor = sparse_cholesky(A, backend)
    assert type(factor).__name__ == "_DiagonalFactor"
    assert factor.logdet == pytest.approx(np.log(36.0))
    np.testing.assert_allclose(factor.solve(np.ones(3)), [1.0, 0.25, 1 / 9])
    root = factor.inverse_root(np.eye(3))
    np.testing.assert_allclose(root @ root.T, np.diag([1.0, 0.25, 1 / 9]))
    with pytest.raises(NotPositiveDefinite):
        sparse_cholesky(sparse.diags_array([1.0, -1.0]), backend)
