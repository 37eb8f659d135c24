"""The fixed, versioned geography every other step of spatialdp is keyed by.

A :class:`Partition` is a fixed set of regions, either H3 cells at one
resolution or the polygons of a GeoDataFrame (administrative regions), each
with a stable id and a fixed position ``0..n_regions-1``. Its
:attr:`~Partition.version` is a content hash of the ids and the cells or
geometries: results carry it, and results of two versions are never mixed
(:class:`~spatialdp.exceptions.PartitionMismatch`).
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from numpy.typing import ArrayLike, NDArray
from scipy import sparse

from spatialdp.exceptions import InvalidInput, PartitionMismatch
from spatialdp.geo import h3cells
from spatialdp.geo._checks import (
    LONLAT_EPSG,
    check_lonlat,
    check_polygons,
    points_lonlat,
    require_lonlat_crs,
)
from spatialdp.geo._interior import InteriorCellIndex
from spatialdp.geo.results import Assignment, CellIncidence

__all__ = ["Assignment", "CellIncidence", "Partition"]  # results re-exported from here

PartitionKind = Literal["h3", "polygons"]

# Below this many points the exact STRtree test alone is faster than building the
# interior-cell index (about 0.4 s for the 48 states).
_INTERIOR_INDEX_MIN_POINTS = 50_000


class Partition:
    """A fixed, versioned set of regions: H3 cells at one resolution or polygons.

    Build one with :meth:`from_h3_cells`, :meth:`from_h3_cover` or
    :meth:`from_geodataframe`; do not call the constructor directly.

    Attributes
    ----------
    kind : {"h3", "polygons"}
    name : str
        A human label (not part of the version).
    resolution : int or None
        The H3 resolution (``None`` for polygon partitions).
    regions : geopandas.GeoDataFrame
        One row per region, index = region id (str), in partition order, EPSG:4326.

    Examples
    --------
    >>> import geopandas as gpd, shapely
    >>> square = gpd.GeoDataFrame(geometry=[shapely.box(-100, 40, -99, 41)], crs=4326)
    >>> part = Partition.from_h3_cover(square, resolution=5, name="square")
    >>> part.n_regions, part.resolution
    (35, 5)
    >>> part.assign(lon=[-99.5, 10.0], lat=[40.5, 10.0]).n_unassigned
    1
    """

    def __init__(
        self,
        kind: PartitionKind,
        ids: NDArray[Any],
        geometry: NDArray[np.object_],
        *,
        name: str,
        resolution: int | None = None,
        cells: NDArray[np.uint64] | None = None,
    ) -> None:
        self.kind: PartitionKind = kind
        self.name = name
        self.resolution = resolution
        self._cells = cells
        self.regions = gpd.GeoDataFrame(
            {"geometry": geometry}, index=pd.Index(ids, name="region_id"), crs=LONLAT_EPSG
        )
        self._tree: shapely.STRtree | None = None
        self._interior: InteriorCellIndex | None = None
        self.version = self._content_hash()

    # ------------------------------------------------------------------ building
    @classmethod
    def from_h3_cells(cls, cells: ArrayLike, *, name: str = "h3") -> Partition:
        """A partition whose regions are the given H3 cells (one resolution).

        Raises
        ------
        InvalidCells
            Invalid ids or a mix of resolutions.
        InvalidInput
            Duplicate cells.
        """
        parsed = h3cells.parse_cells(cells)
        resolution = h3cells.single_resolution(parsed)
        unique = np.unique(parsed)
        if unique.size != parsed.size:
            raise InvalidInput(
                f"{parsed.size - unique.size} duplicate H3 cells; region ids must be "
                "unique: pass np.unique(cells)"
            )
        return cls(
            "h3",
            h3cells.cells_to_str(unique).astype(object),
            h3cells.cell_polygons(unique),
            name=name,
            resolution=resolution,
            cells=unique,
        )

    @classmethod
    def from_h3_cover(
        cls,
        area: gpd.GeoDataFrame | gpd.GeoSeries,
        resolution: int,
        *,
        containment: h3cells.Containment = "center",
        name: str = "h3",
    ) -> Partition:
        """The H3 cells at ``resolution`` that cover the polygons of ``area``.

        Parameters
        ----------
        area : GeoDataFrame or GeoSeries in EPSG:4326
        resolution : int
        containment : {"center", "overlap", "full"}
            ``overlap`` makes the cells cover the whole area (no point of it left
            unassigned); ``center`` is h3's default polyfill.
        """
        require_lonlat_crs(area, "the area to cover")
        geoms = np.asarray(area.geometry.values if isinstance(area, gpd.GeoDataFrame)
                           else area.values, dtype=object)
        check_polygons(geoms, "the area to cover")
        _, cells = h3cells.polygons_to_cell_lists(geoms, resolution, containment)
        if cells.size == 0:
            raise InvalidInput(
                f"the area covers no H3 cell at resolution {resolution} with "
                f"containment={containment!r}; use a finer resolution or 'overlap'"
            )
        return cls.from_h3_cells(np.unique(cells), name=name)

    @classmethod
    def from_geodataframe(
        cls, frame: gpd.GeoDataFrame, id_column: str, *, name: str = "regions"
    ) -> Partition:
        """A partition of administrative (or any) polygons with an id column.

        Raises
        ------
        CRSError
            No CRS, or not EPSG:4326.
        InvalidInput
            Missing id column, duplicate ids, empty/invalid/non-polygonal geometry.
        """
        if not isinstance(frame, gpd.GeoDataFrame):
            raise InvalidInput(f"expected a GeoDataFrame, got {type(frame).__name__}")
        require_lonlat_crs(frame, "the region GeoDataFrame")
        if id_column not in frame.columns:
            raise InvalidInput(
                f"id_column {id_column!r} is not a column; columns are {list(frame.columns)}"
            )
        ids = frame[id_column].astype(str).to_numpy(dtype=object)
        duplicated = pd.Index(ids).duplicated()
        if duplicated.any():
            raise InvalidInput(
                f"duplicate region ids {sorted(set(ids[duplicated]))[:5]} in column "
                f"{id_column!r}; each region needs a unique id (dissolve the duplicates "
                "with frame.dissolve(by=id_column))"
            )
        geoms = np.asarray(frame.geometry.values, dtype=object)
        check_polygons(geoms, "the region GeoDataFrame")
        order = np.argsort(ids, kind="stable")
        return cls("polygons", ids[order], geoms[order], name=name)

    # ------------------------------------------------------------------ identity
    def _content_hash(self) -> str:
        digest = hashlib.sha256()
        digest.update(f"{self.kind}|{self.resolution}|".encode())
        if self._cells is not None:
            digest.update(self._cells.tobytes())
        else:
            digest.update("\x1f".join(self.regions.index).encode())
            for wkb in shapely.to_wkb(shapely.normalize(self.regions.geometry.values)):
                digest.update(wkb)
        return digest.hexdigest()[:16]

    @property
    def key(self) -> str:
        """``name@version``: how results name the geography they are keyed by."""
        return f"{self.name}@{self.version}"

    @property
    def n_regions(self) -> int:
        """Number of regions."""
        return len(self.regions)

    @property
    def region_ids(self) -> pd.Index:
        """Region ids in partition order."""
        return self.regions.index

    @property
    def cells(self) -> NDArray[np.uint64]:
        """The partition's H3 cells as sorted uint64 (H3 partitions only)."""
        return self._require_h3("cells")

    def require_version(self, version: str, what: str = "this result") -> None:
        """Refuse to use ``what`` if it was made on another partition version.

        Raises
        ------
        PartitionMismatch
        """
        if version != self.version:
            raise PartitionMismatch(
                f"{what} was computed on partition version {version!r}, but this is "
                f"{self.key!r}; results of two partition versions cannot be compared or "
                "mixed: recompute it on one partition"
            )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Partition) and other.version == self.version

    def __hash__(self) -> int:
        return hash(self.version)

    def __repr__(self) -> str:
        res = f", resolution={self.resolution}" if self.resolution is not None else ""
        return (f"Partition(kind={self.kind!r}, name={self.name!r}, "
                f"regions={self.n_regions}{res}, version={self.version!r})")

    def summary(self) -> str:
        """A few lines describing the partition, for the CLI and notebooks."""
        area_km2 = self.regions.to_crs("ESRI:102003" if self._in_conus() else 6933).area / 1e6
        lines = [
            repr(self),
            f"  total area      {area_km2.sum():,.0f} km^2",
            f"  region area     min {area_km2.min():,.1f}, median {area_km2.median():,.1f}, "
            f"max {area_km2.max():,.1f} km^2",
            f"  bounds (lon/lat) {np.round(self.regions.total_bounds, 3).tolist()}",
        ]
        return "\n".join(lines)

    def _in_conus(self) -> bool:
        west, south, east, north = self.regions.total_bounds
        return bool(west > -130 and east < -60 and south > 20 and north < 55)

    def _require_h3(self, what: str) -> NDArray[np.uint64]:
        if self._cells is None:
            raise InvalidInput(
                f"{what} needs an H3 partition, but {self.key!r} is a polygon partition; "
                "build one with Partition.from_h3_cover(...)"
            )
        return self._cells

    # ------------------------------------------------------------------ points
    def assign(
        self,
        points: gpd.GeoDataFrame | gpd.GeoSeries | None = None,
        *,
        lon: ArrayLike | None = None,
        lat: ArrayLike | None = None,
    ) -> Assignment:
        """Region of every point, vectorised; points in no region are reported.

        Give either a point GeoDataFrame/GeoSeries in EPSG:4326 or ``lon`` and ``lat``.
        H3 partitions index all points at once (h3ronpy) and look the cells up with a
        binary search; polygon partitions query an STRtree. A point on a border shared
        by two polygons goes to the region that comes first in partition order.

        Raises
        ------
        CRSError, InvalidInput
            Bad CRS, non-point geometries, NaN/inf or out-of-range coordinates.
        """
        if points is not None:
            lon_arr, lat_arr = points_lonlat(points)
        elif lon is not None and lat is not None:
            lon_arr, lat_arr = check_lonlat(lon, lat)
        else:
            raise InvalidInput("give a point GeoDataFrame, or both lon= and lat=")
        if self._cells is not None:
            positions = self._lookup_cells(
                h3cells.latlng_to_cells(lat_arr, lon_arr, int(self.resolution or 0))
            )
        else:
            positions = self._point_in_polygon(lon_arr, lat_arr)
        return Assignment(positions, self.region_ids, self.version)

    def _lookup_cells(self, cells: NDArray[np.uint64]) -> NDArray[np.int64]:
        own = self.cells
        positions = np.searchsorted(own, cells)
        clipped = np.minimum(positions, own.size - 1)
        found = own[clipped] == cells
        return np.where(found, clipped, -1).astype(np.int64)

    def _point_in_polygon(self, lon: NDArray[np.float64], lat: NDArray[np.float64]
                          ) -> NDArray[np.int64]:
        if lon.size >= _INTERIOR_INDEX_MIN_POINTS:
            if self._interior is None:
                self._interior = InteriorCellIndex.build(self.regions.geometry.values, self.tree)
            positions = self._interior.lookup(lon, lat)
        else:
            positions = np.full(lon.size, -1, dtype=np.int64)
        rest = np.flatnonzero(positions < 0)
        point_idx, region_idx = self.tree.query(shapely.points(lon[rest], lat[rest]),
                                                predicate="intersects")
        # query returns pairs sorted by point; a border point may match two regions:
        # writing in reverse order leaves the first (lowest) region position.
        order = np.lexsort((-region_idx, point_idx))
        positions[rest[point_idx[order]]] = region_idx[order]
        return positions

    @property
    def tree(self) -> shapely.STRtree:
        """STRtree over the region geometries (built once)."""
        if self._tree is None:
            self._tree = shapely.STRtree(self.regions.geometry.values)
        return self._tree

    # ------------------------------------------------------------------ polygons -> cells
    def polygons_to_cells(
        self,
        queries: gpd.GeoDataFrame | gpd.GeoSeries,
        containment: h3cells.Containment = "center",
    ) -> CellIncidence:
        """Turn polygon queries into cell index arrays of this H3 partition.

        Parameters
        ----------
        queries : GeoDataFrame or GeoSeries of (Multi)Polygons in EPSG:4326
        containment : {"center", "overlap", "full"}
            Which cells a polygon covers: centre inside (default), any overlap, or
            wholly inside.

        Returns
        -------
        CellIncidence
            A CSR matrix with one row per query (in input order) and one column per
            partition cell; queries that cover no cell are listed in ``.uncovered``.
        """
        own = self._require_h3("polygons_to_cells")
        require_lonlat_crs(queries, "the query polygons")
        geoms = np.asarray(queries.geometry.values if isinstance(queries, gpd.GeoDataFrame)
                           else queries.values, dtype=object)
        check_polygons(geoms, "the query polygons")
        offsets, cells = h3cells.polygons_to_cell_lists(geoms, int(self.resolution or 0),
                                                        containment)
        row = np.repeat(np.arange(geoms.size), np.diff(offsets))
        col = self._lookup_cells(cells)
        inside = col >= 0
        outside = np.bincount(row[~inside], minlength=geoms.size).astype(np.int64)
        matrix = sparse.csr_array(
            (np.ones(int(inside.sum()), dtype=np.int8), (row[inside], col[inside])),
            shape=(geoms.size, own.size),
        )
        matrix.sum_duplicates()
        return CellIncidence(matrix, outside, containment, self.version)

    # ------------------------------------------------------------------ hierarchy
    def rollup(self, values: ArrayLike, resolution: int) -> pd.Series:
        """Sum per-cell values into parent cells at a coarser ``resolution``.

        Parameters
        ----------
        values : array-like, one value per partition cell, in partition order
        resolution : int, coarser than the partition's

        Returns
        -------
        pandas.Series indexed by parent cell id (hex string)
        """
        own = self._require_h3("rollup")
        values = np.asarray(values)
        if values.shape != own.shape:
            raise InvalidInput(
                f"values has shape {values.shape}; the partition has {own.size} cells"
            )
        parents, sums = h3cells.rollup_counts(own, values, resolution)
        return pd.Series(sums, index=pd.Index(h3cells.cells_to_str(parents), name="region_id"))

    def coarsen(self, resolution: int) -> tuple[Partition, NDArray[np.int64]]:
        """The partition of parent cells, and each cell's parent position in it."""
        own = self._require_h3("coarsen")
        parents = h3cells.cell_parents(own, resolution)
        unique, inverse = np.unique(parents, return_inverse=True)
        coarse = Partition.from_h3_cells(unique, name=f"{self.name}:r{resolution}")
        return coarse, inverse.astype(np.int64)

    # ------------------------------------------------------------------ neighbours
    def adjacency(self) -> sparse.csr_array:
        """Symmetric region adjacency as a boolean CSR matrix (no self loops).

        H3 cells are neighbours when they share an edge (``grid_disk`` with k=1);
        polygons when they share a stretch of border (not just a corner point).
        """
        if self._cells is not None:
            offsets, disk = h3cells.grid_disk_lists(self._cells, 1)
            row = np.repeat(np.arange(self._cells.size), np.diff(offsets))
            col = self._lookup_cells(disk)
        else:
            row, col = self._shared_borders()
        keep = (col >= 0) & (row != col)
        n = self.n_regions
        adj = sparse.csr_array(
            (np.ones(int(keep.sum()), dtype=bool), (row[keep], col[keep])), shape=(n, n)
        )
        return ((adj + adj.T) > 0).astype(bool)

    def _shared_borders(self) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        geoms = self.regions.geometry.values
        # A tiny tolerance: digitised borders of neighbouring regions rarely coincide.
        left, right = self.tree.query(geoms, predicate="dwithin", distance=1e-6)
        pairs = left < right
        left, right = left[pairs], right[pairs]
        shared = shapely.intersection(
            shapely.buffer(shapely.boundary(geoms[left]), 1e-6), shapely.boundary(geoms[right])
        )
        long_enough = shapely.length(shared) > 1e-4
        return left[long_enough].astype(np.int64), right[long_enough].astype(np.int64)

    def neighbours(self, region_id: Any) -> list[str]:
        """Ids of the regions adjacent to ``region_id``."""
        if region_id not in self.region_ids:
            raise InvalidInput(f"region {region_id!r} is not in partition {self.key!r}")
        pos = int(np.flatnonzero(self.region_ids == region_id)[0])
        adj = self.adjacency()
        cols = adj.indices[adj.indptr[pos]:adj.indptr[pos + 1]]
        return [str(x) for x in self.region_ids[np.sort(cols)]]

    # ------------------------------------------------------------------ values -> map
    def join(self, values: pd.DataFrame | pd.Series | dict[Any, Any]) -> gpd.GeoDataFrame:
        """Join a per-region table onto the region geometries.

        Parameters
        ----------
        values : DataFrame or Series indexed by region id (or a DataFrame with a
            ``region_id`` column), or a dict ``{region_id: value}``.

        Returns
        -------
        GeoDataFrame
            Every region of the partition (regions without a value get NaN), with its
            geometry (hexagons for H3 cells), ready for ``.plot()`` / ``.explore()``.
        """
        if isinstance(values, dict):
            values = pd.Series(values, name="value")
        if isinstance(values, pd.Series):
            values = values.to_frame(values.name if values.name is not None else "value")
        if "region_id" in values.columns:
            values = values.set_index("region_id")
        index = values.index.astype(str)
        unknown = ~index.isin(self.region_ids)
        if unknown.any():
            raise InvalidInput(
                f"{int(unknown.sum())} ids are not regions of {self.key!r} (first: "
                f"{list(index[unknown][:3])}); was the table made on another partition?"
            )
        if index.duplicated().any():
            raise InvalidInput(
                f"duplicate region ids {list(index[index.duplicated()][:3])} in the table"
            )
        table = values.set_axis(index, axis=0)
        joined = self.regions.join(table, how="left")
        joined.attrs["partition_version"] = self.version
        return joined

    # ------------------------------------------------------------------ persistence
    def to_file(self, path: str) -> None:
        """Save as GeoParquet with the kind, name, resolution and version in its metadata.

        The file is written to a temporary name and moved into place, so a crash
        never leaves a half-written partition.
        """
        from spatialdp.geo._io import write_partition

        write_partition(self, path)

    @classmethod
    def read_file(cls, path: str, *, expected_version: str | None = None) -> Partition:
        """Load a partition saved by :meth:`to_file`, checking its content hash.

        Raises
        ------
        PartitionMismatch
            If the stored version does not match the content, or ``expected_version``
            is given and differs.
        """
        from spatialdp.geo._io import read_partition

        part = read_partition(path)
        if expected_version is not None:
            part.require_version(expected_version, what=f"the caller (expected {path})")
        return part
