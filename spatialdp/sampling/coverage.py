"""Coverage figures for the model card: who was reached this epoch, and what was not.

Two forms. :func:`epoch_coverage` is the server's exact bookkeeping (publishable
under replace-one neighbours, where participation is public);
:func:`release_epoch_coverage` releases noised counts of the clients sampled
per region and per cell (:class:`ReleasedCoverage`), the only coverage a run
under add/remove neighbours may publish.

:func:`epoch_coverage` turns a sampler's state into a :class:`Coverage` result:
the share of strata (and of H3 cells) with any sampled client this epoch, the
blind spots listed, the merges with their reasons, the coverage score's
history, the per-client epsilon and the alerts. It is a per-stratum table
(:meth:`Coverage.to_geodataframe` joins it onto the strata geometry) plus a
JSON-ready dict (:meth:`Coverage.to_dict`, :meth:`Coverage.to_json`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from scipy import sparse

from spatialdp._validation import check_count, check_epsilon, check_instance, check_number, fail
from spatialdp.federated.coverage import CellCoverage, CoverageRelease
from spatialdp.federated.incidents import Incident
from spatialdp.geo.partition import Partition
from spatialdp.privacy.budget import Neighbours, check_neighbours
from spatialdp.privacy.target import Accounting, check_target
from spatialdp.sampling.merges import Merge, merges_frame
from spatialdp.sampling.sampler import StratifiedSampler
from spatialdp.sampling.score import coverage_drift, exhausted_pools, over_represented
from spatialdp.sampling.state import ParticipationState

__all__ = ["Coverage", "ReleasedCoverage", "epoch_coverage", "release_epoch_coverage"]


@dataclass(frozen=True)
class Coverage:
    """What an epoch of stratified selection covered.

    Attributes
    ----------
    epoch : int
    strata_key : str
    table : pandas.DataFrame
        One row per stratum: ``population``, ``selections`` (participations this
        epoch), ``clients_sampled`` (distinct), ``group`` (its reporting group),
        ``merged`` and ``blind_spot`` (no client this epoch).
    share_strata_sampled : float
    share_cells_sampled : float or None
        Share of H3 cells with any sampled client (None without cell locations).
    n_cells, cells_sampled : int or None
    blind_spots : list of str
        Strata with no client this epoch.
    merges : list of Merge
    score_history : pandas.Series
        Coverage score per round id.
    epsilon_per_client : float
        The per-client epoch epsilon (cap x per-round epsilon), as charged.
    charge : dict
        Where it was charged (target metadata).
    alerts : list of Incident
    strata_partition : Partition
    report_table : pandas.DataFrame or None
        With a report partition: one row per report region (``clients``,
        ``clients_sampled``, ``blind_spot``), e.g. states while sampling on density.
    blind_regions : list of str
        Report regions with clients but none sampled this epoch.
    report_partition : Partition or None
    cell_table : pandas.DataFrame or None
        With ``client_cells`` on derived strata: one row per H3 cell (``clients``,
        ``clients_sampled``, ``stratum``, ``blind_spot``).
    """

    epoch: int
    strata_key: str
    table: pd.DataFrame
    share_strata_sampled: float
    share_cells_sampled: float | None
    n_cells: int | None
    cells_sampled: int | None
    blind_spots: list[str]
    merges: list[Merge]
    score_history: pd.Series
    epsilon_per_client: float
    charge: dict[str, Any]
    alerts: list[Incident] = field(default_factory=list)
    strata_partition: Partition | None = None
    report_table: pd.DataFrame | None = None
    blind_regions: list[str] = field(default_factory=list)
    report_partition: Partition | None = None
    cell_table: pd.DataFrame | None = None

    def to_geodataframe(self) -> gpd.GeoDataFrame:
        """Return the per-stratum table on the strata geometry (``.plot()`` / ``.explore()``)."""
        if self.strata_partition is None:
            raise fail("strata_partition", None, "is missing", "build it with epoch_coverage")
        return self.strata_partition.join(self.table)

    def to_dict(self) -> dict[str, Any]:
        """Return the figures as plain JSON-ready values (for the model card)."""
        return {
            "epoch": self.epoch,
            "strata": self.strata_key,
            "share_strata_sampled": self.share_strata_sampled,
            "share_cells_sampled": self.share_cells_sampled,
            "n_cells": self.n_cells,
            "cells_sampled": self.cells_sampled,
            "blind_spots": list(self.blind_spots),
            "merges": [m.to_dict() for m in self.merges],
            "score_history": {str(k): float(v) for k, v in self.score_history.items()},
            "epsilon_per_client": self.epsilon_per_client,
            "charge": dict(self.charge),
            "alerts": [{"kind": a.kind, "region_id": a.region_id, "message": a.message,
                        "hint": a.hint} for a in self.alerts],
            "strata_table": json.loads(self.table.reset_index().to_json(orient="records")),
            "blind_regions": list(self.blind_regions),
            "report_table": (None if self.report_table is None else json.loads(
                self.report_table.reset_index().to_json(orient="records"))),
        }

    def to_json(self, **kwargs: Any) -> str:
        """Return :meth:`to_dict` as JSON text (``json.dumps`` keywords pass through)."""
        return json.dumps(self.to_dict(), **kwargs)

    def merges_table(self) -> pd.DataFrame:
        """Return the merges, one row each, with their reasons."""
        return merges_frame(self.merges)

    def summary(self) -> str:
        """Describe the coverage in a few lines."""
        cells = ("n/a" if self.share_cells_sampled is None
                 else f"{self.share_cells_sampled:.0%} of {self.n_cells} cells")
        last = (f"{self.score_history.iloc[-1]:.3f}" if len(self.score_history) else "n/a")
        return "\n".join([
            f"Coverage of epoch {self.epoch} on {self.strata_key}",
            f"  strata with a sampled client: {self.share_strata_sampled:.0%}; cells: {cells}",
            f"  blind spots: {', '.join(self.blind_spots) or 'none'}",
            f"  merges: {len(self.merges)}; last coverage score: {last}",
            f"  per-client epsilon this epoch: {self.epsilon_per_client:g}",
            f"  alerts: {len(self.alerts)}",
        ])

    def _repr_html_(self) -> str:
        from spatialdp._results import summary_html

        return summary_html("Coverage", self.summary(), self.merges_table() if self.merges
                            else None, caption="merged strata and why")

    def __repr__(self) -> str:
        return (f"Coverage(epoch={self.epoch}, strata={len(self.table)}, "
                f"share_strata_sampled={self.share_strata_sampled:.3f}, "
                f"blind_spots={len(self.blind_spots)}, merges={len(self.merges)}, "
                f"epsilon_per_client={self.epsilon_per_client:g})")


def epoch_coverage(sampler: StratifiedSampler, state: ParticipationState, *,
                   client_cells: ArrayLike | None = None, n_cells: int | None = None,
                   report: Partition | None = None, client_regions: ArrayLike | None = None,
                   score_threshold: float = 0.8) -> Coverage:
    """Summarise the epoch of ``state`` as a :class:`Coverage` result.

    Parameters
    ----------
    sampler : StratifiedSampler
    state : ParticipationState
    client_cells : array of int, optional
        Position of each client's H3 cell (e.g. ``strata.cell_partition.assign(...)
        .positions``), to measure the share of cells reached. For strata of basis
        ``"h3"`` the strata are the cells and this is not needed.
    n_cells : int, optional
        Number of cells (default: the strata's cell partition size).
    report, client_regions : Partition and array of int, optional
        A reporting partition (e.g. the states, while sampling on density strata)
        and each client's region position in it (``report.assign(...).positions``):
        adds a per-region table and the blind regions.
    score_threshold : float, default 0.8
        Coverage-score alert threshold.

    Returns
    -------
    Coverage
    """
    check_instance(sampler, "sampler", StratifiedSampler, "pass the StratifiedSampler")
    sampler._check_state(state)
    strata = sampler.strata
    n = strata.n_strata
    sampled = state.used > 0
    population = np.bincount(state.client_stratum, minlength=n)
    distinct = np.bincount(state.client_stratum[sampled], minlength=n)
    groups = sampler.group_names(state)
    table = pd.DataFrame({
        "population": population, "selections": state.selected,
        "clients_sampled": distinct, "group": groups.to_numpy(),
        "merged": groups.str.contains("+", regex=False).to_numpy(),
        "blind_spot": distinct == 0}, index=strata.ids)
    ids = list(strata.ids)
    blind = [ids[i] for i in np.flatnonzero(distinct == 0)]
    share_cells = cells_hit = total_cells = None
    cell_table = None
    if client_cells is not None:
        cells = np.asarray(client_cells)
        if cells.shape != state.client_stratum.shape or cells.dtype.kind not in "iu":
            raise fail("client_cells", client_cells, "is not one cell position per client",
                       "pass Partition.assign(...).positions for the fleet")
        total_cells = check_count(n_cells, "n_cells", low=1) if n_cells is not None else (
            strata.cell_partition.n_regions if strata.cell_partition is not None
            else int(cells.max()) + 1)
        fix = ("pass Partition.assign(...).positions of the cell partition (-1: no cell), "
               "and n_cells = its number of cells")
        if total_cells < 1:
            raise fail("client_cells", client_cells, "locates no client (all -1)", fix)
        if cells.max() >= total_cells:
            raise fail("client_cells", client_cells,
                       f"holds positions outside 0..{total_cells - 1}", fix)
        hit = cells[sampled & (cells >= 0)]
        cells_hit = int(np.unique(hit).size)
        share_cells = cells_hit / total_cells
        if strata.cell_partition is not None and strata.cell_stratum is not None:
            size = strata.cell_partition.n_regions
            located = cells >= 0
            everyone = np.bincount(cells[located], minlength=size)[:size]
            reached = np.bincount(cells[located & sampled], minlength=size)[:size]
            cell_table = pd.DataFrame({
                "clients": everyone, "clients_sampled": reached,
                "stratum": np.asarray(strata.ids)[strata.cell_stratum],
                "blind_spot": (everyone > 0) & (reached == 0)},
                index=pd.Index(strata.cell_partition.region_ids, name="region_id"))
    elif strata.basis == "h3":
        total_cells, cells_hit = n, int((distinct > 0).sum())
        share_cells = cells_hit / n
    report_table, blind_regions = None, []
    if report is not None or client_regions is not None:
        check_instance(report, "report", Partition, "pass the report Partition with "
                       "client_regions")
        assert report is not None
        regions = np.asarray(client_regions)
        if regions.shape != state.client_stratum.shape or regions.dtype.kind not in "iu":
            raise fail("client_regions", client_regions, "is not one region position per "
                       "client", "pass report.assign(...).positions for the fleet")
        if regions.size and regions.max() >= report.n_regions:
            raise fail("client_regions", client_regions, f"holds positions beyond the "
                       f"{report.n_regions} regions of {report.key}",
                       "pass report.assign(...).positions for the fleet (-1: no region)")
        ok = regions >= 0
        everyone = np.bincount(regions[ok], minlength=report.n_regions)
        reached = np.bincount(regions[ok & sampled], minlength=report.n_regions)
        report_table = pd.DataFrame({"clients": everyone, "clients_sampled": reached,
                                     "blind_spot": (everyone > 0) & (reached == 0)},
                                    index=pd.Index(report.region_ids, name="region_id"))
        blind_regions = [str(r) for r in report_table.index[report_table.blind_spot]]
    scores = pd.Series([h["score"] for h in state.history],
                       index=pd.Index([h["round_index"] for h in state.history],
                                      name="round_index"), name="score", dtype=float)
    alerts = coverage_drift(scores.tolist(), threshold=score_threshold)
    wanted_any = np.isin(np.arange(n), np.flatnonzero(population > 0))
    alerts += exhausted_pools(state.eligible_per_stratum(n), wanted_any.astype(np.int64), ids)
    alerts += over_represented(state.selected, population, ids)
    for h in state.history:
        for g in h["unfilled_groups"]:
            alerts.append(Incident("unfilled_allocation", g,
                                   f"round {h['round_index']}: seats went unfilled",
                                   "merge the stratum, extend the epoch, or accept a smaller "
                                   "cohort"))
    return Coverage(
        epoch=state.epoch, strata_key=strata.key, table=table,
        share_strata_sampled=float((distinct > 0).mean()), share_cells_sampled=share_cells,
        n_cells=total_cells, cells_sampled=cells_hit, blind_spots=blind,
        merges=list(state.merges), score_history=scores,
        epsilon_per_client=sampler.policy.epsilon_per_client_epoch, charge=dict(state.charge),
        alerts=alerts, strata_partition=strata.partition, report_table=report_table,
        blind_regions=blind_regions, report_partition=report, cell_table=cell_table)


@dataclass(frozen=True)
class ReleasedCoverage:
    """An epoch's coverage as a release: noised counts of the distinct clients sampled.

    Under add/remove neighbours who was sampled, and where, is private, so the
    exact :class:`Coverage` bookkeeping must not be published. This is what is:
    per report region (and per H3 cell) the noised number of distinct clients
    sampled this epoch, and whether that number clears its error bar
    ("confirmed reached"). A region below its bar is "not confirmed reached",
    never "empty": with noise, few clients and none look alike.

    Attributes
    ----------
    epoch : int
    regions : CoverageRelease
        Per report region: ``clients`` (noised), ``error_bar``, ``covered``.
    cells : CoverageRelease or None
        The same per H3 cell.
    epsilon : float
        The release's loss (the region and the cell maps together).
    neighbours : {"replace", "add_remove"}

    See Also
    --------
    release_epoch_coverage : releases it (with an example).
    """

    epoch: int
    regions: CoverageRelease
    cells: CoverageRelease | None
    epsilon: float
    neighbours: str

    @property
    def blind_regions(self) -> list[str]:
        """Report regions whose noised count of sampled clients is within its error bar."""
        frame = self.regions.frame
        return [str(r) for r in frame.index[~frame.covered.to_numpy(dtype=bool)]]

    @property
    def blind_cells(self) -> list[str]:
        """H3 cells not confirmed reached (empty without a cell release)."""
        if self.cells is None:
            return []
        frame = self.cells.frame
        return [str(r) for r in frame.index[~frame.covered.to_numpy(dtype=bool)]]

    def summary(self) -> str:
        """Describe the released coverage in a few lines."""
        lines = [f"Coverage of epoch {self.epoch} (released, epsilon {self.epsilon:g}, "
                 f"{self.neighbours})",
                 f"  regions confirmed reached: {self.regions.n_confirmed} of "
                 f"{len(self.regions.frame)} (counts +/- {self.regions.error_bar:g})"]
        if self.cells is not None:
            lines.append(f"  cells confirmed reached: {self.cells.n_confirmed:,} "
                         f"of {len(self.cells.frame):,} (counts +/- {self.cells.error_bar:g})")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from spatialdp._results import summary_html

        return summary_html("ReleasedCoverage", self.summary())


def _sampled_rows(state: ParticipationState, positions: ArrayLike, partition: Partition,
                  name: str) -> CellCoverage:
    """Return one 0/1 row per client sampled this epoch, at its position in ``partition``."""
    where = np.asarray(positions)
    if where.shape != state.client_stratum.shape or where.dtype.kind not in "iu":
        raise fail(name, positions, "is not one position per client of the state",
                   f"pass {name}.assign(...).positions for the fleet (-1: outside)")
    if where.size and where.max() >= partition.n_regions:
        raise fail(name, positions, f"holds positions beyond the {partition.n_regions} "
                   f"regions of {partition.key}", "pass the positions in that partition")
    rows = np.flatnonzero((state.used > 0) & (where >= 0))
    matrix = sparse.csr_array(
        (np.ones(rows.size, dtype=np.int8), where[rows].astype(np.int64),
         np.arange(rows.size + 1)), shape=(rows.size, partition.n_regions))
    return CellCoverage(matrix, pd.Index(rows), partition.version, max_cells=1)


def release_epoch_coverage(state: ParticipationState, *, report: Partition,
                           client_regions: ArrayLike, epsilon: float, target: Accounting,
                           cells: Partition | None = None, client_cells: ArrayLike | None = None,
                           cell_share: float = 0.5, neighbours: Neighbours = "add_remove",
                           alpha: float = 0.05) -> ReleasedCoverage:
    """Release how many distinct clients an epoch sampled per region (and per H3 cell).

    Each sampled client counts once, in its region (and its cell), whatever
    the number of rounds it took part in: one client moves each count vector
    by one (add/remove; two under replace-one). The region counts and the cell
    counts are two maps (:func:`~spatialdp.federated.coverage.plan_coverage`)
    of one release, charged once (line item ``evaluation.regional``) before their
    noise: a refusal publishes and charges neither.

    Parameters
    ----------
    state : ParticipationState
        The epoch's selection state (the server's own records).
    report : Partition
        The report regions.
    client_regions : array of int
        Each client's region position in ``report`` (-1: none).
    epsilon : float
        Loss of the release: split between the region and the cell maps.
    target : ReleaseTarget, Simulation or Unaccounted
    cells : Partition, optional
        An H3 cell partition, with ``client_cells`` (each client's cell position).
    cell_share : float, default 0.5
        Share of ``epsilon`` spent on the cells (there are many more of them).
    neighbours : {"add_remove", "replace"}, default "add_remove"
    alpha : float
        Error-bar level of each count.

    Returns
    -------
    ReleasedCoverage

    Examples
    --------
    >>> from spatialdp.datasets import synthetic_fleet, us_states_partition
    >>> from spatialdp.privacy import Simulation
    >>> from spatialdp.sampling import ParticipationPolicy, StratifiedSampler, Strata
    >>> states = us_states_partition()
    >>> fleet = synthetic_fleet(20_000, rng=0)
    >>> where = states.assign(fleet).positions
    >>> sampler = StratifiedSampler(Strata(states, basis="administrative"), cohort=2_000,
    ...                             policy=ParticipationPolicy(1, 0.1, 1))
    >>> state = sampler.new_state(where, target=Simulation(rng=0))
    >>> _ = sampler.select(state, 1)
    >>> out = release_epoch_coverage(state, report=states, client_regions=where,
    ...                              epsilon=0.5, target=Simulation(rng=1))
    >>> "CA" in out.blind_regions, out.neighbours
    (False, 'add_remove')
    """
    from spatialdp.federated.coverage import plan_coverage
    from spatialdp.privacy.budget import Single
    from spatialdp.privacy.pipeline import exact_total, run_release, split_exactly

    check_instance(state, "state", ParticipationState,
                   "pass the epoch's state (StratifiedSampler.new_state)")
    check_instance(report, "report", Partition, "pass the report Partition")
    eps = check_epsilon(epsilon)
    relation = check_neighbours(neighbours)
    account = check_target(target)
    region_rows = _sampled_rows(state, client_regions, report, "client_regions")
    eps_regions, maps, keys = eps, [], [report.key]
    if cells is not None or client_cells is not None:
        check_instance(cells, "cells", Partition, "pass the H3 cell Partition with "
                       "client_cells")
        assert cells is not None
        if client_cells is None:
            raise fail("client_cells", None, "is missing while cells is given",
                       "pass each client's cell position, cells.assign(...).positions")
        cell_rows = _sampled_rows(state, client_cells, cells, "client_cells")
        share = check_number(cell_share, "cell_share", low=0.0, high=1.0, low_open=True,
                             high_open=True, fix="pass a share in (0, 1), e.g. 0.5")
        eps_regions, eps_cells = split_exactly(eps, share)
        maps.append(plan_coverage(cell_rows, cells, epsilon=eps_cells, alpha=alpha,
                                  neighbours=relation))
        keys.append(cells.key)
    plans = [plan_coverage(region_rows, report, epsilon=eps_regions, alpha=alpha,
                           neighbours=relation), *maps]
    # The region and cell maps are one release: charged once, so neither is
    # published (nor charged) when the other would be refused.
    released = run_release(plans, target=account, structure=Single("coverage:" + "+".join(keys)),
                           what=f"epoch {state.epoch} coverage counts (max_cells "
                                f"{region_rows.max_cells})",
                           default_line_item="evaluation.regional", neighbours=relation)
    regions, *cell_maps = [replace(r, accounting=account.metadata()) for r in released]
    total = exact_total([plan.loss()[1] for plan in plans])
    return ReleasedCoverage(state.epoch, regions, cell_maps[0] if cell_maps else None, total,
                            relation)
