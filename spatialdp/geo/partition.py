"""The fixed, versioned geography every other step of spatialdp is keyed by.

A :class:`Partition` is a fixed set of regions, either H3 cells at one
resolution or the polygons of a GeoDataFrame (administrative regions), each
with a stable id and a fixed position ``0..n_regions-1``. Its
:attr:`~Partition.version` is a content hash of the ids and the cells or
geometries: results carry it, and results of two versions are never mixed
(:class:`~spatialdp.exceptions.PartitionMismatch`).

Points to regions (:meth:`Partition.assign`). H3 partitions index all points at
once (h3ronpy) and find the cells in a direct-address table of the partition's
cells (:class:`spatialdp.geo._h3grid.H3CellTable`); once they have seen
:data:`spatialdp.geo._h3lattice.MIN_POINTS_PER_CELL` points per cell they build,
once, a table keyed by H3's own (face, hexagon) arithmetic
(:mod:`spatialdp.geo._h3lattice`), and after
:data:`spatialdp.geo._h3grid.MIN_POINTS` points a raster of pure pixels
(:mod:`spatialdp.geo._h3grid`); both answer most points by arithmetic, exactly as
H3 would, and send only the others on. Polygon partitions test small
batches exactly (STRtree bounding boxes, then prepared geometries); once a
partition has seen :data:`GRID_MIN_POINTS` points (more for intricate polygons)
it builds a grid index (:mod:`spatialdp.geo._grid`), coarse at first and finer as
more points arrive (a documented cost model), that labels most points by
arithmetic and sends only points near a border to the exact test. A
batch in which most points fall outside every region is almost always a
mistake (lon and lat swapped, points in another CRS or another country), so it
raises :class:`~spatialdp.exceptions.UnassignedPointsWarning`.

A partition is saved as GeoParquet with its kind, name, resolution and version
in the file's metadata (:meth:`Partition.to_file`), and read back only if its
content still hashes to that version (:meth:`Partition.read_file`).
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from numpy.typing import ArrayLike, NDArray

from spatialdp._atomic import write_atomically
from spatialdp._validation import (
    as_array,
    check_flag,
    check_ids,
    check_instance,
    check_integer,
    check_path,
    check_resolution,
    check_text,
    short_repr,
)
from spatialdp.exceptions import (
    InvalidInput,
    PartitionMismatch,
    SpatialDPError,
    UnassignedPointsWarning,
)
from spatialdp.geo import _grid, h3cells
from spatialdp.geo._grid import BoxBins, GridIndex, exact_positions
from spatialdp.geo._h3grid import MIN_POINTS as H3_GRID_MIN_POINTS
from spatialdp.geo._h3grid import UNKNOWN, H3CellTable, H3PixelIndex
from spatialdp.geo._h3lattice import FIRST_BATCH_PER_CELL as LATTICE_FIRST_BATCH_PER_CELL
from spatialdp.geo._h3lattice import MIN_POINTS_PER_CELL as LATTICE_MIN_POINTS_PER_CELL
from spatialdp.geo._h3lattice import H3LatticeTable
from spatialdp.geo.lonlat import LONLAT_EPSG, check_polygons, geometry_array, read_points
from spatialdp.geo.results import Assignment, CellIncidence, incidence_matrix, lookup_cells

if TYPE_CHECKING:  # imported where used: scipy.sparse and pyarrow.parquet take about
    from scipy import sparse  # 70 ms to import, which every cold first call would pay

__all__ = [  # results and the warning re-exported from here
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
#: Warn when more than this share of a batch falls in no region...
UNASSIGNED_WARN_SHARE = 0.5
#: ...and the batch holds at least this many points (a few strays prove nothing).
UNASSIGNED_WARN_MIN_POINTS = 100
#: The cost model of the polygon grid index (measured on the 48 states and on 4,600
#: hexagons, 2-core machine). The exact test (all box candidates in one call for up to 64 regions,
#: else bounding boxes filed in bins, then prepared geometries) costs about 0.2-0.5 us
#: a point. A grid of C cells over V border vertices builds in about 0.35 us a vertex
#: plus 0.05 us a cell, its own exact labelling included (4.5 ms for the states at
#: 10,000 cells, 12 ms at 160,000) and labels a point in about 0.05-0.1 us plus the
#: exact test of the points in mixed cells, whose share falls as the grid gets finer.
#: So: a partition builds a first, coarse grid once it has been asked about
#: GRID_MIN_POINTS points in all plus one per GRID_VERTICES_PER_POINT vertices (the
#: vertex part of the build then costs about what the exact test of those points
#: did: a build is never bought before the exact tests have paid for its fixed part;
#: 16,469 points for the states, so a 10^4-device fleet never builds one), with
#: GRID_CELLS_PER_POINT cells per point seen; it builds a finer one each time it has
#: seen GRID_REBUILD_FACTOR times the points its grid was sized for, up to
#: :data:`spatialdp.geo._grid.MAX_GRID_CELLS` cells. The builds form a geometric
#: series: together they cost less than twice the last one, which costs about as
#: much as the exact test of the points seen since the one before.
#: A partition's first call builds no grid, though (its exact test costs about what a
#: competent user's own prepared-shapely code costs, so a cold call is never slower
#: than theirs), unless its batch alone amortises the build: GRID_FIRST_BATCH_POINTS
#: points plus GRID_POINTS_PER_VERTEX per vertex (measured: the cold call with the
#: grid inside matches the exact test at about 100,000 points for the states and
#: 50,000 for 4,600 hexagons), and then with GRID_FIRST_CELLS_PER_POINT cells per
#: point: a cold call is fastest with about one cell per point (measured at 10^5 points:
#: 14 ms for the states against 22 ms for the exact test and 24 ms with 8 cells per point).
GRID_MIN_POINTS = 5_000
GRID_VERTICES_PER_POINT = 1
GRID_CELLS_PER_POINT = 8
GRID_REBUILD_FACTOR = 16
GRID_FIRST_BATCH_POINTS = 50_000
GRID_FIRST_CELLS_PER_POINT = 1
GRID_POINTS_PER_VERTEX = 1
_SWAP_SAMPLE = 10_000
#: Digitised borders of neighbouring regions rarely coincide: within this many
#: degrees they count as shared...
_BORDER_TOLERANCE = 1e-6
#: ...when the shared stretch is longer than this (a corner point is not a border).
_MIN_SHARED_LENGTH = 1e-4
#: Two regions overlap when their intersection covers more than this share of the
#: smaller one's area (in lon/lat degrees squared): digitising noise along a shared
#: border stays far below it, a region drawn over another far above.
OVERLAP_SHARE = 1e-6
#: The key of a partition file's metadata.
_META_KEY = b"spatialdp.partition"

PartitionKind = Literal["h3", "polygons"]


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
        One row per region, index = region id (str), in partition order, EPSG:4326;
        a ``name`` column when the partition was built with ``name_column``.

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
        names: NDArray[np.object_] | None = None,
    ) -> None:
        self.kind: PartitionKind = kind
        self.name = name
        self.resolution = resolution
        self._cells = cells
        labels = {} if names is None else {"name": np.asarray(names, dtype=object)}
        self.regions = gpd.GeoDataFrame(
            {**labels, "geometry": geometry}, index=pd.Index(ids, name="region_id"),
            crs=LONLAT_EPSG
        )
        # Lookup structures, each built on first use and kept (never pickled).
        self._tree: shapely.STRtree | None = None
        # The region geometries as an object array (each pandas column access builds a
        # new GeoSeries: about 0.25 ms, a tenth of a small cold call); the content hash
        # below fills it, and _prepared_geometries prepares it on first use.
        self._geometry: NDArray[np.object_] | None = None
        self._geoms: NDArray[np.object_] | None = None
        self._grid: GridIndex | H3PixelIndex | None = None
        self._grid_tried = False  # True once no further (finer) grid will be built
        self._grid_cells = 0  # cell budget of the last polygon grid built (0: none yet)
        self._cell_index: H3CellTable | pd.Index | None = None  # cell -> position
        self._lattice: H3LatticeTable | None = None
        self._lattice_tried = False  # True once the lattice table was built (or refused)
        self._bins: BoxBins | Literal[False] | None = None  # False: boxes too large to file
        self._points_seen = 0
        self.version = self._content_hash()

    _CACHES = ("_tree", "_geometry", "_geoms", "_grid", "_cell_index", "_lattice", "_bins")

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(dict.fromkeys(self._CACHES))
        state.update(_grid_tried=False, _lattice_tried=False, _points_seen=0, _grid_cells=0)
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
            h3cells._cell_polygons(unique),
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
        ``[-180, 180] x [-90, 90]`` (a layer in another CRS is reprojected, with a
        :class:`~spatialdp.exceptions.ReprojectedLayerWarning`; float noise within
        1e-9 degrees of the limits is snapped): polar caps (``box(-180, 80, 180, 90)``),
        rings along a pole (Natural Earth's Antarctica) and bands round the globe are
        covered as drawn, in every containment mode.
        A shape that crosses the antimeridian must be given split into parts on
        either side of +-180 (a MultiPolygon, as GeoJSON RFC 7946 asks); its cells
        then wrap round the antimeridian. Unsplit, its ring jumps more than 180
        degrees of longitude, which GeoPandas reads the long way round and H3 as
        crossing the antimeridian: such shapes are refused rather than guessed.

        Parameters
        ----------
        area : GeoDataFrame or GeoSeries of (Multi)Polygons (any CRS: reprojected to EPSG:4326)
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
            No CRS, a CRS that cannot be converted to lon/lat, or coordinates outside
            lon/lat degrees by more than 1e-9 (float noise within it is snapped).
        InvalidInput
            Bad arguments or geometries, an edge across the antimeridian, a cover
            above ``max_cells``, or a cover with no cell.
        """
        resolution = check_resolution(resolution)
        mode = h3cells._check_containment(containment)
        limit = check_integer(max_cells, "max_cells", low=1, fix="pass a positive whole number")
        geoms = geometry_array(area, "area", "the area to cover")
        if geoms.size == 0:
            raise InvalidInput("the area to cover has no rows; give at least one polygon")
        geoms = check_polygons(geoms, "the area to cover")
        h3cells._check_size(geoms, resolution, limit, "for the area to cover")
        _, cells = h3cells._cell_lists(geoms, resolution, mode)
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
        cls,
        frame: gpd.GeoDataFrame,
        id_column: str,
        *,
        name: str = "regions",
        name_column: str | None = None,
    ) -> Partition:
        """Build a partition of administrative (or any) polygons with an id column.

        The layer is taken as it comes: a layer in another CRS is reprojected to
        lon/lat EPSG:4326 (with a :class:`~spatialdp.exceptions.ReprojectedLayerWarning`;
        the CLI reprojects through the same code), float noise within 1e-9 degrees of
        +-180 and +-90 is snapped onto the limit, and an edge along a pole (Natural
        Earth's Antarctica) is accepted. Countries split at the antimeridian come as
        MultiPolygons with parts on either side of +-180.

        Regions must not overlap: two regions whose intersection covers more than
        :data:`OVERLAP_SHARE` of the smaller one's area are refused (a point in both
        would belong to two regions). Regions that only touch are fine; a point
        exactly on a shared border goes to the region that comes first in partition
        order (region ids sorted as strings), see :meth:`assign`.

        Parameters
        ----------
        frame : GeoDataFrame of (Multi)Polygons, in any CRS
        id_column : str
            Column of unique region ids (turned into strings).
        name : str
            A human label of the partition (not part of the version).
        name_column : str, optional
            Column of region names (turned into strings; repeats allowed) kept as
            :attr:`names` and as the ``name`` column of :attr:`regions`, of every
            frame :meth:`join` returns and of regional reports, so that tooltips and
            labels show names, not codes such as ``"-99"``. Not part of the version.

        Returns
        -------
        Partition

        Raises
        ------
        CRSError
            No CRS, a CRS that cannot be converted to lon/lat, or coordinates outside
            lon/lat degrees by more than 1e-9 (a projected layer labelled EPSG:4326).
        InvalidInput
            No rows, a missing id or name column, missing or duplicate ids, missing
            names, empty, invalid or non-polygonal geometry, or overlapping regions.

        Warns
        -----
        ReprojectedLayerWarning
            When ``frame`` was in another CRS than lon/lat and has been reprojected.

        Examples
        --------
        >>> import geopandas as gpd, shapely
        >>> layer = gpd.GeoDataFrame(
        ...     {"code": ["-99", "FRA"], "NAME": ["Kosovo", "France"]},
        ...     geometry=[shapely.box(20, 42, 21.5, 43.2), shapely.box(-5, 42, 8, 51)],
        ...     crs=4326)
        >>> part = Partition.from_geodataframe(layer, "code", name_column="NAME")
        >>> part.names.to_dict()
        {'-99': 'Kosovo', 'FRA': 'France'}
        >>> part.assign(lon=[2.0, 20.5], lat=[48.0, 42.5]).region.tolist()
        ['FRA', '-99']
        """
        name = check_text(name, "name", allow_empty=True)
        check_instance(frame, "frame", gpd.GeoDataFrame,
                       "pass a geopandas.GeoDataFrame of polygons")
        geoms = geometry_array(frame, "frame", "the region GeoDataFrame")
        if geoms.size == 0:
            raise InvalidInput("the region GeoDataFrame has no rows; a partition needs "
                               "at least one region")
        ids = _region_ids(frame, id_column)
        names = None if name_column is None else _region_names(frame, name_column)
        geoms = check_polygons(geoms, "the region GeoDataFrame")
        _refuse_overlaps(ids, geoms)
        order = np.argsort(ids, kind="stable")
        return cls("polygons", ids[order], geoms[order], name=name,
                   names=None if names is None else names[order])

    @classmethod
    def _from_known_layer(cls, frame: gpd.GeoDataFrame, id_column: str, *, name: str,
                          version: str) -> Partition | None:
        """Build the partition of a layer known to pass :meth:`from_geodataframe`'s checks.

        For data spatialdp ships (the 48 states): the validity and overlap checks
        (about 12 ms of a cold first call) are skipped, and the partition is returned
        only if its content hashes to ``version``, the version the full
        :meth:`from_geodataframe` gives the shipped layer (a test checks it). The
        hash covers the ids and the normalised geometries, so a layer that matches it
        holds exactly the regions that passed those checks; any other layer (a data
        folder pointed elsewhere, an edited file) returns None, and the caller builds
        it the checked way.
        """
        ids = _region_ids(frame, id_column)
        geoms = geometry_array(frame, "frame", "the region GeoDataFrame")
        order = np.argsort(ids, kind="stable")
        part = cls("polygons", ids[order], geoms[order], name=name)
        return part if part.version == version else None

    # ------------------------------------------------------------------ identity
    def _content_hash(self) -> str:
        digest = hashlib.sha256()
        digest.update(f"{self.kind}|{self.resolution}|".encode())
        if self._cells is not None:
            digest.update(self._cells.tobytes())
        else:
            digest.update("\x1f".join(self.regions.index).encode())
            for wkb in shapely.to_wkb(shapely.normalize(self._region_geometry())):
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

    @property
    def names(self) -> pd.Series | None:
        """Region names (a ``str`` Series indexed by region id), or None without names.

        Set by :meth:`from_geodataframe` with ``name_column``; kept in files
        (:meth:`to_file`) but not part of the :attr:`version`.
        """
        if "name" not in self.regions.columns:
            return None
        names: pd.Series = self.regions["name"]
        return names

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
        warn: bool = True,
    ) -> Assignment:
        """Find the region of every point, vectorised; points in no region are reported.

        Give either a point GeoDataFrame/GeoSeries (in any CRS: another than EPSG:4326
        is reprojected, with a warning) or ``lon`` and ``lat`` in degrees.
        H3 partitions index all points at once (h3ronpy) and look the cells up in a
        direct-address table; once a partition has assigned 1 point per cell (in
        a first call: a batch of 2 per cell) it builds, once, a table keyed by H3's
        face and hexagon, found by numpy arithmetic, and once it has assigned 2
        million points a raster whose pure pixels (wholly inside one cell) answer
        most points by arithmetic; both give exactly H3's answer and leave only
        near-ties to h3ronpy. Polygon partitions test points
        exactly with prepared geometries; once a partition has assigned 5,000
        points (plus 1 per polygon vertex), a call after its first builds a
        coarse grid index sized to the points seen (the first call only when its
        batch alone pays for it: :data:`GRID_FIRST_BATCH_POINTS`), and a finer
        one each time the partition has seen 16 times more
        (:data:`GRID_REBUILD_FACTOR`): the grid labels the points away from
        borders by arithmetic and leaves only those near a border to the exact
        test. A point exactly on a border shared by two regions (or in the
        overlap, below :data:`OVERLAP_SHARE`, that digitising noise leaves) goes
        to the region that comes first in partition order (ids sorted as
        strings), as the first match of ``geopandas.sjoin(...,
        predicate="intersects")`` would.

        Parameters
        ----------
        points : GeoDataFrame or GeoSeries of Points, optional
        lon, lat : array-like of float, optional
            Longitudes (x) and latitudes (y) in degrees, instead of ``points``.
        warn : bool, default True
            Warn (:class:`~spatialdp.exceptions.UnassignedPointsWarning`) when most
            points of the batch fall in no region; ``False`` for callers that expect
            it, such as rejection sampling over a bounding box.

        Returns
        -------
        Assignment
            ``.region`` is each point's region id as a Series aligned to the index
            of ``points`` (or of ``lon`` when it is a Series).

        Raises
        ------
        CRSError, InvalidInput
            No CRS, non-point geometries, NaN/inf or out-of-range coordinates.

        Warns
        -----
        UnassignedPointsWarning
            When a batch of 100 points or more has more than half of them in no
            region: lon and lat are probably swapped, or the points in another CRS.
        """
        warn = check_flag(warn, "warn")
        lon_arr, lat_arr = read_points(points, lon, lat)
        positions = self._positions(lon_arr, lat_arr)
        if warn:
            self._warn_if_mostly_unassigned(positions, lon_arr, lat_arr)
        return Assignment(positions, self.region_ids, self.version,
                          _input_index(points, lon, lat, positions.size))

    def _positions(self, lon: NDArray[np.float64], lat: NDArray[np.float64]
                   ) -> NDArray[np.int64]:
        """Return the region position of each (checked) point, -1 outside every region."""
        first_call = self._points_seen == 0
        self._points_seen += lon.size
        if self._points_seen >= self._grid_min_points() and (
                not first_call or lon.size >= self._grid_first_batch()):
            self._grid_index(first_call)
        grid = self._grid
        if self._cells is not None:
            return self._h3_positions(grid if isinstance(grid, H3PixelIndex) else None,
                                      self._lattice_table(first_call), lon, lat)
        if isinstance(grid, GridIndex):
            return grid.lookup(lon, lat)
        return self._exact_positions(lon, lat)

    def _exact_positions(self, lon: NDArray[np.float64], lat: NDArray[np.float64]
                         ) -> NDArray[np.int64]:
        """Return each point's region by the exact test alone (no grid).

        Region by region for a few regions; else the bounding boxes filed in bins
        (:class:`~spatialdp.geo._grid.BoxBins`, built once); else (boxes too large to
        file) the STRtree.
        """
        geoms = self._prepared_geometries()
        if len(geoms) > _grid.LOOP_MAX_REGIONS:
            if self._bins is None:
                self._bins = BoxBins.build(geoms) or False
            if self._bins:
                return self._bins.positions(geoms, lon, lat)
            return exact_positions(geoms, self.tree, lon, lat)
        return exact_positions(geoms, None, lon, lat)

    def _h3_positions(self, grid: H3PixelIndex | None, lattice: H3LatticeTable | None,
                      lon: NDArray[np.float64], lat: NDArray[np.float64]) -> NDArray[np.int64]:
        """Positions in an H3 partition: pure pixels, then the face lattices, then H3."""
        resolution = int(self.resolution or 0)
        if grid is not None:
            positions = grid.lookup(lon, lat)
            if lattice is not None:
                ask = np.flatnonzero(positions == UNKNOWN)
                positions[ask] = lattice.lookup(lon[ask], lat[ask])
        elif lattice is not None:
            positions = lattice.lookup(lon, lat)
        else:
            return self._cell_positions(h3cells.latlng_to_cells_unchecked(lat, lon, resolution))
        ask = np.flatnonzero(positions == UNKNOWN)
        if ask.size:
            cells = h3cells.latlng_to_cells_unchecked(lat[ask], lon[ask], resolution)
            positions[ask] = self._cell_positions(cells)
        return positions

    def _warn_if_mostly_unassigned(self, positions: NDArray[np.int64],
                                   lon: NDArray[np.float64], lat: NDArray[np.float64]) -> None:
        """Warn when more than half of a batch of 100+ points fell in no region."""
        n = positions.size
        if n < UNASSIGNED_WARN_MIN_POINTS or (
                np.count_nonzero(positions < 0) <= UNASSIGNED_WARN_SHARE * n):
            return
        outside = np.flatnonzero(positions < 0)
        hint = "are lon and lat swapped (lon is x, lat is y), or the points in another CRS?"
        sample = outside[np.abs(lon[outside]) <= 90.0][:_SWAP_SAMPLE]
        if sample.size:
            placed = int((self._positions(lat[sample], lon[sample]) >= 0).sum())
            if placed > sample.size / 2:
                hint = (f"lon and lat look swapped: swapped, {placed:,} of the {sample.size:,} "
                        "checked fall in a region; pass lon=x (east-west), lat=y (north-south)")
        west, south, east, north = self.regions.total_bounds
        warnings.warn(
            f"{outside.size:,} of {n:,} points ({outside.size / n:.0%}) fall in no region of "
            f"{self.key!r}, whose regions span lon [{west:.2f}, {east:.2f}] and lat "
            f"[{south:.2f}, {north:.2f}]; {hint}",
            UnassignedPointsWarning,
            stacklevel=3,
        )

    def _cell_positions(self, cells: NDArray[np.uint64]) -> NDArray[np.int64]:
        """Return the position of each cell among the partition's cells, -1 if absent."""
        if self._cell_index is None:
            table = H3CellTable.build(self.cells)
            self._cell_index = table if table is not None else pd.Index(self.cells)
        if isinstance(self._cell_index, H3CellTable):
            return self._cell_index.lookup(cells)
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
            geoms = self._region_geometry()
            shapely.prepare(geoms)
            self._geoms = geoms
        return self._geoms

    def _region_geometry(self) -> NDArray[np.object_]:
        """Return the region geometries as an object array (kept; not pickled)."""
        if self._geometry is None:
            self._geometry = np.asarray(self.regions.geometry.values, dtype=object)
        return self._geometry

    def _grid_index(self, first_call: bool = False) -> GridIndex | H3PixelIndex | None:
        """Build the grid index for the points seen so far, and return it (None: none).

        H3 cells get an :class:`H3PixelIndex`, built once. Polygons get a
        :class:`GridIndex` of :data:`GRID_CELLS_PER_POINT` cells per point seen (up to
        :data:`~spatialdp.geo._grid.MAX_GRID_CELLS`); a call after
        :meth:`_grid_min_points` more points builds a finer one. A grid built inside
        a partition's ``first_call`` gets :data:`GRID_FIRST_CELLS_PER_POINT` cells per
        point instead (cheaper to build; the next call refines it).
        """
        if self._grid_tried:
            return self._grid
        if self._cells is not None:
            self._grid = H3PixelIndex.build(self._cells, int(self.resolution or 0))
            self._grid_tried = True
            return self._grid
        per_point = GRID_FIRST_CELLS_PER_POINT if first_call else GRID_CELLS_PER_POINT
        cells = min(per_point * max(self._points_seen, 1), _grid.MAX_GRID_CELLS)
        grid = GridIndex.build(self._prepared_geometries(), self.tree, cells)
        self._grid = grid if grid is not None else self._grid
        self._grid_cells = cells
        self._grid_tried = cells >= _grid.MAX_GRID_CELLS
        return self._grid

    def _lattice_table(self, first_call: bool = False, force: bool = False
                       ) -> H3LatticeTable | None:
        """Build the face-lattice table once the points seen pay for it (or now: ``force``).

        A partition's first call builds it only when its batch alone pays for it.
        """
        per_cell = LATTICE_FIRST_BATCH_PER_CELL if first_call else LATTICE_MIN_POINTS_PER_CELL
        if not self._lattice_tried and (force or self._points_seen >= per_cell * self.n_regions):
            self._lattice = H3LatticeTable.build(self.cells, int(self.resolution or 0))
            self._lattice_tried = True
        return self._lattice

    def _grid_first_batch(self) -> int:
        """Return the smallest first batch for which the first call builds a grid."""
        if self._cells is not None:
            return H3_GRID_MIN_POINTS
        return GRID_FIRST_BATCH_POINTS + GRID_POINTS_PER_VERTEX * self._n_vertices()

    def _n_vertices(self) -> int:
        return int(shapely.get_num_coordinates(self._prepared_geometries()).sum())

    def _grid_min_points(self) -> int:
        """Return how many points in all this partition assigns before its next grid build."""
        if self._grid_tried:
            return np.iinfo(np.int64).max
        if self._cells is not None:
            return H3_GRID_MIN_POINTS
        if self._grid_cells:
            return GRID_REBUILD_FACTOR * self._grid_cells // GRID_CELLS_PER_POINT
        return GRID_MIN_POINTS + self._n_vertices() // GRID_VERTICES_PER_POINT

    # ------------------------------------------------------------------ neighbours
    def adjacency(self) -> sparse.csr_array:
        """Return the symmetric region adjacency as a boolean CSR matrix (no self loops).

        H3 cells are neighbours when they share an edge (``grid_disk`` with k=1);
        polygons when they share a stretch of border (not just a corner point).
        """
        from scipy import sparse  # lazy: see the imports

        if self._cells is not None:
            own = self._cells
            offsets, disk = h3cells._grid_disk(own, 1)
            row = np.repeat(np.arange(own.size), np.diff(offsets))
            col = lookup_cells(own, disk)
        else:
            row, col = _shared_borders(self.regions.geometry.values, self.tree)
        keep = (col >= 0) & (row != col)
        n = self.n_regions
        adj = sparse.csr_array(
            (np.ones(int(keep.sum()), dtype=bool), (row[keep], col[keep])), shape=(n, n)
        )
        return ((adj + adj.T) > 0).astype(bool)

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
            geometry (hexagons for H3 cells) and, when the partition has
            :attr:`names`, their ``name`` column (unless the table brings its own),
            ready for ``.plot()`` / ``.explore()``.

        Raises
        ------
        InvalidInput
            Another type, ids that are not regions, repeated ids, or a ``geometry`` column.
        """
        if isinstance(values, dict):
            values = pd.Series(values, name="value", dtype=None if values else object)
        if isinstance(values, pd.Series):
            values = values.to_frame(values.name if values.name is not None else "value")
        if not isinstance(values, pd.DataFrame):
            raise InvalidInput(
                f"values={short_repr(values)} is a {type(values).__name__}; pass a DataFrame "
                "or Series indexed by region id, or a dict {region_id: value}")
        if "region_id" in values.columns:
            values = values.set_index("region_id")
        if isinstance(values.index, pd.MultiIndex):
            raise InvalidInput("values has a MultiIndex; index it by region id alone")
        if "geometry" in values.columns:
            raise InvalidInput("values has a 'geometry' column, which would hide the region "
                               "geometries; rename or drop it")
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
        regions = self.regions.drop(columns=[c for c in table.columns
                                             if c in self.regions.columns])
        joined = regions.join(table, how="left")
        joined.attrs["partition_version"] = self.version
        return joined

    # ------------------------------------------------------------------ H3 only
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
        queries : GeoDataFrame or GeoSeries of (Multi)Polygons
            Read as in :meth:`from_h3_cover` (polar caps work; antimeridian shapes split;
            another CRS is reprojected, with a warning).
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
        mode = h3cells._check_containment(containment)
        limit = check_integer(max_cells, "max_cells", low=1, fix="pass a positive whole number")
        geoms = geometry_array(queries, "queries", "the query polygons")
        geoms = check_polygons(geoms, "the query polygons")
        resolution = int(self.resolution or 0)
        h3cells._check_size(geoms, resolution, limit, "for the query polygons")
        offsets, cells = h3cells._cell_lists(geoms, resolution, mode)
        matrix, outside = incidence_matrix(offsets, lookup_cells(own, cells), own.size)
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
        parents = h3cells.cell_parents_unchecked(own, resolution)
        unique, inverse = np.unique(parents, return_inverse=True)
        coarse = Partition.from_h3_cells(unique, name=f"{self.name}:r{resolution}")
        return coarse, inverse.astype(np.int64)

    # ------------------------------------------------------------------ persistence
    def to_file(self, path: str) -> None:
        """Save as GeoParquet with the kind, name, resolution and version in its metadata.

        The file is written to a temporary name and moved into place, so a crash
        never leaves a half-written partition.
        """
        target = _check_path(path)
        if target.is_dir():
            raise InvalidInput(f"path={str(path)!r} is a folder; name the partition file to "
                               "write, e.g. folder / 'partition.parquet'")
        if not target.parent.is_dir():
            raise InvalidInput(f"path={str(path)!r} is in a folder that does not exist; create "
                               f"{str(target.parent)!r} first")
        frame = self.regions.reset_index()
        meta = {"kind": self.kind, "name": self.name, "resolution": self.resolution,
                "version": self.version, "format": 1}

        def write(tmp: str) -> None:
            import pyarrow.parquet as pq  # lazy: see the imports

            frame.to_parquet(tmp, index=False)
            table = pq.read_table(tmp)
            merged = {**(table.schema.metadata or {}), _META_KEY: json.dumps(meta).encode()}
            pq.write_table(table.replace_schema_metadata(merged), tmp)

        write_atomically(target, write)

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
        part = _read_partition(path)
        if expected_version is not None:
            part.require_version(expected_version, what=f"the caller (expected {path})")
        return part


def _shared_borders(geoms: NDArray[np.object_], tree: shapely.STRtree
                    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Return the pairs (left < right) of regions that share a stretch of border."""
    left, right = tree.query(geoms, predicate="dwithin", distance=_BORDER_TOLERANCE)
    pairs = left < right
    left, right = left[pairs], right[pairs]
    shared = shapely.intersection(
        shapely.buffer(shapely.boundary(geoms[left]), _BORDER_TOLERANCE),
        shapely.boundary(geoms[right]),
    )
    long_enough = shapely.length(shared) > _MIN_SHARED_LENGTH
    return left[long_enough].astype(np.int64), right[long_enough].astype(np.int64)


