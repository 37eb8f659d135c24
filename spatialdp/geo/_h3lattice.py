"""Points to the cells of an H3 partition by the hexagon lattice of each icosahedron face.

H3 finds a point's cell in two steps (``latLngToCell``): it takes the
icosahedron face whose centre is nearest the point, projects the point
gnomonically onto the plane of that face, where the cells of one resolution are
the hexagons of a regular lattice, and takes the hexagon whose centre is
nearest; the cell index is then a function of (face, hexagon) alone. This
module does the first step with numpy: its *key* of a point is (face, hexagon),
and it is H3's whenever the point is more than a small margin away from a tie
between two faces or two hexagons (those points are flagged and go to H3).

Points with the key of a partition cell's centre get that cell: the centre has
that cell (H3 guarantees ``latLngToCell(cellToLatLng(c)) == c``), and equal keys
mean equal cells. A point whose hexagon lies wholly inside its face's triangle
and is the key of no partition cell's centre is in no partition cell: such a
hexagon is a whole cell, whose centre lies in it. Every other point (a hexagon
cut by a face edge, a centre on a face edge, a tie) goes to H3. The lattice of
each face (its centre, axes and spacing) is read off H3's own cells once per
resolution (:func:`face_lattices`), not copied from its source. The keys of
the partition cells' centres are derived from those of their parents' centres,
which H3 finds, and the cells' last digits (:func:`cell_keys`), so that
building the table asks H3 about one cell in seven.
``tests/test_h3lattice.py`` checks the answers against h3ronpy on points drawn
densely along cell and face edges.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
from numpy.typing import NDArray

from spatialdp.geo._h3grid import UNKNOWN

__all__ = ["ASK_H3", "FIRST_BATCH_PER_CELL", "MIN_POINTS_PER_CELL", "MIN_RESOLUTION",
           "FaceLattices", "H3LatticeTable", "cell_keys", "centre_keys", "face_lattices"]

#: Label of a point whose cell only H3 can tell (the raster's, too).
ASK_H3 = UNKNOWN
#: A partition builds its table once it has been asked about this many points per
#: cell in all: the build (H3 finds the centres of the cells' parents, about one
#: cell in seven, and the cells' keys follow by arithmetic: :func:`cell_keys`) costs
#: about what the table then saves on that many points (measured on 30,772
#: resolution-5 cells: 5-6 ms, against 0.18 us saved a point), so building late
#: never costs more than about twice the better choice...
MIN_POINTS_PER_CELL = 1
#: ...but its first call builds it only for a batch of this many points per cell,
#: which pays within the call for the build and for reading H3's face lattices
#: (:func:`face_lattices`, about 4 ms once per process and resolution).
FIRST_BATCH_PER_CELL = 2
#: Coarser resolutions have too few hexagons per face to read the lattice off.
MIN_RESOLUTION = 2
#: A face must win by this much (in the dot product of unit vectors) ...
FACE_MARGIN = 1e-12
#: ... and a hexagon by this share of the point's lattice coordinates (plus this).
HEX_MARGIN = 1e-9
#: Points handled per block (keeps the (block, 20) face table in cache).
_BLOCK = 1 << 14
#: Lattice units per hexagon: the circumradius, for "wholly inside the face".
_CIRCUMRADIUS = 1.0 / np.sqrt(3.0)
_SQRT3_2 = np.sqrt(3.0) / 2.0
#: :func:`lattice_keys` narrows a longer list of faces to the points' nearest ones.
_FEW_FACES = 3
#: The table is refused when larger than this many entries per cell plus the slack.
_TABLE_PER_CELL = 8
_TABLE_SLACK = 1 << 16


@dataclass(frozen=True)
class FaceLattices:
    """The 20 faces' centres and hexagon lattices at one resolution (unit spacing).

    ``x = (p . axis_x) / (p . centre)``, likewise ``y``, are the lattice
    coordinates of a unit vector ``p`` on a face: hexagon centres at
    ``a (1, 0) + b (1/2, sqrt(3)/2)`` for integers ``a, b``. ``edges`` holds,
    per face, three inward unit normals and offsets of the face's triangle in
    those coordinates (``n . (x, y) >= offset`` inside).
    """

    centres: NDArray[np.float64]  # (20, 3)
    axis_x: NDArray[np.float64]  # (20, 3), scaled by 1 / spacing
    axis_y: NDArray[np.float64]  # (20, 3)
    edges: NDArray[np.float64]  # (20, 3, 3): nx, ny, offset
    beats: NDArray[np.float64]  # (20, 3, 3): centre minus each neighbour's centre
    usable: NDArray[np.bool_]  # (20,)
    per_face: NDArray[np.float64]  # (18, 20): the rows above, one column per face


def _xyz(lat: NDArray[np.float64], lng: NDArray[np.float64]) -> NDArray[np.float64]:
    cos_lat = np.cos(lat)
    return np.stack([cos_lat * np.cos(lng), cos_lat * np.sin(lng), np.sin(lat)], axis=-1)


def _centre(cell: str) -> NDArray[np.float64]:
    import h3

    lat, lng = h3.cell_to_latlng(cell)
    return _xyz(np.radians(np.array(lat)), np.radians(np.array(lng)))


@cache
def face_lattices(resolution: int) -> FaceLattices:
    """Read the faces' centres and lattices at ``resolution`` off H3's cells (cached).

    A face's centre is that of its middle resolution-0 hexagon (the one of its
    four wholly inside it nearest their mean); the lattice axes run from the
    centre's cell at ``resolution`` to the cells ``k`` steps away along H3's
    local i and j axes (straight lines of hexagons on the face's plane).
    """
    import h3

    res0 = [(c, h3.get_icosahedron_faces(c)) for c in h3.get_res0_cells()]
    inner = [(c, faces[0]) for c, faces in res0 if len(faces) == 1]
    vertices = np.array([_centre(c) for c in h3.get_pentagons(0)])
    centres = np.zeros((20, 3))
    axis_x, axis_y = np.zeros((20, 3)), np.zeros((20, 3))
    edges = np.zeros((20, 3, 3))
    usable = np.zeros(20, dtype=bool)
    for face in range(20):
        members = np.array([_centre(c) for c, f in inner if f == face])
        mean = members.sum(axis=0)
        centres[face] = members[np.argmax(members @ mean)]
        lattice = _lattice(centres[face], resolution)
        if lattice is None:
            continue
        axis_x[face], axis_y[face] = lattice
        corners = vertices[np.argsort(vertices @ centres[face])[-3:]]
        edges[face] = _triangle(corners, centres[face], axis_x[face], axis_y[face])
        usable[face] = True
    near = np.argsort(centres @ centres.T, axis=1)[:, -4:-1]  # the three neighbours
    beats = centres[:, None, :] - centres[near]
    per_face = np.concatenate([centres.T, axis_x.T, axis_y.T, edges.reshape(20, 9).T])
    return FaceLattices(centres, axis_x, axis_y, edges, beats, usable,
                        np.ascontiguousarray(per_face))


def _lattice(centre: NDArray[np.float64], resolution: int
             ) -> tuple[NDArray[np.float64], NDArray[np.float64]] | None:
    """Return the unit-spacing axes of a face's lattice (x along one H3 axis), or None."""
    import h3

    lat, lng = np.degrees(np.arcsin(centre[2])), np.degrees(np.arctan2(centre[1], centre[0]))
    origin = h3.latlng_to_cell(float(lat), float(lng), resolution)
    if np.abs(_centre(origin) - centre).max() > 1e-12:
        return None  # the face's centre is no hexagon centre: not H3's lattice
    i0, j0 = h3.cell_to_local_ij(origin, origin)
    steps = max(1, int(0.3 * 7 ** (resolution / 2)))

    def step(di: int, dj: int) -> NDArray[np.float64]:
        p = _centre(h3.local_ij_to_cell(origin, i0 + di, j0 + dj))
        return (p / (p @ centre) - centre) / steps

    try:
        u, v = step(steps, 0), step(0, steps)
    except h3.H3BaseException:  # H3 cannot walk there (never seen): no lattice
        return None
    spacing = float(np.linalg.norm(u))
    cos_uv = float(u @ v) / spacing**2
    if abs(np.linalg.norm(v) / spacing - 1) > 1e-9 or abs(abs(cos_uv) - 0.5) > 1e-9:
        return None
    x = u / spacing
    y = np.cross(centre, x)
    if (v / spacing) @ y < 0:
        y = -y
    return x / spacing, y / spacing


def _triangle(corners: NDArray[np.float64], centre: NDArray[np.float64],
              axis_x: NDArray[np.float64], axis_y: NDArray[np.float64]) -> NDArray[np.float64]:
    """Return the inward normals and offsets of the face's triangle in lattice coordinates."""
    den = corners @ centre
    pts = np.stack([(corners @ axis_x) / den, (corners @ axis_y) / den], axis=1)
    out = np.zeros((3, 3))
    for k in range(3):
        a, b = pts[k], pts[(k + 1) % 3]
        normal = np.array([-(b - a)[1], (b - a)[0]]) / np.linalg.norm(b - a)
        if normal @ (pts[(k + 2) % 3] - a) < 0:
            normal = -normal
        out[k] = normal[0], normal[1], normal @ a
    return out


def lattice_keys(lat: NDArray[np.float64], lng: NDArray[np.float64], lattices: FaceLattices,
                 faces: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64],
                                                    NDArray[np.int64], NDArray[np.bool_]]:
    """Return per point (in radians): face, hexagon (a, b), and sure.

    ``sure`` is False where the face or the hexagon is within the margin of a tie,
    the face has no usable lattice, or the face is not one of ``faces``: only H3
    can tell those points.
    """
    cos_lat = np.cos(lat)
    px, py, pz = cos_lat * np.cos(lng), cos_lat * np.sin(lng), np.sin(lat)
    face = np.zeros(px.size, dtype=np.int64)
    sure = np.zeros(px.size, dtype=bool)
    if faces.size > _FEW_FACES:  # only a point's nearest face can win (by the margin)
        faces = faces[_nearest_faces(px, py, pz, lattices)[faces]]
    for f in faces:  # a face's region is where its centre beats its three neighbours'
        n = lattices.beats[f]
        lead = n[0, 0] * px + n[0, 1] * py + n[0, 2] * pz
        for j in (1, 2):
            lead = np.minimum(lead, n[j, 0] * px + n[j, 1] * py + n[j, 2] * pz)
        won = lead > FACE_MARGIN
        face[won] = f
        sure |= won
    sure &= lattices.usable[face]
    k = np.take(lattices.per_face[:9], face, axis=1)  # one gather of the face's axes
    den = k[0] * px + k[1] * py + k[2] * pz
    x = (k[3] * px + k[4] * py + k[5] * pz) / den
    y = (k[6] * px + k[7] * py + k[8] * pz) / den
    b = y / _SQRT3_2
    a = x - 0.5 * b
    ra, rb, rc = np.rint(a), np.rint(b), np.rint(-a - b)
    da, db, dc = np.abs(ra - a), np.abs(rb - b), np.abs(rc + a + b)
    fix_a = (da > db) & (da > dc)
    fix_b = ~fix_a & (db > dc)
    ra = np.where(fix_a, -rb - rc, ra)
    rb = np.where(fix_b, -ra - rc, rb)
    ux, uy = x - (ra + 0.5 * rb), y - _SQRT3_2 * rb
    reach = np.maximum(np.abs(ux), np.maximum(np.abs(0.5 * ux + _SQRT3_2 * uy),
                                              np.abs(-0.5 * ux + _SQRT3_2 * uy)))
    sure &= 0.5 - reach > HEX_MARGIN * (1.0 + np.abs(x) + np.abs(y))
    return face, ra.astype(np.int64), rb.astype(np.int64), sure


