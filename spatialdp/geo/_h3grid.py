"""Points to the cells of an H3 partition, mostly by arithmetic: a raster of pure pixels.

``h3ronpy.vector.coordinates_to_cells`` costs about 0.5 s per million points,
and it is what both :meth:`Partition.assign` and a competent user's own code
spend their time in. Most points, though, lie well inside one cell. A regular
lon/lat raster is laid over the partition's cells, and a pixel is *pure* when
the whole pixel lies inside one cell; a point in a pure pixel gets that cell by
arithmetic (its pixel's label), and only the other points are sent to H3.

Why a pure pixel is exact. An H3 cell is bounded by great-circle arcs between
the vertices :func:`h3ronpy.vector.cells_to_wkb_polygons` returns (H3 lays its
hexagons on the gnomonic projection of an icosahedron face, where straight
lines are great circles). In lon/lat degrees each arc stays within ``d`` of the
straight chord between its end vertices; ``d`` is measured per edge on the arc
itself (a few metres for resolution 5) and the cell is shrunk by
``margin = 1.5 d + 1e-6`` degrees: every point at least ``margin`` inside all
chords of a *convex* cell polygon is at least ``margin - d > 0`` away from the
true boundary and connected to the cell's centre without crossing it, so it is
inside the cell. A pixel is pure when its four corners pass that test (a
rectangle lies in a convex polygon when its corners do). Cells that are not
convex in lon/lat, cross the antimeridian or reach beyond
:data:`MAX_ABS_LATITUDE` get no pure pixels; their points go to H3. Rounding a
point to its pixel errs by about 1e-13 degrees, far inside the 1e-6 slack.

The answer is therefore the one H3 gives for every point; the raster only
decides which points need H3. ``tests/test_h3grid.py`` checks it against
h3ronpy on points drawn densely along pixel and cell borders.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import shapely
from numpy.typing import NDArray

__all__ = ["MAX_ABS_LATITUDE", "MAX_PIXELS", "MIN_POINTS", "OUTSIDE", "UNKNOWN", "H3CellTable",
           "H3PixelIndex"]

#: Pixel labels: a position >= 0, or one of these.
OUTSIDE = -1
UNKNOWN = -2

#: Pixels per cell edge when the budget allows (finer: more points by arithmetic)...
PIXELS_PER_EDGE = 8
#: ...and at least this many, else the raster is not worth building.
MIN_PIXELS_PER_EDGE = 3
#: At most this many pixels (4 bytes each).
MAX_PIXELS = 1 << 23
#: A partition builds its raster once it has been asked about this many points in
#: all: building (about 1 s for 30,000 resolution-5 cells) costs about as much as
#: sending this many points to H3, so building late never costs more than twice the
#: better choice.
MIN_POINTS = 2_000_000
#: No pure pixels beyond this latitude (lon/lat pixels degenerate towards the poles).
MAX_ABS_LATITUDE = 75.0
#: Absolute slack on the margin, in degrees (about 0.1 m).
SLACK_DEGREES = 1e-6
#: Safety factor on the measured arc-to-chord distance.
ARC_FACTOR = 1.5
#: Points along each arc where its distance to the chord is measured.
_ARC_SAMPLES = np.array([0.25, 0.5, 0.75])
_KM_PER_DEGREE = 111.32
#: Points looked up per block (keeps temporaries in cache).
_BLOCK = 1 << 16
#: Low bits of a cell's key (its last two digits) addressed within one block of
#: :class:`H3CellTable`.
_LOW_BITS = 6
_LOW_MASK = (1 << _LOW_BITS) - 1
#: :class:`H3CellTable` refuses (returns None) when its prefix table would exceed
#: this many entries per cell of the partition plus :data:`_TABLE_SLACK`.
_TABLE_PER_CELL = 4
_TABLE_SLACK = 1 << 16


@dataclass(frozen=True)
class H3CellTable:
    """The position of a cell among a partition's sorted cells, by direct addressing.

    An H3 cell at resolution ``r`` is fixed by its base cell and its ``r``
    digits: the ``7 + 3r`` bits just above the unused digits (its *key*).
    Two tables replace a hash table: the key's high bits (the cell's parent
    two resolutions up) select a block of ``2**6`` entries, its low bits (the
    last two digits) an entry of that block, which holds the position or -1.
    Building costs a few passes over the partition's cells (no hashing, no
    sort: they are sorted); a lookup is a few integer operations and two
    gathers per cell, and a final comparison with the cell found, so that any
    other ``uint64`` (another resolution, not a cell) gets -1.

    Examples
    --------
    >>> table = H3CellTable.build(np.array([0x85283473fffffff, 0x8528347bfffffff], np.uint64))
    >>> table.lookup(np.array([0x8528347bfffffff, 0x85283477fffffff], np.uint64)).tolist()
    [1, -1]
    """

    cells: NDArray[np.uint64]
    shift: int
    key_mask: int
    prefix_min: int
    prefixes: NDArray[np.int32]
    entries: NDArray[np.int32]

    @classmethod
    def build(cls, cells: NDArray[np.uint64]) -> H3CellTable | None:
        """Build the table of sorted, unique ``cells`` of one resolution (None: too sparse)."""
        if cells.size == 0:
            return None
        resolution = int((int(cells[0]) >> 52) & 0xF)
        shift = 3 * (15 - resolution)
        key_mask = (1 << (7 + 3 * resolution)) - 1
        keys = (cells.view(np.int64) >> shift) & key_mask  # sorted, as the cells are
        prefix = keys >> _LOW_BITS
        prefix_min = int(prefix[0])
        span = int(prefix[-1]) - prefix_min + 1
        if span > _TABLE_PER_CELL * cells.size + _TABLE_SLACK:
            return None
        new = np.r_[True, prefix[1:] != prefix[:-1]]
        block = np.cumsum(new, dtype=np.int64)  # 1, 2, ...; block 0 holds only -1
        prefixes = np.zeros(span, dtype=np.int32)
        prefixes[prefix[new] - prefix_min] = np.arange(1, int(block[-1]) + 1, dtype=np.int32)
        entries = np.full((int(block[-1]) + 1) << _LOW_BITS, -1, dtype=np.int32)
        entries[(block << _LOW_BITS) | (keys & _LOW_MASK)] = np.arange(cells.size, dtype=np.int32)
        return cls(cells, shift, key_mask, prefix_min, prefixes, entries)

    def lookup(self, cells: NDArray[np.uint64]) -> NDArray[np.int64]:
        """Return each cell's position among the table's cells, -1 where it is not one."""
        out = np.empty(cells.size, dtype=np.int64)
        signed = cells.view(np.int64)  # cells keep bit 63 clear: shifts stay exact
        last = self.prefixes.size - 1
        for start in range(0, cells.size, _BLOCK):  # blocks keep the temporaries in cache
            given = signed[start:start + _BLOCK]
            keys = (given >> self.shift) & self.key_mask
            prefix = np.clip((keys >> _LOW_BITS) - self.prefix_min, 0, last)
            found = self.entries[(self.prefixes[prefix].astype(np.int64) << _LOW_BITS)
                                 | (keys & _LOW_MASK)]
            # a clipped prefix, or the key of no cell here, finds -1 or another cell
            out[start:start + given.size] = np.where(
                self.cells.view(np.int64)[found] == given, found, -1)
        return out


@dataclass(frozen=True)
class H3PixelIndex:
    """A lon/lat raster whose pure pixels carry a partition position (-1: ask H3).

    Attributes
    ----------
    west, south : float
        The raster's origin, in degrees.
    step : float
        Pixel size in degrees (the same in lon and lat).
    nx, ny : int
        Pixels across and up.
    labels : ndarray of int32
        Per pixel (row-major, ``j * nx + i``): the position of the partition
        cell that wholly contains it; :data:`OUTSIDE` when a cell of no region
        wholly contains it; :data:`UNKNOWN` otherwise (ask H3).
    """

    west: float
    south: float
    step: float
    nx: int
    ny: int
    labels: NDArray[np.int32]

    @property
    def nbytes(self) -> int:
        """Memory held by the raster."""
        return int(self.labels.nbytes)

    @property
    def pure_share(self) -> float:
        """Share of the raster's pixels that are pure."""
        return float(np.count_nonzero(self.labels != UNKNOWN) / max(self.labels.size, 1))

    @classmethod
    def build(cls, cells: NDArray[np.uint64], resolution: int) -> H3PixelIndex | None:
        """Build the raster of a partition's ``cells`` (all at ``resolution``).

        The cells of no region that overlap the raster get pure pixels too
        (labelled :data:`OUTSIDE`), so that points near but outside the
        partition are answered without H3 as well. Returns None when the
        partition is too spread out for a useful raster.
        """
        import h3
        from h3ronpy import vector as h3vector

        inside = _Rings.of(cells)
        edge_deg = float(h3.average_hexagon_edge_length(resolution, "km")) / _KM_PER_DEGREE
        frame = inside.frame(edge_deg)
        if frame is None:
            return None
        west, south, step, nx, ny = frame
        box = shapely.box(west, south, west + nx * step, south + ny * step)
        around = np.asarray(h3vector.geometry_to_cells(
            box, resolution, containment_mode=h3vector.ContainmentMode.IntersectsBoundary),
            dtype=np.uint64)
        others = np.setdiff1d(around, cells)
        spans = [inside.spans(np.arange(cells.size, dtype=np.int32), frame)]
        if others.size:
            spans.append(_Rings.of(others).spans(np.full(others.size, OUTSIDE, np.int32), frame))
        return cls(west, south, step, nx, ny, _fill(spans, nx * ny))

    def lookup(self, lon: NDArray[np.float64], lat: NDArray[np.float64]) -> NDArray[np.int64]:
        """Return each point's position, :data:`OUTSIDE`, or :data:`UNKNOWN` (ask H3)."""
        out = np.empty(lon.size, dtype=np.int64)
        inv = 1.0 / self.step
        for start in range(0, lon.size, _BLOCK):  # blocks of points, never one at a time
            stop = min(start + _BLOCK, lon.size)
            fx = (lon[start:stop] - self.west) * inv
            fy = (lat[start:stop] - self.south) * inv
            inside = (fx >= 0) & (fx < self.nx) & (fy >= 0) & (fy < self.ny)
            pixel = np.where(inside, fy.astype(np.int64) * self.nx + fx.astype(np.int64), 0)
            out[start:stop] = np.where(inside, self.labels[pixel], UNKNOWN)
        return out


