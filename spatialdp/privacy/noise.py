"""Noise for differential privacy: release samplers, simulation samplers, mechanisms.

There are two deliberately separate paths.

**Release** functions (``release_*``) produce values that get published. They
draw from operating-system entropy (never a seeded numpy generator: an
attacker who knows a few true cells could reconstruct a PCG64 state from the
released values and subtract the noise everywhere), take no seed argument, and
are floating-point safe:

* :func:`release_discrete_laplace` - exact integer (two-sided geometric) noise
  from our vectorised Canonne-Kamath-Steinke sampler with integer arithmetic
  (about a million cells in well under a second);
* :func:`release_laplace`, :func:`release_gaussian` - real-valued noise through
  OpenDP's floating-point-safe measurements;
* :func:`release_discrete_gaussian` - exact integer Gaussian noise through
  OpenDP.

**Simulation** functions (``simulate_*``) are for measuring error, tests and
synthetic runs. They take ``rng`` (a :class:`numpy.random.Generator`, a seed or
``None``) and use fast numpy floating-point samplers. Never publish their output.

**Mechanisms** (:class:`LaplaceMechanism`, :class:`GaussianMechanism`) bundle a
privacy parameter and a sensitivity into a noise scale, a :class:`PrivacyLoss`
and accuracy figures from :mod:`spatialdp.privacy.accuracy`.

Sparse input
------------
Every function accepts a ``scipy.sparse`` matrix or array over a *public*
domain (all H3 cells of a region, all buckets of a histogram) and returns a
dense array of the same shape. Noise is added to EVERY entry of the domain,
zeros included: noising only the stored non-zeros would publish the support,
i.e. exactly which cells had any data, with no privacy at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal, TypeAlias, overload

import numpy as np
import scipy.sparse
from numpy.typing import ArrayLike, NDArray

from spatialdp.exceptions import InvalidInput
from spatialdp.privacy import accuracy as _acc
from spatialdp.privacy._exact import (
    MAX_DISCRETE_SCALE,
    discrete_laplace_noise,
    rational_scale,
)

__all__ = [
    "GaussianMechanism",
    "LaplaceMechanism",
    "PrivacyLoss",
    "rational_scale",
    "release_discrete_gaussian",
    "release_discrete_laplace",
    "release_gaussian",
    "release_laplace",
    "simulate_discrete_gaussian",
    "simulate_discrete_laplace",
    "simulate_gaussian",
    "simulate_laplace",
]

SeedLike: TypeAlias = "np.random.Generator | int | None"
Sparse: TypeAlias = "scipy.sparse.sparray | scipy.sparse.spmatrix"
ScalarInt: TypeAlias = "int | np.integer[Any]"
ScalarReal: TypeAlias = "float | int | np.floating[Any] | np.integer[Any]"

_MAX_COUNT = 2**53  # |count| limit: int64 stays exact after adding noise
_MAX_GAUSS_SIGMA = 1e15


# ---------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------


def _check_positive(value: Any, name: str, fix: str, upper: float = math.inf) -> float:
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


def _as_counts(x: Any, name: str = "counts") -> NDArray[np.int64]:
    """Validate integer counts (integer dtype, bool, or integral floats) as int64."""
    arr = _dense(x, name)
    if arr.dtype == np.bool_:
        return arr.astype(np.int64)
    if np.issubdtype(arr.dtype, np.integer):
        if arr.size and (
            arr.max() > _MAX_COUNT or (arr.dtype.kind == "i" and arr.min() < -_MAX_COUNT)
        ):
            bad = int(arr.flat[int(np.argmax(np.abs(arr.astype(np.float64))))])
            raise InvalidInput(
                f"{name} contains {bad}, beyond the supported magnitude 2**53; "
                "rescale the counts (e.g. to thousands) before adding noise"
            )
        return arr.astype(np.int64)
    f = arr.astype(np.float64)
    bad_mask = ~np.isfinite(f) | (f != np.round(f)) | (np.abs(f) > _MAX_COUNT)
    if bad_mask.any():
        i = int(np.flatnonzero(bad_mask.ravel())[0])
        raise InvalidInput(
            f"{name} must be finite integers for discrete noise, got {float(f.ravel()[i])!r} "
            f"at flat index {i} (limit |count| <= 2**53); round or aggregate to integer "
            "counts, or use the continuous (non-discrete) mechanism"
        )
    return f.astype(np.int64)


def _as_values(x: Any, name: str = "values") -> NDArray[np.float64]:
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


def _is_scalar(x: Any) -> bool:
    """Python/numpy scalars give scalar output; arrays (even 0-d) and sparse give arrays."""
    return not isinstance(x, np.ndarray) and not scipy.sparse.issparse(x) and np.ndim(x) == 0


def _int_out(arr: NDArray[np.int64], x: Any) -> Any:
    return int(arr) if _is_scalar(x) else arr


def _float_out(arr: NDArray[np.float64], x: Any) -> Any:
    return float(arr) if _is_scalar(x) else arr


def _rng(rng: SeedLike) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or (isinstance(rng, (int, np.integer)) and not isinstance(rng, bool)):
        return np.random.default_rng(rng)
    raise InvalidInput(
        f"rng={rng!r} is not a numpy Generator, an int seed or None; pass e.g. "
        "numpy.random.default_rng(0)"
    )


_SCALE_FIX = "use scale = sensitivity / epsilon (see LaplaceMechanism)"
_SIGMA_FIX = "use sigma = sensitivity / sqrt(2 * rho) (see GaussianMechanism)"


# ---------------------------------------------------------------------------
# release path (OS entropy, no seed)
# ---------------------------------------------------------------------------


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
    b = _check_positive(scale, "scale", _SCALE_FIX, MAX_DISCRETE_SCALE)
    arr = _as_counts(counts)
    noise = discrete_laplace_noise(arr.size, rational_scale(b)).reshape(arr.shape)
    return _int_out(arr + noise, counts)


def _opendp() -> Any:
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp


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
    b = _check_positive(scale, "scale", _SCALE_FIX)
    arr = _as_values(values)
    dp = _opendp()
    if _is_scalar(values):
        meas = dp.m.make_laplace(
            dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=b
        )
        return float(meas(float(arr)))
    if arr.size == 0:
        return arr.copy()
    meas = dp.m.make_laplace(
        dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float), scale=b
    )
    return np.asarray(meas(arr.ravel().tolist()), dtype=np.float64).reshape(arr.shape)


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
    s = _check_positive(sigma, "sigma", _SIGMA_FIX, _MAX_GAUSS_SIGMA)
    arr = _as_values(values)
    dp = _opendp()
    if _is_scalar(values):
        meas = dp.m.make_gaussian(
            dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=s
        )
        return float(meas(float(arr)))
    if arr.size == 0:
        return arr.copy()
    meas = dp.m.make_gaussian(
        dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l2_distance(T=float), scale=s
    )
    return np.asarray(meas(arr.ravel().tolist()), dtype=np.float64).reshape(arr.shape)


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
    s = _check_positive(sigma, "sigma", _SIGMA_FIX, _MAX_GAUSS_SIGMA)
    arr = _as_counts(counts)
    dp = _opendp()
    if _is_scalar(counts):
        meas = dp.m.make_gaussian(dp.atom_domain(T="i64"), dp.absolute_distance(T="i64"), scale=s)
        return int(meas(int(arr)))
    if arr.size == 0:
        return arr.copy()
    meas = dp.m.make_gaussian(
        dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T="i64"), scale=s
    )
    return np.asarray(meas(arr.ravel().tolist()), dtype=np.int64).reshape(arr.shape)


# ---------------------------------------------------------------------------
# simulation path (seeded numpy, NOT for publication)
# ---------------------------------------------------------------------------


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
    b = _check_positive(scale, "scale", _SCALE_FIX)
    arr = _as_values(values)
    return _float_out(arr + _rng(rng).laplace(0.0, b, size=arr.shape), values)


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
    s = _check_positive(sigma, "sigma", _SIGMA_FIX)
    arr = _as_values(values)
    return _float_out(arr + _rng(rng).normal(0.0, s, size=arr.shape), values)


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
    b = _check_positive(scale, "scale", _SCALE_FIX, MAX_DISCRETE_SCALE)
    arr = _as_counts(counts)
    return _int_out(arr + _sim_dlap(_rng(rng), b, arr.size).reshape(arr.shape), counts)


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
    s = _check_positive(sigma, "sigma", _SIGMA_FIX, _MAX_GAUSS_SIGMA)
    arr = _as_counts(counts)
    gen = _rng(rng)
    t = math.floor(s) + 1.0
    shift = s * s / t
    out = np.empty(arr.size, dtype=np.int64)
    pending = np.arange(arr.size)
    while pending.size:
        y = _sim_dlap(gen, t, pending.size)
        keep = gen.random(pending.size) < np.exp(-((np.abs(y) - shift) ** 2) / (2 * s * s))
        out[pending[keep]] = y[keep]
        pending = pending[~keep]
    return _int_out(arr + out.reshape(arr.shape), counts)


# ---------------------------------------------------------------------------
# mechanisms
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class PrivacyLoss:
    """The privacy loss of one release.

    Parameters
    ----------
    kind : {"pure", "zcdp"}
        ``"pure"``: ``value`` is epsilon of epsilon-DP. ``"zcdp"``: ``value``
        is rho of rho-zero-concentrated DP.
    value : float
        Finite and >= 0.

    Examples
    --------
    >>> PrivacyLoss("pure", 0.5).rho
    0.125
    >>> PrivacyLoss("zcdp", 0.125).as_zcdp() == PrivacyLoss("zcdp", 0.125)
    True
    """

    kind: Literal["pure", "zcdp"]
    value: float

    def __post_init__(self) -> None:
        if self.kind not in ("pure", "zcdp"):
            raise InvalidInput(
                f"PrivacyLoss kind={self.kind!r} is not supported; use 'pure' (epsilon) "
                "or 'zcdp' (rho)"
            )
        v = float(self.value)
        if not math.isfinite(v) or v < 0:
            raise InvalidInput(
                f"PrivacyLoss value={self.value!r} must be finite and >= 0; pass the "
                "epsilon or rho of the release"
            )
        object.__setattr__(self, "value", v)

    @property
    def rho(self) -> float:
        """The zCDP parameter: rho itself, or epsilon**2 / 2 for pure DP."""
        return self.value if self.kind == "zcdp" else self.value**2 / 2

    @property
    def epsilon(self) -> float | None:
        """Pure-DP epsilon, or ``None`` for a zCDP loss (no finite pure epsilon)."""
        return self.value if self.kind == "pure" else None

    def as_zcdp(self) -> PrivacyLoss:
        """The same loss as zCDP (pure epsilon-DP implies epsilon**2/2-zCDP)."""
        return PrivacyLoss("zcdp", self.rho)


def _up(x: float) -> float:
    return math.nextafter(x, math.inf)


class _Mechanism:
    """Shared accuracy passthroughs; subclasses set ``kind`` and ``scale``."""

    kind: str
    scale: float
    discrete: bool

    @overload
    def std(self, m: int | np.integer[Any] = 1) -> float: ...
    @overload
    def std(self, m: ArrayLike) -> NDArray[np.float64]: ...
    def std(self, m: ArrayLike = 1) -> float | NDArray[np.float64]:
        """Standard deviation of the sum of ``m`` noisy values.

        See :func:`spatialdp.privacy.accuracy.noise_std`.
        """
        return _acc.noise_std(self.kind, self.scale, m)

    @overload
    def mean_abs_error(self, m: int | np.integer[Any] = 1) -> float: ...
    @overload
    def mean_abs_error(self, m: ArrayLike) -> NDArray[np.float64]: ...
    def mean_abs_error(self, m: ArrayLike = 1) -> float | NDArray[np.float64]:
        """Mean absolute error of the sum of ``m`` noisy values."""
        return _acc.mean_abs_error(self.kind, self.scale, m)

    @overload
    def error_bar(self, m: int | np.integer[Any] = 1, alpha: float = 0.05) -> float: ...
    @overload
    def error_bar(self, m: ArrayLike, alpha: float = 0.05) -> NDArray[np.float64]: ...
    def error_bar(self, m: ArrayLike = 1, alpha: float = 0.05) -> float | NDArray[np.float64]:
        """Half-width ``h`` with ``P(|noise of the sum of m| <= h) >= 1 - alpha``.

        Integer-valued for discrete mechanisms. See
        :func:`spatialdp.privacy.accuracy.half_width`.
        """
        return _acc.half_width(self.kind, self.scale, m, alpha)

    def accuracy(self, m: ArrayLike = 1, alpha: float = 0.05) -> _acc.Accuracy:
        """All three error figures as an :class:`~spatialdp.privacy.accuracy.Accuracy`."""
        return _acc.accuracy(self.kind, self.scale, m, alpha)

    def release(self, x: Any) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def simulate(self, x: Any, rng: SeedLike = None) -> Any:  # pragma: no cover
        raise NotImplementedError


class LaplaceMechanism(_Mechanism):
    """Laplace noise calibrated to an epsilon and an L1 sensitivity (pure DP).

    ``sensitivity`` is the largest L1 change one client can make to the WHOLE
    released vector: a histogram's buckets or a grid's cells are one release
    at full epsilon, not one release per cell.

    Parameters
    ----------
    epsilon : float
        Privacy parameter (finite, > 0).
    sensitivity : float, default 1.0
        L1 sensitivity (finite, > 0).
    discrete : bool, default False
        Integer (discrete Laplace) noise for counts instead of real noise.

    Attributes
    ----------
    scale : float
        ``b = sensitivity / epsilon``, rounded up by at most one ulp so the
        loss never exceeds ``epsilon``.
    privacy_loss : PrivacyLoss
        ``PrivacyLoss("pure", epsilon)``.
    kind : str
        ``"laplace"`` or ``"discrete_laplace"`` (the accuracy noise kind).

    Examples
    --------
    >>> mech = LaplaceMechanism(epsilon=0.5, sensitivity=2.0, discrete=True)
    >>> mech.scale, mech.privacy_loss
    (4.0, PrivacyLoss(kind='pure', value=0.5))
    >>> mech.release([10, 20]).dtype
    dtype('int64')
    >>> round(LaplaceMechanism(1.0).error_bar(alpha=0.05), 4)  # b * ln(1 / alpha)
    2.9957
    """

    def __init__(self, epsilon: float, sensitivity: float = 1.0, discrete: bool = False) -> None:
        self.epsilon = _check_positive(epsilon, "epsilon", "pass a privacy parameter such as 1.0")
        self.sensitivity = _check_positive(
            sensitivity, "sensitivity", "pass the L1 bound of one client's influence, e.g. 1.0"
        )
        self.discrete = bool(discrete)
        b = self.sensitivity / self.epsilon
        if Fraction(b) < Fraction(self.sensitivity) / Fraction(self.epsilon):
            b = _up(b)
        if discrete and b > MAX_DISCRETE_SCALE:
            raise InvalidInput(
                f"sensitivity / epsilon = {b:g} exceeds the discrete sampler's maximum "
                f"scale {MAX_DISCRETE_SCALE:g}; raise epsilon or rescale the counts"
            )
        self.scale = b
        self.kind = "discrete_laplace" if discrete else "laplace"

    @property
    def privacy_loss(self) -> PrivacyLoss:
        """``PrivacyLoss("pure", epsilon)``."""
        return PrivacyLoss("pure", self.epsilon)

    def release(self, x: Any) -> Any:
        """Noisy ``x`` for publication (OS entropy; no seed accepted)."""
        if self.discrete:
            return release_discrete_laplace(x, self.scale)
        return release_laplace(x, self.scale)

    def simulate(self, x: Any, rng: SeedLike = None) -> Any:
        """Noisy ``x`` from a seeded numpy generator - for simulation only."""
        if self.discrete:
            return simulate_discrete_laplace(x, self.scale, rng)
        return simulate_laplace(x, self.scale, rng)

    def __repr__(self) -> str:
        return (
            f"LaplaceMechanism(epsilon={self.epsilon!r}, sensitivity={self.sensitivity!r}, "
            f"discrete={self.discrete!r})"
        )


class GaussianMechanism(_Mechanism):
    """Gaussian noise calibrated to a zCDP rho and an L2 sensitivity.

    ``sensitivity`` is the largest L2 change one client can make to the whole
    released vector (all cells of a grid are one release).

    Parameters
    ----------
    rho : float
        zCDP parameter (finite, > 0).
    sensitivity : float, default 1.0
        L2 sensitivity (finite, > 0).
    discrete : bool, default False
        Integer (discrete Gaussian) noise for counts instead of real noise.

    Attributes
    ----------
    scale : float
        ``sigma = sensitivity / sqrt(2 rho)`` (rounded up to the next float if
        needed so the loss never exceeds ``rho``).
    privacy_loss : PrivacyLoss
        ``PrivacyLoss("zcdp", rho)``.
    kind : str
        ``"gaussian"`` or ``"discrete_gaussian"``.

    Examples
    --------
    >>> mech = GaussianMechanism(rho=0.5, sensitivity=3.0)
    >>> mech.scale, mech.privacy_loss.kind
    (3.0, 'zcdp')
    >>> round(mech.error_bar(m=4), 3)  # 1.96 * 3 * sqrt(4)
    11.76
    """

    def __init__(self, rho: float, sensitivity: float = 1.0, discrete: bool = False) -> None:
        self.rho = _check_positive(rho, "rho", "pass a zCDP parameter such as 0.5")
        self.sensitivity = _check_positive(
            sensitivity, "sensitivity", "pass the L2 bound of one client's influence, e.g. 1.0"
        )
        self.discrete = bool(discrete)
        sigma = self.sensitivity / math.sqrt(2 * self.rho)
        target = Fraction(self.sensitivity) ** 2
        while Fraction(sigma) ** 2 * 2 * Fraction(self.rho) < target:
            sigma = _up(sigma)
        if sigma > _MAX_GAUSS_SIGMA:
            raise InvalidInput(
                f"sensitivity / sqrt(2 rho) = {sigma:g} exceeds the supported maximum "
                f"{_MAX_GAUSS_SIGMA:g}; raise rho or rescale the values"
            )
        self.scale = sigma
        self.kind = "discrete_gaussian" if discrete else "gaussian"

    @property
    def privacy_loss(self) -> PrivacyLoss:
        """``PrivacyLoss("zcdp", rho)``."""
        return PrivacyLoss("zcdp", self.rho)

    def release(self, x: Any) -> Any:
        """Noisy ``x`` for publication (OS entropy; no seed accepted)."""
        if self.discrete:
            return release_discrete_gaussian(x, self.scale)
        return release_gaussian(x, self.scale)

    def simulate(self, x: Any, rng: SeedLike = None) -> Any:
        """Noisy ``x`` from a seeded numpy generator - for simulation only."""
        if self.discrete:
            return simulate_discrete_gaussian(x, self.scale, rng)
        return simulate_gaussian(x, self.scale, rng)

    def __repr__(self) -> str:
        return (
            f"GaussianMechanism(rho={self.rho!r}, sensitivity={self.sensitivity!r}, "
            f"discrete={self.discrete!r})"
        )
