"""ModulatedRegression in scikit-learn's machinery with a real ledger, and on GeoDataFrames.

A ledger-backed target survives ``clone`` sharing its ledger, so model selection
(``GridSearchCV``, ``cross_val_score``) runs and every fit is charged to the one
SQLite file, also from worker processes; a fitted spatial model predicts and
scores new points from a GeoDataFrame exactly as from its features built by hand.
"""

from __future__ import annotations

import copy
import pickle

import geopandas as gpd
import h3
import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import GridSearchCV, cross_val_score

from spatialdp.exceptions import BudgetExceeded, InvalidInput, LedgerError
from spatialdp.geo import Partition
from spatialdp.privacy import PrivacyLedger, ReleaseTarget, Simulation
from spatialdp.regression import ModulatedRegression, fit_geodataframe, spatial_features

RHO = 0.25  # per fit; a zCDP ledger of epoch budget 10 has 7 for training: 28 fits


@pytest.fixture
def ledger(tmp_path):
    with PrivacyLedger(tmp_path / "ledger.sqlite", epoch_budget=10.0,
                       accounting="zcdp") as opened:
        yield opened


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 3)) / 2
    return X, X @ [1.0, -1.0, 0.5] + rng.normal(size=3000) / 10


def _model(target, **params):
    return ModulatedRegression(rho=RHO, radius=3.0, target=target, **params)


def _charges(ledger):
    audit = ledger.audit(0)
    return len(audit), float(audit["charged"].astype(float).sum())


# -- clone, copies and pickles share one budget --------------------------------------------


def test_clone_of_a_ledger_backed_model_shares_the_ledger(ledger):
    # Before: TypeError "cannot pickle '_thread.RLock' object" (clone deep-copies the target).
    model = _model(ReleaseTarget(ledger, epoch=0, why="tuning"))
    twin = clone(model)
    assert twin.target is not model.target
    assert twin.target.ledger is ledger
    assert (twin.target.epoch, twin.target.why) == (0, "tuning")
    assert copy.copy(ledger) is ledger
    with PrivacyLedger(":memory:", epoch_budget=1.0) as memory:  # in one process: shared too
        assert clone(_model(ReleaseTarget(memory, epoch=0))).target.ledger is memory


def test_grid_search_charges_every_fit_and_the_refit(ledger, data):
    X, y = data
    search = GridSearchCV(_model(ReleaseTarget(ledger, epoch=0)), {"lam": [0.0, 0.5]}, cv=3,
                          error_score="raise").fit(X, y)
    count, total = _charges(ledger)
    assert count == 2 * 3 + 1  # 2 settings x 3 folds, then the refit on all rows
    assert total == pytest.approx(7 * RHO)
    assert ledger.spent(0, "training") == pytest.approx(7 * RHO)
    assert set(ledger.audit(0)["what"]) == {"modulated features"}
    assert search.best_estimator_.target.ledger is ledger
    assert search.best_estimator_.privacy_spent_["accounting"] == "ledger"


def test_cross_val_score_charges_each_fold(ledger, data):
    X, y = data
    scores = cross_val_score(_model(ReleaseTarget(ledger, epoch=0)), X, y, cv=3,
                             error_score="raise")
    assert scores.shape == (3,)
    assert _charges(ledger) == (3, pytest.approx(3 * RHO))


def test_grid_search_in_two_worker_processes_charges_the_same_file(ledger, data):
    X, y = data
    GridSearchCV(_model(ReleaseTarget(ledger, epoch=0)), {"lam": [0.0, 0.5]}, cv=3, n_jobs=2,
                 error_score="raise").fit(X, y)
    assert _charges(ledger) == (7, pytest.approx(7 * RHO))


def test_a_pickled_target_reopens_its_ledger_file_and_charges_it(ledger, data):
    X, y = data
    moved = pickle.loads(pickle.dumps(_model(ReleaseTarget(ledger, epoch=0))))
    assert moved.target.ledger is not ledger
    assert moved.target.ledger.ledger_id == ledger.ledger_id
    moved.fit(X, y)
    moved.target.ledger.close()
    assert _charges(ledger) == (1, pytest.approx(RHO))


