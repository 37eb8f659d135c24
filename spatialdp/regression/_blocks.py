"""Tall-skinny matrix products in row blocks, on one BLAS thread (private helper).

For ``K x d`` arrays with ``K`` in the millions and ``d`` small, a BLAS call
hands the product to all OpenBLAS threads, which on a shared machine is often
ten times slower than one core, and sometimes a hundred (threads spin while
they wait for a core: ``X.T @ X`` for 10^6 x 20 measured 0.05 s to 43 s).
These products are memory-bound, so :func:`single_blas` runs them on one
thread (``threadpoolctl``), in row blocks that stay in cache.

Examples
--------
>>> A = np.arange(12.0).reshape(6, 2)
>>> bool(np.allclose(fused_moments(A, np.ones(6), block=4)[0], A.T @ A))
True
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray

from spatialdp._blas import single_blas

__all__ = ["BLOCK", "FUSED_BLOCK_BYTES", "GRAM_CHUNK", "GROUP", "PENDING_BYTES", "BlockMoments",
           "block_gram", "block_rows", "centred_squares", "fused_moments", "row_groups",
           "row_matmul", "single_blas", "symmetric_from_upper"]

#: Rows per block.
BLOCK = 32_768

#: Bytes per block of :func:`fused_moments` (4,096 rows of 20 doubles): a block stays
#: in a 1 MB L2 cache while the three products read it.
FUSED_BLOCK_BYTES = 640 * 1024

#: Columns of ``part`` per product in :func:`block_gram`.
GRAM_CHUNK = 8

#: Blocks per call of :meth:`BlockMoments.add` in :func:`fused_moments`.
GROUP = 4


def fused_moments(A: NDArray[np.float64], w: NDArray[np.float64], block: int | None = None,
                  ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """Return ``(A^T A, w @ A, column sums of A)`` in one pass over row blocks.

    Each block (``block`` rows; default :data:`FUSED_BLOCK_BYTES` of rows) is read from
    memory once, by the first matrix-vector product; the Gram product (:func:`block_gram`)
    and the other matrix-vector product find it in cache (:class:`BlockMoments`).
    Three separate calls (``A.T @ A``, ``w @ A``, ``A.sum(axis=0)``) read ``A`` from
    memory three times. The full blocks go to :meth:`BlockMoments.add` :data:`GROUP`
    at a time, as strided views of ``A`` (no copy): one numpy call per product and
    group instead of one per block.

    Examples
    --------
    >>> A = np.arange(12.0).reshape(6, 2)
    >>> second, cross, total = fused_moments(A, np.arange(6.0), block=4)
    >>> bool(np.allclose(second, A.T @ A)), cross.tolist(), total.tolist()
    (True, [110.0, 125.0], [30.0, 36.0])
    """
    K, d = A.shape
    block = block_rows(d) if block is None else block
    ones = np.ones(min(block, K))
    sums = BlockMoments(d)
    with single_blas():
        for part, weights in row_groups(A, w, block, min(GROUP, sums.capacity)):
            sums.add(part, weights, ones)
    return sums.result()


def row_groups(A: NDArray[np.float64], w: NDArray[np.float64], block: int, step: int,
               ) -> Iterator[tuple[NDArray[np.float64], NDArray[np.float64]]]:
    """Yield ``A`` and ``w`` in row blocks, ``step`` blocks at a time, in order, without copies.

    Full blocks come as stacks ``(n, block, d)`` and ``(n, block)`` (strided views,
    read-only); the last, shorter block alone as ``(rows, d)`` and ``(rows,)``.

    Examples
    --------
    >>> [part.shape for part, _ in row_groups(np.zeros((11, 2)), np.zeros(11), 3, 2)]
    [(2, 3, 2), (1, 3, 2), (2, 2)]
    """
    K = A.shape[0]
    full = K // block
    parts, weights = _stacked_rows(A, block, full), _stacked_rows(w, block, full)
    for first in range(0, full, step):
        yield parts[first:first + step], weights[first:first + step]
    if full * block < K:
        yield A[full * block:], w[full * block:]


def _stacked_rows(a: NDArray[np.float64], rows: int, count: int) -> NDArray[np.float64]:
    """Return the first ``count`` blocks of ``rows`` rows of ``a`` as a read-only strided view."""
    shape = (count, rows, *a.shape[1:])
    strides = (rows * a.strides[0], *a.strides)
    return np.lib.stride_tricks.as_strided(a, shape=shape, strides=strides, writeable=False)


def block_rows(d: int) -> int:
    """Return the rows per block of ``d`` columns that fit :data:`FUSED_BLOCK_BYTES`."""
    return max(256, FUSED_BLOCK_BYTES // (8 * max(d, 1)))


def block_gram(part: NDArray[np.float64], out: NDArray[np.float64]) -> None:
    """Write the upper triangle of ``part^T part`` into ``out`` (rows of :data:`GRAM_CHUNK`).

    ``part`` is one block ``(rows, d)`` or a stack of them ``(n, rows, d)``; ``out`` is
    ``(d, d)`` or ``(n, d, d)``. Rows ``j:j+8`` of the triangle are one product,
    ``part[..., j:j+8]^T part[..., j:]``; the entries below the diagonal are left as
    they were, except for ``d <= 8`` (one product, numpy's ``syrk``, which writes
    both triangles): read the result with :func:`symmetric_from_upper`.

    Why not one ``syrk``: the OpenBLAS numpy ships runs a product of at most 10^6
    multiply-adds whose output has 8 rows on its small-matrix kernels, without
    packing the operands; ``syrk`` on a 4,096 x 20 block packs them and (measured)
    costs what the full square does. Measured on 10^6 x 20 reports, one thread
    (AVX-512 ``SkylakeX`` kernels): about 17 ms for the Gram products against 33 ms
    for one ``syrk`` per block or for the whole array; with blocks of 8,192 rows,
    over that size, 31 ms. A block of :data:`FUSED_BLOCK_BYTES` keeps
    ``d x 8 x rows`` at 655,360, under that limit, for any ``d`` up to 320.

    Examples
    --------
    >>> A = np.arange(60.0).reshape(6, 10)
    >>> out = np.zeros((10, 10))
    >>> block_gram(A, out)
    >>> bool(np.array_equal(symmetric_from_upper(out), A.T @ A))
    True
    """
    d = part.shape[-1]
    for j in range(0, d, GRAM_CHUNK):
        rows = slice(j, j + GRAM_CHUNK)
        np.matmul(np.swapaxes(part[..., rows], -1, -2), part[..., j:], out=out[..., rows, j:])


def symmetric_from_upper(upper: NDArray[np.float64]) -> NDArray[np.float64]:
    """Return the symmetric matrix whose upper triangle (diagonal included) is ``upper``'s."""
    full = np.triu(upper)
    return np.asarray(full + np.triu(full, 1).T, dtype=np.float64)