class _Rings:
    """The boundary vertices of some H3 cells, grouped by vertex count."""

    def __init__(self, coords: NDArray[np.float64], n_vertices: NDArray[np.int64]) -> None:
        self.coords, self.n_vertices = coords, n_vertices
        first = _starts(n_vertices)
        lon_lo = np.minimum.reduceat(coords[:, 0], first)
        lon_hi = np.maximum.reduceat(coords[:, 0], first)
        lat_abs = np.maximum.reduceat(np.abs(coords[:, 1]), first)
        self.usable = (lon_hi - lon_lo < 180.0) & (lat_abs <= MAX_ABS_LATITUDE)

    @classmethod
    def of(cls, cells: NDArray[np.uint64]) -> _Rings:
        from h3ronpy import vector as h3vector

        polygons = shapely.from_wkb(np.asarray(h3vector.cells_to_wkb_polygons(cells)))
        coords, owner = shapely.get_coordinates(polygons, return_index=True)
        last = np.r_[owner[1:] != owner[:-1], True]  # each ring's closing vertex
        return cls(coords[~last], np.bincount(owner[~last], minlength=cells.size))

    def frame(self, edge_deg: float) -> tuple[float, float, float, int, int] | None:
        """Return the raster (west, south, step, nx, ny) over the usable cells, or None."""
        if not self.usable.any():
            return None
        kept = self.coords[np.repeat(self.usable, self.n_vertices)]
        west, south = kept.min(axis=0)
        east, north = kept.max(axis=0)
        step = max(edge_deg / PIXELS_PER_EDGE,
                   float(np.sqrt((east - west) * (north - south) / MAX_PIXELS)))
        if step > edge_deg / MIN_PIXELS_PER_EDGE:
            return None
        nx = int(np.ceil((east - west) / step)) + 1
        ny = int(np.ceil((north - south) / step)) + 1
        return float(west), float(south), step, nx, ny

    def spans(self, label_of: NDArray[np.int32], frame: tuple[float, float, float, int, int]
              ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int32]]:
        """Return the runs of pure pixels (first pixel, length, label) of every convex cell."""
        parts = []
        for k in np.unique(self.n_vertices[self.usable]):  # 6 vertices, rarely 7-10
            group = np.flatnonzero(self.usable & (self.n_vertices == k))
            first = _starts(self.n_vertices)[group]
            convex, rings = _ccw_convex(self.coords[first[:, None] + np.arange(k)[None, :]])
            if convex.any():
                parts.append(_pure_runs(label_of[group[convex]], rings[convex], *frame))
        if not parts:
            return (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32))
        start, width, label = zip(*parts, strict=True)
        return np.concatenate(start), np.concatenate(width), np.concatenate(label)


