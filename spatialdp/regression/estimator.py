"""A scikit-learn regressor for clients holding one sample each: :class:`ModulatedRegression`.

``fit`` runs the whole protocol (client transform, then the one-shot or the
iterative server estimator); the privacy spent is a fitted attribute. Nothing
about accounting has a default: ``fit`` refuses a model without exactly one
budget (``rho=``, or ``epsilon=`` with ``delta=``) and without a target
(``ReleaseTarget(ledger, epoch=...)`` for a real, charged release,
``Simulation(rng=...)`` for an experiment, ``Unaccounted(reason)``), as every
release in spatialdp does.

Examples
--------
>>> from spatialdp.privacy import Simulation
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(50_000, 3)) / 2
>>> y = X @ [1.0, -1.0, 0.5] + 2.0
>>> model = ModulatedRegression(rho=20.0, radius=3.0, lam=0.5,
...                             target=Simulation(rng=0)).fit(X, y)
>>> np.round(model.coef_, 1).tolist(), round(model.intercept_, 1)
([1.0, -1.0, 0.5], 2.0)
>>> model.privacy_spent_["rho"], model.privacy_spent_["accounting"]
(20.0, 'simulation')
>>> ModulatedRegression(epsilon=1.0, rho=0.5, target=Simulation(rng=0)).fit(X, y)
... # doctest: +ELLIPSIS
Traceback (most recent call last):
...
spatialdp.exceptions.InvalidInput: rho=0.5 and epsilon=1.0 were both given: ...not both

A clone (``GridSearchCV``, ``cross_val_score``) charges the same ledger, never a copy:

>>> from sklearn.base import clone
>>> from spatialdp.privacy import PrivacyLedger, ReleaseTarget
>>> with PrivacyLedger(epoch_budget=1.0, accounting="zcdp") as ledger:
...     charged = ModulatedRegression(rho=0.1, target=ReleaseTarget(ledger, epoch=0))
...     clone(charged).target.ledger is ledger
True
"""

from __future__ import annotations

import sys
from copy import deepcopy
from dataclasses import replace
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import validate_data

from spatialdp._validation import check_choice, check_finite_array, fail
from spatialdp.exceptions import InvalidInput, NotFitted, NotNumeric
from spatialdp.privacy.budget import rho_to_epsilon
from spatialdp.privacy.target import Accounting, Simulation, check_target
from spatialdp.regression._checks import check_features
from spatialdp.regression.accounting import resolve_rho
from spatialdp.regression.client import transform_clients
from spatialdp.regression.iterative import fit_iterative
from spatialdp.regression.modulation import Modulation
from spatialdp.regression.oneshot import fit_one_shot

__all__ = ["ModulatedRegression", "NotFitted"]

#: Fitted attributes that :func:`~spatialdp.regression.fit_geodataframe` sets after ``fit``;
#: a refit on a plain matrix drops them, so no stale join describes the new coefficients.
_SPATIAL_ATTRIBUTES = ("spatial_join_", "feature_names_", "partition_version_")


def _is_geodataframe(X: Any) -> bool:
    """Return whether ``X`` is a GeoDataFrame, without importing geopandas (not loaded: no)."""
    gpd = sys.modules.get("geopandas")
    return gpd is not None and isinstance(X, gpd.GeoDataFrame)


def _check_matrix(X: Any, name: str = "X") -> NDArray[np.float64]:
    """Return ``X`` as a finite float64 2-D array with at least one column, or refuse it.

    Object arrays of numbers are converted (scikit-learn accepts them); sparse
    matrices, strings, complex numbers, NaN and infinities are refused.
    """
    if sparse.issparse(X):
        raise fail(name, X, "is a sparse matrix (sparse input is not supported)",
                   "pass a dense array, e.g. X.toarray()")
    if X is None:
        raise fail(name, X, "is None (this estimator requires y to be passed, but the target "
                   "y is None)" if name == "y" else "is None", "pass an array of numbers")
    try:
        raw = np.asarray(X)
    except (TypeError, ValueError):
        raise fail(name, X, "is not an array of numbers", "pass finite numbers") from None
    if raw.dtype.kind == "c":
        raise fail(name, X, "holds complex numbers (Complex data not supported)",
                   "pass real numbers")
    if raw.dtype == object:
        try:
            raw = raw.astype(np.float64)
        except (TypeError, ValueError) as err:
            raise NotNumeric(f"{name} has entries that are not numbers ({err}); pass finite "
                             "numbers") from None
    if name == "y" and raw.ndim == 2:
        if raw.shape[1] != 1:
            raise fail("y", raw.shape, "is not a 1d array (y should be a 1d array)",
                       "give one label per client")
        raw = raw[:, 0]
    if name == "X":
        if raw.ndim != 2:
            raise fail(name, X, f"has {raw.ndim} dimensions, not 2 (Expected 2D array)",
                       "Reshape your data: one row per client, one column per feature")
        if raw.shape[1] == 0:
            raise fail(name, raw.shape, f"has 0 feature(s) (shape={raw.shape}) while a minimum "
                       "of 1 is required", "give at least one feature column")
    return check_finite_array(raw, name, ndim=(2,) if name == "X" else (1,))