def _input_index(points: Any, lon: Any, lat: Any, n: int) -> pd.Index:
    """Return the index of the input points: the frame's, a ``lon``/``lat`` Series', or 0..n-1."""
    for given in (points, lon, lat):
        if isinstance(given, (pd.Series, pd.DataFrame)) and len(given.index) == n:
            index: pd.Index = given.index
            return index
    return pd.RangeIndex(n)


def _frame_column(frame: gpd.GeoDataFrame, column: Any, what: str) -> pd.Series:
    """Return ``frame[column]``, refusing a column that is missing or repeated.

    Raises
    ------
    InvalidInput
        Naming ``what`` (``id_column``, ``name_column``) and the columns there are.
    """
    try:
        present = column in frame.columns
    except TypeError:
        present = False
    if not present:
        raise InvalidInput(
            f"{what} {short_repr(column)} is not a column; columns are "
            f"{list(frame.columns)}"
        )
    values = frame[column]
    if isinstance(values, pd.DataFrame):
        raise InvalidInput(f"{what} {column!r} names {values.shape[1]} columns; "
                           "rename the repeats so that it names one")
    return values


def _region_ids(frame: gpd.GeoDataFrame, id_column: Any) -> NDArray[np.object_]:
    """Return the region ids of ``frame[id_column]`` as strings: present and unique.

    Raises
    ------
    InvalidInput
        A column that is missing or repeated, missing ids, or ids repeated once
        turned into strings.
    """
    column = _frame_column(frame, id_column, "id_column")
    check_ids(column, f"id_column {id_column!r}", unique=False)  # no missing ids
    ids = column.astype(str).to_numpy(dtype=object)
    duplicated = pd.Index(ids).duplicated()
    if duplicated.any():
        raise InvalidInput(
            f"duplicate region ids {sorted(set(ids[duplicated]))[:5]} in column "
            f"{id_column!r}; each region needs a unique id (dissolve the duplicates "
            "with frame.dissolve(by=id_column))"
        )
    return np.asarray(ids, dtype=object)


