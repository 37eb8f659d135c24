"""Exact noise from operating-system entropy: the integer sampler and the lattice release.

One idea, two layers: every random outcome is decided by integer arithmetic on
exact rationals.

* :func:`discrete_laplace_noise` - exact discrete Laplace draws (first part below);
* :func:`lattice_laplace` - real-valued Laplace noise on a fixed-point lattice,
  built on it (second part below).

The sampler
===========
Everything here draws its randomness from operating-system entropy
(:func:`random_bytes`: :func:`os.urandom`, expanded by ChaCha20 under fresh
keys; see "Entropy" below) and decides every random outcome with integer
arithmetic on exact rationals, so the output distribution is exactly the one
stated: no floating-point rounding, no seeded pseudo-random generator whose
state could be reconstructed from published values.

Discrete Laplace by exact table inversion
-----------------------------------------
The noise ``Z`` with ``P(z)`` proportional to ``a**|z|``, ``a = exp(-1/scale)``,
is a uniform sign times a geometric magnitude ``Y`` (``P(Y >= y) = a**y``),
with the pair (negative sign, ``Y = 0``) rejected and redrawn (Canonne, Kamath
and Steinke 2020, Algorithm 2). ``Y`` is split into base-``B`` digits
(``B = 2**10``)::

    Y = D_0 + B D_1 + ... + B**(L-1) D_(L-1) + B**L G

and because the geometric distribution is memoryless the parts are
INDEPENDENT: ``D_l`` is a geometric truncated to ``[0, B)`` with ratio
``r_l = a**(B**l)`` and ``G`` is geometric with ratio ``r_L``. ``L`` is chosen
per scale to minimise the expected number of draws. At small scales (``L =
0``, up to a scale of about 500) ``|Z|`` itself is inverted (``P(|Z| >= j) = 2
a**j / (1 + a)``, a geometric beyond ``B - 1``) with the sign taken from the same
16-bit word: no sign pass and no rejection.

Each part is drawn by inversion: ``D = #{j : V < c_j}`` for a uniform ``V`` in
``[0, 1)`` and the thresholds ``c_j = P(D >= j)``, ``j = 1 .. B-1`` (for ``G``
the last bucket means ``G >= B-1``, and ``G - (B-1)`` is geometric again:
drawn afresh, memorylessness). The thresholds are powers of ``exp(-x)`` for an
exact rational ``x``; they are irrational, so they are never computed, only
BRACKETED: integers ``lo_j <= c_j 2**64 <= hi_j`` from an exact Taylor series
and fixed-point products rounded down (``lo``) or up (``hi``). ``V`` is
revealed lazily:

1. 16 random bits ``w``: a lookup table says which digit every ``V`` in
   ``[w, w+1) 2**-16`` gives, when no bracket meets that interval (97-100% of
   draws, depending on the part);
2. otherwise 48 more bits and a binary search over the 64-bit brackets;
3. otherwise (probability below about ``2**-50`` per draw) 64 more bits at a time,
   with the few undecided thresholds bracketed afresh at that precision, until
   each comparison is decided.

A comparison is only ever decided when the interval of every ``V`` with the
revealed prefix lies on one side of the bracket, so the output is exactly the
inversion of an infinitely precise uniform: exact, whatever the scale. The cost
is one 16-bit word per part (one or two parts at realistic scales), a table
lookup, and a few numpy passes; the tables are built once per scale (cached).

Large scales: one word a draw
----------------------------
From ``2**20`` (the lattice release samples at about ``2**40``), the table
sampler would need several truncated digits. Instead ``Y = L + 2**k G`` with
``2**k / S`` in ``(2**-7, 2**-6]``: the low part ``L`` (a geometric truncated
to ``[0, 2**k)``, nearly uniform) is proposed from ``k`` raw bits and accepted
with probability ``exp(-L / S)``, decided exactly (the spare bits of the word
first, then float brackets of ``1 - exp(-t)`` with a proven margin, then
integer brackets); ``G`` (scale 64 to 128) is one 16-bit table lookup. One
64-bit word of OS entropy carries ``L``, the first bits of the acceptance
uniform, the sign and ``G``'s prefix (:func:`_split_noise`).

Every loop is capped at :data:`MAX_ROUNDS` passes: reaching the cap has
probability below ``10**-700`` and raises
:class:`~spatialdp.exceptions.SpatialDPError` rather than loop forever.
Random integers in ``[0, n)`` (:func:`uniform_below`) come from masked
rejection (draw the smallest number of bits that covers ``n - 1``, reject
values ``>= n``), which has no modulo bias.

Entropy
-------
Every random bit comes from :func:`random_bytes`. Requests below 2048 bytes
are :func:`os.urandom` itself. Longer ones are the ChaCha20 keystream (RFC
8439, through the ``cryptography`` package's OpenSSL binding) under a 256-bit
key of 32 fresh bytes of :func:`os.urandom`, with a new key for every MiB and
nothing kept between calls. This is how the operating system makes the bytes of
:func:`os.urandom` in the first place: Linux's ``getrandom`` expands its
entropy pool with the same cipher (a ChaCha20 CRNG since Linux 4.8, keyed
from a BLAKE2s pool since 5.17), so the noise still comes from OS entropy,
only expanded in our process rather than in the kernel, at about ten times the
throughput (the kernel call costs as much per byte as numpy's whole
``laplace`` per value; the keystream about 0.2 ns a byte).

Why this keeps the guarantees:

* **Exactness.** The samplers' proofs assume independent uniform bits. A
  ChaCha20 keystream under a uniformly random secret key is
  indistinguishable from uniform bytes by any feasible computation (the
  standard assumption on ChaCha20, and the one every use of
  :func:`os.urandom` already makes, since its output is such a keystream).
  So the noise distribution is exact for any computationally bounded
  observer, exactly as before; privacy is the same computational DP that
  any OS-entropy sampler provides.
* **No seed.** The key is drawn inside :func:`random_bytes` from
  :func:`os.urandom` and never stored, returned or accepted: no function
  takes a seed, a key or a generator, and no state survives a call (so a
  fork cannot duplicate a stream, and threads cannot share one).
* **No reuse.** Each key encrypts at most 1 MiB (2**14 blocks, far below
  ChaCha20's 2**32-block counter) with the all-zero nonce, once; keys are 256
  fresh bits, so two calls share a key with probability ``2**-256``.

The tests check the stream against the RFC 8439 test vector with
:func:`os.urandom` replaced by zeros (so every key comes from it), that each call
and each MiB gets a fresh key, and that the bytes and 16-bit words pass
chi-square uniformity tests (``p > 1e-6``).

References
----------
C. L. Canonne, G. Kamath, T. Steinke, "The Discrete Gaussian for Differential
Privacy", NeurIPS 2020, Algorithm 2 (the sign and the rejection of -0).

The lattice release
===================
Textbook Laplace noise added in floating point leaks: the set of floats a noisy
value can take depends on the true value (Mironov, CCS 2012), so a published
float can rule neighbours in or out. Here real values are released the way
OpenDP releases floats, but vectorised and with our exact integer sampler:

1. choose a lattice step ``step = 2**e`` (a power of two, so that scaling by
   it is exact in binary);
2. round each true value to the nearest lattice point, ``N_i = round(v_i /
   step)`` (as a fixed-point secure aggregation would deliver it; ties to even);
3. add exact discrete Laplace noise of scale ``b / step`` lattice units,
   ``N_i + Z_i`` (:func:`discrete_laplace_noise`,
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
:data:`~spatialdp.privacy.calibration.LATTICE_HEADROOM` ``= 2**-24``: ``b`` is
the smallest float with ``b * epsilon >= Delta * (1 + h)``, exactly, against
the decimal epsilon the ledger charges
(:func:`~spatialdp.privacy.calibration.headroom_scale`). At release time, when
``d`` is known, the step is the largest power of two with

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

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from math import exp, expm1, floor, ldexp, log2
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from spatialdp._validation import MAX_SCALE
from spatialdp.exceptions import InvalidInput, SpatialDPError
from spatialdp.privacy.calibration import LATTICE_HEADROOM, decimal_value

if TYPE_CHECKING:  # imported on first use (_chacha20): importing this module stays cheap
    from cryptography.hazmat.primitives.ciphers import CipherContext

__all__ = [
    "MAX_DISCRETE_SCALE",
    "MAX_ROUNDS",
    "MAX_SAMPLER_SCALE",
    "check_units",
    "discrete_laplace_noise",
    "fill_random",
    "lattice_exponent",
    "lattice_laplace",
    "mechanism_exponent",
    "random_bits",
    "random_bytes",
    "rational_scale",
    "standalone_exponent",
    "uniform_below",
]

#: Largest discrete Laplace scale the public integer release accepts.
MAX_DISCRETE_SCALE = MAX_SCALE

#: Largest scale :func:`discrete_laplace_noise` accepts (the lattice release uses
#: scales in lattice units up to this): int64 noise then overflows with probability
#: below ``exp(-64)`` per draw (and that is detected, never wrapped).
MAX_SAMPLER_SCALE = 2**56

#: Most rejection passes any sampler loop makes before giving up (never reached in practice).
MAX_ROUNDS = 10_000

_SCALE_BITS = 20  # a rounded scale keeps at least this many significant bits
_MAX_DEN_BITS = 62  # denominators stay below 2**62 so that they fit in int64
_EXACT_NUM_LIMIT = 2**32  # exact float scales with numerators below this are kept as is

_DIGIT_BITS = 10
_BASE = 1 << _DIGIT_BITS  # digits take values 0 .. _BASE - 1
_LUT_BITS = 16  # the first look at V: 16 bits and a lookup table
_UNDECIDED = np.uint16(0xFFFF)  # lookup-table entry: the 16 bits do not decide the digit
_PREC = 64  # brackets of the thresholds are kept to 64 bits
_INT64_LIMIT = 2**62  # |noise| beyond this is refused (probability < exp(-64) per draw)


def _stalled(what: str) -> SpatialDPError:
    return SpatialDPError(
        f"{what} did not finish after {MAX_ROUNDS} rejection passes (probability below "
        "1e-700 for a working entropy source); check os.urandom, then report it")


def rational_scale(scale: float) -> Fraction:
    """Return ``scale`` as an exact rational, rounded up to about 20 significant bits.

    Kept for compatibility: the discrete Laplace release now samples at the
    exact value of the float scale (``Fraction(scale)``), which the exact
    table sampler handles at any size. A float scale is itself a dyadic
    rational; it is returned exactly when its numerator is below ``2**32``,
    otherwise rounded UP to ``ceil(scale * 2**k) / 2**k`` with ``k`` chosen so
    the numerator has about 20 significant bits (relative increase below
    ``2**-20``; ``k <= 62``).

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


