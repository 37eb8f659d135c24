"""The release random path: noise for publication, from OS entropy, never seeded.

spatialdp has two random paths that never mix.

**Release** (this module). Values that get published are noised here, with
randomness from the operating system (:func:`os.urandom`, expanded by a
ChaCha20 keystream under fresh OS keys as the kernel itself does, see
:func:`spatialdp.privacy.exact.random_bytes`; or OpenDP's own cryptographic
source). No function takes a seed, a generator or a random
state: a seeded pseudo-random generator is reproducible, and an attacker who
knows a few true cells could reconstruct a PCG64 state from the released
values and subtract the noise everywhere. The samplers are also
floating-point safe:

* :func:`release_discrete_laplace` - exact integer (two-sided geometric) noise
  from our vectorised exact table-inversion sampler with integer arithmetic
  (:mod:`spatialdp.privacy.exact`; a million cells in a few hundredths of a
  second, at every scale);
* :func:`release_laplace` - real-valued Laplace noise as exact discrete
  Laplace noise on a fine fixed-point lattice (:mod:`spatialdp.privacy.exact`,
  the way OpenDP releases floats, vectorised: about a million values in a
  tenth of a second);
* :func:`release_gaussian` - real-valued Gaussian noise through OpenDP's
  floating-point-safe measurement (slow: about 50,000 values a second);
* :func:`release_discrete_gaussian` - exact integer Gaussian noise through OpenDP.

**Simulation** (:mod:`spatialdp.privacy.simulate`). The same distributions from
a seeded :class:`numpy.random.Generator` (``rng=``), for measuring error, tests
and synthetic runs only. Never publish their output.

Scales come from :mod:`spatialdp.privacy.calibration` (``laplace_scale``,
``gaussian_sigma``), usually through a mechanism
(:class:`~spatialdp.privacy.noise.LaplaceMechanism`,
:class:`~spatialdp.privacy.noise.GaussianMechanism`), whose ``release`` method
calls the matching function here. Scales are at most ``1e15``.

Sparse input
------------
Every function accepts a ``scipy.sparse`` matrix or array over a *public*
domain (all H3 cells of a region, all buckets of a histogram) and returns a
dense array of the same shape. Noise is added to EVERY entry of the domain,
zeros included: noising only the stored non-zeros would publish the support,
i.e. exactly which cells had any data, with no privacy at all.

Examples
--------
>>> noisy = release_discrete_laplace([10, 0, 3], scale=2.0)
>>> noisy.shape, noisy.dtype
((3,), dtype('int64'))
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from spatialdp._validation import check_scale
from spatialdp.privacy._noise_input import (
    ScalarInt,
    ScalarReal,
    Sparse,
    as_counts,
    as_values,
    float_out,
    int_out,
    is_scalar,
)
from spatialdp.privacy.exact import discrete_laplace_noise, lattice_laplace, standalone_exponent

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
    integer queries of L1 sensitivity ``sensitivity``. Sampling is exact, at
    the exact value of the float ``scale``: a uniform sign and a geometric
    magnitude drawn by lazy inversion against bracketed thresholds, integer
    arithmetic only, vectorised over the array, fed by OS entropy
    (:func:`os.urandom` keys for a ChaCha20 keystream; see
    :mod:`spatialdp.privacy.exact`).

    Parameters
    ----------
    counts : array_like of int or scipy.sparse vector/array
        True counts. Integral floats are accepted; ``|count| <= 2**53``.
        Sparse input is densified and EVERY entry gets noise (see module doc).
    scale : float
        Noise scale ``b`` (:func:`~spatialdp.privacy.calibration.laplace_scale`),
        ``0 < b <= 1e15``.

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
    b = check_scale(scale, "scale")
    arr = as_counts(counts)
    noise = discrete_laplace_noise(arr.size, Fraction(b)).reshape(arr.shape)
    return int_out(arr + noise, counts)


def _opendp_release(x: Any, arr: NDArray[Any], scale: float, *, gaussian: bool) -> Any:
    """Return ``arr`` noised through an OpenDP measurement, shaped like the input ``x``.

    ``make_gaussian`` (L2 distance) if ``gaussian`` else ``make_laplace`` (L1
    distance), over 64-bit integers when ``arr`` is int64 and finite floats
    otherwise; scalar input uses an atom domain with the absolute distance.
    Only the Gaussian releases use it now.
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
    """Add Laplace noise to real values, for publication (exact lattice noise, floating-point safe).

    Each value is rounded to a fixed-point lattice of step ``2**e`` and gets
    exact discrete Laplace noise of ``scale / 2**e`` lattice units (integer
    arithmetic, OS entropy); the result is the noisy lattice point as a float
    (exactly, while below ``2**53`` lattice units). See
    :mod:`spatialdp.privacy.exact`. The step is the largest power of two
    with ``d * step <= 2**-24 * scale`` for ``d`` values, so for a query of L1
    sensitivity ``Delta`` the release is ``(Delta / scale + 2**-24)``-DP (the
    lattice rounding adds at most ``d * step`` to the sensitivity).
    :class:`~spatialdp.privacy.noise.LaplaceMechanism` calibrates the scale
    with headroom instead and charges its epsilon exactly: prefer it.

    Parameters
    ----------
    values : array_like of float or scipy.sparse vector/array
        Finite true values (sparse input is densified; every entry gets noise).
    scale : float
        Noise scale ``b`` (:func:`~spatialdp.privacy.calibration.laplace_scale`),
        ``0 < b <= 1e15``.

    Returns
    -------
    numpy.ndarray of float64, or float
        Noisy values of the input's shape (a ``float`` for scalar input).

    Raises
    ------
    InvalidInput
        On a non-positive/non-finite scale or non-finite values, or more than
        about ``2**31`` values in one release.

    Examples
    --------
    >>> out = release_laplace([1.5, 2.0], scale=1.0)
    >>> out.shape, out.dtype
    ((2,), dtype('float64'))
    >>> isinstance(release_laplace(3.0, scale=0.5), float)
    True
    >>> step = 2.0**-24  # one value at scale 1: the largest step with d * step <= 2**-24 * scale
    >>> bool(release_laplace(0.1, scale=1.0) / step % 1 == 0)  # on the lattice
    True
    """
    b = check_scale(scale, "scale")
    arr = as_values(values)
    return float_out(lattice_laplace(arr, b, standalone_exponent(b, arr.size)), values)


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
        Noise standard deviation
        (:func:`~spatialdp.privacy.calibration.gaussian_sigma`), ``0 < sigma <= 1e15``.

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
    s = check_scale(sigma, "sigma")
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
    s = check_scale(sigma, "sigma")
    return _opendp_release(counts, as_counts(counts), s, gaussian=True)


#: The sampler for each accuracy noise kind (a mechanism's ``kind``).
RELEASE_BY_KIND: dict[str, Callable[[Any, float], Any]] = {
    "laplace": release_laplace,
    "discrete_laplace": release_discrete_laplace,
    "gaussian": release_gaussian,
    "discrete_gaussian": release_discrete_gaussian,
}
