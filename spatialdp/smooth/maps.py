"""The raw map beside its smoothed version and the smoothed estimate's error.

:func:`plot_raw_vs_smoothed` draws three panels of one metric in the same
equal-area projection: the published (raw) values, the small-area estimates
(EBLUPs) on the same colour scale, and the root mean squared error of the
estimates (``sqrt(mse)``). Post-processing of published values: drawing it
charges nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from spatialdp._validation import check_flag, fail
from spatialdp.federated.regional import RegionalReport
from spatialdp.smooth.estimate import MODELS, SmallAreaEstimates
from spatialdp.viz.maps import plot_uncertainty_choropleth, plotting_crs, shared_colour_range

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_raw_vs_smoothed"]


def plot_raw_vs_smoothed(
    report: RegionalReport | pd.DataFrame,
    smoothed: SmallAreaEstimates,
    *,
    cmap: Any = "viridis",
    rmse_cmap: Any = "Oranges",
    projection: Any = "auto",
    robust: bool | None = False,
    figsize: tuple[float, float] = (22.0, 7.0),
    legend: bool = True,
) -> Figure:
    """Draw the raw map, the smoothed map and the smoothed estimates' RMSE side by side.

    The two value panels share one colour scale (from the published raw
    values and the smoothed estimates pooled, see
    :func:`~spatialdp.viz.maps.shared_colour_range`), so a colour means the
    same value on both; both fade by reliability (the smoothed map's from the
    MSE). Regions the model estimated with no published value are outlined
    as ``modelled``. All panels are drawn in one equal-area projection
    (:func:`~spatialdp.viz.maps.plotting_crs`), with no lon/lat axes.

    Parameters
    ----------
    report : RegionalReport or DataFrame
        The report that was smoothed (its frame of ``smoothed.metric``), or that frame.
    smoothed : SmallAreaEstimates
        The result of :func:`~spatialdp.smooth.small_area_estimates` on ``report``.
    cmap, rmse_cmap : str or Colormap
        Colour maps of the values and of the RMSE.
    projection : "auto", None or a CRS
        As for :func:`~spatialdp.viz.maps.plot_uncertainty_choropleth`.
    robust : bool, optional
        How the shared colour range treats far-out values (see
        :func:`~spatialdp.viz.maps.shared_colour_range`); default ``False``:
        the full range, so that regions far from the rest (often the news)
        keep their colour. Values beyond the range are drawn marked as out of
        range.
    figsize : (float, float)
        Size of the figure.
    legend : bool
        Draw each panel's key.

    Returns
    -------
    matplotlib.figure.Figure
        Three axes: ``gid`` ``"panel:raw"``, ``"panel:smoothed"`` and ``"panel:rmse"``.

    Raises
    ------
    InvalidInput
        ``smoothed`` is not a SmallAreaEstimates, or its regions or metric are
        not the report's.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> from spatialdp.datasets import synthetic_fleet, us_states_partition
    >>> from spatialdp.federated import MetricSpec, device_report, regional_report
    >>> from spatialdp.privacy import Simulation
    >>> from spatialdp.smooth import small_area_estimates
    >>> states = us_states_partition()
    >>> fleet = synthetic_fleet(20_000, rng=0)
    >>> rng = np.random.default_rng(1)
    >>> examples = pd.DataFrame({"client_id": fleet.device_id, "region_id": fleet.region_id,
    ...                          "loss": rng.uniform(0, 2, len(fleet))})
    >>> spec = MetricSpec("loss", 0.0, 4.0)
    >>> report = regional_report(device_report(examples, loss_spec=spec, partition=states),
    ...                          states, [spec], epsilon=0.5, target=Simulation(rng=0),
    ...                          min_cohort=100)
    >>> smooth = small_area_estimates(report, "loss", include_suppressed=True,
    ...                               client_variance=1 / 3)
    >>> fig = plot_raw_vs_smoothed(report, smooth)
    >>> [ax.get_gid() for ax in fig.axes if ax.get_gid()]
    ['panel:raw', 'panel:smoothed', 'panel:rmse']
    >>> plt.close(fig)
    """
    import matplotlib.pyplot as plt

    raw = _raw_frame(report, smoothed)
    legend = check_flag(legend, "legend")
    frame = smoothed.frame
    vmin, vmax = shared_colour_range([raw, frame], "value", robust)
    crs = plotting_crs(raw, projection)
    fig, (ax_raw, ax_smooth, ax_rmse) = plt.subplots(1, 3, figsize=figsize)
    raw_title, smooth_title = _value_titles(raw, smoothed)
    plot_uncertainty_choropleth(raw, "value", ax=ax_raw, cmap=cmap, legend=legend,
                                projection=crs, vmin=vmin, vmax=vmax, title=raw_title)
    plot_uncertainty_choropleth(frame, "value", ax=ax_smooth, cmap=cmap, legend=legend,
                                projection=crs, vmin=vmin, vmax=vmax, title=smooth_title)
    plot_uncertainty_choropleth(frame, "rmse", ax=ax_rmse, cmap=rmse_cmap, legend=legend,
                                projection=crs, show_reliability=False, robust=False,
                                title=_rmse_title(smoothed))
    for ax, name in ((ax_raw, "raw"), (ax_smooth, "smoothed"), (ax_rmse, "rmse")):
        ax.set_gid(f"panel:{name}")
    fig.suptitle(f"{smoothed.metric}: published values | small-area estimates (one colour "
                 "scale) | their RMSE\npost-processing of the published values, no ε charged",
                 fontsize=13)
    fig.subplots_adjust(top=0.80)   # room for the two-line panel titles under the suptitle
    return fig


def _raw_frame(report: Any, smoothed: Any) -> pd.DataFrame:
    """Return the report's frame of the smoothed metric, checking it matches ``smoothed``."""
    if not isinstance(smoothed, SmallAreaEstimates):
        raise fail("smoothed", smoothed, "is not a SmallAreaEstimates",
                   "pass the result of spatialdp.smooth.small_area_estimates(report, ...)")
    if isinstance(report, RegionalReport):
        if smoothed.metric not in report.frames:
            raise fail("smoothed", smoothed.metric, "is a metric the report does not have",
                       f"smooth one of {sorted(report.frames)}")
        raw = report[smoothed.metric]
    elif isinstance(report, pd.DataFrame):
        raw = report
    else:
        raise fail("report", report, "is not a RegionalReport or a report frame",
                   "pass the report that was smoothed")
    if not raw.index.equals(smoothed.frame.index):
        raise fail("smoothed", f"{len(smoothed.frame)} regions",
                   f"does not have the report's {len(raw)} regions in its order",
                   "pass the estimates smoothed from this report")
    if not np.array_equal(raw["value"].to_numpy(dtype=float),
                          smoothed.frame["direct"].to_numpy(dtype=float), equal_nan=True):
        raise fail("smoothed", smoothed.metric, "was not smoothed from this report's values",
                   "pass the estimates smoothed from this report")
    return raw


def _value_titles(raw: pd.DataFrame, smoothed: SmallAreaEstimates) -> tuple[str, str]:
    """Return the titles of the raw and the smoothed panels (short: three panels share a row)."""
    labels = smoothed.frame["label"].value_counts()
    hidden = int(np.asarray(raw["suppressed"], dtype=bool).sum())
    modelled = int(labels.get("modelled", 0))
    raw_title = (f"published {smoothed.metric}\n{hidden} of {len(raw)} regions suppressed, "
                 "faded = less reliable")
    smooth_title = (f"smoothed {smoothed.metric} ({MODELS[smoothed.model]}): no ε charged\n"
                    f"{modelled} regions modelled (no published value, outlined); faded by "
                    "the MSE")
    return raw_title, smooth_title


def _rmse_title(smoothed: SmallAreaEstimates) -> str:
    """Return the RMSE panel's title: what it is and how it was estimated."""
    return (f"RMSE of the smoothed {smoothed.metric} (√MSE, {smoothed.method})\n"
            "larger means less certain; modelled regions outlined")
