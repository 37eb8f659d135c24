"""The run folder: every artefact a model card needs, and nothing that is not published.

A run (``spatialdp demo``, or an analyst's own epoch) writes its artefacts into
one folder; :meth:`spatialdp.cards.ModelCard.from_run` rebuilds the card from
that folder alone, and ``spatialdp card RUN_DIR`` writes it there. Every file is
written atomically (a temporary file in the same folder, then a rename).

Layout (``RUN_FORMAT = "spatialdp-run/1"``; paths relative to ``RUN_DIR``)::

    RUN_DIR/
      run.json                 manifest (required), see below
      strata.json              strata key, basis, version, ids, and every merge with its reason
      coverage.json            coverage of the last epoch: exact (replace-one) or released
      coverage_history.csv     columns epoch, round_index, score (coverage score per round)
      query_error.csv          measure_query_error's table (one row per bucket), measured
                               against a released grid (an internal table is refused)
      query_error.json         its settings (reference, epsilon, method, draws, ...;
                               DataFrame.attrs)
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
    training            how training is accounted (SpatialDPStrategy.training_privacy:
                         the derived rho, or "training: not private ...")
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from spatialdp._atomic import make_folder, write_text_atomically
from spatialdp._validation import check_text, fail
from spatialdp.cards import _sections as sections
from spatialdp.exceptions import InvalidInput

__all__ = ["RUN_FORMAT", "RunFolder", "write_run_folder", "write_text_atomically"]


#: Format tag of ``run.json``.
RUN_FORMAT = "spatialdp-run/1"

_REQUIRED = ("format", "partition", "specs")


def _json(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False, default=str) + "\n"


class RunFolder:
    """Read and write the artefacts of one run in ``path`` (layout: module docstring).

    Parameters
    ----------
    path : str or os.PathLike
        The run folder; created on the first write.

    Examples
    --------
    >>> import tempfile
    >>> from spatialdp.datasets import us_states_partition
    >>> from spatialdp.federated import MetricSpec
    >>> run = RunFolder(tempfile.mkdtemp())
    >>> _ = run.write_manifest(partition=us_states_partition(),
    ...                        specs=[MetricSpec("loss", 0.0, 4.0)], rounds=1,
    ...                        seeds={"fleet": 0}, simulated={"fleet": True}, ledger=False)
    >>> card = run.card()                     # what ModelCard.from_run(path) does
    >>> card.to_dict()["provenance"]["simulated"]
    {'fleet': True}
    """

    MANIFEST = "run.json"
    STRATA = "strata.json"
    COVERAGE = "coverage.json"
    COVERAGE_HISTORY = "coverage_history.csv"
    COHORT_SIZES = "cohort_sizes.json"
    QUERY_ERROR = "query_error.csv"
    QUERY_ERROR_SETTINGS = "query_error.json"
    REPORTS = "reports"
    LEDGER = "ledger.sqlite"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise fail("run_dir", path, f"is a {type(path).__name__}, not a path",
                       "pass the run folder as a str or pathlib.Path")
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunFolder({os.fspath(self.path)!r})"

    @property
    def ledger_path(self) -> Path:
        """Where the run's ledger lives (``RUN_DIR/ledger.sqlite``)."""
        return self.path / self.LEDGER

    def _mkdir(self, sub: str | None = None) -> Path:
        return make_folder(self.path if sub is None else self.path / sub)

    def _write(self, name: str, text: str) -> Path:
        self._mkdir()
        try:
            return write_text_atomically(self.path / name, text)
        except OSError as err:
            raise InvalidInput(f"run_dir={os.fspath(self.path)!r} is not writable "
                               f"({err.strerror}); pass a writable folder") from err

    # ------------------------------------------------------------------ manifest
    def write_manifest(self, *, partition: Any, specs: Sequence[Any] = (),
                       epsilon: float | Mapping[str, float] | None = None,
                       rounds: int | None = None, seeds: Mapping[str, int | None] | None = None,
                       simulated: Mapping[str, bool] | None = None,
                       epochs: Sequence[int] = (), alpha: float | None = None,
                       min_cohort: int | None = None, delta: float | None = None,
                       ledger: bool = True, title: str | None = None,
                       figures: Mapping[str, str] | None = None,
                       details: Mapping[str, Any] | None = None,
                       training: Any = None) -> Path:
        """Write ``run.json``; reports already listed in an existing one are kept.

        Parameters
        ----------
        partition : Partition
        specs : sequence of MetricSpec / HistogramSpec
        epsilon : float or dict name -> float, optional
            Per-metric epsilon of one round.
        rounds : int, optional
        seeds : dict what -> int or None, optional
        simulated : dict what -> bool, optional
            Which inputs are simulated (``fleet``, ``model``, ``noise``...).
        epochs : sequence of int
            The ledger epochs this run charged (empty: all of the ledger's).
        alpha, min_cohort, delta : optional
        ledger : bool, default True
            Whether ``ledger.sqlite`` belongs to the run.
        title : str, optional
        figures : dict name -> path relative to the run folder, optional
        details : dict, optional
            ``model_details``, ``intended_use``, ``limitations``,
            ``ethical_considerations`` (as :meth:`ModelCard.build` takes them).
        training : TrainingPrivacy or dict, optional
            How training is accounted (``SpatialDPStrategy.training_privacy``).

        Returns
        -------
        Path
        """
        from spatialdp import __version__
        from spatialdp.cards.card import ModelCard

        old = self._read_json(self.MANIFEST) if (self.path / self.MANIFEST).exists() else {}
        if isinstance(specs, (str, bytes)) or not isinstance(specs, Sequence):
            raise fail("specs", specs, "is not a sequence of specs",
                       "pass e.g. [MetricSpec('loss', 0, 19)]")
        eps: Any = None
        if isinstance(epsilon, Mapping):
            eps = {str(k): float(v) for k, v in epsilon.items()}
        elif epsilon is not None:
            eps = float(epsilon)
        manifest = {
            "format": RUN_FORMAT,
            "spatialdp_version": str(__version__),
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "title": None if title is None else check_text(title, "title"),
            "partition": sections.partition_section(partition),
            "specs": [sections.spec_section(s) for s in specs],
            "epsilon": eps,
            "rounds": None if rounds is None else int(rounds),
            "seeds": dict(seeds or {}),
            "simulated": {str(k): bool(v) for k, v in dict(simulated or {}).items()},
            "epochs": [int(e) for e in epochs],
            "alpha": None if alpha is None else float(alpha),
            "min_cohort": None if min_cohort is None else int(min_cohort),
            "delta": None if delta is None else float(delta),
            "ledger": self.LEDGER if ledger else None,
            "reports": list(old.get("reports", [])),
            "figures": {**dict(old.get("figures", {})),
                        **{str(k): Path(v).as_posix() for k, v in dict(figures or {}).items()}},
            "details": dict(details or {}),
            "training": sections.training_section(training),
        }
        # Check the texts and flags now, not when the card is built.
        ModelCard._check_details(manifest)
        return self._write(self.MANIFEST, _json(manifest))

    def _read_json(self, name: str) -> Any:
        path = self.path / name
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise fail("run_dir", os.fspath(self.path), f"has no {name}",
                       "write the run with RunFolder / write_run_folder "
                       "(layout: spatialdp.cards.run_folder)") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise fail("run_dir", os.fspath(self.path), f"holds an unreadable {name} ({err})",
                       "rewrite the run's artefacts") from err

    def read_manifest(self) -> dict[str, Any]:
        """Return ``run.json``, checked (format, required keys)."""
        if not self.path.is_dir():
            raise fail("run_dir", os.fspath(self.path), "is not a folder",
                       "pass the folder a run was written into")
        manifest = self._read_json(self.MANIFEST)
        if not isinstance(manifest, dict) or manifest.get("format") != RUN_FORMAT:
            got = manifest.get("format") if isinstance(manifest, dict) else manifest
            raise fail("run.json", got, f"is not a {RUN_FORMAT} manifest",
                       "write the run with this version of spatialdp")
        missing = [k for k in _REQUIRED if k not in manifest]
        if missing:
            raise fail("run.json", sorted(manifest), f"lacks {missing}",
                       "rewrite it with RunFolder.write_manifest")
        return manifest

    def _update_manifest(self, **changes: Any) -> None:
        manifest = self.read_manifest()
        for key, value in changes.items():
            if key == "reports":
                manifest["reports"] = [*manifest.get("reports", []),
                                       *[v for v in value if v not in manifest.get("reports", [])]]
            elif key == "figures":
                manifest["figures"] = {**manifest.get("figures", {}), **value}
            else:
                manifest[key] = value
        self._write(self.MANIFEST, _json(manifest))

    # ------------------------------------------------------------------ artefacts
    def write_strata(self, strata: Any, merges: Sequence[Any] = ()) -> Path:
        """Write ``strata.json`` from a :class:`~spatialdp.sampling.Strata` and its merges."""
        return self._write(self.STRATA, _json(sections.sampling_section(strata, list(merges))))

    def write_coverage(self, coverage: Any, *, history: Any = None,
                       cell_table: Any = None) -> list[Path]:
        """Write ``coverage.json`` and (exact bookkeeping only) ``coverage_history.csv``.

        ``coverage`` is :func:`~spatialdp.sampling.epoch_coverage`'s exact
        bookkeeping (replace-one) or :func:`~spatialdp.sampling.release_epoch_coverage`'s
        release (add/remove: no score history, which is exact bookkeeping).

        ``history`` (coverage score per round across epochs: ``epoch``,
        ``round_index``, ``score``) defaults to ``coverage.score_history``;
        ``cell_table`` (per H3 cell: ``clients``, ``clients_sampled``) adds the
        populated cells reached and the blind cells (default ``coverage.cell_table``).
        """
        section = sections.coverage_section(coverage, history, cell_table)
        if section["provenance"] == "release":
            return [self._write(self.COVERAGE, _json(section))]
        rows = section.pop("score_history")
        section.pop("provenance")
        return [self._write(self.COVERAGE, _json(section)),
                self.write_coverage_history(rows)]

    def write_coverage_history(self, history: Any) -> Path:
        """Write ``coverage_history.csv`` (``epoch``, ``round_index``, ``score``)."""
        frame = pd.DataFrame(sections.history_rows(history),
                             columns=["epoch", "round_index", "score"])
        frame["epoch"] = frame["epoch"].astype("Int64")
        return self._write(self.COVERAGE_HISTORY, frame.to_csv(index=False))

    def write_cohort_sizes(self, cohort_sizes: Any) -> Path:
        """Write ``cohort_sizes.json``: per-region cohort sizes (exact; replace-one runs only)."""
        return self._write(self.COHORT_SIZES,
                           _json(sections.cohort_section(cohort_sizes, "given per region")))

    def write_query_error(self, table: Any) -> list[Path]:
        """Write ``query_error.csv`` and ``query_error.json`` from measure_query_error's table.

        Raises
        ------
        InvalidInput
            An internal table (measured against the truth grid): nothing is written.
        """
        section = sections.query_error_section(table)
        return [self._write(self.QUERY_ERROR, table.to_csv(index=False)),
                self._write(self.QUERY_ERROR_SETTINGS, _json(section["settings"]))]

    def write_report(self, report: Any, stem: str | None = None) -> list[Path]:
        """Write a RegionalReport into ``reports/`` and list it in ``run.json``.

        ``stem`` defaults to ``round_<round_index:03d>``; the report names its own
        files ``<stem>.SIMULATION.*`` when it is a simulation. ``run.json`` must
        exist (:meth:`write_manifest` first).
        """
        from spatialdp.federated.regional import RegionalReport

        if not isinstance(report, RegionalReport):
            raise fail("report", report, "is not a RegionalReport",
                       "pass a regional_report(...) result")
        self.read_manifest()
        if stem is None:
            stem = f"round_{0 if report.round_index is None else report.round_index:03d}"
        files = report.write(self._mkdir(self.REPORTS), stem=stem)
        meta = [p for p in files if p.suffix == ".json"]
        self._update_manifest(reports=[p.relative_to(self.path).as_posix() for p in meta])
        return files

    def add_figure(self, name: str, path: str | os.PathLike[str]) -> None:
        """List a figure saved in the folder (e.g. ``coverage_map``) in ``run.json``."""
        name = check_text(name, "name")
        rel = Path(path)
        if rel.is_absolute():
            rel = Path(os.path.relpath(rel, self.path))
        self._update_manifest(figures={name: rel.as_posix()})

    # ------------------------------------------------------------------ reading back
    def _read_report(self, rel: str) -> dict[str, Any]:
        meta_path = self.path / rel
        meta = self._read_json(rel)
        csv = meta_path.with_suffix(".csv")
        try:
            wide = pd.read_csv(csv, index_col=0, dtype={0: str}, keep_default_na=True)
        except (OSError, ValueError) as err:
            raise fail("run_dir", os.fspath(self.path), f"has an unreadable report table "
                       f"{csv.name} ({err})", "rewrite the report with RunFolder.write_report"
                       ) from err
        wide.index = wide.index.astype(str)
        return sections.report_section(meta, wide, rel)

    def card(self) -> Any:
        """Return the :class:`~spatialdp.cards.ModelCard` of this folder (``from_run``)."""
        from spatialdp.cards.card import ModelCard, _considerations, _details, _flags

        manifest = self.read_manifest()
        part = sections.partition_section(manifest["partition"])
        specs = [sections.spec_section(s) for s in manifest["specs"]]
        title = manifest.get("title") or f"Model card: {part['name']}"
        details = dict(manifest.get("details") or {})
        rounds = [self._read_report(rel) for rel in manifest.get("reports", [])]
        sampling = None
        if (self.path / self.STRATA).exists():
            stored = self._read_json(self.STRATA)
            sampling = sections.sampling_section(stored, None)
        coverage = None
        if (self.path / self.COVERAGE).exists():
            stored_cov = self._read_json(self.COVERAGE)
            coverage = sections.coverage_section(stored_cov, self._read_history())
        if (self.path / self.COHORT_SIZES).exists():
            # Written by cohort_section: given per-region sizes are bookkeeping.
            cohorts = {"provenance": "bookkeeping", **self._read_json(self.COHORT_SIZES)}
        elif rounds:
            cohorts = sections.cohorts_from_report(rounds[-1])
        else:
            cohorts = None
        query_error = None
        if (self.path / self.QUERY_ERROR).exists():
            try:
                table = pd.read_csv(self.path / self.QUERY_ERROR, dtype={"bucket": str})
            except (OSError, ValueError) as err:
                raise fail("run_dir", os.fspath(self.path), f"has an unreadable "
                           f"{self.QUERY_ERROR} ({err})", "rewrite it with "
                           "RunFolder.write_query_error") from err
            settings = (self._read_json(self.QUERY_ERROR_SETTINGS)
                        if (self.path / self.QUERY_ERROR_SETTINGS).exists() else {})
            query_error = sections.query_error_section(
                table, settings, name=os.fspath(self.path / self.QUERY_ERROR))
        privacy = None
        if manifest.get("ledger"):
            privacy = self._read_ledger(manifest)
        # Absolute here; ModelCard.write links them relative to wherever the card goes.
        figures = {str(k): os.path.abspath(self.path / str(v))
                   for k, v in dict(manifest.get("figures") or {}).items()
                   if (self.path / str(v)).exists()}
        return ModelCard.from_sections(
            title=title, model_details=_details(details.get("model_details"), title),
            considerations=_considerations(details.get("intended_use"),
                                           details.get("limitations"),
                                           details.get("ethical_considerations")),
            simulated=_flags(manifest.get("simulated"), "simulated", bool),
            seeds=_flags(manifest.get("seeds"), "seeds", int),
            partition=part, specs=specs, sampling=sampling, cohort_sizes=cohorts,
            coverage=coverage, privacy=privacy, rounds=rounds, query_error=query_error,
            figures=figures, training=sections.training_section(manifest.get("training")))

    def _read_history(self) -> list[dict[str, Any]] | None:
        path = self.path / self.COVERAGE_HISTORY
        if not path.exists():
            return None
        try:
            frame = pd.read_csv(path)
        except (OSError, ValueError) as err:
            raise fail("run_dir", os.fspath(self.path), f"has an unreadable "
                       f"{self.COVERAGE_HISTORY} ({err})", "rewrite it with "
                       "RunFolder.write_coverage") from err
        return sections.history_rows(frame)

    def _read_ledger(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        from spatialdp.privacy.ledger import PrivacyLedger

        path = self.path / str(manifest["ledger"])
        if not path.exists():
            raise fail("run_dir", os.fspath(self.path), f"has no {manifest['ledger']} "
                       "though run.json lists it", "copy the run's ledger into the folder, "
                       "or write the manifest with ledger=False")
        epochs = manifest.get("epochs") or None
        with PrivacyLedger(path, read_only=True) as ledger:
            return sections.privacy_section(ledger, epochs, manifest.get("delta"))


def write_run_folder(run_dir: str | os.PathLike[str], *, partition: Any,
                     specs: Sequence[Any] = (), strata: Any = None,
                     merges: Sequence[Any] | None = None, coverage: Any = None,
                     coverage_history: Any = None, cohort_sizes: Any = None,
                     cell_table: Any = None,
                     reports: Sequence[Any] = (),
                     query_error: Any = None, epsilon: float | Mapping[str, float] | None = None,
                     rounds: int | None = None, seeds: Mapping[str, int | None] | None = None,
                     simulated: Mapping[str, bool] | None = None, epochs: Sequence[int] = (),
                     alpha: float | None = None, min_cohort: int | None = None,
                     delta: float | None = None, title: str | None = None,
                     figures: Mapping[str, str] | None = None,
                     details: Mapping[str, Any] | None = None,
                     training: Any = None) -> RunFolder:
    """Write every artefact of a run into ``run_dir`` at once; return the :class:`RunFolder`.

    The ledger is expected at ``run_dir/ledger.sqlite`` (open your
    :class:`~spatialdp.privacy.PrivacyLedger` there); ``run.json`` records
    ``"ledger": null`` when that file is missing. ``figures`` are paths relative
    to ``run_dir`` of PNGs already saved there (``coverage_map`` is embedded in
    the card's coverage section). Then ``ModelCard.from_run(run_dir).write(run_dir)``
    (or ``spatialdp card RUN_DIR``) writes the card.

    Parameters are those of :meth:`RunFolder.write_manifest` plus the artefacts:
    ``strata`` and ``merges`` (default ``coverage.merges``), ``coverage`` and
    ``coverage_history`` and ``cell_table``, ``cohort_sizes`` (exact; replace-one runs only),
    ``reports`` (RegionalReports in round order), ``query_error`` and ``training``
    (``SpatialDPStrategy.training_privacy``).
    """
    run = RunFolder(run_dir)
    if query_error is not None:  # an internal table is refused before anything is written
        sections.query_error_section(query_error)
    run.write_manifest(partition=partition, specs=specs, epsilon=epsilon, rounds=rounds,
                       seeds=seeds, simulated=simulated, epochs=epochs, alpha=alpha,
                       min_cohort=min_cohort, delta=delta,
                       ledger=run.ledger_path.exists(), title=title, figures=figures,
                       details=details, training=training)
    if merges is None and coverage is not None:
        merges = list(getattr(coverage, "merges", []))
    if strata is not None or merges:
        run.write_strata(strata, merges or [])
    if coverage is not None:
        run.write_coverage(coverage, history=coverage_history, cell_table=cell_table)
    elif coverage_history is not None:
        run.write_coverage_history(coverage_history)
    if cohort_sizes is not None:
        run.write_cohort_sizes(cohort_sizes)
    for report in reports:
        run.write_report(report)
    if query_error is not None:
        run.write_query_error(query_error)
    return run
