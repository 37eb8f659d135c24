"""The planner against simulation: calibrated predictions, and a warning wherever nothing works.

``data/planner_calibration.csv`` is written by ``benchmarks/calibrate_planner.py``
(seeded simulations of every estimator over a grid of K, d, epsilon and R^2,
next to the planner's predictions). These tests check that

* every calibrated prediction in it agrees with its simulation within the
  stated tolerance, ``|predicted - realised| <= max(0.1 realised, 3 SE)``;
* the planner, re-run NOW, still makes those predictions (so the stored
  table cannot go stale without a failure);
* every setting where no local-DP estimator beats the mean in simulation got
  a :class:`FeasibilityWarning`, and ``feasible`` agrees with the warning;
* fresh small simulations (new seeds, not those of the table) agree as well.
"""

from __future__ import annotations

import importlib.util
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from spatialdp.exceptions import InvalidInput
from spatialdp.regression import FeasibilityWarning, plan_regression
from spatialdp.regression.planner import CALIBRATED, PLAN_TOLERANCE, upper_bound

ROOT = Path(__file__).resolve().parents[1]
KEYS = ["n_clients", "n_features", "epsilon", "r_squared"]


def _script():
    spec = importlib.util.spec_from_file_location(
        "calibrate_planner", ROOT / "benchmarks" / "calibrate_planner.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CAL = _script()


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return pd.read_csv(CAL.CSV)


def test_the_stored_calibration_covers_the_grid_and_the_issues_settings(table):
    settings = set(map(tuple, table[KEYS].drop_duplicates().itertuples(index=False)))
    assert set(CAL.grid()) <= settings
    for K, d, eps in ((30_000, 5, 1.0), (10_000, 5, 2.0), (50_000, 20, 1.0), (10_000, 5, 1.0),
                      (4_000, 5, 8.0), (50_000, 5, 1.0)):
        assert (K, d, eps, 0.3) in settings
    assert set(CALIBRATED) <= set(table["estimator"])


def test_every_calibrated_prediction_agrees_with_its_simulation(table):
    cal = table[table["estimator"].isin(CALIBRATED)]
    assert len(cal) == len(CALIBRATED) * len(CAL.grid())
    recomputed = CAL.agrees(cal)
    bad = cal.loc[~recomputed, [*KEYS, "estimator", "predicted", "realised", "realised_se"]]
    assert recomputed.all(), bad.to_string()


@pytest.mark.parametrize("setting", [(30_000, 5, 1.0, 0.3), (10_000, 5, 2.0, 0.3),
                                     (50_000, 20, 1.0, 0.3), (4_000, 5, 8.0, 0.3)])
def test_the_planner_still_makes_the_stored_predictions(table, setting):
    """The issue's settings, re-planned now: the stored table is the planner's current output."""
    stored = table[(table[KEYS] == pd.Series(setting, index=KEYS)).all(axis=1)]
    fresh = CAL.predicted(*setting).set_index("estimator")
    for _, row in stored[stored["estimator"].isin(CALIBRATED)].iterrows():
        # equal up to float noise (a ridge on the grid edge may flip in one of the draws)
        gap = abs(fresh.loc[row["estimator"], "predicted_mse"] - row["predicted"])
        assert gap <= max(1e-4 * row["predicted"], 2 * row["predicted_se"]), row["estimator"]
    assert bool(fresh["warned"].iloc[0]) == bool(stored["warned"].iloc[0])


@pytest.mark.parametrize(("setting", "estimator"), [
    ((30_000, 5, 1.0, 0.3), "nss"),            # issue: 0.869 predicted, 1.000 realised
    ((10_000, 5, 2.0, 0.3), "nss"),            # issue: 0.856 predicted, 0.986 realised
    ((50_000, 20, 1.0, 0.3), "dpsgd_local"),   # issue: 0.885 predicted, 1.88 realised
    ((4_000, 20, 1.0, 0.3), "dpsgd_local"),    # the old sketch: 3.0 predicted, 11 realised
    ((10_000, 5, 8.0, 0.7), "iterative"),      # the old sketch: 0.50 predicted, 0.93 realised
])
def test_the_issues_optimistic_predictions_now_agree_with_simulation(table, setting, estimator):
    stored = table[(table[KEYS] == pd.Series(setting, index=KEYS)).all(axis=1)
                   & (table["estimator"] == estimator)].iloc[0]
    fresh = CAL.predicted(*setting).set_index("estimator").loc[estimator]
    se = math.hypot(stored["realised_se"], fresh["predicted_se"])
    gap = abs(fresh["predicted_mse"] - stored["realised"])
    assert gap <= max(PLAN_TOLERANCE * stored["realised"], 3 * se), (fresh, stored)


def test_every_setting_where_nothing_beats_the_mean_gets_a_warning(table):
    none = CAL.nothing_beats_the_mean(table)
    warned = table.groupby(KEYS)["warned"].first().loc[none.index]
    assert none.sum() >= 10  # the grid has such settings: the check is not vacuous
    assert warned[none].all(), none[none & ~warned]
    # The issue's two settings, which got no warning, at the default R^2 = 0.3. With the
    # Bayes ridge NSS now gains 4-6% there (0.944 and 0.961 +/- 0.012 realised), a gain
    # too small for the 10% tolerance to certify: the planner warns (a stored row says so).
    for K, d in ((10_000, 5), (50_000, 20)):
        assert table[(table[KEYS] == pd.Series((K, d, 1.0, 0.3), index=KEYS)).all(axis=1)
                     ]["warned"].all()
        with pytest.warns(FeasibilityWarning, match="at the upper end of its calibrated"):
            plan = plan_regression(K, d, epsilon=1.0, delta=1e-6, radius=CAL.RADIUS)
        assert not plan.feasible


def test_the_warning_is_not_raised_everywhere(table):
    """Where a private estimator clearly wins in simulation the planner mostly says so."""
    none = CAL.nothing_beats_the_mean(table, margin=0.2)
    warned = table.groupby(KEYS)["warned"].first().loc[none.index]
    assert (~none).sum() >= 10
    assert (~warned[~none]).mean() > 0.8


def test_feasible_is_the_warning_and_reads_the_upper_bound():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plan = plan_regression(1_000_000, 5, epsilon=8.0, delta=1e-6, radius=3.0)
    assert plan.feasible
    best = plan.best_private
    assert plan.upper(best) == upper_bound(plan.predicted(best),
                                           float(plan.table.loc[best, "predicted_se"]))
    assert plan.upper(best) >= plan.predicted(best) / (1 - PLAN_TOLERANCE)
    assert (plan.table["beats_zero"]
            == (plan.table["upper_mse"] < (1 - 0.02) * plan.zero_mse)).all()
    with pytest.warns(FeasibilityWarning):
        hopeless = plan_regression(4_000, 20, epsilon=1.0, delta=1e-6, radius=3.0)
    assert not hopeless.feasible
    assert not plan_regression(4_000, 20, epsilon=1.0, delta=1e-6, radius=3.0,
                               warn=False).feasible


def test_a_prediction_whose_mean_beats_zero_but_whose_upper_bound_does_not_warns():
    """The old rule compared the point prediction with zero; the upper bound is what counts."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FeasibilityWarning)
        plan = plan_regression(10_000, 5, epsilon=8.0, delta=1e-6, radius=3.0, r_squared=0.05)
    best = plan.best_private
    assert plan.predicted(best) < 0.98 * plan.zero_mse  # the point prediction beats zero
    assert plan.upper(best) >= plan.zero_mse * 0.98
    assert not plan.feasible


def test_upper_bound_refuses_nothing_and_is_monotone():
    assert upper_bound(1.0, 0.0) == pytest.approx(1.0 / (1 - PLAN_TOLERANCE))
    assert upper_bound(1.0, 1.0) == 4.0
    with pytest.raises(InvalidInput, match="estimator='best' is not one of"):
        plan_regression(10_000, 3, rho=1.0, warn=False).upper("best")


@pytest.mark.parametrize("setting", [(4_000, 5, 1.0, 0.3), (4_000, 5, 8.0, 0.7)])
def test_fresh_simulations_agree_with_the_planner(setting):
    """New seeds (not the table's): realised NSS within the tolerance of the prediction."""
    per_rep = CAL.realised(*setting, reps=6, seed=7)
    sim = per_rep.groupby("estimator")["nss"].agg(["mean", "std", "count"])
    plan = CAL.predicted(*setting).set_index("estimator")
    for name in ("nss", "one_shot", "dpsgd_local", "dpsgd_central", "ols"):
        real, se = sim.loc[name, "mean"], sim.loc[name, "std"] / math.sqrt(6)
        pred, pse = plan.loc[name, "predicted_mse"], plan.loc[name, "predicted_se"]
        assert abs(pred - real) <= max(PLAN_TOLERANCE * real, 3 * np.hypot(se, pse)), (
            name, pred, real, se)
    nothing = all(sim.loc[e, "mean"] + 2 * sim.loc[e, "std"] / math.sqrt(6) >= 1.0
                  for e in CAL.PRIVATE)
    if nothing:
        assert bool(plan["warned"].iloc[0])
