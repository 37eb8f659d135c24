"""The simulated world of the demo (seeded simulation path, never a release).

A synthetic fleet on the report partition, a simulated positioning model that
is worse in a few regions and drifts sideways in one of them from a given
round on, and the strata the cohort is selected within. Everything here is
drawn from the demo's seed: rerunning with the same seed rebuilds the same
world. The published numbers are not drawn here (see :mod:`spatialdp.demo.epoch`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from spatialdp.datasets import synthetic_fleet, us_states_partition
from spatialdp.geo import Partition
from spatialdp.sampling import Strata
from spatialdp.simulation import positioning_predictions

__all__ = ["US_DRIFTING", "US_WORSE", "World", "build_world", "round_examples"]

#: Where the simulated model is worse on the shipped states (both error components x factor).
US_WORSE = {"MT": 1.8, "ID": 1.6, "UT": 1.6, "NV": 1.4}
#: Where it drifts sideways on the shipped states.
US_DRIFTING = "CO"
#: Across-track error factor added per round once the drift has started.
DRIFT_STEP = 1.5


@dataclass
class World:
    """The simulated world: geography, fleet, strata and the model's weak spots.

    Attributes
    ----------
    partition : Partition
        The report partition (regions the metrics are published for).
    fleet : GeoDataFrame
        One row per device (``device_id``, ``lon``, ``lat``, ``heading_deg``, ``region_id``).
    strata : Strata
        What the cohort is selected within: the report regions themselves.
    client_strata : numpy.ndarray
        Stratum position of every device.
    client_regions : numpy.ndarray
        Report-region position of every device.
    worse : dict
        Region -> error factor where the model is worse.
    drifting : str
        The region whose across-track error grows from ``drift_start`` on.
    drift_start : int
        First round (1-based) of the sideways drift.
    """

    partition: Partition
    fleet: pd.DataFrame
    strata: Strata
    client_strata: np.ndarray
    client_regions: np.ndarray
    worse: dict[str, float]
    drifting: str
    drift_start: int
    seed: int
    shipped: bool
    cells: Partition | None = None
    client_cells: np.ndarray | None = None
    notes: list[str] = field(default_factory=list)

    def drift_factor(self, round_index: int) -> float:
        """Across-track error factor of the drifting region at a round (1 before the drift)."""
        return 1.0 + DRIFT_STEP * max(0, round_index - self.drift_start + 1)


def build_world(partition: Partition | None, devices: int, seed: int, rounds: int
                ) -> World:
    """Build the simulated world (seeded).

    On the shipped 48 states the model is worse in four Mountain West states and
    drifts sideways in Colorado; on a user's partition the drifting region is
    the one with the most devices and three regions drawn from the seed are
    worse, so the story holds on any geography.
    """
    rng = np.random.default_rng(seed)
    shipped = partition is None
    part = us_states_partition() if partition is None else partition
    fleet = synthetic_fleet(devices, rng=rng, partition=part)
    client_regions = part.assign(lon=fleet.lon.to_numpy(), lat=fleet.lat.to_numpy()).positions
    # Sampling strata are the report regions: sqrt allocation gives small regions the
    # cohort their report needs, and a region whose pool runs dry merges with a neighbour.
    strata = Strata(part, basis="administrative")
    client_strata = client_regions
    if shipped:
        worse = dict(US_WORSE)
        drifting = US_DRIFTING
    else:
        counts = fleet.region_id.value_counts()
        drifting = str(counts.index[0])
        others = [str(r) for r in counts.index[1:]]
        pick = rng.choice(len(others), size=min(3, len(others)), replace=False)
        worse = {others[i]: f for i, f in zip(pick, (1.8, 1.6, 1.4), strict=False)}
    # Blind spots are looked for on H3 cells (a few thousand over the partition).
    cells = Partition.from_h3_cover(part.regions, _cell_resolution(part),
                                    containment="overlap", name="coverage-cells")
    client_cells = cells.assign(lon=fleet.lon.to_numpy(), lat=fleet.lat.to_numpy()).positions
    keep = client_strata >= 0
    notes = []
    if not keep.all():
        notes.append(f"{int((~keep).sum())} devices outside the strata were left out")
        fleet = fleet[keep].reset_index(drop=True)
        client_strata = client_strata[keep]
        client_regions = client_regions[keep]
        client_cells = client_cells[keep]
    drift_start = max(2, rounds // 2 + 1)
    return World(partition=part, fleet=fleet, strata=strata,
                 client_strata=client_strata.astype(np.int64),
                 client_regions=client_regions.astype(np.int64), worse=worse,
                 drifting=drifting, drift_start=drift_start, seed=seed, shipped=shipped,
                 cells=cells, client_cells=client_cells, notes=notes)


def _cell_resolution(partition: Partition) -> int:
    """Return the H3 resolution giving about 1,000 to 7,000 cells over the partition."""
    area = float(partition.regions.to_crs(6933).area.sum()) / 1e6
    # Average H3 cell areas (km^2) at resolutions 2 to 9.
    areas = (86_745.0, 12_393.0, 1_770.0, 252.9, 36.1, 5.16, 0.737, 0.105)
    for res, cell in enumerate(areas, start=2):
        if area / cell >= 1_000:
            return res
    return 9


def round_examples(world: World, clients: np.ndarray, round_index: int,
                   rng: np.random.Generator) -> pd.DataFrame:
    """Return the simulated model's predictions on the devices of one round's cohort (seeded)."""
    cohort = world.fleet.iloc[np.sort(clients)]
    return positioning_predictions(
        cohort, rng=rng, region_error_factor=world.worse,
        sideways_drift={world.drifting: world.drift_factor(round_index)})