# ---------------------------------------------------------------------------
# entropy
# ---------------------------------------------------------------------------


#: Requests below this many bytes read :func:`os.urandom` directly (cheaper than a key).
_DIRECT_BYTES = 2048
_KEY_BYTES = 32  # a ChaCha20 key: 256 bits of OS entropy
_PIECE_BYTES = 1 << 20  # keystream bytes per key (a fresh key for each MiB)


@lru_cache(maxsize=1)
def _chacha20() -> tuple[Callable[[bytes], CipherContext], memoryview]:
    """Return a ChaCha20 encryptor factory (key -> encryptor) and a MiB of zero bytes.

    Built on first use, so that importing this module does not import
    ``cryptography`` (nor allocate the MiB).
    """
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

    nonce = bytes(16)  # OpenSSL's layout: 32-bit block counter 0, 96-bit nonce 0 (one use per key)

    def encryptor(key: bytes) -> CipherContext:
        return Cipher(algorithms.ChaCha20(key, nonce), mode=None).encryptor()

    return encryptor, memoryview(bytes(_PIECE_BYTES))


def random_bytes(nbytes: int) -> bytes | bytearray:
    """Return ``nbytes`` uniform random bytes from operating-system entropy; no seed.

    Short requests (below 2048 bytes) are :func:`os.urandom` itself. Longer ones
    are the ChaCha20 keystream under a key of 32 fresh bytes of
    :func:`os.urandom`, a new key for each MiB (what the Linux kernel's
    ``getrandom`` does internally: it expands its entropy pool with ChaCha20).
    Nothing is kept between calls: no key, no counter, no state that a fork
    could duplicate or a caller could set. See "Entropy" in the module docstring.

    Examples
    --------
    >>> len(random_bytes(4096)), random_bytes(4096) != random_bytes(4096)  # the keystream
    (4096, True)
    """
    if nbytes < _DIRECT_BYTES:
        return os.urandom(nbytes)
    if nbytes <= _PIECE_BYTES:
        encryptor, zeros = _chacha20()
        return encryptor(os.urandom(_KEY_BYTES)).update(zeros[:nbytes])
    out = bytearray(nbytes)
    fill_random(memoryview(out))
    return out


def fill_random(buffer: memoryview) -> None:
    """Overwrite a writable byte buffer with uniform random bytes, as :func:`random_bytes`.

    The same bytes as :func:`random_bytes` of its length would return (os.urandom
    below 2048 bytes, else ChaCha20 keystream under a fresh key per MiB), written
    in place: a large release reuses one buffer for all its chunks instead of
    allocating (and page-faulting) a new one for each.

    Examples
    --------
    >>> buf = bytearray(4096)
    >>> fill_random(memoryview(buf))
    >>> buf != bytearray(4096)
    True
    """
    nbytes = len(buffer)
    if nbytes < _DIRECT_BYTES:
        buffer[:] = os.urandom(nbytes)
        return
    encryptor, zeros = _chacha20()
    for start in range(0, nbytes, _PIECE_BYTES):
        piece = buffer[start:start + _PIECE_BYTES]
        encryptor(os.urandom(_KEY_BYTES)).update_into(zeros[:len(piece)], piece)