def _region_names(frame: gpd.GeoDataFrame, name_column: Any) -> NDArray[np.object_]:
    """Return the region names of ``frame[name_column]`` as strings (repeats allowed).

    Raises
    ------
    InvalidInput
        A column that is missing or repeated, or missing names.
    """
    column = _frame_column(frame, name_column, "name_column")
    missing = column.isna().to_numpy()
    if missing.any():
        raise InvalidInput(
            f"name_column {name_column!r} has {int(missing.sum())} missing names (first "
            f"at row {int(np.flatnonzero(missing)[0])}); fill them, e.g. with "
            "frame[name_column].fillna(frame[id_column])"
        )
    return np.asarray(column.astype(str).to_numpy(dtype=object), dtype=object)


def _refuse_overlaps(ids: NDArray[np.object_], geoms: NDArray[np.object_]) -> None:
    """Refuse regions whose pairwise overlap exceeds :data:`OVERLAP_SHARE` of the smaller.

    GEOS's coverage validator (``shapely.coverage_invalid_edges``, one pass) clears
    the regions whose every edge is matched exactly by a neighbour's or lies on the
    outline: they overlap nothing. Only the others (overlaps, nested or repeated
    regions, but also neighbours whose shared borders were digitised with different
    vertices) are intersected with the regions they touch (an STRtree query), and
    their shared area is measured.

    Raises
    ------
    InvalidInput
        Naming the two regions that overlap most, the share of the smaller one's area
        that they share, how many pairs overlap, and the fix.
    """
    if geoms.size < 2:
        return
    suspect = np.arange(geoms.size)
    if hasattr(shapely, "coverage_invalid_edges"):  # shapely >= 2.1 with GEOS >= 3.12
        suspect = np.flatnonzero(~shapely.is_empty(shapely.coverage_invalid_edges(geoms)))
    if suspect.size == 0:
        return
    hits, right = shapely.STRtree(geoms).query(geoms[suspect], predicate="intersects")
    left = suspect[hits]
    keep = left != right
    pairs = np.unique(np.sort(np.column_stack([left[keep], right[keep]]), axis=1), axis=0)
    left, right = pairs[:, 0], pairs[:, 1]
    shared = shapely.area(shapely.intersection(geoms[left], geoms[right]))
    smaller = np.minimum(shapely.area(geoms[left]), shapely.area(geoms[right]))
    share = np.divide(shared, smaller, out=np.zeros_like(shared), where=smaller > 0)
    bad = np.flatnonzero(share > OVERLAP_SHARE)
    if bad.size:
        first = int(bad[np.argmax(share[bad])])
        a, b = str(ids[left[first]]), str(ids[right[first]])
        raise InvalidInput(
            f"the region GeoDataFrame: regions {a!r} and {b!r} overlap, sharing "
            f"{share[first]:.3g} of the smaller one's area ({bad.size} overlapping pairs "
            f"in all; up to {OVERLAP_SHARE:g} is taken for digitising noise). A partition's "
            "regions must not overlap, or a point would belong to two of them: repair the "
            "layer (e.g. subtract one region from the other with .difference(), or merge "
            "them with .dissolve()), or drop one of the two"
        )


