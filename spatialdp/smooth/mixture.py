"""Intervals that integrate over the uncertainty of the variance parameters.

A plug-in interval ``eblup +/- q sqrt(mse)`` treats the estimated variance
parameters as known, up to the second-order term of the MSE. With a few dozen
areas they are poorly determined, and the rounds where they are misestimated
(``s2u`` near 0, ``rho`` off) are exactly those where the EBLUP's error is
large and its estimated MSE small: the plug-in intervals of noisy regions
undercover (0.92 at epsilon 0.1 on the 48 states), and the parametric
bootstrap, a plug-in too, does not help (``docs/small_area.md``).

Here the interval of each area comes from the posterior of its value under
the hierarchical model with flat priors on ``beta``, ``s2u >= 0`` and ``rho`` in
``(-1, 1)``. Given ``(s2u, rho)`` the posterior of ``theta_i`` (``beta``
integrated out) has mean the BLUP at those parameters and variance
``g1 + g2``; the posterior of ``(s2u, rho)`` is proportional to their REML
likelihood (the likelihood with ``beta`` integrated out under its flat prior).
So the posterior of ``theta_i`` is a mixture over a grid of ``(s2u, rho)``
weighted by the REML likelihood: the hierarchical-Bayes interval of the
Fay-Herriot tradition (Rao & Molina 2015, *Small Area Estimation*, ch. 10).
Datta, Rao & Smith (2005, Biometrika 92) derive the non-informative prior on
``s2u`` that makes the Fay-Herriot posterior variance second-order unbiased
for the MSE; with equal ``d_i`` it is the flat prior used here. The priors are
a device: the frequentist coverage is what ``benchmarks/bench_small_area.py``
and the tests check. Its intervals widen by the parameters' whole
uncertainty, not its first-order approximation.

The Laplace noise is kept as the plug-in interval keeps it
(:mod:`spatialdp.smooth.intervals`): each mixture component is the BLUP plus
``c L + s Z``, with ``2 c^2 = own weight^2 x noise variance`` (the own direct
estimate's Laplace noise) and ``s^2`` the rest of ``g1 + g2``. The interval's
ends are the ``alpha / 2`` and ``1 - alpha / 2`` quantiles of the mixture, by
bisection on its closed-form distribution function
(:func:`spatialdp.smooth.intervals.laplace_normal_cdf`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from spatialdp.smooth.fay_herriot import fh_grid
from spatialdp.smooth.intervals import interval_factor, laplace_normal_cdf
from spatialdp.smooth.spatial import SarModel, sar_grid

__all__ = ["PosteriorMixture", "fh_mixture", "grid_weights", "refined", "s2u_grid", "sar_mixture"]

FloatArray = NDArray[np.float64]

#: Components whose weights sum to less than this are dropped.
NEGLIGIBLE_MASS = 1e-4
#: Bisection steps of the quantiles, started from the components' quantiles.
STEPS = 20


def grid_weights(loglik: FloatArray, log_prior: FloatArray) -> FloatArray:
    """Return normalised posterior weights of grid points from log-likelihood and log-prior.

    Examples
    --------
    >>> grid_weights(np.array([0.0, np.log(3.0)]), np.zeros(2)).tolist()
    [0.25, 0.75]
    """
    log_post = np.where(np.isfinite(loglik), loglik + log_prior, -np.inf)
    w = np.exp(log_post - log_post.max())
    return np.asarray(w / w.sum(), dtype=np.float64)


@dataclass(frozen=True)
class PosteriorMixture:
    """Per-area posterior of the small-area values: a mixture over variance parameters.

    Component ``k`` of area ``i`` is ``mean[k, i] + laplace[k, i] L + normal[k, i] Z``
    (``L`` standard Laplace, ``Z`` standard normal), with weight ``weight[k]``.
    """

    weight: FloatArray
    mean: FloatArray
    laplace: FloatArray
    normal: FloatArray

    @classmethod
    def from_grid(cls, weight: FloatArray, mean: FloatArray, variance: FloatArray,
                  own: FloatArray, noise_variance: FloatArray) -> PosteriorMixture:
        """Build the mixture, splitting each variance into the own Laplace noise and the rest.

        Components carrying less than :data:`NEGLIGIBLE_MASS` in all are dropped.

        Examples
        --------
        >>> m = PosteriorMixture.from_grid(np.array([1.0]), np.zeros((1, 2)),
        ...     np.array([[1.0, 1.0]]), np.array([[0.0, 1.0]]), np.array([0.5, 0.5]))
        >>> m.laplace.round(3).tolist(), m.normal.round(3).tolist()
        ([[0.0, 0.5]], [[1.0, 0.707]])
        """
        order = np.argsort(weight)
        drop = order[np.cumsum(weight[order]) < NEGLIGIBLE_MASS]
        keep = np.setdiff1d(np.arange(weight.size), drop)
        laplace_var = np.minimum(own[keep] ** 2 * noise_variance[None, :], variance[keep])
        return cls(weight[keep] / weight[keep].sum(), mean[keep],
                   np.sqrt(laplace_var / 2.0), np.sqrt(variance[keep] - laplace_var))

    def cdf(self, x: FloatArray) -> FloatArray:
        """Return the mixture's distribution function at ``x`` (one point per area)."""
        return np.asarray(self.weight @ laplace_normal_cdf(x[None, :] - self.mean,
                                                            self.laplace, self.normal),
                          dtype=np.float64)

    def quantile(self, level: float) -> FloatArray:
        """Return each area's ``level`` quantile (bisection).

        Examples
        --------
        >>> m = PosteriorMixture(np.array([1.0]), np.zeros((1, 1)), np.zeros((1, 1)),
        ...                      np.ones((1, 1)))
        >>> round(float(m.quantile(0.975)[0]), 4)
        1.96
        """
        # The mixture's quantile lies between its components' quantiles.
        sd = np.sqrt(2.0 * self.laplace**2 + self.normal**2)
        share = np.divide(2.0 * self.laplace**2, sd**2, out=np.zeros_like(sd), where=sd > 0)
        tail = min(level, 1.0 - level)
        factor = interval_factor(share.ravel(), 2.0 * tail).reshape(sd.shape)
        ends = self.mean + np.sign(level - 0.5) * factor * sd
        low, high = ends.min(axis=0), ends.max(axis=0)
        low, high = low - 1e-9 * (np.abs(low) + sd.max(axis=0)), high + 1e-9 * (
            np.abs(high) + sd.max(axis=0))
        for _ in range(STEPS):
            mid = 0.5 * (low + high)
            below = self.cdf(mid) < level
            low, high = np.where(below, mid, low), np.where(below, high, mid)
        return np.asarray(0.5 * (low + high), dtype=np.float64)

    def interval(self, alpha: float) -> tuple[FloatArray, FloatArray]:
        """Return the equal-tailed ``1 - alpha`` interval of every area."""
        return self.quantile(alpha / 2.0), self.quantile(1.0 - alpha / 2.0)


