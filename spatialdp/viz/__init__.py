"""Maps and charts whose uncertainty is visible: choropleths, time series, folium maps."""

from __future__ import annotations

from spatialdp.viz.clip import plot_clip_tradeoff
from spatialdp.viz.maps import explore_report, plot_uncertainty_choropleth, save_figure
from spatialdp.viz.timeseries import cohort_label, plot_region_timeseries

__all__ = [
    "cohort_label",
    "explore_report",
    "plot_clip_tradeoff",
    "plot_region_timeseries",
    "plot_uncertainty_choropleth",
    "save_figure",
]
