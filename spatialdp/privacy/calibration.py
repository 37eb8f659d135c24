"""Noise-scale calibration: one exact rule for every mechanism and every release.

A release is charged to the privacy ledger at the epsilon (or rho) the caller
WROTE: the ledger stores ``Decimal(repr(float(epsilon)))``, so ``0.1`` is
charged as exactly one tenth. The noise must therefore be calibrated against
that same decimal value, not against the binary float nearest to it: float
``0.1`` is ``0.1000000000000000055...``, slightly MORE than one tenth, and
``sensitivity / float(0.1)`` computed in binary can come out slightly below
``sensitivity / Decimal("0.1")`` - a little less noise than the charge pays for.

Both functions here compute the scale exactly, in rational arithmetic, from

* the exact binary value of the sensitivity (a float is a dyadic rational), and
* the exact decimal value of ``repr(float(epsilon))`` (or of rho),

and round the result UP to the nearest float: the returned scale is the
smallest float ``b`` with ``b * epsilon >= sensitivity`` (Laplace) or ``sigma``
with ``sigma**2 * 2 * rho >= sensitivity**2`` (Gaussian), so the real privacy
loss never exceeds the charge. No loop can run away: the work is a few big
integer operations whatever the inputs.

Limits: epsilon and rho are refused above
:data:`~spatialdp._validation.MAX_EPSILON`; a scale above :data:`MAX_SCALE`
is refused (no sampler or error-bar computation supports it, and the release
would be noise only).

Examples
--------
>>> laplace_scale(1.0, 0.1)
10.0
>>> gaussian_sigma(3.0, 0.5)
3.0
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

from spatialdp._validation import MAX_SCALE, check_epsilon, check_positive, fail

__all__ = [
    "LATTICE_HEADROOM",
    "MAX_SCALE",
    "decimal_value",
    "gaussian_sigma",
    "headroom_scale",
    "laplace_scale",
    "smallest_float_at_least",
]

#: Relative headroom of the real-valued Laplace scale that pays for the lattice rounding
#: of :func:`spatialdp.privacy.exact.lattice_laplace`.
LATTICE_HEADROOM = Fraction(1, 2**24)

_SQRT_BITS = 72  # the integer square root keeps at least this many significant bits


def decimal_value(value: float) -> Fraction:
    """Return the exact value of the decimal a float is written as (what the ledger charges).

    Parameters
    ----------
    value : float
        A finite float (already validated).

    Returns
    -------
    fractions.Fraction
        ``Decimal(repr(value))`` as an exact rational.

    Examples
    --------
    >>> decimal_value(0.1)
    Fraction(1, 10)
    >>> decimal_value(0.1) < Fraction(0.1)  # the float is slightly more than a tenth
    True
    """
    return Fraction(Decimal(repr(float(value))))


def smallest_float_at_least(q: Fraction, what: str, fix: str) -> float:
    """Return the smallest float ``>= q`` (``q > 0``), refusing anything above MAX_SCALE.

    The rounding every calibrated scale goes through: the float is never below
    the exact rational, so the noise is never below what the charge pays for.

    Parameters
    ----------
    q : fractions.Fraction
        The exact scale, ``> 0``.
    what, fix : str
        How a refusal names the quantity, and what the caller should do.

    Returns
    -------
    float
        The smallest float ``>= q``.

    Raises
    ------
    InvalidInput
        If ``q`` exceeds :data:`MAX_SCALE`.

    Examples
    --------
    >>> x = smallest_float_at_least(Fraction(1, 3), "scale", "raise epsilon")
    >>> Fraction(x) >= Fraction(1, 3), x == 1 / 3  # 1 / 3 rounds down; x is the next float
    (True, False)
    """
    if q > Fraction(MAX_SCALE):
        raise fail(what, float(q) if q < Fraction(1e308) else math.inf,
                   f"exceeds the largest supported noise scale {MAX_SCALE:g}", fix)
    f = float(q)  # int / int division: correctly rounded
    if Fraction(f) < q:
        f = math.nextafter(f, math.inf)
    return f


def laplace_scale(sensitivity: Any, epsilon: Any) -> float:
    """Return the Laplace noise scale ``sensitivity / epsilon``, rounded up to a float.

    Computed exactly against the decimal value of ``epsilon`` as written (what
    the ledger charges) and the exact binary value of ``sensitivity``; the result
    is the smallest float ``b`` with ``Decimal(b) * Decimal(repr(epsilon)) >=
    sensitivity``.

    Parameters
    ----------
    sensitivity : float
        L1 sensitivity, finite and ``> 0``.
    epsilon : float
        Privacy parameter, finite, ``> 0`` and at most ``1e6``.

    Returns
    -------
    float
        The scale ``b``, at most :data:`MAX_SCALE`.

    Raises
    ------
    InvalidInput
        For a bad sensitivity or epsilon, or a scale above :data:`MAX_SCALE`.

    Examples
    --------
    >>> laplace_scale(1.0, 0.1)
    10.0
    >>> laplace_scale(10.0, 0.7) * 0.7 >= 10.0
    True
    >>> laplace_scale(1.0, 1e-20)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: sensitivity / epsilon=1e+20 exceeds the largest ...
    """
    return _laplace_scale(sensitivity, epsilon, Fraction(1))


def headroom_scale(sensitivity: Any, epsilon: Any) -> float:
    """Return the smallest float ``b`` with ``b * epsilon >= sensitivity * (1 + 2**-24)``.

    The scale of a real-valued :class:`~spatialdp.privacy.noise.LaplaceMechanism`:
    :func:`laplace_scale` with :data:`LATTICE_HEADROOM`, which pays for rounding
    the values to the release lattice (:mod:`spatialdp.privacy.exact`).

    Examples
    --------
    >>> b = headroom_scale(1.0, 0.5)
    >>> b > 2.0, (b - 2.0) / 2.0 <= 2**-24 + 2**-52
    (True, True)
    """
    return _laplace_scale(sensitivity, epsilon, 1 + LATTICE_HEADROOM)


def _laplace_scale(sensitivity: Any, epsilon: Any, factor: Fraction) -> float:
    """Return the smallest float ``b`` with ``b * epsilon >= sensitivity * factor``, exactly."""
    sens = check_positive(sensitivity, "sensitivity",
                          fix="pass the L1 bound of one client's influence, e.g. 1.0")
    eps = check_epsilon(epsilon)
    exact = Fraction(sens) * factor / decimal_value(eps)
    return smallest_float_at_least(exact, "sensitivity / epsilon",
                                   "raise epsilon or rescale the values to a smaller sensitivity")


def _ceil_sqrt(q: Fraction) -> Fraction:
    """Return a dyadic rational ``r >= sqrt(q)`` within a relative ``2**-70`` of it."""
    num, den = q.numerator, q.denominator
    k = max(0, _SQRT_BITS - (num.bit_length() - den.bit_length()) // 2)
    x = -((-num << (2 * k)) // den)  # ceil(q * 4**k)
    root = math.isqrt(x - 1) + 1  # ceil(sqrt(x))
    return Fraction(root, 1 << k)


def gaussian_sigma(sensitivity: Any, rho: Any) -> float:
    """Return the Gaussian noise scale ``sensitivity / sqrt(2 rho)``, rounded up to a float.

    Computed exactly against the decimal value of ``rho`` as written and the
    exact binary value of ``sensitivity``: the result is the smallest float
    ``sigma`` with ``sigma**2 * 2 * Decimal(repr(rho)) >= sensitivity**2``, so the
    release is ``rho``-zCDP.

    Parameters
    ----------
    sensitivity : float
        L2 sensitivity, finite and ``> 0``.
    rho : float
        zCDP parameter, finite, ``> 0`` and at most ``1e6``.

    Returns
    -------
    float
        ``sigma``, at most :data:`MAX_SCALE`.

    Raises
    ------
    InvalidInput
        For a bad sensitivity or rho, or a sigma above :data:`MAX_SCALE`.

    Examples
    --------
    >>> gaussian_sigma(1.0, 0.125)
    2.0
    >>> gaussian_sigma(1.0, 0.3) ** 2 * 2 * 0.3 >= 1.0
    True
    """
    sens = check_positive(sensitivity, "sensitivity",
                          fix="pass the L2 bound of one client's influence, e.g. 1.0")
    r = check_epsilon(rho, "rho")
    target = Fraction(sens) ** 2 / (2 * decimal_value(r))
    fix = "raise rho or rescale the values to a smaller sensitivity"
    sigma = smallest_float_at_least(_ceil_sqrt(target), "sensitivity / sqrt(2 rho)", fix)
    for _ in range(4):  # the root is within 2**-70 of sqrt(target): at most a step or two
        below = math.nextafter(sigma, 0.0)
        if below <= 0.0 or Fraction(below) ** 2 < target:
            break
        sigma = below
    return sigma