def _nearest_faces(px: NDArray[np.float64], py: NDArray[np.float64], pz: NDArray[np.float64],
                   lattices: FaceLattices) -> NDArray[np.bool_]:
    """Return a mask of the faces whose centre is nearest to one of the unit vectors, at least.

    A face that wins a point in :func:`lattice_keys` beats every other face by
    :data:`FACE_MARGIN`, far more than the rounding of these dot products, so it is
    among these: the faces left out win no point.
    """
    dots = np.outer(px, lattices.centres[:, 0])
    dots += np.outer(py, lattices.centres[:, 1])
    dots += np.outer(pz, lattices.centres[:, 2])
    return np.bincount(np.argmax(dots, axis=1), minlength=20) > 0


def wholly_inside_face(face: NDArray[np.int64], a: NDArray[np.int64], b: NDArray[np.int64],
                       lattices: FaceLattices, margin: float = 0.0) -> NDArray[np.bool_]:
    """Return whether each hexagon (a, b) lies wholly inside its face's triangle.

    With ``margin`` (lattice units), whether it does with that much room to spare:
    with 1, so do its six neighbours.
    """
    k = np.take(lattices.per_face[9:], face, axis=1)
    cx, cy = a + 0.5 * b, _SQRT3_2 * b
    inside = k[0] * cx + k[1] * cy - k[2]
    for row in (3, 6):
        inside = np.minimum(inside, k[row] * cx + k[row + 1] * cy - k[row + 2])
    return inside > _CIRCUMRADIUS + 1e-6 + margin


