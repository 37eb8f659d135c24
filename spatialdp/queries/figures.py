"""The sqrt(m) plot: answer error against cells covered, log-log, flat and hierarchical.

A figure drawn from an internal table (measured against the truth grid) says
INTERNAL in its title; ``publishable=True`` refuses one, for figures that will
be published.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from spatialdp._validation import check_flag, fail

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["flat_cell_sd", "plot_error_vs_cells"]


def _draw_measured(ax: Axes, rep: pd.DataFrame, m: Any, column: str, colour: str,
                   label: str) -> None:
    """Measured points with +-2 Monte Carlo standard errors (when the table has them)."""
    y = rep[column].to_numpy(dtype=float)
    se: Any = rep.get(f"{column}_se")
    if se is None:
        ax.plot(m, y, "o", color=colour, zorder=5, label=f"{label}: measured")
        return
    ax.errorbar(m, y, yerr=2 * np.nan_to_num(se.to_numpy(dtype=float)), fmt="o",
                color=colour, ms=5, capsize=3, elinewidth=1, zorder=5,
                label=f"{label}: measured ± 2 Monte Carlo SE")


def flat_cell_sd(reports: dict[str, pd.DataFrame]) -> float:
    """Return the noise sd of one flat cell of the grid the reports were measured on.

    Read from the tables' own settings (the flat scale ``sensitivity / epsilon``
    every method records), for the ``sqrt(m)`` reference line.

    Examples
    --------
    >>> table = pd.DataFrame()
    >>> table.attrs["scale"] = 1.0        # discrete Laplace of scale 1
    >>> round(flat_cell_sd({"flat": table}), 3)
    1.357
    """
    from spatialdp.privacy.accuracy import noise_std

    scales = {float(r.attrs["scale"]) for r in reports.values()}
    if len(scales) != 1:
        raise fail("reports", sorted(scales), "were measured at different flat scales",
                   "plot tables of one grid and one epsilon together")
    return float(noise_std("discrete_laplace", scales.pop()))


def plot_error_vs_cells(reports: dict[str, pd.DataFrame], *, ax: Axes | None = None,
                        cell_sd: float | None = None, column: str = "rms",
                        publishable: bool = False) -> Axes:
    """Plot measured error (points) and its expectation (lines) against cells covered, log-log.

    Measured points carry +-2 Monte Carlo standard errors (the table's
    ``<column>_se``, from the spread over its simulated draws). The analytic
    lines are wide and pale and the ``sqrt(m)`` reference is a thin dashed line
    on top, so a flat analytic line that equals the reference stays visible
    (the key says when they coincide).

    Parameters
    ----------
    reports : dict of str to DataFrame
        Label -> :func:`measure_query_error` result (e.g. ``{"flat": ..., "hierarchical": ...}``).
    ax : matplotlib Axes, optional
    cell_sd : float, optional
        Noise sd of one flat cell; draws the ``sqrt(m) * cell_sd`` reference line.
    column : {"rms", "mean_abs_error", "p95_abs_error"}
        Which figure to plot (its ``expected_*`` column is drawn as a line).
    publishable : bool, default False
        The figure will be published: refuse any internal report (measured
        against the truth grid, see :func:`~spatialdp.queries.require_publishable`).
        Without it an internal report is drawn with INTERNAL in the title.

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    InvalidInput
        An empty dict, a report without ``column``, or (``publishable=True``)
        an internal report.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> internal = pd.DataFrame({"mean_cells": [1.0, 16.0], "rms": [1.4, 5.4]})
    >>> internal.attrs.update(reference="truth", internal=True, epsilon=1.0,
    ...                       title="INTERNAL: query error measured against the truth grid")
    >>> plot_error_vs_cells({"flat": internal}).get_title()[:8]
    'INTERNAL'
    >>> plot_error_vs_cells({"flat": internal}, publishable=True)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: reports['flat']='INTERNAL: query error measured ...
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    from spatialdp.queries.measure import _publication_problem, require_publishable

    if not isinstance(reports, dict) or not reports:
        raise fail("reports", reports, "is not a non-empty dict of reports",
                   "pass {'flat': measure_query_error(...), ...}")
    if check_flag(publishable, "publishable"):
        for label, rep in reports.items():
            require_publishable(rep, f"reports[{label!r}]")
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4.6))
    lo, hi = np.inf, 0.0
    analytic: list[tuple[str, Any, Any]] = []
    for (label, rep), colour in zip(reports.items(), ["C0", "C3", "C2", "C4"], strict=False):
        if column not in rep:
            raise fail("column", column, f"is not in the {label!r} report",
                       "pass rms, mean_abs_error or p95_abs_error")
        m = rep["mean_cells"].to_numpy(dtype=float)
        lo, hi = min(lo, float(m.min())), max(hi, float(m.max()))
        _draw_measured(ax, rep, m, column, colour, label)
        expected: Any = rep.get(f"expected_{column}")
        if expected is not None:
            # Under the reference line when they agree: wide and pale, so both show.
            ax.plot(m, expected, "-", color=colour, lw=3.5, alpha=0.45, zorder=2,
                    solid_capstyle="round", label=f"{label}: analytic")
            analytic.append((label, m, np.asarray(expected, dtype=float)))
    if cell_sd is not None:
        grid = np.geomspace(lo, hi, 50)
        same = [label for label, m, e in analytic if column == "rms"
                and np.allclose(e, np.sqrt(m) * cell_sd, rtol=0.01)]
        note = f" = {' and '.join(same)}: analytic" if same else ""
        ax.plot(grid, np.sqrt(grid) * cell_sd, color="black", lw=1, ls=(0, (4, 3)), zorder=4,
                label=r"$\sqrt{m}\,\sigma$ (flat RMS)" + note)
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain = FuncFormatter(lambda v, _pos: f"{v:g}")  # 30, not 3 x 10^1
    some = FuncFormatter(lambda v, _pos: f"{v:g}" if f"{v:.0e}"[0] in "25" else "")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(some if axis is ax.yaxis else NullFormatter())
    ax.set_xlabel("cells covered by the polygon (m)")
    ax.set_ylabel({"rms": "RMS error (devices)", "mean_abs_error": "mean |error| (devices)",
                   "p95_abs_error": "p95 |error| (devices)"}.get(column, column))
    first = next(iter(reports.values()))
    eps = first.attrs.get("epsilon")
    internal = any(_publication_problem(r.attrs) is not None for r in reports.values())
    unaccounted = any(r.attrs.get("reference_accounting") == "unaccounted"
                      for r in reports.values())
    setting = "" if eps is None else f"epsilon = {eps:g}, "
    ax.set_title("INTERNAL: answer error vs polygon size (" + setting
                 + "simulated releases vs the truth grid; never publish)" if internal
                 else f"Answer error vs polygon size ({setting}simulated releases vs the "
                      "released grid)" + (" [UNACCOUNTED]" if unaccounted else ""))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return ax
