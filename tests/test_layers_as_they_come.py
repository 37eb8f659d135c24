"""Issue 23, "layers as they come" and "overlapping regions are accepted".

Each test reproduces a refusal or a defect a new user met with a real world
layer (tests/world_layer.py builds one like Natural Earth's) and fails on the
code before the fix.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import geopandas as gpd
import h3
import numpy as np
import pandas as pd
import pytest
import shapely

from spatialdp.exceptions import CRSError, InvalidInput, ReprojectedLayerWarning
from spatialdp.geo import Partition
from spatialdp.geo.lonlat import SNAP_DEGREES, check_lonlat
from tests.world_layer import NOISE_EAST, NOISE_WEST, world_layer, world_points


@pytest.fixture(scope="module")
def world() -> Partition:
    return Partition.from_geodataframe(world_layer(), "ADM0_A3", name="world",
                                       name_column="NAME")


# --------------------------------------------------------------------------- float noise


def test_a_world_layer_with_float_noise_at_the_antimeridian_is_accepted(world: Partition
                                                                         ) -> None:
    """Used to raise CRSError: longitude=180.00000000000006 is outside [-180, 180]."""
    west, south, east, north = world.regions.total_bounds
    assert (west, south, east, north) == (-180.0, -90.0, 180.0, 75.0)
    coords = shapely.get_coordinates(world.regions.geometry.values)
    assert np.abs(coords[:, 0]).max() == 180.0  # snapped onto the limit, not beyond


def test_snapping_gives_the_version_of_the_clean_layer(world: Partition) -> None:
    def without_noise(coords: np.ndarray) -> np.ndarray:
        x = coords[:, 0]
        return np.column_stack([np.where(np.abs(np.abs(x) - 180.0) < 1e-6,
                                         np.copysign(180.0, x), x), coords[:, 1]])

    clean = world_layer()
    clean["geometry"] = shapely.transform(clean.geometry.values, without_noise)
    assert np.abs(shapely.get_coordinates(clean.geometry.values)[:, 0]).max() == 180.0
    assert Partition.from_geodataframe(clean, "ADM0_A3").version == world.version


@pytest.mark.parametrize("value", [180.0 + 2 * SNAP_DEGREES, -180.001, 190.0])
def test_longitudes_beyond_the_snapping_tolerance_are_still_refused(value: float) -> None:
    layer = gpd.GeoDataFrame({"id": ["a"]}, geometry=[shapely.box(170.0, 0.0, value, 1.0)
                                                      if value > 0 else
                                                      shapely.box(value, 0.0, -170.0, 1.0)],
                             crs=4326)
    with pytest.raises(CRSError, match=rf"longitude={value!r} at row 0 is outside "
                                       r"\[-180, 180\] by more than the 1e-09 degrees"):
        Partition.from_geodataframe(layer, "id")


def test_points_within_the_tolerance_are_snapped_and_beyond_it_refused() -> None:
    lon, lat = check_lonlat([NOISE_EAST, NOISE_WEST], [-90.00000000000001, 90.0])
    assert lon.tolist() == [180.0, -180.0]
    assert lat.tolist() == [-90.0, 90.0]
    with pytest.raises(CRSError, match="latitude -90.001 at position 0 is outside"):
        check_lonlat([0.0], [-90.001])


# --------------------------------------------------------------------------- the pole


def test_a_polygon_with_an_edge_along_the_south_pole_is_accepted(world: Partition) -> None:
    """Antarctica's ring runs along latitude -90 from +180 to -180 (after snapping)."""
    where = world.assign(lon=[0.0, 100.0, -100.0, 179.9, -179.9, 0.0],
                         lat=[-89.9, -85.0, -80.0, -89.0, -89.0, -90.0])
    assert where.region.tolist() == ["ATA"] * 6


