from __future__ import annotations

import h3
import numpy as np
import pytest
import shapely
from hypothesis import given, settings
from hypothesis import strategies as st

from spatialdp.exceptions import InvalidCells, InvalidInput
from spatialdp.geo import h3cells


def test_parse_cells_accepts_strings_and_ints() -> None:
    cell = h3.latlng_to_cell(40.0, -105.0, 7)
    as_int = h3.str_to_int(cell)
    np.testing.assert_array_equal(h3cells.parse_cells([cell]), [as_int])
    ints = np.array([as_int], dtype=np.uint64)
    np.testing.assert_array_equal(h3cells.parse_cells(ints), [as_int])
    assert h3cells.cells_to_str(h3cells.parse_cells([cell]))[0] == cell


@pytest.mark.parametrize("bad", [["zz"], ["8a2a1072b59fff0"], [5], [-3]])
def test_parse_cells_refuses_invalid(bad: list[object]) -> None:
    with pytest.raises(InvalidCells, match="H3 cell"):
        h3cells.parse_cells(bad)


def test_single_resolution_refuses_mix() -> None:
    cells = h3cells.parse_cells([h3.latlng_to_cell(40, -105, 5), h3.latlng_to_cell(40, -105, 6)])
    with pytest.raises(InvalidCells, match=r"mix resolutions \[5, 6\]"):
        h3cells.single_resolution(cells)


@settings(max_examples=60, deadline=None)
@given(
    lat=st.floats(-85, 85),
    lon=st.floats(-179.9, 179.9),
    fine=st.integers(1, 15),
    data=st.data(),
)
def test_parents_match_h3(lat: float, lon: float, fine: int, data: st.DataObject) -> None:
    coarse = data.draw(st.integers(0, fine))
    cell = h3.latlng_to_cell(lat, lon, fine)
    ours = h3cells.cell_parents(h3cells.parse_cells([cell]), coarse)
    assert h3cells.cells_to_str(ours)[0] == h3.cell_to_parent(cell, coarse)


def random_cells_with_pentagons(seed: int, n: int = 2000) -> list[str]:
    rng = np.random.default_rng(seed)
    lat = np.degrees(np.arcsin(rng.uniform(-1, 1, n)))
    lon = rng.uniform(-180, 180, n)
    res = rng.integers(0, 16, n)
    cells = [h3.latlng_to_cell(a, b, int(r)) for a, b, r in zip(lat, lon, res, strict=True)]
    pentagons = [p for r in range(16) for p in h3.get_pentagons(r)]
    # children of pentagons are pentagons and hexagons next to them
    pentagon_children = [c for p in h3.get_pentagons(3) for c in h3.cell_to_children(p, 5)]
    return cells + pentagons + pentagon_children


@pytest.mark.parametrize("seed", [0, 1])
def test_resolution_and_parents_match_h3_on_random_cells_and_pentagons(seed: int) -> None:
    """h3ronpy's vectorised resolution/parent functions replace the hand-written bits."""
    cells = random_cells_with_pentagons(seed)
    parsed = h3cells.parse_cells(cells)
    np.testing.assert_array_equal(h3cells.cells_resolution(parsed),
                                  [h3.get_resolution(c) for c in cells])
    for coarse in (0, 3, 7):
        fine = [c for c in cells if h3.get_resolution(c) >= coarse]
        ours = h3cells.cells_to_str(h3cells.cell_parents(h3cells.parse_cells(fine), coarse))
        assert ours.tolist() == [h3.cell_to_parent(c, coarse) for c in fine]
        assert np.isin(h3cells.parse_cells([h3.cell_to_parent(c, coarse) for c in fine
                                            if h3.is_pentagon(c)]),
                       h3cells.parse_cells([h3.int_to_str(p) for p in
                                            map(h3.str_to_int, h3.get_pentagons(coarse))])).all()


def test_no_hand_written_bit_operations_left() -> None:
    import inspect

    source = inspect.getsource(h3cells)
    assert "_RES_MASK" not in source
    assert "<< _RES_OFFSET" not in source
    assert "_h3ronpy().change_resolution" in source
    assert "_h3ronpy().cells_resolution" in source


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("85283473fffffff", "is a single value, not a list of cells"),
        (None, "is a single value"),
        (["10.2,45.5,5"], "not valid H3 cells"),  # h3ronpy would read it as lat, lon, res
        ([1.5], "must be strings or integers, got float values"),
        ([True], "must be strings or integers"),
        ([[1, 2], [3]], "nested unevenly"),
        ([2**70], "outside 0..2\\*\\*64-1"),
        ([1, None], "must be strings or integers, got mixed-integer values"),
        (np.array([0], dtype=np.uint64), "not valid H3 cells"),
    ],
)
def test_parse_cells_refuses_bad_shapes_of_input(bad: object, message: str) -> None:
    with pytest.raises(InvalidCells, match=message):
        h3cells.parse_cells(bad)  # type: ignore[arg-type]


