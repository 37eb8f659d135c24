"""Tests of spatialdp.viz: the uncertainty choropleth, the regional time series, explore."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import geopandas as gpd
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import shapely
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection, PolyCollection
from matplotlib.patches import PathPatch

from spatialdp.datasets import us_states_partition
from spatialdp.exceptions import InvalidInput, PartitionMismatch
from spatialdp.viz.maps import explore_report, plot_uncertainty_choropleth, save_figure
from spatialdp.viz.timeseries import plot_region_timeseries

SENSITIVITY = 2.5  # a loss clipped to [0, 2.5]
EPSILON = 1.0
ALPHA = 0.05
FLOOR = 10
SUPPRESSED = ("WY", "VT", "ND")  # cohorts below the floor
OUTLIER = "NV"


def _reliability(cv: np.ndarray) -> pd.Categorical:
    labels = np.where(cv < 0.12, "high", np.where(cv <= 0.40, "medium", "low"))
    return pd.Categorical(labels, categories=["high", "medium", "low", "suppressed"],
                          ordered=True)


def make_report(seed: int = 3, round_: int = 12) -> gpd.GeoDataFrame:
    """A synthetic regional report on the 48 states, following the report schema.

    Cohorts are log-normal; the noise is Laplace with scale sensitivity / (eps n),
    so small states come out medium or low reliability; three states fall below
    the floor and are suppressed; Nevada is an outlier (a regression).
    """
    part = us_states_partition()
    ids = part.region_ids
    rng = np.random.default_rng(seed)
    n = len(ids)
    cohort = np.round(np.exp(rng.normal(5.6, 1.3, n))).astype(np.int64) + 25
    # cv ~ 8.4 / n for a loss near 0.42: low below ~21, medium below ~70.
    small = {"MT": 14, "SD": 16, "ID": 18, "NE": 17, "NH": 40, "ME": 31, "DE": 60,
             "RI": 45, "WV": 35, "NM": 50, "OR": 55}
    for rid, c in small.items():
        cohort[ids.get_loc(rid)] = c
    for rid, c in zip(SUPPRESSED, (4, 6, 8), strict=True):
        cohort[ids.get_loc(rid)] = c
    true = 0.42 + 0.05 * rng.standard_normal(n)
    true[ids.get_loc(OUTLIER)] = 1.35
    scale = SENSITIVITY / (EPSILON * cohort)
    value = true + rng.laplace(0.0, scale)
    error_bar = scale * math.log(1 / ALPHA)
    cv = math.sqrt(2) * scale / np.abs(value)
    table = pd.DataFrame(
        {"value": value, "error_bar": error_bar, "ci_low": value - error_bar,
         "ci_high": value + error_bar, "cohort": cohort, "cv": cv,
         "reliability": _reliability(cv), "suppressed": cohort < FLOOR},
        index=ids,
    )
    supp = table.suppressed.to_numpy()
    table.loc[supp, ["value", "error_bar", "ci_low", "ci_high", "cv"]] = np.nan
    table.loc[supp, "reliability"] = "suppressed"
    report = part.join(table)
    report.attrs["spatialdp"] = {"metric": "loss", "alpha": ALPHA, "epsilon": EPSILON,
                                 "partition_version": part.version, "round_index": round_,
                                 "min_cohort": FLOOR}
    return report


def make_history(regions: tuple[str, ...] = ("CA", "TX", "NV", "WY", "VT", "MT"),
                 rounds: int = 24, seed: int = 5) -> pd.DataFrame:
    """A long history: a few regions over ``rounds`` rounds, with suppressed rounds."""
    rng = np.random.default_rng(seed)
    base = {"CA": 5200, "TX": 3100, "NV": 700, "WY": 11, "VT": 12, "MT": 40}
    rows = []
    for rid in regions:
        for r in range(1, rounds + 1):
            cohort = max(1, int(base.get(rid, 300) * (1 + 0.25 * math.sin(r / 3))
                                + rng.normal(0, 3)))
            suppressed = cohort < FLOOR
            scale = SENSITIVITY / (EPSILON * cohort)
            level = 0.42 + (0.25 if rid == "NV" and r >= 16 else 0.0)
            value = level + rng.laplace(0, scale)
            eb = scale * math.log(1 / ALPHA)
            rows.append({"region_id": rid, "round_index": r,
                         "value": np.nan if suppressed else value,
                         "error_bar": np.nan if suppressed else eb,
                         "cohort": cohort, "suppressed": suppressed})
    history = pd.DataFrame(rows)
    history.attrs["spatialdp"] = {"metric": "loss", "alpha": ALPHA, "epsilon": EPSILON}
    return history


@pytest.fixture(scope="module")
def report() -> gpd.GeoDataFrame:
    return make_report()


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _hatched(ax: Axes, hatch: str = "///") -> list[PathPatch]:
    return [p for p in ax.patches if isinstance(p, PathPatch) and p.get_hatch() == hatch]


def _by_gid(ax: Axes, gid: str) -> PathCollection:
    (found,) = [c for c in ax.collections if c.get_gid() == gid]
    assert isinstance(found, PathCollection)
    return found


def _texts(ax: Axes) -> list[str]:
    return [t.get_text() for t in ax.findobj(matplotlib.text.Text)]


# ------------------------------------------------------------------ the choropleth
def test_suppressed_regions_are_hatched_one_patch_each(report: gpd.GeoDataFrame) -> None:
    ax = plot_uncertainty_choropleth(report)
    hatched = _hatched(ax)
    assert len(hatched) == int(report.suppressed.sum()) == len(SUPPRESSED)
    assert sorted(p.get_gid() for p in hatched) == sorted(f"suppressed:{r}" for r in SUPPRESSED)
    # Grey, not a value colour, and named in the legend with the count.
    for patch in hatched:
        r, g, b, _ = patch.get_facecolor()
        assert abs(r - g) < 1e-6
        assert abs(g - b) < 1e-6
    legend = ax.get_legend()
    assert legend is not None
    texts = [t.get_text() for t in legend.get_texts()]
    entry = texts.index(f"suppressed ({len(SUPPRESSED)})")
    assert legend.legend_handles[entry].get_hatch() == "///"


def test_reliability_classes_fade_and_the_low_class_is_dotted(
    report: gpd.GeoDataFrame,
) -> None:
    ax = plot_uncertainty_choropleth(report)
    published = report[~report.suppressed]
    alphas = {}
    for name in ("high", "medium", "low"):
        coll = _by_gid(ax, f"reliability:{name}")
        assert len(coll.get_paths()) == int((published.reliability == name).sum()) > 0
        faces = coll.get_facecolors()
        assert np.allclose(faces[:, 3], faces[0, 3])
        alphas[name] = faces[0, 3]
    assert alphas["high"] == 1.0 > alphas["medium"] > alphas["low"] > 0
    assert _by_gid(ax, "reliability:low").get_hatch() == "...."
    assert _by_gid(ax, "reliability:high").get_hatch() is None
    # Every region is drawn exactly once.
    drawn = sum(len(c.get_paths()) for c in ax.collections) + len(_hatched(ax))
    assert drawn == len(report)


def test_value_colours_follow_the_values(report: gpd.GeoDataFrame) -> None:
    ax = plot_uncertainty_choropleth(report, cmap="viridis", scheme=None)  # the ramp
    high = _by_gid(ax, "reliability:high")
    ids = report.index[(report.reliability == "high") & ~report.suppressed]
    values = report.loc[ids, "value"].to_numpy()
    faces = high.get_facecolors()
    top = plt.get_cmap("viridis")(1.0)
    # The outlier gets the end colour (as the hex colour the folium map shares: 8 bits).
    assert np.allclose(faces[np.argmax(values)], top, atol=1 / 255)
    assert ids[np.argmax(values)] == OUTLIER
    # ... beyond the robust range, so it is marked, not silently clamped.
    assert len(_by_gid(ax, "out-of-range:above").get_paths()) == 1


def test_two_way_key_and_title(report: gpd.GeoDataFrame) -> None:
    ax = plot_uncertainty_choropleth(report, scheme=None)  # the continuous ramp's key
    title = ax.get_title(loc="left")
    for part in ("loss", "round 12", "ε = 1", "95% error bars",
                 f"{len(SUPPRESSED)} of "):
        assert part in title
    (key,) = [a for a in ax.child_axes if a.get_gid() == "legend:value-reliability"]
    rows = [t.get_text() for t in key.get_yticklabels()]
    assert rows == ["high  (CV < 0.12)", "medium  (0.12–0.40)", "low  (CV > 0.40)"]
    assert "faded by reliability" in key.get_title(loc="left")
    (image,) = key.get_images()
    assert np.allclose(image.get_array()[:, 0, 3], [1.0, 0.5, 0.22])
    no_legend = plot_uncertainty_choropleth(report, legend=False, scheme=None)
    assert no_legend.get_legend() is None
    assert not no_legend.child_axes


def test_projection_auto_conus_albers_or_as_given(report: gpd.GeoDataFrame) -> None:
    albers = plot_uncertainty_choropleth(report)
    assert not albers.axison  # metres on the axes mean nothing to a reader
    x0, x1 = albers.get_xlim()
    assert x1 - x0 > 4e6  # CONUS is ~4,600 km wide in EPSG:5070
    lonlat = plot_uncertainty_choropleth(report, projection=None)
    assert not lonlat.axison  # no lon/lat axes on any map
    assert -130 < lonlat.get_xlim()[0] < -120
    mercator = plot_uncertainty_choropleth(report, projection="EPSG:3857")
    assert mercator.get_xlim()[0] < -1.3e7
    # Outside the contiguous US, "auto" is an equal-area projection centred on the layer.
    moved = report.copy()
    shift = np.array([200.0, 0.0])
    moved["geometry"] = shapely.transform(report.geometry.values, lambda xy: xy + shift)
    moved = moved.set_crs(4326, allow_override=True)
    elsewhere = plot_uncertainty_choropleth(moved)
    assert not elsewhere.axison
    (label,) = [t for t in elsewhere.texts if t.get_gid() == "crs"]
    assert label.get_text().startswith("custom CRS (Lambert azimuthal equal-area centred on")
    assert abs(sum(elsewhere.get_xlim())) < 1e6  # centred on the layer


def test_robust_range_and_extension_triangles(report: gpd.GeoDataFrame) -> None:
    plain = plot_uncertainty_choropleth(report, robust=False)
    (key,) = plain.child_axes
    assert not [p for p in key.patches if type(p).__name__ == "Polygon"]
    robust = plot_uncertainty_choropleth(report, robust=True)
    (key,) = robust.child_axes
    lo, hi = key.get_xlim()
    published = report.value[~report.suppressed]
    assert hi < published.max()
    assert lo > published.min()
    assert len([p for p in key.patches if type(p).__name__ == "Polygon"]) == 6  # 2 per row


def test_cohort_labels_do_not_overlap(report: gpd.GeoDataFrame) -> None:
    ax = plot_uncertainty_choropleth(report, annotate_cohort=True)
    labels = [t for t in ax.texts if str(t.get_gid()).startswith("cohort:")]
    by_region = {t.get_gid().split(":", 1)[1]: t.get_text() for t in labels}
    assert by_region["TX"] == f"n={report.cohort['TX']:,}"
    assert by_region["IA"] == "n=20,356"  # thousands separator
    # A suppressed region says why, but never its exact cohort.
    assert by_region["WY"] == f"n<{FLOOR}"
    assert len(labels) >= 35
    renderer = ax.figure.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in labels]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not a.overlaps(b)
    # Without the floor in the metadata, suppressed regions get no label at all.
    bare = report.copy()
    bare.attrs["spatialdp"] = {k: v for k, v in report.attrs["spatialdp"].items()
                               if k != "min_cohort"}
    ax = plot_uncertainty_choropleth(bare, annotate_cohort=True)
    gids = {t.get_gid() for t in ax.texts}
    assert "cohort:TX" in gids
    assert not {f"cohort:{r}" for r in SUPPRESSED} & gids


def test_title_shows_the_charged_total_of_a_per_metric_epsilon_dict(
        report: gpd.GeoDataFrame) -> None:
    # One meaning of epsilon: the title says what the release was charged, then the split.
    multi = report.copy()
    multi.attrs["spatialdp"] = {**report.attrs["spatialdp"],
                                "epsilon": {"loss": 0.25, "err": 0.5}}
    assert "ε = 0.75 (loss 0.25, err 0.5) ·" in plot_uncertainty_choropleth(
        multi).get_title(loc="left")
    del multi.attrs["spatialdp"]["metric"]
    title = plot_uncertainty_choropleth(multi).get_title(loc="left")
    assert title.startswith("value")
    assert "ε = 0.75 (loss 0.25, err 0.5)" in title


def test_other_columns_and_no_data(report: gpd.GeoDataFrame) -> None:
    ax = plot_uncertainty_choropleth(report, column="cohort")  # no noise: the ramp
    # No fading; the far-out cohort is beyond the robust range and marked.
    assert [c.get_gid() for c in ax.collections] == ["reliability:all", "out-of-range:above"]
    assert "loss: cohort" in ax.get_title(loc="left")
    # A region absent from the table (NaN everywhere, not suppressed) is "no data".
    part = us_states_partition()
    table = pd.DataFrame(report.drop(columns="geometry")).drop(index=["TX"])
    partial = part.join(table)
    ax = plot_uncertainty_choropleth(partial)
    assert len(_by_gid(ax, "no data").get_paths()) == 1
    assert "no data (1)" in [t.get_text() for t in ax.get_legend().get_texts()]


def test_missing_kwds_restyle_the_suppressed(report: gpd.GeoDataFrame) -> None:
    ax = plot_uncertainty_choropleth(
        report, missing_kwds={"color": "pink", "hatch": "xx", "label": "below floor"})
    (patch, *_) = _hatched(ax, "xx")
    assert matplotlib.colors.same_color(patch.get_facecolor(), "pink")
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert f"below floor ({len(SUPPRESSED)})" in texts  # exact: drawn on the map anyway


def test_draws_on_a_given_axes(report: gpd.GeoDataFrame) -> None:
    _fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4))
    out = plot_uncertainty_choropleth(report, ax=right, title="mine")
    assert out is right
    assert not left.collections
    assert right.get_title(loc="left") == "mine"


@pytest.mark.parametrize("drop", [["suppressed"], ["cohort", "reliability"], ["error_bar"]])
def test_missing_columns_are_refused_by_name(report: gpd.GeoDataFrame, drop: list[str]) -> None:
    broken = report.drop(columns=drop)
    with pytest.raises(InvalidInput, match=r"missing the required columns \[" +
                       ", ".join(f"'{c}'" for c in drop) + r"\]"):
        plot_uncertainty_choropleth(broken)
    with pytest.raises(InvalidInput, match="missing the required columns"):
        explore_report(broken)


def test_other_bad_reports_are_refused(report: gpd.GeoDataFrame) -> None:
    with pytest.raises(InvalidInput, match=r"missing the required columns \['nope'\]"):
        plot_uncertainty_choropleth(report, column="nope")
    with pytest.raises(InvalidInput, match="no geometry column"):
        plot_uncertainty_choropleth(pd.DataFrame(report.drop(columns="geometry")))
    with pytest.raises(InvalidInput, match="0 regions"):
        plot_uncertainty_choropleth(report.iloc[:0])
    odd = report.copy()
    odd["reliability"] = odd["reliability"].astype(str).replace("high", "great")
    with pytest.raises(InvalidInput, match=r"\['great'\] are not classes"):
        plot_uncertainty_choropleth(odd)
    with pytest.raises(InvalidInput, match=r"vmin=.* and vmax="):
        plot_uncertainty_choropleth(report, vmin=2.0, vmax=1.0)


def test_plain_strings_for_reliability_work(report: gpd.GeoDataFrame) -> None:
    plain = report.copy()
    plain["reliability"] = plain["reliability"].astype(str)
    ax = plot_uncertainty_choropleth(plain)
    assert len(_hatched(ax)) == len(SUPPRESSED)


# ------------------------------------------------------------------ saving
def test_save_figure_writes_a_png_atomically(report: gpd.GeoDataFrame, tmp_path: Path) -> None:
    ax = plot_uncertainty_choropleth(report, annotate_cohort=True)
    out = save_figure(ax, tmp_path / "map.png", dpi=60)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["map.png"]
    mask = os.umask(0)
    os.umask(mask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~mask  # not mkstemp's 0600


def test_save_figure_leaves_nothing_on_failure(tmp_path: Path, monkeypatch) -> None:
    fig, _ = plt.subplots()
    target = tmp_path / "map.png"
    target.write_bytes(b"old")

    def half_then_crash(fname, **_kw):
        Path(fname).write_bytes(b"\x89PNG half")
        raise OSError("disk full")

    monkeypatch.setattr(fig, "savefig", half_then_crash)
    with pytest.raises(OSError, match="disk full"):
        save_figure(fig, target)
    assert target.read_bytes() == b"old"  # the old file is untouched
    assert [p.name for p in tmp_path.iterdir()] == ["map.png"]  # no temp file left
    with pytest.raises(InvalidInput, match="does not exist"):
        save_figure(fig, tmp_path / "missing" / "map.png")


# ------------------------------------------------------------------ time series
def _panel(fig, region: str) -> Axes:
    (ax,) = [a for a in fig.axes if a.get_gid() == f"region:{region}"]
    return ax


def test_band_is_drawn_first_and_the_line_second() -> None:
    history = make_history()
    fig = plot_region_timeseries(history)
    assert len(fig.axes) == history.region_id.nunique()
    for ax in fig.axes:
        children = ax.get_children()
        bands = [c for c in ax.collections if c.get_gid() == "band"]
        (line,) = [ln for ln in ax.lines if ln.get_gid() == "value"]
        assert bands
        assert isinstance(bands[0], PolyCollection)
        # Added first, and below in the z-order: the line is drawn over the band.
        assert children.index(bands[0]) < children.index(line)
        assert all(b.zorder < line.zorder for b in bands)


def test_cohort_label_on_every_panel() -> None:
    history = make_history()
    fig = plot_region_timeseries(history)
    for ax in fig.axes:
        region = ax.get_gid().split(":", 1)[1]
        part = history[(history.region_id == region) & ~history.suppressed]
        (label,) = [t for t in ax.texts if t.get_gid() == "cohort"]
        lo, hi = part.cohort.min(), part.cohort.max()
        assert label.get_text().startswith(f"n={lo:,}–{hi:,}" if lo != hi else f"n={lo:,}")
        n_supp = int(history[history.region_id == region].suppressed.sum())
        assert (f"{n_supp} suppressed" in label.get_text()) == (n_supp > 0)
        assert label.get_window_extent().overlaps(ax.get_window_extent())  # on the panel


def test_suppressed_rounds_are_gaps() -> None:
    history = make_history()
    fig = plot_region_timeseries(history, regions=["VT"])
    ax = _panel(fig, "VT")
    vt = history[history.region_id == "VT"].sort_values("round_index")
    assert vt.suppressed.any()
    (line,) = [ln for ln in ax.lines if ln.get_gid() == "value"]
    ydata = np.asarray(line.get_ydata(), dtype=float)
    assert np.isnan(ydata[vt.suppressed.to_numpy()]).all()
    assert np.isfinite(ydata[~vt.suppressed.to_numpy()]).all()
    spans = [p for p in ax.patches if p.get_gid() == "suppressed"]
    assert len(spans) == int(vt.suppressed.sum())
    # A value left in a suppressed row is never drawn.
    leaky = history.copy()
    leaky.loc[leaky.suppressed, "value"] = 9.0
    fig = plot_region_timeseries(leaky, regions=["VT"])
    (line,) = [ln for ln in fig.axes[0].lines if ln.get_gid() == "value"]
    assert np.nanmax(np.asarray(line.get_ydata(), dtype=float)) < 9.0


def test_alerts_and_layout_options() -> None:
    history = make_history()
    fig = plot_region_timeseries(history, regions=["NV", "CA"], alert_rounds={"NV": [17]},
                                 ncols=1, sharey=False, title="mine")
    assert [a.get_gid() for a in fig.axes] == ["region:NV", "region:CA"]
    nv_alerts = [ln for ln in _panel(fig, "NV").lines if ln.get_gid() == "alert"]
    assert [ln.get_xdata()[0] for ln in nv_alerts] == [17]
    assert not [ln for ln in _panel(fig, "CA").lines if ln.get_gid() == "alert"]
    assert fig.get_suptitle() == "mine"
    legend_texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend_texts == ["value ± 95% error bar", "value", "alert"]
    everywhere = plot_region_timeseries(history, regions=["NV", "CA"], alert_rounds=[5, 6])
    assert all(len([ln for ln in a.lines if ln.get_gid() == "alert"]) == 2
               for a in everywhere.axes)
    # Empty grid slots are removed; a given figure is used.
    given = plt.figure()
    out = plot_region_timeseries(history, regions=["CA", "TX", "NV"], ncols=2, fig=given)
    assert out is given
    assert len(given.axes) == 3


def test_isolated_published_round_gets_a_bar() -> None:
    history = pd.DataFrame({
        "region_id": "WY", "round_index": [1, 2, 3, 4, 5],
        "value": [0.4, np.nan, 0.5, np.nan, 0.45], "error_bar": [0.2, np.nan, 0.2, np.nan, 0.2],
        "cohort": [12, 5, 14, 6, 13], "suppressed": [False, True, False, True, False]})
    fig = plot_region_timeseries(history)
    bands = [c for c in fig.axes[0].collections if c.get_gid() == "band"]
    assert len(bands) == 2  # the (empty) fill and the bars for three lone rounds
    assert len(bands[1].get_segments()) == 3


def test_bad_histories_are_refused() -> None:
    history = make_history()
    with pytest.raises(InvalidInput, match=r"missing the required columns \['cohort'\]"):
        plot_region_timeseries(history.drop(columns="cohort"))
    with pytest.raises(InvalidInput, match=r"regions \['XX'\] are not in the history"):
        plot_region_timeseries(history, regions=["CA", "XX"])
    with pytest.raises(InvalidInput, match="duplicate \\(region_id, round_index\\)"):
        plot_region_timeseries(pd.concat([history, history.iloc[:1]]))
    with pytest.raises(InvalidInput, match="0 rows"):
        plot_region_timeseries(history.iloc[:0])
    fig, _ = plt.subplots()
    with pytest.raises(InvalidInput, match="already has 1 axes"):
        plot_region_timeseries(history, fig=fig)


# ------------------------------------------------------------------ explore (folium)
def _walk(element):
    yield element
    for child in element._children.values():
        yield from _walk(child)


def test_explore_report_tooltip_and_styles(report: gpd.GeoDataFrame) -> None:
    folium = pytest.importorskip("folium")
    m = explore_report(report, tiles=None)
    assert isinstance(m, folium.Map)
    html = m.get_root().render()
    (tooltip,) = [c for c in _walk(m) if isinstance(c, folium.GeoJsonTooltip)]
    assert tooltip.fields == ["region", "class_text", "estimate", "interval", "cohort_n",
                              "cv_text", "reliability_class"]
    assert tooltip.aliases == ["region", "class", "value ± error bar (95%)", "interval (95%)",
                               "cohort", "CV", "reliability"]
    assert "20,356" in html
    assert '"reliability_class": "suppressed"' in html
    # Suppressed regions: "below the floor", never the exact cohort.
    assert html.count(f'"cohort_n": "\\u003c{FLOOR}"') == len(SUPPRESSED)  # "<10", escaped
    assert '"cohort_n": "4"' not in html
    assert "new L.StripePattern(" in html  # the suppressed regions' hatch
    assert "loss · round 12<br>ε = 1 · 95% error bars · 3 of 48 regions suppressed" in html
    # The fade by reliability (the static map's opacities) survives a style_kwds of the
    # caller's; a column without noise (cv) is not faded.
    m2 = explore_report(report, column="value", tiles=None, style_kwds={"weight": 3})
    assert '"fillOpacity": 0.22' in m2.get_root().render()
    assert '"weight": 3' in m2.get_root().render()
    m3 = explore_report(report, column="cv", tiles=None)
    assert '"fillOpacity": 0.22' not in m3.get_root().render()


def test_plain_explore_works_with_the_schema(report: gpd.GeoDataFrame) -> None:
    pytest.importorskip("folium")
    pytest.importorskip("mapclassify")
    # The Categorical reliability, the bool column and attrs all serialise.
    html = report.explore(tiles=None).get_root().render()
    assert "suppressed" in html
    report.explore(column="reliability", tiles=None).get_root().render()


def test_explore_without_folium_says_what_to_install(
    report: gpd.GeoDataFrame, monkeypatch
) -> None:
    monkeypatch.setitem(sys.modules, "folium", None)
    with pytest.raises(ImportError, match="pip install folium"):
        explore_report(report)


def test_time_series_refuses_mixed_baselines() -> None:
    history = make_history()
    history["partition_version"] = np.where(history.round_index > 10, "new", "old")
    with pytest.raises(PartitionMismatch, match="mixes partition_version"):
        plot_region_timeseries(history)


def test_simulation_maps_say_so(report: gpd.GeoDataFrame) -> None:
    simulated = report.copy()
    simulated.attrs["spatialdp"] = {**report.attrs.get("spatialdp", {}),
                                    "accounting": "simulation"}
    ax = plot_uncertainty_choropleth(simulated)
    assert ax.get_title(loc="left").startswith("[SIMULATION]")


def test_add_polygon_patch_sets_the_limits_add_patch_sets() -> None:
    # the vectorised limit update (no Python walk over the segments) agrees with
    # matplotlib's own for real outlines: every state, holes and islands included
    from spatialdp.datasets import load_us_states
    from spatialdp.viz.maps import _region_path
    from spatialdp.viz.patches import add_polygon_patch

    paths = [p for p in map(_region_path, load_us_states().geometry.values) if p is not None]
    fig, (ours, theirs) = plt.subplots(1, 2)
    for path in paths:
        add_polygon_patch(ours, PathPatch(path))
        theirs.add_patch(PathPatch(path))
    np.testing.assert_allclose(ours.dataLim.extents, theirs.dataLim.extents, rtol=0, atol=1e-12)
    assert len(ours.patches) == len(theirs.patches) == len(paths)
    # clipped to the axes as add_patch clips (a box: the axes patch is a rectangle)
    assert all(p.get_clip_box() is not None for p in [*ours.patches, *theirs.patches])
    plt.close(fig)
