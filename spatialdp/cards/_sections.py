"""The card's sections as plain JSON-ready dicts, from objects or from run-folder files.

Each builder takes the library's objects (or the dicts the run folder stores)
and returns one section of the card. Counts of people follow one policy per
neighbouring relation (:data:`PARTICIPATION`): under replace-one neighbours
participation is public by assumption, so cohorts, clients sampled and pool
sizes are exact bookkeeping; under add/remove every count of people on the
card is a noised count from a release (the reports' cohorts, a
:class:`~spatialdp.sampling.ReleasedCoverage`), and exact bookkeeping is refused
(:func:`check_participation`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from spatialdp._validation import fail

#: Where a section's numbers come from.
PROVENANCE: dict[str, str] = {
    "release": "noised under differential privacy and charged to the privacy ledger",
    "simulation": "seeded simulation: not a release; never publish it as one",
    "unaccounted": "noised with OS entropy, but charged to no ledger",
    "bookkeeping": "exact bookkeeping of public parameters and of the server's own selection "
                   "(published only under replace-one neighbours, where participation is "
                   "public)",
}

#: What each neighbouring relation means for the counts of people on a card.
PARTICIPATION: dict[str, str] = {
    "replace": "replace-one neighbours: one client's values are protected, not the fact "
               "that or where it took part. Participation (who was selected, who reported, "
               "from which region) is public by assumption, so cohort sizes, clients sampled "
               "and pool sizes on this card are exact.",
    "add_remove": "add/remove neighbours: whether and where a client took part is protected "
                  "too. Every count of people on this card is a noised count from a release "
                  "(cohorts, coverage); floors, suppression and blind spots were decided on "
                  "noised counts; the server's exact selection records are not published.",
}

_ACCOUNTING_TO_PROVENANCE = {"ledger": "release", "simulation": "simulation",
                             "unaccounted": "unaccounted"}


def participation_text(relations: Sequence[str]) -> str:
    """Return the card's statement of what its counts of people reveal, for ``relations``.

    Examples
    --------
    >>> participation_text(["add_remove"]).split(":")[0]
    'add/remove neighbours'
    """
    chosen = [r for r in ("replace", "add_remove") if r in set(relations)]
    if not chosen:
        return "No release is recorded on this card."
    if len(chosen) == 2:
        return ("Mixed: some releases hold for replace-one neighbours, others for add/remove. "
                "Participation is protected only by the add/remove releases; the replace-one "
                "ones reveal it. The per-client epsilon sums every charge at its own "
                "relation, so it bounds neither relation alone: against replace-one "
                "neighbours an add/remove charge counts up to twice (a replacement is a "
                "removal and an addition), and against add/remove neighbours the replace-one "
                "releases are not bounded at all. " + " ".join(PARTICIPATION[r] for r in chosen))
    return PARTICIPATION[chosen[0]]


def card_relations(rounds: Sequence[Mapping[str, Any]], privacy: Mapping[str, Any] | None
                   ) -> list[str]:
    """Return the neighbouring relations of a card's rounds and ledger charges, sorted.

    Examples
    --------
    >>> card_relations([{"neighbours": "add_remove"}], {"neighbours": ["replace"]})
    ['add_remove', 'replace']
    """
    relations = {str(r["neighbours"]) for r in rounds}
    relations.update((privacy or {}).get("neighbours") or [])
    return sorted(relations)


def check_participation(relations: Sequence[str], *, sampling: Mapping[str, Any] | None,
                        coverage: Mapping[str, Any] | None,
                        cohort_sizes: Mapping[str, Any] | None) -> None:
    """Refuse exact counts of people on a card whose releases all protect participation.

    When every release holds for add/remove neighbours the server's selection
    records (merges decided on exact pool sizes, the exact coverage, exact
    cohorts) would give away what the releases protect.

    Raises
    ------
    InvalidInput
        Exact bookkeeping on an add/remove card, naming the section and the fix.
    """
    if set(relations) != {"add_remove"}:
        # Replace-one releases publish participation exactly: with any of them on the
        # card (mixed relations included, and said so), the selection records reveal
        # nothing those releases do not.
        return
    fix = ("under add/remove neighbours publish only releases: "
           "release_epoch_coverage(...) instead of epoch_coverage(...), no merges, and "
           "cohorts from the reports")
    if coverage is not None and coverage.get("provenance") != "release":
        raise fail("coverage", "exact bookkeeping (epoch_coverage)",
                   "holds exact counts of the clients sampled per region", fix)
    if sampling is not None and sampling.get("merges"):
        raise fail("merges", f"{len(sampling['merges'])} merge(s)",
                   "were decided on exact pool sizes", fix)
    if cohort_sizes is not None and cohort_sizes.get("provenance") != "release":
        raise fail("cohort_sizes", "exact per-region counts",
                   "are not the reports' noised cohorts", fix)


def _number(value: Any) -> float | None:
    """Return a finite float, or None (NaN, NA, missing)."""
    if value is None or value is pd.NA:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


# ----------------------------------------------------------------------------- geography
def partition_section(partition: Any) -> dict[str, Any]:
    """Return ``{name, version, key, kind, n_regions, resolution}`` of a Partition (or dict)."""
    from spatialdp.geo.partition import Partition

    if isinstance(partition, Partition):
        return {"name": str(partition.name), "version": str(partition.version),
                "key": str(partition.key), "kind": str(partition.kind),
                "n_regions": int(partition.n_regions),
                "resolution": None if partition.resolution is None else int(partition.resolution)}
    if isinstance(partition, Mapping) and {"name", "version"} <= set(partition):
        name, version = str(partition["name"]), str(partition["version"])
        n = partition.get("n_regions")
        res = partition.get("resolution")
        return {"name": name, "version": version,
                "key": str(partition.get("key") or f"{name}@{version}"),
                "kind": str(partition.get("kind") or "polygons"),
                "n_regions": None if n is None else int(n),
                "resolution": None if res is None else int(res)}
    raise fail("partition", partition, "is not a Partition (nor a dict with name and version)",
               "pass the run's spatialdp.geo.Partition")


def spec_section(spec: Any) -> dict[str, Any]:
    """Return a MetricSpec or HistogramSpec (or its dict) as the card's spec entry."""
    from spatialdp.federated.metrics import HistogramSpec, MetricSpec

    extra = {"label": getattr(spec, "label", None), "unit": getattr(spec, "unit", None)}
    if isinstance(spec, MetricSpec):
        return {**extra, "name": spec.name, "kind": "metric", "key": spec.key,
                "version": spec.version, "fingerprint": spec.fingerprint, "clip_low": spec.clip_low,
                "clip_high": spec.clip_high, "present": spec.present,
                "sensitivity": spec.sensitivity,
                "sensitivity_add_remove": spec.sensitivity_under("add_remove")}
    if isinstance(spec, HistogramSpec):
        return {**extra, "name": spec.name, "kind": "histogram", "key": spec.key,
                "version": spec.version, "fingerprint": spec.fingerprint,
                "edges": [float(e) for e in spec.edges], "mass_cap": spec.mass_cap,
                "labels": list(spec.labels), "sensitivity": spec.sensitivity,
                "sensitivity_add_remove": spec.sensitivity_under("add_remove")}
    if isinstance(spec, Mapping) and {"name", "kind", "key", "fingerprint"} <= set(spec):
        return dict(spec)
    raise fail("specs", spec, "holds something that is not a MetricSpec or HistogramSpec",
               "pass the specs the devices clipped under")


