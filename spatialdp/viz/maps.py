"""Maps of a regional report that show the uncertainty on the map itself.

A regional report (one row per region of a partition, indexed by ``region_id``)
carries a value, its error bar, the cohort that produced it and a reliability
class. A choropleth that colours only the value invites readers to compare
numbers that the noise makes indistinguishable, so these maps encode the
uncertainty in the same marks as the value:

* the colour is the value;
* the opacity is the reliability class (high: opaque, medium: faded, low: very
  faded and dotted), read off a two-way legend (value across, reliability down);
* suppressed regions are grey and hatched ``///``: nothing was published there.

:func:`plot_uncertainty_choropleth` draws a static matplotlib map,
:func:`explore_report` an interactive folium map (optional extra: ``folium``),
and :func:`save_figure` writes a PNG atomically.

The report's schema and checks are in :mod:`spatialdp.viz._report`, the
two-way key in :mod:`spatialdp.viz._legend` and the folium map in
:mod:`spatialdp.viz._explore`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import shapely
from numpy.typing import NDArray

from spatialdp._atomic import write_atomically
from spatialdp._validation import check_axes, check_cmap, check_flag, check_number, check_text, fail
from spatialdp.exceptions import InvalidInput
from spatialdp.viz._explore import explore_report
from spatialdp.viz._legend import _dot, _draw_class_legend, _draw_legend, _extend
from spatialdp.viz._report import (
    RELIABILITY_ALPHA,
    REPORT_COLUMNS,
    _check_report,
    _cohort_text,
    _colour_range,
    _column_name,
    _labelled,
    _meta,
    _numeric_column,
    _optional_flag,
    _optional_text,
    _reliability,
    _size,
    _suppressed,
    _title,
)
from spatialdp.viz.classify import MapColours, map_colours
from spatialdp.viz.patches import add_polygon_patch
from spatialdp.viz.projection import (
    _name_crs,
    _new_map_axes,
    _project,
    _resolve_crs,
    _set_map_aspect,
    plotting_crs,
)

if TYPE_CHECKING:
    import geopandas as gpd
    from matplotlib.axes import Axes
    from matplotlib.colors import Colormap
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch
    from matplotlib.path import Path as MplPath

__all__ = [
    "RELIABILITY_ALPHA",
    "REPORT_COLUMNS",
    "explore_report",
    "plot_uncertainty_choropleth",
    "plotting_crs",
    "save_figure",
    "shared_colour_range",
]

_SUPPRESSED_HATCH = "///"
_SUPPRESSED_STYLE: dict[str, Any] = {
    "facecolor": "#e3e3e3",
    "edgecolor": "#8a8a8a",
    "hatch": _SUPPRESSED_HATCH,
    "linewidth": 0.4,
    "label": "suppressed",
}
_NO_DATA_STYLE: dict[str, Any] = {
    "facecolor": "white",
    "edgecolor": "#8a8a8a",
    "linewidth": 0.4,
    "label": "no data",
}
_EDGE = "white"
# Regions a small-area model estimated with no published value (label "modelled").
_MODELLED_STYLE: dict[str, Any] = {
    "facecolor": "none",
    "edgecolor": "#1a1a1a",
    "linestyle": (0, (2, 1.5)),
    "linewidth": 1.1,
}
# Regions beyond the continuous ramp's range: drawn in the end colour, and marked.
_OUT_OF_RANGE_HATCH = "xx"
_OUT_OF_RANGE_EDGE = "#1a1a1a"
#: Lowest resolution save_figure writes (below it FreeType cannot size the text).
MIN_DPI = 20.0
#: Highest resolution save_figure writes (a 10 x 6.5 inch map is then 20,000 pixels wide).
MAX_DPI = 2000.0


# ---------------------------------------------------------------------------- geometry
def _colour(value: Any, name: str) -> Any:
    """Return ``value`` if matplotlib reads it as a colour; refuse it otherwise."""
    from matplotlib.colors import to_rgba

    try:
        to_rgba(value)
    except (TypeError, ValueError):
        raise fail(name, value, "is not a matplotlib colour",
                   "pass a name such as 'black', a hex code such as '#333333', or an RGB(A) "
                   "tuple") from None
    return value


def _patch_style(missing_kwds: Any) -> dict[str, Any]:
    """Return the suppressed-region style: ours, with the caller's keywords over it."""
    from matplotlib.patches import PathPatch
    from matplotlib.path import Path as MplPath

    if missing_kwds is None:
        user: dict[str, Any] = {}
    elif isinstance(missing_kwds, Mapping) and all(isinstance(k, str) for k in missing_kwds):
        user = dict(missing_kwds)
    else:
        raise fail("missing_kwds", missing_kwds, "is not a mapping of patch keywords",
                   "pass e.g. {'facecolor': 'pink', 'hatch': 'xx'} or None")
    if "color" in user:  # geopandas' missing_kwds spelling: the fill colour here
        user["facecolor"] = user.pop("color")
    style = {**_SUPPRESSED_STYLE, **user}
    trial = {k: v for k, v in style.items() if k != "label"}
    try:  # matplotlib checks the keywords when a patch is made: try one, off any axes
        PathPatch(MplPath([(0, 0), (1, 0), (0, 1)]), **trial)
    except (AttributeError, TypeError, ValueError) as err:
        raise fail("missing_kwds", missing_kwds, f"is refused by matplotlib ({err})",
                   "pass PathPatch keywords such as facecolor, edgecolor, hatch") from None
    if not isinstance(style.get("label", ""), str):
        raise fail("missing_kwds", missing_kwds, "has a label that is not text",
                   "pass label='below the floor' or leave it out")
    return style


