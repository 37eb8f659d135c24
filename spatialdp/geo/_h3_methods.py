"""The methods only H3 partitions have: polygon queries, roll-ups, coarsening."""

from __future__ import annotations

from typing import TYPE_CHECKING

import geopandas as gpd
import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from spatialdp._validation import check_integer, check_resolution
from spatialdp.exceptions import InvalidInput
from spatialdp.geo import _assign, _cover, h3cells
from spatialdp.geo._checks import as_array, check_polygons, geometry_array
from spatialdp.geo.results import CellIncidence

if TYPE_CHECKING:
    from spatialdp.geo.partition import Partition

__all__ = ["H3Methods"]


class H3Methods:
    """Methods of :class:`~spatialdp.geo.partition.Partition` that need H3 cells."""

    _cells: NDArray[np.uint64] | None
    resolution: int | None
    version: str
    name: str

    @property
    def cells(self) -> NDArray[np.uint64]:
        """Return the partition's H3 cells as sorted uint64 (H3 partitions only)."""
        return self._require_h3("cells")

    def _require_h3(self, what: str) -> NDArray[np.uint64]:
        if self._cells is None:
            raise InvalidInput(
                f"{what} needs an H3 partition, but {self.name}@{self.version} is a polygon "
                "partition; build one with Partition.from_h3_cover(...)"
            )
        return self._cells

    # ------------------------------------------------------------------ polygons -> cells
    def polygons_to_cells(
        self,
        queries: gpd.GeoDataFrame | gpd.GeoSeries,
        containment: h3cells.Containment = "center",
        *,
        max_cells: int = h3cells.MAX_LIST_CELLS,
    ) -> CellIncidence:
        """Turn polygon queries into cell index arrays of this H3 partition.

        Parameters
        ----------
        queries : GeoDataFrame or GeoSeries of (Multi)Polygons in EPSG:4326
            Read as in :meth:`from_h3_cover` (polar caps work; antimeridian shapes split).
        containment : {"center", "overlap", "full"}
            Which cells a polygon covers: centre inside (default), any overlap, or
            wholly inside.
        max_cells : int
            Refuse queries estimated to cover more cells than this, in all.

        Returns
        -------
        CellIncidence
            A CSR matrix with one row per query (in input order) and one column per
            partition cell; queries that cover no cell are listed in ``.uncovered``.

        Raises
        ------
        CRSError, InvalidInput
            As :meth:`from_h3_cover`; also for a polygon partition.
        """
        own = self._require_h3("polygons_to_cells")
        mode = _cover.check_containment(containment)
        limit = check_integer(max_cells, "max_cells", low=1, fix="pass a positive whole number")
        geoms = geometry_array(queries, "queries", "the query polygons")
        check_polygons(geoms, "the query polygons")
        resolution = int(self.resolution or 0)
        _cover.check_size(geoms, resolution, limit, "for the query polygons")
        offsets, cells = _cover.cell_lists(geoms, resolution, mode)
        matrix, outside = _cover.incidence(offsets, _assign.lookup_cells(own, cells), own.size)
        return CellIncidence(matrix, outside, mode, self.version)

    # ------------------------------------------------------------------ hierarchy
    def rollup(self, values: ArrayLike, resolution: int) -> pd.Series:
        """Sum per-cell values into parent cells at a coarser ``resolution``.

        Parameters
        ----------
        values : array-like
            One finite number per partition cell, in partition order.
        resolution : int
            Coarser than (or equal to) the partition's.

        Returns
        -------
        pandas.Series
            Indexed by parent cell id (hex string).

        Raises
        ------
        InvalidInput
            Values of the wrong length or not finite numbers; a polygon partition.
        InvalidCells
            A resolution finer than the partition's.
        """
        own = self._require_h3("rollup")
        resolution = check_resolution(resolution)
        array = as_array(values, "values", "give one number per cell")
        shape = array.shape if not isinstance(values, (str, bytes)) else ()
        if shape != own.shape:
            raise InvalidInput(
                f"values has shape {shape}; the partition has {own.size} cells, give one "
                "value per cell in partition order"
            )
        checked = h3cells.check_cell_values(array, own.size, "values")
        parents, sums = h3cells._rollup(own, checked, resolution)
        return pd.Series(sums, index=pd.Index(h3cells._to_str(parents), name="region_id"))

    def coarsen(self, resolution: int) -> tuple[Partition, NDArray[np.int64]]:
        """Return the partition of parent cells, and each cell's parent position in it.

        Raises
        ------
        InvalidInput, InvalidCells
            A bad resolution, one finer than the partition's, or a polygon partition.
        """
        own = self._require_h3("coarsen")
        resolution = check_resolution(resolution)
        parents = h3cells._parents(own, resolution)
        unique, inverse = np.unique(parents, return_inverse=True)
        from spatialdp.geo.partition import Partition

        coarse = Partition.from_h3_cells(unique, name=f"{self.name}:r{resolution}")
        return coarse, inverse.astype(np.int64)
