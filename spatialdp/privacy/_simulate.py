"""Simulation samplers: seeded numpy noise for measuring error - never publish (private).

Re-exported by :mod:`spatialdp.privacy.noise`. Each function takes ``rng`` (a
:class:`numpy.random.Generator`, a seed or ``None``) and draws the same
distribution as its ``release_*`` counterpart with fast floating-point samplers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from spatialdp.privacy._exact import MAX_DISCRETE_SCALE
from spatialdp.privacy._noise_input import (
    MAX_GAUSS_SIGMA,
    SCALE_FIX,
    SIGMA_FIX,
    ScalarInt,
    ScalarReal,
    SeedLike,
    Sparse,
    as_counts,
    as_generator,
    as_values,
    check_positive,
    float_out,
    int_out,
)

__all__ = [
    "simulate_discrete_gaussian",
    "simulate_discrete_laplace",
    "simulate_gaussian",
    "simulate_laplace",
]


@overload
def simulate_laplace(values: ScalarReal, scale: float, rng: SeedLike = None) -> float: ...
@overload
def simulate_laplace(
    values: ArrayLike | Sparse, scale: float, rng: SeedLike = None
) -> NDArray[np.float64]: ...


def simulate_laplace(values: Any, scale: float, rng: SeedLike = None) -> Any:
    """Add Laplace(scale) noise with numpy - for simulation only, never publish.

    Parameters
    ----------
    values : array_like of float or scipy.sparse vector/array
        Finite values.
    scale : float
        Noise scale ``b`` (finite, > 0).
    rng : numpy.random.Generator, int or None
        Generator or seed.

    Returns
    -------
    numpy.ndarray of float64, or float

    Examples
    --------
    >>> a = simulate_laplace([0.0, 0.0], 1.0, rng=7)
    >>> bool((a == simulate_laplace([0.0, 0.0], 1.0, rng=7)).all())
    True
    """
    b = check_positive(scale, "scale", SCALE_FIX)
    arr = as_values(values)
    return float_out(arr + as_generator(rng).laplace(0.0, b, size=arr.shape), values)


@overload
def simulate_gaussian(values: ScalarReal, sigma: float, rng: SeedLike = None) -> float: ...
@overload
def simulate_gaussian(
    values: ArrayLike | Sparse, sigma: float, rng: SeedLike = None
) -> NDArray[np.float64]: ...


def simulate_gaussian(values: Any, sigma: float, rng: SeedLike = None) -> Any:
    """Add N(0, sigma**2) noise with numpy - for simulation only, never publish.

    Examples
    --------
    >>> simulate_gaussian([1.0, 2.0], 0.5, rng=1).shape
    (2,)
    """
    s = check_positive(sigma, "sigma", SIGMA_FIX)
    arr = as_values(values)
    return float_out(arr + as_generator(rng).normal(0.0, s, size=arr.shape), values)


def _sim_dlap(gen: np.random.Generator, scale: float, size: int) -> NDArray[np.int64]:
    """Discrete Laplace as a difference of two geometrics (numpy, floats)."""
    p = -math.expm1(-1.0 / scale)  # 1 - exp(-1/scale)
    g1 = gen.geometric(p, size=size)
    g2 = gen.geometric(p, size=size)
    return (g1 - g2).astype(np.int64)


@overload
def simulate_discrete_laplace(counts: ScalarInt, scale: float, rng: SeedLike = None) -> int: ...
@overload
def simulate_discrete_laplace(
    counts: ArrayLike | Sparse, scale: float, rng: SeedLike = None
) -> NDArray[np.int64]: ...


def simulate_discrete_laplace(counts: Any, scale: float, rng: SeedLike = None) -> Any:
    """Add discrete Laplace(scale) noise with numpy - for simulation only.

    The noise is the difference of two iid geometric variables with success
    probability ``1 - exp(-1/scale)``, the same distribution as
    :func:`release_discrete_laplace` (without the scale rounding).

    Examples
    --------
    >>> simulate_discrete_laplace([3, 4], 1.0, rng=0).dtype
    dtype('int64')
    """
    b = check_positive(scale, "scale", SCALE_FIX, MAX_DISCRETE_SCALE)
    arr = as_counts(counts)
    return int_out(arr + _sim_dlap(as_generator(rng), b, arr.size).reshape(arr.shape), counts)


@overload
def simulate_discrete_gaussian(counts: ScalarInt, sigma: float, rng: SeedLike = None) -> int: ...
@overload
def simulate_discrete_gaussian(
    counts: ArrayLike | Sparse, sigma: float, rng: SeedLike = None
) -> NDArray[np.int64]: ...


def simulate_discrete_gaussian(counts: Any, sigma: float, rng: SeedLike = None) -> Any:
    """Add discrete Gaussian(sigma) noise with numpy - for simulation only.

    Canonne-Kamath-Steinke Algorithm 3 in floating point, vectorised: draw
    ``Y`` from a discrete Laplace with scale ``t = floor(sigma) + 1`` and keep
    it with probability ``exp(-(|Y| - sigma**2/t)**2 / (2 sigma**2))``.

    Examples
    --------
    >>> simulate_discrete_gaussian([0, 0, 0], 3.0, rng=2).shape
    (3,)
    """
    s = check_positive(sigma, "sigma", SIGMA_FIX, MAX_GAUSS_SIGMA)
    arr = as_counts(counts)
    gen = as_generator(rng)
    t = math.floor(s) + 1.0
    shift = s * s / t
    out = np.empty(arr.size, dtype=np.int64)
    pending = np.arange(arr.size)
    while pending.size:
        y = _sim_dlap(gen, t, pending.size)
        keep = gen.random(pending.size) < np.exp(-((np.abs(y) - shift) ** 2) / (2 * s * s))
        out[pending[keep]] = y[keep]
        pending = pending[~keep]
    return int_out(arr + out.reshape(arr.shape), counts)


#: The sampler for each accuracy noise kind (a mechanism's ``kind``).
SIMULATE_BY_KIND: dict[str, Callable[[Any, float, SeedLike], Any]] = {
    "laplace": simulate_laplace,
    "discrete_laplace": simulate_discrete_laplace,
    "gaussian": simulate_gaussian,
    "discrete_gaussian": simulate_discrete_gaussian,
}
