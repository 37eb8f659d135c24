"""Per-region private metrics for a whole partition in one call.

Each region is a disjoint set of clients, so every region spends the full
evaluation epsilon (parallel composition) and the whole partition, all metrics
together, is one release charged ``epsilon`` (split over the metrics). Regions
whose cohort is below the floor are suppressed (never noised, never
published) and the number of suppressed regions is itself published only
coarsened. The result is a GeoDataFrame per metric, joined
onto the region geometries (schema: :mod:`spatialdp.schema`), ready for
:func:`spatialdp.viz.plot_uncertainty_choropleth` or ``.explore()``.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp._atomic import make_folder, write_atomically
from spatialdp._dask_frames import is_dask
from spatialdp._results import Result
from spatialdp._validation import (
    check_alpha,
    check_cohort_floor,
    check_flag,
    check_output,
    check_text,
    fail,
)
from spatialdp.exceptions import InvalidInput
from spatialdp.federated._estimate import Estimate, NoisyCohort, plan_estimate
from spatialdp.federated.client_reports import read_reports
from spatialdp.federated.group_sums import Groups
from spatialdp.federated.metrics import HistogramSpec, MetricSpec, check_specs, resolve_epsilons
from spatialdp.geo.partition import Partition
from spatialdp.privacy.budget import Disjoint, Neighbours, check_neighbours
from spatialdp.privacy.combined_noise import ratio_interval
from spatialdp.privacy.pipeline import ReleasePlan, exact_total, run_release
from spatialdp.privacy.target import Accounting, check_target
from spatialdp.schema import NEIGHBOUR_TEXT, epsilon_text, reliability_class

__all__ = ["REPORT_FORMAT", "RegionalReport", "interval_at", "regional_report"]

REGIONAL_LINE_ITEM = "evaluation.regional"

#: Format tag of the metadata :meth:`RegionalReport.write` records with every file;
#: :func:`~spatialdp.federated.read_report` reads this version only.
REPORT_FORMAT = "spatialdp-regional-report/1"


@dataclass(repr=False)
class RegionalReport(Result):
    """A regional evaluation round: one GeoDataFrame per metric, plus its bookkeeping.

    Attributes
    ----------
    frames : dict of str -> GeoDataFrame
        Per metric, indexed by region id, with the columns of
        :mod:`spatialdp.schema` and ``geometry`` (histograms add one
        column per bucket; their ``value`` is the mass in the top bucket, the tail).
    partition_version : str
        The partition the report is keyed by.
    round_index : int or None
        The federated round.
    epsilon : dict of str -> float
        Each metric's share of the round's epsilon; the round is charged their
        sum, :attr:`epsilon_total` (what titles, summaries and cards show).
    alpha : float
        The level of the published error bars.
    min_cohort : int
        The publication floor.
    suppressed_regions : int
        The number of regions with no published value in any metric. Exact: the
        suppressed flags are published per region anyway (under replace-one they
        follow public participation; under add/remove, noised counts).
    metrics : dict of str -> str
        Spec key per metric name.
    accounting : dict
        How the round was charged (``accounting`` is ``ledger``, ``unaccounted``
        or ``simulation``).
    neighbours : {"replace", "add_remove"}
        The neighbouring relation the round's epsilon holds for. Under
        ``"replace"`` the cohorts are exact (participation is public); under
        ``"add_remove"`` every cohort, floor and suppression comes from noised
        counts.

    Examples
    --------
    >>> from spatialdp.datasets import synthetic_fleet, us_states_partition
    >>> from spatialdp.federated import MetricSpec, device_report
    >>> from spatialdp.privacy import Simulation
    >>> states = us_states_partition()
    >>> fleet = synthetic_fleet(20_000, rng=0)
    >>> examples = pd.DataFrame({"client_id": fleet.device_id, "region_id": fleet.region_id,
    ...                          "loss": 1.0})
    >>> spec = MetricSpec("loss", 0.0, 4.0)
    >>> clients = device_report(examples, loss_spec=spec, partition=states)
    >>> report = regional_report(clients, states, [spec], epsilon=0.5,
    ...                          target=Simulation(rng=0), min_cohort=100)
    >>> frame = report["loss"]
    >>> bool((frame.value.dropna() - 1.0).abs().max() < 0.2), report.simulated
    (True, True)
    >>> ci = report.conf_int("loss", alpha=0.01)    # exact at any level
    >>> bool((ci.ci_high - ci.ci_low).dropna().gt(0).all())
    True
    """

    frames: dict[str, gpd.GeoDataFrame]
    partition_version: str
    round_index: int | None
    epsilon: dict[str, float]
    alpha: float
    min_cohort: int
    suppressed_regions: int
    metrics: dict[str, str] = field(default_factory=dict)
    accounting: dict[str, Any] = field(default_factory=dict)
    estimates: dict[str, Estimate] = field(default_factory=dict, repr=False)
    neighbours: Neighbours = "replace"

    def __contains__(self, metric: object) -> bool:
        return metric in self.frames

    def __len__(self) -> int:
        return len(self.frames)

    def __iter__(self) -> Iterator[str]:
        """Iterate over the metric names, as a mapping does (``report[name]`` is the frame)."""
        return iter(self.frames)

    def __getitem__(self, metric: str) -> gpd.GeoDataFrame:
        try:
            return self.frames[metric]
        except (KeyError, TypeError):
            raise InvalidInput(
                f"no metric {metric!r} in this report; it has {sorted(self.frames)}"
            ) from None


    @property
    def epsilon_total(self) -> float:
        """What the round was charged, per client: the exact sum of the metrics' shares."""
        return exact_total(list(self.epsilon.values()))

    def conf_int(self, metric: str, alpha: float | None = None) -> pd.DataFrame:
        """Return per-region ``(1 - alpha)`` intervals, exact for any alpha.

        Means: ``value +/- scale * ln(1/alpha)``; ratio estimators: the
        conservative interval of their two noisy sums at ``alpha``. Computed
        from the frame's published columns alone (:func:`interval_at`).
        """
        frame = self[metric]
        level = self.alpha if alpha is None else check_alpha(alpha)
        lo, hi = interval_at(frame, level)
        return pd.DataFrame({"ci_low": lo, "ci_high": hi}, index=frame.index)

    def bounded(self, metric: str) -> gpd.GeoDataFrame:
        """Return the metric's frame with values clamped into the clip range: display only, BIASED.

        Noise can push a value outside what any client could report (a negative
        loss); clamping makes it readable but pulls it towards the range, so
        never average or compare clamped values. The frame's metadata says so.
        """
        original = self[metric]
        spec = self.estimates[str(metric)].spec
        low, high = spec.value_range
        frame = original.copy()
        for col in ("value", "ci_low", "ci_high"):
            frame[col] = frame[col].clip(low, high)
        frame.attrs["spatialdp"] = {**original.attrs.get("spatialdp", {}),
                                    "bounded": "clamped into the clip range for display: biased"}
        return frame

    def to_frame(self) -> gpd.GeoDataFrame:
        """Return all metrics side by side, columns ``<metric>.<column>``, one geometry."""
        first = next(iter(self.frames.values()))
        parts = [
            frame.drop(columns=["geometry", "name"], errors="ignore").add_prefix(f"{name}.")
            for name, frame in self.frames.items()
        ]
        wide = pd.concat(parts, axis=1)
        if "name" in first.columns:  # the region names (Partition.names), once
            wide.insert(0, "name", first["name"])
        for col in wide.columns:
            if isinstance(wide[col].dtype, pd.CategoricalDtype):
                wide[col] = wide[col].astype(str)
        wide["accounting"] = str(self.accounting.get("accounting"))
        out = gpd.GeoDataFrame(wide, geometry=first.geometry, crs=first.crs)
        out.attrs["spatialdp"] = self.metadata()
        return out

    def metadata(self) -> dict[str, Any]:
        """Return versions, epsilon, floors and accounting, recorded with every output file.

        ``metric_specs`` holds each released spec in full (clip range or bucket
        edges, version, fingerprint, label and unit; a histogram's buckets with
        their file column names), so a file read back alone says what it holds;
        ``estimators`` says which metrics are means and which ratio estimates;
        ``format`` is :data:`REPORT_FORMAT` (what
        :func:`~spatialdp.federated.read_report` reads).
        """
        return {
            "format": REPORT_FORMAT,
            "partition_version": self.partition_version,
            "round_index": self.round_index,
            "epsilon": dict(self.epsilon),
            "epsilon_total": self.epsilon_total,
            "alpha": self.alpha,
            "min_cohort": self.min_cohort,
            "suppressed_regions": self.suppressed_regions,
            "neighbours": self.neighbours,
            "metrics": dict(self.metrics),
            "metric_specs": {name: est.spec.describe() for name, est in self.estimates.items()},
            "estimators": {name: est.estimator for name, est in self.estimates.items()},
            **{k: v for k, v in self.accounting.items() if k != "round_index"},
        }

    # ------------------------------------------------------------------ maps
    def plot(self, metric: str, column: str = "value", *, kind: str = "map",
             **kwargs: Any) -> Any:
        """Draw one metric, as ``GeoDataFrame.plot`` does: hands off to :mod:`spatialdp.viz`.

        Parameters
        ----------
        metric : str
            The metric to draw.
        column : str
            Column to colour by (``kind="map"``).
        kind : {"map", "moe", "significance", "bivariate"}
            ``"map"``: :func:`~spatialdp.viz.plot_uncertainty_choropleth` (returns
            the Axes; ``scheme=``, ``k=``, ``robust=``, ``projection=`` ... pass
            through). ``"moe"``: the value map beside its margin-of-error map,
            :func:`~spatialdp.viz.plot_moe_companion` (returns the Figure).
            ``"significance"``: regions significantly above or below a national
            value, :func:`~spatialdp.viz.plot_significance` (give ``national=``).
            ``"bivariate"``: value classes × reliability in one palette,
            :func:`~spatialdp.viz.plot_bivariate`.
        **kwargs
            Passed to the drawing function.

        Examples
        --------
        >>> import matplotlib
        >>> matplotlib.use("Agg")
        >>> from spatialdp.datasets import synthetic_fleet, us_states_partition
        >>> from spatialdp.federated import MetricSpec, device_report
        >>> from spatialdp.privacy import Simulation
        >>> states = us_states_partition()
        >>> fleet = synthetic_fleet(20_000, rng=0)
        >>> examples = pd.DataFrame({"client_id": fleet.device_id,
        ...                          "region_id": fleet.region_id, "loss": 1.0})
        >>> spec = MetricSpec("loss", 0.0, 4.0, label="squared error", unit="m²")
        >>> clients = device_report(examples, loss_spec=spec, partition=states)
        >>> report = regional_report(clients, states, [spec], epsilon=0.5,
        ...                          target=Simulation(rng=0), min_cohort=100)
        >>> ax = report.plot("loss", scheme="quantiles", k=4)
        >>> ax.get_title(loc="left").splitlines()[0]
        '[SIMULATION] squared error (m²)'
        """
        from spatialdp import viz

        frame = self[metric]
        name = check_text(kind, "kind")
        if name == "map":
            return _hand_off(viz.plot_uncertainty_choropleth, frame, column, **kwargs)
        if name not in ("moe", "significance", "bivariate"):
            raise fail("kind", kind, "is not a kind of map",
                       "pass 'map', 'moe', 'significance' or 'bivariate'")
        if not (isinstance(column, str) and column == "value"):
            raise fail("column", column, f"is not drawn by kind={name!r}",
                       "leave column='value' (these maps show the value and its noise)")
        if name == "moe":
            return _hand_off(viz.plot_moe_companion, frame, **kwargs)
        if name == "bivariate":
            return _hand_off(viz.plot_bivariate, frame, **kwargs)
        return _hand_off(viz.plot_significance, frame, **kwargs)

    def explore(self, metric: str, column: str = "value", **kwargs: Any) -> Any:
        """Interactive folium map of one metric: :func:`~spatialdp.viz.explore_report`.

        The static map's classes and colours (opacity is reliability, the legend
        says so); ``**kwargs`` go to :func:`~spatialdp.viz.explore_report`.
        """
        from spatialdp import viz

        return _hand_off(viz.explore_report, self[metric], column, **kwargs)

    # ------------------------------------------------------------------ files
    def to_long(self) -> pd.DataFrame:
        """Return the report in long (tidy) layout: one row per region, metric and statistic.

        Columns ``region_id``, ``metric``, ``statistic`` (``value``,
        ``error_bar``, ``ci_low``, ``ci_high``, ``noise_std``, ``cohort``,
        ``cv``, what recomputes an interval at another level: ``noise_scale``,
        ``noisy_sum``, ``noisy_count``, ``sum_scale``, ``count_scale``, and a
        histogram's buckets ``b0``, ``b1`` ...), ``estimate`` (a
        number, NaN where suppressed), then ``reliability``, ``suppressed``,
        ``partition_version`` and ``round_index`` of the region's metric. No
        geometry: join it back on ``region_id``.
        """
        stats = LONG_STATISTICS
        parts = []
        for name, frame in self.frames.items():
            est = self.estimates.get(name)
            spec = est.spec if est is not None else None
            buckets = ({label: f"b{i}" for i, label in enumerate(spec.labels)}
                       if isinstance(spec, HistogramSpec) else {})
            numbers = pd.DataFrame(
                {**{s: pd.to_numeric(frame[s], errors="coerce").astype("float64")
                    for s in stats},
                 **{short: frame[label].astype("float64") for label, short in buckets.items()}},
                index=frame.index)
            numbers.index.name = "region_id"
            long = numbers.reset_index().melt(id_vars="region_id", var_name="statistic",
                                              value_name="estimate")
            facts = pd.DataFrame({
                "reliability": frame.reliability.astype(str),
                "suppressed": frame.suppressed.astype(bool),
                "partition_version": self.partition_version,
                "round_index": pd.array([self.round_index] * len(frame), dtype="Int64"),
            }, index=frame.index)
            facts.index.name = "region_id"
            long = long.merge(facts.reset_index(), on="region_id", how="left")
            long.insert(1, "metric", name)
            parts.append(long)
        return pd.concat(parts, ignore_index=True)

    def column_names(self, names: str = "sql") -> dict[str, str]:
        """Return the file column name of each ``<metric>.<column>`` of :meth:`to_frame`.

        ``"sql"``: ``loss_value``, ``abs_error_m_b0`` ... (letters, digits and
        underscores only: no quoting in SQL, QGIS expressions or R);
        ``"dotted"``: as :meth:`to_frame` (``loss.value``,
        ``abs_error_m.(0.25, 0.5]``).
        """
        names = check_text(names, "names")
        if names not in ("sql", "dotted"):
            raise fail("names", names, "is not a naming", "pass 'sql' or 'dotted'")
        out: dict[str, str] = {}
        for metric, frame in self.frames.items():
            est = self.estimates.get(metric)
            spec = est.spec if est is not None else None
            buckets = ({label: f"b{i}" for i, label in enumerate(spec.labels)}
                       if isinstance(spec, HistogramSpec) else {})
            for col in frame.columns:
                if col in ("geometry", "name"):  # the region name is one column of all
                    continue
                dotted = f"{metric}.{col}"
                out[dotted] = dotted if names == "dotted" else _sql_name(
                    f"{metric}_{buckets.get(col, col)}")
        if len(set(out.values())) != len(out):
            raise InvalidInput("two report columns map to one SQL name; rename a metric "
                               "(letters, digits and underscores)")
        return out

    def write(self, folder: str | os.PathLike[str], stem: str = "regional_report", *,
              names: str = "sql", layout: str = "wide") -> list[Path]:
        """Write a GeoPackage, a GeoParquet, a CSV and a JSON of the metadata, each atomically.

        The metadata (:meth:`metadata`: epsilon, alpha, round, partition version,
        floors, accounting and every metric spec with its label, unit and
        buckets) travels with the data: in the GeoPackage as the layer's
        metadata (GeoPackage metadata extension, written by GDAL: keys
        ``spatialdp``, the metadata in JSON, and ``spatialdp_columns``, what each
        column holds with a histogram's bucket edges; QGIS shows them under the
        layer's properties, ``pyogrio.read_info(path)["layer_metadata"]`` reads
        them), in the GeoParquet's file metadata under the same two keys
        (``pyarrow.parquet.read_schema(path).metadata[b"spatialdp"]``, beside
        GeoParquet's own ``geo``), and beside the CSV as the JSON sidecar
        ``<stem>.json`` (the metadata, plus the same ``columns`` table).
        :func:`~spatialdp.federated.read_report` reads any of them back into
        this report. Geometries are written as they are (a polygon stays a
        polygon beside multipolygons: the GeoPackage layer's type is then
        ``GEOMETRY``).

        A simulation's files are named ``<stem>.SIMULATION.*`` (and an
        unaccounted release's ``<stem>.UNACCOUNTED.*``), so they never pass for a
        release.

        Parameters
        ----------
        folder : str or path-like
            Created if missing.
        stem : str
            File name without suffix.
        names : {"sql", "dotted"}
            Column names: ``"sql"`` (the default: ``loss_value``, ``abs_error_m_b1``;
            no quoting needed in SQL, QGIS expressions, R or Stata; the bucket
            edges are in the metadata's column table, see :meth:`column_names`)
            or ``"dotted"`` (``loss.value``, ``abs_error_m.(0.25, 0.5]``, as
            :meth:`to_frame`).
        layout : {"wide", "long"}
            The CSV's layout: one row per region (``"wide"``) or one row per
            region, metric and statistic (``"long"``, :meth:`to_long`). The
            GeoPackage and the GeoParquet are always one feature per region.

        Returns
        -------
        list of Path
            The ``.gpkg``, ``.parquet``, ``.csv`` and ``.json`` files, in this order.
        """
        target, stem = check_output(folder, stem, "regional_report")
        layout = check_text(layout, "layout")
        if layout not in ("wide", "long"):
            raise fail("layout", layout, "is not a layout", "pass 'wide' or 'long'")
        renames = self.column_names(names)
        make_folder(target)
        label = {"simulation": ".SIMULATION", "unaccounted": ".UNACCOUNTED"}.get(
            str(self.accounting.get("accounting")), "")
        wide = self.to_frame().rename(columns=renames)
        columns = self._column_table(renames)
        metadata = self.metadata()
        sidecar = {**metadata, "layout": layout, "column_names": names,
                   "columns": columns if layout == "wide" else _LONG_COLUMNS}
        meta = json.dumps(sidecar, indent=2, default=str)
        table = (wide.drop(columns="geometry") if layout == "wide"
                 else self.to_long().set_index("region_id"))

        file_metadata = {"spatialdp": json.dumps(metadata, default=str),
                         "spatialdp_columns": json.dumps(columns, default=str)}

        def write_gpkg(path: str) -> None:
            wide.reset_index().to_file(
                path, driver="GPKG", layer="regional_report", engine="pyogrio",
                promote_to_multi=False, metadata=file_metadata)

        def write_parquet(path: str) -> None:
            import pyarrow.parquet as pq

            wide.reset_index().to_parquet(path, index=False)
            written = pq.read_table(path)  # GeoParquet's own metadata, then ours beside it
            pq.write_table(written.replace_schema_metadata({
                **(written.schema.metadata or {}),
                **{key.encode(): text.encode() for key, text in file_metadata.items()}}), path)

        writers: list[tuple[str, Callable[[str], object]]] = [
            (".gpkg", write_gpkg),
            (".parquet", write_parquet),
            (".csv", lambda p: table.to_csv(p)),
            (".json", lambda p: Path(p).write_text(meta)),
        ]
        return [write_atomically(target / f"{stem}{label}{suffix}", writer)
                for suffix, writer in writers]

    def _column_table(self, renames: Mapping[str, str]) -> list[dict[str, Any]]:
        """Describe every file column: metric, statistic, bucket edges, label and unit."""
        rows: list[dict[str, Any]] = [{"column": "region_id", "metric": None,
                                       "statistic": "region id", "description":
                                       f"region of partition {self.partition_version}"}]
        if any("name" in frame.columns for frame in self.frames.values()):
            rows.append({"column": "name", "metric": None, "statistic": "region name",
                         "description": "the region's name (public: the partition layer's)"})
        for dotted, column in renames.items():
            metric, stat = dotted.split(".", 1)
            est = self.estimates.get(metric)
            spec = est.spec if est is not None else None
            row: dict[str, Any] = {"column": column, "metric": metric, "statistic": stat,
                                   "description": _STAT_TEXT.get(stat, stat)}
            if isinstance(spec, HistogramSpec) and stat in spec.labels:
                b = spec.labels.index(stat)
                bucket = spec.describe()["buckets"][b]  # type: ignore[index]
                row.update(statistic=f"b{b}", bucket=b, bucket_label=stat,
                           low=bucket["low"], high=bucket["high"],
                           description=f"share of {spec.label or spec.name} in {stat}"
                           + (f" {spec.unit}" if spec.unit else ""))
            if spec is not None:
                row.update(label=spec.title, unit=spec.unit)
            rows.append(row)
        rows.append({"column": "accounting", "metric": None, "statistic": "accounting",
                     "description": "ledger, simulation or unaccounted"})
        return rows

    def summary(self) -> str:
        """Return a short text summary for the CLI and notebooks."""
        head = f"{self.accounting_note.strip()} " if self.accounting_note else ""
        lines = [
            f"{head}regional report, "
            f"{'' if self.round_index is None else f'round {self.round_index}, '}partition "
            f"{self.partition_version}, epsilon {epsilon_text(self.epsilon)} per client "
            f"({NEIGHBOUR_TEXT[self.neighbours]}), {1 - self.alpha:.0%} error bars",
            f"  suppressed regions: {self.suppressed_regions}",
        ]
        if self.accounting.get("read_from"):
            lines.append(f"  read from {self.accounting['read_from']}: the release it records, "
                         "not a new one (reading charges nothing)")
        for name, frame in self.frames.items():
            shown = frame[~frame.suppressed]
            lines.append(
                f"  {name:<10} {len(shown)} regions published, value "
                f"{shown.value.min():.3g}..{shown.value.max():.3g}, median bar "
                f"{shown.error_bar.median():.3g}, reliability "
                + ", ".join(f"{k}={v}" for k, v in
                            frame.reliability.value_counts().items() if v and k != "suppressed")
            )
        return "\n".join(lines)



