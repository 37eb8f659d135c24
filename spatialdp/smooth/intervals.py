"""Intervals for small-area estimates whose error is partly Laplace noise.

The EBLUP's error is its own direct estimate's noise times the shrinkage
weight, plus a combination of sampling errors, area effects and the other
areas' noises that is close to normal. Laplace noise has heavier tails than a
normal law of the same variance, so ``eblup +/- z sqrt(mse)`` undercovers where
the noise dominates (a small cohort, a small epsilon). The half-width used
here is the exact quantile of ``c L + s Z`` (L standard Laplace, Z standard
normal) with the same total variance as the MSE, where ``c^2 2 = w^2
noise_variance`` is the Laplace part, in closed form for every region at once
(:func:`spatialdp.privacy.combined_noise.noise_sum_quantiles`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from spatialdp.privacy.combined_noise import noise_sum_quantiles

__all__ = ["interval_factor", "laplace_normal_cdf"]

FloatArray = NDArray[np.float64]

def interval_factor(laplace_share: FloatArray, alpha: float) -> FloatArray:
    """Return ``q`` such that ``eblup +/- q sqrt(mse)`` is a ``1 - alpha`` interval.

    Parameters
    ----------
    laplace_share : ndarray
        The share of each MSE that is the (own) Laplace noise, in [0, 1].
    alpha : float
        One minus the coverage.

    Examples
    --------
    >>> interval_factor(np.array([0.0, 1.0]), 0.05).round(3).tolist()   # 1.96; ln(20)/sqrt(2)
    [1.96, 2.118]
    """
    share = np.clip(np.nan_to_num(np.asarray(laplace_share, dtype=np.float64), nan=0.0),
                    0.0, 1.0)
    laplace = np.sqrt(share.ravel() / 2.0)  # Var(c L) = 2 c^2 = share
    normal = np.sqrt(1.0 - share.ravel())
    return noise_sum_quantiles(laplace[:, None], normal, float(alpha)).reshape(share.shape)


def laplace_normal_cdf(x: FloatArray, laplace: FloatArray, normal: FloatArray) -> FloatArray:
    """Return ``P(c L + s Z <= x)`` (``L`` standard Laplace, ``Z`` standard normal), elementwise.

    Closed form (a normal convolved with two exponentials):
    ``Phi(x/s) - exp(a - x/c) Phi(x/s - s/c) / 2 + exp(a + x/c) Phi(-x/s - s/c) / 2``
    with ``a = s^2 / (2 c^2)``, evaluated in logs; ``c = 0`` is the normal law and
    ``s = 0`` the Laplace law.

    Examples
    --------
    >>> c, s = np.array([1.0, 0.0, 1.0]), np.array([0.0, 1.0, 1.0])
    >>> laplace_normal_cdf(np.array([np.log(20.0), 1.96, 0.0]), c, s).round(4).tolist()
    [0.975, 0.975, 0.5]
    """
    from scipy.special import log_ndtr, ndtr

    c, s, x = np.broadcast_arrays(np.asarray(laplace, dtype=np.float64),
                                  np.asarray(normal, dtype=np.float64),
                                  np.asarray(x, dtype=np.float64))
    pure_normal = c <= 1e-4 * s
    pure_laplace = ~pure_normal & (s <= 1e-4 * c)
    mixed = ~(pure_normal | pure_laplace)
    out = np.empty(c.shape)
    xn = x[pure_normal]
    out[pure_normal] = ndtr(xn / s[pure_normal])
    xl, cl = x[pure_laplace], c[pure_laplace]
    out[pure_laplace] = np.where(xl < 0, 0.5 * np.exp(-np.abs(xl) / cl),
                                 1.0 - 0.5 * np.exp(-np.abs(xl) / cl))
    xm, cm, sm = x[mixed], c[mixed], s[mixed]
    a = sm**2 / (2.0 * cm**2)
    out[mixed] = (ndtr(xm / sm) - 0.5 * np.exp(a - xm / cm + log_ndtr(xm / sm - sm / cm))
                  + 0.5 * np.exp(a + xm / cm + log_ndtr(-xm / sm - sm / cm)))
    return np.asarray(np.clip(out, 0.0, 1.0), dtype=np.float64)
