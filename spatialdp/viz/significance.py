"""Which regions differ from the national value beyond what the noise explains.

Built on the alert logic of :mod:`spatialdp.federated.monitor`: the noise on
``region - national`` is the difference of two independent Laplace noises (the
national value is its own release), whose exact ``1 - alpha`` quantile is
:func:`~spatialdp.privacy.combined_noise.difference_threshold`. A region is
*significantly above* (or *below*) when its difference exceeds that threshold:
if the region truly equals the national value, it is flagged with probability
``alpha`` exactly (checked by Monte-Carlo in the tests). A national value
known without noise uses the region's noise alone (threshold ``b ln(1/alpha)``).

What is tested is the privacy noise: whether the region's *cohort* measured
differently from the nation. Sampling variation of the cohorts is left out
unless ``sampling_sd`` (per region, on the difference) is given. With 48 regions
at ``alpha = 0.05`` about 2.4 regions are flagged by chance alone; pass
``adjust="bonferroni"`` to hold the chance of any false flag at ``alpha``.
Ratio estimators (a ``present`` metric, every metric under add/remove) use
the exact quantile of their linearised noise (two Laplace noises read from the
published noisy sum, count and scales:
:func:`~spatialdp.privacy.combined_noise.ratio_noise_scales`) plus the national
value's, as the monitor's alerts do.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp._validation import (
    check_alpha,
    check_axes,
    check_flag,
    check_number,
    check_text,
    fail,
)
from spatialdp.exceptions import InvalidInput
from spatialdp.privacy.combined_noise import (
    difference_threshold,
    noise_sum_quantiles,
    ratio_noise_scales,
)
from spatialdp.viz._report import (
    _check_report,
    _column_name,
    _labelled,
    _level_text,
    _meta,
    _numeric_column,
    _optional_text,
    _size,
    _suppressed,
)
from spatialdp.viz.patches import add_polygon_patch

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["SIGNIFICANCE_COLOURS", "plot_significance", "significance_table"]

#: Fill of each verdict on the map (a diverging pair, grey for "no evidence").
SIGNIFICANCE_COLOURS = {"above": "#b2182b", "below": "#2166ac",
                        "not different": "#f0f0f0", "suppressed": "#d9d9d9"}


def _national(national: Any, national_error_bar: float | None, alpha: float
              ) -> tuple[float, list[float]]:
    """Return the national value and the Laplace scales of its noise (none: known exactly).

    A mean's one scale; a ratio estimate's two linearised scales
    (``b_s / n``, ``|R| b_n / n``, :func:`~spatialdp.privacy.combined_noise.ratio_noise_scales`).
    """
    if hasattr(national, "noise_scales"):  # a MetricRelease (read by its attributes)
        if national.suppressed or not math.isfinite(national.value):
            raise InvalidInput("the national release is suppressed; there is no national "
                               "value to compare with")
        return float(national.value), national.noise_scales
    value = check_number(national, "national", fix="pass the national value (a number) or its "
                         "MetricRelease from aggregate_metric")
    if national_error_bar is None:
        return value, []
    bar = check_number(national_error_bar, "national_error_bar", low=0.0,
                       fix="pass the national value's (1 - alpha) error bar, or None")
    return value, [bar / math.log(1.0 / alpha)]


def significance_table(
    report: Any,
    national: Any,
    *,
    alpha: float = 0.05,
    national_error_bar: float | None = None,
    sampling_sd: Any = 0.0,
    adjust: str | None = None,
) -> pd.DataFrame:
    """Per region: difference from the national value, its noise threshold, the verdict.

    Parameters
    ----------
    report : GeoDataFrame
        A regional report frame (``value``, ``noise_std``, ``suppressed``...).
    national : float or MetricRelease
        The national value; a :class:`~spatialdp.federated.release.MetricRelease`
        (from :func:`~spatialdp.federated.aggregate_metric`) brings its noise scale.
    alpha : float
        Chance that a region equal to the national value is flagged.
    national_error_bar : float, optional
        The national value's ``(1 - alpha)`` Laplace error bar (with a plain number).
    sampling_sd : float or array, optional
        Sampling sd of each difference (default 0: noise only).
    adjust : {None, "bonferroni"}
        ``"bonferroni"`` tests each region at ``alpha / m`` (m published regions),
        so that the chance of any false flag is at most ``alpha``.

    Returns
    -------
    DataFrame
        Indexed like the report: ``difference``, ``threshold``, ``verdict``
        (``above``, ``below``, ``not different``, ``suppressed``).

    Examples
    --------
    >>> frame = pd.DataFrame({"value": [1.0, 1.5, 3.0], "error_bar": 0.3,
    ...                       "noise_std": 0.1, "cohort": 400, "reliability": "high",
    ...                       "suppressed": False}, index=["A", "B", "C"])
    >>> import geopandas as gpd, shapely
    >>> frame = gpd.GeoDataFrame(frame, geometry=[shapely.box(0, 0, 1, 1)] * 3)
    >>> significance_table(frame, 1.1).verdict.tolist()
    ['not different', 'above', 'above']
    """
    frame = _check_report(report, extra=["noise_std"])
    level = check_alpha(alpha)
    mode = None if adjust is None else check_text(adjust, "adjust")
    if mode not in (None, "bonferroni"):
        raise fail("adjust", adjust, "is not a correction", "pass None or 'bonferroni'")
    value, national_scales = _national(national, national_error_bar, level)
    values = _numeric_column(frame, "value", "the report")
    sd = _numeric_column(frame, "noise_std", "the report")
    published = ~_suppressed(frame) & np.isfinite(values) & np.isfinite(sd) & (sd > 0)
    m = int(published.sum())
    if m == 0:
        raise InvalidInput("the report publishes no region with a value and its noise; "
                           "nothing to compare")
    test_level = level / m if mode == "bonferroni" else level
    ratio = ("estimator" in frame.columns) & (frame["estimator"].astype(str) == "ratio"
                                              ).to_numpy() if "estimator" in frame.columns \
        else np.zeros(len(frame), dtype=bool)
    diff = values - value
    threshold = np.full(len(frame), np.nan)
    lap = published & ~ratio
    spread_all = np.broadcast_to(np.asarray(sampling_sd, dtype=np.float64), (len(frame),))
    if lap.any():
        scale = sd[lap] / math.sqrt(2.0)
        spread = spread_all[lap]
        if len(national_scales) == 1:
            threshold[lap] = difference_threshold(
                scale, np.full(scale.size, national_scales[0]), test_level, spread)
        elif national_scales:  # a ratio national value: its two noises, exactly summed
            rows = np.column_stack([scale, np.tile(national_scales, (scale.size, 1))])
            threshold[lap] = noise_sum_quantiles(rows, spread, test_level)
        else:
            threshold[lap] = _one_noise_threshold(scale, spread, test_level)
    rat = published & ratio
    if rat.any():  # the linearised ratio noise, the national value's, and sampling
        missing = [c for c in ("noisy_count", "sum_scale", "count_scale") if c not in frame]
        if missing:
            raise fail("report", f"a ratio-estimate frame without {missing}",
                       "cannot be tested", "pass report[metric] of a RegionalReport, "
                       "unmodified")
        scales = ratio_noise_scales(frame[rat])
        rows = np.column_stack([scales, np.tile(np.asarray(national_scales, dtype=np.float64),
                                                (len(scales), 1))])
        threshold[rat] = noise_sum_quantiles(rows, spread_all[rat], test_level)
    verdict = np.where(~published, "suppressed",
                       np.where(diff > threshold, "above",
                                np.where(diff < -threshold, "below", "not different")))
    return pd.DataFrame({"difference": diff, "threshold": threshold, "verdict": verdict},
                        index=frame.index)


def _one_noise_threshold(scale: NDArray[np.float64], spread: NDArray[np.float64],
                         level: float) -> NDArray[np.float64]:
    """``1 - level`` quantile of |Laplace(scale) + N(0, spread^2)|."""
    if not (spread > 0).any():
        return scale * math.log(1.0 / level)
    # A Laplace of a vanishing scale stands in for the exact national value.
    return difference_threshold(scale, scale * 1e-9, level, spread)


def plot_significance(
    report: Any,
    national: Any,
    *,
    alpha: float = 0.05,
    national_error_bar: float | None = None,
    sampling_sd: Any = 0.0,
    adjust: str | None = None,
    ax: Axes | None = None,
    projection: Any = "auto",
    title: str | None = None,
    legend: bool = True,
    figsize: tuple[float, float] = (10.0, 6.5),
) -> Axes:
    """Map the regions significantly above or below the national value.

    Red: above, blue: below, light grey: no evidence of a difference at
    ``alpha``, hatched grey: suppressed. See :func:`significance_table` for the
    test; the key gives the counts and the national value. A simulation's (or
    an unaccounted release's) title, the caller's own included, starts with
    ``[SIMULATION]`` (``[UNACCOUNTED]``).

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import pandas as pd
    >>> from spatialdp.datasets import us_states_partition
    >>> part = us_states_partition()
    >>> table = pd.DataFrame({"value": 1.0, "error_bar": 0.3, "noise_std": 0.1,
    ...                       "cohort": 400, "reliability": "high", "suppressed": False},
    ...                      index=part.region_ids)
    >>> table.loc["CO", "value"] = 3.0
    >>> ax = plot_significance(part.join(table), 1.0)
    >>> sorted(t.get_text() for t in ax.get_legend().get_texts())[0]
    'above (1)'
    """
    from matplotlib.patches import Patch, PathPatch

    from spatialdp.viz.maps import _region_path
    from spatialdp.viz.projection import (
        _name_crs,
        _new_map_axes,
        _project,
        _resolve_crs,
        _set_map_aspect,
    )

    frame = _check_report(report, extra=["noise_std"])
    size = _size(figsize, "figsize")
    legend = check_flag(legend, "legend")
    title = _optional_text(title, "title")
    table = significance_table(frame, national, alpha=alpha,
                               national_error_bar=national_error_bar,
                               sampling_sd=sampling_sd, adjust=adjust)
    check_axes(ax)
    crs = _resolve_crs(frame, projection)
    drawn = _project(frame, crs)
    if ax is None:
        ax = _new_map_axes(size)
    for i, geom in enumerate(drawn.geometry.values):
        path = _region_path(geom)
        if path is None:
            continue
        verdict = table.verdict.iloc[i]
        patch = PathPatch(path, facecolor=SIGNIFICANCE_COLOURS[verdict], edgecolor="white"
                          if verdict != "suppressed" else "#8a8a8a", linewidth=0.5,
                          hatch="///" if verdict == "suppressed" else None)
        patch.set_gid(f"{verdict}:{drawn.index[i]}")
        add_polygon_patch(ax, patch)
    ax.margins(0.02)
    ax.autoscale_view()
    _set_map_aspect(ax, drawn)
    _name_crs(ax, drawn.crs)
    meta = _meta(frame)
    level = check_alpha(alpha)
    value, _ = _national(national, national_error_bar, level)
    name = _column_name(meta, "value")
    test = f"alpha = {level:g}" + (" per map (Bonferroni)" if adjust else " per region")
    ax.set_title(_labelled(title if title is not None else
                           f"{name}: regions different from the national value\n"
                           f"national {value:.3g} · noise-aware test at {test}"
                           + (f" · {_level_text(meta)} error bars" if _level_text(meta) else ""),
                           meta),
                 fontsize=12, loc="left")
    if legend:
        counts = table.verdict.value_counts()
        # Counts of regions, exact: every region's verdict is drawn on the map.
        handles = [Patch(facecolor=SIGNIFICANCE_COLOURS[v], edgecolor="#8a8a8a",
                         hatch="///" if v == "suppressed" else None,
                         label=f"{v} ({int(counts.get(v, 0))})")
                   for v in ("above", "below", "not different", "suppressed")
                   if v != "suppressed" or counts.get(v, 0)]
        box = ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                        frameon=False, fontsize=8.5, title="vs national value",
                        title_fontsize=9, alignment="left", borderaxespad=0)
        box.set_gid("legend:significance")
    return ax
