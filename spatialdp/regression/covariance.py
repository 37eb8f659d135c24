"""The covariance of a one-shot fit: a sandwich from the per-client estimating terms.

The one-shot estimator solves ``A beta^ = b^_c`` with ``A = P(Sigma^_c) + mu I``
(:mod:`spatialdp.regression.oneshot`). With ``x^_i = g~_i / (1 - alpha)`` the
debiased report of client ``i`` and ``D = (lambda^2/(2m) V^T V + sigma^2 I) / (1 - alpha)^2``
the known second moment the modulation and the noise add, the debiased moments
are averages of per-client terms: ``b^ = mean(x^_i y_i)``,
``Sigma^ = mean(x^_i x^_i^T) - D``. The estimator is therefore an M-estimator
whose estimating function per client is

    ``psi_i(beta) = x^_i y_i - (x^_i x^_i^T - D) beta``   (no intercept)

and, with an intercept (parameters ``(beta_0, beta)``, design ``(1, x)``), the
pair ``(r_i, x^_i r_i + D beta)`` with ``r_i = y_i - beta_0 - x^_i^T beta``.
Eliminating ``beta_0`` (the Schur complement is the centred ``Sigma^_c``) gives
the influence of client ``i`` on the estimate:

    ``w_i = A^{-1} (x^_i - x_bar^) r_i``  (coefficients),
    ``r_i - x_bar^^T w_i``                (intercept),

with ``r_i = (y_i - y_bar) - (x^_i - x_bar^)^T beta^`` (constants such as ``D beta``
drop out of a covariance). Clients are independent given the public directions
(their data, phases and noise are), so

    ``Cov(beta_0^, beta^) ~ Cov_emp(influence) / K``

the first-order sandwich ``A^{-1} Cov(psi) A^{-1} / K``. It includes the
sampling variance of the clients' data, the modulation's and the noise's
(and the label noise's when labels are noised): the empirical covariance of
the per-client terms sees them all, so no noise formula is needed.

What the intervals cover. Clients drawn at random from a population, the
target is the population least-squares coefficient of ``y`` on the CLIPPED
features (the device clips to ``R`` before anything else), with ``mu = 0``;
with a ridge ``mu > 0`` it is the ridge's own target ``(Sigma + mu I)^{-1} Sigma
beta`` (shrunk towards zero; the shrinkage bias is not in the interval; ``mu``
is treated as fixed). Where the linearisation fails there are no standard
errors (NaN) and :func:`fit_covariance` says why: the norm cap binds (the
estimate sits on the ball's boundary) or the PSD projection binds (the noise
outweighs the signal in some direction of ``Sigma^_c``), or there is one client.
The approximation is first order: where ``Sigma^_c`` is PSD but noisy (relative
error near 10%) the same noise inflates the error and the plug-in standard
error together, and the intervals over-cover (conservative; measured in
``docs/modulated.md``).

Examples
--------
>>> from spatialdp.privacy import Simulation
>>> from spatialdp.regression.client import transform_clients
>>> from spatialdp.regression.modulation import Modulation
>>> from spatialdp.regression.oneshot import fit_one_shot
>>> rng = np.random.default_rng(0)
>>> X = rng.uniform(-0.5, 0.5, size=(50_000, 2))
>>> y = X @ [1.0, -1.0] + 0.5 * rng.normal(size=50_000)
>>> rep = transform_clients(X, y, modulation=Modulation(lam=0.5, radius=1.0), rho=20.0,
...                         target=Simulation(rng=1))
>>> fit = fit_one_shot(rep, ridge=None, norm_cap=None)
>>> fit.cov_params.shape, bool(np.all(fit.bse > 0))
((3, 3), True)
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
from numpy.typing import NDArray

from spatialdp.regression._blocks import BlockMoments, block_rows, single_blas
from spatialdp.regression.client import ClientReports

__all__ = ["fit_covariance", "sandwich_covariance"]

#: A covariance, or a zero-argument callable that computes it (deferred).
Covariance = NDArray[np.float64] | Callable[[], NDArray[np.float64]]

#: Why there are no standard errors when the norm cap binds.
CAP_BINDS = ("no standard errors: the norm cap binds (||beta^|| = {cap:.4g}), so the estimate "
             "sits on the ball's boundary and has no normal approximation; refit with "
             "norm_cap=None")

#: Why there are no standard errors when the PSD projection binds.
PSD_BINDS = ("no standard errors: the PSD projection binds ({k} of {d} eigenvalues of the "
             "debiased covariance are below zero): the noise outweighs the signal in some "
             "direction, where the linearisation behind standard errors fails; more clients, "
             "more budget or fewer features")

#: Why one client's fit has no standard errors.
ONE_CLIENT = "no standard errors: one client gives no spread of per-client terms"

#: What the intervals cover without a ridge.
COVERS_OLS = ("intervals: first-order sandwich (sampling, modulation and noise variance, from "
              "the per-client terms); they cover the population least-squares coefficients of "
              "y on the clipped features")

#: What the intervals cover with a ridge.
COVERS_RIDGE = ("intervals: first-order sandwich (sampling, modulation and noise variance); "
                "with ridge {mu:.3g} > 0 they cover the ridge's target (Sigma + ridge I)^-1 "
                "Sigma beta, shrunk towards 0, NOT beta: the shrinkage bias is not in them "
                "(refit with ridge=None for intervals on beta)")


def _weighted_moments(reports: ClientReports, coef: NDArray[np.float64], offset: float,
                      ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return the mean and the second moment of ``z_i = r_i (1, g~_i)`` over the clients.

    ``r_i = y_i - offset - g~_i^T coef / (1 - alpha)``: one pass over row blocks small
    enough to stay in cache, one block-sized temporary.
    """
    K, d = reports.features.shape
    slope = coef / (1.0 - reports.modulation.alpha)
    total, second = np.zeros(d + 1), np.zeros((d + 1, d + 1))
    block = block_rows(d)
    ones = np.ones(min(block, K))
    sums = BlockMoments(d)
    with single_blas():
        for start in range(0, K, block):
            G = reports.features[start:start + block]
            r = reports.labels[start:start + block] - offset - G @ slope
            rG = G * r[:, None]
            total[0] += r.sum()
            second[0, 0] += r @ r
            sums.add(rG, r, ones)
    second[1:, 1:], second[0, 1:], total[1:] = sums.result()
    second[1:, 0] = second[0, 1:]
    return total / K, second / K


