"""Predict each estimator's test error BEFORE any budget is spent, and warn when hopeless.

Inputs are public or assumed: the number of clients ``K``, the dimension
``d``, the budget (``epsilon, delta`` or ``rho``), the clipping bound ``R``,
the modulation, and three assumptions about the data a planner must make:
the feature second moment ``E||x||^2`` (default ``min(R^2, d)``: standardised
features clipped at ``R``), the label second moment ``E y^2`` (default 1:
standardised labels) and the share of it a linear model explains,
``r_squared`` (default 0.3). Features are taken as isotropic, ``Sigma = s I``.

Every prediction (test MSE = residual ``(1 - r2) E y^2`` + excess risk) is the
mean over simulated fits that apply exactly what the estimator does, drawn
from the noise model of :mod:`~spatialdp.regression.regularization` at
``Sigma = s I`` and ``||beta||^2 = B2 = r2 E y^2 / s`` (a fixed seed: a plan
is reproducible), with the Monte-Carlo standard error next to it:

* ``zero``: ``E y^2``; ``ols`` (non-private): residual times ``1 + (d + 1) / K``;
* ``nss``, ``one_shot``: 32 noisy moment pairs, each regularised by the fit's
  own rule (:func:`~spatialdp.regression.regularization.regularization_from_moments`:
  the ridge and cap a fit would pick from THAT release, not the oracle ridge
  of the true ``B2``, which was optimistic at low signal), solved
  (:func:`~spatialdp.regression.oneshot.solve_regularized`), plus the
  intercept's error from the noisy feature mean;
* ``one_shot_unregularised``: the raw solve's mean risk (heavy-tailed; capped
  at ``1e6 E y^2``; not calibrated);
* ``iterative``: 12 simulated runs of the protocol: every round a fresh
  release (``K / T`` clients at ``rho``, or ``K`` clients at ``rho / T``), the
  round's own regularisation, the projected step, and the tail average;
* ``dpsgd_local`` / ``dpsgd_central``: 32 simulated runs of DP-SGD on 1,024
  synthetic clients (isotropic Gaussian features clipped at ``R`` with the
  assumed second moment, a linear label): the mean CLIPPED gradient (clipping
  bias included) plus the noise on the average, ``sigma / sqrt(K)`` per
  coordinate (local) or ``sigma`` (central), and the tail average.

Calibration (``python benchmarks/calibrate_planner.py``, the table in
``docs/modulated.md``): over a grid of ``K``, ``d``, ``epsilon`` and ``r2``
the predictions agree with seeded simulations of the estimators within
``|predicted - realised| <= max(0.1 realised, 3 SE)`` (:data:`PLAN_TOLERANCE`).
Each row's ``upper_mse`` is the largest realised MSE that tolerance allows
(:func:`upper_bound`), and an estimator counts as beating zero only when its
``upper_mse`` is below ``(1 - margin) E y^2``. A :class:`FeasibilityWarning`
is issued when no local-DP estimator does (central DP-SGD, a stronger trust
model, does not count): when even the pessimistic end of the prediction does
not beat predicting the mean.

Examples
--------
>>> plan = plan_regression(1_000_000, 20, rho=1.0, radius=3.0, warn=False)
>>> plan.feasible, bool(plan.predicted("nss") < plan.upper("nss") < 0.85)
(True, True)
>>> small = plan_regression(4000, 8, epsilon=1.0, delta=1e-6, radius=3.0, warn=False)
>>> small.feasible, bool(small.predicted("one_shot_unregularised") > 2)
(False, True)
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp._blas import single_blas
from spatialdp._validation import (
    check_choice,
    check_count,
    check_instance,
    check_number,
    check_positive,
    fail,
)
from spatialdp.exceptions import FeasibilityWarning
from spatialdp.regression.accounting import resolve_rho
from spatialdp.regression.iterative import PARTICIPATION, round_rho
from spatialdp.regression.lattice_gaussian import headroom_sigma
from spatialdp.regression.modulation import Modulation, _clip_rows
from spatialdp.regression.oneshot import solve_regularized
from spatialdp.regression.regularization import (
    Regularization,
    noise_variances,
    regularization_from_moments,
    simulated_risk,
)
from spatialdp.regression.server import _project_ball, _project_psd

__all__ = ["CALIBRATED", "ESTIMATORS", "PLAN_TOLERANCE", "FeasibilityWarning", "RegressionPlan",
           "plan_regression", "upper_bound"]

#: The estimators the planner predicts, in report order.
ESTIMATORS = ("zero", "ols", "nss", "one_shot", "one_shot_unregularised", "iterative",
              "dpsgd_local", "dpsgd_central")
#: Estimators under local DP (the trust model of the protocol); central DP-SGD is a reference.
_PRIVATE = ("nss", "one_shot", "iterative", "dpsgd_local")
#: The estimators calibrated against simulation (``benchmarks/calibrate_planner.py``).
CALIBRATED = ("ols", "nss", "one_shot", "iterative", "dpsgd_local", "dpsgd_central")
#: Calibrated tolerance: ``|predicted - realised| <= max(PLAN_TOLERANCE realised, 3 SE)``.
PLAN_TOLERANCE = 0.1


@dataclass(frozen=True)
class RegressionPlan:
    """Predicted test MSE of each estimator (:attr:`table`) and the inputs behind it.

    :attr:`table` has one row per estimator of :data:`ESTIMATORS`:
    ``predicted_mse``, its Monte-Carlo ``predicted_se``, ``upper_mse``
    (:func:`upper_bound`), the ``ridge`` and ``sigma`` the fit would use, and
    ``beats_zero`` (``upper_mse < (1 - margin) E y^2``).

    Examples
    --------
    >>> plan = plan_regression(100_000, 5, epsilon=8.0, delta=1e-6, radius=3.0, warn=False)
    >>> plan.feasible, plan.upper("nss") > plan.predicted("nss")
    (True, True)
    """

    table: pd.DataFrame
    n_clients: int
    n_features: int
    rho: float
    zero_mse: float

    def predicted(self, estimator: str) -> float:
        """Return the predicted test MSE of ``estimator`` (one of :data:`ESTIMATORS`)."""
        name = check_choice(estimator, "estimator", ESTIMATORS)
        return float(self.table["predicted_mse"].to_numpy()[list(ESTIMATORS).index(name)])

    def upper(self, estimator: str) -> float:
        """Return the upper end of ``estimator``'s prediction (:func:`upper_bound`)."""
        name = check_choice(estimator, "estimator", ESTIMATORS)
        return float(self.table["upper_mse"].to_numpy()[list(ESTIMATORS).index(name)])

    @property
    def best_private(self) -> str:
        """The local-DP estimator with the lowest predicted MSE (central DP-SGD excluded)."""
        return str(self.table.loc[list(_PRIVATE), "predicted_mse"].idxmin())

    @property
    def feasible(self) -> bool:
        """Whether some local-DP estimator beats predicting zero at its upper bound.

        ``False`` exactly when :func:`plan_regression` warns (with ``warn=True``).
        """
        return bool(self.table.loc[list(_PRIVATE), "beats_zero"].any())


