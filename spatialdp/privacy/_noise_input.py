"""Input checks and output shaping shared by the noise samplers (private helpers).

Values and counts are validated and densified here (sparse input over a public
domain becomes a dense array: noise goes on EVERY entry, see
:mod:`spatialdp.privacy.noise`); scalar input gives scalar output.
"""

from __future__ import annotations

import math
from typing import Any, TypeAlias

import numpy as np
import scipy.sparse
from numpy.typing import NDArray

from spatialdp.exceptions import InvalidInput

SeedLike: TypeAlias = "np.random.Generator | int | None"
Sparse: TypeAlias = "scipy.sparse.sparray | scipy.sparse.spmatrix"
ScalarInt: TypeAlias = "int | np.integer[Any]"
ScalarReal: TypeAlias = "float | int | np.floating[Any] | np.integer[Any]"

MAX_COUNT = 2**53  # |count| limit: int64 stays exact after adding noise
MAX_GAUSS_SIGMA = 1e15


def check_positive(value: Any, name: str, fix: str, upper: float = math.inf) -> float:
    """Return ``value`` as a float if it is finite, > 0 and <= upper, else refuse."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InvalidInput(f"{name}={value!r} is not a number; {fix}") from None
    if isinstance(value, bool) or not math.isfinite(v) or v <= 0:
        raise InvalidInput(f"{name}={value!r} must be a finite number > 0; {fix}")
    if v > upper:
        raise InvalidInput(f"{name}={value!r} exceeds the supported maximum {upper:g}; {fix}")
    return v


def _dense(x: Any, name: str) -> NDArray[Any]:
    """Array view of ``x``; scipy.sparse input is densified (noise goes on every entry)."""
    if scipy.sparse.issparse(x):
        return np.asarray(x.toarray())
    arr = np.asarray(x)
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise InvalidInput(
            f"{name} has dtype {arr.dtype}, not a numeric array; pass numbers "
            "(a numpy array, list, pandas Series or scipy.sparse vector)"
        )
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise InvalidInput(f"{name} is complex ({arr.dtype}); pass real values")
    return arr


def as_counts(x: Any, name: str = "counts") -> NDArray[np.int64]:
    """Validate integer counts (integer dtype, bool, or integral floats) as int64."""
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
        return arr.astype(np.int64)
    f = arr.astype(np.float64)
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
    """Validate finite real values as float64."""
    arr = _dense(x, name).astype(np.float64)
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.flatnonzero(bad.ravel())[0])
        raise InvalidInput(
            f"{name} must be finite, got {float(arr.ravel()[i])!r} at flat index {i}; "
            "drop or impute NaN/inf before release (a non-finite value has unbounded "
            "sensitivity)"
        )
    return arr


def is_scalar(x: Any) -> bool:
    """Python/numpy scalars give scalar output; arrays (even 0-d) and sparse give arrays."""
    return not isinstance(x, np.ndarray) and not scipy.sparse.issparse(x) and np.ndim(x) == 0


def int_out(arr: NDArray[np.int64], x: Any) -> Any:
    return int(arr) if is_scalar(x) else arr


def float_out(arr: NDArray[np.float64], x: Any) -> Any:
    return float(arr) if is_scalar(x) else arr


def as_generator(rng: SeedLike) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, (int, np.integer)) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise InvalidInput(
        f"rng={rng!r} is not a numpy Generator, an int seed or None; pass e.g. "
        "numpy.random.default_rng(0)"
    )


SCALE_FIX = "use scale = sensitivity / epsilon (see LaplaceMechanism)"
SIGMA_FIX = "use sigma = sensitivity / sqrt(2 * rho) (see GaussianMechanism)"
