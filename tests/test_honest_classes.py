"""Issue 23: a default that respects the error bars, in every renderer.

* The default classes (``scheme="separable"``, :func:`honest_breaks`) hold their
  family-wise promise: with no true difference on the map, more than one class is
  drawn with probability at most alpha (Monte-Carlo, binomial tolerance); a region
  shifted by several error bars stands out alone.
* The PNG and the folium map give every region the same class and the same colour
  (the PNG read back as pixels, the folium map as its GeoJSON styles), and both mark
  the regions beyond a colour range.
* A simulation is labelled [SIMULATION] on the significance map, the time series and
  the folium map.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import geopandas as gpd
import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgb

from spatialdp.datasets import us_states_partition
from spatialdp.exceptions import InvalidInput
from spatialdp.viz import (
    classify_report,
    explore_report,
    plot_region_timeseries,
    plot_significance,
    plot_uncertainty_choropleth,
    plotting_crs,
)
from spatialdp.viz._report import RELIABILITY_ALPHA
from spatialdp.viz.classify import ONE_CLASS_TEXT, map_colours
from spatialdp.viz.maps import save_figure
from spatialdp.viz.separability import (
    FAMILY_ALPHA,
    NoiseModel,
    family_grade,
    honest_breaks,
    separable_breaks,
)
from tests.test_viz import SUPPRESSED, make_report

folium = pytest.importorskip("folium")

#: Monte-Carlo maps per family-wise check.
DRAWS = 2000
DPI = 150


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _cohorts(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.round(np.exp(rng.normal(5.6, 1.3, n))).astype(np.int64) + 12


def flat_report(shift: dict[str, float] | None = None, seed: int = 1) -> gpd.GeoDataFrame:
    """One true value everywhere plus Laplace noise of each region's scale (48 states,
    cohorts 400-600: error bars within a factor 1.5 of each other)."""
    part = us_states_partition()
    ids = part.region_ids
    rng = np.random.default_rng(seed)
    scale = 2.5 / rng.integers(400, 601, len(ids))
    true = np.full(len(ids), 0.42)
    for rid, bars in (shift or {}).items():
        i = ids.get_loc(rid)
        true[i] += bars * scale[i] * math.log(20)
    value = true + rng.laplace(0.0, scale)
    table = pd.DataFrame({"value": value, "error_bar": scale * math.log(20),
                          "noise_std": scale * math.sqrt(2), "cohort": 100,
                          "reliability": "high", "suppressed": False}, index=ids)
    report = part.join(table)
    report.attrs["spatialdp"] = {"metric": "loss", "alpha": 0.05, "epsilon": 1.0}
    return report


# ----------------------------------------------------------------- the family-wise promise
@pytest.mark.parametrize("laplace", [True, False], ids=["laplace", "normal"])
def test_noise_alone_makes_one_class_with_probability_at_least_1_minus_alpha(
        laplace: bool) -> None:
    """2,000 maps of 48 regions, one true value, noise of unequal scales: the share of maps
    with more than one class is at most alpha (+ 3 binomial SE). The old separable
    scheme (forced k) splits every one of them."""
    rng = np.random.default_rng(23)
    n = 48
    scale = 2.5 / _cohorts(n, 7)
    noise = (NoiseModel.laplace_scales(scale) if laplace else
             NoiseModel(scale, scale * math.sqrt(2), np.zeros(n, dtype=bool)))
    split = 0
    old_split = 0
    for _ in range(DRAWS):
        draw = (rng.laplace(0.0, scale) if laplace else rng.normal(0.0, scale * math.sqrt(2)))
        x = 0.42 + draw
        split += honest_breaks(x, noise, k=5).size > 1
        if old_split < 20:
            old_split += separable_breaks(x, noise, k=5).size > 1
    rate = split / DRAWS
    se = math.sqrt(FAMILY_ALPHA * (1 - FAMILY_ALPHA) / DRAWS)
    assert rate <= FAMILY_ALPHA + 3 * se, rate
    assert family_grade(n) == pytest.approx(1 - FAMILY_ALPHA / (n * (n - 1)))
    assert old_split == 20  # the defect: forced classes on pure noise, every time


def test_one_region_shifted_by_several_error_bars_stands_out_alone() -> None:
    """Shifted by 8 of its error bars, a region forms a class of its own in at least 90%
    of draws (Monte-Carlo), and never takes another region with it more than alpha."""
    rng = np.random.default_rng(31)
    n = 48
    scale = np.full(n, 0.02)
    noise = NoiseModel.laplace_scales(scale)
    shift = 8 * 0.02 * math.log(20)
    alone = others = 0
    draws = 500
    for _ in range(draws):
        x = 0.42 + rng.laplace(0.0, scale)
        x[17] += shift
        bins = honest_breaks(x, noise, k=5)
        cls = np.searchsorted(bins, x)
        top = cls == cls[17]
        alone += bins.size == 2 and top.sum() == 1
        others += bins.size > 2
    assert alone / draws >= 0.9
    assert others / draws <= FAMILY_ALPHA + 3 * math.sqrt(FAMILY_ALPHA * 0.95 / draws)


def test_default_map_of_noise_is_one_class_and_a_shifted_region_stands_out(
        tmp_path: Path) -> None:
    """The default map (report.plot / plot_uncertainty_choropleth): noise only, one colour
    and "no class break beyond the noise"; Colorado shifted by 8 error bars, alone."""
    flat = flat_report()
    ax = plot_uncertainty_choropleth(flat)
    faces = np.concatenate([c.get_facecolors()[:, :3] for c in ax.collections
                            if str(c.get_gid()).startswith("reliability:")])
    assert len(faces) == 48
    assert np.unique(faces.round(6), axis=0).shape[0] == 1
    middle = np.asarray(to_rgb(plt.get_cmap("viridis")(0.5)))
    assert np.allclose(faces[0], middle, atol=1 / 255)  # the ramp's middle
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(ONE_CLASS_TEXT in t for t in texts)
    assert "(separable, 1 class)" in ax.get_legend().get_title().get_text()
    save_figure(ax, tmp_path / "flat.png")

    shifted = flat_report({"CO": 8.0})
    classes = classify_report(shifted)
    assert classes.k == 2
    assert list(shifted.index[classes.yb == 1]) == ["CO"]
    colours = map_colours(shifted).frame(shifted.index)
    assert colours.fill.nunique() == 2
    assert (colours.fill != colours.loc["CO", "fill"]).sum() == 47
    note = classes.break_notes()[0]
    assert "beyond the noise" in note


def test_the_key_says_when_neighbouring_classes_are_within_the_error_bars() -> None:
    """Quantile classes of a noise-only map: every break is within the error bars, and the
    key says so in words; the default classes say "beyond the noise"."""
    flat = flat_report()
    quant = classify_report(flat, scheme="quantiles", k=4)
    assert quant.separability.bars_overlap.all()
    ax = plot_uncertainty_choropleth(flat, scheme="quantiles", k=4)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert sum("classes within each other's error bars" in t for t in texts) == 3
    m = explore_report(flat, scheme="quantiles", k=4, tiles=None).get_root().render()
    assert m.count("classes within each other&#x27;s error bars") == 3


def test_refusals() -> None:
    flat = flat_report()
    with pytest.raises(InvalidInput, match="scheme='quantiles' is a classification, but vmin"):
        plot_uncertainty_choropleth(flat, scheme="quantiles", vmax=1.0)
    with pytest.raises(InvalidInput, match="scheme='separable' is a classification"):
        explore_report(flat, scheme="separable", robust=True)
    empty = flat.copy()
    empty["suppressed"] = True
    with pytest.raises(InvalidInput, match="publishes no value to classify"):
        classify_report(empty)
    with pytest.raises(InvalidInput, match="alpha"):
        classify_report(flat, classification_kwds={"alpha": 2.0})
    with pytest.raises(InvalidInput, match="min_size=0"):
        honest_breaks([1.0, 2.0], NoiseModel.laplace_scales([0.1, 0.1]), min_size=0)
    # All suppressed: the default map still draws (nothing to classify, nothing coloured).
    ax = plot_uncertainty_choropleth(empty)
    assert len([p for p in ax.patches if p.get_hatch() == "///"]) == 48


# ----------------------------------------------------------------- PNG and folium agree
def structured_report() -> gpd.GeoDataFrame:
    """The synthetic report (suppressed, faded, an outlier), Colorado and Texas far out."""
    report = make_report()
    report["noise_std"] = report["error_bar"] / math.log(20) * math.sqrt(2)
    report.loc["CO", "value"] = 3.0
    report.loc["TX", "value"] = 2.0
    report["name"] = [f"State {r}" for r in report.index]
    return report


def png_colours(ax, report: gpd.GeoDataFrame, path: Path) -> dict[str, np.ndarray]:
    """The colour of each region in the saved PNG, read at its representative point."""
    fig = ax.figure
    save_figure(fig, path, dpi=fig.dpi, bbox_inches=None)
    image = mpimg.imread(path)[..., :3]
    points = report.to_crs(plotting_crs(report)).geometry.representative_point()
    xy = ax.transData.transform(np.c_[points.x, points.y])
    height = image.shape[0]
    out = {}
    for rid, (x, y) in zip(report.index, xy, strict=True):
        col, row = round(x), round(height - y)
        window = np.round(image[row - 2:row + 3, col - 2:col + 3].reshape(-1, 3) * 255)
        values, counts = np.unique(window.astype(int), axis=0, return_counts=True)
        out[str(rid)] = values[np.argmax(counts)] / 255  # the mode: the fill, not a dot
    return out


def folium_styles(m) -> dict[str, dict]:
    """Each region's Leaflet style and GeoJSON properties, read from the rendered HTML."""
    html = m.get_root().render()
    (layer,) = [c for c in _walk(m) if isinstance(c, folium.GeoJson)
                and c.layer_name != "suppressed"]
    start = html.index(f"function {layer.get_name()}_styler(feature)")
    styler = html[start:html.index("function", start + 10)]
    styles: dict[str, dict] = {}
    pending: list[str] = []
    for token in re.finditer(r'case "([^"]+)":|(default):|return (\{[^}]*\});', styler):
        if token.group(1) is not None or token.group(2) is not None:
            pending.append(token.group(1) or "default")  # cases sharing one style
        elif pending:
            styles.update({rid: json.loads(token.group(3)) for rid in pending})
            pending = []
    for feature in layer.data["features"]:
        styles.setdefault(feature["id"], dict(styles.get("default", {})))
        styles[feature["id"]]["properties"] = feature["properties"]
    styles.pop("default", None)
    assert len(styles) == len(layer.data["features"])
    return styles


