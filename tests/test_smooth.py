"""Small-area estimates of a regional report: what they read, what they refuse, what they return."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

from spatialdp.datasets import synthetic_fleet, us_states_partition
from spatialdp.exceptions import InvalidInput, PartitionMismatch
from spatialdp.federated import MetricSpec, device_report, regional_report
from spatialdp.geo.partition import Partition
from spatialdp.privacy.target import Simulation
from spatialdp.smooth import (
    READ_COLUMNS,
    SmallAreaEstimates,
    small_area_estimates,
    spatial_weights,
    to_libpysal,
)

LOSS = MetricSpec("loss", 0.0, 4.0)
PUBLIC = dict(client_variance=1 / 3)  # uniform(0, 2) clients: variance 4/12


@pytest.fixture(scope="module")
def states() -> Partition:
    return us_states_partition()


def _clients(states: Partition, seed: int = 1, shift: dict[int, float] | None = None
             ) -> pd.DataFrame:
    fleet = synthetic_fleet(20_000, rng=0)
    rng = np.random.default_rng(seed)
    loss = rng.uniform(0, 2, len(fleet))
    for row, value in (shift or {}).items():
        loss[row] = value
    examples = pd.DataFrame({"client_id": fleet.device_id, "region_id": fleet.region_id,
                             "loss": loss})
    return device_report(examples, loss_spec=LOSS, partition=states)


@pytest.fixture(scope="module")
def report(states):
    return regional_report(_clients(states), states, [LOSS], epsilon=0.5,
                           target=Simulation(rng=0), min_cohort=100)


@pytest.fixture(scope="module")
def area(states) -> pd.DataFrame:
    """A public covariate: each state's area (from its geometry)."""
    return pd.DataFrame({"area": states.regions.to_crs(5070).area.to_numpy() / 1e12},
                        index=states.region_ids.astype(str))


def test_a_frame_joinable_like_the_report_with_labels_and_map_columns(report, states, area):
    smooth = small_area_estimates(report, covariates=area, weights=states, **PUBLIC)
    frame = smooth.frame
    assert isinstance(smooth, SmallAreaEstimates)
    assert frame.index.equals(report["loss"].index)
    assert frame.crs == report["loss"].crs
    for column in ("eblup", "mse", "ci_low", "ci_high", "shrinkage", "label", "value",
                   "error_bar", "cohort", "reliability", "suppressed"):
        assert column in frame.columns
    suppressed = report["loss"].suppressed.to_numpy()
    assert (frame.label[suppressed] == "suppressed").all()
    assert frame.eblup[suppressed].isna().all()
    shown = frame[~suppressed]
    assert set(shown.label) <= {"direct", "composite"}
    assert ((shown.label == "direct") == (shown.shrinkage >= 0.95)).all()
    assert (shown.ci_low < shown.eblup).all()
    assert (shown.eblup < shown.ci_high).all()
    assert smooth.simulated
    assert "[SIMULATION" in smooth.summary()
    assert "no epsilon charged" in smooth.summary()
    assert smooth.accounting["post_processing"].startswith("small-area model")


def test_suppressed_regions_get_a_modelled_estimate_only_when_asked(report, states):
    suppressed = report["loss"].suppressed.to_numpy()
    assert suppressed.any()
    filled = small_area_estimates(report, model="sfh", weights=states, include_suppressed=True,
                                  **PUBLIC)
    assert (filled.frame.label[suppressed] == "modelled").all()
    assert filled.frame.eblup.notna().all()
    assert filled.modelled_share == 1.0
    assert not filled.frame.suppressed.any()
    plain = small_area_estimates(report, model="sfh", weights=states, **PUBLIC)
    assert plain.modelled_share == 0.0
    np.testing.assert_allclose(plain.frame.eblup[~suppressed], filled.frame.eblup[~suppressed])


def test_conf_int_at_the_result_level_matches_the_frame(report):
    smooth = small_area_estimates(report, **PUBLIC)
    ci = smooth.conf_int()
    np.testing.assert_allclose(ci.ci_low, smooth.frame.ci_low)
    wider = smooth.conf_int(0.01)
    shown = smooth.frame.label != "suppressed"
    assert ((wider.ci_high - wider.ci_low)[shown] > (ci.ci_high - ci.ci_low)[shown]).all()


