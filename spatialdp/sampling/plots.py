"""Figures of stratified selection: the coverage map, the allocation bars, the staircase.

The coverage map never lets a blind spot pass for a small number: strata with no
client this epoch are drawn white with a red cross-hatch and named in the
legend, not coloured at the bottom of the scale; merged strata are drawn with
one thick outline around the group (their inner borders dashed) and a numbered
badge, named in the key beside the map (no label or leader line crosses the
map). Maps are drawn in the equal-area projection of :mod:`spatialdp.viz.projection`;
side-by-side maps share one colour scale (:func:`plot_coverage_maps`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from spatialdp._validation import (
    check_axes,
    check_choice,
    check_cmap,
    check_finite_array,
    check_number,
    check_text,
    fail,
)
from spatialdp.sampling.allocation import allocation_table
from spatialdp.sampling.coverage import Coverage

if TYPE_CHECKING:
    import geopandas as gpd
    from matplotlib.axes import Axes
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure

__all__ = ["plot_allocation", "plot_coverage_map", "plot_coverage_maps", "plot_staircase"]

_BLIND: dict[str, Any] = {"facecolor": "white", "edgecolor": "#c0392b", "hatch": "xxx",
                          "linewidth": 0.6}
_EMPTY: dict[str, Any] = {"facecolor": "#d9d9d9", "edgecolor": "#aaaaaa", "linewidth": 0.3}
_MERGE = "#ff7f0e"


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
                      ax: Axes | None = None, cmap: str = "viridis",
                      projection: Any = "auto") -> Axes:
    """Map a :class:`Coverage`: values per region, blind spots hatched, merges outlined.

    The map is drawn like every spatialdp map (an equal-area projection chosen
    from the extent, no lon/lat axes, the CRS named in the corner; see
    :mod:`spatialdp.viz.projection`). Each merged group gets one orange
    outline and a numbered badge inside it; the legend, beside the map, names
    the groups by number, so no label or leader line crosses the map. To put
    several coverage maps side by side on one colour scale, use
    :func:`plot_coverage_maps`.

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
    projection : "auto", None, or a CRS
        As for :func:`~spatialdp.viz.plot_uncertainty_choropleth`.

    Returns
    -------
    matplotlib.axes.Axes
    """
    frame, noun = _coverage_layer(coverage, column, level, cells)
    colours = check_cmap(cmap)
    ax = _axes(ax, (10, 6))
    norm = _count_norm([frame[column]])
    _draw_coverage(ax, coverage, frame, noun, column, level, colours, norm, projection)
    _colorbar(ax.figure, [ax], colours, norm, column)
    return ax


def plot_coverage_maps(panels: Sequence[Any], *, column: str = "clients_sampled",
                       cells: Any = None, cmap: str = "viridis", projection: Any = "auto",
                       titles: Sequence[str] | None = None,
                       figsize: tuple[float, float] | None = None) -> Figure:
    """Draw coverage maps side by side on ONE colour scale, with one colour bar.

    Separate colour bars on neighbouring panels make equal colours mean
    different counts; here every panel shares one normalisation (1 to the
    largest count over all panels) and one projection (chosen from the first
    panel's layer).

    Parameters
    ----------
    panels : sequence of Coverage or (Coverage, level)
        One panel each; a bare Coverage is drawn at the strata level.
    column, cmap, projection
        As for :func:`plot_coverage_map`.
    cells : Partition, optional
        The cell partition, for panels at ``level="cells"``.
    titles : sequence of str, optional
        One title per panel (default: each panel's own title).
    figsize : (float, float), optional
        Default 8 x 5.5 inches per panel.

    Returns
    -------
    matplotlib.figure.Figure
        One axes per panel (``gid="coverage:<i>"``) and one colour bar.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from spatialdp.privacy.target import Simulation
    >>> from spatialdp.sampling import (ParticipationPolicy, StratifiedSampler,
    ...                                 epoch_coverage, row_strata)
    >>> strata, fleet = row_strata({"a": 300, "b": 40, "c": 3})
    >>> policy = ParticipationPolicy(participation_cap=1, epsilon_per_round=0.1,
    ...                              rounds_per_epoch=1)
    >>> covs = []
    >>> for cohort in (20, 60):
    ...     sampler = StratifiedSampler(strata, cohort=cohort, policy=policy)
    ...     state = sampler.new_state(fleet, target=Simulation(rng=0))
    ...     _ = sampler.select(state, 0)
    ...     covs.append(epoch_coverage(sampler, state))
    >>> fig = plot_coverage_maps(covs, titles=["cohort 20", "cohort 60"])
    >>> left, right = (ax for ax in fig.axes if str(ax.get_gid()).startswith("coverage:"))
    >>> left.collections[0].norm is right.collections[0].norm
    True
    """
    import matplotlib.pyplot as plt

    from spatialdp.viz.projection import resolve_crs

    items = _panels(panels)
    if titles is not None and (isinstance(titles, str) or not isinstance(titles, Sequence)
                               or len(titles) != len(items)):
        raise fail("titles", titles, f"is not one title per panel ({len(items)})",
                   "pass a list of titles as long as panels, or None")
    size = _figure_size(figsize, len(items))
    colours = check_cmap(cmap)
    layers = [_coverage_layer(cov, column, level, cells) for cov, level in items]
    norm = _count_norm([frame[column] for frame, _ in layers])
    crs = resolve_crs(layers[0][0], projection)
    # Constrained layout leaves room for each key beside its map, clear of the next map.
    fig, axes = plt.subplots(1, len(items), figsize=size, squeeze=False, layout="constrained")
    for i, (ax, (cov, level), (frame, noun)) in enumerate(
            zip(axes[0], items, layers, strict=True)):
        _draw_coverage(ax, cov, frame, noun, column, level, colours, norm,
                       projection if crs is None else crs)
        ax.set_gid(f"coverage:{i}")
        if titles is not None:
            ax.set_title(str(list(titles)[i]), fontsize=10)
    _colorbar(fig, list(axes[0]), colours, norm, column,
              note=" (one scale for all panels)" if len(items) > 1 else "")
    return fig


def _figure_size(figsize: Any, n_panels: int) -> tuple[float, float]:
    """Return the figure size: 8 x 5.5 inches per panel by default, else two sizes checked."""
    if figsize is None:
        return 8.0 * n_panels, 5.5
    fix = "pass (width, height) in inches, e.g. (16, 5.5)"
    if isinstance(figsize, str) or not isinstance(figsize, Sequence) or len(figsize) != 2:
        raise fail("figsize", figsize, "is not a (width, height) pair", fix)
    width, height = (check_number(v, "figsize", low=0.0, low_open=True, high=200.0, fix=fix)
                     for v in figsize)
    return width, height


def _panels(panels: Any) -> list[tuple[Coverage, str]]:
    """Return ``(coverage, level)`` per panel; refuse anything else."""
    fix = "pass a list of Coverage objects or (coverage, level) pairs"
    if isinstance(panels, (Coverage, str)) or not isinstance(panels, Sequence) or not panels:
        raise fail("panels", panels, "is not a non-empty list of coverage panels", fix)
    items = []
    for panel in panels:
        cov, level = (panel, "strata") if isinstance(panel, Coverage) else (
            tuple(panel) if isinstance(panel, tuple) and len(panel) == 2 else (None, None))
        if not isinstance(cov, Coverage):
            raise fail("panels", panels, f"holds {panel!r:.60}, not a Coverage panel", fix)
        items.append((cov, check_choice(level, "level", ("strata", "report", "cells"))))
    return items


def _coverage_layer(coverage: Coverage, column: str, level: str,
                    cells: Any) -> tuple[gpd.GeoDataFrame, str]:
    """Check the arguments and return the layer to draw and what its regions are called."""
    from spatialdp.geo.partition import Partition

    if not isinstance(coverage, Coverage):
        raise fail("coverage", coverage, f"is a {type(coverage).__name__}, not a Coverage",
                   "pass epoch_coverage(sampler, state)")
    column = check_text(column, "column")
    level = check_choice(level, "level", ("strata", "report", "cells"))
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
    return frame, noun


def _count_norm(columns: list[Any]) -> Normalize:
    """One normalisation from 1 to the largest count of all the layers (at least 2)."""
    from matplotlib.colors import Normalize

    top = max((float(np.nanmax(c.to_numpy(dtype=float))) for c in columns if len(c)),
              default=2.0)
    return Normalize(vmin=1, vmax=max(top, 2.0))


def _colorbar(fig: Any, axes: list[Axes], colours: Any, norm: Normalize, column: str,
              note: str = "") -> None:
    import matplotlib as mpl

    sm = mpl.cm.ScalarMappable(norm=norm, cmap=colours)
    bar = fig.colorbar(sm, ax=axes, shrink=0.5 if len(axes) == 1 else 0.35,
                       location="bottom", pad=0.02, aspect=40,
                       label=column.replace("_", " ") + f" this epoch (>= 1){note}")
    bar.ax.set_gid("colorbar:coverage")


def _draw_coverage(ax: Axes, coverage: Coverage, frame: gpd.GeoDataFrame, noun: str,
                   column: str, level: str, colours: Any, norm: Normalize,
                   projection: Any) -> None:
    """Draw one coverage map on ``ax`` with the colour normalisation ``norm``."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from spatialdp.viz.projection import map_axes, project_layer

    frame = project_layer(frame, projection)
    blind_mask = frame.blind_spot.fillna(False).astype(bool).to_numpy()
    empty_mask = np.zeros(len(frame), dtype=bool)
    if "clients" in frame:
        empty_mask = frame.clients.fillna(0).to_numpy() == 0
    blind_mask = blind_mask & ~empty_mask  # nobody to sample: grey, not a blind spot
    seen = frame[~blind_mask & ~empty_mask]
    blind = frame[blind_mask]
    if len(seen):
        seen.plot(column=column, ax=ax, cmap=colours, norm=norm, edgecolor="#555555",
                  linewidth=0.4)
        ax.collections[-1].set_norm(norm)  # the very object other panels share
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
        groups.boundary.plot(ax=ax, color=_MERGE, linewidth=2.2)
        handles.append(Line2D([], [], color=_MERGE, linewidth=2.2,
                              label=f"merged strata, one outline ({len(groups)} groups)"))
        handles.extend(_number_merges(ax, groups))
    map_axes(ax, frame)
    # Beside the map, never over it: the key names the merged groups by number.
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8,
              framealpha=0.9, borderaxespad=0.3)
    # One denominator, as on the model card: the units with clients (an empty one can be
    # neither reached nor a blind spot).
    populated = int((~empty_mask).sum())
    reached = (f"{populated - int(blind_mask.sum()):,} of {populated:,} {noun} with clients "
               "sampled; ")
    ax.set_title(f"Coverage of epoch {coverage.epoch} by {noun}: {reached}"
                 f"per-client epsilon {coverage.epsilon_per_client:g}", fontsize=10)


def _number_merges(ax: Axes, groups: gpd.GeoDataFrame) -> list[Any]:
    """Put a numbered badge inside each merged group; return the key's entries for them."""
    from matplotlib.lines import Line2D

    entries = []
    for i, (name, geom) in enumerate(zip(groups.index, groups.geometry, strict=True), 1):
        point = geom.representative_point()
        badge = ax.text(point.x, point.y, str(i), ha="center", va="center", fontsize=7,
                        color="black", zorder=5,
                        bbox={"boxstyle": "circle,pad=0.25", "fc": "white", "ec": _MERGE})
        badge.set_gid(f"merge:{name}")
        entries.append(Line2D([], [], linestyle="none", marker=f"${i}$", markersize=7,
                              color="black", label=f"merged: {name}"))
    return entries


def plot_allocation(populations: Any, cohort: int, *,
                    modes: tuple[str, ...] = ("proportional", "sqrt", "equal"),
                    sigma: Any = None, order: list[str] | None = None,
                    ax: Axes | None = None) -> Axes:
    """Draw the fractional seats of each mode side by side per stratum (the seed's chart).

    Bars are the fractional shares, labelled with one decimal; the pool of each
    stratum is marked, so over-drawing a small stratum shows. A pool above the
    top of the axis is written at the top with an arrow instead; the key lists
    only what is drawn.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> ax = plot_allocation({"city": 9_000, "town": 600, "farm": 30}, 80)
    >>> [t.get_text() for t in ax.get_legend().get_texts()]
    ['stratum pool (clients)', 'proportional', 'sqrt-weighted', 'equal']
    >>> [t.get_text() for t in ax.texts if t.get_text().startswith("pool")]
    ['pool 9,000 ↑', 'pool 600 ↑']
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
    ax.set_xticks(x, [str(i) for i in table.index])
    ax.set_ylabel("clients selected per round")
    top = min(float(pops.max()), 1.15 * float(np.nanmax(
        table.xs("share", axis=1, level=1).to_numpy()))) * 1.15
    ax.set_ylim(0, top)
    _mark_pools(ax, x, pops.to_numpy(dtype=float), top)
    ax.set_title(f"Allocations of a cohort of {cohort} clients (fractional shares)")
    ax.legend(fontsize=8)
    return ax


def _mark_pools(ax: Axes, x: Any, pools: Any, top: float) -> None:
    """Mark each stratum's pool: a tick on the chart, or its number at the top if above it."""
    inside = pools <= top
    if inside.any():
        ax.scatter(x[inside], pools[inside], marker="_", s=400, color="black", zorder=3,
                   label="stratum pool (clients)")
    for xi, pool in zip(x[~inside], pools[~inside], strict=True):
        ax.annotate(f"pool {pool:,.0f} ↑", (xi, top), xytext=(0, -2), textcoords="offset points",
                    ha="center", va="top", fontsize=7, color="#333333")


def plot_staircase(table: pd.DataFrame, group: str, *, ax: Axes | None = None) -> Axes:
    """Plot a stratum's eligible pool round by round, per mode, with its seats wanted.

    ``table`` is :func:`~spatialdp.sampling.simulation.simulate_rounds` output.
    The step line is the eligible pool (at x = 0 before the first round, at
    x = r after round r); rounds whose seats went unfilled are marked with a red
    x on that line, at the pool left after the round, so every mark is read on
    the axis it is drawn against.
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
        # On the pool line the axis measures: what was left after the short round.
        ax.scatter(short.round_index + 1, short.eligible_remaining, marker="x",
                   color="#c0392b", zorder=3, gid=f"shortfall:{mode}")
    ax.scatter([], [], marker="x", color="#c0392b",
               label="round with a shortfall (filled < wanted), at the pool left after it")
    ax.set_xlabel("round (1 = first round of the epoch)")
    ax.set_ylabel("clients: eligible pool (steps), seats wanted (dotted)")
    ax.set_title(f"Eligible pool of {group!r}, round by round")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # clear of the lines
    return ax
