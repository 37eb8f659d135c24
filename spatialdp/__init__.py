"""spatialdp: differential privacy for federated spatial models."""

from __future__ import annotations

from spatialdp.exceptions import (
    BudgetExceeded,
    ClippingFailure,
    CohortTooSmall,
    CRSError,
    InvalidCells,
    InvalidInput,
    InvalidSpec,
    LedgerError,
    PartitionMismatch,
    SpatialDPError,
)
from spatialdp.federated import (
    HistogramSpec,
    MetricSpec,
    aggregate_metric,
    device_report,
    regional_report,
)
from spatialdp.geo import Partition
from spatialdp.privacy import LaplaceMechanism, PrivacyLedger

__version__ = "0.1.0"

__all__ = [
    "BudgetExceeded",
    "CRSError",
    "ClippingFailure",
    "CohortTooSmall",
    "HistogramSpec",
    "InvalidCells",
    "InvalidInput",
    "InvalidSpec",
    "LaplaceMechanism",
    "LedgerError",
    "MetricSpec",
    "Partition",
    "PartitionMismatch",
    "PrivacyLedger",
    "SpatialDPError",
    "__version__",
    "aggregate_metric",
    "device_report",
    "regional_report",
]