def _walk(element):
    yield element
    for child in element._children.values():
        yield from _walk(child)


def _blend(hex_colour: str, opacity: float) -> np.ndarray:
    return np.asarray(to_rgb(hex_colour)) * opacity + (1 - opacity)


@pytest.mark.parametrize("options", [{}, {"scheme": "quantiles", "k": 4},
                                      {"scheme": None, "vmax": 1.0}],
                         ids=["default", "quantiles", "ramp-vmax"])
def test_png_and_folium_give_every_region_the_same_class_and_colour(
        tmp_path: Path, options: dict) -> None:
    """Read back, not recomputed: the PNG's pixel at each region's representative point
    equals the folium fill blended at the folium opacity, for every published region;
    the classes are equal; regions beyond the range are marked in both."""
    report = structured_report()
    _, ax = plt.subplots(figsize=(10, 6.5), dpi=DPI)
    plot_uncertainty_choropleth(report, ax=ax, **options)
    pixels = png_colours(ax, report, tmp_path / "map.png")
    styles = folium_styles(explore_report(report, tiles=None, **options))
    published = ~report.suppressed.to_numpy()
    truth = map_colours(report, **options).frame(report.index)
    for rid, shown in zip(report.index, published, strict=True):
        style = styles[rid]
        if not shown:
            assert style["properties"]["class"] == -1
            continue
        expected = _blend(style["fillColor"], style["fillOpacity"])
        assert np.abs(pixels[rid] - expected).max() <= 3 / 255, (rid, pixels[rid], expected)
        assert style["fillOpacity"] == RELIABILITY_ALPHA[str(report.reliability[rid])]
        assert style["properties"]["class"] == truth.loc[rid, "class"]
        assert style["fillColor"] == truth.loc[rid, "fill"]
    # Out of range: beyond vmax=1.0, CO, TX and NV; marked in both, nowhere else.
    beyond = sorted(report.index[published & (report.value > 1.0).to_numpy()])
    folium_marked = sorted(r for r, s in styles.items() if s.get("dashArray") == "6 3")
    png_marked = [c for c in ax.collections if c.get_gid() == "out-of-range:above"]
    if options.get("vmax") is None:
        assert folium_marked == []
        assert png_marked == []
        return
    assert beyond == ["CO", "NV", "TX"]
    assert folium_marked == beyond
    (mark,) = png_marked
    assert len(mark.get_paths()) == len(beyond)
    assert mark.get_hatch() == "xx"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "above the colour range (> 1): 3" in legend
    assert "above the colour range (&gt; 1): 3" in explore_report(
        report, tiles=None, **options).get_root().render()


