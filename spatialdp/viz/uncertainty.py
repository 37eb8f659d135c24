"""The ACS-style companion map: the value beside its margin of error.

The American Community Survey publishes a margin-of-error map next to each
estimate map; :func:`plot_moe_companion` does the same for a regional report:
left the value (faded by reliability, as
:func:`~spatialdp.viz.maps.plot_uncertainty_choropleth` draws it), right the
``(1 - alpha)`` margin of error (the ``error_bar`` column) in a sequential
colour map of its own, same projection, same suppressed regions.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from spatialdp._validation import fail
from spatialdp.viz._report import _check_report, _level_text, _meta, _size

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_moe_companion"]


def _keywords(value: Any, name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise fail(name, value, "is not a mapping of keywords",
                   "pass e.g. {'scheme': 'quantiles'} or None")
    return dict(value)


def plot_moe_companion(
    report: Any,
    *,
    cmap: Any = "viridis",
    moe_cmap: Any = "Oranges",
    projection: Any = "auto",
    figsize: tuple[float, float] = (17.0, 6.5),
    value_kwds: Mapping[str, Any] | None = None,
    moe_kwds: Mapping[str, Any] | None = None,
) -> Figure:
    """Draw the value map and its margin-of-error map side by side (ACS style).

    Parameters
    ----------
    report : GeoDataFrame
        A regional report frame.
    cmap, moe_cmap : str or Colormap
        Colour maps of the value and of the margin of error.
    projection : "auto", None or a CRS
        As for :func:`~spatialdp.viz.maps.plot_uncertainty_choropleth`, for both panels.
    figsize : (float, float)
        Size of the figure.
    value_kwds, moe_kwds : dict, optional
        More keywords for each panel's ``plot_uncertainty_choropleth`` (such as
        ``scheme=``, ``robust=``, ``title=``).

    Returns
    -------
    matplotlib.figure.Figure
        Two axes: ``gid`` ``"panel:value"`` and ``"panel:moe"``.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import pandas as pd
    >>> from spatialdp.datasets import us_states_partition
    >>> part = us_states_partition()
    >>> table = pd.DataFrame({"value": 1.0, "error_bar": 0.3, "cohort": 400,
    ...                       "reliability": "high", "suppressed": False},
    ...                      index=part.region_ids)
    >>> fig = plot_moe_companion(part.join(table))
    >>> [ax.get_gid() for ax in fig.axes if ax.get_gid()]
    ['panel:value', 'panel:moe']
    """
    import matplotlib.pyplot as plt

    from spatialdp.viz.maps import plot_uncertainty_choropleth

    frame = _check_report(report)
    size = _size(figsize, "figsize")
    left = _keywords(value_kwds, "value_kwds")
    right = _keywords(moe_kwds, "moe_kwds")
    for name, kwds in (("value_kwds", left), ("moe_kwds", right)):
        taken = sorted({"ax", "column", "cmap", "projection"} & set(kwds))
        if taken:
            raise fail(name, kwds, f"sets {taken}, which plot_moe_companion sets itself",
                       "pass cmap=/moe_cmap=/projection= to plot_moe_companion instead")
        try:
            inspect.signature(plot_uncertainty_choropleth).bind(frame, **kwds)
        except TypeError as err:
            raise fail(name, kwds, f"is refused by plot_uncertainty_choropleth ({err})",
                       "pass its keywords, e.g. {'scheme': 'quantiles'}") from None
    if "show_reliability" in right:
        raise fail("moe_kwds", right, "sets show_reliability",
                   "the margin of error is drawn without fading")
    fig, (ax_value, ax_moe) = plt.subplots(1, 2, figsize=size)
    plot_uncertainty_choropleth(frame, "value", ax=ax_value, cmap=cmap,
                                projection=projection, **left)
    meta = _meta(frame)
    level = _level_text(meta)
    right.setdefault("title", f"its margin of error{f' ({level})' if level else ''}\n"
                     "± half-width of the interval: wider means less certain")
    plot_uncertainty_choropleth(frame, "error_bar", ax=ax_moe, cmap=moe_cmap,
                                projection=projection, show_reliability=False, **right)
    ax_value.set_gid("panel:value")
    ax_moe.set_gid("panel:moe")
    return fig
