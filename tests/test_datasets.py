from __future__ import annotations

import itertools
import re
from pathlib import Path

import geopandas as gpd
import numpy as np
import pytest
import shapely

from spatialdp.datasets import (
    data_dir,
    load_us_cities,
    load_us_states,
    synthetic_fleet,
    us_states_partition,
)
from spatialdp.exceptions import InvalidInput
from spatialdp.geo.partition import Partition


def test_states_and_cities_load() -> None:
    states = load_us_states()
    assert len(states) == 48
    assert states.crs.to_epsg() == 4326
    assert states.is_valid.all()
    assert states.state.is_unique
    cities = load_us_cities()
    assert len(cities) > 3000
    assert (cities.population >= 15000).all()
    assert us_states_partition().n_regions == 48


def test_fleet_is_deterministic_and_on_land() -> None:
    a = synthetic_fleet(5000, rng=11)
    b = synthetic_fleet(5000, rng=11)
    assert a.equals(b)
    assert not synthetic_fleet(5000, rng=12).lon.equals(a.lon)
    assert a.region_id.notna().all()
    assert us_states_partition().assign(a).n_unassigned == 0
    assert a.heading_deg.between(0, 360).all()
    assert list(a.columns) == ["device_id", "lon", "lat", "heading_deg", "region_id", "geometry"]


def test_fleet_default_partition_is_the_states_partition() -> None:
    """The default partition, kept for the process, gives what a fresh one gives."""
    fresh = us_states_partition()
    assert synthetic_fleet(3000, rng=5).equals(synthetic_fleet(3000, rng=5, partition=fresh))
    # A batch large enough for the grid index places devices exactly as the exact test.
    fleet = synthetic_fleet(120_000, rng=6)
    fresh = us_states_partition()
    assert fresh._grid is None
    exact = fresh.assign(lon=fleet.lon.to_numpy()[:40_000], lat=fleet.lat.to_numpy()[:40_000])
    assert fresh._grid is None  # 40,000 points: below the grid's threshold
    assert (exact.ids() == fleet.region_id.to_numpy()[:40_000]).all()


def test_fleet_density_runs_from_urban_to_remote() -> None:
    fleet = synthetic_fleet(100_000, rng=3)
    per_state = fleet.region_id.value_counts()
    # California (big cities) holds far more devices than Wyoming (remote).
    assert per_state["CA"] > 20 * per_state["WY"]
    # Dense urban: many devices within 20 km of Manhattan; remote: the rural share
    # still puts devices in every state.
    d2 = (fleet.lat - 40.78) ** 2 + ((fleet.lon + 73.97) * np.cos(np.radians(40.78))) ** 2
    assert (d2 < 0.18**2).sum() > 1000
    assert per_state.index.nunique() == 48


def test_fleet_refuses_bad_arguments() -> None:
    with pytest.raises(InvalidInput, match="n=0 is below the limit >= 1; give a positive"):
        synthetic_fleet(0)
    with pytest.raises(InvalidInput, match=r"rural_share=1.5 is above .* probability in \[0, 1\]"):
        synthetic_fleet(10, rural_share=1.5)


def test_fleet_size_is_bounded() -> None:
    with pytest.raises(InvalidInput, match="n=1000000000000 is above the limit"):
        synthetic_fleet(10**12)


def _small_counties(state: str = "GA", cells: int = 14) -> Partition:
    """About 159 small 'counties': a state cut by a grid (the shape of the Georgia failure)."""
    states = load_us_states()
    shape = states.loc[states.state == state, "geometry"].iloc[0]
    west, south, east, north = shape.bounds
    xs = np.linspace(west, east, cells + 1)
    ys = np.linspace(south, north, cells + 1)
    boxes = [shapely.box(x0, y0, x1, y1) for x0, x1 in itertools.pairwise(xs)
             for y0, y1 in itertools.pairwise(ys)]
    pieces = shapely.intersection(np.asarray(boxes, dtype=object), shape)
    keep = ~shapely.is_empty(pieces) & (shapely.area(pieces) > 1e-6)
    frame = gpd.GeoDataFrame({"county": [f"c{i:03d}" for i in range(int(keep.sum()))]},
                             geometry=list(pieces[keep]), crs=4326)
    return Partition.from_geodataframe(frame, "county", name=f"{state}-grid-counties")