# ----------------------------------------------------------------------------- sampling
def merge_entry(merge: Any) -> dict[str, Any]:
    """Return a Merge (or its dict) as the card's entry (its reason as the sampler wrote it)."""
    data = merge.to_dict() if hasattr(merge, "to_dict") else dict(merge)
    if not {"members", "into", "reason"} <= set(data):
        raise fail("merges", merge, "holds something that is not a Merge",
                   "pass the Merge records (Coverage.merges or ParticipationState.merges)")
    ri = data.get("round_index")
    return {"members": [str(m) for m in data["members"]], "into": [str(m) for m in data["into"]],
            "reason": str(data["reason"]),
            "round_index": None if ri is None else int(ri)}


def sampling_section(strata: Any, merges: Sequence[Any] | None) -> dict[str, Any]:
    """Return the strata (key, basis, version, ids) and every merge with its reason."""
    from spatialdp.sampling.strata import Strata

    if isinstance(strata, Strata):
        info: dict[str, Any] = {"key": strata.key, "basis": strata.basis,
                                "version": strata.version, "n_strata": strata.n_strata,
                                "ids": [str(i) for i in strata.ids],
                                "partition": partition_section(strata.partition)}
    elif isinstance(strata, Mapping) and "strata" in strata:
        return {"strata": dict(strata["strata"]),
                "merges": [merge_entry(m) for m in (merges if merges is not None
                                                    else strata.get("merges", []))],
                "provenance": "bookkeeping"}
    elif strata is None:
        info = {}
    else:
        raise fail("strata", strata, "is not a Strata", "pass the sampler's Strata")
    return {"strata": info, "merges": [merge_entry(m) for m in (merges or [])],
            "provenance": "bookkeeping"}


def cells_entries(table: Any) -> dict[str, Any]:
    """Return the H3-cell coverage of a per-cell table (``clients``, ``clients_sampled``).

    Cells with clients, cells reached, their share, and the blind cells listed
    (cells with clients and none sampled). Counts of cells, not of people.
    """
    if not isinstance(table, pd.DataFrame) or not {"clients", "clients_sampled"} <= set(
            table.columns):
        raise fail("cell_table", table, "is not a per-cell table with clients and "
                   "clients_sampled", "pass Coverage.cell_table or one row per H3 cell")
    populated = table.clients.to_numpy() > 0
    reached = populated & (table.clients_sampled.to_numpy() > 0)
    n_pop = int(populated.sum())
    return {"cells_with_clients": n_pop, "populated_cells_sampled": int(reached.sum()),
            "share_populated_cells_sampled": float(reached.sum() / n_pop) if n_pop else None,
            "blind_cells": [str(c) for c in table.index[populated & ~reached]]}


