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

from spatialdp._validation import check_integer, check_resolution, check_text
from spatialdp.exceptions import InvalidInput, PartitionMismatch
from spatialdp.geo import _assign, _cover, h3cells
from spatialdp.geo._assign import UnassignedPointsWarning
from spatialdp.geo._checks import (
    LONLAT_EPSG,
    check_polygons,
    geometry_array,
    region_ids_of,
    short_repr,
)
from spatialdp.geo._grid import GridIndex
from spatialdp.geo._h3_methods import H3Methods
from spatialdp.geo._h3grid import MIN_POINTS as H3_GRID_MIN_POINTS
from spatialdp.geo._h3grid import H3PixelIndex
from spatialdp.geo._neighbours import adjacency
from spatialdp.geo._tables import join_values
from spatialdp.geo.results import Assignment, CellIncidence

__all__ = [  # results re-exported from here
    "MAX_PARTITION_CELLS",
    "Assignment",
    "CellIncidence",
    "Partition",
    "UnassignedPointsWarning",
]

#: Most cells :meth:`Partition.from_h3_cover` builds unless told otherwise. A
#: partition holds a hexagon polygon per cell, measured at about 0.9 KB a cell,
#: so two million cells take about 1.8 GB.
MAX_PARTITION_CELLS = 2_000_000

PartitionKind = Literal["h3", "polygons"]


