"""Argument checks of the accuracy functions, over the shared validation layer (private).

Kinds, scales, levels and counts of summed values are checked here with the
checks of :mod:`spatialdp._validation` (one message shape), and per-``m``
figures are computed once per distinct ``m`` by :func:`per_m`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal, TypeAlias

import numpy as np
from numpy.typing import ArrayLike, NDArray

from spatialdp._validation import check_alpha, check_choice, check_integer, check_positive, fail
from spatialdp.exceptions import InvalidInput
from spatialdp.privacy.calibration import MAX_SCALE

NoiseKind: TypeAlias = Literal["laplace", "gaussian", "discrete_laplace", "discrete_gaussian"]
NOISE_KINDS: tuple[str, ...] = ("laplace", "gaussian", "discrete_laplace", "discrete_gaussian")
FloatOrArray: TypeAlias = "float | NDArray[np.float64]"

#: Smallest miss probability of an error bar (beyond about 8 standard deviations).
MIN_ALPHA = 1e-15
#: Largest number of noisy values in one sum (the lattice numerics lose digits beyond).
MAX_M = 10**10
#: Largest standard deviation of a sum of lattice (discrete) draws whose figures are computed.
MAX_LATTICE_SD = 1e14

_M_FIX = f"pass the number of noisy values summed, a whole number in [1, {MAX_M:.0e}], e.g. m=1"


def check_kind(kind: Any) -> str:
    """Return a supported noise kind."""
    if not isinstance(kind, str):
        raise fail("kind", kind, f"is a {type(kind).__name__}, not a noise kind",
                   f"pass one of {', '.join(NOISE_KINDS)}")
    return check_choice(kind, "kind", NOISE_KINDS)


def check_scale(scale: Any, name: str = "scale") -> float:
    """Return a noise scale: finite, ``> 0`` and at most ``MAX_SCALE`` (1e15)."""
    return check_positive(scale, name, high=MAX_SCALE,
                          fix="pass the noise scale (b = laplace_scale(sensitivity, epsilon), "
                              "or sigma), at most 1e15")


def check_level(alpha: Any) -> float:
    """Return a miss probability: strictly between 0 and 1, at least ``MIN_ALPHA``."""
    a = check_alpha(alpha)
    if a < MIN_ALPHA:
        raise fail("alpha", alpha, f"is below the smallest supported level {MIN_ALPHA:g}",
                   "pass a level such as 0.05 (95% error bars)")
    return a


def is_array(m: Any) -> bool:
    """Return whether ``m`` is an array (ndarray, even 0-d, or a sequence), not a scalar."""
    if isinstance(m, (np.ndarray, list, tuple)):
        return True
    if isinstance(m, (str, bytes)):
        return False
    try:
        return bool(np.ndim(m) > 0)
    except (TypeError, ValueError):
        return True  # ragged: refused by check_m


def check_m(m: Any) -> tuple[NDArray[np.int64], bool]:
    """Return ``m`` as int64 (any shape) and whether it was a scalar."""
    if not is_array(m):
        return np.asarray(check_integer(m, "m", low=1, high=MAX_M, fix=_M_FIX)), True
    try:
        arr = np.asarray(m)
    except (TypeError, ValueError):
        raise InvalidInput(f"m is ragged or not an array of numbers; {_M_FIX}") from None
    if arr.dtype == np.bool_ or not (np.issubdtype(arr.dtype, np.integer)
                                     or np.issubdtype(arr.dtype, np.floating)):
        raise InvalidInput(f"m has dtype {arr.dtype}, not whole numbers; {_M_FIX}")
    f = arr.astype(np.float64)
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(f) | (f < 1) | (f != np.round(f)) | (f > MAX_M)
    if bad.any():
        first = int(np.flatnonzero(bad.ravel())[0])
        raise InvalidInput(
            f"m has {int(bad.sum())} entries that are not whole numbers in [1, {MAX_M:.0e}] "
            f"(first: {float(f.ravel()[first])!r} at flat index {first}); {_M_FIX}")
    return f.astype(np.int64), False


def per_m(m: ArrayLike, fn: Callable[[int], float], kind: str, scale: float) -> FloatOrArray:
    """Return ``fn(m)`` for a scalar ``m``, or ``fn`` per distinct entry of an array ``m``.

    For the lattice kinds the sum's standard deviation ``scale * sqrt(m)`` must be
    at most :data:`MAX_LATTICE_SD`.
    """
    arr, scalar = check_m(m)
    if kind.startswith("discrete_") and arr.size:
        top = int(arr.max())
        if scale * math.sqrt(top) > MAX_LATTICE_SD * (1 + 1e-12):  # rounding slack
            raise fail(
                "scale", scale,
                f"with m={top} gives a sum whose noise has standard deviation about "
                f"{scale * math.sqrt(top):.3g}, beyond {MAX_LATTICE_SD:g} where the discrete "
                "figures are computed",
                f"use kind={kind.removeprefix('discrete_')!r}: at this scale the discrete "
                "noise is indistinguishable from it")
    if scalar:
        return float(fn(int(arr)))
    uniq, inv = np.unique(arr, return_inverse=True)
    vals = np.array([fn(int(u)) for u in uniq], dtype=np.float64)
    return vals[inv.reshape(-1)].reshape(arr.shape)