def coverage_section(coverage: Any, history: Any = None, cell_table: Any = None
                     ) -> dict[str, Any]:
    """Return the coverage figures of a Coverage (exact) or a ReleasedCoverage (noised).

    The exact :class:`~spatialdp.sampling.Coverage` is the server's bookkeeping
    (publishable under replace-one neighbours only); a
    :class:`~spatialdp.sampling.ReleasedCoverage` is a release (add/remove).
    """
    from spatialdp.sampling.coverage import Coverage, ReleasedCoverage

    if isinstance(coverage, ReleasedCoverage):
        return released_coverage_section(coverage)
    if isinstance(coverage, Mapping):
        section = dict(coverage)
        if section.get("provenance") == "release":
            return section
    elif isinstance(coverage, Coverage):
        table = coverage.table
        strata_rows = [
            {"stratum": str(i), "group": str(row.group), "merged": bool(row.merged),
             "blind_spot": bool(row.blind_spot),
             "clients_sampled": int(row.clients_sampled)}  # type: ignore[arg-type]
            for i, row in zip(table.index, table.itertuples(), strict=True)]
        regions = None
        if coverage.report_table is not None:
            rt = coverage.report_table
            regions = [{"region_id": str(i),
                        "clients_sampled": int(row.clients_sampled),  # type: ignore[arg-type]
                        "blind_spot": bool(row.blind_spot)}
                       for i, row in zip(rt.index, rt.itertuples(), strict=True)]
        n_regions = len(coverage.report_table) if coverage.report_table is not None else None
        share_regions = (None if coverage.report_table is None
                         else float((coverage.report_table.clients_sampled > 0).mean()))
        section = {
            "epoch": int(coverage.epoch), "strata": coverage.strata_key,
            "share_strata_sampled": float(coverage.share_strata_sampled),
            "share_regions_sampled": share_regions, "n_regions": n_regions,
            "share_cells_sampled": _number(coverage.share_cells_sampled),
            "n_cells": None if coverage.n_cells is None else int(coverage.n_cells),
            "cells_sampled": None if coverage.cells_sampled is None
            else int(coverage.cells_sampled),
            "blind_spots": [str(b) for b in coverage.blind_spots],
            "blind_regions": [str(b) for b in coverage.blind_regions],
            "epsilon_per_client": float(coverage.epsilon_per_client),
            "alerts": [{"kind": a.kind, "region_id": a.region_id, "hint": a.hint}
                       for a in coverage.alerts],
            "strata_table": strata_rows, "regions_table": regions,
            "score_history": history_rows(coverage.score_history, coverage.epoch),
            "merges": [merge_entry(m) for m in coverage.merges],
        }
        if coverage.cell_table is not None and cell_table is None:
            section.update(cells_entries(coverage.cell_table))
    else:
        raise fail("coverage", coverage, "is not a Coverage or a ReleasedCoverage",
                   "pass epoch_coverage(...) or release_epoch_coverage(...)'s result")
    if cell_table is not None:
        section.update(cells_entries(cell_table))
    if history is not None:
        section["score_history"] = history_rows(history, section.get("epoch"))
    section["neighbours"] = "replace"
    section["provenance"] = "bookkeeping"
    return section


def released_coverage_section(coverage: Any) -> dict[str, Any]:
    """Return a :class:`~spatialdp.sampling.ReleasedCoverage` as the card's coverage section."""
    regions = coverage.regions.frame
    rows = [{"region_id": str(i), "clients_sampled": int(n), "covered": bool(c)}
            for i, n, c in zip(regions.index, regions.clients, regions.covered, strict=True)]
    cells = coverage.cells
    return {
        "epoch": int(coverage.epoch), "neighbours": str(coverage.neighbours),
        "epsilon": float(coverage.epsilon), "n_regions": len(regions),
        "regions_confirmed": coverage.regions.n_confirmed,
        "region_error_bar": coverage.regions.error_bar,
        "blind_regions": coverage.blind_regions, "regions_table": rows,
        "n_cells": None if cells is None else len(cells.frame),
        "cells_confirmed": None if cells is None else cells.n_confirmed,
        "cell_error_bar": None if cells is None else cells.error_bar,
        "blind_cells": coverage.blind_cells, "provenance": "release",
    }


def blind_summary(section: Mapping[str, Any]) -> dict[str, Any]:
    """Return the blind spots of a coverage section per level, each over ONE denominator.

    Strata and report regions count over all of them; H3 cells over the cells
    with clients when the per-cell client counts are on the card (an empty cell
    can be neither reached nor blind; the exact coverage map draws the same),
    else over all cells of the partition (released coverage: which cells hold
    devices is private, so its map and card both count every cell).

    Examples
    --------
    >>> blind_summary({"provenance": "release", "blind_regions": ["VT"], "n_regions": 48,
    ...                "blind_cells": [], "n_cells": None})["regions"]
    {'blind': 1, 'of': 48, 'of_what': 'regions (not confirmed reached)'}
    """
    def level(blind: int | None, of: Any, what: str) -> dict[str, Any] | None:
        return None if of is None else {"blind": blind, "of": int(of), "of_what": what}

    released = section.get("provenance") == "release"
    strata = section.get("strata_table")
    regions = section.get("regions_table")
    cells: dict[str, Any] | None
    if released:
        cells = level(len(section.get("blind_cells") or []), section.get("n_cells"),
                      "cells of the partition (not confirmed reached)")
    elif section.get("cells_with_clients") is not None:
        cells = level(len(section.get("blind_cells") or []), section["cells_with_clients"],
                      "cells with clients")
    else:
        cells = level(None, section.get("n_cells"),
                      "cells of the partition (no per-cell client counts: blind cells not "
                      "measured)")
    return {
        "strata": None if released or strata is None else level(
            len(section.get("blind_spots") or []), len(strata), "strata"),
        "regions": level(len(section.get("blind_regions") or []),
                         section.get("n_regions") if released or regions is not None else None,
                         "regions" + (" (not confirmed reached)" if released else "")),
        "cells": cells,
    }


