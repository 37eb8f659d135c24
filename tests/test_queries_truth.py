"""Truth grid: clipping each device to k cells, counting devices per cell, the version."""

from __future__ import annotations

import geopandas as gpd
import numpy as np
import pytest
import shapely
from hypothesis import given, settings
from hypothesis import strategies as st

from spatialdp.exceptions import ClippingFailure, CRSError, InvalidInput, ReprojectedLayerWarning
from spatialdp.geo import Partition, h3cells
from spatialdp.queries import TruthGrid, grid_version, truth_grid


@pytest.fixture(scope="module")
def part() -> Partition:
    return Partition.from_h3_cover(
        gpd.GeoDataFrame(geometry=[shapely.box(-100, 40, -99.6, 40.3)], crs=4326), 7)


def _points_in(part: Partition, n: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    xy = shapely.get_coordinates(shapely.centroid(part.regions.geometry.values))
    pick = rng.integers(0, part.n_regions, n)
    return xy[pick, 0], xy[pick, 1], pick


def test_counts_distinct_devices_and_clips_to_k(part: Partition) -> None:
    rng = np.random.default_rng(0)
    lon, lat, pick = _points_in(part, 5000, rng)
    device = rng.integers(0, 300, pick.size)
    truth = truth_grid(part, lon=lon, lat=lat, device_ids=device, max_cells_per_device=3)
    # reference: per device, its first 3 distinct cells in input order
    expected = np.zeros(part.n_regions, dtype=np.int64)
    for d in np.unique(device):
        seen: list[int] = []
        for c in pick[device == d]:
            if c not in seen:
                seen.append(int(c))
        expected[seen[:3]] += 1
    assert truth.counts.tolist() == expected.tolist()
    assert truth.sensitivity == 3
    assert truth.n_devices == 300
    assert truth.n_clipped_pairs == int(sum(
        max(0, np.unique(pick[device == d]).size - 3) for d in np.unique(device)))
    assert truth.partition_version == part.version


def test_cell_array_grid_matches_partition(part: Partition) -> None:
    rng = np.random.default_rng(1)
    lon, lat, _ = _points_in(part, 500, rng)
    device = np.arange(500) % 37
    a = truth_grid(part, lon=lon, lat=lat, device_ids=device, max_cells_per_device=2)
    b = truth_grid(part.cells, lon=lon, lat=lat, device_ids=device, max_cells_per_device=2)
    assert a.counts.tolist() == b.counts.tolist()
    assert a.partition_version == b.partition_version == grid_version(part.cells)


@pytest.mark.parametrize("grid", ["partition", "cells"])
def test_cells_and_a_partition_read_points_alike(part: Partition, grid: str) -> None:
    """Both grids read points with the partition's reader: a frame and lon/lat are refused."""
    rng = np.random.default_rng(2)
    lon, lat, _ = _points_in(part, 20, rng)
    frame = gpd.GeoDataFrame(geometry=gpd.points_from_xy(lon, lat), crs=4326)
    given = part if grid == "partition" else part.cells
    with pytest.raises(InvalidInput, match="not both"):
        truth_grid(given, frame, lon=lon, lat=lat, device_ids=np.arange(20))
    with pytest.raises(InvalidInput, match="give a point GeoDataFrame"):
        truth_grid(given, device_ids=np.arange(20))
    assert truth_grid(given, frame, device_ids=np.arange(20)).n_devices == 20


def test_points_outside_are_reported_not_counted(part: Partition) -> None:
    truth = truth_grid(part.cells, lon=[-99.8, 10.0], lat=[40.1, 10.0], device_ids=["a", "b"])
    assert truth.n_unassigned == 1
    assert int(truth.counts.sum()) == 1


@settings(max_examples=25, deadline=None)
@given(k=st.integers(1, 5), n_dev=st.integers(1, 40), seed=st.integers(0, 10**6))
def test_no_device_exceeds_k_cells(part: Partition, k: int, n_dev: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    lon, lat, pick = _points_in(part, 200, rng)
    device = rng.integers(0, n_dev, pick.size)
    truth = truth_grid(part.cells, lon=lon, lat=lat, device_ids=device, max_cells_per_device=k)
    assert int(truth.counts.sum()) <= k * np.unique(device).size
    distinct = sum(min(k, np.unique(pick[device == d]).size) for d in np.unique(device))
    assert int(truth.counts.sum()) == distinct


def test_refuses_missing_device_ids(part: Partition) -> None:
    with pytest.raises(ClippingFailure, match="device_ids=None"):
        truth_grid(part, lon=[-99.8], lat=[40.1], device_ids=None)  # type: ignore[arg-type]


def test_refuses_a_bound_clipping_does_not_guarantee(part: Partition) -> None:
    truth = truth_grid(part.cells, lon=[-99.8], lat=[40.1], device_ids=[1])
    with pytest.raises(ClippingFailure, match="max_cells_per_device=1 is not guaranteed"):
        TruthGrid(counts=np.full(truth.n_cells, 5), cells=truth.cells, resolution=7,
                  partition_version=truth.partition_version, partition_key="x",
                  max_cells_per_device=1, n_points=1, n_unassigned=0, n_devices=1,
                  n_clipped_pairs=0, n_clipped_devices=0)


def test_refusals_of_bad_input(part: Partition) -> None:
    with pytest.raises(InvalidInput, match="device_ids=.*do not match"):
        truth_grid(part, lon=[-99.8, -99.7], lat=[40.1, 40.1], device_ids=[1])
    with pytest.raises(InvalidInput, match="max_cells_per_device=0"):
        truth_grid(part, lon=[-99.8], lat=[40.1], device_ids=[1], max_cells_per_device=0)
    with pytest.raises(InvalidInput, match="missing values"):
        truth_grid(part, lon=[-99.8], lat=[40.1], device_ids=[None])
    with pytest.raises(CRSError, match="has no CRS"):
        truth_grid(part, gpd.GeoDataFrame(geometry=[shapely.Point(-99.8, 40.1)]), device_ids=[1])
    projected = gpd.GeoDataFrame(geometry=[shapely.Point(-99.8, 40.1)], crs=4326).to_crs(3857)
    with pytest.warns(ReprojectedLayerWarning, match="EPSG:3857"):  # reprojected, not refused
        assert truth_grid(part, projected, device_ids=[1]).n_unassigned == 0


def test_grid_version_equals_partition_version() -> None:
    cells = h3cells.parse_cells(["85283473fffffff", "85283477fffffff", "8528347bfffffff"])
    assert grid_version(cells) == Partition.from_h3_cells(cells).version


def test_refuses_a_grid_of_mixed_resolutions() -> None:
    mixed = h3cells.parse_cells(["85283473fffffff", "862834707ffffff"])
    with pytest.raises(InvalidInput, match="mix resolutions 5 to 6"):
        truth_grid(mixed, lon=[-121.98], lat=[37.35], device_ids=[1])
    with pytest.raises(InvalidInput, match="repeats 1 cells"):
        truth_grid(mixed[[0, 0]], lon=[-121.98], lat=[37.35], device_ids=[1])
