"""Per-region private metrics for a whole partition in one call.

Each region is a disjoint set of clients, so every region spends the full
evaluation epsilon (parallel composition) and the whole partition is one
release per metric. Regions whose cohort is below the floor are suppressed
(never noised, never published) and the number of suppressed regions is itself
published only coarsened. The result is a GeoDataFrame per metric, joined
onto the region geometries (schema: :mod:`spatialdp.federated.schema`), ready for
:func:`spatialdp.viz.plot_uncertainty_choropleth` or ``.explore()``.
"""

from __future__ import annotations

import html
import json
import math
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd

from spatialdp._validation import (
    check_alpha,
    check_cohort_floor,
    check_epsilon,
    check_text,
    fail,
)
from spatialdp.exceptions import InvalidInput
from spatialdp.federated._estimate import Estimate, plan_estimate, ratio_interval
from spatialdp.federated._pipeline import run_release
from spatialdp.federated._tags import read_reports
from spatialdp.federated.group_sums import Groups
from spatialdp.federated.metrics import HistogramSpec, MetricSpec
from spatialdp.federated.schema import coarsen_count, reliability_class
from spatialdp.geo.partition import Partition
from spatialdp.privacy.budget import Disjoint
from spatialdp.privacy.target import check_target

__all__ = ["RegionalReport", "regional_report"]

REGIONAL_LINE_ITEM = "evaluation.regional"


