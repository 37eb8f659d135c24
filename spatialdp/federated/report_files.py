"""The files of a regional report, read back: :func:`read_report`.

:meth:`RegionalReport.write <spatialdp.federated.RegionalReport.write>` writes
one report as a GeoPackage, a GeoParquet and a CSV (wide or long) with its JSON
sidecar, each carrying the report's metadata (:data:`~spatialdp.federated.regional.REPORT_FORMAT`):
the GeoPackage in its layer metadata, the GeoParquet in its file metadata (keys
``spatialdp`` and ``spatialdp_columns``), the CSV in ``<stem>.json`` beside it.
:func:`read_report` rebuilds the :class:`~spatialdp.federated.RegionalReport`
from any one of them.

Reading is not a release: nothing is noised or charged, and the report says
where it was read from (``accounting["read_from"]``) beside the accounting of
the release it records.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp._validation import check_path, fail
from spatialdp.exceptions import InvalidInput, InvalidSpec, PartitionMismatch
from spatialdp.federated._estimate import Estimate
from spatialdp.federated.metrics import HistogramSpec, MetricSpec
from spatialdp.federated.regional import (
    LONG_STATISTICS,
    REPORT_FORMAT,
    RegionalReport,
    label_frames,
)
from spatialdp.privacy.combined_noise import ratio_interval
from spatialdp.schema import RELIABILITY_CLASSES

__all__ = ["read_report"]

#: The file suffixes :func:`read_report` reads.
REPORT_SUFFIXES = (".gpkg", ".parquet", ".csv", ".json")

#: The columns of one metric's frame after its histogram buckets, in the order
#: :func:`~spatialdp.federated.regional_report` builds them.
FRAME_COLUMNS = ("value", "ci_low", "ci_high", "error_bar", "noise_std", "cohort", "cv",
                 "reliability", "suppressed", "clip_low", "clip_high", "estimator", "metric",
                 "partition_version", "round_index", "noise_scale", "noisy_sum",
                 "noisy_count", "sum_scale", "count_scale")

#: Metadata keys that belong to the report (the rest is the release's accounting).
_REPORT_KEYS = frozenset({"format", "partition_version", "round_index", "epsilon", "alpha",
                          "min_cohort", "suppressed_regions", "neighbours", "metrics",
                          "metric_specs", "estimators"})
#: Keys of a release target's record (``Accounting.metadata()``) that the metadata holds
#: beside the report's own, and ``read_from`` (a report read, then written again).
_ACCOUNTING_KEYS = ("accounting", "simulated", "ledger", "epoch", "line_item", "reason",
                    "read_from")
_TEXT_COLUMNS = ("estimator", "metric", "partition_version")
_LAYER = "regional_report"
_FIX_REWRITE = "read the files as RegionalReport.write() made them (or write the report again)"


def read_report(path: str | os.PathLike[str], *, partition: Any = None) -> RegionalReport:
    """Read a regional report back from one of the files :meth:`RegionalReport.write` made.

    Parameters
    ----------
    path : str or path-like
        ``<stem>.gpkg`` (metadata in the layer metadata), ``<stem>.parquet``
        (GeoParquet, metadata in the file metadata), or ``<stem>.csv`` /
        ``<stem>.json`` (the CSV, wide or long, with its JSON sidecar). Column
        names may be ``"sql"`` or ``"dotted"`` (the metadata says which).
    partition : Partition, optional
        For a CSV (which has no geometry): the partition the report is keyed by,
        whose regions give the frames their geometry (its version must be the
        report's). Without it a CSV's frames have empty geometries: the values
        read, the maps need it. Refused with a GeoPackage or a GeoParquet,
        which carry their own geometries.

    Returns
    -------
    RegionalReport
        The report as written: every frame's values, error bars, intervals,
        cohorts, reliability and suppressed flags, the metric specs (labels,
        units, buckets), epsilon per metric, alpha, round, floor, neighbouring
        relation, partition version and the release's accounting, plus
        ``accounting["read_from"]`` (the file). Nothing is charged or drawn.

        What cannot be read exactly is what was never published: the
        ``estimates`` of a ratio estimator keep no noisy sums of suppressed
        regions (NaN), and a histogram's bucket intervals other than the top
        bucket's (not in the files) are recomputed from the published columns:
        exactly for means (value ± error bar), to float rounding for ratio
        estimates (from value × noisy count).

    Raises
    ------
    InvalidInput
        A file that is missing, of another kind, not a spatialdp report (no
        metadata), of another metadata format, or edited (its columns disagree
        with its column table or its metadata).
    PartitionMismatch
        ``partition`` is not the one the report is keyed by.

    Examples
    --------
    >>> import tempfile
    >>> from spatialdp.datasets import synthetic_fleet, us_states_partition
    >>> from spatialdp.federated import MetricSpec, device_report, regional_report
    >>> from spatialdp.privacy import Simulation
    >>> states = us_states_partition()
    >>> fleet = synthetic_fleet(20_000, rng=0)
    >>> examples = pd.DataFrame({"client_id": fleet.device_id, "region_id": fleet.region_id,
    ...                          "loss": 1.0})
    >>> spec = MetricSpec("loss", 0.0, 4.0, label="squared error", unit="m²")
    >>> clients = device_report(examples, loss_spec=spec, partition=states)
    >>> report = regional_report(clients, states, [spec], epsilon=0.5,
    ...                          target=Simulation(rng=0), min_cohort=100)
    >>> gpkg, parquet, csv, sidecar = report.write(tempfile.mkdtemp())
    >>> back = read_report(gpkg)
    >>> back["loss"].value.equals(report["loss"].value), back.simulated
    (True, True)
    >>> back.estimates["loss"].spec.title
    'squared error (m²)'
    >>> read_report(csv, partition=states)["loss"].error_bar.equals(report["loss"].error_bar)
    True
    """
    file = check_path(path, "path", "pass the .gpkg, .parquet, .csv or .json a report wrote",
                      kind="file path")
    suffix = file.suffix.lower()
    if suffix not in REPORT_SUFFIXES:
        raise fail("path", os.fspath(file), f"is not a report file ({suffix or 'no suffix'})",
                   "pass the .gpkg, .parquet, .csv or .json that RegionalReport.write() made")
    if suffix in (".csv", ".json"):
        csv, sidecar = file.with_suffix(".csv"), file.with_suffix(".json")
        meta = _read_sidecar(sidecar)
        layout = meta.get("layout")
        if layout == "long":
            table = _read_csv(csv, ["region_id", "metric", "statistic", "reliability",
                                    "partition_version"])
            _check_columns(table.columns, meta["columns"], csv)
            frames = _frames_from_long(table, meta, csv)
        else:
            table = _read_csv(csv, ["region_id", *(
                str(row["column"]) for row in meta["columns"]
                if row.get("statistic") in (*_TEXT_COLUMNS, "reliability", "accounting"))])
            _check_columns(table.columns, meta["columns"], csv)
            table = table.set_index("region_id")
            frames = _frames_from_wide(table, meta, meta["columns"], csv)
        names = _names(table) if layout != "long" else None
        frames = _with_geometry(frames, meta, partition, csv, names)
        return _report(frames, meta, file)
    if partition is not None:
        raise fail("partition", partition, f"is given with a {suffix} file, which carries its "
                   "own geometries", "leave partition out (it is for a CSV)")
    table, meta, columns = _read_gpkg(file) if suffix == ".gpkg" else _read_parquet(file)
    _check_columns([c for c in table.columns if c != table.geometry.name], columns, file)
    wide = table.set_index("region_id")
    frames = _frames_from_wide(pd.DataFrame(wide.drop(columns=table.geometry.name)), meta,
                               columns, file)
    frames = {name: _geo(frame, wide.geometry.array, table.crs, _names(wide))
              for name, frame in frames.items()}
    return _report(frames, meta, file)


# ---------------------------------------------------------------------------- the files
def _missing(file: Path) -> None:
    if not file.is_file():
        raise fail("path", os.fspath(file), "does not exist",
                   "pass a file that RegionalReport.write() made (and keep the CSV and its "
                   ".json together)")


def _not_a_report(file: Path, why: str) -> InvalidInput:
    return fail("path", os.fspath(file), f"is not a spatialdp regional report ({why})",
                "pass a file that RegionalReport.write() made")


def _decode(text: str | bytes | None, file: Path, what: str) -> Any:
    try:
        return json.loads(text) if text is not None else None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise fail("path", os.fspath(file), f"has {what} that is not JSON ({err})",
                   _FIX_REWRITE) from None


def _check_metadata(meta: Any, file: Path) -> dict[str, Any]:
    """Return the report's metadata if it is of :data:`REPORT_FORMAT`; refuse anything else."""
    if not isinstance(meta, dict):
        raise _not_a_report(file, "its spatialdp metadata is not a JSON object")
    found = meta.get("format")
    if found != REPORT_FORMAT:
        written = ("written before read_report existed (no format tag)" if found is None
                   else "of another format")
        raise fail("path", os.fspath(file), f"holds report metadata {written}: format "
                   f"{found!r}, this spatialdp reads {REPORT_FORMAT!r}",
                   "write the report again with this version of spatialdp")
    missing = sorted(_REPORT_KEYS - set(meta))
    if missing:
        raise fail("path", os.fspath(file), f"has report metadata without {missing}",
                   _FIX_REWRITE)
    return meta


def _read_sidecar(sidecar: Path) -> dict[str, Any]:
    if not sidecar.is_file():
        raise fail("path", os.fspath(sidecar.with_suffix(".csv")),
                   f"has no metadata sidecar {sidecar.name} beside it, so it is not a "
                   "spatialdp report (or was separated from its sidecar)",
                   "keep <stem>.csv and <stem>.json together, as RegionalReport.write() "
                   "made them")
    try:
        text = sidecar.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise fail("path", os.fspath(sidecar), f"cannot be read ({err})", _FIX_REWRITE) from None
    meta = _check_metadata(_decode(text, sidecar, "a sidecar"), sidecar)
    if meta.get("layout") not in ("wide", "long") or not isinstance(meta.get("columns"), list):
        raise fail("path", os.fspath(sidecar), "has no layout ('wide' or 'long') and column "
                   "table", _FIX_REWRITE)
    return meta


def _read_csv(csv: Path, text: list[str]) -> pd.DataFrame:
    """Read a report's CSV; ``text`` columns stay text (ids "01001", a version "1e23...")."""
    _missing(csv)
    try:
        # Only empty fields are missing values: a region may be called "NA". The default
        # float parser reads back the shortest repr that to_csv wrote, exactly.
        return pd.read_csv(csv, dtype=dict.fromkeys(text, str), keep_default_na=False,
                           na_values=[""])
    except (OSError, ValueError, UnicodeDecodeError) as err:
        first = (str(err).splitlines() or [type(err).__name__])[0]
        raise fail("path", os.fspath(csv), f"cannot be read as a CSV ({first})",
                   _FIX_REWRITE) from None


def _read_gpkg(file: Path) -> tuple[gpd.GeoDataFrame, dict[str, Any], list[dict[str, Any]]]:
    import pyogrio

    _missing(file)
    try:
        layers = [str(name) for name, _ in pyogrio.list_layers(file)]
    except Exception as err:  # pyogrio raises its own DataSourceError and friends
        first = (str(err).splitlines() or [type(err).__name__])[0]
        raise fail("path", os.fspath(file), f"cannot be read as a GeoPackage ({first})",
                   _FIX_REWRITE) from None
    if _LAYER not in layers:
        raise _not_a_report(file, f"no layer {_LAYER!r}; it has {layers}")
    stored = pyogrio.read_info(file, layer=_LAYER).get("layer_metadata") or {}
    if "spatialdp" not in stored:
        raise _not_a_report(file, "no spatialdp layer metadata")
    meta = _check_metadata(_decode(stored["spatialdp"], file, "metadata"), file)
    columns = _decode(stored.get("spatialdp_columns"), file, "a column table")
    table = gpd.read_file(file, layer=_LAYER, engine="pyogrio")
    return table, meta, _column_table(columns, file)


def _read_parquet(file: Path) -> tuple[gpd.GeoDataFrame, dict[str, Any], list[dict[str, Any]]]:
    import pyarrow.parquet as pq

    _missing(file)
    try:
        stored = pq.read_schema(file).metadata or {}
    except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
        first = (str(err).splitlines() or [type(err).__name__])[0]
        raise fail("path", os.fspath(file), f"cannot be read as Parquet ({first})",
                   _FIX_REWRITE) from None
    if b"spatialdp" not in stored:
        raise _not_a_report(file, "no spatialdp file metadata")
    meta = _check_metadata(_decode(stored[b"spatialdp"], file, "metadata"), file)
    columns = _decode(stored.get(b"spatialdp_columns"), file, "a column table")
    try:
        table = gpd.read_parquet(file)
    except ValueError as err:
        raise fail("path", os.fspath(file), f"is not a GeoParquet file ({err})",
                   _FIX_REWRITE) from None
    return table, meta, _column_table(columns, file)


def _column_table(columns: Any, file: Path) -> list[dict[str, Any]]:
    if not isinstance(columns, list) or not all(isinstance(c, dict) and "column" in c
                                                for c in columns):
        raise fail("path", os.fspath(file), "has no column table (spatialdp_columns)",
                   _FIX_REWRITE)
    return columns


def _check_columns(found: Iterable[Any], table: Sequence[Mapping[str, Any]], file: Path
                   ) -> None:
    """Refuse a file whose columns are not those its column table lists, in that order."""
    listed = [str(c["column"]) for c in table]
    columns = [str(c) for c in found]
    if columns != listed:
        extra = [c for c in columns if c not in listed]
        lost = [c for c in listed if c not in columns]
        what = (f"lacks {lost[:4]}" if lost else "") + (" and " if lost and extra else "") + (
            f"has columns not in its table {extra[:4]}" if extra else "")
        raise fail("path", os.fspath(file), "was edited: its columns disagree with its "
                   f"column table ({what or 'another order'})", _FIX_REWRITE)


# ---------------------------------------------------------------------------- the frames
def _specs(meta: Mapping[str, Any], file: Path) -> dict[str, MetricSpec | HistogramSpec]:
    """Return each metric's spec, rebuilt from ``metric_specs`` and checked against its key."""
    names = list(meta["metrics"])
    for key in ("epsilon", "metric_specs", "estimators"):
        if sorted(meta[key]) != sorted(names):
            raise fail("path", os.fspath(file), f"has metadata whose {key} names "
                       f"{sorted(meta[key])}, not the metrics {sorted(names)}", _FIX_REWRITE)
    out: dict[str, MetricSpec | HistogramSpec] = {}
    for name in names:
        desc = meta["metric_specs"][name]
        try:
            spec: MetricSpec | HistogramSpec
            if desc["kind"] == "histogram":
                spec = HistogramSpec(desc["name"], tuple(desc["edges"]), desc["mass_cap"],
                                     desc["version"], label=desc.get("label"),
                                     unit=desc.get("unit"))
            else:
                spec = MetricSpec(desc["name"], desc["clip_low"], desc["clip_high"],
                                  desc["version"], desc.get("present"), label=desc.get("label"),
                                  unit=desc.get("unit"))
        except (KeyError, TypeError, InvalidSpec) as err:
            raise fail("path", os.fspath(file), f"has an unreadable spec of {name!r} ({err})",
                       _FIX_REWRITE) from None
        if (spec.name, spec.key, spec.fingerprint) != (name, meta["metrics"][name],
                                                       desc.get("fingerprint")):
            raise fail("path", os.fspath(file), f"has a spec of {name!r} that is not the one "
                       f"released ({meta['metrics'][name]}, fingerprint "
                       f"{desc.get('fingerprint')})", _FIX_REWRITE)
        out[name] = spec
    return out


def _frames_from_wide(wide: pd.DataFrame, meta: Mapping[str, Any],
                      columns: Sequence[Mapping[str, Any]], file: Path
                      ) -> dict[str, pd.DataFrame]:
    """Return each metric's columns of a wide table, under their frame names."""
    specs = _specs(meta, file)
    frames = {}
    for name, spec in specs.items():
        named = {str(row["column"]): str(row.get("bucket_label", row["statistic"]))
                 for row in columns if row.get("metric") == name}
        frames[name] = _typed(wide[list(named)].rename(columns=named), spec, file)
    _check_accounting_column(wide, meta, file)
    return frames


def _frames_from_long(long: pd.DataFrame, meta: Mapping[str, Any], file: Path
                      ) -> dict[str, pd.DataFrame]:
    """Return each metric's frame of a long table (one row per region, metric, statistic)."""
    specs = _specs(meta, file)
    found = sorted(set(long["metric"]))
    if found != sorted(specs):
        raise fail("path", os.fspath(file), f"was edited: it holds the metrics {found}, its "
                   f"metadata {sorted(specs)}", _FIX_REWRITE)
    frames = {}
    for name, spec in specs.items():
        rows = long[long["metric"] == name]
        buckets = ({f"b{i}": label for i, label in enumerate(spec.labels)}
                   if isinstance(spec, HistogramSpec) else {})
        expected = sorted([*LONG_STATISTICS, *buckets])
        if sorted(set(rows["statistic"])) != expected or rows.duplicated(
                ["region_id", "statistic"]).any():
            raise fail("path", os.fspath(file), f"was edited: metric {name!r} has the "
                       f"statistics {sorted(set(rows['statistic']))[:6]}..., not one row "
                       f"each of {expected[:6]}...", _FIX_REWRITE)
        regions = pd.Index(pd.unique(rows["region_id"]), name="region_id")
        numbers = rows.pivot(index="region_id", columns="statistic", values="estimate")
        numbers = numbers.reindex(regions).rename(columns=buckets)
        facts = rows.drop_duplicates("region_id").set_index("region_id").reindex(regions)
        low, high = spec.value_range
        frame = pd.DataFrame({
            **{label: numbers[label] for label in buckets.values()},
            **{col: numbers[col] for col in ("value", "ci_low", "ci_high", "error_bar",
                                             "noise_std", "cohort", "cv")},
            "reliability": facts["reliability"], "suppressed": facts["suppressed"],
            "clip_low": low, "clip_high": high, "estimator": meta["estimators"][name],
            "metric": meta["metrics"][name], "partition_version": facts["partition_version"],
            "round_index": facts["round_index"],
            **{col: numbers[col] for col in ("noise_scale", "noisy_sum", "noisy_count",
                                             "sum_scale", "count_scale")}}, index=regions)
        frame.columns.name = None
        frames[name] = _typed(frame, spec, file)
    return frames


def _typed(frame: pd.DataFrame, spec: MetricSpec | HistogramSpec, file: Path) -> pd.DataFrame:
    """Return a metric's columns with the frame's dtypes, refusing columns that are not its."""
    order = [*(spec.labels if isinstance(spec, HistogramSpec) else []), *FRAME_COLUMNS]
    if list(frame.columns) != order:
        raise fail("path", os.fspath(file), f"was edited: metric {spec.name!r} has the "
                   f"columns {list(frame.columns)[:5]}..., not {order[:5]}...", _FIX_REWRITE)
    out = {}
    for col in order:
        out[col] = _column(frame[col], col, spec.name, file)
    typed = pd.DataFrame(out, index=pd.Index(frame.index.astype(str), name="region_id"))
    return typed


def _column(values: pd.Series, col: str, metric: str, file: Path) -> Any:
    """Return one column with the dtype :func:`regional_report` gives it."""
    try:
        if col in ("cohort", "round_index"):
            return pd.to_numeric(values).astype("Int64")
        if col == "reliability":
            known = values.astype(str)
            bad = sorted(set(known) - set(RELIABILITY_CLASSES))
            if bad:
                raise ValueError(f"reliability classes {bad[:3]}")
            return pd.Categorical(known, categories=pd.Index(list(RELIABILITY_CLASSES)),
                                  ordered=True)
        if col == "suppressed":
            return _flags(values)
        if col in _TEXT_COLUMNS:
            return values.astype("str")
        return pd.to_numeric(values).astype("float64")
    except (TypeError, ValueError) as err:
        raise fail("path", os.fspath(file), f"has a column {col!r} of {metric!r} that does "
                   f"not hold what a report writes ({err})", _FIX_REWRITE) from None


def _flags(values: pd.Series) -> NDArray[np.bool_]:
    if pd.api.types.is_bool_dtype(values):
        return values.to_numpy(dtype=bool)
    text = values.astype(str).str.lower()
    if not text.isin(["true", "false", "1", "0"]).all():
        raise ValueError("flags that are not true/false")
    return text.isin(["true", "1"]).to_numpy()


def _check_accounting_column(wide: pd.DataFrame, meta: Mapping[str, Any], file: Path) -> None:
    if "accounting" in wide.columns:
        found = sorted(set(wide["accounting"].astype(str)))
        if found != [str(meta.get("accounting"))]:
            raise fail("path", os.fspath(file), f"was edited: its accounting column says "
                       f"{found}, its metadata {meta.get('accounting')!r}", _FIX_REWRITE)


def _with_geometry(frames: Mapping[str, pd.DataFrame], meta: Mapping[str, Any],
                   partition: Any, file: Path, names: pd.Series | None = None
                   ) -> dict[str, gpd.GeoDataFrame]:
    """Return a CSV's frames with the partition's geometries (empty ones without it).

    The region names are the file's (``names``), else the partition's.
    """
    from spatialdp.geo.partition import Partition

    if partition is None:
        return {name: _geo(frame, gpd.GeoSeries([None] * len(frame)).array, None, names)
                for name, frame in frames.items()}
    if not isinstance(partition, Partition):
        raise fail("partition", partition, "is not a Partition",
                   "pass the spatialdp.geo.Partition the report is keyed by")
    if partition.version != meta["partition_version"]:
        raise PartitionMismatch(
            f"partition {partition.key!r} is not the report's partition version "
            f"{meta['partition_version']!r} ({os.fspath(file)}); pass the partition the "
            "report is keyed by")
    regions = partition.regions
    out = {}
    for name, frame in frames.items():
        ids = frame.index
        known = ids.isin(regions.index.astype(str))
        if not known.all() or len(ids) != len(regions):
            raise PartitionMismatch(
                f"{os.fspath(file)} lists regions {list(ids[~known])[:3]} (and "
                f"{len(ids)} in all) that are not the {len(regions)} of partition "
                f"{partition.key!r}; pass the partition the report is keyed by")
        geometry = regions.geometry.set_axis(regions.index.astype(str)).reindex(ids)
        if names is None and partition.names is not None:
            names = partition.names.set_axis(partition.names.index.astype(str))
        out[name] = _geo(frame, geometry.array, regions.crs, names)
    return out


def _geo(frame: pd.DataFrame, geometry: Any, crs: Any, names: pd.Series | None = None
         ) -> gpd.GeoDataFrame:
    """Return a metric's frame with ``geometry`` first, as :func:`regional_report` builds it.

    ``names``: the regions' names (the partition's name column), put after the geometry.
    """
    named = {} if names is None else {"name": names.reindex(frame.index).astype(str).array}
    return gpd.GeoDataFrame({"geometry": geometry, **named, **frame}, index=frame.index,
                            geometry="geometry", crs=crs)


def _names(wide: pd.DataFrame) -> pd.Series | None:
    """Return the region-name column of a wide table (``None`` when the report had none)."""
    if "name" not in wide.columns:
        return None
    return pd.Series(wide["name"].to_numpy(), index=wide.index.astype(str))


# ---------------------------------------------------------------------------- the report
def _report(frames: Mapping[str, pd.DataFrame], meta: Mapping[str, Any], file: Path
            ) -> RegionalReport:
    """Assemble the report: frames, estimates, accounting (with where it was read from)."""
    specs = _specs(meta, file)
    alpha = float(meta["alpha"])
    for name, frame in frames.items():
        _check_frame(frame, name, meta, file)
    estimates = {name: _estimate(frames[name], spec, float(meta["epsilon"][name]),
                                 str(meta["estimators"][name]), alpha)
                 for name, spec in specs.items()}
    every = np.logical_and.reduce([est.suppressed for est in estimates.values()])
    if int(every.sum()) != int(meta["suppressed_regions"]):
        raise fail("path", os.fspath(file), f"was edited: {int(every.sum())} regions are "
                   f"suppressed in every metric, its metadata says "
                   f"{meta['suppressed_regions']}", _FIX_REWRITE)
    accounting = {k: meta[k] for k in _ACCOUNTING_KEYS if k in meta}
    if accounting.get("accounting") not in ("ledger", "simulation", "unaccounted"):
        raise fail("path", os.fspath(file), f"records the accounting "
                   f"{accounting.get('accounting')!r}", _FIX_REWRITE)
    accounting.update(round_index=meta["round_index"], read_from=os.fspath(file))
    report = RegionalReport(
        frames={name: gpd.GeoDataFrame(frame) for name, frame in frames.items()},
        partition_version=str(meta["partition_version"]),
        round_index=None if meta["round_index"] is None else int(meta["round_index"]),
        epsilon={name: float(meta["epsilon"][name]) for name in specs},
        alpha=alpha, min_cohort=int(meta["min_cohort"]),
        suppressed_regions=int(meta["suppressed_regions"]),
        metrics={name: str(key) for name, key in meta["metrics"].items()},
        accounting=accounting, estimates=estimates, neighbours=meta["neighbours"])
    label_frames(report)
    return report


def _check_frame(frame: pd.DataFrame, name: str, meta: Mapping[str, Any], file: Path) -> None:
    """Refuse a frame whose key, partition, round or estimator is not its metadata's."""
    round_index = meta["round_index"]
    expected = {"metric": str(meta["metrics"][name]),
                "partition_version": str(meta["partition_version"]),
                "estimator": str(meta["estimators"][name])}
    for col, value in expected.items():
        found = sorted(set(frame[col].astype(str)))
        if found != [value]:
            raise fail("path", os.fspath(file), f"was edited: {name}.{col} holds {found[:3]}, "
                       f"its metadata {value!r}", _FIX_REWRITE)
    rounds = frame["round_index"]
    if not (rounds.isna().all() if round_index is None else (rounds == round_index).all()):
        raise fail("path", os.fspath(file), f"was edited: {name}.round_index is not the "
                   f"metadata's round {round_index!r}", _FIX_REWRITE)


def _estimate(frame: pd.DataFrame, spec: MetricSpec | HistogramSpec, epsilon: float,
              estimator: str, alpha: float) -> Estimate:
    """Rebuild a metric's :class:`Estimate` from its published columns (see read_report)."""
    def floats(col: str) -> NDArray[np.float64]:
        return frame[col].to_numpy(dtype=np.float64)

    suppressed = frame["suppressed"].to_numpy(dtype=bool)
    bar = floats("error_bar")
    values, low, high = floats("value"), floats("ci_low"), floats("ci_high")
    state: dict[str, NDArray[np.float64]] = {}
    if estimator == "ratio":
        state = {"num": floats("noisy_sum"), "den": floats("noisy_count"),
                 "scale_num": _constant(floats("sum_scale")),
                 "scale_den": _constant(floats("count_scale"))}
    if isinstance(spec, HistogramSpec):
        values = np.column_stack([floats(label) for label in spec.labels])
        if estimator == "ratio":  # the lower buckets' sums are not published: value x count
            q = math.log(2.0) - math.log(alpha)
            den = state["den"][:, None]
            lo, hi = ratio_interval(values * den, den, state["scale_num"][0] * q,
                                    state["scale_den"][0] * q, *spec.value_range)
            lo, hi = np.where(suppressed[:, None], np.nan, lo), np.where(
                suppressed[:, None], np.nan, hi)
        else:
            lo, hi = values - bar[:, None], values + bar[:, None]
        lo[:, -1], hi[:, -1] = low, high  # the top bucket as published
        low, high = lo, hi
    cohort = frame["cohort"].fillna(0).to_numpy(dtype=np.int64)
    return Estimate(spec, values, low, high, bar, floats("noise_scale"), floats("noise_std"),
                    cohort, suppressed, epsilon, estimator, state)


def _constant(published: NDArray[np.float64]) -> NDArray[np.float64]:
    """Return a noise scale the release drew for every region, from its published regions."""
    shown = published[np.isfinite(published)]
    return np.full(published.size, shown[0] if shown.size else np.nan)