def centre_keys(cells: NDArray[np.uint64], lattices: FaceLattices
                ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64],
                           NDArray[np.bool_]]:
    """Return the :func:`lattice_keys` of the cells' centres, which H3 finds (h3ronpy)."""
    from h3ronpy import vector as h3vector

    centres = h3vector.cells_to_coordinates(cells, radians=True)
    return lattice_keys(np.asarray(centres.column("lat")), np.asarray(centres.column("lng")),
                        lattices, np.arange(20))


@cache
def _pentagon_base_cells() -> NDArray[np.bool_]:
    """Return a mask over the 128 base cell numbers: True for the 12 pentagons'."""
    import h3

    mask = np.zeros(128, dtype=bool)
    mask[[(h3.str_to_int(c) >> 45) & 0x7F for c in h3.get_pentagons(0)]] = True
    return mask


def cell_keys(cells: NDArray[np.uint64], resolution: int, lattices: FaceLattices
              ) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64],
                         NDArray[np.bool_]]:
    """Return the key (face, a, b, sure) of each cell's centre, asking H3 for about 1 in 7.

    H3's aperture-7 children of a hexagon are its centre child, whose centre is the
    parent's, and the six hexagons next to it, one per digit. So H3 finds the
    centres of the *parents* only; a child's key is its parent's centre key plus
    its digit's step. The steps are H3's six unit vectors turned by the base
    cell's rotation on the face, one set per (base cell, face, digit): each is read
    off two cells of that set whose parent lies a hexagon or more inside its face
    (their own keys found by H3), and used only when the two agree on a step to a
    neighbouring hexagon (none for digit 0). A key is kept
    when its parent's centre key is sure, the base cell is no pentagon's (those
    turn their digits), the step was read and the hexagon lies wholly inside the
    face; every other cell (near a face edge, mostly) gets its own centre key from
    H3. ``tests/test_h3lattice.py`` checks the keys against :func:`centre_keys`.
    """
    if resolution < 1:
        return centre_keys(cells, lattices)
    shift = 3 * (15 - resolution)
    signed = cells.view(np.int64)
    digit = (signed >> shift) & 7
    parent = ((signed | (7 << shift)) & ~(0xF << 52)) | ((resolution - 1) << 52)
    new = np.ones(cells.size, dtype=bool)
    new[1:] = parent[1:] != parent[:-1]  # sorted cells: each parent's children in a row
    of = np.cumsum(new) - 1
    pface, pa, pb, psure = centre_keys(parent[new].view(np.uint64), lattices)
    deep = psure & wholly_inside_face(pface, pa, pb, lattices, margin=1.0)
    face, a, b = pface[of], pa[of], pb[of]
    base = (signed >> 45) & 0x7F
    usable = psure[of] & ~_pentagon_base_cells()[base]
    step_of = (base * 20 + face) * 8 + digit  # the (base cell, face, digit) set
    sets = 128 * 20 * 8
    probe = np.flatnonzero(usable & deep[of])
    first, last = np.full(sets, cells.size), np.full(sets, -1)
    np.minimum.at(first, step_of[probe], probe)
    np.maximum.at(last, step_of[probe], probe)
    read = np.flatnonzero(first < last)
    sample = np.concatenate([first[read], last[read]])
    sface, sa, sb, ssure = centre_keys(cells[sample], lattices)
    da, db = sa - a[sample], sb - b[sample]
    half = read.size
    unit = np.maximum(np.maximum(np.abs(da), np.abs(db)), np.abs(da + db))  # 0 or 1: a step
    agree = (ssure[:half] & ssure[half:] & (sface[:half] == face[first[read]])
             & (sface[half:] == face[last[read]])
             & (da[:half] == da[half:]) & (db[:half] == db[half:])
             & (unit[:half] == np.where(read % 8 == 0, 0, 1)))  # digit 0: no step
    step_a, step_b = np.zeros(sets, np.int64), np.zeros(sets, np.int64)
    known = np.zeros(sets, dtype=bool)
    step_a[read], step_b[read], known[read] = da[:half], db[:half], agree
    a = a + step_a[step_of]
    b = b + step_b[step_of]
    sure = usable & known[step_of]
    sure[sure] = wholly_inside_face(face[sure], a[sure], b[sure], lattices)
    ask = np.flatnonzero(~sure)
    if ask.size:
        face[ask], a[ask], b[ask], sure[ask] = centre_keys(cells[ask], lattices)
    return face, a, b, sure


