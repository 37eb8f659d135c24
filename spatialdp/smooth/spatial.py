"""The spatial Fay-Herriot model: a SAR(1) area effect on the neighbour graph (``sae::eblupSFH``).

``y = X beta + u + e`` on the observed areas, where the area effects of ALL
areas follow ``u = rho W u + v``, ``v ~ N(0, s2u I)`` (Petrucci & Salvati
2006), so ``Cov(u) = s2u C(rho)`` with ``C(rho) = [(I - rho W')(I - rho W)]^-1``
and ``W`` row-standardised. ``e`` has the known variances ``d_i``. Areas
without a direct estimate (suppressed regions) stay in the graph: their effect
is predicted from their neighbours' (``E[u_m | y]``), which is what makes their
modelled estimate better than a synthetic one.

``(s2u, rho)`` are fitted by REML or ML (L-BFGS-B on the exact likelihood,
from two starting points); the MSE is the analytic second-order approximation
of Singh, Steel & Salvati (2005) as ``sae::mseSFH`` computes it:
``g1 + g2 + 2 g3 - g4`` (ML: minus the bias terms of the parameters).

The matrices are dense: a fit costs O(n^3) per likelihood evaluation. Up to
:data:`DENSE_LIMIT` regions (the 48 states take milliseconds, 1,000 regions
about a second); beyond, :func:`~spatialdp.smooth.small_area_estimates` fits the
sparse model of :mod:`spatialdp.smooth.sparse_spatial` (exact likelihood by
sparse LU; minutes on 30,000 regions) and the Fay-Herriot model stays O(n).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import linalg, optimize

from spatialdp.smooth.fay_herriot import LOG_2PI, AreaFit

__all__ = ["DENSE_LIMIT", "SarModel", "fit_sar", "sar_eblup", "sar_grid", "sar_predict"]

FloatArray = NDArray[np.float64]

#: Largest number of regions the dense spatial model accepts.
DENSE_LIMIT = 3000

#: Bound on |rho|: the SAR needs I - rho W invertible (|rho| < 1 for a row-standardised W).
RHO_BOUND = 0.999


@dataclass(frozen=True)
class SarModel:
    """The data and the graph of a spatial Fay-Herriot model.

    ``y`` and ``d`` hold the observed areas only; ``X_all``, ``W`` and
    ``observed`` every area of the graph.
    """

    y: FloatArray
    X_all: FloatArray
    d: FloatArray
    W: FloatArray
    observed: NDArray[np.bool_]

    @property
    def X(self) -> FloatArray:
        """The design of the observed areas."""
        return self.X_all[self.observed]

    def structure(self, rho: float) -> FloatArray:
        """Return ``C(rho) = [(I - rho W')(I - rho W)]^-1`` over all areas."""
        B = np.eye(self.W.shape[0]) - rho * self.W
        return np.asarray(np.linalg.inv(B.T @ B), dtype=np.float64)

    def structure_derivative(self, rho: float, C: FloatArray) -> FloatArray:
        """Return ``dC/drho = -C [d(B'B)/drho] C``."""
        W = self.W
        dbb = -(W + W.T) + 2.0 * rho * (W.T @ W)
        return np.asarray(-C @ dbb @ C, dtype=np.float64)

    def structure_second_derivative(self, rho: float, C: FloatArray) -> FloatArray:
        """Return ``d2C/drho2 = 2 C dbb C dbb C - 2 C W'W C``."""
        W = self.W
        dbb = -(W + W.T) + 2.0 * rho * (W.T @ W)
        return np.asarray(2.0 * C @ dbb @ C @ dbb @ C - 2.0 * C @ (W.T @ W) @ C,
                          dtype=np.float64)

    def loglik(self, s2u: float, rho: float, method: str) -> float:
        """Return the REML or ML log-likelihood of ``(s2u, rho)``, ``beta`` profiled out."""
        obs = self.observed
        V = s2u * self.structure(rho)[np.ix_(obs, obs)] + np.diag(self.d)
        try:
            chol = linalg.cho_factor(V, lower=True)
        except linalg.LinAlgError:
            return -np.inf
        X = self.X
        vinv_x = linalg.cho_solve(chol, X)
        xtvx = X.T @ vinv_x
        beta = np.linalg.solve(xtvx, vinv_x.T @ self.y)
        r = self.y - X @ beta
        quad = float(r @ linalg.cho_solve(chol, r))
        logdet = 2.0 * float(np.log(np.diag(chol[0])).sum())
        n, p = X.shape
        if method == "ML":
            return -0.5 * (n * LOG_2PI + logdet + quad)
        return -0.5 * ((n - p) * LOG_2PI + logdet + float(np.linalg.slogdet(xtvx)[1]) + quad)


def fit_sar(model: SarModel, method: str = "REML") -> AreaFit:
    """Fit ``(s2u, rho)`` of the spatial model by maximising its (RE)ML likelihood.

    Examples
    --------
    >>> W = np.array([[0, 1, 0, 0], [.5, 0, .5, 0], [0, .5, 0, .5], [0, 0, 1, 0]])
    >>> m = SarModel(np.array([1.0, 1.2, 2.0, 2.1]), np.ones((4, 1)), np.full(4, 0.05), W,
    ...              np.ones(4, dtype=bool))
    >>> fit = fit_sar(m)
    >>> bool(fit.s2u > 0), bool(-1 < fit.rho < 1)
    (True, True)
    """
    y, d = model.y, model.d
    scale = max(float(np.var(y)), float(np.median(d)), 1e-12)

    def negative(theta: FloatArray) -> float:
        value = model.loglik(float(theta[0]) * scale, float(theta[1]), method)
        return -value if np.isfinite(value) else 1e300

    best = None
    for start in ((float(np.median(d)) / scale, 0.5), (0.5, 0.0)):
        res = optimize.minimize(negative, np.array(start), method="L-BFGS-B",
                                bounds=[(0.0, 10.0), (-RHO_BOUND, RHO_BOUND)],
                                options={"ftol": 1e-13, "gtol": 1e-9})
        if best is None or res.fun < best.fun:
            best = res
    assert best is not None
    s2u, rho = float(best.x[0]) * scale, float(best.x[1])
    return _finish(model, s2u, rho, method)


def _finish(model: SarModel, s2u: float, rho: float, method: str) -> AreaFit:
    """Return the fit at ``(s2u, rho)``: GLS coefficients and the Fisher information."""
    parts = _Parts.at(model, s2u, rho)
    beta = parts.beta_cov @ model.X.T @ parts.vinv @ model.y
    left = parts.projector(model.X) if method == "REML" else parts.vinv
    info = _fisher(left, parts.v_derivs)
    return AreaFit(beta, parts.beta_cov, s2u, rho, info, model.loglik(s2u, rho, method),
                   method)


@dataclass(frozen=True)
class _Parts:
    """The matrices at one parameter value: covariances and their derivatives."""

    C: FloatArray
    dC: FloatArray
    V: FloatArray
    vinv: FloatArray
    beta_cov: FloatArray
    s2u: float
    observed: NDArray[np.bool_]

    @classmethod
    def at(cls, model: SarModel, s2u: float, rho: float) -> _Parts:
        obs = model.observed
        C = model.structure(rho)
        V = s2u * C[np.ix_(obs, obs)] + np.diag(model.d)
        vinv = np.asarray(np.linalg.inv(V), dtype=np.float64)
        X = model.X
        cov = np.asarray(np.linalg.inv(X.T @ vinv @ X), dtype=np.float64)
        return cls(C, model.structure_derivative(rho, C), V, vinv, cov, s2u, obs)

    @property
    def oo(self) -> tuple[NDArray[np.intp], ...]:
        """Index of the observed block."""
        where = np.flatnonzero(self.observed)
        return np.ix_(where, where)

    @property
    def v_derivs(self) -> tuple[FloatArray, FloatArray]:
        """``dV/ds2u`` and ``dV/drho`` on the observed block."""
        return self.C[self.oo], self.s2u * self.dC[self.oo]

    @property
    def g_derivs(self) -> tuple[FloatArray, FloatArray]:
        """``dG/ds2u`` and ``dG/drho``, ``G = Cov(u_all, y_obs)``."""
        return self.C[:, self.observed], self.s2u * self.dC[:, self.observed]

    def projector(self, X: FloatArray) -> FloatArray:
        """REML's ``P = V^-1 - V^-1 X (X'V^-1X)^-1 X' V^-1``."""
        vx = self.vinv @ X
        return np.asarray(self.vinv - vx @ self.beta_cov @ vx.T, dtype=np.float64)


def _fisher(left: FloatArray, derivs: tuple[FloatArray, ...]) -> FloatArray:
    """Return ``I_jk = tr(L V_j L V_k) / 2`` (L = P for REML, V^-1 for ML)."""
    products = [left @ dv for dv in derivs]
    k = len(derivs)
    info = np.empty((k, k))
    for i in range(k):
        for j in range(k):
            info[i, j] = 0.5 * float(np.sum(products[i] * products[j].T))
    return info


def sar_eblup(model: SarModel, fit: AreaFit) -> FloatArray:
    """Return the EBLUP ``x' b + s2u C_io V^-1 (y - X b)`` of every area, without its MSE.

    What :func:`sar_predict` returns first, at a fraction of its cost (one
    Cholesky solve): the parametric bootstrap refits and predicts many times.
    """
    obs = model.observed
    C = model.structure(fit.rho)
    V = fit.s2u * C[np.ix_(obs, obs)] + np.diag(model.d)
    resid = model.y - model.X @ fit.beta
    solved = linalg.cho_solve(linalg.cho_factor(V, lower=True), resid)
    return np.asarray(model.X_all @ fit.beta + fit.s2u * (C[:, obs] @ solved),
                      dtype=np.float64)


def sar_predict(model: SarModel, fit: AreaFit
                ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Return ``(eblup, mse, shrinkage, synthetic)`` for every area of the graph.

    The EBLUP is ``x' b + s2u C_io V^-1 (y - X b)``; the shrinkage weight is the
    weight of the area's own direct estimate (0 where unobserved). The MSE is
    ``g1 + g2 + 2 g3 - g4`` (``sae::mseSFH``; ``g4`` on observed areas), and for
    ML minus the parameters' bias terms times the gradient of ``g1``; never
    below ``g1 + g2`` (the MSE with known variance parameters), which the
    approximation can undercut when ``rho`` is near its bound.
    """
    obs = model.observed
    parts = _Parts.at(model, fit.s2u, fit.rho)
    vinv, V = parts.vinv, parts.V
    G = fit.s2u * parts.C[:, obs]
    weight = G @ vinv
    synthetic = model.X_all @ fit.beta
    eblup = synthetic + weight @ (model.y - model.X @ fit.beta)
    own = np.zeros(obs.size)
    own[obs] = np.diag(weight[obs])
    g1 = fit.s2u * np.diag(parts.C) - np.einsum("ij,ij->i", weight, G)
    dmat = model.X_all - weight @ model.X
    g2 = np.einsum("ij,jk,ik->i", dmat, fit.beta_cov, dmat)
    # At s2u = 0 (the boundary) rho is not identified and the information is
    # singular: the pseudo-inverse gives rho no variance there (every term it
    # enters is scaled by s2u anyway), as ``AreaFit.parameter_se`` does.
    info_inv = np.asarray(np.linalg.pinv(fit.fisher), dtype=np.float64)
    lmats = [gj @ vinv - weight @ vj @ vinv
             for gj, vj in zip(parts.g_derivs, parts.v_derivs, strict=True)]
    g3 = sum(info_inv[j, k] * np.einsum("ij,ij->i", lmats[j] @ V, lmats[k])
             for j in range(2) for k in range(2))
    g4 = np.zeros(obs.size)
    g4[obs] = _g4(model, fit, parts, info_inv)
    mse = g1 + g2 + 2.0 * np.asarray(g3) - g4
    if fit.method == "ML":
        mse = mse - _ml_bias(model, parts, info_inv, weight)
    # The second-order terms only add the cost of estimating (s2u, rho); where
    # -g4 or the ML bias outweighs them (rho near its bound), keep g1 + g2.
    mse = np.maximum(mse, np.maximum(g1 + g2, 0.0))
    return eblup, mse, own, synthetic


def _g4(model: SarModel, fit: AreaFit, parts: _Parts, info_inv: FloatArray) -> FloatArray:
    """Return ``g4`` of the observed areas (``sae::mseSFH``): second derivatives of ``V``."""
    psi_vinv = model.d[:, None] * parts.vinv
    d12 = parts.dC[parts.oo]
    d22 = fit.s2u * model.structure_second_derivative(fit.rho, parts.C)[parts.oo]
    both = (info_inv[0, 1] + info_inv[1, 0]) * d12 + info_inv[1, 1] * d22
    return np.asarray(0.5 * np.einsum("ij,jk,ik->i", psi_vinv, both, psi_vinv),
                      dtype=np.float64)


def _ml_bias(model: SarModel, parts: _Parts, info_inv: FloatArray, weight: FloatArray
             ) -> FloatArray:
    """Return the ML bias of ``(s2u, rho)`` times the gradient of ``g1``, per area."""
    X, vinv = model.X, parts.vinv
    vx = vinv @ X
    h = np.array([-np.trace(parts.beta_cov @ vx.T @ vj @ vx) for vj in parts.v_derivs])
    bias = info_inv @ h / 2.0
    obs = model.observed
    grads = []
    for cj, gj, vj in zip((parts.C, parts.s2u * parts.dC), parts.g_derivs, parts.v_derivs,
                          strict=True):
        grads.append(np.diag(cj) - 2.0 * np.einsum("ij,ij->i", gj @ vinv,
                                                    parts.s2u * parts.C[:, obs])
                     + np.einsum("ij,ij->i", weight @ vj, weight))
    return np.asarray(bias[0] * grads[0] + bias[1] * grads[1], dtype=np.float64)


def sar_grid(model: SarModel, rho: float, s2u: FloatArray
             ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Return the REML log-likelihood and the conditional predictions on a grid of ``s2u``.

    For one ``rho`` and a vector of ``s2u`` values, in one eigendecomposition:
    ``D^-1/2 C_oo D^-1/2 = Q diag(lam) Q'`` gives ``V^-1 = D^-1/2 Q diag(1 / (1 +
    s2u lam)) Q' D^-1/2`` for every ``s2u`` at once. Returns ``(loglik, eblup,
    variance, own)``: the REML log-likelihood per ``s2u`` (shape ``K``), and per
    ``s2u`` and area (``K x n``) the BLUP at those parameters (``beta`` by GLS),
    its error variance given them, ``g1 + g2``, and the weight of the area's
    own direct estimate. :func:`spatialdp.smooth.mixture.posterior_mixture`
    integrates them over the parameters.

    Examples
    --------
    >>> W = np.array([[0, 1, 0, 0], [.5, 0, .5, 0], [0, .5, 0, .5], [0, 0, 1, 0]])
    >>> m = SarModel(np.array([1.0, 1.2, 2.0, 2.1]), np.ones((4, 1)), np.full(4, 0.05), W,
    ...              np.ones(4, dtype=bool))
    >>> ll, eblup, var, own = sar_grid(m, 0.3, np.array([0.1, 0.2]))
    >>> bool(np.isclose(ll[0], m.loglik(0.1, 0.3, "REML")))
    True
    >>> fit = _finish(m, 0.2, 0.3, "REML")
    >>> bool(np.allclose(eblup[1], sar_eblup(m, fit)))
    True
    """
    obs = model.observed
    C = model.structure(rho)
    root = 1.0 / np.sqrt(model.d)
    lam, Q = np.linalg.eigh(root[:, None] * C[np.ix_(obs, obs)] * root[None, :])
    lam = np.maximum(lam, 0.0)
    Xt = Q.T @ (root[:, None] * model.X)
    yt = Q.T @ (root * model.y)
    A = (C[:, obs] * root[None, :]) @ Q
    f = 1.0 / (1.0 + s2u[:, None] * lam[None, :])                  # K x m
    xtvx = np.einsum("km,mp,mq->kpq", f, Xt, Xt)
    cov = np.linalg.inv(xtvx)
    beta = np.einsum("kpq,kq->kp", cov, (f * yt[None, :]) @ Xt)
    rt = yt[None, :] - beta @ Xt.T                                 # K x m
    n, p = Xt.shape
    logdet_v = float(np.log(model.d).sum()) - np.log(f).sum(axis=1)
    loglik = -0.5 * ((n - p) * LOG_2PI + logdet_v + np.linalg.slogdet(xtvx)[1]
                     + (f * rt**2).sum(axis=1))
    eblup = beta @ model.X_all.T + s2u[:, None] * ((f * rt) @ A.T)
    g1 = s2u[:, None] * np.diag(C)[None, :] - s2u[:, None] ** 2 * (f @ (A**2).T)
    dmat = model.X_all[None] - s2u[:, None, None] * ((A[None] * f[:, None, :]) @ Xt)
    g2 = np.einsum("knp,kpq,knq->kn", dmat, cov, dmat)
    own = np.zeros_like(eblup)
    own[:, obs] = s2u[:, None] * (f @ (A[obs] * Q).T) * root[None, :]
    return (np.asarray(loglik, dtype=np.float64), np.asarray(eblup, dtype=np.float64),
            np.asarray(np.maximum(g1 + g2, 0.0), dtype=np.float64), own)