class ModulatedRegression(RegressorMixin, BaseEstimator):
    """Linear regression from one locally-private modulated report per client.

    As scikit-learn asks, ``__init__`` only stores the parameters; ``fit``
    checks them. Every privacy argument defaults to None and ``fit`` refuses
    contradictory or missing accounting (``InvalidInput``, nothing charged,
    nothing drawn) rather than choosing for you.

    Parameters
    ----------
    epsilon, delta : float, optional
        Each client's (epsilon, delta) local-DP guarantee, converted exactly to
        the largest zCDP rho that meets it
        (:func:`~spatialdp.regression.accounting.rho_for_epsilon`). Give both, or
        give ``rho``: ``epsilon`` without ``delta`` is refused.
    rho : float, optional
        A zCDP budget instead of ``(epsilon, delta)``. With ``epsilon`` it is
        refused (two budgets for one release), and with ``delta`` too: a zCDP
        budget has no delta, and the fit reports rho only (convert it with
        :func:`~spatialdp.privacy.budget.rho_to_epsilon` at the delta you choose).
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
    target : ReleaseTarget, Simulation or Unaccounted
        Required by ``fit``: where the release is charged and how its noise is
        drawn. A :class:`~spatialdp.privacy.target.Simulation` is the only seed
        (there is no ``random_state``: a release takes no seed). ``fit`` never
        advances the Simulation you pass: each fit draws from a copy of its
        generator, so refitting reproduces the same noise, as an integer
        ``random_state`` would in scikit-learn; set a new
        ``target=Simulation(rng=seed)`` for independent replications.
        A :class:`~spatialdp.privacy.target.ReleaseTarget` survives
        ``sklearn.base.clone`` sharing its ledger (the ledger is never copied), so
        ``GridSearchCV`` and ``cross_val_score`` charge the one ledger for every
        fit; with ``n_jobs`` > 1 a ledger file is re-opened by path in each worker
        (an in-memory ledger cannot be sent to another process and is refused).

    Attributes
    ----------
    coef_ : ndarray (d,)
    intercept_ : float
    fit_ : RegressionFit
    privacy_spent_ : dict
        ``rho`` per client, ``epsilon`` and ``delta`` (the exact epsilon of that
        rho at the given delta, at most the requested epsilon; None when the
        budget was given as rho) and the target's accounting record.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Set when ``X`` is a DataFrame with string column names (as
        :func:`~spatialdp.regression.fit_geodataframe` passes it).
    spatial_join_ : SpatialJoin
        Set by :func:`~spatialdp.regression.fit_geodataframe` only: ``predict``
        and ``score`` then accept a GeoDataFrame of points and build its
        features with the same join.
    """

    def __init__(self, epsilon: float | None = None, delta: float | None = None,
                 rho: float | None = None, radius: float = 1.0, alpha: float = 0.0,
                 lam: float = 0.0, omega: float = 1.0, n_directions: int = 1,
                 method: str = "one_shot", rounds: int = 10, participation: str = "once",
                 ridge: Any = "auto", norm_cap: Any = "auto", fit_intercept: bool = True,
                 target: Accounting | None = None) -> None:
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
        self.target = target

    def _accounting(self) -> tuple[float, Accounting]:
        """Return the checked budget (rho) and the target this fit draws from, or refuse.

        A Simulation target is copied with its generator, so that ``fit`` leaves
        its parameters as they were (scikit-learn's contract).
        """
        rho = resolve_rho(self.rho, self.epsilon, self.delta)
        target = check_target(self.target)
        if isinstance(target, Simulation):
            return rho, Simulation(rng=deepcopy(target.rng), round_index=target.round_index)
        return rho, target

    def _spent(self, rho: float) -> dict[str, Any]:
        """Return each client's rho, and its epsilon at delta for an (epsilon, delta) budget."""
        if self.delta is None:  # a rho budget (resolve_rho gave a delta to every epsilon)
            return {"rho": rho, "epsilon": None, "delta": None}
        delta = float(self.delta)
        return {"rho": rho, "epsilon": rho_to_epsilon(rho, delta), "delta": delta}

    def fit(self, X: Any, y: Any) -> ModulatedRegression:
        """Run the protocol on one sample per row and store the coefficients.

        Raises
        ------
        InvalidInput
            ``rho`` with ``epsilon`` or with ``delta``, no budget, ``epsilon``
            without ``delta``, no target, bad data (nothing charged or drawn).
        BudgetExceeded
            The ledger cannot cover the fit (nothing charged).
        """
        if _is_geodataframe(X):
            raise fail("X", "GeoDataFrame", "holds geometries, not features",
                       "fit points with fit_geodataframe(points, model, partition=..., "
                       "region_features=..., label=...)")
        check_choice(self.method, "method", ("one_shot", "iterative"))
        rho, target = self._accounting()
        Xa = _check_matrix(X)
        ya = _check_matrix(y, "y")
        if ya.shape[0] != Xa.shape[0]:
            raise fail("y", ya.shape, f"has {ya.shape[0]} labels for {Xa.shape[0]} clients "
                       "(inconsistent numbers of samples)", "give one label per row of X")
        X, y = validate_data(self, X, y, y_numeric=True)
        Xa = check_features(Xa)
        mod = Modulation(alpha=self.alpha, lam=self.lam, omega=self.omega,
                         n_directions=self.n_directions, radius=self.radius)
        if self.method == "one_shot":
            reports = transform_clients(Xa, ya, modulation=mod, rho=rho, target=target)
            fit = fit_one_shot(reports, ridge=self.ridge, norm_cap=self.norm_cap,
                               fit_intercept=self.fit_intercept)
        else:
            fit = fit_iterative(Xa, ya, modulation=mod, rho=rho, target=target,
                                rounds=self.rounds, participation=self.participation,
                                ridge=self.ridge, norm_cap=self.norm_cap,
                                fit_intercept=self.fit_intercept)
        for name in _SPATIAL_ATTRIBUTES:
            self.__dict__.pop(name, None)
        names = getattr(self, "feature_names_in_", None)  # set by validate_data for a DataFrame
        self.fit_ = fit if names is None else replace(fit, feature_names=tuple(map(str, names)))
        self.coef_ = fit.coef
        self.intercept_ = fit.intercept
        self.privacy_spent_ = {**self._spent(rho), **fit.accounting}
        return self

    def _check_fitted(self) -> None:
        if not hasattr(self, "coef_"):
            raise NotFitted(f"{type(self).__name__}=unfitted has no coefficients yet; call "
                            "fit(X, y) before predict or score")

    def _features(self, X: Any) -> Any:
        """Return ``X``, or for a GeoDataFrame its features built by the fit's spatial join.

        Refuses a GeoDataFrame when the model was not fitted by
        :func:`~spatialdp.regression.fit_geodataframe` (there is no join to repeat).
        """
        if not _is_geodataframe(X):
            return X
        join = getattr(self, "spatial_join_", None)
        if join is None:
            raise fail("X", "GeoDataFrame", "cannot be turned into features: this model was "
                       "fitted on a feature matrix, not by fit_geodataframe, so it has no "
                       "spatial join to repeat",
                       "pass the feature matrix, or fit with fit_geodataframe(points, model, "
                       "partition=..., region_features=..., label=...)")
        return join.features(X)

    def predict(self, X: Any) -> NDArray[np.float64]:
        """Return ``X @ coef_ + intercept_``.

        ``X`` may be a GeoDataFrame of points when the model was fitted by
        :func:`~spatialdp.regression.fit_geodataframe`: its features are built
        by the same spatial join (``spatial_join_``), one prediction per point.

        Raises
        ------
        NotFitted
            Before ``fit``.
        InvalidInput
            Bad data, another number of features than the fit, or a GeoDataFrame
            that the model cannot join (not fitted on spatial features, a missing
            point column, a point in no region).
        """
        self._check_fitted()
        X = self._features(X)
        Xa = _check_matrix(X)
        if Xa.shape[1] != self.n_features_in_:
            raise InvalidInput(f"X has {Xa.shape[1]} features, but {type(self).__name__} is "
                               f"expecting {self.n_features_in_} features as input; pass the "
                               "columns the model was fitted on")
        validate_data(self, X, reset=False)
        return Xa @ self.coef_ + self.intercept_

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Return the coefficient of determination R^2 of ``predict(X)`` against ``y``.

        ``X`` may be a GeoDataFrame of points, as in :meth:`predict`.
        """
        self._check_fitted()
        X = self._features(X)
        Xa = _check_matrix(X)
        ya = _check_matrix(y, "y")
        if ya.shape[0] != Xa.shape[0]:
            raise fail("y", ya.shape, f"has {ya.shape[0]} labels for {Xa.shape[0]} rows of X",
                       "give one label per row of X")
        w = np.ones_like(ya) if sample_weight is None else check_finite_array(
            sample_weight, "sample_weight")
        if w.shape != ya.shape:
            raise fail("sample_weight", w.shape, f"does not match y's shape {ya.shape}",
                       "give one weight per label")
        pred = self.predict(X)
        scale = max(float(np.max(np.abs(ya))), float(np.max(np.abs(pred))), 1.0)
        ys, ps = ya / scale, pred / scale  # scaled: 1e308 labels must not overflow
        resid = float(np.sum(w * (ys - ps) ** 2))
        total = float(np.sum(w * (ys - np.average(ys, weights=w)) ** 2))
        if total == 0.0:
            return 1.0 if resid == 0.0 else 0.0
        return 1.0 - resid / total

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True  # private: the fit may rightly predict ~zero
        return tags
