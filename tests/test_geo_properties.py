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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spatialdp.datasets import synthetic_fleet
from spatialdp.exceptions import SpatialDPError
from spatialdp.geo import Partition, UnassignedPointsWarning, h3cells
from tests._timeouts import time_limit

SETTINGS = settings(max_examples=40, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])
TIME_LIMIT_S = 10


def only_spatialdp_errors(call: Callable[[], Any]) -> None:
    """Run ``call``: success or a SpatialDPError pass; anything else fails the test."""
    with time_limit(TIME_LIMIT_S), warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", UnassignedPointsWarning)  # a legitimate outcome
        try:
            call()
        except SpatialDPError:
            pass


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
        area, resolution, containment=containment, max_cells=max_cells))


@SETTINGS
@given(frame=geo_inputs, id_column=st.one_of(st.just("id"), junk))
def test_from_geodataframe(frame: Any, id_column: Any) -> None:
    only_spatialdp_errors(lambda: Partition.from_geodataframe(frame, id_column))


@SETTINGS
@given(cells=cell_inputs(), name=st.one_of(st.just("x"), scalars))
def test_from_h3_cells(cells: Any, name: Any) -> None:
    only_spatialdp_errors(lambda: Partition.from_h3_cells(cells, name=name))


@SETTINGS
@given(data=st.data(), use_points=st.booleans())
def test_assign(part: Partition, regions: Partition, data: st.DataObject,
                use_points: bool) -> None:
    for target in (part, regions):
        if use_points:
            points = data.draw(geo_inputs)
            only_spatialdp_errors(lambda t=target, p=points: t.assign(p))
        else:
            lon = data.draw(st.one_of(st.lists(coordinate, max_size=4), junk))
            lat = data.draw(st.one_of(st.lists(coordinate, max_size=4), junk))
            only_spatialdp_errors(lambda t=target, a=lon, b=lat: t.assign(lon=a, lat=b))


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
    only_spatialdp_errors(lambda: h3cells.parse_cells(cells))
    only_spatialdp_errors(lambda: h3cells.cells_to_str(cells))
    only_spatialdp_errors(lambda: h3cells.cells_resolution(cells))
    only_spatialdp_errors(lambda: h3cells.single_resolution(cells))
    only_spatialdp_errors(lambda: h3cells.cell_parents(cells, resolution))
    only_spatialdp_errors(lambda: h3cells.rollup_counts(cells, values, resolution))
    only_spatialdp_errors(lambda: h3cells.cell_polygons(cells))
    only_spatialdp_errors(lambda: h3cells.grid_disk_lists(cells, k))
    only_spatialdp_errors(lambda: h3cells.latlng_to_cells(lat, lon, resolution))
    only_spatialdp_errors(lambda: h3cells.polygons_to_cell_lists(
        np.array(geoms, dtype=object), resolution, containment, max_cells=50_000))


@settings(max_examples=25, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(n=st.one_of(st.integers(-2, 50), scalars), share=st.one_of(st.floats(0, 1), scalars),
       partition=st.one_of(st.none(), junk))
def test_synthetic_fleet(n: Any, share: Any, partition: Any) -> None:
    only_spatialdp_errors(lambda: synthetic_fleet(n, rng=0, rural_share=share,
                                                  partition=partition))


def spin_for_ever_under(seconds: int) -> None:
    with time_limit(seconds):
        while True:
            pass


def test_timer_stops_a_hang() -> None:
    """The guard above really interrupts a call that does not end."""
    with pytest.raises(TimeoutError, match="more than 1 s"):
        spin_for_ever_under(1)