#: Points of the coarse grids (the posterior's support) and of the refined ones.
COARSE_POINTS = 12
FINE_POINTS = 20
#: Range of the coarse ``s2u`` grid, relative to the scale of the data (see :func:`s2u_grid`).
S2U_RANGE = (1e-4, 10.0)
#: Grid points whose posterior is below this fraction of the largest bound the refined grid.
SUPPORT = 1e-8
#: Open bound of the spatial parameter's grids.
RHO_LIMIT = 0.999


def s2u_grid(y: FloatArray, d: FloatArray, points: int = COARSE_POINTS) -> FloatArray:
    """Return the coarse, log-spaced ``s2u`` grid.

    It spans :data:`S2U_RANGE` times ``max(var(y), median(d))``: the data's
    total variance bounds ``s2u`` from above (the REML likelihood falls as a
    power beyond), and a flat prior puts little mass near 0.

    Examples
    --------
    >>> s = s2u_grid(np.array([0.0, 2.0]), np.array([0.1, 0.1]))
    >>> bool(np.isclose(s[0], 1e-4)), bool(np.isclose(s[-1], 10.0))
    (True, True)
    """
    scale = max(float(np.var(y)), float(np.median(d)), 1e-300)
    return np.geomspace(S2U_RANGE[0] * scale, S2U_RANGE[1] * scale, points)


