from __future__ import annotations

from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import pyproj
import pytest
import shapely
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spatialdp.exceptions import CRSError, InvalidInput
from spatialdp.federated.aggregate import aggregate_metric
from spatialdp.federated.device import (
    DEVICE_MODULE_VERSION,
    along_across_rmse,
    calibration_by_bucket,
    clipped_mean_loss,
    clipped_ratio,
    coverage,
    device_report,
    error_histogram,
    sample_count_bucket,
    track_errors,
    track_ratio_spec,
)
from spatialdp.federated.metrics import HistogramSpec, MetricSpec
from spatialdp.federated.regional import regional_report
from spatialdp.geo.partition import Partition
from spatialdp.privacy.target import Simulation

GEOD = pyproj.Geod(ellps="WGS84")
LOSS = MetricSpec("loss", 0.0, 2.5)
HIST = HistogramSpec("abs_error_m", edges=(0.5, 1.0, 2.0, 5.0, 10.0, 25.0))
# A UTM zone 13 frame on its central meridian (grid north = true north there).
UTM13 = 32613
BASE = np.array([500_000.0, 4_400_000.0])
BASE_LON, BASE_LAT = -105.0, 40.0
TO_LONLAT = pyproj.Transformer.from_crs(UTM13, 4326, always_xy=True)
SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------- builders


def offset(lon: object, lat: object, east: object, north: object
           ) -> tuple[np.ndarray, np.ndarray]:
    """The position ``east``/``north`` ground metres from (lon, lat), geodesically."""
    lon, lat, east, north = np.broadcast_arrays(*(np.atleast_1d(np.asarray(v, dtype=float))
                                                  for v in (lon, lat, east, north)))
    plon, plat, _ = GEOD.fwd(lon, lat, np.degrees(np.arctan2(east, north)),
                             np.hypot(east, north))
    return np.asarray(plon), np.asarray(plat)


def track_frame(along: object, across: object, heading: object = 0.0, lon: object = -105.0,
                lat: object = 40.0, client: object = "a") -> pd.DataFrame:
    """Examples whose error is ``along``/``across`` the heading (across: to the right)."""
    along, across, heading, lon, lat = np.broadcast_arrays(
        *(np.atleast_1d(np.asarray(v, dtype=float)) for v in (along, across, heading, lon, lat)))
    rad = np.radians(heading)
    east = along * np.sin(rad) + across * np.cos(rad)
    north = along * np.cos(rad) - across * np.sin(rad)
    plon, plat = offset(lon, lat, east, north)
    return pd.DataFrame({"client_id": np.broadcast_to(np.asarray(client), along.shape),
                         "true_lon": lon, "true_lat": lat, "pred_lon": plon, "pred_lat": plat,
                         "heading_deg": heading})


def grid_lonlat(xy: object) -> tuple[np.ndarray, np.ndarray]:
    """lon/lat of points given in metres relative to BASE in UTM zone 13."""
    pts = np.atleast_2d(np.asarray(xy, dtype=float)) + BASE
    lon, lat = TO_LONLAT.transform(pts[:, 0], pts[:, 1])
    return np.asarray(lon), np.asarray(lat)


def road_frame(true_xy: object, east: object, north: object) -> pd.DataFrame:
    lon, lat = grid_lonlat(true_xy)
    plon, plat = offset(lon, lat, east, north)
    return pd.DataFrame({"client_id": "a", "true_lon": lon, "true_lat": lat,
                         "pred_lon": plon, "pred_lat": plat})


BEND = gpd.GeoSeries([shapely.LineString([(0, 0), (100, 0), (100, 100)])],
                     crs=UTM13).translate(*BASE)


@pytest.fixture(scope="module")
def two_boxes() -> Partition:
    regions = gpd.GeoDataFrame(
        {"id": ["a", "b", "c", "d"]}, crs=4326,
        geometry=[shapely.box(x, y, x + 1, y + 1) for x in (0, 1) for y in (0, 1)])
    return Partition.from_geodataframe(regions, "id")


