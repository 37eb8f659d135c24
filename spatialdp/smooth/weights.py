"""Spatial weights of a small-area model: the partition's neighbour graph, row-standardised.

The spatial Fay-Herriot model's area effect is a simultaneous autoregression
on a proximity matrix ``W`` whose rows sum to one (``sae::eblupSFH``'s
``proxmat``). It comes from the partition (:meth:`Partition.adjacency`: H3
cells sharing an edge, polygons sharing a border), from a ``libpysal``
weights object (where spatial analysts keep their weights) or from any
square sparse or dense matrix in the regions' order. A region without a
neighbour keeps a zero row: its effect is then independent of the others.

``libpysal`` is optional (``pip install spatialdp[spatial]``): without it
everything works from the partition, and only the libpysal import/export
refuses.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse

from spatialdp._validation import fail
from spatialdp.exceptions import InvalidInput
from spatialdp.geo.partition import Partition

__all__ = ["row_standardised", "spatial_weights", "to_libpysal"]


def row_standardised(matrix: Any) -> sparse.csr_array:
    """Return a non-negative square matrix with each non-empty row scaled to sum to one.

    Examples
    --------
    >>> row_standardised(np.array([[0, 1, 1], [1, 0, 0], [0, 0, 0]])).toarray().tolist()
    [[0.0, 0.5, 0.5], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    """
    m = sparse.csr_array(matrix, dtype=np.float64)
    if m.shape[0] != m.shape[1]:
        raise InvalidInput(f"the weights matrix has shape {m.shape}; give a square matrix")
    if m.nnz and (not np.isfinite(m.data).all() or (m.data < 0).any()):
        raise InvalidInput("the weights matrix has negative or non-finite entries; "
                           "give proximities >= 0")
    m.setdiag(0.0)
    m.eliminate_zeros()
    total = np.asarray(m.sum(axis=1)).ravel()
    scale = np.divide(1.0, total, out=np.zeros_like(total), where=total > 0)
    return sparse.csr_array(sparse.diags_array(scale) @ m)


def spatial_weights(weights: Any, region_ids: pd.Index) -> sparse.csr_array:
    """Return the row-standardised weights of ``region_ids``, from what the user gave.

    Parameters
    ----------
    weights : Partition, libpysal.weights.W, scipy sparse matrix or ndarray
        A partition (its neighbour graph; its regions must be ``region_ids``),
        a libpysal ``W`` (its ids must cover ``region_ids``) or a square matrix
        in the order of ``region_ids``.
    region_ids : Index
        The report's regions.

    Examples
    --------
    >>> W = spatial_weights(np.array([[0, 1], [1, 0]]), pd.Index(["a", "b"]))
    >>> W.toarray().tolist()
    [[0.0, 1.0], [1.0, 0.0]]
    """
    n = len(region_ids)
    if isinstance(weights, Partition):
        ids = pd.Index(weights.region_ids.astype(str))
        if not ids.equals(pd.Index(region_ids.astype(str))):
            raise InvalidInput(
                f"partition {weights.key!r} has other regions than the report "
                f"({weights.n_regions} vs {n}); pass the partition the report is keyed by")
        return row_standardised(weights.adjacency())
    if type(weights).__module__.startswith("libpysal"):
        return row_standardised(_from_libpysal(weights, region_ids))
    if sparse.issparse(weights) or isinstance(weights, np.ndarray):
        if weights.shape != (n, n):
            raise InvalidInput(f"the weights matrix has shape {weights.shape}; the report has "
                               f"{n} regions: give an ({n}, {n}) matrix in its region order")
        return row_standardised(weights)
    raise fail("weights", weights, "is not spatial weights",
               "pass the Partition, a libpysal W or a square matrix in region order")


def _from_libpysal(w: Any, region_ids: pd.Index) -> sparse.csr_array:
    """Return a libpysal W as a sparse matrix in the order of ``region_ids``."""
    ids = [str(i) for i in w.id_order]
    position = {rid: k for k, rid in enumerate(ids)}
    missing = [rid for rid in region_ids.astype(str) if rid not in position]
    if missing:
        raise InvalidInput(f"the libpysal weights have no id {missing[0]!r} (and "
                           f"{len(missing) - 1} more regions); build them on the report's "
                           "region ids")
    order = np.array([position[rid] for rid in region_ids.astype(str)])
    full = sparse.csr_array(w.sparse)
    return sparse.csr_array(full[order][:, order])


def to_libpysal(partition: Partition) -> Any:
    """Return the partition's neighbour graph as a binary ``libpysal.weights.W`` keyed by region id.

    Raises
    ------
    InvalidInput
        When libpysal is not installed (``pip install spatialdp[spatial]``).

    Examples
    --------
    >>> from spatialdp.datasets import us_states_partition
    >>> w = to_libpysal(us_states_partition())      # needs libpysal
    >>> sorted(w.neighbors["VT"]), w.n
    (['MA', 'NH', 'NY'], 48)
    """
    if not isinstance(partition, Partition):
        raise fail("partition", partition, "is not a Partition", "pass a Partition")
    try:
        from libpysal.weights import WSP
    except ImportError:
        raise InvalidInput("libpysal is not installed; pip install 'spatialdp[spatial]' "
                           "(or libpysal) to export weights") from None
    ids = [str(i) for i in partition.region_ids]
    return WSP(sparse.csr_matrix(partition.adjacency().astype(float)), id_order=ids).to_W(
        silence_warnings=True)
