"""Bad input to any public geography callable raises a spatialdp error, quickly.

Every call below gets hypothesis-made junk (wrong types, empty frames, NaN and
out-of-range coordinates, mixed resolutions, None/empty/invalid geometries,
GeometryCollections, frames without a CRS or in a projected one). It may
succeed; if it fails, the error must be a :class:`SpatialDPError` subclass, and
every call must end within a few seconds (a SIGALRM timer enforces it).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import geopandas as gpd
import h3
import numpy as np
import pandas as pd
import pytest
import shapely
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from spatialdp.datasets import synthetic_fleet
from spatialdp.exceptions import ReprojectedLayerWarning, SpatialDPError
from spatialdp.geo import Partition, UnassignedPointsWarning, h3cells
from tests._timeouts import time_limit
from tests.test_fuzz_support import assert_names_the_input

SETTINGS = settings(max_examples=40, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
TIME_LIMIT_S = 10


def only_spatialdp_errors(call: Callable[[], Any],
                          oracle: Callable[[Any], None] | None = None) -> None:
    """Run ``call``: its result must pass ``oracle``; a refusal must name what it refuses.

    Anything but a SpatialDPError fails the test; so does a refusal whose message names
    none of the call's values or parameters (:func:`assert_names_the_input`) and a result
    that disagrees with the independent computation in ``oracle``.
    """
    with time_limit(TIME_LIMIT_S), warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", UnassignedPointsWarning)  # a legitimate outcome
        warnings.simplefilter("ignore", ReprojectedLayerWarning)  # another CRS: reprojected
        try:
            result = call()
        except SpatialDPError as err:
            assert_names_the_input(err, call, (), {})
            return
    if oracle is not None:
        oracle(result)


def h3_text(cells: Any) -> list[str]:
    """H3 ids as h3-py's strings (the independent reference), from strings or integers."""
    return [c if isinstance(c, str) else h3.int_to_str(int(c)) for c in cells]


def cover_oracle(resolution: int, max_cells: Any) -> Callable[[Partition], None]:
    def check(part: Partition) -> None:
        ids = list(part.region_ids)
        assert len(set(ids)) == len(ids) <= max_cells
        assert all(h3.is_valid_cell(c) and h3.get_resolution(c) == resolution for c in ids)
    return check


def cells_oracle(cells: Any) -> Callable[[Partition], None]:
    def check(part: Partition) -> None:
        assert set(part.region_ids) == {c.lower() for c in h3_text(cells)}
    return check


def assign_oracle(target: Partition, lon: Any, lat: Any) -> Callable[[Any], None]:
    def check(where: Any) -> None:
        ids = where.ids()
        xs, ys = np.ravel(np.asarray(lon, dtype=float)), np.ravel(np.asarray(lat, dtype=float))
        for x, y, got in zip(xs, ys, ids, strict=True):
            if got is None:
                continue
            if target.kind == "h3":  # h3-py, one point at a time, is the reference
                assert got == h3.latlng_to_cell(y, x, h3.get_resolution(got))
            else:
                box = target.regions.geometry.loc[got]
                assert box.buffer(1e-9).covers(shapely.Point(x, y))
    return check


def parse_oracle(cells: Any) -> Callable[[Any], None]:
    def check(parsed: Any) -> None:
        assert [h3.int_to_str(int(c)) for c in parsed] == [c.lower() for c in h3_text(cells)]
    return check


def parents_oracle(cells: Any, resolution: int) -> Callable[[Any], None]:
    def check(parents: Any) -> None:
        assert [h3.int_to_str(int(p)) for p in parents] == [
            h3.cell_to_parent(c.lower(), resolution) for c in h3_text(cells)]
    return check


def resolution_oracle(cells: Any) -> Callable[[Any], None]:
    def check(resolutions: Any) -> None:
        assert list(resolutions) == [h3.get_resolution(c.lower()) for c in h3_text(cells)]
    return check


def latlng_oracle(lat: Any, lon: Any, resolution: int) -> Callable[[Any], None]:
    def check(cells: Any) -> None:
        assert [h3.int_to_str(int(c)) for c in cells] == [
            h3.latlng_to_cell(float(y), float(x), resolution)
            for y, x in zip(np.ravel(lat), np.ravel(lon), strict=True)]
    return check


def disk_oracle(cells: Any, k: int) -> Callable[[Any], None]:
    def check(result: Any) -> None:
        offsets, disks = result
        for i, cell in enumerate(h3_text(cells)):
            got = {h3.int_to_str(int(c)) for c in disks[offsets[i]:offsets[i + 1]]}
            assert got == set(h3.grid_disk(cell.lower(), k))
    return check


def fleet_oracle(n: int) -> Callable[[Any], None]:
    def check(fleet: Any) -> None:
        assert len(fleet) == n
        assert fleet["lon"].between(-180, 180).all()
        assert fleet["lat"].between(-90, 90).all()
    return check


# --------------------------------------------------------------------------- strategies

numbers = st.one_of(st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True))
scalars = st.one_of(st.none(), st.booleans(), numbers, st.text(max_size=8),
                    st.binary(max_size=8), st.just(np.float64(np.nan)), st.just(np.int64(3)))
