"""Every error and warning class spatialdp raises.

Every refusal in spatialdp raises a subclass of :class:`SpatialDPError` whose
message names the offending value, the limit it broke and what to do about it.
The classes also derive from the matching builtin (``ValueError``,
``RuntimeError``, ``TypeError``) so generic handlers keep working. Warnings
derive from ``UserWarning``.

:class:`NotFitted` also derives from scikit-learn's ``NotFittedError``; it is
built on first use, so that importing this module never imports scikit-learn.

Examples
--------
>>> from spatialdp.exceptions import InvalidInput
>>> issubclass(InvalidInput, ValueError)
True
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

__all__ = [
    "BudgetExceeded",
    "BudgetSplitWarning",
    "CRSError",
    "ClippingFailure",
    "CohortTooSmall",
    "FeasibilityWarning",
    "InvalidCard",
    "InvalidCells",
    "InvalidInput",
    "InvalidSpec",
    "LedgerError",
    "NotFitted",
    "NotNumeric",
    "PartitionMismatch",
    "ReprojectedLayerWarning",
    "SmallAreaModelWarning",
    "SpatialDPError",
    "StateFileError",
    "UnassignedPointsWarning",
    "UninformativeReleaseWarning",
]


class SpatialDPError(Exception):
    """Base class of every error spatialdp raises on purpose."""


class InvalidInput(SpatialDPError, ValueError):
    """An argument has a value spatialdp cannot use (NaN, out of range, empty...)."""


class CRSError(InvalidInput):
    """A GeoDataFrame has no CRS, or one that the operation cannot use."""


class InvalidCard(InvalidInput):
    """A model card that fails its schema or its content digest."""


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


class UninformativeReleaseWarning(UserWarning):
    """The predicted error bar is wider than the metric's whole clip range."""


class NotNumeric(InvalidInput, TypeError):
    """An object array holds entries that are not numbers (a TypeError, as for numpy)."""


class FeasibilityWarning(UserWarning):
    """No private estimator is predicted to beat predicting zero."""


class BudgetSplitWarning(UserWarning):
    """The training/evaluation split is outside the range that usually works (10%-40%)."""


class StateFileError(InvalidInput):
    """A participation state file is truncated, edited, or not a state file."""


class UnassignedPointsWarning(UserWarning):
    """Most points of a batch fell outside every region of the partition.

    Usually lon and lat are swapped, or the points are in another CRS than the
    one they are labelled with. Silence it, when points far from the partition
    are expected, with ``warnings.simplefilter("ignore", UnassignedPointsWarning)``.
    """


class ReprojectedLayerWarning(UserWarning):
    """A layer in another CRS was reprojected to lon/lat EPSG:4326 for the geography.

    Its vertices are transformed and its edges are then straight lines in lon/lat,
    so a long straight edge of a projected layer moves slightly. Pass layers already
    converted with ``.to_crs(4326)``, or silence it with
    ``warnings.simplefilter("ignore", ReprojectedLayerWarning)``.
    """


class SmallAreaModelWarning(UserWarning):
    """A small-area model's assumptions visibly fail (outlying residuals, spatial pattern)."""


@cache
def _not_fitted() -> type:
    from sklearn.exceptions import NotFittedError

    class NotFitted(InvalidInput, NotFittedError):
        """``predict``/``score`` before ``fit``: spatialdp's refusal and scikit-learn's error."""

    NotFitted.__module__ = __name__
    NotFitted.__qualname__ = "NotFitted"
    return NotFitted


if TYPE_CHECKING:
    class NotFitted(InvalidInput):
        """``predict``/``score`` before ``fit``: spatialdp's refusal and scikit-learn's error."""
else:
    def __getattr__(name: str) -> Any:
        if name == "NotFitted":
            return _not_fitted()
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