class Partition(H3Methods):
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
        # Lookup structures, each built on first use and kept (never pickled).
        self._tree: shapely.STRtree | None = None
        self._geoms: NDArray[np.object_] | None = None
        self._grid: GridIndex | H3PixelIndex | None = None
        self._grid_tried = False
        self._cell_index: pd.Index | None = None
        self._points_seen = 0
        self.version = self._content_hash()

    _CACHES = ("_tree", "_geoms", "_grid", "_cell_index")

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(dict.fromkeys(self._CACHES))
        state.update(_grid_tried=False, _points_seen=0)
        return state

    # ------------------------------------------------------------------ building
    @classmethod
    def from_h3_cells(cls, cells: ArrayLike, *, name: str = "h3") -> Partition:
        """Build a partition whose regions are the given H3 cells (one resolution).

        Parameters
        ----------
        cells : array-like of str or int
            H3 cells, all at one resolution, no repeats.
        name : str
            A human label (not part of the version).

        Returns
        -------
        Partition

        Raises
        ------
        InvalidCells
            Invalid ids, no cells, or a mix of resolutions.
        InvalidInput
            Duplicate cells.
        """
        name = check_text(name, "name", allow_empty=True)
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
            h3cells._to_str(unique).astype(object),
            _cover.cell_polygons_of(unique),
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
        max_cells: int = MAX_PARTITION_CELLS,
    ) -> Partition:
        """Build the partition of H3 cells at ``resolution`` that cover ``area``.

        Polygons are read as GeoPandas draws them, in lon/lat degrees within
        ``[-180, 180] x [-90, 90]``: polar caps (``box(-180, 80, 180, 90)``) and
        bands round the globe are covered as drawn, in every containment mode.
        A shape that crosses the antimeridian must be given split into parts on
        either side of +-180 (a MultiPolygon, as GeoJSON RFC 7946 asks); its cells
        then wrap round the antimeridian. Unsplit, its ring jumps more than 180
        degrees of longitude, which GeoPandas reads the long way round and H3 as
        crossing the antimeridian: such shapes are refused rather than guessed.

        Parameters
        ----------
        area : GeoDataFrame or GeoSeries of (Multi)Polygons in EPSG:4326
        resolution : int
            H3 resolution, 0 to 15.
        containment : {"center", "overlap", "full"}
            ``overlap`` makes the cells cover the whole area (no point of it left
            unassigned); ``center`` is h3's default polyfill; ``full`` keeps the
            cells wholly inside.
        name : str
            A human label (not part of the version).
        max_cells : int
            Refuse, before building anything, a cover estimated (area over the mean
            cell area, plus border length over the mean edge length) to hold more
            cells than this; default :data:`MAX_PARTITION_CELLS` (about 1.8 GB).

        Returns
        -------
        Partition

        Raises
        ------
        CRSError
            No CRS, a CRS other than lon/lat, or coordinates outside lon/lat degrees.
        InvalidInput
            Bad arguments or geometries, an edge across the antimeridian, a cover
            above ``max_cells``, or a cover with no cell.
        """
        resolution = check_resolution(resolution)
        mode = _cover.check_containment(containment)
        limit = check_integer(max_cells, "max_cells", low=1, fix="pass a positive whole number")
        geoms = geometry_array(area, "area", "the area to cover")
        if geoms.size == 0:
            raise InvalidInput("the area to cover has no rows; give at least one polygon")
        check_polygons(geoms, "the area to cover")
        _cover.check_size(geoms, resolution, limit, "for the area to cover")
        _, cells = _cover.cell_lists(geoms, resolution, mode)
        if cells.size == 0:
            advice = ("use a finer resolution" if mode == "overlap"
                      else "use a finer resolution or containment='overlap'")
            raise InvalidInput(
                f"the area covers no H3 cell at resolution {resolution} with "
                f"containment={mode!r}; {advice}"
            )
        return cls.from_h3_cells(np.unique(cells), name=name)

    @classmethod
    def from_geodataframe(
        cls, frame: gpd.GeoDataFrame, id_column: str, *, name: str = "regions"
    ) -> Partition:
        """Build a partition of administrative (or any) polygons with an id column.

        Parameters
        ----------
        frame : GeoDataFrame of (Multi)Polygons in EPSG:4326
        id_column : str
            Column of unique region ids (turned into strings).
        name : str
            A human label (not part of the version).

        Returns
        -------
        Partition

        Raises
        ------
        CRSError
            No CRS, not EPSG:4326, or coordinates outside lon/lat degrees (a projected
            layer labelled EPSG:4326).
        InvalidInput
            No rows, missing id column, missing or duplicate ids, empty, invalid or
            non-polygonal geometry.
        """
        name = check_text(name, "name", allow_empty=True)
        if not isinstance(frame, gpd.GeoDataFrame):
            raise InvalidInput(f"frame={short_repr(frame)} is a {type(frame).__name__}, not "
                               "a GeoDataFrame; pass a geopandas.GeoDataFrame in EPSG:4326")
        geoms = geometry_array(frame, "frame", "the region GeoDataFrame")
        if geoms.size == 0:
            raise InvalidInput("the region GeoDataFrame has no rows; a partition needs "
                               "at least one region")
        ids = region_ids_of(frame, id_column)
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
        ids: pd.Index = self.regions.index
        return ids

    def require_version(self, version: str, what: str = "this result") -> None:
        """Refuse to use ``what`` if it was made on another partition version.

        Raises
        ------
        PartitionMismatch
            If ``version`` is another partition's.
        InvalidInput
            If ``version`` is not a string.
        """
        if not isinstance(version, str):
            raise InvalidInput(f"version={short_repr(version)} is a {type(version).__name__}, "
                               "not a partition version; pass the result's partition_version")
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
        """Describe the partition in a few lines, for the CLI and notebooks."""
        area_km2 = self.regions.to_crs("ESRI:102003" if self._in_conus() else 6933).area / 1e6
        lines = [
            repr(self),
            f"  total area      {area_km2.sum():,.0f} km^2",
            f"  region area     min {area_km2.min():,.1f}, median {area_km2.median():,.1f}, "
            f"max {area_km2.max():,.1f} km^2",
            f"  bounds (lon/lat) {np.round(self.regions.total_bounds, 3).tolist()}",
        ]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from spatialdp._results import summary_html

        ids = self.region_ids
        shown = ", ".join(map(str, ids[:8])) + (", ..." if len(ids) > 8 else "")
        return summary_html("Partition", f"{self.summary()}\n  regions         {shown}")

    def _in_conus(self) -> bool:
        west, south, east, north = self.regions.total_bounds
        return bool(west > -130 and east < -60 and south > 20 and north < 55)

    # ------------------------------------------------------------------ points
    def assign(
        self,
        points: gpd.GeoDataFrame | gpd.GeoSeries | None = None,
        *,
        lon: ArrayLike | None = None,
        lat: ArrayLike | None = None,
    ) -> Assignment:
        """Find the region of every point, vectorised; points in no region are reported.

        Give either a point GeoDataFrame/GeoSeries in EPSG:4326 or ``lon`` and ``lat``.
        H3 partitions index all points at once (h3ronpy) and look the cells up in a
        hash table; once a partition has assigned 2 million points it builds, once, a
        raster whose pure pixels (wholly inside one cell) answer most points by
        arithmetic, with exactly H3's answer. Polygon partitions test points exactly
        with prepared geometries;
        once a partition has assigned 50,000 points (plus 2 per polygon vertex), it
        builds a grid index, once, and keeps it: the grid labels the points away
        from borders by arithmetic and leaves only those near a border to the exact
        test. A point on a border (or in an overlap)
        of two polygons goes to the region that comes first in partition order, as
        the first match of ``geopandas.sjoin(..., predicate="intersects")`` would.

        Parameters
        ----------
        points : GeoDataFrame or GeoSeries of Points in EPSG:4326, optional
        lon, lat : array-like of float, optional
            Longitudes (x) and latitudes (y) in degrees, instead of ``points``.

        Returns
        -------
        Assignment

        Raises
        ------
        CRSError, InvalidInput
            Bad CRS, non-point geometries, NaN/inf or out-of-range coordinates.

        Warns
        -----
        UnassignedPointsWarning
            When a batch of 100 points or more has more than half of them in no
            region: lon and lat are probably swapped, or the points in another CRS.
        """
        lon_arr, lat_arr = _assign.read_points(points, lon, lat)
        positions = _assign.positions_of(self, lon_arr, lat_arr)
        _assign.warn_if_mostly_unassigned(self, positions, lon_arr, lat_arr)
        return Assignment(positions, self.region_ids, self.version)

    def _lookup_cells(self, cells: NDArray[np.uint64]) -> NDArray[np.int64]:
        return _assign.lookup_cells(self.cells, cells)

    def _cell_positions(self, cells: NDArray[np.uint64]) -> NDArray[np.int64]:
        """Return the position of each cell among the partition's cells, -1 if absent."""
        if self._cell_index is None:
            self._cell_index = pd.Index(self.cells)
        lookup: Any = self._cell_index.get_indexer  # takes arrays too (not in the stubs)
        return np.asarray(lookup(cells), dtype=np.int64)

    @property
    def tree(self) -> shapely.STRtree:
        """STRtree over the region geometries (built once)."""
        if self._tree is None:
            self._tree = shapely.STRtree(self._prepared_geometries())
        return self._tree

    def _prepared_geometries(self) -> NDArray[np.object_]:
        """Return the region geometries as an object array, prepared (built once)."""
        if self._geoms is None:
            geoms = np.asarray(self.regions.geometry.values, dtype=object)
            shapely.prepare(geoms)
            self._geoms = geoms
        return self._geoms

    def _grid_index(self) -> GridIndex | H3PixelIndex | None:
        """Return the grid index (built once; None if not worth it).

        Polygons get a :class:`GridIndex`, H3 cells an :class:`H3PixelIndex`.
        """
        if not self._grid_tried:
            if self._cells is not None:
                self._grid = H3PixelIndex.build(self._cells, int(self.resolution or 0))
            else:
                self._grid = GridIndex.build(self._prepared_geometries(), self.tree)
            self._grid_tried = True
        return self._grid

    def _grid_min_points(self) -> int:
        """Return how many points this partition assigns before it builds its grid index."""
        if self._cells is not None:
            return H3_GRID_MIN_POINTS
        vertices = int(shapely.get_num_coordinates(self._prepared_geometries()).sum())
        return _assign.GRID_MIN_POINTS + _assign.GRID_POINTS_PER_VERTEX * vertices

    # ------------------------------------------------------------------ neighbours
    def adjacency(self) -> sparse.csr_array:
        """Return the symmetric region adjacency as a boolean CSR matrix (no self loops).

        H3 cells are neighbours when they share an edge (``grid_disk`` with k=1);
        polygons when they share a stretch of border (not just a corner point).
        """
        return adjacency(self)

    def neighbours(self, region_id: Any) -> list[str]:
        """Return the ids of the regions adjacent to ``region_id``.

        Raises
        ------
        InvalidInput
            If ``region_id`` is not a region of the partition.
        """
        try:
            present = region_id in self.region_ids
        except TypeError:
            present = False
        if not present:
            raise InvalidInput(
                f"region {short_repr(region_id)} is not in partition {self.key!r}; its ids "
                f"are strings such as {[str(x) for x in self.region_ids[:3]]}"
            )
        pos = int(np.flatnonzero(self.region_ids == region_id)[0])
        adj = self.adjacency()
        cols = adj.indices[adj.indptr[pos]:adj.indptr[pos + 1]]
        return [str(x) for x in self.region_ids[np.sort(cols)]]

    # ------------------------------------------------------------------ values -> map
    def join(self, values: pd.DataFrame | pd.Series | dict[Any, Any]) -> gpd.GeoDataFrame:
        """Join a per-region table onto the region geometries.

        Parameters
        ----------
        values : DataFrame, Series or dict
            Indexed by region id (or a DataFrame with a ``region_id`` column), or a
            dict ``{region_id: value}``.

        Returns
        -------
        GeoDataFrame
            Every region of the partition (regions without a value get NaN), with its
            geometry (hexagons for H3 cells), ready for ``.plot()`` / ``.explore()``.

        Raises
        ------
        InvalidInput
            Another type, ids that are not regions, repeated ids, or a ``geometry`` column.
        """
        return join_values(self, values)

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
        InvalidInput
            A path of the wrong type, or a file that is not a spatialdp partition.
        PartitionMismatch
            If the stored version does not match the content, or ``expected_version``
            is given and differs.
        """
        from spatialdp.geo._io import read_partition

        part = read_partition(path)
        if expected_version is not None:
            part.require_version(expected_version, what=f"the caller (expected {path})")
        return part