@dataclass(frozen=True)
class H3LatticeTable:
    """Per face, a table from hexagon (a, b) to partition position, over the cells' span.

    Examples
    --------
    >>> import shapely
    >>> from h3ronpy import vector as h3vector
    >>> cells = np.sort(np.asarray(h3vector.geometry_to_cells(shapely.box(-100, 40, -99, 41), 5)))
    >>> table = H3LatticeTable.build(cells, 5)
    >>> where = table.lookup(np.array([-99.5, -97.0, 10.0]), np.array([40.5, 40.5, 10.0]))
    >>> bool(where[0] >= 0), int(where[1]), int(where[2]) == ASK_H3  # in, out, another face
    (True, -1, True)
    """

    resolution: int
    faces: NDArray[np.int64]  # the faces of the partition cells' centres
    offset: NDArray[np.int64]  # (20,) start of each face's block in ``labels``
    a0: NDArray[np.int64]
    b0: NDArray[np.int64]
    na: NDArray[np.int64]  # 0: no cell of the partition has its centre on this face
    nb: NDArray[np.int64]
    labels: NDArray[np.int32]

    @classmethod
    def build(cls, cells: NDArray[np.uint64], resolution: int) -> H3LatticeTable | None:
        """Build the table of a partition's ``cells`` (None: resolution too coarse, too sparse)."""
        if resolution < MIN_RESOLUTION or cells.size == 0:
            return None
        lattices = face_lattices(resolution)
        face, a, b, sure = cell_keys(cells, resolution, lattices)
        position = np.flatnonzero(sure)  # a centre on a face edge: its points go to H3
        face, a, b = face[position], a[position], b[position]
        a0, b0 = np.zeros(20, np.int64), np.zeros(20, np.int64)
        na, nb = np.zeros(20, np.int64), np.zeros(20, np.int64)
        for f in np.flatnonzero(np.bincount(face, minlength=20)):
            on = face == f
            a0[f], b0[f] = a[on].min(), b[on].min()
            na[f], nb[f] = a[on].max() - a0[f] + 1, b[on].max() - b0[f] + 1
        sizes = na * nb
        if sizes.sum() > _TABLE_PER_CELL * cells.size + _TABLE_SLACK:
            return None
        offset = np.r_[0, np.cumsum(sizes)[:-1]]
        labels = np.full(int(sizes.sum()), -1, dtype=np.int32)
        labels[offset[face] + (a - a0[face]) * nb[face] + (b - b0[face])] = position
        return cls(resolution, np.flatnonzero(na), offset, a0, b0, na, nb, labels)

    def lookup(self, lon: NDArray[np.float64], lat: NDArray[np.float64]) -> NDArray[np.int64]:
        """Return each point's position, -1 (in no cell of the partition) or :data:`ASK_H3`."""
        lattices = face_lattices(self.resolution)
        out = np.empty(lon.size, dtype=np.int64)
        for start in range(0, lon.size, _BLOCK):
            stop = min(start + _BLOCK, lon.size)
            face, a, b, sure = lattice_keys(np.radians(lat[start:stop]),
                                            np.radians(lon[start:stop]), lattices, self.faces)
            ia, ib = a - self.a0[face], b - self.b0[face]
            listed = (ia >= 0) & (ia < self.na[face]) & (ib >= 0) & (ib < self.nb[face])
            index = np.where(listed, self.offset[face] + ia * self.nb[face] + ib, 0)
            label = np.where(listed, self.labels[index] if self.labels.size else -1, -1)
            # not a partition cell's key: outside for sure only when the hexagon is whole
            check = np.flatnonzero(label < 0)
            whole = wholly_inside_face(face[check], a[check], b[check], lattices)
            label[check[~whole]] = ASK_H3
            out[start:stop] = np.where(sure, label, ASK_H3)
        return out
