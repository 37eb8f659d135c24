"""Coverage figures for the model card: who was reached this epoch, and what was not.

:func:`epoch_coverage` turns a sampler's state into a :class:`Coverage` result:
the share of strata (and of H3 cells) with any sampled client this epoch, the
blind spots listed, the merges with their reasons, the coverage score's
history, the per-client epsilon and the alerts. It is a per-stratum table
(:meth:`Coverage.to_geodataframe` joins it onto the strata geometry) plus a
JSON-ready dict (:meth:`Coverage.to_dict`, :meth:`Coverage.to_json`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
from numpy.typing import ArrayLike

from spatialdp._validation import check_count, check_instance, fail
from spatialdp.federated.incidents import Incident
from spatialdp.geo.partition import Partition
from spatialdp.sampling.merges import Merge, merges_frame
from spatialdp.sampling.sampler import StratifiedSampler
from spatialdp.sampling.score import coverage_drift, exhausted_pools, over_represented
from spatialdp.sampling.state import ParticipationState

__all__ = ["Coverage", "epoch_coverage"]


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
        from spatialdp._html import summary_html

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