junk = st.one_of(scalars, st.lists(scalars, max_size=4), st.dictionaries(st.text(max_size=3),
                 scalars, max_size=3),
                 st.builds(lambda v: np.asarray(v, dtype=object), st.lists(scalars, max_size=4)))

resolutions = st.one_of(st.integers(0, 5), st.sampled_from([-1, 16, 2**40]), scalars)
containments = st.one_of(st.sampled_from(["center", "overlap", "full"]), scalars)
coordinate = st.one_of(st.floats(-200, 200), st.sampled_from([np.nan, np.inf, 4.4e6, 90.0,
                                                                -180.0, 180.0]))


@st.composite
def shapes(draw: st.DrawFn) -> Any:
    """One geometry, good or bad: small boxes, caps, bowties, collections, None..."""
    x, y = draw(coordinate), draw(st.floats(-95, 95))
    size = draw(st.floats(0.0, 2.0))
    return draw(st.sampled_from([
        shapely.box(x, y, x + size, y + size),
        shapely.box(-180, 85, 180, 90),
        shapely.MultiPolygon([shapely.box(179, 0, 180, 1), shapely.box(-180, 0, -179, 1)]),
        shapely.Polygon([(179, 0), (-179, 0), (-179, 1), (179, 1)]),
        shapely.Polygon([(0, 0), (1, 1), (1, 0), (0, 1)]),  # bowtie
        shapely.Polygon(),
        shapely.GeometryCollection([shapely.box(0, 0, 1, 1), shapely.Point(3, 3)]),
        shapely.Point(x, y),
        shapely.LineString([(0, 0), (1, 1)]),
        None,
    ]))


@st.composite
def geo_frames(draw: st.DrawFn) -> Any:
    """A GeoSeries/GeoDataFrame of a few shapes, with or without a (lon/lat) CRS."""
    geoms = draw(st.lists(shapes(), max_size=3))
    crs = draw(st.sampled_from([4326, 4326, None, 3857]))
    series = gpd.GeoSeries(geoms, crs=crs)
    if draw(st.booleans()):
        ids = draw(st.lists(st.one_of(st.text(max_size=2), st.none(), st.integers(0, 3)),
                            min_size=len(geoms), max_size=len(geoms)))
        return gpd.GeoDataFrame({"id": pd.Series(ids, dtype=object)}, geometry=series)
    return series


geo_inputs = st.one_of(geo_frames(), shapes(), junk)


@pytest.fixture(scope="module")
def part() -> Partition:
    area = gpd.GeoSeries([shapely.box(-105.5, 39.5, -104.5, 40.5)], crs=4326)
    return Partition.from_h3_cover(area, 5, containment="overlap", name="fuzz")


@pytest.fixture(scope="module")
def regions() -> Partition:
    frame = gpd.GeoDataFrame({"id": ["a", "b"]}, crs=4326,
                             geometry=[shapely.box(0, 0, 1, 1), shapely.box(1, 0, 2, 1)])
    return Partition.from_geodataframe(frame, "id")


def cell_inputs() -> st.SearchStrategy[Any]:
    good = st.lists(st.builds(lambda lat, lon, r: h3.latlng_to_cell(lat, lon, r),
                              st.floats(-89, 89), st.floats(-179, 179), st.integers(0, 6)),
                    max_size=4)
    return st.one_of(good, junk, st.lists(st.integers(-5, 2**64 - 1), max_size=3),
                     st.just(np.array([0, 5], dtype=np.uint64)))


# --------------------------------------------------------------------------- properties


@SETTINGS
@given(area=geo_inputs, resolution=resolutions, containment=containments,
       max_cells=st.one_of(st.just(20_000), scalars))
def test_from_h3_cover(area: Any, resolution: Any, containment: Any, max_cells: Any) -> None:
    only_spatialdp_errors(lambda: Partition.from_h3_cover(
        area, resolution, containment=containment, max_cells=max_cells),
        cover_oracle(resolution, max_cells))


@SETTINGS
@given(frame=geo_inputs, id_column=st.one_of(st.just("id"), junk))
def test_from_geodataframe(frame: Any, id_column: Any) -> None:
    only_spatialdp_errors(lambda: Partition.from_geodataframe(frame, id_column))


@SETTINGS
@given(cells=cell_inputs(), name=st.one_of(st.just("x"), scalars))
def test_from_h3_cells(cells: Any, name: Any) -> None:
    only_spatialdp_errors(lambda: Partition.from_h3_cells(cells, name=name), cells_oracle(cells))


@SETTINGS
@given(data=st.data(), use_points=st.booleans())
def test_assign(part: Partition, regions: Partition, data: st.DataObject,
                use_points: bool) -> None:
    for target in (part, regions):
        if use_points:
            points = data.draw(geo_inputs)
            only_spatialdp_errors(lambda t=target, points=points: t.assign(points))
        else:
            lon = data.draw(st.one_of(st.lists(coordinate, max_size=4), junk))
            lat = data.draw(st.one_of(st.lists(coordinate, max_size=4), junk))
            only_spatialdp_errors(lambda t=target, lon=lon, lat=lat: t.assign(lon=lon, lat=lat),
                                  assign_oracle(target, lon, lat))


