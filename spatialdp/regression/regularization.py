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
James-Stein-like balance of noise against signal. The excess test risk is
``s`` times that. ``mu*`` is large exactly when the release is noise-dominated,
and the fit then shrinks to predicting zero instead of returning nonsense.

In a fit, ``sigma``, ``K``, ``d``, ``alpha``, ``lambda``, ``m`` and ``R`` are
public; ``s`` is the trace of ``Sigma^`` over ``d`` (clipped to ``(0, R^2/d]``),
``Y2`` the mean squared label (minus the label-noise variance), and ``B2`` is
``(||b^||^2 - d v_b) / s^2`` floored at a small positive value: all are
post-processing of the release. The norm cap is ``c sqrt(Y2 / s)``
(:func:`norm_cap`, ``c = 2``): for isotropic features
``beta^T Sigma beta <= E y^2`` gives ``||beta|| <= sqrt(Y2 / s)``; ``c`` leaves
room for anisotropy.

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

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "NORM_CAP_FACTOR",
    "Regularization",
    "noise_variances",
    "norm_cap",
    "optimal_ridge",
    "regularization_from_moments",
]

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
    """Return ``mu* = d N / (s B2)``, the first-order MSE-optimal ridge strength."""
    return n_features * noise_per_coordinate / (feature_scale * max(signal_norm2, _MIN_SIGNAL))


def norm_cap(label_second_moment: float, feature_scale: float,
             factor: float = NORM_CAP_FACTOR) -> float:
    """Return the coefficient norm cap ``factor * sqrt(E y^2 / s)``."""
    return factor * math.sqrt(max(label_second_moment, 0.0) / feature_scale)


@dataclass(frozen=True)
class Regularization:
    """The ridge strength and norm cap of a fit, and what they were computed from."""

    ridge: float
    norm_cap: float
    feature_scale: float
    signal_norm2: float
    cov_noise_var: float
    cross_noise_var: float


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
    >>> reg.ridge < 1e-4, round(reg.norm_cap, 3)
    (True, 2.828)
    """
    d = S.shape[0]
    s = float(np.clip(np.trace(S) / d, radius**2 / d * 1e-3, radius**2 / d))
    y2 = max(label_second_moment, _MIN_SIGNAL)
    v_S, v_b = noise_variances(n_clients, d, sigma=sigma, alpha=alpha, lam=lam, feature_scale=s,
                               label_second_moment=y2, label_sigma=label_sigma)
    b2 = max(float(b @ b) - d * v_b, _MIN_SIGNAL) / s**2
    b2 = min(b2, y2 / s)  # beta^T Sigma beta <= E y^2
    mu = optimal_ridge(d, s, v_b + v_S * b2, b2)
    return Regularization(ridge=mu, norm_cap=norm_cap(y2, s), feature_scale=s, signal_norm2=b2,
                          cov_noise_var=v_S, cross_noise_var=v_b)
