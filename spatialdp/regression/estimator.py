"""A scikit-learn regressor for clients holding one sample each: :class:`ModulatedRegression`.

``fit`` runs the whole protocol (client transform, then the one-shot or the
iterative server estimator); the privacy spent is a fitted attribute. The
default target is a seeded :class:`~spatialdp.privacy.target.Simulation`
(``random_state``), for experiments; pass ``target=ReleaseTarget(...)`` to run
it as a real, charged release.

Examples
--------
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(50_000, 3)) / 2
>>> y = X @ [1.0, -1.0, 0.5] + 2.0
>>> model = ModulatedRegression(rho=20.0, radius=3.0, lam=0.5, random_state=0).fit(X, y)
>>> np.round(model.coef_, 1).tolist(), round(model.intercept_, 1)
([1.0, -1.0, 0.5], 2.0)
>>> round(model.privacy_spent_["epsilon"], 1), model.privacy_spent_["accounting"]
(51.7, 'simulation')
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from spatialdp.privacy.budget import rho_to_epsilon
from spatialdp.privacy.target import Simulation
from spatialdp.regression._checks import check_features
from spatialdp.regression.accounting import resolve_rho
from spatialdp.regression.client import transform_clients
from spatialdp.regression.iterative import fit_iterative
from spatialdp.regression.modulation import Modulation
from spatialdp.regression.oneshot import fit_one_shot

__all__ = ["ModulatedRegression"]


class ModulatedRegression(RegressorMixin, BaseEstimator):
    """Linear regression from one locally-private modulated report per client.

    Parameters
    ----------
    epsilon, delta : float, default 1.0, 1e-6
        Each client's (epsilon, delta) local-DP guarantee (converted exactly to zCDP).
    rho : float, optional
        A zCDP budget instead of epsilon (then ``epsilon`` is ignored).
    radius : float, default 1.0
        Clipping bound ``R`` on each feature vector.
    alpha, lam, omega, n_directions
        The modulation (:class:`~spatialdp.regression.modulation.Modulation`).
    method : {"one_shot", "iterative"}
    rounds, participation
        Of the iterative method.
    ridge, norm_cap : "auto", None or float
        Regularisation (``"auto"``: from the noise level, K, d and R).
    fit_intercept : bool, default True
    random_state : int, Generator or None
        Seed of the default simulation target.
    target : ReleaseTarget, Unaccounted or Simulation, optional
        Where the release is charged; default ``Simulation(random_state)``.

    Attributes
    ----------
    coef_ : ndarray (d,)
    intercept_ : float
    fit_ : RegressionFit
    privacy_spent_ : dict
        ``rho``, ``epsilon``, ``delta`` per client and the accounting record.
    n_features_in_ : int
    """

    def __init__(self, epsilon: float = 1.0, delta: float = 1e-6, rho: float | None = None,
                 radius: float = 1.0, alpha: float = 0.0, lam: float = 0.0, omega: float = 1.0,
                 n_directions: int = 1, method: str = "one_shot", rounds: int = 10,
                 participation: str = "once", ridge: Any = "auto", norm_cap: Any = "auto",
                 fit_intercept: bool = True, random_state: Any = None,
                 target: Any = None) -> None:
        self.epsilon = epsilon
        self.delta = delta
        self.rho = rho
        self.radius = radius
        self.alpha = alpha
        self.lam = lam
        self.omega = omega
        self.n_directions = n_directions
        self.method = method
        self.rounds = rounds
        self.participation = participation
        self.ridge = ridge
        self.norm_cap = norm_cap
        self.fit_intercept = fit_intercept
        self.random_state = random_state
        self.target = target

    def _rho(self) -> float:
        if self.rho is not None:
            return resolve_rho(rho=self.rho)
        return resolve_rho(epsilon=self.epsilon, delta=self.delta)

    def fit(self, X: Any, y: Any) -> ModulatedRegression:
        """Run the protocol on one sample per row and store the coefficients."""
        X, y = validate_data(self, X, y, y_numeric=True)
        Xa = check_features(X)
        ya = np.asarray(y, dtype=np.float64)
        if self.method not in ("one_shot", "iterative"):
            raise ValueError(f"method={self.method!r} is not one of 'one_shot', 'iterative'; "
                             "pick one")
        mod = Modulation(alpha=self.alpha, lam=self.lam, omega=self.omega,
                         n_directions=self.n_directions, radius=self.radius)
        rho = self._rho()
        target = self.target if self.target is not None else Simulation(rng=self.random_state)
        if self.method == "one_shot":
            reports = transform_clients(Xa, ya, modulation=mod, rho=rho, target=target)
            fit = fit_one_shot(reports, ridge=self.ridge, norm_cap=self.norm_cap,
                               fit_intercept=self.fit_intercept)
        else:
            fit = fit_iterative(Xa, ya, modulation=mod, rho=rho, target=target,
                                rounds=self.rounds, participation=self.participation,
                                ridge=self.ridge, norm_cap=self.norm_cap,
                                fit_intercept=self.fit_intercept)
        self.fit_ = fit
        self.coef_ = fit.coef
        self.intercept_ = fit.intercept
        delta = self.delta if self.delta is not None else 1e-6
        self.privacy_spent_ = {"rho": rho, "epsilon": rho_to_epsilon(rho, delta),
                               "delta": delta, **fit.metadata}
        return self

    def predict(self, X: Any) -> NDArray[np.float64]:
        """Return ``X @ coef_ + intercept_``."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False)
        return np.asarray(X, dtype=np.float64) @ self.coef_ + self.intercept_

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True  # private: the fit may rightly predict ~zero
        return tags
