"""How strongly to regularise, from quantities known before looking at any test data.

The noise model (checked by Monte Carlo in the tests). With ``s`` the average
per-coordinate feature second moment (``E||x||^2 / d``, at most ``R^2 / d``),
``a = (1 - alpha)^2 s + lambda^2 / (2 d)`` the per-coordinate second moment of
the modulated signal and ``Y2 = E y^2`` (plus the label-noise variance):

* each entry of ``Sigma^`` has variance about ``v_S = (sigma^2 + a)^2 / (K (1 - alpha)^4)``;
* each coordinate of ``b^`` has variance about ``v_b = Y2 (sigma^2 + a) / (K (1 - alpha)^2)``.

For a ridge solve ``(Sigma^ + mu I)^{-1} b^`` with ``Sigma ~ s I`` and a true
coefficient vector of squared norm ``B2``, to first order

    ``E||beta^ - beta||^2 ~ (d N + mu^2 B2) / (s + mu)^2``,  ``N = v_b + v_S B2``

which is smallest at ``mu* = d N / (s B2)`` (:func:`optimal_ridge`), the
James-Stein-like balance of noise against signal. That first-order formula
is only valid while the covariance noise is small against ``s``
(``sqrt(d v_S) << s``); in the noise-dominated regime that matters here it
over-regularises badly (it ignores that the PSD projection of a noisy matrix
already shrinks: its positive part inflates the spectrum).

**The risk of a ridge, by parametric simulation** (:func:`simulated_risk`):
with ``Sigma = s I`` and a coefficient vector of squared norm ``B2`` (the
direction does not matter for isotropic ``Sigma`` and rotation-invariant
noise), draw 48 noisy moment pairs from the noise model (symmetric Gaussian
``Sigma^`` noise, off-diagonal variance ``v_S``, diagonal ``2 v_S``; ``b^``
noise ``v_b``), apply exactly the estimator (PSD projection, ridge, norm cap)
for 32 ridges on a log grid from ``1e-4 s`` to ``1e3 s``, and average the
excess risk ``s ||beta^ - beta||^2``. The same draws serve every ``B2`` and
every ridge, with a fixed internal seed (they are not noise on any data), so
fits are reproducible.

**The ridge: a Bayes rule over the signal** (:func:`signal_posterior`,
:func:`bayes_ridge`). The risk depends on the unknown ``B2``, and a point
estimate of it is fragile: the previous rule took ``B2`` two standard errors
low, which is 0 whenever ``||b^||^2`` exceeds its noise level ``d v_b`` by less
than about two standard errors, and at ``B2 = 0`` the best ridge is the
largest, so the fit predicted the mean even where a fixed ridge of 1 halved
the error (modechoice at epsilon 8: test MSE 1.00 against 0.49). Instead:

* prior: the share of the label's second moment a linear model explains,
  ``r2 = s B2 / Y2``, is 0 with probability :data:`NULL_PRIOR` = 1/2 (even
  odds that there is nothing to learn) and otherwise uniform on ``(0, 1)``
  (:data:`PRIOR_POINTS` midpoints), so ``B2`` ranges over ``[0, Y2 / s]``, up
  to the norm-cap bound;
* likelihood of the release: ``b^ ~ N(s beta, v_b I)``, so ``||b^||^2`` has mean
  ``d v_b + s^2 B2`` and variance ``2 d v_b^2 + 4 s^2 B2 v_b`` (Gaussian
  approximation);
* the ridge minimises the posterior mean of the simulated risk over the grid.

The rule cannot collapse to predicting the mean on a release that shows
signal: every ``B2`` the release leaves plausible keeps its weight, and a
large ``B2`` weighs heavily (shrinking it to zero costs ``s B2``). When the
release is uninformative the posterior is the prior and the ridge hedges
between "no signal" and "some signal"; the even prior odds on "no signal" keep
that hedge cheap: measured on isotropic synthetic data with no signal at all,
at most 0.3% of ``E y^2`` on average against predicting the mean (a uniform
prior on ``r2`` alone cost up to 0.9%, and 1.4% on the ``fair`` data at
epsilon 1). :func:`choose_ridge` is the same rule on
the typical release of a given ``B2`` (``||b^||^2`` at its expectation), with
the risk at that ``B2``: what the planner predicts.

In a fit, ``sigma``, ``K``, ``d``, ``alpha``, ``lambda``, ``m`` and ``R`` are
public; ``s`` is the trace of ``Sigma^`` over ``d`` plus two standard errors,
at most ``R^2 / d`` (and ``R^2 / d`` itself when the estimate is within two
standard errors of zero, i.e. uninformative: an underestimated ``s`` makes the
simulated solve look better conditioned than it is), ``Y2`` the mean squared
(centred) label minus the label-noise variance, and ``||b^||^2`` enters the
posterior: all are post-processing of the release and public parameters.
The norm cap is ``c sqrt(Y2 / s)`` (:func:`norm_cap`, ``c = 2``): for isotropic
features ``beta^T Sigma beta <= E y^2`` gives ``||beta|| <= sqrt(Y2 / s)``;
``c`` leaves room for anisotropy.

Examples
--------
>>> v_S, v_b = noise_variances(10_000, 4, sigma=1.0, alpha=0.0, lam=0.0, feature_scale=0.25,
...                            label_second_moment=1.0)
>>> round(v_S, 8), round(v_b, 6)
(0.00015625, 0.000125)
>>> round(optimal_ridge(4, 0.25, v_b + v_S * 1.0, 1.0), 5)
0.0045
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from spatialdp._blas import single_blas
from spatialdp._validation import check_integer, check_number, check_positive, fail

__all__ = [
    "NORM_CAP_FACTOR",
    "NULL_PRIOR",
    "PRIOR_POINTS",
    "Regularization",
    "bayes_ridge",
    "choose_ridge",
    "noise_variances",
    "norm_cap",
    "optimal_ridge",
    "regularization_from_moments",
    "signal_posterior",
    "simulated_risk",
]

#: Ridges tried by :func:`choose_ridge`, as multiples of the feature scale ``s``.
RIDGE_GRID = np.logspace(-4.0, 3.0, 32)

#: Simulated fits per ridge in :func:`simulated_risk`.
RISK_DRAWS = 48

#: Points of the uniform part of the prior on the explained share ``r2`` (:func:`signal_posterior`).
PRIOR_POINTS = 16

#: Prior probability that a linear model explains nothing (``r2 = 0``): even odds.
NULL_PRIOR = 0.5

#: Multiple of ``sqrt(E y^2 / s)`` used as the coefficient norm cap.
NORM_CAP_FACTOR = 2.0

_MIN_SIGNAL = 1e-12


def noise_variances(n_clients: int, n_features: int, *, sigma: float, alpha: float, lam: float,
                    feature_scale: float, label_second_moment: float,
                    label_sigma: float = 0.0) -> tuple[float, float]:
    """Return ``(v_S, v_b)``: per-entry variance of ``Sigma^`` and per-coordinate of ``b^``."""
    a = (1.0 - alpha) ** 2 * feature_scale + lam**2 / (2.0 * n_features)
    total = sigma**2 + a
    v_S = total**2 / (n_clients * (1.0 - alpha) ** 4)
    v_b = (label_second_moment + label_sigma**2) * total / (n_clients * (1.0 - alpha) ** 2)
    return v_S, v_b


def optimal_ridge(n_features: int, feature_scale: float, noise_per_coordinate: float,
                  signal_norm2: float) -> float:
    """Return ``mu* = d N / (s B2)``, the first-order MSE-optimal ridge strength.

    Raises
    ------
    InvalidInput
        A non-number, ``n_features < 1``, ``feature_scale <= 0``, a negative noise or
        signal, or arguments whose ridge does not fit in a float.
    """
    d = check_integer(n_features, "n_features", low=1, high=10**7,
                      fix="pass a whole number of features between 1 and 10**7")
    s = check_positive(feature_scale, "feature_scale")
    noise = check_number(noise_per_coordinate, "noise_per_coordinate", low=0.0,
                         fix="pass a noise variance >= 0")
    b2 = check_number(signal_norm2, "signal_norm2", low=0.0, fix="pass ||beta||^2 >= 0")
    denom = s * max(b2, _MIN_SIGNAL)
    mu = d * noise / denom if denom > 0.0 else math.inf
    if not math.isfinite(mu):
        raise fail("feature_scale", feature_scale, f"gives a ridge d N / (s B2) beyond float "
                   f"range (d={d}, N={noise:g}, B2={b2:g})", "rescale the features")
    return mu


def norm_cap(label_second_moment: float, feature_scale: float,
             factor: float = NORM_CAP_FACTOR) -> float:
    """Return the coefficient norm cap ``factor * sqrt(E y^2 / s)``."""
    return factor * math.sqrt(max(label_second_moment, 0.0) / feature_scale)


@lru_cache(maxsize=16)
def _standard_draws(n_features: int, draws: int, seed: int,
                    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return the spectra of the simulation's noise matrices and the cross terms, at unit scale.

    :func:`_risk_table` draws ``Sigma^ = s I + sqrt(v_S / 2) (N + N^T)`` and ``b^ = s beta
    + sqrt(v_b) e`` with standard normal ``N`` and ``e`` (fixed seed: a constant of the
    rule, not noise on any data). ``Sigma^`` has the eigenvectors ``Q`` of ``N + N^T`` and
    eigenvalues ``s + sqrt(v_S / 2) w0``, so one eigendecomposition per ``(d, draws,
    seed)`` serves every scale. In that eigenbasis ``beta = size e_1`` has coordinates
    ``size q1`` (``q1 = Q[0]``) and ``e`` has ``e' = Q^T e``; returned: ``w0`` and the
    stack ``(e'^2, e' q1, q1^2)`` (``draws x d`` each; a sign flip of an eigenvector
    leaves them unchanged). Read-only, cached per process.
    """
    d = n_features
    rng = np.random.default_rng(seed)
    noise = rng.standard_normal((draws, d, d))
    e = rng.standard_normal((draws, d))
    with single_blas():  # many small eigenproblems: threads only wait for each other
        w0, Q = np.linalg.eigh(noise + np.swapaxes(noise, 1, 2))
    q1 = Q[:, 0, :]
    ep = np.einsum("kji,kj->ki", Q, e)
    terms = np.stack([ep * ep, ep * q1, q1 * q1])
    w0.setflags(write=False)
    terms.setflags(write=False)
    return w0, terms


