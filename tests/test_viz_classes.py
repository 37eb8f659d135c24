"""Classed maps, error-bar-aware breaks (Sun & Wong 2010), labels, robust range, CRS."""

from __future__ import annotations

import itertools
import math
import warnings

import matplotlib

matplotlib.use("Agg")

import geopandas as gpd
import mapclassify
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from spatialdp.exceptions import InvalidInput
from spatialdp.viz import classify_report, plot_uncertainty_choropleth, plotting_crs
from spatialdp.viz.separability import (
    NoiseModel,
    break_separability,
    order_probability,
    separable_breaks,
)
from tests.test_viz import OUTLIER, make_report


@pytest.fixture(scope="module")
def report() -> gpd.GeoDataFrame:
    frame = make_report()
    frame["noise_std"] = frame["error_bar"] / math.log(20) * math.sqrt(2)
    return frame


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


@pytest.mark.parametrize(("gap", "a", "b"), [(0.0, 1.0, 1.0), (0.4, 0.3, 0.7),
                                             (1.5, 1.0, 1.0), (2.5, 0.2, 1.1)])
def test_order_probability_matches_monte_carlo(gap: float, a: float, b: float) -> None:
    """P(N_a - N_b < gap) for Laplace noises: exact formula against 400,000 draws."""
    rng = np.random.default_rng(11)
    n = 400_000
    noise = rng.laplace(0, a, n) - rng.laplace(0, b, n)
    empirical = float((noise < gap).mean())
    exact = float(order_probability(np.array([gap]), NoiseModel.laplace_scales([a]),
                                    NoiseModel.laplace_scales([b]))[0])
    se = math.sqrt(exact * (1 - exact) / n)
    assert abs(empirical - exact) < 5 * se + 1e-9


def test_order_probability_normal_path_matches_monte_carlo() -> None:
    rng = np.random.default_rng(12)
    n = 400_000
    normal = NoiseModel(np.array([0.5]), np.array([0.5]), np.array([False]))
    other = NoiseModel(np.array([0.8]), np.array([0.8]), np.array([False]))
    exact = float(order_probability(np.array([0.6]), normal, other)[0])
    empirical = float(((rng.normal(0, 0.5, n) - rng.normal(0, 0.8, n)) < 0.6).mean())
    assert abs(empirical - exact) < 5 * math.sqrt(exact * (1 - exact) / n)


def test_break_separability_is_the_least_separable_pair_and_holds_in_simulation() -> None:
    """Each break's grade is the minimum over pairs across it (brute force), and a
    re-release of the least separable pair keeps its order that often (Monte-Carlo)."""
    rng = np.random.default_rng(5)
    x = np.sort(rng.normal(0, 1, 14))
    scales = rng.uniform(0.05, 0.6, x.size)
    noise = NoiseModel.laplace_scales(scales)
    bins = [x[3], x[8], x[-1]]
    table = break_separability(x, noise, bins, ids=[f"r{i}" for i in range(x.size)])
    for row, edge in zip(table.itertuples(), bins[:-1], strict=True):
        below = np.flatnonzero(x <= edge)
        above = np.flatnonzero(x > edge)
        pairs = [(i, j) for i in below for j in above]
        probs = [float(order_probability(np.array([x[j] - x[i]]),
                                         NoiseModel.laplace_scales([scales[i]]),
                                         NoiseModel.laplace_scales([scales[j]]))[0])
                 for i, j in pairs]
        assert row.separability == pytest.approx(min(probs), rel=1e-9)
        i, j = pairs[int(np.argmin(probs))]
        assert (row.below, row.above) == (f"r{i}", f"r{j}")
        # Sun & Wong: at the overlap level the least separable pair's intervals just touch.
        level = row.overlap_level
        touch = [(x[j] - x[i]) / (scales[i] + scales[j]) for i, j in pairs]
        assert level == pytest.approx(1 - math.exp(-min(touch)), rel=1e-9)
        # Monte-Carlo: redraw the pair's noise around the published values.
        n = 200_000
        again_i = x[i] + rng.laplace(0, scales[i], n)
        again_j = x[j] + rng.laplace(0, scales[j], n)
        kept = float((again_i < again_j).mean())
        se = math.sqrt(row.separability * (1 - row.separability) / n)
        assert abs(kept - row.separability) < 5 * se + 1e-9