def _fill(spans: list[tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int32]]],
          size: int) -> NDArray[np.int32]:
    """Lay disjoint runs onto a raster of ``size`` pixels, :data:`UNKNOWN` between them."""
    start = np.concatenate([s[0] for s in spans])
    width = np.concatenate([s[1] for s in spans])
    label = np.concatenate([s[2] for s in spans])
    order = np.argsort(start, kind="stable")
    start, width, label = start[order], width[order], label[order]
    gap = start - np.r_[0, (start + width)[:-1]]  # cells never overlap: gaps are >= 0
    values = np.empty(2 * start.size + 1, dtype=np.int32)
    values[0:-1:2], values[1::2], values[-1] = UNKNOWN, label, UNKNOWN
    lengths = np.empty(2 * start.size + 1, dtype=np.int64)
    lengths[0:-1:2], lengths[1::2] = gap, width
    lengths[-1] = size - (start[-1] + width[-1]) if start.size else size
    return np.repeat(values, lengths)


def _starts(counts: NDArray[np.int64]) -> NDArray[np.int64]:
    return np.r_[0, np.cumsum(counts)[:-1]].astype(np.int64)


def _ccw_convex(rings: NDArray[np.float64]) -> tuple[NDArray[np.bool_], NDArray[np.float64]]:
    """Orient every ring counter-clockwise; flag those that are strictly convex."""
    x, y = rings[..., 0], rings[..., 1]
    area = (x * np.roll(y, -1, axis=1) - np.roll(x, -1, axis=1) * y).sum(axis=1)
    rings = np.where((area < 0)[:, None, None], rings[:, ::-1], rings)
    edge = np.roll(rings, -1, axis=1) - rings
    turn = edge[..., 0] * np.roll(edge[..., 1], -1, axis=1) - edge[..., 1] * np.roll(
        edge[..., 0], -1, axis=1)
    convex: NDArray[np.bool_] = np.all(turn > 0, axis=1)
    return convex, rings


