"""Server side: the debiased moments, the unbiased gradient and the two projections.

For reports ``g~_i = (1 - alpha) x_i + (lambda / sqrt(m)) sum_j cos(.) v_j + xi_i``
with ``xi_i ~ N(0, sigma^2 I)`` and public labels ``y_i``:

    ``Sigma^ = ((1/K) sum g~ g~^T - (lambda^2 / (2m)) sum_j v_j v_j^T - sigma^2 I) / (1 - alpha)^2``
    ``b^     = (1/K) sum y_i g~_i / (1 - alpha)``
    ``G(beta) = Sigma^ beta - b^``

are unbiased for ``Sigma_x = (1/K) sum x x^T``, ``(1/K) sum y x`` and the
centralised gradient of ``(1/2K) sum (y - x^T beta)^2`` (expectation over the
phases and the noise, features fixed). Dropping the ``lambda^2/(2m)`` term
biases ``Sigma^`` by ``+lambda^2 / (2m (1-alpha)^2)`` along each ``v_j``.
Noised labels ``y~ = clip(y, B) + N(0, tau^2)`` leave ``b^`` unbiased for
``(1/K) sum clip(y_i) x_i`` (independent noises); their second moment needs the
label-noise variance removed (:func:`debiased_label_moment`): ``tau^2`` for
``(1/K) sum y~^2``, ``tau^2 (1 - 1/K)`` for the centred ``(1/K) sum (y~ - mean y~)^2``
(the mean carries ``tau^2 / K`` of the noise), and the estimate is then clipped to the
public range ``[0, B^2]``.

``Sigma^`` is indefinite whenever the noise is large against the signal
(entry-wise noise of order ``(sigma^2 + s)/sqrt(K)``); :func:`project_psd` clips
its negative eigenvalues to zero (the nearest PSD matrix in Frobenius norm)
and :func:`project_ball` keeps a coefficient vector in a norm ball.

Examples
--------
>>> from spatialdp.privacy import Simulation
>>> from spatialdp.regression.client import transform_clients
>>> from spatialdp.regression.modulation import Modulation
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(200_000, 2)) / 2
>>> rep = transform_clients(X, X @ [1.0, -1.0], modulation=Modulation(lam=1.0, radius=3.0),
...                         rho=50.0, target=Simulation(rng=1))
>>> np.round(debiased_covariance(rep), 2).tolist()
[[0.25, 0.0], [0.0, 0.25]]
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from spatialdp._validation import (
    check_finite_array,
    check_flag,
    check_instance,
    check_number,
    check_real,
    fail,
)
from spatialdp.regression._blocks import centred_squares, fused_moments
from spatialdp.regression.client import ClientReports

__all__ = [
    "check_reports",
    "check_vector",
    "debiased_covariance",
    "debiased_cross_moment",
    "debiased_label_moment",
    "project_ball",
    "project_psd",
    "raw_moments",
    "report_moments",
    "unbiased_gradient",
]


def check_reports(reports: Any, name: str = "reports") -> ClientReports:
    """Return ``reports`` if it is a :class:`ClientReports`, else refuse it.

    Examples
    --------
    >>> check_reports({"features": 1})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: reports={'features': 1} is a dict, not a ClientReports; ...
    """
    return check_instance(reports, name, ClientReports,
                          "pass the ClientReports returned by transform_clients")


def check_vector(values: Any, name: str, d: int) -> NDArray[np.float64]:
    """Return a finite float64 vector of length ``d`` (one entry per feature), or refuse it.

    Examples
    --------
    >>> check_vector([1.0, 2.0], "beta", 3)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: beta=(2,) has length 2 for 3 features; ...
    """
    arr = check_finite_array(values, name)
    if arr.shape != (d,):
        raise fail(name, arr.shape, f"has length {arr.shape[0]} for {d} features",
                   "give one entry per feature (column of the reports)")
    return arr


def report_moments(reports: ClientReports,
                   ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Return ``((1/K) sum g~ g~^T, (1/K) sum y g~, (1/K) sum g~)`` from one pass over the reports.

    Examples
    --------
    >>> from spatialdp.privacy import Simulation
    >>> from spatialdp.regression.client import transform_clients
    >>> from spatialdp.regression.modulation import Modulation
    >>> rep = transform_clients(np.ones((10, 2)) / 2, np.ones(10), modulation=Modulation(),
    ...                         rho=1.0, target=Simulation(rng=0))
    >>> second, cross, mean = report_moments(rep)
    >>> bool(np.allclose(mean, rep.features.mean(axis=0)))
    True
    """
    G = reports.features
    K = G.shape[0]
    second, cross, total = fused_moments(G, reports.labels)
    second /= K
    cross /= K
    total /= K
    return second, cross, total


