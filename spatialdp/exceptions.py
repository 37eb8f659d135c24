"""The spatialdp exception hierarchy.

Every refusal in spatialdp raises a subclass of :class:`SpatialDPError` whose
message names the offending value, the limit it broke and what to do about it.
The classes also derive from the matching builtin (``ValueError``,
``RuntimeError``) so generic handlers keep working.
"""

from __future__ import annotations

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
    "UnassignedPointsWarning",
]


class SpatialDPError(Exception):
    """Base class of every error spatialdp raises on purpose."""


class InvalidInput(SpatialDPError, ValueError):
    """An argument has a value spatialdp cannot use (NaN, out of range, empty...)."""


class CRSError(InvalidInput):
    """A GeoDataFrame has no CRS, or one that the operation cannot use."""


class InvalidCells(InvalidInput):
    """H3 cell ids are invalid, or mix resolutions where one resolution is needed."""


class PartitionMismatch(SpatialDPError, ValueError):
    """Two results are keyed by different partition (or spec) versions."""


class InvalidSpec(SpatialDPError, ValueError):
    """A metric or histogram specification cannot bound a client's contribution."""


class BudgetExceeded(SpatialDPError, RuntimeError):
    """A privacy charge would exceed the cap of its ledger line item."""


class CohortTooSmall(SpatialDPError, ValueError):
    """A cohort is below the publication floor; publishing would expose clients."""


class ClippingFailure(SpatialDPError, RuntimeError):
    """An aggregate lies beyond cap x cohort: clipping failed on some device."""


class LedgerError(SpatialDPError, RuntimeError):
    """The privacy ledger is misused (unknown epoch, second borrow, bad split...)."""


class UnassignedPointsWarning(UserWarning):
    """Most points of a batch fell outside every region of the partition.

    Usually lon and lat are swapped, or the points are in another CRS than the
    one they are labelled with. Silence it, when points far from the partition
    are expected, with ``warnings.simplefilter("ignore", UnassignedPointsWarning)``.
    """