def test_an_in_memory_ledger_refuses_to_be_pickled_and_says_why(data):
    X, y = data
    with PrivacyLedger(":memory:", epoch_budget=10.0, accounting="zcdp") as memory:
        model = _model(ReleaseTarget(memory, epoch=0))
        with pytest.raises(LedgerError, match=r"':memory:' is in memory, so it cannot be "
                                              r"pickled .*second, empty budget.*n_jobs=1"):
            pickle.dumps(model)
        with pytest.raises(pickle.PicklingError) as refused:
            cross_val_score(model, X, y, cv=3, n_jobs=2, error_score="raise")
        assert "is in memory, so it cannot be pickled" in str(refused.value.__cause__)
        assert memory.audit(0).empty


def test_a_closed_or_replaced_ledger_file_is_refused(tmp_path):
    path = tmp_path / "ledger.sqlite"
    ledger = PrivacyLedger(path, epoch_budget=1.0)
    sent = pickle.dumps(ledger)
    ledger.close()
    with pytest.raises(LedgerError, match="is closed, so it cannot be pickled"):
        pickle.dumps(ledger)
    path.unlink()
    PrivacyLedger(path, epoch_budget=1.0).close()  # another ledger at the same path
    with pytest.raises(LedgerError, match=f"now holds ledger-.*, not the pickled "
                                          f"{ledger.ledger_id}"):
        pickle.loads(sent)


def test_a_search_that_exhausts_the_budget_stops_and_charges_nothing_more(tmp_path, data):
    X, y = data
    with PrivacyLedger(tmp_path / "small.sqlite", epoch_budget=1.0,
                       accounting="zcdp") as small:  # 0.7 for training: two fits of 0.25
        search = GridSearchCV(_model(ReleaseTarget(small, epoch=0)), {"lam": [0.0, 0.5]},
                              cv=3, error_score="raise")
        with pytest.raises(BudgetExceeded, match=r"0\.5 of 0\.7 spent.*nothing was charged"):
            search.fit(X, y)
        assert _charges(small) == (2, pytest.approx(2 * RHO))


# -- GeoDataFrames: feature names, and predict/score from points ----------------------------


@pytest.fixture(scope="module")
def town():
    """H3 cells with a public density, and points in them (a fit sample and new points)."""
    rng = np.random.default_rng(5)
    cells = sorted(h3.grid_disk(h3.latlng_to_cell(40.75, -73.98, 8), 2))
    partition = Partition.from_h3_cells(cells)
    attrs = pd.DataFrame({"density": rng.uniform(-1, 1, size=len(cells))},
                         index=partition.region_ids)

    def points(n, seed):
        draw = np.random.default_rng(seed)
        which = draw.integers(len(cells), size=n)
        lat_lng = np.array([h3.cell_to_latlng(c) for c in cells])[which]
        speed = draw.uniform(-1, 1, size=n)
        density = attrs["density"].to_numpy()[which]
        return gpd.GeoDataFrame(
            {"speed": speed, "y": 1.5 * speed - density + draw.normal(size=n) / 10},
            geometry=gpd.points_from_xy(lat_lng[:, 1], lat_lng[:, 0]), crs=4326)

    return partition, attrs, points(20_000, 6), points(200, 7)


def _spatial_fit(town, estimator):
    partition, attrs, points, _ = town
    return fit_geodataframe(points, estimator, partition=partition, region_features=attrs,
                            label="y", point_columns=["speed"])


def test_fit_geodataframe_sets_feature_names_in_as_scikit_learn_does(town):
    model = _spatial_fit(town, ModulatedRegression(rho=100.0, radius=2.0,
                                                   target=Simulation(rng=0)))
    assert model.feature_names_in_.tolist() == ["speed", "density"]
    assert model.n_features_in_ == 2
    assert model.feature_names_ == ["speed", "density"]
    plain = _spatial_fit(town, LinearRegression())  # the same for any scikit-learn estimator
    assert plain.feature_names_in_.tolist() == ["speed", "density"]