def blind_text(summary: Mapping[str, Any] | None) -> str:
    """Say the blind spots of every level of a :func:`blind_summary` ("" when it has none).

    Examples
    --------
    >>> blind_text({"strata": {"blind": 0, "of": 48, "of_what": "strata"},
    ...             "cells": {"blind": 99, "of": 4408, "of_what": "cells with clients"}})
    'strata: 0 of 48 strata; cells: 99 of 4,408 cells with clients'
    """
    parts = []
    for level in ("strata", "regions", "cells"):
        entry = (summary or {}).get(level)
        if entry is not None:
            blind = "not measured" if entry["blind"] is None else f"{entry['blind']:,}"
            parts.append(f"{level}: {blind} of {entry['of']:,} {entry['of_what']}")
    return "; ".join(parts)


def history_rows(history: Any, epoch: int | None = None) -> list[dict[str, Any]]:
    """Return the coverage score's history as ``[{epoch, round_index, score}]``.

    ``history`` is a Series indexed by round (one epoch), a DataFrame with
    ``round_index`` and ``score`` (and ``epoch``), or such rows already.
    """
    if isinstance(history, pd.Series):
        frame = pd.DataFrame({"round_index": history.index, "score": history.to_numpy()})
    elif isinstance(history, pd.DataFrame):
        frame = history.reset_index() if "round_index" not in history else history
    elif isinstance(history, Sequence) and not isinstance(history, str):
        frame = pd.DataFrame(list(history))
    else:
        raise fail("coverage_history", history, "is not a score history",
                   "pass Coverage.score_history or a frame with round_index and score")
    if not {"round_index", "score"} <= set(frame.columns):
        raise fail("coverage_history", history, "has no round_index and score columns",
                   "pass Coverage.score_history or a frame with round_index and score")
    epochs = frame["epoch"] if "epoch" in frame else pd.Series([epoch] * len(frame))
    return [{"epoch": None if _number(e) is None else int(e), "round_index": int(r),
             "score": float(s)}
            for e, r, s in zip(epochs, frame["round_index"], frame["score"], strict=True)]


def cohort_section(cohort_sizes: Any, source: str) -> dict[str, Any]:
    """Return given per-region cohort sizes (``None`` values: suppressed).

    Exact counts: the bookkeeping of public participation (replace-one
    neighbours). Under add/remove the card takes the reports' noised cohorts
    instead (:func:`cohorts_from_report`).
    """
    if isinstance(cohort_sizes, pd.Series):
        items = list(cohort_sizes.items())
    elif isinstance(cohort_sizes, Mapping):
        items = list(cohort_sizes.items())
    else:
        raise fail("cohort_sizes", cohort_sizes, "is not a mapping region -> count",
                   "pass a pandas Series or dict of clients per region")
    rows = []
    for region, n in items:
        value = _number(n)
        rows.append({"region_id": str(region),
                     "cohort": "suppressed" if value is None or value < 1 else int(value)})
    return {"source": source, "neighbours": "replace", "regions": rows,
            "provenance": "bookkeeping"}


# ----------------------------------------------------------------------------- reports
_REGION_COLUMNS = ("value", "error_bar", "ci_low", "ci_high", "noise_std", "cv")


