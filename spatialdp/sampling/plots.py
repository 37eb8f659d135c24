"""Figures of stratified selection: the coverage map, the allocation bars, the staircase.

The coverage map never lets a blind spot pass for a small number: strata with no
client this epoch are drawn white with a red cross-hatch and named in the
legend, not coloured at the bottom of the scale; merged strata are drawn with
one thick outline around the group (their inner borders dashed) and labelled
with the group's name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from spatialdp._validation import (
    check_axes,
    check_choice,
    check_cmap,
    check_finite_array,
    check_text,
    fail,
)
from spatialdp.sampling.allocation import allocation_table
from spatialdp.sampling.coverage import Coverage

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["plot_allocation", "plot_coverage_map", "plot_staircase"]

_BLIND: dict[str, Any] = {"facecolor": "white", "edgecolor": "#c0392b", "hatch": "xxx",
                          "linewidth": 0.6}
_EMPTY: dict[str, Any] = {"facecolor": "#d9d9d9", "edgecolor": "#aaaaaa", "linewidth": 0.3}


def _axes(ax: Any, size: tuple[float, float]) -> Axes:
    import matplotlib.pyplot as plt

    if check_axes(ax) is None:
        _, ax = plt.subplots(figsize=size)
    return ax


def _layer(coverage: Coverage, level: str) -> tuple[Any, str]:
    """Return the GeoDataFrame to draw at ``level`` and what its regions are called."""
    if level == "strata":
        frame = coverage.to_geodataframe()
        frame["clients"] = frame["population"]
        return frame, "strata"
    if level == "report":
        if coverage.report_table is None or coverage.report_partition is None:
            raise fail("level", level, "needs a report partition",
                       "call epoch_coverage(..., report=, client_regions=) first")
        return coverage.report_partition.join(coverage.report_table), "regions"
    if coverage.cell_table is None or coverage.strata_partition is None:
        raise fail("level", level, "needs per-cell counts",
                   "call epoch_coverage(..., client_cells=) on derived (density) strata")
    return coverage.cell_table, "cells"


def plot_coverage_map(coverage: Coverage, *, column: str = "clients_sampled",
                      level: str = "strata", cells: Any = None,
                      ax: Axes | None = None, cmap: str = "viridis") -> Axes:
    """Map a :class:`Coverage`: values per region, blind spots hatched, merges outlined.

    Parameters
    ----------
    coverage : Coverage
    column : {"clients_sampled", "selections"}
        What to colour by (``selections`` at the strata level only).
    level : {"strata", "report", "cells"}
        Draw the strata (with merged strata outlined), the report regions
        (``epoch_coverage(report=...)``) or the H3 cells of derived strata
        (``epoch_coverage(client_cells=...)``, with ``cells`` the cell Partition).
    cells : Partition, optional
        The cell partition, for ``level="cells"``.
    ax : matplotlib Axes, optional
    cmap : str

    Returns
    -------
    matplotlib.axes.Axes
    """
    import matplotlib as mpl
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from spatialdp.geo.partition import Partition

    if not isinstance(coverage, Coverage):
        raise fail("coverage", coverage, f"is a {type(coverage).__name__}, not a Coverage",
                   "pass epoch_coverage(sampler, state)")
    column = check_text(column, "column")
    level = check_choice(level, "level", ("strata", "report", "cells"))
    colours = check_cmap(cmap)
    if column not in ("clients_sampled", "selections") or (
            column == "selections" and level != "strata"):
        raise fail("column", column, "is not a coverage count of this level",
                   "pass 'clients_sampled' (or 'selections' at the strata level)")
    frame, noun = _layer(coverage, level)
    if level == "cells":
        if not isinstance(cells, Partition):
            raise fail("cells", cells, "is not the cell Partition",
                       "pass strata.cell_partition")
        frame = cells.join(frame)
    ax = _axes(ax, (10, 6))
    blind_mask = frame.blind_spot.fillna(False).astype(bool).to_numpy()
    empty_mask = np.zeros(len(frame), dtype=bool)
    if "clients" in frame:
        empty_mask = frame.clients.fillna(0).to_numpy() == 0
    blind_mask = blind_mask & ~empty_mask  # nobody to sample: grey, not a blind spot
    seen = frame[~blind_mask & ~empty_mask]
    blind = frame[blind_mask]
    values = seen[column].to_numpy(dtype=float)
    norm = mpl.colors.Normalize(vmin=1, vmax=max(values.max() if values.size else 2, 2))
    if len(seen):
        seen.plot(column=column, ax=ax, cmap=colours, norm=norm, edgecolor="#555555",
                  linewidth=0.4)
        sm = mpl.cm.ScalarMappable(norm=norm, cmap=colours)
        ax.figure.colorbar(sm, ax=ax, shrink=0.5, location="bottom", pad=0.12, aspect=40,
                           label=column.replace("_", " ") + " this epoch (>= 1)")
    if len(blind):
        blind.plot(ax=ax, **_BLIND)
    handles: list[Any] = [Patch(label=f"blind spot: clients, none sampled this epoch "
                                f"({len(blind)} {noun})", **_BLIND)]
    if empty_mask.any():
        frame[empty_mask].plot(ax=ax, **_EMPTY)
        handles.append(Patch(label=f"no clients in the fleet ({int(empty_mask.sum())} "
                             f"{noun})", **_EMPTY))
    merged = frame[frame.merged.astype(bool)] if level == "strata" else frame.iloc[:0]
    if len(merged):
        merged.boundary.plot(ax=ax, color="black", linewidth=0.8, linestyle=(0, (3, 2)))
        groups = merged.dissolve(by="group")
        groups.boundary.plot(ax=ax, color="#ff7f0e", linewidth=2.2)
        west, south, east, north = frame.total_bounds
        for i, (name, geom) in enumerate(zip(groups.index, groups.geometry, strict=True)):
            point = geom.representative_point()
            # Labels stacked in the margin with an arrow: small merged groups stay visible.
            ax.annotate(f"merged: {name}", (point.x, point.y),
                        xytext=(east + 0.02 * (east - west), north - (i + 0.5) * 0.07
                                * (north - south)),
                        fontsize=7, ha="left", va="center", annotation_clip=False,
                        arrowprops={"arrowstyle": "-", "color": "#ff7f0e", "lw": 0.8},
                        bbox={"boxstyle": "round", "fc": "white", "ec": "#ff7f0e"})
        handles.append(Line2D([], [], color="#ff7f0e", linewidth=2.2,
                              label=f"merged strata, one outline ({len(groups)} groups)"))
    ax.legend(handles=handles, loc="lower left", fontsize=8, framealpha=0.9)
    # One denominator, as on the model card: the units with clients (an empty one can be
    # neither reached nor a blind spot).
    populated = int((~empty_mask).sum())
    reached = (f"{populated - int(blind_mask.sum()):,} of {populated:,} {noun} with clients "
               "sampled; ")
    ax.set_title(f"Coverage of epoch {coverage.epoch} by {noun}: {reached}"
                 f"per-client epsilon {coverage.epsilon_per_client:g}")
    ax.set_xlabel("longitude")
    ax.set_ylabel("latitude")
    return ax


def plot_allocation(populations: Any, cohort: int, *,
                    modes: tuple[str, ...] = ("proportional", "sqrt", "equal"),
                    sigma: Any = None, order: list[str] | None = None,
                    ax: Axes | None = None) -> Axes:
    """Draw the fractional seats of each mode side by side per stratum (the seed's chart).

    Bars are the fractional shares, labelled with one decimal; the pool of each
    stratum is marked, so over-drawing a small stratum shows.
    """
    table = allocation_table(populations, cohort, modes=modes, sigma=sigma)
    if order is not None:
        if not isinstance(order, list) or sorted(map(str, order)) != sorted(
                map(str, table.index)):
            raise fail("order", order, "is not a list of the strata, each once",
                       f"pass a permutation of {list(table.index)[:6]}")
        table = table.loc[order]
    ax = _axes(ax, (9, 4.5))
    pops = pd.Series(populations).loc[table.index] if not isinstance(
        populations, pd.Series) else populations.loc[table.index]
    x = np.arange(len(table))
    width = 0.8 / len(modes)
    for i, mode in enumerate(modes):
        shares = table[(mode, "share")].to_numpy()
        bars = ax.bar(x + (i - (len(modes) - 1) / 2) * width, shares, width,
                      label="sqrt-weighted" if mode == "sqrt" else mode)
        ax.bar_label(bars, labels=[f"{v:.1f}" for v in shares], fontsize=7, padding=1)
    ax.scatter(x, pops.to_numpy(), marker="_", s=400, color="black", zorder=3,
               label="stratum pool (clients)")
    ax.set_xticks(x, [str(i) for i in table.index])
    ax.set_ylabel("clients selected per round")
    ax.set_ylim(0, min(float(pops.max()), 1.15 * float(np.nanmax(
        table.xs("share", axis=1, level=1).to_numpy()))) * 1.15)
    ax.set_title(f"Allocations of a cohort of {cohort} clients (fractional shares)")
    ax.legend(fontsize=8)
    return ax


def plot_staircase(table: pd.DataFrame, group: str, *, ax: Axes | None = None) -> Axes:
    """Plot a stratum's eligible pool round by round, per mode, with its seats wanted.

    ``table`` is :func:`~spatialdp.sampling.simulation.simulate_rounds` output.
    Rounds whose seats went unfilled are marked with a red x.
    """
    counts = ("round_index", "wanted", "filled", "eligible_remaining", "shortfall")
    if (not isinstance(table, pd.DataFrame) or not {"mode", "group", *counts} <= set(table)
            or table.columns.duplicated().any()):
        raise fail("table", table, "is not a simulate_rounds table",
                   "pass simulate_rounds(...)")
    for name in counts:
        check_finite_array(table[name], f"table[{name!r}]", allow_empty=True)
    group = check_text(group, "group")
    rows = table[table.group == group]
    if rows.empty:
        raise fail("group", group, "is not a group of the table",
                   f"pass one of {sorted(table.group.unique())[:6]}")
    ax = _axes(ax, (8, 4.5))
    for mode, part in rows.groupby("mode", sort=False):
        pool = np.concatenate([[part.eligible_remaining.iloc[0] + part.filled.iloc[0]],
                               part.eligible_remaining.to_numpy()])
        (line,) = ax.step(np.arange(pool.size), pool, where="post", label=f"{mode}: eligible")
        ax.plot(part.round_index + 1, part.wanted, linestyle=":", color=line.get_color(),
                label=f"{mode}: wanted per round")
        short = part[part.shortfall > 0]
        ax.scatter(short.round_index + 1, short.filled, marker="x", color="#c0392b", zorder=3)
    ax.scatter([], [], marker="x", color="#c0392b", label="filled < wanted (shortfall)")
    ax.set_xlabel("round (1 = first round of the epoch)")
    ax.set_ylabel("eligible clients remaining")
    ax.set_title(f"Eligible pool of {group!r}, round by round")
    ax.legend(fontsize=8)
    return ax
