"""Per-region private metrics for a whole partition in one call.

Each region is a disjoint set of clients, so every region spends the full
evaluation epsilon (parallel composition) and the whole partition is one
release per metric. Regions whose cohort is below the floor are suppressed
(never noised, never published) and the number of suppressed regions is itself
published only coarsened. The result is a GeoDataFrame per metric, joined
onto the region geometries, ready for :func:`spatialdp.viz.plot_uncertainty_choropleth`
or ``.explore()``.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp.exceptions import InvalidInput
from spatialdp.federated.aggregate import (
    NoiseSource,
    charge,
    check_clipping,
    check_partition_version,
    laplace_scale,
    refuse_seeded_release,
    release_noise,
    resolve_epsilons,
    secure_sum,
)
from spatialdp.federated.metrics import HistogramSpec, MetricSpec
from spatialdp.federated.release import predicted_error_bar
from spatialdp.geo.partition import Partition
from spatialdp.privacy.budget import Disjoint
from spatialdp.privacy.ledger import PrivacyLedger

__all__ = ["RELIABILITY_CLASSES", "RegionalReport", "coarsen_count", "regional_report"]

#: Reliability classes by coefficient of variation (noise sd / |value|), as the US
#: Census Bureau's American Community Survey grades its estimates.
RELIABILITY_CLASSES = ("high", "medium", "low", "suppressed")
_CV_EDGES = (0.12, 0.40)


def coarsen_count(count: int, edges: Sequence[int] = (1, 5, 10, 20)) -> str:
    """A count published only as a bucket label, e.g. ``'5-9'`` or ``'20+'``.

    Examples
    --------
    >>> [coarsen_count(k) for k in (0, 3, 7, 12, 40)]
    ['0', '1-4', '5-9', '10-19', '20+']
    """
    if count < edges[0]:
        return "0" if edges[0] == 1 else f"<{edges[0]}"
    for low, high in itertools.pairwise(edges):
        if low <= count < high:
            return f"{low}-{high - 1}"
    return f"{edges[-1]}+"


def reliability_class(cv: NDArray[np.float64], suppressed: NDArray[np.bool_]
                      ) -> pd.Categorical[str]:
    """ACS-style reliability: high (cv < 0.12), medium (<= 0.40), low, or suppressed."""
    labels = np.where(cv < _CV_EDGES[0], "high", np.where(cv <= _CV_EDGES[1], "medium", "low"))
    labels = np.where(suppressed, "suppressed", labels)
    return pd.Categorical(labels, categories=list(RELIABILITY_CLASSES), ordered=True)


@dataclass
class RegionalReport:
    """A regional evaluation round: one GeoDataFrame per metric, plus its bookkeeping.

    Attributes
    ----------
    frames : dict of str -> GeoDataFrame
        Per metric, indexed by region id: ``value``, ``error_bar``, ``ci_low``,
        ``ci_high``, ``noise_std``, ``cohort``, ``cv``, ``reliability``,
        ``suppressed`` and ``geometry`` (histograms add one column per bucket;
        their ``value`` is the mass in the top bucket, the tail).
    partition_version : str
    round_index : int or None
    epsilon : dict of str -> float
        Privacy loss of each metric's release (the round costs their sum).
    alpha : float
    min_cohort : int
    suppressed_regions : str
        The number of suppressed regions, coarsened (e.g. ``'1-4'``).
    """

    frames: dict[str, gpd.GeoDataFrame]
    partition_version: str
    round_index: int | None
    epsilon: dict[str, float]
    alpha: float
    min_cohort: int
    suppressed_regions: str
    metrics: dict[str, str] = field(default_factory=dict)

    def __getitem__(self, metric: str) -> gpd.GeoDataFrame:
        try:
            return self.frames[metric]
        except KeyError:
            raise InvalidInput(
                f"no metric {metric!r} in this report; it has {sorted(self.frames)}"
            ) from None

    @property
    def epsilon_total(self) -> float:
        """What the round cost each client (the metrics compose sequentially)."""
        return float(sum(self.epsilon.values()))

    def to_frame(self) -> gpd.GeoDataFrame:
        """All metrics side by side, columns ``<metric>.<column>``, one geometry."""
        first = next(iter(self.frames.values()))
        parts = [
            frame.drop(columns="geometry").add_prefix(f"{name}.")
            for name, frame in self.frames.items()
        ]
        wide = pd.concat(parts, axis=1)
        for col in wide.columns:
            if isinstance(wide[col].dtype, pd.CategoricalDtype):
                wide[col] = wide[col].astype(str)
        out = gpd.GeoDataFrame(wide, geometry=first.geometry, crs=first.crs)
        out.attrs["spatialdp"] = self.metadata()
        return out

    def metadata(self) -> dict[str, object]:
        """Versions, epsilon and floors, recorded with every output file."""
        return {
            "partition_version": self.partition_version,
            "round": self.round_index,
            "epsilon": dict(self.epsilon),
            "alpha": self.alpha,
            "min_cohort": self.min_cohort,
            "suppressed_regions": self.suppressed_regions,
            "metrics": dict(self.metrics),
        }

    def write(self, folder: str | os.PathLike[str], stem: str = "regional_report") -> list[Path]:
        """Write a GeoPackage and a CSV into ``folder``, each atomically."""
        target = Path(folder)
        target.mkdir(parents=True, exist_ok=True)
        wide = self.to_frame()
        written = []
        for suffix, writer in (
            (".gpkg", lambda p: wide.reset_index().to_file(p, driver="GPKG",
                                                           layer="regional_report")),
            (".csv", lambda p: wide.drop(columns="geometry").to_csv(p)),
        ):
            path = target / f"{stem}{suffix}"
            fd, tmp = tempfile.mkstemp(dir=target, prefix=f".{stem}.", suffix=suffix)
            os.close(fd)
            os.unlink(tmp)  # GPKG writers refuse to overwrite an empty file
            try:
                writer(tmp)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            written.append(path)
        return written

    def summary(self) -> str:
        """A short text summary for the CLI and notebooks."""
        lines = [
            f"regional report, round {self.round_index}, partition {self.partition_version}, "
            f"epsilon {self.epsilon_total:g} per client ({self.alpha:.0%} error bars)",
            f"  suppressed regions (coarsened): {self.suppressed_regions}",
        ]
        for name, frame in self.frames.items():
            shown = frame[~frame.suppressed]
            lines.append(
                f"  {name:<10} {len(shown)} regions published, value "
                f"{shown.value.min():.3g}..{shown.value.max():.3g}, median bar "
                f"{shown.error_bar.median():.3g}, reliability "
                + ", ".join(f"{k}={v}" for k, v in
                            frame.reliability.value_counts().items() if v)
            )
        return "\n".join(lines)


def _client_positions(reports: pd.DataFrame, partition: Partition, region_column: str
                      ) -> NDArray[np.int64]:
    if region_column not in reports.columns:
        raise InvalidInput(
            f"the client reports have no {region_column!r} column; give each client's region "
            f"(columns are {list(reports.columns)[:8]})"
        )
    regions = reports[region_column].astype(str).to_numpy()
    positions = partition.region_ids.get_indexer(pd.Index(regions))
    if (positions < 0).any():
        bad = pd.unique(regions[positions < 0])[:3]
        raise InvalidInput(
            f"{int((positions < 0).sum())} clients are in regions that are not in "
            f"{partition.key!r} (first: {list(bad)}); assign them with partition.assign()"
        )
    return positions.astype(np.int64)


def _metric_columns(reports: pd.DataFrame, spec: MetricSpec | HistogramSpec) -> NDArray[np.float64]:
    if isinstance(spec, MetricSpec):
        cols = [spec.name]
    else:
        cols = [f"{spec.name}_{i}" for i in range(spec.n_buckets)]
    missing = [c for c in cols if c not in reports.columns]
    if missing:
        raise InvalidInput(
            f"the client reports lack columns {missing} for metric {spec.key}; run the device "
            "module with this spec"
        )
    return reports[cols].to_numpy(dtype=np.float64).squeeze(axis=1 if len(cols) == 1 else None)


def regional_report(
    client_reports: pd.DataFrame,
    partition: Partition,
    metrics: Sequence[MetricSpec | HistogramSpec],
    *,
    epsilon: float | Mapping[str, float],
    min_cohort: int = 50,
    alpha: float = 0.05,
    region_column: str = "region",
    ledger: PrivacyLedger | None = None,
    epoch: int | None = None,
    line_item: str = "evaluation.regional",
    who: str = "spatialdp",
    why: str = "regional evaluation round",
    round_index: int | None = None,
    noise: NoiseSource | None = None,
) -> RegionalReport:
    """Private per-region metrics for a whole partition, in one call.

    Parameters
    ----------
    client_reports : DataFrame
        One row per client, from the device module: a ``region_column`` with the
        client's region id, a column per scalar metric (named as its spec) and
        ``<hist>_0 .. <hist>_k`` per histogram.
    partition : Partition
    metrics : sequence of MetricSpec / HistogramSpec
    epsilon : float or mapping name -> float
        Privacy loss of each metric's release; every region gets it in full.
    min_cohort : int
        Publication floor per region; regions below it are suppressed.
    alpha : float
        Error bars are (1 - alpha) intervals of the noise.
    ledger, epoch, line_item, who, why, round_index
        The round is charged once, before any noise is drawn, as one release over
        the partition's disjoint regions costing the sum of the metrics' epsilons.
    noise : callable, optional
        Default: the release path (OS entropy, no seed). Simulations pass
        :func:`~spatialdp.federated.aggregate.simulation_noise`.

    Returns
    -------
    RegionalReport

    Raises
    ------
    InvalidInput, PartitionMismatch, ClippingFailure, BudgetExceeded
        Nothing is charged or published when any of them is raised.
    """
    if not metrics:
        raise InvalidInput("give at least one metric spec to report")
    if not isinstance(min_cohort, (int, np.integer)) or min_cohort < 1:
        raise InvalidInput(f"min_cohort={min_cohort!r} must be a positive integer")
    refuse_seeded_release(noise, ledger)
    check_partition_version(client_reports, partition.version)
    epsilons = resolve_epsilons(metrics, epsilon)
    positions = _client_positions(client_reports, partition, region_column)

    sums = {}
    counts = np.bincount(positions, minlength=partition.n_regions).astype(np.int64)
    for spec in metrics:
        summed = secure_sum(_metric_columns(client_reports, spec), positions, partition.n_regions)
        check_clipping(spec, summed.sums, summed.counts)
        sums[spec.name] = summed.sums
    suppressed = counts < min_cohort
    published = int((~suppressed).sum())
    if published == 0:
        raise InvalidInput(
            f"every region is below the cohort floor of {min_cohort} (largest cohort "
            f"{int(counts.max())}); nothing can be published: lower the floor only if the "
            "error bar allows, or merge regions"
        )
    charge(
        ledger=ledger, epoch=epoch, line_item=line_item,
        structure=Disjoint(partition.key, parts=published),
        epsilon=float(sum(epsilons.values())),
        what="regional report: " + ", ".join(
            f"{s.key} (eps {epsilons[s.name]:g})" for s in metrics),
        who=who, why=why, round_index=round_index,
    )
    add_noise = noise or release_noise
    frames = {
        spec.name: _metric_frame(spec, sums[spec.name], counts, suppressed, epsilons[spec.name],
                                 alpha, partition, add_noise)
        for spec in metrics
    }
    report = RegionalReport(
        frames=frames,
        partition_version=partition.version,
        round_index=round_index,
        epsilon=epsilons,
        alpha=alpha,
        min_cohort=int(min_cohort),
        suppressed_regions=coarsen_count(int(suppressed.sum())),
        metrics={s.name: s.key for s in metrics},
    )
    for name, frame in frames.items():
        frame.attrs["spatialdp"] = {**report.metadata(), "metric": name,
                                    "epsilon": epsilons[name]}
    return report


def _metric_frame(
    spec: MetricSpec | HistogramSpec,
    sums: NDArray[np.float64],
    counts: NDArray[np.int64],
    suppressed: NDArray[np.bool_],
    epsilon: float,
    alpha: float,
    partition: Partition,
    add_noise: NoiseSource,
) -> gpd.GeoDataFrame:
    shown = ~suppressed
    n = counts[shown].astype(np.float64)
    scale = laplace_scale(spec.sensitivity, epsilon)
    # Only published regions are noised: suppressed sums never leave the server.
    noisy = add_noise(sums[shown], scale)
    means = noisy / (n[:, None] if noisy.ndim == 2 else n)
    bar = predicted_error_bar(spec.sensitivity, epsilon, 1, alpha) / n  # shrinks as 1/n
    table = pd.DataFrame(index=partition.region_ids)
    if isinstance(spec, HistogramSpec):
        for i, label in enumerate(spec.labels):
            table[label] = np.nan
            table.loc[shown, label] = means[:, i]
        value = means[:, -1]
    else:
        value = means
    table["value"] = np.nan
    table.loc[shown, "value"] = value
    table["error_bar"] = np.nan
    table.loc[shown, "error_bar"] = bar
    table["ci_low"] = table.value - table.error_bar
    table["ci_high"] = table.value + table.error_bar
    table["noise_std"] = np.nan
    table.loc[shown, "noise_std"] = np.sqrt(2.0) * scale / n
    # Nothing is published below the floor, not even the size of the cohort.
    table["cohort"] = pd.array(np.where(shown, counts, 0), dtype="Int64")
    table.loc[~shown, "cohort"] = pd.NA
    with np.errstate(divide="ignore", invalid="ignore"):
        cv = (table.noise_std / table.value.abs()).to_numpy()
    table["cv"] = cv
    table["reliability"] = reliability_class(np.nan_to_num(cv, nan=np.inf), suppressed)
    table["suppressed"] = suppressed
    return partition.join(table)