def _risk_table(n_features: int, feature_scale: float, signal_norm2s: NDArray[np.float64],
                cov_noise_var: float, cross_noise_var: float, ridges: NDArray[np.float64], *,
                cap: float, psd: bool, draws: int, seed: int) -> NDArray[np.float64]:
    """Return the simulated mean excess risk, one row per signal norm and one column per ridge.

    The same noise draws serve every signal and ridge (common random numbers): the
    table is smooth in both, and its minimum over the ridges is not a lucky draw.
    """
    s = feature_scale
    w0, unit_terms = _standard_draws(n_features, draws, seed)
    w = s + math.sqrt(cov_noise_var / 2.0) * w0
    if psd:
        w = np.maximum(w, 0.0)
    terms = unit_terms * np.array([cross_noise_var, math.sqrt(cross_noise_var), 1.0])[:, None, None]
    size = np.sqrt(np.maximum(signal_norm2s, 0.0))[:, None, None]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inv = 1.0 / (w[None] + ridges[:, None, None])
        A, B, C = np.einsum("mkj,rkj->mrk", terms, inv * inv)
        D, E = np.einsum("mkj,rkj->mrk", terms[1:], inv)
        risk = _excess_risk(A, B, C, D, E, s=s, size=size, cap=cap)
    return np.asarray(risk.mean(axis=2), dtype=np.float64)


