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

from spatialdp._validation import check_flag, check_number, check_text, fail
from spatialdp.exceptions import InvalidInput
from spatialdp.schema import MAP_COLUMNS, NEIGHBOUR_NAME, epsilon_text
from spatialdp.schema import RELIABILITY_CLASSES as _RELIABILITY_CLASSES

if TYPE_CHECKING:
    import geopandas as gpd


#: Columns a map needs: the report schema's own subset.
REPORT_COLUMNS = MAP_COLUMNS

#: Fill opacity of each published reliability class on the maps.
RELIABILITY_ALPHA: Mapping[str, float] = {"high": 1.0, "medium": 0.5, "low": 0.22}


#: Largest side of a figure or panel, in inches (beyond it a draw exhausts memory).
MAX_INCHES = 50.0


def _require_columns(frame: Any, required: Iterable[str], what: str, fix: str) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise InvalidInput(f"{what} must be a (Geo)DataFrame, got {type(frame).__name__}; {fix}")
    required = [check_text(c, "column") for c in required]
    if frame.columns.duplicated().any():
        repeated = list(frame.columns[frame.columns.duplicated()])[:5]
        raise InvalidInput(f"{what} repeats the column names {repeated}; {fix}")
    missing = [c for c in required if c not in frame.columns]
    if missing:
        _refuse_file_table(frame, missing, what)
        raise InvalidInput(
            f"{what} is missing the required columns {missing} (it has "
            f"{[str(c) for c in frame.columns]}); {fix}"
        )


def _refuse_file_table(frame: pd.DataFrame, missing: list[str], what: str) -> None:
    """Refuse a report file's table (``loss_value`` or ``loss.value``) naming ``read_report``.

    A report read with ``geopandas.read_file`` has one column per metric and
    statistic; the maps draw one metric's frame, which ``read_report`` rebuilds.
    """
    found = [str(c) for c in frame.columns if str(c).endswith(("_value", ".value"))]
    if not found:
        return
    metric = found[0][: -len("_value")]
    raise InvalidInput(
        f"{what} has the columns of a report file ({', '.join(found[:3])}), not those of "
        f"one metric's frame ({missing[:4]} ...); read the file with "
        f"spatialdp.read_report(path)['{metric}'] and draw that (or "
        f"spatialdp.read_report(path).plot('{metric}')): it restores the columns, the "
        "metadata the titles need, and the geometry")


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
    """Return the ``suppressed`` flags (missing counts as published); refuse non-flags.

    ``"False"`` is not False: a text column would make every region suppressed.
    """
    flags = report["suppressed"]
    known = flags[flags.notna()]
    if not (pd.api.types.is_bool_dtype(known.dtype) or known.isin([0, 1]).all()):
        bad = known[~known.isin([0, 1])].iloc[0]
        raise InvalidInput(
            f"the 'suppressed' column holds {bad!r:.40}, not True/False; the report schema "
            "flags suppressed regions with booleans")
    return np.asarray(flags.notna().to_numpy() & (flags.to_numpy(dtype=object) == 1),
                      dtype=bool)


def _size(value: Any, name: str) -> tuple[float, float]:
    """Return a (width, height) in inches: two positive finite numbers, at most MAX_INCHES."""
    fix = f"pass (width, height) in inches, each in (0, {MAX_INCHES:g}]"
    if isinstance(value, (str, bytes)) or not isinstance(value, (tuple, list, np.ndarray)):
        raise fail(name, value, "is not a (width, height) pair", fix)
    if len(value) != 2:
        raise fail(name, value, f"has {len(value)} values, not 2", fix)
    width, height = (check_number(v, name, low=0.0, low_open=True, high=MAX_INCHES, fix=fix)
                     for v in value)
    return width, height


def _optional_text(value: Any, name: str) -> str | None:
    return None if value is None else check_text(value, name, allow_empty=True)


def _optional_flag(value: Any, name: str) -> bool | None:
    return None if value is None else check_flag(value, name)


def _optional_number(value: Any, name: str) -> float | None:
    return None if value is None else check_number(
        value, name, fix="pass a finite number or None for the default")


