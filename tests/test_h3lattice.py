"""The face-lattice keys of H3 partitions give exactly the cell H3 gives, everywhere."""

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
from spatialdp.geo._h3lattice import (
    ASK_H3,
    FIRST_BATCH_PER_CELL,
    MIN_POINTS_PER_CELL,
    H3LatticeTable,
    cell_keys,
    centre_keys,
    face_lattices,
)

_PENTAGON_LAT, _PENTAGON_LON = h3.cell_to_latlng(h3.get_pentagons(4)[2])
#: (name, lon/lat box, resolution): mid latitudes, high north, far south, the
#: antimeridian, a city, around a pentagon, across face edges, the finest resolution.
BOXES = [
    ("plains", (-104.0, 36.0, -94.0, 42.0), 5),
    ("norway", (5.0, 62.0, 25.0, 74.5), 4),
    ("patagonia", (-75.0, -55.0, -63.0, -45.0), 5),
    ("fiji", (176.5, -20.0, 179.9, -15.0), 5),
    ("city", (-74.3, 40.5, -73.6, 41.0), 8),
    ("pentagon", (_PENTAGON_LON - 4, _PENTAGON_LAT - 3, _PENTAGON_LON + 4, _PENTAGON_LAT + 3), 4),
    ("americas", (-120.0, 20.0, -60.0, 60.0), 2),
    ("africa", (-30.0, -40.0, 40.0, 40.0), 3),
    ("tower", (2.2945, 48.858, 2.2946, 48.8581), 15),
]


def _partition(box: tuple[float, float, float, float], resolution: int) -> Partition:
    cells = np.asarray(h3vector.geometry_to_cells(shapely.box(*box), resolution))
    return Partition.from_h3_cells(cells, name="box")


