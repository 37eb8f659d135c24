"""Region adjacency: H3 cells that share an edge, polygons that share a border."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import shapely
from numpy.typing import NDArray
from scipy import sparse

from spatialdp.geo import h3cells
from spatialdp.geo._assign import lookup_cells

if TYPE_CHECKING:
    from spatialdp.geo.partition import Partition

__all__ = ["adjacency"]

#: Digitised borders of neighbouring regions rarely coincide: within this many
#: degrees they count as shared...
_BORDER_TOLERANCE = 1e-6
#: ...when the shared stretch is longer than this (a corner point is not a border).
_MIN_SHARED_LENGTH = 1e-4


def adjacency(partition: Partition) -> sparse.csr_array:
    """Return the symmetric region adjacency as a boolean CSR matrix (no self loops)."""
    if partition._cells is not None:
        own = partition._cells
        offsets, disk = h3cells._grid_disk(own, 1)
        row = np.repeat(np.arange(own.size), np.diff(offsets))
        col = lookup_cells(own, disk)
    else:
        row, col = _shared_borders(partition)
    keep = (col >= 0) & (row != col)
    n = partition.n_regions
    adj = sparse.csr_array(
        (np.ones(int(keep.sum()), dtype=bool), (row[keep], col[keep])), shape=(n, n)
    )
    return ((adj + adj.T) > 0).astype(bool)


def _shared_borders(partition: Partition) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    geoms = partition.regions.geometry.values
    left, right = partition.tree.query(geoms, predicate="dwithin", distance=_BORDER_TOLERANCE)
    pairs = left < right
    left, right = left[pairs], right[pairs]
    shared = shapely.intersection(
        shapely.buffer(shapely.boundary(geoms[left]), _BORDER_TOLERANCE),
        shapely.boundary(geoms[right]),
    )
    long_enough = shapely.length(shared) > _MIN_SHARED_LENGTH
    return left[long_enough].astype(np.int64), right[long_enough].astype(np.int64)
