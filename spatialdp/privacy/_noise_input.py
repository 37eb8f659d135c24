"""Input checks and output shaping shared by the noise samplers (private helpers).

Scales are checked by :func:`spatialdp._validation.check_scale`. Values and
counts are validated and densified here (sparse input over a public domain
becomes a dense array: noise goes on EVERY entry, see
:mod:`spatialdp.privacy.release`); scalar input gives scalar output, arrays
(0-d included) give arrays. Empty arrays are accepted and give empty arrays.
Boolean ARRAYS are 0/1 indicators; a lone ``True`` is refused (not a count).
"""

from __future__ import annotations

import numbers
import sys
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
from numpy.typing import NDArray

from spatialdp._validation import check_number, fail
from spatialdp.exceptions import InvalidInput

if TYPE_CHECKING:  # scipy is slow to import; _is_sparse needs it only once it is loaded
    import scipy.sparse

Sparse: TypeAlias = "scipy.sparse.sparray | scipy.sparse.spmatrix"
ScalarInt: TypeAlias = "int | np.integer[Any]"
ScalarReal: TypeAlias = "float | int | np.floating[Any] | np.integer[Any]"

MAX_COUNT = 2**53  # |count| limit: int64 stays exact after adding noise
MAX_VALUE = 1e300  # |value| limit: a noisy value stays finite

_VALUES_FIX = "pass numbers (a numpy array, list, pandas Series or scipy.sparse array)"


def _is_sparse(x: Any) -> bool:
    """Return whether ``x`` is a scipy.sparse array or matrix.

    Nothing can be one unless :mod:`scipy.sparse` is loaded, so a process that
    never imported scipy does not import it here (it takes about 0.1 s).
    """
    sparse = sys.modules.get("scipy.sparse")
    return sparse is not None and bool(sparse.issparse(x))


def _dense(x: Any, name: str) -> NDArray[Any]:
    """Return an array view of ``x``; scipy.sparse input is densified (noise on every entry)."""
    if _is_sparse(x):
        return np.asarray(x.toarray())
    if isinstance(x, (bool, np.bool_)):
        raise fail(name, x, "is a bool, not a number", _VALUES_FIX)
    if isinstance(x, (str, bytes)):
        raise fail(name, x, "is a string, not numbers", _VALUES_FIX)
    if isinstance(x, (numbers.Real, Decimal)) and not isinstance(x, (np.generic, int, float)):
        x = check_number(x, name, fix=_VALUES_FIX)  # Fraction, Decimal: as a float
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError):
        raise InvalidInput(f"{name} is ragged or not an array of numbers; {_VALUES_FIX}") from None
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise InvalidInput(f"{name} is complex ({arr.dtype}); pass real values")
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise InvalidInput(f"{name} has dtype {arr.dtype}, not a numeric array; {_VALUES_FIX}")
    return arr


def as_counts(x: Any, name: str = "counts") -> NDArray[np.int64]:
    """Return integer counts (integer dtype, bool array, or integral floats) as int64."""
    arr = _dense(x, name)
    if arr.dtype == np.bool_:
        return arr.astype(np.int64)
    if np.issubdtype(arr.dtype, np.integer):
        if arr.size and (
            arr.max() > MAX_COUNT or (arr.dtype.kind == "i" and arr.min() < -MAX_COUNT)
        ):
            bad = int(arr.flat[int(np.argmax(np.abs(arr.astype(np.float64))))])
            raise InvalidInput(
                f"{name} contains {bad}, beyond the supported magnitude 2**53; "
                "rescale the counts (e.g. to thousands) before adding noise"
            )
        return arr.astype(np.int64, copy=False)  # read only by the callers: no copy needed
    f = arr.astype(np.float64)
    with np.errstate(invalid="ignore"):
        bad_mask = ~np.isfinite(f) | (f != np.round(f)) | (np.abs(f) > MAX_COUNT)
    if bad_mask.any():
        i = int(np.flatnonzero(bad_mask.ravel())[0])
        raise InvalidInput(
            f"{name} must be finite integers for discrete noise, got {float(f.ravel()[i])!r} "
            f"at flat index {i} (limit |count| <= 2**53); round or aggregate to integer "
            "counts, or use the continuous (non-discrete) mechanism"
        )
    return f.astype(np.int64)


def as_values(x: Any, name: str = "values") -> NDArray[np.float64]:
    """Return finite real values (``|value| <= 1e300``) as float64 (no copy if already so)."""
    if type(x) is np.ndarray and x.dtype == np.float64:  # what _dense would return, faster
        arr = x
    else:
        arr = _dense(x, name).astype(np.float64, copy=False)  # read only by the callers
    # two reductions, no temporary; a NaN makes both bounds NaN and fails the test
    if not arr.size or (-MAX_VALUE <= float(arr.min()) and float(arr.max()) <= MAX_VALUE):
        return arr
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(arr) | (np.abs(arr) > MAX_VALUE)
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        v = float(arr.ravel()[i])
        if np.isfinite(v):
            raise InvalidInput(
                f"{name} must be at most {MAX_VALUE:g} in magnitude, got {v!r} at flat index "
                f"{i}; rescale the values")
        raise InvalidInput(
            f"{name} must be finite, got {v!r} at flat index {i}; drop or impute NaN/inf "
            "before release (a non-finite value has unbounded sensitivity)"
        )
    return arr


def is_scalar(x: Any) -> bool:
    """Return whether ``x`` is a scalar (output scalar); arrays (even 0-d) and sparse are not."""
    return not isinstance(x, np.ndarray) and not _is_sparse(x) and np.ndim(x) == 0


def int_out(arr: NDArray[np.int64], x: Any) -> Any:
    """Return ``arr`` as an int for scalar input ``x``, else as is."""
    return int(arr) if is_scalar(x) else arr


def float_out(arr: NDArray[np.float64], x: Any) -> Any:
    """Return ``arr`` as a float for scalar input ``x``, else as is."""
    return float(arr) if is_scalar(x) else arr
