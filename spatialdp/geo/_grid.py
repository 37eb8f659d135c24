"""Exact point-in-polygon for large batches: a regular lon/lat grid over the regions.

A regular grid (up to :data:`MAX_GRID_CELLS` cells, sized so that the cells
crossed by borders cover about :data:`MIXED_SHARE` of it) is laid over the
partition's bounding box. Every cell that a region border passes through (or
comes within :data:`EDGE_PAD` degrees of) is *mixed*; the others are *pure*: a
border-free cell lies wholly inside or wholly outside each region, and so does
every cell joined to it through border-free cells. The pure cells are
therefore labelled by connected components (numpy run-based union-find, :func:`_components`), one
exact test of a cell centre per component, and keep the region they lie in
(the first in partition order where regions overlap) or -1.

A point is then labelled by arithmetic alone (its cell's label) unless its
cell is mixed; only those points (2 % of uniform points and 9 % of a
synthetic fleet for the 48 states, on a 2028 x 857 grid) are tested exactly
with prepared geometries (:func:`shapely.intersects_xy`) against the cell's
few candidate regions: those whose border crosses the cell, and any that
contain the whole cell. The answer is the one the exact test gives everywhere,
borders and holes included; the grid only decides which points need the test.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import shapely
from numpy.typing import NDArray

__all__ = ["EDGE_PAD", "MAX_GRID_CELLS", "MAX_MIXED_SHARE", "BoxBins", "GridIndex",
           "exact_positions", "first_hits"]

#: Cells are sized so that the band of mixed cells along the borders covers about
#: this share of the bounding box...
MIXED_SHARE = 0.02
#: ...with at most this many cells (4 bytes each) and at least this many.
MAX_GRID_CELLS = 1 << 22
MIN_GRID_CELLS = 1 << 10
#: The band is about 1.8 cells wide along each border, which the summed ring length
#: counts twice where two regions share it.
_BAND_CELLS = 0.9
#: No grid when its band is estimated to cover more than this share of the cells:
#: borders are then too dense for it, and the exact test alone does as well.
MAX_MIXED_SHARE = 0.75
#: A border within this many degrees of a cell makes it mixed: far more than the
#: rounding error of a point's cell index (about 1e-13 degrees), far less than a cell.
EDGE_PAD = 1e-9
_MIN_CELL_DEGREES = 1000 * EDGE_PAD
#: Up to this many regions the exact test lists every (region, point) pair whose
#: bounding box may hold the point (:func:`_exact_few_regions`: sorted points and
#: one range per region and strip, about 1 ns a point per region); above it,
#: :class:`BoxBins` or STRtree candidates.
LOOP_MAX_REGIONS = 64
#: Strips of longitude the few-regions test sorts its points into, and bands of
#: latitude within a strip (64 x 1024 keys fit 16 bits: one radix sort).
STRIPS = 64
_BANDS = 1024
#: Points looked up per block.
LOOKUP_BLOCK = 1 << 16
#: Most (region, point) pairs the few-regions exact test lists at once (about 50
#: bytes each in all its arrays).
MAX_PAIRS = 1 << 18
#: :class:`BoxBins` makes its bins this many times narrower than the median region box
#: (a box then covers about 3 x 3 bins, and a bin holds few boxes)...
BIN_SIDE_PER_BOX = 2
#: ...with at most this many bins per region (and :data:`MAX_BINS` in all)...
BINS_PER_REGION = 16
MAX_BINS = 1 << 20
#: ...and gives up (the STRtree path then answers) when the regions' bounding boxes
#: cover more than this many bins per region on average (huge, overlapping boxes).
MAX_BINS_PER_BOX = 64


def first_hits(owner: NDArray[np.int64], region: NDArray[np.int64],
               hit: NDArray[np.bool_], size: int) -> NDArray[np.int64]:
    """Return, for each of ``size`` owners, the first region whose test ``hit``, else -1.

    ``owner`` must be sorted, and ``region`` ascending within each owner: the first
    hit is then the region that comes first in partition order.
    """
    out = np.full(size, -1, dtype=np.int64)
    who, where = owner[hit], region[hit]
    if who.size:
        first = np.ones(who.size, dtype=bool)
        first[1:] = who[1:] != who[:-1]
        out[who[first]] = where[first]
    return out


def exact_positions(geoms: NDArray[np.object_], tree: shapely.STRtree | None,
                    lon: NDArray[np.float64], lat: NDArray[np.float64]) -> NDArray[np.int64]:
    """Return the first region (in partition order) each point intersects, -1 if none.

    Up to :data:`LOOP_MAX_REGIONS` regions, all bounding-box candidates in one call
    (:func:`_exact_few_regions`); above, the candidates come from ``tree`` (the
    geometries' STRtree, built here when None) and each is tested with the prepared
    geometry. ``geoms`` must be prepared.
    """
    if lon.size == 0:
        return np.empty(0, dtype=np.int64)
    if len(geoms) <= LOOP_MAX_REGIONS:
        return _exact_few_regions(geoms, lon, lat)
    if tree is None:
        tree = shapely.STRtree(geoms)
    point_idx, region_idx = tree.query(shapely.points(lon, lat))
    # Test region by region (each prepared geometry's index stays in cache: about
    # twice as fast as point by point), then put the hits back in point order; the
    # stable sorts keep each point's regions ascending.
    order = np.argsort(region_idx, kind="stable")
    point_idx, region_idx = point_idx[order], region_idx[order]
    hit = shapely.intersects_xy(geoms[region_idx], lon[point_idx], lat[point_idx])
    point_idx, region_idx = point_idx[hit], region_idx[hit]
    back = np.argsort(point_idx, kind="stable")
    return first_hits(point_idx[back], region_idx[back], np.ones(back.size, dtype=bool),
                      lon.size)


def _exact_few_regions(geoms: NDArray[np.object_], lon: NDArray[np.float64],
                       lat: NDArray[np.float64]) -> NDArray[np.int64]:
    """Test points exactly against a few regions: every box candidate in one GEOS call.

    Points are taken in blocks of :data:`LOOKUP_BLOCK`, halved while a block has more
    than :data:`MAX_PAIRS` candidate pairs (regions whose boxes overlap widely),
    which bounds the pair arrays. :func:`_box_pairs` lists the (region, point) pairs
    whose region's bounding box may hold the point, ordered by region; one prepared
    :func:`shapely.intersects_xy` call tests them all (a region's points come one
    after another, south to north within a strip, so its GEOS point locator stays
    in cache), and each point keeps the first region, in partition order, that it
    intersects. No per-region Python loop, no Point objects, no tree: for the 48
    states and 10^4 points the numpy part costs about a tenth of the GEOS tests,
    against about half of them for a per-region bounding-box mask loop.
    """
    bounds = np.asarray(shapely.bounds(geoms), dtype=np.float64)
    out = np.empty(lon.size, dtype=np.int64)
    for start in range(0, lon.size, LOOKUP_BLOCK):
        block = slice(start, start + LOOKUP_BLOCK)
        out[block] = _first_boxed_regions(geoms, bounds, lon[block], lat[block])
    return out


def _first_boxed_regions(geoms: NDArray[np.object_], bounds: NDArray[np.float64],
                         lon: NDArray[np.float64], lat: NDArray[np.float64]
                         ) -> NDArray[np.int64]:
    """Return each point's first region (-1: none) by its box pairs.

    A batch with more than :data:`MAX_PAIRS` pairs is halved (a single point has
    one pair per region at most, and is never split).
    """
    pairs = _box_pairs(bounds, lon, lat, MAX_PAIRS if lon.size > 1 else len(geoms))
    if pairs is None:
        half = lon.size // 2
        return np.concatenate([_first_boxed_regions(geoms, bounds, lon[:half], lat[:half]),
                               _first_boxed_regions(geoms, bounds, lon[half:], lat[half:])])
    region, point = pairs
    hit = shapely.intersects_xy(geoms[region], lon[point], lat[point])
    first = np.full(lon.size, len(geoms), dtype=np.int64)
    np.minimum.at(first, point[hit], region[hit])
    first[first == len(geoms)] = -1
    return first


def _box_pairs(bounds: NDArray[np.float64], lon: NDArray[np.float64],
               lat: NDArray[np.float64], most: int
               ) -> tuple[NDArray[np.int64], NDArray[np.int64]] | None:
    """Return the (region, point) pairs whose region's box may hold the point, by region.

    None when there are more than ``most`` pairs (counted before they are listed).
    A superset of the pairs whose box holds the point: the points are sorted by
    :data:`STRIPS` strips of longitude, then by :data:`_BANDS` bands of latitude
    (one radix sort of the 16-bit keys ``strip * _BANDS + band``); within each
    strip a region's box spans one contiguous run of that order (found by binary
    search), and the pairs are those runs, for every strip the box spans. Strip
    and band are monotone in lon and lat (IEEE rounding is), so a point inside a
    box is never missed; a point a little outside (same strip or band) is rejected
    by GEOS's own envelope test.
    """
    west, south = float(bounds[:, 0].min()), float(bounds[:, 1].min())
    east, north = float(bounds[:, 2].max()), float(bounds[:, 3].max())
    x_scale = STRIPS / max(east - west, _MIN_CELL_DEGREES)
    y_scale = _BANDS / max(north - south, _MIN_CELL_DEGREES)

    def key(x: NDArray[np.float64], y: NDArray[np.float64]) -> NDArray[np.uint16]:
        """Strip * bands + band (truncating a non-negative float is flooring it)."""
        strip = np.clip((x - west) * x_scale, 0, STRIPS - 1).astype(np.uint16)
        band = np.clip((y - south) * y_scale, 0, _BANDS - 1).astype(np.uint16)
        strip *= _BANDS
        strip += band
        return strip

    points_key = key(lon, lat)
    order = np.argsort(points_key, kind="stable")  # 16-bit keys: numpy's radix sort
    sorted_key = points_key[order]
    low = key(bounds[:, 0], bounds[:, 1]).astype(np.int64)  # each box's south-west key
    high = key(bounds[:, 2], bounds[:, 3]).astype(np.int64)  # and its north-east key
    count = high // _BANDS - low // _BANDS + 1  # strips per box
    owner = np.repeat(np.arange(len(bounds), dtype=np.int64), count)
    step = np.arange(owner.size) - np.repeat(np.cumsum(count) - count, count)
    lo = np.searchsorted(sorted_key, (low[owner] + step * _BANDS).astype(np.uint16), "left")
    hi = np.searchsorted(sorted_key, (high[owner] + (step + 1 - count[owner]) * _BANDS
                                      ).astype(np.uint16), "right")
    size = hi - lo
    total = int(size.sum())
    if total > most:
        return None
    region = np.repeat(owner, size)
    run = np.arange(total) + np.repeat(lo - (np.cumsum(size) - size), size)
    return region, order[run].astype(np.int64)


@dataclass(frozen=True, eq=False)
class BoxBins:
    """The regions' bounding boxes filed in coarse lon/lat bins: the exact test, no index.

    Built from the regions' bounding boxes alone (no border is read, nothing is
    prepared), in well under a millisecond for the 48 states. A point's bin is found
    by arithmetic; the regions whose box covers the bin are its candidates, in
    partition order. :meth:`positions` tests each point against its candidates in
    rounds (the first candidate of every point, then the second of those still
    unplaced, ...), each round one vectorised :func:`shapely.intersects_xy` call on
    the pairs whose box holds the point. A point stops at its first hit, which is
    the region that comes first in partition order, as in :func:`exact_positions`;
    no Point objects, no tree query, no per-region loop.

    ``offsets`` and ``regions`` list the candidates of bin ``b`` (row-major, south to
    north) as ``regions[offsets[b]:offsets[b + 1]]``, ascending.
    """

    west: float
    south: float
    east: float
    north: float
    nx: int
    ny: int
    offsets: NDArray[np.int64]
    regions: NDArray[np.int64]
    bounds: NDArray[np.float64]

    @classmethod
    def build(cls, geoms: NDArray[np.object_]) -> BoxBins | None:
        """File the bounding boxes of ``geoms`` in about :data:`BINS_PER_REGION` bins each.

        Returns None when the boxes cover more than :data:`MAX_BINS_PER_BOX` bins per
        region on average (regions whose boxes span most of the extent): the STRtree
        path is then the better exact test.
        """
        bounds = np.asarray(shapely.bounds(geoms), dtype=np.float64)
        west, south = float(bounds[:, 0].min()), float(bounds[:, 1].min())
        east, north = float(bounds[:, 2].max()), float(bounds[:, 3].max())
        side = float(np.median(np.sqrt(np.maximum(bounds[:, 2] - bounds[:, 0], 0.0)
                                       * np.maximum(bounds[:, 3] - bounds[:, 1], 0.0))))
        nx, ny = _bin_shape(east - west, north - south, side / BIN_SIDE_PER_BOX,
                            min(BINS_PER_REGION * len(geoms), MAX_BINS))
        east = max(east, west + nx * _MIN_CELL_DEGREES)
        north = max(north, south + ny * _MIN_CELL_DEGREES)
        bins = cls(west, south, east, north, nx, ny, np.zeros(1, dtype=np.int64),
                   np.empty(0, dtype=np.int64), bounds)
        ix0, iy0 = bins._bin_xy(bounds[:, 0], bounds[:, 1])
        ix1, iy1 = bins._bin_xy(bounds[:, 2], bounds[:, 3])
        width = ix1 - ix0 + 1
        count = width * (iy1 - iy0 + 1)
        total = int(count.sum())
        if total > MAX_BINS_PER_BOX * len(geoms):
            return None
        region = np.repeat(np.arange(len(geoms), dtype=np.int64), count)
        step = np.arange(total) - np.repeat(np.cumsum(count) - count, count)
        row, col = np.divmod(step, width[region])
        key = (iy0[region] + row) * nx + ix0[region] + col
        order = _stable_order(key, nx * ny)  # regions stay ascending within a bin
        offsets = np.zeros(nx * ny + 1, dtype=np.int64)
        np.cumsum(np.bincount(key, minlength=nx * ny), out=offsets[1:])
        return cls(west, south, east, north, nx, ny, offsets, region[order], bounds)

    def _bin_xy(self, lon: NDArray[np.float64], lat: NDArray[np.float64]
                ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Return the bin column and row of each coordinate (clipped to the grid).

        Monotone in lon and lat (IEEE rounding is), so a point inside a box falls in
        a bin between those of the box's corners: the candidates never miss a region.
        """
        ix = np.floor((lon - self.west) * (self.nx / (self.east - self.west)))
        iy = np.floor((lat - self.south) * (self.ny / (self.north - self.south)))
        return (np.clip(ix, 0, self.nx - 1).astype(np.int64),
                np.clip(iy, 0, self.ny - 1).astype(np.int64))

    def positions(self, geoms: NDArray[np.object_], lon: NDArray[np.float64],
                  lat: NDArray[np.float64]) -> NDArray[np.int64]:
        """Return the first region (in partition order) each point intersects, -1 if none.

        ``geoms`` are the regions the bins were built from, prepared or not (a cold
        call tests small batches faster unprepared: no locator to build).
        """
        out = np.full(lon.size, -1, dtype=np.int64)
        inside = np.flatnonzero((lon >= self.west) & (lon <= self.east)
                                & (lat >= self.south) & (lat <= self.north))
        ix, iy = self._bin_xy(lon[inside], lat[inside])
        cell = iy * self.nx + ix
        by_cell = _stable_order(cell, self.nx * self.ny)  # neighbours test the same regions
        inside, cell = inside[by_cell], cell[by_cell]
        start = self.offsets[cell]
        left = self.offsets[cell + 1] - start
        keep = left > 0
        active, start, left = inside[keep], start[keep], left[keep]
        west, south, east, north = self.bounds.T
        while active.size:
            region = self.regions[start]
            x, y = lon[active], lat[active]
            boxed = np.flatnonzero((x >= west[region]) & (x <= east[region])
                                   & (y >= south[region]) & (y <= north[region]))
            if boxed.size:
                hit = boxed[shapely.intersects_xy(geoms[region[boxed]], x[boxed], y[boxed])]
                out[active[hit]] = region[hit]
            more = (left > 1) & (out[active] < 0)
            active, start, left = active[more], start[more] + 1, left[more] - 1
        return out