def report_section(meta: Mapping[str, Any], wide: pd.DataFrame, source: str | None
                   ) -> dict[str, Any]:
    """Return one round's metrics from a report's metadata and its wide table.

    ``meta`` is :meth:`RegionalReport.metadata` (or the report's JSON file) and
    ``wide`` its :meth:`~RegionalReport.to_frame` without geometry (or its CSV).
    """
    accounting = str(meta.get("accounting", "ledger"))
    provenance = _ACCOUNTING_TO_PROVENANCE.get(accounting, "unaccounted")
    epsilon = {str(k): float(v) for k, v in dict(meta.get("epsilon", {})).items()}
    metrics = []
    for name, key in dict(meta.get("metrics", {})).items():
        cols = {c: f"{name}.{c}" for c in (*_REGION_COLUMNS, "cohort", "reliability",
                                           "suppressed", "estimator")}
        if cols["value"] not in wide.columns and f"{name}_value" in wide.columns:
            cols = {c: f"{name}_{c}" for c in cols}  # written with names="sql"
        missing = [c for c in cols.values() if c not in wide.columns]
        if missing:
            raise fail("report", source or name, f"has no columns {missing[:3]}",
                       "pass a RegionalReport (or the CSV its write() made)")
        suppressed = wide[cols["suppressed"]].astype(str).str.lower().isin(["true", "1"])
        regions = []
        for (region, row), flag in zip(wide.iterrows(), suppressed.to_numpy(), strict=True):
            hidden = bool(flag)
            entry: dict[str, Any] = {"region_id": str(region), "suppressed": hidden,
                                     "reliability": str(row[cols["reliability"]])}
            for c in _REGION_COLUMNS:
                entry[c] = None if hidden else _number(row[cols[c]])
            count = _number(row[cols["cohort"]])
            entry["cohort"] = "suppressed" if hidden or count is None else int(count)
            regions.append(entry)
        shown = [r for r in regions if not r["suppressed"] and r["value"] is not None]
        bars = [r["error_bar"] for r in shown if r["error_bar"] is not None]
        metrics.append({
            "name": str(name), "key": str(key),
            "estimator": str(wide[cols["estimator"]].iloc[0]) if len(wide) else None,
            "value_is": value_meaning(dict(meta.get("metric_specs") or {}).get(name)),
            "epsilon": epsilon.get(str(name)),
            "median_error_bar": float(np.median(bars)) if bars else None,
            **metric_flags(shown, _value_range(wide, name)),
            "regions": regions,
        })
    round_index = meta.get("round_index")
    return {
        "source": source, "round_index": None if round_index is None else int(round_index),
        "epoch": None if meta.get("epoch") is None else int(meta["epoch"]),
        "accounting": accounting, "provenance": provenance,
        "partition_version": str(meta.get("partition_version")),
        "epsilon": epsilon, "epsilon_total": _total(epsilon),
        "alpha": float(meta.get("alpha", 0.05)), "min_cohort": int(meta.get("min_cohort", 0)),
        "suppressed_regions": _suppressed_count(meta.get("suppressed_regions"), metrics),
        "neighbours": str(meta.get("neighbours") or "replace"),
        "metrics": metrics,
    }


def _total(epsilon: Mapping[str, float]) -> float:
    """Return what a round was charged: the exact decimal sum of its metrics' shares."""
    from spatialdp.privacy.pipeline import exact_total

    return exact_total(list(epsilon.values())) if epsilon else 0.0


def value_meaning(spec: Mapping[str, Any] | None) -> str:
    """Say what a metric's published ``value`` is (a histogram's is its top bucket's share).

    Examples
    --------
    >>> value_meaning({"kind": "histogram", "name": "err",
    ...                "buckets": [{"label": "(0, 1]"}, {"label": "(1, inf)"}]})
    "share of err in the top bucket (1, inf) (the histogram's tail, not a mean)"
    >>> value_meaning({"kind": "mean", "name": "loss", "label": "squared error"})
    'mean of squared error per client'
    """
    if not isinstance(spec, Mapping):
        return "value"
    name = str(spec.get("label") or spec.get("name") or "the metric")
    if spec.get("kind") == "histogram":
        buckets = spec.get("buckets") or []
        top = f" {buckets[-1].get('label')}" if buckets and isinstance(buckets[-1], Mapping) \
            else ""
        return f"share of {name} in the top bucket{top} (the histogram's tail, not a mean)"
    return f"mean of {name} per client"


def _value_range(wide: pd.DataFrame, name: str) -> tuple[float, float] | None:
    """Return the range a client's value lies in, from the report's clip columns."""
    for low, high in ((f"{name}.clip_low", f"{name}.clip_high"),
                      (f"{name}_clip_low", f"{name}_clip_high")):
        if low in wide.columns and high in wide.columns and len(wide):
            lo, hi = _number(wide[low].iloc[0]), _number(wide[high].iloc[0])
            if lo is not None and hi is not None:
                return lo, hi
    return None


#: A metric is uninformative at its budget when this share of its published regions (or
#: more) has low reliability: its map is mostly noise.
UNINFORMATIVE_SHARE = 0.9


def metric_flags(shown: Sequence[Mapping[str, Any]], value_range: tuple[float, float] | None
                 ) -> dict[str, Any]:
    """Return how informative a metric's published values are, from the values alone.

    ``uninformative``: at least :data:`UNINFORMATIVE_SHARE` of the published
    regions have low reliability (coefficient of variation above 0.40; or
    nothing is published), so the map is mostly noise at this budget.
    ``outside_range``: published values beyond what any client could report
    (e.g. a negative share): unbiased noisy values, left as they are (clamping
    would bias them).

    Examples
    --------
    >>> flags = metric_flags([{"value": -0.1, "reliability": "low"}], (0.0, 1.0))
    >>> flags["uninformative"], flags["outside_range"]
    (True, 1)
    """
    low = sum(1 for r in shown if r.get("reliability") == "low")
    values = [r["value"] for r in shown if r.get("value") is not None]
    outside = (None if value_range is None else
               sum(1 for v in values if v < value_range[0] or v > value_range[1]))
    return {"published": len(shown), "low_reliability": low,
            "uninformative": low >= UNINFORMATIVE_SHARE * len(shown),
            "value_range": None if value_range is None else [*value_range],
            "outside_range": outside}


def report_from_object(report: Any) -> dict[str, Any]:
    """Return :func:`report_section` of a :class:`~spatialdp.federated.RegionalReport`."""
    from spatialdp.federated.regional import RegionalReport

    if not isinstance(report, RegionalReport):
        raise fail("reports", report, "holds something that is not a RegionalReport",
                   "pass the regional_report(...) results of the run")
    wide = pd.DataFrame(report.to_frame().drop(columns="geometry"))
    return report_section(report.metadata(), wide, None)