def _lonlat(xyz: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.stack([np.degrees(np.arctan2(xyz[..., 1], xyz[..., 0])),
                     np.degrees(np.arctan2(xyz[..., 2], np.hypot(xyz[..., 0], xyz[..., 1])))],
                    axis=-1)


def _xyz(lonlat: NDArray[np.float64]) -> NDArray[np.float64]:
    lon, lat = np.radians(lonlat[..., 0]), np.radians(lonlat[..., 1])
    return np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)],
                    axis=-1)


def _margins(rings: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.float64],
                                                   NDArray[np.float64]]:
    """Per edge, the inward unit normal and offset; per cell, the margin.

    A point ``q`` is at least ``margin`` inside the chord of edge ``e`` when
    ``normal_e . q - offset_e >= margin``.
    """
    start, end = rings, np.roll(rings, -1, axis=1)
    chord = end - start
    length = np.hypot(chord[..., 0], chord[..., 1])
    normal = np.stack([-chord[..., 1], chord[..., 0]], axis=-1) / length[..., None]
    offset = (normal * start).sum(axis=-1)
    a, b = _xyz(start), _xyz(end)
    t = _ARC_SAMPLES[:, None, None, None]  # slerp-free: normalised chords of the unit sphere
    on_arc = _lonlat((1 - t) * a[None] + t * b[None])  # lies on the great circle through a, b
    # the same longitude branch as the vertices (cells never span the antimeridian here)
    on_arc[..., 0] += 360.0 * np.round((start[None, ..., 0] - on_arc[..., 0]) / 360.0)
    distance = np.abs((normal[None] * on_arc).sum(axis=-1) - offset[None])
    margin = ARC_FACTOR * distance.max(axis=(0, 2)) + SLACK_DEGREES
    return normal, offset, margin


