"""Error figures of a hierarchical answer: a weighted sum of independent discrete Laplace draws.

After least-squares consistency a hierarchical answer's error is ``X = sum_i
w_i Z_i`` over the noise ``Z_i`` of every node of the trees the query
touches (weights from :meth:`~spatialdp.queries.grids.Tree.query_weights`,
scales per level). Its characteristic function is the exact product

    phi(t) = prod_i (1 - a_i)**2 / (1 - 2 a_i cos(w_i t) + a_i**2),  a_i = exp(-1/b_i),

from which, for a symmetric ``X``,

* ``E|X| = (2/pi) int_0^inf (1 - phi(t)) / t**2 dt``;
* ``P(|X| <= h) = (2/pi) int_0^inf sin(h t) phi(t) / t dt`` (at an atom: the
  mean of the two one-sided limits).

Both integrals are taken on a uniform grid fine enough for the oscillation
(step ``min(1/(8 sd), pi/(8 max|w|))``), up to where ``|phi|`` stays below
``1e-9`` (the tail of the first integral is added as ``(2/pi)/T``). A small
query is dominated by its own leaves (a Laplace-like law, not normal); a large
one is nearly normal; the inversion covers both.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import integrate, optimize

__all__ = ["WeightedSum"]

_TINY = 1e-9
_MAX_POINTS = 400_000


class WeightedSum:
    """The law of ``sum_i w_i Z_i`` for independent discrete Laplace ``Z_i`` of scales ``b_i``.

    Parameters
    ----------
    weights, scales : array-like of float
        One per term (zero weights are dropped).

    Examples
    --------
    >>> law = WeightedSum([1.0], [1.0])  # one discrete Laplace cell at b = 1
    >>> round(law.mean_abs(), 4)  # 2a / (1 - a**2), a = 1/e
    0.8509
    """

    def __init__(self, weights: NDArray[np.float64], scales: NDArray[np.float64]) -> None:
        w = np.abs(np.asarray(weights, dtype=np.float64).ravel())
        b = np.broadcast_to(np.asarray(scales, dtype=np.float64), w.shape)
        keep = w > 0
        # equal terms are many (nodes in the same position of their trees): group them,
        # with their multiplicity as an exponent of their factor of phi
        key = np.column_stack([np.round(np.log(w[keep]), 11), b[keep]])
        groups, first, self.count = np.unique(key, axis=0, return_index=True,
                                              return_counts=True)
        self.w = w[keep][first]
        self.a = np.exp(-1.0 / b[keep][first])
        var_terms = 2.0 * self.a / (1.0 - self.a) ** 2
        self.variance = float((self.count * self.w**2 * var_terms).sum())
        del groups
        self.sd = math.sqrt(self.variance)
        self._grid()

    @classmethod
    def of_query(cls, weights: list[Any], scales: tuple[float, ...], j: int) -> WeightedSum:
        """Return the law of query ``j`` from per-level weights (``Tree.query_weights``)."""
        w = np.concatenate([wl[:, [j]].toarray().ravel() for wl in weights])
        b = np.concatenate([np.full(wl.shape[0], s) for wl, s in
                            zip(weights, scales, strict=True)])
        return cls(w, b)

    def _log_phi(self, t: NDArray[np.float64]) -> NDArray[np.float64]:
        out = np.zeros(t.size)
        a = self.a
        log_num = 2.0 * np.log1p(-a)
        for start in range(0, t.size, 2048):  # bounded memory: terms x 2048 points
            chunk = t[start:start + 2048]
            cos = np.cos(np.outer(self.w, chunk))
            den = 1.0 - 2.0 * a[:, None] * cos + (a**2)[:, None]
            out[start:start + 2048] = self.count @ (log_num[:, None] - np.log(den))
        return out

    def _grid(self) -> None:
        step = min(1.0 / (8.0 * self.sd), math.pi / (8.0 * float(self.w.max())))
        t_parts, phi_parts = [], []
        start = 0.0
        block = 4096
        for _ in range(_MAX_POINTS // block):
            t = start + step * np.arange(block, dtype=np.float64)
            phi = np.exp(self._log_phi(t))
            t_parts.append(t)
            phi_parts.append(phi)
            start = float(t[-1]) + step
            if float(np.abs(phi[block // 2:]).max()) < _TINY:
                break
        self.t = np.concatenate(t_parts)
        self.phi = np.concatenate(phi_parts)

    def mean_abs(self) -> float:
        """Return ``E|X|``."""
        t, phi = self.t[1:], self.phi[1:]
        head = self.variance / 2.0  # the integrand's limit at t = 0
        integrand = np.concatenate([[head], (1.0 - phi) / t**2])
        value = integrate.trapezoid(integrand, self.t) + 1.0 / float(self.t[-1])
        return float(2.0 / math.pi * value)

    def cdf_abs(self, h: float) -> float:
        """Return ``P(|X| <= h)``."""
        t, phi = self.t[1:], self.phi[1:]
        integrand = np.concatenate([[h], np.sin(h * t) * phi / t])
        return float(2.0 / math.pi * integrate.trapezoid(integrand, self.t))

    def quantile_abs(self, q: float = 0.95) -> float:
        """Return the ``q`` quantile of ``|X|``."""
        hi = 6.0 * self.sd
        while self.cdf_abs(hi) < q:
            hi *= 2.0
        return float(optimize.brentq(lambda h: self.cdf_abs(h) - q, 0.0, hi, xtol=1e-6 * hi))


def mixture_quantile_abs(laws: list[WeightedSum], q: float = 0.95) -> float:
    """Return the ``q`` quantile of ``|X|`` pooled over several laws (equal weights)."""
    hi = 6.0 * max(law.sd for law in laws)

    def miss(h: float) -> float:
        return float(np.mean([law.cdf_abs(h) for law in laws])) - q

    while miss(hi) < 0:
        hi *= 2.0
    return float(optimize.brentq(miss, 0.0, hi, xtol=1e-6 * hi))