def interval_at(frame: pd.DataFrame, alpha: float) -> tuple[NDArray[np.float64],
                                                             NDArray[np.float64]]:
    """Return a report frame's ``(1 - alpha)`` intervals, from its published columns alone.

    Means: ``value +/- noise_scale ln(1/alpha)`` (exact). Ratio estimators: the
    conservative interval of ``noisy_sum / noisy_count`` with both noises inside
    their ``1 - alpha/2`` quantiles, clipped to ``[clip_low, clip_high]``. NaN
    where suppressed.

    Parameters
    ----------
    frame : DataFrame
        A report's frame (:attr:`RegionalReport.frame`, or one read back from its files).
    alpha : float
        One minus the intervals' coverage, in (0, 1).

    Returns
    -------
    (low, high) : tuple of ndarray

    Examples
    --------
    >>> frame = pd.DataFrame({"value": [1.0], "estimator": ["mean"], "noise_scale": [0.1],
    ...                       "noisy_sum": [np.nan], "noisy_count": [np.nan],
    ...                       "sum_scale": [np.nan], "count_scale": [np.nan],
    ...                       "clip_low": [0.0], "clip_high": [4.0]})
    >>> [round(float(x[0]), 4) for x in interval_at(frame, 0.05)]
    [0.7004, 1.2996]
    """
    level = check_alpha(alpha)
    value = frame["value"].to_numpy(dtype=float)
    ratio = frame["estimator"].astype(str).to_numpy() == "ratio"
    half = frame["noise_scale"].to_numpy(dtype=float) * -math.log(level)
    lo, hi = value - half, value + half
    if ratio.any():
        q = math.log(2.0) - math.log(level)
        r_lo, r_hi = ratio_interval(
            frame["noisy_sum"].to_numpy(dtype=float), frame["noisy_count"].to_numpy(dtype=float),
            frame["sum_scale"].to_numpy(dtype=float) * q,
            frame["count_scale"].to_numpy(dtype=float) * q,
            frame["clip_low"].to_numpy(dtype=float), frame["clip_high"].to_numpy(dtype=float))
        lo, hi = np.where(ratio, r_lo, lo), np.where(ratio, r_hi, hi)
    shown = np.isfinite(value)
    return np.where(shown, lo, np.nan), np.where(shown, hi, np.nan)


