"""The pure-pixel raster of H3 partitions gives exactly the cell H3 gives, everywhere."""

from __future__ import annotations

import pickle

import h3
import numpy as np
import pandas as pd
import pytest
import shapely
from h3ronpy import vector as h3vector

from spatialdp.datasets import load_us_states
from spatialdp.geo import Partition
from spatialdp.geo._h3grid import OUTSIDE, UNKNOWN, H3CellTable, H3PixelIndex

#: (name, lon/lat box, resolution): mid latitudes, high north, far south, the
#: antimeridian, around a pentagon, and a fine resolution.
_PENTAGON_LAT, _PENTAGON_LON = h3.cell_to_latlng(h3.get_pentagons(4)[2])
BOXES = [
    ("plains", (-104.0, 36.0, -94.0, 42.0), 5),
    ("norway", (5.0, 62.0, 25.0, 74.5), 4),
    ("patagonia", (-75.0, -55.0, -63.0, -45.0), 5),
    ("fiji", (176.5, -20.0, 179.9, -15.0), 5),
    ("city", (-74.3, 40.5, -73.6, 41.0), 8),
    ("pentagon", (_PENTAGON_LON - 4, _PENTAGON_LAT - 3, _PENTAGON_LON + 4, _PENTAGON_LAT + 3), 4),
]


def _partition(box: tuple[float, float, float, float], resolution: int) -> Partition:
    cells = np.asarray(h3vector.geometry_to_cells(shapely.box(*box), resolution))
    return Partition.from_h3_cells(cells, name="box")


