"""One cartographic style: an equal-area projection chosen from the extent, no lon/lat
axes, and regions split at (or crossing) the antimeridian drawn whole."""

from __future__ import annotations

import geopandas as gpd
import h3
import matplotlib
import numpy as np
import pandas as pd
import pytest
from shapely.geometry import MultiPolygon, Polygon, box

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from spatialdp.datasets import us_states_partition
from spatialdp.viz import (
    plot_bivariate,
    plot_moe_companion,
    plot_significance,
    plot_uncertainty_choropleth,
    plotting_crs,
)
from spatialdp.viz.projection import auto_crs, lonlat_extent, split_at_seam


@pytest.fixture(autouse=True)
def _close_figures() -> None:
    yield
    plt.close("all")


def report_of(geoms: list, crs: object = 4326, ids: list[str] | None = None) -> gpd.GeoDataFrame:
    """A regional report on the given geometries: one true value, small error bars."""
    n = len(geoms)
    index = pd.Index(ids or [f"r{i}" for i in range(n)], name="region_id")
    frame = pd.DataFrame({"value": np.linspace(1.0, 2.0, n), "error_bar": 0.05,
                          "noise_std": 0.02, "cohort": 500, "reliability": "high",
                          "suppressed": False}, index=index)
    return gpd.GeoDataFrame(frame, geometry=geoms, crs=crs)


FIJI = MultiPolygon([box(177.0, -19.0, 180.0, -16.0), box(-180.0, -18.0, -179.0, -16.0)])


def h3_cell_across_180() -> Polygon:
    """A real H3 cell whose boundary, as H3 gives it, jumps from +179.x to -179.x."""
    cell = h3.latlng_to_cell(-16.5, 179.99, 3)
    ring = [(lng, lat) for lat, lng in h3.cell_to_boundary(cell)]
    lons = np.array([x for x, _ in ring])
    assert lons.max() > 170
    assert lons.min() < -170
    return Polygon(ring)


WORLD_FILL = [box(-150, -40, -30, 60), box(-20, -30, 60, 60), box(70, -40, 150, 60)]


# ------------------------------------------------------------------ choice of projection
@pytest.mark.parametrize(("geoms", "epsg"), [
    ([box(-120, 30, -100, 45), box(-90, 30, -75, 42)], 5070),     # contiguous US
    ([box(-5, 40, 10, 52), box(10, 45, 25, 58)], 3035),           # Europe
    ([*WORLD_FILL], 8857),                                         # the world
    ([box(-180, -85, 180, 85)], 8857),                             # a world box (edge on ±180)
])
def test_auto_projection_is_equal_area_for_the_extent(geoms: list, epsg: int) -> None:
    report = report_of(geoms)
    crs = plotting_crs(report)
    assert crs.to_epsg() == epsg
    ax = plot_uncertainty_choropleth(report)
    (label,) = [t for t in ax.texts if t.get_gid() == "crs"]
    assert label.get_text().startswith(f"EPSG:{epsg}")
    # under the map, not on it (inside, it sat on Antarctica in the world map), and
    # inside the figure; the legend too, with a plain savefig (no bbox_inches="tight")
    figure = ax.figure
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    frame = figure.bbox
    extent = label.get_window_extent(renderer)
    assert extent.y1 <= ax.get_window_extent(renderer).y0 + 0.5
    assert frame.x0 <= extent.x0
    assert extent.x1 <= frame.x1
    assert extent.y0 >= frame.y0
    legend = ax.get_legend().get_window_extent(renderer)
    assert frame.x0 <= legend.x0
    assert legend.x1 <= frame.x1 + 0.5


def test_any_other_extent_gets_an_azimuthal_equal_area_centred_on_it() -> None:
    # Lower 48 with Alaska (Aleutians past 180) and Hawaii: centred on the whole US.
    us = report_of([box(-125, 25, -67, 49), box(-168, 54, -141, 71), box(172, 51, 180, 53),
                    box(-160, 19, -155, 22)])
    centre, span, _south, _north = lonlat_extent(us.geometry.values)
    assert span == pytest.approx(360 - (172 - (-67)))  # the arc from 172E east to 67W
    crs = plotting_crs(us)
    assert crs.to_epsg() is None
    assert crs.name.startswith("Lambert azimuthal equal-area centred on")
    assert crs.coordinate_operation.method_name.startswith("Lambert Azimuthal Equal Area")
    lon0 = next(p.value for p in crs.coordinate_operation.params if "Longitude" in p.name)
    assert lon0 == pytest.approx(centre, abs=0.1)
    assert -140 < lon0 < -110
    australia = report_of([box(113, -39, 154, -11)])
    assert plotting_crs(australia).name == "Lambert azimuthal equal-area centred on 133.5°E 25°S"