@SETTINGS
@given(queries=geo_inputs, containment=containments)
def test_polygons_to_cells(part: Partition, regions: Partition, queries: Any,
                           containment: Any) -> None:
    for target in (part, regions):
        only_spatialdp_errors(lambda t=target: t.polygons_to_cells(
            queries, containment, max_cells=50_000))


@SETTINGS
@given(values=st.one_of(junk, st.lists(st.floats(allow_nan=True), min_size=1, max_size=3)),
       resolution=resolutions, region=junk, table=junk, query=junk)
def test_partition_methods(part: Partition, regions: Partition, values: Any, resolution: Any,
                           region: Any, table: Any, query: Any) -> None:
    inc = part.polygons_to_cells(gpd.GeoSeries([shapely.box(-105, 40, -104.9, 40.1)], crs=4326))
    for target in (part, regions):
        only_spatialdp_errors(lambda t=target: t.rollup(values, resolution))
        only_spatialdp_errors(lambda t=target: t.coarsen(resolution))
        only_spatialdp_errors(lambda t=target: t.neighbours(region))
        only_spatialdp_errors(lambda t=target: t.join(table))
        if not isinstance(table, str):  # never a real path: no files in the work tree
            only_spatialdp_errors(lambda t=target: t.to_file(table))
        only_spatialdp_errors(lambda t=target: t.require_version(table))
    only_spatialdp_errors(lambda: inc.answer(values))
    only_spatialdp_errors(lambda: inc.cell_indices(query))


@SETTINGS
@given(cells=cell_inputs(), resolution=resolutions, values=junk, k=st.one_of(
    st.integers(0, 2), scalars), lat=junk, lon=junk, geoms=st.lists(shapes(), max_size=3),
       containment=containments)
def test_h3cells_functions(cells: Any, resolution: Any, values: Any, k: Any, lat: Any,
                           lon: Any, geoms: list[Any], containment: Any) -> None:
    only_spatialdp_errors(lambda: h3cells.parse_cells(cells), parse_oracle(cells))
    only_spatialdp_errors(lambda: h3cells.cells_to_str(cells))
    only_spatialdp_errors(lambda: h3cells.cells_resolution(cells), resolution_oracle(cells))
    only_spatialdp_errors(lambda: h3cells.single_resolution(cells))
    only_spatialdp_errors(lambda: h3cells.cell_parents(cells, resolution),
                          parents_oracle(cells, resolution))
    only_spatialdp_errors(lambda: h3cells.rollup_counts(cells, values, resolution))
    only_spatialdp_errors(lambda: h3cells.cell_polygons(cells))
    only_spatialdp_errors(lambda: h3cells.grid_disk_lists(cells, k), disk_oracle(cells, k))
    only_spatialdp_errors(lambda: h3cells.latlng_to_cells(lat, lon, resolution),
                          latlng_oracle(lat, lon, resolution))
    only_spatialdp_errors(lambda: h3cells.polygons_to_cell_lists(
        np.array(geoms, dtype=object), resolution, containment, max_cells=50_000))


@settings(max_examples=25, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(n=st.one_of(st.integers(-2, 50), scalars), share=st.one_of(st.floats(0, 1), scalars),
       partition=st.one_of(st.none(), junk))
def test_synthetic_fleet(n: Any, share: Any, partition: Any) -> None:
    # a valid but huge n (allowed up to 10**9) is a workload, not junk: it would only test
    # the machine's speed against the time limit (18,008,591 devices took over 10 s in CI)
    assume(not (isinstance(n, (int, np.integer)) and not isinstance(n, bool)
                and 10**5 < n <= 10**9))
    only_spatialdp_errors(lambda: synthetic_fleet(n, rng=0, rural_share=share,
                                                  partition=partition), fleet_oracle(n))


def test_oracles_can_fail(part: Partition) -> None:
    """The oracles above are checks: a wrong result or a vague refusal fails them."""
    cell = str(part.region_ids[0])
    with pytest.raises(AssertionError):
        cells_oracle([cell, h3.cell_to_parent(cell, 2)])(part)
    with pytest.raises(AssertionError):
        latlng_oracle([40.0], [-105.0], 5)(np.array([h3.str_to_int(cell)], dtype=np.uint64)
                                           if cell != h3.latlng_to_cell(40.0, -105.0, 5)
                                           else np.array([0], dtype=np.uint64))
    with pytest.raises(AssertionError, match="names none"):
        only_spatialdp_errors(lambda: (_ for _ in ()).throw(SpatialDPError("bad input")))


def spin_for_ever_under(seconds: int) -> None:
    with time_limit(seconds):
        while True:
            pass


def test_timer_stops_a_hang() -> None:
    """The guard above really interrupts a call that does not end."""
    with pytest.raises(TimeoutError, match="more than 1 s"):
        spin_for_ever_under(1)
