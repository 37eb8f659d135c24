"""Every refusal of bad input in spatialdp.geo, with the message it gives.

Each of these used to escape as an AttributeError, TypeError, ValueError from
numpy/pandas/h3ronpy, or went through silently (ids "None", strings read as
numbers, a point frame and lon= both given).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import geopandas as gpd
import h3
import numpy as np
import pandas as pd
import pytest
import shapely

from spatialdp.datasets import synthetic_fleet
from spatialdp.exceptions import CRSError, InvalidCells, InvalidInput, SpatialDPError
from spatialdp.geo import Partition

BOX = shapely.box(0, 0, 1, 1)
with np.errstate(invalid="ignore"):  # shapely warns while building it
    NAN_POLYGON = shapely.Polygon([(0, 0), (1, np.nan), (1, 0)])


def frame(*geoms: Any, ids: list[Any] | None = None, crs: Any = 4326) -> gpd.GeoDataFrame:
    return gpd.GeoDataFrame({"id": ids if ids is not None else [str(i) for i in
                                                               range(len(geoms))]},
                            geometry=list(geoms), crs=crs)


@pytest.fixture(scope="module")
def cells() -> Partition:
    return Partition.from_h3_cover(gpd.GeoSeries([shapely.box(-105.5, 39.5, -104.5, 40.5)],
                                                 crs=4326), 5, name="cells")


@pytest.fixture(scope="module")
def regions() -> Partition:
    return Partition.from_geodataframe(frame(BOX, shapely.box(1, 0, 2, 1)), "id")


CASES: list[tuple[str, Callable[[Partition, Partition], Any], type[SpatialDPError], str]] = [
    ("cover of a bare polygon", lambda c, r: Partition.from_h3_cover(BOX, 5),
     InvalidInput, r"area=<POLYGON .* is a Polygon, not a GeoDataFrame .*GeoSeries\(\[geom\]"),
    ("cover of a DataFrame", lambda c, r: Partition.from_h3_cover(pd.DataFrame(), 5),
     InvalidInput, "is a DataFrame, not a GeoDataFrame or GeoSeries"),
    ("cover of nothing", lambda c, r: Partition.from_h3_cover(gpd.GeoSeries([], crs=4326), 5),
     InvalidInput, "the area to cover has no rows"),
    ("resolution as text", lambda c, r: Partition.from_h3_cover(frame(BOX), "5"),
     InvalidInput, "resolution='5' is a string, not a number"),
    ("resolution as a bool", lambda c, r: Partition.from_h3_cover(frame(BOX), True),
     InvalidInput, "resolution=True is a bool"),
    ("containment", lambda c, r: Partition.from_h3_cover(frame(BOX), 5, containment="all"),
     InvalidInput, r"containment='all' is not one of the accepted values; pass one of "
                   r"\['center', 'full', 'overlap'\]"),
    ("GeometryCollection", lambda c, r: Partition.from_h3_cover(
        frame(shapely.GeometryCollection([BOX, shapely.Point(3, 3)])), 5),
     InvalidInput, "row 0 is a GeometryCollection; keep its polygonal parts"),
    ("None geometry", lambda c, r: Partition.from_h3_cover(frame(BOX, None), 5),
     InvalidInput, r"1 geometries are missing \(None\) \(first at row 1\)"),
    ("NaN coordinate", lambda c, r: Partition.from_h3_cover(
        frame(NAN_POLYGON), 5),
     InvalidInput, "geometries are invalid .*Invalid Coordinate"),
    ("no CRS", lambda c, r: Partition.from_h3_cover(gpd.GeoSeries([BOX]), 5),
     CRSError, "has no CRS"),
    ("no active geometry", lambda c, r: Partition.from_geodataframe(
        gpd.GeoDataFrame({"id": ["a"]}), "id"), InvalidInput, "has no active geometry column"),
    ("missing id", lambda c, r: Partition.from_geodataframe(
        frame(BOX, shapely.box(1, 0, 2, 1), ids=["a", None]), "id"),
     InvalidInput, "id_column 'id' has 1 missing values"),
    ("unhashable id column", lambda c, r: Partition.from_geodataframe(frame(BOX), ["id"]),
     InvalidInput, r"id_column \['id'\] is not a column"),
    ("no regions", lambda c, r: Partition.from_geodataframe(frame(), "id"),
     InvalidInput, "has no rows; a partition needs at least one region"),
    ("region frame is a GeoSeries", lambda c, r: Partition.from_geodataframe(
        gpd.GeoSeries([BOX], crs=4326), "id"), InvalidInput, "is a GeoSeries, not a GeoDataFrame"),
    ("name", lambda c, r: Partition.from_h3_cells(c.region_ids, name=5),
     InvalidInput, "name=5 is a int, not a string"),
    ("points and lon=", lambda c, r: r.assign(gpd.GeoSeries([shapely.Point(0.5, 0.5)], crs=4326),
                                             lon=[0.5], lat=[0.5]),
     InvalidInput, "not both"),
    ("lon without lat", lambda c, r: r.assign(lon=[0.5]), InvalidInput, "both lon= and lat="),
    ("numbers as text", lambda c, r: r.assign(lon=["0.5"], lat=[0.5]),
     InvalidInput, "lon holds string values, not numbers"),
    ("bools as coordinates", lambda c, r: r.assign(lon=[True], lat=[0.5]),
     InvalidInput, "lon holds bool values"),
    ("None point", lambda c, r: r.assign(gpd.GeoSeries([shapely.Point(0.5, 0.5), None],
                                                       crs=4326)),
     InvalidInput, r"1 geometries are missing \(None\)"),
    ("empty point", lambda c, r: r.assign(gpd.GeoSeries([shapely.Point()], crs=4326)),
     InvalidInput, "1 points are empty"),
    ("polygons as points", lambda c, r: r.assign(gpd.GeoSeries([BOX, None], crs=4326)),
     InvalidInput, "geometries are missing"),
    ("list of points", lambda c, r: r.assign([shapely.Point(0, 0)]),
     InvalidInput, "points=.* is a list, not a GeoDataFrame or GeoSeries"),
    ("rollup of text", lambda c, r: c.rollup(["a"] * c.n_regions, 3),
     InvalidInput, "values holds string values, not numbers"),
    ("rollup of NaN", lambda c, r: c.rollup(np.full(c.n_regions, np.nan), 3),
     InvalidInput, "values has [0-9]+ NaN or infinite values"),
    ("rollup finer", lambda c, r: c.rollup(np.ones(c.n_regions), 6),
     InvalidCells, "no parent at the finer resolution 6"),
    ("coarsen to text", lambda c, r: c.coarsen("3"), InvalidInput, "resolution='3' is a string"),
    ("neighbour of a list", lambda c, r: r.neighbours(["0"]),
     InvalidInput, r"region \['0'\] is not in partition .*ids are strings such as \['0', '1'\]"),
    ("join a list", lambda c, r: r.join([1, 2]), InvalidInput, "values=.* is a list; pass a"),
    ("join a geometry column", lambda c, r: r.join(pd.DataFrame({"geometry": [1]}, index=["0"])),
     InvalidInput, "has a 'geometry' column"),
    ("join a MultiIndex", lambda c, r: r.join(pd.Series(
        [1], index=pd.MultiIndex.from_tuples([("0", 1)]))), InvalidInput, "has a MultiIndex"),
    ("version not text", lambda c, r: r.require_version(None),
     InvalidInput, "version=None is a NoneType, not a partition version"),
    ("path not text", lambda c, r: r.to_file(3), InvalidInput, "path=3 is a int, not a file path"),
    ("empty path", lambda c, r: r.to_file(""), InvalidInput, "path='' is empty"),
    ("query index", lambda c, r: c.polygons_to_cells(frame(shapely.box(-105, 40, -104.9, 40.1)))
     .cell_indices(5), InvalidInput, "query=5 is above the limit <= 0"),
    ("answer text", lambda c, r: c.polygons_to_cells(frame(shapely.box(-105, 40, -104.9, 40.1)))
     .answer(["x"] * c.n_regions), InvalidInput, "cell_values holds string values"),
    ("fleet partition", lambda c, r: synthetic_fleet(10, partition="us"),
     InvalidInput, "partition='us' is a str, not a Partition"),
    ("fleet n as bool", lambda c, r: synthetic_fleet(True), InvalidInput, "n=True is a bool"),
    ("fleet on specks", lambda c, r: synthetic_fleet(50, rng=0, partition=Partition.from_h3_cells(
        [h3.str_to_int(h3.latlng_to_cell(0, 0, 9)), h3.str_to_int(h3.latlng_to_cell(40, 40, 9))])),
     InvalidInput, "covers .* of its bounding box"),
]


@pytest.mark.parametrize(("call", "error", "message"), [case[1:] for case in CASES],
                         ids=[case[0] for case in CASES])
def test_refusal(cells: Partition, regions: Partition,
                 call: Callable[[Partition, Partition], Any],
                 error: type[SpatialDPError], message: str) -> None:
    with pytest.raises(error, match=message):
        call(cells, regions)


def test_read_file_refuses_foreign_and_broken_files(tmp_path: Path, regions: Partition) -> None:
    text = tmp_path / "notes.parquet"
    text.write_text("not parquet")
    with pytest.raises(InvalidInput, match="is not a Parquet file"):
        Partition.read_file(str(text))
    import pyarrow.parquet as pq

    path = tmp_path / "p.parquet"
    regions.to_file(str(path))
    table = pq.read_table(path)
    meta = {**table.schema.metadata, b"spatialdp.partition": b"{not json"}
    pq.write_table(table.replace_schema_metadata(meta), path)
    with pytest.raises(InvalidInput, match="unreadable spatialdp metadata"):
        Partition.read_file(str(path))
    with pytest.raises(InvalidInput, match="path=None is a NoneType"):
        Partition.read_file(None)  # type: ignore[arg-type]
