"""Multi-round simulation: seats wanted, filled and eligible remaining, per mode.

The seed's staircase as a table: for each allocation mode, the sampler runs the
rounds of one epoch over a fleet and records, per round and per (merged)
stratum, the seats wanted, the seats filled and the eligible pool left.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from numpy.typing import ArrayLike, NDArray

from spatialdp._random import RandomLike, as_generator
from spatialdp._validation import check_count, check_text, fail
from spatialdp.geo.partition import Partition
from spatialdp.privacy.target import Simulation
from spatialdp.sampling.allocation import MODES
from spatialdp.sampling.policy import ParticipationPolicy
from spatialdp.sampling.sampler import StratifiedSampler
from spatialdp.sampling.strata import Strata

__all__ = ["SEED_POPULATIONS", "row_strata", "simulate_rounds"]

#: Most clients of a :func:`row_strata` fleet (toy fleets for examples and tests).
MAX_ROW_CLIENTS = 10**7

#: The five density strata of the seed's allocation table and chart.
SEED_POPULATIONS = {"urban": 420, "suburban": 260, "exurban": 120, "rural": 55, "remote": 18}


def row_strata(populations: Mapping[str, int]) -> tuple[Strata, NDArray[np.int32]]:
    """Return toy strata (unit squares in a row, each adjacent to the next) and a fleet.

    The strata follow the mapping's order from west to east; the fleet holds
    ``populations[s]`` clients of each stratum (client index order). For examples,
    tests and the seed's checkpoints.

    Examples
    --------
    >>> strata, fleet = row_strata(SEED_POPULATIONS)
    >>> strata.order[-1], int((strata.ids[fleet] == "remote").sum())
    ('remote', 18)
    """
    if not isinstance(populations, Mapping) or not populations:
        raise fail("populations", populations, "is not a non-empty mapping",
                   "pass {stratum_id: clients}")
    names = [check_text(str(k), "stratum id") for k in populations]
    counts = [check_count(v, f"populations[{k!r}]", high=MAX_ROW_CLIENTS)
              for k, v in populations.items()]
    if sum(counts) > MAX_ROW_CLIENTS:
        raise fail("populations", populations, f"hold {sum(counts):,} clients, above the "
                   f"{MAX_ROW_CLIENTS:,} of a toy fleet", "use Strata and a real fleet")
    boxes = gpd.GeoDataFrame({"stratum": names}, crs=4326,
                             geometry=[shapely.box(i, 0, i + 1, 1) for i in range(len(names))])
    strata = Strata(Partition.from_geodataframe(boxes, "stratum", name="row"),
                    basis="administrative", order=names)
    return strata, np.repeat(strata.positions(names), counts).astype(np.int32)


def simulate_rounds(strata: Strata, client_strata: ArrayLike, *, cohort: int, rounds: int,
                    participation_cap: int, modes: tuple[str, ...] = MODES[:3],
                    sigma: Any = None, min_stratum_cohort: int = 5,
                    epsilon_per_round: float = 1.0, rng: RandomLike = None) -> pd.DataFrame:
    """Run one epoch of ``rounds`` rounds per mode and return the rounds x strata table.

    Parameters
    ----------
    strata : Strata
    client_strata : array
        Stratum position (or id) of each client of the fleet.
    cohort, rounds, participation_cap : int
    modes : tuple of str
        Allocation modes to compare (``"neyman"`` needs ``sigma``).
    sigma : mapping, optional
    min_stratum_cohort : int, default 5
        ``0`` disables merges (exhausted strata go silent, as in the seed's chart).
    epsilon_per_round : float, default 1.0
        Only stated for the (simulated) charge; it does not change the selection.
    rng : numpy.random.Generator, int or None
        Simulation randomness (the same seed for every mode).

    Returns
    -------
    pandas.DataFrame
        Columns ``mode``, ``round_index``, ``group``, ``wanted``, ``filled``,
        ``eligible_remaining``, ``shortfall``, ``reason``, ``score``.

    Examples
    --------
    >>> strata, fleet = row_strata({"a": 400, "b": 18})
    >>> table = simulate_rounds(strata, fleet, cohort=20, rounds=4,
    ...                         participation_cap=1, modes=("equal",), min_stratum_cohort=0,
    ...                         rng=0)
    >>> table[table.group == "b"].eligible_remaining.tolist()
    [8, 0, 0, 0]
    """
    cohort = check_count(cohort, "cohort", low=1)
    rounds = check_count(rounds, "rounds", low=1)
    if not isinstance(modes, tuple) or not modes:
        raise fail("modes", modes, "is not a non-empty tuple of modes",
                   f"pass e.g. {MODES[:3]}")
    seed = int(as_generator(rng).integers(2**63))
    policy = ParticipationPolicy(participation_cap=participation_cap,
                                 epsilon_per_round=epsilon_per_round, rounds_per_epoch=rounds)
    frames = []
    for mode in modes:
        sampler = StratifiedSampler(strata, cohort=cohort, policy=policy, mode=mode,
                                    sigma=sigma, min_stratum_cohort=min_stratum_cohort)
        state = sampler.new_state(client_strata, target=Simulation(rng=seed))
        for r in range(rounds):
            result = sampler.select(state, r)
            table = result.table.reset_index()
            frames.append(pd.DataFrame({
                "mode": mode, "round_index": r, "group": table.group,
                "wanted": table.wanted, "filled": table.filled,
                "eligible_remaining": table.eligible_after, "shortfall": table.shortfall,
                "reason": table.reason, "score": result.score}))
    return pd.concat(frames, ignore_index=True)
