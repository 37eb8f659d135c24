"""The interactive folium map of a regional report (optional extra: ``folium``).

The same encoding as the static map: colour is the value, fill opacity the
reliability class, suppressed regions grey with grey stripes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from spatialdp._validation import check_text
from spatialdp.exceptions import InvalidInput
from spatialdp.viz._report import (
    _check_report,
    _cohort_text,
    _colour_range,
    _level_text,
    _meta,
    _meta_number,
    _numeric_column,
    _relation_text,
    _reliability,
    _suppressed,
)

if TYPE_CHECKING:
    import folium
    import geopandas as gpd

__all__ = ["explore_report"]


def _fmt(x: Any, digits: int = 4) -> str:
    return "—" if x is None or pd.isna(x) else f"{float(x):.{digits}g}"


def explore_report(
    report: gpd.GeoDataFrame,
    column: str = "value",
    **kwargs: Any,
) -> folium.Map:
    """Interactive map of a regional report (``GeoDataFrame.explore``, needs folium).

    The fill colour is ``column``; the fill opacity follows the reliability
    class (a fixed key on the map says so: "Opacity = reliability") as on
    :func:`~spatialdp.viz.maps.plot_uncertainty_choropleth`; suppressed regions
    are grey with grey stripes. The tooltip shows the region, the value with
    its error bar and interval, the cohort (for a suppressed region only that
    it is below the floor, never its exact size), the coefficient of variation
    and the reliability class.

    Parameters
    ----------
    report : GeoDataFrame
        A regional report (see :func:`~spatialdp.viz.maps.plot_uncertainty_choropleth`).
    column : str
        Column to colour by.
    **kwargs
        Passed to :meth:`geopandas.GeoDataFrame.explore` (``cmap``, ``m``,
        ``tiles``, ``vmin``, ``vmax``, ``scheme``, ``k``, ``tooltip``, ...); the
        colour range defaults to the static map's robust range (far-out regions
        in the end colour, see ``robust`` of
        :func:`~spatialdp.viz.maps.plot_uncertainty_choropleth`); they override the
        defaults set here, and the ``*_kwds`` dicts are merged over ours (so a
        ``style_kwds`` of your own keeps the fading by reliability unless it
        brings its own ``style_function``).

    Returns
    -------
    folium.Map

    Raises
    ------
    ImportError
        folium (with mapclassify) is not installed.
    InvalidInput
        The report misses a required column.

    Examples
    --------
    >>> import pandas as pd
    >>> from spatialdp.datasets import us_states_partition
    >>> part = us_states_partition()
    >>> table = pd.DataFrame({"value": 0.31, "error_bar": 0.02, "cohort": 900,
    ...                       "cv": 0.05, "reliability": "high", "suppressed": False},
    ...                      index=part.region_ids)
    >>> m = explore_report(part.join(table))
    >>> type(m).__name__
    'Map'
    """
    column = check_text(column, "column")
    report = _check_report(report, extra=[column])
    try:
        import folium  # noqa: F401
        import mapclassify  # noqa: F401
    except ImportError as err:
        raise ImportError(
            f"explore_report needs the optional packages folium and mapclassify ({err}); "
            "install them with: pip install folium mapclassify  (or use "
            "plot_uncertainty_choropleth for a static map)"
        ) from err
    reliability = _reliability(report)
    suppressed = _suppressed(report)
    meta = _meta(report)
    level = f" ({_level_text(meta)})" if _level_text(meta) else ""
    cohorts = _numeric_column(report, "cohort", "the report")

    shown = report.copy()
    shown.attrs = {}
    try:
        values = pd.Series(_numeric_column(shown, column, "the report"), index=shown.index)
    except InvalidInput:
        raise InvalidInput(
            f"column {column!r} is not numeric (dtype {report[column].dtype}); colour by a "
            "numeric column such as 'value', 'error_bar' or 'cv'") from None
    values[suppressed] = np.nan
    colour_col = "__value" if column == "value" else column
    shown[colour_col] = values
    estimate = []
    for v, e, s in zip(report["value"], report["error_bar"], suppressed, strict=True):
        estimate.append("suppressed" if s else f"{_fmt(v)} ± {_fmt(e, 3)}")
    shown["estimate"] = estimate
    if "ci_low" in report.columns and "ci_high" in report.columns:
        shown["interval"] = [
            "—" if s else f"[{_fmt(a)}, {_fmt(b)}]"
            for a, b, s in zip(report["ci_low"], report["ci_high"], suppressed, strict=True)
        ]
    shown["cohort_n"] = [
        (_cohort_text(n, bool(sp), meta) or "below the floor").replace("n=", "")
        .replace("n<", "<")
        for n, sp in zip(cohorts, suppressed, strict=True)
    ]
    if "cv" in report.columns:
        shown["cv_text"] = ["—" if s else _fmt(c, 2) for c, s in
                            zip(report["cv"], suppressed, strict=True)]
    shown["reliability_class"] = [
        "suppressed" if s else (r if r is not None else "unknown")
        for r, s in zip(reliability, suppressed, strict=True)
    ]
    shown["region"] = [str(i) for i in report.index]
    fields = ["region", "estimate", "interval", "cohort_n", "cv_text", "reliability_class"]
    aliases = ["region", f"value ± error bar{level}", f"interval{level}", "cohort", "CV",
               "reliability"]
    if column not in ("value",):
        fields.insert(1, colour_col)
        aliases.insert(1, column)
    keep = [(f, a) for f, a in zip(fields, aliases, strict=True) if f in shown.columns]
    shown = shown[[*dict.fromkeys([colour_col, *[f for f, _ in keep]]), shown.geometry.name]]

    # As on the static map: opacity by class; a value without a class counts as low.
    opacity = {"high": 0.8, "medium": 0.45, "low": 0.2, "suppressed": 0.6, "unknown": 0.2}

    def _style(feature: dict[str, Any]) -> dict[str, Any]:
        cls = feature["properties"].get("reliability_class", "unknown")
        style: dict[str, Any] = {"fillOpacity": opacity.get(cls, 0.2)}
        if cls == "suppressed":
            style.update({"fillColor": "#bdbdbd", "dashArray": "4 3"})
        return style

    caption_bits = [str(meta.get("metric", column))]
    if meta.get("round_index") is not None:
        caption_bits.append(f"round {meta['round_index']}")
    if _meta_number(meta, "epsilon") is not None:
        caption_bits.append(f"ε={_meta_number(meta, 'epsilon'):g}{_relation_text(meta)}")
    options: dict[str, Any] = {
        "column": colour_col,
        "cmap": "viridis",
        "tooltip": [f for f, _ in keep],
        "tooltip_kwds": {"aliases": [a for _, a in keep], "localize": True},
        "style_kwds": {"color": "#ffffff", "weight": 1, "style_function": _style},
        "missing_kwds": {"color": "#bdbdbd", "label": "suppressed / no data"},
        "legend_kwds": {"caption": " · ".join(caption_bits)},
    }
    if "tooltip" in kwargs and "tooltip_kwds" not in kwargs:
        options.pop("tooltip_kwds")  # our aliases name our fields only
    for merged in ("style_kwds", "tooltip_kwds", "legend_kwds", "missing_kwds"):
        if merged in kwargs and merged in options:
            kwargs[merged] = {**options[merged], **kwargs[merged]}
    options.update(kwargs)
    if options.get("scheme") is None:  # the static map's robust default colour range
        published = np.asarray(values[~suppressed], dtype=np.float64)
        lo, hi = _colour_range(published[np.isfinite(published)], None)
        if hi > lo:
            options.setdefault("vmin", lo)
            options.setdefault("vmax", hi)
    try:
        m = shown.explore(**options)
    except (TypeError, ValueError, KeyError, AttributeError) as err:
        raise InvalidInput(f"GeoDataFrame.explore refused the map options ({type(err).__name__}: "
                           f"{str(err)[:200]}); check the keywords passed through") from None
    _add_suppressed_stripes(m, shown[suppressed])
    _add_reliability_legend(m, opacity, meta)
    return m


_LEGEND_HTML = """
<div id="spatialdp-reliability-legend" style="position: fixed; bottom: 24px; left: 12px;
 z-index: 9999; background: rgba(255,255,255,0.92); padding: 8px 10px; border-radius: 4px;
 box-shadow: 0 1px 4px rgba(0,0,0,0.3); font: 12px/1.35 sans-serif; color: #222;">
 <div style="font-weight: bold; margin-bottom: 4px;">Opacity = reliability</div>
 <div style="margin-bottom: 4px; max-width: 230px;">Colour is the value; the fainter a
 region, the larger its noise relative to its value (coefficient of variation, CV).</div>
 {rows}
 <div style="margin-top: 4px;"><span style="display: inline-block; width: 26px; height: 12px;
 vertical-align: middle; border: 1px solid #8a8a8a; background: repeating-linear-gradient(
 -45deg, #6b6b6b 0 2px, #d9d9d9 2px 6px);"></span> suppressed: cohort below {floor}, nothing
 published</div>
</div>
"""


def _add_reliability_legend(m: Any, opacity: dict[str, float], meta: dict[str, Any]) -> None:
    """Add a fixed HTML key: opacity means reliability; stripes mean suppressed."""
    import folium

    labels = {"high": "high (CV &lt; 0.12)", "medium": "medium (CV 0.12–0.40)",
              "low": "low (CV &gt; 0.40)"}
    rows = "".join(
        f'<div><span style="display: inline-block; width: 26px; height: 12px; '
        f"vertical-align: middle; border: 1px solid #8a8a8a; background: rgba(33, 145, 140, "
        f'{opacity[k]});"></span> {labels[k]}</div>' for k in ("high", "medium", "low"))
    floor = meta.get("min_cohort")
    floor_text = f"n = {int(floor):,}" if isinstance(floor, (int, np.integer)) else "the floor"
    html = _LEGEND_HTML.replace("{rows}", rows).replace("{floor}", floor_text)
    m.get_root().html.add_child(folium.Element(html))


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
