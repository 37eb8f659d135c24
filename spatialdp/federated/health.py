"""Round-health counters per region: selected, dropped, returned-and-rejected.

"How many clients dropped out in region X" is a statement about connectivity
there, so these counters are releases like any metric: the private ones get
integer (discrete Laplace) noise, the whole region x status table is one
release charged to the ledger, and the published counts are coarsened.
``selected`` is the server's own choice (its stratified selection) and is
published as chosen.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from spatialdp.exceptions import InvalidInput
from spatialdp.federated.aggregate import charge, laplace_scale
from spatialdp.geo.partition import Partition
from spatialdp.privacy.budget import Disjoint
from spatialdp.privacy.ledger import PrivacyLedger

__all__ = ["HEALTH_STATUSES", "RoundHealth", "round_health"]

#: What became of a selected client in a round.
HEALTH_STATUSES = ("returned", "dropped", "rejected")

# Replacing one client moves one unit from one (region, status) cell to another.
_SENSITIVITY = 2


@dataclass(frozen=True)
class RoundHealth:
    """Published round-health counters of one round.

    Attributes
    ----------
    table : DataFrame
        Per region: ``selected`` (as chosen), and noised, coarsened ``returned``,
        ``dropped``, ``rejected``; plus ``error_bar`` of each noised count.
    granularity : int
        Published counts are multiples of this.
    epsilon : float
    partition_version : str
    """

    table: pd.DataFrame
    granularity: int
    epsilon: float
    partition_version: str

    def no_contact(self) -> pd.Index:
        """Regions with nobody selected (the cause is selection, not the clients)."""
        return self.table.index[self.table.selected == 0]


def _noised(counts: NDArray[np.int64], scale: float, rng: np.random.Generator | None
            ) -> NDArray[np.int64]:
    if rng is not None:  # simulation path
        from spatialdp.privacy.noise import simulate_discrete_laplace

        return np.asarray(simulate_discrete_laplace(counts, scale, rng=rng), dtype=np.int64)
    from spatialdp.privacy.noise import release_discrete_laplace

    return np.asarray(release_discrete_laplace(counts.ravel(), scale)).reshape(counts.shape)


def round_health(
    status: ArrayLike,
    region: ArrayLike,
    partition: Partition,
    *,
    epsilon: float,
    granularity: int = 5,
    alpha: float = 0.05,
    ledger: PrivacyLedger | None = None,
    epoch: int | None = None,
    line_item: str = "evaluation.regional",
    who: str = "spatialdp",
    round_index: int | None = None,
    simulate_with: np.random.Generator | None = None,
) -> RoundHealth:
    """Release per-region counts of what became of the selected clients.

    Parameters
    ----------
    status : array-like of str
        Per selected client: ``"returned"``, ``"dropped"`` or ``"rejected"``.
    region : array-like
        Per selected client, its region id in ``partition``.
    epsilon : float
        Privacy loss of the whole table (the regions and statuses are disjoint).
    granularity : int
        Noised counts are rounded to a multiple of this (post-processing, free in
        privacy terms); they are not clamped at zero, so sums over regions stay
        unbiased.
    simulate_with : numpy.random.Generator, optional
        Only for simulations: seeded noise and no ledger charge.
    """
    statuses = np.asarray(status).astype(str)
    regions = np.asarray(region).astype(str)
    if statuses.shape != regions.shape:
        raise InvalidInput("give one status and one region per selected client")
    unknown = ~np.isin(statuses, HEALTH_STATUSES)
    if unknown.any():
        raise InvalidInput(
            f"unknown statuses {sorted(set(statuses[unknown].tolist()))[:3]}; use {HEALTH_STATUSES}"
        )
    if not (np.isfinite(epsilon) and epsilon > 0):
        raise InvalidInput(f"epsilon={epsilon!r} must be a positive number")
    if granularity < 1:
        raise InvalidInput(f"granularity={granularity} must be a positive integer")
    pos = partition.region_ids.get_indexer(pd.Index(regions))
    if (pos < 0).any():
        raise InvalidInput(
            f"regions {sorted(set(regions[pos < 0].tolist()))[:3]} are not in {partition.key!r}"
        )
    code = pd.Categorical(statuses, categories=list(HEALTH_STATUSES)).codes.astype(np.int64)
    n = partition.n_regions
    counts = np.bincount(pos * 3 + code, minlength=3 * n).reshape(n, 3).astype(np.int64)
    scale = laplace_scale(_SENSITIVITY, epsilon)
    if simulate_with is not None and ledger is not None:
        raise InvalidInput(
            "simulate_with= (seeded noise) was given together with a ledger; releases draw "
            "noise from OS entropy: drop simulate_with= to release, or ledger= to simulate"
        )
    if simulate_with is None:
        charge(ledger=ledger, epoch=epoch, line_item=line_item,
               structure=Disjoint(f"{partition.key}:health", parts=3 * n),
               epsilon=float(epsilon), who=who, what="round-health counters",
               why="round health", round_index=round_index)
    noisy = _noised(counts, scale, simulate_with)
    # Rounded to the granularity but not clamped at zero: clamping would bias sums.
    coarse = (np.round(noisy / granularity) * granularity).astype(np.int64)
    from spatialdp.privacy.accuracy import half_width

    bar = float(half_width("discrete_laplace", scale, m=1, alpha=alpha)) + granularity / 2
    table = pd.DataFrame(coarse, index=partition.region_ids, columns=list(HEALTH_STATUSES))
    table.insert(0, "selected", counts.sum(axis=1))
    table["error_bar"] = bar
    return RoundHealth(table, granularity, float(epsilon), partition.version)
