"""Covers of shapes at the edges of the map: out-of-range coordinates, the antimeridian,
the poles, projected layers labelled lon/lat, and covers too large to build."""

from __future__ import annotations

import geopandas as gpd
import h3
import numpy as np
import pytest
import shapely

from spatialdp.exceptions import CRSError, InvalidInput
from spatialdp.geo import MAX_PARTITION_CELLS, Partition, h3cells
from spatialdp.geo.h3cells import _estimate_cells as estimate_cells

MODES = ("center", "overlap", "full")


def series(*geoms: shapely.Geometry) -> gpd.GeoSeries:
    return gpd.GeoSeries(list(geoms), crs=4326)


def all_cells(resolution: int) -> np.ndarray:
    return np.array([c for r0 in h3.get_res0_cells()
                     for c in h3.cell_to_children(r0, resolution)])


def reference(shape: shapely.Geometry, resolution: int, mode: str) -> set[str]:
    """Cells of ``shape`` read on the flat lon/lat plane, by brute force over the globe."""
    cells = all_cells(resolution)
    if mode == "center":
        lat, lon = np.array([h3.cell_to_latlng(c) for c in cells]).T
        return set(cells[shapely.intersects_xy(shape, lon, lat)])
    polygons = h3cells.cell_polygons(cells)
    test = shapely.intersects if mode == "overlap" else shapely.covers
    return set(cells[test(shape, polygons)])


# --------------------------------------------------------------------------- item 1


def test_longitude_beyond_180_refused_before_building() -> None:
    """box(170, -10, 190, 10) used to make H3 cover nearly the whole globe (13 GB)."""
    with pytest.raises(CRSError, match=r"longitude=190.0 at row 0 is outside \[-180, 180\] by more "
                                       r"than the 1e-09 degrees snapped onto the limit; "
                                       r"wrap .* split into parts on either side of \+-180"):
        Partition.from_h3_cover(series(shapely.box(170, -10, 190, 10)), 7)
    with pytest.raises(CRSError, match=r"latitude=95.0 .* are lon and lat swapped"):
        Partition.from_h3_cover(series(shapely.box(10, 80, 20, 95)), 3)


def test_unsplit_antimeridian_ring_refused_as_ambiguous() -> None:
    ring = shapely.Polygon([(170, -10), (-170, -10), (-170, 10), (170, 10)])
    with pytest.raises(InvalidInput, match=r"edge from \[170.0, -10.0\] to \[-170.0, -10.0\].*"
                                           r"spans more than 180 degrees.*segmentize"):
        Partition.from_h3_cover(series(ring), 3)


@pytest.mark.parametrize("mode", MODES)
def test_shape_split_at_the_antimeridian_is_covered_as_drawn(mode: str) -> None:
    split = shapely.MultiPolygon([shapely.box(170, -10, 180, 10), shapely.box(-180, -10, -170, 10)])
    part = Partition.from_h3_cover(series(split), 2, containment=mode)
    assert set(part.region_ids) == reference(split, 2, mode)
    # Cells on either side, and the cells that straddle +-180 are split, not smeared
    # across the map.
    west, _, east, _ = part.regions.total_bounds
    assert west == pytest.approx(-180)
    assert east == pytest.approx(180)
    widths = part.regions.bounds.maxx - part.regions.bounds.minx
    straddling = part.regions[widths > 180]
    assert (straddling.geom_type == "MultiPolygon").all()
    assert len(straddling) > 0
    assert (part.regions.is_valid).all()


def test_antimeridian_and_polar_cell_polygons_measure_right() -> None:
    rng = np.random.default_rng(3)
    cells = [h3.latlng_to_cell(lat, 179.999, 4) for lat in rng.uniform(-80, 80, 30)]
    cells += [h3.latlng_to_cell(90, 0, 4), h3.latlng_to_cell(-90, 0, 4)]
    polygons = gpd.GeoSeries(h3cells.cell_polygons(cells), crs=4326)
    assert polygons.is_valid.all()
    area = polygons.to_crs(6933).area.to_numpy() / 1e6  # equal-area, km^2
    true = np.array([h3.cell_area(c, "km^2") for c in cells])
    np.testing.assert_allclose(area[:-2], true[:-2], rtol=0.02)
    # Around a pole the flat lon/lat cell (straight edges in lon/lat) is bigger than
    # the geodesic hexagon, but of the same order, not the whole map.
    assert ((area[-2:] > true[-2:]) & (area[-2:] < 1.5 * true[-2:])).all()
    lat, lon = np.array([h3.cell_to_latlng(c) for c in cells]).T
    assert shapely.intersects_xy(polygons.values, lon, lat).all()


