"""H3 cell arrays: parsing, validation, parents, polygons -> cells, hexagons.

Every function here works on whole ``uint64`` arrays at once (h3ronpy's
vectorised Rust core and plain bit operations), never on one cell at a time.
Cells are kept as ``uint64`` internally; :func:`cells_to_str` gives the usual
hexadecimal strings for display.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import h3ronpy
import numpy as np
import pyarrow as pa
import shapely
from h3ronpy import vector as h3vector
from numpy.typing import ArrayLike, NDArray

from spatialdp.exceptions import InvalidCells, InvalidInput

__all__ = [
    "CONTAINMENT_MODES",
    "Containment",
    "cell_parents",
    "cell_polygons",
    "cells_resolution",
    "cells_to_str",
    "latlng_to_cells",
    "parse_cells",
    "polygons_to_cell_lists",
    "rollup_counts",
]

Containment = Literal["center", "overlap", "full"]

#: The containment modes of :func:`polygons_to_cell_lists`, named as in h3-py's
#: ``h3shape_to_cells_experimental``: a cell belongs to a polygon when its
#: centre lies inside (``center``), when it intersects the polygon at all
#: (``overlap``), or when it lies wholly inside (``full``).
CONTAINMENT_MODES: dict[str, Any] = {
    "center": h3ronpy.ContainmentMode.ContainsCentroid,
    "overlap": h3ronpy.ContainmentMode.IntersectsBoundary,
    "full": h3ronpy.ContainmentMode.ContainsBoundary,
}

# Bit layout of an H3 cell index (https://h3geo.org/docs/core-library/h3Indexing).
_RES_OFFSET = np.uint64(52)
_RES_MASK = np.uint64(0xF) << _RES_OFFSET
_DIGIT_BITS = 3
_MAX_RES = 15


def _arrow_to_numpy(array: Any) -> NDArray[Any]:
    return pa.array(array).to_numpy(zero_copy_only=False)


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
        If any id is not a valid H3 cell (the message names the first ones).

    Examples
    --------
    >>> parse_cells(["85283473fffffff"])
    array([599686042433355775], dtype=uint64)
    """
    values = cells if isinstance(cells, np.ndarray) else np.asarray(list(cells))  # type: ignore[arg-type]
    if values.size == 0:
        return np.empty(0, dtype=np.uint64)
    if values.dtype.kind in "OUS":
        text = values.ravel().astype(str).astype(object)
        parsed = pa.array(h3ronpy.cells_parse(text, set_failing_to_invalid=True))
        unreadable = parsed.is_null().to_numpy(zero_copy_only=False)
        if unreadable.any():
            raise InvalidCells(
                f"{int(unreadable.sum())} of {text.size} values are not valid H3 cells (first: "
                f"{text[unreadable][:3].tolist()}); give hexadecimal cell ids such as "
                "'8a2a1072b59ffff' or uint64 integers"
            )
        as_int = parsed.to_numpy(zero_copy_only=False).astype(np.uint64)
    elif values.dtype.kind in "iu":
        if values.dtype.kind == "i" and (values < 0).any():
            raise InvalidCells(f"negative H3 cell ids {values[values < 0][:3].tolist()}")
        as_int = values.astype(np.uint64).ravel()
    else:
        raise InvalidCells(
            f"H3 cell ids must be strings or integers, got dtype {values.dtype}"
        )
    valid = _arrow_to_numpy(h3ronpy.cells_valid(as_int, booleanarray=True)).astype(bool)
    if not valid.all():
        bad = [format(int(c), "x") for c in as_int[~valid][:3]]  # may not be cells at all
        raise InvalidCells(
            f"{int((~valid).sum())} of {as_int.size} values are not valid H3 cells "
            f"(first: {bad}); check that the ids are H3 cells, not vertexes or edges"
        )
    return as_int


def cells_to_str(cells: NDArray[np.uint64]) -> NDArray[np.str_]:
    """Hexadecimal strings of ``uint64`` H3 cells (the form ``h3`` prints).

    Examples
    --------
    >>> cells_to_str(np.array([599686042433355775], dtype=np.uint64))
    array(['85283473fffffff'], dtype='<U15')
    """
    cells = np.asarray(cells, dtype=np.uint64)
    if cells.size == 0:
        return np.empty(0, dtype="<U15")
    return _arrow_to_numpy(h3ronpy.cells_to_string(cells)).astype("<U15")


def cells_resolution(cells: NDArray[np.uint64]) -> NDArray[np.int64]:
    """Resolution of each cell, read from its bits.

    Examples
    --------
    >>> cells_resolution(parse_cells(["85283473fffffff"]))
    array([5])
    """
    cells = np.asarray(cells, dtype=np.uint64)
    return ((cells & _RES_MASK) >> _RES_OFFSET).astype(np.int64)


def _check_resolution(resolution: int) -> int:
    if not isinstance(resolution, (int, np.integer)) or not 0 <= int(resolution) <= _MAX_RES:
        raise InvalidInput(
            f"H3 resolution {resolution!r} is outside 0..{_MAX_RES}; pick an integer in that range"
        )
    return int(resolution)