def test_nothing_but_the_published_columns_is_read(report):
    """Scrambling every column outside READ_COLUMNS changes nothing."""
    frame = report["loss"]
    scrambled = frame.copy()
    rng = np.random.default_rng(1)
    for column in frame.columns:
        if column in READ_COLUMNS or column == "geometry":
            continue
        if pd.api.types.is_float_dtype(frame[column].dtype):
            scrambled[column] = rng.normal(size=len(frame))
        else:
            scrambled[column] = frame[column].sample(frac=1.0, random_state=1).to_numpy()
    a = small_area_estimates(frame, **PUBLIC).frame
    b = small_area_estimates(scrambled, **PUBLIC).frame
    pd.testing.assert_frame_equal(a.drop(columns="geometry"), b.drop(columns="geometry"))


def test_one_clients_data_enters_only_through_the_released_values(states, report):
    """Two rounds that differ in one client: given the same released values, the same output."""
    changed = regional_report(_clients(states, shift={0: 0.0, 1: 2.0}), states, [LOSS],
                              epsilon=0.5, target=Simulation(rng=0), min_cohort=100)
    a, b = report["loss"], changed["loss"].copy()
    assert not np.allclose(a.value.dropna(), b.value.dropna())  # the release did change
    b["value"] = a["value"]  # ...so give the model the first round's released values
    out_a = small_area_estimates(a, **PUBLIC).frame.drop(columns="geometry")
    out_b = small_area_estimates(b, **PUBLIC).frame.drop(columns="geometry")
    pd.testing.assert_frame_equal(out_a, out_b)


def test_sampling_variance_bound_or_public_client_variance(report):
    frame = report["loss"]
    shown = ~frame.suppressed
    bound = small_area_estimates(frame).frame
    known = small_area_estimates(frame, client_variance=0.25).frame
    n = frame.cohort[shown].astype(float)
    noise = frame.noise_std[shown] ** 2
    np.testing.assert_allclose(bound.direct_variance[shown], noise + 16.0 / (4 * n))
    np.testing.assert_allclose(known.direct_variance[shown], noise + 0.25 / n)


@pytest.mark.parametrize("name", ["cohort", "loss.error_bar", "loss_cv", "reliability",
                                  "noise_std", "noisy_count"])
def test_private_covariates_are_refused_by_name(report, name):
    covariates = pd.DataFrame({name: np.arange(len(report["loss"]), dtype=float)},
                              index=report["loss"].index)
    with pytest.raises(InvalidInput, match="produced from private data"):
        small_area_estimates(report, covariates=covariates, **PUBLIC)


@pytest.mark.parametrize("column", ["cohort", "error_bar", "noise_std", "value"])
def test_a_renamed_copy_of_a_report_column_is_refused(report, column):
    frame = report["loss"]
    copy = pd.DataFrame({"innocent": pd.to_numeric(frame[column]).astype(float).fillna(0.0)},
                        index=frame.index)
    with pytest.raises(InvalidInput, match=f"equals the report's '{column}'"):
        small_area_estimates(report, covariates=copy, **PUBLIC)


def test_a_previous_rounds_value_is_a_fine_covariate(report, states):
    before = regional_report(_clients(states, seed=5), states, [LOSS], epsilon=0.5,
                             target=Simulation(rng=3), min_cohort=100)["loss"]
    previous = pd.DataFrame({"previous": before.value.fillna(before.value.mean())})
    smooth = small_area_estimates(report, covariates=previous, **PUBLIC)
    assert "previous" in smooth.coefficients.index


def test_bad_covariates_are_refused(report):
    index = report["loss"].index
    with pytest.raises(InvalidInput, match="no row for 1 region"):
        small_area_estimates(report, covariates=pd.DataFrame({"x": 1.0}, index=index[1:]))
    with pytest.raises(InvalidInput, match="NaN or infinite"):
        small_area_estimates(report, covariates=pd.DataFrame({"x": np.nan}, index=index))
    with pytest.raises(InvalidInput, match="collinear"):
        small_area_estimates(report, covariates=pd.DataFrame({"x": 2.0}, index=index))
    with pytest.raises(InvalidInput, match="repeated region ids"):
        small_area_estimates(report, covariates=pd.DataFrame(
            {"x": 1.0}, index=[*list(index), index[0]]))
    with pytest.raises(InvalidInput, match="dtype bool"):
        small_area_estimates(report, covariates=pd.DataFrame({"x": True}, index=index))
    with pytest.raises(InvalidInput, match="is not a DataFrame"):
        small_area_estimates(report, covariates=[1, 2, 3])


