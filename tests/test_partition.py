from __future__ import annotations

import pickle
import warnings
from pathlib import Path

import geopandas as gpd
import h3
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import shapely

from spatialdp.exceptions import (
    CRSError,
    InvalidCells,
    InvalidInput,
    PartitionMismatch,
    ReprojectedLayerWarning,
)
from spatialdp.geo import UnassignedPointsWarning
from spatialdp.geo._grid import GridIndex
from spatialdp.geo.partition import Partition

# --------------------------------------------------------------------------- building


def test_from_h3_cells_sorted_and_versioned() -> None:
    cells = [h3.latlng_to_cell(40.0 + i * 0.1, -105.0, 6) for i in range(5)]
    part = Partition.from_h3_cells(cells[::-1], name="five")
    assert part.kind == "h3"
    assert part.resolution == 6
    assert part.n_regions == 5
    assert list(part.region_ids) == sorted(cells)
    assert Partition.from_h3_cells(cells).version == part.version  # order-free, name-free
    assert Partition.from_h3_cells(cells[:4]).version != part.version


def test_from_h3_cells_refuses_mixed_resolution_and_duplicates() -> None:
    a = h3.latlng_to_cell(40.0, -105.0, 6)
    with pytest.raises(InvalidCells, match="mix resolutions"):
        Partition.from_h3_cells([a, h3.latlng_to_cell(40.0, -105.0, 7)])
    with pytest.raises(InvalidInput, match="1 duplicate H3 cells"):
        Partition.from_h3_cells([a, a])
    with pytest.raises(InvalidCells, match="not valid H3 cells"):
        Partition.from_h3_cells(["8a2a1072b59fff0"])


def test_from_h3_cover_refuses_no_crs_and_reprojects_another(states: gpd.GeoDataFrame) -> None:
    with pytest.raises(CRSError, match=r"has no CRS.*set_crs\(4326\)"):
        Partition.from_h3_cover(states.set_crs(None, allow_override=True), 4)
    colorado = states[states.state == "CO"]
    with pytest.warns(ReprojectedLayerWarning, match=r"projected CRS 'EPSG:5070'.*reprojected"):
        reprojected = Partition.from_h3_cover(colorado.to_crs(5070), 4)
    assert reprojected == Partition.from_h3_cover(colorado, 4)


def test_from_h3_cover_empty_cover_refused() -> None:
    tiny = gpd.GeoSeries([shapely.box(-100, 40, -99.9999, 40.0001)], crs=4326)
    with pytest.raises(InvalidInput, match="covers no H3 cell at resolution 3"):
        Partition.from_h3_cover(tiny, 3)


def test_from_geodataframe_refusals(states: gpd.GeoDataFrame) -> None:
    dup = pd.concat([states.iloc[:2], states.iloc[:1]])
    with pytest.raises(InvalidInput, match=r"duplicate region ids \['AL'\]"):
        Partition.from_geodataframe(dup, "state")
    with pytest.raises(InvalidInput, match="id_column 'nope' is not a column"):
        Partition.from_geodataframe(states, "nope")
    empty = states.iloc[:2].copy()
    empty.loc[empty.index[1], "geometry"] = shapely.Polygon()
    with pytest.raises(InvalidInput, match="1 geometries are empty"):
        Partition.from_geodataframe(empty, "state")
    bowtie = gpd.GeoDataFrame(
        {"id": ["x"]}, geometry=[shapely.Polygon([(0, 0), (1, 1), (1, 0), (0, 1)])], crs=4326
    )
    with pytest.raises(InvalidInput, match=r"invalid .*make_valid\(\)"):
        Partition.from_geodataframe(bowtie, "id")
    points = gpd.GeoDataFrame({"id": ["x"]}, geometry=[shapely.Point(0, 0)], crs=4326)
    with pytest.raises(InvalidInput, match="is not a \\(Multi\\)Polygon"):
        Partition.from_geodataframe(points, "id")


# --------------------------------------------------------------------------- assigning points