def _suppressed_count(stored: Any, metrics: Sequence[Mapping[str, Any]]) -> int:
    """Return the number of regions with no published value (recounted when not stored)."""
    number = _number(stored)
    if number is not None:
        return int(number)
    flags = [{r["region_id"] for r in m["regions"] if not r["suppressed"]} for m in metrics]
    regions = {r["region_id"] for m in metrics for r in m["regions"]}
    return len(regions - set().union(*flags)) if flags else 0


def cohorts_from_report(section: Mapping[str, Any]) -> dict[str, Any]:
    """Return the largest published cohort per region of a report section (metrics may differ)."""
    best: dict[str, int | str] = {}
    for metric in section["metrics"]:
        for row in metric["regions"]:
            old, new = best.get(row["region_id"]), row["cohort"]
            if old is None or old == "suppressed" or (new != "suppressed" and new > old):
                best[row["region_id"]] = new
    neighbours = str(section.get("neighbours", "replace"))
    which = ("the report" if section.get("round_index") is None
             else f"round {section.get('round_index')}")
    return {"source": f"cohorts of {which} (largest over metrics)",
            "neighbours": neighbours,
            "regions": [{"region_id": k, "cohort": v} for k, v in best.items()],
            "provenance": "release" if neighbours == "add_remove" else "bookkeeping"}


# ----------------------------------------------------------------------------- limitations
#: Said on every card with a replace-one round (docs/threat_model.md).
PUBLIC_PARTICIPATION = (
    "Participation is public: the replace-one releases protect each client's values, not "
    "whether or from which region it took part (cohorts are published exactly); knowing "
    "that a client took part is not protected (docs/threat_model.md; use add/remove "
    "neighbours to protect it).")


def found_limitations(rounds: Sequence[Mapping[str, Any]],
                      privacy: Mapping[str, Any] | None) -> list[str]:
    """Return the limitations the card's own sections show, in plain words.

    Public participation (any replace-one round), a ledger line item whose
    budget an epoch has fully spent, and per metric of the last round: values
    uninformative at this budget (every published region of low reliability)
    and values outside what any client could report (unbiased noise, not
    clamped).

    Examples
    --------
    >>> found_limitations([], None)
    []
    """
    found = []
    if any(r.get("neighbours") == "replace" for r in rounds):
        found.append(PUBLIC_PARTICIPATION)
    for epoch in (privacy or {}).get("epochs", []):
        for item in epoch["line_items"]:
            if item["line_item"] != "total" and item["cap"] > 0 and item["remaining"] <= 0:
                found.append(
                    f"The ledger's {item['line_item']} budget of epoch {epoch['epoch']} is "
                    f"fully spent ({item['spent']:g} of {item['cap']:g}): no further such "
                    "release can be charged in that epoch.")
    if rounds:
        last = rounds[-1]
        where = ("the report" if last.get("round_index") is None
                 else f"round {last['round_index']}")
        for m in last["metrics"]:
            found += _metric_limitations(m, where, last.get("epsilon_total"))
    return found


def _metric_limitations(metric: Mapping[str, Any], where: str, epsilon: Any) -> list[str]:
    """Return what a metric's flags (:func:`metric_flags`) mean for a reader."""
    out = []
    name, n = metric["name"], metric.get("published")
    if metric.get("uninformative"):
        share, total = metric.get("epsilon"), epsilon
        budget = ("" if not isinstance(share, (int, float)) else f" (epsilon {share:g}" + (
            f" of the round's {total:g})" if isinstance(total, (int, float)) else ")"))
        out.append(
            f"{name} is uninformative at this budget{budget} in {where}: " + (
                "no region is published" if not n else
                f"{metric.get('low_reliability')} of its {n} published regions have low "
                "reliability (noise sd above 40% of the value)")
            + "; read its error bars, not its colours.")
    outside = metric.get("outside_range")
    if outside:
        low, high = metric["value_range"]
        out.append(
            f"{outside} published {name} values in {where} lie outside [{low:g}, {high:g}], "
            "the range a client can report (e.g. a negative share): they are unbiased noisy "
            "values, deliberately not clamped (clamping would bias them).")
    return out


# ----------------------------------------------------------------------------- monitoring
_EVENT_FIELDS = ("test", "region_id", "round", "first_round", "statistic", "threshold")


