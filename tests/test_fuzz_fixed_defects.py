"""Regressions of what the fuzz suite found: one plain example per defect it fixed.

Each case was an obscure error (a TypeError/ValueError/KeyError from numpy,
pandas, matplotlib or pyproj), a hang, a silently wrong result, a lenient
coercion (a bool or a string taken as a number) or a valid input refused; each
is now a :class:`~spatialdp.exceptions.SpatialDPError` naming the argument, or
the right result.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from spatialdp import federated as fed
from spatialdp import viz
from spatialdp._validation import check_choice
from spatialdp.demo import run_demo
from spatialdp.exceptions import (
    CRSError,
    InvalidInput,
    InvalidSpec,
    PartitionMismatch,
    SpatialDPError,
)
from spatialdp.federated import device as dev
from spatialdp.privacy import PrivacyLedger, ReleaseTarget, Simulation
from spatialdp.simulation import positioning_predictions
from tests.test_fuzz_support import (
    HIST,
    LOSS,
    base_histogram,
    base_history,
    base_regional,
    base_release,
    boxes,
)


@pytest.fixture(autouse=True)
def _scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Run in a scratch folder (relative paths land there) and close the figures."""
    monkeypatch.chdir(tmp_path)
    yield
    plt.close("all")


def examples(**columns: Any) -> pd.DataFrame:
    base = {"client_id": ["a", "a", "b"], "loss": [0.5, 9.0, 1.0]}
    return pd.DataFrame({**base, **columns})


# --------------------------------------------------------------------------- device module


