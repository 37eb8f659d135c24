"""Round-health counters per region: returned, dropped, returned-and-rejected.

"How many clients dropped out in region X" is a statement about connectivity
there (seed 001), so these counters are a release like any metric: the region x
status table gets integer (discrete Laplace) noise, is charged to the ledger as
one release over disjoint cells, and is published only coarsened. Nothing is
published exactly: not even ``selected``, which is the sum of the noised counts
(post-processing), because ``selected`` minus a published cohort would give the
exact non-returners of a region.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from spatialdp._results import Result
from spatialdp._validation import check_alpha, check_epsilon, check_integer
from spatialdp.exceptions import InvalidInput
from spatialdp.geo.partition import Partition
from spatialdp.privacy.budget import Disjoint, Neighbours, check_neighbours
from spatialdp.privacy.noise import LaplaceMechanism
from spatialdp.privacy.pipeline import ReleasePlan, run_release
from spatialdp.privacy.target import Accounting, check_target

__all__ = ["HEALTH_STATUSES", "RoundHealth", "round_health"]

#: What became of a selected client in a round.
HEALTH_STATUSES = ("returned", "dropped", "rejected")

# Replacing one client moves one unit from one (region, status) cell to another;
# adding or removing one moves one cell by one.
_SENSITIVITY = {"replace": 2, "add_remove": 1}
_MAX_GRANULARITY = 10**6


@dataclass(frozen=True)
class RoundHealth(Result):
    """Published round-health counters of one round: every count noised and coarsened.

    Attributes
    ----------
    table : DataFrame
        Per region: ``selected`` (the sum of the three noised counts), ``returned``,
        ``dropped``, ``rejected`` (noised, rounded to ``granularity``) and the
        ``error_bar`` of each single count.
    granularity : int
        Published counts are multiples of this.
    epsilon : float
        Privacy loss of the whole table.
    partition_version : str
        The partition the table is keyed by.
    accounting : dict
        How it was charged.
    neighbours : {"replace", "add_remove"}
        The neighbouring relation ``epsilon`` holds for.
    """

    table: pd.DataFrame
    granularity: int
    epsilon: float
    partition_version: str
    accounting: dict[str, Any] = field(default_factory=dict)
    neighbours: str = "replace"


    def no_contact(self) -> pd.Index:
        """Return regions whose noised selection is within its error bar of zero."""
        bar = self.table.error_bar * np.sqrt(3.0)
        return self.table.index[self.table.selected <= bar]

    def summary(self) -> str:
        """Return one line: totals of the noised, coarsened counts."""
        total = self.table[list(HEALTH_STATUSES)].sum()
        return (f"round health{self.accounting_note}: ~{int(total.sum()):,} selected, "
                f"~{int(total.dropped):,} dropped, ~{int(total.rejected):,} rejected (noised, "
                f"epsilon {self.epsilon:g} "
                f"{self.neighbours}, coarsened to {self.granularity})")



def _counts(status: ArrayLike, region_id: ArrayLike, partition: Partition) -> NDArray[np.int64]:
    if isinstance(status, (str, bytes)) or isinstance(region_id, (str, bytes)):
        raise InvalidInput("give one status and one region_id per selected client, as arrays")
    statuses = np.asarray(status, dtype=object)
    regions = np.asarray(region_id, dtype=object)
    if statuses.ndim != 1 or statuses.shape != regions.shape or statuses.size == 0:
        raise InvalidInput(
            f"status has shape {statuses.shape} and region_id {regions.shape}; give one status "
            "and one region_id per selected client")
    try:
        codes = pd.Index(HEALTH_STATUSES).get_indexer(pd.Index(statuses)).astype(np.int64)
        pos = partition.region_ids.get_indexer(pd.Index(regions))
    except TypeError:
        raise InvalidInput("status and region_id must hold plain values (strings), not lists "
                           "or dicts; give one status and one region id per client") from None
    if (codes < 0).any():
        bad = sorted({str(v) for v in statuses[codes < 0]})[:3]
        raise InvalidInput(f"unknown statuses {bad}; use {list(HEALTH_STATUSES)}")
    if (pos < 0).any():
        bad = sorted({str(v) for v in regions[pos < 0]})[:3]
        raise InvalidInput(f"region_id values {bad} are not in {partition.key!r}")
    n = partition.n_regions
    return np.bincount(pos * 3 + codes, minlength=3 * n).reshape(n, 3).astype(np.int64)


def round_health(
    status: ArrayLike,
    region_id: ArrayLike,
    partition: Partition,
    *,
    epsilon: float,
    target: Accounting,
    granularity: int = 5,
    alpha: float = 0.05,
    neighbours: Neighbours = "replace",
) -> RoundHealth:
    """Release per-region counts of what became of the selected clients.

    Parameters
    ----------
    status : array-like of str
        Per selected client: ``"returned"``, ``"dropped"`` or ``"rejected"``.
    region_id : array-like
        Per selected client, its region id in ``partition``.
    partition : Partition
        The fixed geography.
    epsilon : float
        Privacy loss of the whole table (the regions and statuses are disjoint).
    target : ReleaseTarget, Simulation or Unaccounted
        Where it is charged and how its noise is drawn; required.
    granularity : int
        Noised counts are rounded to a multiple of this (post-processing, free in
        privacy terms); they are not clamped at zero, so sums stay unbiased.
    alpha : float
        ``error_bar`` is the (1 - alpha) half-width of one published count.
    neighbours : {"replace", "add_remove"}, default "replace"
        One selected client's outcome replaced (sensitivity 2), or one selected
        client added or removed (sensitivity 1).

    Returns
    -------
    RoundHealth

    Examples
    --------
    >>> from spatialdp.datasets import us_states_partition
    >>> from spatialdp.privacy import Simulation
    >>> states = us_states_partition()
    >>> status = np.array(["returned"] * 900 + ["dropped"] * 80 + ["rejected"] * 20)
    >>> health = round_health(status, np.full(1000, "CO"), states, epsilon=0.5,
    ...                       target=Simulation(rng=0))
    >>> int(health.table.loc["CO", "selected"]) % health.granularity
    0
    >>> list(health.table.columns)
    ['selected', 'returned', 'dropped', 'rejected', 'error_bar']
    """
    account = check_target(target)
    eps = check_epsilon(epsilon)
    step = check_integer(granularity, "granularity", low=1, high=_MAX_GRANULARITY,
                         fix="pass a whole number of clients >= 1, e.g. 5")
    level = check_alpha(alpha)
    relation = check_neighbours(neighbours)
    if not isinstance(partition, Partition):
        raise InvalidInput(f"partition must be a Partition, got {type(partition).__name__}")
    counts = _counts(status, region_id, partition)
    mech = LaplaceMechanism(eps, _SENSITIVITY[relation], discrete=True)
    bar = float(mech.error_bar(1, level)) + step / 2

    def finish(noisy: list[NDArray[Any]]) -> pd.DataFrame:
        # Rounded to the granularity but not clamped at zero: clamping would bias sums.
        coarse = (np.round(noisy[0].reshape(counts.shape) / step) * step).astype(np.int64)
        table = pd.DataFrame(coarse, index=partition.region_ids, columns=list(HEALTH_STATUSES))
        table.insert(0, "selected", coarse.sum(axis=1))
        table["error_bar"] = bar
        return table

    (table,) = run_release(
        [ReleasePlan(eps, [(mech, counts.ravel())], finish)], target=account,
        structure=Disjoint(f"{partition.key}:health", parts=3 * partition.n_regions),
        what="round-health counters", default_line_item="evaluation.regional",
        neighbours=relation)
    return RoundHealth(table, step, eps, partition.version, account.metadata(), relation)