def monitoring_section(monitoring: Any) -> dict[str, Any] | None:
    """Return the alerts and drift found on the released values, with their rounds (or None).

    ``monitoring`` is a mapping with ``metric`` (what was tested), ``alpha``,
    ``tests`` (one sentence per test that ran, or did not and why) and
    ``events``: one row per alert or drifting region (a DataFrame or dicts) with
    ``test``, ``region_id``, ``round`` (where it fired) and optionally
    ``first_round`` (the first round the test looked at), ``statistic`` and
    ``threshold``. Post-processing of released values: no further charge.
    """
    if monitoring is None:
        return None
    fix = ("pass {'metric': 'ratio', 'alpha': 0.01, 'tests': [...], 'events': "
           "DataFrame(test, region_id, round, ...)}")
    if not isinstance(monitoring, Mapping) or not {"metric", "tests", "events"} <= set(
            monitoring):
        raise fail("monitoring", monitoring, "is not a monitoring record", fix)
    events = monitoring["events"]
    rows = (events.to_dict(orient="records") if isinstance(events, pd.DataFrame)
            else list(events) if isinstance(events, Sequence) and not isinstance(events, str)
            else None)
    if rows is None or not all(isinstance(r, Mapping) and {"test", "region_id", "round"}
                               <= set(r) for r in rows):
        raise fail("monitoring['events']", events, "is not one row per alert with test, "
                   "region_id and round", fix)
    tests = monitoring["tests"]
    if isinstance(tests, str) or not isinstance(tests, Sequence):
        raise fail("monitoring['tests']", tests, "is not a list of texts", fix)
    alpha = _number(monitoring.get("alpha"))
    return {"metric": str(monitoring["metric"]), "alpha": alpha,
            "tests": [str(t) for t in tests],
            "events": [_event(row) for row in rows], "provenance": "release"}


def _event(row: Mapping[Any, Any]) -> dict[str, Any]:
    """Return one alert or drift row as the card's entry (rounds as integers)."""
    out: dict[str, Any] = {"test": str(row["test"]), "region_id": str(row["region_id"])}
    for key in ("round", "first_round"):
        value = _number(row.get(key))
        out[key] = None if value is None else int(value)
    for key in ("statistic", "threshold"):
        out[key] = _number(row.get(key))
    return out


# ----------------------------------------------------------------------------- ledger
def privacy_section(ledger: Any, epochs: Sequence[int] | None, delta: float | None
                    ) -> dict[str, Any]:
    """Return the ledger per epoch and line item, with the per-client epsilon."""
    from spatialdp.privacy.budget import rho_to_epsilon
    from spatialdp.privacy.ledger import PrivacyLedger

    if not isinstance(ledger, PrivacyLedger):
        raise fail("ledger", ledger, "is not a PrivacyLedger", "pass the run's PrivacyLedger")
    chosen = ledger.epochs() if epochs is None else [int(e) for e in epochs]
    zcdp = ledger.accounting == "zcdp"

    def per_client(spent: float) -> float | None:
        if not zcdp:
            return float(spent)
        if delta is None:
            return None
        return float(rho_to_epsilon(float(spent), delta=delta)) if spent > 0 else 0.0

    out = []
    relations: set[str] = set()
    for epoch in chosen:
        summary = ledger.summary(epoch)
        items = [{"line_item": str(item), "cap": float(row["cap"]),
                  "base_cap": float(row["base_cap"]), "borrowed": float(row["borrowed"]),
                  "spent": float(row["spent"]), "remaining": float(row["remaining"]),
                  "n_charges": int(row["n_charges"]),
                  "epsilon_per_client": per_client(float(row["spent"]))}
                 for item, row in summary.iterrows()]
        total = next(i for i in items if i["line_item"] == "total")
        out.append({"epoch": int(epoch), "line_items": items,
                    "epsilon_per_client": total["epsilon_per_client"]})
        audit = ledger.audit(epoch)
        relations.update(str(r) for r in audit["neighbours"])
    ordered = [r for r in ("replace", "add_remove") if r in relations]
    return {"accounting": ledger.accounting, "unit": ledger.unit,
            "epoch_budget": float(ledger.epoch_budget), "delta": delta,
            "split": {"evaluation_share": float(ledger.split.evaluation_share),
                      "global_share": float(ledger.split.global_share)},
            "neighbours": ordered, "participation": participation_text(ordered),
            "epochs": out, "provenance": "bookkeeping"}


# ----------------------------------------------------------------------------- training
#: What the card keeps of a training statement (no cohort size: it is a count of people).
TRAINING_FIELDS = ("private", "statement", "mechanism", "noise_multiplier", "clipping_norm",
                   "clipping", "participation_cap", "cap_source", "rho_per_round", "rho",
                   "neighbours")


def training_section(training: Any) -> dict[str, Any] | None:
    """Return how training is accounted, from a ``TrainingPrivacy`` or its dict (or None).

    ``spatialdp.flower.SpatialDPStrategy.training_privacy`` gives it: the rho
    derived from Flower's DP wrapper, or "training: not private (the inner
    strategy adds no noise)".
    """
    if training is None:
        return None
    data = training.to_dict() if callable(getattr(training, "to_dict", None)) else training
    if (not isinstance(data, Mapping) or not isinstance(data.get("private"), bool)
            or not isinstance(data.get("statement"), str)):
        raise fail("training", training, "is not a training statement",
                   "pass SpatialDPStrategy.training_privacy (or its to_dict())")
    return {**{key: data.get(key) for key in TRAINING_FIELDS}, "provenance": "bookkeeping"}


