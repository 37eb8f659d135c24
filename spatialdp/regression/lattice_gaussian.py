"""Floating-point-safe Gaussian noise for on-device releases: a discrete Gaussian on a lattice.

The same construction as the real-valued Laplace release
(:mod:`spatialdp.privacy.exact`), with exact discrete Gaussian noise:

1. the lattice step is ``step = 2**e`` (scaling by it is exact in binary);
2. each true value is rounded to the nearest lattice point, ``N_i = round(v_i / step)``;
3. exact discrete Gaussian noise of scale ``sigma / step`` lattice units is added;
4. ``(N_i + Z_i) * step`` is published (post-processing of integers).

Privacy. Rounding moves each coordinate by at most ``step / 2``, so two
neighbouring vectors with ``||v - v'||_2 <= Delta`` over ``d`` coordinates give
``||N - N'||_2 <= Delta / step + sqrt(d)``. The discrete Gaussian with scale
``S`` on an integer vector of L2 sensitivity ``k`` is ``k**2 / (2 S**2)``-zCDP
(Canonne, Kamath & Steinke 2020, Thm 14), so the release is
``(Delta + sqrt(d) step)**2 / (2 sigma**2)``-zCDP. :func:`headroom_sigma`
calibrates ``sigma`` to ``Delta (1 + 2**-24)`` and :func:`gaussian_exponent`
takes the largest step with ``Delta + sqrt(d) step <= sigma sqrt(2 rho)``,
exactly (rational arithmetic, square roots bounded on the safe side): the
charged rho is never exceeded.

Sampling (:func:`discrete_gaussian_noise`) is Canonne-Kamath-Steinke's
Algorithm 3, vectorised: discrete Laplace proposals of scale
``t = floor(S) + 1`` from the exact OS-entropy sampler of
:mod:`spatialdp.privacy.exact`, accepted with probability
``exp(-(|Y| - S**2 / t)**2 / (2 S**2))``. Each acceptance compares a 32-bit
uniform from :func:`~spatialdp.privacy.exact.random_bytes` (OS entropy, the one
source of every release's random bits) with a float bracket of that probability that
is wide enough to contain it for certain (relative ``2**-40`` times the
conditioning); the rare draw inside the bracket (about one in ``10**9``) is
decided exactly with more random bits against a decimal bracket of any needed
precision. The output is exactly the discrete Gaussian.

Examples
--------
>>> from fractions import Fraction
>>> z = discrete_gaussian_noise(10_000, Fraction(3))
>>> z.dtype, bool(2.7 < z.std() < 3.3)
(dtype('int64'), True)
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from spatialdp._random import RandomLike, as_generator
from spatialdp._validation import check_count, check_epsilon, check_finite_array, check_positive
from spatialdp.exceptions import InvalidInput, SpatialDPError
from spatialdp.privacy.calibration import decimal_value, gaussian_sigma, smallest_float_at_least
from spatialdp.privacy.exact import (
    MAX_ROUNDS,
    MAX_SAMPLER_SCALE,
    discrete_laplace_noise,
    lattice_exponent,
    random_bytes,
    uniform_below,
)

__all__ = [
    "GAUSSIAN_HEADROOM",
    "LatticeGaussianMechanism",
    "discrete_gaussian_noise",
    "gaussian_exponent",
    "headroom_sigma",
    "lattice_gaussian",
]

#: Relative headroom of sigma that pays for the lattice rounding.
GAUSSIAN_HEADROOM = Fraction(1, 2**24)

_FAST_LIMIT = 2.0**62
_TOL_BITS = 40


def headroom_sigma(sensitivity: Any, rho: Any) -> float:
    """Return a float ``sigma >= sensitivity (1 + 2**-24) / sqrt(2 rho)`` (exact, rounded up).

    Examples
    --------
    >>> s = headroom_sigma(1.0, 0.5)
    >>> s > 1.0, s - 1.0 < 2**-23
    (True, True)
    """
    sens = check_positive(sensitivity, "sensitivity",
                          fix="pass the L2 bound of one client's influence")
    up = smallest_float_at_least(Fraction(sens) * (1 + GAUSSIAN_HEADROOM), "sensitivity",
                                  "rescale the values to a smaller sensitivity")
    return gaussian_sigma(up, rho)


def _sqrt_below(q: Fraction, bits: int = 80) -> Fraction:
    """Return a dyadic rational ``<= sqrt(q)`` within a relative ``2**-bits``."""
    num, den = q.numerator, q.denominator
    k = max(0, bits - (num.bit_length() - den.bit_length()) // 2)
    return Fraction(math.isqrt((num << (2 * k)) // den), 1 << k)


def gaussian_exponent(sigma: float, sensitivity: float, rho: float, size: int) -> int:
    """Return ``e`` so that ``Delta + sqrt(size) 2**e <= sigma sqrt(2 rho)`` (largest such ``e``).

    ``rho`` is taken as the decimal the ledger charges; ``sigma`` must come from
    :func:`headroom_sigma`. Refuses noise above ``2**56`` lattice units.

    Examples
    --------
    >>> s = headroom_sigma(1.0, 0.5)
    >>> e = gaussian_exponent(s, 1.0, 0.5, 20)
    >>> (1 + math.sqrt(20) * 2.0**e) <= s * math.sqrt(1.0)
    True
    """
    size = check_count(size, "size", low=1)
    budget = _sqrt_below(Fraction(sigma) ** 2 * 2 * decimal_value(rho))
    slack = budget - Fraction(sensitivity)
    if slack <= 0:
        raise InvalidInput(
            f"sigma={sigma!r} leaves no room for the lattice rounding at sensitivity="
            f"{sensitivity!r}, rho={rho!r}; calibrate sigma with headroom_sigma")
    root = math.isqrt(size)
    root_up = root if root * root == size else root + 1
    e = lattice_exponent(slack / root_up, 1)
    if Fraction(sigma) / Fraction(2) ** e > MAX_SAMPLER_SCALE // 2:
        raise InvalidInput(
            f"a Gaussian release of {size} values at sigma={sigma!r} needs more than 2**55 "
            "lattice units; raise rho or rescale the values")
    return e


def _decide_exactly(u: int, x: Fraction) -> bool:
    """Is ``U < exp(-x)`` for the uniform whose first 32 bits are ``u``? Draws more bits."""
    num, bits, prec = u, 32, 40
    for _ in range(MAX_ROUNDS):
        with localcontext() as ctx:
            ctx.prec = prec
            xd = Decimal(x.numerator) / Decimal(x.denominator)
            p = Fraction((-xd).exp())
        err = p * Fraction(int(float(x)) + 4, 10 ** (prec - 2))
        lo, hi = p - err, p + err
        width = Fraction(1, 1 << bits)
        if Fraction(num + 1, 1 << bits) <= lo:
            return True
        if Fraction(num, 1 << bits) >= hi:
            return False
        if width < (hi - lo):
            prec *= 2
        num = (num << 64) | int.from_bytes(random_bytes(8), "little")
        bits += 64
    raise SpatialDPError("the exact Bernoulli(exp(-x)) comparison did not finish; check "
                         "os.urandom, then report it")


def _accept(y: NDArray[np.int64], tau: Fraction, sigma2: Fraction) -> NDArray[np.bool_]:
    """Bernoulli(exp(-(|y| - tau)**2 / (2 sigma2))) per entry, exactly."""
    tau_f, s2_f = float(tau), float(sigma2)
    a = np.abs(y).astype(np.float64) - tau_f
    x = a * a / (2.0 * s2_f)
    p = np.exp(-x)
    tol = 2.0**-_TOL_BITS * (1.0 + x + np.abs(a) / math.sqrt(s2_f))
    p_lo = p * (1.0 - tol)
    p_hi = p * (1.0 + tol) + 1e-300
    u = uniform_below(2**32, y.size)  # 32 uniform bits each
    u_lo = u * 2.0**-32  # exact: 32-bit integers are floats
    u_hi = (u + 1.0) * 2.0**-32
    accept = u_hi <= p_lo
    undecided = np.flatnonzero(~accept & (u_lo < p_hi))
    for i in undecided:  # about one draw in 10**9
        x_exact = (abs(Fraction(int(y[i]))) - tau) ** 2 / (2 * sigma2)
        accept[i] = _decide_exactly(int(u[i]), x_exact)
    return accept


def discrete_gaussian_noise(count: int, sigma: Fraction) -> NDArray[np.int64]:
    """Return ``count`` iid exact discrete Gaussian draws from OS entropy.

    ``P(z)`` is proportional to ``exp(-z**2 / (2 sigma**2))``; ``sigma`` is a
    positive rational up to ``2**55``.

    Examples
    --------
    >>> discrete_gaussian_noise(5, Fraction(1, 2)).shape
    (5,)
    """
    if not 0 < sigma <= MAX_SAMPLER_SCALE // 2:
        raise ValueError(f"discrete_gaussian_noise needs 0 < sigma <= 2**55, got {sigma}")
    t = math.floor(sigma) + 1
    sigma2 = sigma * sigma
    tau = sigma2 / t
    out = np.empty(count, dtype=np.int64)
    pending = np.arange(count)
    for _ in range(MAX_ROUNDS):
        if pending.size == 0:
            return out
        y = discrete_laplace_noise(pending.size, Fraction(t))
        ok = _accept(y, tau, sigma2)
        out[pending[ok]] = y[ok]
        pending = pending[~ok]
    raise SpatialDPError("the discrete Gaussian sampler did not finish; check os.urandom")


def lattice_gaussian(values: NDArray[np.float64], sigma: float,
                     exponent: int) -> NDArray[np.float64]:
    """Return ``values`` rounded to the lattice ``2**exponent`` plus exact Gaussian noise.

    Examples
    --------
    >>> out = lattice_gaussian(np.array([[0.3, 2.0]]), 1.0, -30)
    >>> out.shape, bool(np.all(out * 2**30 == np.round(out * 2**30)))
    ((1, 2), True)
    """
    units = Fraction(sigma) / Fraction(2) ** exponent
    flat = values.ravel()
    # Compared before scaling: ldexp of a 1e308 value would overflow to inf.
    if not np.all(np.abs(flat) < math.ldexp(_FAST_LIMIT, exponent)):
        raise InvalidInput("values too large for the release lattice; clip the features "
                           "to a smaller radius")
    scaled = np.ldexp(flat, -exponent)
    total = np.rint(scaled).astype(np.int64) + discrete_gaussian_noise(flat.size, units)
    return np.ldexp(total.astype(np.float64), exponent).reshape(values.shape)


class LatticeGaussianMechanism:
    """Gaussian noise for one client's vector of ``size`` values: rho-zCDP at L2 ``sensitivity``.

    ``release`` adds exact discrete Gaussian noise on the lattice of
    :meth:`lattice_step` (OS entropy; each row of a ``(K, size)`` array is one
    client's release); ``simulate`` adds continuous Gaussian noise of the same
    ``scale`` from a seeded generator (the lattice rounding, below ``2**-24``
    sigma, is left out of simulations).

    Examples
    --------
    >>> mech = LatticeGaussianMechanism(rho=0.5, sensitivity=1.0, size=3)
    >>> round(mech.scale, 6)
    1.0
    >>> mech.release(np.zeros((4, 3))).shape
    (4, 3)
    """

    def __init__(self, rho: float, sensitivity: float, size: int) -> None:
        self.rho = check_epsilon(rho, "rho")
        self.sensitivity = check_positive(sensitivity, "sensitivity")
        self.size = check_count(size, "size", low=1)
        self.scale = headroom_sigma(self.sensitivity, self.rho)
        self.exponent = gaussian_exponent(self.scale, self.sensitivity, self.rho, self.size)

    def lattice_step(self) -> float:
        """Return the lattice step ``2**e`` of a release."""
        return math.ldexp(1.0, self.exponent)

    def release(self, x: Any) -> NDArray[np.float64]:
        """Return ``x`` (rows of ``size`` values) with lattice discrete Gaussian noise."""
        arr = self._check_values(x)
        return lattice_gaussian(arr, self.scale, self.exponent)

    def _check_values(self, x: Any) -> NDArray[np.float64]:
        """Return ``x`` as finite float64 rows of ``size`` values, or refuse it."""
        arr = check_finite_array(x, "values", ndim=(1, 2), allow_empty=True)
        if arr.shape[-1:] != (self.size,):
            raise InvalidInput(f"values have shape {arr.shape}; each row must hold "
                               f"{self.size} values (one client's vector)")
        return arr

    def simulate(self, x: Any, *, rng: RandomLike = None) -> NDArray[np.float64]:
        """Return ``x`` plus N(0, scale^2) noise from a seeded generator (simulation only)."""
        arr = self._check_values(x)
        noise = as_generator(rng).standard_normal(arr.shape)
        noise *= self.scale
        noise += arr
        return noise

    def __repr__(self) -> str:
        return (f"LatticeGaussianMechanism(rho={self.rho!r}, sensitivity={self.sensitivity!r}, "
                f"size={self.size})")