def test_predict_and_score_take_new_points_as_by_hand(town):
    partition, attrs, _, new = town
    model = _spatial_fit(town, ModulatedRegression(rho=100.0, radius=2.0,
                                                   target=Simulation(rng=0)))
    by_hand = spatial_features(new, partition, attrs, point_columns=["speed"])
    np.testing.assert_array_equal(model.predict(new), model.predict(by_hand))
    assert model.score(new, new["y"]) == model.score(by_hand, new["y"])
    assert model.score(new, new["y"]) > 0.9  # the signal is learnt (R² of the truth ~0.99)
    plain = _spatial_fit(town, LinearRegression())
    np.testing.assert_allclose(plain.predict(plain.spatial_join_.features(new)),
                               plain.predict(by_hand))


def test_the_model_keeps_its_own_copy_of_the_region_attributes(town):
    partition, attrs, points, new = town
    edited = attrs.copy()
    model = fit_geodataframe(points, ModulatedRegression(rho=100.0, radius=2.0,
                                                         target=Simulation(rng=0)),
                             partition=partition, region_features=edited, label="y",
                             point_columns=["speed"])
    before = model.predict(new)
    edited.iloc[:, 0] = 99.0  # editing the caller's frame after the fit changes nothing
    np.testing.assert_array_equal(model.predict(new), before)


def test_predict_refuses_points_it_cannot_join(town):
    partition, attrs, points, new = town
    spatial = _spatial_fit(town, ModulatedRegression(rho=100.0, radius=2.0,
                                                     target=Simulation(rng=0)))
    with pytest.raises(InvalidInput, match=r"points=\['speed'\] lack the column\(s\) the model "
                                           r"was fitted on .*add those columns"):
        spatial.predict(new.drop(columns="speed"))
    far = pd.concat([new.iloc[:3], gpd.GeoDataFrame(
        {"speed": [0.0], "y": [0.0]}, geometry=gpd.points_from_xy([2.35], [48.85]), crs=4326)])
    with pytest.raises(InvalidInput, match="1 of 4 points lie in no region of .*drop the "
                                           "points outside the partition"):
        spatial.predict(far)
    matrix = ModulatedRegression(rho=100.0, radius=2.0, target=Simulation(rng=0)).fit(
        spatial_features(points, partition, attrs, point_columns=["speed"]), points["y"])
    with pytest.raises(InvalidInput, match="not by fit_geodataframe, so it has no spatial "
                                           "join.*fit with fit_geodataframe"):
        matrix.predict(new)
    with pytest.raises(InvalidInput, match="not by fit_geodataframe"):
        matrix.score(new, new["y"])
    with pytest.raises(InvalidInput, match="holds geometries, not features; fit points with "
                                           "fit_geodataframe"):
        ModulatedRegression(rho=1.0, target=Simulation(rng=0)).fit(new, new["y"])


def test_a_refit_on_a_matrix_forgets_the_spatial_join(town):
    _, _, points, new = town
    model = _spatial_fit(town, ModulatedRegression(rho=100.0, radius=2.0,
                                                   target=Simulation(rng=0)))
    model.fit(points[["speed"]].to_numpy(), points["y"].to_numpy())
    assert not hasattr(model, "spatial_join_")
    assert not hasattr(model, "feature_names_in_")
    with pytest.raises(InvalidInput, match="not by fit_geodataframe"):
        model.predict(new)


def test_feature_names_that_are_not_strings_are_refused(town):
    partition, attrs, points, _ = town
    with pytest.raises(InvalidInput, match=r"feature names \[0\] are not strings.*"
                                           r"rename\(columns=str\)"):
        fit_geodataframe(points, LinearRegression(), partition=partition,
                         region_features=attrs.set_axis([0], axis=1), label="y",
                         point_columns=["speed"])
