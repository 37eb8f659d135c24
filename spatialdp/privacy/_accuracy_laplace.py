"""Error figures of a sum of ``m`` continuous Laplace draws (private helpers).

All figures are for unit scale ``b = 1``; the caller multiplies by ``b``. See
:mod:`spatialdp.privacy.accuracy` for the method (an exact Poisson/negative
binomial identity for the tail).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from spatialdp.privacy._accuracy_numerics import CACHE, logsumexp_c, poisson_logpmf


def lap_mae(m: int) -> float:
    """Return E|S| / b for S a sum of m Laplace(1): 2 m C(2m, m) / 4**m.

    ``C(2m, m) / 4**m = Gamma(m + 1/2) / (sqrt(pi) Gamma(m + 1))``, a ratio taken by
    :func:`scipy.special.poch` (no cancellation of two huge log-gammas at large m).
    """
    from scipy import special  # lazy: scipy is slow to import
    return 2.0 * m * float(special.poch(m + 1, -0.5)) / math.sqrt(math.pi)


def lap_log_sf(m: int, x: float) -> float:
    """Return log P(S > x), S a sum of m Laplace(1), x >= 0.

    ``P(S > x) = P(Poisson(x) + NegBin(m, 1/2) <= m - 1)``.
    """
    from scipy import special  # lazy: scipy is slow to import
    if x <= 0:
        return math.log(0.5)
    if math.isinf(x):  # a threshold beyond every float multiple of a tiny scale
        return -math.inf
    if m == 1:
        return math.log(0.5) - x
    spread = 15.0 * math.sqrt(x) + 60.0
    first, last = max(0, int(x - spread)), min(m - 1, int(x + spread))
    if first > last:  # P(Poisson(x) <= m - 1) is below exp(-100): negligible
        return -math.inf
    k = np.arange(first, last + 1, dtype=np.float64)
    log_pmf = poisson_logpmf(k, x)
    with np.errstate(divide="ignore"):
        log_cdf = np.log(special.betainc(m, m - k, 0.5))
    return float(logsumexp_c(log_pmf + log_cdf))


@lru_cache(maxsize=CACHE)
def lap_half_width(m: int, alpha: float) -> float:
    """Return the half-width / b for the sum of m Laplace(1)."""
    if m == 1:  # closed form: no scipy import for the common single-value error bar
        return math.log(1.0 / alpha)
    from scipy import optimize, special  # lazy: scipy is slow to import
    target = math.log(alpha / 2)

    def f(x: float) -> float:
        return lap_log_sf(m, x) - target

    hi = 1.01 * min(math.sqrt(2 * m / alpha), 2 * (math.log(2 / alpha) + 0.2877 * m))
    lo = 0.0
    # the Laplace sum has heavier tails than the normal of equal variance: bracket from there
    z = -float(special.ndtri(alpha / 2)) * math.sqrt(2 * m)
    if z < hi and f(z) > 0:
        lo = z
        step = 1.25 * z
        if step < hi and f(step) <= 0:
            hi = step
    return float(optimize.brentq(f, lo, hi, xtol=1e-10, rtol=1e-11))
