from __future__ import annotations

import numpy as np
import pytest

from spatialdp.datasets import load_us_cities, load_us_states, synthetic_fleet, us_states_partition
from spatialdp.exceptions import InvalidInput


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
