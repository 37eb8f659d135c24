"""What secure aggregation gives the server: per-group sums and counts, and their checks.

Devices send clipped, bounded numbers; the server learns only the per-group
(per-region) SUMS and the number of clients behind each. A sum outside what
clipped clients can produce proves that some device did not clip
(:func:`check_clipping`), and such a round is refused, not published.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from spatialdp._validation import check_count, check_finite_array
from spatialdp.exceptions import ClippingFailure, InvalidInput
from spatialdp.federated.metrics import HistogramSpec, MetricSpec

__all__ = ["Groups", "SecureSum", "check_clipping", "secure_sum"]


@dataclass(frozen=True)
class SecureSum:
    """What secure aggregation reveals to the server: per-group sums and counts."""

    sums: NDArray[np.float64]
    counts: NDArray[np.int64]


def secure_sum(values: ArrayLike, groups: ArrayLike | None = None, n_groups: int = 1
               ) -> SecureSum:
    """Sum client contributions per group (region), as secure aggregation would.

    Linear in the number of clients and independent of the number of groups
    (one pass per column; see :class:`Groups`).

    Parameters
    ----------
    values : array-like, shape (n_clients,) or (n_clients, k)
        One row per client, already clipped on the device.
    groups : array-like of int, optional
        Group (region position) per client, ``0..n_groups-1``; default one group.
    n_groups : int
        Number of groups.

    Returns
    -------
    SecureSum

    Examples
    --------
    >>> s = secure_sum([1.0, 2.0, 4.0], groups=[0, 1, 1], n_groups=2)
    >>> s.sums.tolist(), s.counts.tolist()
    ([1.0, 6.0], [1, 2])
    """
    data = check_finite_array(values, "values", ndim=(1, 2))
    size = check_count(n_groups, "n_groups", low=1, high=10**9)
    idx = (np.zeros(data.shape[0], dtype=np.int64) if groups is None
           else np.asarray(groups))
    if (idx.shape != (data.shape[0],) or not np.issubdtype(idx.dtype, np.integer)
            or (idx < 0).any() or (idx >= size).any()):
        raise InvalidInput(
            f"groups must give an integer position in 0..{size - 1} for each of the "
            f"{data.shape[0]} clients")
    prepared = Groups(idx, size)
    sums = prepared.sum(data)
    if not np.isfinite(sums).all():
        raise InvalidInput("values sum beyond the float64 range (an overflow to inf); clip "
                           "the values to their bounds before summing, or rescale them")
    return SecureSum(sums, prepared.counts)


_LANES = 8  # a power of two
_MAX_LANE_BINS = 1 << 16  # beyond this, the lanes' bins stop fitting in cache
_SKEW = 0.02  # P(two random clients share a group) above which lanes pay


class Groups:
    """Each client's group, and what every per-group sum over the same clients shares.

    Built once per release, then :meth:`sum` is called for each metric: the
    counts and the summing operator are computed once, whatever the number of
    metrics and columns. No checks: the caller validated ``positions`` (integers
    in ``0..n_groups-1``) and checks the sums' finiteness itself;
    :func:`secure_sum` is the checked entry.

    The sums are one pass per column through a sparse 0/1 operator (CSC, one
    entry per client, built once): ``scipy.sparse``'s compiled loop adds each
    value to its group's accumulator, without the bounds pass that
    ``np.bincount`` repeats for every column (1.9 ms against 3.1 ms per column
    of a million clients). The sum is linear in clients and independent of the
    number of groups.

    A fleet is skewed: most clients fall in a few regions, and consecutive adds
    to one accumulator wait on each other. Each group is therefore spread over
    interleaved accumulators (client ``i`` adds to lane ``i % 8``), summed at the
    end; with one group the sum is numpy's pairwise sum.

    Examples
    --------
    >>> g = Groups(np.array([0, 1, 1]), 2)
    >>> g.counts.tolist(), g.sum(np.array([1.0, 2.0, 4.0])).tolist()
    ([1, 2], [1.0, 6.0])
    """

    def __init__(self, positions: NDArray[np.integer], n_groups: int) -> None:
        self.positions = positions
        self.n_groups = n_groups
        self.counts = np.bincount(positions, minlength=n_groups).astype(np.int64)
        # Lanes pay when consecutive clients often share a group: when the chance
        # that two random clients do (the sum of squared group shares) is high.
        shares = self.counts / max(positions.size, 1)
        skewed = float(shares @ shares) > _SKEW
        self._lanes = _LANES if skewed and 1 < n_groups <= _MAX_LANE_BINS // _LANES else 1
        self._adder: Any = None

    @classmethod
    def of_totals(cls, counts: NDArray[np.int64]) -> Groups:
        """Return groups whose rows are already per-group totals (row ``g`` is group ``g``).

        For sums computed elsewhere (e.g. on Dask workers): :meth:`sum` returns
        them as they are, and ``counts`` are the clients behind each total.

        Examples
        --------
        >>> g = Groups.of_totals(np.array([3, 0, 5]))
        >>> g.counts.tolist(), g.sum(np.array([1.5, 0.0, 2.0])).tolist()
        ([3, 0, 5], [1.5, 0.0, 2.0])
        """
        groups = cls(np.arange(counts.size, dtype=np.int64), int(counts.size))
        groups.counts = np.asarray(counts, dtype=np.int64)
        return groups

    def _summing_operator(self) -> Any:
        """Return the (n_groups * lanes) x n_clients 0/1 matrix mapping clients to accumulators."""
        if self._adder is None:
            from scipy import sparse

            n, lanes = self.positions.size, self._lanes
            small = max(n, self.n_groups * lanes) < np.iinfo(np.int32).max
            itype: type[np.signedinteger[Any]] = np.int32 if small else np.int64
            # positions * lanes + (i % lanes), in place: two passes, one allocation
            row: NDArray[np.signedinteger[Any]] = np.arange(n, dtype=itype)
            np.bitwise_and(row, lanes - 1, out=row)
            np.add(row, self.positions.astype(itype, copy=False) * lanes, out=row)
            self._adder = sparse.csc_array(
                (np.ones(n), row, np.arange(n + 1, dtype=itype)),
                shape=(self.n_groups * lanes, n))
        return self._adder

    def sum(self, data: NDArray[np.float64]) -> NDArray[np.float64]:
        """Per-group sums of ``data`` (one row per client): shape (n_groups,) or (n_groups, k)."""
        with np.errstate(over="ignore", invalid="ignore"):  # the caller checks finiteness
            if self.n_groups == 1:
                return np.asarray(data.sum(axis=0, keepdims=True), dtype=np.float64)
            columns = data[:, None] if data.ndim == 1 else data
            adder, lanes = self._summing_operator(), self._lanes
            sums = np.empty((self.n_groups, columns.shape[1]))
            for col in range(columns.shape[1]):  # a handful of buckets, never over clients
                # a contiguous column (device reports are column-major) is not copied
                partial = adder @ np.ascontiguousarray(columns[:, col], dtype=np.float64)
                sums[:, col] = partial.reshape(self.n_groups, lanes).sum(axis=1)
        return sums[:, 0] if data.ndim == 1 else sums


def check_clipping(spec: MetricSpec | HistogramSpec, sums: NDArray[np.float64],
                   counts: NDArray[np.int64], *, absent_allowed: bool = False) -> None:
    """Detect a gross clipping failure: an aggregate beyond cap x cohort.

    The server cannot see clients, but a sum outside ``[low * n, high * n]`` (or a
    histogram mass above ``mass_cap * n``) proves that some device did not clip.
    With ``absent_allowed`` (a metric with a presence column) an absent client
    contributes 0, so the range widens to include 0.

    Raises
    ------
    ClippingFailure
        Nothing was published or charged.

    Examples
    --------
    >>> check_clipping(MetricSpec("loss", 0, 1), np.array([5.0]), np.array([2]))
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.ClippingFailure: loss@1: the aggregate of group 0 lies beyond [0, 1] x cohort; some device did not clip. Nothing was published or charged: find the device build that skips clipping
    """  # noqa: E501
    if not isinstance(spec, (MetricSpec, HistogramSpec)):
        raise InvalidInput(f"spec={spec!r} is not a MetricSpec or HistogramSpec")
    counts = np.asarray(check_finite_array(counts, "counts", allow_empty=True))
    sums = check_finite_array(sums, "sums", ndim=(1, 2), allow_empty=True)
    if sums.shape[0] != counts.shape[0]:
        raise InvalidInput(f"sums has {sums.shape[0]} groups but counts has {counts.shape[0]}; "
                           "give one count per group")
    n = counts.astype(np.float64)
    tol = 1e-9 * np.maximum(1.0, n)
    if isinstance(spec, MetricSpec):
        low, high = spec.clip_low, spec.clip_high
        if absent_allowed:
            low, high = min(low, 0.0), max(high, 0.0)
        bad = (sums < low * n - tol * max(1.0, abs(low))) | (
            sums > high * n + tol * max(1.0, abs(high)))
        limit = f"[{low:g}, {high:g}] x cohort"
    else:
        by_group = np.atleast_2d(sums)
        bad = (by_group.sum(axis=1) > spec.mass_cap * n + tol) | (
            by_group < -tol[:, None]).any(axis=1)
        limit = f"mass_cap {spec.mass_cap:g} x cohort and non-negative buckets"
    bad = np.atleast_1d(bad)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        # The message names the group, never its sum or count (private before the noise).
        raise ClippingFailure(
            f"{spec.key}: the aggregate of group {first} lies beyond {limit}; some device did "
            "not clip. Nothing was published or charged: find the device build that skips "
            "clipping"
        )
