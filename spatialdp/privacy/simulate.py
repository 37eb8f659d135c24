"""The simulation random path: seeded numpy noise for measuring error - never publish.

spatialdp has two random paths that never mix.

**Release** (:mod:`spatialdp.privacy.release`): noise for publication from OS
entropy, with no seed argument anywhere.

**Simulation** (this module): each ``simulate_*`` function draws the same
distribution as its ``release_*`` counterpart, from a seedable
:class:`numpy.random.Generator` and fast floating-point samplers, so that error
can be measured, tests can be reproduced and synthetic fleets can be run.
``rng=`` (keyword only) is a Generator (its stream continues), a whole-number
seed ``>= 0`` or ``None`` (fresh OS entropy), checked by
:func:`spatialdp._random.as_generator`; bools, floats, strings and
``RandomState`` are refused. The output of a seeded generator is reproducible
by anyone who knows or guesses the seed: never publish it.

Limits: scales ``0 < scale <= 1e15``; counts ``|count| <= 2**53``; values
``|value| <= 1e300``. Every sampler loop is bounded (see
:data:`MAX_ROUNDS`).

Examples
--------
>>> a = simulate_discrete_laplace([5, 5], 1.0, rng=3)
>>> bool((a == simulate_discrete_laplace([5, 5], 1.0, rng=3)).all())
True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from spatialdp._random import RandomLike, as_generator
from spatialdp._validation import check_scale
from spatialdp.exceptions import SpatialDPError
from spatialdp.privacy._noise_input import (
    ScalarInt,
    ScalarReal,
    Sparse,
    as_counts,
    as_values,
    float_out,
    int_out,
)
from spatialdp.privacy.exact import MAX_ROUNDS

__all__ = [
    "MAX_ROUNDS",
    "simulate_discrete_gaussian",
    "simulate_discrete_laplace",
    "simulate_gaussian",
    "simulate_laplace",
]


@overload
def simulate_laplace(values: ScalarReal, scale: float, *, rng: RandomLike = None) -> float: ...
@overload
def simulate_laplace(
    values: ArrayLike | Sparse, scale: float, *, rng: RandomLike = None
) -> NDArray[np.float64]: ...


def simulate_laplace(values: Any, scale: float, *, rng: RandomLike = None) -> Any:
    """Add Laplace(scale) noise with numpy - for simulation only, never publish.

    Parameters
    ----------
    values : array_like of float or scipy.sparse vector/array
        Finite values.
    scale : float
        Noise scale ``b`` (finite, > 0).
    rng : numpy.random.Generator, int or None
        Generator or seed (keyword only).

    Returns
    -------
    numpy.ndarray of float64, or float

    Examples
    --------
    >>> a = simulate_laplace([0.0, 0.0], 1.0, rng=7)
    >>> bool((a == simulate_laplace([0.0, 0.0], 1.0, rng=7)).all())
    True
    """
    b = check_scale(scale, "scale")
    arr = as_values(values)
    return float_out(arr + as_generator(rng).laplace(0.0, b, size=arr.shape), values)


@overload
def simulate_gaussian(values: ScalarReal, sigma: float, *, rng: RandomLike = None) -> float: ...
@overload
def simulate_gaussian(
    values: ArrayLike | Sparse, sigma: float, *, rng: RandomLike = None
) -> NDArray[np.float64]: ...


def simulate_gaussian(values: Any, sigma: float, *, rng: RandomLike = None) -> Any:
    """Add N(0, sigma**2) noise with numpy - for simulation only, never publish.

    Parameters
    ----------
    values : array_like of float or scipy.sparse vector/array
        Finite values.
    sigma : float
        Noise standard deviation (finite, > 0, at most 1e15).
    rng : numpy.random.Generator, int or None
        Generator or seed (keyword only).

    Returns
    -------
    numpy.ndarray of float64, or float

    Examples
    --------
    >>> simulate_gaussian([1.0, 2.0], 0.5, rng=1).shape
    (2,)
    """
    s = check_scale(sigma, "sigma")
    arr = as_values(values)
    return float_out(arr + as_generator(rng).normal(0.0, s, size=arr.shape), values)


def _sim_dlap(gen: np.random.Generator, scale: float, size: int) -> NDArray[np.int64]:
    """Return discrete Laplace draws as a difference of two geometrics (numpy, floats)."""
    p = -math.expm1(-1.0 / scale)  # 1 - exp(-1/scale)
    g1 = gen.geometric(p, size=size)
    g2 = gen.geometric(p, size=size)
    return (g1 - g2).astype(np.int64)


@overload
def simulate_discrete_laplace(
    counts: ScalarInt, scale: float, *, rng: RandomLike = None
) -> int: ...
@overload
def simulate_discrete_laplace(
    counts: ArrayLike | Sparse, scale: float, *, rng: RandomLike = None
) -> NDArray[np.int64]: ...


def simulate_discrete_laplace(counts: Any, scale: float, *, rng: RandomLike = None) -> Any:
    """Add discrete Laplace(scale) noise with numpy - for simulation only.

    The noise is the difference of two iid geometric variables with success
    probability ``1 - exp(-1/scale)``, the same distribution as
    :func:`~spatialdp.privacy.release.release_discrete_laplace` (without its
    scale rounding).

    Parameters
    ----------
    counts : array_like of int or scipy.sparse vector/array
        Integer counts, ``|count| <= 2**53``.
    scale : float
        Noise scale ``b`` (finite, > 0, at most 1e15).
    rng : numpy.random.Generator, int or None
        Generator or seed (keyword only).

    Returns
    -------
    numpy.ndarray of int64, or int

    Examples
    --------
    >>> simulate_discrete_laplace([3, 4], 1.0, rng=0).dtype
    dtype('int64')
    """
    b = check_scale(scale, "scale")
    arr = as_counts(counts)
    return int_out(arr + _sim_dlap(as_generator(rng), b, arr.size).reshape(arr.shape), counts)


@overload
def simulate_discrete_gaussian(
    counts: ScalarInt, sigma: float, *, rng: RandomLike = None
) -> int: ...
@overload
def simulate_discrete_gaussian(
    counts: ArrayLike | Sparse, sigma: float, *, rng: RandomLike = None
) -> NDArray[np.int64]: ...


def simulate_discrete_gaussian(counts: Any, sigma: float, *, rng: RandomLike = None) -> Any:
    """Add discrete Gaussian(sigma) noise with numpy - for simulation only.

    Canonne-Kamath-Steinke Algorithm 3 in floating point, vectorised: draw
    ``Y`` from a discrete Laplace with scale ``t = floor(sigma) + 1`` and keep
    it with probability ``exp(-(|Y| - sigma**2/t)**2 / (2 sigma**2))``, computed
    as ``exp(-(|Y|/sigma - sigma/t)**2 / 2)`` so that tiny sigmas neither
    underflow nor stall. The loop is capped at :data:`MAX_ROUNDS` passes.

    Parameters
    ----------
    counts : array_like of int or scipy.sparse vector/array
        Integer counts, ``|count| <= 2**53``.
    sigma : float
        Noise scale (finite, > 0, at most 1e15).
    rng : numpy.random.Generator, int or None
        Generator or seed (keyword only).

    Returns
    -------
    numpy.ndarray of int64, or int

    Examples
    --------
    >>> simulate_discrete_gaussian([0, 0, 0], 3.0, rng=2).shape
    (3,)
    """
    s = check_scale(sigma, "sigma")
    arr = as_counts(counts)
    gen = as_generator(rng)
    t = math.floor(s) + 1.0
    shift = s / t  # (|Y| - sigma**2 / t) / sigma = |Y| / sigma - sigma / t: no s*s underflow
    out = np.empty(arr.size, dtype=np.int64)
    pending = np.arange(arr.size)
    for _ in range(MAX_ROUNDS):  # acceptance is above 0.3 per pass at every sigma
        if not pending.size:
            break
        y = _sim_dlap(gen, t, pending.size)
        with np.errstate(over="ignore"):
            z = np.abs(y) / s - shift
            keep = gen.random(pending.size) < np.exp(-(z * z) / 2)
        out[pending[keep]] = y[keep]
        pending = pending[~keep]
    else:
        raise SpatialDPError(
            f"simulate_discrete_gaussian did not finish after {MAX_ROUNDS} passes at "
            f"sigma={s!r}; report it")
    return int_out(arr + out.reshape(arr.shape), counts)


#: The sampler for each accuracy noise kind (a mechanism's ``kind``).
SIMULATE_BY_KIND: dict[str, Callable[..., Any]] = {
    "laplace": simulate_laplace,
    "discrete_laplace": simulate_discrete_laplace,
    "gaussian": simulate_gaussian,
    "discrete_gaussian": simulate_discrete_gaussian,
}
