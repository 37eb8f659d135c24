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

__version__ = "0.1.0"

__all__ = [
    "BudgetExceeded",
    "CRSError",
    "ClippingFailure",
    "CohortTooSmall",
    "InvalidCells",
    "InvalidInput",
    "InvalidSpec",
    "LedgerError",
    "PartitionMismatch",
    "SpatialDPError",
    "__version__",
]