def _numeric_column(frame: pd.DataFrame, column: str, what: str) -> NDArray[np.float64]:
    """Return a column as float64 (NA as NaN); refuse text, bools and other non-numbers."""
    values = frame[column]
    if pd.api.types.is_bool_dtype(values.dtype):
        raise InvalidInput(f"{what} column {column!r} holds booleans, not numbers; give numbers")
    try:
        numeric = pd.to_numeric(values)
        if numeric.dtype.kind not in "iuf" or any(
                isinstance(v, (bool, np.bool_)) for v in values.to_numpy(dtype=object)):
            raise TypeError(numeric.dtype)
        return numeric.to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError, OverflowError):
        raise InvalidInput(
            f"{what} column {column!r} is not numeric (dtype {values.dtype}); give numbers "
            "(NaN where suppressed)") from None


def _meta(frame: pd.DataFrame) -> dict[str, Any]:
    meta = frame.attrs.get("spatialdp", {})
    return dict(meta) if isinstance(meta, Mapping) else {}


def _meta_number(meta: Mapping[str, Any], key: str) -> float | None:
    """Return a finite number from the metadata, or None (absent, or edited into junk)."""
    value = meta.get(key)
    if isinstance(value, (bool, np.bool_, str, bytes)) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if np.isfinite(number) else None


def _level_text(meta: Mapping[str, Any]) -> str:
    """``95%`` from the metadata's alpha (empty when it has none, or not a level)."""
    alpha = _meta_number(meta, "alpha")
    return f"{1 - alpha:.0%}" if alpha is not None and 0 < alpha < 1 else ""


def _epsilon_text(meta: Mapping[str, Any]) -> str:
    """``ε = 0.4 (loss 0.2, ratio 0.2)``: what the release was charged, then its split.

    Reads the split (``epsilon_split`` of a frame, or a per-metric ``epsilon``
    mapping of a report's metadata); a bare ``epsilon`` number is the total.
    """
    split = meta.get("epsilon_split", meta.get("epsilon"))
    if isinstance(split, Mapping):
        try:
            text = epsilon_text(split) if split else ""
        except (TypeError, ValueError, ArithmeticError):
            return ""  # metadata edited by hand: no label rather than a wrong one
        return f"ε = {text}{_relation_text(meta)}" if text else ""
    number = _meta_number(meta, "epsilon")
    return f"ε = {number:g}{_relation_text(meta)}" if number is not None else ""


def _relation_name(meta: Mapping[str, Any]) -> str:
    """``add/remove`` or ``replace-one``: the relation epsilon holds for ("" if unknown)."""
    return NEIGHBOUR_NAME.get(str(meta.get("neighbours")), "")


def _relation_text(meta: Mapping[str, Any]) -> str:
    """`` (add/remove)`` or `` (replace-one)`` after an epsilon ("" if unknown)."""
    relation = _relation_name(meta)
    return f" ({relation})" if relation else ""


def _cohort_text(cohort: Any, suppressed: bool, meta: Mapping[str, Any]) -> str | None:
    """``n=1,234``; a suppressed region shows only that it is under the floor."""
    if suppressed:
        floor = meta.get("min_cohort")
        try:
            return f"n<{int(floor):,}" if floor is not None else None
        except (TypeError, ValueError, OverflowError):
            return None  # metadata edited by hand: no label rather than a wrong one
    if pd.isna(cohort) or not np.isfinite(cohort):
        return None
    # Under add/remove the cohort is a noised count, and says so.
    return f"n≈{int(cohort):,}" if meta.get("neighbours") == "add_remove" else f"n={int(cohort):,}"


def _value_title(meta: Mapping[str, Any]) -> str | None:
    """Return what ``value`` is for a reader: the spec's label and unit, when known."""
    label = meta.get("value_label")
    if isinstance(label, str) and label.strip():
        return label
    metric = meta.get("metric")
    return None if metric is None else str(metric)


def _quantity(meta: Mapping[str, Any]) -> str | None:
    """Return the label without its unit (for "margin of error of ...")."""
    label = meta.get("quantity")
    if isinstance(label, str) and label.strip():
        return label
    return _value_title(meta)


