"""Which partition regions each client has samples in, capped per client (device side)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import sparse

from spatialdp._validation import check_instance
from spatialdp.federated._checks import MAX_COVERAGE_CELLS, _positive_int
from spatialdp.federated._clients import IntArray, _client_codes, _same_length
from spatialdp.geo.partition import Partition
from spatialdp.privacy.budget import Neighbours, check_neighbours

__all__ = ["CellCoverage", "coverage"]


@dataclass(frozen=True)
class CellCoverage:
    """Which partition regions each client has samples in, at most ``max_cells`` each.

    Attributes
    ----------
    matrix : scipy.sparse.csr_array of int8, shape (n_clients, n_regions)
        ``1`` where the client has a sample in the region (among its kept cells).
    client_ids : pandas.Index
        The rows' clients, sorted.
    partition_version : str
    max_cells : int
        The L1 cap of a row: replacing one client moves the summed coverage by at
        most ``2 * max_cells`` in L1 (:attr:`sensitivity`), adding or removing one
        by ``max_cells``.
    """

    matrix: sparse.csr_array
    client_ids: pd.Index
    partition_version: str
    max_cells: int

    @property
    def cells_per_client(self) -> IntArray:
        """Number of regions kept per client (at most ``max_cells``)."""
        return np.diff(self.matrix.indptr).astype(np.int64)

    @property
    def sensitivity(self) -> float:
        """L1 change of the summed coverage when one client is replaced."""
        return self.sensitivity_under("replace")

    def sensitivity_under(self, neighbours: Neighbours) -> float:
        """L1 change of the summed coverage: ``2 max_cells`` (replace) or ``max_cells``."""
        return float(self.max_cells) * (1.0 if check_neighbours(neighbours) == "add_remove"
                                        else 2.0)


def coverage(lon: ArrayLike, lat: ArrayLike, client_ids: ArrayLike, partition: Partition,
             *, max_cells: int = 10) -> CellCoverage:
    """Bounded 0/1 indicator of the partition regions each client has samples in.

    Each client keeps at most ``max_cells`` regions: those where it has the most
    samples, ties broken by the lower partition position. The cap bounds the L1
    norm of a row, and so the sensitivity of the summed coverage. Points in no
    region are ignored (a client with none has an empty row).

    Examples
    --------
    >>> import geopandas as gpd, shapely
    >>> regions = gpd.GeoDataFrame({"id": ["w", "e"]}, crs=4326,
    ...     geometry=[shapely.box(0, 0, 1, 1), shapely.box(1.5, 0, 2.5, 1)])
    >>> part = Partition.from_geodataframe(regions, "id")
    >>> cov = coverage([0.5, 2.0, 2.1, 9.0], [0.5] * 4, ["a", "a", "a", "b"], part,
    ...                max_cells=1)
    >>> cov.matrix.toarray().tolist(), list(cov.client_ids)
    ([[1, 0], [0, 0]], ['a', 'b'])
    """
    cap = _positive_int(max_cells, "max_cells", high=MAX_COVERAGE_CELLS)
    check_instance(partition, "partition", Partition,
                   "pass the Partition whose regions the coverage rows count")
    codes, clients = _client_codes(client_ids)
    position = partition.assign(lon=lon, lat=lat).positions
    _same_length(position.astype(np.float64), codes, "lon/lat")
    return _coverage(codes, clients, position, partition, cap)


def _coverage(codes: IntArray, clients: pd.Index, position: IntArray, partition: Partition,
              cap: int) -> CellCoverage:
    n_regions = partition.n_regions
    inside = position >= 0
    pair, count = np.unique(codes[inside] * n_regions + position[inside], return_counts=True)
    client, region = pair // n_regions, pair % n_regions
    order = np.lexsort((region, -count, client))
    client, region = client[order], region[order]
    rank = np.arange(client.size) - np.searchsorted(client, client, side="left")
    keep = rank < cap
    client, region = client[keep], region[keep]
    order = np.lexsort((region, client))
    matrix = sparse.csr_array(
        (np.ones(client.size, dtype=np.int8), (client[order], region[order])),
        shape=(clients.size, n_regions),
    )
    return CellCoverage(matrix, clients, partition.version, cap)

