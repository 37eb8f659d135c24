"""Contradictory or missing privacy arguments of spatialdp.regression are refused, not resolved.

Every refusal here charges nothing (checked on a zCDP ledger) and each test
fails on the code before the fix (5790e50), where:

* ``ModulatedRegression(epsilon=1.0, rho=0.5, target=...)`` spent rho = 0.5
  (epsilon 5.22 at delta 1e-6) and ignored epsilon;
* ``ModulatedRegression(rho=...)`` without a target ran a Simulation;
* ``ModulatedRegression(target=...)`` without a budget spent epsilon 1 at delta 1e-6
  (the defaults), ``epsilon`` without ``delta`` used delta 1e-6, and ``rho`` with
  ``delta`` ignored delta for the charge;
* ``transform_clients(label_bound=...)`` without ``label_rho`` blamed ``rho``;
* ``plan_regression(radius=..., modulation=...)`` ignored ``radius``;
* ``tune_dpsgd`` with a ledger-backed factory charged every candidate and
  refused (BudgetExceeded) only once the ledger was empty.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

from spatialdp.exceptions import InvalidInput
from spatialdp.privacy import PrivacyLedger, ReleaseTarget, Simulation, Unaccounted
from spatialdp.privacy.budget import rho_to_epsilon
from spatialdp.regression import (
    ModulatedRegression,
    Modulation,
    fit_dpsgd,
    fit_iterative,
    plan_regression,
    rho_for_epsilon,
    transform_clients,
    tune_dpsgd,
)


def _data(K: int = 400, d: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(K, d)) / 2
    return X, X @ np.linspace(1.0, -1.0, d)


@contextmanager
def _untouched_ledger() -> Iterator[PrivacyLedger]:
    """A zCDP ledger that must hold no charge when the block ends."""
    with PrivacyLedger(":memory:", epoch_budget=10.0, accounting="zcdp") as ledger:
        yield ledger
        assert ledger.spent(0) == 0
        assert len(ledger.audit()) == 0


BOTH = r"rho=0\.5 and epsilon=1\.0 were both given: two budgets for one release.*not both"
BOTH_WITH_DELTA = r"rho=0\.5 and epsilon=1\.0 \(with delta=1e-06\) were both given"
RHO_DELTA = r"delta=1e-05 was given with rho=0\.5: a zCDP budget has no delta.*drop delta"
NEITHER = r"rho=None and epsilon=None: no privacy budget was given; give rho= \(zCDP\)"
NO_DELTA = r"delta=None is missing: a Gaussian release needs delta > 0"

#: (budget arguments, the refusal), for every entry point that takes a budget.
BUDGETS = [
    pytest.param({"epsilon": 1.0, "rho": 0.5}, BOTH, id="epsilon-and-rho"),
    pytest.param({"epsilon": 1.0, "delta": 1e-6, "rho": 0.5}, BOTH_WITH_DELTA,
                 id="epsilon-delta-and-rho"),
    pytest.param({"rho": 0.5, "delta": 1e-5}, RHO_DELTA, id="rho-and-delta"),
    pytest.param({}, NEITHER, id="no-budget"),
    pytest.param({"epsilon": 1.0}, NO_DELTA, id="epsilon-without-delta"),
]


# ----------------------------------------------------------------------------- the estimator


@pytest.mark.parametrize(("budget", "match"), BUDGETS)
@pytest.mark.parametrize("method", ["one_shot", "iterative"])
def test_estimator_refuses_contradictory_or_missing_budgets_and_charges_nothing(
        budget: dict[str, float], match: str, method: str) -> None:
    X, y = _data()
    with _untouched_ledger() as ledger:
        model = ModulatedRegression(**budget, radius=2.0, method=method, rounds=2,
                                    target=ReleaseTarget(ledger, epoch=0))
        with pytest.raises(InvalidInput, match=match):
            model.fit(X, y)
    assert not hasattr(model, "coef_")


def test_estimator_refuses_a_missing_target_as_every_release_does() -> None:
    X, y = _data()
    model = ModulatedRegression(rho=0.5, radius=2.0)
    message = (r"target=None is not a release target; pass ReleaseTarget\(ledger, "
               r"epoch=\.\.\.\) to release and charge, Simulation\(rng=\.\.\.\) to simulate, or "
               r"Unaccounted\(reason\)")
    with pytest.raises(InvalidInput, match=message):
        model.fit(X, y)
    assert not hasattr(model, "coef_")
    with pytest.raises(InvalidInput, match="target=7 is not a release target"):
        ModulatedRegression(rho=0.5, target=7).fit(X, y)  # type: ignore[arg-type]


def test_the_budget_is_checked_before_the_data() -> None:
    """Nothing about the data is looked at (or said) before the budget is known to be sound."""
    with _untouched_ledger() as ledger:
        model = ModulatedRegression(epsilon=1.0, rho=0.5, target=ReleaseTarget(ledger, epoch=0))
        with pytest.raises(InvalidInput, match=BOTH):
            model.fit(np.full((5, 2), np.nan), np.zeros(3))


def test_estimator_charges_exactly_the_one_budget_it_is_given() -> None:
    X, y = _data()
    with PrivacyLedger(":memory:", epoch_budget=10.0, accounting="zcdp") as ledger:
        by_rho = ModulatedRegression(rho=0.5, radius=2.0,
                                     target=ReleaseTarget(ledger, epoch=0)).fit(X, y)
        assert ledger.spent(0) == pytest.approx(0.5)
        by_eps = ModulatedRegression(epsilon=1.0, delta=1e-6, radius=2.0,
                                     target=ReleaseTarget(ledger, epoch=1)).fit(X, y)
        assert ledger.spent(1) == pytest.approx(rho_for_epsilon(1.0, 1e-6))
    assert by_rho.privacy_spent_ | {"ledger": None} == {
        "rho": 0.5, "epsilon": None, "delta": None, "accounting": "ledger", "simulated": False,
        "ledger": None, "epoch": 0, "line_item": None, "round_index": None}
    spent = by_eps.privacy_spent_
    assert spent["rho"] == pytest.approx(rho_for_epsilon(1.0, 1e-6))
    assert spent["epsilon"] == rho_to_epsilon(spent["rho"], 1e-6)
    assert spent["epsilon"] <= 1.0
    assert spent["delta"] == 1e-6


def test_estimator_has_no_random_state_and_never_advances_its_simulation() -> None:
    """The Simulation target is the only seed, and fit leaves it as it was (sklearn's contract)."""
    X, y = _data()
    assert "random_state" not in ModulatedRegression().get_params()
    sim = Simulation(rng=3)
    before = sim.rng.bit_generator.state
    model = ModulatedRegression(rho=0.5, radius=2.0, lam=1.0, target=sim)
    first = model.fit(X, y).coef_.copy()
    assert sim.rng.bit_generator.state == before
    np.testing.assert_array_equal(model.fit(X, y).coef_, first)  # refit: the same draw
    other = ModulatedRegression(rho=0.5, radius=2.0, lam=1.0, target=Simulation(rng=4))
    assert not np.array_equal(other.fit(X, y).coef_, first)


def test_unaccounted_estimator_fit_is_marked_and_takes_no_seed() -> None:
    X, y = _data()
    model = ModulatedRegression(rho=0.5, radius=2.0, target=Unaccounted("synthetic data"))
    assert model.fit(X, y).privacy_spent_["accounting"] == "unaccounted"


# ----------------------------------------------------------------------------- the functions


def _transform(target: Any, **budget: Any) -> Any:
    X, y = _data()
    return transform_clients(X, y, modulation=Modulation(), target=target, **budget)


def _iterative(target: Any, **budget: Any) -> Any:
    X, y = _data()
    return fit_iterative(X, y, modulation=Modulation(), rounds=2, target=target, **budget)


def _dpsgd(target: Any, **budget: Any) -> Any:
    X, y = _data()
    return fit_dpsgd(X, y, rounds=2, target=target, **budget)


@pytest.mark.parametrize(("budget", "match"), BUDGETS)
@pytest.mark.parametrize("release", [_transform, _iterative, _dpsgd],
                         ids=["transform_clients", "fit_iterative", "fit_dpsgd"])
def test_releases_name_both_budgets_or_the_missing_one_and_charge_nothing(
        release: Callable[..., Any], budget: dict[str, float], match: str) -> None:
    with _untouched_ledger() as ledger, pytest.raises(InvalidInput, match=match):
        release(ReleaseTarget(ledger, epoch=0), **budget)


@pytest.mark.parametrize(("budget", "match"), BUDGETS)
def test_the_planner_refuses_the_same_budgets(budget: dict[str, float], match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        plan_regression(10_000, 3, warn=False, **budget)


def test_noised_labels_need_their_own_budget_named_as_such() -> None:
    X, y = _data()
    with _untouched_ledger() as ledger:
        with pytest.raises(InvalidInput, match=r"label_rho=None is missing while label_bound=2 "
                                               r"is given.*pass label_rho="):
            transform_clients(X, y, modulation=Modulation(), rho=0.5, label_bound=2.0,
                              target=ReleaseTarget(ledger, epoch=0))
        with pytest.raises(InvalidInput, match=r"label_rho=-1\.0 is below"):
            transform_clients(X, y, modulation=Modulation(), rho=0.5, label_bound=2.0,
                              label_rho=-1.0, target=ReleaseTarget(ledger, epoch=0))


def test_the_planner_refuses_a_radius_that_contradicts_the_modulation() -> None:
    mod = Modulation(lam=1.0, radius=3.0)
    with pytest.raises(InvalidInput, match=re.escape(
            "radius=1.0 contradicts modulation's radius=3 (the clipping bound that sets the "
            "noise); drop radius")):
        plan_regression(10_000, 3, rho=1.0, radius=1.0, modulation=mod, warn=False)
    alone = plan_regression(10_000, 3, rho=1.0, modulation=mod, warn=False)
    same = plan_regression(10_000, 3, rho=1.0, radius=3.0, modulation=mod, warn=False)
    by_radius = plan_regression(10_000, 3, rho=1.0, radius=3.0, warn=False)
    default = plan_regression(10_000, 3, rho=1.0, warn=False)
    assert alone.table.equals(same.table)
    assert by_radius.table.loc["nss", "sigma"] == pytest.approx(
        3.0 * default.table.loc["nss", "sigma"])


def test_tuning_refuses_a_charged_target_before_any_charge() -> None:
    X, y = _data(600)
    with _untouched_ledger() as ledger:
        with pytest.raises(InvalidInput, match=r"target_factory=.* returned a ReleaseTarget: "
                                               r"tuning is an experiment.*18 candidates"):
            tune_dpsgd(X[:400], y[:400], X[400:], y[400:], rho=0.1, noise="central",
                       target_factory=lambda: ReleaseTarget(ledger, epoch=0))
    with pytest.raises(InvalidInput, match="target=None is not a release target"):
        tune_dpsgd(X[:400], y[:400], X[400:], y[400:], rho=0.1, noise="central",
                   target_factory=lambda: None)
    params, fit = tune_dpsgd(X[:400], y[:400], X[400:], y[400:], rho=0.1, noise="central",
                             target_factory=lambda: Unaccounted("tuning on synthetic data"),
                             clips=(1.0,), steps=(0.3,), rounds=(3,))
    assert params == {"clip": 1.0, "step": 0.3, "rounds": 3}
    assert fit.accounting["accounting"] == "unaccounted"
