"""ModulatedRegression as a scikit-learn estimator, and fitting from a spatial join."""

from __future__ import annotations

import geopandas as gpd
import h3
import numpy as np
import pandas as pd
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from spatialdp.exceptions import InvalidInput
from spatialdp.geo import Partition
from spatialdp.privacy import PrivacyLedger, ReleaseTarget, Simulation
from spatialdp.regression import ModulatedRegression, fit_geodataframe, spatial_features


@parametrize_with_checks([ModulatedRegression(epsilon=8.0, delta=1e-6, radius=10.0,
                                              target=Simulation(rng=0)),
                          ModulatedRegression(rho=50.0, radius=10.0, lam=1.0, n_directions=1,
                                              method="iterative", rounds=2,
                                              target=Simulation(rng=0))])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


def test_fit_records_privacy_spent_and_charges_a_ledger():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(5000, 3)) / 2
    y = X @ [1.0, -1.0, 0.5]
    with PrivacyLedger(":memory:", epoch_budget=2.0, accounting="zcdp") as ledger:
        model = ModulatedRegression(epsilon=2.0, delta=1e-6, radius=3.0,
                                    target=ReleaseTarget(ledger, epoch=0)).fit(X, y)
        spent = 1.4 - ledger.remaining(0, "training")
    assert model.privacy_spent_["accounting"] == "ledger"
    assert model.privacy_spent_["rho"] == pytest.approx(spent)
    assert model.privacy_spent_["epsilon"] <= 2.0
    assert model.score(X, y) <= 1.0


def test_nan_features_are_refused_by_the_estimator():
    X = np.ones((10, 2))
    X[0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        ModulatedRegression(rho=1.0, target=Simulation(rng=0)).fit(X, np.ones(10))


@pytest.fixture(scope="module")
def city():
    """H3 cells around a point, with a public density attribute, and client points in them."""
    rng = np.random.default_rng(1)
    centre = h3.latlng_to_cell(40.75, -73.98, 8)
    cells = sorted(h3.grid_disk(centre, 3))
    partition = Partition.from_h3_cells(cells)
    attrs = pd.DataFrame({"density": rng.normal(size=len(cells))}, index=partition.region_ids)
    n = 40_000
    which = rng.integers(len(cells), size=n)
    lat_lng = np.array([h3.cell_to_latlng(c) for c in cells])[which]
    speed = rng.normal(size=n) / 2
    density = attrs["density"].to_numpy()[which] / 2
    points = gpd.GeoDataFrame(
        {"speed": speed, "y": 1.5 * speed - 1.0 * density + 0.1 * rng.normal(size=n)},
        geometry=gpd.points_from_xy(lat_lng[:, 1], lat_lng[:, 0]), crs=4326)
    return partition, attrs / 2, points


def test_fit_from_a_geodataframe_joins_cell_attributes(city):
    partition, attrs, points = city
    model = fit_geodataframe(points, ModulatedRegression(rho=200.0, radius=4.0,
                                                         target=Simulation(rng=0)),
                             partition=partition, region_features=attrs, label="y",
                             point_columns=["speed"])
    assert model.feature_names_ == ["speed", "density"]
    assert model.partition_version_ == partition.version
    np.testing.assert_allclose(model.coef_, [1.5, -1.0], atol=0.1)


def test_points_outside_the_partition_are_refused_or_dropped(city):
    partition, attrs, points = city
    far = pd.concat([points.iloc[:5], gpd.GeoDataFrame(
        {"speed": [0.0], "y": [0.0]}, geometry=gpd.points_from_xy([2.35], [48.85]), crs=4326)])
    with pytest.raises(InvalidInput, match="1 points lie in no region"):
        spatial_features(far, partition, attrs, point_columns=["speed"])
    kept = spatial_features(far, partition, attrs, point_columns=["speed"], unassigned="drop")
    assert len(kept) == 5


def test_region_attributes_must_cover_the_partition(city):
    partition, attrs, points = city
    with pytest.raises(InvalidInput, match="regions of the partition without attributes"):
        spatial_features(points, partition, attrs.iloc[1:])


@pytest.mark.parametrize(("X", "y", "match"), [
    (np.full((20, 3), np.nan), np.zeros(20), "X has 60 NaN"),
    (np.ones((20, 3)), np.r_[np.zeros(19), np.inf], "y has 1 NaN or infinite"),
    (np.ones((20, 3)) * 1j, np.zeros(20), "complex"),
    (np.ones((20, 0)), np.zeros(20), "0 feature"),
    (np.ones((20, 3)), np.zeros(5), "5 labels for 20 clients"),
])
def test_fit_refuses_bad_data_with_spatialdps_error(X, y, match):
    with pytest.raises(InvalidInput, match=match):
        ModulatedRegression(rho=1.0, target=Simulation(rng=0)).fit(X, y)


def test_fit_refuses_an_unknown_method_before_charging():
    with PrivacyLedger(":memory:", epoch_budget=2.0, accounting="zcdp") as ledger:
        model = ModulatedRegression(rho=1.0, method="closed_form",
                                    target=ReleaseTarget(ledger, epoch=0))
        with pytest.raises(InvalidInput, match="method='closed_form' is not one of"):
            model.fit(np.ones((20, 2)), np.zeros(20))
        assert ledger.remaining(0, "training") == pytest.approx(1.4)


def test_unfitted_model_refuses_predict_and_score_as_spatialdp_and_sklearn():
    from sklearn.exceptions import NotFittedError

    from spatialdp.regression import NotFitted

    model = ModulatedRegression(rho=1.0)
    with pytest.raises(NotFitted, match="call fit"):
        model.predict(np.ones((3, 2)))
    with pytest.raises(InvalidInput, match="call fit"):
        model.score(np.ones((3, 2)), np.ones(3))
    with pytest.raises(NotFittedError):
        model.predict(np.ones((3, 2)))


def test_predict_checks_the_shape_against_the_fit():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 3)) / 2
    model = ModulatedRegression(rho=5.0, radius=3.0, target=Simulation(rng=0))
    model.fit(X, X @ [1.0, 0, 0])
    with pytest.raises(InvalidInput, match="X has 1 features, but ModulatedRegression is "
                                           "expecting 3"):
        model.predict(X[:, :1])
    with pytest.raises(InvalidInput, match="Expected 2D array"):
        model.predict(X[0])
    assert np.isfinite(model.score(X, np.full(500, 1e308)))


