"""The key of the uncertainty map: value across, reliability down, and the missing key.

The low-reliability class is marked by a dotted fill (:func:`_dot`) on the map
and in the key alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np
from numpy.typing import NDArray

from spatialdp.viz._report import RELIABILITY_ALPHA, _column_name

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.collections import Collection
    from matplotlib.colors import Colormap
    from matplotlib.patches import Patch
    from matplotlib.transforms import Affine2DBase

_A = TypeVar("_A", bound="Collection | Patch")

_RELIABILITY_LABELS = {
    "high": "high  (CV < 0.12)",
    "medium": "medium  (0.12–0.40)",
    "low": "low  (CV > 0.40)",
}
_LOW_HATCH = "...."


def _dot(artist: _A) -> _A:
    """Return the dotted fill that marks the low-reliability class (map and key alike)."""
    artist.set_hatch(_LOW_HATCH)
    artist.set_hatchcolor((0.25, 0.25, 0.25, 0.55))
    artist.set_hatch_linewidth(0.6)
    return artist


def _extend(values: NDArray[np.float64], norm: Any) -> str:
    below = bool(values.size and np.nanmin(values) < norm.vmin)
    above = bool(values.size and np.nanmax(values) > norm.vmax)
    return {(False, False): "neither", (True, False): "min",
            (False, True): "max", (True, True): "both"}[(below, above)]


def _draw_legend(
    ax: Axes,
    cmap: Colormap,
    norm: Any,
    column: str,
    meta: Mapping[str, Any],
    show_reliability: bool,
    extend: str,
    handles: list[Patch],
) -> None:
    """Value × reliability key below the map, plus the suppressed / no-data key."""
    from matplotlib.patches import Polygon, Rectangle
    from matplotlib.transforms import ScaledTranslation, blended_transform_factory

    fig = ax.figure
    # x in axes fraction, y in inches from the bottom of the axes: the key keeps its
    # size whatever the axes' size, and clears the tick labels of a lon/lat map.
    axes_corner = ScaledTranslation(0, 0, cast("Affine2DBase", ax.transAxes))
    inches_below = fig.dpi_scale_trans + axes_corner
    where = blended_transform_factory(ax.transAxes, inches_below)
    rows = ["high", "medium", "low"] if show_reliability else ["all"]
    height = 0.16 * len(rows)
    top = -0.45 if ax.axison else -0.3
    key = ax.inset_axes((0.32, top - height, 0.38, height), transform=where)
    key.set_gid("legend:value-reliability")

    span = norm.vmax - norm.vmin
    xs = np.linspace(norm.vmin, norm.vmax, 256)
    image = np.ones((len(rows), xs.size, 4))
    for r, name in enumerate(rows):
        image[r] = cmap(norm(xs))
        image[r, :, 3] = RELIABILITY_ALPHA.get(name, 1.0)
    key.imshow(image, aspect="auto", extent=(norm.vmin, norm.vmax, len(rows), 0),
               interpolation="nearest")
    # Colour-bar style end triangles when values lie beyond the colour range.
    tip = 0.035 * span
    for r, name in enumerate(rows):
        for side, edge, sign in (("min", norm.vmin, -1), ("max", norm.vmax, 1)):
            if extend not in (side, "both"):
                continue
            colour = list(cmap(0.0 if side == "min" else 1.0))
            colour[3] = RELIABILITY_ALPHA.get(name, 1.0)
            key.add_patch(Polygon([(edge, r), (edge + sign * tip, r + 0.5), (edge, r + 1)],
                                  closed=True, facecolor=colour, edgecolor="none",
                                  clip_on=False))
    key.set_xlim(norm.vmin, norm.vmax)
    if show_reliability:
        low_row = Rectangle((norm.vmin, 2), span, 1, fill=False, linewidth=0, zorder=2)
        key.add_patch(_dot(low_row))
        key.set_yticks([0.5, 1.5, 2.5], [_RELIABILITY_LABELS[n] for n in rows], fontsize=7.5)
    else:
        key.set_yticks([])
    from matplotlib.ticker import MaxNLocator

    key.xaxis.set_major_locator(MaxNLocator(nbins=5))  # labels that never collide
    key.tick_params(axis="x", labelsize=7.5, length=2, pad=1.5)
    key.tick_params(axis="y", length=0, pad=13 if extend in ("min", "both") else 3)
    for spine in key.spines.values():
        spine.set_linewidth(0.5)
    name = _column_name(meta, column)
    key.set_title(f"{name}, faded by reliability" if show_reliability else name,
                  fontsize=8.5, loc="left", pad=3)

    # Suppressed / no data: a patch legend to the right of the key.
    if handles:
        box = ax.legend(handles=handles, loc="upper left", frameon=False, fontsize=8,
                        bbox_to_anchor=(0.74, top - 0.02), bbox_transform=where,
                        handlelength=2.2, handleheight=1.4, borderaxespad=0)
        box.set_gid("legend:missing")



def _draw_class_legend(
    ax: Axes,
    classes: Any,
    colours: NDArray[np.float64],
    name: str,
    show_reliability: bool,
    handles: list[Patch],
) -> None:
    """Class-interval legend to the right of the map, each break said beyond the noise or not.

    One entry per class (``0.31 – 0.42 (12)``), and between consecutive classes
    the break's verdict (:meth:`~spatialdp.viz.classify.Classification.break_notes`:
    ``┄ break 0.42: beyond the noise (99.9% separable)``, or ``classes within
    each other's error bars``), then the reliability fading and the
    suppressed / no-data entries. A map of one class has one entry, "no
    differences beyond the noise".
    """
    from matplotlib.patches import Patch as MplPatch

    entries: list[Any] = []
    labels: list[str] = []
    notes = classes.break_notes()
    for c, (text, count) in enumerate(zip(classes.labels(), classes.counts, strict=True)):
        if 0 < c <= len(notes):
            entries.append(MplPatch(facecolor="none", edgecolor="none"))
            labels.append(f"   ┄ {notes[c - 1]}")
        entries.append(MplPatch(facecolor=colours[c], edgecolor="#8a8a8a", linewidth=0.4))
        labels.append(f"{text}  ({int(count)})")
    if show_reliability:
        for level in ("high", "medium", "low"):
            patch = MplPatch(facecolor=(0.35, 0.35, 0.35, RELIABILITY_ALPHA[level]),
                             edgecolor="#8a8a8a", linewidth=0.4)
            if level == "low":
                _dot(patch)
            entries.append(patch)
            labels.append(f"reliability {_RELIABILITY_LABELS[level]}")
    for handle in handles:
        entries.append(handle)
        labels.append(str(handle.get_label()))
    plural = "class" if classes.k == 1 else "classes"
    box = ax.legend(entries, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                    frameon=False, fontsize=8, title=f"{name}\n({classes.scheme}, "
                    f"{classes.k} {plural})", title_fontsize=8.5, alignment="left",
                    handlelength=1.8, handleheight=1.2, borderaxespad=0)
    box.set_gid("legend:classes")
