"""Fast exact simulation of query errors on a flat grid (simulation path only, seeded).

Two facts make the error of many polygon answers cheap to simulate exactly:

* the sum of ``m`` iid discrete Laplace draws has a known law (its pmf is
  the inverse DFT of ``phi**m``; equivalently a difference of two negative
  binomials ``NB(m, 1 - a)``), so each query's sum over the cells clamping
  cannot touch is ONE draw from that law (inversion of its CDF, computed once
  per distinct ``m``) instead of ``m`` cell draws;
* clamping negatives to zero only changes a cell whose noise falls below
  ``-t``; on cells whose true count ``t`` is at least
  :func:`~spatialdp.queries.expectations.clamp_skip_threshold` that has
  probability below 1e-9 over the whole simulation, so only the sparse cells
  are simulated cell by cell (one random 16-bit word and a table lookup each) and summed
  per query with one sparse product per chunk of draws.

Each query's error is then exact in distribution. Overlapping queries are
drawn independently (their joint distribution is not kept), which leaves the
per-bucket figures (means, pooled quantiles, bias) unbiased.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

__all__ = ["discrete_laplace_draws", "flat_query_errors", "sum_draws"]

#: Largest scale simulated in float32 (|noise| below ~2,000 over 10^8 draws).
FLOAT32_MAX_SCALE = 100.0

#: Largest block of cell draws simulated at once.
CHUNK_VALUES = 1 << 18


_PREFIX_BITS = 15  # a 16-bit word: 1 sign bit and the first 15 bits of V
_MAX_THRESHOLDS = 100_000  # beyond (scale above ~8,000) the table is not worth building


@lru_cache(maxsize=16)
def _signed_table(scale: float, dtype: type = np.float64) -> NDArray[np.floating[Any]]:
    """Return ``Z`` for every 16-bit word whose 15 prefix bits decide ``|Z|``, NaN elsewhere.

    ``|Z| = #{j >= 1 : V < c_j}`` with ``c_j = 2 a**j / (1 + a)``; on a prefix's
    interval ``[lo, hi)`` of ``V`` it is constant iff no threshold lies in
    ``(lo, hi)``. The top bit of the word is the sign.
    """
    a = math.exp(-1.0 / scale)
    n_thresholds = math.ceil((_PREFIX_BITS + 2) * math.log(2.0) * scale) + 2
    ascending = (2.0 * a ** np.arange(1, n_thresholds + 1, dtype=np.float64) / (1.0 + a))[::-1]
    size = 1 << _PREFIX_BITS
    lo = np.arange(size, dtype=np.float64) / size
    hi = (np.arange(size, dtype=np.float64) + 1.0) / size
    above_lo = ascending.size - np.searchsorted(ascending, lo, side="right")
    above_hi = ascending.size - np.searchsorted(ascending, hi, side="left")
    mag = np.where(above_lo == above_hi, above_lo.astype(np.float64), np.nan)
    return np.concatenate([mag, -mag]).astype(dtype)


def _inverted(v: NDArray[np.float64], a: float) -> NDArray[np.float64]:
    """Return ``|Z|`` for uniforms ``v`` by the closed-form inversion."""
    mag = np.maximum(v, 1e-300) * ((1.0 + a) / 2.0)
    np.log(mag, out=mag)
    mag *= 1.0 / math.log(a)
    np.ceil(mag, out=mag)
    mag -= 1.0
    return np.maximum(mag, 0.0, out=mag)


def discrete_laplace_draws(gen: np.random.Generator, scale: float, shape: tuple[int, ...],
                           dtype: type = np.float64) -> NDArray[np.floating[Any]]:
    """Return iid discrete Laplace draws (integer-valued floats), by inversion.

    ``P(|Z| >= j) = 2 a**j / (1 + a)`` for ``j >= 1``, so for ``V`` uniform
    ``|Z| = #{j >= 1 : V < 2 a**j / (1 + a)} = max(0, ceil(log(V (1 + a) / 2) / log a) - 1)``,
    and the sign is an independent fair bit. One random 16-bit word per draw:
    its top bit is the sign, its other 15 bits the first bits of ``V``, which
    decide ``|Z|`` through a table except when a threshold falls inside their
    interval (about 0.03% of draws at scale 1); those draw the rest of ``V``
    and invert in closed form. ``dtype=numpy.float32`` halves the memory
    traffic; its integers are exact below ``2**24``.

    Examples
    --------
    >>> z = discrete_laplace_draws(np.random.default_rng(0), 2.0, (100_000,))
    >>> abs(float(z.mean())) < 0.05, bool((z == np.round(z)).all())
    (True, True)
    """
    a = math.exp(-1.0 / scale)
    n = int(np.prod(shape))
    words = np.frombuffer(gen.bytes(2 * n), dtype=np.uint16)
    size = float(1 << _PREFIX_BITS)
    if (_PREFIX_BITS + 2) * math.log(2.0) * scale > _MAX_THRESHOLDS:
        prefix = words & np.uint16((1 << _PREFIX_BITS) - 1)
        slow = _inverted((prefix + gen.random(n)) / size, a)
        np.negative(slow, out=slow, where=words > prefix)
        return slow.astype(dtype, copy=False).reshape(shape)
    mag: NDArray[np.floating[Any]] = _signed_table(scale, dtype)[words]
    undecided = np.flatnonzero(np.isnan(mag))
    if undecided.size:
        w = words[undecided]
        prefix = w & np.uint16((1 << _PREFIX_BITS) - 1)
        z = _inverted((prefix + gen.random(undecided.size)) / size, a)
        mag[undecided] = np.where(w > prefix, -z, z)
    return mag.reshape(shape)


#: Largest table (values of the sum) sampled by inversion; beyond, negative binomials.
MAX_TABLE = 1 << 16


@lru_cache(maxsize=4096)
def _sum_cdf(scale: float, m: int) -> tuple[NDArray[np.float64], int]:
    """Return the CDF of the sum of ``m`` discrete Laplace draws on ``[-half, half)``, and half.

    The pmf is the inverse DFT of ``phi(w)**m``, ``phi(w) = (1-a)**2 / (1 - 2a cos w + a**2)``,
    on a support wide enough (``12 sd + 40 b`` each side) that the mass left
    out, and the aliasing, are below 1e-15.
    """
    a = math.exp(-1.0 / scale)
    sd = math.sqrt(m * 2.0 * a) / (1.0 - a)
    half = 1 << max(4, math.ceil(math.log2(12.0 * sd + 40.0 * scale + 2.0)))
    w = 2.0 * math.pi * np.arange(2 * half) / (2 * half)
    phi = ((1.0 - a) ** 2 / (1.0 - 2.0 * a * np.cos(w) + a * a)) ** m
    pmf = np.fft.fftshift(np.fft.ifft(phi).real)  # index 0 is the value -half
    np.maximum(pmf, 0.0, out=pmf)
    cdf = np.cumsum(pmf)
    cdf /= cdf[-1]
    return cdf, half


def sum_draws(gen: np.random.Generator, scale: float, m: NDArray[np.int64],
              draws: int) -> NDArray[np.int64]:
    """Return ``draws`` draws of the sum of ``m`` discrete Laplace cells, per ``m``.

    Shape ``(m.size, draws)``; rows with ``m == 0`` are zero. Each distinct ``m``
    is drawn by inverting its CDF (computed once, exact to float64 rounding:
    the law is left out only below 1e-15), or, for supports larger than
    :data:`MAX_TABLE` values, as a difference of two negative binomials
    ``NB(m, 1 - a)`` (a discrete Laplace draw is a difference of two geometrics).

    Examples
    --------
    >>> s = sum_draws(np.random.default_rng(1), 1.0, np.array([0, 400]), 20_000)
    >>> int(s[0].max()), round(float(s[1].std()) / 27.14, 1)
    (0, 1.0)
    """
    p = -math.expm1(-1.0 / scale)  # 1 - a
    out = np.zeros((m.size, draws), dtype=np.int64)
    values, inverse = np.unique(m, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(values.size + 1))
    for k, value in enumerate(values.tolist()):
        if value <= 0:
            continue
        rows = order[bounds[k]:bounds[k + 1]]
        size = (rows.size, draws)
        sd = math.sqrt(value * 2.0 * (1.0 - p)) / p
        if 2.0 * (12.0 * sd + 40.0 * scale) > MAX_TABLE:
            out[rows] = (gen.negative_binomial(value, p, size=size)
                         - gen.negative_binomial(value, p, size=size))
            continue
        cdf, half = _sum_cdf(scale, int(value))
        out[rows] = np.searchsorted(cdf, gen.random(size), side="right") - half
    return out


def flat_query_errors(matrix: sparse.csr_array, truth: NDArray[np.int64], scale: float,
                      draws: int, *, clamp_negative: bool, skip_from: int,
                      gen: np.random.Generator) -> NDArray[np.float64]:
    """Return simulated answer errors, shape ``(n_queries, draws)``, of a flat release.

    Cells with ``truth >= skip_from`` (all cells when not clamping) enter
    through :func:`sum_draws`; the others are drawn cell by cell, clamped at
    ``-truth`` and summed per query by one sparse product per chunk of draws.
    """
    sparse_cells = (truth < skip_from) if clamp_negative else np.zeros(truth.size, bool)
    dense_m = np.asarray(matrix @ (~sparse_cells).astype(np.int64), dtype=np.int64)
    errors = sum_draws(gen, scale, dense_m, draws).astype(np.float64)
    used = np.bincount(matrix.indices, minlength=truth.size) > 0  # uncovered cells: skip
    if (sparse_cells & used).any():
        idx = np.flatnonzero(sparse_cells & used)
        # float32 halves the memory traffic; at scales up to FLOAT32_MAX_SCALE every
        # value and per-query sum is an integer far below 2**24, so it stays exact
        kind: type = np.float32 if scale <= FLOAT32_MAX_SCALE else np.float64
        sub = sparse.csr_array(matrix[:, idx], dtype=kind)
        floor: NDArray[Any] = -truth[idx].astype(kind)[:, None]
        step = max(1, CHUNK_VALUES // idx.size)
        for start in range(0, draws, step):
            stop = min(draws, start + step)
            cell = discrete_laplace_draws(gen, scale, (idx.size, stop - start), kind)
            np.maximum(cell, floor, out=cell)
            errors[:, start:stop] += sub @ cell
    return errors
