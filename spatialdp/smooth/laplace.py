"""A predictor that knows the published value's noise is Laplace: the exact posterior mean.

A published mean is ``y_i = theta_i + e_i + L_i``: the truth, a sampling error
``e_i`` (close to normal, variance ``s_i^2``) and the release's Laplace noise
``L_i`` (scale ``b_i``, public and exact). The linear EBLUP weighs ``y_i`` as
if ``e_i + L_i`` were normal; near the cohort floor the Laplace part dominates,
and since its tails are heavier than a normal's, the best predictor of
``theta_i`` is not linear in ``y_i``: a value far from what the model expects
is more likely a large noise draw than a large truth.

Under the fitted Gaussian model, what the other areas and the covariates say
about ``theta_i`` is its leave-one-out posterior ``N(m_i, tau_i^2)``, read off
the BLUP ``t_i`` and its error variance ``V_i = g1 + g2`` (``beta`` by GLS, as
under a flat prior) without refitting: since ``y_i`` depends on the rest only
through ``theta_i``, ``1 / V_i = 1 / tau_i^2 + 1 / d_i`` and
``t_i = m_i + (V_i / d_i)(y_i - m_i)`` with ``d_i = s_i^2 + 2 b_i^2``
(:func:`leave_one_out_prior`). The other areas' values enter ``m_i``
linearly, as in the EBLUP.

With that prior and the exact likelihood the marginal of ``u = y_i - m_i`` is
a normal of variance ``sigma^2 = tau^2 + s^2`` convolved with the Laplace law:

    p(u) = (A + B) / (2 b),  A = exp(a - u/b) Phi(u/sigma - sigma/b),
                             B = exp(a + u/b) Phi(-u/sigma - sigma/b),

``a = sigma^2 / (2 b^2)``. Because ``p`` depends on ``y_i - m_i`` only,
differentiating in ``m_i`` gives Tweedie-type identities: ``E[theta | y] =
m - tau^2 (log p)'(u)`` and ``Var[theta | y] = tau^2 + tau^4 (log p)''(u)``. The
normal-density terms of ``p'`` cancel, so ``(log p)'(u) = -(A - B) / (b (A + B))``
and ``(log p)''(u) = (1 - t^2 - 2 b phi(u/sigma) / (sigma (A + B))) / b^2``
with ``t = (A - B) / (A + B)``; all in logs (``log_ndtr``) for stability
(:func:`laplace_posterior`). As ``b -> 0`` they tend to the linear BLUP and
``g1 + g2`` (tested).

The predictor's MSE given the parameters is the expected posterior variance,
``tau^2 - tau^4 I``, with ``I = E[(log p)'(u)^2]`` the Fisher information of the
location family ``p``, by Gauss-Hermite (normal part) times Gauss-Laguerre
(Laplace part) quadrature (:func:`laplace_bayes_risk`). It is below the
linear ``g1 + g2`` whenever ``b > 0``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.special import log_ndtr

__all__ = ["laplace_bayes_risk", "laplace_posterior", "laplace_predict", "leave_one_out_prior",
           "mixture_laplace_mean"]

FloatArray = NDArray[np.float64]

#: Below this Laplace scale (relative to the marginal's normal sd) the noise is taken as normal
#: of the same variance: the Laplace shape then changes the posterior mean by less than about
#: 1e-6 of the sd for values within 3 sd, and the closed form would lose precision (its
#: posterior variance subtracts terms of order ``1 / b^2``).
NORMAL_LIMIT = 1e-2
#: Quadrature nodes: Gauss-Hermite for the normal part, Gauss-Laguerre for the Laplace part.
HERMITE_NODES, LAGUERRE_NODES = 48, 48
_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


def leave_one_out_prior(blup: FloatArray, variance: FloatArray, y: FloatArray,
                        d: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Return each area's prior ``(m, tau^2)`` given the other areas, from its BLUP.

    Parameters
    ----------
    blup, variance : ndarray
        The BLUP of each observed area and its error variance ``g1 + g2``.
    y, d : ndarray
        The area's direct estimate and its error variance.

    Returns
    -------
    m, tau2 : ndarray
        Infinite ``tau2`` (and ``m = y``) where the BLUP is the direct
        estimate (``variance >= d``).

    Examples
    --------
    >>> m, tau2 = leave_one_out_prior(np.array([1.5]), np.array([0.5]), np.array([2.0]),
    ...                               np.array([1.0]))   # prior N(1, 1), y = 2, d = 1
    >>> float(m[0]), float(tau2[0])
    (1.0, 1.0)
    """
    weight = np.clip(variance / d, 0.0, 1.0)
    direct = weight >= 1.0 - 1e-12
    safe = np.where(direct, 0.5, weight)
    m = np.where(direct, y, (blup - safe * y) / (1.0 - safe))
    tau2 = np.where(direct, np.inf, variance / (1.0 - safe))
    return m, tau2