def _truth(partition: Partition, lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    cells = np.asarray(h3vector.coordinates_to_cells(lat, lon, partition.resolution))
    return pd.Index(np.asarray(partition.cells)).get_indexer(cells)


def _face_edges(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Points on the great circles between neighbouring icosahedron vertices, nudged."""
    corners = np.array([h3.cell_to_latlng(c) for c in h3.get_pentagons(0)])
    lat, lon = np.radians(corners[:, 0]), np.radians(corners[:, 1])
    xyz = np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], axis=1)
    near = np.argsort(xyz @ xyz.T, axis=1)[:, -6:-1]  # each vertex's five neighbours
    start = rng.integers(0, 12, n)
    end = near[start, rng.integers(0, 5, n)]
    t = rng.random((n, 1))
    p = xyz[start] * (1 - t) + xyz[end] * t
    p /= np.linalg.norm(p, axis=1, keepdims=True)
    nudge = rng.choice([0.0, 1e-15, -1e-15, 1e-12, -1e-12, 1e-9, -1e-9], (n, 2))
    return (np.degrees(np.arctan2(p[:, 1], p[:, 0])) + nudge[:, 0],
            np.degrees(np.arcsin(p[:, 2])) + nudge[:, 1])


def _hard_points(partition: Partition, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Cell vertices and points along cell edges, nudged by 0 to 1e-6 degrees."""
    rings = shapely.get_coordinates(partition.regions.geometry.values)
    t = rng.random((rings.shape[0] - 1, 1))
    along = rings[:-1] * (1 - t) + rings[1:] * t
    nudge = rng.choice([0.0, 1e-14, -1e-14, 1e-11, -1e-11, 1e-8, -1e-8, 1e-6], along.shape)
    lon = np.r_[rings[:, 0], along[:, 0] + nudge[:, 0]]
    return lon, np.r_[rings[:, 1], along[:, 1] + nudge[:, 1]]


@pytest.mark.parametrize(("name", "box", "resolution"), BOXES, ids=[b[0] for b in BOXES])
def test_every_lattice_answer_is_the_h3_answer(
        name: str, box: tuple[float, float, float, float], resolution: int) -> None:
    partition = _partition(box, resolution)
    table = H3LatticeTable.build(np.asarray(partition.cells), resolution)
    assert table is not None
    rng = np.random.default_rng(len(name))
    west, south, east, north = box
    pad_x, pad_y = (east - west) * 0.3, (north - south) * 0.3
    lon = rng.uniform(west - pad_x, east + pad_x, 200_000)
    lat = rng.uniform(south - pad_y, north + pad_y, 200_000)
    hard_lon, hard_lat = _hard_points(partition, rng)
    edge_lon, edge_lat = _face_edges(100_000, rng)
    lon = np.r_[lon, hard_lon, edge_lon]
    lon = np.where(lon > 180, lon - 360, np.where(lon < -180, lon + 360, lon))
    lat = np.clip(np.r_[lat, hard_lat, edge_lat], -89.999, 89.999)
    got, truth = table.lookup(lon, lat), _truth(partition, lon, lat)
    known = got != ASK_H3
    assert known[:200_000].mean() > 0.7  # the lattice answers most points by arithmetic
    np.testing.assert_array_equal(got[known], truth[known])
    assert (got[known] == -1).any()  # points in no cell of the partition are known too


def test_the_lattices_are_h3s() -> None:
    lattices = face_lattices(5)
    assert lattices.usable.all()
    assert np.allclose(np.linalg.norm(lattices.centres, axis=1), 1.0)
    # every cell of a fine cover is the hexagon of its own centre, as H3 says
    cells = np.asarray(h3vector.geometry_to_cells(shapely.box(-10, 30, 40, 60), 5))
    table = H3LatticeTable.build(np.sort(cells), 5)
    assert table is not None
    assert np.count_nonzero(table.labels >= 0) > 0.99 * cells.size


def _pentagon_disks(resolution: int, k: int) -> np.ndarray:
    return np.unique(np.array([h3.str_to_int(c) for p in h3.get_pentagons(resolution)
                               for c in h3.grid_disk(p, k)], dtype=np.uint64))


@pytest.mark.parametrize("name", ["conus", "europe", "pentagons", *(b[0] for b in BOXES)])
def test_cell_keys_from_parents_are_the_keys_of_h3s_centres(name: str) -> None:
    """Keys derived from the parents' centres and the digits equal those of H3's centres:
    across face edges, in pentagon base cells, at every resolution from 2."""
    if name == "conus":
        sets = [(np.asarray(Partition.from_h3_cover(load_us_states(), r,
                                                    containment="overlap").cells), r)
                for r in (2, 3, 4, 5)]
    elif name == "europe":
        sets = [(np.asarray(h3vector.geometry_to_cells(shapely.box(-10, 30, 40, 60), r)), r)
                for r in (4, 5, 6)]
    elif name == "pentagons":
        sets = [(_pentagon_disks(r, 10), r) for r in (2, 3, 4, 5, 6, 7, 8)]
    else:
        box, resolution = next((b[1], b[2]) for b in BOXES if b[0] == name)
        sets = [(np.asarray(h3vector.geometry_to_cells(shapely.box(*box), resolution)),
                 resolution)]
    for cells, resolution in sets:
        cells = np.unique(cells.astype(np.uint64))
        lattices = face_lattices(resolution)
        face, a, b, sure = cell_keys(cells, resolution, lattices)
        h3_face, h3_a, h3_b, h3_sure = centre_keys(cells, lattices)
        np.testing.assert_array_equal(sure, h3_sure)
        for mine, theirs in ((face, h3_face), (a, h3_a), (b, h3_b)):
            np.testing.assert_array_equal(mine[sure], theirs[sure])


def test_coarse_or_spread_partitions_get_no_table() -> None:
    coarse = np.sort(np.asarray(h3vector.geometry_to_cells(shapely.box(-100, 30, -90, 40), 1)))
    assert H3LatticeTable.build(coarse, 1) is None
    spread = np.sort(np.array([h3.str_to_int(h3.latlng_to_cell(lat, lon, 12)) for lat, lon in
                               [(40.0, -100.0), (41.0, -99.0)]], dtype=np.uint64))
    assert H3LatticeTable.build(spread, 12) is None  # the table would dwarf two cells


def test_partition_builds_the_lattice_once_points_pay_for_it() -> None:
    partition = Partition.from_h3_cover(load_us_states(), 5, containment="overlap")
    rng = np.random.default_rng(3)
    west, south, east, north = load_us_states().total_bounds
    first = FIRST_BATCH_PER_CELL * partition.n_regions - 1
    lon, lat = rng.uniform(west, east, first), rng.uniform(south, north, first)
    np.testing.assert_array_equal(partition.assign(lon=lon, lat=lat).positions,
                                  _truth(partition, lon, lat))
    assert partition._lattice is None  # a first batch that cannot pay goes to H3 directly
    big = MIN_POINTS_PER_CELL * partition.n_regions
    lon, lat = rng.uniform(west, east, big), rng.uniform(south, north, big)
    np.testing.assert_array_equal(partition.assign(lon=lon, lat=lat).positions,
                                  _truth(partition, lon, lat))
    table = partition._lattice
    assert isinstance(table, H3LatticeTable)  # the second call: the points seen pay
    partition.assign(lon=lon[:10], lat=lat[:10])
    assert partition._lattice is table  # built once
    assert pickle.loads(pickle.dumps(partition))._lattice is None  # a cache, never pickled
    partition._grid_index()  # the raster's unknown pixels go to the lattice, then to H3
    np.testing.assert_array_equal(partition.assign(lon=lon, lat=lat).positions,
                                  _truth(partition, lon, lat))


def test_a_first_batch_that_pays_builds_the_lattice_at_once() -> None:
    partition = _partition((-104.0, 36.0, -94.0, 42.0), 5)
    rng = np.random.default_rng(4)
    n = FIRST_BATCH_PER_CELL * partition.n_regions
    lon, lat = rng.uniform(-105, -93, n), rng.uniform(35, 43, n)
    np.testing.assert_array_equal(partition.assign(lon=lon, lat=lat).positions,
                                  _truth(partition, lon, lat))
    assert isinstance(partition._lattice, H3LatticeTable)