def test_separable_breaks_reach_the_best_bottleneck() -> None:
    """No set of k - 1 breaks (classes of at least min_size) has a better worst break."""
    rng = np.random.default_rng(9)
    x = np.sort(rng.normal(0, 1, 11))
    noise = NoiseModel.laplace_scales(rng.uniform(0.05, 0.4, x.size))
    k, size = 3, 2
    bins = separable_breaks(x, noise, k, min_size=size)
    assert bins.size == k
    assert bins[-1] == x[-1]
    ours = break_separability(x, noise, list(bins)).separability.min()
    best = 0.0
    for ps in itertools.combinations(range(1, x.size), k - 1):
        sizes = np.diff([0, *ps, x.size])
        if (sizes < size).any():
            continue
        grade = break_separability(x, noise, [*(x[p - 1] for p in ps), x[-1]]).separability
        best = max(best, float(grade.min()))
    assert ours == pytest.approx(best, rel=1e-12)
    counts = np.bincount(np.searchsorted(bins, x), minlength=k)
    assert (counts >= size).all()


def test_separable_keeps_only_breaks_beyond_the_noise(report: gpd.GeoDataFrame) -> None:
    """Quantiles cut through the noise; separable keeps no break the noise explains
    (on this report Montana's bar, +-0.53, reaches Nevada: one class)."""
    sep = classify_report(report, scheme="separable", k=4)
    quant = classify_report(report, scheme="quantiles", k=4)
    assert sep.k <= 4
    assert sep.separability.beyond_noise.all()
    assert not quant.separability.beyond_noise.any()
    assert quant.separability.bars_overlap.any()
    assert int(sep.counts.sum()) == int((~report.suppressed).sum())


@pytest.mark.parametrize(("scheme", "kwds"), [("quantiles", {}), ("fisher_jenks", {}),
                                               ("user_defined", {"bins": [0.3, 0.45, 0.6]})])