def _log_parts(u: FloatArray, sigma: FloatArray, b: FloatArray
               ) -> tuple[FloatArray, FloatArray]:
    """Return ``log A`` and ``log B`` of the module's closed form."""
    a = sigma**2 / (2.0 * b**2)
    log_a = a - u / b + log_ndtr(u / sigma - sigma / b)
    log_b = a + u / b + log_ndtr(-u / sigma - sigma / b)
    return log_a, log_b


def laplace_posterior(y: FloatArray, m: FloatArray, tau2: FloatArray, s2: FloatArray,
                      b: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Return ``E[theta | y]`` and ``Var[theta | y]`` for ``y = theta + e + L``.

    ``theta ~ N(m, tau2)``, ``e ~ N(0, s2)``, ``L`` Laplace of scale ``b``;
    elementwise. ``b`` below :data:`NORMAL_LIMIT` times the normal sd gives
    the normal answer (noise of variance ``s2 + 2 b^2``); an infinite ``tau2``
    gives ``y`` and the noise variance.

    Examples
    --------
    A value 3 prior sds out, with noise of variance 1: normal noise moves the
    estimate half-way; Laplace noise of the same variance, whose large draws
    are likelier, makes the far value less informative:

    >>> mean, var = laplace_posterior(np.array([3.0, 3.0]), np.zeros(2), np.ones(2),
    ...                               np.array([1.0, 0.0]), np.array([0.0, 0.5 ** 0.5]))
    >>> mean.round(3).tolist(), var.round(3).tolist()
    ([1.5, 1.342], [0.5, 0.866])
    """
    y, m, tau2, s2, b = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64)
                                              for v in (y, m, tau2, s2, b)))
    flat = ~np.isfinite(tau2)
    tau2 = np.where(flat, 1.0, tau2)
    sigma2 = tau2 + s2
    sigma = np.sqrt(sigma2)
    u = y - m
    normal = (b <= NORMAL_LIMIT * sigma) | (sigma <= 0)
    total = sigma2 + 2.0 * b**2
    k = np.divide(tau2, total, out=np.zeros_like(tau2), where=total > 0)
    mean = m + k * u
    var = tau2 * (1.0 - k)
    lap = ~normal
    if lap.any():
        ul, sl, bl, tl = u[lap], sigma[lap], b[lap], tau2[lap]
        log_a, log_b = _log_parts(ul, sl, bl)
        t = np.tanh(0.5 * (log_a - log_b))
        log_sum = np.logaddexp(log_a, log_b)
        density = np.exp(-0.5 * (ul / sl) ** 2 - _LOG_SQRT_2PI - log_sum)
        mean[lap] = m[lap] + tl / bl * t
        var[lap] = tl + tl**2 * (1.0 - t**2 - 2.0 * bl * density / sl) / bl**2
    mean = np.where(flat, y, mean)
    var = np.where(flat, s2 + 2.0 * b**2, np.maximum(var, 0.0))
    return np.asarray(mean, dtype=np.float64), np.asarray(var, dtype=np.float64)


def laplace_bayes_risk(tau2: FloatArray, s2: FloatArray, b: FloatArray) -> FloatArray:
    """Return the expected posterior variance (the MSE) of :func:`laplace_posterior`'s mean.

    ``tau2 - tau2^2 I`` with ``I = E[(log p)'(u)^2]`` over ``u = sigma Z + L``,
    by Gauss-Hermite times Gauss-Laguerre quadrature; elementwise. An
    infinite ``tau2`` gives the direct estimate's error variance.

    Examples
    --------
    >>> risk = laplace_bayes_risk(np.ones(2), np.array([1.0, 0.0]), np.array([0.0, 0.5 ** 0.5]))
    >>> risk.round(4).tolist()        # noise of variance 1: normal 1/2, Laplace less
    [0.5, 0.4792]
    """
    tau2, s2, b = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64) for v in (tau2, s2, b)))
    flat = ~np.isfinite(tau2)
    tau2 = np.where(flat, 1.0, tau2)
    sigma2 = tau2 + s2
    sigma = np.sqrt(sigma2)
    total = sigma2 + 2.0 * b**2
    risk = np.divide(tau2 * (s2 + 2.0 * b**2), total, out=np.zeros_like(tau2), where=total > 0)
    lap = (b > NORMAL_LIMIT * sigma) & (sigma > 0)
    if lap.any():
        z, wz = np.polynomial.hermite_e.hermegauss(HERMITE_NODES)
        e, we = np.polynomial.laguerre.laggauss(LAGUERRE_NODES)
        wz = wz / wz.sum()
        sl, bl = sigma[lap][:, None, None], b[lap][:, None, None]
        u = sl * z[None, :, None] + bl * e[None, None, :]   # u and -u give the same t^2
        log_a, log_b = _log_parts(u, sl, bl)
        score2 = np.tanh(0.5 * (log_a - log_b)) ** 2 / bl**2
        info = np.einsum("rij,i,j->r", score2, wz, we)
        tl = tau2[lap]
        risk[lap] = tl - tl**2 * info
    risk = np.where(flat, s2 + 2.0 * b**2, np.maximum(risk, 0.0))
    return np.asarray(risk, dtype=np.float64)



def laplace_predict(blup: FloatArray, variance: FloatArray, y: FloatArray,
                    sampling_variance: FloatArray, noise_variance: FloatArray
                    ) -> tuple[FloatArray, FloatArray]:
    """Return the Laplace-aware predictions of observed areas and their MSE given the parameters.

    Parameters
    ----------
    blup, variance : ndarray
        The linear BLUP of each observed area and its error variance ``g1 + g2``
        (at the fitted variance parameters, ``beta`` by GLS).
    y : ndarray
        The published values.
    sampling_variance, noise_variance : ndarray
        The two parts of each value's error variance; the noise is Laplace of
        scale ``sqrt(noise_variance / 2)``.

    Returns
    -------
    prediction, mse : ndarray
        ``E[theta | y]`` under the leave-one-out prior
        (:func:`leave_one_out_prior`) and the exact likelihood, and its
        expected posterior variance (:func:`laplace_bayes_risk`), which
        replaces ``g1 + g2``.

    Examples
    --------
    >>> pred, mse = laplace_predict(np.array([0.5]), np.array([0.5]), np.array([1.0]),
    ...                             np.array([0.0]), np.array([1.0]))
    >>> float(pred[0]) < 1.0, bool(mse[0] < 0.5)     # shrunk, and below the linear g1 + g2
    (True, True)
    """
    d = sampling_variance + noise_variance
    m, tau2 = leave_one_out_prior(blup, variance, y, d)
    b = np.sqrt(noise_variance / 2.0)
    prediction, _ = laplace_posterior(y, m, tau2, sampling_variance, b)
    return prediction, laplace_bayes_risk(tau2, sampling_variance, b)


def mixture_laplace_mean(weight: FloatArray, blup: FloatArray, variance: FloatArray,
                         y: FloatArray, sampling_variance: FloatArray,
                         noise_variance: FloatArray) -> FloatArray:
    """Return the Laplace-aware predictions averaged over a posterior of the variance parameters.

    Parameters
    ----------
    weight : ndarray, shape (K,)
        The posterior weights of ``K`` grid points of the variance parameters
        (:class:`spatialdp.smooth.mixture.PosteriorMixture`).
    blup, variance : ndarray, shape (K, m)
        The BLUP of each observed area and its ``g1 + g2`` at each grid point.
    y, sampling_variance, noise_variance : ndarray, shape (m,)
        As in :func:`laplace_predict`.

    Examples
    --------
    >>> one = laplace_predict(np.array([0.5]), np.array([0.5]), np.array([1.0]),
    ...                       np.array([0.0]), np.array([1.0]))[0]
    >>> both = mixture_laplace_mean(np.array([0.5, 0.5]), np.full((2, 1), 0.5),
    ...                             np.full((2, 1), 0.5), np.array([1.0]), np.array([0.0]),
    ...                             np.array([1.0]))
    >>> bool(np.isclose(both[0], one[0]))
    True
    """
    d = sampling_variance + noise_variance
    b = np.sqrt(noise_variance / 2.0)
    m, tau2 = leave_one_out_prior(blup, variance, y[None, :], d[None, :])
    mean, _ = laplace_posterior(y[None, :], m, tau2, sampling_variance[None, :], b[None, :])
    return np.asarray(weight @ mean, dtype=np.float64)
