"""Private federated metrics: device-side bounded metrics, noise-once aggregation,
regional reports on geometries, alerts that respect error bars.
"""  # noqa: D205

from __future__ import annotations

from typing import TYPE_CHECKING

from spatialdp._lazy import attach

if TYPE_CHECKING:  # the public names, imported on first use (spatialdp._lazy)
    from spatialdp.exceptions import UninformativeReleaseWarning
    from spatialdp.federated.aggregate import aggregate_histogram, aggregate_metric
    from spatialdp.federated.coverage import CoverageRelease, release_coverage
    from spatialdp.federated.device import (
        DEVICE_MODULE_VERSION,
        calibration_specs,
        count_bucket_spec,
        coverage_spec,
        device_report,
        track_ratio_spec,
    )
    from spatialdp.federated.group_sums import SecureSum, check_clipping, secure_sum
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
    )
    from spatialdp.federated.monitor import compare_releases, compare_reports, drift
    from spatialdp.federated.regional import RegionalReport, regional_report
    from spatialdp.federated.release import HistogramRelease, MetricRelease, predicted_error_bar
    from spatialdp.federated.report_files import read_report

__getattr__, __dir__ = attach(__name__, __file__)

__all__ = [
    "DEVICE_MODULE_VERSION",
    "CoverageRelease",
    "HistogramRelease",
    "HistogramSpec",
    "Incident",
    "MetricRegistry",
    "MetricRelease",
    "MetricSpec",
    "RegionalReport",
    "RoundHealth",
    "SecureSum",
    "UninformativeReleaseWarning",
    "aggregate_histogram",
    "aggregate_metric",
    "calibrate_clip",
    "calibration_specs",
    "check_clipping",
    "clip_tradeoff",
    "compare_releases",
    "compare_reports",
    "count_bucket_spec",
    "coverage_spec",
    "device_report",
    "drift",
    "min_cohort_for",
    "persistently_empty_buckets",
    "predicted_error_bar",
    "ratio_pinned_at_clip",
    "read_report",
    "regional_report",
    "release_coverage",
    "round_health",
    "secure_sum",
    "stale_clip_bound",
    "suspiciously_good_region",
    "track_ratio_spec",
]
