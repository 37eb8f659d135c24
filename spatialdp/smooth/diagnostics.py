"""Checks of a small-area model's assumptions: standardised residuals and their Moran's I.

Under the model, the marginal residuals ``y - X b`` whitened by the Cholesky
factor of their covariance are independent with unit variance. A whitened
residual beyond the Laplace-tail Bonferroni bound (Laplace noise is heavier
tailed than normal, so the normal bound would cry wolf), or a Moran's I of the
whitened residuals significant at 1% on the neighbour graph, says the model
visibly fails: :class:`SmallAreaModelWarning`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import sparse, stats

from spatialdp.exceptions import SmallAreaModelWarning

__all__ = ["MoranTest", "SmallAreaModelWarning", "morans_i", "outlier_bound"]

FloatArray = NDArray[np.float64]

#: The family-wise false-alarm rate of each check.
CHECK_LEVEL = 0.01


@dataclass(frozen=True)
class MoranTest:
    """Moran's I of residuals on a weights matrix, its z-score and two-sided p-value."""

    statistic: float
    z: float
    p_value: float


def morans_i(values: FloatArray, W: sparse.sparray | FloatArray) -> MoranTest:
    """Return Moran's I of ``values`` on ``W`` and its normal-approximation test.

    The moments are those under normality (Cliff & Ord): ``E[I] = -1/(n-1)``.

    Examples
    --------
    >>> W = np.array([[0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 0, 1], [0, 0, 1, 0]], float)
    >>> round(morans_i(np.array([1.0, 2.0, 3.0, 4.0]), W).statistic, 3)
    0.333
    """
    Wm = sparse.csr_array(W, dtype=np.float64)
    n = values.size
    z = values - values.mean()
    s0 = float(Wm.sum())
    sym = Wm + Wm.T
    s1 = 0.5 * float(sym.multiply(sym).sum())
    s2 = float(((np.asarray(Wm.sum(axis=1)).ravel() + np.asarray(Wm.sum(axis=0)).ravel())
                ** 2).sum())
    stat = n / s0 * float(z @ (Wm @ z)) / float(z @ z)
    mean = -1.0 / (n - 1)
    var = (n * n * s1 - n * s2 + 3 * s0 * s0) / ((n * n - 1) * s0 * s0) - mean * mean
    zscore = (stat - mean) / math.sqrt(var) if var > 0 else 0.0
    return MoranTest(stat, zscore, float(2.0 * stats.norm.sf(abs(zscore))))


def outlier_bound(n: int) -> float:
    """Return the bound on |whitened residual| whose family-wise rate is at most 1%.

    A unit-variance Laplace variable exceeds ``t`` with probability
    ``exp(-sqrt(2) t)``; mixing in normal parts only thins the tail.

    Examples
    --------
    >>> round(outlier_bound(48), 2)
    5.99
    """
    return math.log(n / CHECK_LEVEL) / math.sqrt(2.0)