def refined(values: FloatArray, marginal: FloatArray, log: bool,
            bounds: tuple[float, float] = (0.0, np.inf), points: int = FINE_POINTS
            ) -> FloatArray:
    """Return a finer grid over the support of a coarse grid's marginal posterior.

    The support is where the marginal exceeds :data:`SUPPORT` times its
    largest value, widened by one coarse step on each side (within ``bounds``).

    Examples
    --------
    >>> r = refined(np.array([1.0, 2.0, 3.0, 4.0]), np.array([0.0, 1.0, 0.5, 0.0]), False)
    >>> float(r[0]), float(r[-1]), r.size   # the support touches an end: one step beyond
    (0.0, 5.0, 20)
    >>> r = refined(np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 0.0, 0.0, 0.0]), False)
    >>> float(r[0]), float(r[-1])
    (0.0, 2.0)
    """
    inside = np.flatnonzero(marginal > SUPPORT * marginal.max())
    low, high = max(inside[0] - 1, 0), min(inside[-1] + 1, values.size - 1)
    step = (values[1] / values[0]) if log else (values[1] - values[0])
    lo = values[low] if low > 0 or log else max(values[0] - step, bounds[0])
    hi = values[high] if high < values.size - 1 or log else min(values[-1] + step, bounds[1])
    if log:
        return np.geomspace(lo, hi, points)
    return np.linspace(lo, hi, points)


def _posterior(loglik: FloatArray, s2u: FloatArray, rows: int) -> FloatArray:
    """Posterior weights of a ``rows x len(s2u)`` grid: flat priors, log-spaced ``s2u``.

    On a log-spaced grid a flat prior on ``s2u`` weighs each point by ``s2u``.
    """
    return grid_weights(loglik, np.tile(np.log(s2u), rows))


def sar_mixture(model: SarModel, noise_variance: FloatArray) -> PosteriorMixture:
    """Return the posterior mixture of the spatial model's area values (flat priors).

    A coarse grid of ``(s2u, rho)`` finds the posterior's support; the mixture
    is taken on a finer grid over it. ``noise_variance`` is the Laplace noise
    variance of every area (0 where unobserved); see the module for the model.

    Examples
    --------
    >>> W = np.array([[0, 1, 0, 0], [.5, 0, .5, 0], [0, .5, 0, .5], [0, 0, 1, 0]])
    >>> m = SarModel(np.array([1.0, 1.2, 2.0, 2.1]), np.ones((4, 1)), np.full(4, 0.05), W,
    ...              np.ones(4, dtype=bool))
    >>> low, high = sar_mixture(m, np.full(4, 0.04)).interval(0.05)
    >>> bool((low < m.y).all() and (m.y < high).all())
    True
    """
    s2u = s2u_grid(model.y, model.d)
    rhos = np.linspace(-RHO_LIMIT, RHO_LIMIT, 2 * COARSE_POINTS + 1)[1::2]
    loglik = np.stack([sar_grid(model, float(rho), s2u)[0] for rho in rhos])
    weight = _posterior(loglik.ravel(), s2u, rhos.size).reshape(loglik.shape)
    s2u = refined(s2u, weight.sum(axis=0), log=True)
    rhos = refined(rhos, weight.sum(axis=1), log=False, bounds=(-RHO_LIMIT, RHO_LIMIT))
    parts = [sar_grid(model, float(rho), s2u) for rho in rhos]
    weight = _posterior(np.concatenate([p[0] for p in parts]), s2u, rhos.size)
    mean, variance, own = (np.concatenate([p[i] for p in parts]) for i in (1, 2, 3))
    return PosteriorMixture.from_grid(weight, mean, variance, own, noise_variance)


def fh_mixture(y: FloatArray, X: FloatArray, d: FloatArray, observed: NDArray[np.bool_],
               noise_variance: FloatArray) -> PosteriorMixture:
    """Return the posterior mixture of the Fay-Herriot model's area values (flat priors).

    ``y``, ``d`` and ``noise_variance`` are read on the observed areas only;
    the grid of ``s2u`` is refined as in :func:`sar_mixture`.

    Examples
    --------
    >>> y, X, d = np.array([1.0, 1.3, 0.5, 0.9]), np.ones((4, 1)), np.full(4, 0.1)
    >>> low, high = fh_mixture(y, X, d, np.ones(4, dtype=bool), np.full(4, 0.05)).interval(0.05)
    >>> bool((low < y).all() and (y < high).all())
    True
    """
    s2u = s2u_grid(y[observed], d[observed], 4 * COARSE_POINTS)
    coarse = fh_grid(y, X, d, observed, s2u)[0]
    s2u = refined(s2u, _posterior(coarse, s2u, 1), log=True)
    loglik, mean, variance, own = fh_grid(y, X, d, observed, s2u)
    noise = np.where(observed, noise_variance, 0.0)
    return PosteriorMixture.from_grid(_posterior(loglik, s2u, 1), mean, variance, own, noise)