def _region_path(geom: Any) -> MplPath | None:
    """One compound matplotlib path per (multi)polygon, holes oriented for filling."""
    from matplotlib.path import Path as MplPath

    if geom is None or geom.is_empty:
        return None
    geom = shapely.orient_polygons(geom)
    parts = getattr(geom, "geoms", [geom])
    vertices: list[NDArray[np.float64]] = []
    codes: list[NDArray[np.uint8]] = []
    for part in parts:
        if part.geom_type != "Polygon":
            raise InvalidInput(
                f"the report holds a {part.geom_type} geometry; a regional report has "
                "polygons only (build it with partition.join(table))"
            )
        for ring in (part.exterior, *part.interiors):
            xy = np.asarray(ring.coords, dtype=np.float64)[:, :2]
            ring_codes = np.full(len(xy), MplPath.LINETO, dtype=np.uint8)
            ring_codes[0] = MplPath.MOVETO
            ring_codes[-1] = MplPath.CLOSEPOLY
            vertices.append(xy)
            codes.append(ring_codes)
    if not vertices:
        return None
    return MplPath(np.concatenate(vertices), np.concatenate(codes))


# ---------------------------------------------------------------------------- drawing
def plot_uncertainty_choropleth(
    report: gpd.GeoDataFrame,
    column: str = "value",
    ax: Axes | None = None,
    cmap: str | Colormap = "viridis",
    legend: bool = True,
    annotate_cohort: bool = False,
    projection: Any = "auto",
    *,
    vmin: float | None = None,
    vmax: float | None = None,
    robust: bool | None = None,
    show_reliability: bool | None = None,
    missing_kwds: Mapping[str, Any] | None = None,
    title: str | None = None,
    figsize: tuple[float, float] = (10.0, 6.5),
    scheme: str | None = "auto",
    k: int = 5,
    classification_kwds: Mapping[str, Any] | None = None,
    edgecolor: Any = _EDGE,
    linewidth: float = 0.5,
) -> Axes:
    """Choropleth of a regional report with its uncertainty drawn on the map.

    Colour is the class of ``column``'s value: by default only the class
    breaks that noise alone would not produce anywhere on the map (family-wise
    95%, see ``scheme``), so a map of pure noise is one colour; opacity is the
    reliability class (high: opaque, medium: faded, low: very faded with a
    dotted fill); suppressed
    regions are light grey, hatched ``///``. The legend is two-way: value across,
    reliability down, so a faded colour reads as "this value, unreliable" and
    not as another value. Nothing is saved (see :func:`save_figure`).

    Parameters
    ----------
    report : GeoDataFrame
        A regional report: indexed by ``region_id``, columns ``value``,
        ``error_bar``, ``cohort``, ``reliability``, ``suppressed`` and
        ``geometry``; ``attrs["spatialdp"]`` (``metric``, ``round``,
        ``epsilon``, ``alpha``) makes the title.
    column : str
        Column to colour by (``"value"``, ``"ci_low"``, ``"error_bar"``, ``"cv"``...).
    ax : matplotlib Axes, optional
        Axes to draw on; a new figure of ``figsize`` by default.
    cmap : str or Colormap
        Colour map of the values. Faded classes mix the colour with white, so
        prefer maps without a near-black end (such as ``"magma"``, whose dark end
        fades to a grey close to the suppressed regions'); ``"viridis"``,
        ``"cividis"`` and ``"plasma"`` fade well.
    legend : bool
        Draw the value × reliability legend (below the map) and the
        suppressed / no-data legend.
    annotate_cohort : bool
        Write the cohort size (``n=1,234``) at a representative point of each
        region. A suppressed region never shows its exact cohort: it reads
        ``n<50`` when ``attrs["spatialdp"]["min_cohort"]`` gives the floor, and
        has no label otherwise. Labels that would overlap a label of a larger
        region are left out, so small regions may go unlabelled.
    projection : "auto", None, or a CRS
        ``"auto"`` draws in an equal-area projection chosen from the report's
        extent (CONUS Albers EPSG:5070 for the contiguous US, ETRS89 LAEA
        EPSG:3035 for Europe, Equal Earth EPSG:8857 for the world, a Lambert
        azimuthal equal-area centred on any other extent; see
        :func:`~spatialdp.viz.projection.auto_crs`); ``None`` draws as it is;
        any CRS pyproj understands draws in that CRS. Regions split at, or
        crossing, the antimeridian are drawn whole; the map has no lon/lat
        axes and names its CRS in the bottom-right corner.
    vmin, vmax : float, optional
        Range of the continuous ramp (giving one draws the ramp, not classes);
        default the range of the published (unsuppressed) values. Values
        outside are drawn in the end colour and MARKED: cross-hatched, with a
        dark outline and a key entry ("above the colour range (n)"); the key
        gets end triangles.
    robust : bool, optional
        ``True``: the colour range is the 2nd–98th percentiles of the published
        values. ``False``: their full range. ``None`` (default): the full range
        unless some values are far out (beyond 3 interquartile ranges from the
        quartiles, Tukey's far-out fence), in which case the range stops at the
        most extreme values inside the fences, so that one extreme region does
        not wash out the others; the far-out regions are drawn in the end
        colour, marked as out of range. Giving ``robust`` draws the ramp.
    show_reliability : bool, optional
        Fade by reliability class; default ``True`` for ``value``, ``ci_low``
        and ``ci_high`` (the noisy estimates) and ``False`` for other columns.
    missing_kwds : dict, optional
        Style of the suppressed regions (matplotlib patch keywords such as
        ``color`` or ``facecolor``, ``edgecolor`` (also the hatch colour), ``hatch``,
        ``label``); merged over the default light grey fill with a ``///`` hatch.
    title : str, optional
        Title; default from ``attrs["spatialdp"]``: the metric's label and unit
        (``value_label``, set from the spec's ``label``/``unit`` by
        :func:`~spatialdp.federated.regional_report`), round, epsilon, level and
        the coarsened number of suppressed regions. The drawing CRS is named on
        the map (see :func:`plotting_crs`). A simulation's title, the caller's
        own included, starts with ``[SIMULATION]``.
    figsize : (float, float)
        Size of the new figure when ``ax`` is not given.
    scheme : str or None, default "auto"
        ``"auto"``: the ``"separable"`` classes for ``value``, ``ci_low`` and
        ``ci_high`` when the report gives their noise (``noise_std``, or the
        level ``alpha`` of its error bars in ``attrs["spatialdp"]``); the
        continuous ramp for other columns (``error_bar``, ``cohort``, ``cv``,
        which carry no noise of their own), a report without its noise, or
        when ``vmin``, ``vmax`` or ``robust`` is given. ``"separable"``: a break
        only where the gap between published values is larger than noise
        alone would produce anywhere on this map (with no true difference, one
        class with probability at least 95%; a region shifted by several
        error bars is a class of its own; see
        :func:`~spatialdp.viz.classify.classify_report`). ``None``: the
        continuous ramp, as GeoPandas draws by default. Any mapclassify scheme
        (``"quantiles"``, ``"natural_breaks"``, ``"fisher_jenks"``,
        ``"equal_interval"``, ``"user_defined"``...), as
        ``GeoDataFrame.plot(scheme=...)``. With classes the key is a
        class-interval legend that says of each break whether it is beyond
        the noise or whether the neighbouring classes are within each other's
        error bars; a map of one class says "no class break beyond the noise"
        and is drawn in the ramp's middle colour.
    k : int
        Number of classes with a mapclassify scheme; the most classes with
        ``"separable"``.
    classification_kwds : dict, optional
        Passed to the classifier (``{"bins": [...]}`` for ``user_defined``;
        ``alpha``, ``min_size`` for ``separable``).
    edgecolor : matplotlib colour, default "white"
        The regions' outline, as in ``GeoDataFrame.plot``.
    linewidth : float, default 0.5
        The outline's width in points, as in ``GeoDataFrame.plot``.

    Returns
    -------
    matplotlib.axes.Axes
        Each suppressed region is one ``PathPatch`` in ``ax.patches`` (hatched,
        ``gid="suppressed:<region_id>"``); the published regions are one
        ``PathCollection`` per reliability class (``gid="reliability:<class>"``).
        A smoothed frame's regions labelled ``modelled`` (estimated with no
        published value, see :func:`spatialdp.smooth.small_area_estimates`) get
        a dashed outline (``gid="label:modelled"``) and a key entry; its
        default title says it is smoothed (post-processing, no ε charged).

    Raises
    ------
    InvalidInput
        The report misses a required column, has no rows, or an unknown
        reliability class.
    CRSError
        A projection was asked for a report without a CRS.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt
    >>> import pandas as pd
    >>> from spatialdp.datasets import us_states_partition
    >>> part = us_states_partition()
    >>> table = pd.DataFrame({"value": 0.31, "error_bar": 0.02, "cohort": 900,
    ...                       "reliability": "high", "suppressed": False},
    ...                      index=part.region_ids)
    >>> table.loc[["WY", "VT"], ["value", "error_bar"]] = float("nan")
    >>> table.loc[["WY", "VT"], ["reliability", "suppressed"]] = ["suppressed", True]
    >>> ax = plot_uncertainty_choropleth(part.join(table))
    >>> sorted(p.get_gid() for p in ax.patches if p.get_hatch() == "///")
    ['suppressed:VT', 'suppressed:WY']
    >>> plt.close(ax.figure)
    """
    from matplotlib.collections import PathCollection
    from matplotlib.colors import Normalize, to_rgba_array
    from matplotlib.patches import Patch, PathPatch

    column = check_text(column, "column")
    report = _check_report(report, extra=[column])
    check_axes(ax)
    cmap_obj = check_cmap(cmap)
    legend = check_flag(legend, "legend")
    annotate_cohort = check_flag(annotate_cohort, "annotate_cohort")
    show_reliability = _optional_flag(show_reliability, "show_reliability")
    title = _optional_text(title, "title")
    figsize = _size(figsize, "figsize")
    supp_style = _patch_style(missing_kwds)
    edgecolor = _colour(edgecolor, "edgecolor")
    linewidth = check_number(linewidth, "linewidth", low=0.0, high=100.0,
                             fix="pass an outline width in points, e.g. 0.5 (0: none)")
    if show_reliability is None:
        show_reliability = column in ("value", "ci_low", "ci_high")
    reliability = _reliability(report)
    suppressed = _suppressed(report)
    fills = map_colours(report, column, cmap=cmap_obj, scheme=scheme, k=k,
                        classification_kwds=classification_kwds, vmin=vmin, vmax=vmax,
                        robust=robust)
    values, published, classes = fills.values, fills.published, fills.classes
    cohorts = _numeric_column(report, "cohort", "the report") if annotate_cohort else None

    crs = _resolve_crs(report, projection)
    frame = _project(report, crs)
    paths: dict[int, MplPath] = {}
    for i, geom in enumerate(frame.geometry.values):
        path = _region_path(geom)
        if path is not None:
            paths[i] = path
    ids = [str(i) for i in frame.index]
    norm = Normalize(vmin=fills.vmin, vmax=fills.vmax, clip=True)

    if ax is None:
        ax = _new_map_axes(figsize)
    ax.set_facecolor("white")

    # Published regions: one collection per reliability class, faded by class. A
    # published value without a class is drawn as low: no reliability is claimed.
    if show_reliability:
        known = np.isin(reliability, ["high", "medium"])
        groups = [
            ("high", published & (reliability == "high")),
            ("medium", published & (reliability == "medium")),
            ("low", published & ~known),
        ]
    else:
        groups = [("all", published)]
    for name, mask in groups:
        idx = [int(i) for i in np.flatnonzero(mask) if i in paths]
        if not idx:
            continue
        faces = to_rgba_array(list(fills.fill[idx]))
        faces[:, 3] = RELIABILITY_ALPHA.get(name, 1.0)
        collection = PathCollection([paths[i] for i in idx], facecolors=faces,
                                    edgecolors=edgecolor, linewidths=linewidth, zorder=1)
        if name == "low":
            _dot(collection)
        collection.set_gid(f"reliability:{name}")
        ax.add_collection(collection, autolim=True)

    handles: list[Patch] = _mark_out_of_range(ax, fills, paths, cmap_obj)
    # Regions with no value that are not suppressed: "no data".
    nd_idx = [int(i) for i in np.flatnonzero(~suppressed & ~np.isfinite(values))
              if i in paths]
    if nd_idx:
        style = dict(_NO_DATA_STYLE)
        label = f"{style.pop('label')} ({len(nd_idx)})"
        nd = PathCollection([paths[i] for i in nd_idx], **style, zorder=1)
        nd.set_gid("no data")
        ax.add_collection(nd, autolim=True)
        handles.append(Patch(**style, label=label))

    handles += _mark_modelled(ax, report, paths)

    # Suppressed regions: one hatched patch each, so each is findable by its id.
    # Published only coarsened (seed 001), in the key as in the title.
    label = f"{supp_style.pop('label', 'suppressed')} ({int(suppressed.sum())})"
    for i in map(int, np.flatnonzero(suppressed)):
        if i not in paths:
            continue
        patch = PathPatch(paths[i], **supp_style, zorder=1.5)
        patch.set_gid(f"suppressed:{ids[i]}")
        add_polygon_patch(ax, patch)
    if suppressed.any():
        handles.append(Patch(**supp_style, label=label))

    ax.margins(0.02)
    ax.autoscale_view()
    _set_map_aspect(ax, frame)
    _name_crs(ax, frame.crs)
    ax.set_title(_labelled(title, _meta(report)) if title is not None else
                 _title(_meta(report), column, int(suppressed.sum()), len(report)),
                 fontsize=12, loc="left")

    if annotate_cohort:
        assert cohorts is not None
        labels = [_cohort_text(c, bool(sp), _meta(report))
                  for c, sp in zip(cohorts, suppressed, strict=True)]
        _annotate_cohort(ax, frame, labels, np.isin(np.arange(len(frame)), list(paths)))

    if legend and classes is not None:
        _draw_class_legend(ax, classes, to_rgba_array(classes.colours(cmap_obj)),
                           _column_name(_meta(report), column), show_reliability, handles)
    elif legend:
        _draw_legend(ax, cmap_obj, norm, column, _meta(report), show_reliability,
                     extend=_extend(values[published], norm), handles=handles)
    return ax


