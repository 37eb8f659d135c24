"""Predict each estimator's test error BEFORE any budget is spent, and warn when hopeless.

Inputs are public or assumed: the number of clients ``K``, the dimension
``d``, the budget (``epsilon, delta`` or ``rho``), the clipping bound ``R``,
the modulation, and three assumptions about the data a planner must make:
the feature second moment ``E||x||^2`` (default ``min(R^2, d)``: standardised
features clipped at ``R``), the label second moment ``E y^2`` (default 1:
standardised labels) and the share of it a linear model explains,
``r_squared`` (default 0.3). Features are taken as isotropic, ``Sigma = s I``.

Predictions (test MSE = residual ``(1 - r2) E y^2`` + excess risk):

* ``zero``: ``E y^2``;
* ``ols`` (non-private): residual times ``1 + d / K``;
* ``nss``, ``one_shot``: the excess risk of the regularised solve (PSD
  projection, ridge, norm cap) simulated from the noise model of
  :mod:`~spatialdp.regression.regularization` at ``Sigma = s I`` and
  ``||beta||^2 = B2 = r2 E y^2 / s``, at the ridge the fit would choose
  (:func:`~spatialdp.regression.regularization.choose_ridge`);
  ``one_shot_unregularised`` is the raw solve's mean risk (heavy-tailed; capped
  at ``1e6 E y^2``);
* ``iterative``: the same for one round's release (``K / T`` clients at
  ``rho``, or ``K`` clients at ``rho / T``), with the noise variances divided by
  the ``ceil(T / 2)`` averaged rounds (an optimistic approximation);
* ``dpsgd_local`` / ``dpsgd_central``: the linear recursion
  ``e_{t+1} = (1 - eta s) e_t + eta n_t`` with gradient-noise variance per
  coordinate ``(2C)^2 / (2 rho_t K)`` (local) or ``(2C / K)^2 / (2 rho_t)``
  (central), from ``e_0 = -beta``, ignoring clipping bias: an optimistic sketch.

A :class:`FeasibilityWarning` is issued when no private estimator is predicted
to beat predicting zero by the ``margin``;
central DP-SGD (a stronger trust model) does not count (default 2% of ``E y^2``).

Examples
--------
>>> plan = plan_regression(1_000_000, 20, rho=1.0, radius=3.0, warn=False)
>>> plan.feasible, round(plan.predicted("nss"), 3)
(True, 0.71)
>>> small = plan_regression(2000, 8, epsilon=1.0, delta=1e-6, radius=3.0, warn=False)
>>> small.feasible, bool(small.predicted("one_shot_unregularised") > 2)
(False, True)
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import pandas as pd

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
from spatialdp.regression.modulation import Modulation
from spatialdp.regression.regularization import (
    choose_ridge,
    noise_variances,
    norm_cap,
    simulated_risk,
)

__all__ = ["ESTIMATORS", "FeasibilityWarning", "RegressionPlan", "plan_regression"]

#: The estimators the planner predicts, in report order.
ESTIMATORS = ("zero", "ols", "nss", "one_shot", "one_shot_unregularised", "iterative",
              "dpsgd_local", "dpsgd_central")
#: Estimators under local DP (the trust model of the protocol); central DP-SGD is a reference.
_PRIVATE = ("nss", "one_shot", "iterative", "dpsgd_local")




@dataclass(frozen=True)
class RegressionPlan:
    """Predicted test MSE of each estimator (:attr:`table`) and the inputs behind it."""

    table: pd.DataFrame
    n_clients: int
    n_features: int
    rho: float
    zero_mse: float

    def predicted(self, estimator: str) -> float:
        """Return the predicted test MSE of ``estimator`` (one of :data:`ESTIMATORS`)."""
        name = check_choice(estimator, "estimator", ESTIMATORS)
        return float(self.table["predicted_mse"].to_numpy()[list(ESTIMATORS).index(name)])

    @property
    def best_private(self) -> str:
        """The local-DP estimator with the lowest predicted MSE (central DP-SGD excluded)."""
        return str(self.table.loc[list(_PRIVATE), "predicted_mse"].idxmin())

    @property
    def feasible(self) -> bool:
        """Whether some local-DP estimator is predicted to beat predicting zero."""
        return bool(self.table.loc[list(_PRIVATE), "beats_zero"].any())


def _ridge_error(d: int, s: float, b2: float, v_S: float, v_b: float, y2: float,
                 average: int = 1, ridge: bool = True) -> tuple[float, float]:
    """Excess risk and ridge of a moment solve, by the fit's own simulation.

    Regularised: PSD projection, the chosen ridge and the norm cap, with the
    variance divided by the number of averaged rounds (the bias is not).
    Unregularised: the raw solve (no projection, ridge or cap), its mean risk
    capped at ``1e6 E y^2`` (it is heavy-tailed: a near-singular draw explodes).
    """
    if not ridge:
        risk = simulated_risk(d, s, b2, v_S, v_b, [0.0], psd=False, draws=200)[0]
        return min(float(risk), 1e6 * y2), 0.0
    mu, risk = choose_ridge(d, s, b2, v_S, v_b, cap=norm_cap(y2, s))
    if average > 1:
        full = simulated_risk(d, s, b2, v_S, v_b, [mu], cap=norm_cap(y2, s))[0]
        var = simulated_risk(d, s, b2, v_S / average, v_b / average, [mu],
                             cap=norm_cap(y2, s))[0]
        risk = min(full, var)
    return float(risk), mu


def _dpsgd_error(d: int, s: float, b2: float, v: float, eta: float, T: int) -> float:
    q = 1.0 - eta * s
    if abs(q) >= 1.0:
        return math.inf
    bias2 = q ** (2 * T) * b2
    var = eta * eta * v * (1.0 - q ** (2 * T)) / (1.0 - q * q)
    return s * (bias2 + d * var)


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
        Fraction of ``E y^2`` an estimator must gain to count as beating zero.

    Warns
    -----
    FeasibilityWarning
        When no private estimator beats zero by ``margin``.
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
    b2 = r2 * y2 / s
    resid = (1.0 - r2) * y2
    rows: dict[str, dict[str, float]] = {
        "zero": {"predicted_mse": y2, "ridge": math.nan, "sigma": math.nan},
        "ols": {"predicted_mse": resid * (1.0 + d / K), "ridge": 0.0, "sigma": 0.0},
    }
    nss = Modulation(radius=R)
    for name, m_, reg in (("nss", nss, True), ("one_shot", mod, True),
                          ("one_shot_unregularised", mod, False)):
        sigma = headroom_sigma(m_.sensitivity, r)
        v_S, v_b = noise_variances(K, d, sigma=sigma, alpha=m_.alpha, lam=m_.lam,
                                   feature_scale=s, label_second_moment=y2)
        err, mu = _ridge_error(d, s, b2, v_S, v_b, y2, ridge=reg)
        rows[name] = {"predicted_mse": resid + err, "ridge": mu, "sigma": sigma}
    k_round = K // T if how == "once" else K
    sigma_t = headroom_sigma(mod.sensitivity, round_rho(r, T, how))
    v_S, v_b = noise_variances(max(k_round, 1), d, sigma=sigma_t, alpha=mod.alpha, lam=mod.lam,
                               feature_scale=s, label_second_moment=y2)
    err, mu = _ridge_error(d, s, b2, v_S, v_b, y2, average=math.ceil(T / 2))
    rows["iterative"] = {"predicted_mse": resid + err, "ridge": mu, "sigma": sigma_t}
    Td = check_count(dpsgd_rounds, "dpsgd_rounds", low=1)
    C = check_number(dpsgd_clip, "dpsgd_clip", low=0.0, low_open=True)
    eta = check_number(dpsgd_step, "dpsgd_step", low=0.0, low_open=True)
    for name, sens in (("dpsgd_local", 2.0 * C), ("dpsgd_central", 2.0 * C / K)):
        sigma = headroom_sigma(sens, r / Td)
        v = sigma**2 / K if name == "dpsgd_local" else sigma**2
        rows[name] = {"predicted_mse": resid + min(_dpsgd_error(d, s, b2, v, eta, Td), 1e300),
                      "ridge": 0.0, "sigma": sigma}
    table = pd.DataFrame.from_dict(rows, orient="index").loc[list(ESTIMATORS)]
    table["beats_zero"] = table["predicted_mse"] < (1.0 - gain) * y2
    table.index.name = "estimator"
    plan = RegressionPlan(table=table, n_clients=K, n_features=d, rho=r, zero_mse=y2)
    if warn and not plan.feasible:
        warnings.warn(
            f"with K={K}, d={d}, rho={r:.4g} and R={R:g} no private estimator is predicted to "
            f"beat predicting zero (best: {plan.best_private}, predicted MSE "
            f"{plan.predicted(plan.best_private):.3g} vs {y2:.3g}); collect more clients, "
            "raise epsilon, or lower d", FeasibilityWarning, stacklevel=2)
    return plan