@dataclass
class RegionalReport:
    """A regional evaluation round: one GeoDataFrame per metric, plus its bookkeeping.

    Attributes
    ----------
    frames : dict of str -> GeoDataFrame
        Per metric, indexed by region id, with the columns of
        :mod:`spatialdp.federated.schema` and ``geometry`` (histograms add one
        column per bucket; their ``value`` is the mass in the top bucket, the tail).
    partition_version : str
        The partition the report is keyed by.
    round_index : int or None
        The federated round.
    epsilon : dict of str -> float
        Privacy loss of each metric's release (the round costs their sum).
    alpha : float
        The level of the published error bars.
    min_cohort : int
        The publication floor.
    suppressed_regions : str
        The number of suppressed regions, coarsened (e.g. ``'1-4'``).
    metrics : dict of str -> str
        Spec key per metric name.
    accounting : dict
        How the round was charged (``accounting`` is ``ledger``, ``unaccounted``
        or ``simulation``).

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
    suppressed_regions: str
    metrics: dict[str, str] = field(default_factory=dict)
    accounting: dict[str, Any] = field(default_factory=dict)
    estimates: dict[str, Estimate] = field(default_factory=dict, repr=False)

    def __getitem__(self, metric: str) -> gpd.GeoDataFrame:
        try:
            return self.frames[metric]
        except (KeyError, TypeError):
            raise InvalidInput(
                f"no metric {metric!r} in this report; it has {sorted(self.frames)}"
            ) from None

    @property
    def simulated(self) -> bool:
        """True for a simulation's output (seeded noise): never publish it."""
        return bool(self.accounting.get("simulated", False))

    @property
    def epsilon_total(self) -> float:
        """What the round cost each client (the metrics compose sequentially)."""
        return float(sum(self.epsilon.values()))

    def conf_int(self, metric: str, alpha: float | None = None) -> pd.DataFrame:
        """Return per-region ``(1 - alpha)`` intervals, exact for any alpha.

        Means: ``value +/- scale * ln(1/alpha)``; ratio estimators: the
        conservative interval of their two noisy sums at ``alpha``.
        """
        frame = self[metric]
        level = self.alpha if alpha is None else check_alpha(alpha)
        est = self.estimates[str(metric)]
        if est.estimator == "ratio":
            spec = est.spec
            assert isinstance(spec, MetricSpec)
            q = math.log(2.0) - math.log(level)
            lo, hi = ratio_interval(est.state["num"], est.state["den"],
                                    est.state["scale_num"] * q, est.state["scale_den"] * q,
                                    spec.clip_low, spec.clip_high)
            lo, hi = np.where(est.suppressed, np.nan, lo), np.where(est.suppressed, np.nan, hi)
        else:
            half = est.state["scale"] * -math.log(level)
            lo, hi = frame.value.to_numpy() - half, frame.value.to_numpy() + half
        return pd.DataFrame({"ci_low": lo, "ci_high": hi}, index=frame.index)

    def bounded(self, metric: str) -> gpd.GeoDataFrame:
        """Return the metric's frame with values clamped into the clip range: display only, BIASED.

        Noise can push a value outside what any client could report (a negative
        loss); clamping makes it readable but pulls it towards the range, so
        never average or compare clamped values. The frame's metadata says so.
        """
        original = self[metric]
        spec = self.estimates[str(metric)].spec
        low, high = ((spec.clip_low, spec.clip_high) if isinstance(spec, MetricSpec)
                     else (0.0, spec.mass_cap))
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
            frame.drop(columns="geometry").add_prefix(f"{name}.")
            for name, frame in self.frames.items()
        ]
        wide = pd.concat(parts, axis=1)
        for col in wide.columns:
            if isinstance(wide[col].dtype, pd.CategoricalDtype):
                wide[col] = wide[col].astype(str)
        wide["accounting"] = str(self.accounting.get("accounting"))
        out = gpd.GeoDataFrame(wide, geometry=first.geometry, crs=first.crs)
        out.attrs["spatialdp"] = self.metadata()
        return out

    def metadata(self) -> dict[str, Any]:
        """Return versions, epsilon, floors and accounting, recorded with every output file."""
        return {
            "partition_version": self.partition_version,
            "round_index": self.round_index,
            "epsilon": dict(self.epsilon),
            "alpha": self.alpha,
            "min_cohort": self.min_cohort,
            "suppressed_regions": self.suppressed_regions,
            "metrics": dict(self.metrics),
            **{k: v for k, v in self.accounting.items() if k != "round_index"},
        }

    def write(self, folder: str | os.PathLike[str], stem: str = "regional_report") -> list[Path]:
        """Write a GeoPackage, a CSV and a JSON of the metadata into ``folder``, each atomically.

        A simulation's files are named ``<stem>.SIMULATION.*`` (and an
        unaccounted release's ``<stem>.UNACCOUNTED.*``), so they never pass for a
        release.
        """
        if not isinstance(folder, (str, os.PathLike)):
            raise fail("folder", folder, f"is a {type(folder).__name__}, not a path",
                       "pass the output folder as a str or pathlib.Path")
        stem = check_text(stem, "stem")
        if Path(stem).name != stem or stem.startswith("."):
            raise fail("stem", stem, "is not a plain file name",
                       "pass a name without folders or a leading dot, e.g. 'regional_report'")
        target = Path(folder)
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise InvalidInput(f"folder={str(folder)!r} cannot be created ({err.strerror}); "
                               "pass a writable folder") from err
        label = {"simulation": ".SIMULATION", "unaccounted": ".UNACCOUNTED"}.get(
            str(self.accounting.get("accounting")), "")
        wide = self.to_frame()
        meta = json.dumps(self.metadata(), indent=2, default=str)
        writers: list[tuple[str, Callable[[str], object]]] = [
            (".gpkg", lambda p: wide.reset_index().to_file(p, driver="GPKG",
                                                           layer="regional_report")),
            (".csv", lambda p: wide.drop(columns="geometry").to_csv(p)),
            (".json", lambda p: Path(p).write_text(meta)),
        ]
        return [_write_atomically(target / f"{stem}{label}{suffix}", writer)
                for suffix, writer in writers]

    def summary(self) -> str:
        """Return a short text summary for the CLI and notebooks."""
        kind = self.accounting.get("accounting")
        head = {"simulation": "SIMULATION (not a release): ",
                "unaccounted": f"UNACCOUNTED ({self.accounting.get('reason')}): "}.get(
                    str(kind), "")
        lines = [
            f"{head}regional report, round {self.round_index}, partition "
            f"{self.partition_version}, epsilon {self.epsilon_total:g} per client "
            f"({1 - self.alpha:.0%} error bars)",
            f"  suppressed regions (coarsened): {self.suppressed_regions}",
        ]
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

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(self.summary())}</pre>"