def _mark_modelled(ax: Axes, report: gpd.GeoDataFrame, paths: dict[int, MplPath]
                   ) -> list[Patch]:
    """Outline the regions a small-area model estimated without a published value.

    A smoothed frame (:func:`spatialdp.smooth.small_area_estimates`) labels
    them ``modelled``; their value is a prediction from covariates and
    neighbours, so the map says so with a dashed outline and a key entry.
    """
    from matplotlib.collections import PathCollection
    from matplotlib.patches import Patch

    if "label" not in report.columns:
        return []
    modelled = (report["label"] == "modelled").to_numpy(dtype=bool)
    idx = [int(i) for i in np.flatnonzero(modelled) if i in paths]
    if not idx:
        return []
    outline = PathCollection([paths[i] for i in idx], facecolors="none",
                             edgecolors=_MODELLED_STYLE["edgecolor"],
                             linestyles=[_MODELLED_STYLE["linestyle"]],
                             linewidths=_MODELLED_STYLE["linewidth"], zorder=1.8)
    outline.set_gid("label:modelled")
    ax.add_collection(outline, autolim=True)
    return [Patch(**_MODELLED_STYLE,
                  label=f"modelled: no published value ({int(modelled.sum())})")]


def _mark_out_of_range(ax: Axes, fills: MapColours, paths: dict[int, MplPath],
                       cmap: Colormap) -> list[Patch]:
    """Cross-hatch and outline the regions beyond the ramp's range; return their key entries.

    They are drawn in the end colour (the ramp stops there), so the mark is what
    tells them apart from the regions at the end of the range.
    """
    from matplotlib.collections import PathCollection
    from matplotlib.patches import Patch

    handles: list[Patch] = []
    for side, sign, end in (("below", -1, 0.0), ("above", 1, 1.0)):
        idx = [int(i) for i in np.flatnonzero(fills.out_of_range == sign) if i in paths]
        if not idx:
            continue
        mark = PathCollection([paths[i] for i in idx], facecolors="none",
                              edgecolors=_OUT_OF_RANGE_EDGE, linewidths=1.3, zorder=1.6)
        mark.set_hatch(_OUT_OF_RANGE_HATCH)
        mark.set_gid(f"out-of-range:{side}")
        ax.add_collection(mark, autolim=False)
        limit = fills.vmin if sign < 0 else fills.vmax
        handles.append(Patch(facecolor=cmap(end), edgecolor=_OUT_OF_RANGE_EDGE,
                             hatch=_OUT_OF_RANGE_HATCH, linewidth=1.0,
                             label=f"{side} the colour range ({'<' if sign < 0 else '>'} "
                                   f"{limit:.3g}): {len(idx)}"))
    return handles


