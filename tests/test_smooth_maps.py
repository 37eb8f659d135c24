"""Maps of small-area estimates: the smoothed choropleth and the raw-vs-smoothed figure."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pyproj
import pytest

from spatialdp.datasets import us_states_partition
from spatialdp.exceptions import InvalidInput
from spatialdp.federated import device_report, regional_report
from spatialdp.privacy.target import Simulation
from spatialdp.smooth import maps as smooth_maps
from spatialdp.smooth import plot_raw_vs_smoothed, small_area_estimates
from spatialdp.viz import plot_uncertainty_choropleth
from spatialdp.viz.maps import shared_colour_range
from tests._loss_report import LOSS, simulated_loss_report


@pytest.fixture(scope="module")
def states():
    return us_states_partition()


@pytest.fixture(scope="module")
def report(states):
    return simulated_loss_report(states)


@pytest.fixture(scope="module")
def smooth(report, states):
    return small_area_estimates(report, "loss", model="sfh", weights=states,
                                include_suppressed=True, client_variance=1 / 3)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_the_smoothed_frame_keeps_the_reports_labels_and_says_it_is_smoothed(report, smooth):
    meta = smooth.frame.attrs["spatialdp"]
    assert meta["accounting"] == "simulation"
    assert meta["epsilon"] == report["loss"].attrs["spatialdp"]["epsilon"]
    assert meta["smoothed"] == "spatial Fay-Herriot"
    assert "format" not in meta           # not a regional report file
    title = plot_uncertainty_choropleth(smooth.frame).get_title(loc="left")
    assert title.startswith("[SIMULATION] loss")
    assert "smoothed: spatial Fay-Herriot · post-processing, no ε charged" in title


def test_a_raw_reports_title_does_not_say_smoothed(report):
    title = plot_uncertainty_choropleth(report["loss"]).get_title(loc="left")
    assert "smoothed" not in title


def _legend_texts(ax) -> list[str]:
    return [t.get_text() for child in ax.get_children()
            if isinstance(child, matplotlib.legend.Legend) for t in child.get_texts()]


def test_modelled_regions_are_outlined_and_in_the_key(smooth):
    ax = plot_uncertainty_choropleth(smooth.frame)
    modelled = int((smooth.frame["label"] == "modelled").sum())
    assert modelled > 0
    outline = [c for c in ax.collections if c.get_gid() == "label:modelled"]
    assert len(outline) == 1
    assert len(outline[0].get_paths()) == modelled
    assert f"modelled: no published value ({modelled})" in _legend_texts(ax)


def test_no_outline_without_modelled_regions(report, states):
    plain = small_area_estimates(report, "loss", client_variance=1 / 3)
    ax = plot_uncertainty_choropleth(plain.frame)
    assert not [c for c in ax.collections if c.get_gid() == "label:modelled"]
    assert not any(t.startswith("modelled") for t in _legend_texts(ax))


def test_reliability_of_the_smoothed_map_comes_from_the_mse(smooth):
    ax = plot_uncertainty_choropleth(smooth.frame)
    drawn = sum(len(c.get_paths()) for c in ax.collections
                if str(c.get_gid()).startswith("reliability:"))
    assert drawn == int((~smooth.frame["suppressed"]).sum())
    cv = smooth.frame["rmse"] / smooth.frame["eblup"].abs()
    assert np.allclose(cv, smooth.frame["cv"], equal_nan=True)


def test_raw_vs_smoothed_shares_one_scale_and_one_equal_area_projection(
        report, smooth, monkeypatch):
    calls = []
    real = smooth_maps.plot_uncertainty_choropleth

    def spy(frame, column, **kwds):
        calls.append((column, kwds))
        return real(frame, column, **kwds)

    monkeypatch.setattr(smooth_maps, "plot_uncertainty_choropleth", spy)
    fig = plot_raw_vs_smoothed(report, smooth)
    assert [ax.get_gid() for ax in fig.axes if ax.get_gid()] == [
        "panel:raw", "panel:smoothed", "panel:rmse"]
    (raw_col, raw), (smooth_col, smoothed), (rmse_col, rmse) = calls
    assert (raw_col, smooth_col, rmse_col) == ("value", "value", "rmse")
    expected = shared_colour_range([report["loss"], smooth.frame], robust=False)
    assert (raw["vmin"], raw["vmax"]) == (smoothed["vmin"], smoothed["vmax"]) == expected
    assert raw["projection"] == smoothed["projection"] == rmse["projection"]
    assert pyproj.CRS(raw["projection"]).to_epsg() == 5070    # CONUS Albers, equal-area
    assert not any(ax.axison for ax in fig.axes if ax.get_gid())
    titles = {ax.get_gid(): ax.get_title(loc="left") for ax in fig.axes if ax.get_gid()}
    assert titles["panel:raw"].startswith("[SIMULATION] published loss\n9 of 48 regions "
                                          "suppressed")
    assert titles["panel:smoothed"].startswith(
        "[SIMULATION] smoothed loss (spatial Fay-Herriot (SAR)): no ε charged\n9 regions "
        "modelled")
    assert "post-processing of the published values, no ε charged" in fig.get_suptitle()
    assert titles["panel:rmse"].startswith("[SIMULATION] RMSE of the smoothed loss")


def test_the_shared_range_covers_both_maps_own_ranges(report, smooth):
    lo, hi = shared_colour_range([report["loss"], smooth.frame], robust=False)
    raw = report["loss"]["value"].dropna()
    est = smooth.frame["eblup"].dropna()
    assert lo == min(raw.min(), est.min())
    assert hi == max(raw.max(), est.max())


def test_raw_vs_smoothed_refuses_estimates_of_another_report(report, smooth, states):
    other = regional_report(device_report(pd.DataFrame({
        "client_id": np.arange(6000), "region_id": np.repeat(["CA", "TX", "NY"], 2000),
        "loss": 1.0}), loss_spec=LOSS, partition=states), states, [LOSS], epsilon=0.5,
        target=Simulation(rng=3), min_cohort=100)
    with pytest.raises(InvalidInput, match="was not smoothed from this report's values"):
        plot_raw_vs_smoothed(other, smooth)
    with pytest.raises(InvalidInput, match="is not a SmallAreaEstimates"):
        plot_raw_vs_smoothed(report, smooth.frame)
    with pytest.raises(InvalidInput, match="does not have the report's 3 regions"):
        plot_raw_vs_smoothed(report["loss"].iloc[:3], smooth)


def test_shared_colour_range_refuses_frames_without_the_column(smooth):
    with pytest.raises(InvalidInput, match=r"has no \['rmse'\] column"):
        shared_colour_range([smooth.frame, pd.DataFrame({"suppressed": [False]})], "rmse")
    with pytest.raises(InvalidInput, match="is not a non-empty sequence of frames"):
        shared_colour_range([])