def test_bad_arguments_are_refused(report, states):
    with pytest.raises(InvalidInput, match="model='icar' is not one of"):
        small_area_estimates(report, model="icar")
    with pytest.raises(InvalidInput, match="method='OLS' is not one of"):
        small_area_estimates(report, method="OLS")
    with pytest.raises(InvalidInput, match="alpha"):
        small_area_estimates(report, alpha=1.5)
    with pytest.raises(InvalidInput, match="client_variance='exact' is not 'bound'"):
        small_area_estimates(report, client_variance="exact")
    with pytest.raises(InvalidInput, match="client_variance=-1.0 is negative"):
        small_area_estimates(report, client_variance=-1.0)
    with pytest.raises(InvalidInput, match="weights=None is needed by the spatial model"):
        small_area_estimates(report, model="sfh")
    with pytest.raises(InvalidInput, match="shape"):
        small_area_estimates(report, weights=np.eye(3))
    with pytest.raises(InvalidInput, match="is not spatial weights"):
        small_area_estimates(report, weights="queen")
    with pytest.raises(InvalidInput, match="is not a RegionalReport or a report frame"):
        small_area_estimates([1.0, 2.0])
    with pytest.raises(InvalidInput, match="no column"):
        small_area_estimates(pd.DataFrame({"value": [1.0]}))
    with pytest.raises(InvalidInput, match="no metric 'speed'"):
        small_area_estimates(report, "speed")


def test_a_report_of_another_partition_is_refused(report, states):
    other = Partition.from_geodataframe(states.regions.iloc[:-1].reset_index(), "region_id",
                                        name="fewer")
    with pytest.raises(PartitionMismatch, match="partition version"):
        small_area_estimates(report, weights=other)


def test_too_few_published_regions_and_all_suppressed_are_refused(report):
    frame = report["loss"].copy()
    few = frame.copy()
    few.loc[few.index[2:], "suppressed"] = True
    with pytest.raises(InvalidInput, match="published region"):
        small_area_estimates(few, **PUBLIC)
    frame["suppressed"] = True
    with pytest.raises(InvalidInput, match="every region of the frame is suppressed"):
        small_area_estimates(frame)
    broken = report["loss"].copy()
    broken.loc[broken.index[~broken.suppressed][0], "noise_std"] = np.nan
    with pytest.raises(InvalidInput, match="'noise_std' has no finite number"):
        small_area_estimates(broken)


def test_weights_from_a_matrix_are_row_standardised(states):
    W = spatial_weights(states.adjacency(), states.region_ids)
    rows = np.asarray(W.sum(axis=1)).ravel()
    assert np.allclose(rows[rows > 0], 1.0)
    assert np.allclose(spatial_weights(states, states.region_ids).toarray(), W.toarray())
    with pytest.raises(InvalidInput, match="negative"):
        spatial_weights(-np.eye(48), states.region_ids)


def test_libpysal_weights_in_and_out(report, states):
    pytest.importorskip("libpysal")
    w = to_libpysal(states)
    assert sorted(w.neighbors["VT"]) == ["MA", "NH", "NY"]
    a = small_area_estimates(report, model="sfh", weights=states, **PUBLIC)
    b = small_area_estimates(report, model="sfh", weights=w, **PUBLIC)
    pd.testing.assert_frame_equal(a.frame.drop(columns="geometry"),
                                  b.frame.drop(columns="geometry"))


def test_without_libpysal_only_the_export_refuses(report, states, monkeypatch):
    monkeypatch.setitem(sys.modules, "libpysal", None)
    monkeypatch.setitem(sys.modules, "libpysal.weights", None)
    with pytest.raises(InvalidInput, match="libpysal is not installed"):
        to_libpysal(states)
    assert small_area_estimates(report, model="sfh", weights=states, **PUBLIC).rho_se > 0


def test_summary_and_html_name_the_model(report, states):
    smooth = small_area_estimates(report, model="sfh", weights=states, **PUBLIC)
    text = smooth.summary()
    assert "spatial Fay-Herriot" in text
    assert "rho" in text
    assert "spatial term: LR" in text
    assert "<table" in smooth._repr_html_()
    assert smooth.spatial_test is not None
    assert 0 <= smooth.spatial_test.p_value <= 1