def raw_moments(reports: ClientReports) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return ``((1/K) sum g~ g~^T, (1/K) sum y g~)`` (one pass: :func:`report_moments`)."""
    second, cross, _ = report_moments(reports)
    return second, cross


def debiased_covariance(reports: ClientReports, *, modulation_correction: bool = True,
                        second: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    """Return the unbiased estimate ``Sigma^`` of the clients' feature second moment.

    Parameters
    ----------
    reports : ClientReports
    modulation_correction : bool, default True
        Subtract ``(lambda^2 / (2m)) sum_j v_j v_j^T``. ``False`` only for the
        negative control (the estimate is then biased along the directions).
    second : ndarray, optional
        ``(1/K) sum g~ g~^T`` if already computed.
    """
    reports = check_reports(reports)
    modulation_correction = check_flag(modulation_correction, "modulation_correction")
    d = reports.features.shape[1]
    if second is None:
        S = raw_moments(reports)[0]
    else:
        S = check_finite_array(second, "second", ndim=(2,)).copy()
        if S.shape != (d, d):
            raise fail("second", S.shape, f"is not {d} x {d} (the reports have {d} features)",
                       "pass the (1/K) sum g~ g~^T of these reports, or None")
    return _debias_second(reports, S, modulation_correction)


def _debias_second(reports: ClientReports, S: NDArray[np.float64],
                   modulation_correction: bool = True) -> NDArray[np.float64]:
    """:func:`debiased_covariance` of a fresh ``S`` (changed in place), inputs already checked."""
    mod = reports.modulation
    if modulation_correction and mod.lam > 0.0:
        V = reports.directions
        S -= mod.modulation_variance * (V.T @ V)
    S[np.diag_indices_from(S)] -= reports.sigma**2
    S /= (1.0 - mod.alpha) ** 2
    return S


def debiased_cross_moment(reports: ClientReports,
                          cross: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    """Return the unbiased estimate ``b^`` of ``(1/K) sum y_i x_i``."""
    reports = check_reports(reports)
    d = reports.features.shape[1]
    c = raw_moments(reports)[1] if cross is None else check_vector(cross, "cross", d)
    return c / (1.0 - reports.modulation.alpha)


def debiased_label_moment(reports: ClientReports, *, centred: bool = True,
                          bounded: bool = True) -> float:
    """Return the estimate of the label second moment (variance if ``centred``), noise removed.

    For noised labels ``y~ = clip(y, B) + N(0, tau^2)`` the raw moment overstates the
    clipped labels' by the noise: ``E mean(y~^2) = mean(y^2) + tau^2`` and
    ``E mean((y~ - mean y~)^2) = var(y) + tau^2 (1 - 1/K)``; both are subtracted
    (unbiased). With ``bounded`` the estimate is clipped to ``[0, B^2]``, the range of
    the clipped labels' moment (``B`` public; none for public labels): far smaller
    error when ``tau^2`` is large against ``B^2``.

    Parameters
    ----------
    reports : ClientReports
    centred : bool, default True
        Estimate ``(1/K) sum (y - y_bar)^2`` (for a fit with an intercept) instead of
        ``(1/K) sum y^2``.
    bounded : bool, default True
        Clip the estimate to ``[0, label_bound^2]``; ``False`` gives the unbiased value.

    Examples
    --------
    >>> from spatialdp.privacy import Simulation
    >>> from spatialdp.regression.client import transform_clients
    >>> from spatialdp.regression.modulation import Modulation
    >>> y = np.tile([-1.0, 1.0], 50_000)
    >>> rep = transform_clients(np.zeros((100_000, 1)), y, modulation=Modulation(),
    ...                         rho=1.0, label_bound=2.0, label_rho=2.0, target=Simulation(rng=0))
    >>> round(float(np.var(rep.labels)), 1), round(debiased_label_moment(rep), 1)
    (5.0, 1.0)
    """
    reports = check_reports(reports)
    centred = check_flag(centred, "centred")
    bounded = check_flag(bounded, "bounded")
    return _label_moment(reports, centred=centred, bounded=bounded)


def _label_moment(reports: ClientReports, *, centred: bool = True, bounded: bool = True,
                  y_mean: float | None = None) -> float:
    """:func:`debiased_label_moment` without the checks; ``y_mean`` if already computed."""
    y, K = reports.labels, reports.labels.shape[0]
    tau2 = reports.label_sigma**2
    if centred:
        centre = float(y.mean()) if y_mean is None else y_mean
        raw = centred_squares(y, centre) / K - tau2 * (1.0 - 1.0 / K)
    else:
        raw = float(np.mean(y**2)) - tau2
    if not bounded:
        return raw
    return min(max(raw, 0.0), reports.label_bound**2)


def unbiased_gradient(reports: ClientReports, beta: Any) -> NDArray[np.float64]:
    """Return ``G = Sigma^ beta - b^``, unbiased for the centralised squared-loss gradient.

    Examples
    --------
    >>> from spatialdp.privacy import Simulation
    >>> from spatialdp.regression.client import transform_clients
    >>> from spatialdp.regression.modulation import Modulation
    >>> rep = transform_clients(np.ones((10, 2)) / 2, np.ones(10),
    ...                         modulation=Modulation(), rho=1.0, target=Simulation(rng=0))
    >>> unbiased_gradient(rep, [0.0, 0.0]).shape
    (2,)
    """
    reports = check_reports(reports)
    b = check_vector(beta, "beta", reports.features.shape[1])
    second, cross = raw_moments(reports)
    return debiased_covariance(reports, second=second) @ b - debiased_cross_moment(reports, cross)


def project_psd(S: NDArray[np.float64], floor: float = 0.0) -> NDArray[np.float64]:
    """Return the nearest symmetric matrix to ``S`` with eigenvalues ``>= floor``.

    Examples
    --------
    >>> project_psd(np.array([[1.0, 0.0], [0.0, -2.0]])).tolist()
    [[1.0, 0.0], [0.0, 0.0]]
    """
    M = check_finite_array(S, "S", ndim=(2,))
    if M.shape[0] != M.shape[1]:
        raise fail("S", M.shape, "is not a square matrix", "pass a d x d matrix")
    low = check_number(floor, "floor", low=0.0,
                       fix="pass the smallest eigenvalue to keep, a number >= 0 (e.g. 0.0)")
    return _project_psd(M, low)


def _project_psd(S: NDArray[np.float64], floor: float = 0.0) -> NDArray[np.float64]:
    """:func:`project_psd` without the checks (inner loops, inputs already validated)."""
    w, Q = np.linalg.eigh((S + S.T) / 2.0)
    return (Q * np.maximum(w, floor)) @ Q.T


def project_ball(beta: NDArray[np.float64], radius: float) -> NDArray[np.float64]:
    """Return ``beta`` scaled into the ball ``||beta|| <= radius``.

    Examples
    --------
    >>> project_ball(np.array([3.0, 4.0]), 1.0).tolist()
    [0.6000000000000001, 0.8]
    """
    b = check_finite_array(beta, "beta")
    fix = "pass a radius >= 0 (np.inf for none)"
    if check_real(radius, "radius", fix=fix) == np.inf:
        return b
    r = check_number(radius, "radius", low=0.0, fix=fix)
    big = float(np.max(np.abs(b)))
    if big == 0.0:
        return b
    norm_unit = float(np.linalg.norm(b / big))  # ||b|| = big * norm_unit, without overflow
    with np.errstate(over="ignore"):
        ratio = (r / big) / norm_unit
    return b if ratio >= 1.0 else b * ratio


def _project_ball(beta: NDArray[np.float64], radius: float) -> NDArray[np.float64]:
    """:func:`project_ball` without the checks (inner loops, inputs already validated)."""
    if radius == np.inf:
        return beta
    norm = float(np.linalg.norm(beta))
    return beta if norm <= radius else beta * (radius / norm)