@dataclass(frozen=True, eq=False)
class GridIndex:
    """Cell labels of a lon/lat grid, and the candidate regions of its mixed cells.

    ``labels`` holds, per cell (row-major, south to north), the region position of a
    pure cell, -1 for a pure cell outside every region, or ``-2 - k`` for the
    ``k``-th mixed cell, whose candidates are
    ``candidates[offsets[k]:offsets[k + 1]]`` (ascending).
    """

    west: float
    south: float
    east: float
    north: float
    nx: int
    ny: int
    labels: NDArray[np.int32]
    offsets: NDArray[np.int64]
    candidates: NDArray[np.int64]
    geoms: NDArray[np.object_]

    @property
    def inv_dx(self) -> float:
        """Cells per degree of longitude."""
        return self.nx / (self.east - self.west)

    @property
    def inv_dy(self) -> float:
        """Cells per degree of latitude."""
        return self.ny / (self.north - self.south)

    @property
    def n_mixed(self) -> int:
        """Number of mixed cells."""
        return int(self.offsets.size - 1)

    @property
    def nbytes(self) -> int:
        """Memory held by the index arrays (not the geometries)."""
        return int(self.labels.nbytes + self.offsets.nbytes + self.candidates.nbytes)

    # ------------------------------------------------------------------ building
    @classmethod
    def build(cls, geoms: NDArray[np.object_], tree: shapely.STRtree,
              max_cells: int = MAX_GRID_CELLS) -> GridIndex | None:
        """Build the grid over ``geoms`` (valid (multi)polygons; ``tree`` is their STRtree).

        The geometries are prepared in place (:func:`shapely.prepare`). At most
        ``max_cells`` cells (capped at :data:`MAX_GRID_CELLS`): a coarser grid builds
        faster and sends more points to the exact test. Returns None when borders
        are so dense that most cells would be mixed (the exact test alone is then
        as fast).
        """
        shapely.prepare(geoms)
        west, south, east, north = (float(v) for v in shapely.total_bounds(geoms))
        seg_region, x0, y0, x1, y1 = _border_segments(geoms)
        border_length = float(np.hypot(x1 - x0, y1 - y0).sum())
        nx, ny = _grid_shape(east - west, north - south, border_length,
                             min(max_cells, MAX_GRID_CELLS))
        east = max(east, west + nx * _MIN_CELL_DEGREES)
        north = max(north, south + ny * _MIN_CELL_DEGREES)
        cell_area = (east - west) * (north - south) / (nx * ny)
        band_area = _BAND_CELLS * border_length * np.sqrt(cell_area)
        if band_area > MAX_MIXED_SHARE * nx * ny * cell_area:
            return None
        grid = cls(west, south, east, north, nx, ny, np.empty(0, dtype=np.int32),
                   np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int64), geoms)
        cross_cell, cross_region = grid._crossings(seg_region, x0, y0, x1, y1, len(geoms))
        new = np.ones(cross_cell.size, dtype=bool)
        new[1:] = cross_cell[1:] != cross_cell[:-1]
        mixed = cross_cell[new]
        cross_mixed = np.cumsum(new) - 1  # each pair's mixed-cell number
        labels = grid._pure_labels(mixed, tree)
        offsets, candidates = grid._candidates(mixed, cross_cell, cross_mixed, cross_region)
        labels[mixed] = (-2 - np.arange(mixed.size)).astype(np.int32)
        return cls(west, south, east, north, nx, ny, labels, offsets, candidates, geoms)

    def _cell_range(self, lo: NDArray[np.float64], hi: NDArray[np.float64], origin: float,
                    scale: float, n: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        first = np.floor((lo - EDGE_PAD - origin) * scale)
        last = np.floor((hi + EDGE_PAD - origin) * scale)
        return (np.clip(first, 0, n - 1).astype(np.int64),
                np.clip(last, 0, n - 1).astype(np.int64))

    def _crossings(self, seg_region: NDArray[np.int64], x0: NDArray[np.float64],
                   y0: NDArray[np.float64], x1: NDArray[np.float64], y1: NDArray[np.float64],
                   n_regions: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Return the (cell, region) pairs where a region's border comes near a cell.

        Each border segment is cut into pieces shorter than 0.99 of a cell; a piece,
        widened by :data:`EDGE_PAD` (at most 0.001 of a cell), lies within a block of
        at most 2 x 2 cells, which are all marked: a superset of the cells the border
        comes near. The pairs come sorted by cell, then region.
        """
        span = np.maximum(np.abs(x1 - x0) * self.inv_dx, np.abs(y1 - y0) * self.inv_dy)
        pieces = (np.floor(span / 0.99) + 1).astype(np.int64)
        seg = np.repeat(np.arange(pieces.size), pieces)
        step = np.arange(seg.size) - np.repeat(np.cumsum(pieces) - pieces, pieces)
        t0 = step / pieces[seg]
        t1 = (step + 1) / pieces[seg]
        dx, dy = (x1 - x0)[seg], (y1 - y0)[seg]
        ax, ay = x0[seg] + t0 * dx, y0[seg] + t0 * dy
        bx, by = x0[seg] + t1 * dx, y0[seg] + t1 * dy
        del t0, t1, dx, dy
        ix0, ix1 = self._cell_range(np.minimum(ax, bx), np.maximum(ax, bx), self.west,
                                    self.inv_dx, self.nx)
        iy0, iy1 = self._cell_range(np.minimum(ay, by), np.maximum(ay, by), self.south,
                                    self.inv_dy, self.ny)
        del ax, ay, bx, by
        region = seg_region[seg]
        wide, tall = ix1 != ix0, iy1 != iy0
        both = wide & tall
        keys = np.concatenate([
            (iy0 * self.nx + ix0) * n_regions + region,
            (iy0[wide] * self.nx + ix1[wide]) * n_regions + region[wide],
            (iy1[tall] * self.nx + ix0[tall]) * n_regions + region[tall],
            (iy1[both] * self.nx + ix1[both]) * n_regions + region[both],
        ])
        cells, regions = np.divmod(_sorted_unique(keys), n_regions)
        return cells, regions

    def _centres(self, cells: NDArray[np.int64]) -> tuple[NDArray[np.float64],
                                                          NDArray[np.float64]]:
        iy, ix = np.divmod(cells, self.nx)
        return (self.west + (ix + 0.5) / self.inv_dx, self.south + (iy + 0.5) / self.inv_dy)

    def _pure_labels(self, mixed: NDArray[np.int64], tree: shapely.STRtree) -> NDArray[np.int32]:
        """Label every pure cell by its connected component's region (mixed cells: -1)."""
        free = np.ones(self.nx * self.ny, dtype=bool)
        free[mixed] = False
        component, first_cell = _components(free.reshape(self.ny, self.nx))
        cx, cy = self._centres(first_cell)
        region = exact_positions(self.geoms, tree, cx, cy).astype(np.int32)
        labels = np.full(free.size, -1, dtype=np.int32)
        labels[free] = region[component[free]]
        return labels

    def _candidates(self, mixed: NDArray[np.int64], cross_cell: NDArray[np.int64],
                    cross_mixed: NDArray[np.int64], cross_region: NDArray[np.int64]
                    ) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """Return the candidates of each mixed cell: regions crossing it or containing it.

        A region that contains a mixed cell without its border coming near it (possible
        only where regions overlap) is found row by row: between two cells of a row
        that a region's border marks, the unmarked cells form a run that lies wholly
        inside or wholly outside the region (a run reaching the grid's edge is
        outside), so one test of the run's first centre decides for all its cells.
        """
        n = len(self.geoms)
        ncells = self.nx * self.ny
        # Marked cells of each region, by region, then row, then column.
        by_region = np.sort(cross_region * ncells + cross_cell)
        region, cell = np.divmod(by_region, ncells)
        gap = np.flatnonzero((region[1:] == region[:-1]) & (cell[1:] // self.nx
                                                           == cell[:-1] // self.nx)
                             & (cell[1:] - cell[:-1] > 1))
        first, last, owner = cell[gap] + 1, cell[gap + 1] - 1, region[gap]
        lo = np.searchsorted(mixed, first, side="left")
        hi = np.searchsorted(mixed, last, side="right")
        some = np.flatnonzero(hi > lo)  # runs without a mixed cell need no test
        cx, cy = self._centres(first[some])
        inside = some[shapely.intersects_xy(self.geoms[owner[some]], cx, cy)]
        lo, hi, owner = lo[inside], hi[inside], owner[inside]
        count = hi - lo
        held = np.repeat(lo - (np.cumsum(count) - count), count) + np.arange(int(count.sum()))
        keys = np.concatenate([cross_mixed * n + cross_region,
                               held * n + np.repeat(owner, count)])
        keys.sort()
        owners, candidates = np.divmod(keys, n)
        offsets = np.searchsorted(owners, np.arange(mixed.size + 1)).astype(np.int64)
        return offsets, candidates.astype(np.int64)

    # ------------------------------------------------------------------ lookup
    def cell_labels(self, lon: NDArray[np.float64], lat: NDArray[np.float64]
                    ) -> NDArray[np.int64]:
        """Return the label of each point's cell: a region, -1, or ``-2 - k`` (mixed cell k)."""
        fx = (lon - self.west) * self.inv_dx
        fy = (lat - self.south) * self.inv_dy
        inside = (fx >= 0) & (fy >= 0) & (lon <= self.east) & (lat <= self.north)
        cell = np.minimum(fy.astype(np.int64), self.ny - 1)
        cell *= self.nx
        cell += np.minimum(fx.astype(np.int64), self.nx - 1)
        cell[~inside] = 0
        out = self.labels[cell].astype(np.int64)
        out[~inside] = -1
        return out

    def lookup(self, lon: NDArray[np.float64], lat: NDArray[np.float64]) -> NDArray[np.int64]:
        """Return the first region (in partition order) each point lies in, -1 if none.

        Points are taken in blocks of :data:`LOOKUP_BLOCK`, which bounds the
        temporary arrays (and keeps them in cache).
        """
        out = np.empty(lon.size, dtype=np.int64)
        for start in range(0, lon.size, LOOKUP_BLOCK):
            block = slice(start, start + LOOKUP_BLOCK)
            out[block] = self._lookup_block(lon[block], lat[block])
        return out

    def _lookup_block(self, lon: NDArray[np.float64], lat: NDArray[np.float64]
                      ) -> NDArray[np.int64]:
        out = self.cell_labels(lon, lat)
        todo = np.flatnonzero(out <= -2)
        if todo.size:
            k = -2 - out[todo]
            starts = self.offsets[k]
            counts = self.offsets[k + 1] - starts
            owner = np.repeat(np.arange(todo.size), counts)
            first = np.repeat(starts - (np.cumsum(counts) - counts), counts)
            region = self.candidates[first + np.arange(owner.size)]
            point = todo[owner]
            hit = shapely.intersects_xy(self.geoms[region], lon[point], lat[point])
            out[todo] = first_hits(owner, region, hit, todo.size)
        return out


def _components(free: NDArray[np.bool_]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Label the 4-connected components of the ``True`` cells of a 2-D grid.

    Returns each cell's component (-1 where ``free`` is False; row-major flat) and the
    flat index of one cell of each component. numpy only (``scipy.ndimage.label``
    would do, but importing it costs a cold first call about 0.08 s of CPU): the
    runs of free cells along each row are the nodes; runs of neighbouring rows that
    share a column are joined (one witness per pair: the column where the later of
    the two starts); then union-find by hooking each root onto the smallest root it
    touches and shortcutting every path, until no edge joins two roots.
    """
    nx = free.shape[1]
    start = free.copy()
    start[:, 1:] &= ~free[:, :-1]
    flat_free, flat_start = free.ravel(), start.ravel()
    run = np.cumsum(flat_start) - 1  # each free cell's run (row-major order)
    first_cell = np.flatnonzero(flat_start)
    below = (free[:-1] & free[1:] & (start[:-1] | start[1:])).ravel()
    upper = np.flatnonzero(below)
    u, v = run[upper], run[upper + nx]
    parent = np.arange(first_cell.size)
    while u.size:
        pu, pv = parent[u], parent[v]
        joined = pu != pv
        if not joined.any():
            break
        u, v, pu, pv = u[joined], v[joined], pu[joined], pv[joined]
        np.minimum.at(parent, np.maximum(pu, pv), np.minimum(pu, pv))
        while True:  # shortcut: every node points at its root
            grand = parent[parent]
            if np.array_equal(grand, parent):
                break
            parent = grand
    roots, root_of = np.unique(parent, return_inverse=True)
    component = np.full(flat_free.size, -1, dtype=np.int64)
    component[flat_free] = root_of[run[flat_free]]
    return component, first_cell[roots]


def _stable_order(keys: NDArray[np.int64], bound: int) -> NDArray[np.intp]:
    """Return the stable sorting order of non-negative ``keys`` below ``bound``.

    Keys that fit 16 bits are sorted as such: numpy then uses its radix sort, several
    times faster than the merge sort of 64-bit keys.
    """
    if bound <= 1 << 16:
        return np.argsort(keys.astype(np.uint16), kind="stable")
    return np.argsort(keys, kind="stable")


def _sorted_unique(values: NDArray[np.int64]) -> NDArray[np.int64]:
    """Return the sorted distinct values (sort-based: faster than np.unique's hashing)."""
    values = np.sort(values)
    keep = np.ones(values.size, dtype=bool)
    keep[1:] = values[1:] != values[:-1]
    return values[keep]


def _bin_shape(width: float, height: float, side: float, most: int) -> tuple[int, int]:
    """Return (nx, ny) for square bins of about ``side`` degrees (at most ``most`` bins)."""
    width = max(width, _MIN_CELL_DEGREES)
    height = max(height, _MIN_CELL_DEGREES)
    most = max(most, 1)
    size = max(side, float(np.sqrt(width * height / most)), _MIN_CELL_DEGREES)
    while True:
        nx, ny = int(np.ceil(width / size)), int(np.ceil(height / size))
        if nx * ny <= most:
            return nx, ny
        size *= 1.01 * np.sqrt(nx * ny / most)


def _grid_shape(width: float, height: float, border_length: float,
                max_cells: int = MAX_GRID_CELLS) -> tuple[int, int]:
    """Return (nx, ny) for square cells whose mixed band covers about MIXED_SHARE.

    At most ``max_cells`` cells (and at least :data:`MIN_GRID_CELLS`).
    """
    max_cells = max(max_cells, MIN_GRID_CELLS)
    width = max(width, _MIN_CELL_DEGREES)
    height = max(height, _MIN_CELL_DEGREES)
    area = width * height
    size = MIXED_SHARE * area / max(_BAND_CELLS * border_length, 1e-300)
    size = float(np.clip(size, np.sqrt(area / max_cells), np.sqrt(area / MIN_GRID_CELLS)))
    size = max(size, _MIN_CELL_DEGREES)
    while True:
        nx = int(np.ceil(width / size))
        ny = int(np.ceil(height / size))
        if nx * ny <= max_cells:
            return nx, ny
        size *= 1.01 * np.sqrt(nx * ny / max_cells)


def _border_segments(geoms: NDArray[np.object_]
                     ) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64],
                                NDArray[np.float64], NDArray[np.float64]]:
    """Return every ring segment of the (multi)polygons: its region and end points.

    Parts, rings and coordinates come from GEOS directly (``get_parts``,
    ``get_rings``, ``get_coordinates`` with their indices): several times faster
    than ``shapely.to_ragged_array``, which matters because a cold first call builds
    the grid inside its own time.
    """
    parts, part_region = shapely.get_parts(geoms, return_index=True)
    rings, ring_part = shapely.get_rings(parts, return_index=True)
    coords, coord_ring = shapely.get_coordinates(rings, return_index=True)
    # A segment starts at every coordinate but the last of its ring.
    first = np.flatnonzero(coord_ring[1:] == coord_ring[:-1])
    region = part_region[ring_part[coord_ring[first]]]
    return (region.astype(np.int64), coords[first, 0], coords[first, 1],
            coords[first + 1, 0], coords[first + 1, 1])