def _hand_off(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a drawing function, refusing keywords it does not take (not a bare TypeError)."""
    import inspect

    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as err:
        raise InvalidInput(f"{fn.__name__} refused the arguments ({err}); see "
                           f"help(spatialdp.viz.{fn.__name__}) for what it takes") from None
    return fn(*args, **kwargs)


_STAT_TEXT = {
    "value": "the noised estimate (NaN where suppressed)",
    "error_bar": "half-width of the (1 - alpha) interval of the noise",
    "ci_low": "lower end of the interval", "ci_high": "upper end of the interval",
    "noise_std": "standard deviation of the noise on value",
    "cohort": "clients behind the value (empty where suppressed)",
    "cv": "coefficient of variation, noise_std / |value|",
    "reliability": "high / medium / low / suppressed (ACS classes by cv)",
    "suppressed": "below the cohort floor: nothing published",
    "clip_low": "lower clip bound", "clip_high": "upper clip bound",
    "estimator": "mean or ratio", "metric": "spec key (name@version)",
    "partition_version": "partition the report is keyed by",
    "round_index": "federated round",
    "noise_scale": "Laplace scale of the noise on a mean's value (NaN for ratio estimates)",
    "noisy_sum": "a ratio estimate's released sum (a histogram: its top bucket's)",
    "noisy_count": "a ratio estimate's released count (NaN for means)",
    "sum_scale": "Laplace scale of the noise on noisy_sum",
    "count_scale": "Laplace scale of the noise on noisy_count",
}

#: The statistics of a metric in the long layout (:meth:`RegionalReport.to_long`), besides
#: a histogram's buckets: every number column of the report's frames.
LONG_STATISTICS: tuple[str, ...] = (
    "value", "error_bar", "ci_low", "ci_high", "noise_std", "cohort", "cv", "noise_scale",
    "noisy_sum", "noisy_count", "sum_scale", "count_scale")

_LONG_COLUMNS = [
    {"column": "region_id", "description": "region id"},
    {"column": "metric", "description": "metric name (see metric_specs)"},
    {"column": "statistic", "description": ", ".join(LONG_STATISTICS)
     + ", or a histogram bucket b0, b1 ... (see metric_specs[...].buckets)"},
    {"column": "estimate", "description": "the statistic's number (NaN where suppressed)"},
    {"column": "reliability", "description": _STAT_TEXT["reliability"]},
    {"column": "suppressed", "description": _STAT_TEXT["suppressed"]},
    {"column": "partition_version", "description": _STAT_TEXT["partition_version"]},
    {"column": "round_index", "description": _STAT_TEXT["round_index"]},
]


def _sql_name(text: str) -> str:
    """Return ``text`` as a column name SQL and QGIS take unquoted (``[A-Za-z0-9_]``)."""
    out = re.sub(r"\W+", "_", text, flags=re.ASCII).strip("_")
    return out if out and not out[0].isdigit() else f"m_{out}"


def regional_report(
    client_reports: pd.DataFrame | Any,
    partition: Partition,
    metrics: Sequence[MetricSpec | HistogramSpec],
    *,
    epsilon: float | Mapping[str, float],
    target: Accounting,
    min_cohort: int = 50,
    alpha: float = 0.05,
    neighbours: Neighbours = "replace",
    progress: bool = False,
) -> RegionalReport:
    """Private per-region metrics for a whole partition, in one call.

    Validates everything, computes every secure sum and noise scale, then charges
    the round once (one release over the partition's disjoint regions costing
    ``epsilon``, split over the metrics), then draws the noise and publishes. Linear in
    the number of clients and independent of the number of regions: one pass per
    metric column (:class:`~spatialdp.federated.group_sums.Groups`).

    Parameters
    ----------
    client_reports : DataFrame or dask.dataframe.DataFrame
        From :func:`~spatialdp.federated.device_report` with ``partition=``: one row
        per client (``client_id`` unique), ``region_id``, ``partition_version``,
        ``device_specs`` and the metric columns. A Dask DataFrame is validated and
        summed per region on the workers (a client id repeated across partitions
        is refused, whatever the divisions claim); only the per-region totals
        reach this process, which charges and adds the noise once, as in memory
        (``docs/scale.md``). With ``Simulation(rng=s)`` and sums that are exact in
        floating point the two publish the same numbers.
    partition : Partition
        The fixed geography; its version must match the reports'.
    metrics : sequence of MetricSpec / HistogramSpec
        The released metrics; the devices must have clipped under exactly these.
    epsilon : float or mapping name -> float
        The total privacy loss of the release, what the ledger is charged; every
        region gets it in full (parallel composition). One number is split
        equally over the metrics; a mapping by metric name gives the split, and
        its sum is the total (:func:`~spatialdp.federated.metrics.resolve_epsilons`).
    target : ReleaseTarget, Simulation or Unaccounted
        Where the round is charged and how its noise is drawn; required.
    min_cohort : int
        Publication floor per region (a whole number >= 1); regions below it are
        suppressed.
    alpha : float
        Error bars are (1 - alpha) intervals of the noise.
    neighbours : {"replace", "add_remove"}, default "replace"
        The neighbouring relation ``epsilon`` holds for.

        ``"replace"``: one client's values replaced, its participation fixed.
        The cohort of every region is public (published exactly), the floor is
        applied to it, and each metric's sum is noised at sensitivity
        ``clip_high - clip_low`` (a histogram: ``2 mass_cap``).

        ``"add_remove"``: one client added or removed, so whether and where a
        client reported is protected too. Each region publishes a noised sum
        (sensitivity ``max(|clip_low|, |clip_high|)``; a histogram: ``mass_cap``)
        over a noised count: the mean metrics share one count per region, to
        which each lends half its epsilon (:class:`~spatialdp.federated._estimate.NoisyCohort`);
        a ``present`` metric splits its epsilon with its own count. Every region is
        noised; floors, suppression, cohorts and reliability come from the noised
        counts; intervals are the ratio estimator's conservative ones.

    Returns
    -------
    RegionalReport

    Raises
    ------
    InvalidInput, PartitionMismatch, ClippingFailure, BudgetExceeded
        Nothing is charged or published when any of them is raised.

    Warns
    -----
    UninformativeReleaseWarning
        When even the best region's error bar exceeds the clip range: before
        charging from public counts (replace-one), after the release from the
        published bars (add/remove).

    Examples
    --------
    >>> from spatialdp.datasets import synthetic_fleet, us_states_partition
    >>> from spatialdp.federated import MetricSpec, device_report
    >>> from spatialdp.privacy import PrivacyLedger, ReleaseTarget
    >>> states = us_states_partition()
    >>> fleet = synthetic_fleet(20_000, rng=1)
    >>> examples = pd.DataFrame({"client_id": fleet.device_id, "region_id": fleet.region_id,
    ...                          "loss": 1.5})
    >>> spec = MetricSpec("loss", 0.0, 4.0)
    >>> clients = device_report(examples, loss_spec=spec, partition=states)
    >>> with PrivacyLedger(":memory:", epoch_budget=5.0) as ledger:
    ...     report = regional_report(clients, states, [spec], epsilon=0.5, min_cohort=100,
    ...                              target=ReleaseTarget(ledger, epoch=0, why="weekly"))
    ...     spent = ledger.spent(0)
    >>> spent                          # the whole partition is one charge
    0.5
    >>> report["loss"].loc["CA", "reliability"], bool(report["loss"].loc["VT", "suppressed"])
    ('high', True)
    """
    request = RegionalRequest.check(partition, metrics, epsilon, target, min_cohort, alpha,
                                    neighbours)
    show = check_flag(progress, "progress")
    if is_dask(client_reports):  # sums on the workers, then the same release here
        from spatialdp.federated._dask import totals_on_dask

        totals = totals_on_dask(client_reports, request.metrics, partition, progress=show)
        return request.publish(Groups.of_totals(totals.counts),
                               lambda spec: totals.sums[spec.name],
                               lambda spec: totals.present.get(spec.name))
    table = read_reports(client_reports, request.metrics, partition)
    assert table.positions is not None
    return request.publish(
        Groups(table.positions, partition.n_regions), table.values,
        lambda spec: table.presence(spec) if isinstance(spec, MetricSpec) else None)


@dataclass(frozen=True)
class RegionalRequest:
    """The checked arguments of a regional release, and the release's tail.

    Shared by the in-memory and the Dask paths of :func:`regional_report`:
    they differ only in where the per-region sums come from.
    """

    partition: Partition
    metrics: list[MetricSpec | HistogramSpec]
    epsilons: dict[str, float]
    floor: int
    level: float
    target: Accounting
    neighbours: Neighbours = "replace"

    @classmethod
    def check(cls, partition: Partition, metrics: Sequence[MetricSpec | HistogramSpec],
              epsilon: float | Mapping[str, float], target: Accounting, min_cohort: int,
              alpha: float, neighbours: Neighbours = "replace") -> RegionalRequest:
        """Validate every argument that does not need the client reports."""
        target = check_target(target)
        check_specs(metrics)
        if not isinstance(partition, Partition):
            raise InvalidInput(f"partition must be a Partition, got {type(partition).__name__}")
        return cls(partition, list(metrics), resolve_epsilons(metrics, epsilon),
                   check_cohort_floor(min_cohort), check_alpha(alpha), target,
                   check_neighbours(neighbours))

    def publish(self, groups: Groups,
                values: Callable[[MetricSpec | HistogramSpec], NDArray[np.float64]],
                presence: Callable[[MetricSpec | HistogramSpec], NDArray[np.float64] | None],
                ) -> RegionalReport:
        """Plan every metric, charge the round once, draw the noise once, build the frames.

        ``groups`` holds each row's region and the cohort counts; ``values(spec)``
        and ``presence(spec)`` give the rows that :class:`Groups` sums.
        """
        partition, metrics, epsilons, floor = (self.partition, self.metrics, self.epsilons,
                                               self.floor)
        counts = groups.counts
        cohort: NoisyCohort | None = None
        if self.neighbours == "replace":  # cohorts are public: refuse a report of nothing
            if not (counts >= floor).any():
                raise InvalidInput(
                    f"every region is below the cohort floor min_cohort={floor} (largest "
                    f"cohort {int(counts.max())}); nothing can be published: lower the floor "
                    "only if the error bar allows, or merge regions")
            parts = int((counts >= floor).sum())
        else:  # every region is noised; nothing before the noise looks at a count
            cohort = NoisyCohort.split(metrics, epsilons)
            parts = partition.n_regions
        plans: list[ReleasePlan[Any]] = [] if cohort is None else [cohort.plan(counts)]
        plans += [plan_estimate(spec, values(spec), presence(spec), groups,
                                epsilon=epsilons[spec.name], min_cohort=floor,
                                alpha=self.level, neighbours=self.neighbours, cohort=cohort)
                  for spec in metrics]
        released = run_release(
            plans, target=self.target, structure=Disjoint(partition.key, parts=parts),
            what="regional report: " + ", ".join(
                f"{s.key} (epsilon {epsilons[s.name]:g})" for s in metrics),
            default_line_item=REGIONAL_LINE_ITEM, neighbours=self.neighbours)
        estimates: list[Estimate] = released[len(plans) - len(metrics):]
        round_index = pd.array([self.target.round_index] * partition.n_regions,
                               dtype="Int64")
        every = np.logical_and.reduce([est.suppressed for est in estimates])
        report = RegionalReport(
            frames={est.spec.name: _metric_frame(est, partition, round_index)
                    for est in estimates},
            partition_version=partition.version,
            round_index=self.target.round_index,
            epsilon=epsilons,
            alpha=self.level,
            min_cohort=floor,
            suppressed_regions=int(every.sum()),
            metrics={s.name: s.key for s in metrics},
            accounting=self.target.metadata(),
            estimates={est.spec.name: est for est in estimates},
            neighbours=self.neighbours,
        )
        label_frames(report)
        return report


def label_frames(report: RegionalReport) -> None:
    """Record the report's metadata in each frame's ``attrs`` (what the maps' titles read)."""
    for name, frame in report.frames.items():
        frame.attrs["partition_version"] = report.partition_version
        # "epsilon" is what the release was charged (titles show it), with its split.
        frame.attrs["spatialdp"] = {**report.metadata(), "metric": name,
                                    "epsilon": report.epsilon_total,
                                    "epsilon_split": dict(report.epsilon),
                                    "metric_epsilon": report.epsilon[name],
                                    "estimator": report.estimates[name].estimator,
                                    **_labels(report.estimates[name].spec)}


def _labels(spec: MetricSpec | HistogramSpec) -> dict[str, Any]:
    """Return what the maps call a frame's ``value``: the spec's label and unit."""
    if isinstance(spec, HistogramSpec):
        return {"value_label": spec.tail_title, "quantity": spec.tail_title,
                "value_unit": None}
    return {"value_label": spec.title, "quantity": spec.label or spec.name,
            "value_unit": spec.unit}


def _noise_columns(est: Estimate) -> dict[str, NDArray[np.float64]]:
    """Return what recomputes a published value's interval at any level (schema columns).

    A mean's Laplace scale; a ratio estimator's released sum and count and their
    noise scales (released values and public parameters only). NaN where they do
    not apply and where the region is suppressed.
    """
    nan = np.full(est.suppressed.size, np.nan)
    hide = est.suppressed
    if est.estimator == "mean":
        return {"noise_scale": np.where(hide, np.nan, est.noise_scale), "noisy_sum": nan,
                "noisy_count": nan, "sum_scale": nan, "count_scale": nan}
    state = est.state
    return {"noise_scale": nan,
            **{name: np.where(hide, np.nan, state[key]) for name, key in (
                ("noisy_sum", "num"), ("noisy_count", "den"), ("sum_scale", "scale_num"),
                ("count_scale", "scale_den"))}}


def _metric_frame(est: Estimate, partition: Partition, round_index: pd.api.extensions.ExtensionArray
                  ) -> gpd.GeoDataFrame:
    """Return the published frame of one metric (schema: :mod:`spatialdp.schema`)."""
    columns: dict[str, object] = {}
    if isinstance(est.spec, HistogramSpec):
        columns.update({label: est.values[:, i] for i, label in enumerate(est.spec.labels)})
        columns.update(value=est.values[:, -1], ci_low=est.ci_low[:, -1],
                       ci_high=est.ci_high[:, -1])
    else:
        columns.update(value=est.values, ci_low=est.ci_low, ci_high=est.ci_high)
    low, high = est.spec.value_range
    with np.errstate(divide="ignore", invalid="ignore"):
        cv = est.noise_std / np.abs(np.asarray(columns["value"], dtype=np.float64))
    # Nothing is published below the floor, not even the size of the cohort.
    cohort = pd.arrays.IntegerArray(est.cohort.astype(np.int64), est.suppressed.copy())
    columns.update(
        error_bar=est.error_bar, noise_std=est.noise_std, cohort=cohort, cv=cv,
        reliability=reliability_class(np.nan_to_num(cv, nan=np.inf), est.suppressed),
        suppressed=est.suppressed, clip_low=low, clip_high=high, estimator=est.estimator,
        metric=est.spec.key, partition_version=partition.version, round_index=round_index,
        **_noise_columns(est))
    # The table is indexed by the partition's own region ids, in order: no join needed.
    regions = partition.regions
    names = {} if partition.names is None else {"name": partition.names.array}
    return gpd.GeoDataFrame({"geometry": regions.geometry.array, **names, **columns},
                            index=regions.index, geometry="geometry", crs=regions.crs)