def sandwich_covariance(reports: ClientReports, coef: NDArray[np.float64],
                        bread: NDArray[np.float64], *, fit_intercept: bool = True,
                        x_mean: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    """Return the ``(d+1) x (d+1)`` sandwich covariance of ``(intercept, coef)``.

    The influences ``(r_i - x_bar^^T w_i, w_i)``, ``w_i = A^{-1} (x^_i - x_bar^) r_i``,
    are a linear map ``Q`` of ``z_i = r_i (1, g~_i)`` plus a constant, so their
    covariance is ``Q^T Cov(z) Q`` from one pass over the reports.

    Parameters
    ----------
    reports : ClientReports
        The release the fit was computed from.
    coef : ndarray (d,)
        The fitted coefficients ``beta^``.
    bread : ndarray (d, d)
        The symmetric matrix the fit solved, ``P(Sigma^_c) + mu I``.
    fit_intercept : bool, default True
        Whether the fit was centred; without an intercept its row and column are
        NaN (the intercept is fixed at 0, not estimated).
    x_mean : ndarray (d,), optional
        The fit's ``x_bar^ = mean(g~) / (1 - alpha)`` if already computed (it saves a
        pass over the reports); ignored without an intercept.

    Returns
    -------
    ndarray (d+1, d+1)
        Ordered as ``(intercept, coef_1, ..., coef_d)``.
    """
    K, d = reports.features.shape
    scale = 1.0 / (1.0 - reports.modulation.alpha)
    if not fit_intercept:
        x_mean = np.zeros(d)
    elif x_mean is None:
        x_mean = reports.features.mean(axis=0) * scale
    offset = float(reports.labels.mean()) - float(x_mean @ coef) if fit_intercept else 0.0
    mean, second = _weighted_moments(reports, coef, offset)
    cov_z = (second - np.outer(mean, mean)) * (K / (K - 1))
    # (r, (x^ - x_bar^) r) = z P, then (r - x_bar^^T w, w) = (r, u) M with w = u A^{-1}.
    P = np.eye(d + 1)
    P[0, 1:] = -x_mean
    P[1:, 1:] *= scale
    B = np.linalg.inv(bread)
    M = np.zeros((d + 1, d + 1))
    M[0, 0] = 1.0
    M[1:, 0] = -B @ x_mean
    M[1:, 1:] = B
    Q = P @ M
    cov = Q.T @ cov_z @ Q / K
    cov = (cov + cov.T) / 2.0
    if not fit_intercept:
        cov[0, :] = cov[:, 0] = np.nan
    return np.asarray(cov, dtype=np.float64)


def fit_covariance(reports: ClientReports, S: NDArray[np.float64], coef: NDArray[np.float64],
                   unprojected_norm: float, *, ridge: float, cap: float, psd: bool,
                   fit_intercept: bool, x_mean: NDArray[np.float64] | None = None,
                   deferred: bool = False) -> tuple[Covariance, str]:
    """Return the covariance of a one-shot fit (NaN where none is honest) and what it covers.

    Whether there is an honest covariance, and what it covers, is decided at once
    (from ``S`` and the norms: no pass over the reports). The covariance itself
    needs one pass over the per-client terms (:func:`sandwich_covariance`); with
    ``deferred`` it is returned as a zero-argument callable that runs that pass
    when called (:class:`~spatialdp.regression.RegressionFit` calls it on first use
    of its standard errors), holding a reference to ``reports`` until then.

    Parameters
    ----------
    reports : ClientReports
    S : ndarray (d, d)
        The debiased (centred) covariance before the PSD projection.
    coef : ndarray (d,)
        The fitted coefficients.
    unprojected_norm : float
        ``||beta||`` before the norm cap.
    ridge, cap : float
        The ridge and norm cap used.
    psd : bool
        Whether the fit projected ``S`` onto the PSD cone.
    fit_intercept : bool
    x_mean : ndarray (d,), optional
        The fit's ``x_bar^``, passed on to :func:`sandwich_covariance`.
    deferred : bool, default False
        Return the sandwich as a callable instead of computing it now.

    Returns
    -------
    covariance : ndarray (d+1, d+1), or a callable returning it
        Ordered ``(intercept, coef_1, ..., coef_d)``; all NaN when the cap or the
        PSD projection binds (an array even when ``deferred``).
    note : str
        What the intervals cover, or why there are none.

    Examples
    --------
    >>> from spatialdp.privacy import Simulation
    >>> from spatialdp.regression.client import transform_clients
    >>> from spatialdp.regression.modulation import Modulation
    >>> rep = transform_clients(np.zeros((100, 2)), np.zeros(100), modulation=Modulation(),
    ...                         rho=0.1, target=Simulation(rng=0))
    >>> cov, note = fit_covariance(rep, -np.eye(2), np.zeros(2), 0.0, ridge=0.0,
    ...                            cap=np.inf, psd=True, fit_intercept=True)
    >>> bool(np.isnan(cov).all()), note.startswith("no standard errors: the PSD projection")
    (True, True)
    """
    d = S.shape[0]
    nan = np.full((d + 1, d + 1), np.nan)
    eig = np.linalg.eigvalsh((S + S.T) / 2.0)
    if reports.n_clients < 2:
        return nan, ONE_CLIENT
    if unprojected_norm > cap:
        return nan, CAP_BINDS.format(cap=cap)
    if psd and eig[0] < 0.0:
        return nan, PSD_BINDS.format(k=int(np.sum(eig < 0.0)), d=d)
    if eig[0] + ridge <= 0.0:  # psd=False: an indefinite solve has no linearisation either
        return nan, PSD_BINDS.format(k=int(np.sum(eig < 0.0)), d=d)
    bread = (S + S.T) / 2.0 + ridge * np.eye(d)
    note = COVERS_RIDGE.format(mu=ridge) if ridge > 0.0 else COVERS_OLS
    sandwich = partial(sandwich_covariance, reports, coef, bread, fit_intercept=fit_intercept,
                       x_mean=x_mean)
    return (sandwich if deferred else sandwich()), note