def test_public_helpers_check_their_cells() -> None:
    """Invalid uint64 cells used to reach h3ronpy, which raised a bare ValueError."""
    junk = np.array([0, 5], dtype=np.uint64)
    for call in (h3cells.cells_to_str, h3cells.cells_resolution, h3cells.cell_polygons,
                 lambda c: h3cells.cell_parents(c, 2), lambda c: h3cells.grid_disk_lists(c)):
        with pytest.raises(InvalidCells, match="are not valid H3 cells"):
            call(junk)
    cells = h3cells.parse_cells([h3.latlng_to_cell(40, -105, 6)])
    with pytest.raises(InvalidInput, match="counts has 1 NaN"):
        h3cells.rollup_counts(cells, [np.nan], 5)
    with pytest.raises(InvalidInput, match="counts holds string values, not numbers"):
        h3cells.rollup_counts(cells, ["a"], 5)
    with pytest.raises(InvalidInput, match="resolution=True is a bool"):
        h3cells.cell_parents(cells, True)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="lat holds string values"):
        h3cells.latlng_to_cells(["40"], [-105.0], 5)


def test_parent_of_coarser_cell_refused() -> None:
    cells = h3cells.parse_cells([h3.latlng_to_cell(40, -105, 4)])
    with pytest.raises(InvalidCells, match="no parent at the finer resolution 6"):
        h3cells.cell_parents(cells, 6)


def test_rollup_counts_equals_sum_over_children() -> None:
    parent = h3.latlng_to_cell(40.0, -105.0, 5)
    children = h3.cell_to_children(parent, 7)
    cells = h3cells.parse_cells(children)
    counts = np.arange(cells.size)
    parents, sums = h3cells.rollup_counts(cells, counts, 5)
    assert h3cells.cells_to_str(parents).tolist() == [parent]
    assert sums.tolist() == [counts.sum()]


def test_rollup_from_cells_not_points() -> None:
    """Children do not tile their parent: rolling counts up differs from re-binning points."""
    parent = h3.latlng_to_cell(40.0, -105.0, 4)
    children = h3.cell_to_children(parent, 6)
    rng = np.random.default_rng(5)
    boundary = shapely.Polygon([(lng, lat) for lat, lng in h3.cell_to_boundary(parent)])
    minx, miny, maxx, maxy = boundary.buffer(0.05).bounds
    lat = rng.uniform(miny, maxy, 20000)
    lon = rng.uniform(minx, maxx, 20000)
    fine = np.array([h3.latlng_to_cell(a, b, 6) for a, b in zip(lat, lon, strict=True)])
    in_children = np.isin(fine, children)
    direct = np.array([h3.latlng_to_cell(a, b, 4) for a, b in zip(lat, lon, strict=True)]) == parent
    # The parent's own area and the union of its children disagree for some points.
    assert (in_children != direct).sum() > 0
    _, sums = h3cells.rollup_counts(
        h3cells.parse_cells(fine[in_children]), np.ones(int(in_children.sum()), dtype=int), 4
    )
    assert sums.tolist() == [int(in_children.sum())]


def test_polygons_to_cell_lists_modes_nest() -> None:
    poly = np.array([shapely.box(-101, 39, -99, 41)], dtype=object)
    sizes = {}
    for mode in ("full", "center", "overlap"):
        _, cells = h3cells.polygons_to_cell_lists(poly, 5, mode)  # type: ignore[arg-type]
        expected = h3.h3shape_to_cells_experimental(h3.geo_to_h3shape(poly[0]), 5, contain=mode)
        assert set(h3cells.cells_to_str(cells)) == set(expected)
        sizes[mode] = cells.size
    assert sizes["full"] < sizes["center"]
    assert sizes["center"] < sizes["overlap"]


def test_unknown_containment_refused() -> None:
    with pytest.raises(InvalidInput, match="containment='inside' is not one of"):
        h3cells.polygons_to_cell_lists(np.array([shapely.box(0, 0, 1, 1)]), 5, "inside")  # type: ignore[arg-type]


def test_bad_resolution_refused() -> None:
    with pytest.raises(InvalidInput, match=r"resolution=16 is above the limit <= 15"):
        h3cells.cell_parents(np.array([], dtype=np.uint64), 16)
