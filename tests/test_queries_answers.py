"""Polygon answers: one row per polygon, exact bars, consistency, discretisation, refusals."""

from __future__ import annotations

import geopandas as gpd
import numpy as np
import pytest
import shapely

from spatialdp.exceptions import (
    CRSError,
    InvalidInput,
    PartitionMismatch,
    ReprojectedLayerWarning,
)
from spatialdp.geo import Partition
from spatialdp.privacy import Simulation
from spatialdp.privacy.accuracy import half_width
from spatialdp.queries import (
    answer_polygons,
    query_corpus,
    release_flat,
    release_hierarchical,
    truth_grid,
)

BOX = shapely.box(-100.0, 40.0, -99.4, 40.4)


@pytest.fixture(scope="module")
def part() -> Partition:
    return Partition.from_h3_cover(gpd.GeoDataFrame(geometry=[BOX], crs=4326), 7,
                                   containment="overlap")


@pytest.fixture(scope="module")
def truth(part: Partition):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    lon = rng.uniform(-100.0, -99.4, 20_000)
    lat = rng.uniform(40.0, 40.4, 20_000)
    return truth_grid(part, lon=lon, lat=lat, device_ids=np.arange(20_000))


def polygons() -> gpd.GeoDataFrame:
    left = shapely.box(-99.9, 40.1, -99.7, 40.3)
    right = shapely.box(-99.7, 40.1, -99.5, 40.3)
    return gpd.GeoDataFrame({"name": ["left", "right", "both"]},
                            geometry=[left, right, shapely.union(left, right)], crs=4326)


def test_answers_frame(part: Partition, truth) -> None:  # type: ignore[no-untyped-def]
    grid = release_flat(truth, epsilon=1.0, target=Simulation(rng=1))
    out = answer_polygons(grid, polygons(), part)
    assert isinstance(out, gpd.GeoDataFrame)
    assert out.name.tolist() == ["left", "right", "both"]
    corpus = query_corpus(part, polygons())
    m = corpus.cells_per_query
    assert out.cells.tolist() == m.tolist()
    np.testing.assert_array_equal(out.answer, corpus.incidence.matrix @ grid.values)
    np.testing.assert_array_equal(out.error_bar, half_width("discrete_laplace", 1.0, m, 0.05))
    # consistent by construction: the union answers the sum of its parts
    assert out.answer.iloc[2] == out.answer.iloc[0] + out.answer.iloc[1]
    assert out.attrs["simulated"] is True
    assert (out.discretisation_error.abs() < 0.15).all()


def test_error_bar_covers_the_truth(part: Partition, truth) -> None:  # type: ignore[no-untyped-def]
    corpus = query_corpus(part, polygons())
    true = corpus.incidence.matrix @ truth.counts
    bars = half_width("discrete_laplace", 1.0, corpus.cells_per_query, 0.05)
    hits = np.mean([np.abs(corpus.incidence.matrix @ release_flat(
        truth, epsilon=1.0, target=Simulation(rng=s)).values - true) <= bars
        for s in range(400)], axis=0)
    # coverage >= 95% (5 SE below 0.95 would refuse it)
    assert (hits >= 0.95 - 5 * np.sqrt(0.95 * 0.05 / 400)).all()


def test_discretisation_error_of_a_cell_is_zero(part: Partition, truth) -> None:  # type: ignore[no-untyped-def]
    grid = release_flat(truth, epsilon=1.0, target=Simulation(rng=2))
    hexagon = part.regions.geometry.iloc[[40]]
    out = answer_polygons(grid, gpd.GeoDataFrame(geometry=hexagon.values, crs=4326), part)
    assert out.cells.iloc[0] == 1
    assert abs(out.discretisation_error.iloc[0]) < 0.01


def test_hierarchical_answers(part: Partition, truth) -> None:  # type: ignore[no-untyped-def]
    grid = release_hierarchical(truth, epsilon=1.0, levels=3, target=Simulation(rng=3))
    out = answer_polygons(grid, polygons(), part)
    corpus = query_corpus(part, polygons())
    np.testing.assert_allclose(out.answer, corpus.incidence.matrix @ grid.values, atol=1e-8)
    np.testing.assert_allclose(out["std"] ** 2, grid.query_variance(corpus.incidence))
    assert out.answer.iloc[2] == pytest.approx(out.answer.iloc[0] + out.answer.iloc[1])
    assert (out.method == "hierarchical").all()


def test_refusals(part: Partition, truth) -> None:  # type: ignore[no-untyped-def]
    grid = release_flat(truth, epsilon=1.0, target=Simulation(rng=4))
    outside = gpd.GeoDataFrame(geometry=[shapely.box(-99.5, 40.3, -99.0, 40.8)], crs=4326)
    with pytest.raises(InvalidInput, match="reach outside the partition"):
        answer_polygons(grid, outside, part)
    with pytest.raises(CRSError, match="has no CRS"):
        answer_polygons(grid, polygons().set_crs(None, allow_override=True), part)
    with pytest.warns(ReprojectedLayerWarning, match="EPSG:3857"):  # reprojected, not refused
        projected = answer_polygons(grid, polygons().to_crs(3857), part)
    np.testing.assert_allclose(projected.answer, answer_polygons(grid, polygons(), part).answer)
    other = Partition.from_h3_cover(gpd.GeoDataFrame(geometry=[BOX], crs=4326), 6)
    with pytest.raises(PartitionMismatch, match="partition version"):
        answer_polygons(grid, polygons(), other)
    with pytest.raises(InvalidInput, match="alpha=0"):
        answer_polygons(grid, polygons(), part, alpha=0)
    with pytest.raises(InvalidInput, match="grid="):
        answer_polygons(truth, polygons(), part)  # the truth is never an answer source


def test_hierarchical_bars_cover_the_truth(part: Partition, truth) -> None:  # type: ignore[no-untyped-def]
    out = answer_polygons(release_hierarchical(truth, epsilon=1.0, levels=3,
                                               target=Simulation(rng=5)), polygons(), part)
    corpus = query_corpus(part, polygons())
    true = corpus.incidence.matrix @ truth.counts
    bars = out.error_bar.to_numpy()
    assert (bars > out["std"].to_numpy()).all()  # a 95% bar is wider than one sd
    hits = np.mean([np.abs(corpus.incidence.matrix @ release_hierarchical(
        truth, epsilon=1.0, levels=3, target=Simulation(rng=s)).values - true) <= bars
        for s in range(300)], axis=0)
    se = np.sqrt(0.95 * 0.05 / 300)
    assert (np.abs(hits - 0.95) < 5 * se).all()  # exact: neither under- nor over-covers


def test_corpus_bucketed_by_area(part: Partition, truth) -> None:  # type: ignore[no-untyped-def]
    from spatialdp.queries import measure_query_error

    corpus = query_corpus(part, polygons())
    assert corpus.polygon_area_km2 is not None
    area = corpus.polygon_area_km2
    assert area[2] == pytest.approx(area[0] + area[1], rel=1e-9)
    report = measure_query_error(truth, corpus, epsilon=1.0, draws=50, bucket_by="area",
                                 buckets=(0, 400, 10_000), rng=0)
    assert report.n_queries.tolist() == [2, 1]  # two ~380 km^2 boxes, their ~760 km^2 union
    assert report.attrs["bucket_by"] == "area"
