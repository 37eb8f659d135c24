"""Valid inputs are accepted: numpy scalars, integral floats, Fractions, pandas Series.

The review found valid inputs refused (a cohort floor of ``50.0``, ``np.int64``
bucket counts, Series of statuses). Every public callable that takes a number
must take it as a Python or numpy scalar, a whole number as an integral float,
and a sequence as a pandas Series, and give the same result as with plain
Python values.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from spatialdp import federated as fed
from spatialdp import viz
from spatialdp.federated import device as dev
from spatialdp.privacy import PrivacyLedger, ReleaseTarget, Simulation
from spatialdp.simulation import positioning_predictions
from tests.test_fuzz_support import (
    HIST,
    LOSS,
    RATIO,
    base_coverage,
    base_histogram,
    base_history,
    base_regional,
    base_release,
    base_reports,
    boxes,
    run,
)

EPSILONS = [0.5, np.float32(0.5), np.float64(0.5), Fraction(1, 2), Decimal("0.5")]
WHOLE_EPSILONS = [1, np.int64(1), np.int32(1), 1.0, np.float32(1.0)]
FLOORS = [50, np.int64(50), np.int32(50), 50.0, np.float64(50.0), np.float32(50.0)]
ALPHAS = [0.05, np.float32(0.05), np.float64(0.05), Fraction(1, 20), Decimal("0.05")]


def accepted(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``fn``; it must return (no refusal, no other exception)."""
    result, refusal = run_quiet(fn, *args, **kwargs)
    assert refusal is None, f"valid input refused: {refusal}"
    return result


