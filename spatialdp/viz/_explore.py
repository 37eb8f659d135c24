"""The interactive folium map of a regional report (optional extra: ``folium``).

The same encoding as the static map, from the same function
(:func:`~spatialdp.viz.classify.map_colours`): the same classes in the same
colours (or the same ramp, regions beyond its range marked), fill opacity the
reliability class, suppressed regions grey with grey stripes. The map is drawn
with ``folium.GeoJson`` directly, so mapclassify is imported only when a
mapclassify scheme is asked for.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from spatialdp._validation import check_flag, check_text, fail
from spatialdp.exceptions import InvalidInput
from spatialdp.viz._report import (
    RELIABILITY_ALPHA,
    _check_report,
    _cohort_text,
    _column_name,
    _labelled,
    _level_text,
    _meta,
    _numeric_column,
    _optional_flag,
    _optional_text,
    _reliability,
    _suppressed,
    _title,
)
from spatialdp.viz.classify import MapColours, map_colours

if TYPE_CHECKING:
    import folium
    import geopandas as gpd

__all__ = ["explore_report", "region_class_name"]

_SUPPRESSED_FILL = "#bdbdbd"
_EDGE = "#ffffff"
_OUT_OF_RANGE_EDGE = "#1a1a1a"
#: Opacity of a suppressed region's grey under its stripes.
_SUPPRESSED_OPACITY = 0.6


def _fmt(x: Any, digits: int = 4) -> str:
    return "—" if x is None or pd.isna(x) else f"{float(x):.{digits}g}"


def region_class_name(region_id: Any) -> str:
    """Return the CSS class of a region's path on the folium map: ``spatialdp-region-<id>``.

    Characters other than letters, digits, ``-`` and ``_`` become ``_``.

    Examples
    --------
    >>> region_class_name("8a2a1072b59ffff"), region_class_name("New York")
    ('spatialdp-region-8a2a1072b59ffff', 'spatialdp-region-New_York')
    """
    return "spatialdp-region-" + re.sub(r"[^A-Za-z0-9_-]", "_", str(region_id))


def explore_report(
    report: gpd.GeoDataFrame,
    column: str = "value",
    *,
    cmap: Any = "viridis",
    scheme: str | None = "auto",
    k: int = 5,
    classification_kwds: Mapping[str, Any] | None = None,
    vmin: float | None = None,
    vmax: float | None = None,
    robust: bool | None = None,
    show_reliability: bool | None = None,
    title: str | None = None,
    m: folium.Map | None = None,
    tiles: Any = "OpenStreetMap",
    attr: str | None = None,
    style_kwds: Mapping[str, Any] | None = None,
    tooltip: bool = True,
    map_kwds: Mapping[str, Any] | None = None,
) -> folium.Map:
    """Interactive map of a regional report: the static map's classes and colours, in folium.

    Every region gets the class and the hex colour of
    :func:`~spatialdp.viz.maps.plot_uncertainty_choropleth` with the same
    arguments (both come from :func:`~spatialdp.viz.classify.map_colours`):
    by default the classes the noise is unlikely to have made (one colour for
    a map of noise only). The fill opacity is the reliability class, with the
    static map's opacities (a fixed key says so); suppressed regions are grey
    with grey stripes; regions beyond a continuous ramp's range have a dark
    dashed outline and a key entry. A box at the top names the map (and
    ``[SIMULATION]`` for a simulation). The tooltip shows the region (and its
    ``name`` when the report has one), its class, the value with its error
    bar and interval, the cohort (for a suppressed region only that it is
    below the floor, never its exact size), the coefficient of variation and
    the reliability class. Each region's path has the CSS class
    :func:`region_class_name`, and its GeoJSON feature the properties
    ``class`` (``-1``: nothing published), ``fill`` and ``range``.

    Parameters
    ----------
    report : GeoDataFrame
        A regional report (see :func:`~spatialdp.viz.maps.plot_uncertainty_choropleth`).
    column : str
        Column to colour by.
    cmap, scheme, k, classification_kwds, vmin, vmax, robust, show_reliability
        As for :func:`~spatialdp.viz.maps.plot_uncertainty_choropleth`.
    title : str, optional
        Text of the title box; default as the static map's title.
    m : folium.Map, optional
        A map to draw on; a new one by default.
    tiles, attr : optional
        Base map of a new map (``folium.Map``'s); ``tiles=None`` for none.
    style_kwds : dict, optional
        Leaflet path options merged over ours (``weight``, ``color``...).
    tooltip : bool
        Show the tooltip.
    map_kwds : dict, optional
        More keywords for a new ``folium.Map`` (``width``, ``height``...).

    Returns
    -------
    folium.Map

    Raises
    ------
    ImportError
        folium is not installed.
    InvalidInput
        The report misses a required column, or an option is refused.

    Examples
    --------
    >>> import pandas as pd
    >>> from spatialdp.datasets import us_states_partition
    >>> part = us_states_partition()
    >>> table = pd.DataFrame({"value": 0.31, "error_bar": 0.02, "cohort": 900,
    ...                       "cv": 0.05, "reliability": "high", "suppressed": False},
    ...                      index=part.region_ids)
    >>> m = explore_report(part.join(table), tiles=None)
    >>> type(m).__name__
    'Map'
    """
    column = check_text(column, "column")
    report = _check_report(report, extra=[column])
    try:
        import folium
    except ImportError as err:
        raise ImportError(
            f"explore_report needs the optional package folium ({err}); install it with: "
            "pip install folium  (or use plot_uncertainty_choropleth for a static map)"
        ) from err
    show_reliability = _optional_flag(show_reliability, "show_reliability")
    if show_reliability is None:
        show_reliability = column in ("value", "ci_low", "ci_high")
    title = _optional_text(title, "title")
    tooltip = check_flag(tooltip, "tooltip")
    style = _mapping(style_kwds, "style_kwds", "{'weight': 2}")
    options = _mapping(map_kwds, "map_kwds", "{'width': 800, 'height': 500}")
    if m is not None and not isinstance(m, folium.Map):
        raise fail("m", m, "is not a folium.Map", "pass a map made with folium.Map() or None")
    fills = map_colours(report, column, cmap=cmap, scheme=scheme, k=k,
                        classification_kwds=classification_kwds, vmin=vmin, vmax=vmax,
                        robust=robust)
    meta = _meta(report)
    shown = _features(report, column, fills, show_reliability)
    fields, aliases = _tooltip_fields(shown, column, meta)
    lonlat = shown if shown.crs is None or shown.crs.to_epsg() == 4326 else shown.to_crs(4326)
    if m is None:
        try:
            m = folium.Map(tiles=tiles, attr=attr, control_scale=True, **options)
        except (TypeError, ValueError, KeyError, AttributeError) as err:
            raise InvalidInput(f"folium.Map refused the map options ({type(err).__name__}: "
                               f"{str(err)[:200]}); check tiles, attr and map_kwds") from None
    west, south, east, north = (float(v) for v in lonlat.total_bounds)
    if np.isfinite([west, south, east, north]).all():
        m.fit_bounds([[south, west], [north, east]])

    def _style(feature: dict[str, Any]) -> dict[str, Any]:
        props = feature["properties"]
        out: dict[str, Any] = {"fillColor": props["fill"] or _SUPPRESSED_FILL,
                               "fillOpacity": props["opacity"], "color": _EDGE, "weight": 1,
                               "className": props["css"]}
        if props["range"]:
            out.update({"color": _OUT_OF_RANGE_EDGE, "weight": 2.5, "dashArray": "6 3"})
        if props["reliability_class"] == "suppressed":
            out["dashArray"] = "4 3"
        out.update(style)
        out["className"] = props["css"]
        return out

    layer = folium.GeoJson(
        lonlat.to_json(),
        name=_column_name(meta, column),
        style_function=_style,
        highlight_function=lambda _f: {"weight": 3, "color": "#333333"},
        tooltip=folium.GeoJsonTooltip(fields=fields, aliases=aliases, localize=True)
        if tooltip else None,
    )
    layer.add_to(m)
    _add_suppressed_stripes(m, lonlat[lonlat["reliability_class"] == "suppressed"])
    heading = title if title is not None else _title(
        meta, column, int(_suppressed(report).sum()), len(report))
    _add_title_box(m, _labelled(heading, meta))
    _add_legend(m, fills, cmap, _column_name(meta, column), meta, show_reliability)
    return m


def _mapping(value: Any, name: str, example: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise fail(name, value, "is not a mapping of keywords", f"pass e.g. {example} or None")
    return dict(value)


def _features(report: gpd.GeoDataFrame, column: str, fills: MapColours,
              show_reliability: bool) -> gpd.GeoDataFrame:
    """Return the report's geometry with the tooltip texts and the fill of every region."""
    import geopandas as gpd

    reliability = _reliability(report)
    suppressed = _suppressed(report)
    meta = _meta(report)
    cohorts = _numeric_column(report, "cohort", "the report")
    per = fills.frame(report.index)
    labels = fills.classes.labels() if fills.classes is not None else None
    data: dict[str, Any] = {"region": [str(i) for i in report.index]}
    if "name" in report.columns:
        data["name"] = ["" if pd.isna(v) else str(v) for v in report["name"]]
    data["class"] = per["class"].to_numpy(dtype=np.int64)
    data["fill"] = list(per["fill"])
    data["range"] = list(per["range"])
    data["class_text"] = [_class_text(c, r, s, labels, fills)
                          for c, r, s in zip(per["class"], per["range"], suppressed,
                                             strict=True)]
    if column != "value":
        data[column] = [None if not np.isfinite(v) else float(v) for v in fills.values]
    data["estimate"] = ["suppressed" if s else f"{_fmt(v)} ± {_fmt(e, 3)}"
                        for v, e, s in zip(report["value"], report["error_bar"], suppressed,
                                           strict=True)]
    if "ci_low" in report.columns and "ci_high" in report.columns:
        data["interval"] = ["—" if s else f"[{_fmt(a)}, {_fmt(b)}]"
                            for a, b, s in zip(report["ci_low"], report["ci_high"],
                                               suppressed, strict=True)]
    data["cohort_n"] = [(_cohort_text(n, bool(sp), meta) or "below the floor")
                        .replace("n=", "").replace("n<", "<")
                        for n, sp in zip(cohorts, suppressed, strict=True)]
    if "cv" in report.columns:
        data["cv_text"] = ["—" if s else _fmt(c, 2)
                           for c, s in zip(report["cv"], suppressed, strict=True)]
    data["reliability_class"] = ["suppressed" if s else (r if r is not None else "unknown")
                                 for r, s in zip(reliability, suppressed, strict=True)]
    data["opacity"] = [_opacity(c, show_reliability) for c in data["reliability_class"]]
    data["css"] = [region_class_name(i) for i in report.index]
    return gpd.GeoDataFrame(data, geometry=list(report.geometry.values), crs=report.crs,
                            index=pd.Index([str(i) for i in report.index]))


def _opacity(reliability: str, show_reliability: bool) -> float:
    """Return the static map's opacity of a reliability class (no class counts as low)."""
    if reliability == "suppressed":
        return _SUPPRESSED_OPACITY
    if not show_reliability:
        return 1.0
    return float(RELIABILITY_ALPHA.get(reliability, RELIABILITY_ALPHA["low"]))


def _class_text(cls: int, side: str, suppressed: bool, labels: Sequence[str] | None,
                fills: MapColours) -> str:
    if suppressed:
        return "suppressed"
    if cls < 0:
        return "no data"
    if side:
        limit = fills.vmin if side == "below" else fills.vmax
        return f"{side} the colour range ({'<' if side == 'below' else '>'} {limit:.3g})"
    return labels[cls] if labels is not None else "on the colour ramp"


def _tooltip_fields(shown: gpd.GeoDataFrame, column: str, meta: Mapping[str, Any]
                    ) -> tuple[list[str], list[str]]:
    level = f" ({_level_text(meta)})" if _level_text(meta) else ""
    pairs = [("region", "region"), ("name", "name"), ("class_text", "class"),
             (column, column), ("estimate", f"value ± error bar{level}"),
             ("interval", f"interval{level}"), ("cohort_n", "cohort"), ("cv_text", "CV"),
             ("reliability_class", "reliability")]
    keep = [(f, a) for f, a in pairs if f in shown.columns and f != "value"]
    return [f for f, _ in keep], [a for _, a in keep]


_BOX = ("position: fixed; z-index: 9999; background: rgba(255,255,255,0.92); "
        "padding: 8px 10px; border-radius: 4px; box-shadow: 0 1px 4px rgba(0,0,0,0.3); "
        "font: 12px/1.35 sans-serif; color: #222;")
_SWATCH = ("display: inline-block; width: 26px; height: 12px; vertical-align: middle; "
           "border: 1px solid #8a8a8a;")


def _add_title_box(m: Any, text: str) -> None:
    """Add a fixed box at the top of the map with its title ([SIMULATION] first if simulated)."""
    import folium

    lines = "<br>".join(html.escape(line) for line in text.splitlines())
    box = (f'<div id="spatialdp-title" style="{_BOX} top: 10px; left: 60px; '
           f'max-width: 640px; font-size: 13px;">{lines}</div>')
    m.get_root().html.add_child(folium.Element(box))


def _add_legend(m: Any, fills: MapColours, cmap: Any, name: str, meta: Mapping[str, Any],
                show_reliability: bool) -> None:
    """Add a fixed key: the classes (or the ramp and its out-of-range marks), opacity."""
    import folium

    rows = [f'<div style="font-weight: bold; margin-bottom: 4px;">{html.escape(name)}</div>']
    if fills.classes is not None:
        rows += _class_rows(fills, cmap)
    else:
        rows += _ramp_rows(fills, cmap)
    if show_reliability:
        rows.append('<div style="font-weight: bold; margin: 6px 0 2px;">'
                    "Opacity = reliability</div>")
        labels = {"high": "high (CV &lt; 0.12)", "medium": "medium (CV 0.12–0.40)",
                  "low": "low (CV &gt; 0.40)"}
        rows += [f'<div><span style="{_SWATCH} background: rgba(33, 145, 140, '
                 f'{RELIABILITY_ALPHA[k]});"></span> {labels[k]}</div>'
                 for k in ("high", "medium", "low")]
    floor = meta.get("min_cohort")
    floor_text = f"n = {int(floor):,}" if isinstance(floor, (int, np.integer)) else "the floor"
    rows.append(f'<div style="margin-top: 4px;"><span style="{_SWATCH} background: '
                "repeating-linear-gradient(-45deg, #6b6b6b 0 2px, #d9d9d9 2px 6px);\"></span> "
                f"suppressed: cohort below {floor_text}, nothing published</div>")
    box = (f'<div id="spatialdp-legend" style="{_BOX} bottom: 24px; left: 12px; '
           f'max-width: 330px;">{"".join(rows)}</div>')
    m.get_root().html.add_child(folium.Element(box))


def _class_rows(fills: MapColours, cmap: Any) -> list[str]:
    classes = fills.classes
    assert classes is not None
    colours = classes.colours(cmap)
    notes = classes.break_notes()
    rows = [f'<div style="color: #555;">{html.escape(classes.scheme)}, {classes.k} '
            f'{"class" if classes.k == 1 else "classes"}</div>']
    for c, (label, count) in enumerate(zip(classes.labels(), classes.counts, strict=True)):
        if 0 < c <= len(notes):
            rows.append(f'<div style="color: #555; margin-left: 8px;">┄ '
                        f"{html.escape(notes[c - 1])}</div>")
        rows.append(f'<div class="spatialdp-class"><span style="{_SWATCH} background: '
                    f'{colours[c]};"></span> {html.escape(label)} ({int(count)})</div>')
    return rows


def _ramp_rows(fills: MapColours, cmap: Any) -> list[str]:
    from matplotlib.colors import to_hex

    from spatialdp._validation import check_cmap

    ramp = check_cmap(cmap)
    stops = ", ".join(to_hex(ramp(t)) for t in np.linspace(0.0, 1.0, 9))
    rows = [f'<div><span style="{_SWATCH} width: 160px; background: linear-gradient(to right, '
            f'{stops});"></span></div>',
            f'<div style="display: flex; justify-content: space-between; width: 164px;">'
            f"<span>{fills.vmin:.3g}</span><span>{fills.vmax:.3g}</span></div>"]
    for side, sign, end in (("below", -1, 0.0), ("above", 1, 1.0)):
        n = int((fills.out_of_range == sign).sum())
        if n:
            limit = fills.vmin if sign < 0 else fills.vmax
            rows.append(f'<div class="spatialdp-out-of-range"><span style="{_SWATCH} '
                        f"background: {to_hex(ramp(end))}; border: 2px dashed "
                        f'{_OUT_OF_RANGE_EDGE};"></span> {side} the colour range '
                        f"({'&lt;' if sign < 0 else '&gt;'} {limit:.3g}): {n}</div>")
    return rows


def _add_suppressed_stripes(m: Any, frame: gpd.GeoDataFrame) -> None:
    """Overlay grey stripes on the suppressed regions (folium's StripePattern)."""
    if len(frame) == 0:
        return
    import folium
    from folium.plugins import StripePattern

    stripes = StripePattern(angle=-45, color="#6b6b6b", space_color="#d9d9d9",
                            opacity=0.9, space_opacity=0.5, weight=2, space_weight=4)
    stripes.add_to(m)
    folium.GeoJson(
        frame[[frame.geometry.name]].to_json(),
        name="suppressed",
        style_function=lambda _f: {"fillPattern": stripes, "color": "#8a8a8a", "weight": 1,
                                   "fillOpacity": 1.0},
        interactive=False,
    ).add_to(m)
