"""The run folder: every artefact a model card needs, and nothing that is not published.

A run (``spatialdp demo``, or an analyst's own epoch) writes its artefacts into
one folder; :meth:`spatialdp.cards.ModelCard.from_run` rebuilds the card from
that folder alone, and ``spatialdp card RUN_DIR`` writes it there. Every file is
written atomically (a temporary file in the same folder, then a rename).

Layout (``RUN_FORMAT = "spatialdp-run/1"``; paths relative to ``RUN_DIR``)::

    RUN_DIR/
      run.json                 manifest (required), see below
      strata.json              strata key, basis, version, ids, and every merge with its reason
      coverage.json            coverage figures of the last epoch, counts already coarsened
      coverage_history.csv     columns epoch, round_index, score (coverage score per round)
      query_error.csv          measure_query_error's table (one row per bucket)
      query_error.json         its settings (epsilon, method, draws, ...; DataFrame.attrs)
      reports/<stem>.json      RegionalReport.write(RUN_DIR / "reports", stem) metadata
      reports/<stem>.csv       ... and its wide table (<metric>.<column>)
      reports/<stem>.gpkg      ... and its GeoPackage (not read by the card)
      ledger.sqlite            the privacy ledger (opened read-only by the card)
      coverage_map.png         figures listed in run.json "figures" (optional)
      model_card.md            written by ModelCard.write (Markdown, figures by relative path)
      model_card.json          written by ModelCard.write (validated JSON)

A simulation's report files are named ``<stem>.SIMULATION.*`` (and an
unaccounted release's ``<stem>.UNACCOUNTED.*``) by :meth:`RegionalReport.write`;
the manifest lists each report by its JSON path, so the label travels.

``run.json`` (keys; optional ones may be missing or null)::

    format              "spatialdp-run/1"
    spatialdp_version   the library version that wrote the run
    created             UTC time stamp, ISO 8601
    title               the card's title
    partition           {name, version, kind, n_regions, resolution, key}
    specs               [{name, kind: "metric"|"histogram", key, version, fingerprint,
                          clip_low, clip_high, present | edges, mass_cap}]
    epsilon             per-metric epsilon of one round, {name: float} (or one float)
    rounds              number of rounds in the run
    seeds               {what: int or null} (e.g. fleet, model, selection)
    simulated           {what: bool}: which inputs are simulated (fleet, model, noise)
    epochs              ledger epochs this run charged
    alpha, min_cohort   error-bar level and publication floor
    delta               for a zCDP ledger: the delta per-client epsilon is reported at
    ledger              "ledger.sqlite" (or null: no ledger)
    reports             ["reports/<stem>.json", ...] in round order
    figures             {"coverage_map": "coverage_map.png", ...}
    details             {model_details: {...}, intended_use: {...}, limitations: [...],
                         ethical_considerations: [...]}
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["RUN_FORMAT", "RunFolder", "write_run_folder"]

#: Format tag of ``run.json``.
RUN_FORMAT = "spatialdp-run/1"


class RunFolder:
    """Read and write the artefacts of one run in ``path`` (layout: module docstring).

    Parameters
    ----------
    path : str or os.PathLike
        The run folder; created on the first write.
    """

    MANIFEST = "run.json"
    STRATA = "strata.json"
    COVERAGE = "coverage.json"
    COVERAGE_HISTORY = "coverage_history.csv"
    QUERY_ERROR = "query_error.csv"
    QUERY_ERROR_SETTINGS = "query_error.json"
    REPORTS = "reports"
    LEDGER = "ledger.sqlite"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    @property
    def ledger_path(self) -> Path:
        """Where the run's ledger lives (``RUN_DIR/ledger.sqlite``)."""
        return self.path / self.LEDGER

    def write_manifest(self, *, partition: Any, specs: Sequence[Any] = (),
                       epsilon: float | Mapping[str, float] | None = None,
                       rounds: int | None = None, seeds: Mapping[str, int | None] | None = None,
                       simulated: Mapping[str, bool] | None = None,
                       epochs: Sequence[int] = (), alpha: float | None = None,
                       min_cohort: int | None = None, delta: float | None = None,
                       ledger: bool = True, title: str | None = None,
                       figures: Mapping[str, str] | None = None,
                       details: Mapping[str, Any] | None = None) -> Path:
        """Write ``run.json``; reports already written are kept in its ``reports`` list."""
        raise NotImplementedError

    def read_manifest(self) -> dict[str, Any]:
        """Return ``run.json``, checked (format, required keys)."""
        raise NotImplementedError

    def write_strata(self, strata: Any, merges: Sequence[Any] = ()) -> Path:
        """Write ``strata.json`` from a :class:`~spatialdp.sampling.Strata` and its merges."""
        raise NotImplementedError

    def write_coverage(self, coverage: Any, *, history: Any = None) -> list[Path]:
        """Write ``coverage.json`` (coarsened) and ``coverage_history.csv`` from a Coverage."""
        raise NotImplementedError

    def write_query_error(self, table: Any) -> list[Path]:
        """Write ``query_error.csv`` and ``query_error.json`` from measure_query_error's table."""
        raise NotImplementedError

    def write_report(self, report: Any, stem: str | None = None) -> list[Path]:
        """Write a RegionalReport into ``reports/`` and list it in ``run.json``."""
        raise NotImplementedError

    def add_figure(self, name: str, path: str | os.PathLike[str]) -> None:
        """List a figure already saved in the folder (e.g. ``coverage_map``) in ``run.json``."""
        raise NotImplementedError


def write_run_folder(run_dir: str | os.PathLike[str], *, partition: Any,
                     specs: Sequence[Any] = (), strata: Any = None,
                     merges: Sequence[Any] | None = None, coverage: Any = None,
                     coverage_history: Any = None, reports: Sequence[Any] = (),
                     query_error: Any = None, epsilon: float | Mapping[str, float] | None = None,
                     rounds: int | None = None, seeds: Mapping[str, int | None] | None = None,
                     simulated: Mapping[str, bool] | None = None, epochs: Sequence[int] = (),
                     alpha: float | None = None, min_cohort: int | None = None,
                     delta: float | None = None, title: str | None = None,
                     figures: Mapping[str, str] | None = None,
                     details: Mapping[str, Any] | None = None) -> RunFolder:
    """Write every artefact of a run into ``run_dir`` at once; return the :class:`RunFolder`.

    The ledger is expected at ``run_dir/ledger.sqlite`` (open your
    :class:`~spatialdp.privacy.PrivacyLedger` there); ``run.json`` records
    ``"ledger": null`` when it is missing.
    """
    raise NotImplementedError
