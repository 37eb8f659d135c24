"""The sqrt(m) plot: answer error against cells covered, log-log, flat and hierarchical."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from spatialdp._validation import fail

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["plot_error_vs_cells"]


def plot_error_vs_cells(reports: dict[str, pd.DataFrame], *, ax: Axes | None = None,
                        cell_sd: float | None = None, column: str = "rms") -> Axes:
    """Plot measured error (points) and its expectation (lines) against cells covered, log-log.

    Parameters
    ----------
    reports : dict of str to DataFrame
        Label -> :func:`measure_query_error` result (e.g. ``{"flat": ..., "hierarchical": ...}``).
    ax : matplotlib Axes, optional
    cell_sd : float, optional
        Noise sd of one flat cell; draws the ``sqrt(m) * cell_sd`` reference line.
    column : {"rms", "mean_abs_error", "p95_abs_error"}
        Which figure to plot (its ``expected_*`` column is drawn as a line).

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    InvalidInput
        An empty dict, or a report without ``column``.
    """
    import matplotlib.pyplot as plt

    if not isinstance(reports, dict) or not reports:
        raise fail("reports", reports, "is not a non-empty dict of reports",
                   "pass {'flat': measure_query_error(...), ...}")
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4.6))
    lo, hi = np.inf, 0.0
    for (label, rep), colour in zip(reports.items(), ["C0", "C3", "C2", "C4"], strict=False):
        if column not in rep:
            raise fail("column", column, f"is not in the {label!r} report",
                       "pass rms, mean_abs_error or p95_abs_error")
        m = rep["mean_cells"].to_numpy(dtype=float)
        lo, hi = min(lo, float(m.min())), max(hi, float(m.max()))
        ax.plot(m, rep[column], "o", color=colour, label=f"{label}: measured")
        expected: Any = rep.get(f"expected_{column}")
        if expected is not None:
            ax.plot(m, expected, "-", color=colour, alpha=0.7, label=f"{label}: analytic")
    if cell_sd is not None:
        grid = np.geomspace(lo, hi, 50)
        ax.plot(grid, np.sqrt(grid) * cell_sd, "k--", lw=1,
                label=r"$\sqrt{m}\,\sigma$ (flat RMS)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("cells covered by the polygon (m)")
    ax.set_ylabel({"rms": "RMS error (devices)", "mean_abs_error": "mean |error| (devices)",
                   "p95_abs_error": "p95 |error| (devices)"}.get(column, column))
    first = next(iter(reports.values()))
    eps = first.attrs.get("epsilon")
    ax.set_title(f"Answer error vs polygon size (epsilon = {eps:g}, SIMULATION)"
                 if eps is not None else "Answer error vs polygon size (SIMULATION)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return ax
