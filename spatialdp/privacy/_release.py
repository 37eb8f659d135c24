"""Release samplers: noise for publication, from OS entropy, never seeded (private).

Re-exported by :mod:`spatialdp.privacy.noise`, whose docstring explains why the
release path takes no seed and why sparse input gets noise on every entry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from spatialdp.privacy._exact import (
    MAX_DISCRETE_SCALE,
    discrete_laplace_noise,
    rational_scale,
)
from spatialdp.privacy._noise_input import (
    MAX_GAUSS_SIGMA,
    SCALE_FIX,
    SIGMA_FIX,
    ScalarInt,
    ScalarReal,
    Sparse,
    as_counts,
    as_values,
    check_positive,
    int_out,
    is_scalar,
)

__all__ = [
    "release_discrete_gaussian",
    "release_discrete_laplace",
    "release_gaussian",
    "release_laplace",
]


@overload
def release_discrete_laplace(counts: ScalarInt, scale: float) -> int: ...
@overload
def release_discrete_laplace(counts: ArrayLike | Sparse, scale: float) -> NDArray[np.int64]: ...


def release_discrete_laplace(counts: Any, scale: float) -> Any:
    """Add exact discrete Laplace noise to integer counts, for publication.

    The noise has ``P(z) = (1 - a) / (1 + a) * a**|z|`` with ``a = exp(-1/scale)``
    (a two-sided geometric), which is ``(sensitivity / scale)``-DP for
    integer queries of L1 sensitivity ``sensitivity``. Sampling is exact:
    Canonne-Kamath-Steinke (2020) Algorithm 2 with integer arithmetic only,
    vectorised over the array, fed by :func:`os.urandom`.

    The scale is used as an exact rational (see :func:`rational_scale`): if
    the float is not a rational with numerator below ``2**32`` it is rounded
    UP to ``ceil(scale * 2**k) / 2**k`` (relative change below ``2**-20`` for
    scales above about ``2**-40``; tiny scales are rounded up further, to
    ``2**-62`` at least), which can only lower the privacy loss.

    Parameters
    ----------
    counts : array_like of int or scipy.sparse vector/array
        True counts. Integral floats are accepted; ``|count| <= 2**53``.
        Sparse input is densified and EVERY entry gets noise (see module doc).
    scale : float
        Noise scale ``b = sensitivity / epsilon``, ``0 < b <= 2**50``.

    Returns
    -------
    numpy.ndarray of int64, or int
        Noisy counts of the input's shape (an ``int`` for scalar input).

    Raises
    ------
    InvalidInput
        On a non-positive/non-finite scale or non-integer/non-finite counts.

    Examples
    --------
    >>> noisy = release_discrete_laplace([10, 0, 3], scale=2.0)
    >>> noisy.shape, noisy.dtype
    ((3,), dtype('int64'))
    >>> release_discrete_laplace(5, scale=1e-9)  # tiny scale: noise is 0 w.p. ~1
    5
    """
    b = check_positive(scale, "scale", SCALE_FIX, MAX_DISCRETE_SCALE)
    arr = as_counts(counts)
    noise = discrete_laplace_noise(arr.size, rational_scale(b)).reshape(arr.shape)
    return int_out(arr + noise, counts)


def _opendp_release(x: Any, arr: NDArray[Any], scale: float, *, gaussian: bool) -> Any:
    """Noisy ``arr`` through an OpenDP measurement, shaped like the input ``x``.

    ``make_gaussian`` (L2 distance) if ``gaussian`` else ``make_laplace`` (L1
    distance), over 64-bit integers when ``arr`` is int64 and finite floats
    otherwise; scalar input uses an atom domain with the absolute distance.
    """
    import opendp.prelude as dp

    dp.enable_features("contrib")
    make = dp.m.make_gaussian if gaussian else dp.m.make_laplace
    integer = arr.dtype == np.int64
    if integer:
        t: Any = "i64"
        atom = dp.atom_domain(T=t)
    else:
        t = float
        atom = dp.atom_domain(T=t, nan=False)
    if is_scalar(x):
        meas = make(atom, dp.absolute_distance(T=t), scale=scale)
        return int(meas(int(arr))) if integer else float(meas(float(arr)))
    if arr.size == 0:
        return arr.copy()
    metric = dp.l2_distance if gaussian else dp.l1_distance
    meas = make(dp.vector_domain(atom), metric(T=t), scale=scale)
    return np.asarray(meas(arr.ravel().tolist()), dtype=arr.dtype).reshape(arr.shape)


@overload
def release_laplace(values: ScalarReal, scale: float) -> float: ...
@overload
def release_laplace(values: ArrayLike | Sparse, scale: float) -> NDArray[np.float64]: ...


def release_laplace(values: Any, scale: float) -> Any:
    """Add Laplace noise to real values, for publication (OpenDP, floating-point safe).

    Uses :func:`opendp.measurements.make_laplace` on a float vector domain
    (scalar input: a float atom domain). OpenDP samples on a fine dyadic grid
    so that the floating-point output keeps the stated privacy guarantee. It is
    slower than :func:`release_discrete_laplace` (roughly 50,000 values per
    second); for counts use the discrete release.

    Parameters
    ----------
    values : array_like of float or scipy.sparse vector/array
        Finite true values (sparse input is densified; every entry gets noise).
    scale : float
        Noise scale ``b = sensitivity / epsilon`` (finite, > 0).

    Returns
    -------
    numpy.ndarray of float64, or float
        Noisy values of the input's shape (a ``float`` for scalar input).

    Raises
    ------
    InvalidInput
        On a non-positive/non-finite scale or non-finite values.

    Examples
    --------
    >>> out = release_laplace([1.5, 2.0], scale=1.0)
    >>> out.shape, out.dtype
    ((2,), dtype('float64'))
    >>> isinstance(release_laplace(3.0, scale=0.5), float)
    True
    """
    b = check_positive(scale, "scale", SCALE_FIX)
    return _opendp_release(values, as_values(values), b, gaussian=False)


@overload
def release_gaussian(values: ScalarReal, sigma: float) -> float: ...
@overload
def release_gaussian(values: ArrayLike | Sparse, sigma: float) -> NDArray[np.float64]: ...


def release_gaussian(values: Any, sigma: float) -> Any:
    """Add Gaussian noise to real values, for publication (OpenDP, floating-point safe).

    Uses :func:`opendp.measurements.make_gaussian` on a float vector domain
    with the L2 distance; ``rho = sensitivity**2 / (2 sigma**2)`` zCDP.

    Parameters
    ----------
    values : array_like of float or scipy.sparse vector/array
        Finite true values (sparse input is densified; every entry gets noise).
    sigma : float
        Noise standard deviation (finite, > 0, at most 1e15).

    Returns
    -------
    numpy.ndarray of float64, or float
        Noisy values of the input's shape (a ``float`` for scalar input).

    Raises
    ------
    InvalidInput
        On a non-positive/non-finite sigma or non-finite values.

    Examples
    --------
    >>> release_gaussian([0.0, 1.0, 2.0], sigma=1.0).shape
    (3,)
    """
    s = check_positive(sigma, "sigma", SIGMA_FIX, MAX_GAUSS_SIGMA)
    return _opendp_release(values, as_values(values), s, gaussian=True)


@overload
def release_discrete_gaussian(counts: ScalarInt, sigma: float) -> int: ...
@overload
def release_discrete_gaussian(counts: ArrayLike | Sparse, sigma: float) -> NDArray[np.int64]: ...


def release_discrete_gaussian(counts: Any, sigma: float) -> Any:
    """Add exact discrete Gaussian noise to integer counts, for publication (OpenDP).

    Noise ``P(z)`` proportional to ``exp(-z**2 / (2 sigma**2))``, sampled
    exactly by OpenDP's integer ``make_gaussian`` (64-bit integers, L2
    distance); ``rho = sensitivity**2 / (2 sigma**2)`` zCDP. About ten times
    slower than :func:`release_discrete_laplace`.

    Parameters
    ----------
    counts : array_like of int or scipy.sparse vector/array
        True counts (integral floats accepted; ``|count| <= 2**53``). Sparse
        input is densified; every entry gets noise.
    sigma : float
        Noise scale (finite, > 0, at most 1e15).

    Returns
    -------
    numpy.ndarray of int64, or int
        Noisy counts of the input's shape (an ``int`` for scalar input).

    Raises
    ------
    InvalidInput
        On a non-positive/non-finite sigma or non-integer/non-finite counts.

    Examples
    --------
    >>> release_discrete_gaussian([4, 0, 7], sigma=2.0).dtype
    dtype('int64')
    """
    s = check_positive(sigma, "sigma", SIGMA_FIX, MAX_GAUSS_SIGMA)
    return _opendp_release(counts, as_counts(counts), s, gaussian=True)


#: The sampler for each accuracy noise kind (a mechanism's ``kind``).
RELEASE_BY_KIND: dict[str, Callable[[Any, float], Any]] = {
    "laplace": release_laplace,
    "discrete_laplace": release_discrete_laplace,
    "gaussian": release_gaussian,
    "discrete_gaussian": release_discrete_gaussian,
}