def _excess_risk(A: NDArray[np.float64], B: NDArray[np.float64], C: NDArray[np.float64],
                 D: NDArray[np.float64], E: NDArray[np.float64], *, s: float,
                 size: NDArray[np.float64], cap: float) -> NDArray[np.float64]:
    """Return ``s (shrink^2 ||z||^2 - 2 shrink size z.q1 + size^2)`` per (signal, ridge, draw).

    ``||z||^2 = A + 2 t B + t^2 C`` and ``z.q1 = D + t E`` with ``t = s size``; shrink
    is the norm cap's ``min(1, cap / ||z||)``; non-finite risks become ``1e300`` and
    negative ones 0. In place on a few (signal, ridge, draw) arrays: the same
    operations, in the same order, as the one-line formula, without its twenty
    temporaries (each a fresh allocation the size of the table).
    """
    t = s * size
    norm2 = (2.0 * t) * B
    np.add(A, norm2, out=norm2)
    norm2 += (t * t) * C
    cross = t * E
    np.add(D, cross, out=cross)
    cross *= size
    shrink = np.sqrt(norm2)
    np.maximum(shrink, 1e-300, out=shrink)
    np.divide(cap, shrink, out=shrink)
    np.minimum(1.0, shrink, out=shrink)
    risk = shrink * shrink
    risk *= norm2
    shrink *= 2.0
    shrink *= cross
    risk -= shrink
    risk += size**2
    risk *= s
    bad = ~np.isfinite(risk)
    np.maximum(risk, 0.0, out=risk)
    risk[bad] = 1e300
    return risk