def test_spatial_features_and_fit_geodataframe_refuse_junk(city):
    partition, attrs, points = city
    few = points.iloc[:50]
    with pytest.raises(InvalidInput, match="region_features=None is a NoneType, not a "
                                           "DataFrame"):
        spatial_features(few, partition, None)
    with pytest.raises(InvalidInput, match="point_columns='speed' is a str, not a sequence"):
        spatial_features(few, partition, attrs, point_columns="speed")
    with pytest.raises(InvalidInput, match=r"point_columns=\['nope'\] are not columns"):
        spatial_features(few, partition, attrs, point_columns=["nope"])
    with pytest.raises(InvalidInput, match="point_columns=.* repeat a column"):
        spatial_features(few, partition, attrs, point_columns=["speed", "speed"])
    with pytest.raises(InvalidInput, match="point_columns='geometry' is a column of geometry"):
        spatial_features(few, partition, attrs, point_columns=["geometry"])
    model = ModulatedRegression(rho=2.0, radius=2.0, target=Simulation(rng=0))
    with pytest.raises(InvalidInput, match="label='nope' is not a column"):
        fit_geodataframe(few, model, partition=partition, region_features=attrs, label="nope")
    with pytest.raises(InvalidInput, match="estimator='model' has no fit method"):
        fit_geodataframe(few, "model", partition=partition, region_features=attrs, label="y")
    twice = pd.concat([few, few[["y"]]], axis=1)
    with pytest.raises(InvalidInput, match="label='y' is not one numeric column"):
        fit_geodataframe(twice, model, partition=partition, region_features=attrs, label="y")