def single_resolution(cells: NDArray[np.uint64]) -> int:
    """The one resolution all ``cells`` share; refuse a mix.

    Raises
    ------
    InvalidCells
        If the cells mix resolutions or there are none.
    """
    res = np.unique(cells_resolution(cells))
    if res.size == 0:
        raise InvalidCells("no H3 cells given; a partition needs at least one cell")
    if res.size > 1:
        raise InvalidCells(
            f"H3 cells mix resolutions {res.tolist()}; a partition uses one resolution: "
            "roll the finer cells up with cell_parents(cells, resolution) first"
        )
    return int(res[0])


def cell_parents(cells: ArrayLike, resolution: int) -> NDArray[np.uint64]:
    """Parent of every cell at a coarser ``resolution``, by bit operations.

    Parameters
    ----------
    cells : array-like of uint64
        Valid H3 cells (see :func:`parse_cells`), all at least as fine as ``resolution``.
    resolution : int
        Target resolution.

    Examples
    --------
    >>> fine = parse_cells(["8a2a1072b59ffff"])
    >>> cells_to_str(cell_parents(fine, 5))
    array(['852a1073fffffff'], dtype='<U15')
    """
    resolution = _check_resolution(resolution)
    cells = np.asarray(cells, dtype=np.uint64)
    current = cells_resolution(cells)
    if (current < resolution).any():
        raise InvalidCells(
            f"cells of resolution {int(current.min())} have no parent at the finer "
            f"resolution {resolution}; choose a resolution <= {int(current.min())}"
        )
    # Digits for resolutions resolution+1..15 are set to 7 (all ones); then set the
    # resolution field.
    unused_bits = _DIGIT_BITS * (_MAX_RES - resolution)
    digit_mask = np.uint64((1 << unused_bits) - 1)
    parents = (cells | digit_mask) & ~_RES_MASK
    return parents | (np.uint64(resolution) << _RES_OFFSET)


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

    Examples
    --------
    >>> fine = parse_cells(["8a2a1072b59ffff", "8a2a1072b597fff"])
    >>> parents, sums = rollup_counts(fine, [3, 4], 5)
    >>> cells_to_str(parents), sums
    (array(['852a1073fffffff'], dtype='<U15'), array([7]))
    """
    counts = np.asarray(counts)
    cells = np.asarray(cells, dtype=np.uint64)
    if counts.shape != cells.shape:
        raise InvalidInput(
            f"counts has shape {counts.shape} but cells has shape {cells.shape}; "
            "give one value per cell"
        )
    parents, inverse = np.unique(cell_parents(cells, resolution), return_inverse=True)
    sums = np.zeros(parents.size, dtype=np.result_type(counts.dtype, np.int64))
    np.add.at(sums, inverse, counts)
    return parents, sums


def latlng_to_cells(lat: NDArray[np.float64], lon: NDArray[np.float64], resolution: int
                    ) -> NDArray[np.uint64]:
    """Cells containing each (lat, lon), vectorised. Inputs must be checked already."""
    resolution = _check_resolution(resolution)
    return _arrow_to_numpy(h3vector.coordinates_to_cells(lat, lon, resolution)).astype(np.uint64)


def cell_polygons(cells: NDArray[np.uint64]) -> NDArray[np.object_]:
    """Hexagon (or pentagon) polygons of the cells, in lon/lat (EPSG:4326).

    Examples
    --------
    >>> poly = cell_polygons(parse_cells(["85283473fffffff"]))[0]
    >>> poly.geom_type, len(poly.exterior.coords)
    ('Polygon', 7)
    """
    wkb = _arrow_to_numpy(h3vector.cells_to_wkb_polygons(np.asarray(cells, dtype=np.uint64)))
    return np.asarray(shapely.from_wkb(wkb), dtype=object)


def polygons_to_cell_lists(
    geometries: NDArray[np.object_], resolution: int, containment: Containment = "center"
) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    """Cells of each polygon, as CSR-style ``(offsets, cells)``.

    The cells of polygon ``i`` are ``cells[offsets[i]:offsets[i + 1]]``.

    Parameters
    ----------
    geometries : numpy.ndarray of shapely (Multi)Polygons in EPSG:4326
    resolution : int
    containment : {"center", "overlap", "full"}
        See :data:`CONTAINMENT_MODES`.
    """
    resolution = _check_resolution(resolution)
    if containment not in CONTAINMENT_MODES:
        raise InvalidInput(
            f"containment={containment!r} is not one of {sorted(CONTAINMENT_MODES)}"
        )
    wkb = pa.array(shapely.to_wkb(geometries), type=pa.binary())
    lists = pa.array(
        h3vector.wkb_to_cells(wkb, resolution, containment_mode=CONTAINMENT_MODES[containment])
    )
    offsets = lists.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    cells = lists.values.to_numpy(zero_copy_only=False).astype(np.uint64)
    return offsets, cells


def grid_disk_lists(cells: NDArray[np.uint64], k: int = 1
                    ) -> tuple[NDArray[np.int64], NDArray[np.uint64]]:
    """Cells within ``k`` steps of each cell, as CSR-style ``(offsets, cells)``."""
    lists = pa.array(h3ronpy.grid_disk(np.asarray(cells, dtype=np.uint64), k))
    offsets = lists.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
    return offsets, lists.values.to_numpy(zero_copy_only=False).astype(np.uint64)