def test_a_polar_edge_between_any_two_longitudes_is_accepted() -> None:
    """An edge from (-60, -90) to (150, -90) jumps 210 degrees but is a single point."""
    ring = [(-180.0, -60.0), (180.0, -60.0), (180.0, -90.0), (150.0, -90.0),
            (-60.0, -90.0), (-180.0, -90.0)]
    layer = gpd.GeoDataFrame({"id": ["ata"]}, geometry=[shapely.Polygon(ring)], crs=4326)
    part = Partition.from_geodataframe(layer, "id")
    assert part.assign(lon=[10.0], lat=[-75.0]).region.tolist() == ["ata"]
    jump = shapely.Polygon([(-100.0, -70.0), (100.0, -70.0), (100.0, -80.0), (-100.0, -80.0)])
    with pytest.raises(InvalidInput, match="spans more than 180 degrees of longitude"):
        Partition.from_geodataframe(gpd.GeoDataFrame({"id": ["x"]}, geometry=[jump], crs=4326),
                                    "id")


@pytest.mark.parametrize("containment", ["center", "overlap", "full"])
def test_h3_cover_of_antarctica_reaches_the_pole_and_wraps_the_antimeridian(
        containment: str) -> None:
    antarctica = world_layer().query("ADM0_A3 == 'ATA'")
    cells = Partition.from_h3_cover(antarctica, 2, containment=containment)  # type: ignore[arg-type]
    pole = h3.latlng_to_cell(-90.0, 0.0, 2)
    assert pole in set(cells.region_ids)
    centres = np.array([h3.cell_to_latlng(c) for c in cells.region_ids])
    assert centres[:, 1].min() < -170.0
    assert centres[:, 1].max() > 170.0
    assert (centres[:, 0] < -60.0).all()


def test_antimeridian_countries_assign_their_points_on_both_sides(world: Partition) -> None:
    points = world_points(1200, seed=3)
    where = world.assign(lon=points.lon, lat=points.lat)
    assert (where.region == points.ADM0_A3).all()


# --------------------------------------------------------------------------- any CRS


@pytest.mark.parametrize("crs", ["EPSG:6933", "EPSG:8857", "EPSG:3857"])
def test_a_projected_layer_is_reprojected_and_says_so(crs: str, world: Partition) -> None:
    """Used to raise CRSError 'is in projected CRS ...; convert it with .to_crs(4326)'."""
    layer = world_layer(crs)
    with pytest.warns(ReprojectedLayerWarning, match=rf"projected CRS '{crs}'; spatialdp "
                                                     r"reprojected it to lon/lat EPSG:4326"):
        part = Partition.from_geodataframe(layer, "ADM0_A3", name_column="NAME")
    assert list(part.region_ids) == list(world.region_ids)
    points = world_points(600, seed=4)
    placed = part.assign(lon=points.lon, lat=points.lat).region
    inside = points.lat.between(-85.0, 85.0) & (points.ADM0_A3 != "ATA")
    assert (placed[inside] == points.ADM0_A3[inside]).all()


def test_the_warning_points_at_the_callers_line() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Partition.from_geodataframe(world_layer("EPSG:6933"), "ADM0_A3")
    assert [Path(w.filename).name for w in caught] == [Path(__file__).name]


def test_points_in_another_crs_are_reprojected(world: Partition) -> None:
    points = world_points(120, seed=5)
    frame = gpd.GeoDataFrame(points, geometry=gpd.points_from_xy(points.lon, points.lat),
                             crs=4326).to_crs(6933)
    with pytest.warns(ReprojectedLayerWarning, match="EPSG:6933"):
        where = world.assign(frame)
    assert (where.region == points.ADM0_A3).all()


def test_a_layer_without_a_crs_is_still_refused() -> None:
    layer = world_layer().set_crs(None, allow_override=True)
    with pytest.raises(CRSError, match=r"has no CRS.*set_crs\(4326\)"):
        Partition.from_geodataframe(layer, "ADM0_A3")


