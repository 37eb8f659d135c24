"""Incident detectors that read only published aggregates.

Each detector looks at what was released (values with their error bars) and
returns :class:`Incident` records with the likely cause and what to check; none
of them needs, or may use, raw client data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from spatialdp.exceptions import InvalidInput
from spatialdp.federated.metrics import HistogramSpec
from spatialdp.federated.release import HistogramRelease

__all__ = [
    "Incident",
    "estimate_quantile",
    "persistently_empty_buckets",
    "ratio_pinned_at_clip",
    "stale_clip_bound",
    "suspiciously_good_region",
]


@dataclass(frozen=True)
class Incident:
    """A published pattern that needs a human: what, where, and what to check."""

    kind: str
    region_id: str | None
    message: str
    hint: str

    def __str__(self) -> str:
        where = f" [{self.region_id}]" if self.region_id is not None else ""
        return f"{self.kind}{where}: {self.message} -- {self.hint}"


def _published(frame: pd.DataFrame) -> pd.DataFrame:
    missing = {"value", "error_bar", "suppressed", "cohort"} - set(frame.columns)
    if missing:
        raise InvalidInput(f"the report frame lacks columns {sorted(missing)}")
    return frame[~frame.suppressed.astype(bool)]


def ratio_pinned_at_clip(frame: pd.DataFrame, clip: float, *, tolerance: float = 0.1
                         ) -> list[Incident]:
    """Regions whose mean along/across-track ratio cannot be told from its clip.

    Fires when even the lower end of the interval is within ``tolerance`` (10%)
    of the clip: (almost) every client in the region is pinned at the clip, not
    merely a noisy region whose interval happens to reach it.
    """
    shown = _published(frame)
    pinned = shown[shown.value - shown.error_bar >= (1.0 - tolerance) * clip]
    return [
        Incident(
            "ratio-pinned-at-clip", str(region),
            f"mean across/along ratio {row.value:.2f} +/- {row.error_bar:.2f} is at the clip "
            f"{clip:g} (n={int(row.cohort)})",
            "either the model drifts sideways there or a subset of devices uses the wrong "
            "coordinate frame: check the devices' CRS/projection handling before retraining",
        )
        for region, row in pinned.iterrows()
    ]


def persistently_empty_buckets(
    releases: Sequence[HistogramRelease], *, rounds: int = 3, min_share: float = 0.01
) -> list[Incident]:
    """Buckets whose upper confidence bound stayed below ``min_share`` for ``rounds`` releases.

    Parameters
    ----------
    releases : sequence of HistogramRelease
        Oldest first, one metric and spec version.
    """
    if len(releases) < rounds:
        return []
    recent = releases[-rounds:]
    if len({r.metric for r in recent}) != 1:
        raise InvalidInput("the releases mix histogram spec versions; compare one version")
    mass = np.array([r.values.sum() for r in recent])
    upper = np.array([(r.values + r.error_bar) / max(m, 1e-12)
                      for r, m in zip(recent, mass, strict=True)])
    empty = (upper < min_share).all(axis=0)
    labels = recent[-1].labels
    return [
        Incident(
            "empty-histogram-bucket", recent[-1].region_id,
            f"bucket {labels[i]} of {recent[-1].metric} held under {min_share:.0%} of the mass "
            f"in each of the last {rounds} releases",
            "the edges no longer match the model's error scale: bump the edge version (a new "
            "HistogramSpec version starts a new baseline)",
        )
        for i in np.flatnonzero(empty)
    ]


def suspiciously_good_region(frame: pd.DataFrame, *, lower_is_better: bool = True
                             ) -> list[Incident]:
    """Return the best region, when it leads far but its wide bar makes the lead insignificant.

    Fires when the best region leads the runner-up by more than the typical
    (median) error bar, its own bar is at least 1.5 times the typical one (a
    small cohort), and the lead is still inside the two bars: more likely a
    small cohort's noise than an insight.
    """
    shown = _published(frame).sort_values("value", ascending=lower_is_better)
    if len(shown) < 3:
        return []
    best, runner_up = shown.iloc[0], shown.iloc[1]
    gap = abs(best.value - runner_up.value)
    typical_bar = float(np.median(shown.error_bar))
    far_better = gap > typical_bar
    wide = best.error_bar >= 1.5 * typical_bar
    if far_better and wide and gap <= best.error_bar + runner_up.error_bar:
        return [Incident(
            "suspiciously-good-region", str(shown.index[0]),
            f"best value {best.value:.3g} +/- {best.error_bar:.3g} (n={int(best.cohort)}) is "
            f"not significantly better than the runner-up {runner_up.value:.3g}",
            "check the cohort size: a small cohort's noisy mean has a wide bar; confirm "
            "significance against the bar before acting",
        )]
    return []


def estimate_quantile(release: HistogramRelease, spec: HistogramSpec, q: float) -> float:
    """Return the ``q`` quantile of the released distribution, from its noised buckets.

    Negative noisy buckets are set to zero (post-processing) and the quantile is
    the upper edge of the bucket where the cumulative share first reaches ``q``
    (``inf`` for the open top bucket). Uses only the published histogram.
    """
    if release.metric != spec.key:
        raise InvalidInput(f"release is {release.metric}, spec is {spec.key}")
    mass = np.clip(release.values, 0.0, None)
    if mass.sum() <= 0:
        return float("nan")
    cumulative = np.cumsum(mass) / mass.sum()
    bucket = int(np.searchsorted(cumulative, q, side="left"))
    return float(spec.edges[bucket]) if bucket < len(spec.edges) else float("inf")


def stale_clip_bound(
    release: HistogramRelease,
    spec: HistogramSpec,
    current_clip: float,
    *,
    percentile: float = 99.0,
    factor: float = 0.5,
) -> list[Incident]:
    """Flag a clip bound far above the metric's current published distribution.

    The ``percentile`` is re-derived from the published histogram of the same
    quantity (never from raw data); when it is below ``factor * current_clip``
    the bound is stale and makes the noise larger than it needs to be.
    """
    estimate = estimate_quantile(release, spec, percentile / 100.0)
    if np.isfinite(estimate) and estimate < factor * current_clip:
        return [Incident(
            "stale-clip-bound", release.region_id,
            f"the published p{percentile:g} of {spec.name} is <= {estimate:g}, far below the "
            f"clip bound {current_clip:g}",
            f"re-derive the bound from published aggregates (about {estimate:g}) and release "
            "a new MetricSpec version; the noise scale falls by the same factor",
        )]
    return []