#: Simulated fits behind each prediction (the planner's own Monte Carlo).
PLAN_DRAWS = 32
#: Simulated iterative fits (each ``rounds`` releases: fewer, it is the slow one).
ITERATIVE_DRAWS = 8
#: Simulated local DP-SGD runs (noise-dominated: more draws for a small standard error).
DPSGD_DRAWS = 128
#: Synthetic clients of the DP-SGD population (the mean clipped gradient is taken over them).
DPSGD_POPULATION = 1024
_SEED = 20251


@dataclass(frozen=True)
class _Setting:
    """The public inputs and data assumptions of one prediction."""

    K: int
    d: int
    s: float
    b2: float
    y2: float
    resid: float
    radius: float


def _moment_draws(st: _Setting, k: int, sigma: float, mod: Modulation, draws: int,
                  rng: np.random.Generator) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Draw ``draws`` noisy moment pairs ``(Sigma^, b^)`` of ``k`` clients (the noise model)."""
    v_S, v_b = noise_variances(k, st.d, sigma=sigma, alpha=mod.alpha, lam=mod.lam,
                               feature_scale=st.s, label_second_moment=st.y2)
    noise = rng.standard_normal((draws, st.d, st.d)) * math.sqrt(v_S / 2.0)
    S = st.s * np.eye(st.d) + noise + np.swapaxes(noise, 1, 2)
    b = st.s * _beta(st) + rng.standard_normal((draws, st.d)) * math.sqrt(v_b)
    return S, b


def _beta(st: _Setting) -> NDArray[np.float64]:
    beta = np.zeros(st.d)
    beta[0] = math.sqrt(st.b2)
    return beta


def _regularization(st: _Setting, S: NDArray[np.float64], b: NDArray[np.float64], k: int,
                    sigma: float, mod: Modulation) -> Regularization:
    """Return the fit's own ridge and cap for one simulated release (the public rule)."""
    return regularization_from_moments(S, b, n_clients=k, sigma=sigma, alpha=mod.alpha,
                                       lam=mod.lam, radius=st.radius, label_second_moment=st.y2)