def _raw_bits(bits: int, count: int) -> NDArray[np.unsignedinteger]:
    """Return ``count`` independent uniform integers of ``bits`` bits (:func:`random_bytes`)."""
    if bits <= 8:
        width = 1 if bits == 1 else 2 if bits == 2 else 4 if bits <= 4 else 8
        per_byte = 8 // width
        data = np.frombuffer(random_bytes(-(-count // per_byte)), dtype=np.uint8)
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
    vals = np.frombuffer(random_bytes(count * np.dtype(dtype).itemsize), dtype=dtype)
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


# ---------------------------------------------------------------------------
# brackets of exp(-x) and of the inversion thresholds (exact integer arithmetic)
# ---------------------------------------------------------------------------


def _exp_neg_bounds(x: Fraction, prec: int) -> tuple[int, int]:
    """Return integers ``lo <= exp(-x) * 2**prec <= hi`` for a rational ``x >= 0``.

    ``hi - lo`` is at most a few units. ``exp(y)``, ``y = x / 2**k < 1``, is
    bracketed by its Taylor series in fixed point (terms rounded down for the
    lower sum, up for the upper one, plus a bound on the rest), inverted, then
    squared ``k`` times with downward / upward rounding; the working precision
    absorbs the ``2**k`` growth of the error.

    Examples
    --------
    >>> lo, hi = _exp_neg_bounds(Fraction(1), 20)
    >>> lo <= 0.36787944117144233 * 2**20 <= hi, hi - lo <= 4
    (True, True)
    """
    if x == 0:
        return 1 << prec, 1 << prec
    num, den = x.numerator, x.denominator
    k = max(0, num.bit_length() - den.bit_length() + 1)  # y = x / 2**k < 1
    q = prec + k + 8
    den_k = den << k
    one = 1 << q
    sum_lo = sum_hi = 0
    t_lo = t_hi = one
    j = 0
    while t_hi > 1:
        sum_lo += t_lo
        sum_hi += t_hi
        j += 1
        t_lo = t_lo * num // (den_k * j)
        t_hi = -(-t_hi * num // (den_k * j))
    sum_lo += t_lo
    sum_hi += t_hi + 2  # every later term is at most half the previous one (y < 1, j >= 1)
    lo = (one * one) // sum_hi  # exp(-y) 2**q, rounded down
    hi = -(-(one * one) // sum_lo)
    for _ in range(k):
        lo = (lo * lo) >> q
        hi = -((-hi * hi) >> q)
    shift = q - prec
    return lo >> shift, -((-hi) >> shift)


_TRUNCATED, _GEOMETRIC, _ABS = "truncated", "geometric", "abs"


def _threshold_bounds(x: Fraction, kind: str, j: int, prec: int) -> tuple[int, int]:
    """Bracket ``c_j 2**prec`` for one part (any precision; the rare deep path).

    With ``r = exp(-x)``: ``c_j = r**j`` for a geometric part, ``(r**j - r**B) /
    (1 - r**B)`` for a digit truncated to ``[0, B)`` and ``2 r**j / (1 + r)``
    for the magnitude of a discrete Laplace variable.
    """
    if kind == _GEOMETRIC:
        return _exp_neg_bounds(j * x, prec)
    guard = prec + 16
    for _ in range(MAX_ROUNDS):
        one = 1 << guard
        a_lo, a_hi = _exp_neg_bounds(j * x, guard)
        if kind == _TRUNCATED:
            b_lo, b_hi = _exp_neg_bounds(_BASE * x, guard)
            num_lo, num_hi = max(0, a_lo - b_hi), a_hi - b_lo
            den_lo, den_hi = one - b_hi, one - b_lo
        else:
            r_lo, r_hi = _exp_neg_bounds(x, guard)
            num_lo, num_hi = 2 * a_lo, 2 * a_hi
            den_lo, den_hi = one + r_lo, one + r_hi
        if den_lo > 0:
            lo = (num_lo << prec) // den_hi
            hi = -(-(num_hi << prec) // den_lo)
            if hi - lo <= 4:
                return lo, hi
        guard += 64
    raise _stalled("the threshold bracket")  # pragma: no cover - impossible


@dataclass(frozen=True, eq=False)
class _Digit:
    """One independent part of the noise, with its inversion tables.

    ``lo``/``hi`` bracket ``c_j 2**64`` for ``j = B-1, ..., 1`` (ascending).
    ``lut[w]`` is the value for every ``V`` with 16-bit prefix ``w``, or
    ``_UNDECIDED``. For the ``"abs"`` part (``|Z|`` of a small-scale discrete
    Laplace) ``lut`` is signed instead: bit 15 of ``w`` is the sign and the
    other 15 bits are the prefix of ``V``; undecided entries are ``_SIGNED_UNDECIDED``.
    """

    x: Fraction  # the ratio is exp(-x)
    kind: str  # _TRUNCATED: on [0, B); _GEOMETRIC / _ABS: the last bucket is the tail >= B - 1
    lo: NDArray[np.uint64]
    hi: NDArray[np.uint64]
    lut: NDArray[np.uint16] | NDArray[np.int16]


_SIGNED_UNDECIDED = np.int16(-(2**15))
_SIGN_BIT = 15  # the signed table: bit 15 is the sign, bits 0-14 the prefix of V


def _digit(x: Fraction, kind: str) -> _Digit:
    """Build the brackets and the lookup table of one part (ratio ``exp(-x)``)."""
    extra = 0
    if kind == _TRUNCATED:  # 1 - r**B is small: keep enough bits through the cancellation
        xf = float(x) if x < 2**20 else float(2**20)
        extra = max(0, -floor(log2(-expm1(-_BASE * xf)))) + 1
    q = _PREC + _DIGIT_BITS + 24 + extra
    for _ in range(MAX_ROUNDS):
        r_lo, r_hi = _exp_neg_bounds(x, q)
        one = 1 << q
        p_lo = p_hi = one
        pow_lo, pow_hi = [], []
        for _j in range(_BASE):  # r**1 .. r**B, rounded down / up
            p_lo = (p_lo * r_lo) >> q
            p_hi = -((-p_hi * r_hi) >> q)
            pow_lo.append(p_lo)
            pow_hi.append(p_hi)
        pow_lo, pow_hi = pow_lo[:-1], pow_hi[:-1]  # j = 1 .. B-1
        if kind == _TRUNCATED:
            b_lo, b_hi = p_lo, p_hi  # r**B
            den_lo, den_hi = one - b_hi, one - b_lo
            if den_lo <= 0:
                q += 64
                continue
            lo = [(max(0, a - b_hi) << _PREC) // den_hi for a in pow_lo]
            hi = [-(-((a - b_lo) << _PREC) // den_lo) for a in pow_hi]
        elif kind == _ABS:  # 2 r**j / (1 + r)
            lo = [(a << (_PREC + 1)) // (one + r_hi) for a in pow_lo]
            hi = [-(-(a << (_PREC + 1)) // (one + r_lo)) for a in pow_hi]
        else:
            shift = q - _PREC
            lo = [a >> shift for a in pow_lo]
            hi = [-((-a) >> shift) for a in pow_hi]
        if max(h - lo_ for h, lo_ in zip(hi, lo, strict=True)) <= 8 and hi[0] < 2**_PREC:
            break
        q += 64
    else:  # pragma: no cover - impossible
        raise _stalled("the table construction")
    # ascending order (j = B-1 .. 1); the true thresholds increase strictly, so
    # tightening the brackets to be monotone keeps them valid
    lo_a = np.maximum.accumulate(np.array(lo[::-1], dtype=np.uint64))
    hi_a = np.minimum.accumulate(np.array(hi, dtype=np.uint64))[::-1]
    if kind != _ABS:
        return _Digit(x, kind, lo_a, hi_a, _lookup_table(lo_a, hi_a, _LUT_BITS))
    mags = _lookup_table(lo_a, hi_a, _SIGN_BIT)
    undecided = mags == _UNDECIDED
    signed = mags.astype(np.int16)
    signed[undecided] = _SIGNED_UNDECIDED
    negative = np.where(undecided, _SIGNED_UNDECIDED, -signed).astype(np.int16)
    return _Digit(x, kind, lo_a, hi_a, np.concatenate([signed, negative]))


def _lookup_table(lo: NDArray[np.uint64], hi: NDArray[np.uint64],
                  bits: int) -> NDArray[np.uint16]:
    """Return the value decided by each ``bits``-bit prefix of ``V``, or ``_UNDECIDED``.

    The prefix ``w`` covers ``[start, last] = [w, w + 1) 2**(64 - bits)``; ``c_j > V``
    for every ``V`` there iff ``lo_j > last``, and ``c_j <= V`` for all iff ``hi_j <=
    start``. The counts ``#{lo_j <= last}`` and ``#{hi_j <= start}`` of every prefix are
    cumulative histograms: ``lo_j <= last`` iff ``floor(lo_j / 2**(64 - bits)) <= w``,
    ``hi_j <= start`` iff ``ceil(hi_j / 2**(64 - bits)) <= w`` (no search needed).
    """
    low_bits = np.uint64(_PREC - bits)
    size = 1 << bits
    n_lo = np.cumsum(np.bincount((lo >> low_bits).astype(np.intp), minlength=size))
    hi_up = (hi >> low_bits) + ((hi & np.uint64((1 << (_PREC - bits)) - 1)) != 0)
    n_hi = np.cumsum(np.bincount(hi_up.astype(np.intp), minlength=size + 1))[:size]
    digit = (lo.size - n_lo).astype(np.uint16)
    return np.where(n_lo == n_hi, digit, _UNDECIDED).astype(np.uint16)


def _deep(d: _Digit, w64: int, first: int, stop: int) -> int:
    """Return how many of the undecided thresholds (ascending ``first .. stop-1``) exceed V.

    ``w64`` holds the first 64 bits of ``V``; 64 more are drawn per round and
    each undecided threshold is bracketed again at the new precision.
    """
    pending = [_BASE - 1 - i for i in range(first, stop)]  # the j of each threshold
    above = 0
    w, prec = w64, _PREC
    for _ in range(MAX_ROUNDS):
        w = (w << 64) | int.from_bytes(random_bytes(8), "little")
        prec += 64
        still = []
        for j in pending:
            lo, hi = _threshold_bounds(d.x, d.kind, j, prec)
            if lo > w:  # c_j >= (w + 1) 2**-prec > V
                above += 1
            elif hi > w:  # undecided
                still.append(j)
        pending = still
        if not pending:
            return above
    raise _stalled("the exact comparison")  # pragma: no cover - probability 2**-640000


def _resolve(d: _Digit, prefix: NDArray[np.unsignedinteger], bits: int) -> NDArray[np.uint16]:
    """Return the values of the draws whose ``bits``-bit prefix of ``V`` did not decide them."""
    more = _raw_bits(64, prefix.size) >> np.uint64(bits)
    w = (prefix.astype(np.uint64) << np.uint64(_PREC - bits)) | more
    n_lo = np.searchsorted(d.lo, w, side="right")
    n_hi = np.searchsorted(d.hi, w, side="right")
    out = (d.lo.size - n_lo).astype(np.uint16)
    for i in (n_lo != n_hi).nonzero()[0]:  # thresholds n_hi .. n_lo - 1 are undecided
        out[i] += _deep(d, int(w[i]), int(n_hi[i]), int(n_lo[i]))
    return out


def _draw(d: _Digit, count: int, w16: NDArray[np.unsignedinteger] | None = None,
          out: NDArray[np.uint16] | None = None) -> NDArray[np.uint16]:
    """Return ``count`` exact draws of one unsigned part (values ``0 .. B-1``).

    ``w16``: the 16-bit prefixes of the uniforms to invert (drawn if not given);
    ``out``: a buffer of ``count`` entries to write them to (allocated if not given).
    """
    return _draw_top(d, count, w16, out)[0]


def _draw_top(d: _Digit, count: int, w16: NDArray[np.unsignedinteger] | None = None,
              out: NDArray[np.uint16] | None = None
              ) -> tuple[NDArray[np.uint16], NDArray[np.intp]]:
    """Return :func:`_draw`'s draws and the indices of those in the top bucket ``B-1``.

    One pass finds both the undecided draws and the top bucket (``_UNDECIDED`` is
    above ``B - 1``).
    """
    if w16 is None:
        w16 = _raw_bits(_LUT_BITS, count)
    if out is None:
        out = d.lut[w16]
    else:  # "clip" takes no buffered copy; every 16-bit prefix is in range anyway
        np.take(d.lut, w16, out=out, mode="clip")
    hard = (out >= _BASE - 1).nonzero()[0]
    if not hard.size:
        return out, hard
    undecided = hard[out[hard] == _UNDECIDED]
    if undecided.size:
        out[undecided] = _resolve(d, w16[undecided], _LUT_BITS)
    return out, hard[out[hard] == _BASE - 1]


def _draw_signed(d: _Digit, count: int) -> NDArray[np.int16]:
    """Return ``count`` exact draws of ``sign * |Z|`` from the ``"abs"`` part (``|Z| <= B-1``)."""
    w16 = _raw_bits(_LUT_BITS, count)
    out: NDArray[np.int16] = d.lut[w16]
    undecided = (out == _SIGNED_UNDECIDED).nonzero()[0]
    if undecided.size:
        w = w16[undecided]
        mags = _resolve(d, w & np.uint16((1 << _SIGN_BIT) - 1), _SIGN_BIT).astype(np.int16)
        out[undecided] = np.where(w >> np.uint16(_SIGN_BIT) != 0, -mags, mags)
    return out


@dataclass(frozen=True, eq=False)
class _Plan:
    """The parts of the noise for one scale.

    Small scales (``digits`` empty): ``Z = sign |Z|`` straight from the signed
    ``first`` table, with the tail ``|Z| >= B-1`` continued by ``top``. Larger
    scales: ``Y = digits + B**L top`` and a separate sign.
    """

    first: _Digit | None
    digits: tuple[_Digit, ...]
    top: _Digit


def _levels(x0: Fraction) -> int:
    """Return the number of truncated digits that minimises the expected number of draws."""
    if x0 * (_BASE - 1) >= 64:
        return 0
    best, best_cost = 0, float("inf")
    for levels in range(0, 8):
        tail = exp(-(_BASE - 1) * float(x0) * _BASE**levels)  # P(the top part loops)
        cost = levels + 1.0 / max(1e-12, 1.0 - tail)
        if cost < best_cost:
            best, best_cost = levels, cost
        if tail < 1e-3:
            break
    return best


@lru_cache(maxsize=64)
def _plan(scale: Fraction) -> _Plan:
    x0 = 1 / scale
    levels = _levels(x0)
    top = _digit(x0 * _BASE**levels, _GEOMETRIC)
    if not levels:
        return _Plan(_digit(x0, _ABS), (), top)
    return _Plan(None, tuple(_digit(x0 * _BASE**lvl, _TRUNCATED) for lvl in range(levels)), top)


def _overflow() -> SpatialDPError:
    return SpatialDPError("the discrete Laplace noise overflowed int64 (probability below "
                          "exp(-64)); report it")


def _top_geometric(top: _Digit, count: int, w16: NDArray[np.unsignedinteger] | None = None,
                   work: _Workspace | None = None) -> NDArray[np.int64]:
    """Return ``count`` exact geometric draws of ratio ``exp(-top.x)`` (memoryless tail).

    ``w16``: the 16-bit prefixes of the first uniforms (drawn if not given);
    ``work``: buffers to write to (the draws are then ``work.g[:count]``).
    """
    g16, tail = _draw_top(top, count, w16, None if work is None else work.g16[:count])
    if work is None:
        g = g16.astype(np.int64)
    else:
        g = work.g[:count]
        np.copyto(g, g16)
    for _ in range(MAX_ROUNDS):
        if not tail.size:
            return g
        more, top_bucket = _draw_top(top, tail.size)
        g[tail] += more
        tail = tail[top_bucket]
    raise _stalled("the geometric sampler")


def _geometric(plan: _Plan, count: int) -> NDArray[np.int64]:
    """Return ``count`` exact geometric draws ``Y`` (``P(Y >= y) = exp(-y / scale)``)."""
    g = _top_geometric(plan.top, count)
    shift = _DIGIT_BITS * len(plan.digits)
    if int(g.max(initial=0)) >= _INT64_LIMIT >> shift:
        raise _overflow()
    if shift:
        g <<= shift
        for lvl, d in enumerate(plan.digits):
            g |= _draw(d, count).astype(np.int64) << (_DIGIT_BITS * lvl)
    return g


def _small_scale_noise(plan: _Plan, count: int) -> NDArray[np.int64]:
    """Return discrete Laplace draws from the signed ``|Z|`` table (no rejection needed)."""
    assert plan.first is not None
    z16 = _draw_signed(plan.first, count)
    tail = (np.abs(z16) == _BASE - 1).nonzero()[0]  # |Z| >= B-1: add a fresh geometric
    z = z16.astype(np.int64)
    if tail.size:
        more = _top_geometric(plan.top, tail.size)
        if int(more.max()) >= _INT64_LIMIT:
            raise _overflow()
        z[tail] += np.where(z[tail] < 0, -more, more)
    return z


# ---------------------------------------------------------------------------
# large scales: uniform low bits, one rejection, one table draw (one 64-bit word)
# ---------------------------------------------------------------------------

#: Scales (in lattice units) from ``2**_SPLIT_MIN_BITS`` up take the split sampler.
_SPLIT_MIN_BITS = 20
_TOP_SCALE_BITS = 6  # the high part G has scale S / 2**k in [2**6, 2**7) (or more if k is capped)
_MAX_LOW_BITS = 46  # k <= 46 leaves at least one bit of V in the word
_CHUNK = 1 << 16  # draws per pass of the split sampler and the lattice sum (fits in cache)
_MIN_CHECK_BITS = 8  # fewer spare bits in the word: V's first bits come from 2 more bytes
_CHECK_BITS = 20  # at most this many bits of V are read in the first look (exact floats)
_FLOAT_MARGIN = 2.0**-40  # relative widening of the float brackets of 1 - exp(-t)


@dataclass(frozen=True, eq=False)
class _Split:
    """The split sampler of one scale ``S``: ``Y = L + 2**k G`` (see :func:`_split_noise`)."""

    inv: Fraction  # 1 / S
    inv_float: float  # float(1 / S), correctly rounded
    low_bits: int  # k
    top: _Digit  # G: geometric of ratio exp(-2**k / S)


def _floor_log2(x: Fraction) -> int:
    """Return the largest integer ``e`` with ``2**e <= x`` (``x > 0``)."""
    e = x.numerator.bit_length() - x.denominator.bit_length()
    return e if Fraction(2) ** e <= x else e - 1


def _split_plan(scale: Fraction, low_bits: int | None = None) -> _Split:
    """Build the split sampler of ``scale``; ``low_bits`` (k) is chosen if not given."""
    k = (min(_floor_log2(scale) - _TOP_SCALE_BITS, _MAX_LOW_BITS)
         if low_bits is None else low_bits)
    if not 1 <= k <= _MAX_LOW_BITS or Fraction(2**k) > scale:
        raise ValueError(f"the split sampler needs 1 <= k <= 46 and 2**k <= scale, got k={k}")
    inv = 1 / scale
    return _Split(inv, float(inv), k, _digit(inv * 2**k, _GEOMETRIC))


@lru_cache(maxsize=64)
def _split(scale: Fraction) -> _Split:
    return _split_plan(scale)


def _one_minus_exp_brackets(s: _Split, low: NDArray[np.uint64], factor: float = 1.0
                            ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Return floats ``lo <= factor (1 - exp(-t)) <= hi`` for ``t = low / S`` (``0 <= t < 1``).

    ``factor`` is a power of two (scaling by it is exact). ``S_2 <= 1 - exp(-t)
    <= S_2 + t**3/6`` with ``S_2 = t - t**2/2`` (partial sums of an alternating
    series whose terms decrease for ``t < 1``; the bracket is ``t**3/6``
    wide, below ``2**-14 t`` for the ``t <= 2**-6`` of the split sampler).
    ``t`` is computed from ``low`` (exact below ``2**53``) and ``float(1/S)``,
    each rounding at most ``2**-53`` relative; the few float operations add a
    few more ``2**-53 t``, and ``1 - exp(-t) >= t / 2``: so the computed
    values are within ``2**-48`` relative of the polynomials at the true
    ``t``, and widening them by ``2**-40`` relative (:data:`_FLOAT_MARGIN`)
    brackets ``1 - exp(-t)`` for certain. Only IEEE basic operations
    (correctly rounded) are used; no libm function.
    """
    t = low.astype(np.float64)
    t *= s.inv_float
    t2 = t * t
    hi = t2 * t
    hi *= 1.0 / 6.0
    t2 *= -0.5
    lo = np.add(t, t2, out=t)  # S_2
    hi += lo
    lo *= (1.0 - _FLOAT_MARGIN) * factor
    hi *= (1.0 + _FLOAT_MARGIN) * factor
    return lo, hi


def _exact_rejects(inv: Fraction, low: int, w: int, prec: int) -> bool:
    """Return whether ``V < 1 - exp(-low / S)``, ``V`` known to ``prec`` bits as ``w``.

    Exact: brackets of ``exp(-t)`` (:func:`_exp_neg_bounds`) and 64 fresh bits of
    ``V`` per round until the comparison is decided (the rare deep path).
    """
    x = inv * low
    for _ in range(MAX_ROUNDS):
        e_lo, e_hi = _exp_neg_bounds(x, prec)
        one = 1 << prec
        if w + 1 <= one - e_hi:  # V < (w + 1) 2**-prec <= 1 - exp(-t)
            return True
        if w >= one - e_lo:  # V >= w 2**-prec >= 1 - exp(-t)
            return False
        w = (w << 64) | int.from_bytes(random_bytes(8), "little")
        prec += 64
    raise _stalled("the exact rejection")  # pragma: no cover - probability 2**-640000


@lru_cache(maxsize=256)  # public parameters only: one exact computation each
def _cut(s: _Split, bits: int) -> int:
    """Return ``ceil(theta 2**bits)``: ``V`` prefixes of ``bits`` bits at or above it accept."""
    return int(-((-(2 ** (s.low_bits + bits)) * s.inv.numerator) // s.inv.denominator))


def _rejected(s: _Split, words: NDArray[np.uint64], bits: int) -> NDArray[np.bool_]:
    """Return which proposals are rejected: ``V < 1 - exp(-L / S)``.

    Each word holds ``L`` in bits ``0 .. k-1`` and the first ``bits`` (at most
    :data:`_CHECK_BITS`) bits of ``V`` in bits ``k .. k+bits-1``, nothing above.
    Every ``t = L / S`` is below ``theta = 2**k / S <= 2**-6``, so a prefix
    with ``prefix 2**-bits >= theta`` accepts at once (``V >= theta > 1 -
    exp(-t)``). The others (a fraction of about ``theta``) read 32 more bits of
    ``V`` and compare with float brackets of ``1 - exp(-t)``
    (:func:`_one_minus_exp_brackets`; the other values involved are exact
    floats); what that leaves undecided (probability about ``2**-30``) is
    decided exactly by :func:`_exact_rejects`.
    """
    k = s.low_bits
    out = np.zeros(words.size, dtype=bool)
    cand = (words < np.uint64(_cut(s, bits) << k)).nonzero()[0]
    if not cand.size:
        return out
    low = words[cand] & np.uint64((1 << k) - 1)
    prefix = words[cand] >> np.uint64(k)
    q_lo, q_hi = _one_minus_exp_brackets(s, low, 2.0**bits)
    more = 32
    # V 2**bits lies in [v, v + 2**-32); prefix < 2**(bits - 6) + 1, so v is an exact float
    ext = _raw_bits(more, cand.size)
    v = prefix.astype(np.float64) + ext.astype(np.float64) * 2.0**-more
    reject = v + 2.0**-more <= q_lo
    for i in (~reject & (v < q_hi)).nonzero()[0]:
        w = (int(prefix[i]) << more) | int(ext[i])
        reject[i] = _exact_rejects(s.inv, int(low[i]), w, bits + more)
    out[cand[reject]] = True
    return out


def _accepted_low(s: _Split, low: NDArray[np.uint64], bits: int) -> NDArray[np.uint64]:
    """Return the accepted draws of ``L``, in place in ``low``; rejected ones are redrawn.

    ``low`` holds ``L`` (bits ``0 .. k-1``) and the first ``bits`` bits of ``V``
    above it, nothing else.
    """
    k = s.low_bits
    low_mask = np.uint64((1 << k) - 1)
    cand = (low < np.uint64(_cut(s, bits) << k)).nonzero()[0]
    pending = cand[_rejected(s, low[cand], bits)]
    low &= low_mask
    redraw_bits = min(64 - k, _CHECK_BITS)
    for _ in range(MAX_ROUNDS):
        if not pending.size:
            return low
        fresh = _raw_bits(64, pending.size) & np.uint64((1 << (k + redraw_bits)) - 1)
        low[pending] = fresh & low_mask
        pending = pending[_rejected(s, fresh, redraw_bits)]
    raise _stalled("the split sampler")


_G_LANE = 3 if sys.byteorder == "little" else 0  # the 16-bit lane of bits 48 .. 63
_NONE = np.zeros(0, dtype=np.intp)  # no index


class _Workspace:
    """Buffers for up to ``size`` draws of the split sampler, reused chunk after chunk.

    A release of many chunks that allocated its temporaries afresh for each chunk
    would, in a process whose heap has not grown yet, hand them back to the system
    after every chunk and page-fault them in again for the next (about 2 MB per
    chunk of 65,536 values: 0.3-0.5 s more for 10^7 values). The draws of one
    chunk are read before the next chunk overwrites them. ``noise_bound``: after
    each chunk, an exclusive bound on the magnitude of its noise (None: unknown).
    """

    __slots__ = ("g", "g16", "low", "noise_bound", "raw", "sign", "words")

    def __init__(self, size: int) -> None:
        self.words = np.empty(size, dtype=np.uint64)  # the random words (filled before use)
        self.raw = self.words.data.cast("B")
        self.noise_bound: int | None = None
        self.sign = np.empty(size, dtype=np.int64)
        self.g16 = np.empty(size, dtype=np.uint16)
        self.g = np.empty(size, dtype=np.int64)  # G, then the noise itself
        self.low = np.empty(size, dtype=np.uint64)


def _split_noise(s: _Split, count: int, work: _Workspace | None = None) -> NDArray[np.int64]:
    """Return ``count`` exact discrete Laplace draws at a large scale ``S``.

    ``Y = L + 2**k G`` with ``L`` in ``[0, 2**k)`` and ``G >= 0``: for a
    geometric ``Y`` (``P(Y = y)`` proportional to ``a**y``, ``a = exp(-1/S)``)
    the two parts are independent (memorylessness), ``L`` a geometric
    truncated to ``[0, 2**k)`` of ratio ``a`` and ``G`` a geometric of ratio
    ``a**(2**k) = exp(-theta)``, ``theta = 2**k / S`` in ``(2**-7, 2**-6]``
    (smaller when ``k`` is capped at 46). ``G`` is drawn by exact table
    inversion (:func:`_top_geometric`, a 16-bit lookup). ``L`` is nearly
    uniform: it is proposed uniformly (``k`` raw bits) and accepted with
    probability ``a**L = exp(-L / S) >= exp(-theta)``, i.e. rejected iff an
    independent uniform ``V`` is below ``1 - exp(-L / S)`` (:func:`_rejected`,
    exact); a rejected proposal is drawn afresh (with a fresh ``V``). The sign
    is a fair bit and (negative, ``Y = 0``) is rejected and redrawn, as in the
    table sampler. One 64-bit word per draw carries ``L`` (bits ``0 .. k-1``),
    the first ``min(47 - k, 20)`` bits of ``V`` (from bit ``k``), the sign (bit
    47) and the 16-bit prefix of ``G``'s uniform (bits ``48 .. 63``): disjoint
    bits of a uniform word are independent. When fewer than 8 bits are left
    for ``V`` (``k > 39``: scales above ``2**46``), its first 16 bits come from
    two more random bytes per draw instead.

    ``work``: buffers of at least ``count`` entries to draw into (a fresh set if not
    given); the result is then a view of ``work.g``, valid until the next call.
    """
    k = s.low_bits
    if work is None:
        work = _Workspace(count)
    fill_random(work.raw[:8 * count])
    words = work.words[:count]
    sign = np.left_shift(words, np.uint64(16), out=work.sign[:count].view(np.uint64)
                         ).view(np.int64)
    sign >>= 63  # 0 or -1 (all bits set): bit 47 of the word
    g = _top_geometric(s.top, count, words.view(np.uint16)[_G_LANE::4], work)
    g_max = int(g.max(initial=0))
    if g_max >= _INT64_LIMIT >> k:
        raise _overflow()
    z = np.left_shift(g, k, out=g)
    bits = min(47 - k, _CHECK_BITS)
    low = np.bitwise_and(words, np.uint64((1 << (k + bits)) - 1),
                         out=work.low[:count])  # L and the first bits of V
    if bits < _MIN_CHECK_BITS:  # few spare bits (k > 39): 16 bits of V from 2 more bytes
        low &= np.uint64((1 << k) - 1)
        low |= _raw_bits(16, count).astype(np.uint64) << np.uint64(k)
        bits = 16
    z |= _accepted_low(s, low, bits).view(np.int64)
    work.noise_bound = (g_max + 1) << k  # |z| <= g_max 2**k + 2**k - 1
    retry = (z == 0).nonzero()[0] if np.count_nonzero(z) < count else _NONE
    retry = retry[sign[retry] != 0]
    z ^= sign
    z -= sign  # two's complement: -z where negative
    if retry.size:
        z[retry] = _split_noise(s, retry.size)
        work.noise_bound = None  # redrawn from a workspace of their own
    return z


def discrete_laplace_noise(count: int, scale: Fraction) -> NDArray[np.int64]:
    """Return ``count`` iid draws with P(z) proportional to exp(-|z| / scale), exact.

    ``scale`` is any positive rational up to :data:`MAX_SAMPLER_SCALE`. Small
    scales: the signed magnitude straight from one table. Larger ones: a
    uniform sign and an exact geometric magnitude, the pair (negative, 0)
    rejected and redrawn (see the module docstring).

    Examples
    --------
    >>> z = discrete_laplace_noise(1000, Fraction(5, 2))
    >>> z.dtype, z.shape
    (dtype('int64'), (1000,))
    """
    if not 0 < scale <= MAX_SAMPLER_SCALE:
        raise ValueError(f"discrete_laplace_noise needs 0 < scale <= 2**56, got {scale}")
    if scale >= 2**_SPLIT_MIN_BITS:
        split = _split(scale)
        if count <= _CHUNK:
            return _split_noise(split, count)
        out = np.empty(count, dtype=np.int64)
        work = _Workspace(_CHUNK)
        for start in range(0, count, _CHUNK):  # chunks stay in cache: iid draws all the same
            out[start:start + _CHUNK] = _split_noise(split, min(_CHUNK, count - start), work)
        return out
    plan = _plan(scale)
    if plan.first is not None:
        return _small_scale_noise(plan, count)
    out = np.empty(count, dtype=np.int64)
    pending: NDArray[np.intp] | None = None
    for _ in range(MAX_ROUNDS):
        n = count if pending is None else pending.size
        if n == 0:
            return out
        z = _geometric(plan, n)
        negative = random_bits(n)
        retry = (negative & (z == 0)).nonzero()[0]
        sign = negative.astype(np.int64)
        np.negative(sign, out=sign)  # 0 or -1 (all bits set)
        z ^= sign
        z -= sign  # two's complement: -z where negative
        if pending is None:
            out = z
            pending = retry
        else:
            out[pending] = z
            pending = pending[retry]
    raise _stalled("the discrete Laplace sampler")


# ---------------------------------------------------------------------------
# the lattice release (real values)
# ---------------------------------------------------------------------------

_FAST_LIMIT = 2.0**62  # lattice integers below this (in magnitude) stay in int64


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


@lru_cache(maxsize=256)  # public parameters only: one exact computation each
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


@lru_cache(maxsize=256)  # public parameters only: one exact computation each
def mechanism_exponent(scale: float, sensitivity: float, epsilon: float, size: int) -> int:
    """Return the lattice exponent of a calibrated mechanism: ``(Delta + d step) / b <= epsilon``.

    ``step = 2**e`` is the largest power of two with ``size * step <= scale *
    epsilon - sensitivity`` (exact; ``epsilon`` as the decimal the ledger
    charges). ``scale`` must come from
    :func:`~spatialdp.privacy.calibration.headroom_scale`.

    Examples
    --------
    >>> from spatialdp.privacy.calibration import headroom_scale
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


@lru_cache(maxsize=256)  # public parameters only: one exact computation each
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
    split = _lattice_split(scale, exponent)
    flat = values.ravel()
    work = None if split is None else _Workspace(min(flat.size, _CHUNK))
    # values below 2**52 lattice units (checked once, for the split sampler, whose noise
    # bound is known): with noise below 2**52 too, every sum is below 2**53, exact in
    # floats with no further check
    small_values = (split is not None and -1022 <= exponent <= 1022
                    and _within(flat, ldexp(1.0, min(_SMALL_BITS + exponent, 1023))))

    def noisy(part: NDArray[np.float64], dest: NDArray[np.float64] | None
              ) -> NDArray[np.float64]:
        if split is None:
            return _lattice_sum(part, discrete_laplace_noise(part.size, units), exponent, dest)
        assert work is not None
        noise = _split_noise(split, part.size, work)
        if small_values and work.noise_bound is not None and work.noise_bound <= _SMALL_LIMIT:
            return _small_lattice_sum(part, noise, exponent, dest)
        return _lattice_sum(part, noise, exponent, dest)

    if flat.size <= _CHUNK:  # one chunk: no output buffer to copy into
        return noisy(flat, None).reshape(values.shape)
    out = np.empty(flat.size, dtype=np.float64)
    for start in range(0, flat.size, _CHUNK):  # elementwise: chunks stay in cache
        dest = out[start:start + _CHUNK]
        summed = noisy(flat[start:start + _CHUNK], dest)
        if summed is not dest:  # a checked path returned its own array
            dest[...] = summed
    return out.reshape(values.shape)


def _clear_caches() -> None:
    """Forget every per-parameter cache (tables, exponents, units): for cold-start benchmarks.

    The ChaCha20 binding (:func:`_chacha20`) stays loaded: importing it is a per-process
    cost, which the fresh-process benchmark measures.
    """
    for cached in (_plan, _split, _lattice_split, _cut, check_units, mechanism_exponent,
                   standalone_exponent):
        cached.cache_clear()


@lru_cache(maxsize=256)  # public parameters only
def _lattice_split(scale: float, exponent: int) -> _Split | None:
    """Return the split sampler of ``scale / 2**exponent`` lattice units, if it takes one.

    The same choice as :func:`discrete_laplace_noise`, cached by the floats so that a
    release does no rational arithmetic.
    """
    units = Fraction(scale) / Fraction(2) ** exponent
    return _split(units) if units >= 2**_SPLIT_MIN_BITS else None


_FLOAT_EXACT = 2.0**53  # every integer up to this magnitude is a float64


_SMALL_BITS = 52
_SMALL_LIMIT = 1 << _SMALL_BITS  # values and noise below this: sums below 2**53, exact


def _small_lattice_sum(flat: NDArray[np.float64], noise: NDArray[np.int64], exponent: int,
                       out: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    """Return ``(round(flat / step) + noise) * step`` when both parts are known to be small.

    The caller has checked ``|flat| < 2**(52 + exponent)``, ``-1022 <= exponent <=
    1022`` and ``|noise| <= 2**52``: the scaled values and the noise are exact floats
    below ``2**52`` and their sum is below ``2**53``, so the float sum is exact and the
    product by ``2**exponent`` too (:func:`_lattice_sum` without its range checks).
    """
    units = np.multiply(flat, 2.0**-exponent, out=out)  # never the input
    np.rint(units, out=units)
    units += noise
    units *= 2.0**exponent
    return units


def _within(arr: NDArray[np.floating] | NDArray[np.integer], limit: float) -> bool:
    """Return whether every entry is finite and strictly below ``limit`` in magnitude."""
    return bool(-limit < arr.min(initial=0) and arr.max(initial=0) < limit)


def _lattice_sum(flat: NDArray[np.float64], noise: NDArray[np.int64], exponent: int,
                 out: NDArray[np.float64] | None = None) -> NDArray[np.float64]:
    """Return ``(round(flat / step) + noise) * step``, exactly, in as few passes as it can.

    Scaling by a power of two is a correctly rounded product (as
    :func:`numpy.ldexp`) when ``2**exponent`` and ``2**-exponent`` are normal
    floats, and ``rint`` is exact. If the rounded values and the noise are
    below ``2**53`` in magnitude, both are exact floats, and their float sum
    is exact unless the true sum exceeds ``2**53`` in magnitude, which the
    computed sum then shows (rounding is monotone). Otherwise, while the
    rounded values are below ``2**62``, the sum is taken in int64 (the noise is
    below ``2**62`` too) and converted once, correctly rounded. Anything else
    (extreme exponents, huge values) takes :func:`_lattice_sum_in_integers`.
    ``out`` (not ``flat``): where the common path writes the sum (a new array if
    not given); the other paths return a new array.
    """
    if not -1022 <= exponent <= 1022:
        return _lattice_sum_in_integers(flat, noise, exponent)
    with np.errstate(over="ignore", invalid="ignore"):
        units = np.multiply(flat, 2.0**-exponent, out=out)  # never the input
        np.rint(units, out=units)
        if _within(units, _FLOAT_EXACT) and _within(noise, _FLOAT_EXACT + 1):
            total = np.add(units, noise, out=units)  # in place: units is rebuilt below if need be
            if _within(total, _FLOAT_EXACT):
                total *= 2.0**exponent
                return total
            units = np.rint(flat * 2.0**-exponent)
        if not _within(units, _FAST_LIMIT):  # also refuses inf and NaN
            return _lattice_sum_in_integers(flat, noise, exponent)
        exact_total = units.astype(np.int64)
        exact_total += noise
        result = exact_total.astype(np.float64)
        result *= 2.0**exponent
    return result


def _lattice_sum_in_integers(flat: NDArray[np.float64], noise: NDArray[np.int64],
                             exponent: int) -> NDArray[np.float64]:
    """Return ``(round(flat / step) + noise) * step`` in int64 (Python integers if huge).

    The general path (any exponent, any finite value), and the reference the
    tests hold :func:`_lattice_sum` to.
    """
    with np.errstate(over="ignore", under="ignore"):
        scaled = np.ldexp(flat, -exponent)  # exact unless it over/underflows
        fast = np.abs(scaled) < _FAST_LIMIT  # False for inf
        if fast.all():
            total = np.rint(scaled).astype(np.int64) + noise
            return np.ldexp(total.astype(np.float64), exponent)
        out = np.empty(flat.size, dtype=np.float64)
        total = np.rint(scaled[fast]).astype(np.int64) + noise[fast]
        out[fast] = np.ldexp(total.astype(np.float64), exponent)
        step = Fraction(2) ** exponent
        for i in (~fast).nonzero()[0]:  # exact big-integer path for huge lattice integers
            n = round(Fraction(float(flat[i])) / step)
            out[i] = float((n + int(noise[i])) * step)
    return out
