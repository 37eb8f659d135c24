"""The regional report a map draws: its schema, its checks, and the texts read off it.

Shared by the static map (:mod:`spatialdp.viz.maps`), its key
(:mod:`spatialdp.viz._legend`), the folium map (:mod:`spatialdp.viz._explore`)
and the time series (:mod:`spatialdp.viz.timeseries`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp.exceptions import InvalidInput
from spatialdp.federated.schema import MAP_COLUMNS, coarsen_count
from spatialdp.federated.schema import RELIABILITY_CLASSES as _RELIABILITY_CLASSES

if TYPE_CHECKING:
    import geopandas as gpd


#: Columns a map needs: the report schema's own subset.
REPORT_COLUMNS = MAP_COLUMNS

#: Fill opacity of each published reliability class on the maps.
RELIABILITY_ALPHA: Mapping[str, float] = {"high": 1.0, "medium": 0.5, "low": 0.22}


def _require_columns(frame: Any, required: Iterable[str], what: str, fix: str) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise InvalidInput(f"{what} must be a (Geo)DataFrame, got {type(frame).__name__}; {fix}")
    missing = [c for c in required if c not in frame.columns]
    if missing:
        raise InvalidInput(
            f"{what} is missing the required columns {missing} (it has "
            f"{[str(c) for c in frame.columns]}); {fix}"
        )


def _check_report(report: Any, extra: Iterable[str] = ()) -> gpd.GeoDataFrame:
    import geopandas as gpd

    fix = ("pass the per-metric regional report (a GeoDataFrame indexed by region_id with "
           f"columns {list(REPORT_COLUMNS)} and geometry)")
    _require_columns(report, [*REPORT_COLUMNS, *extra], "the report", fix)
    active = getattr(report, "_geometry_column_name", None)
    if not isinstance(report, gpd.GeoDataFrame) or active not in report.columns:
        raise InvalidInput(f"the report has no geometry column; {fix}, e.g. "
                           "partition.join(table)")
    if len(report) == 0:
        raise InvalidInput("the report has 0 regions; there is nothing to draw")
    return report


def _reliability(report: pd.DataFrame) -> NDArray[np.object_]:
    """Reliability per row as plain strings (``None`` when unknown)."""
    raw = report["reliability"]
    values = np.asarray(raw.astype(object).where(raw.notna(), None), dtype=object)
    known = pd.Series([v for v in values if v is not None], dtype=object)
    bad = sorted(set(known.astype(str)) - set(_RELIABILITY_CLASSES))
    if bad:
        raise InvalidInput(
            f"reliability values {bad} are not classes of the report schema; the classes "
            f"are {list(_RELIABILITY_CLASSES)}"
        )
    return values


def _suppressed(report: pd.DataFrame) -> NDArray[np.bool_]:
    flags = report["suppressed"]
    return np.asarray(flags.fillna(False).astype(bool), dtype=bool)


def _meta(frame: pd.DataFrame) -> dict[str, Any]:
    meta = frame.attrs.get("spatialdp", {})
    return dict(meta) if isinstance(meta, Mapping) else {}


def _epsilon_text(meta: Mapping[str, Any]) -> str:
    """``ε = 0.5`` from the metadata (a per-metric dict is read at the metric)."""
    eps = meta.get("epsilon")
    if isinstance(eps, Mapping):
        metric = meta.get("metric")
        if metric in eps:
            eps = eps[metric]
        else:
            return f"ε = {float(sum(eps.values())):g} (all metrics)" if eps else ""
    try:
        return f"ε = {float(eps):g}" if eps is not None else ""
    except (TypeError, ValueError):
        return f"ε = {eps}"


def _cohort_text(cohort: Any, suppressed: bool, meta: Mapping[str, Any]) -> str | None:
    """``n=1,234``; a suppressed region shows only that it is under the floor."""
    if suppressed:
        floor = meta.get("min_cohort")
        return f"n<{int(floor):,}" if floor is not None else None
    return None if pd.isna(cohort) else f"n={int(cohort):,}"


def _column_name(meta: Mapping[str, Any], column: str) -> str:
    """Return what ``column`` shows: the metric's name, with the column unless it is ``value``."""
    metric = meta.get("metric")
    if metric is None:
        return column
    return str(metric) if column == "value" else f"{metric}: {column}"


def _title(meta: Mapping[str, Any], column: str, n_suppressed: int, n_regions: int) -> str:
    head = _column_name(meta, column)
    label = {"simulation": "SIMULATION", "unaccounted": "UNACCOUNTED"}.get(
        str(meta.get("accounting")))
    if label:
        head = f"[{label}] {head}"
    if meta.get("round_index") is not None:
        head += f" · round {meta['round_index']}"
    details = []
    eps = _epsilon_text(meta)
    if eps:
        details.append(eps)
    if meta.get("alpha") is not None:
        details.append(f"{1 - float(meta['alpha']):.0%} error bars")
    # The count is published only coarsened (seed 001), here as everywhere.
    details.append(f"{coarsen_count(n_suppressed)} regions suppressed")
    return head + "\n" + " · ".join(details)