def _intercept_mse(st: _Setting, k: int, sigma: float, mod: Modulation,
                   coef: NDArray[np.float64]) -> float:
    """``E intercept^2``: ``y_bar - x_bar^ beta^`` with the noisy feature mean of ``k`` clients."""
    a = (1.0 - mod.alpha) ** 2 * st.s + mod.lam**2 / (2.0 * st.d)
    return (st.y2 + (sigma**2 + a) / (1.0 - mod.alpha) ** 2 * float(coef @ coef)) / k


def _one_shot_risks(st: _Setting, sigma: float, mod: Modulation, draws: int,
                    rng: np.random.Generator) -> tuple[NDArray[np.float64], float]:
    """Excess risks of simulated one-shot fits (auto ridge and cap), and the median ridge."""
    S, b = _moment_draws(st, st.K, sigma, mod, draws, rng)
    beta = _beta(st)
    risks, ridges = [], []
    for S_i, b_i in zip(S, b, strict=True):
        reg = _regularization(st, S_i, b_i, st.K, sigma, mod)
        coef = solve_regularized(S_i, b_i, reg.ridge, reg.norm_cap)
        risks.append(st.s * float((coef - beta) @ (coef - beta))
                     + _intercept_mse(st, st.K, sigma, mod, coef))
        ridges.append(reg.ridge)
    return np.asarray(risks), float(np.median(ridges))


def _iterative_risks(st: _Setting, k: int, sigma: float, mod: Modulation, rounds: int,
                     step: float, draws: int, rng: np.random.Generator,
                     ) -> tuple[NDArray[np.float64], float]:
    """Excess risks of simulated iterative fits: every round a fresh release of ``k`` clients."""
    beta = _beta(st)
    tail = math.ceil(rounds / 2)
    risks, ridges = [], []
    for _ in range(draws):
        S, b = _moment_draws(st, k, sigma, mod, rounds, rng)
        w, history = np.zeros(st.d), []
        for S_t, b_t in zip(S, b, strict=True):
            reg = _regularization(st, S_t, b_t, k, sigma, mod)
            A = _project_psd(S_t) + reg.ridge * np.eye(st.d)
            L = max(float(np.linalg.eigvalsh(A)[-1]), 1e-12)
            w = _project_ball(w - (step / L) * (A @ w - b_t), reg.norm_cap)
            history.append(w)
            ridges.append(reg.ridge)
        coef = np.mean(history[-tail:], axis=0)
        risks.append(st.s * float((coef - beta) @ (coef - beta))
                     + _intercept_mse(st, k, sigma, mod, coef))
    return np.asarray(risks), float(np.median(ridges))