def test_a_crs_that_cannot_hold_the_layer_is_refused_by_name() -> None:
    """Mollweide sends Fiji's +-180 edges to infinity: named, not 'invalid geometry'."""
    layer = world_layer().to_crs("ESRI:54009")
    with pytest.raises(CRSError, match="cannot convert to lon/lat .*infinite"):
        Partition.from_geodataframe(layer, "ADM0_A3")


def test_the_cli_reads_a_projected_layer_through_the_same_path(tmp_path: Path) -> None:
    """The report CLI's layer reader no longer reprojects on its own: the API does."""
    from spatialdp.demo import load_partition

    path = tmp_path / "world.gpkg"
    world_layer("EPSG:8857").to_file(path)
    with pytest.warns(ReprojectedLayerWarning, match="EPSG:8857"):
        part = load_partition(path, "ADM0_A3")
    with pytest.warns(ReprojectedLayerWarning):
        api = Partition.from_geodataframe(gpd.read_file(path)[["ADM0_A3", "geometry"]],
                                          "ADM0_A3", name="world")
    assert part.version == api.version


# --------------------------------------------------------------------------- names


def test_names_are_kept_for_tooltips_and_labels(world: Partition) -> None:
    assert world.names is not None
    assert world.names["KOS"] == "Kosovo"
    assert world.names["CYN"] == "N. Cyprus"
    joined = world.join(pd.Series({"KOS": 1.0, "FJI": 2.0}, name="loss"))
    assert joined.loc["KOS", "name"] == "Kosovo"
    assert list(joined.columns) == ["name", "geometry", "loss"]
    own = world.join(pd.DataFrame({"name": ["mine"], "loss": [1.0]}, index=["FJI"]))
    assert own.loc["FJI", "name"] == "mine"  # the table's own column wins


def test_names_are_not_part_of_the_version_and_survive_a_file(world: Partition,
                                                              tmp_path: Path) -> None:
    plain = Partition.from_geodataframe(world_layer(), "ADM0_A3", name="world")
    assert plain.names is None
    assert plain.version == world.version
    world.to_file(str(tmp_path / "world.parquet"))
    back = Partition.read_file(str(tmp_path / "world.parquet"))
    assert back.names is not None
    assert back.names.equals(world.names)


def test_the_regional_report_carries_the_names(world: Partition) -> None:
    from spatialdp.federated import MetricSpec, regional_report
    from spatialdp.privacy.target import Simulation
    from tests._clients import tagged

    spec = MetricSpec("loss", 0.0, 1.0)
    points = world_points(2400, seed=6)
    clients = tagged({"loss": np.random.default_rng(6).uniform(0, 1, len(points))}, [spec],
                     partition=world, region_id=points.ADM0_A3.to_numpy())
    report = regional_report(clients, world, [spec], epsilon=1.0, min_cohort=5,
                             target=Simulation(rng=6))
    assert report["loss"].loc["KOS", "name"] == "Kosovo"
    wide = report.to_frame()
    assert wide.loc["CYN", "name"] == "N. Cyprus"
    assert "loss.name" not in wide.columns


@pytest.mark.parametrize(("column", "message"), [
    ("nope", "name_column 'nope' is not a column"),
    ("MISSING", "name_column 'MISSING' has 1 missing names .*fillna"),
])
def test_name_column_refusals(column: str, message: str) -> None:
    layer = world_layer()
    layer["MISSING"] = layer.NAME.where(layer.ADM0_A3 != "FRA")
    with pytest.raises(InvalidInput, match=message):
        Partition.from_geodataframe(layer, "ADM0_A3", name_column=column)


# --------------------------------------------------------------------------- per point


