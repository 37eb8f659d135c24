"""The area-level Fay-Herriot model, fitted by REML or ML in O(n) (diagonal covariance).

``y_i = x_i' beta + u_i + e_i`` with ``u_i ~ N(0, s2u)`` (the area effect) and
``e_i`` of known variance ``d_i`` (here: the exact DP noise variance plus the
sampling variance of the fresh cohort). The EBLUP of area ``i`` is
``x_i' b + g_i (y_i - x_i' b)`` with the shrinkage weight ``g_i = s2u / (s2u + d_i)``;
an area without a direct estimate gets the synthetic ``x_i' b``. The MSE is
the Prasad-Rao / Datta-Lahiri second-order approximation ``g1 + g2 + 2 g3``
(ML: minus the bias term of ``s2u``), as ``sae::mseFH`` computes it. It uses
second moments only, so it holds for Laplace noise as for normal noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import optimize

__all__ = ["AreaFit", "fay_herriot_predict", "fh_grid", "fit_fay_herriot"]

FloatArray = NDArray[np.float64]
LOG_2PI = float(np.log(2.0 * np.pi))


@dataclass(frozen=True)
class AreaFit:
    """The fitted variance parameters and coefficients of an area-level model.

    ``rho`` is 0 and ``rho_se`` NaN for the non-spatial model; ``fisher`` is the
    (REML or ML) Fisher information of ``(s2u, rho)`` (1x1 for Fay-Herriot).
    """

    beta: FloatArray
    beta_cov: FloatArray
    s2u: float
    rho: float
    fisher: FloatArray
    loglik: float
    method: str

    @property
    def parameter_se(self) -> FloatArray:
        """Standard errors of ``(s2u, rho)`` from the inverse Fisher information."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.sqrt(np.diag(np.linalg.pinv(self.fisher)))