def test_h3_assign_matches_h3_per_point(colorado_h3: Partition) -> None:
    rng = np.random.default_rng(1)
    lat = rng.uniform(36.0, 42.0, 5000)
    lon = rng.uniform(-110.0, -101.0, 5000)
    result = colorado_h3.assign(lon=lon, lat=lat)
    expected = np.array([h3.latlng_to_cell(a, b, 5) for a, b in zip(lat, lon, strict=True)])
    inside = np.isin(expected, np.asarray(colorado_h3.region_ids))
    np.testing.assert_array_equal(result.assigned, inside)
    np.testing.assert_array_equal(result.ids()[inside], expected[inside])
    assert result.n_unassigned == int((~inside).sum()) > 0
    np.testing.assert_array_equal(result.unassigned_index, np.flatnonzero(~inside))
    assert result.counts().sum() == inside.sum()


def test_polygon_assign_matches_sjoin(
    states_partition: Partition, states: gpd.GeoDataFrame
) -> None:
    rng = np.random.default_rng(2)
    pts = gpd.GeoDataFrame(
        geometry=gpd.points_from_xy(rng.uniform(-125, -66, 4000), rng.uniform(24, 50, 4000)),
        crs=4326,
    )
    result = states_partition.assign(pts)
    joined = gpd.sjoin(pts, states[["state", "geometry"]], how="left", predicate="intersects")
    joined = joined[~joined.index.duplicated()]
    expected = joined.state.to_numpy(dtype=object)
    got = result.ids()
    both = pd.notna(expected)
    assert (pd.isna(got) == ~both).all()
    assert (got[both] == expected[both]).all()
    assert result.n_unassigned == int((~both).sum())


def test_border_point_goes_to_first_region() -> None:
    frame = gpd.GeoDataFrame(
        {"id": ["b", "a"]}, geometry=[shapely.box(1, 0, 2, 1), shapely.box(0, 0, 1, 1)], crs=4326
    )
    part = Partition.from_geodataframe(frame, "id")
    assert part.assign(lon=[1.0], lat=[0.5]).ids().tolist() == ["a"]


