"""H3 cell arrays: parsing, validation, parents, polygons -> cells, hexagons.

Every function here works on whole ``uint64`` arrays at once through h3ronpy's
vectorised Rust core, never on one cell at a time. Cells are kept as ``uint64``
internally; :func:`cells_to_str` gives the usual hexadecimal strings for display.
Public functions check their cells (:func:`parse_cells`) and arguments with
:mod:`spatialdp._validation`: bad input raises an
:class:`~spatialdp.exceptions.InvalidInput` (or its subclass
:class:`~spatialdp.exceptions.InvalidCells`), never an error from h3ronpy.

Polygons to cells. :func:`_cell_lists` is the one place spatialdp asks H3 for
the cells of polygons. Before it asks, :func:`_check_size` estimates how many
cells the answer holds (area over the mean cell area, plus one cell per edge
length of boundary) and refuses an answer too large to hold in memory.

Shapes that span the antimeridian or a pole. spatialdp reads every polygon the
way GeoPandas and shapely draw it: on the flat lon/lat plane, with coordinates
inside ``[-180, 180] x [-90, 90]``. H3 reads a polygon edge that spans more
than 180 degrees of longitude as crossing the antimeridian instead. The two
readings agree once no edge spans 180 degrees, so

* an edge that jumps more than 180 degrees between two longitudes that are not
  both on the antimeridian is refused as ambiguous
  (:func:`spatialdp.geo.lonlat.check_polygons`): it is either a shape meant to
  cross the antimeridian (give it split at +-180) or a very wide shape (give it
  with intermediate vertices);
* a polygon 180 degrees wide or more (a polar cap, a band around the globe, a
  shape split at the antimeridian) is cut into overlapping 90-degree strips
  before H3 sees it (:func:`_cut_into_strips`);
* H3 cells that straddle the antimeridian or hold a pole come back from h3ronpy
  as rings that jump across the map; :func:`_repair_cell_polygons` redraws them
  as the (Multi)Polygons GeoPandas expects.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import shapely
from numpy.typing import ArrayLike, NDArray

from spatialdp._validation import (
    as_array,
    check_choice,
    check_integer,
    check_resolution,
    kind_name,
    short_repr,
)
from spatialdp.exceptions import InvalidCells, InvalidInput
from spatialdp.geo.lonlat import check_lonlat, check_polygons

__all__ = [
    "CONTAINMENT_MODES",
    "MAX_LIST_CELLS",
    "Containment",
    "cell_parents",
    "cell_parents_unchecked",
    "cell_polygons",
    "cells_resolution",
    "cells_resolution_unchecked",
    "cells_to_str",
    "grid_disk_lists",
    "latlng_to_cells",
    "latlng_to_cells_unchecked",
    "parse_cells",
    "polygons_to_cell_lists",
    "rollup_counts",
    "single_resolution",
]

Containment = Literal["center", "overlap", "full"]

#: The containment modes, named as in h3-py's ``h3shape_to_cells_experimental``:
#: a cell belongs to a polygon when its centre lies inside (``center``), when it
#: intersects the polygon at all (``overlap``), or when it lies wholly inside (``full``).
#: Each maps to the name of its ``h3ronpy.ContainmentMode`` member.
CONTAINMENT_MODES: dict[str, str] = {
    "center": "ContainsCentroid",
    "overlap": "IntersectsBoundary",
    "full": "ContainsBoundary",
}

#: Most cells one call may list (estimated before H3 builds them). A cell list
#: costs about 30 bytes a cell at its peak, so this caps a call near 0.6 GB.
MAX_LIST_CELLS = 20_000_000

_EARTH_RADIUS_KM = 6371.0088
_KM_PER_DEGREE = np.pi * _EARTH_RADIUS_KM / 180.0

_FIX = "give hexadecimal cell ids such as '8a2a1072b59ffff' or uint64 integers"


def _h3() -> Any:
    """Return the ``h3`` module, imported on first use.

    h3, h3ronpy and its vector module are imported lazily (about 10 ms): a polygon
    partition, and so a cold ``synthetic_fleet`` call, never needs them.
    """
    import h3

    return h3


def _h3ronpy() -> Any:
    """Return the ``h3ronpy`` module, imported on first use (see :func:`_h3`)."""
    import h3ronpy

    return h3ronpy


def _h3ronpy_vector() -> Any:
    """Return ``h3ronpy.vector``, imported on first use (see :func:`_h3`)."""
    from h3ronpy import vector

    return vector


def _arrow_to_numpy(array: Any) -> NDArray[Any]:
    return np.asarray(pa.array(array).to_numpy(zero_copy_only=False))


def _as_array(cells: Any) -> NDArray[Any]:
    if isinstance(cells, np.ndarray):
        return cells
    if cells is None or isinstance(cells, (str, bytes, int, float, np.generic, shapely.Geometry)):
        raise InvalidCells(f"cells={short_repr(cells)} is a single value, not a list of "
                           "cells; wrap one cell in a list: [cell]")
    try:
        listed = list(cells)
    except TypeError:
        raise InvalidCells(f"cells={short_repr(cells)} is a {type(cells).__name__}, not a "
                           f"list or array of cells; {_FIX}") from None
    try:
        return np.asarray(listed)
    except (ValueError, TypeError, UnicodeError):
        raise InvalidCells(f"cells={short_repr(cells)} is nested unevenly or mixes text and "
                           f"bytes; {_FIX}, one per row") from None


def _parse_text(text: NDArray[np.object_]) -> NDArray[np.uint64]:
    hexadecimal = pd.Series(text, dtype=object).str.fullmatch(r"[0-9a-fA-F]{1,16}")
    parsed = pa.array(_h3ronpy().cells_parse(np.where(hexadecimal, text, "0").astype(object),
                                          set_failing_to_invalid=True))
    unreadable = parsed.is_null().to_numpy(zero_copy_only=False) | ~hexadecimal.to_numpy()
    if unreadable.any():
        raise InvalidCells(
            f"{int(unreadable.sum())} of {text.size} values are not valid H3 cells (first: "
            f"{text[unreadable][:3].tolist()}); {_FIX}"
        )
    return np.asarray(parsed.to_numpy(zero_copy_only=False), dtype=np.uint64)


def parse_cells(cells: ArrayLike | Iterable[Any]) -> NDArray[np.uint64]:
    """Turn H3 cells given as hex strings or integers into a checked ``uint64`` array.

    Parameters
    ----------
    cells : array-like of str or int
        H3 cell ids, e.g. ``"8a2a1072b59ffff"`` or ``622236750694711295``.

    Returns
    -------
    numpy.ndarray of uint64

    Raises
    ------
    InvalidCells
        If ``cells`` is not a list or array of strings or integers, or any id is not a
        valid H3 cell (the message names the first ones).

    Examples
    --------
    >>> parse_cells(["85283473fffffff"])
    array([599686042433355775], dtype=uint64)
    """
    values = _as_array(cells).ravel()
    if values.size == 0:
        return np.empty(0, dtype=np.uint64)
    kind: str = values.dtype.kind
    if kind == "O":
        inferred = pd.api.types.infer_dtype(values, skipna=False)
        kind = {"string": "U", "bytes": "S", "integer": "int"}.get(inferred, inferred)
        if kind == "int":
            try:
                values = np.asarray(values.tolist(), dtype=np.uint64)
            except OverflowError:
                raise InvalidCells(f"cells hold integers outside 0..2**64-1; {_FIX}") from None
            kind = "u"
    if kind == "S":
        values = np.char.decode(values.astype(bytes), "ascii", errors="replace")
        kind = "U"
    if kind == "U":
        as_int = _parse_text(values.astype(str).astype(object))
    elif kind in ("i", "u"):
        if kind == "i" and (values < 0).any():
            raise InvalidCells(f"negative H3 cell ids {values[values < 0][:3].tolist()}; {_FIX}")
        as_int = values.astype(np.uint64)
    else:
        named = kind_name(np.dtype(kind)) if len(kind) == 1 else kind
        raise InvalidCells(f"H3 cell ids must be strings or integers, got {named} values; {_FIX}")
    valid = _arrow_to_numpy(_h3ronpy().cells_valid(as_int, booleanarray=True)).astype(bool)
    if not valid.all():
        bad = [format(int(c), "x") for c in as_int[~valid][:3]]  # may not be cells at all
        raise InvalidCells(
            f"{int((~valid).sum())} of {as_int.size} values are not valid H3 cells "
            f"(first: {bad}); check that the ids are H3 cells, not vertexes or edges"
        )
    return as_int


def cells_to_str(cells: ArrayLike) -> NDArray[np.str_]:
    """Return the hexadecimal strings of H3 cells (the form ``h3`` prints).

    Examples
    --------
    >>> cells_to_str(np.array([599686042433355775], dtype=np.uint64))
    array(['85283473fffffff'], dtype='<U15')
    """
    return _to_str(parse_cells(cells))


def _to_str(cells: NDArray[np.uint64]) -> NDArray[np.str_]:
    if cells.size == 0:
        return np.empty(0, dtype="<U15")
    return _arrow_to_numpy(_h3ronpy().cells_to_string(cells)).astype("<U15")


def cells_resolution(cells: ArrayLike) -> NDArray[np.int64]:
    """Return the resolution of each cell (h3ronpy's ``cells_resolution``).

    Examples
    --------
    >>> cells_resolution(parse_cells(["85283473fffffff"]))
    array([5])
    """
    return cells_resolution_unchecked(parse_cells(cells))


def cells_resolution_unchecked(cells: NDArray[np.uint64]) -> NDArray[np.int64]:
    """Return each parsed cell's resolution (no validation: pass :func:`parse_cells`' output).

    Examples
    --------
    >>> cells_resolution_unchecked(parse_cells(["85283473fffffff"])).tolist()
    [5]
    """
    if cells.size == 0:
        return np.empty(0, dtype=np.int64)
    return _arrow_to_numpy(_h3ronpy().cells_resolution(cells)).astype(np.int64)


def single_resolution(cells: ArrayLike) -> int:
    """Return the one resolution all ``cells`` share; refuse a mix.

    Raises
    ------
    InvalidCells
        If the cells mix resolutions or there are none.

    Examples
    --------
    >>> single_resolution(["85283473fffffff"])
    5
    """
    res = np.unique(cells_resolution_unchecked(parse_cells(cells)))
    if res.size == 0:
        raise InvalidCells("no H3 cells given; a partition needs at least one cell")
    if res.size > 1:
        raise InvalidCells(
            f"H3 cells mix resolutions {res.tolist()}; a partition uses one resolution: "
            "roll the finer cells up with cell_parents(cells, resolution) first"
        )
    return int(res[0])


def cell_parents(cells: ArrayLike, resolution: int) -> NDArray[np.uint64]:
    """Return the parent of every cell at a coarser ``resolution`` (h3ronpy, vectorised).

    Parameters
    ----------
    cells : array-like of uint64 or str
        Valid H3 cells (see :func:`parse_cells`), all at least as fine as ``resolution``.
    resolution : int
        Target resolution.

    Raises
    ------
    InvalidCells
        Invalid cells, or cells coarser than ``resolution``.
    InvalidInput
        A resolution that is not a whole number in 0..15.

    Examples
    --------
    >>> fine = parse_cells(["8a2a1072b59ffff"])
    >>> cells_to_str(cell_parents(fine, 5))
    array(['852a1073fffffff'], dtype='<U15')
    """
    resolution = check_resolution(resolution)
    return cell_parents_unchecked(parse_cells(cells), resolution)


def cell_parents_unchecked(cells: NDArray[np.uint64], resolution: int) -> NDArray[np.uint64]:
    """Return each parsed cell's parent at a coarser resolution (no validation of the cells).

    Examples
    --------
    >>> cells_to_str(cell_parents_unchecked(parse_cells(["85283473fffffff"]), 4)).tolist()
    ['8428347ffffffff']
    """
    if cells.size == 0:
        return np.empty(0, dtype=np.uint64)
    current = cells_resolution_unchecked(cells)
    if (current < resolution).any():
        raise InvalidCells(
            f"cells of resolution {int(current.min())} have no parent at the finer "
            f"resolution {resolution}; choose a resolution <= {int(current.min())}"
        )
    # Towards a coarser resolution change_resolution gives exactly one cell per cell.
    parents = _arrow_to_numpy(_h3ronpy().change_resolution(cells, resolution)).astype(np.uint64)
    if parents.shape != cells.shape:  # pragma: no cover - h3ronpy contract
        raise InvalidCells("h3ronpy returned a parent list of another length")
    return parents


def rollup_counts(
    cells: ArrayLike, counts: ArrayLike, resolution: int
) -> tuple[NDArray[np.uint64], NDArray[Any]]:
    """Sum per-cell values into their parents at a coarser resolution.

    Coarse counts are built from fine cells, never by re-binning points: H3
    children do not tile their parent's area exactly, so re-binning would move
    points between parents.

    Returns
    -------
    parents : numpy.ndarray of uint64
        Sorted unique parent cells.
    sums : numpy.ndarray
        Sum of ``counts`` over the children of each parent.

    Raises
    ------
    InvalidInput
        Counts that are not finite numbers, or not one per cell.

    Examples
    --------
    >>> fine = parse_cells(["8a2a1072b59ffff", "8a2a1072b597fff"])
    >>> parents, sums = rollup_counts(fine, [3, 4], 5)
    >>> cells_to_str(parents), sums
    (array(['852a1073fffffff'], dtype='<U15'), array([7]))
    """
    resolution = check_resolution(resolution)
    parsed = parse_cells(cells)
    values = check_cell_values(counts, parsed.size, "counts")
    return _rollup(parsed, values, resolution)


def _rollup(cells: NDArray[np.uint64], values: NDArray[Any], resolution: int
            ) -> tuple[NDArray[np.uint64], NDArray[Any]]:
    parents, inverse = np.unique(cell_parents_unchecked(cells, resolution), return_inverse=True)
    sums = np.zeros(parents.size, dtype=np.result_type(values.dtype, np.int64))
    np.add.at(sums, inverse, values)
    return parents, sums


def check_cell_values(values: ArrayLike, n_cells: int, name: str) -> NDArray[Any]:
    """Return one finite number per cell (integers keep their dtype).

    Raises
    ------
    InvalidInput
        Non-numeric values, NaN or infinities, or not exactly ``n_cells`` values.
    """
    if isinstance(values, (str, bytes)) or values is None:
        raise InvalidInput(f"{name}={short_repr(values)} is not an array of numbers; "
                           "give one number per cell")
    arr = as_array(values, name, "give one number per cell")
    if arr.dtype.kind == "b":
        arr = arr.astype(np.int64)
    if arr.dtype.kind not in "iuf":
        raise InvalidInput(f"{name} holds {kind_name(arr.dtype)} values, not numbers; "
                           "give one number per cell")
    if arr.shape != (n_cells,):
        raise InvalidInput(f"{name} has shape {arr.shape}, but there are {n_cells} cells; "
                           "give one value per cell, in partition order")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise InvalidInput(f"{name} has {int(bad.sum())} NaN or infinite values (first at "
                           f"position {int(np.flatnonzero(bad)[0])}); give finite numbers")
    return arr


def latlng_to_cells(lat: ArrayLike, lon: ArrayLike, resolution: int) -> NDArray[np.uint64]:
    """Return the cell containing each (lat, lon), vectorised.

    Raises
    ------
    InvalidInput, CRSError
        Bad resolution, non-numeric, NaN/inf or out-of-range coordinates.

    Examples
    --------
    >>> cells_to_str(latlng_to_cells([37.3458], [-121.9764], 5))
    array(['85283473fffffff'], dtype='<U15')
    """
    resolution = check_resolution(resolution)
    lon_arr, lat_arr = check_lonlat(lon, lat)
    cells = latlng_to_cells_unchecked(lat_arr, lon_arr, resolution)
    return cells if cells.flags.writeable else cells.copy()


def latlng_to_cells_unchecked(lat: NDArray[np.float64], lon: NDArray[np.float64], resolution: int
                     ) -> NDArray[np.uint64]:
    """Return the cells of checked coordinates (possibly a read-only view of h3ronpy's).

    No validation: pass finite lon/lat in range (``geo.lonlat.points_lonlat`` checks them).

    Examples
    --------
    >>> cells = latlng_to_cells_unchecked(np.array([37.3458]), np.array([-121.9764]), 5)
    >>> cells_to_str(cells).tolist()
    ['85283473fffffff']
    """
    if lat.size == 0:
        return np.empty(0, dtype=np.uint64)
    found = _h3ronpy_vector().coordinates_to_cells(lat, lon, resolution)
    if getattr(found, "null_count", None) == 0 and hasattr(found, "to_numpy"):
        # no nulls: arro3's own view (pyarrow's round trip costs 10 ns a point more)
        return np.asarray(found.to_numpy()).astype(np.uint64, copy=False)
    return _arrow_to_numpy(found).astype(np.uint64, copy=False)


def cell_polygons(cells: ArrayLike) -> NDArray[np.object_]:
    """Return the hexagon (or pentagon) polygons of the cells, in lon/lat (EPSG:4326).

    A cell that straddles the antimeridian comes back as a MultiPolygon split at
    +-180, and a cell around a pole is closed over the pole, so that GeoPandas
    draws and measures them as the cells they are.

    Examples
    --------
    >>> poly = cell_polygons(parse_cells(["85283473fffffff"]))[0]
    >>> poly.geom_type, len(poly.exterior.coords)
    ('Polygon', 7)
    """
    parsed = parse_cells(cells)
    if parsed.size == 0:
        return np.empty(0, dtype=object)
    return _cell_polygons(parsed)


def polygons_to_cell_lists(
    geometries: ArrayLike,
    resolution: int,
    containment: Containment = "center",
    *,
    max_cells: int = MAX_LIST_CELLS,
) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    """Return the cells of each polygon, as CSR-style ``(offsets, cells)``.

    The cells of polygon ``i`` are ``cells[offsets[i]:offsets[i + 1]]``.
    Polygons are read as GeoPandas draws them (see the module docstring):
    polar caps and bands round the globe work; a shape that crosses the
    antimeridian must be given split at +-180.

    Parameters
    ----------
    geometries : array-like of shapely (Multi)Polygons in lon/lat degrees
    resolution : int
        H3 resolution, 0 to 15.
    containment : {"center", "overlap", "full"}
        See :data:`CONTAINMENT_MODES`.
    max_cells : int
        Refuse (before building anything) when the cells are estimated to number more
        than this, in all; default :data:`MAX_LIST_CELLS`.

    Raises
    ------
    InvalidInput
        Bad resolution, containment or geometries, or a cover larger than ``max_cells``.
    CRSError
        Coordinates outside lon/lat degrees.
    """
    resolution = check_resolution(resolution)
    mode = _check_containment(containment)
    limit = check_integer(max_cells, "max_cells", low=1, fix="pass a positive whole number")
    if isinstance(geometries, shapely.Geometry):
        geometries = [geometries]
    geoms = np.asarray(geometries, dtype=object).ravel()
    geoms = check_polygons(geoms, "the polygons")
    _check_size(geoms, resolution, limit, "for these polygons")
    return _cell_lists(geoms, resolution, mode)


def grid_disk_lists(cells: ArrayLike, k: int = 1
                    ) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    """Return the cells within ``k`` steps of each cell, as CSR-style ``(offsets, cells)``.

    Examples
    --------
    >>> offsets, disk = grid_disk_lists(["85283473fffffff"], 1)
    >>> offsets.tolist(), disk.size
    ([0, 7], 7)
    """
    k = check_integer(k, "k", low=0, high=100, fix="pass a small whole number of steps")
    return _grid_disk(parse_cells(cells), k)


def _grid_disk(cells: NDArray[np.uint64], k: int) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    if cells.size == 0:
        return np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.uint64)
    lists = pa.array(_h3ronpy().grid_disk(cells, k))
    offsets = lists.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    return offsets, lists.values.to_numpy(zero_copy_only=False).astype(np.uint64)


# ------------------------------------------------------------------ polygons -> cells
def _estimate_cells(geoms: NDArray[np.object_], resolution: int) -> float:
    """Estimate how many H3 cells at ``resolution`` the polygons touch, in all.

    The area on the sphere (through an equal-area cylindrical projection of the
    lon/lat shape, edges densified to 1 degree) over the mean cell area, plus the
    boundary length over the mean edge length: thin shapes have little area but
    still touch one cell per edge length along their border.
    """
    if geoms.size == 0:
        return 0.0
    dense = shapely.segmentize(geoms, 1.0)
    equal_area = shapely.transform(dense, lambda xy: np.column_stack(
        [np.radians(xy[:, 0]), np.sin(np.radians(np.clip(xy[:, 1], -90.0, 90.0)))]))
    area_km2 = float(shapely.area(equal_area).sum()) * _EARTH_RADIUS_KM**2
    local_km = shapely.transform(dense, lambda xy: np.column_stack(
        [xy[:, 0] * np.cos(np.radians(xy[:, 1])), xy[:, 1]]) * _KM_PER_DEGREE)
    boundary_km = float(shapely.length(shapely.boundary(local_km)).sum())
    return float(area_km2 / _h3().average_hexagon_area(resolution, "km^2")
                 + boundary_km / _h3().average_hexagon_edge_length(resolution, "km"))


def _check_size(geoms: NDArray[np.object_], resolution: int, max_cells: int, what: str) -> None:
    """Refuse a cover estimated to hold more than ``max_cells`` cells.

    Raises
    ------
    InvalidInput
        Naming the estimate, the limit and the finest resolution that fits.
    """
    estimate = _estimate_cells(geoms, resolution)
    if estimate <= max_cells:
        return
    fits = [r for r in range(resolution) if _estimate_cells(geoms, r) <= max_cells]
    advice = (f"use resolution={fits[-1]} or coarser" if fits
              else "cover a smaller area")
    raise InvalidInput(
        f"resolution={resolution} {what} would take about {estimate:,.0f} H3 cells, above "
        f"the limit of {max_cells:,} (about {estimate * 8 / 1e9:,.1f} GB for the ids "
        f"alone); {advice}, or split the area into parts"
    )


def _cell_polygons(cells: NDArray[np.uint64]) -> NDArray[np.object_]:
    """Return the polygons of valid cells, redrawn where they span +-180 or a pole."""
    wkb = pa.array(_h3ronpy_vector().cells_to_wkb_polygons(np.asarray(cells, dtype=np.uint64)))
    polys = np.asarray(shapely.from_wkb(wkb.to_numpy(zero_copy_only=False)), dtype=object)
    return _repair_cell_polygons(polys)


def _h3_lists(geoms: NDArray[np.object_], resolution: int, containment: str
              ) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    wkb = pa.array(shapely.to_wkb(geoms), type=pa.binary())
    mode = getattr(_h3ronpy().ContainmentMode, CONTAINMENT_MODES[containment])
    lists = pa.array(_h3ronpy_vector().wkb_to_cells(wkb, resolution, containment_mode=mode))
    offsets = lists.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    cells = lists.values.to_numpy(zero_copy_only=False).astype(np.uint64)
    # Sliced arrow lists may not start at 0.
    return offsets - offsets[0], cells[offsets[0]:offsets[-1]]


def _owned(offsets: NDArray[np.int64], owner: NDArray[np.int64]) -> NDArray[np.int64]:
    return np.repeat(owner, np.diff(offsets))


def _cell_lists(geoms: NDArray[np.object_], resolution: int, containment: str
               ) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    """Cells of each (checked) polygon as CSR-style ``(offsets, cells)``.

    Polygons narrower than 180 degrees go to H3 as they are. Wider ones are cut
    into strips; their cells are the union of the strips' cells, sorted. In
    ``full`` mode a cell that straddles a cut is in no strip wholly, so the
    strips' overlapping cells are also tested against the whole polygon.
    """
    if geoms.size == 0:
        return np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.uint64)
    wide = _is_wide(geoms)
    if not wide.any():
        return _h3_lists(geoms, resolution, containment)
    narrow = np.flatnonzero(~wide)
    strips, strip_owner = _cut_into_strips(geoms[wide])
    strip_owner = np.flatnonzero(wide)[strip_owner]
    pieces = np.concatenate([geoms[narrow], strips])
    piece_owner = np.concatenate([narrow, strip_owner])
    offsets, cells = _h3_lists(pieces, resolution, containment)
    owner = _owned(offsets, piece_owner)
    if containment == "full" and strips.size:
        over_offsets, over_cells = _h3_lists(strips, resolution, "overlap")
        over_owner = _owned(over_offsets, strip_owner)
        known = pd.MultiIndex.from_arrays([over_owner, over_cells]).isin(
            pd.MultiIndex.from_arrays([owner, cells]))  # already wholly in a strip
        test_cells, test_owner = over_cells[~known], over_owner[~known]
        covered = shapely.covers(geoms[test_owner], _cell_polygons(test_cells))
        cells = np.concatenate([cells, test_cells[covered]])
        owner = np.concatenate([owner, test_owner[covered]])
    order = np.lexsort((cells, owner))
    cells, owner = cells[order], owner[order]
    first = np.ones(cells.size, dtype=bool)
    first[1:] = (cells[1:] != cells[:-1]) | (owner[1:] != owner[:-1])
    cells, owner = cells[first], owner[first]
    return np.searchsorted(owner, np.arange(geoms.size + 1)).astype(np.int64), cells


def _check_containment(containment: Any) -> str:
    """Return a containment mode, refusing anything else."""
    return check_choice(containment, "containment", tuple(CONTAINMENT_MODES))


# ------------------------------------------------------------------ antimeridian and poles
#: Strips overlap by this many degrees, so a cell centre on a cut is in a strip.
_STRIP_OVERLAP = 1e-6
_STRIP_WEST = np.array([-180.0, -90.0, 0.0, 90.0])
_STRIP_WIDTH = 90.0


def _is_wide(geoms: NDArray[np.object_]) -> NDArray[np.bool_]:
    """Mark the geometries 180 degrees of longitude wide or more (cut before H3)."""
    bounds = shapely.bounds(geoms)
    return np.asarray((bounds[:, 2] - bounds[:, 0]) >= 180.0)


def _cut_into_strips(geoms: NDArray[np.object_]
                    ) -> tuple[NDArray[np.object_], NDArray[np.int64]]:
    """Cut polygons into overlapping 90-degree strips of longitude.

    Every piece is narrower than 180 degrees, so H3 reads it as GeoPandas does.
    The strips overlap by a hair, so a point inside a polygon is inside the
    interior of one of its pieces.

    Returns
    -------
    pieces : numpy.ndarray of Polygons
    owner : numpy.ndarray of int64
        Position in ``geoms`` of the polygon each piece was cut from.
    """
    n = geoms.size
    strips = shapely.box(_STRIP_WEST - _STRIP_OVERLAP, -90.0,
                         _STRIP_WEST + _STRIP_WIDTH + _STRIP_OVERLAP, 90.0)
    owner = np.repeat(np.arange(n), strips.size)
    cut = shapely.intersection(geoms[owner], np.tile(strips, n))
    parts, part_index = shapely.get_parts(cut, return_index=True)
    polygonal = shapely.get_type_id(parts) == shapely.GeometryType.POLYGON
    keep = polygonal & ~shapely.is_empty(parts)
    return (np.asarray(parts[keep], dtype=object),
            owner[part_index[keep]].astype(np.int64))


def _repair_cell_polygons(polys: NDArray[np.object_]) -> NDArray[np.object_]:
    """Redraw cell polygons that straddle the antimeridian or hold a pole.

    h3ronpy writes such a cell as one ring whose longitudes jump from about 180
    to about -180, which GeoPandas reads as a band across the whole map. The
    ring is unwrapped (longitudes made continuous), closed over the pole when it
    goes once round the globe, and split at +-180 into a MultiPolygon.
    Other polygons are returned unchanged.
    """
    out = np.asarray(polys, dtype=object).copy()
    bounds = shapely.bounds(out)
    bad = np.flatnonzero((bounds[:, 2] - bounds[:, 0]) > 180.0)
    if bad.size == 0:
        return out
    coords, vertex_ring = shapely.get_coordinates(
        shapely.get_exterior_ring(out[bad]), return_index=True)
    lon = coords[:, 0]
    step = np.zeros(lon.size)
    same_ring = vertex_ring[1:] == vertex_ring[:-1]
    diff = np.diff(lon)
    step[1:] = np.where(same_ring & (np.abs(diff) > 180.0), -360.0 * np.sign(diff), 0.0)
    shift = np.cumsum(step)
    ring_start = np.searchsorted(vertex_ring, np.arange(bad.size))
    shift -= np.repeat(shift[ring_start], np.diff(np.append(ring_start, lon.size)))
    unwrapped = np.column_stack([lon + shift, coords[:, 1]])
    ring_end = np.append(ring_start[1:], lon.size) - 1
    net = unwrapped[ring_end, 0] - unwrapped[ring_start, 0]
    redrawn = np.empty(bad.size, dtype=object)
    closed = np.abs(net) < 1.0
    if closed.any():
        keep = np.isin(vertex_ring, np.flatnonzero(closed))
        redrawn[closed] = shapely.polygons(
            shapely.linearrings(unwrapped[keep],
                                indices=np.unique(vertex_ring[keep], return_inverse=True)[1]))
    for i in np.flatnonzero(~closed):  # a cell around a pole: one per pole and resolution
        ring = unwrapped[ring_start[i]:ring_end[i] + 1]
        pole = 90.0 if ring[:, 1].mean() > 0 else -90.0
        redrawn[i] = shapely.Polygon(np.vstack(
            [ring, [[ring[-1, 0], pole], [ring[0, 0], pole]]]))
    world = shapely.box(-180.0, -90.0, 180.0, 90.0)
    middle = shapely.intersection(redrawn, world)
    west_part = shapely.intersection(_translate(redrawn, 360.0), world)
    east_part = shapely.intersection(_translate(redrawn, -360.0), world)
    joined = shapely.union(shapely.union(middle, west_part), east_part)
    out[bad] = shapely.make_valid(joined, method="structure", keep_collapsed=False)
    return out


def _translate(geoms: NDArray[np.object_], dlon: float) -> NDArray[np.object_]:
    return np.asarray(shapely.transform(geoms, lambda xy: xy + np.array([dlon, 0.0])),
                      dtype=object)
