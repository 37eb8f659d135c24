"""Intervals for small-area estimates whose error is partly Laplace noise.

The EBLUP's error is its own direct estimate's noise times the shrinkage
weight, plus a combination of sampling errors, area effects and the other
areas' noises that is close to normal. Laplace noise has heavier tails than a
normal law of the same variance, so ``eblup +/- z sqrt(mse)`` undercovers where
the noise dominates (a small cohort, a small epsilon). The half-width used
here is the exact quantile of ``c L + s Z`` (L standard Laplace, Z standard
normal) with the same total variance as the MSE, where ``c^2 2 = w^2
noise_variance`` is the Laplace part: :func:`spatialdp.privacy.combined_noise.noise_sum_quantile`,
tabulated once on a grid of Laplace shares and interpolated.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from spatialdp.privacy.combined_noise import noise_sum_quantile

__all__ = ["interval_factor"]

FloatArray = NDArray[np.float64]

#: Laplace shares of the variance at which the quantile is computed exactly.
_SHARES = np.linspace(0.0, 1.0, 21)


@lru_cache(maxsize=64)
def _factors(alpha: float) -> tuple[float, ...]:
    """Return the ``1 - alpha`` quantile of a unit-variance Laplace-plus-normal, per share."""
    out = []
    for share in _SHARES:
        laplace = np.sqrt(share / 2.0)
        normal = float(np.sqrt(max(1.0 - share, 0.0)))
        out.append(noise_sum_quantile([laplace] if laplace > 0 else [], normal, alpha)
                   if share > 0 else noise_sum_quantile([], 1.0, alpha))
    return tuple(out)


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
    share = np.clip(np.nan_to_num(laplace_share, nan=0.0), 0.0, 1.0)
    return np.interp(share, _SHARES, np.array(_factors(float(alpha))))
