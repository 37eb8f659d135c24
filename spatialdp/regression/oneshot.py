"""The one-shot closed-form moment estimator: one release, no composition.

    ``beta^ = Proj_ball( (P(Sigma^_c) + mu I)^{-1} b^_c )``

where ``Sigma^_c``, ``b^_c`` are the debiased moments (centred when an
intercept is fitted: ``x_bar^ = mean(g~) / (1 - alpha)`` is unbiased for the
feature mean, because ``E cos = 0``, and the centred ``Sigma^_c`` adds back the
noise ``x_bar^ x_bar^T`` carries, :func:`mean_noise_covariance`, so it is
unbiased too), ``P`` is the projection onto the PSD cone
(``psd=True``), ``mu`` the ridge and the ball radius the norm cap of
:mod:`spatialdp.regression.regularization`. With ``ridge=0, norm_cap=inf,
psd=False`` it is the unregularised solve of the paper.

Examples
--------
>>> from spatialdp.privacy import Simulation
>>> from spatialdp.regression.client import transform_clients
>>> from spatialdp.regression.modulation import Modulation
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(100_000, 3)) / 2
>>> y = X @ [1.0, -1.0, 0.5] + 0.1 * rng.normal(size=100_000)
>>> rep = transform_clients(X, y, modulation=Modulation(lam=0.5, radius=3.0), rho=20.0,
...                         target=Simulation(rng=1))
>>> np.round(fit_one_shot(rep).coef, 1).tolist()
[1.0, -1.0, 0.5]
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray

from spatialdp._blas import single_blas
from spatialdp._validation import check_flag, check_number, fail
from spatialdp.regression.client import ClientReports
from spatialdp.regression.covariance import fit_covariance
from spatialdp.regression.regularization import Regularization, regularization_from_moments
from spatialdp.regression.results import LABEL_PRIVATE, RegressionFit
from spatialdp.regression.server import (
    _debias_second,
    _label_moment,
    _project_ball,
    _project_psd,
    check_reports,
    report_moments,
)

__all__ = ["CenteredMoments", "centered_moments", "fit_one_shot", "mean_noise_covariance",
           "solve_regularized"]


class CenteredMoments:
    """Debiased (optionally centred) moments of one release; :attr:`reg` is computed on first use.

    Attributes
    ----------
    S, b : ndarray
        The debiased (centred) covariance and cross moment.
    x_mean : ndarray
        ``x_bar^`` (zeros without an intercept).
    y_mean : float
        The mean label (0 without an intercept).
    label_second_moment : float
        The mean squared (centred) label minus the label-noise variance.
    """

    def __init__(self, S: NDArray[np.float64], b: NDArray[np.float64], x_mean: NDArray[np.float64],
                 y_mean: float, *, reports: ClientReports, label_second_moment: float) -> None:
        self.S, self.b, self.x_mean, self.y_mean = S, b, x_mean, y_mean
        self.label_second_moment = label_second_moment
        self._reports = reports

    @cached_property
    def reg(self) -> Regularization:
        """The ridge and norm cap of :func:`regularization_from_moments` for these moments."""
        rep, mod = self._reports, self._reports.modulation
        return regularization_from_moments(
            self.S, self.b, n_clients=rep.n_clients, sigma=rep.sigma, alpha=mod.alpha,
            lam=mod.lam, radius=mod.radius, label_second_moment=self.label_second_moment,
            label_sigma=rep.label_sigma)


def mean_noise_covariance(reports: ClientReports) -> NDArray[np.float64]:
    """Return ``Cov(x_bar^) = (sigma^2 I + (lambda^2 / 2m) sum_j v_j v_j^T) / (K (1-alpha)^2)``.

    ``x_bar^ = mean(g~) / (1 - alpha)`` averages the noise and the cosine terms
    (``Var cos = 1/2`` over the phase) of ``K`` clients, so ``E[x_bar^ x_bar^T]
    = x_bar x_bar^T + Cov(x_bar^)``: centring subtracts ``x_bar^ x_bar^T`` and
    adds this back.

    Examples
    --------
    >>> from spatialdp.privacy import Simulation
    >>> from spatialdp.regression.client import transform_clients
    >>> from spatialdp.regression.modulation import Modulation
    >>> rep = transform_clients(np.zeros((4, 2)), np.zeros(4), modulation=Modulation(lam=2.0),
    ...                         directions=[[1.0, 0.0]], rho=2.0, target=Simulation(rng=0))
    >>> (mean_noise_covariance(rep) * 4 - rep.sigma**2 * np.eye(2)).round(12).tolist()
    [[2.0, 0.0], [0.0, 0.0]]
    """
    mod = reports.modulation
    V = reports.directions
    cov = mod.modulation_variance * (V.T @ V) if mod.lam > 0.0 else np.zeros((V.shape[1],) * 2)
    cov[np.diag_indices_from(cov)] += reports.sigma**2
    return np.asarray(cov / (reports.n_clients * (1.0 - mod.alpha) ** 2), dtype=np.float64)


def centered_moments(reports: ClientReports, *, fit_intercept: bool = True,
                     modulation_correction: bool = True) -> CenteredMoments:
    """Return the debiased moments of ``reports``, centred if ``fit_intercept``.

    Centred, ``S`` is unbiased for the centred second moment ``(1/K) sum (x - x_bar)
    (x - x_bar)^T``: ``x_bar^ x_bar^T`` is subtracted and its noise part
    (:func:`mean_noise_covariance`) added back, including the cosine terms along
    the modulation directions.
    """
    reports = check_reports(reports)
    fit_intercept = check_flag(fit_intercept, "fit_intercept")
    modulation_correction = check_flag(modulation_correction, "modulation_correction")
    d = reports.features.shape[1]
    second, cross, mean = report_moments(reports)  # one pass over the reports
    if not (np.isfinite(second).all() and np.isfinite(cross).all()):  # NaN/inf spreads here
        raise fail("reports", reports.summary(), "hold NaN or infinite features or labels",
                   "pass the ClientReports returned by transform_clients")
    S = _debias_second(reports, second, modulation_correction)  # fresh: debiased in place
    b = cross / (1.0 - reports.modulation.alpha)
    if fit_intercept:
        x_mean = mean / (1.0 - reports.modulation.alpha)
        y_mean = float(reports.labels.mean())
        S = S - np.outer(x_mean, x_mean) + mean_noise_covariance(reports)
        b = b - y_mean * x_mean
    else:
        x_mean, y_mean = np.zeros(d), 0.0
    y2 = _label_moment(reports, centred=fit_intercept, y_mean=y_mean if fit_intercept else None)
    return CenteredMoments(S, b, x_mean, y_mean, reports=reports, label_second_moment=y2)


def solve_regularized(S: NDArray[np.float64], b: NDArray[np.float64], ridge: float,
                      cap: float, psd: bool = True) -> NDArray[np.float64]:
    """Return ``Proj_ball((P(S) + ridge I)^{-1} b)`` (least squares if singular)."""
    A = _project_psd(S) if psd else (S + S.T) / 2.0
    A = A + ridge * np.eye(S.shape[0])
    beta = np.asarray(np.linalg.lstsq(A, b, rcond=None)[0], dtype=np.float64)
    return _project_ball(beta, cap)


def _strength(value: Any, auto: Callable[[], float], name: str) -> float:
    if isinstance(value, str) and value == "auto":
        return auto()
    if value is None:
        return 0.0 if name == "ridge" else np.inf
    return check_number(value, name, low=0.0, high=np.inf,
                        fix=f"pass {name}='auto', None or a number >= 0")


def fit_one_shot(reports: ClientReports, *, ridge: Any = "auto", norm_cap: Any = "auto",
                 psd: bool = True, fit_intercept: bool = True) -> RegressionFit:
    """Return the one-shot moment estimate from one release of client reports.

    Parameters
    ----------
    reports : ClientReports
    ridge : "auto", None or float
        ``"auto"``: the Bayes ridge of
        :func:`~spatialdp.regression.regularization.regularization_from_moments`
        (post-processing of the release); None: no ridge.
    norm_cap : "auto", None or float
        ``"auto"``: ``2 sqrt(E y^2 / s)``; None: no cap.
    psd : bool, default True
        Project ``Sigma^`` onto the PSD cone before solving.
    fit_intercept : bool, default True

    Returns
    -------
    RegressionFit
        Its covariance (the sandwich of :mod:`spatialdp.regression.covariance`, one
        more pass over the reports) is computed on first use of ``bse``,
        ``cov_params``, ``conf_int``, ``coefficient_table`` or ``summary``; until
        then the fit holds a reference to ``reports`` (no copy). Whether there are
        standard errors, and what they cover (``inference_note``), is known at once.
    """
    reports = check_reports(reports)
    psd = check_flag(psd, "psd")
    fit_intercept = check_flag(fit_intercept, "fit_intercept")
    with single_blas():  # small dense solves: threads only wait for each other
        mom = centered_moments(reports, fit_intercept=fit_intercept)
        mu = _strength(ridge, lambda: mom.reg.ridge, "ridge")  # the rule runs only if asked
        cap = _strength(norm_cap, lambda: mom.reg.norm_cap, "norm_cap")
        unprojected = solve_regularized(mom.S, mom.b, mu, np.inf, psd)
        beta = _project_ball(unprojected, cap)
        covariance, inference = fit_covariance(
            reports, mom.S, beta, float(np.linalg.norm(unprojected)), ridge=mu, cap=cap,
            psd=psd, fit_intercept=fit_intercept, x_mean=mom.x_mean, deferred=True)
    return RegressionFit(coef=beta, intercept=mom.y_mean - float(mom.x_mean @ beta),
                         method="one_shot", rho=reports.rho, n_clients=reports.n_clients,
                         ridge=mu, norm_cap=cap, sigma=reports.sigma,
                         accounting=dict(reports.accounting), covariance=covariance,
                         inference=inference, fit_intercept=fit_intercept,
                         protects=LABEL_PRIVATE if reports.label_sigma > 0.0 else "")
