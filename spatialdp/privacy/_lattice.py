"""Real-valued Laplace noise on a fixed-point lattice: exact and floating-point safe.

Textbook Laplace noise added in floating point leaks: the set of floats a noisy
value can take depends on the true value (Mironov, CCS 2012), so a published
float can rule neighbours in or out. Here real values are released the way
OpenDP releases floats, but vectorised and with our exact integer sampler:

1. choose a lattice step ``step = 2**e`` (a power of two, so that scaling by
   it is exact in binary);
2. round each true value to the nearest lattice point, ``N_i = round(v_i /
   step)`` (as a fixed-point secure aggregation would deliver it; ties to even);
3. add exact discrete Laplace noise of scale ``b / step`` lattice units,
   ``N_i + Z_i`` (:func:`~spatialdp.privacy._exact.discrete_laplace_noise`,
   integer arithmetic, OS entropy);
4. publish ``(N_i + Z_i) * step`` as a float64. While ``|N_i + Z_i| < 2**53``
   (and the result is not subnormal) this is exact: the output lies exactly on
   the lattice. Beyond, the float is the correctly rounded value of the lattice
   point.

Privacy
-------
Let ``v, v'`` be neighbouring true vectors with ``||v - v'||_1 <= Delta`` over
``d`` coordinates. Each rounding moves a coordinate by at most ``step / 2``, so
``|N_i - N'_i| <= |v_i - v'_i| / step + 1`` and

    ``||N - N'||_1 <= (Delta + d * step) / step``  lattice units.

Discrete Laplace noise of scale ``S = b / step`` on an integer vector of L1
sensitivity ``k`` is ``(k / S)``-DP, so steps 2-3 are
``epsilon' = (Delta + d * step) / b``-DP, exactly (the sampler is exact, the
rounding is a deterministic function of the data). Step 4 is a deterministic
function of the noisy integers, i.e. post-processing: the published floats are
``epsilon'``-DP whatever rounding they undergo, and they reveal nothing through
their floating-point representation.

Calibration (:class:`~spatialdp.privacy.noise.LaplaceMechanism`, real values):
the mechanism's scale is computed with a relative headroom ``h =``
:data:`LATTICE_HEADROOM` ``= 2**-24``: ``b`` is the smallest float with
``b * epsilon >= Delta * (1 + h)``, exactly, against the decimal epsilon the
ledger charges (:func:`headroom_scale`). At release time, when ``d`` is known,
the step is the largest power of two with

    ``d * step <= b * epsilon - Delta``  (exact rational arithmetic; the slack is ``>= h Delta``)

(:func:`mechanism_exponent`), hence ``epsilon' = (Delta + d * step) / b <=
epsilon``: the ledger's charge is never exceeded, for any ``d``. The published
scale ``b`` is the scale the noise actually has (``b / step`` lattice units
exactly), so error bars computed from it are the noise's. It is at most
``1 + 2**-24`` (plus one float rounding) times ``Delta / epsilon``.

The bare function :func:`~spatialdp.privacy.release.release_laplace`
``(values, scale)`` knows no sensitivity: it takes the largest step with ``d *
step <= h * b`` (:func:`standalone_exponent`), so it is ``(Delta / b + h)``-DP
for a query of L1 sensitivity ``Delta``: at most ``2**-24`` above the nominal
``Delta / b``.

Limits: the noise scale in lattice units, ``S = b / step``, is about ``2**25 d /
epsilon`` at most; it must be at most ``2**56`` (``d / epsilon`` up to about
``2**31``), else the release is refused (a check on public parameters only, see
:func:`check_units`). Values whose lattice integer exceeds ``2**62`` in magnitude
(huge values, tiny sensitivity) are handled exactly with Python integers, never
refused.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from spatialdp._validation import check_epsilon, check_positive
from spatialdp.exceptions import InvalidInput
from spatialdp.privacy._exact import MAX_SAMPLER_SCALE, discrete_laplace_noise
from spatialdp.privacy.calibration import _smallest_float_at_least, decimal_value

__all__ = [
    "LATTICE_HEADROOM",
    "check_units",
    "headroom_scale",
    "lattice_exponent",
    "lattice_laplace",
    "mechanism_exponent",
    "standalone_exponent",
]

#: Relative headroom of the real-valued Laplace scale that pays for the lattice rounding.
LATTICE_HEADROOM = Fraction(1, 2**24)

_FAST_LIMIT = 2.0**62  # lattice integers below this (in magnitude) stay in int64


def headroom_scale(sensitivity: Any, epsilon: Any) -> float:
    """Return the smallest float ``b`` with ``b * epsilon >= sensitivity * (1 + 2**-24)``.

    Exact rational arithmetic against the decimal value of ``epsilon`` (what
    the ledger charges), as :func:`~spatialdp.privacy.calibration.laplace_scale`
    does without the headroom.

    Examples
    --------
    >>> b = headroom_scale(1.0, 0.5)
    >>> b > 2.0, (b - 2.0) / 2.0 <= 2**-24 + 2**-52
    (True, True)
    """
    sens = check_positive(sensitivity, "sensitivity",
                          fix="pass the L1 bound of one client's influence, e.g. 1.0")
    eps = check_epsilon(epsilon)
    exact = Fraction(sens) * (1 + LATTICE_HEADROOM) / decimal_value(eps)
    return _smallest_float_at_least(exact, "sensitivity / epsilon",
                                    "raise epsilon or rescale the values to a smaller sensitivity")


def lattice_exponent(slack: Fraction, size: int) -> int:
    """Return the largest integer ``e`` with ``size * 2**e <= slack``.

    ``slack > 0`` and ``size >= 1``.

    Examples
    --------
    >>> lattice_exponent(Fraction(1), 3), lattice_exponent(Fraction(1, 1000), 1)
    (-2, -10)
    """
    q = slack / size
    e = q.numerator.bit_length() - q.denominator.bit_length()  # 2**(e-1) < q < 2**(e+1)
    return e if Fraction(2) ** e <= q else e - 1


def check_units(scale: float, exponent: int, size: int) -> Fraction:
    """Return the noise scale in lattice units, ``scale / 2**exponent``, or refuse it.

    Raises
    ------
    InvalidInput
        If it exceeds ``2**56`` (public parameters only: the scale, the
        sensitivity and the number of values).

    Examples
    --------
    >>> check_units(2.0, -3, 1)
    Fraction(16, 1)
    """
    units = Fraction(scale) / Fraction(2) ** exponent
    if units > MAX_SAMPLER_SCALE:
        raise InvalidInput(
            f"a real-valued Laplace release of {size} values at scale {scale!r} needs a lattice "
            f"step of 2**{exponent}, i.e. noise of {float(units):.3g} lattice units, above the "
            "limit 2**56 (about 2**31 values per unit of epsilon); split the release into "
            "smaller vectors, raise epsilon, or use discrete=True for integer counts")
    return units


def mechanism_exponent(scale: float, sensitivity: float, epsilon: float, size: int) -> int:
    """Return the lattice exponent of a calibrated mechanism: ``(Delta + d step) / b <= epsilon``.

    ``step = 2**e`` is the largest power of two with ``size * step <= scale *
    epsilon - sensitivity`` (exact; ``epsilon`` as the decimal the ledger
    charges). ``scale`` must come from :func:`headroom_scale`.

    Examples
    --------
    >>> b = headroom_scale(1.0, 0.5)
    >>> e = mechanism_exponent(b, 1.0, 0.5, 1000)
    >>> (1 + 1000 * Fraction(2) ** e) / Fraction(b) <= Fraction(1, 2)
    True
    """
    slack = Fraction(scale) * decimal_value(epsilon) - Fraction(sensitivity)
    if slack <= 0:
        raise InvalidInput(
            f"scale={scale!r} leaves no room for the lattice rounding at sensitivity="
            f"{sensitivity!r}, epsilon={epsilon!r}; use headroom_scale (LaplaceMechanism)")
    e = lattice_exponent(slack, max(1, size))
    check_units(scale, e, size)
    return e


def standalone_exponent(scale: float, size: int) -> int:
    """Return the lattice exponent of a bare release: ``size * step <= 2**-24 * scale``.

    Examples
    --------
    >>> standalone_exponent(1.0, 1)
    -24
    """
    e = lattice_exponent(Fraction(scale) * LATTICE_HEADROOM, max(1, size))
    check_units(scale, e, size)
    return e


def lattice_laplace(values: NDArray[np.float64], scale: float,
                    exponent: int) -> NDArray[np.float64]:
    """Return ``values`` rounded to the lattice ``2**exponent`` plus exact Laplace noise.

    Noise of scale ``scale`` (``scale / 2**exponent`` lattice units, exactly);
    the output has the input's shape, and lies on the lattice exactly while
    the lattice integers are below ``2**53``. See the module docstring for the
    privacy argument.

    Examples
    --------
    >>> out = lattice_laplace(np.array([0.3, 2.0]), 1.0, -30)
    >>> out.shape, bool(np.all(out * 2**30 == np.round(out * 2**30)))
    ((2,), True)
    """
    units = check_units(scale, exponent, values.size)
    flat = values.ravel()
    noise = discrete_laplace_noise(flat.size, units)
    with np.errstate(over="ignore", under="ignore"):
        scaled = np.ldexp(flat, -exponent)  # exact unless it over/underflows
        fast = np.abs(scaled) < _FAST_LIMIT  # False for inf
        if fast.all():
            total = np.rint(scaled).astype(np.int64) + noise
            out = np.ldexp(total.astype(np.float64), exponent)
        else:
            out = np.empty(flat.size, dtype=np.float64)
            total = np.rint(scaled[fast]).astype(np.int64) + noise[fast]
            out[fast] = np.ldexp(total.astype(np.float64), exponent)
            step = Fraction(2) ** exponent
            for i in np.flatnonzero(~fast):  # exact big-integer path for huge lattice integers
                n = round(Fraction(float(flat[i])) / step)
                out[i] = float((n + int(noise[i])) * step)
    return out.reshape(values.shape)
