"""The grid index behind polygon Partition.assign gives exactly shapely's answer.

Every check compares three things point by point: the grid lookup, the exact
path (STRtree bounding boxes + prepared geometries) and a shapely reference
(``geopandas.sjoin(predicate="intersects")``, first region in partition order).
The points include polygon vertices, points on edges and shared borders,
points in holes and on islands, and points on the grid's own cell lines.
"""

from __future__ import annotations

from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spatialdp.geo import _grid, h3cells
from spatialdp.geo._grid import BoxBins, GridIndex, exact_positions
from spatialdp.geo.partition import Partition


def reference(geoms: np.ndarray, lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    """Return the first geometry (by position) each point intersects, -1 if none (sjoin)."""
    pts = gpd.GeoDataFrame(geometry=gpd.points_from_xy(lon, lat), crs=4326)
    regions = gpd.GeoDataFrame({"pos": np.arange(len(geoms))}, geometry=list(geoms), crs=4326)
    joined = gpd.sjoin(pts, regions, how="inner", predicate="intersects")
    first = joined.groupby(level=0).pos.min()
    return first.reindex(range(lon.size), fill_value=-1).to_numpy(dtype=np.int64)


def awkward_points(geoms: np.ndarray, grid: GridIndex, rng: np.random.Generator,
                   n_random: int = 20_000) -> tuple[np.ndarray, np.ndarray]:
    """Return random points plus vertices, points on edges and on the grid's cell lines."""
    west, south, east, north = shapely.total_bounds(geoms)
    pad_x, pad_y = 0.1 * (east - west), 0.1 * (north - south)
    lon = [rng.uniform(west - pad_x, east + pad_x, n_random)]
    lat = [rng.uniform(south - pad_y, north + pad_y, n_random)]
    rings = shapely.get_parts(shapely.boundary(geoms))
    vertices = shapely.get_coordinates(rings)
    lon.append(vertices[:, 0])
    lat.append(vertices[:, 1])
    on_edges = shapely.line_interpolate_point(rings[rng.integers(0, rings.size, 5_000)],
                                              rng.uniform(0, 1, 5_000), normalized=True)
    lon.append(shapely.get_x(on_edges))
    lat.append(shapely.get_y(on_edges))
    # Points on vertical and horizontal cell lines, and on the grid's outer edges.
    columns = rng.integers(0, grid.nx + 1, 3_000)
    lon.append(np.minimum(grid.west + columns / grid.inv_dx, grid.east))
    lat.append(rng.uniform(south, north, 3_000))
    rows = rng.integers(0, grid.ny + 1, 3_000)
    lon.append(rng.uniform(west, east, 3_000))
    lat.append(np.minimum(grid.south + rows / grid.inv_dy, grid.north))
    lon.append(np.array([west, east, west, east]))
    lat.append(np.array([south, north, north, south]))
    return np.concatenate(lon), np.concatenate(lat)


def check_exact(geoms: Any, seed: int = 0, n_random: int = 20_000) -> GridIndex:
    geoms = np.asarray(geoms, dtype=object)
    tree = shapely.STRtree(geoms)
    grid = GridIndex.build(geoms, tree)
    assert grid is not None
    lon, lat = awkward_points(geoms, grid, np.random.default_rng(seed), n_random)
    bins = BoxBins.build(geoms)  # None for a few regions of very unequal boxes
    if bins is not None:
        lon, lat = add_bin_lines(bins, lon, lat, np.random.default_rng(seed))
    expected = reference(geoms, lon, lat)
    np.testing.assert_array_equal(exact_positions(geoms, tree, lon, lat), expected)
    np.testing.assert_array_equal(grid.lookup(lon, lat), expected)
    if bins is not None:
        np.testing.assert_array_equal(bins.positions(geoms, lon, lat), expected)
    return grid


def add_bin_lines(bins: BoxBins, lon: np.ndarray, lat: np.ndarray, rng: np.random.Generator
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Append points on the bin lines of ``bins`` and on the regions' box edges."""
    columns = bins.west + rng.integers(0, bins.nx + 1, 2_000) * (bins.east - bins.west) / bins.nx
    rows = bins.south + rng.integers(0, bins.ny + 1, 2_000) * (bins.north - bins.south) / bins.ny
    box = bins.bounds[rng.integers(0, len(bins.bounds), 2_000)]
    return (np.concatenate([lon, columns, rng.uniform(bins.west, bins.east, 2_000),
                            box[:, 0], box[:, 2]]),
            np.concatenate([lat, rng.uniform(bins.south, bins.north, 2_000), rows,
                            box[:, 1], box[:, 3]]))


@pytest.mark.parametrize("loop_max", [0, 64], ids=["strtree", "box-pairs"])
@pytest.mark.parametrize("max_cells", [_grid.MIN_GRID_CELLS, 1 << 14], ids=["coarse", "fine"])
@pytest.mark.parametrize("enclave_first", [True, False])
def test_both_exact_paths_and_coarse_grids_match_sjoin(
        monkeypatch: pytest.MonkeyPatch, loop_max: int, max_cells: int,
        enclave_first: bool) -> None:
    """The box pairs (few regions) and the STRtree path give sjoin's first match, and
    so does a grid of any size (the cost model builds coarse grids first)."""
    monkeypatch.setattr(_grid, "LOOP_MAX_REGIONS", loop_max)
    big = shapely.box(0, 0, 12, 10)  # overlaps the donut world: the first region wins
    geoms = [big, *donut_world()] if enclave_first else [*donut_world(), big]
    geoms_arr = np.asarray(geoms, dtype=object)
    tree = shapely.STRtree(geoms_arr)
    grid = GridIndex.build(geoms_arr, tree, max_cells)
    assert grid is not None
    assert grid.nx * grid.ny <= max(max_cells, _grid.MIN_GRID_CELLS)
    lon, lat = awkward_points(geoms_arr, grid, np.random.default_rng(8), 5_000)
    bins = BoxBins.build(geoms_arr)
    assert bins is not None
    lon, lat = add_bin_lines(bins, lon, lat, np.random.default_rng(9))
    expected = reference(geoms_arr, lon, lat)
    np.testing.assert_array_equal(exact_positions(geoms_arr, tree, lon, lat), expected)
    np.testing.assert_array_equal(grid.lookup(lon, lat), expected)
    np.testing.assert_array_equal(bins.positions(geoms_arr, lon, lat), expected)


def test_border_segments_are_every_ring_edge() -> None:
    """Holes, multipolygon parts and ring closure: one segment per ring edge, per region."""
    geoms = np.asarray(donut_world(), dtype=object)
    region, x0, y0, x1, y1 = _grid._border_segments(geoms)
    rings = shapely.get_rings(shapely.get_parts(geoms))
    assert region.size == int((shapely.get_num_coordinates(rings) - 1).sum())
    np.testing.assert_array_equal(np.bincount(region), [8, 4, 12, 6, 6])
    lengths = np.hypot(x1 - x0, y1 - y0)
    per_region = np.bincount(region, lengths)
    np.testing.assert_allclose(per_region, shapely.length(shapely.boundary(geoms)))


def donut_world() -> list[shapely.Geometry]:
    """A region with a hole, an island in the hole, a multipolygon and a shared border."""
    donut = shapely.Polygon(
        [(0, 0), (10, 0), (10, 10), (0, 10)],
        holes=[[(3, 3), (7, 3), (7, 7), (3, 7)]],
    )
    island = shapely.box(4, 4, 6, 6)
    archipelago = shapely.MultiPolygon([shapely.box(12, 0, 13, 1), shapely.box(12, 2, 13, 3),
                                        shapely.box(14, 0, 15, 5)])
    # Shares the donut's east edge; its own east edge zigzags.
    neighbour = shapely.Polygon([(10, 0), (10, 10), (11.5, 10), (11, 6), (11.8, 2), (11.5, 0)])
    # Shares a diagonal border with the neighbour.
    wedge = shapely.Polygon([(11.5, 10), (11, 6), (11.8, 2), (11.5, 0), (11.9, 0), (11.9, 10)])
    return [donut, island, archipelago, neighbour, wedge]


@pytest.mark.parametrize("max_pairs", [_grid.MAX_PAIRS, 200], ids=["blocks", "halved"])
def test_box_pairs_find_points_on_box_edges_strip_lines_and_outside(
        monkeypatch: pytest.MonkeyPatch, max_pairs: int) -> None:
    """The few-regions test: points on every box edge and corner, on the strip and band
    lines of its sort, and outside the extent get sjoin's first match; more than one
    block of points, and blocks halved down to single points."""
    monkeypatch.setattr(_grid, "MAX_PAIRS", max_pairs)
    geoms = np.asarray(donut_world(), dtype=object)
    bounds = shapely.bounds(geoms)
    west, south = bounds[:, 0].min(), bounds[:, 1].min()
    east, north = bounds[:, 2].max(), bounds[:, 3].max()
    xs = np.r_[bounds[:, [0, 2]].ravel(), np.linspace(west, east, _grid.STRIPS + 1),
               west - 1.0, east + 1.0, 10.0, 11.5]
    ys = np.r_[bounds[:, [1, 3]].ravel(), np.linspace(south, north, 97), south - 1.0, 5.0]
    lon, lat = (grid.ravel() for grid in np.meshgrid(xs, ys))
    rng = np.random.default_rng(5)
    extra = _grid.LOOKUP_BLOCK + 10 - lon.size
    lon = np.r_[lon, rng.uniform(west - 0.5, east + 0.5, extra)]
    lat = np.r_[lat, rng.uniform(south - 0.5, north + 0.5, extra)]
    shapely.prepare(geoms)
    np.testing.assert_array_equal(exact_positions(geoms, None, lon, lat),
                                  reference(geoms, lon, lat))


def test_holes_islands_multipolygons_and_shared_borders() -> None:
    grid = check_exact(donut_world())
    assert grid.n_mixed > 0
    # Points in the hole but off the island belong to no region.
    assert grid.lookup(np.array([3.5, 5.0]), np.array([3.5, 5.0])).tolist() == [-1, 1]


def test_the_states_near_every_border(states: gpd.GeoDataFrame) -> None:
    geoms = states.sort_values("state").geometry.to_numpy()
    grid = check_exact(geoms, seed=1, n_random=50_000)
    # The grid is fine enough that few random points need the exact test.
    rng = np.random.default_rng(2)
    labels = grid.cell_labels(rng.uniform(-125, -66, 100_000), rng.uniform(24, 50, 100_000))
    assert (labels <= -2).mean() < 0.05


@pytest.mark.parametrize("enclave_first", [True, False])
def test_enclave_and_overlaps_go_to_the_first_region(enclave_first: bool) -> None:
    """A small region drawn over a big one (sloppy data) wins only if it comes first."""
    big = shapely.box(0, 0, 100, 50)
    enclave = shapely.box(40.0001, 20.0001, 40.0002, 20.0002)  # far smaller than a cell
    sliver = shapely.box(99.99, 0, 101, 50)  # overlaps the big region along its edge
    geoms = [enclave, big, sliver] if enclave_first else [big, enclave, sliver]
    check_exact(geoms)
    grid = GridIndex.build(np.asarray(geoms, dtype=object), shapely.STRtree(geoms))
    assert grid is not None
    inside = grid.lookup(np.array([40.00015]), np.array([20.00015]))
    assert inside.tolist() == [0]


def test_many_small_regions_h3_hexagons(states: gpd.GeoDataFrame) -> None:
    area = states[states.state.isin(["CO", "UT", "NM", "AZ"])]
    cells = np.unique(h3cells.polygons_to_cell_lists(area.geometry.to_numpy(), 4, "overlap")[1])
    grid = check_exact(h3cells.cell_polygons(cells), seed=3, n_random=30_000)
    assert grid.candidates.size >= grid.n_mixed


def test_tiny_and_thin_regions() -> None:
    tiny = shapely.box(10.0, 10.0, 10.0 + 1e-7, 10.0 + 1e-7)
    thin = shapely.box(-20.0, 5.0, 20.0, 5.0 + 1e-6)
    check_exact([tiny])
    check_exact([thin, tiny])


def test_antimeridian_split_region_and_polar_cap() -> None:
    split = shapely.MultiPolygon([shapely.box(170, -20, 180, -10),
                                  shapely.box(-180, -20, -170, -10)])
    cap = shapely.box(-180, 80, 180, 90)
    check_exact([split, cap])


def test_partition_paths_agree(states: gpd.GeoDataFrame) -> None:
    """The small-batch exact path and the grid path of Partition.assign agree."""
    part = Partition.from_geodataframe(states, "state")
    rng = np.random.default_rng(6)
    lon, lat = rng.uniform(-125, -66, 20_000), rng.uniform(24, 50, 20_000)
    before = exact_positions(part._prepared_geometries(), part.tree, lon, lat)
    assert part._grid is None
    first = part.assign(lon=lon, lat=lat).positions  # a first call: the exact test
    assert part._grid is None
    after = part.assign(lon=lon, lat=lat).positions  # 40,000 points seen: a grid is built
    assert part._grid is not None
    np.testing.assert_array_equal(before, first)
    np.testing.assert_array_equal(before, after)


def test_no_grid_where_borders_are_too_dense(monkeypatch: pytest.MonkeyPatch) -> None:
    """With too few cells for its borders, a partition keeps to the exact test."""
    monkeypatch.setattr(_grid, "MAX_GRID_CELLS", 64)
    cells = h3cells.latlng_to_cells(np.zeros(1), np.zeros(1), 3)
    disk = h3cells.grid_disk_lists(cells, 6)[1]
    frame = gpd.GeoDataFrame({"id": h3cells.cells_to_str(disk)},
                             geometry=h3cells.cell_polygons(disk), crs=4326)
    part = Partition.from_geodataframe(frame, "id")
    part._points_seen = part._grid_min_points()
    rng = np.random.default_rng(7)
    west, south, east, north = frame.total_bounds
    lon, lat = rng.uniform(west, east, 5_000), rng.uniform(south, north, 5_000)
    got = part.assign(lon=lon, lat=lat).positions
    assert part._grid_tried
    assert part._grid is None
    np.testing.assert_array_equal(got, reference(part._prepared_geometries(), lon, lat))


def test_empty_batches() -> None:
    geoms = np.asarray(donut_world(), dtype=object)
    tree = shapely.STRtree(geoms)
    grid = GridIndex.build(geoms, tree)
    assert grid is not None
    empty = np.empty(0)
    assert grid.lookup(empty, empty).shape == (0,)
    assert exact_positions(geoms, tree, empty, empty).shape == (0,)


polygons = st.builds(
    lambda x, y, w, h, k: shapely.Polygon(
        [(x, y), (x + w, y + h * k), (x + w * (1 - k), y + h), (x, y + h)]
    ),
    st.floats(-50, 50), st.floats(-50, 50), st.floats(1e-3, 30), st.floats(1e-3, 30),
    st.floats(0, 0.9),
)


@settings(max_examples=30, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(shapes=st.lists(polygons, min_size=1, max_size=6), seed=st.integers(0, 2**16))
def test_random_polygons_match_shapely(shapes: list[shapely.Polygon], seed: int) -> None:
    shapes = [shapely.make_valid(s) for s in shapes]
    shapes = [s for s in shapes if s.geom_type in ("Polygon", "MultiPolygon") and s.area > 0]
    if shapes:
        check_exact(shapes, seed=seed, n_random=2_000)


def test_reference_itself_on_a_border() -> None:
    """The reference counts border points in both regions and keeps the first."""
    geoms = np.asarray([shapely.box(1, 0, 2, 1), shapely.box(0, 0, 1, 1)], dtype=object)
    got = reference(geoms, np.array([1.0, 0.5, 5.0]), np.array([0.5, 0.5, 5.0]))
    assert got.tolist() == [0, 1, -1]
    assert pd.api.types.is_integer_dtype(got)


def test_grid_cost_model_builds_lazily_and_refines(states: gpd.GeoDataFrame,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A first small call builds nothing; a later one builds a coarse grid sized to the
    points seen; 16 times more points build a finer one; the answers never change."""
    builds: list[int] = []
    real_build = GridIndex.build.__func__  # type: ignore[attr-defined]

    def counting(cls: type[GridIndex], geoms: np.ndarray, tree: shapely.STRtree,
                 max_cells: int = _grid.MAX_GRID_CELLS) -> GridIndex | None:
        builds.append(max_cells)
        return real_build(cls, geoms, tree, max_cells)  # type: ignore[no-any-return]

    monkeypatch.setattr(GridIndex, "build", classmethod(counting))
    part = Partition.from_geodataframe(states, "state")
    rng = np.random.default_rng(9)
    lon, lat = rng.uniform(-125, -66, 20_000), rng.uniform(24, 50, 20_000)
    expected = exact_positions(part._prepared_geometries(), part.tree, lon, lat)
    assert 20_000 >= part._grid_min_points()  # enough points, but a first call:
    np.testing.assert_array_equal(part.assign(lon=lon, lat=lat).positions, expected)
    assert builds == []  # the first call pays no build
    np.testing.assert_array_equal(part.assign(lon=lon, lat=lat).positions, expected)
    assert builds == [8 * 40_000]  # GRID_CELLS_PER_POINT per point seen
    coarse = part._grid
    assert coarse is not None
    assert coarse.nx * coarse.ny <= 8 * 40_000
    part._points_seen = part._grid_min_points() - 1  # as after 16 times more points
    np.testing.assert_array_equal(part.assign(lon=lon, lat=lat).positions, expected)
    assert len(builds) == 2
    assert builds[1] >= min(16 * builds[0], _grid.MAX_GRID_CELLS)
    assert part._grid is not coarse
    big = Partition.from_geodataframe(states, "state")
    n = big._grid_first_batch()
    lon, lat = rng.uniform(-125, -66, n), rng.uniform(24, 50, n)
    big.assign(lon=lon, lat=lat)  # a first batch that pays for the build by itself
    assert big._grid is not None
    assert builds[-1] == n  # one cell per point: the cheapest build for a cold call
    big.assign(lon=lon, lat=lat)  # the next call refines it
    assert builds[-1] == 8 * 2 * n


def test_a_hexagon_partition_answers_through_its_bins(states: gpd.GeoDataFrame) -> None:
    """Above 64 regions a partition's exact test (before any grid) files the regions'
    boxes in bins, built once: no STRtree, no Point objects; sjoin's first match."""
    area = states[states.state.isin(["CO", "UT"])]
    cells = np.unique(h3cells.polygons_to_cell_lists(area.geometry.to_numpy(), 4, "overlap")[1])
    frame = gpd.GeoDataFrame({"id": h3cells.cells_to_str(cells)},
                             geometry=h3cells.cell_polygons(cells), crs=4326)
    part = Partition.from_geodataframe(frame, "id")
    geoms = part._prepared_geometries()
    rng = np.random.default_rng(4)
    west, south, east, north = shapely.total_bounds(geoms)
    lon, lat = rng.uniform(west - 1, east + 1, 5_000), rng.uniform(south - 1, north + 1, 5_000)
    vertices = shapely.get_coordinates(shapely.boundary(geoms))
    lon, lat = np.concatenate([lon, vertices[:, 0]]), np.concatenate([lat, vertices[:, 1]])
    got = part.assign(lon=lon, lat=lat, warn=False).positions
    assert isinstance(part._bins, BoxBins)
    assert part._tree is None
    assert part._grid is None
    np.testing.assert_array_equal(got, reference(geoms, lon, lat))


def test_boxes_too_large_to_file_fall_back_to_the_strtree() -> None:
    """Regions whose boxes span the whole extent (two far-apart parts each) would file
    into every bin: BoxBins refuses, and the partition's exact test uses the STRtree."""
    small = [shapely.box(x, y, x + 0.5, y + 0.5) for x in range(10) for y in range(10)]
    wide = [shapely.MultiPolygon([shapely.box(-3 + i / 20, -3, -2.96 + i / 20, -2.96),
                                  shapely.box(12 + i / 20, 12, 12.04 + i / 20, 12.04)])
            for i in range(40)]
    geoms = np.asarray(small + wide, dtype=object)
    assert BoxBins.build(geoms) is None
    frame = gpd.GeoDataFrame({"id": [f"r{i:03d}" for i in range(geoms.size)]},
                             geometry=list(geoms), crs=4326)
    part = Partition.from_geodataframe(frame, "id")
    rng = np.random.default_rng(5)
    lon, lat = rng.uniform(-4, 15, 3_000), rng.uniform(-4, 13, 3_000)
    got = part.assign(lon=lon, lat=lat, warn=False).positions
    assert part._bins is False
    assert part._tree is not None
    np.testing.assert_array_equal(got, reference(part._prepared_geometries(), lon, lat))


def test_a_small_fleet_never_buys_a_grid() -> None:
    """Below 5,000 points plus one per vertex (16,469 for the states) no grid is built:
    a 10^4-device fleet (about 12,000 points assigned in all) stays on the exact test,
    which its calls cost less than the build (about 12 ms) would."""
    from spatialdp.datasets import synthetic_fleet, us_states_partition

    part = us_states_partition()
    synthetic_fleet(10_000, rng=0, partition=part)
    assert part._grid is None
    assert 10_000 < part._points_seen < part._grid_min_points()


def test_a_cold_fleet_import_leaves_slow_modules_alone() -> None:
    """Importing the datasets (and so the partition) and a small fleet load neither
    scipy.sparse, scipy.ndimage, pyarrow.parquet nor tqdm (no bar below 100,000
    devices): a first call in a fresh process paid about 0.1 s of CPU for them. Nor
    h3 and h3ronpy (a polygon partition needs no H3) or pyogrio (the shipped states
    are read with sqlite3): another 40-80 ms."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    code = ("import sys, spatialdp.datasets; "
            "spatialdp.datasets.synthetic_fleet(2_000, rng=0); "
            "print(sorted(m for m in ('scipy.sparse', 'scipy.ndimage', 'pyarrow.parquet', "
            "'tqdm', 'h3', 'h3ronpy', 'pyogrio') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env=env, cwd=root)
    assert done.stdout.strip() == "[]"


@settings(max_examples=60, deadline=None, database=None)
@given(seed=st.integers(0, 2**16), shape=st.tuples(st.integers(1, 25), st.integers(1, 25)),
       share=st.floats(0.1, 0.95))
def test_components_match_scipy_ndimage_label(seed: int, shape: tuple[int, int],
                                              share: float) -> None:
    """The numpy labeller that replaced scipy.ndimage.label finds the same components."""
    from scipy import ndimage

    free = np.random.default_rng(seed).random(shape) < share
    component, first = _grid._components(free)
    expected, count = ndimage.label(free)
    assert first.size == count
    flat = free.ravel()
    assert len(set(zip(component[flat].tolist(), expected.ravel()[flat].tolist(),
                       strict=True))) == count
    assert (component[~flat] == -1).all()
    np.testing.assert_array_equal(component[first], np.arange(count))


def test_components_of_a_snake() -> None:
    """One long winding run of cells is one component (union-find must chain it)."""
    free = np.zeros((41, 41), dtype=bool)
    free[::2, :] = True
    free[1::4, -1] = True
    free[3::4, 0] = True
    component, first = _grid._components(free)
    assert first.tolist() == [0]
    assert set(component[free.ravel()].tolist()) == {0}