def test_fleet_on_a_partition_of_small_counties() -> None:
    """Regression: ~159 small counties failed with 'could not place 129 devices'."""
    counties = _small_counties()
    assert 140 <= counties.n_regions <= 170
    fleet = synthetic_fleet(40_000, rng=4, partition=counties)
    assert len(fleet) == 40_000
    assert counties.assign(fleet).n_unassigned == 0
    assert fleet.equals(synthetic_fleet(40_000, rng=4, partition=counties))
    per_county = fleet.region_id.value_counts()
    # Urban devices sit around the state's own cities: the county holding Atlanta is
    # the densest, and the rural background reaches most counties.
    atlanta = counties.assign(lon=np.array([-84.39]), lat=np.array([33.75])).ids()[0]
    assert per_county.idxmax() == atlanta
    assert per_county.index.nunique() > 0.9 * counties.n_regions


def test_fleet_on_a_partition_outside_the_us_is_all_rural() -> None:
    """No shipped city lies in the regions: every device is rural, uniform over the land."""
    states = load_us_states()
    moved = states.assign(geometry=states.geometry.translate(xoff=100.0, yoff=0.0))
    part = Partition.from_geodataframe(moved, "state", name="moved")
    fleet = synthetic_fleet(20_000, rng=2, partition=part, rural_share=0.15)
    assert part.assign(fleet).n_unassigned == 0
    # Uniform over the land: a state's share of devices follows its area (Texas vs
    # Rhode Island), within 5 standard errors of a binomial share.
    area = moved.set_index("state").to_crs(5070).area
    share = area / area.sum()
    counts = fleet.region_id.value_counts().reindex(share.index, fill_value=0)
    se = np.sqrt(share * (1 - share) / len(fleet))
    assert (np.abs(counts / len(fleet) - share) < 5 * se + 1e-3).all()


def test_fleet_refuses_a_partition_it_cannot_fill() -> None:
    specks = gpd.GeoDataFrame({"rid": ["a", "b"]},
                              geometry=[shapely.box(-120, 30, -119.999, 30.001),
                                        shapely.box(-70, 45, -69.999, 45.001)], crs=4326)
    part = Partition.from_geodataframe(specks, "rid")
    with pytest.raises(InvalidInput, match="of its bounding box .* build a fleet per cluster"):
        synthetic_fleet(100, rng=0, partition=part)


def test_fleet_progress_bar(capsys: pytest.CaptureFixture[str]) -> None:
    synthetic_fleet(2_000, rng=1, progress=True)
    assert "placing devices" in capsys.readouterr().err
    synthetic_fleet(2_000, rng=1)  # small fleets stay quiet by default
    assert capsys.readouterr().err == ""
    with pytest.raises(InvalidInput, match="progress='yes'"):
        synthetic_fleet(10, progress="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("size", [1, 1_000, 40_000, 300_000])
@pytest.mark.parametrize("weights", ["cities", "uniform", "dyadic", "zeros", "one"])
def test_the_weighted_choice_draws_what_numpy_choice_draws(size: int, weights: str) -> None:
    """The city draws of the fleet equal ``Generator.choice``'s, with or without the
    bucket table (from 2**15 draws), including zero weights, a single item and cdf
    entries exactly on the buckets' edges."""
    from spatialdp.datasets import _WeightedChoice

    w = {"cities": load_us_cities().population.to_numpy(dtype=float),
         "uniform": np.ones(1000), "dyadic": np.ones(1024),  # cdf entries on bucket edges
         "one": np.array([3.0]),
         "zeros": np.array([0.0, 5.0, 0.0, 0.0, 1e-9, 2.0, 0.0])}[weights]
    p = w / w.sum()
    choice = _WeightedChoice(p)
    for seed in range(3):
        ours = choice(np.random.default_rng(seed), size)
        theirs = np.random.default_rng(seed).choice(p.size, size=size, p=p)
        assert ours.dtype == np.int64
        np.testing.assert_array_equal(ours, theirs)


class _Stream:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize(("stderr", "stdout", "expected"), [
    (False, False, True),  # no terminal: tqdm would disable the bar; it is not imported
    (True, False, None),   # the text bar's stream is a terminal: tqdm decides
    (False, True, None),   # the notebook bar's stream
])
def test_a_large_fleet_shows_a_bar_only_where_tqdm_would(
        monkeypatch: pytest.MonkeyPatch, stderr: bool, stdout: bool,
        expected: bool | None) -> None:
    from spatialdp import datasets

    monkeypatch.setattr("sys.stderr", _Stream(stderr))
    monkeypatch.setattr("sys.stdout", _Stream(stdout))
    assert datasets._bar_disabled(datasets.PROGRESS_FROM, None) is expected
    assert datasets._bar_disabled(datasets.PROGRESS_FROM - 1, None) is True
    assert datasets._bar_disabled(10, True) is False
    assert datasets._bar_disabled(10, False) is True


def test_the_data_comes_from_the_top_level_data_folder() -> None:
    """A source checkout reads data/, the one source of the files the wheel ships."""
    assert data_dir() == Path(__file__).resolve().parent.parent / "data"
    assert {"us48_states.gpkg", "georgia_counties.gpkg", "us_cities.csv", "README.md",
            "build.py"} <= {p.name for p in data_dir().iterdir()}


def test_a_missing_data_folder_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPATIALDP_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path))):
        data_dir()


