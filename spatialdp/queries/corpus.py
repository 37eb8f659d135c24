"""Query corpora: real polygons turned into cell index arrays of a grid, with their areas.

Error is a property of the query, so a measured error is only defined relative
to a corpus: the polygons analysts actually ask about (census divisions,
states, an access log), converted to cell index arrays with a containment mode
(:meth:`~spatialdp.geo.Partition.polygons_to_cells`) and bucketed by cell
count or area. A polygon reaching outside the grid is refused: its answer
would silently miss the part outside.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy import sparse

from spatialdp.exceptions import InvalidInput
from spatialdp.geo import CellIncidence, Partition, h3cells
from spatialdp.geo.lonlat import geometry_array
from spatialdp.geo.results import incidence_matrix, lookup_cells

__all__ = ["QueryCorpus", "incidence_from_cell_lists", "query_corpus"]

#: Equal-area CRS used to measure polygon areas (EASE-Grid 2.0, global).
EQUAL_AREA_CRS = "EPSG:6933"


@dataclass(frozen=True, eq=False)
class QueryCorpus:
    """Polygon queries as cell index arrays of one grid, with their areas.

    Attributes
    ----------
    incidence : CellIncidence
        One CSR row per query (its cell index array).
    index : pandas.Index
        The queries' labels (the GeoDataFrame's index).
    polygon_area_km2 : numpy.ndarray or None
        Area of each polygon (equal-area projection), None for cell-list corpora.
    cell_area_km2 : numpy.ndarray or None
        Area of the cells that stand for each polygon (None for cell-list corpora).
    """

    incidence: CellIncidence
    index: pd.Index
    polygon_area_km2: NDArray[np.float64] | None
    cell_area_km2: NDArray[np.float64] | None

    @property
    def cells_per_query(self) -> NDArray[np.int64]:
        """The ``m`` of each query."""
        return self.incidence.cells_per_query

    @property
    def partition_version(self) -> str:
        """The version of the grid the queries were converted on."""
        return self.incidence.partition_version

    def __len__(self) -> int:
        return int(self.incidence.matrix.shape[0])


def _cell_areas(cells: NDArray[np.uint64], matrix: sparse.csr_array) -> NDArray[np.float64]:
    import h3ronpy
    import pyarrow as pa

    area = np.asarray(pa.array(h3ronpy.cells_area_km2(cells)).to_numpy(zero_copy_only=False),
                      dtype=np.float64)
    return np.asarray(matrix @ area, dtype=np.float64)


def _refuse_outside(incidence: CellIncidence, index: pd.Index) -> None:
    outside = np.flatnonzero(incidence.cells_outside > 0)
    if outside.size:
        raise InvalidInput(
            f"{outside.size} query polygons reach outside the partition (first: "
            f"{index[outside[:3]].tolist()}, {int(incidence.cells_outside[outside[0]])} cells "
            "outside); their answers would miss that part: clip them to the partition's "
            "extent (frame.clip(partition.regions.union_all())) or use a larger partition")
    empty = incidence.uncovered
    if empty.size:
        raise InvalidInput(
            f"{empty.size} query polygons cover no cell of the partition (first: "
            f"{index[empty[:3]].tolist()}); drop them, use a finer grid or "
            "containment='overlap'")


def query_corpus(partition: Partition, polygons: gpd.GeoDataFrame | gpd.GeoSeries, *,
                 containment: h3cells.Containment = "center") -> QueryCorpus:
    """Convert real polygons into cell index arrays of an H3 partition, with their areas.

    Parameters
    ----------
    partition : Partition
        The H3 grid the truth and the release are keyed by.
    polygons : GeoDataFrame or GeoSeries of (Multi)Polygons in EPSG:4326
    containment : {"center", "overlap", "full"}
        Which cells stand for a polygon (see :meth:`Partition.polygons_to_cells`).

    Returns
    -------
    QueryCorpus

    Raises
    ------
    CRSError
        Polygons in another CRS than EPSG:4326 (or none).
    InvalidInput
        Polygons that reach outside the partition or cover none of its cells.
    """
    if not isinstance(partition, Partition):
        raise InvalidInput(f"partition={partition!r} is not a Partition; pass the H3 "
                           "partition of the truth grid")
    incidence = partition.polygons_to_cells(polygons, containment)
    index = polygons.index if isinstance(polygons, (gpd.GeoDataFrame, gpd.GeoSeries)) \
        else pd.RangeIndex(incidence.matrix.shape[0])
    _refuse_outside(incidence, index)
    geoms = geometry_array(polygons, "polygons", "the query polygons")
    area = gpd.GeoSeries(geoms, crs=4326).to_crs(EQUAL_AREA_CRS).area.to_numpy() / 1e6
    return QueryCorpus(incidence, index, np.asarray(area, dtype=np.float64),
                       _cell_areas(partition.cells, incidence.matrix))


def incidence_from_cell_lists(grid_cells: NDArray[np.uint64], partition_version: str,
                              offsets: NDArray[np.int64], cells: NDArray[np.uint64],
                              containment: str = "center") -> CellIncidence:
    """Build a :class:`CellIncidence` from CSR-style cell lists over a sorted cell array.

    For grids given as a cell array (too large for a Partition): ``offsets`` and
    ``cells`` as :func:`~spatialdp.geo.h3cells.polygons_to_cell_lists` returns
    them. Cells outside the grid are counted per query in ``cells_outside``.

    Examples
    --------
    >>> grid = h3cells.parse_cells(["85283473fffffff", "85283477fffffff"])
    >>> inc = incidence_from_cell_lists(grid, "v", np.array([0, 1, 3]), grid[[1, 0, 1]])
    >>> inc.cells_per_query.tolist()
    [1, 2]
    """
    matrix, outside = incidence_matrix(offsets, lookup_cells(grid_cells, cells),
                                       grid_cells.size)
    return CellIncidence(matrix, outside, containment, partition_version)


def corpus_from_incidence(incidence: CellIncidence, index: Any = None) -> QueryCorpus:
    """Wrap a :class:`CellIncidence` as a corpus (no areas).

    Raises
    ------
    InvalidInput
        Queries reaching outside the grid or covering no cell.
    """
    n = incidence.matrix.shape[0]
    idx = pd.RangeIndex(n) if index is None else pd.Index(index)
    _refuse_outside(incidence, idx)
    return QueryCorpus(incidence, idx, None, None)


__all__ += ["EQUAL_AREA_CRS", "corpus_from_incidence"]
