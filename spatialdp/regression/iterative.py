"""The iterative protocol: projected gradient descent on unbiased gradients, one release a round.

Round ``t``: the server picks ``m`` directions orthogonal to the current
``beta_t`` (:func:`~spatialdp.regression.modulation.random_directions`; when
``m = d`` there is no room and they are just random), the
round's clients release modulated reports, and the server steps

    ``beta_{t+1} = Proj_ball(beta_t - (step / L_t) G_t)``,
    ``G_t = (P(Sigma^_t) + mu_t I) beta_t - b^_t``

with ``L_t`` the largest eigenvalue of ``P(Sigma^_t) + mu_t I`` (so ``step = 1``
is one Newton-like step for isotropic features) and ``mu_t``, the cap and the
centring as in the one-shot estimator. The estimate is the average of the
last half of the iterates (tail averaging: the rounds' noise averages out).

Participation, and what the ledger is charged:

* ``"once"`` — clients are split at random into ``rounds`` disjoint groups, one
  per round, each releasing at the full ``rho``: parallel composition, one
  charge of ``rho`` over a :class:`~spatialdp.privacy.budget.Disjoint`
  structure of ``rounds`` parts.
* ``"every"`` — every client releases in every round at ``rho / rounds``:
  zCDP composition, ``rounds`` charges of ``rho / rounds`` (total ``rho``).

Either way every client's total loss is ``rho``; the whole charge is checked
against the ledger before the first round, and nothing is charged on refusal.

Examples
--------
>>> from spatialdp.privacy import Simulation
>>> from spatialdp.regression.modulation import Modulation
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(200_000, 3)) / 2
>>> y = X @ [1.0, -1.0, 0.5]
>>> fit = fit_iterative(X, y, modulation=Modulation(lam=0.5, radius=3.0), rho=50.0, rounds=6,
...                     target=Simulation(rng=1))
>>> np.round(fit.coef, 1).tolist(), len(fit.history)
([1.0, -1.0, 0.5], 6)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from spatialdp._validation import check_choice, check_count, check_instance, check_number, fail
from spatialdp.privacy.budget import Disjoint
from spatialdp.privacy.pipeline import ReleasePlan, check_affordable, run_release
from spatialdp.privacy.target import Accounting, Simulation, check_target
from spatialdp.regression._checks import check_features, check_labels
from spatialdp.regression.accounting import LINE_ITEM, resolve_rho
from spatialdp.regression.client import ClientReports, plan_transform
from spatialdp.regression.modulation import Modulation, random_directions
from spatialdp.regression.oneshot import _strength, centered_moments
from spatialdp.regression.results import RegressionFit
from spatialdp.regression.server import _project_ball, _project_psd

__all__ = ["PARTICIPATION", "fit_iterative", "round_rho"]

PARTICIPATION = ("once", "every")


def round_rho(rho: float, rounds: int, participation: str) -> float:
    """Return the rho of one round's release: ``rho`` (once) or ``rho / rounds`` (every).

    Examples
    --------
    >>> round_rho(1.0, 4, "once"), round_rho(1.0, 4, "every")
    (1.0, 0.25)
    """
    return rho if participation == "once" else rho / rounds


class _Descent:
    """The server's side of the iterative protocol: directions, steps and iterates."""

    def __init__(self, modulation: Modulation, d: int, gen: np.random.Generator, ridge: Any,
                 norm_cap: Any, eta: float, fit_intercept: bool) -> None:
        self.modulation, self.d, self.gen = modulation, d, gen
        self.ridge, self.norm_cap, self.eta = ridge, norm_cap, eta
        self.fit_intercept = fit_intercept
        self.beta = np.zeros(d)
        self.history: list[np.ndarray] = []
        self.intercepts: list[float] = []
        self.mu = self.cap = self.sigma = 0.0

    def directions(self) -> np.ndarray:
        """Return the round's directions, orthogonal to the current iterate when there is room."""
        room = self.modulation.n_directions <= self.d - 1
        return random_directions(self.d, self.modulation.n_directions, rng=self.gen,
                                 orthogonal_to=self.beta if room else None)

    def step(self, rep: ClientReports) -> None:
        """Take one projected gradient step on the round's reports."""
        self.sigma = rep.sigma
        mom = centered_moments(rep, fit_intercept=self.fit_intercept)
        self.mu = _strength(self.ridge, lambda: mom.reg.ridge, "ridge")
        self.cap = _strength(self.norm_cap, lambda: mom.reg.norm_cap, "norm_cap")
        A = _project_psd(mom.S) + self.mu * np.eye(self.d)
        L = max(float(np.linalg.eigvalsh(A)[-1]), 1e-12)
        self.beta = _project_ball(self.beta - (self.eta / L) * (A @ self.beta - mom.b),
                                  self.cap)
        self.history.append(self.beta.copy())
        self.intercepts.append(mom.y_mean - float(mom.x_mean @ self.beta))


