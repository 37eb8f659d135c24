"""Exact integer samplers fed by operating-system entropy (private helpers).

Everything here draws its randomness from :func:`os.urandom` and uses integer
arithmetic only, so the output distribution is exactly the one stated: no
floating-point rounding, no seeded pseudo-random generator whose state could be
reconstructed from published values.

The samplers are vectorised: a rejection step runs on the still-pending subset
of the array, so the cost is a few dozen numpy passes over shrinking arrays.
Every loop accepts (or finishes) each pending element with probability at
least about 1/6 per pass whatever the scale, and is capped at
:data:`MAX_ROUNDS` passes: reaching the cap has probability below
``10**-700`` and raises :class:`~spatialdp.exceptions.SpatialDPError` rather
than loop forever.
Random integers in ``[0, n)`` come from masked rejection (draw the smallest
number of bits that covers ``n - 1``, reject values ``>= n``), which has no
modulo bias; bit widths of 1, 2 and 4 are packed several to a byte, wider ones
use the smallest of ``uint8/16/32/64`` that holds them.

References
----------
C. L. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
Privacy", NeurIPS 2020, Algorithms 1 and 2.
"""

from __future__ import annotations

import os
from fractions import Fraction
from math import floor, log2

import numpy as np
from numpy.typing import NDArray

from spatialdp.exceptions import SpatialDPError
from spatialdp.privacy.calibration import MAX_SCALE

__all__ = [
    "MAX_DISCRETE_SCALE",
    "MAX_ROUNDS",
    "discrete_laplace_noise",
    "random_bits",
    "rational_scale",
    "uniform_below",
]

#: Largest discrete Laplace scale the exact sampler accepts (int64 stays exact).
MAX_DISCRETE_SCALE = MAX_SCALE

#: Most rejection passes any sampler loop makes before giving up (never reached in practice).
MAX_ROUNDS = 10_000

_SCALE_BITS = 20  # a rounded scale keeps at least this many significant bits
_MAX_DEN_BITS = 62  # denominators stay below 2**62 so that they fit in int64
_EXACT_NUM_LIMIT = 2**32  # exact float scales with numerators below this are kept as is


def _stalled(what: str) -> SpatialDPError:
    return SpatialDPError(
        f"{what} did not finish after {MAX_ROUNDS} rejection passes (probability below "
        "1e-700 for a working entropy source); check os.urandom, then report it")