def _annotate_cohort(
    ax: Axes, frame: gpd.GeoDataFrame, labels: list[str | None], drawable: NDArray[np.bool_]
) -> None:
    """Cohort labels at representative points; larger regions win overlaps."""
    import matplotlib.patheffects as pe

    points = frame.geometry.representative_point()
    # Planar area in the drawing's units, only to let larger regions win overlaps
    # (GeoSeries.area would warn about a geographic CRS).
    area = np.nan_to_num(shapely.area(np.asarray(frame.geometry.values, dtype=object)))
    fig = ax.get_figure(root=True)
    assert fig is not None
    get_renderer = getattr(fig.canvas, "get_renderer", None)  # Agg-based canvases
    renderer = get_renderer() if get_renderer is not None else fig._get_renderer()  # type: ignore[attr-defined]
    kept: list[Any] = []
    for i in np.argsort(-area, kind="stable"):
        label = labels[i]
        if not drawable[i] or label is None:
            continue
        point = points.iloc[i]
        text = ax.text(
            point.x, point.y, label,
            ha="center", va="center", fontsize=6.5, color="#202020", zorder=3,
            path_effects=[pe.withStroke(linewidth=2.2, foreground="white")],
        )
        text.set_gid(f"cohort:{frame.index[i]}")
        box = text.get_window_extent(renderer=renderer).expanded(1.05, 1.15)
        if any(box.overlaps(other) for other in kept):
            text.remove()
            continue
        kept.append(box)