# --------------------------------------------------------------------------- item 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("cap", [shapely.box(-180, 80, 180, 90), shapely.box(-180, -90, 180, -60)])
def test_polar_caps_are_covered_in_every_mode(cap: shapely.Polygon, mode: str) -> None:
    """Caps used to cover no cell in any mode (and the refusal advised 'overlap')."""
    part = Partition.from_h3_cover(series(cap), 2, containment=mode)
    assert set(part.region_ids) == reference(cap, 2, mode)
    pole = 90.0 if cap.bounds[3] == 90 else -90.0
    assert part.assign(lon=[0.0], lat=[pole]).n_unassigned == 0  # the pole cell is in


def test_cap_overlap_cover_leaves_no_point_of_the_cap_unassigned() -> None:
    cap = shapely.box(-180, 75, 180, 90)
    part = Partition.from_h3_cover(series(cap), 3, containment="overlap")
    rng = np.random.default_rng(0)
    lon, lat = rng.uniform(-180, 180, 5000), rng.uniform(75, 90, 5000)
    assert part.assign(lon=lon, lat=lat).n_unassigned == 0


def test_empty_cover_advice_is_true() -> None:
    tiny = series(shapely.box(-100, 40, -99.9999, 40.0001))
    with pytest.raises(InvalidInput, match="finer resolution or containment='overlap'"):
        Partition.from_h3_cover(tiny, 3)
    assert Partition.from_h3_cover(tiny, 3, containment="overlap").n_regions == 1


def test_wide_query_polygons_match_the_brute_force_cover() -> None:
    part = Partition.from_h3_cells(all_cells(1))  # the whole globe at resolution 1
    band = shapely.box(-180, -30, 180, 30)
    wide = shapely.segmentize(shapely.box(-100, 0, 100, 40), 30)
    for mode in MODES:
        inc = part.polygons_to_cells(series(band, wide), containment=mode)
        for row, shape in enumerate((band, wide)):
            got = set(np.asarray(part.region_ids)[inc.cell_indices(row)])
            assert got == reference(shape, 1, mode)


# --------------------------------------------------------------------------- item 3


def test_projected_layer_labelled_lonlat_refused(states: gpd.GeoDataFrame) -> None:
    """A UTM layer labelled EPSG:4326 used to build a partition of total area 0 km^2."""
    utm = states.to_crs(32613).set_crs(4326, allow_override=True)
    message = r"far outside lon/lat degrees: the layer looks projected.*set_crs\(.*to_crs\(4326\)"
    with pytest.raises(CRSError, match=message):
        Partition.from_geodataframe(utm, "state")
    with pytest.raises(CRSError, match=message):
        Partition.from_h3_cover(utm, 4)
    part = Partition.from_h3_cover(states[states.state == "CO"], 4)
    with pytest.raises(CRSError, match=message):
        part.polygons_to_cells(utm)


# --------------------------------------------------------------------------- size guard


def test_cover_too_large_refused_with_a_coarser_resolution() -> None:
    globe = series(shapely.box(-180, -90, 180, 90))
    with pytest.raises(InvalidInput, match=r"resolution=9 for the area to cover would take "
                                           r"about [\d,]+ H3 cells, above the limit of "
                                           r"2,000,000 .*use resolution=4 or coarser"):
        Partition.from_h3_cover(globe, 9)
    assert MAX_PARTITION_CELLS == 2_000_000
    with pytest.raises(InvalidInput, match="above the limit of 10"):
        Partition.from_h3_cover(globe, 1, max_cells=10)
    with pytest.raises(InvalidInput, match="max_cells=0 is below the limit"):
        Partition.from_h3_cover(globe, 1, max_cells=0)
    part = Partition.from_h3_cover(series(shapely.box(-105, 39, -104, 40)), 5)
    with pytest.raises(InvalidInput, match="for the query polygons would take about"):
        part.polygons_to_cells(globe, max_cells=1_000)
    # A thin shape has little area but still touches a cell per edge length.
    sliver = np.array([shapely.box(-180, 0, 180, 1e-9)], dtype=object)
    with pytest.raises(InvalidInput, match="would take about"):
        h3cells.polygons_to_cell_lists(sliver, 15, "overlap")


@pytest.mark.parametrize("resolution", [4, 6])
def test_estimate_is_of_the_order_of_the_cover(states: gpd.GeoDataFrame, resolution: int) -> None:
    geoms = np.asarray(states.geometry.values)
    _, cells = h3cells.polygons_to_cell_lists(geoms, resolution, "overlap")
    estimate = estimate_cells(geoms, resolution)
    assert cells.size <= estimate < 3 * cells.size
