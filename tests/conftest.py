"""Shared fixtures: the shipped states and partitions are loaded once per session."""

from __future__ import annotations

import geopandas as gpd
import pytest

from spatialdp.datasets import load_us_states, us_states_partition
from spatialdp.geo.partition import Partition

# A subprocess worker, not a test module: importing it in the test process is pointless.
collect_ignore = ["_ledger_worker.py"]


@pytest.fixture(scope="session")
def states() -> gpd.GeoDataFrame:
    return load_us_states()


@pytest.fixture(scope="session")
def states_partition() -> Partition:
    return us_states_partition()


@pytest.fixture(scope="session")
def colorado_h3(states: gpd.GeoDataFrame) -> Partition:
    colorado = states[states.state == "CO"]
    return Partition.from_h3_cover(colorado, 5, containment="overlap", name="co-r5")