@pytest.mark.parametrize(
    ("lon", "lat", "message"),
    [
        ([0.0, np.nan], [0.0, 1.0], "1 lon values are NaN or infinite"),
        ([0.0], [np.inf], "1 lat values are NaN or infinite"),
        ([0.0], [91.0], r"latitude 91.0 .* outside \[-90, 90\]"),
        ([500000.0], [4000000.0], r"latitude 4000000.0"),
        ([200.0], [0.0], r"longitude 200.0 .* outside \[-180, 180\]"),
        ([0.0, 1.0], [0.0], "lon has 2 values but lat has 1"),
    ],
)
def test_assign_refuses_bad_coordinates(
    colorado_h3: Partition, lon: list[float], lat: list[float], message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        colorado_h3.assign(lon=lon, lat=lat)


def test_assign_refuses_points_without_crs(colorado_h3: Partition) -> None:
    pts = gpd.GeoSeries([shapely.Point(-105, 39)])
    with pytest.raises(CRSError, match="has no CRS"):
        colorado_h3.assign(pts)
    with pytest.warns(ReprojectedLayerWarning, match="EPSG:26913"):
        utm = colorado_h3.assign(gpd.GeoSeries([shapely.Point(-105, 39)], crs=4326).to_crs(26913))
    assert utm.n_unassigned == 0
    lines = gpd.GeoSeries([shapely.LineString([(0, 0), (1, 1)])], crs=4326)
    with pytest.raises(InvalidInput, match="Point geometries only"):
        colorado_h3.assign(lines)
    with pytest.raises(InvalidInput, match="give a point GeoDataFrame"):
        colorado_h3.assign()


@pytest.fixture(scope="module")
def europe() -> Partition:
    area = gpd.GeoSeries([shapely.box(5, 45, 15, 55)], crs=4326)
    return Partition.from_h3_cover(area, 5, containment="overlap", name="europe")


def test_swapped_lonlat_warns(europe: Partition) -> None:
    """3,180 points given as (lat, lon) used to be assigned 0 of 3,180 without a word."""
    rng = np.random.default_rng(8)
    lon, lat = rng.uniform(6, 14, 3180), rng.uniform(46, 54, 3180)
    assert europe.assign(lon=lon, lat=lat).n_unassigned == 0
    with pytest.warns(UnassignedPointsWarning,
                      match=r"3,180 of 3,180 points \(100%\) fall in no region of 'europe@.*"
                            r"lon and lat look swapped"):
        result = europe.assign(lon=lat, lat=lon)  # swapped, yet inside [-180, 180] x [-90, 90]
    assert result.n_unassigned == 3180
    far = gpd.GeoSeries(gpd.points_from_xy(lon - 100, lat - 80), crs=4326)
    with pytest.warns(UnassignedPointsWarning, match=r"3,180 of 3,180 .* or the points in "
                                                     r"another CRS"):
        europe.assign(far)


def test_a_few_unassigned_points_do_not_warn(europe: Partition,
                                            states_partition: Partition) -> None:
    rng = np.random.default_rng(9)
    lon, lat = rng.uniform(6, 14, 1000), rng.uniform(46, 54, 1000)
    lon[:400] += 20  # 40% outside: no warning (warnings are errors in this suite)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert europe.assign(lon=lon, lat=lat).n_unassigned == 400
        assert europe.assign(lon=lat[:99], lat=lon[:99]).n_unassigned == 99  # < 100 points
        # A uniform scatter over the states' bounding box: a third falls in the sea.
        box_lon, box_lat = rng.uniform(-125, -66, 5000), rng.uniform(24, 50, 5000)
        assert 0 < states_partition.assign(lon=box_lon, lat=box_lat).n_unassigned < 2500
    lon[:601] += 20
    with pytest.warns(UnassignedPointsWarning, match="601 of 1,000 points"):
        europe.assign(lon=lon, lat=lat)


def test_warn_false_keeps_quiet_and_assigns_the_same(europe: Partition) -> None:
    """Rejection sampling (synthetic_fleet) expects most draws outside: warn=False."""
    rng = np.random.default_rng(10)
    lon, lat = rng.uniform(-10, 30, 2000), rng.uniform(30, 70, 2000)
    with pytest.warns(UnassignedPointsWarning):
        loud = europe.assign(lon=lon, lat=lat)
    assert loud.n_unassigned > 1000  # more than half outside: the default warns
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = europe.assign(lon=lon, lat=lat, warn=False)
    np.testing.assert_array_equal(quiet.positions, loud.positions)
    with pytest.raises(InvalidInput, match="warn=1 is a int, not a bool"):
        europe.assign(lon=lon, lat=lat, warn=1)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- polygons -> cells


def test_polygons_to_cells_csr(colorado_h3: Partition) -> None:
    queries = gpd.GeoDataFrame(
        geometry=[
            shapely.box(-106, 39, -105, 40),  # inside Colorado
            shapely.box(-105.0, 39.0, -104.999, 39.001),  # too small for any centre
            shapely.box(-104, 40, -100, 41),  # straddles the eastern border
        ],
        crs=4326,
    )
    inc = colorado_h3.polygons_to_cells(queries)
    assert inc.matrix.shape == (3, colorado_h3.n_regions)
    m = inc.cells_per_query
    assert m[0] > 20
    assert m[1] == 0
    assert m[2] > 0
    assert inc.uncovered.tolist() == [1]
    assert inc.cells_outside[0] == 0
    assert inc.cells_outside[2] > 0
    expected = set(h3.h3shape_to_cells_experimental(h3.geo_to_h3shape(queries.geometry[0]), 5))
    got = set(np.asarray(colorado_h3.region_ids)[inc.cell_indices(0)])
    assert got == expected
    counts = np.arange(colorado_h3.n_regions, dtype=float)
    np.testing.assert_allclose(inc.answer(counts)[0], counts[inc.cell_indices(0)].sum())
    with pytest.raises(InvalidInput, match="give one value per cell"):
        inc.answer(np.ones(3))
    overlap = colorado_h3.polygons_to_cells(queries, containment="overlap")
    full = colorado_h3.polygons_to_cells(queries, containment="full")
    assert (full.cells_per_query <= m).all()
    assert (m <= overlap.cells_per_query).all()


def test_polygons_to_cells_needs_h3(states_partition: Partition, states: gpd.GeoDataFrame) -> None:
    with pytest.raises(InvalidInput, match="needs an H3 partition"):
        states_partition.polygons_to_cells(states)


# --------------------------------------------------------------------------- hierarchy


def test_rollup_and_coarsen(colorado_h3: Partition) -> None:
    values = np.arange(colorado_h3.n_regions)
    rolled = colorado_h3.rollup(values, 3)
    expected = pd.Series(values, index=[h3.cell_to_parent(c, 3) for c in colorado_h3.region_ids])
    expected = expected.groupby(level=0).sum()
    pd.testing.assert_series_equal(rolled, expected, check_names=False, check_dtype=False)
    coarse, parent_pos = colorado_h3.coarsen(3)
    assert coarse.resolution == 3
    assert np.bincount(parent_pos, weights=values).tolist() == rolled.tolist()
    with pytest.raises(InvalidInput, match="the partition has"):
        colorado_h3.rollup(values[:-1], 3)


# --------------------------------------------------------------------------- neighbours


def test_h3_adjacency_matches_are_neighbor_cells(colorado_h3: Partition) -> None:
    adj = colorado_h3.adjacency()
    ids = np.asarray(colorado_h3.region_ids)
    assert (adj != adj.T).nnz == 0
    assert adj.diagonal().sum() == 0
    rng = np.random.default_rng(0)
    for i in rng.choice(ids.size, 30, replace=False):
        row = set(ids[adj.indices[adj.indptr[i] : adj.indptr[i + 1]]])
        ring = set(h3.grid_ring(ids[i], 1)) & set(ids)
        assert row == ring
        assert all(h3.are_neighbor_cells(ids[i], j) for j in row)


def test_state_neighbours_share_borders(states_partition: Partition) -> None:
    # Four Corners: AZ and CO touch only at a point, so they are not neighbours.
    assert states_partition.neighbours("CO") == ["KS", "NE", "NM", "OK", "UT", "WY"]
    assert states_partition.neighbours("AZ") == ["CA", "NM", "NV", "UT"]
    assert states_partition.neighbours("ME") == ["NH"]
    with pytest.raises(InvalidInput, match="region 'XX' is not in partition"):
        states_partition.neighbours("XX")


# --------------------------------------------------------------------------- join


def test_join_onto_geometries(colorado_h3: Partition, states_partition: Partition) -> None:
    some = colorado_h3.region_ids[:3]
    joined = colorado_h3.join(pd.Series([1.0, 2.0, 3.0], index=some, name="metric"))
    assert isinstance(joined, gpd.GeoDataFrame)
    assert len(joined) == colorado_h3.n_regions
    assert joined.metric.notna().sum() == 3
    assert (joined.geometry.geom_type == "Polygon").all()
    assert joined.attrs["partition_version"] == colorado_h3.version
    frame = pd.DataFrame({"region_id": ["CO", "UT"], "value": [1, 2]})
    states = states_partition.join(frame)
    assert states.loc["CO", "value"] == 1
    assert np.isnan(states.loc["TX", "value"])
    assert states_partition.join({"CO": 5}).loc["CO", "value"] == 5
    with pytest.raises(InvalidInput, match="are not regions of"):
        states_partition.join({"ZZ": 1})


# --------------------------------------------------------------------------- save / load


def test_save_load_roundtrip(
    tmp_path: Path, colorado_h3: Partition, states_partition: Partition
) -> None:
    for part in (colorado_h3, states_partition):
        path = tmp_path / f"{part.name}.parquet"
        part.to_file(str(path))
        loaded = Partition.read_file(str(path), expected_version=part.version)
        assert loaded == part
        assert loaded.kind == part.kind
        assert loaded.name == part.name
    assert list(tmp_path.glob("*.tmp")) == []


@pytest.mark.parametrize("failing_call", [1, 2])  # GeoPandas' write; the metadata rewrite
@pytest.mark.parametrize("had_old_file", [True, False])
def test_failed_write_leaves_old_file_and_no_temporary(
    tmp_path: Path, colorado_h3: Partition, monkeypatch: pytest.MonkeyPatch,
    failing_call: int, had_old_file: bool,
) -> None:
    path = tmp_path / "p.parquet"
    if had_old_file:
        Partition.from_h3_cells(colorado_h3.region_ids[:5]).to_file(str(path))
    before = path.read_bytes() if had_old_file else None
    real_write = pq.write_table
    temporaries: list[Path] = []

    def write_then_fail(table: object, where: object, *args: object, **kwargs: object) -> None:
        calls = len(temporaries) + 1
        temporaries.append(Path(str(where)))
        if calls < failing_call:
            real_write(table, where, *args, **kwargs)
            return
        Path(str(where)).write_bytes(b"PAR1 half a file")  # a crash midway
        raise OSError("disk full")

    monkeypatch.setattr(pq, "write_table", write_then_fail)
    with pytest.raises(OSError, match="disk full"):
        colorado_h3.to_file(str(path))
    assert len(temporaries) == failing_call
    assert all(t.parent == tmp_path and t != path for t in temporaries)  # wrote a temporary
    assert not any(t.exists() for t in temporaries)  # ...and removed it
    assert sorted(tmp_path.iterdir()) == ([path] if had_old_file else [])
    if had_old_file:
        assert path.read_bytes() == before  # the old partition is intact
        monkeypatch.undo()
        assert Partition.read_file(str(path)).n_regions == 5


def test_load_refuses_wrong_version_and_foreign_files(
    tmp_path: Path, colorado_h3: Partition
) -> None:
    path = tmp_path / "p.parquet"
    colorado_h3.to_file(str(path))
    with pytest.raises(PartitionMismatch, match="cannot be compared or mixed"):
        Partition.read_file(str(path), expected_version="0000")
    plain = tmp_path / "plain.parquet"
    colorado_h3.regions.reset_index().to_parquet(plain)
    with pytest.raises(InvalidInput, match="not a spatialdp partition file"):
        Partition.read_file(str(plain))


def test_load_detects_edited_content(tmp_path: Path, colorado_h3: Partition) -> None:
    import pyarrow.parquet as pq

    path = tmp_path / "p.parquet"
    colorado_h3.to_file(str(path))
    table = pq.read_table(path)
    pq.write_table(table.slice(1), path)  # drop a region, keep the metadata
    with pytest.raises(PartitionMismatch, match="edited or corrupted"):
        Partition.read_file(str(path))


def test_require_version(colorado_h3: Partition, states_partition: Partition) -> None:
    colorado_h3.require_version(colorado_h3.version)
    with pytest.raises(PartitionMismatch, match="the report was computed on partition version"):
        states_partition.require_version(colorado_h3.version, what="the report")
    assert colorado_h3 != states_partition


@pytest.fixture
def grid_calls(monkeypatch: pytest.MonkeyPatch) -> list[np.ndarray]:
    """Record the cell labels of every grid lookup (<= -2: left to the exact test)."""
    answers: list[np.ndarray] = []
    real_lookup = GridIndex.lookup

    def spy(self: GridIndex, lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
        answers.append(self.cell_labels(lon, lat))
        return real_lookup(self, lon, lat)

    monkeypatch.setattr(GridIndex, "lookup", spy)
    return answers


def first_region_by_sjoin(part: Partition, lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    """Return the id of the first region (partition order) each point intersects, or None."""
    pts = gpd.GeoDataFrame(geometry=gpd.points_from_xy(lon, lat), crs=4326)
    joined = gpd.sjoin(pts, part.regions.reset_index()[["region_id", "geometry"]],
                       how="left", predicate="intersects")
    first = joined.sort_values("index_right").groupby(level=0).region_id.first()
    return first.reindex(range(lon.size)).to_numpy(dtype=object)


def assert_same_ids(got: np.ndarray, expected: np.ndarray) -> None:
    assert (pd.isna(got) == pd.isna(expected)).all()
    ok = ~pd.isna(expected)
    assert (got[ok] == expected[ok]).all()


def test_grid_index_is_exact_near_borders(
    states: gpd.GeoDataFrame, grid_calls: list[np.ndarray]
) -> None:
    """Large batches go through the grid index; the answer must equal sjoin's."""
    part = Partition.from_geodataframe(states, "state")
    part._points_seen = part._grid_min_points()  # as after many batches: the grid is used
    rng = np.random.default_rng(4)
    border = states.boundary.union_all()
    along = shapely.line_interpolate_point(
        np.array(list(border.geoms), dtype=object)[rng.integers(0, len(border.geoms), 60_000)],
        rng.uniform(0, 1, 60_000), normalized=True)
    jitter = rng.normal(0, 0.03, (60_000, 2))  # within ~3 km of a border
    lon = shapely.get_x(along) + jitter[:, 0]
    lat = shapely.get_y(along) + jitter[:, 1]
    result = part.assign(lon=lon, lat=lat)
    # The grid ran once over the whole batch and labelled a good share of it by
    # arithmetic; the rest, in cells a border crosses, went to the exact test.
    assert len(grid_calls) == 1
    labels = grid_calls[0]
    assert labels.size == 60_000
    assert 0.2 < (labels > -2).mean() < 0.9
    assert_same_ids(result.ids(), first_region_by_sjoin(part, lon, lat))


def test_grid_index_respects_overlapping_regions(grid_calls: list[np.ndarray]) -> None:
    """from_geodataframe refuses overlaps; the grid index still handles them exactly."""
    geoms = np.array([shapely.box(0, 0, 2, 2), shapely.box(1, 1, 3, 3)], dtype=object)
    frame = gpd.GeoDataFrame({"id": ["a", "b"]}, geometry=geoms, crs=4326)
    with pytest.raises(InvalidInput, match="regions 'a' and 'b' overlap"):
        Partition.from_geodataframe(frame, "id")
    part = Partition("polygons", np.array(["a", "b"], dtype=object), geoms, name="overlap")
    rng = np.random.default_rng(0)
    # 40,000 points where a and b overlap, 10,000 inside a alone, 10,000 inside b alone.
    lon = np.concatenate([rng.uniform(1.2, 1.8, 40_000), rng.uniform(0.2, 0.8, 10_000),
                          rng.uniform(2.2, 2.8, 10_000)])
    lat = np.concatenate([rng.uniform(1.2, 1.8, 40_000), rng.uniform(0.2, 0.8, 10_000),
                          rng.uniform(2.2, 2.8, 10_000)])
    ids = part.assign(lon=lon, lat=lat).ids()
    assert set(ids[:40_000]) == {"a"}  # first region wins, as in sjoin
    assert set(ids[40_000:50_000]) == {"a"}
    assert set(ids[50_000:]) == {"b"}
    # The grid labelled the points far from the borders, overlap included.
    assert len(grid_calls) == 1
    labels = grid_calls[0]
    assert (labels[:40_000] == 0).mean() > 0.95
    assert (labels[50_000:] == 1).mean() > 0.95


def test_grid_index_built_once_and_not_pickled(states_partition: Partition,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    part = Partition.from_geodataframe(states_partition.regions.reset_index(), "region_id")
    builds: list[int] = []
    real_build = GridIndex.build.__func__  # type: ignore[attr-defined]

    def counting(cls: type[GridIndex], *args: object) -> GridIndex:
        builds.append(1)
        return real_build(cls, *args)  # type: ignore[no-any-return]

    monkeypatch.setattr(GridIndex, "build", classmethod(counting))
    rng = np.random.default_rng(5)
    batch = part._grid_min_points() // 2 + 1
    assert batch > 3_000  # 5,000 points, plus 1 per 4 vertices of the states
    lon, lat = rng.uniform(-125, -66, batch), rng.uniform(24, 50, batch)
    first = part.assign(lon=lon, lat=lat).positions  # exact test only: too few points yet
    assert builds == []
    second = part.assign(lon=lon, lat=lat).positions  # enough points seen: the grid is built
    third = part.assign(lon=lon, lat=lat).positions
    assert builds == [1]
    np.testing.assert_array_equal(first, second)
    np.testing.assert_array_equal(first, third)
    clone = pickle.loads(pickle.dumps(part))
    assert clone._grid is None
    assert clone._tree is None
    assert clone == part
    np.testing.assert_array_equal(clone.assign(lon=lon, lat=lat).positions, first)


def test_file_paths_that_cannot_work_are_refused(tmp_path: Path,
                                                 states_partition: Partition) -> None:
    with pytest.raises(InvalidInput, match="is not a file \\(missing or a folder\\)"):
        Partition.read_file(str(tmp_path / "missing.parquet"))
    with pytest.raises(InvalidInput, match="is a folder; name the partition file"):
        states_partition.to_file(str(tmp_path))
    with pytest.raises(InvalidInput, match="folder that does not exist"):
        states_partition.to_file(str(tmp_path / "no" / "such.parquet"))
