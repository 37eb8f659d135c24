"""Regions different from the national value: false-flag rate, map, refusals; MOE map."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import geopandas as gpd
import matplotlib.pyplot as plt
import numpy as np
import pytest
import shapely

from spatialdp.exceptions import InvalidInput
from spatialdp.privacy.combined_noise import difference_threshold, noise_sum_quantile
from spatialdp.viz import plot_moe_companion, plot_significance, significance_table
from tests.test_viz import make_report


def _frame(values: np.ndarray, scale: np.ndarray | float) -> gpd.GeoDataFrame:
    n = values.size
    sd = np.broadcast_to(np.asarray(scale, dtype=float) * math.sqrt(2.0), (n,))
    return gpd.GeoDataFrame(
        {"value": values, "error_bar": sd / math.sqrt(2) * math.log(20), "noise_std": sd,
         "cohort": 500, "reliability": "high", "suppressed": False, "estimator": "mean"},
        geometry=[shapely.box(i, 0, i + 1, 1) for i in range(n)])


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_false_flag_rate_is_alpha_with_an_exact_national_value() -> None:
    """Regions equal to the national value are flagged with probability alpha."""
    rng = np.random.default_rng(21)
    n, alpha = 40_000, 0.05
    scales = rng.uniform(0.05, 0.5, n)
    frame = _frame(1.0 + rng.laplace(0.0, scales), scales)
    flagged = (significance_table(frame, 1.0, alpha=alpha).verdict != "not different").mean()
    assert abs(flagged - alpha) < 5 * math.sqrt(alpha * (1 - alpha) / n)


def test_false_flag_rate_is_alpha_with_a_noisy_national_value() -> None:
    """The national value is its own release: the threshold is the exact quantile of the
    region-minus-national noise (Monte-Carlo of that difference), and the table uses it."""
    rng = np.random.default_rng(22)
    alpha, national_scale, n = 0.1, 0.3, 400_000
    scales = np.array([0.1, 0.25, 0.4])
    frame = _frame(2.0 + rng.laplace(0.0, scales), scales)
    table = significance_table(frame, 2.0, alpha=alpha,
                               national_error_bar=national_scale * math.log(1 / alpha))
    expected = difference_threshold(scales, np.full(3, national_scale), alpha)
    np.testing.assert_allclose(table.threshold, expected, rtol=1e-9)
    for scale, threshold in zip(scales, table.threshold, strict=True):
        noise = rng.laplace(0.0, scale, n) - rng.laplace(0.0, national_scale, n)
        flagged = float((np.abs(noise) > threshold).mean())
        assert abs(flagged - alpha) < 5 * math.sqrt(alpha * (1 - alpha) / n)
    # Leaving the national noise out would flag far more often than alpha.
    assert (table.threshold > scales * math.log(1 / alpha)).all()


def test_a_real_difference_is_found_and_bonferroni_is_stricter() -> None:
    rng = np.random.default_rng(3)
    values = 1.0 + rng.laplace(0.0, 0.05, 30)
    values[:3] = [1.8, 0.3, 1.9]
    frame = _frame(values, 0.05)
    table = significance_table(frame, 1.0)
    assert list(table.verdict[:3]) == ["above", "below", "above"]
    strict = significance_table(frame, 1.0, adjust="bonferroni")
    assert (strict.threshold > table.threshold).all()
    assert (strict.verdict != "not different").sum() <= (table.verdict != "not different").sum()


def test_suppressed_regions_are_not_tested_and_ratio_uses_its_linearised_noise() -> None:
    frame = _frame(np.array([1.5, 1.5, 1.01]), 0.05)
    frame.loc[1, ["value", "noise_std"]] = np.nan
    frame.loc[1, "suppressed"] = True
    frame.loc[2, "estimator"] = "ratio"
    # a ratio estimate 1.01 over a noisy count of 400: scales 8/400 and 1.01 * 2/400
    frame = frame.assign(noisy_count=400.0, sum_scale=8.0, count_scale=2.0)
    table = significance_table(frame, 1.0)
    assert list(table.verdict) == ["above", "suppressed", "not different"]
    expected = noise_sum_quantile([8.0 / 400, 1.01 * 2.0 / 400], 0.0, 0.05)
    assert table.threshold.iloc[2] == pytest.approx(expected)
    with pytest.raises(InvalidInput, match="a ratio-estimate frame without"):
        significance_table(frame.drop(columns="sum_scale"), 1.0)


def test_significance_refusals() -> None:
    frame = _frame(np.array([1.0, 2.0]), 0.1)
    with pytest.raises(InvalidInput, match="adjust='holm' is not a correction"):
        significance_table(frame, 1.0, adjust="holm")
    with pytest.raises(InvalidInput, match="national='x'"):
        significance_table(frame, "x")
    with pytest.raises(InvalidInput, match="national_error_bar=-1"):
        significance_table(frame, 1.0, national_error_bar=-1)
    with pytest.raises(InvalidInput, match="missing the required columns"):
        significance_table(frame.drop(columns="noise_std"), 1.0)
    none = frame.assign(suppressed=True)
    with pytest.raises(InvalidInput, match="publishes no region"):
        significance_table(none, 1.0)


def test_significance_map_colours_and_exact_key() -> None:
    report = make_report()
    report["noise_std"] = report.error_bar / math.log(20) * math.sqrt(2)
    national = float(report.value.median())
    ax = plot_significance(report, national)
    table = significance_table(report, national)
    by_gid = {p.get_gid().split(":", 1)[1]: p.get_gid().split(":", 1)[0] for p in ax.patches}
    assert by_gid == table.verdict.to_dict()
    assert by_gid["NV"] == "above"  # the outlier state
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    n = int(report.suppressed.sum())
    assert f"suppressed ({n})" in texts  # exact: every verdict is drawn on the map
    assert f"national {national:.3g}" in ax.get_title(loc="left")


def test_moe_companion_has_both_panels() -> None:
    report = make_report()
    fig = plot_moe_companion(report)
    value_ax, moe_ax = [a for a in fig.axes if a.get_gid()]
    assert value_ax.get_gid() == "panel:value"
    assert moe_ax.get_title(loc="left").startswith("its margin of error (95%)")
    key = moe_ax.child_axes[0]
    published = report.error_bar[~report.suppressed]
    assert key.get_xlim()[1] <= published.max() + 1e-12
    with pytest.raises(InvalidInput, match="figsize"):
        plot_moe_companion(report, figsize=(0, 3))


def test_bivariate_map_counts_and_palette() -> None:
    from spatialdp.viz import plot_bivariate
    from spatialdp.viz.bivariate import GREY_MIX, bivariate_palette

    report = make_report()
    ax = plot_bivariate(report, k=3)
    (key,) = ax.child_axes
    assert key.get_gid() == "legend:bivariate"
    gids = [p.get_gid() for p in ax.patches]
    drawn = {g.split(":")[-1]: g.split(":")[0] for g in gids}
    published = report[~report.suppressed]
    # Each published region sits in the row of its reliability class.
    for rid, cls in published.reliability.astype(str).items():
        assert drawn[rid] == cls
    assert sorted(r for r, v in drawn.items() if v == "suppressed") == sorted(
        report.index[report.suppressed])
    # The key's counts add up to the published regions, cell by cell.
    numbers = [int(t.get_text()) for t in key.texts]
    assert sum(numbers) == len(published)
    palette = bivariate_palette(3)
    grey = np.array([0.62, 0.62, 0.62])
    expected = (1 - GREY_MIX["low"]) * palette[0, :, :3] + GREY_MIX["low"] * grey
    np.testing.assert_allclose(palette[2, :, :3], expected)
    with pytest.raises(InvalidInput, match="k=12 is above the limit"):
        plot_bivariate(report, k=12)