def shared_colour_range(frames: Sequence[pd.DataFrame], column: str = "value",
                        robust: bool | None = None) -> tuple[float, float]:
    """Return one colour range for several maps of the same quantity.

    The union of the frames' own ranges, each from its published
    (unsuppressed, finite) ``column`` values as
    :func:`plot_uncertainty_choropleth` takes it (``robust``: ``None`` stops
    at Tukey's far-out fences, ``True`` the 2nd-98th percentiles, ``False``
    the full range), so no map marks more regions out of range than it would
    on its own scale. Pass it as ``vmin=``,
    ``vmax=`` to each map so that one colour means one value on all of them;
    values beyond it are drawn marked as out of range.

    Parameters
    ----------
    frames : sequence of DataFrame
        Report frames (``suppressed`` and ``column``), e.g. a raw report and its
        smoothed version.
    column : str
        The column the maps colour by.
    robust : bool, optional
        As for :func:`plot_uncertainty_choropleth`.

    Returns
    -------
    (float, float)
        ``(vmin, vmax)``; ``(0, 1)`` when no value is published.

    Examples
    --------
    >>> import pandas as pd
    >>> a = pd.DataFrame({"value": [1.0, 2.0], "suppressed": [False, False]})
    >>> b = pd.DataFrame({"value": [0.5, 9.0], "suppressed": [False, True]})
    >>> shared_colour_range([a, b], robust=False)
    (0.5, 2.0)
    """
    column = check_text(column, "column")
    robust = _optional_flag(robust, "robust")
    if not isinstance(frames, Sequence) or not frames or not all(
            isinstance(f, pd.DataFrame) for f in frames):
        raise fail("frames", frames, "is not a non-empty sequence of frames",
                   "pass a list of report frames, e.g. [raw, smoothed.frame]")
    ranges = []
    for i, frame in enumerate(frames):
        missing = [c for c in (column, "suppressed") if c not in frame.columns]
        if missing:
            raise fail(f"frames[{i}]", f"columns {list(frame.columns)[:8]}",
                       f"has no {missing} column", f"pass report frames with {missing}")
        values = _numeric_column(frame, column, f"frames[{i}]")
        shown = values[~_suppressed(frame) & np.isfinite(values)]
        if shown.size:
            ranges.append(_colour_range(shown, robust))
    if not ranges:
        return 0.0, 1.0
    return min(lo for lo, _ in ranges), max(hi for _, hi in ranges)


