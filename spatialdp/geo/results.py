"""What the geography answers: which region each point is in, which cells each polygon covers."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from spatialdp._validation import check_integer
from spatialdp.exceptions import InvalidInput
from spatialdp.geo.h3cells import check_cell_values

if TYPE_CHECKING:  # imported where used: scipy.sparse is slow to import (a cold call's cost)
    from scipy import sparse

__all__ = ["Assignment", "CellIncidence", "incidence_matrix", "lookup_cells"]


@dataclass(frozen=True)
class Assignment:
    """Which region each point fell in, aligned to the input points.

    Attributes
    ----------
    positions : numpy.ndarray of int64
        Region position per point, ``-1`` where the point is in no region.
    partition_ids : pandas.Index
        The partition's region ids, in partition order (``partition_ids[positions]``
        for assigned points): one per region, not one per point.
    partition_version : str
    index : pandas.Index
        The input's index: the point GeoDataFrame's, or the ``lon`` Series' (a
        ``RangeIndex`` for plain arrays). :attr:`region` is aligned to it.

    Examples
    --------
    >>> where = Assignment(np.array([1, -1, 0]), pd.Index(["a", "b"]), "v1",
    ...                    pd.Index([10, 11, 12]))
    >>> where.region.to_dict()
    {10: 'b', 11: None, 12: 'a'}
    >>> where.counts().tolist()
    [1, 1]
    """

    positions: NDArray[np.int64]
    partition_ids: pd.Index
    partition_version: str
    index: pd.Index

    @property
    def region(self) -> pd.Series:
        """Region id per point (``None`` outside every region), indexed like the input.

        Assign it as a column of the frame the points came from:
        ``frame["region_id"] = partition.assign(frame).region``.
        """
        return pd.Series(self.ids(), index=self.index, name="region_id", dtype=object)

    @property
    def region_ids(self) -> pd.Index:
        """Deprecated: the partition's ids (one per region), now :attr:`partition_ids`.

        The name read as one id per point, which is :attr:`region`.
        """
        warnings.warn(
            "Assignment.region_ids is the partition's region ids (one per region), not one "
            "per point; use .partition_ids for those, or .region for each point's region "
            "(a Series aligned to the input index)", FutureWarning, stacklevel=2)
        return self.partition_ids

    @property
    def assigned(self) -> NDArray[np.bool_]:
        """Mask of the points that fell in a region."""
        return self.positions >= 0

    @property
    def n_unassigned(self) -> int:
        """How many points fell in no region (never silently dropped)."""
        return int((self.positions < 0).sum())

    @property
    def unassigned_index(self) -> NDArray[np.int64]:
        """Positions (0 to n - 1, in input order) of the points in no region.

        ``index[unassigned_index]`` gives their labels in the input's index.
        """
        return np.flatnonzero(self.positions < 0)

    def ids(self) -> NDArray[np.object_]:
        """Region id per point as an array in input order (``None`` outside every region).

        Positional, like :attr:`positions`; :attr:`region` is the same ids as a
        Series aligned to the input index.
        """
        out = np.full(self.positions.size, None, dtype=object)
        ok = self.assigned
        out[ok] = np.asarray(self.partition_ids)[self.positions[ok]]
        return out

    def counts(self) -> NDArray[np.int64]:
        """Count the points of each region, in partition order."""
        counts: NDArray[np.int64] = np.bincount(self.positions[self.assigned],
                                                minlength=len(self.partition_ids))
        return counts

    def __repr__(self) -> str:
        return (
            f"Assignment(points={self.positions.size}, regions={len(self.partition_ids)}, "
            f"unassigned={self.n_unassigned}, partition_version={self.partition_version!r})"
        )


def lookup_cells(own: NDArray[np.uint64], cells: NDArray[np.uint64]) -> NDArray[np.int64]:
    """Return the position of each cell in the sorted ``own`` cells, -1 if absent.

    Examples
    --------
    >>> lookup_cells(np.array([3, 5, 9], dtype=np.uint64), np.array([5, 4], dtype=np.uint64))
    array([ 1, -1])
    """
    if own.size == 0:
        return np.full(cells.size, -1, dtype=np.int64)
    positions = np.searchsorted(own, cells)
    clipped = np.minimum(positions, own.size - 1)
    found = own[clipped] == cells
    return np.where(found, clipped, -1).astype(np.int64)


def incidence_matrix(offsets: NDArray[np.int64], columns: NDArray[np.int64], n_cells: int
              ) -> tuple[sparse.csr_array, NDArray[np.int64]]:
    """Return the 0/1 query-by-cell matrix and, per query, its cells outside the partition.

    ``offsets`` and ``columns`` are CSR-style lists: query ``i`` lists
    ``columns[offsets[i]:offsets[i + 1]]``, the partition position of each of its
    cells (-1 when absent, from :func:`lookup_cells`).

    Examples
    --------
    >>> m, out = incidence_matrix(np.array([0, 2, 3]), np.array([1, -1, 0]), 2)
    >>> m.toarray().tolist(), out.tolist()
    ([[0, 1], [1, 0]], [1, 0])
    """
    from scipy import sparse  # lazy: see the imports

    n_queries = offsets.size - 1
    row = np.repeat(np.arange(n_queries), np.diff(offsets))
    inside = columns >= 0
    outside = np.bincount(row[~inside], minlength=n_queries).astype(np.int64)
    matrix = sparse.csr_array(
        (np.ones(int(inside.sum()), dtype=np.int8), (row[inside], columns[inside])),
        shape=(n_queries, n_cells),
    )
    matrix.sum_duplicates()
    matrix.data[:] = 1  # incidence, not multiplicity
    return matrix, outside


@dataclass(frozen=True)
class CellIncidence:
    """Polygon queries turned into cell index arrays of an H3 partition.

    Attributes
    ----------
    matrix : scipy.sparse.csr_array of int8, shape (n_queries, n_cells)
        ``matrix[i, j] == 1`` when query ``i`` covers partition cell ``j``. Row ``i``'s
        column indices are its cell index array.
    cells_outside : numpy.ndarray of int64
        Per query, cells it covers that are not in the partition (outside its extent).
    containment : str
    partition_version : str
    """

    matrix: sparse.csr_array
    cells_outside: NDArray[np.int64]
    containment: str
    partition_version: str

    @property
    def cells_per_query(self) -> NDArray[np.int64]:
        """How many partition cells each query covers (its ``m``)."""
        per_query: NDArray[np.int64] = np.diff(self.matrix.indptr).astype(np.int64)
        return per_query

    @property
    def uncovered(self) -> NDArray[np.int64]:
        """Positions of the queries that cover no partition cell (reported, not dropped)."""
        return np.flatnonzero(self.cells_per_query == 0)

    def cell_indices(self, query: int) -> NDArray[np.int32]:
        """Return the cell index array (partition positions) of one query.

        Raises
        ------
        InvalidInput
            If ``query`` is not the position of a query.
        """
        n_queries = self.matrix.shape[0]
        query = check_integer(query, "query", low=0, high=max(n_queries - 1, 0),
                              fix=f"pass a query position from 0 to {n_queries - 1}")
        if n_queries == 0:
            raise InvalidInput(f"query={query} cannot be looked up: there are no queries; "
                               "pass at least one query polygon")
        start, stop = self.matrix.indptr[query], self.matrix.indptr[query + 1]
        return np.asarray(self.matrix.indices[start:stop])

    def answer(self, cell_values: ArrayLike) -> NDArray[np.float64]:
        """Sum per-cell values over each query's cells (one sparse product).

        Raises
        ------
        InvalidInput
            Values that are not finite numbers, or not one per partition cell.
        """
        values = check_cell_values(cell_values, self.matrix.shape[1], "cell_values")
        return np.asarray(self.matrix @ values, dtype=np.float64)