def test_folium_map_needs_no_mapclassify_and_shows_names() -> None:
    """The default folium map imports neither mapclassify nor sklearn (GeoDataFrame.explore
    would); the tooltip shows a name column beside the region id."""
    code = ("import sys, math\n"
            "from tests.test_honest_classes import structured_report\n"
            "from spatialdp.viz import explore_report, plot_uncertainty_choropleth\n"
            "m = explore_report(structured_report(), tiles=None)\n"
            "m.get_root().render()\n"
            "plot_uncertainty_choropleth(structured_report())\n"
            "print(sorted(k for k in ('mapclassify', 'sklearn') if k in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parents[1], timeout=300)
    assert out.stdout.strip().splitlines()[-1] == "[]"
    m = explore_report(structured_report(), tiles=None)
    (tooltip,) = [c for c in _walk(m) if isinstance(c, folium.GeoJsonTooltip)]
    assert tooltip.fields[:3] == ["region", "name", "class_text"]
    assert '"name": "State CO"' in m.get_root().render()


# ----------------------------------------------------------------- simulation labels
@pytest.fixture(scope="module")
def simulated():
    from tests._loss_report import simulated_loss_report

    return simulated_loss_report(us_states_partition(), loss=1.0, epsilon=1.0)


def test_a_simulation_is_labelled_in_the_three_renderers(simulated) -> None:
    """plot_significance, plot_region_timeseries and explore_report said nothing of a
    simulation; each now leads its title with [SIMULATION], a caller's title too."""
    frame = simulated["loss"]
    assert simulated.simulated
    ax = simulated.plot("loss", kind="significance", national=1.0)
    assert ax.get_title(loc="left").startswith("[SIMULATION] ")
    own = plot_significance(frame, 1.0, title="my map")
    assert own.get_title(loc="left") == "[SIMULATION] my map"

    history = frame.reset_index()
    history["round_index"] = 1
    history.attrs = dict(frame.attrs)
    fig = plot_region_timeseries(history, regions=["CA", "TX"])
    assert fig.get_suptitle().startswith("[SIMULATION] loss by region")
    assert plot_region_timeseries(history, regions=["CA"], title="mine"
                                  ).get_suptitle() == "[SIMULATION] mine"

    html = simulated.explore("loss", tiles=None).get_root().render()
    (box,) = re.findall(r'<div id="spatialdp-title"[^>]*>(.*?)</div>', html, flags=re.S)
    assert box.startswith("[SIMULATION] ")
    # The static map already said so (unchanged).
    assert simulated.plot("loss").get_title(loc="left").startswith("[SIMULATION] ")


def test_a_release_is_not_labelled() -> None:
    report = make_report()
    assert not plot_significance(
        report.assign(noise_std=0.01), 0.42).get_title(loc="left").startswith("[")
    html = explore_report(report, tiles=None).get_root().render()
    assert "[SIMULATION]" not in html
    assert len(SUPPRESSED) == 3