# ---------------------------------------------------------------------------- saving
def save_figure(
    figure: Figure | Axes,
    path: str | os.PathLike[str],
    *,
    dpi: float = 150,
    bbox_inches: str | None = "tight",
    **savefig_kwargs: Any,
) -> Path:
    """Write a figure to ``path`` atomically: a temporary file, then a rename.

    The image goes to a hidden temporary file in the target folder and is moved
    into place with :func:`os.replace`, so a crash or a full disk never leaves a
    half-written image under the final name (a reader sees the old file or the
    new one). The format follows the suffix (``.png`` by default).

    Parameters
    ----------
    figure : Figure or Axes
        What to save (an Axes saves its whole figure).
    path : str or path-like
        Target file; its folder must exist.
    dpi, bbox_inches, **savefig_kwargs
        Passed to :meth:`matplotlib.figure.Figure.savefig`.

    Returns
    -------
    pathlib.Path
        The written file.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import matplotlib.pyplot as plt, tempfile, pathlib
    >>> fig, ax = plt.subplots()
    >>> out = save_figure(ax, pathlib.Path(tempfile.mkdtemp()) / "map.png")
    >>> out.read_bytes()[1:4] == b"PNG"
    True
    >>> plt.close(fig)
    """
    from matplotlib.artist import Artist
    from matplotlib.figure import Figure as MplFigure

    if not isinstance(figure, (MplFigure, Artist)):
        raise fail("figure", figure, f"is a {type(figure).__name__}, not a Figure or Axes",
                   "pass the figure (or an axes on it) to save")
    root = figure.get_figure(root=True) if not isinstance(figure, MplFigure) else figure
    if not isinstance(root, MplFigure):
        raise InvalidInput(f"cannot save {figure!r:.60}: it is not on a figure")
    fig = root
    if not isinstance(path, (str, os.PathLike)) or not str(path).strip():
        raise fail("path", path, "is not a file path",
                   "pass a path such as 'map.png' (str or pathlib.Path)")
    dpi = check_number(dpi, "dpi", low=MIN_DPI, high=MAX_DPI,
                       fix=f"pass dots per inch between {MIN_DPI:g} and {MAX_DPI:g}, e.g. 150")
    if bbox_inches is not None and not (isinstance(bbox_inches, str) and bbox_inches == "tight"):
        raise fail("bbox_inches", bbox_inches, "is not 'tight' or None",
                   "pass 'tight' (trim the margins) or None")
    target = Path(path)
    if target.is_dir():
        raise fail("path", path, "is a folder", "pass a file name inside it, e.g. 'map.png'")
    if not target.parent.is_dir():
        raise InvalidInput(
            f"cannot save to {str(target)!r}: the folder {str(target.parent)!r} does not "
            "exist; create it first"
        )
    fmt = savefig_kwargs.pop("format", None) or (target.suffix.lstrip(".").lower() or "png")
    try:
        return write_atomically(target, lambda tmp: fig.savefig(
            tmp, format=fmt, dpi=dpi, bbox_inches=bbox_inches, **savefig_kwargs))
    except (TypeError, ValueError, RuntimeError) as err:  # an unknown format or keyword
        raise InvalidInput(f"matplotlib could not save {str(target)!r} ({err}); check the "
                           "file suffix (.png, .pdf, .svg) and the savefig keywords") from None