def simulated_risk(n_features: int, feature_scale: float, signal_norm2: float, cov_noise_var: float,
                   cross_noise_var: float, ridges: Any, *, cap: float = math.inf,
                   psd: bool = True, draws: int = RISK_DRAWS, seed: int = 0,
                   ) -> NDArray[np.float64]:
    """Return the mean excess risk of the moment solve at each ridge, by simulation.

    Examples
    --------
    >>> r = simulated_risk(4, 0.25, 1.0, 1e-4, 1e-4, [0.0, 1e3])
    >>> bool(r[0] < 0.01), round(float(r[1]), 2)  # no ridge: small error; huge: predicts 0
    (True, 0.25)
    """
    return _risk_table(n_features, feature_scale, np.array([float(signal_norm2)]),
                       cov_noise_var, cross_noise_var, np.asarray(ridges, dtype=np.float64),
                       cap=cap, psd=psd, draws=draws, seed=seed)[0]


def signal_posterior(n_features: int, feature_scale: float, label_second_moment: float,
                     cross_noise_var: float, observed_norm2: float,
                     ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return ``(B2 grid, posterior weights)`` of the signal given ``||b^||^2``.

    The prior is on the share of the label's second moment a linear model
    explains, ``r2 = s B2 / E y^2``: ``r2 = 0`` with probability
    :data:`NULL_PRIOR`, else uniform on ``(0, 1)`` (:data:`PRIOR_POINTS`
    midpoints). The likelihood of ``||b^||^2`` is Gaussian with mean
    ``d v_b + s^2 B2`` and variance ``2 d v_b^2 + 4 s^2 B2 v_b`` (``b^ ~
    N(s beta, v_b I)``).

    Examples
    --------
    >>> grid, w = signal_posterior(4, 0.25, 1.0, 1e-4, 4e-4 + 0.25**2 * 2.0)  # B2 = 2: r2 = 0.5
    >>> round(float(grid @ w), 2)
    2.0
    >>> grid, w = signal_posterior(4, 0.25, 1.0, 1.0, 4.0)  # pure noise: about the prior
    >>> round(float(w[0]), 1), round(float(grid @ w) * 0.25, 1)  # P(r2 = 0), mean r2
    (0.5, 0.2)
    """
    s, v_b = feature_scale, cross_noise_var
    r2 = np.concatenate([[0.0], (np.arange(PRIOR_POINTS) + 0.5) / PRIOR_POINTS])
    prior = np.concatenate([[NULL_PRIOR], np.full(PRIOR_POINTS, (1.0 - NULL_PRIOR) / PRIOR_POINTS)])
    grid = r2 * max(label_second_moment, _MIN_SIGNAL) / s
    energy = s * s * grid
    var = 2.0 * n_features * v_b**2 + 4.0 * energy * v_b
    with np.errstate(divide="ignore", invalid="ignore"):
        loglik = -0.5 * (observed_norm2 - n_features * v_b - energy) ** 2 / var - 0.5 * np.log(var)
    loglik = np.where(np.isfinite(loglik), loglik, -np.inf)
    if not np.isfinite(loglik).any():  # no noise at all: the point nearest the observation
        loglik = -np.abs(observed_norm2 - energy)
    weights = np.exp(loglik - loglik.max()) * prior
    return grid, weights / weights.sum()


def bayes_ridge(n_features: int, feature_scale: float, cov_noise_var: float,
                cross_noise_var: float, signal_grid: Any, weights: Any, *,
                cap: float = math.inf) -> tuple[float, float]:
    """Return ``(ridge, Bayes risk)``: the ridge of least posterior-averaged simulated risk.

    Examples
    --------
    >>> grid, w = signal_posterior(8, 0.25, 1.0, 1e-3, 8e-3 + 0.25**2 * 2.0)
    >>> mu, risk = bayes_ridge(8, 0.25, 0.05, 1e-3, grid, w, cap=4.0)
    >>> 0.0 < mu < 10.0, risk < 0.25 * 2.0
    (True, True)
    """
    ridges = feature_scale * RIDGE_GRID
    table = _risk_table(n_features, feature_scale, np.asarray(signal_grid, dtype=np.float64),
                        cov_noise_var, cross_noise_var, ridges, cap=cap, psd=True,
                        draws=RISK_DRAWS, seed=0)
    risk = np.asarray(weights, dtype=np.float64) @ table
    best = int(np.argmin(risk))
    return float(ridges[best]), float(risk[best])


def choose_ridge(n_features: int, feature_scale: float, signal_norm2: float,
                 cov_noise_var: float, cross_noise_var: float, *, cap: float = math.inf,
                 label_second_moment: float | None = None) -> tuple[float, float]:
    """Return ``(ridge, excess risk)`` the fit's rule gives on a typical release of ``B2``.

    The release is taken to show the signal at its expected size
    (``||b^||^2 = d v_b + s^2 B2``); the ridge is :func:`bayes_ridge` on that
    posterior, and the risk is the simulated excess risk at the true ``B2``.
    ``label_second_moment`` (``E y^2``, the prior's bound) defaults to the one
    implied by ``cap = norm_cap(E y^2, s)``, or to ``s B2`` without a cap.

    Examples
    --------
    >>> mu, risk = choose_ridge(8, 0.25, 2.0, 0.05, 1e-3, cap=norm_cap(1.0, 0.25))
    >>> 0.0 < mu < 10.0, risk < 0.25 * 2.0
    (True, True)
    """
    s = feature_scale
    if label_second_moment is not None:
        y2 = label_second_moment
    elif math.isfinite(cap):
        y2 = s * (cap / NORM_CAP_FACTOR) ** 2
    else:
        y2 = s * signal_norm2
    grid, weights = signal_posterior(n_features, s, y2, cross_noise_var,
                                     n_features * cross_noise_var + s * s * signal_norm2)
    mu, _ = bayes_ridge(n_features, s, cov_noise_var, cross_noise_var, grid, weights, cap=cap)
    risk = simulated_risk(n_features, s, signal_norm2, cov_noise_var, cross_noise_var, [mu],
                          cap=cap)[0]
    return mu, float(risk)


@dataclass(frozen=True)
class Regularization:
    """The ridge strength and norm cap of a fit, and what they were computed from.

    Attributes
    ----------
    ridge : float
        The Bayes ridge (:func:`bayes_ridge`).
    norm_cap : float
        ``2 sqrt(E y^2 / s)`` (:func:`norm_cap`).
    feature_scale : float
        ``s``, the per-coordinate feature second moment used (2 SE high).
    signal_norm2 : float
        The posterior mean of ``B2 = ||beta||^2`` (:func:`signal_posterior`).
    cov_noise_var, cross_noise_var : float
        ``v_S`` and ``v_b`` of :func:`noise_variances`.
    """

    ridge: float
    norm_cap: float
    feature_scale: float
    signal_norm2: float
    cov_noise_var: float
    cross_noise_var: float


def _feature_scale(S: NDArray[np.float64], *, n_clients: int, sigma: float, alpha: float,
                   lam: float, radius: float, label_second_moment: float,
                   label_sigma: float) -> tuple[float, float, float]:
    """Return ``(s, v_S, v_b)``: the feature scale plug-in (2 SE high) and the noise variances.

    An underestimated ``s`` makes the simulated solve look better conditioned than
    it is; ``s`` is therefore taken two standard errors high, at most ``R^2 / d``,
    and ``R^2 / d`` itself when the estimate is within two standard errors of zero.
    """
    d = S.shape[0]
    top = radius**2 / d
    s_raw = float(np.trace(S)) / d
    v_S, v_b = noise_variances(n_clients, d, sigma=sigma, alpha=alpha, lam=lam,
                               feature_scale=float(np.clip(s_raw, top * 1e-3, top)),
                               label_second_moment=label_second_moment,
                               label_sigma=label_sigma)
    se = math.sqrt(2.0 * v_S / d)
    s = top if s_raw <= 2.0 * se else min(s_raw + 2.0 * se, top)  # uninformative: safe side
    return s, v_S, v_b


def regularization_from_moments(S: NDArray[np.float64], b: NDArray[np.float64], *,
                                n_clients: int, sigma: float, alpha: float, lam: float,
                                radius: float, label_second_moment: float,
                                label_sigma: float = 0.0) -> Regularization:
    """Return the ridge and cap for debiased moments ``S``, ``b`` of one release.

    Examples
    --------
    >>> reg = regularization_from_moments(np.eye(2) * 0.5, np.array([0.5, 0.0]), n_clients=10**6,
    ...                                   sigma=0.1, alpha=0.0, lam=0.0, radius=1.0,
    ...                                   label_second_moment=1.0)
    >>> reg.ridge < 1e-3, round(reg.norm_cap, 3)
    (True, 2.828)
    """
    d = S.shape[0]
    y2 = max(label_second_moment, _MIN_SIGNAL)
    s, v_S, v_b = _feature_scale(S, n_clients=n_clients, sigma=sigma, alpha=alpha, lam=lam,
                                 radius=radius, label_second_moment=y2, label_sigma=label_sigma)
    grid, weights = signal_posterior(d, s, y2, v_b, float(b @ b))
    cap = norm_cap(y2, s)
    mu, _ = bayes_ridge(d, s, v_S, v_b, grid, weights, cap=cap)
    return Regularization(ridge=mu, norm_cap=cap, feature_scale=s,
                          signal_norm2=float(grid @ weights), cov_noise_var=v_S,
                          cross_noise_var=v_b)