def _gls(y: FloatArray, X: FloatArray, vinv: FloatArray
         ) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Return ``(beta, (X'V^-1 X)^-1, residual)`` for a diagonal ``V^-1``."""
    xtvx = X.T @ (vinv[:, None] * X)
    cov = np.asarray(np.linalg.inv(xtvx), dtype=np.float64)
    beta = cov @ (X.T @ (vinv * y))
    return beta, cov, y - X @ beta


def fh_loglik(s2u: float, y: FloatArray, X: FloatArray, d: FloatArray, method: str) -> float:
    """Return the REML or ML log-likelihood of ``s2u`` (``beta`` profiled out by GLS).

    Examples
    --------
    >>> y, X, d = np.array([1.0, 2.0, 0.5]), np.ones((3, 1)), np.full(3, 0.1)
    >>> fh_loglik(0.2, y, X, d, "REML") > fh_loglik(5.0, y, X, d, "REML")
    True
    """
    v = s2u + d
    vinv = 1.0 / v
    _, cov, r = _gls(y, X, vinv)
    quad = float(r @ (vinv * r))
    logdet = float(np.log(v).sum())
    n, p = X.shape
    if method == "ML":
        return -0.5 * (n * LOG_2PI + logdet + quad)
    return -0.5 * ((n - p) * LOG_2PI + logdet - float(np.linalg.slogdet(cov)[1]) + quad)


def fit_fay_herriot(y: FloatArray, X: FloatArray, d: FloatArray, method: str = "REML"
                    ) -> AreaFit:
    """Fit the Fay-Herriot model: ``s2u`` by bounded maximisation of the (RE)ML likelihood.

    ``s2u = 0`` is allowed (the boundary: every area gets its synthetic estimate).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(400), rng.normal(size=400)])
    >>> d = rng.uniform(0.1, 1.0, 400)
    >>> y = X @ [1.0, 2.0] + rng.normal(0, 0.7, 400) + rng.normal(0, np.sqrt(d))
    >>> fit = fit_fay_herriot(y, X, d)
    >>> bool(abs(fit.s2u - 0.49) < 3 * fit.parameter_se[0]), np.round(fit.beta, 1).tolist()
    (True, [1.0, 2.0])
    """
    upper = max(float(np.var(y)) * 10.0, float(d.max()), 1e-12)
    res = optimize.minimize_scalar(lambda s: -fh_loglik(s, y, X, d, method),
                                   bounds=(0.0, upper), method="bounded",
                                   options={"xatol": upper * 1e-10})
    s2u = float(res.x)
    if -fh_loglik(0.0, y, X, d, method) <= res.fun:  # the boundary is the maximum
        s2u = 0.0
    vinv = 1.0 / (s2u + d)
    beta, cov, _ = _gls(y, X, vinv)
    info = 0.5 * _trace_p2(X, vinv, cov) if method == "REML" else 0.5 * float((vinv**2).sum())
    return AreaFit(beta, cov, s2u, 0.0, np.array([[info]]),
                   fh_loglik(s2u, y, X, d, method), method)


def _trace_p2(X: FloatArray, vinv: FloatArray, cov: FloatArray) -> float:
    """Return ``tr(P^2)`` with ``P = V^-1 - V^-1 X cov X' V^-1``, V diagonal, in O(n p^2)."""
    a = X.T @ (vinv[:, None] ** 2 * X)
    b = X.T @ (vinv[:, None] ** 3 * X)
    return float((vinv**2).sum() - 2.0 * np.trace(cov @ b) + np.trace(cov @ a @ cov @ a))


def fay_herriot_predict(fit: AreaFit, y: FloatArray, X: FloatArray, d: FloatArray,
                        observed: NDArray[np.bool_]
                        ) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Return ``(eblup, mse, shrinkage, synthetic)`` for every area, observed or not.

    ``y`` and ``d`` are read on the observed areas only. The MSE is
    ``g1 + g2 + 2 g3`` (ML: minus the bias of ``s2u`` times ``(d/(s2u+d))^2``), as
    in ``sae::mseFH``; an unobserved area's is ``s2u + x' cov x``.
    """
    s2u, beta, cov = fit.s2u, fit.beta, fit.beta_cov
    synthetic = X @ beta
    dd = np.where(observed, d, np.inf)
    gamma = np.where(observed, s2u / (s2u + np.where(observed, d, 1.0)), 0.0)
    eblup = synthetic + gamma * (np.where(observed, y, 0.0) - synthetic)
    vinv_obs = 1.0 / (s2u + d[observed])
    sum_v2 = float((vinv_obs**2).sum())
    var_s2u = 2.0 / sum_v2
    lever = np.einsum("ij,jk,ik->i", X, cov, X)
    bd = np.where(observed, 1.0 - gamma, 1.0)
    g1 = np.where(observed, gamma * np.where(observed, d, 0.0), s2u)
    g2 = bd**2 * lever
    g3 = np.where(observed, bd**2 * var_s2u / (s2u + np.where(observed, dd, 1.0)), 0.0)
    mse = g1 + g2 + 2.0 * g3
    if fit.method == "ML":
        Xo = X[observed]
        bias = -float(np.trace(cov @ (Xo.T @ (vinv_obs[:, None] ** 2 * Xo)))) / sum_v2
        mse = mse - np.where(observed, bias * bd**2, 0.0)
    return eblup, mse, gamma, synthetic


def fh_grid(y: FloatArray, X: FloatArray, d: FloatArray, observed: NDArray[np.bool_],
            s2u: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Return the REML log-likelihood and the conditional predictions on a grid of ``s2u``.

    As :func:`spatialdp.smooth.spatial.sar_grid` for the Fay-Herriot model:
    ``(loglik, eblup, variance, own)``, the REML log-likelihood per ``s2u``
    (shape ``K``) and per ``s2u`` and area (``K x n``) the BLUP at that ``s2u``
    (``beta`` by GLS), its error variance ``g1 + g2`` given ``s2u``, and the
    shrinkage weight. ``y`` and ``d`` are read on the observed areas only.

    Examples
    --------
    >>> y, X, d = np.array([1.0, 2.0, 0.5]), np.ones((3, 1)), np.full(3, 0.1)
    >>> ll, eblup, var, own = fh_grid(y, X, d, np.ones(3, dtype=bool), np.array([0.2, 0.5]))
    >>> bool(np.isclose(ll[0], fh_loglik(0.2, y, X, d, "REML")))
    True
    """
    Xo, yo, do = X[observed], y[observed], d[observed]
    f = 1.0 / (s2u[:, None] + do[None, :])                           # K x m
    xtvx = np.einsum("km,mp,mq->kpq", f, Xo, Xo)
    cov = np.linalg.inv(xtvx)
    beta = np.einsum("kpq,kq->kp", cov, (f * yo[None, :]) @ Xo)
    r = yo[None, :] - beta @ Xo.T
    m, p = Xo.shape
    loglik = -0.5 * ((m - p) * LOG_2PI - np.log(f).sum(axis=1) + np.linalg.slogdet(xtvx)[1]
                     + (f * r**2).sum(axis=1))
    synthetic = beta @ X.T
    gamma = np.zeros_like(synthetic)
    gamma[:, observed] = s2u[:, None] * f
    g1 = np.repeat(s2u[:, None], X.shape[0], axis=1)
    g1[:, observed] = gamma[:, observed] * do[None, :]
    eblup = synthetic.copy()
    eblup[:, observed] += gamma[:, observed] * r
    g2 = (1.0 - gamma) ** 2 * np.einsum("np,kpq,nq->kn", X, cov, X)
    return (np.asarray(loglik, dtype=np.float64), eblup, g1 + g2, gamma)