def test_assignment_region_is_aligned_to_the_input_index(world: Partition) -> None:
    """The per-point ids used to be a bare array; region_ids was the partition's ids."""
    points = world_points(60, seed=7).sample(frac=1.0, random_state=7)
    points.index = points.index * 10 + 5
    frame = gpd.GeoDataFrame(points, geometry=gpd.points_from_xy(points.lon, points.lat),
                             crs=4326)
    for where in (world.assign(frame), world.assign(lon=points.lon, lat=points.lat)):
        assert where.region.index.equals(points.index)
        assert (where.region == points.ADM0_A3).all()
    outside = world.assign(lon=pd.Series([0.0, 2.0], index=["sea", "paris"]),
                           lat=pd.Series([0.0, 48.0], index=["sea", "paris"]))
    assert outside.region.to_dict() == {"sea": None, "paris": "FRA"}
    assert list(outside.partition_ids) == list(world.region_ids)
    with pytest.warns(FutureWarning, match=r"use .partition_ids .* or .region"):
        assert outside.region_ids.equals(outside.partition_ids)


# --------------------------------------------------------------------------- overlaps


def boxes(*geoms: shapely.Geometry) -> gpd.GeoDataFrame:
    return gpd.GeoDataFrame({"id": [f"r{i}" for i in range(len(geoms))]},
                            geometry=list(geoms), crs=4326)


@pytest.mark.parametrize(("geoms", "message"), [
    ((shapely.box(0, 0, 2, 2), shapely.box(1, 1, 3, 3)),
     r"regions 'r0' and 'r1' overlap, sharing 0.25 of the smaller one's area \(1 "
     r"overlapping pairs"),
    ((shapely.box(0, 0, 10, 10), shapely.box(2, 2, 3, 3)), "'r0' and 'r1' overlap, sharing 1 "),
    ((shapely.box(0, 0, 1, 1), shapely.box(0, 0, 1, 1)), "'r0' and 'r1' overlap, sharing 1 "),
    ((shapely.box(0, 0, 1, 1), shapely.box(5, 5, 6, 6), shapely.box(5.5, 5, 7, 6)),
     "'r1' and 'r2' overlap, sharing 0.5 "),
])
def test_overlapping_regions_are_refused(geoms: tuple[shapely.Geometry, ...],
                                         message: str) -> None:
    """Partition.from_geodataframe used to accept two overlapping boxes."""
    with pytest.raises(InvalidInput, match=message + r".*must not overlap.*\.difference\(\)"):
        Partition.from_geodataframe(boxes(*geoms), "id")


def test_touching_regions_and_digitising_noise_are_accepted() -> None:
    left = shapely.Polygon([(0, 0), (1, 0), (1.0000000001, 0.5), (1, 1), (0, 1)])
    part = Partition.from_geodataframe(
        boxes(left, shapely.box(1, 0, 2, 1), shapely.box(2, 1, 3, 2),  # a corner
              shapely.box(1, 1, 1.5, 3)),  # a T-junction: vertices do not match
        "id")
    assert part.n_regions == 4
    # A point on the shared border goes to the region first in partition order.
    assert part.assign(lon=[1.0], lat=[0.25]).region.tolist() == ["r0"]


def test_the_world_layer_and_the_states_have_no_overlaps(states: gpd.GeoDataFrame) -> None:
    assert Partition.from_geodataframe(states, "state").n_regions == 48
    assert Partition.from_geodataframe(world_layer(), "ADM0_A3").n_regions == 12


def test_a_named_report_is_written_with_one_name_column(world: Partition,
                                                        tmp_path: Path) -> None:
    from spatialdp.federated import MetricSpec, regional_report
    from spatialdp.privacy.target import Simulation
    from tests._clients import tagged

    spec = MetricSpec("loss", 0.0, 1.0)
    points = world_points(1200, seed=8)
    clients = tagged({"loss": np.random.default_rng(8).uniform(0, 1, len(points))}, [spec],
                     partition=world, region_id=points.ADM0_A3.to_numpy())
    report = regional_report(clients, world, [spec], epsilon=1.0, min_cohort=5,
                             target=Simulation(rng=8))
    assert "loss.name" not in report.column_names()
    paths = report.write(tmp_path)
    gpkg = next(p for p in paths if p.suffix == ".gpkg")
    written = gpd.read_file(gpkg)
    assert written.set_index("region_id").loc["KOS", "name"] == "Kosovo"
    assert not any(c.endswith("_name") for c in written.columns)
