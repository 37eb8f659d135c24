"""Small multiples of a regional metric over rounds, with the error bar first.

A federated metric moves every round by about its error bar; a chart that
draws a crisp line without the bar gets over-read. Each panel here draws the
error band (value ± error bar) first and the line on top of it, labels the
cohort size, and leaves a gap, shaded grey, at every suppressed round.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from spatialdp._validation import check_flag, check_integer, fail
from spatialdp.exceptions import InvalidInput, PartitionMismatch
from spatialdp.viz._report import (
    MAX_INCHES,
    _epsilon_text,
    _labelled,
    _level_text,
    _meta,
    _numeric_column,
    _optional_text,
    _require_columns,
    _size,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["HISTORY_COLUMNS", "cohort_label", "plot_region_timeseries"]

#: Columns a history (long table, one row per region and round) must have.
HISTORY_COLUMNS: tuple[str, ...] = (
    "region_id", "round_index", "value", "error_bar", "cohort", "suppressed",
)

_BAND = "#9ecae1"
_LINE = "#08519c"
_SUPPRESSED = "#e6e6e6"
_ALERT = "#d62728"
_MAX_PANELS = 60


def cohort_label(cohort: pd.Series | Sequence[float]) -> str:
    """Return the cohort-size label of a panel: ``n=1,234``, or the range over the window.

    Examples
    --------
    >>> cohort_label([1234, 1234])
    'n=1,234'
    >>> cohort_label([812, 1540, 990])
    'n=812–1,540'
    >>> cohort_label([])
    'n=–'
    """
    if isinstance(cohort, (str, bytes, pd.DataFrame)) or np.ndim(cohort) > 1:
        raise fail("cohort", cohort, "is not a sequence of cohort sizes",
                   "pass the cohorts of the window, e.g. history.cohort")
    series = cohort if isinstance(cohort, pd.Series) else pd.Series(
        np.atleast_1d(np.asarray(cohort, dtype=object)), dtype=object)
    values = pd.Series(_numeric_column(series.to_frame("cohort"), "cohort", "the")).dropna()
    if (values < 0).any() or not np.isfinite(values).all() or (values > 1e15).any():
        raise fail("cohort", cohort, "holds negative, infinite or absurd cohort sizes",
                   "pass client counts (NaN where suppressed)")
    if values.empty:
        return "n=–"
    lo, hi = int(values.min()), int(values.max())
    return f"n={lo:,}" if lo == hi else f"n={lo:,}–{hi:,}"


def _check_history(history: Any) -> pd.DataFrame:
    fix = ("pass the long history table with one row per region and round "
           f"(columns {list(HISTORY_COLUMNS)})")
    _require_columns(history, HISTORY_COLUMNS, "the history", fix)
    if len(history) == 0:
        raise InvalidInput("the history has 0 rows; there is nothing to draw")
    frame = history.loc[:, list(HISTORY_COLUMNS)].copy()
    frame["region_id"] = frame["region_id"].astype(str)
    for col in ("round_index", "value", "error_bar", "cohort"):
        frame[col] = _numeric_column(frame, col, "history")
        if np.isinf(frame[col]).any():
            raise InvalidInput(f"history column {col!r} holds infinite values; give finite "
                               "numbers (NaN where suppressed)")
    if frame["round_index"].isna().any():
        raise InvalidInput(
            f"{int(frame['round_index'].isna().sum())} history rows have no round_index; every row "
            "needs the round it was published in"
        )
    flags = frame["suppressed"]
    known = flags[flags.notna()]
    if not (pd.api.types.is_bool_dtype(known.dtype) or known.isin([0, 1]).all()):
        raise InvalidInput("history column 'suppressed' is not True/False; the report schema "
                           "flags suppressed rounds with booleans")
    frame["suppressed"] = flags.notna().to_numpy() & (flags.to_numpy(dtype=object) == 1)
    if (frame["error_bar"] < 0).any():
        raise InvalidInput("history column 'error_bar' has negative values; an error bar is a "
                           "half-width (>= 0)")
    dup = frame.duplicated(["region_id", "round_index"])
    if dup.any():
        first = frame.loc[dup, ["region_id", "round_index"]].iloc[0]
        raise InvalidInput(
            f"{int(dup.sum())} duplicate (region_id, round_index) rows in the history (first: "
            f"{first['region_id']!r}, round {first['round_index']:g}); keep one row per region "
            "and round"
        )
    _one_baseline(history)
    # Suppressed rounds publish nothing: never draw a value there, whatever it holds.
    frame.loc[frame["suppressed"], ["value", "error_bar"]] = np.nan
    return frame.sort_values(["region_id", "round_index"], kind="stable")


def _one_baseline(history: pd.DataFrame) -> None:
    """Refuse a history that mixes partition or spec versions (a new baseline each)."""
    for key in ("partition_version", "metric"):
        if key in history.columns:
            versions = pd.unique(history[key].dropna().astype(str))
            if len(versions) > 1:
                raise PartitionMismatch(
                    f"the history mixes {key} values {list(versions)[:3]}; a new version "
                    "starts a new baseline: draw spatialdp.federated.monitor."
                    "latest_baseline(history) or one version at a time")


def _alerts_for(alert_rounds: Any, region: str) -> list[float]:
    if alert_rounds is None:
        return []
    if isinstance(alert_rounds, Mapping):
        rounds = alert_rounds.get(region, ())
    else:
        rounds = alert_rounds
    fix = "pass round numbers, e.g. [3, 7] or {'CO': [3]}"
    if isinstance(rounds, (str, bytes)):
        raise fail("alert_rounds", alert_rounds, "holds text, not rounds", fix)
    try:
        raw = np.asarray(rounds)
        values = np.atleast_1d(raw.astype(np.float64)).ravel()
    except (TypeError, ValueError):
        raise fail("alert_rounds", alert_rounds, "does not hold round numbers", fix) from None
    if raw.dtype.kind not in "iuf" or not np.isfinite(values).all():
        raise fail("alert_rounds", alert_rounds, "holds values that are not finite rounds", fix)
    return [float(r) for r in values]


def plot_region_timeseries(
    history: pd.DataFrame,
    regions: Sequence[Any] | None = None,
    *,
    alert_rounds: Sequence[float] | Mapping[Any, Sequence[float]] | None = None,
    ncols: int = 3,
    sharey: bool = True,
    panel_size: tuple[float, float] = (3.2, 2.0),
    fig: Figure | None = None,
    title: str | None = None,
    legend: bool = True,
) -> Figure:
    """One small panel per region: error band first, value line second, cohort label.

    In every panel the band ``value ± error_bar`` is drawn first
    (``fill_between``) and the value line on top of it; suppressed rounds are
    gaps in both, shaded light grey so a gap reads as "suppressed" and not as
    "no data"; the cohort size (``n=1,234``, or its range over the window) and
    the number of suppressed rounds are written in the panel's corner.

    Parameters
    ----------
    history : DataFrame
        Long table with columns ``region_id``, ``round``, ``value``,
        ``error_bar``, ``cohort``, ``suppressed`` (one row per region and round).
        ``attrs["spatialdp"]`` (``metric``, ``alpha``, ``epsilon``) makes the title.
    regions : sequence, optional
        Regions to draw, in panel order; default every region of the history
        (sorted), at most 60.
    alert_rounds : sequence or mapping, optional
        Rounds to mark with an alert (a red dashed line and triangle): the
        same rounds on every panel, or ``{region_id: rounds}``.
    ncols : int
        Panels per row.
    sharey : bool
        One y scale for all panels (default), so that wide bands look wide.
    panel_size : (float, float)
        Width and height of one panel in inches (for a new figure).
    fig : Figure, optional
        An empty figure to draw in; a new one by default.
    title : str, optional
        Figure title; default from ``attrs["spatialdp"]``. A simulation's
        history (``attrs["spatialdp"]["accounting"] == "simulation"``) is
        titled ``[SIMULATION] ...``, the caller's own title too.
    legend : bool
        A figure legend (band, value, suppressed, alert) above the panels.

    Returns
    -------
    matplotlib.figure.Figure
        One Axes per region (``ax.get_gid() == "region:<id>"``); in each, the band
        is the ``PolyCollection`` with gid ``"band"`` and the line the ``Line2D``
        with gid ``"value"``; the cohort label is the text with gid ``"cohort"``.

    Raises
    ------
    InvalidInput
        Missing columns, no rows, duplicate (region, round) rows, unknown regions.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> history = pd.DataFrame({
    ...     "region_id": ["CA"] * 4 + ["WY"] * 4, "round_index": [1, 2, 3, 4] * 2,
    ...     "value": [0.42, 0.40, 0.43, 0.41, 0.5, None, 0.3, 0.45],
    ...     "error_bar": [0.01] * 4 + [0.2, None, 0.25, 0.2],
    ...     "cohort": [5200, 5150, 5230, 5190, 14, 6, 12, 15],
    ...     "suppressed": [False] * 5 + [True, False, False]})
    >>> fig = plot_region_timeseries(history, alert_rounds={"CA": [3]})
    >>> [t.get_text() for ax in fig.axes for t in ax.texts if t.get_gid() == "cohort"]
    ['n=5,150–5,230', 'n=12–15 · 1 suppressed']
    >>> plt.close(fig)
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    frame = _check_history(history)
    sharey = check_flag(sharey, "sharey")
    legend = check_flag(legend, "legend")
    panel_size = _size(panel_size, "panel_size")
    title = _optional_text(title, "title")
    cols_wanted = check_integer(ncols, "ncols", low=1, high=_MAX_PANELS,
                                fix=f"pass a number of panels per row, 1 to {_MAX_PANELS}")
    if fig is not None:
        from matplotlib.figure import Figure as MplFigure

        if not isinstance(fig, MplFigure):
            raise fail("fig", fig, f"is a {type(fig).__name__}, not a matplotlib Figure",
                       "pass an empty figure (plt.figure()) or None")
    if isinstance(alert_rounds, Mapping):
        for key in alert_rounds:
            _alerts_for(alert_rounds, key)
    else:
        _alerts_for(alert_rounds, "")
    known = list(dict.fromkeys(frame["region_id"]))
    if regions is None:
        chosen = sorted(known)
        if len(chosen) > _MAX_PANELS:
            raise InvalidInput(
                f"the history has {len(chosen)} regions, more than {_MAX_PANELS} panels; "
                "pick the regions to draw with regions=[...]"
            )
    else:
        if isinstance(regions, (bytes, Mapping)) or not isinstance(regions, (str, Iterable)):
            raise fail("regions", regions, "is not a list of region ids",
                       "pass e.g. ['CO', 'UT'], one id, or None for all")
        chosen = [str(r) for r in (regions if not isinstance(regions, str) else [regions])]
        unknown = [r for r in chosen if r not in set(known)]
        if unknown:
            raise InvalidInput(
                f"regions {unknown[:5]} are not in the history (it has {len(known)} "
                f"regions, e.g. {known[:5]}); pick regions from history.region_id"
            )
        if not chosen:
            raise InvalidInput("regions=[] selects no region; give at least one")
    if len(chosen) > _MAX_PANELS:
        raise InvalidInput(f"regions selects {len(chosen)} panels, more than {_MAX_PANELS}; "
                           "draw fewer regions at a time")

    n = len(chosen)
    cols = min(cols_wanted, n)
    rows = math.ceil(n / cols)
    width, height = panel_size[0] * cols, panel_size[1] * rows + 0.8
    if fig is None and max(width, height) > MAX_INCHES:
        raise InvalidInput(
            f"{rows} x {cols} panels of {panel_size[0]:g} x {panel_size[1]:g} inches make a "
            f"{width:g} x {height:g} inch figure, above {MAX_INCHES:g} inches a side; pass a "
            "smaller panel_size or fewer regions")
    if fig is None:
        fig = plt.figure(figsize=(width, height), layout="constrained")
    elif fig.axes:
        raise InvalidInput(
            f"the figure already has {len(fig.axes)} axes; pass an empty figure "
            "(plt.figure()) or none"
        )
    elif fig.get_layout_engine() is None:
        fig.set_layout_engine("constrained")
    grid = fig.subplots(rows, cols, sharex=True, sharey=sharey, squeeze=False)

    meta = _meta(history)
    level = _level_text(meta)
    band_label = f"value ± {level} error bar" if level else "value ± error bar"
    lo_all, hi_all = frame["round_index"].min(), frame["round_index"].max()
    any_suppressed = any_alert = False

    for k, region in enumerate(chosen):
        ax: Axes = grid[k // cols][k % cols]
        ax.set_gid(f"region:{region}")
        part = frame[frame["region_id"] == region]
        x = part["round_index"].to_numpy()
        y = part["value"].to_numpy()
        eb = part["error_bar"].to_numpy()
        supp = part["suppressed"].to_numpy()

        # 1. the band first ...
        band = ax.fill_between(x, y - eb, y + eb, color=_BAND, alpha=0.6, linewidth=0,
                               zorder=1, label=band_label)
        band.set_gid("band")
        # A published round between two gaps has no width to fill: a bar instead.
        ok = np.isfinite(y) & np.isfinite(eb)
        before = np.r_[False, ok[:-1]]
        after = np.r_[ok[1:], False]
        alone = ok & ~before & ~after
        if alone.any():
            bars = ax.vlines(x[alone], (y - eb)[alone], (y + eb)[alone], color=_BAND,
                             alpha=0.6, linewidth=5, zorder=1)
            bars.set_gid("band")
        # 2. ... then the line (NaN makes the gaps).
        (line,) = ax.plot(x, y, color=_LINE, linewidth=1.4, marker="o", markersize=2.2,
                          zorder=2, label="value")
        line.set_gid("value")
        # Suppressed rounds: grey spans behind everything.
        for r in x[supp]:
            span = ax.axvspan(r - 0.5, r + 0.5, color=_SUPPRESSED, linewidth=0, zorder=0)
            span.set_gid("suppressed")
            any_suppressed = True
        for r in _alerts_for(alert_rounds, region):
            alert = ax.axvline(r, color=_ALERT, linewidth=0.9, linestyle="--", zorder=3)
            alert.set_gid("alert")
            ax.plot([r], [1.0], marker="v", color=_ALERT, markersize=5, clip_on=False,
                    transform=ax.get_xaxis_transform(), zorder=4, gid="alert-marker")
            any_alert = True

        text = cohort_label(part.loc[~part["suppressed"], "cohort"])
        if supp.any():
            text += f" · {int(supp.sum())} suppressed"
        label = ax.text(0.02, 0.96, text, transform=ax.transAxes, ha="left", va="top",
                        fontsize=7.5, color="#333333", zorder=5,
                        bbox={"boxstyle": "round,pad=0.2", "facecolor": "white",
                              "edgecolor": "none", "alpha": 0.8})
        label.set_gid("cohort")
        ax.set_title(region, fontsize=9, loc="left", pad=3)
        ax.set_xlim(lo_all - 0.6, hi_all + 0.6)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True, nbins=6))
        ax.tick_params(labelsize=7.5)
        ax.grid(axis="y", color="#eeeeee", linewidth=0.6, zorder=-1)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        if k // cols == rows - 1 or k + cols >= n:
            ax.set_xlabel("round", fontsize=8)
            ax.tick_params(labelbottom=True)

    for k in range(n, rows * cols):
        grid[k // cols][k % cols].remove()

    # Headroom so the corner label never sits on the band.
    if sharey:
        axes0 = grid[0][0]
        low, high = axes0.get_ylim()
        axes0.set_ylim(low, high + 0.18 * (high - low))
    else:
        for k in range(n):
            ax_k = grid[k // cols][k % cols]
            low, high = ax_k.get_ylim()
            ax_k.set_ylim(low, high + 0.18 * (high - low))

    if title is None:
        bits = [str(meta.get("metric", "value")) + " by region"]
        if _epsilon_text(meta):
            bits.append(_epsilon_text(meta))
        title = " · ".join(bits)
    fig.suptitle(_labelled(title, meta), fontsize=11, x=0.01, ha="left")
    if legend:
        handles: list[Any] = [
            Patch(facecolor=_BAND, alpha=0.6, label=band_label),
            Line2D([], [], color=_LINE, linewidth=1.4, marker="o", markersize=2.2,
                   label="value"),
        ]
        if any_suppressed:
            handles.append(Patch(facecolor=_SUPPRESSED, label="suppressed round (gap)"))
        if any_alert:
            handles.append(Line2D([], [], color=_ALERT, linestyle="--", marker="v",
                                  markersize=5, label="alert"))
        fig.legend(handles=handles, loc="outside lower center", ncols=len(handles),
                   fontsize=8, frameon=False)
    return fig
