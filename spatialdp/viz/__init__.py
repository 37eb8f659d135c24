"""Maps and charts whose uncertainty is visible: choropleths, time series, folium maps."""

from __future__ import annotations

from spatialdp.viz.bivariate import plot_bivariate
from spatialdp.viz.classify import classify_report
from spatialdp.viz.clip import plot_clip_tradeoff
from spatialdp.viz.maps import (
    explore_report,
    plot_uncertainty_choropleth,
    plotting_crs,
    save_figure,
)
from spatialdp.viz.significance import plot_significance, significance_table
from spatialdp.viz.timeseries import cohort_label, plot_region_timeseries
from spatialdp.viz.uncertainty import plot_moe_companion

__all__ = [
    "classify_report",
    "cohort_label",
    "explore_report",
    "plot_bivariate",
    "plot_clip_tradeoff",
    "plot_moe_companion",
    "plot_region_timeseries",
    "plot_significance",
    "plot_uncertainty_choropleth",
    "plotting_crs",
    "save_figure",
    "significance_table",
]
