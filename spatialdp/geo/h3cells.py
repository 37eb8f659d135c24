"""H3 cell arrays: parsing, validation, parents, polygons -> cells, hexagons.

Every function here works on whole ``uint64`` arrays at once through h3ronpy's
vectorised Rust core, never on one cell at a time. Cells are kept as ``uint64``
internally; :func:`cells_to_str` gives the usual hexadecimal strings for display.
Public functions check their cells (:func:`parse_cells`) and arguments with
:mod:`spatialdp._validation`: bad input raises an
:class:`~spatialdp.exceptions.InvalidInput` (or its subclass
:class:`~spatialdp.exceptions.InvalidCells`), never an error from h3ronpy.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import h3ronpy
import numpy as np
import pandas as pd
import pyarrow as pa
import shapely
from h3ronpy import vector as h3vector
from numpy.typing import ArrayLike, NDArray

from spatialdp._validation import check_integer, check_resolution
from spatialdp.exceptions import InvalidCells, InvalidInput
from spatialdp.geo import _cover
from spatialdp.geo._checks import (
    as_array,
    check_lonlat,
    check_polygons,
    kind_name,
    short_repr,
)
from spatialdp.geo._cover import CONTAINMENT_MODES, MAX_LIST_CELLS

__all__ = [
    "CONTAINMENT_MODES",
    "MAX_LIST_CELLS",
    "Containment",
    "cell_parents",
    "cell_polygons",
    "cells_resolution",
    "cells_to_str",
    "grid_disk_lists",
    "latlng_to_cells",
    "parse_cells",
    "polygons_to_cell_lists",
    "rollup_counts",
    "single_resolution",
]

Containment = Literal["center", "overlap", "full"]

_FIX = "give hexadecimal cell ids such as '8a2a1072b59ffff' or uint64 integers"


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
    parsed = pa.array(h3ronpy.cells_parse(np.where(hexadecimal, text, "0").astype(object),
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
    valid = _arrow_to_numpy(h3ronpy.cells_valid(as_int, booleanarray=True)).astype(bool)
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
    return _arrow_to_numpy(h3ronpy.cells_to_string(cells)).astype("<U15")


def cells_resolution(cells: ArrayLike) -> NDArray[np.int64]:
    """Return the resolution of each cell (h3ronpy's ``cells_resolution``).

    Examples
    --------
    >>> cells_resolution(parse_cells(["85283473fffffff"]))
    array([5])
    """
    return _resolutions(parse_cells(cells))


def _resolutions(cells: NDArray[np.uint64]) -> NDArray[np.int64]:
    if cells.size == 0:
        return np.empty(0, dtype=np.int64)
    return _arrow_to_numpy(h3ronpy.cells_resolution(cells)).astype(np.int64)


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
    res = np.unique(_resolutions(parse_cells(cells)))
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
    return _parents(parse_cells(cells), resolution)


def _parents(cells: NDArray[np.uint64], resolution: int) -> NDArray[np.uint64]:
    if cells.size == 0:
        return np.empty(0, dtype=np.uint64)
    current = _resolutions(cells)
    if (current < resolution).any():
        raise InvalidCells(
            f"cells of resolution {int(current.min())} have no parent at the finer "
            f"resolution {resolution}; choose a resolution <= {int(current.min())}"
        )
    # Towards a coarser resolution change_resolution gives exactly one cell per cell.
    parents = _arrow_to_numpy(h3ronpy.change_resolution(cells, resolution)).astype(np.uint64)
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
    parents, inverse = np.unique(_parents(cells, resolution), return_inverse=True)
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
    cells = _latlng_to_cells(lat_arr, lon_arr, resolution)
    return cells if cells.flags.writeable else cells.copy()


def _latlng_to_cells(lat: NDArray[np.float64], lon: NDArray[np.float64], resolution: int
                     ) -> NDArray[np.uint64]:
    """Return the cells of checked coordinates (possibly a read-only view of h3ronpy's)."""
    if lat.size == 0:
        return np.empty(0, dtype=np.uint64)
    cells = _arrow_to_numpy(h3vector.coordinates_to_cells(lat, lon, resolution))
    return cells.astype(np.uint64, copy=False)


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
    return _cover.cell_polygons_of(parsed)


def polygons_to_cell_lists(
    geometries: ArrayLike,
    resolution: int,
    containment: Containment = "center",
    *,
    max_cells: int = MAX_LIST_CELLS,
) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    """Return the cells of each polygon, as CSR-style ``(offsets, cells)``.

    The cells of polygon ``i`` are ``cells[offsets[i]:offsets[i + 1]]``.
    Polygons are read as GeoPandas draws them (see :mod:`spatialdp.geo._antimeridian`):
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
    mode = _cover.check_containment(containment)
    limit = check_integer(max_cells, "max_cells", low=1, fix="pass a positive whole number")
    if isinstance(geometries, shapely.Geometry):
        geometries = [geometries]
    geoms = np.asarray(geometries, dtype=object).ravel()
    check_polygons(geoms, "the polygons")
    _cover.check_size(geoms, resolution, limit, "for these polygons")
    return _cover.cell_lists(geoms, resolution, mode)


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
    lists = pa.array(h3ronpy.grid_disk(cells, k))
    offsets = lists.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    return offsets, lists.values.to_numpy(zero_copy_only=False).astype(np.uint64)