def test_a_projected_layer_is_placed_by_its_lonlat_extent() -> None:
    europe = report_of([box(-5, 40, 10, 52), box(10, 45, 25, 58)]).to_crs(3857)
    assert auto_crs(europe).to_epsg() == 3035
    states = us_states_partition().regions.to_crs(32616)
    assert auto_crs(states).to_epsg() == 5070


def test_auto_keeps_contiguous_us_maps_in_conus_albers() -> None:
    part = us_states_partition()
    assert auto_crs(part.regions).to_epsg() == 5070


# ------------------------------------------------------------------ no lon/lat axes
def _visible_tick_labels(ax: plt.Axes) -> list[str]:
    if not ax.axison:
        return []
    ax.figure.canvas.draw()
    return [t.get_text() for axis in (ax.xaxis, ax.yaxis) for t in axis.get_ticklabels()
            if t.get_visible() and t.get_text()] + [ax.get_xlabel(), ax.get_ylabel()]


@pytest.mark.parametrize("projection", ["auto", None])
def test_no_map_has_lonlat_axes(projection: object) -> None:
    world = report_of([*WORLD_FILL, FIJI])
    for ax in (plot_uncertainty_choropleth(world, projection=projection),
               plot_bivariate(world, projection=projection),
               plot_significance(world, 1.5, projection=projection)):
        assert [s for s in _visible_tick_labels(ax) if s] == []
    fig = plot_moe_companion(world, projection=projection)
    for ax in fig.axes:
        if ax.get_gid() in ("panel:value", "panel:moe"):
            assert [s for s in _visible_tick_labels(ax) if s] == []


# ------------------------------------------------------------------ antimeridian
def _drawn_rings(ax: plt.Axes) -> list[np.ndarray]:
    """Every ring of every region drawn on a choropleth (collections and patches)."""
    rings = []
    paths = [p for c in ax.collections for p in c.get_paths()]
    paths += [p.get_path() for p in ax.patches]
    for path in paths:
        rings.extend(np.asarray(r) for r in path.to_polygons(closed_only=False) if len(r))
    return rings


def _width_over_height(xy: np.ndarray) -> float:
    return float(np.ptp(xy[:, 0]) / max(np.ptp(xy[:, 1]), 1e-12))


def test_regions_at_the_antimeridian_are_drawn_whole_without_streaks() -> None:
    cell = h3_cell_across_180()
    report = report_of([FIJI, cell], ids=["fiji", "cell"])
    ax = plot_uncertainty_choropleth(report, legend=False)
    rings = _drawn_rings(ax)
    assert len(rings) == 2  # Fiji's two parts are joined into one (no seam line), the cell whole
    # An H3 cell is about as wide as tall, Fiji's parts too: no ring streaks across.
    assert max(_width_over_height(r) for r in rings) < 3
    # The two parts of Fiji sit side by side: the whole region is compact.
    everything = np.concatenate(rings)
    assert _width_over_height(everything) < 3


def test_world_maps_cut_crossing_rings_at_the_seam() -> None:
    cell = h3_cell_across_180()
    report = report_of([*WORLD_FILL, FIJI, cell])
    assert plotting_crs(report).to_epsg() == 8857
    ax = plot_uncertainty_choropleth(report, legend=False)
    x0, x1 = ax.get_xlim()
    for ring in _drawn_rings(ax):
        # no ring reaches across the map: the crossing cell is cut into two small pieces
        assert np.ptp(ring[:, 0]) < 0.45 * (x1 - x0)


def test_split_at_seam_unwraps_and_cuts_only_what_needs_it() -> None:
    import pyproj

    cell = h3_cell_across_180()
    plain = box(10, 10, 20, 20)
    out = split_at_seam([cell, plain, FIJI], pyproj.CRS.from_user_input(8857))
    assert out[1] is plain
    assert out[2] is FIJI
    assert out[0].geom_type == "MultiPolygon"
    unwrapped = Polygon([(x + 360 if x < 0 else x, y) for x, y in cell.exterior.coords])
    assert out[0].area == pytest.approx(unwrapped.area)
    west, _, east, _ = out[0].bounds
    assert west == pytest.approx(-180, abs=0.01)
    assert east == pytest.approx(180, abs=0.01)
    assert all(np.ptp(np.asarray(p.exterior.coords)[:, 0]) < 2 for p in out[0].geoms)
    # Centred on the layer (seam at the far side): the cell stays one piece, unwrapped.
    centred = split_at_seam([cell], auto_crs(report_of([cell])))
    assert centred[0].geom_type == "Polygon"
    assert np.ptp(np.asarray(centred[0].exterior.coords)[:, 0]) < 2  # ~1.2 degrees wide