# ----------------------------------------------------------------------------- query error
def query_error_section(table: pd.DataFrame, settings: Mapping[str, Any] | None = None,
                        name: str = "query_error") -> dict[str, Any]:
    """Return a publishable measure_query_error table (one row per bucket) and its settings.

    Only a table measured against a released grid is accepted (its provenance
    is that grid's: ``release`` or ``unaccounted``); an internal table
    (measured against the truth grid or a simulated grid) is refused naming
    ``name`` (:func:`~spatialdp.queries.require_publishable`).
    """
    from spatialdp.queries.measure import require_publishable

    if not isinstance(table, pd.DataFrame) or "bucket" not in table.columns:
        raise fail(name, table, "is not measure_query_error's table",
                   "pass spatialdp.queries.measure_query_error(grid, ...)'s DataFrame")
    raw = require_publishable(settings if settings is not None else table.attrs, name)
    rows = []
    for record in table.to_dict(orient="records"):
        rows.append({str(k): (str(v) if k == "bucket" else
                              (int(v) if isinstance(v, (int, np.integer)) else _number(v)))
                     for k, v in record.items()})
    clean = {str(k): (v if isinstance(v, (str, int, float, bool)) or v is None else str(v))
             for k, v in raw.items()}
    provenance = _ACCOUNTING_TO_PROVENANCE.get(str(raw.get("reference_accounting")),
                                               "unaccounted")
    return {"settings": clean, "columns": [str(c) for c in table.columns], "rows": rows,
            "provenance": provenance}


# ----------------------------------------------------------------------------- small areas
#: The keys of a card's small-area section (see ``small_area_section``).
SMALL_AREA_KEYS = ("metric", "model", "model_name", "method", "mse", "covariates",
                   "coefficients", "sigma2_u", "rho", "alpha", "sampling", "regions",
                   "labels", "modelled_share", "statement", "epsilon_charged", "provenance")
_LABELS = ("direct", "composite", "modelled", "suppressed")


def small_area_section(small_area: Any) -> dict[str, Any] | None:
    """Return the card's small-area section from a ``SmallAreaEstimates`` (or its section).

    States the model, its public covariates (and coefficients), the variance
    parameters, how the MSE was estimated, how many regions got each label and
    the share of regions whose estimate is modelled (no published value), and
    that smoothing is post-processing of published values: no epsilon is
    charged. The provenance is the smoothed report's (a simulation stays one).

    Examples
    --------
    >>> import numpy as np, pandas as pd
    >>> from spatialdp.datasets import synthetic_fleet, us_states_partition
    >>> from spatialdp.federated import MetricSpec, device_report, regional_report
    >>> from spatialdp.privacy import Simulation
    >>> from spatialdp.smooth import small_area_estimates
    >>> states = us_states_partition()
    >>> fleet = synthetic_fleet(20_000, rng=0)
    >>> loss = np.random.default_rng(1).uniform(0, 2, len(fleet))
    >>> spec = MetricSpec("loss", 0.0, 4.0)
    >>> clients = device_report(pd.DataFrame({"client_id": fleet.device_id, "region_id":
    ...     fleet.region_id, "loss": loss}), loss_spec=spec, partition=states)
    >>> report = regional_report(clients, states, [spec], epsilon=0.5,
    ...                          target=Simulation(rng=0), min_cohort=100)
    >>> section = small_area_section(small_area_estimates(
    ...     report, "loss", include_suppressed=True, client_variance=1 / 3))
    >>> section["model_name"], section["labels"]["modelled"], section["epsilon_charged"]
    ('Fay-Herriot', 9, 0.0)
    >>> section["provenance"]
    'simulation'
    """
    if small_area is None:
        return None
    from spatialdp.smooth import SmallAreaEstimates

    if isinstance(small_area, SmallAreaEstimates):
        return _small_area_from_estimates(small_area)
    if not isinstance(small_area, Mapping) or set(SMALL_AREA_KEYS) - set(small_area):
        missing = sorted(set(SMALL_AREA_KEYS) - set(small_area)) if isinstance(
            small_area, Mapping) else list(SMALL_AREA_KEYS)
        raise fail("small_area", small_area, f"is not a small-area record (missing {missing})",
                   "pass the SmallAreaEstimates of spatialdp.smooth.small_area_estimates")
    return {key: small_area[key] for key in SMALL_AREA_KEYS}


def _small_area_from_estimates(sae: Any) -> dict[str, Any]:
    from spatialdp.smooth.estimate import MODELS, POST_PROCESSING

    counts = sae.frame["label"].value_counts()
    labels = {name: int(counts.get(name, 0)) for name in _LABELS}
    regions = len(sae.frame)
    coefficients = [{"name": str(name), "beta": float(row.beta), "se": _number(row.se)}
                    for name, row in sae.coefficients.iterrows()]
    accounting = str(sae.accounting.get("accounting", ""))
    return {
        "metric": str(sae.metric), "model": str(sae.model), "model_name": MODELS[sae.model],
        "method": str(sae.method), "mse": str(sae.mse_method),
        "covariates": [c["name"] for c in coefficients if c["name"] != "intercept"],
        "coefficients": coefficients, "sigma2_u": float(sae.sigma2_u),
        "rho": float(sae.rho) if sae.model in ("sfh", "car") else None, "alpha": float(sae.alpha),
        "sampling": str(sae.sampling), "regions": regions, "labels": labels,
        "modelled_share": labels["modelled"] / regions if regions else 0.0,
        "statement": POST_PROCESSING, "epsilon_charged": 0.0,
        "provenance": _ACCOUNTING_TO_PROVENANCE.get(accounting, "unaccounted"),
    }