def _truth(partition: Partition, lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    cells = np.asarray(h3vector.coordinates_to_cells(lat, lon, partition.resolution))
    return pd.Index(np.asarray(partition.cells)).get_indexer(cells)


def _hard_points(grid: H3PixelIndex, partition: Partition, rng: np.random.Generator
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Pixel corners and cell vertices and edges, nudged by 0 to 1e-6 degrees."""
    n = 400_000
    i, j = rng.integers(0, grid.nx, n), rng.integers(0, grid.ny, n)
    nudge = rng.choice([0.0, 1e-13, -1e-13, 1e-9, -1e-9, 1e-7, -1e-7, 1e-6, -1e-6], (2, n))
    lon = grid.west + i * grid.step + nudge[0]
    lat = grid.south + j * grid.step + nudge[1]
    rings = shapely.get_coordinates(partition.regions.geometry.values)
    t = rng.random((rings.shape[0] - 1, 1))
    along = rings[:-1] * (1 - t) + rings[1:] * t  # on the chords, where arcs bulge
    wiggle = rng.normal(0, 1e-5, along.shape)
    lon = np.r_[lon, rings[:, 0], along[:, 0] + wiggle[:, 0]]
    lat = np.r_[lat, rings[:, 1], along[:, 1] + wiggle[:, 1]]
    inside = (np.abs(lat) < 90) & (lon >= -180) & (lon <= 180)
    return lon[inside], lat[inside]


@pytest.mark.parametrize(("name", "box", "resolution"), BOXES, ids=[b[0] for b in BOXES])
def test_every_pure_pixel_answer_is_the_h3_answer(
        name: str, box: tuple[float, float, float, float], resolution: int) -> None:
    partition = _partition(box, resolution)
    grid = H3PixelIndex.build(np.asarray(partition.cells), resolution)
    assert grid is not None
    rng = np.random.default_rng(len(name))
    west, south, east, north = box
    lon = np.r_[rng.uniform(west - 1, east + 1, 300_000), _hard_points(grid, partition, rng)[0]]
    lat = np.r_[rng.uniform(south - 1, north + 1, 300_000), _hard_points(grid, partition, rng)[1]]
    lon, lat = lon[:lat.size], lat[:lon.size]
    got, truth = grid.lookup(lon, lat), _truth(partition, lon, lat)
    known = got != UNKNOWN
    assert known.mean() > 0.3  # the raster answers a good share by arithmetic
    np.testing.assert_array_equal(got[known], truth[known])
    assert (got[known] == OUTSIDE).any()  # cells of no region are known too


def test_partition_assign_builds_the_raster_once_and_stays_exact() -> None:
    partition = Partition.from_h3_cover(load_us_states(), 5, containment="overlap")
    assert partition._grid_min_points() >= 1_000_000  # small batches never pay for a build
    grid = partition._grid_index()
    assert isinstance(grid, H3PixelIndex)
    assert partition._grid_index() is grid  # built once
    assert 0.6 < grid.pure_share < 1.0
    rng = np.random.default_rng(5)
    west, south, east, north = load_us_states().total_bounds
    lon, lat = rng.uniform(west, east, 200_000), rng.uniform(south, north, 200_000)
    np.testing.assert_array_equal(partition.assign(lon=lon, lat=lat).positions,
                                  _truth(partition, lon, lat))
    assert pickle.loads(pickle.dumps(partition))._grid is None  # a cache, never pickled


def test_no_raster_where_it_cannot_pay() -> None:
    # Cells spread over the globe: a raster fine enough to help would not fit the budget.
    cells = np.array([h3.str_to_int(h3.latlng_to_cell(lat, lon, 6)) for lat, lon in
                      [(-60.0, -170.0), (70.0, 170.0), (0.0, 0.0)]], dtype=np.uint64)
    assert H3PixelIndex.build(np.sort(cells), 6) is None
    # Cells near the pole get no pure pixels: every point there goes to H3.
    polar = np.asarray(h3vector.geometry_to_cells(shapely.box(-30, 76, 30, 80), 3))
    grid = H3PixelIndex.build(np.sort(polar), 3)
    assert grid is None or grid.pure_share == 0.0


@pytest.mark.parametrize(("name", "box", "resolution"), BOXES, ids=[b[0] for b in BOXES])
def test_the_cell_table_finds_what_a_hash_table_finds(
        name: str, box: tuple[float, float, float, float], resolution: int) -> None:
    partition = _partition(box, resolution)
    own = np.asarray(partition.cells)
    table = H3CellTable.build(own)
    assert table is not None
    rng = np.random.default_rng(len(name))
    west, south, east, north = box
    lon, lat = rng.uniform(west - 3, east + 3, 100_000), rng.uniform(south - 3, north + 3, 100_000)
    lat = np.clip(lat, -89.9, 89.9)
    lon = np.where(lon > 180, lon - 360, lon)
    near = np.asarray(h3vector.coordinates_to_cells(lat, lon, resolution))
    coarser = np.asarray(h3vector.coordinates_to_cells(lat, lon, max(resolution - 1, 0)))
    finer = np.asarray(h3vector.coordinates_to_cells(lat, lon, resolution + 1))
    garbage = rng.integers(0, np.iinfo(np.int64).max, 10_000).astype(np.uint64)
    edges = np.r_[own[:1] - np.uint64(1), own[-1:] + np.uint64(1), own, np.uint64(0)]
    given = np.r_[near, coarser, finer, garbage, edges].astype(np.uint64)
    np.testing.assert_array_equal(table.lookup(given), pd.Index(own).get_indexer(given))
    assert (table.lookup(near) >= 0).any()
    assert (table.lookup(near) == -1).any()
    np.testing.assert_array_equal(partition.assign(lon=lon, lat=lat, warn=False).positions,
                                  _truth(partition, lon, lat))


def test_cells_too_spread_for_a_table_are_still_found() -> None:
    cells = np.sort(np.array([h3.str_to_int(h3.latlng_to_cell(lat, lon, 9)) for lat, lon in
                              [(-60.0, -170.0), (70.0, 170.0), (0.0, 0.0)]], dtype=np.uint64))
    assert H3CellTable.build(cells) is None  # the prefix table would dwarf three cells
    partition = Partition.from_h3_cells(cells)
    lat, lon = np.array([-60.0, 70.0, 0.0, 10.0]), np.array([-170.0, 170.0, 0.0, 10.0])
    positions = partition.assign(lon=lon, lat=lat).positions
    np.testing.assert_array_equal(positions, _truth(partition, lon, lat))
    assert sorted(positions[:3]) == [0, 1, 2]
    assert positions[3] == -1
