"""Private federated metrics: device-side bounded metrics, noise-once aggregation,
regional reports on geometries, alerts that respect error bars."""

from __future__ import annotations

from spatialdp.federated.aggregate import (
    aggregate_histogram,
    aggregate_metric,
    secure_sum,
    simulation_noise,
)
from spatialdp.federated.device import DEVICE_MODULE_VERSION, device_report
from spatialdp.federated.health import RoundHealth, round_health
from spatialdp.federated.incidents import (
    Incident,
    persistently_empty_buckets,
    ratio_pinned_at_clip,
    stale_clip_bound,
    suspiciously_good_region,
)
from spatialdp.federated.metrics import (
    HistogramSpec,
    MetricRegistry,
    MetricSpec,
    calibrate_clip,
    clip_tradeoff,
    min_cohort_for,
    plot_clip_tradeoff,
)
from spatialdp.federated.monitor import compare_releases, compare_reports, drift
from spatialdp.federated.regional import RegionalReport, regional_report
from spatialdp.federated.release import HistogramRelease, MetricRelease, predicted_error_bar

__all__ = [
    "DEVICE_MODULE_VERSION",
    "HistogramRelease",
    "HistogramSpec",
    "Incident",
    "MetricRegistry",
    "MetricRelease",
    "MetricSpec",
    "RegionalReport",
    "RoundHealth",
    "aggregate_histogram",
    "aggregate_metric",
    "calibrate_clip",
    "clip_tradeoff",
    "compare_releases",
    "compare_reports",
    "device_report",
    "drift",
    "min_cohort_for",
    "persistently_empty_buckets",
    "plot_clip_tradeoff",
    "predicted_error_bar",
    "ratio_pinned_at_clip",
    "regional_report",
    "round_health",
    "secure_sum",
    "simulation_noise",
    "stale_clip_bound",
    "suspiciously_good_region",
]