#: Bytes of the per-block Gram products :class:`BlockMoments` keeps before summing them.
PENDING_BYTES = 128 * 1024


class BlockMoments:
    """Running ``(sum part^T part, sum w @ part, sum of part's column sums)`` over row blocks.

    Each block's three products are written into the next free slot of small stacks
    (no allocation per block, and one numpy call per product for several blocks);
    every :data:`PENDING_BYTES` of Grams the slots are added to the running sums held
    in slot 0, in block order, so the sums are exactly those of adding block after
    block. The Grams are kept as upper triangles (:func:`block_gram`).

    Examples
    --------
    >>> A = np.arange(12.0).reshape(6, 2)
    >>> sums = BlockMoments(2)
    >>> for start in (0, 4):
    ...     sums.add(A[start:start + 4], np.ones(6)[start:start + 4], np.ones(4))
    >>> [part.tolist() for part in sums.result()[1:]]
    [[30.0, 36.0], [30.0, 36.0]]
    """

    def __init__(self, d: int) -> None:
        slots = 1 + max(1, min(64, PENDING_BYTES // (8 * d * d)))
        self._second = np.zeros((slots, d, d))
        self._cross = np.zeros((slots, d))
        self._total = np.zeros((slots, d))
        self._used = 1  # slot 0: the running sums

    @property
    def capacity(self) -> int:
        """How many blocks one :meth:`add` may take (the slots besides the running sums)."""
        return int(self._second.shape[0]) - 1

    def add(self, part: NDArray[np.float64], w: NDArray[np.float64],
            ones: NDArray[np.float64]) -> None:
        """Add ``part^T part``, ``w @ part`` and ``part``'s column sums, per block.

        ``part`` is one block ``(rows, d)`` with weights ``w`` ``(rows,)``, or a stack of
        at most :attr:`capacity` blocks ``(n, rows, d)`` with ``w`` ``(n, rows)``, each block
        taking its own slot; ``ones`` holds at least ``rows`` ones. Call it inside
        :func:`single_blas`, on blocks small enough to stay in cache.

        The matrix-vector product goes first: it streams the block from memory at
        full bandwidth (the hardware prefetcher follows it), so the Gram product
        then finds the block in cache.
        """
        if part.ndim == 2:
            part, w = part[None], w[None]
        n = part.shape[0]
        if self._used + n > self._second.shape[0]:
            self._collect()
        slots = slice(self._used, self._used + n)
        np.matmul(w[:, None, :], part, out=self._cross[slots, None, :])
        block_gram(part, self._second[slots])
        np.matmul(ones[:part.shape[1]], part, out=self._total[slots])
        self._used += n

    def _collect(self) -> None:
        """Add the pending slots to slot 0, one after the other, in place.

        ``np.add.accumulate`` over the slot axis gives the same sums but runs its inner
        loop along that axis: about 1.3 ms per collection of 300 x 300 Grams (one
        per block), against 0.16 ms for these additions.
        """
        n = self._used
        for stack in (self._second, self._cross, self._total):
            running = stack[0]
            for slot in stack[1:n]:
                np.add(running, slot, out=running)
        self._used = 1

    def result(self) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
        """Return copies of the sums so far: ``(Gram, w-weighted sum, column sums)``."""
        self._collect()
        return (symmetric_from_upper(self._second[0]), self._cross[0].copy(),
                self._total[0].copy())


def centred_squares(v: NDArray[np.float64], centre: float, block: int = BLOCK) -> float:
    """Return ``sum((v - centre)^2)`` with block-sized temporaries only.

    Examples
    --------
    >>> centred_squares(np.arange(5.0), 2.0, block=2)
    10.0
    """
    total = 0.0
    for start in range(0, v.shape[0], block):
        part = v[start:start + block] - centre
        total += float(part @ part)
    return total


def row_matmul(A: NDArray[np.float64], B: NDArray[np.float64],
               block: int = BLOCK) -> NDArray[np.float64]:
    """Return ``A @ B`` for a tall ``A`` and a small ``B``, computed per row block.

    Examples
    --------
    >>> row_matmul(np.ones((5, 2)), np.ones((2, 3)), block=2).tolist()[0]
    [2.0, 2.0, 2.0]
    """
    out = np.empty((A.shape[0], B.shape[1]))
    with single_blas():
        for start in range(0, A.shape[0], block):
            np.matmul(A[start:start + block], B, out=out[start:start + block])
    return out