def _unit_suffix(meta: Mapping[str, Any]) -> str:
    unit = meta.get("value_unit")
    return f" ({unit})" if isinstance(unit, str) and unit.strip() else ""


_COLUMN_TEXT = {
    "error_bar": "margin of error{level} of {q}{u}",
    "noise_std": "noise standard deviation of {q}{u}",
    "ci_low": "lower end of the{level} interval of {q}{u}",
    "ci_high": "upper end of the{level} interval of {q}{u}",
    "cv": "coefficient of variation of {q}",
}


def _column_name(meta: Mapping[str, Any], column: str) -> str:
    """Return what ``column`` shows: the metric's label (and unit), or ``metric: column``."""
    title = _value_title(meta)
    if title is None:
        return column
    if column == "value":
        return title
    template = _COLUMN_TEXT.get(column)
    if template is None:
        return f"{title}: {column}"
    level = _level_text(meta)
    return template.format(level=f" ({level})" if level else "", q=_quantity(meta),
                           u=_unit_suffix(meta))


def _accounting_label(meta: Mapping[str, Any]) -> str:
    """Return ``[SIMULATION]`` or ``[UNACCOUNTED]`` from the metadata (empty for a release)."""
    label = {"simulation": "SIMULATION", "unaccounted": "UNACCOUNTED"}.get(
        str(meta.get("accounting")))
    return f"[{label}]" if label else ""


def _labelled(title: str, meta: Mapping[str, Any]) -> str:
    """Return ``title`` led by the accounting label (a caller's own title too).

    A simulation or an unaccounted release never reaches a figure unmarked.

    Examples
    --------
    >>> _labelled("loss by region", {"accounting": "simulation"})
    '[SIMULATION] loss by region'
    >>> _labelled("[SIMULATION] loss", {"accounting": "simulation"})
    '[SIMULATION] loss'
    >>> _labelled("loss", {"accounting": "ledger"})
    'loss'
    """
    label = _accounting_label(meta)
    if not label or label in title:
        return title
    return f"{label} {title}" if title else label


def _smoothing_text(meta: Mapping[str, Any]) -> str:
    """Return ``smoothed: <model> · post-processing, no ε charged``, or "" for a raw report.

    Examples
    --------
    >>> _smoothing_text({"smoothed": "Fay-Herriot"})
    'smoothed: Fay-Herriot · post-processing, no ε charged'
    >>> _smoothing_text({})
    ''
    """
    model = meta.get("smoothed")
    if not isinstance(model, str) or not model.strip():
        return ""
    return f"smoothed: {model} · post-processing, no ε charged"


def _title(meta: Mapping[str, Any], column: str, n_suppressed: int, n_regions: int) -> str:
    head = _labelled(_column_name(meta, column), meta)
    if meta.get("round_index") is not None:
        head += f" · round {meta['round_index']}"
    details = []
    smoothing = _smoothing_text(meta)
    if smoothing:
        head += f"\n{smoothing}"
    eps = _epsilon_text(meta)
    if eps:
        details.append(eps)
    if _level_text(meta):
        details.append(f"{_level_text(meta)} error bars")
    # Exact: the suppressed regions are drawn on the map anyway (the policy of
    # docs/threat_model.md: exact under replace-one, from noised counts under add/remove).
    details.append(f"{n_suppressed} of {n_regions} regions suppressed")
    return head + "\n" + " · ".join(details)


def _colour_range(shown: NDArray[np.float64], robust: bool | None) -> tuple[float, float]:
    """Return the default colour range of the published values (see ``robust``)."""
    if not shown.size:
        return 0.0, 1.0
    if robust:
        return float(np.percentile(shown, 2.0)), float(np.percentile(shown, 98.0))
    lo, hi = float(shown.min()), float(shown.max())
    if robust is None:
        q1, q3 = np.percentile(shown, [25.0, 75.0])
        iqr = q3 - q1
        if iqr > 0:
            inside = shown[(shown >= q1 - 3.0 * iqr) & (shown <= q3 + 3.0 * iqr)]
            lo, hi = float(inside.min()), float(inside.max())
    return lo, hi