def _pure_runs(label_of: NDArray[np.int32], rings: NDArray[np.float64], west: float,
               south: float, step: float, nx: int, ny: int
               ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int32]]:
    """Return the runs of pixels that lie wholly inside each shrunk convex cell.

    Row by row: within the band of pixel row ``j`` each edge's half-plane bounds
    ``x`` from one side, at the band's worst ``y``; the pixels wholly between
    the bounds are pure. The work is per (cell, row), never per pixel.
    """
    normal, offset, margin = _margins(rings)
    lo, hi = rings.min(axis=1), rings.max(axis=1)
    j0 = np.maximum(np.ceil((lo[:, 1] - south) / step).astype(np.int64), 0)
    j1 = np.minimum(np.floor((hi[:, 1] - south) / step).astype(np.int64), ny)  # rows [j, j+1)
    rows = np.maximum(j1 - j0, 0)
    cell = np.repeat(np.arange(label_of.size), rows)
    j = j0[cell] + np.arange(cell.size) - np.repeat(_starts(rows), rows)
    y0, y1 = south + j * step, south + (j + 1) * step
    left = np.full(cell.size, -np.inf)
    right = np.full(cell.size, np.inf)
    for e in range(rings.shape[1]):  # a handful of edges
        nxe, nye = normal[cell, e, 0], normal[cell, e, 1]
        need = offset[cell, e] + margin[cell] - np.minimum(nye * y0, nye * y1)  # nx*x >= need
        with np.errstate(divide="ignore", invalid="ignore"):
            bound = need / nxe
        left = np.where(nxe > 0, np.maximum(left, bound), left)
        right = np.where(nxe < 0, np.minimum(right, bound), right)
        right = np.where((nxe == 0) & (need > 0), -np.inf, right)  # a row a flat edge fails
    i0 = np.maximum(np.ceil((left - west) / step), 0)
    i1 = np.minimum(np.floor((right - west) / step) - 1, nx - 1)  # pixel i spans [i, i+1)
    ok = np.isfinite(i0) & np.isfinite(i1) & (i1 >= i0)
    first = j[ok] * nx + i0[ok].astype(np.int64)
    return first, (i1[ok] - i0[ok]).astype(np.int64) + 1, label_of[cell[ok]]
