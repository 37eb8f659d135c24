"""Argument checks shared by the device module: numbers, columns, lon/lat ranges.

Each check names the offending argument, column or row, so a device build that
sends bad input is told which value to repair.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from spatialdp._validation import check_integer, check_real, fail
from spatialdp.exceptions import CRSError, InvalidInput

FloatArray = NDArray[np.float64]

#: Most confidence buckets of the calibration metrics (4 columns each per client).
MAX_CALIBRATION_BUCKETS = 1_000
#: Most regions a client may report in its coverage row.
MAX_COVERAGE_CELLS = 1_000_000


def _refuse_rows(bad: NDArray[np.bool_] | np.bool_, error: type[Exception],
                 message: Callable[[int], str]) -> None:
    """Raise ``error(message(first))`` when any row is ``bad``; ``first`` is the first one."""
    if bad.any():
        raise error(message(int(np.flatnonzero(bad)[0])))


def _is_real(value: object) -> bool:
    return isinstance(value, (numbers.Real, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_))


def _as_array(values: ArrayLike, column: str) -> NDArray[Any]:
    """Return the values as a numpy array; pandas' nullable numbers with NA become NaN."""
    if isinstance(values, (str, bytes)):
        raise InvalidInput(f"column {column!r} is not numeric (a string); give numbers")
    try:
        if isinstance(values, (pd.Series, pd.Index)) and pd.api.types.is_numeric_dtype(
                values.dtype) and not pd.api.types.is_bool_dtype(values.dtype):
            return values.to_numpy(dtype=np.float64, na_value=np.nan)
        return np.asarray(values)
    except (TypeError, ValueError):
        raise InvalidInput(f"column {column!r} is not numeric; give numbers") from None


def finite_column(values: ArrayLike, column: str, *, allow_bool: bool = False) -> FloatArray:
    """Return values as float64; refuse non-numeric, NaN and infinite values, naming the column.

    Strings (even ``"1.0"``), objects and complex numbers are not numeric; bools are
    refused too unless ``allow_bool`` (a 0/1 outcome or presence flag).
    """
    raw = _as_array(values, column)
    kind = raw.dtype.kind
    if kind == "b" and not allow_bool:
        raise InvalidInput(
            f"column {column!r} holds bools, not numbers; give numbers (True is not a value)")
    if kind == "O":
        flat = raw.ravel()
        ok = [_is_real(v) or (allow_bool and isinstance(v, (bool, np.bool_))) for v in flat]
        if not all(ok):
            first = ok.index(False)
            raise InvalidInput(
                f"column {column!r} is not numeric (row {first} holds "
                f"{type(flat[first]).__name__} {flat[first]!r:.40}); give numbers")
    elif kind not in "biuf":
        raise InvalidInput(
            f"column {column!r} is not numeric (dtype {raw.dtype}); give numbers")
    try:
        arr = raw.astype(np.float64)
    except (TypeError, ValueError, OverflowError):
        raise InvalidInput(f"column {column!r} is not numeric; give numbers") from None
    bad = ~np.isfinite(arr)
    _refuse_rows(bad, InvalidInput, lambda first: (
        f"column {column!r} has {int(bad.sum())} NaN or infinite values (first at row "
        f"{first}); drop or repair those examples on the device"
    ))
    return arr


def positive_number(value: Any, name: str) -> float:
    """Return a positive, finite float, or InvalidInput naming the argument.

    Python and numpy numbers are accepted; bools, strings and ``None`` are refused.
    """
    fix = "pass a positive, finite number"
    number = check_real(value, name, fix=fix)
    if not (math.isfinite(number) and number > 0):
        raise fail(name, value, "must be a positive, finite number", fix)
    return number


def _positive_int(value: Any, name: str, *, high: int | None = None) -> int:
    """Return a whole number ``>= 1`` (``5.0`` and numpy integers accepted), at most ``high``."""
    fix = "pass a whole number >= 1" + ("" if high is None else f" and <= {high:,}")
    number = check_integer(value, name, fix=fix)
    if number < 1:
        raise fail(name, value, "must be a positive integer", fix)
    if high is not None and number > high:
        raise fail(name, value, f"is above the limit <= {high:,}", fix)
    return number


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