def run_quiet(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    from tests.test_fuzz_support import Call

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", fed.UninformativeReleaseWarning)
        return run(Call(getattr(fn, "__name__", "call"), fn, args, kwargs))


# --------------------------------------------------------------------------- releases


@pytest.mark.parametrize("epsilon", EPSILONS + WHOLE_EPSILONS)
@pytest.mark.parametrize("floor", FLOORS)
def test_releases_take_numpy_and_integral_scalars(epsilon: Any, floor: Any) -> None:
    reports = base_reports()
    rel = accepted(fed.aggregate_metric, reports, LOSS, epsilon=epsilon, min_cohort=floor,
                   alpha=np.float32(0.05), target=Simulation(rng=0))
    assert rel.epsilon == float(epsilon)
    assert type(rel.epsilon) is float
    hist = accepted(fed.aggregate_histogram, reports, HIST, epsilon=epsilon, min_cohort=floor,
                    target=Simulation(rng=0))
    assert hist.cohort == 130
    report = accepted(fed.regional_report, reports, boxes(), [LOSS, HIST], epsilon=epsilon,
                      min_cohort=floor, alpha=np.float64(0.1), target=Simulation(rng=0))
    assert report.min_cohort == 50
    assert type(report.min_cohort) is int


@pytest.mark.parametrize("alpha", ALPHAS)
def test_alphas_of_every_numeric_type(alpha: Any) -> None:
    rel = accepted(fed.aggregate_metric, base_reports(), LOSS, epsilon=1.0, alpha=alpha,
                   target=Simulation(rng=0))
    assert rel.alpha == pytest.approx(0.05)
    assert accepted(rel.conf_int, alpha)[0] < rel.value
    assert accepted(base_histogram().conf_int, alpha)[0].shape == (3,)
    assert len(accepted(base_regional().conf_int, "loss", alpha)) == 3


def test_per_metric_epsilons_take_numpy_scalars() -> None:
    report = accepted(fed.regional_report, base_reports(), boxes(), [LOSS, RATIO],
                      epsilon={"loss": np.float32(0.25), "ratio": np.int64(1)},
                      target=Simulation(rng=0), min_cohort=np.int64(10))
    assert report.epsilon == {"loss": 0.25, "ratio": 1.0}


def test_release_with_a_ledger_takes_numpy_scalars() -> None:
    ledger = PrivacyLedger(":memory:", epoch_budget=np.float32(10.0))
    target = ReleaseTarget(ledger, epoch=np.int64(0), round_index=3.0)
    accepted(fed.aggregate_metric, base_reports(), LOSS, epsilon=np.float32(0.5),
             target=target, min_cohort=np.float64(50.0))
    assert ledger.spent(0) == pytest.approx(0.5)
    assert target.round_index == 3


@pytest.mark.parametrize("granularity", [5, np.int64(5), 5.0, np.float32(5.0)])
def test_round_health_takes_series_and_whole_floats(granularity: Any) -> None:
    status = pd.Series(["returned"] * 40 + ["dropped"] * 10)
    region = pd.Series(["a"] * 25 + ["b"] * 25)
    health = accepted(fed.round_health, status, region, boxes(), epsilon=np.float32(1.0),
                      granularity=granularity, alpha=np.float64(0.05), target=Simulation(rng=0))
    assert health.granularity == 5
    assert (health.table[["returned", "dropped"]] % 5 == 0).all().all()


def test_release_coverage_takes_numpy_scalars() -> None:
    out = accepted(fed.release_coverage, base_coverage(), boxes(), epsilon=np.float32(1.0),
                   alpha=np.float64(0.1), target=Simulation(rng=0))
    assert out.epsilon == 1.0


# --------------------------------------------------------------------------- specs and device


def test_specs_take_numpy_scalars_and_arrays() -> None:
    spec = accepted(fed.MetricSpec, "x", np.float32(0.0), np.int64(2))
    assert (spec.clip_low, spec.clip_high) == (0.0, 2.0)
    hist = accepted(fed.HistogramSpec, "h", np.array([1.0, 2.0]), mass_cap=np.float32(1.0))
    assert hist.edges == (1.0, 2.0)
    assert accepted(fed.HistogramSpec, "h", [Fraction(1, 2), Decimal("1.5")]).edges == (0.5, 1.5)
    assert len(accepted(fed.calibration_specs, 5.0)) == 5
    assert len(accepted(fed.calibration_specs, np.int64(3))) == 3
    assert accepted(fed.coverage_spec, np.int64(5)).clip_high == 5.0
    assert accepted(fed.coverage_spec, 5.0).clip_high == 5.0
    assert accepted(fed.track_ratio_spec, np.float64(10), roads=np.True_).present
    assert accepted(fed.count_bucket_spec, np.array([1, 10])).clip_high == 1.0
    assert accepted(fed.count_bucket_spec, [1.0, 10.0]).clip_high == 1.0
    assert accepted(LOSS.clip, pd.Series([-1.0, 3.0])).tolist() == [0.0, 2.5]
    assert accepted(HIST.bucket_of, np.float32(1.5)) == 1


def test_device_report_takes_numpy_scalars_and_nullable_columns() -> None:
    examples = pd.DataFrame({
        "client_id": [1, 1, 2], "loss": pd.array([0.5, 9.0, 1.0], dtype="Float64"),
        "error": [0.2, 3.0, 0.7], "p_pred": [0.2, 0.9, 0.5],
        "outcome": [False, True, True]})  # a boolean outcome is a 0/1 outcome
    report = accepted(fed.device_report, examples, loss_spec=LOSS, hist_spec=HIST,
                      ratio_clip=np.float32(10.0), max_cells=5.0,
                      calibration_buckets=np.int64(3), count_edges=np.array([1, 10]),
                      max_road_distance=np.int64(50))
    assert report.loc[1, "loss"] == pytest.approx(1.5)
    assert "cal_gap_2" in report.columns


def test_device_functions_take_series() -> None:
    ids = pd.Series(["a", "a", "b"])
    hist, clients = accepted(dev.error_histogram, pd.Series([0.5, 3.0, 1.5]), ids, HIST)
    assert hist.shape == (2, 3)
    assert list(clients) == ["a", "b"]
    cal = accepted(dev.calibration_by_bucket, pd.Series([0.9, 0.1, 0.5]),
                   pd.Series([True, False, True]), ids, n_buckets=np.int64(2))
    assert cal.shape == (2, 8)
    assert accepted(dev.sample_count_bucket, ids).to_dict() == {"a": 0, "b": 0}
    cov = accepted(dev.coverage, pd.Series([0.5, 1.5, 2.5]), pd.Series([0.5] * 3), ids, boxes(),
                   max_cells=2.0)
    assert cov.cells_per_client.tolist() == [2, 1]
    assert accepted(dev.clipped_ratio, pd.Series([1.0]), pd.Series([2.0]),
                    np.float32(10)).tolist() == [0.5]


# --------------------------------------------------------------------------- helpers


def test_helpers_take_series_and_numpy_scalars() -> None:
    held_out = pd.Series(np.arange(1.0, 101.0))
    assert accepted(fed.calibrate_clip, held_out, np.float32(90), low=np.int64(0)) > 80
    table = accepted(fed.clip_tradeoff, held_out, epsilon=np.float32(1.0),
                     cohort=np.int64(500), percentiles=pd.Series([50.0, 99.0]),
                     alpha=np.float64(0.05), low=0.0)
    assert len(table) == 2
    assert accepted(fed.clip_tradeoff, held_out, epsilon=1, cohort=500.0).shape[0] == 5
    n = accepted(fed.min_cohort_for, np.float32(0.05), LOSS, np.float32(1.0),
                 alpha=np.float32(0.05))
    assert n == accepted(fed.min_cohort_for, 0.05, LOSS, 1.0)


def test_monitoring_takes_numpy_scalars() -> None:
    rel = base_release()
    cmp = accepted(fed.compare_releases, rel, rel, alpha=np.float32(0.01),
                   sampling_sd=np.float64(0.5), same_clients=np.False_)
    assert not cmp.fired
    frame = base_regional()["loss"]
    accepted(fed.compare_reports, frame, frame, alpha=np.float64(0.01), same_clients=np.True_)
    for window in (4, np.int64(4), 4.0):
        out = accepted(fed.drift, base_history(), window=window, alpha=np.float32(0.01))
        assert (out.rounds <= 4).all()


def test_incident_detectors_take_numpy_scalars() -> None:
    frame = base_regional()["ratio"]
    assert isinstance(accepted(fed.ratio_pinned_at_clip, frame, np.float32(10.0),
                               tolerance=np.float64(0.1)), list)
    assert isinstance(accepted(fed.suspiciously_good_region, frame, lower_is_better=np.True_),
                      list)
    hist = base_histogram()
    assert isinstance(accepted(fed.persistently_empty_buckets, (hist, hist, hist),
                               rounds=3.0, min_share=np.float32(0.01)), list)
    assert isinstance(accepted(fed.stale_clip_bound, hist, HIST, np.int64(10),
                               percentile=np.float32(99), factor=np.float64(0.5)), list)


def test_simulation_takes_numpy_scalars_and_plain_frames() -> None:
    fleet = pd.DataFrame({"device_id": np.arange(4), "lon": [-105.0, -104, -103, -102],
                          "lat": [39.0, 40, 41, 42], "heading_deg": [0.0, 90, 180, 270],
                          "region_id": ["CO", "CO", "WY", "WY"]})
    out = accepted(positioning_predictions, fleet, examples_per_client=np.int64(2),
                   along_sd_m=np.float32(1.0), across_sd_m=2, rng=np.int64(3),
                   region_error_factor={"CO": np.float32(2.0)}, sideways_drift={"WY": 3})
    assert len(out) == 8
    assert len(accepted(positioning_predictions, fleet, examples_per_client=2.0)) == 8


# --------------------------------------------------------------------------- viz


def test_maps_take_numpy_scalars() -> None:
    frame = base_regional()["loss"]
    ax = accepted(viz.plot_uncertainty_choropleth, frame, vmin=np.float32(0.0),
                  vmax=np.int64(2), figsize=np.array([4.0, 3.0]), legend=np.True_,
                  annotate_cohort=np.True_, robust=np.False_, projection=None)
    assert ax.get_title(loc="left")
    fig = accepted(viz.plot_region_timeseries, base_history(), ncols=np.int64(2),
                   panel_size=[2, 1.5], alert_rounds=np.array([1, 2]))
    assert len(fig.axes) == 3  # regions a, b and c
    assert len(accepted(viz.plot_region_timeseries, base_history(), ncols=2.0).axes) == 3
    assert accepted(viz.cohort_label, pd.Series([812, None, 990], dtype="Int64")) == "n=812–990"
    assert accepted(viz.cohort_label, np.array([5, 5])) == "n=5"
    plt.close("all")


def test_save_figure_takes_numpy_dpi(tmp_path: Any) -> None:
    fig, _ = plt.subplots(figsize=(2, 2))
    out = accepted(viz.save_figure, fig, tmp_path / "x.png", dpi=np.int64(40))
    assert out.exists()
    plt.close("all")
