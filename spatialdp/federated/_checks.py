"""Argument checks shared by the device module: numbers, columns, lon/lat ranges.

Each check names the offending argument, column or row, so a device build that
sends bad input is told which value to repair.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from spatialdp.exceptions import CRSError, InvalidInput

FloatArray = NDArray[np.float64]


def _refuse_rows(bad: NDArray[np.bool_] | np.bool_, error: type[Exception],
                 message: Callable[[int], str]) -> None:
    """Raise ``error(message(first))`` when any row is ``bad``; ``first`` is the first one."""
    if bad.any():
        raise error(message(int(np.flatnonzero(bad)[0])))


def finite_column(values: ArrayLike, column: str) -> FloatArray:
    """Values as float64; refuse non-numeric, NaN and infinite values, naming the column."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInput(f"column {column!r} is not numeric; give numbers") from None
    bad = ~np.isfinite(arr)
    _refuse_rows(bad, InvalidInput, lambda first: (
        f"column {column!r} has {int(bad.sum())} NaN or infinite values (first at row "
        f"{first}); drop or repair those examples on the device"
    ))
    return arr


def positive_number(value: Any, name: str) -> float:
    """Return a positive, finite float, or InvalidInput naming the argument."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"{name}={value!r} is not a number") from None
    if not (np.isfinite(number) and number > 0):
        raise InvalidInput(f"{name}={value!r} must be a positive, finite number")
    return number


def _positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InvalidInput(f"{name}={value!r} must be a positive integer")
    return int(value)


def _check_range(lon: FloatArray, lat: FloatArray, what: str) -> None:
    """Refuse latitudes beyond 90 and longitudes beyond 180 degrees (projected values)."""
    _check_axis(lat, 90.0, "latitude", what)
    _check_axis(lon, 180.0, "longitude", what)


def _check_axis(values: FloatArray, limit: float, name: str, what: str) -> None:
    _refuse_rows(np.abs(values) > limit, CRSError, lambda first: (
        f"{what}: {name} {values[first]} at row {first} is outside "
        f"[-{limit:g}, {limit:g}]; the values look projected: give lon/lat "
        "(EPSG:4326), or a GeoSeries carrying its CRS"
    ))
