"""Spatial Fay-Herriot models on sparse precision matrices: SAR or CAR, tens of thousands of areas.

The area effects of ALL areas (published or suppressed) are Gaussian with
precision ``Q(rho) / s2u``:

* SAR (as :mod:`spatialdp.smooth.spatial`, ``sae::eblupSFH``):
  ``Q = (I - rho W)'(I - rho W)``, ``W`` row-standardised;
* CAR (:mod:`spatialdp.smooth.car`): ``Q = D_w - rho C``, ``C`` the binary
  adjacency and ``D_w`` its degrees.

Only published areas are observed: ``y = X_o beta + P u + e``, ``e`` of the
known variances ``d`` (``P`` picks the published areas), so
``V = D + s2u P Q^-1 P'``. Nothing dense of size ``n`` is ever formed: with
``K = Q + s2u P' D^-1 P`` (sparse; suppressed areas enter through ``Q`` only),

* ``log|V| = sum log d + log|K| - log|Q|`` (matrix determinant lemma);
* ``V^-1 z = D^-1 z - s2u D^-1 P K^-1 P' D^-1 z`` (Woodbury);
* ``E[u | y] = s2u K^-1 P' D^-1 (y - X b)`` for every area (the posterior
  precision of ``u`` is ``K / s2u``), and ``Var(u_i | y) = s2u (K^-1)_ii``.

Each likelihood evaluation costs two sparse LU factorisations (SuperLU,
COLAMD ordering): of ``K`` and of ``I - rho W`` (SAR) or ``Q`` (CAR).
``(s2u, rho)`` maximise the exact REML or ML likelihood (L-BFGS-B); their
standard errors come from the observed information (a finite-difference
Hessian of the log-likelihood).

**MSE.** ``g1 + g2``: the MSE of the BLUP with known ``(s2u, rho)``, exact
up to the diagonal of ``K^-1``; ``g1 = s2u (K^-1)_ii``, ``g2`` the cost of
estimating ``beta``. The second-order terms of the variance parameters
(``g3``, ``g4`` of :mod:`spatialdp.smooth.spatial`) are **not** included: they
are ``O(1 / m)`` in the number ``m`` of published areas and matter with few
of them (use the dense model there, up to ``DENSE_LIMIT`` areas). Up to
:data:`EXACT_DIAGONAL_LIMIT` areas the diagonal of ``K^-1`` is exact
(blocks of unit-vector solves); beyond it is the Rao-Blackwellised Monte
Carlo estimate of Sidén, Lindgren, Bolin & Villani (2018): with samples
``x ~ N(0, K^-1)`` (drawn by one solve each from ``z ~ N(0, K)``),
``(K^-1)_ii = 1 / K_ii + E[(sum_{j != i} K_ij x_j / K_ii)^2]``; the first term
is exact and only the (smaller) second is estimated, from
:data:`DIAGONAL_SAMPLES` samples with a fixed seed (post-processing of public
values: the output is reproducible).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray
from scipy import optimize, sparse

from spatialdp.smooth.car import car_adjacency
from spatialdp.smooth.cholesky import NotPositiveDefinite, SparseFactor, sparse_cholesky
from spatialdp.smooth.fay_herriot import LOG_2PI, AreaFit
from spatialdp.smooth.spatial import RHO_BOUND

__all__ = ["DIAGONAL_SAMPLES", "EXACT_DIAGONAL_LIMIT", "SparseAreaModel", "fit_sparse",
           "sparse_predict"]

FloatArray = NDArray[np.float64]

#: Up to this many areas the diagonal of ``K^-1`` (the MSE's ``g1``) is computed exactly.
EXACT_DIAGONAL_LIMIT = 4000
#: Monte Carlo samples of the Rao-Blackwellised diagonal estimate beyond that.
DIAGONAL_SAMPLES = 200
#: Newton steps before the fit falls back to L-BFGS-B.
NEWTON_STEPS = 40
#: Convergence: the Newton decrement (the predicted gain of the log-likelihood) below this.
NEWTON_TOLERANCE = 1e-7
#: Central-difference step on ``(log s2u, atanh(rho / RHO_BOUND))``.
_NEWTON_STEP = 1e-2
#: The largest Newton step in any coordinate.
_NEWTON_MAX_STEP = 1.0
#: Beyond this the transformed parameters stand for a boundary (s2u about 0, |rho| about 1).
_NEWTON_BOX = 20.0
#: Columns solved at once for the exact diagonal.
_BLOCK = 512
#: Relative finite-difference steps of the observed information.
_STEP = 1e-4


@dataclass(frozen=True)
class SparseAreaModel:
    """The data and the graph of a sparse spatial Fay-Herriot model.

    ``y`` and ``d`` hold the observed areas only; ``X_all``, ``W`` and
    ``observed`` every area. ``kind`` is ``"sar"`` (``W`` row-standardised)
    or ``"car"`` (the CAR uses the binary graph behind ``W``).

    Examples
    --------
    >>> W = sparse.csr_array(np.array([[0, 1, 0], [.5, 0, .5], [0, 1, 0]]))
    >>> m = SparseAreaModel(np.array([1.0, 2.0]), np.ones((3, 1)), np.array([.1, .1]), W,
    ...                     np.array([True, False, True]), "car")
    >>> m.precision(0.5).toarray().tolist()
    [[1.0, -0.5, 0.0], [-0.5, 2.0, -0.5], [0.0, -0.5, 1.0]]
    """

    y: FloatArray
    X_all: FloatArray
    d: FloatArray
    W: sparse.csr_array
    observed: NDArray[np.bool_]
    kind: str

    @property
    def X(self) -> FloatArray:
        """The design of the observed areas."""
        return self.X_all[self.observed]

    @cached_property
    def _pieces(self) -> tuple[sparse.csc_array, sparse.csc_array, sparse.csc_array]:
        """``(Q0, Q1, Q2)`` with ``Q(rho) = Q0 - rho Q1 + rho^2 Q2``."""
        n = self.W.shape[0]
        if self.kind == "car":
            C = car_adjacency(self.W)
            degree = np.asarray(C.sum(axis=1)).ravel()
            return (sparse.csc_array(sparse.diags_array(degree)), sparse.csc_array(C),
                    sparse.csc_array((n, n)))
        W = sparse.csc_array(self.W)
        return (sparse.csc_array(sparse.identity(n, format="csc")),
                sparse.csc_array(W + W.T), sparse.csc_array(W.T @ W))

    @cached_property
    def data_precision(self) -> FloatArray:
        """``diag(P' D^-1 P)``: ``1 / d`` on observed areas, 0 on the others."""
        m = np.zeros(self.observed.size)
        m[self.observed] = 1.0 / self.d
        return m

    @cached_property
    def _pattern(self) -> tuple[sparse.csc_array, FloatArray, NDArray[np.intp]]:
        """One CSC pattern for every ``Q(rho)`` and ``K``: ``(pattern, pieces' values, diagonal)``.

        The values of ``Q0``, ``Q1``, ``Q2`` are aligned on the union pattern
        (diagonal included), so each matrix is a linear combination of three
        value arrays, and every factorisation sees the same pattern.
        """
        n = self.W.shape[0]
        pieces = [sparse.coo_array(q) for q in self._pieces]
        rows = np.concatenate([q.row for q in pieces] + [np.arange(n)])
        cols = np.concatenate([q.col for q in pieces] + [np.arange(n)])
        keys, where = np.unique(cols.astype(np.int64) * n + rows, return_inverse=True)
        values = np.zeros((3, keys.size))
        offset = 0
        for k, q in enumerate(pieces):
            np.add.at(values[k], where[offset:offset + q.nnz], q.data)
            offset += q.nnz
        indptr = np.searchsorted(keys // n, np.arange(n + 1))
        pattern = sparse.csc_array((np.ones(keys.size), (keys % n).astype(np.int32),
                                    indptr.astype(np.int32)), shape=(n, n))
        return pattern, values, where[offset:]

    def _assemble(self, rho: float, diagonal: FloatArray | None = None) -> sparse.csc_array:
        """Return ``Q(rho)`` (plus ``diag(diagonal)``) on the fixed pattern."""
        pattern, values, diag = self._pattern
        data = values[0] - rho * values[1] + (rho * rho) * values[2]
        if diagonal is not None:
            data[diag] += diagonal
        return sparse.csc_array((data, pattern.indices, pattern.indptr), shape=pattern.shape)

    def precision(self, rho: float) -> sparse.csc_array:
        """Return ``Q(rho)`` (the effects' precision times ``s2u``)."""
        return self._assemble(rho)

    @cached_property
    def _logdets(self) -> dict[float, float]:
        """``log|Q(rho)|`` by ``rho``: finite differences in ``s2u`` reuse it."""
        return {}

    def logdet_precision(self, rho: float) -> float:
        """Return ``log|Q(rho)|`` from the Cholesky factor of ``Q`` (``-inf`` if not definite)."""
        if rho not in self._logdets:
            try:
                self._logdets[rho] = sparse_cholesky(self.precision(rho)).logdet
            except NotPositiveDefinite:
                self._logdets[rho] = -np.inf
        return self._logdets[rho]

    def posterior(self, s2u: float, rho: float) -> tuple[sparse.csc_array, SparseFactor]:
        """Return ``K = Q + s2u P'D^-1 P`` and its Cholesky factor.

        Raises :class:`~spatialdp.smooth.cholesky.NotPositiveDefinite` when
        ``K`` is not positive definite.
        """
        K = self._assemble(rho, s2u * self.data_precision)
        return K, sparse_cholesky(K)

    def solve_observed(self, lu: SparseFactor, T: FloatArray) -> FloatArray:
        """Return ``K^-1 P' T`` for ``T`` given on the observed areas (one column per column)."""
        rhs = np.zeros((self.observed.size, T.shape[1]))
        rhs[self.observed] = T
        return np.asarray(lu.solve(rhs), dtype=np.float64)

    def gls(self, s2u: float, lu: SparseFactor
            ) -> tuple[FloatArray, FloatArray, float, FloatArray]:
        """Return ``(X'V^-1 X, X'V^-1 y, y'V^-1 y, V^-1 X)`` through ``K``'s LU."""
        X, y, d = self.X, self.y, self.d
        T = np.column_stack([X, y]) / d[:, None]
        VR = T - s2u * self.solve_observed(lu, T)[self.observed] / d[:, None]
        p = X.shape[1]
        return X.T @ VR[:, :p], X.T @ VR[:, p], float(y @ VR[:, p]), VR[:, :p]

    def loglik(self, s2u: float, rho: float, method: str) -> float:
        """Return the REML or ML log-likelihood of ``(s2u, rho)``, ``beta`` profiled out."""
        logdet_q = self.logdet_precision(rho)
        if not np.isfinite(logdet_q):
            return -np.inf
        try:
            _, lu = self.posterior(s2u, rho)
        except NotPositiveDefinite:
            return -np.inf
        logdet_k = lu.logdet
        xtvx, xtvy, ytvy, _ = self.gls(s2u, lu)
        beta = np.linalg.solve(xtvx, xtvy)
        quad = ytvy - float(xtvy @ beta)
        logdet = float(np.log(self.d).sum()) + logdet_k - logdet_q
        n, p = self.X.shape
        if method == "ML":
            return -0.5 * (n * LOG_2PI + logdet + quad)
        return -0.5 * ((n - p) * LOG_2PI + logdet + float(np.linalg.slogdet(xtvx)[1]) + quad)


def fit_sparse(model: SparseAreaModel, method: str = "REML", rho: float | None = None
               ) -> AreaFit:
    """Fit ``(s2u, rho)`` by maximising the exact (RE)ML likelihood; ``rho`` fixed if given.

    Newton's method on ``(log s2u, atanh(rho / RHO_BOUND))`` with
    central-difference derivatives (7 likelihood evaluations per step, about
    6 steps): far fewer factorisations than a quasi-Newton search. When it
    does not converge (``s2u`` or ``rho`` on a boundary of the parameter
    space), L-BFGS-B on the bounded natural scale takes over from its best
    point. The standard errors (``AreaFit.fisher``) are from the observed
    information (central differences of the log-likelihood); NaN when
    ``rho`` is fixed.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> n = 60
    >>> A = sparse.diags_array([np.ones(n - 1), np.ones(n - 1)], offsets=[-1, 1])
    >>> W = sparse.csr_array(A / A.sum(axis=1)[:, None])
    >>> m = SparseAreaModel(rng.normal(1, 0.3, n), np.ones((n, 1)), np.full(n, 0.05), W,
    ...                     np.ones(n, dtype=bool), "car")
    >>> fit = fit_sparse(m)
    >>> bool(fit.s2u > 0), bool(-1 < fit.rho < 1), fit.parameter_se.shape
    (True, True, (2,))
    """
    scale = max(float(np.var(model.y)), float(np.median(model.d)), 1e-12)
    start = (float(np.median(model.d)) / scale, 0.5 if rho is None else rho)

    def transformed(t: FloatArray) -> float:
        rho_t = RHO_BOUND * float(np.tanh(t[1])) if rho is None else rho
        return model.loglik(float(np.exp(t[0])) * scale, rho_t, method)

    t0 = np.array([np.log(start[0]), np.arctanh(start[1] / RHO_BOUND)])[: 2 if rho is None else 1]
    found = _newton_maximise(transformed, t0)
    info = np.full((2, 2), np.nan)
    if found is not None:
        t, loglik, hessian = found
        s2u = float(np.exp(t[0])) * scale
        if rho is None:
            rho_hat = RHO_BOUND * float(np.tanh(t[1]))
            # At the maximum (zero gradient) the information on the natural scale is the
            # transformed one times the Jacobian dt/dtheta on both sides.
            jacobian = np.array([1.0 / s2u, 1.0 / (RHO_BOUND * (1.0 - (rho_hat / RHO_BOUND)**2))])
            info = -hessian * np.outer(jacobian, jacobian)
        else:
            rho_hat = rho
    else:
        s2u, rho_hat = _bounded_search(model, method, rho, scale, start)
        loglik = model.loglik(s2u, rho_hat, method)
        if rho is None:
            info = _observed_information(model, s2u, rho_hat, method, scale)
    _, lu = model.posterior(s2u, rho_hat)
    xtvx, xtvy, _, _ = model.gls(s2u, lu)
    cov = np.asarray(np.linalg.inv(xtvx), dtype=np.float64)
    return AreaFit(cov @ xtvy, cov, s2u, rho_hat, info, loglik, method)


def _newton_maximise(f: Callable[[FloatArray], float], start: FloatArray,
                     max_steps: int = NEWTON_STEPS
                     ) -> tuple[FloatArray, float, FloatArray] | None:
    """Return ``(maximiser, maximum, Hessian)`` of ``f`` by damped Newton steps, or None.

    Gradient and Hessian by central differences of step :data:`_NEWTON_STEP`;
    a step is halved until ``f`` does not decrease; convergence when the Newton
    decrement is below :data:`NEWTON_TOLERANCE` with a negative definite
    Hessian. None when the iterate leaves the box where the transformed
    parameters are meaningful (:data:`_NEWTON_BOX`), a sign of a boundary
    maximum.

    Examples
    --------
    >>> t, top, hessian = _newton_maximise(lambda t: -float(((t - 1.0) ** 2).sum()), np.zeros(2))
    >>> t.round(6).tolist(), abs(top) < 1e-9, np.diag(hessian).round(6).tolist()
    ([1.0, 1.0], True, [-2.0, -2.0])
    """
    t, f0 = np.asarray(start, dtype=np.float64), f(start)
    if not np.isfinite(f0):
        return None
    h = _NEWTON_STEP
    for _ in range(max_steps):
        gradient, hessian = _central_derivatives(f, t, f0, h)
        if not (np.isfinite(gradient).all() and np.isfinite(hessian).all()):
            return None
        curvature, vectors = np.linalg.eigh(-hessian)
        floor = 1e-3 * max(float(curvature.max()), 1e-12)
        step = vectors @ ((vectors.T @ gradient) / np.maximum(curvature, floor))
        decrement = float(gradient @ step)
        if decrement < NEWTON_TOLERANCE and (curvature > 0).all():
            return t, f0, hessian
        step *= min(1.0, _NEWTON_MAX_STEP / float(np.abs(step).max()))
        for _halving in range(30):
            trial = f(t + step)
            if np.isfinite(trial) and trial >= f0:
                break
            step /= 2.0
        else:
            return None
        t, f0 = t + step, trial
        if np.abs(t).max() > _NEWTON_BOX:
            return None
    return None


def _central_derivatives(f: Callable[[FloatArray], float], t: FloatArray, f0: float,
                         h: float) -> tuple[FloatArray, FloatArray]:
    """Return the central-difference gradient and Hessian of ``f`` at ``t`` (``f0 = f(t)``).

    ``2k`` evaluations on the axes plus ``k(k-1)`` on the diagonals
    ``t +- h (e_i + e_j)``; both are second-order accurate.
    """
    k = t.size
    eye = np.eye(k) * h
    plus = np.array([f(t + eye[i]) for i in range(k)])
    minus = np.array([f(t - eye[i]) for i in range(k)])
    gradient = (plus - minus) / (2.0 * h)
    hessian = np.diag((plus - 2.0 * f0 + minus) / h**2)
    for i in range(k):
        for j in range(i + 1, k):
            both = f(t + eye[i] + eye[j]) + f(t - eye[i] - eye[j])
            hessian[i, j] = hessian[j, i] = (both - plus[i] - minus[i] - plus[j] - minus[j]
                                             + 2.0 * f0) / (2.0 * h**2)
    return gradient, hessian


def _bounded_search(model: SparseAreaModel, method: str, rho: float | None, scale: float,
                    start: tuple[float, float]) -> tuple[float, float]:
    """Return ``(s2u, rho)`` maximising the likelihood by L-BFGS-B on the bounded natural scale."""

    def negative(theta: FloatArray) -> float:
        value = model.loglik(float(theta[0]) * scale, float(theta[1]), method)
        return -value if np.isfinite(value) else 1e300

    rho_bounds = (-RHO_BOUND, RHO_BOUND) if rho is None else (rho, rho)
    starts = [start]
    if rho is None:
        starts.append((0.5, 0.0))  # a second start, as the dense model
    best = None
    for point in starts:
        res = optimize.minimize(negative, np.array(point), method="L-BFGS-B",
                                bounds=[(0.0, 10.0), rho_bounds],
                                options={"ftol": 1e-13, "gtol": 1e-9})
        if best is None or res.fun < best.fun:
            best = res
    assert best is not None
    return float(best.x[0]) * scale, float(best.x[1])


def _observed_information(model: SparseAreaModel, s2u: float, rho: float, method: str,
                          scale: float) -> FloatArray:
    """Return minus the Hessian of the log-likelihood in ``(s2u, rho)`` (central differences).

    At the boundary ``s2u = 0`` the Hessian is taken one step inside.
    """
    h = np.array([_STEP * max(s2u, scale * 1e-2), _STEP])
    centre = np.array([max(s2u, 2.0 * h[0]), float(np.clip(rho, -RHO_BOUND + 2 * h[1],
                                                               RHO_BOUND - 2 * h[1]))])

    def f(step: FloatArray) -> float:
        point = centre + step * h
        return model.loglik(float(point[0]), float(point[1]), method)

    f0 = f(np.zeros(2))
    hess = np.empty((2, 2))
    for k in range(2):
        e = np.eye(2)[k]
        hess[k, k] = (f(e) - 2.0 * f0 + f(-e)) / h[k] ** 2
    both = (f(np.array([1.0, 1.0])) - f(np.array([1.0, -1.0])) - f(np.array([-1.0, 1.0]))
            + f(np.array([-1.0, -1.0]))) / (4.0 * h[0] * h[1])
    hess[0, 1] = hess[1, 0] = both
    return np.asarray(-hess, dtype=np.float64)


def sparse_predict(model: SparseAreaModel, fit: AreaFit, samples: int = DIAGONAL_SAMPLES,
                   exact_limit: int = EXACT_DIAGONAL_LIMIT
                   ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """Return ``(eblup, mse, shrinkage, synthetic, residuals)``; the first four for every area.

    ``mse = g1 + g2`` (see the module); the shrinkage weight is the weight of
    an area's own direct estimate (0 where unobserved); ``residuals`` are the
    observed areas' standardised residuals ``(V^-1 r)_i / sqrt((V^-1)_ii)``
    (each N(0, 1) under the model).

    Examples
    --------
    >>> W = sparse.csr_array(np.array([[0, 1, 0], [.5, 0, .5], [0, 1, 0]]))
    >>> m = SparseAreaModel(np.array([1.0, 2.0]), np.ones((3, 1)), np.array([.1, .1]), W,
    ...                     np.array([True, False, True]), "sar")
    >>> fit = AreaFit(np.array([1.5]), np.array([[0.1]]), 0.2, 0.5, np.eye(2), 0.0, "REML")
    >>> eblup, mse, own, synthetic, _ = sparse_predict(m, fit)
    >>> bool(eblup[0] < 1.5 < eblup[2]), float(own[1]), bool((mse > 0).all())
    (True, 0.0, True)
    """
    obs, d, s2u = model.observed, model.d, fit.s2u
    K, lu = model.posterior(s2u, fit.rho)
    synthetic = model.X_all @ fit.beta
    scaled = ((model.y - model.X @ fit.beta) / d)[:, None]
    effect = s2u * model.solve_observed(lu, scaled)[:, 0]
    diagonal = (_exact_diagonal(lu, K.shape[0]) if K.shape[0] <= exact_limit
                else _sampled_diagonal(K, lu, samples))
    g1 = s2u * diagonal
    own = np.zeros(obs.size)
    own[obs] = g1[obs] / d
    dmat = model.X_all - s2u * model.solve_observed(lu, model.X / d[:, None])
    g2 = np.einsum("ij,jk,ik->i", dmat, fit.beta_cov, dmat)
    vinv_r = scaled[:, 0] - effect[obs] / d
    vinv_diag = 1.0 / d - s2u * diagonal[obs] / d**2
    residuals = vinv_r / np.sqrt(np.maximum(vinv_diag, 1e-300))
    return synthetic + effect, g1 + g2, own, synthetic, residuals


def _exact_diagonal(lu: SparseFactor, n: int) -> FloatArray:
    """Return ``diag(K^-1)`` by unit-vector solves, in blocks."""
    out = np.empty(n)
    for start in range(0, n, _BLOCK):
        stop = min(start + _BLOCK, n)
        unit = np.zeros((n, stop - start))
        unit[np.arange(start, stop), np.arange(stop - start)] = 1.0
        out[start:stop] = lu.solve(unit)[np.arange(start, stop), np.arange(stop - start)]
    return out


def _sampled_diagonal(K: sparse.csc_array, factor: SparseFactor, samples: int) -> FloatArray:
    """Return the Rao-Blackwellised Monte Carlo estimate of ``diag(K^-1)`` (see the module).

    The samples ``x ~ N(0, K^-1)`` come from ``K``'s own factor, one
    triangular solve per sample.
    """
    rng = np.random.default_rng(0)
    n = K.shape[0]
    x = factor.inverse_root(rng.standard_normal((n, samples)))
    kd = K.diagonal()
    off = sparse.csr_array(K - sparse.diags_array(kd))
    conditional = np.asarray(off @ x) / kd[:, None]
    return np.asarray(1.0 / kd + np.einsum("ij,ij->i", conditional, conditional) / samples,
                      dtype=np.float64)