def mixed_examples(n_clients: int = 30, seed: int = 0) -> pd.DataFrame:
    """Examples of clients of very different sizes, with every input column."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 60, n_clients)
    sizes[:2] = (1, 1500)  # a one-example client and a heavy one
    client = np.repeat([f"c{i:03d}" for i in range(n_clients)], sizes)
    n = client.size
    lon0 = np.repeat(rng.uniform(0.1, 1.9, n_clients), sizes)
    lat0 = np.repeat(rng.uniform(0.1, 1.9, n_clients), sizes)
    lon = np.clip(lon0 + rng.normal(0, 0.05, n), 0.01, 1.99)
    lat = np.clip(lat0 + rng.normal(0, 0.05, n), 0.01, 1.99)
    frame = track_frame(rng.normal(0, 2, n), rng.normal(0, 5, n), rng.uniform(0, 360, n),
                        lon, lat, client)
    p = rng.uniform(0, 1, n)
    return frame.assign(loss=rng.lognormal(0, 1.2, n), p_pred=p,
                        outcome=(rng.uniform(0, 1, n) < p**1.5).astype(int))


# --------------------------------------------------------------------------- loss


def test_clipped_mean_loss_clips_each_example_then_averages() -> None:
    frame = pd.DataFrame({"client_id": ["b", "a", "a", "b"], "loss": [1e6, -3.0, 1.0, 1.0]})
    out = clipped_mean_loss(frame, LOSS)
    assert out.name == "loss"
    assert out.index.name == "client_id"
    assert out.to_dict() == {"a": 0.5, "b": 1.75}  # per example: b = (2.5 + 1) / 2


def test_clipped_mean_loss_refusals() -> None:
    with pytest.raises(InvalidInput, match="frame is empty"):
        clipped_mean_loss(pd.DataFrame({"client_id": [], "loss": []}), LOSS)
    with pytest.raises(InvalidInput, match=r"needs columns \['loss'\]"):
        clipped_mean_loss(pd.DataFrame({"client_id": [1]}), LOSS)
    with pytest.raises(InvalidInput, match="expected a DataFrame"):
        clipped_mean_loss([1.0], LOSS)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="'loss' has 1 NaN or infinite values .*row 1"):
        clipped_mean_loss(pd.DataFrame({"client_id": [1, 1], "loss": [1.0, np.inf]}), LOSS)
    with pytest.raises(InvalidInput, match="1 examples have no client_id .*row 0"):
        clipped_mean_loss(pd.DataFrame({"client_id": [None, "a"], "loss": [1.0, 1.0]}), LOSS)
    with pytest.raises(InvalidInput, match="'loss' is not numeric"):
        clipped_mean_loss(pd.DataFrame({"client_id": [1], "loss": ["high"]}), LOSS)


# --------------------------------------------------------------------------- geometry


def test_heading_north_pure_east_offset_is_all_across() -> None:
    row = track_errors(track_frame(0.0, 3.0, heading=0.0)).iloc[0]
    assert row.along == pytest.approx(0.0, abs=1e-6)
    assert row.across == pytest.approx(3.0, abs=1e-6)
    assert row.distance == pytest.approx(3.0, abs=1e-6)
    # the pred really is 3 m due east of the truth
    frame = track_frame(0.0, 3.0, heading=0.0)
    az, _, dist = GEOD.inv(frame.true_lon[0], frame.true_lat[0], frame.pred_lon[0],
                           frame.pred_lat[0])
    assert az == pytest.approx(90.0)
    assert dist == pytest.approx(3.0)


def test_heading_east_offset_north_is_across_to_the_left() -> None:
    lon, lat = offset(-105.0, 40.0, 0.0, 3.0)
    frame = pd.DataFrame({"true_lon": [-105.0], "true_lat": [40.0], "pred_lon": lon,
                          "pred_lat": lat, "heading_deg": [90.0]})
    row = track_errors(frame).iloc[0]
    assert row.along == pytest.approx(0.0, abs=1e-6)
    assert row.across == pytest.approx(-3.0, abs=1e-6)


@pytest.mark.parametrize(("lon", "lat", "metric_crs"), [
    (-105.0, 40.0, None),
    (-80.0, 60.0, UTM13),   # 25 degrees off the zone's meridian: grid north is 22 deg off
    (-96.0, 45.0, "EPSG:32613"),
    (0.0, 0.0, 3395),       # World Mercator: scale 1 only at the equator
    (10.0, 70.0, 3395),     # ... and about 2.9 at 70 N
])
@pytest.mark.parametrize("heading", [0.0, 37.0, 200.0, 359.5])
def test_decomposition_is_exact_in_any_conformal_crs(lon: float, lat: float,
                                                     metric_crs: object, heading: float) -> None:
    frame = track_frame([1.5, 0.0, -4.0], [-2.5, 3.0, 0.0], heading, lon, lat)
    errors = track_errors(frame, metric_crs=metric_crs)
    np.testing.assert_allclose(errors.along, [1.5, 0.0, -4.0], atol=1e-5)
    np.testing.assert_allclose(errors.across, [-2.5, 3.0, 0.0], atol=1e-5)


def test_default_crs_handles_the_antimeridian_and_global_fleets() -> None:
    near = track_frame([2.0, 2.0], [1.0, 1.0], 45.0, lon=[179.999, -179.999], lat=[-40, -40])
    np.testing.assert_allclose(track_errors(near)[["along", "across"]], [[2, 1], [2, 1]],
                               atol=1e-5)
    world = track_frame([2.0, 2.0, 2.0], [1.0, 1.0, 1.0], 300.0, lon=[-100, 0, 100],
                        lat=[50, -30, 10])
    np.testing.assert_allclose(track_errors(world)[["along", "across"]],
                               [[2, 1]] * 3, atol=1e-5)


def test_heading_matches_a_geodesic_reference_per_example() -> None:
    rng = np.random.default_rng(3)
    n = 400
    lon, lat = rng.uniform(-124, -68, n), rng.uniform(26, 48, n)  # one UTM zone for CONUS
    plon, plat = offset(lon, lat, rng.normal(0, 20, n), rng.normal(0, 20, n))
    heading = rng.uniform(-720, 720, n)
    frame = pd.DataFrame({"true_lon": lon, "true_lat": lat, "pred_lon": plon,
                          "pred_lat": plat, "heading_deg": heading})
    got = track_errors(frame)
    along, across = [], []
    for i in range(n):  # the slow way: geodesic azimuth and distance, one example at a time
        az, _, dist = GEOD.inv(lon[i], lat[i], plon[i], plat[i])
        turn = np.radians(az - heading[i])
        along.append(dist * np.cos(turn))
        across.append(dist * np.sin(turn))
    np.testing.assert_allclose(got.along, along, atol=1e-4)
    np.testing.assert_allclose(got.across, across, atol=1e-4)


def test_road_straight_line_in_lonlat() -> None:
    road = gpd.GeoSeries([shapely.LineString([(-105.01, 40.0), (-104.99, 40.0)])], crs=4326)
    lon, lat = offset(-105.0, 40.0, 0.0, 1.0)  # 1 m north of the road
    plon, plat = offset(lon.repeat(2), lat.repeat(2), [0.0, 3.0], [3.0, 0.0])
    frame = pd.DataFrame({"true_lon": lon.repeat(2), "true_lat": lat.repeat(2),
                          "pred_lon": plon, "pred_lat": plat})
    got = track_errors(frame, roads=road)
    np.testing.assert_allclose(got[["along", "across"]], [[0, -3], [3, 0]], atol=1e-3)
    reversed_road = road.reverse()  # digitised westward: the signs flip, the sizes do not
    back = track_errors(frame, roads=reversed_road)
    np.testing.assert_allclose(back[["along", "across"]], [[0, 3], [-3, 0]], atol=1e-3)
    as_array = track_errors(frame, roads=np.asarray(road.values))  # plain lon/lat array
    pd.testing.assert_frame_equal(as_array, got)


def test_road_bend_uses_the_segment_or_the_bisector_at_the_vertex() -> None:
    diag = 2 * np.sqrt(2)
    cases = [
        ((92, 3), (0, 3), (0, -3)),        # on the first leg (east): north is to the left
        ((97, 50), (3, 0), (0, 3)),        # on the second leg (north): east is to the right
        ((105, -5), (2, 2), (diag, 0)),    # outside the corner: nearest is the vertex,
        ((105, -5), (2, -2), (0, diag)),   # tangent is the bisector (north-east)
    ]
    for true_xy, (east, north), expected in cases:
        got = track_errors(road_frame(true_xy, east, north), roads=BEND).iloc[0]
        assert (got.along, got.across) == pytest.approx(expected, abs=2e-3), true_xy


def test_road_matches_shapely_line_locate_reference() -> None:
    rng = np.random.default_rng(5)
    walks = rng.uniform(-3000, 3000, (30, 1, 2)) + np.cumsum(rng.normal(0, 60, (30, 15, 2)), 1)
    roads = list(shapely.linestrings(walks))
    roads.append(shapely.MultiLineString([[(0, 0), (500, 0)], [(800, 0), (800, 400)]]))
    grid_roads = np.asarray(roads, dtype=object)
    true_xy = walks.reshape(-1, 2)[rng.integers(0, 450, 300)] + rng.normal(0, 15, (300, 2))
    true_xy = np.vstack([true_xy, [[400, 5], [805, 200], [9000, 9000]]])
    err_xy = rng.normal(0, 4, true_xy.shape)
    lon, lat = grid_lonlat(true_xy)
    plon, plat = grid_lonlat(true_xy + err_xy)
    frame = pd.DataFrame({"true_lon": lon, "true_lat": lat, "pred_lon": plon, "pred_lat": plat})
    got = track_errors(frame, roads=gpd.GeoSeries(grid_roads, crs=UTM13).translate(*BASE),
                       metric_crs=UTM13, max_road_distance=40.0)

    # Reference in the projection's plane with shapely, one example at a time.
    parts = shapely.get_parts(grid_roads)
    scale = np.asarray(pyproj.Proj(UTM13).get_factors(lon, lat).meridional_scale)
    along, across = np.full(len(lon), np.nan), np.full(len(lon), np.nan)
    for i, (x, y) in enumerate(true_xy):
        point = shapely.Point(x, y)
        dist = shapely.distance(point, parts)
        if dist.min() * 1.0 > 40.0 * scale[i]:
            continue
        road = parts[int(np.argmin(dist))]
        s = shapely.line_locate_point(road, point)
        window = 1.0 * scale[i]
        a = shapely.line_interpolate_point(road, max(s - window, 0.0))
        b = shapely.line_interpolate_point(road, min(s + window, road.length))
        tangent = np.array([b.x - a.x, b.y - a.y])
        tangent /= np.hypot(*tangent)
        along[i] = err_xy[i] @ tangent / scale[i]
        across[i] = (err_xy[i, 0] * tangent[1] - err_xy[i, 1] * tangent[0]) / scale[i]
    assert np.isnan(along[-1])
    assert np.isfinite(along[-3:-1]).all()
    np.testing.assert_array_equal(np.isnan(got.along), np.isnan(along))
    np.testing.assert_allclose(got.along, along, atol=2e-4)
    np.testing.assert_allclose(got.across, across, atol=2e-4)


def test_examples_far_from_roads_are_left_out() -> None:
    frame = pd.concat([road_frame((50, 2), 1, 1).assign(client_id="near"),
                       road_frame((50, 500), 1, 1).assign(client_id="far")])
    errors = track_errors(frame, roads=BEND)
    assert np.isfinite(errors.along.iloc[0])
    assert np.isnan(errors.along.iloc[1])
    assert errors.distance.iloc[1] == pytest.approx(np.sqrt(2), abs=1e-6)
    assert list(along_across_rmse(frame, roads=BEND).index) == ["near"]  # not ratio 1.0
    report = device_report(frame, roads=BEND)
    assert list(report.loc["far", ["ratio", "track_present"]]) == [0.0, 0]
    assert report.loc["near", "track_present"] == 1


def test_point_columns_with_any_crs_match_lonlat_columns() -> None:
    frame = track_frame([1.0, -2.0], [3.0, 0.5], 120.0)
    points = gpd.GeoDataFrame({
        "client_id": frame.client_id, "heading_deg": frame.heading_deg,
        "true_geometry": gpd.GeoSeries.from_xy(frame.true_lon, frame.true_lat, crs=4326),
        "pred_geometry": gpd.GeoSeries.from_xy(frame.pred_lon, frame.pred_lat,
                                               crs=4326).to_crs(3857),
    }, geometry="true_geometry")
    pd.testing.assert_frame_equal(track_errors(points), track_errors(frame), atol=1e-6)


def test_geometry_refusals() -> None:
    frame = track_frame([1.0], [1.0])
    naive = frame.assign(
        true_geometry=gpd.GeoSeries.from_xy(frame.true_lon, frame.true_lat, crs=4326),
        pred_geometry=gpd.GeoSeries.from_xy(frame.pred_lon, frame.pred_lat))
    with pytest.raises(CRSError, match=r"'pred_geometry' has no CRS.*set_crs\(4326\)"):
        track_errors(naive)
    with pytest.raises(CRSError, match="has no CRS"):
        track_errors(frame.assign(true_geometry=shapely.points([0.0], [0.0]),
                                  pred_geometry=shapely.points([0.0], [0.0])))
    lines = naive.assign(pred_geometry=gpd.GeoSeries([shapely.LineString([(0, 0), (1, 1)])],
                                                     crs=4326))
    with pytest.raises(InvalidInput, match="must hold Point geometries; row 0 is a LineString"):
        track_errors(lines)
    empty = naive.assign(pred_geometry=gpd.GeoSeries([shapely.Point()], crs=4326))
    with pytest.raises(InvalidInput, match="1 missing or empty points"):
        track_errors(empty)
    with pytest.raises(CRSError, match="latitude 4400000.0 at row 0 .*look projected"):
        track_errors(frame.assign(true_lat=4_400_000.0))
    with pytest.raises(InvalidInput, match="'pred_lon' has 1 NaN"):
        track_errors(frame.assign(pred_lon=np.nan))
    with pytest.raises(InvalidInput, match="no positions: give point columns"):
        track_errors(frame.drop(columns="pred_lat"))
    with pytest.raises(InvalidInput, match="'heading_deg' has 1 NaN"):
        track_errors(frame.assign(heading_deg=np.nan))
    with pytest.raises(InvalidInput, match="no 'heading_deg' column and no roads="):
        track_errors(frame.drop(columns="heading_deg"))
    with pytest.raises(InvalidInput, match="non-empty DataFrame"):
        track_errors(frame.iloc[:0])


def test_metric_crs_refusals() -> None:
    frame = track_frame([1.0], [1.0])
    with pytest.raises(CRSError, match="not a projected CRS in metres"):
        track_errors(frame, metric_crs=4326)
    with pytest.raises(CRSError, match=r"not a projected CRS in metres \(units \['US survey"):
        track_errors(frame, metric_crs=2249)
    with pytest.raises(CRSError, match="not a CRS pyproj knows"):
        track_errors(frame, metric_crs="EPSG:no")
    # the Swiss oblique Mercator returns finite garbage this far away: the round trip sees it
    with pytest.raises(CRSError, match="1 positions cannot be projected .*lon 100.0"):
        track_errors(track_frame([1.0], [1.0], lon=100.0, lat=-60.0), metric_crs=2056)
    # only roads need a projection: there, no default CRS fits polar or global data
    near_pole = track_frame([1.0], [1.0], lat=88.0)
    pole_road = gpd.GeoSeries([shapely.LineString([(-105.1, 88.0), (-104.9, 88.0)])], crs=4326)
    with pytest.raises(CRSError, match="no UTM zone covers .*polar stereographic"):
        track_errors(near_pole, roads=pole_road)
    with pytest.raises(CRSError, match="reach latitude 88.0"):
        track_errors(track_frame([1.0, 1.0], [1.0, 1.0], lon=[-100, 100], lat=[0, 88]),
                     roads=pole_road)


@pytest.mark.parametrize("heading", [0.0, 37.0, 200.0])
def test_heading_split_needs_no_projection_near_the_poles_or_worldwide(heading: float) -> None:
    frame = track_frame([2.0, -1.0, 3.0, 0.5], [1.0, 4.0, -2.0, 0.0], heading,
                        lon=[-100.0, 100.0, 0.0, 179.9999], lat=[0.0, 88.0, -89.5, 70.0])
    errors = track_errors(frame)
    np.testing.assert_allclose(errors.along, [2.0, -1.0, 3.0, 0.5], atol=1e-6)
    np.testing.assert_allclose(errors.across, [1.0, 4.0, -2.0, 0.0], atol=1e-6)


def test_road_refusals() -> None:
    frame = road_frame((50, 2), 1, 1)
    with pytest.raises(CRSError, match=r"roads GeoSeries has no CRS.*set_crs\(4326\)"):
        track_errors(frame, roads=BEND.set_crs(None, allow_override=True))
    with pytest.raises(CRSError, match=r"roads \(an array is taken as lon/lat\).*look projected"):
        track_errors(frame, roads=np.asarray(BEND.values))
    with pytest.raises(InvalidInput, match="road at position 0 is not a"):
        track_errors(frame, roads=gpd.GeoSeries([shapely.Point(0, 0)], crs=4326))
    with pytest.raises(InvalidInput, match="road at position 1 has zero length"):
        track_errors(frame, roads=gpd.GeoSeries(
            [shapely.LineString([(0, 0), (1, 1)]), shapely.LineString([(0, 0), (0, 0)])],
            crs=4326))
    with pytest.raises(InvalidInput, match="1 roads are missing or empty"):
        track_errors(frame, roads=gpd.GeoSeries([None], crs=4326))
    with pytest.raises(InvalidInput, match="roads is empty"):
        track_errors(frame, roads=gpd.GeoSeries([], crs=4326))
    with pytest.raises(InvalidInput, match="max_road_distance=0 must be a positive"):
        track_errors(frame, roads=BEND, max_road_distance=0)


# --------------------------------------------------------------------------- ratio


def test_seed_anisotropy_checks_done_right() -> None:
    signs = np.tile([1.0, -1.0], 50)
    isotropic = track_frame(signs, signs[::-1], 30.0, client="iso")
    sideways = track_frame(signs, 6 * signs, 30.0, client="side")
    degenerate = track_frame(np.zeros(10), 500 * signs[:10], 30.0, client="degenerate")
    perfect = track_frame(np.zeros(3), np.zeros(3), 30.0, client="perfect")
    out = along_across_rmse(pd.concat([isotropic, sideways, degenerate, perfect]))
    assert out.loc["iso", "ratio"] == pytest.approx(1.0, rel=1e-5)  # seed: < 1.2
    assert out.loc["side", "ratio"] == pytest.approx(6.0, rel=1e-5)  # seed: > 5
    assert out.loc["degenerate", "ratio"] == 10.0  # pinned at the clip
    assert out.loc["perfect", "ratio"] == 1.0      # no error at all is not drift
    assert list(out.loc["side", ["along_rmse", "across_rmse"]]) == pytest.approx([1, 6],
                                                                                 rel=1e-5)
    assert along_across_rmse(degenerate, ratio_clip=4.0).ratio.iloc[0] == 4.0


def test_clipped_ratio_rules_and_refusals() -> None:
    assert clipped_ratio([3.0, 0.0, 1e-12], [0.0, 2.0, 0.0], 10).tolist() == [10.0, 0.0, 1.0]
    assert clipped_ratio([0.0], [0.0], ratio_clip=0.5).tolist() == [0.5]
    with pytest.raises(InvalidInput, match="ratio_clip=0 must be a positive"):
        clipped_ratio([1.0], [1.0], 0)
    with pytest.raises(InvalidInput, match="ratio_clip=inf must be a positive"):
        clipped_ratio([1.0], [1.0], np.inf)
    with pytest.raises(InvalidInput, match="an RMSE is negative"):
        clipped_ratio([-1.0], [1.0])
    with pytest.raises(InvalidInput, match="'along_rmse' has 1 NaN"):
        clipped_ratio([1.0], [np.nan])


@SETTINGS
@given(st.lists(st.floats(0, 1e300), min_size=1, max_size=20),
       st.lists(st.floats(0, 1e300), min_size=20, max_size=20),
       st.floats(1e-6, 1e6))
def test_clipped_ratio_is_always_within_its_clip(across: list[float], along: list[float],
                                                 clip: float) -> None:
    ratio = clipped_ratio(across, along[:len(across)], clip)
    assert ((ratio >= 0) & (ratio <= clip)).all()


# --------------------------------------------------------------------------- histogram


def test_seed_histogram_checks_done_right() -> None:
    capped = HistogramSpec("abs_error_m", edges=HIST.edges, mass_cap=100.0)
    ids = ["heavy"] * 10_000 + ["light"] * 5
    hist, clients = error_histogram(np.full(10_005, 0.2), ids, capped)
    assert list(clients) == ["heavy", "light"]
    assert hist[0].sum() == pytest.approx(100.0)
    assert hist[0, 0] == pytest.approx(100.0)
    assert hist[1].sum() == 5.0  # a light client is not inflated to the cap
    distributions, _ = error_histogram(np.full(10_005, 0.2), ids, HIST)  # mass_cap 1
    assert distributions.sum(axis=1) == pytest.approx([1.0, 1.0])
    assert capped.sensitivity == 2 * capped.mass_cap


def test_histogram_buckets_follow_the_spec_edges() -> None:
    hist, _ = error_histogram([0.5, 0.51, 25.0, 1e9, -3.0], ["a"] * 5,
                              HistogramSpec("e", HIST.edges, mass_cap=10))
    assert hist[0].tolist() == [2.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0]


def test_histogram_refusals() -> None:
    with pytest.raises(InvalidInput, match="errors has 2 values but there are 3 client ids"):
        error_histogram([1.0, 2.0], ["a", "a", "b"], HIST)
    with pytest.raises(InvalidInput, match="'errors' has 1 NaN or infinite"):
        error_histogram([1.0, -np.inf], ["a", "a"], HIST)
    with pytest.raises(InvalidInput, match="there are no examples"):
        error_histogram([], [], HIST)


@SETTINGS
@given(st.lists(st.tuples(st.floats(allow_nan=False, allow_infinity=False),
                          st.integers(0, 4)), min_size=1, max_size=60),
       st.floats(1e-3, 1e3))
def test_histogram_rows_never_exceed_the_cap(rows: list[tuple[float, int]], cap: float
                                             ) -> None:
    values, ids = zip(*rows, strict=True)
    hist, clients = error_histogram(values, ids, HistogramSpec("e", HIST.edges, mass_cap=cap))
    counts = pd.Series(ids).value_counts().reindex(clients).to_numpy()
    assert (hist >= 0).all()
    np.testing.assert_allclose(hist.sum(axis=1), np.minimum(counts, cap), rtol=1e-12)


# --------------------------------------------------------------------------- calibration


def test_seed_over_confidence_is_detected() -> None:
    cal = calibration_by_bucket([0.9] * 100, [0] * 50 + [1] * 50, ["a"] * 100)
    assert cal.loc["a", "cal_gap_4"] == pytest.approx(0.4)
    assert cal.loc["a", "cal_pred_4"] == pytest.approx(0.9)
    assert cal.loc["a", "cal_outcome_4"] == 0.5
    # empty buckets: zero gap, flagged absent, so sums over clients stay honest
    assert list(cal.loc["a", [f"cal_present_{b}" for b in range(5)]]) == [0, 0, 0, 0, 1]
    assert list(cal.loc["a", [f"cal_gap_{b}" for b in range(4)]]) == [0.0] * 4


def test_calibration_bucket_edges() -> None:
    cal = calibration_by_bucket([0.0, 0.2, 0.4, 1.0, True], [0, 1, 1, 1, 1], ["a"] * 5)
    assert list(cal.loc["a", [f"cal_present_{b}" for b in range(5)]]) == [1, 1, 1, 0, 1]
    assert cal.loc["a", "cal_gap_4"] == 0.0  # 1.0 lands in the last bucket


def test_calibration_refusals() -> None:
    with pytest.raises(InvalidInput, match=r"p_pred 1.2 at row 1 is outside \[0, 1\]"):
        calibration_by_bucket([0.5, 1.2], [0, 1], ["a", "a"])
    with pytest.raises(InvalidInput, match="outcome 0.5 at row 0 is not 0 or 1"):
        calibration_by_bucket([0.5], [0.5], ["a"])
    with pytest.raises(InvalidInput, match="'p_pred' has 1 NaN"):
        calibration_by_bucket([np.nan], [1], ["a"])
    with pytest.raises(InvalidInput, match="n_buckets=0 must be a positive integer"):
        calibration_by_bucket([0.5], [1], ["a"], n_buckets=0)
    with pytest.raises(InvalidInput, match="outcome has 1 values but there are 2"):
        calibration_by_bucket([0.5, 0.5], [1], ["a", "b"])


@SETTINGS
@given(st.lists(st.tuples(st.floats(0, 1), st.integers(0, 1), st.integers(0, 3)),
                min_size=1, max_size=60),
       st.integers(1, 12))
def test_calibration_columns_stay_in_bounds(rows: list[tuple[float, int, int]], n: int
                                           ) -> None:
    p, y, ids = zip(*rows, strict=True)
    cal = calibration_by_bucket(p, y, ids, n_buckets=n)
    gap = cal.filter(like="cal_gap").to_numpy()
    rest = cal.drop(columns=cal.filter(like="cal_gap").columns).to_numpy()
    assert ((gap >= -1) & (gap <= 1)).all()
    assert ((rest >= 0) & (rest <= 1)).all()
    assert (cal.filter(like="cal_present").sum(axis=1) >= 1).all()


# --------------------------------------------------------------------------- counts


def test_sample_count_bucket_is_a_bucket_never_a_count() -> None:
    ids = ["a"] * 1 + ["b"] * 9 + ["c"] * 10 + ["d"] * 999 + ["e"] * 1000
    assert sample_count_bucket(ids).to_dict() == {"a": 0, "b": 0, "c": 1, "d": 2, "e": 3}
    assert sample_count_bucket(ids, edges=(1, 5)).to_dict() == {
        "a": 0, "b": 1, "c": 1, "d": 1, "e": 1}


@pytest.mark.parametrize("edges", [(0, 10), (1, 10, 10), (10, 1), (), ("a",), (1, np.inf)])
def test_sample_count_bucket_refuses_bad_edges(edges: tuple[object, ...]) -> None:
    with pytest.raises(InvalidInput, match="must be strictly increasing and start at 1"):
        sample_count_bucket(["a"], edges=edges)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- coverage


def test_coverage_keeps_the_busiest_cells_ties_by_position(two_boxes: Partition) -> None:
    # region order a (0,0) b (0,1) c (1,0) d (1,1); client x: 3 in d, 1 in b, 1 in c
    lon = [1.5, 1.5, 1.5, 0.5, 1.5, 0.5, 7.0]
    lat = [1.5, 1.5, 1.5, 1.5, 0.5, 0.5, 7.0]
    ids = ["x", "x", "x", "x", "x", "y", "z"]
    cov = coverage(lon, lat, ids, two_boxes, max_cells=2)
    assert list(cov.client_ids) == ["x", "y", "z"]
    assert cov.matrix.toarray().tolist() == [[0, 1, 0, 1], [1, 0, 0, 0], [0, 0, 0, 0]]
    assert cov.cells_per_client.tolist() == [2, 1, 0]
    assert cov.sensitivity == 4.0
    assert cov.partition_version == two_boxes.version
    assert coverage(lon, lat, ids, two_boxes).cells_per_client.tolist() == [3, 1, 0]


def test_coverage_on_an_h3_partition() -> None:
    area = gpd.GeoSeries([shapely.box(-105.2, 39.9, -104.8, 40.1)], crs=4326)
    part = Partition.from_h3_cover(area, 7, containment="overlap")
    rng = np.random.default_rng(2)
    lon, lat = rng.uniform(-105.1, -104.9, 500), rng.uniform(39.95, 40.05, 500)
    cov = coverage(lon, lat, rng.integers(0, 5, 500), part, max_cells=3)
    assert cov.matrix.shape == (5, part.n_regions)
    assert (cov.cells_per_client == 3).all()
    assert set(cov.matrix.data) == {1}


def test_coverage_refusals(two_boxes: Partition) -> None:
    with pytest.raises(InvalidInput, match="max_cells=0 must be a positive integer"):
        coverage([0.5], [0.5], ["a"], two_boxes, max_cells=0)
    with pytest.raises(InvalidInput, match="lon/lat has 2 values but there are 1 client ids"):
        coverage([0.5, 0.5], [0.5, 0.5], ["a"], two_boxes)
    with pytest.raises(InvalidInput, match="1 lon values are NaN"):
        coverage([np.nan], [0.5], ["a"], two_boxes)


@SETTINGS
@given(st.lists(st.tuples(st.floats(-0.5, 2.5), st.floats(-0.5, 2.5), st.integers(0, 3)),
                min_size=1, max_size=50),
       st.integers(1, 4))
def test_coverage_rows_never_exceed_max_cells(two_boxes: Partition,
                                              rows: list[tuple[float, float, int]],
                                              cap: int) -> None:
    lon, lat, ids = zip(*rows, strict=True)
    cov = coverage(lon, lat, ids, two_boxes, max_cells=cap)
    assert (cov.cells_per_client <= cap).all()
    assert set(cov.matrix.data) <= {1}


# --------------------------------------------------------------------------- report


def test_device_report_columns_bounds_and_version(two_boxes: Partition) -> None:
    examples = mixed_examples()
    rmse = MetricSpec("rmse_m", 0.0, 8.0)
    report = device_report(examples, loss_spec=LOSS, hist_spec=HIST, rmse_spec=rmse,
                           coverage_partition=two_boxes, max_cells=2)
    assert report.attrs["device_module_version"] == DEVICE_MODULE_VERSION
    assert report.attrs["coverage_partition_version"] == two_boxes.version
    assert report.attrs["specs"] == {"loss": LOSS.key, "rmse": rmse.key, HIST.name: HIST.key}
    assert "partition_version" not in report.attrs  # reserved for the region assignment
    assert report.index.name == "client_id"
    assert report.index.is_monotonic_increasing
    expected = (["loss", "ratio", "track_present", "along_rmse", "across_rmse"]
                + [f"abs_error_m_{b}" for b in range(7)]
                + [f"cal_{kind}_{b}" for kind in ("pred", "outcome", "gap", "present")
                   for b in range(5)]
                + ["count_bucket", "coverage_cells"])
    assert list(report.columns) == [*expected, "device_specs"]
    assert set(report.attrs["bounds"]) == set(expected)
    for column, (low, high) in report.attrs["bounds"].items():
        assert report[column].between(low, high).all(), column
    assert report.filter(like="abs_error_m_").sum(axis=1).to_numpy() == pytest.approx(1.0)
    assert report.loc["c000", "count_bucket"] == 0
    assert report.loc["c001", "count_bucket"] == 3
    raw = along_across_rmse(examples)
    np.testing.assert_allclose(report.along_rmse, rmse.clip(raw.along_rmse))


def test_device_report_runs_only_what_it_has_inputs_for() -> None:
    frame = pd.DataFrame({"client_id": [2, 1, 2], "loss": [1.0, 2.0, 3.0]})
    assert list(device_report(frame).columns) == ["count_bucket", "device_specs"]
    assert list(device_report(frame, loss_spec=LOSS).columns) == ["loss", "count_bucket",
                                                                  "device_specs"]
    positions = track_frame([1.0], [2.0]).drop(columns="heading_deg")
    report = device_report(positions, hist_spec=HIST)  # histogram of the position error
    assert "ratio" not in report.columns
    assert report.abs_error_m_3.iloc[0] == 1.0  # sqrt(5) m is in (2, 5]


def test_device_report_refusals(two_boxes: Partition) -> None:
    frame = pd.DataFrame({"client_id": ["a"], "x": [1.0]})
    with pytest.raises(InvalidInput, match=r"loss_spec= needs columns \['loss'\]"):
        device_report(frame, loss_spec=LOSS)
    with pytest.raises(InvalidInput, match="hist_spec= needs an 'error' column or true"):
        device_report(frame, hist_spec=HIST)
    with pytest.raises(InvalidInput, match="roads= and rmse_spec= need true and predicted"):
        device_report(frame, rmse_spec=MetricSpec("rmse", 0, 5))
    with pytest.raises(InvalidInput, match="roads= and rmse_spec= need"):
        device_report(track_frame([1.0], [1.0]).drop(columns="heading_deg"),
                      rmse_spec=MetricSpec("rmse", 0, 5))
    with pytest.raises(InvalidInput, match="coverage_partition= needs true positions"):
        device_report(frame, coverage_partition=two_boxes)
    with pytest.raises(InvalidInput, match="partition= needs a 'region_id' column"):
        device_report(frame, partition=two_boxes)
    with pytest.raises(InvalidInput, match="has examples in more than one region"):
        device_report(pd.DataFrame({"client_id": ["x", "x"], "region_id": ["a", "b"]}),
                      partition=two_boxes)
    with pytest.raises(InvalidInput, match="region_id 'z' is not in"):
        device_report(pd.DataFrame({"client_id": ["x"], "region_id": ["z"]}),
                      partition=two_boxes)
    with pytest.raises(InvalidInput, match="ratio_clip=-1 must be a positive"):
        device_report(frame, ratio_clip=-1)
    with pytest.raises(InvalidInput, match="calibration_buckets=0 must be a positive"):
        device_report(frame.assign(p_pred=0.5, outcome=1), calibration_buckets=0)
    with pytest.raises(InvalidInput, match=r"needs columns \['client_id'\]"):
        device_report(frame.drop(columns="client_id"))
    with pytest.raises(InvalidInput, match="'error' has 1 NaN"):
        device_report(frame.assign(error=np.nan), hist_spec=HIST)


@pytest.mark.parametrize("kind", ["str", "category"])
def test_region_refusals_hold_for_string_and_categorical_ids(two_boxes: Partition,
                                                             kind: str) -> None:
    def frame(ids: list[str], regions: list[object]) -> pd.DataFrame:
        col = pd.Series(regions, dtype="category" if kind == "category" else object)
        return pd.DataFrame({"client_id": ids, "region_id": col, "loss": 1.0})

    with pytest.raises(InvalidInput, match="has examples in more than one region"):
        device_report(frame(["x", "x"], ["a", "b"]), loss_spec=LOSS, partition=two_boxes)
    with pytest.raises(InvalidInput, match="region_id 'z' is not in"):
        device_report(frame(["x", "y"], ["a", "z"]), loss_spec=LOSS, partition=two_boxes)
    with pytest.raises(InvalidInput, match="client 'y' has an example without a region_id"):
        device_report(frame(["x", "y"], ["a", None]), loss_spec=LOSS, partition=two_boxes)
    ok = device_report(frame(["y", "x", "y"], ["b", "a", "b"]), loss_spec=LOSS,
                       partition=two_boxes)
    assert ok["region_id"].to_dict() == {"x": "a", "y": "b"}


@pytest.mark.parametrize("ids", [
    [3, 3, 5, 9, 9, 9],            # sorted integers: the no-hash path
    [9, 3, 9, 5, 3, 9],            # unsorted: the hash path
    np.array([0, 0, 200, 255], dtype=np.uint8),
    [-4, -4, 0, 7],
])
def test_client_index_is_the_same_sorted_or_not(ids: Any) -> None:
    values = np.asarray(ids)
    frame = pd.DataFrame({"client_id": values, "loss": np.arange(values.size, dtype=float)})
    report = device_report(frame, loss_spec=MetricSpec("loss", 0, 100))
    expected = frame.groupby("client_id")["loss"].mean()
    assert report.index.tolist() == expected.index.tolist()
    assert report.index.name == "client_id"
    np.testing.assert_allclose(report["loss"].to_numpy(), expected.to_numpy())


def test_results_do_not_depend_on_row_order(two_boxes: Partition) -> None:
    examples = mixed_examples(seed=1)
    shuffled = examples.sample(frac=1.0, random_state=7)
    kwargs: dict[str, Any] = {"loss_spec": LOSS, "hist_spec": HIST,
                              "coverage_partition": two_boxes, "max_cells": 2}
    pd.testing.assert_frame_equal(device_report(examples, **kwargs),
                                  device_report(shuffled, **kwargs), rtol=1e-12)
    roads = gpd.GeoSeries([shapely.LineString([(0, y), (2, y + 0.1)])
                           for y in np.linspace(0, 1.9, 40)], crs=4326)
    pd.testing.assert_frame_equal(along_across_rmse(examples, roads=roads),
                                  along_across_rmse(shuffled, roads=roads), rtol=1e-12)


def test_report_of_a_hand_worked_client() -> None:
    # Client x drives north; one fix is 3 m to the right (all across), one 4 m ahead
    # (all along). Worked by hand: along RMSE sqrt(16/2), across RMSE sqrt(9/2),
    # ratio 3/4; losses 1 and 5 clip to 1 and 2.5 (mean 1.75); both errors (3 m,
    # 4 m) fall in the (2, 5] bucket, so the capped histogram is all there; the
    # predictions 0.1 and 0.9 with outcome 0 give gaps 0.1 (bucket 0) and 0.9 (4).
    # Client y has one exact fix and no loss above the clip.
    frame = pd.concat([track_frame([0.0, 4.0], [3.0, 0.0], client="x"),
                       track_frame([0.0], [0.0], client="y")], ignore_index=True)
    frame["loss"] = [1.0, 5.0, 0.5]
    frame["p_pred"] = [0.1, 0.9, 0.5]
    frame["outcome"] = [0, 0, 1]
    rmse = MetricSpec("rmse_m", 0.0, 8.0)
    report = device_report(frame, loss_spec=LOSS, hist_spec=HIST, rmse_spec=rmse)
    x, y = report.loc["x"], report.loc["y"]
    assert x.loss == pytest.approx(1.75)
    assert y.loss == pytest.approx(0.5)
    assert x.along_rmse == pytest.approx(np.sqrt(8.0), rel=1e-4)
    assert x.across_rmse == pytest.approx(np.sqrt(4.5), rel=1e-4)
    assert x.ratio == pytest.approx(0.75, rel=1e-4)
    assert report.filter(like="abs_error_m_").loc["x"].tolist() == [0, 0, 0, 1.0, 0, 0, 0]
    assert report.filter(like="abs_error_m_").loc["y"].tolist() == [1.0, 0, 0, 0, 0, 0, 0]
    assert [x[f"cal_gap_{b}"] for b in range(5)] == pytest.approx([0.1, 0, 0, 0, 0.9])
    assert [x[f"cal_present_{b}"] for b in range(5)] == [1, 0, 0, 0, 1]
    assert y.cal_gap_2 == pytest.approx(-0.5)
    assert y.cal_present_2 == 1
    assert x.count_bucket == 0
    assert y.count_bucket == 0


def test_reports_carry_their_provenance_in_columns(two_boxes: Partition) -> None:
    frame = pd.DataFrame({"client_id": ["p", "p", "q"], "region_id": ["a", "a", "d"],
                          "loss": [1.0, 2.0, 3.0]})
    report = device_report(frame, loss_spec=LOSS, partition=two_boxes)
    assert report.region_id.tolist() == ["a", "d"]
    assert set(report.partition_version) == {two_boxes.version}
    # pd.concat may drop attrs but keeps columns: the provenance survives without them.
    both = pd.concat([report, report.rename(index={"p": "r", "q": "s"})])
    both.attrs.clear()
    assert set(both.partition_version) == {two_boxes.version}
    assert both.device_specs.astype(str).str.contains(f"loss={LOSS.fingerprint}").all()
    out = regional_report(both, two_boxes, [LOSS], epsilon=50.0, min_cohort=1,
                          target=Simulation(rng=0))
    assert out["loss"].cohort.fillna(0).astype(int).tolist() == [2, 0, 0, 2]


def test_road_mode_ratio_leaves_clients_without_roads_out() -> None:
    # Half the clients drive along the road with across/along error 3:1; the other
    # half are far from any road. The published ratio must be the road clients' 3,
    # not 1.5 (their ratio averaged with zeros).
    near = [track_frame([1.0, 1.0], [3.0, 3.0], heading=90.0, lon=BASE_LON, lat=BASE_LAT,
                        client=f"n{i}") for i in range(300)]
    far = [track_frame([1.0], [1.0], lon=BASE_LON + 1.0, lat=BASE_LAT, client=f"f{i}")
           for i in range(300)]
    frame = pd.concat(near + far, ignore_index=True)
    road = gpd.GeoSeries([shapely.LineString([(BASE_LON - 0.01, BASE_LAT),
                                              (BASE_LON + 0.01, BASE_LAT)])], crs=4326)
    clients = device_report(frame, roads=road)
    spec = track_ratio_spec(roads=True)
    assert clients.track_present.sum() == 300
    rel = aggregate_metric(clients, spec, epsilon=5.0, target=Simulation(rng=0))
    assert rel.estimator == "ratio"
    lo, hi = rel.conf_int()
    assert lo <= 3.0 <= hi
    assert hi - lo < 0.2
    assert abs(rel.value - 3.0) < 0.1  # 1.5 if absent clients counted as 0


@SETTINGS
@given(st.lists(st.tuples(st.floats(-180, 180), st.floats(-80, 80), st.floats(-500, 500),
                          st.floats(-500, 500), st.floats(-1e4, 1e4), st.integers(0, 3)),
                min_size=1, max_size=25),
       st.floats(0.5, 50))
def test_report_is_bounded_for_arbitrary_positions(
        rows: list[tuple[float, float, float, float, float, int]], clip: float) -> None:
    lon, lat, east, north, heading, ids = (np.asarray(v) for v in zip(*rows, strict=True))
    plon, plat = offset(lon, lat, east, north)
    frame = pd.DataFrame({"client_id": ids, "true_lon": lon, "true_lat": lat,
                          "pred_lon": plon, "pred_lat": plat, "heading_deg": heading})
    report = device_report(frame, hist_spec=HIST, ratio_clip=clip)
    for column, (low, high) in report.attrs["bounds"].items():
        assert report[column].between(low, high).all(), column
    errors = track_errors(frame)
    np.testing.assert_allclose(np.hypot(errors.along, errors.across), errors.distance,
                               rtol=1e-9, atol=1e-9)
    # the split is linearised at the true position: exact to first order in |error| / R
    # times the projection's scale gradient (tan(lat) for Mercator): 5e-4 at 500 m, 80 deg
    np.testing.assert_allclose(errors.distance, np.hypot(east, north), rtol=1e-3, atol=1e-6)


@SETTINGS
@given(st.lists(st.tuples(st.floats(allow_nan=False, allow_infinity=False),
                          st.sampled_from(["a", "b", "c"])), min_size=1, max_size=40))
def test_loss_is_bounded_for_arbitrary_finite_losses(rows: list[tuple[float, str]]) -> None:
    loss, ids = zip(*rows, strict=True)
    out = clipped_mean_loss(pd.DataFrame({"client_id": ids, "loss": loss}), LOSS)
    assert out.between(LOSS.clip_low, LOSS.clip_high).all()


# --------------------------------------------------------------------------- client id types


@pytest.mark.parametrize(("ids", "match"), [
    (pd.Series([7, "7", 8], dtype=object), "client_id mixes ids of types int and str"),
    (pd.Series([7, "7", 8], dtype="category"), "client_id mixes ids of types int and str"),
    (pd.Series([True, 1, 2], dtype=object), "client_id mixes ids of types bool and int"),
    (pd.Series([True, False, True]), "client_id holds booleans.*types bool"),
    (pd.Series([7.0, 8.0, 7.0]), "client_id holds floating-point ids.*types float64"),
    (pd.Series([7.0, 8.0, 7.0], dtype="Float64"), "holds floating-point ids.*types Float64"),
    (pd.Series([7, 7.0, 8], dtype=object), "holds floating-point ids.*types float, int"),
    (pd.Series([b"a", b"b", b"a"]), "neither integers nor strings: types bytes"),
])
def test_client_ids_of_more_than_one_type_are_refused(ids: pd.Series, match: str) -> None:
    # issue 21: client 7 given as int and as str "7" counted as two clients
    frame = pd.DataFrame({"client_id": ids, "loss": [1.0, 2.0, 0.5]})
    with pytest.raises(InvalidInput, match=match):
        device_report(frame, loss_spec=LOSS)
    with pytest.raises(InvalidInput, match=match):
        clipped_mean_loss(frame, LOSS)


def test_client_ids_as_a_list_of_two_types_are_refused() -> None:
    # numpy would turn [7, "7"] into two "7"s and [True, 2] into [1, 2]: judged as given
    with pytest.raises(InvalidInput, match="client_ids mixes ids of types int and str"):
        error_histogram([0.5, 3.0], [7, "7"], HIST)
    with pytest.raises(InvalidInput, match="client_ids mixes ids of types bool and int"):
        coverage([0.5, 0.5], [0.5, 0.5], [True, 2], Partition.from_geodataframe(
            gpd.GeoDataFrame({"id": ["w"]}, geometry=[shapely.box(0, 0, 1, 1)], crs=4326),
            "id"), max_cells=1)


@pytest.mark.parametrize("ids", [
    pd.Series([np.int64(7), 7, np.int32(8)], dtype=object),  # numpy and Python ints: one kind
    pd.Series([7, 7, 8], dtype="Int64"),
    pd.Series([7, 7, 8], dtype="category"),
    pd.Series(["7", "7", "8"], dtype="string[pyarrow]"),
    pd.Series([np.str_("7"), "7", "8"], dtype=object),
    np.array([7, 7, 8], dtype=np.uint8),
])
def test_client_ids_of_one_kind_are_one_client_each(ids: Any) -> None:
    frame = pd.DataFrame({"client_id": ids, "loss": [1.0, 2.0, 0.5]})
    report = device_report(frame, loss_spec=LOSS)
    assert len(report) == 2
    assert report["loss"].tolist() == [1.5, 0.5]