@pytest.mark.parametrize(("call", "error", "match"), [
    # obscure errors
    (lambda: fed.device_report(examples(), loss_spec=3), InvalidInput,
     "loss_spec=3 is a int, not a MetricSpec"),
    (lambda: fed.device_report(examples(), hist_spec=LOSS), InvalidInput,
     "hist_spec=.* is a MetricSpec, not a HistogramSpec"),
    (lambda: fed.device_report(examples(), partition="us"), InvalidInput,
     "partition='us' is a str, not a Partition"),
    (lambda: fed.device_report(examples(), calibration_buckets=2**70), InvalidInput,
     "calibration_buckets=1180591620717411303424 is above the limit"),
    (lambda: dev.clipped_mean_loss(examples(), LOSS, loss_column=[]), InvalidInput,
     r"loss_column=\[\] is a list, not a string"),
    (lambda: dev.error_histogram([0.5], [{}], HIST), InvalidInput, "hashable"),
    (lambda: dev.error_histogram([0.5], {"a": 1}, HIST), InvalidInput,
     "client_ids=.* is not a sequence of ids"),
    (lambda: dev.error_histogram([0.5], ["a"], None), InvalidInput, "spec=None"),
    (lambda: dev.coverage([0.5], [0.5], ["a"], 3), InvalidInput,
     "partition=3 is a int, not a Partition"),
    (lambda: dev.clipped_ratio(0.0, [1.0, 2.0]), InvalidInput, "across_rmse has shape"),
    (lambda: dev.track_errors(examples(true_lon=[0.5] * 3, true_lat=[0.5] * 3,
                                       pred_lon=[0.5] * 3, pred_lat=[0.5] * 3),
                              heading_column=[]), InvalidInput,
     r"heading_column=\[\] is a list"),
    (lambda: fed.device_report(examples(true_lon=[0.5] * 3, true_lat=[0.5] * 3,
                                        pred_lon=[0.5] * 3, pred_lat=[0.5] * 3,
                                        heading_deg=[0.0] * 3),
                               metric_crs=np.array([1.0, 2.0])), CRSError,
     "metric_crs=array.* is a ndarray, not a CRS"),
    (lambda: dev.track_errors(examples(true_lon=[0.5] * 3, true_lat=[0.5] * 3,
                                       pred_lon=[0.5] * 3, pred_lat=[0.5] * 3),
                              roads=[0]), InvalidInput, "not geometries"),
    (lambda: dev.track_errors(examples(true_lon=[0.5] * 3, true_lat=[0.5] * 3,
                                       pred_lon=[0.5] * 3, pred_lat=[0.5] * 3),
                              roads="abc"), InvalidInput, "roads is a string"),
    (lambda: fed.device_report(pd.concat([examples(), examples()[["loss"]]], axis=1)),
     InvalidInput, r"repeats the column names \['loss'\]"),
    (lambda: fed.track_ratio_spec(roads=np.array([1, 2])), InvalidInput,
     "roads=.* is a ndarray, not a bool"),
    # lenient coercions
    (lambda: fed.device_report(examples(), ratio_clip=True), InvalidInput,
     "ratio_clip=True is a bool"),
    (lambda: fed.device_report(examples(), ratio_clip="10"), InvalidInput,
     "ratio_clip='10' is a string"),
    (lambda: dev.clipped_mean_loss(examples(loss=["0.5", "9", "1"]), LOSS), InvalidInput,
     "'loss' is not numeric"),
    (lambda: dev.clipped_mean_loss(examples(loss=[True, False, True]), LOSS), InvalidInput,
     "'loss' holds bools"),
    (lambda: dev.error_histogram([True], ["a"], HIST), InvalidInput, "'errors' holds bools"),
    (lambda: fed.count_bucket_spec(("1", "10")), InvalidInput, "start at 1"),
    (lambda: fed.count_bucket_spec((1, 1.5)), InvalidInput, "start at 1"),
    (lambda: fed.track_ratio_spec(1.0, roads=1), InvalidInput, "roads=1 is a int, not a bool"),
    (lambda: fed.coverage_spec(2.5), InvalidInput, "max_cells=2.5 is not a whole number"),
])
def test_device_refusals(call: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        call()


def test_calibration_specs_with_a_huge_count_is_refused_at_once() -> None:
    """Regression (hang): calibration_specs(2**70) built specs one by one for ever."""
    start = time.perf_counter()
    with pytest.raises(InvalidInput, match="n_buckets=1180591620717411303424 is above"):
        fed.calibration_specs(2**70)
    assert time.perf_counter() - start < 1.0


def test_whole_floats_and_bool_outcomes_are_accepted() -> None:
    """Regression (valid inputs refused): 5.0 buckets, True/False outcomes."""
    assert len(fed.calibration_specs(5.0)) == 5
    assert fed.coverage_spec(np.int64(4)).clip_high == 4.0
    cal = dev.calibration_by_bucket([0.9, 0.1], [True, False], ["a", "a"], n_buckets=2.0)
    assert cal.loc["a", "cal_present_0"] == 1


# --------------------------------------------------------------------------- specs and helpers


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda: fed.MetricSpec("x", True, 2.0), InvalidSpec, "clip_low=True is not a number"),
    (lambda: fed.MetricSpec("x", "0", 2.0), InvalidSpec, "clip_low='0' is not a number"),
    (lambda: fed.MetricSpec("a;b", 0, 1), InvalidSpec, "has ';', '='"),
    (lambda: fed.MetricSpec("a=b", 0, 1), InvalidSpec, "has ';', '='"),
    (lambda: fed.MetricSpec("x", 0, 1, version=2), InvalidSpec, "version=2 must be"),
    (lambda: fed.HistogramSpec("h", 3), InvalidSpec, "edges=3 is not a sequence"),
    (lambda: fed.HistogramSpec("h", "12"), InvalidSpec, "edges='12' is not a sequence"),
    (lambda: fed.HistogramSpec("h", (True,)), InvalidSpec, "edge=True is not a number"),
    (lambda: fed.HistogramSpec("h", (1.0,), mass_cap="1"), InvalidSpec, "mass_cap='1'"),
    (lambda: fed.MetricRegistry(3), InvalidSpec, "specs=3 is not a sequence"),
    (lambda: fed.MetricRegistry([LOSS])[["loss"]], InvalidSpec, "no metric named"),
    (lambda: LOSS.clip("a"), InvalidInput, "values='a' is a string"),
    (lambda: HIST.bucket_of([math.nan]), InvalidInput, "NaN or infinite"),
    (lambda: fed.calibrate_clip([True, False]), InvalidInput, "held_out has dtype bool"),
    (lambda: fed.calibrate_clip([1.0, 2.0], "99"), InvalidInput, "percentile='99' is a string"),
    (lambda: fed.calibrate_clip([1.0, 2.0], True), InvalidInput, "percentile=True is a bool"),
    (lambda: fed.calibrate_clip([1.0, 2.0], low=True), InvalidInput, "low=True is a bool"),
    (lambda: fed.clip_tradeoff([1.0], epsilon=1.0, cohort=5, percentiles=[]), InvalidInput,
     r"percentiles=\[\] is empty"),
    (lambda: fed.clip_tradeoff([1.0], epsilon="1", cohort=5), InvalidInput,
     "epsilon='1' is a string"),
    (lambda: fed.clip_tradeoff([1.0], epsilon=1.0, cohort=True), InvalidInput,
     "cohort=True is a bool"),
    (lambda: fed.min_cohort_for("0.1", LOSS, 1.0), InvalidInput,
     "target_error_bar='0.1' is a string"),
    (lambda: fed.min_cohort_for(0.1, None, 1.0), InvalidInput,
     "spec=None is a NoneType, not a MetricSpec or HistogramSpec"),
    (lambda: fed.min_cohort_for(0.1, LOSS, 1e7), InvalidInput,
     r"epsilon=10000000.0 must be a positive number \(at most 1e\+06\)"),
    (lambda: fed.min_cohort_for(1e-300, fed.HistogramSpec("h", (1.0,), mass_cap=1e300), 1e-3),
     InvalidInput, "needs a cohort above 1e\\+15"),  # was OverflowError from math.ceil(inf)
])
def test_spec_and_helper_refusals(call: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        call()


def test_check_choice_never_compares_arrays() -> None:
    """Regression: an array compared with the choices raised numpy's ValueError."""
    with pytest.raises(InvalidInput, match="containment=array"):
        check_choice(np.array([1.0, 2.0]), "containment", ("center", "overlap"))


# --------------------------------------------------------------------------- incidents, monitor


@pytest.mark.parametrize(("call", "match"), [
    (lambda: fed.ratio_pinned_at_clip(base_regional()["ratio"], "10"),
     "clip='10' is a string"),
    (lambda: fed.ratio_pinned_at_clip(base_regional()["ratio"], 10.0, tolerance=2),
     "tolerance=2 is above the limit"),
    (lambda: fed.ratio_pinned_at_clip(3, 10.0), "frame=3 is a int, not a report frame"),
    (lambda: fed.ratio_pinned_at_clip(base_regional()["loss"].assign(value="x"), 10.0),
     "'value' column is not numeric"),
    (lambda: fed.suspiciously_good_region(base_regional()["loss"],
                                          lower_is_better=np.array([1, 2])),
     "lower_is_better=.* is a ndarray, not a bool"),
    (lambda: fed.persistently_empty_buckets(3), "releases=3 is not a sequence"),
    (lambda: fed.persistently_empty_buckets([base_histogram()], rounds="3"),
     "rounds='3' is a string"),
    (lambda: fed.persistently_empty_buckets([base_histogram()], min_share=math.nan),
     "min_share=nan is not finite"),
    (lambda: fed.stale_clip_bound(None, HIST, 10.0),
     "release=None is a NoneType, not a HistogramRelease"),
    (lambda: fed.stale_clip_bound(base_histogram(), HIST, 10.0, percentile=0),
     "percentile=0 is below the limit"),
    (lambda: fed.compare_releases(base_release(), base_release(), same_clients=1),
     "same_clients=1 is a int, not a bool"),
    (lambda: fed.compare_releases(base_release(), base_release(),
                                  same_clients=np.array([1, 2])),
     "same_clients=.* is a ndarray"),
    (lambda: fed.compare_releases(dataclasses.replace(base_release(), noise_scale=math.nan),
                                  base_release()), "noise_scale=nan is not finite"),
    (lambda: fed.drift(base_history(), window=1e308), r"window=1e\+308 is above the limit"),
    (lambda: fed.drift(pd.concat([base_history(), base_history().iloc[[0]]])),
     r"repeated \(region_id, round_index\) rows"),
    (lambda: fed.drift(base_history().assign(value="x")), "column 'value' is not numeric"),
    (lambda: fed.compare_reports(
        base_regional()["loss"].assign(suppressed=lambda f: f.suppressed.astype(str)),
        base_regional()["loss"]), "'suppressed' column is not True/False"),
])
def test_monitoring_refusals(call: Any, match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        call()


def test_compare_reports_refuses_unhashable_versions() -> None:
    """Regression: a list in the metric column raised pandas' TypeError (pd.unique)."""
    frame = base_regional()["loss"]
    odd = frame.copy()
    cells = odd["metric"].to_numpy(dtype=object).copy()
    cells[0] = ["loss@1"]
    odd["metric"] = cells
    with pytest.raises(PartitionMismatch, match="differ in metric"):
        fed.compare_reports(odd, frame)


def test_compare_reports_aligns_regions_by_id() -> None:
    """Regression (silently wrong): a frame in another row order was compared position-wise."""
    frame = base_regional()["loss"]
    same = fed.compare_reports(frame, frame, same_clients=True)
    shuffled = fed.compare_reports(frame, frame.iloc[::-1], same_clients=True)
    pd.testing.assert_frame_equal(same, shuffled)
    assert (shuffled.difference == 0).all()


def test_compare_releases_with_nan_scale_no_longer_drops_it() -> None:
    """Regression (silently wrong): a NaN noise scale was dropped from the threshold."""
    with pytest.raises(InvalidInput, match="noise_scale"):
        fed.compare_releases(base_release(),
                             dataclasses.replace(base_release(), noise_scale=math.nan))


# --------------------------------------------------------------------------- simulation


def fleet(**changes: Any) -> pd.DataFrame:
    base = pd.DataFrame({"device_id": [1, 2], "lon": [-105.0, -104.0], "lat": [39.0, 40.0],
                         "heading_deg": [0.0, 90.0], "region_id": ["CO", "CO"]})
    return base.assign(**changes)


@pytest.mark.parametrize(("call", "match"), [
    (lambda: positioning_predictions(3), "fleet=3 is a int, not a"),
    (lambda: positioning_predictions(fleet().drop(columns="heading_deg")),
     r"no column\(s\) \['heading_deg'\]"),
    (lambda: positioning_predictions(fleet().iloc[:0]), "the fleet is empty"),
    (lambda: positioning_predictions(fleet(device_id=[1, 1])), "device_id has 1 repeated"),
    (lambda: positioning_predictions(fleet(), along_sd_m=-1), "along_sd_m=-1 is below"),
    (lambda: positioning_predictions(fleet(), along_sd_m=math.nan), "along_sd_m=nan"),
    (lambda: positioning_predictions(fleet(), across_sd_m="1"), "across_sd_m='1' is a string"),
    (lambda: positioning_predictions(fleet(), region_error_factor=3),
     "region_error_factor=3 is a int, not a mapping"),
    (lambda: positioning_predictions(fleet(), region_error_factor={"CO": "2"}),
     r"region_error_factor\['CO'\]='2' is a string"),
    (lambda: positioning_predictions(fleet(), sideways_drift={"CO": -1.0}),
     r"sideways_drift\['CO'\]=-1.0 is below"),
    (lambda: positioning_predictions(fleet(), examples_per_client=1e308),
     r"examples_per_client=1e\+308 is above the limit"),
    (lambda: positioning_predictions(fleet(lat=[39.0, 95.0])), "beyond \\+/-90"),
])
def test_simulation_refusals(call: Any, match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        call()


def test_simulation_results_stay_finite() -> None:
    """Regression (silently wrong): along_sd_m=nan gave NaN losses."""
    out = positioning_predictions(fleet(), along_sd_m=0.0, across_sd_m=0.0, rng=0)
    assert (out.loss == 0).all()
    assert np.isfinite(out[["pred_lon", "pred_lat"]].to_numpy()).all()


# --------------------------------------------------------------------------- viz


def report_frame() -> Any:
    return base_regional()["loss"]


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda: viz.plot_uncertainty_choropleth(report_frame(), ax=3), InvalidInput,
     "ax=3 is a int, not a matplotlib Axes"),
    (lambda: viz.plot_uncertainty_choropleth(report_frame(), cmap="nope"), InvalidInput,
     "cmap='nope' is not a matplotlib colour map"),
    (lambda: viz.plot_uncertainty_choropleth(report_frame(), legend=np.array([1, 2])),
     InvalidInput, "legend=.* is a ndarray, not a bool"),
    (lambda: viz.plot_uncertainty_choropleth(report_frame(), projection="nope"), CRSError,
     "projection='nope' is not a CRS pyproj knows"),
    (lambda: viz.plot_uncertainty_choropleth(report_frame(), projection=True), CRSError,
     "projection=True is not a CRS"),
    (lambda: viz.plot_uncertainty_choropleth(report_frame(), figsize=(1e6, 1)), InvalidInput,
     "figsize=1000000.0 is above the limit"),
    (lambda: viz.plot_uncertainty_choropleth(report_frame(), missing_kwds={"nope": 1}),
     InvalidInput, "missing_kwds=.* is refused by matplotlib"),
    (lambda: viz.plot_uncertainty_choropleth(report_frame(), vmin="0"), InvalidInput,
     "vmin='0' is a string"),
    (lambda: viz.plot_uncertainty_choropleth(report_frame(), column=[]), InvalidInput,
     r"column=\[\] is a list"),
    (lambda: viz.plot_uncertainty_choropleth(
        report_frame().assign(suppressed=lambda f: f.suppressed.astype(str))), InvalidInput,
     "'suppressed' column holds 'False', not True/False"),
    (lambda: viz.plot_uncertainty_choropleth(report_frame().assign(cohort="x"),
                                             annotate_cohort=True), InvalidInput,
     "'cohort' is not numeric"),
    (lambda: viz.plot_region_timeseries(base_history(), ncols=2**70), InvalidInput,
     "ncols=1180591620717411303424 is above the limit"),
    (lambda: viz.plot_region_timeseries(base_history(), panel_size=()), InvalidInput,
     r"panel_size=\(\) has 0 values, not 2"),
    (lambda: viz.plot_region_timeseries(base_history(), panel_size=(40, 40)), InvalidInput,
     "make a 120 x 40.8 inch figure"),
    (lambda: viz.plot_region_timeseries(base_history(), fig=3), InvalidInput,
     "fig=3 is a int, not a matplotlib Figure"),
    (lambda: viz.plot_region_timeseries(base_history(), regions=3), InvalidInput,
     "regions=3 is not a list of region ids"),
    (lambda: viz.plot_region_timeseries(base_history(), alert_rounds="x"), InvalidInput,
     "alert_rounds='x' holds text"),
    (lambda: viz.plot_region_timeseries(base_history(), alert_rounds=[math.inf]),
     InvalidInput, "not finite rounds"),
    (lambda: viz.plot_region_timeseries(base_history(), sharey="yes"), InvalidInput,
     "sharey='yes' is a str, not a bool"),
    (lambda: viz.cohort_label(["abc"]), InvalidInput, "'cohort' is not numeric"),
    (lambda: viz.cohort_label(1 + 1j), InvalidInput, "'cohort' is not numeric"),
    (lambda: viz.cohort_label([-5]), InvalidInput, "negative"),
    (lambda: viz.plot_clip_tradeoff(
        fed.clip_tradeoff(np.arange(1.0, 11.0), epsilon=1.0, cohort=10).assign(
            share_clipped=1e308)), InvalidInput, r"shares outside \[0, 1\]"),
    (lambda: viz.plot_clip_tradeoff(pd.DataFrame()), InvalidInput,
     "missing the required columns"),
    (lambda: viz.save_figure(3, "x.png"), InvalidInput, "figure=3 is a int, not a Figure"),
    (lambda: viz.save_figure(plt.figure(), None), InvalidInput, "path=None is not a file path"),
    (lambda: viz.save_figure(plt.figure(), "x.png", dpi=0), InvalidInput,
     "dpi=0 is below the limit"),
    (lambda: viz.save_figure(plt.figure(), "x.png", bbox_inches="loose"), InvalidInput,
     "bbox_inches='loose' is not 'tight' or None"),
    (lambda: viz.save_figure(plt.figure(), "x.png", bbox_inches=np.array([1.0, 2.0])),
     InvalidInput, "bbox_inches=array"),  # was numpy's ambiguous truth value
    (lambda: viz.save_figure(plt.figure(), "x.png", dpi=1), InvalidInput,
     "dpi=1 is below the limit >= 20"),  # was FreeType's RuntimeError (invalid ppem)
    (lambda: viz.explore_report(report_frame(), column=[]), InvalidInput,
     r"column=\[\] is a list"),
    (lambda: viz.explore_report(report_frame(), tiles=3), InvalidInput,
     "folium.Map refused the map options"),
])
def test_viz_refusals(call: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        call()


def test_save_figure_refuses_folders_and_unknown_formats(tmp_path: Path) -> None:
    fig, _ = plt.subplots(figsize=(1, 1))
    with pytest.raises(InvalidInput, match="is a folder"):
        viz.save_figure(fig, tmp_path)
    with pytest.raises(InvalidInput, match="matplotlib could not save"):
        viz.save_figure(fig, tmp_path / "map.unknown")
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


def test_cohort_labels_on_a_lonlat_map_do_not_warn() -> None:
    """Regression: GeoSeries.area on lon/lat warned (an error under -W error)."""
    ax = viz.plot_uncertainty_choropleth(report_frame(), projection=None, annotate_cohort=True)
    assert any(str(t.get_gid()).startswith("cohort:") for t in ax.texts)


def test_hand_edited_metadata_never_breaks_a_title() -> None:
    """Regression: attrs alpha='x' or epsilon=[...] raised from float() in the title."""
    frame = report_frame().copy()
    frame.attrs["spatialdp"] = {"alpha": "x", "epsilon": [1, 2], "min_cohort": "n"}
    ax = viz.plot_uncertainty_choropleth(frame, annotate_cohort=True)
    assert "error bars" not in ax.get_title(loc="left")
    history = base_history()
    history.attrs["spatialdp"] = {"alpha": None, "epsilon": {"loss": "x"}}
    assert viz.plot_region_timeseries(history).axes


# --------------------------------------------------------------------------- targets, demo


def test_round_health_refuses_unhashable_ids() -> None:
    """Regression: a list among the region ids raised pandas' TypeError."""
    regions = np.empty(2, dtype=object)
    regions[:] = [["a"], "b"]
    with pytest.raises(InvalidInput, match="plain values"):
        fed.round_health(["returned", "dropped"], regions, boxes(), epsilon=1.0,
                         target=Simulation(rng=0))


def test_targets_refuse_what_is_not_a_mechanism() -> None:
    with pytest.raises(InvalidInput, match="mechanism=None has no release/simulate samplers"):
        Simulation(rng=0).add_noise(None, np.zeros(2))


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"out": 3}, "out=3 is not a folder path"),
    ({"devices": "many"}, "devices='many' is a string"),
    ({"devices": 10}, "devices=10 is below the limit"),
    ({"rounds": "many"}, "rounds='many' is a string"),
    ({"rounds": 1}, "rounds=1 is below the limit"),
    ({"seed": -1}, "seed=-1"),
    ({"seed": 1.5}, "seed=1.5 is a float"),
    ({"epsilon": True}, "epsilon=True is a bool"),
])
def test_demo_refuses_bad_arguments_before_any_work(tmp_path: Path, kwargs: dict[str, Any],
                                                     match: str) -> None:
    """Regression: junk arguments failed with TypeError/ValueError after seconds of work."""
    args = {"out": tmp_path / "demo", **kwargs}
    start = time.perf_counter()
    with pytest.raises(SpatialDPError, match=match):
        run_demo(**args)
    assert time.perf_counter() - start < 2.0
    assert not (tmp_path / "demo").exists()  # nothing written for a refused run


def test_demo_refuses_a_file_as_its_folder(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.write_text("x")
    with pytest.raises(InvalidInput, match="is a file"):
        run_demo(target)


def test_transform_checks_the_directions_against_the_modulation_before_charging() -> None:
    """Found by the fuzz suite: 1 direction for a 2-direction modulation was charged."""
    from spatialdp.regression import Modulation, transform_clients

    rng = np.random.default_rng(0)
    ledger = PrivacyLedger(":memory:", epoch_budget=5.0, accounting="zcdp")
    with pytest.raises(InvalidInput, match="do not match the modulation's n_directions=2"):
        transform_clients(rng.normal(size=(50, 3)), rng.normal(size=50),
                          modulation=Modulation(alpha=0.0, lam=1.0, omega=3.0, n_directions=2,
                                                radius=1.0),
                          target=ReleaseTarget(ledger, 0, why="fuzz"),
                          directions=np.array([[1.0, 0.0, 0.0]]), rho=1.0)
    assert ledger.spent(0) == 0
