"""The DP-SGD federated-averaging baseline, with the same zCDP accounting.

Every round each client computes the squared-loss gradient of its one sample
at the current model (intercept as a constant feature), clips it to norm ``C``
and the server averages. Two trust models:

* ``noise="local"`` — each client noises its own clipped gradient (L2
  sensitivity ``2 C`` between any two samples), the trust model of the
  modulated protocol: nobody sees a clean gradient.
* ``noise="central"`` — a trusted aggregator (or secure sum) noises the
  average once (sensitivity ``2 C / K``, replace-one neighbours). A REFERENCE
  with a different, stronger trust assumption; labelled as such.

Every client takes part in every round at ``rho / rounds`` (zCDP composition,
``rounds`` charges). The estimate is the tail average of the iterates, as in
the iterative modulated protocol.

Examples
--------
>>> from spatialdp.privacy import Simulation
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(20_000, 2)) / 2
>>> y = X @ [1.0, -1.0]
>>> fit = fit_dpsgd(X, y, rho=1.0, noise="central", rounds=30, clip=1.0, step=2.0,
...                 target=Simulation(rng=1))
>>> np.round(fit.coef, 1).tolist(), fit.method
([1.0, -1.0], 'dpsgd_central')
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from spatialdp._validation import check_choice, check_count, check_number, fail
from spatialdp.privacy.budget import Disjoint, Single
from spatialdp.privacy.pipeline import ReleasePlan, check_affordable, run_release
from spatialdp.privacy.target import Accounting, ReleaseTarget, check_target
from spatialdp.regression._checks import check_features, check_labels
from spatialdp.regression.accounting import LINE_ITEM, resolve_rho
from spatialdp.regression.lattice_gaussian import LatticeGaussianMechanism
from spatialdp.regression.modulation import _clip_rows
from spatialdp.regression.results import RegressionFit

__all__ = ["NOISE_MODELS", "fit_dpsgd", "tune_dpsgd"]

NOISE_MODELS = ("local", "central")


def fit_dpsgd(X: Any, y: Any, *, target: Accounting, rho: Any = None, epsilon: Any = None,
              delta: Any = None, noise: str = "local", rounds: int = 20, clip: float = 1.0,
              step: float = 0.5, fit_intercept: bool = True) -> RegressionFit:
    """Run DP-SGD FedAvg (one sample per client) and return the tail-averaged model.

    Parameters
    ----------
    X, y : array_like
        One sample per client (features already standardised and clipped).
    target : ReleaseTarget, Unaccounted or Simulation
    rho, epsilon, delta : float
        Each client's total loss over all rounds.
    noise : {"local", "central"}
        Who adds the noise (see the module docstring).
    rounds : int
    clip : float
        Gradient clipping norm ``C``.
    step : float
        Learning rate.
    """
    target = check_target(target)
    Xa = check_features(X)
    K, d = Xa.shape
    ya = check_labels(y, K)
    total = resolve_rho(rho, epsilon, delta)
    how = check_choice(noise, "noise", NOISE_MODELS)
    T = check_count(rounds, "rounds", low=1, high=10_000)
    C = check_number(clip, "clip", low=0.0, low_open=True, fix="pass a clipping norm > 0")
    eta = check_number(step, "step", low=0.0, low_open=True, fix="pass a learning rate > 0")
    rho_t = total / T
    Z = np.hstack([Xa, np.ones((K, 1))]) if fit_intercept else Xa
    p = Z.shape[1]
    mech = LatticeGaussianMechanism(rho_t, 2.0 * C if how == "local" else 2.0 * C / K, p)
    check_affordable(target, rho=rho_t, charges=T, default_line_item=LINE_ITEM)
    structure = (Disjoint("dpsgd:clients", K) if how == "local"
                 else Single("dpsgd:average-gradient"))
    w = np.zeros(p)
    history: list[NDArray[np.float64]] = []
    for t in range(T):
        grads = _clip_rows(Z * (Z @ w - ya)[:, None], C)
        values = grads if how == "local" else grads.mean(axis=0)[None, :]
        (avg,) = run_release(
            [ReleasePlan(None, [(mech, values)], lambda noisy: noisy[0].mean(axis=0),
                         rho=rho_t)],
            target=target, structure=structure, default_line_item=LINE_ITEM,
            what=f"DP-SGD {how}-noise gradients, round {t + 1} of {T}", round_index=t)
        w = w - eta * avg
        history.append(w.copy())
    coef = np.mean(history[-math.ceil(T / 2):], axis=0)
    return RegressionFit(coef=coef[:d], intercept=float(coef[d]) if fit_intercept else 0.0,
                         method=f"dpsgd_{how}", rho=total, n_clients=K, ridge=0.0,
                         norm_cap=np.inf, sigma=mech.scale,
                         history=[h[:d] for h in history], accounting=target.metadata())


def _check_grid(values: Any, name: str) -> list[Any]:
    """Return a tuning grid as a non-empty list (its values are checked by fit_dpsgd)."""
    fix = f"pass a non-empty sequence, e.g. {name}=(1.0,)"
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        raise fail(name, values, f"is a {type(values).__name__}, not a sequence", fix)
    if np.ndim(values) != 1 or not len(values):
        raise fail(name, values, "is empty", fix)
    return list(values)


def _tuning_targets(target_factory: Any, n: int) -> list[Accounting]:
    """Return ``n`` targets from ``target_factory``, or refuse a charged one before any fit."""
    if not callable(target_factory):
        raise fail("target_factory", target_factory, "is not callable",
                   "pass a function returning a fresh target, e.g. lambda: Simulation(rng=0)")
    targets = [check_target(target_factory()) for _ in range(n)]
    if any(isinstance(t, ReleaseTarget) for t in targets):
        raise fail("target_factory", target_factory, "returned a ReleaseTarget: tuning is an "
                   f"experiment, not a charged release (the choice among {n} candidates is "
                   "made on exact validation errors, which no ledger records)",
                   "tune with lambda: Simulation(rng=...) (or "
                   "Unaccounted(reason)), then release the chosen fit once with "
                   "fit_dpsgd(..., target=ReleaseTarget(...))")
    return targets


def tune_dpsgd(X: Any, y: Any, X_val: Any, y_val: Any, *, rho: float, noise: str,
               target_factory: Any, clips: Sequence[float] = (0.3, 1.0, 3.0),
               steps: Sequence[float] = (0.1, 0.3, 1.0), rounds: Sequence[int] = (5, 20),
               ) -> tuple[dict[str, float], RegressionFit]:
    """Pick clip norm, step and rounds on a validation split; return them and the best fit.

    ``target_factory()`` returns the target of each candidate fit (e.g. a
    fresh :class:`~spatialdp.privacy.target.Simulation`); it is called once per
    candidate, before any fit. The grid is small and the same size as the
    modulated estimators' (the privacy cost of tuning is not charged, for any
    estimator). So tuning is an experiment, never a charged release: a
    :class:`~spatialdp.privacy.target.ReleaseTarget` is refused before
    anything is charged (the choice, made on exact validation errors, would
    not be in the ledger, and every candidate would be charged in full). Use
    ``Simulation`` or, visibly uncharged, ``Unaccounted(reason)``; then fit the
    chosen parameters once with :func:`fit_dpsgd` and a ``ReleaseTarget``.

    Examples
    --------
    >>> from spatialdp.privacy import Simulation
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 2)) / 2
    >>> y = X @ [1.0, -1.0]
    >>> params, fit = tune_dpsgd(X[:1500], y[:1500], X[1500:], y[1500:], rho=1.0,
    ...                          noise="central", target_factory=lambda: Simulation(rng=0))
    >>> sorted(params)
    ['clip', 'rounds', 'step']
    """
    Xa = check_features(X)
    Xv = check_features(X_val, "X_val")
    if Xv.shape[1] != Xa.shape[1]:
        raise fail("X_val", Xv.shape, f"has {Xv.shape[1]} columns for {Xa.shape[1]} in X",
                   "give the validation split the training columns")
    yv = check_labels(y_val, Xv.shape[0], "y_val")
    grids = {name: _check_grid(values, name) for name, values in
             (("clips", clips), ("steps", steps), ("rounds", rounds))}
    candidates = list(itertools.product(grids["clips"], grids["steps"], grids["rounds"]))
    targets = _tuning_targets(target_factory, len(candidates))
    best: tuple[float, dict[str, float], RegressionFit] | None = None
    for (c, s, r), target in zip(candidates, targets, strict=True):
        fit = fit_dpsgd(Xa, y, rho=rho, noise=noise, rounds=r, clip=c, step=s, target=target)
        with np.errstate(over="ignore", invalid="ignore"):
            mse = float(np.mean((fit.predict(Xv) - yv) ** 2))
        if not np.isfinite(mse):
            continue
        if best is None or mse < best[0]:
            best = (mse, {"clip": c, "step": s, "rounds": r}, fit)
    if best is None:
        raise fail("steps", steps, "made every DP-SGD candidate diverge (no finite validation "
                   "error)", "lower the steps or the clip norms")
    return best[1], best[2]