def test_mapclassify_schemes_give_mapclassify_bins(report: gpd.GeoDataFrame, scheme: str,
                                                   kwds: dict) -> None:
    published = report.value[~report.suppressed].to_numpy()
    ours = classify_report(report, scheme=scheme, k=5, classification_kwds=kwds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Numba not installed": a speed note only
        theirs = mapclassify.classify(published, scheme, **({} if kwds else {"k": 5}), **kwds)
    expected = np.unique(np.append(theirs.bins[theirs.bins < published.max()],
                                   published.max()))
    np.testing.assert_allclose(ours.bins, expected)
    assert int(ours.counts.sum()) == published.size
    assert (ours.yb[report.suppressed.to_numpy()] == -1).all()
    assert len(ours.separability) == ours.k - 1


def test_classify_refusals(report: gpd.GeoDataFrame) -> None:
    with pytest.raises(InvalidInput, match="scheme='jenks' is not a classification scheme"):
        classify_report(report, scheme="jenks")
    with pytest.raises(InvalidInput, match="k=1 is below the limit"):
        classify_report(report, k=1)
    with pytest.raises(InvalidInput, match="has no 'bins'"):
        classify_report(report, scheme="user_defined")
    with pytest.raises(InvalidInput, match="k=60 classes need at least 60"):
        classify_report(report, scheme="quantiles", k=60)
    with pytest.raises(InvalidInput, match="the separable scheme takes only alpha and min_size"):
        classify_report(report, scheme="separable", classification_kwds={"bins": [1]})


def test_classed_map_and_its_interval_legend(report: gpd.GeoDataFrame) -> None:
    ax = plot_uncertainty_choropleth(report, scheme="quantiles", k=4)
    legend = ax.get_legend()
    assert legend.get_gid() == "legend:classes"
    texts = [t.get_text() for t in legend.get_texts()]
    classes = classify_report(report, scheme="quantiles", k=4)
    for label in classes.labels():
        assert any(t.startswith(label) for t in texts)
    assert sum("separable" in t for t in texts) == 3
    # Quantile breaks through the noise: the key says the classes overlap.
    assert any("classes within each other's error bars" in t for t in texts)
    # Opaque regions are drawn in exactly the k class colours.
    high = next(c for c in ax.collections if c.get_gid() == "reliability:high")
    assert len({tuple(np.round(f[:3], 6)) for f in high.get_facecolors()}) <= 4


def test_robust_default_range_keeps_the_outlier_from_washing_out(
        report: gpd.GeoDataFrame) -> None:
    ax = plot_uncertainty_choropleth(report, scheme=None)
    (key,) = ax.child_axes
    _, hi = key.get_xlim()
    published = report.value[~report.suppressed]
    assert hi < report.value[OUTLIER]  # the outlier is in the end colour, not the range
    assert hi == pytest.approx(published.drop(OUTLIER).max())
    full = plot_uncertainty_choropleth(report, robust=False)
    assert full.child_axes[0].get_xlim()[1] == pytest.approx(published.max())
    calm = report.copy()
    calm.loc[OUTLIER, "value"] = 0.42  # no far-out value: the full range
    auto = plot_uncertainty_choropleth(calm, scheme=None).child_axes[0].get_xlim()
    assert auto[1] == pytest.approx(calm.value[~calm.suppressed].max())


def test_labels_units_one_title_and_named_columns(report: gpd.GeoDataFrame) -> None:
    labelled = report.copy()
    labelled.attrs["spatialdp"] = {**report.attrs["spatialdp"],
                                   "value_label": "squared position error (m²)",
                                   "quantity": "squared position error", "value_unit": "m²"}
    ax = plot_uncertainty_choropleth(labelled, scheme=None)
    title = ax.get_title(loc="left")
    assert title.startswith("squared position error (m²) · round 12")
    assert not ax.get_title(loc="center")
    assert ax.figure._suptitle is None  # one title
    assert ax.child_axes[0].get_title(loc="left").startswith("squared position error (m²)")
    moe = plot_uncertainty_choropleth(labelled, "error_bar")
    assert moe.get_title(loc="left").startswith(
        "margin of error (95%) of squared position error (m²)")


def test_tick_labels_do_not_collide(report: gpd.GeoDataFrame) -> None:
    ax = plot_uncertainty_choropleth(report, projection=None, figsize=(6, 4), scheme=None)
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    assert not ax.axison  # a map has no lon/lat ticks; the legend's ticks must not collide
    for axis in (ax.child_axes[0].xaxis,):
        boxes = [t.get_window_extent(renderer) for t in axis.get_ticklabels()
                 if t.get_visible() and t.get_text()]
        assert len(boxes) >= 2
        for a, b in itertools.pairwise(boxes):
            assert not a.overlaps(b)


def test_plotting_crs_is_named_and_overlays_line_up(report: gpd.GeoDataFrame) -> None:
    ax = plot_uncertainty_choropleth(report)
    crs = plotting_crs(report)
    assert crs.to_epsg() == 5070
    (label,) = [t for t in ax.texts if t.get_gid() == "crs"]
    assert label.get_text().startswith("EPSG:5070")
    # An analyst's layer, reprojected to the plotting CRS, lands where its state is.
    denver = gpd.GeoSeries.from_xy([-104.99], [39.74], crs=4326).to_crs(crs)
    x0, x1 = ax.get_xlim()
    y0, y1 = ax.get_ylim()
    assert x0 < denver.x.iloc[0] < x1
    assert y0 < denver.y.iloc[0] < y1
    lonlat = plot_uncertainty_choropleth(report, projection=None)
    assert not lonlat.axison  # no lon/lat axes, even in lon/lat
    assert lonlat.get_xlabel() == ""
    assert plotting_crs(report, projection=None).to_epsg() == 4326
    no_crs = report.set_crs(None, allow_override=True)
    assert plotting_crs(no_crs, projection=None) is None
    with pytest.raises(InvalidInput):
        plotting_crs(pd.DataFrame({"value": [1.0]}))


def test_separable_breaks_never_split_ties() -> None:
    noise = NoiseModel.laplace_scales([0.1] * 6)
    with pytest.raises(InvalidInput, match="k=3 classes need 3 distinct published values, got 2"):
        separable_breaks([1.0, 1.0, 1.0, 2.0, 2.0, 2.0], noise, k=3)
    assert separable_breaks([1.0, 1.0, 1.0, 2.0, 2.0, 2.0], noise, k=2).tolist() == [1.0, 2.0]


def test_all_break_grades_at_once_match_one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The vectorised grades (a band of pairs) equal the per-break grades, window included."""
    from spatialdp.viz import separability

    monkeypatch.setattr(separability, "PAIR_WINDOW", 6)  # a window smaller than the data
    rng = np.random.default_rng(4)
    x = np.sort(rng.normal(0, 1, 40))
    noise = NoiseModel.laplace_scales(rng.uniform(0.01, 0.5, x.size))
    grades = separability._all_grades(x, noise)
    one_by_one = [separability._grade_one(x, noise, p)[0] for p in range(1, x.size)]
    np.testing.assert_allclose(grades, one_by_one, rtol=1e-12)
    # and by brute force over the pairs at most 6 ranks apart
    for p in (1, 17, 39):
        pairs = [(i, j) for i in range(p) for j in range(p, x.size) if j - i <= 6]
        brute = min(float(order_probability(np.array([x[j] - x[i]]), noise.take(np.array([i])),
                                            noise.take(np.array([j])))[0]) for i, j in pairs)
        assert grades[p - 1] == pytest.approx(brute, rel=1e-12)