def _dpsgd_population(st: _Setting, rng: np.random.Generator,
                      ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Synthetic clients: isotropic Gaussian features clipped at ``R`` with the assumed scale."""
    z = rng.standard_normal((DPSGD_POPULATION, st.d))
    r2 = np.sum(z * z, axis=1)
    lo, hi = 0.0, 1.0
    while float(np.mean(np.minimum(hi * r2, st.radius**2))) < st.s * st.d and hi < 1e12:
        hi *= 2.0
    for _ in range(60):  # the pre-clip variance whose clipped second moment is d s
        mid = (lo + hi) / 2.0
        lo, hi = ((mid, hi) if float(np.mean(np.minimum(mid * r2, st.radius**2))) < st.s * st.d
                  else (lo, mid))
    X = _clip_rows(z * math.sqrt(hi), st.radius)
    y = X @ _beta(st) + math.sqrt(st.resid) * rng.standard_normal(DPSGD_POPULATION)
    return np.column_stack([X, np.ones(DPSGD_POPULATION)]), y


def _dpsgd_risks(st: _Setting, noise_sd: float, clip: float, step: float, rounds: int,
                 draws: int, rng: np.random.Generator) -> NDArray[np.float64]:
    """Excess risks of simulated DP-SGD runs: the population's mean CLIPPED gradient plus noise.

    ``noise_sd`` is the standard deviation per coordinate of the noise on the
    averaged gradient (``sigma / sqrt(K)`` for local noise, ``sigma`` central).
    """
    Z, y = _dpsgd_population(st, rng)
    z_norm = np.linalg.norm(Z, axis=1)
    w = np.zeros((draws, Z.shape[1]))
    history = []
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for _ in range(rounds):
            # a client's gradient is r z (r its residual): clipping scales r to C / ||z||
            r = w @ Z.T - y
            r = np.clip(r, -clip / z_norm, clip / z_norm)
            noisy = r @ Z / len(y) + noise_sd * rng.standard_normal(w.shape)
            w = w - step * noisy
            history.append(w)
        coef = np.mean(history[-math.ceil(rounds / 2):], axis=0)
        err = coef[:, :-1] - _beta(st)
        risk = st.s * np.sum(err * err, axis=1) + coef[:, -1] ** 2
    return np.where(np.isfinite(risk), np.minimum(risk, _RISK_CAP * st.y2), _RISK_CAP * st.y2)


_RISK_CAP = 1e6


def _row(st: _Setting, risks: NDArray[np.float64], ridge: float, sigma: float,
         ) -> dict[str, float]:
    """Return a table row from simulated excess risks: mean, standard error, upper bound."""
    mean = st.resid + float(np.mean(risks))
    se = float(np.std(risks, ddof=1) / math.sqrt(len(risks))) if len(risks) > 1 else 0.0
    return {"predicted_mse": mean, "predicted_se": se, "upper_mse": upper_bound(mean, se),
            "ridge": ridge, "sigma": sigma}


def upper_bound(predicted: float, se: float, tolerance: float = PLAN_TOLERANCE) -> float:
    """Return the largest realised MSE the calibration tolerance allows for ``predicted``.

    The tolerance (``benchmarks/calibrate_planner.py``) is
    ``|predicted - realised| <= max(tolerance realised, 3 SE)``, so
    ``realised <= max(predicted / (1 - tolerance), predicted + 3 SE)``.

    Examples
    --------
    >>> round(upper_bound(0.9, 0.001), 4), round(upper_bound(0.9, 0.1), 4)
    (1.0, 1.2)
    """
    return max(predicted / (1.0 - tolerance), predicted + 3.0 * se)


def _predictions(st: _Setting, r: float, mod: Modulation, T: int, how: str,
                 dpsgd: tuple[int, float, float]) -> dict[str, dict[str, float]]:
    """Return the table's rows: every estimator's simulated prediction at one setting."""
    K, d, s, y2, R = st.K, st.d, st.s, st.y2, st.radius
    Td, C, eta = dpsgd
    rng = np.random.default_rng(_SEED)
    ols = st.resid * (1.0 + (d + 1) / K)
    rows: dict[str, dict[str, float]] = {
        "zero": {"predicted_mse": y2, "predicted_se": 0.0, "upper_mse": y2, "ridge": math.nan,
                 "sigma": math.nan},
        "ols": {"predicted_mse": ols, "predicted_se": 0.0, "upper_mse": upper_bound(ols, 0.0),
                "ridge": 0.0, "sigma": 0.0},
    }
    for name, m_ in (("nss", Modulation(radius=R)), ("one_shot", mod)):
        sigma = headroom_sigma(m_.sensitivity, r)
        risks, mu = _one_shot_risks(st, sigma, m_, PLAN_DRAWS, rng)
        rows[name] = _row(st, risks, mu, sigma)
    sigma = headroom_sigma(mod.sensitivity, r)
    v_S, v_b = noise_variances(K, d, sigma=sigma, alpha=mod.alpha, lam=mod.lam, feature_scale=s,
                               label_second_moment=y2)
    raw = min(float(simulated_risk(d, s, st.b2, v_S, v_b, [0.0], psd=False, draws=200)[0]),
              _RISK_CAP * y2)
    rows["one_shot_unregularised"] = {
        "predicted_mse": st.resid + raw, "predicted_se": math.nan,
        "upper_mse": upper_bound(st.resid + raw, 0.0), "ridge": 0.0, "sigma": sigma}
    k_round = max(K // T, 2) if how == "once" else K
    sigma_t = headroom_sigma(mod.sensitivity, round_rho(r, T, how))
    risks, mu = _iterative_risks(st, k_round, sigma_t, mod, T, 1.0, ITERATIVE_DRAWS, rng)
    rows["iterative"] = _row(st, risks, mu, sigma_t)
    for name, sens in (("dpsgd_local", 2.0 * C), ("dpsgd_central", 2.0 * C / K)):
        sigma = headroom_sigma(sens, r / Td)
        sd = sigma / math.sqrt(K) if name == "dpsgd_local" else sigma
        draws = DPSGD_DRAWS if name == "dpsgd_local" else PLAN_DRAWS // 2
        rows[name] = _row(st, _dpsgd_risks(st, sd, C, eta, Td, draws, rng), 0.0, sigma)
    return rows


def _planned_modulation(modulation: Any, radius: Any) -> Modulation:
    """Return the modulation to plan for; refuse a ``radius`` that contradicts it."""
    if modulation is None:
        return Modulation(lam=1.0, omega=1.0, radius=1.0 if radius is None else radius)
    check_instance(modulation, "modulation", Modulation,
                   "pass a Modulation(alpha=..., lam=..., omega=..., radius=...) or None")
    if radius is not None and check_positive(radius, "radius") != modulation.radius:
        raise fail("radius", radius, f"contradicts modulation's radius={modulation.radius:g} "
                   "(the clipping bound that sets the noise)",
                   "drop radius (the modulation carries it), or build the Modulation with "
                   "the radius you mean")
    return modulation


def plan_regression(n_clients: int, n_features: int, *, rho: Any = None, epsilon: Any = None,
                    delta: Any = None, radius: float | None = None,
                    modulation: Modulation | None = None,
                    feature_second_moment: float | None = None,
                    label_second_moment: float = 1.0, r_squared: float = 0.3,
                    rounds: int = 10, participation: str = "once", dpsgd_rounds: int = 20,
                    dpsgd_clip: float = 1.0, dpsgd_step: float = 0.5, margin: float = 0.02,
                    warn: bool = True) -> RegressionPlan:
    """Return the predicted test MSE of every estimator; warn if none can beat zero.

    Parameters
    ----------
    n_clients, n_features : int
        ``K`` and ``d``.
    rho, epsilon, delta : float
        The per-client budget: ``rho``, or ``epsilon`` with ``delta``
        (:func:`~spatialdp.regression.accounting.resolve_rho` refuses both,
        neither, and ``rho`` with ``delta``).
    radius : float, optional
        Clipping bound ``R`` (default 1.0). A ``modulation`` carries its own
        radius: a different ``radius`` next to it is refused, not overridden.
    modulation : Modulation, optional
        Of the one-shot and iterative estimators (default: ``lam=1, omega=1``, ``R``).
    feature_second_moment, label_second_moment, r_squared : float
        The data assumptions (see the module docstring).
    rounds, participation
        Of the iterative estimator.
    dpsgd_rounds, dpsgd_clip, dpsgd_step
        Of the DP-SGD baselines.
    margin : float
        Fraction of ``E y^2`` an estimator must gain, at the UPPER end of its
        prediction (``upper_mse``, :func:`upper_bound`), to count as beating zero.
    warn : bool
        Issue the warning below (``plan.feasible`` says the same either way).

    Returns
    -------
    RegressionPlan
        ``table`` with ``predicted_mse``, ``predicted_se``, ``upper_mse``,
        ``ridge``, ``sigma`` and ``beats_zero`` per estimator.

    Warns
    -----
    FeasibilityWarning
        When no local-DP estimator's ``upper_mse`` beats zero by ``margin``
        (``plan.feasible`` is False).

    Examples
    --------
    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     plan = plan_regression(10_000, 5, epsilon=1.0, delta=1e-6, radius=3.0)
    >>> plan.feasible, caught[0].category.__name__
    (False, 'FeasibilityWarning')
    """
    K = check_count(n_clients, "n_clients", low=2)
    d = check_count(n_features, "n_features", low=1)
    r = resolve_rho(rho, epsilon, delta)
    gain = check_number(margin, "margin", low=0.0, high=1.0, high_open=True,
                        fix="pass the fraction of E y^2 to gain, in [0, 1) (e.g. 0.1)")
    mod = _planned_modulation(modulation, radius)
    R = mod.radius
    ex2 = min(R * R, float(d)) if feature_second_moment is None else check_number(
        feature_second_moment, "feature_second_moment", low=0.0, low_open=True)
    s = min(ex2, R * R) / d
    y2 = check_number(label_second_moment, "label_second_moment", low=0.0, low_open=True)
    r2 = check_number(r_squared, "r_squared", low=0.0, high=1.0, low_open=True, high_open=True)
    T = check_count(rounds, "rounds", low=1)
    how = check_choice(participation, "participation", PARTICIPATION)
    st = _Setting(K=K, d=d, s=s, b2=r2 * y2 / s, y2=y2, resid=(1.0 - r2) * y2, radius=R)
    Td = check_count(dpsgd_rounds, "dpsgd_rounds", low=1)
    C = check_number(dpsgd_clip, "dpsgd_clip", low=0.0, low_open=True)
    eta = check_number(dpsgd_step, "dpsgd_step", low=0.0, low_open=True)
    with single_blas():  # small products, many calls: BLAS threads only spin
        rows = _predictions(st, r, mod, T, how, (Td, C, eta))
    table = pd.DataFrame.from_dict(rows, orient="index").loc[list(ESTIMATORS)]
    table["beats_zero"] = table["upper_mse"] < (1.0 - gain) * y2
    table.index.name = "estimator"
    plan = RegressionPlan(table=table, n_clients=K, n_features=d, rho=r, zero_mse=y2)
    if warn and not plan.feasible:
        warnings.warn(
            f"with K={K}, d={d}, rho={r:.4g} and R={R:g} no private estimator is predicted to "
            f"beat predicting zero by {gain:.0%} of E y^2 at the upper end of its calibrated "
            f"prediction (best: {plan.best_private}, predicted MSE "
            f"{plan.predicted(plan.best_private):.3g}, up to "
            f"{plan.upper(plan.best_private):.3g}, vs {y2:.3g}); "
            "collect more "
            "clients, raise epsilon, or lower d", FeasibilityWarning, stacklevel=2)
    return plan