def fit_iterative(X: Any, y: Any, *, modulation: Modulation, target: Accounting,
                  rho: Any = None,
                  epsilon: Any = None, delta: Any = None, rounds: int = 10,
                  participation: str = "once", step: float = 1.0, ridge: Any = "auto",
                  norm_cap: Any = "auto", fit_intercept: bool = True) -> RegressionFit:
    """Run the iterative modulated protocol and return its tail-averaged estimate.

    Parameters
    ----------
    X, y : array_like
        One sample per client.
    modulation : Modulation
    target : ReleaseTarget, Unaccounted or Simulation
    rho, epsilon, delta : float
        Each client's total loss: ``rho``, or ``(epsilon, delta)``.
    rounds : int, default 10
    participation : {"once", "every"}
    step : float, default 1.0
        Step relative to ``1 / L_t``, in ``(0, 2)``.
    ridge, norm_cap : "auto", None or float
        As in :func:`~spatialdp.regression.oneshot.fit_one_shot`, per round.

    Raises
    ------
    BudgetExceeded
        The ledger cannot cover ``rho`` (nothing is charged).
    """
    target = check_target(target)
    Xa = check_features(X)
    K, d = Xa.shape
    ya = check_labels(y, K)
    total = resolve_rho(rho, epsilon, delta)
    T = check_count(rounds, "rounds", low=1, high=10_000)
    how = check_choice(participation, "participation", PARTICIPATION)
    eta = check_number(step, "step", low=0.0, high=2.0, low_open=True, high_open=True,
                       fix="pass a relative step in (0, 2), e.g. 1.0")
    if how == "once" and K < 2 * T:
        raise fail(
            "rounds", T, f"leaves fewer than 2 clients per group with {K} sample(s)",
            "use fewer rounds or participation='every'")
    rho_t = round_rho(total, T, how)
    gen = target.rng if isinstance(target, Simulation) else np.random.default_rng()
    groups = (np.array_split(gen.permutation(K), T) if how == "once"
              else [np.arange(K)] * T)
    check_instance(modulation, "modulation", Modulation,
                   "pass a Modulation(alpha=..., lam=..., omega=..., radius=...)")
    # Every check a round's transform makes, once, before anything is charged (the
    # first group is the largest); each round then swaps in its clients and its
    # directions, which depend on the previous round.
    base = plan_transform(Xa[groups[0]], ya[groups[0]], modulation=modulation, target=target,
                          directions=(np.eye(d)[:modulation.n_directions]
                                      if modulation.n_directions <= d else None), rho=rho_t)
    check_affordable(target, rho=rho_t, charges=1 if how == "once" else T,
                     default_line_item=LINE_ITEM)
    state = _Descent(modulation, d, gen, ridge, norm_cap, eta, fit_intercept)

    def rounds_of(chosen: range) -> Callable[[Accounting], list[Any]]:
        def run(draw_from: Accounting) -> list[Any]:  # called by the pipeline after the charge
            for t in chosen:
                features, labels = ((Xa[groups[t]], ya[groups[t]]) if how == "once"
                                    else (Xa, ya))
                transform = replace(base, features=features, labels=labels,
                                    directions=state.directions())
                state.step(transform.draw(draw_from))
            return []
        return run

    if how == "once":  # disjoint round groups: one charge of rho, then every round
        run_release([ReleasePlan(None, [], lambda _: None, rho=total,
                                 sample=rounds_of(range(T)))],
                    target=target, default_line_item=LINE_ITEM,
                    structure=Disjoint("modulated-regression:round-groups", T),
                    what=f"modulated features, {T} disjoint round groups")
    else:  # every client every round: one charge of rho / rounds before each round's noise
        for t in range(T):
            run_release([ReleasePlan(None, [], lambda _: None, rho=rho_t,
                                     sample=rounds_of(range(t, t + 1)))],
                        target=target, default_line_item=LINE_ITEM,
                        structure=Disjoint("modulated-regression:clients", K),
                        what=f"modulated features, round {t + 1} of {T}", round_index=t)
    history, intercepts, mu, cap, sigma = (state.history, state.intercepts, state.mu,
                                           state.cap, state.sigma)
    tail = math.ceil(T / 2)
    coef = np.mean(history[-tail:], axis=0)
    return RegressionFit(coef=coef, intercept=float(np.mean(intercepts[-tail:])),
                         method="iterative", rho=total, n_clients=K, ridge=mu, norm_cap=cap,
                         sigma=sigma, history=history, accounting=target.metadata())