def rational_scale(scale: float) -> Fraction:
    """Return the exact rational noise scale used by the discrete Laplace release.

    A float scale is itself a dyadic rational. It is used exactly when its
    numerator is below ``2**32`` (integers, halves, quarters, ...). Otherwise
    it is rounded UP to ``ceil(scale * 2**k) / 2**k`` with ``k`` chosen so the
    numerator has about 20 significant bits (relative increase below
    ``2**-20``; ``k <= 62``). Rounding up only adds noise, so the privacy loss
    is never above the nominal ``sensitivity / scale``.

    Parameters
    ----------
    scale : float
        Positive, finite, at most :data:`MAX_DISCRETE_SCALE` (validated by
        the caller).

    Returns
    -------
    fractions.Fraction
        ``numerator / denominator >= scale``; the denominator is a power of 2.

    Examples
    --------
    >>> rational_scale(2.5)
    Fraction(5, 2)
    >>> rational_scale(0.1)  # rounded up: 0.1000000238...
    Fraction(838861, 8388608)
    >>> rational_scale(0.1) >= Fraction(0.1)
    True
    """
    exact = Fraction(scale)
    if exact.numerator < _EXACT_NUM_LIMIT and exact.denominator <= 2**_MAX_DEN_BITS:
        return exact
    k = min(_MAX_DEN_BITS, max(0, _SCALE_BITS - floor(log2(scale))))
    den = 2**k
    num = -((-exact.numerator * den) // exact.denominator)  # ceil(exact * den)
    return Fraction(num, den)


def _raw_bits(bits: int, count: int) -> NDArray[np.unsignedinteger]:
    """Return ``count`` independent uniform integers of ``bits`` bits from the OS."""
    if bits <= 8:
        width = 1 if bits == 1 else 2 if bits == 2 else 4 if bits <= 4 else 8
        per_byte = 8 // width
        data = np.frombuffer(os.urandom(-(-count // per_byte)), dtype=np.uint8)
        if width == 1:
            vals = np.unpackbits(data)
        elif width == 8:
            vals = data
        else:
            shifts = np.arange(0, 8, width, dtype=np.uint8)
            vals = ((data[:, None] >> shifts) & np.uint8((1 << width) - 1)).ravel()
        if width != bits:
            vals = vals & np.uint8((1 << bits) - 1)
        return vals[:count]
    dtype: type[np.unsignedinteger]
    dtype = np.uint16 if bits <= 16 else np.uint32 if bits <= 32 else np.uint64
    vals = np.frombuffer(os.urandom(count * np.dtype(dtype).itemsize), dtype=dtype)
    if bits not in (16, 32, 64):
        vals = vals & dtype((1 << bits) - 1)
    return vals


def random_bits(count: int) -> NDArray[np.bool_]:
    """Return ``count`` fair coin flips from OS entropy (packed 8 to a byte)."""
    return _raw_bits(1, count).astype(bool)


def uniform_below(n: int, count: int) -> NDArray[np.unsignedinteger]:
    """Return ``count`` independent uniform integers in ``[0, n)``, exact, from OS entropy.

    Masked rejection: draw ``bit_length(n - 1)`` bits, reject values ``>= n``
    (acceptance at least 1/2). Accepted values are kept in draw order, so
    discarding a surplus does not bias the result.
    """
    if n < 1:
        raise ValueError(f"uniform_below needs n >= 1, got {n}")
    if n == 1 or count == 0:
        return np.zeros(count, dtype=np.uint8)
    bits = (n - 1).bit_length()
    if n == 1 << bits:
        return _raw_bits(bits, count)
    parts = []
    got = 0
    for _ in range(MAX_ROUNDS):
        need = count - got
        vals = _raw_bits(bits, int(need * (1 << bits) / n * 1.02) + 32)
        vals = vals[vals < n][:need]
        parts.append(vals)
        got += vals.size
        if got >= count:
            return parts[0] if len(parts) == 1 else np.concatenate(parts)
    raise _stalled("uniform_below")


def _bernoulli_exp_fraction(u: NDArray[np.int64], t: int) -> NDArray[np.bool_]:
    """Return Bernoulli(exp(-u / t)) per element, ``0 <= u < t`` (CKS Algorithm 1).

    K = 1; repeat A ~ Bernoulli(gamma / K), K += 1 while A; return K odd.
    Bernoulli(u / (t K)) is drawn as Bernoulli(1 / K) AND Bernoulli(u / t),
    which keeps every uniform draw below ``max(t, K)``.
    """
    out = np.empty(u.size, dtype=bool)
    alive = np.arange(u.size)
    ua = u
    for k in range(1, MAX_ROUNDS + 1):
        if not alive.size:
            return out
        if k == 1:
            accept = uniform_below(t, alive.size) < ua
        else:
            accept = uniform_below(k, alive.size) == 0
            sub = np.flatnonzero(accept)
            if sub.size:
                accept[sub] = uniform_below(t, sub.size) < ua[sub]
        out[alive[~accept]] = k % 2 == 1
        alive = alive[accept]
        ua = ua[accept]
    raise _stalled("Bernoulli(exp(-u/t))")


def _bernoulli_exp_minus_one(count: int) -> NDArray[np.bool_]:
    """Return Bernoulli(exp(-1)) draws, CKS Algorithm 1 with gamma = 1 (first step succeeds)."""
    out = np.empty(count, dtype=bool)
    alive = np.arange(count)
    for k in range(2, MAX_ROUNDS + 2):
        if not alive.size:
            return out
        accept = uniform_below(k, alive.size) == 0
        out[alive[~accept]] = k % 2 == 1
        alive = alive[accept]
    raise _stalled("Bernoulli(exp(-1))")


def _geometric_exp_minus_one(count: int) -> NDArray[np.int64]:
    """Return V with P(V >= v) = exp(-v): successes of Bernoulli(exp(-1)) before a failure."""
    v = np.zeros(count, dtype=np.int64)
    alive = np.arange(count)
    for _ in range(MAX_ROUNDS):
        if not alive.size:
            return v
        alive = alive[_bernoulli_exp_minus_one(alive.size)]
        v[alive] += 1
    raise _stalled("the geometric sampler")


def discrete_laplace_noise(count: int, scale: Fraction) -> NDArray[np.int64]:
    """Return ``count`` iid draws with P(z) proportional to exp(-|z| / scale), exact.

    Canonne-Kamath-Steinke Algorithm 2 with ``scale = t / s`` (``t``, ``s``
    positive integers), vectorised: each round runs the algorithm on every
    still-pending element and keeps those that are not rejected.
    """
    t, s = scale.numerator, scale.denominator
    out = np.empty(count, dtype=np.int64)
    pending = np.arange(count)
    for _ in range(MAX_ROUNDS):
        if not pending.size:
            return out
        if t == 1:
            idx = pending
            u = np.zeros(pending.size, dtype=np.int64)
            rejected = pending[:0]
        else:
            u = uniform_below(t, pending.size).astype(np.int64)
            keep = _bernoulli_exp_fraction(u, t)
            idx, u, rejected = pending[keep], u[keep], pending[~keep]
        y = (u + t * _geometric_exp_minus_one(idx.size)) // s
        negative = random_bits(idx.size)
        retry = negative & (y == 0)
        ok = ~retry
        y_ok = y[ok]
        out[idx[ok]] = np.where(negative[ok], -y_ok, y_ok)
        pending = np.concatenate([rejected, idx[retry]])
    raise _stalled("the discrete Laplace sampler")
