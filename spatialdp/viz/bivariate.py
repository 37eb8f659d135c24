"""A value × reliability bivariate choropleth: a 3 × 3 palette, read off a grid key.

The value is classed (quantiles by default, any scheme of
:func:`~spatialdp.viz.classify.classify_report`), the reliability is the ACS
class (high, medium, low); each region takes the colour of its cell in a
``k × 3`` palette whose colour runs with the value and whose saturation drains
to grey as reliability drops. Where the opacity map
(:func:`~spatialdp.viz.maps.plot_uncertainty_choropleth`) fades toward white,
this one greys out, so an unreliable value never reads as a light one; the key
is a grid (value across, reliability down) with each cell's region count.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from spatialdp._validation import check_axes, check_cmap, check_count, check_flag
from spatialdp.viz._report import (
    _check_report,
    _column_name,
    _meta,
    _optional_text,
    _reliability,
    _size,
    _suppressed,
    _title,
)
from spatialdp.viz.patches import add_polygon_patch

if TYPE_CHECKING:
    from matplotlib.axes import Axes

__all__ = ["bivariate_palette", "plot_bivariate"]

_RELIABILITY_ROWS = ("high", "medium", "low")
#: Share of grey mixed into each reliability row of the palette.
GREY_MIX = {"high": 0.0, "medium": 0.5, "low": 0.82}
_GREY = np.array([0.62, 0.62, 0.62])


def bivariate_palette(k: int = 3, cmap: Any = "viridis") -> NDArray[np.float64]:
    """Return the ``3 × k × 4`` palette: reliability rows (high, medium, low) × value classes.

    Examples
    --------
    >>> bivariate_palette(3).shape
    (3, 3, 4)
    """
    k = check_count(k, "k", low=2, high=9)
    base = check_cmap(cmap)(np.linspace(0.05, 0.95, k))[:, :3]
    rows = [np.column_stack([(1 - GREY_MIX[r]) * base + GREY_MIX[r] * _GREY, np.ones(k)])
            for r in _RELIABILITY_ROWS]
    return np.stack(rows)


def plot_bivariate(
    report: Any,
    *,
    scheme: str = "quantiles",
    k: int = 3,
    cmap: Any = "viridis",
    classification_kwds: Mapping[str, Any] | None = None,
    ax: Axes | None = None,
    projection: Any = "auto",
    legend: bool = True,
    title: str | None = None,
    figsize: tuple[float, float] = (10.0, 6.5),
) -> Axes:
    """Draw a value × reliability bivariate map (value classes across, reliability down).

    Parameters
    ----------
    report : GeoDataFrame
        A regional report frame.
    scheme, k, classification_kwds
        How the value is classed (:func:`~spatialdp.viz.classify.classify_report`).
    cmap : str or Colormap
        Colours of the value classes (reliable row); the other rows grey them out.
    ax, projection, legend, title, figsize
        As for :func:`~spatialdp.viz.maps.plot_uncertainty_choropleth`.

    Returns
    -------
    matplotlib.axes.Axes
        One patch per region, ``gid`` ``"<reliability>:<class>:<region_id>"``; the key
        is the child axes ``gid="legend:bivariate"``.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import pandas as pd
    >>> from spatialdp.datasets import us_states_partition
    >>> part = us_states_partition()
    >>> table = pd.DataFrame({"value": np.linspace(1, 2, 48), "error_bar": 0.1,
    ...                       "noise_std": 0.05, "cohort": 500, "reliability": "high",
    ...                       "suppressed": False}, index=part.region_ids)
    >>> ax = plot_bivariate(part.join(table))
    >>> [c.get_gid() for c in ax.child_axes]
    ['legend:bivariate']
    """
    from matplotlib.patches import Patch, PathPatch

    from spatialdp.viz.classify import classify_report
    from spatialdp.viz.maps import _SUPPRESSED_STYLE, _region_path
    from spatialdp.viz.projection import (
        _name_crs,
        _new_map_axes,
        _project,
        _resolve_crs,
        _set_map_aspect,
    )

    frame = _check_report(report)
    check_axes(ax)
    size = _size(figsize, "figsize")
    legend = check_flag(legend, "legend")
    title = _optional_text(title, "title")
    classes = classify_report(frame, "value", scheme, k, classification_kwds)
    palette = bivariate_palette(classes.k, cmap)
    reliability = _reliability(frame)
    suppressed = _suppressed(frame)
    row = np.array([_RELIABILITY_ROWS.index(r) if r in ("high", "medium") else 2
                    for r in reliability])
    crs = _resolve_crs(frame, projection)
    drawn = _project(frame, crs)
    if ax is None:
        ax = _new_map_axes(size)
    style = {k_: v for k_, v in _SUPPRESSED_STYLE.items() if k_ != "label"}
    counts = np.zeros((3, classes.k), dtype=np.int64)
    for i, geom in enumerate(drawn.geometry.values):
        path = _region_path(geom)
        if path is None:
            continue
        rid = drawn.index[i]
        cls = int(classes.yb[i])
        if suppressed[i] or cls < 0:
            patch = PathPatch(path, **style, zorder=1.5)
            patch.set_gid(f"suppressed:{rid}")
        else:
            counts[row[i], cls] += 1
            patch = PathPatch(path, facecolor=palette[row[i], cls], edgecolor="white",
                              linewidth=0.5, zorder=1)
            patch.set_gid(f"{_RELIABILITY_ROWS[row[i]]}:{cls}:{rid}")
        add_polygon_patch(ax, patch)
    ax.margins(0.02)
    ax.autoscale_view()
    _set_map_aspect(ax, drawn)
    _name_crs(ax, drawn.crs)
    meta = _meta(frame)
    ax.set_title(title if title is not None else
                 _title(meta, "value", int(suppressed.sum()), len(frame))
                 + " · colour: value, grey: unreliable", fontsize=12, loc="left")
    if legend:
        key = ax.inset_axes((1.12, 0.5, 0.05 * classes.k, 0.3))
        key.set_gid("legend:bivariate")
        key.imshow(palette, aspect="auto", interpolation="nearest")
        for r in range(3):
            for c in range(classes.k):
                light = float(palette[r, c, :3] @ np.array([0.299, 0.587, 0.114])) > 0.55
                key.text(c, r, str(counts[r, c]), ha="center", va="center", fontsize=7,
                         color="#202020" if light else "white")
        labels = classes.labels("{:.3g}")
        # Vertical labels under their column: nothing reaches back over the map.
        key.set_xticks(range(classes.k), labels, rotation=90, fontsize=7)
        key.set_yticks(range(3), ["high", "medium", "low"], fontsize=7.5)
        key.set_xlabel(f"{_column_name(meta, 'value')} →", fontsize=7.5, loc="left")
        key.set_ylabel("reliability ↓", fontsize=7.5)
        key.tick_params(length=0)
        if suppressed.any():
            n = int(suppressed.sum())
            ax.legend(handles=[Patch(**style, label=f"suppressed ({n})")], loc="upper left",
                      bbox_to_anchor=(1.1, 0.2), frameon=False, fontsize=8)
    return ax
