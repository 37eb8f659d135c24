"""The clip-bound trade-off chart: noise on the published mean against the share clipped."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from spatialdp._validation import check_axes
from spatialdp.exceptions import InvalidInput
from spatialdp.viz._report import _numeric_column, _require_columns

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["plot_clip_tradeoff"]


def plot_clip_tradeoff(table: pd.DataFrame, ax: Axes | None = None) -> Axes:
    """Draw grouped bars of :func:`~spatialdp.federated.clip_tradeoff`: noise vs share clipped.

    Examples
    --------
    >>> from spatialdp.federated import clip_tradeoff
    >>> table = clip_tradeoff(np.arange(1.0, 101.0), epsilon=1.0, cohort=500)
    >>> plot_clip_tradeoff(table).get_title()
    'Where to put the clip bound'
    """
    import matplotlib.pyplot as plt

    columns = ("percentile", "clip_high", "noise_half_width", "share_clipped")
    _require_columns(table, columns, "the table", "pass the table clip_tradeoff returned")
    values = {c: _numeric_column(table, c, "the table") for c in columns}
    if len(table) == 0 or not all(np.isfinite(v).all() for v in values.values()) or not (
            ((values["share_clipped"] >= 0) & (values["share_clipped"] <= 1)).all()
            and (values["noise_half_width"] >= 0).all()):
        raise InvalidInput("the clip trade-off table is empty, holds NaN or infinite values, "
                           "shares outside [0, 1] or negative half-widths; pass the table "
                           "clip_tradeoff returned")
    check_axes(ax)
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    x = np.arange(len(table))
    ax.bar(x - 0.2, values["noise_half_width"], 0.4, label="noise half-width on the mean")
    ax.set_ylabel("noise half-width on the published mean")
    twin = ax.twinx()
    twin.bar(x + 0.2, 100 * values["share_clipped"], 0.4, color="tab:orange",
             label="% of clients clipped")
    twin.set_ylabel("% of clients clipped")
    ax.set_xticks(x, [f"p{p:g}\n{b:.3g}" for p, b in
                      zip(values["percentile"], values["clip_high"], strict=True)])
    ax.set_xlabel("candidate clip bound (percentile, value)")
    ax.set_title("Where to put the clip bound")
    handles, labels = ax.get_legend_handles_labels()
    twin_handles, twin_labels = twin.get_legend_handles_labels()
    ax.legend(handles + twin_handles, labels + twin_labels, loc="upper center")
    return ax