def test_the_states_are_read_without_gdal_exactly_as_geopandas_reads_them() -> None:
    """The sqlite3 reader of the shipped GeoPackage gives geopandas.read_file's frame:
    columns, dtypes, order, CRS and byte-identical geometries."""
    from geopandas.testing import assert_geodataframe_equal

    from spatialdp.datasets import _read_plain_gpkg

    path = data_dir() / "us48_states.gpkg"
    fast, slow = _read_plain_gpkg(path), gpd.read_file(path)
    assert fast is not None
    assert_geodataframe_equal(fast, slow, check_less_precise=False)
    assert fast.crs == slow.crs
    assert (shapely.to_wkb(fast.geometry.values) == shapely.to_wkb(slow.geometry.values)).all()


def test_the_reader_leaves_other_geopackages_to_geopandas(tmp_path: Path) -> None:
    """A layer with a numeric column (or two layers, or a file that is not SQLite) is
    not the plain layout: None, and geopandas reads it (or says why it cannot)."""
    from spatialdp.datasets import _read_plain_gpkg

    (tmp_path / "garbage.gpkg").write_bytes(b"not a database at all" * 100)
    assert _read_plain_gpkg(tmp_path / "garbage.gpkg") is None

    frame = gpd.GeoDataFrame({"code": ["a"], "size": [1.5]},
                             geometry=[shapely.box(0, 0, 1, 1)], crs=4326)
    frame.to_file(tmp_path / "numeric.gpkg")
    assert _read_plain_gpkg(tmp_path / "numeric.gpkg") is None
    frame[["code", "geometry"]].to_file(tmp_path / "two.gpkg", layer="one")
    frame[["code", "geometry"]].to_file(tmp_path / "two.gpkg", layer="two")
    assert _read_plain_gpkg(tmp_path / "two.gpkg") is None
    frame[["code", "geometry"]].to_file(tmp_path / "plain.gpkg")
    plain = _read_plain_gpkg(tmp_path / "plain.gpkg")
    assert plain is not None
    assert plain.code.tolist() == ["a"]


def test_the_shipped_partition_is_the_fully_checked_one() -> None:
    """us_states_partition skips the validity and overlap checks only for the content
    that passed them: its version is the checked build's, and US_STATES_VERSION."""
    from spatialdp.datasets import US_STATES_VERSION, load_us_states, us_states_partition

    checked = Partition.from_geodataframe(load_us_states(), "state", name="us48-states")
    assert checked.version == US_STATES_VERSION
    fast = us_states_partition()
    assert fast.version == US_STATES_VERSION
    assert fast.region_ids.equals(checked.region_ids)
    assert fast.regions.geometry.geom_equals_exact(checked.regions.geometry, 0).all()


def test_an_edited_states_file_is_checked_again(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A data folder whose states differ from the shipped ones (here Colorado drawn
    over Utah) does not hash to the shipped version, so it goes through every check."""
    from spatialdp import datasets

    states = datasets.load_us_states()
    row = states.index[states.state == "CO"][0]
    states.loc[row, "geometry"] = shapely.box(-112, 37, -102, 41)
    states.to_file(tmp_path / "us48_states.gpkg")
    monkeypatch.setenv("SPATIALDP_DATA", str(tmp_path))
    datasets._states.cache_clear()
    try:
        with pytest.raises(InvalidInput, match="overlap"):
            datasets.us_states_partition()
    finally:
        datasets._states.cache_clear()


def test_the_checkout_data_is_found_without_sysconfig(monkeypatch: pytest.MonkeyPatch) -> None:
    """data_dir() looks at the checkout's data/ before asking sysconfig for install
    schemes (about 9 ms on a cold first call)."""
    import sysconfig

    def refuse(*args: object) -> str:
        raise AssertionError("sysconfig asked")

    monkeypatch.delenv("SPATIALDP_DATA", raising=False)
    monkeypatch.setattr(sysconfig, "get_default_scheme", refuse)
    monkeypatch.setattr(sysconfig, "get_preferred_scheme", refuse)
    assert data_dir() == Path(__file__).resolve().parent.parent / "data"