def _write_atomically(path: Path, writer: Callable[[str], object]) -> Path:
    """Write through a temporary file in the same folder, then rename: never half a file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=path.suffix)
    os.close(fd)
    os.unlink(tmp)  # GPKG writers refuse to overwrite an empty file
    try:
        writer(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _resolve_epsilons(specs: Sequence[MetricSpec | HistogramSpec],
                      epsilon: float | Mapping[str, float]) -> dict[str, float]:
    """Return the per-metric epsilon from one number (each metric) or a mapping by name."""
    if isinstance(epsilon, Mapping):
        missing = [s.name for s in specs if s.name not in epsilon]
        extra = sorted(set(epsilon) - {s.name for s in specs})
        if missing or extra:
            raise InvalidInput(
                f"epsilon has no value for metrics {missing} and values for unknown metrics "
                f"{extra}; give one epsilon per released metric")
        return {s.name: check_epsilon(epsilon[s.name], f"epsilon[{s.name!r}]") for s in specs}
    eps = check_epsilon(epsilon)
    return {s.name: eps for s in specs}


def _check_specs(metrics: Sequence[MetricSpec | HistogramSpec]) -> None:
    if not isinstance(metrics, (list, tuple)) or len(metrics) == 0:
        raise fail("metrics", metrics, "must be a non-empty list of specs",
                   "pass e.g. [MetricSpec('loss', 0, 19)]")
    bad = [m for m in metrics if not isinstance(m, (MetricSpec, HistogramSpec))]
    if bad:
        raise InvalidInput(f"metrics has {bad[:2]!r}, not MetricSpec or HistogramSpec")
    names = [m.name for m in metrics]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InvalidInput(
            f"metrics repeat the names {repeated}; each metric is released once per round")


def regional_report(
    client_reports: pd.DataFrame,
    partition: Partition,
    metrics: Sequence[MetricSpec | HistogramSpec],
    *,
    epsilon: float | Mapping[str, float],
    target: Any,
    min_cohort: int = 50,
    alpha: float = 0.05,
) -> RegionalReport:
    """Private per-region metrics for a whole partition, in one call.

    Validates everything, computes every secure sum and noise scale, then charges
    the round once (one release over the partition's disjoint regions costing the
    sum of the metrics' epsilons), then draws the noise and publishes. Linear in
    the number of clients; the per-region work is one ``np.bincount``.

    Parameters
    ----------
    client_reports : DataFrame
        From :func:`~spatialdp.federated.device_report` with ``partition=``: one row
        per client (``client_id`` unique), ``region_id``, ``partition_version``,
        ``device_specs`` and the metric columns.
    partition : Partition
        The fixed geography; its version must match the reports'.
    metrics : sequence of MetricSpec / HistogramSpec
        The released metrics; the devices must have clipped under exactly these.
    epsilon : float or mapping name -> float
        Privacy loss of each metric's release; every region gets it in full.
    target : ReleaseTarget, Simulation or Unaccounted
        Where the round is charged and how its noise is drawn; required.
    min_cohort : int
        Publication floor per region (a whole number >= 1); regions below it are
        suppressed.
    alpha : float
        Error bars are (1 - alpha) intervals of the noise.

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
        Before charging, when even the best region's error bar exceeds the clip range.

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
    account = check_target(target)
    _check_specs(metrics)
    if not isinstance(partition, Partition):
        raise InvalidInput(f"partition must be a Partition, got {type(partition).__name__}")
    epsilons = _resolve_epsilons(metrics, epsilon)
    floor = check_cohort_floor(min_cohort)
    level = check_alpha(alpha)
    table = read_reports(client_reports, metrics, partition)
    assert table.positions is not None
    groups = Groups(table.positions, partition.n_regions)
    counts = groups.counts
    published = int((counts >= floor).sum())
    if published == 0:
        raise InvalidInput(
            f"every region is below the cohort floor min_cohort={floor} (largest cohort "
            f"{int(counts.max())}); nothing can be published: lower the floor only if the "
            "error bar allows, or merge regions")
    plans = [
        plan_estimate(spec, table.values(spec),
                      table.presence(spec) if isinstance(spec, MetricSpec) else None,
                      groups, epsilon=epsilons[spec.name], min_cohort=floor, alpha=level)
        for spec in metrics
    ]
    account.prepare(REGIONAL_LINE_ITEM)
    estimates = run_release(
        plans, target=account, structure=Disjoint(partition.key, parts=published),
        what="regional report: " + ", ".join(
            f"{s.key} (epsilon {epsilons[s.name]:g})" for s in metrics),
        default_line_item=REGIONAL_LINE_ITEM)
    suppressed = counts < floor
    round_index = pd.array([account.round_index] * partition.n_regions, dtype="Int64")
    report = RegionalReport(
        frames={est.spec.name: _metric_frame(est, partition, round_index)
                for est in estimates},
        partition_version=partition.version,
        round_index=account.round_index,
        epsilon=epsilons,
        alpha=level,
        min_cohort=floor,
        suppressed_regions=coarsen_count(int(suppressed.sum())),
        metrics={s.name: s.key for s in metrics},
        accounting=account.metadata(),
        estimates={est.spec.name: est for est in estimates},
    )
    for name, frame in report.frames.items():
        frame.attrs["spatialdp"] = {**report.metadata(), "metric": name,
                                    "epsilon": epsilons[name],
                                    "estimator": report.estimates[name].estimator}
    return report


def _metric_frame(est: Estimate, partition: Partition, round_index: pd.api.extensions.ExtensionArray
                  ) -> gpd.GeoDataFrame:
    """Return the published frame of one metric (schema: :mod:`spatialdp.federated.schema`)."""
    columns: dict[str, object] = {}
    if isinstance(est.spec, HistogramSpec):
        columns.update({label: est.values[:, i] for i, label in enumerate(est.spec.labels)})
        columns.update(value=est.values[:, -1], ci_low=est.ci_low[:, -1],
                       ci_high=est.ci_high[:, -1])
        low, high = 0.0, est.spec.mass_cap
    else:
        columns.update(value=est.values, ci_low=est.ci_low, ci_high=est.ci_high)
        low, high = est.spec.clip_low, est.spec.clip_high
    with np.errstate(divide="ignore", invalid="ignore"):
        cv = est.noise_std / np.abs(np.asarray(columns["value"], dtype=np.float64))
    # Nothing is published below the floor, not even the size of the cohort.
    cohort = pd.arrays.IntegerArray(est.cohort.astype(np.int64), est.suppressed.copy())
    columns.update(
        error_bar=est.error_bar, noise_std=est.noise_std, cohort=cohort, cv=cv,
        reliability=reliability_class(np.nan_to_num(cv, nan=np.inf), est.suppressed),
        suppressed=est.suppressed, clip_low=low, clip_high=high, estimator=est.estimator,
        metric=est.spec.key, partition_version=partition.version, round_index=round_index)
    # The table is indexed by the partition's own region ids, in order: no join needed.
    regions = partition.regions
    frame = gpd.GeoDataFrame({"geometry": regions.geometry.array, **columns},
                             index=regions.index, geometry="geometry", crs=regions.crs)
    frame.attrs["partition_version"] = partition.version
    return frame
