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

from spatialdp._validation import (
    check_flag,
    check_instance,
    check_integer,
    check_number,
    check_positive,
    check_probability,
    fail,
)
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


_FRAME_FIX = "pass report[metric] of a RegionalReport"


def _published(frame: pd.DataFrame) -> pd.DataFrame:
    """Return the published rows, with numeric ``value``, ``error_bar`` and ``cohort``."""
    if not isinstance(frame, pd.DataFrame):
        raise fail("frame", frame, f"is a {type(frame).__name__}, not a report frame",
                   _FRAME_FIX)
    missing = {"value", "error_bar", "suppressed", "cohort"} - set(frame.columns)
    if missing:
        raise InvalidInput(f"the report frame lacks columns {sorted(missing)}; {_FRAME_FIX}")
    if frame.columns.duplicated().any():
        raise InvalidInput(f"the report frame repeats column names; {_FRAME_FIX}")
    flags = frame["suppressed"]
    if not (pd.api.types.is_bool_dtype(flags.dtype) or flags.isin([0, 1]).all()):
        raise InvalidInput(f"the report frame's 'suppressed' column is not True/False; "
                           f"{_FRAME_FIX}")
    shown = frame[~flags.astype(bool).to_numpy()]
    numeric = {}
    for column in ("value", "error_bar", "cohort"):
        try:
            numeric[column] = pd.to_numeric(shown[column]).astype("float64")
        except (TypeError, ValueError):
            raise InvalidInput(f"the report frame's {column!r} column is not numeric; "
                               f"{_FRAME_FIX}") from None
    bad = numeric["value"].isna() | ~np.isfinite(numeric["error_bar"]) | (
        numeric["error_bar"] < 0) | numeric["cohort"].isna()
    if bad.any():
        raise InvalidInput(
            f"{int(bad.sum())} published regions have no value, cohort or finite error bar "
            f"(first: {shown.index[bad.to_numpy()][0]!r}); {_FRAME_FIX}")
    return shown.assign(**numeric)


def ratio_pinned_at_clip(frame: pd.DataFrame, clip: float, *, tolerance: float = 0.1
                         ) -> list[Incident]:
    """Regions whose mean along/across-track ratio cannot be told from its clip.

    Fires when even the lower end of the interval is within ``tolerance`` (10%)
    of the clip: (almost) every client in the region is pinned at the clip, not
    merely a noisy region whose interval happens to reach it.
    """
    shown = _published(frame)
    cap = check_positive(clip, "clip", fix="pass the ratio's clip bound, e.g. 10.0")
    tol = check_number(tolerance, "tolerance", low=0.0, high=1.0, high_open=True,
                       fix="pass a share of the clip in [0, 1), e.g. 0.1")
    pinned = shown[shown.value - shown.error_bar >= (1.0 - tol) * cap]
    return [
        Incident(
            "ratio-pinned-at-clip", str(region),
            f"mean across/along ratio {row.value:.2f} +/- {row.error_bar:.2f} is at the clip "
            f"{cap:g} (n={int(row.cohort)})",
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
    count = check_integer(rounds, "rounds", low=1, fix="pass a number of releases >= 1, e.g. 3")
    share = check_probability(min_share, "min_share")
    if isinstance(releases, (str, bytes, pd.DataFrame)) or not isinstance(releases, Sequence):
        raise fail("releases", releases, "is not a sequence of HistogramRelease",
                   "pass a list of histogram releases, oldest first")
    for i, rel in enumerate(releases):
        check_instance(rel, f"releases[{i}]", HistogramRelease,
                       "pass the releases aggregate_histogram returned")
    if len(releases) < count:
        return []
    recent = list(releases[-count:])
    if len({r.metric for r in recent}) != 1 or len({len(r.labels) for r in recent}) != 1:
        raise InvalidInput("the releases mix histogram spec versions; compare one version")
    values = [np.asarray(r.values, dtype=np.float64) for r in recent]
    if any(v.shape != (len(recent[-1].labels),) or not np.isfinite(v).all() for v in values) or (
            not all(np.isfinite(r.error_bar) and r.error_bar >= 0 for r in recent)):
        raise InvalidInput("a release has values that do not match its labels, or values or "
                           "an error bar that are not finite; pass unmodified releases")
    mass = np.array([v.sum() for v in values])
    upper = np.array([(v + r.error_bar) / max(m, 1e-12)
                      for v, r, m in zip(values, recent, mass, strict=True)])
    empty = (upper < share).all(axis=0)
    labels = recent[-1].labels
    return [
        Incident(
            "empty-histogram-bucket", recent[-1].region_id,
            f"bucket {labels[i]} of {recent[-1].metric} held under {share:.0%} of the mass "
            f"in each of the last {count} releases",
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
    ascending = check_flag(lower_is_better, "lower_is_better")
    shown = _published(frame).sort_values("value", ascending=ascending)
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
    check_instance(release, "release", HistogramRelease,
                   "pass the release aggregate_histogram returned")
    check_instance(spec, "spec", HistogramSpec, "pass the HistogramSpec it was released under")
    level = check_probability(q, "q")
    if release.metric != spec.key:
        raise InvalidInput(f"release is {release.metric}, spec is {spec.key}")
    mass = np.clip(np.asarray(release.values, dtype=np.float64), 0.0, None)
    if mass.shape != (spec.n_buckets,) or not np.isfinite(mass).all():
        raise InvalidInput(f"the release's values do not match the {spec.n_buckets} buckets of "
                           f"{spec.key} or are not finite; pass an unmodified release")
    if mass.sum() <= 0:
        return float("nan")
    cumulative = np.cumsum(mass) / mass.sum()
    bucket = int(np.searchsorted(cumulative, level, side="left"))
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
    clip = check_number(current_clip, "current_clip", fix="pass the clip bound in use")
    pct = check_number(percentile, "percentile", low=0.0, high=100.0, low_open=True,
                       fix="pass a percentile in (0, 100], e.g. 99")
    ratio = check_positive(factor, "factor", fix="pass a positive factor, e.g. 0.5")
    estimate = estimate_quantile(release, spec, pct / 100.0)
    if np.isfinite(estimate) and estimate < ratio * clip:
        return [Incident(
            "stale-clip-bound", release.region_id,
            f"the published p{pct:g} of {spec.name} is <= {estimate:g}, far below the "
            f"clip bound {clip:g}",
            f"re-derive the bound from published aggregates (about {estimate:g}) and release "
            "a new MetricSpec version; the noise scale falls by the same factor",
        )]
    return []