def _check_path(path: Any) -> Path:
    target = check_path(path, "path", "pass a str or pathlib.Path", kind="file path")
    if not os.fspath(path):
        raise InvalidInput("path='' is empty; pass the name of a .parquet file")
    return target


def _read_partition(path: str | os.PathLike[str]) -> Partition:
    """Read a partition file and check that its content still hashes to its version."""
    import pyarrow as pa  # lazy: see the imports
    import pyarrow.parquet as pq

    source = _check_path(path)
    fix = "build one with Partition.from_geodataframe(...) and save it with .to_file()"
    if not source.is_file():
        raise InvalidInput(f"path={str(path)!r} is not a file (missing or a folder); {fix}")
    try:
        schema_meta = pq.read_schema(path).metadata or {}
    except (pa.ArrowException, OSError, ValueError) as err:  # not Parquet, a damaged footer
        raise InvalidInput(f"{path} is not a Parquet file or is damaged ({err}); {fix}"
                           ) from None
    if _META_KEY not in schema_meta:
        raise InvalidInput(
            f"{path} is not a spatialdp partition file (no {_META_KEY.decode()!r} metadata); "
            f"{fix}"
        )
    try:
        meta = json.loads(schema_meta[_META_KEY])
        kind, name, version = meta["kind"], meta["name"], meta["version"]
    except (ValueError, TypeError, KeyError):
        raise InvalidInput(f"{path} has unreadable spatialdp metadata; rebuild the file from "
                           "source and save it with .to_file()") from None
    try:
        frame = gpd.read_parquet(path)
        if "region_id" not in frame.columns or kind not in ("h3", "polygons"):
            raise InvalidInput(f"{path} has no region_id column or an unknown kind {kind!r}; "
                               "rebuild the file from source and save it with .to_file()")
        if kind == "h3":
            part = Partition.from_h3_cells(frame["region_id"].to_numpy(), name=name)
        else:
            part = Partition.from_geodataframe(
                frame, "region_id", name=name,
                name_column="name" if "name" in frame.columns else None)
    except SpatialDPError:
        raise
    except Exception as err:  # Arrow, Parquet (OSError), GEOS and H3 errors of a damaged file
        raise InvalidInput(
            f"{path} is damaged and cannot be decoded ({type(err).__name__}: "
            f"{short_repr(str(err))}); the file was truncated, edited or corrupted: restore it "
            "or rebuild it from source and save it with .to_file()") from err
    if part.version != version:
        raise PartitionMismatch(
            f"{path} claims partition version {version!r} but its content hashes "
            f"to {part.version!r}; the file was edited or corrupted: rebuild it from source"
        )
    return part
