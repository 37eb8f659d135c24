"""The :class:`ModelCard` and the :class:`RunFolder` it is rebuilt from.

The card's content is a single dict (the JSON card); the Markdown and the HTML
are rendered from it, so the three never disagree. Sections and where their
numbers come from (``provenance``):

==========================  ============================================  ============
section                     holds                                         provenance
==========================  ============================================  ============
``model_details``           name, overview, version, owners, licence      text
``considerations``          intended uses and users, out of scope,        text
                            limitations, ethical considerations
``geography``               the partition and its version; metric specs   bookkeeping
                            with fingerprints and histogram edge versions
``sampling``                strata (key, basis, version); every merge     bookkeeping
                            with its reason (replace-one only)
``cohort_sizes``            per-region cohort sizes: exact (replace-one)  bookkeeping /
                            or the reports' noised cohorts (add/remove)   release
``coverage``                share of strata / regions / cells sampled,    bookkeeping /
                            blind spots, score history, map; under        release
                            add/remove a coverage release
``privacy``                 the ledger per epoch and line item, with      bookkeeping
                            the per-client epsilon, the neighbouring
                            relations and what they protect
``quantitative_analysis``   per round and metric: values with error       release /
                            bars per region, suppressed regions           simulation /
                                                                          unaccounted
``query_error``             measure_query_error's table, measured         release /
                            against a released grid (an internal table    unaccounted
                            is refused)
``training``                how training is accounted (derived rho, or    bookkeeping
                            "not private"); optional
``small_area``              the small-area model that smoothed a metric:  release /
                            model, covariates, share of regions           simulation /
                            modelled; post-processing, no epsilon         unaccounted
                            charged; optional
==========================  ============================================  ============

One policy for counts of people per neighbouring relation
(:data:`~spatialdp.cards._sections.PARTICIPATION`): exact under replace-one
(participation is public by assumption, as in the report files), noised under
add/remove, where a card holding exact selection records is refused.

The run folder. A run (``spatialdp demo``, or an analyst's own epoch) writes its artefacts into
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
      monitoring.json          the alerts and drift found on the released values, with rounds
      small_area.json          the small-area model of a smoothed metric (the card's section)
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
    epsilon             one round's epsilon: its split over the metrics {name: float}
                        (the round is charged their sum), or one float, the total
    rounds              number of rounds in the run
    seeds               {what: int or null} (e.g. fleet, model, selection)
    simulated           {what: bool}: which inputs are simulated (fleet, model, noise)
    epochs              ledger epochs this run charged
    alpha, min_cohort   error-bar level and publication floor
    delta               for a zCDP ledger: the delta per-client epsilon is reported at
    ledger              "ledger.sqlite" (or null: no ledger)
    reports             ["reports/<stem>.json", ...] in round order (``spatialdp report``
                        lists its own "regional_report.json", written in the folder itself)
    figures             {"coverage_map": "coverage_map.png", ...}
    details             {model_details: {...}, intended_use: {...}, limitations: [...],
                         ethical_considerations: [...]}
    training            how training is accounted (SpatialDPStrategy.training_privacy:
                         the derived rho, or "training: not private ...")
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from spatialdp._atomic import make_folder, write_text_atomically
from spatialdp._validation import check_count, check_output, check_path, check_text, fail
from spatialdp.cards import _sections as sections
from spatialdp.cards._sections import PARTICIPATION, PROVENANCE
from spatialdp.cards.json_card import SCHEMA_VERSION, InvalidCard, canonical_digest, validate_card
from spatialdp.exceptions import InvalidInput, PartitionMismatch

__all__ = ["PARTICIPATION", "PROVENANCE", "RUN_FORMAT", "ModelCard", "RunFolder",
           "write_run_folder"]

#: Format tag of ``run.json``.
RUN_FORMAT = "spatialdp-run/1"

_REQUIRED = ("format", "partition", "specs")

DEFAULT_LIMITATIONS = [
    "Per-region values are noised estimates: compare a region with another only through "
    "their error bars, never by point estimates alone.",
    "Suppressed regions (cohort below the floor) have no value.",
    "Blind spots (strata or regions with no sampled client this epoch) are not covered "
    "by any metric in this card.",
    "Coverage figures describe who was selected, not who reported; devices that dropped "
    "out are not visible here.",
    "The server is trusted: each client's evaluation report reaches the aggregator, which "
    "clips, sums and noises it by this code (no secure aggregation); the guarantee covers "
    "what is published, not what the server sees (docs/threat_model.md).",
    "Clipping bounds each client's influence and biases values near the clip bounds "
    "towards them.",
]
DEFAULT_USES = ["Monitoring a federated spatial model's quality per region, with error bars.",
                "Deciding where the model needs more data or a closer look."]
DEFAULT_USERS = ["GIS analysts", "model owners", "privacy reviewers"]
DEFAULT_OUT_OF_SCOPE = [
    "Inferring anything about an individual device or person.",
    "Ranking regions by point estimates without their error bars.",
    "Treating simulation sections as released results.",
]
DEFAULT_ETHICS = [
    "Regions with few devices are suppressed or merged: the model's quality there is the "
    "least known, and often where it matters most.",
]


def _texts(value: Sequence[str] | str | None, default: list[str], name: str) -> list[str]:
    if value is None:
        return list(default)
    if isinstance(value, str):
        return [check_text(value, name)]
    if isinstance(value, Sequence):
        return [check_text(v, f"{name}[{i}]") for i, v in enumerate(value)]
    raise fail(name, value, "is not text or a list of texts", "pass a str or a list of str")


def _details(model_details: Mapping[str, Any] | str | None, title: str) -> dict[str, Any]:
    if model_details is None:
        model_details = {}
    if isinstance(model_details, str):
        model_details = {"overview": model_details}
    if not isinstance(model_details, Mapping):
        raise fail("model_details", model_details, "is not a dict or a text",
                   "pass e.g. {'name': ..., 'overview': ..., 'owners': [...]}")
    out: dict[str, Any] = {"name": title, "overview": "A federated spatial model evaluated "
                           "per region under differential privacy.", "version": None,
                           "owners": [], "license": None, "references": [],
                           "documentation": None}
    if "overview" not in model_details and isinstance(model_details.get("description"), str):
        model_details = {**model_details, "overview": model_details["description"]}
        model_details = {k: v for k, v in model_details.items() if k != "description"}
    for key, value in model_details.items():
        if key in ("owners", "references"):
            out[key] = _texts(value, [], f"model_details[{key!r}]")
        elif value is None or isinstance(value, (str, int, float, bool)):
            out[str(key)] = value
        else:
            out[str(key)] = [str(v) for v in value] if isinstance(value, Sequence) else str(value)
    return out


def _considerations(intended_use: Mapping[str, Any] | str | None,
                    limitations: Sequence[str] | str | None,
                    ethical_considerations: Sequence[str] | str | None) -> dict[str, Any]:
    use: Mapping[str, Any]
    if intended_use is None:
        use = {}
    elif isinstance(intended_use, str):
        use = {"primary_uses": [intended_use]}
    elif isinstance(intended_use, Mapping):
        use = intended_use
    else:
        raise fail("intended_use", intended_use, "is not a dict or a text",
                   "pass e.g. {'primary_uses': [...], 'primary_users': [...], "
                   "'out_of_scope': [...]}")
    unknown = sorted(set(use) - {"primary_uses", "primary_users", "out_of_scope"})
    if unknown:
        raise fail("intended_use", dict(use), f"has unknown keys {unknown}",
                   "use primary_uses, primary_users and out_of_scope")
    return {
        "primary_uses": _texts(use.get("primary_uses"), DEFAULT_USES, "primary_uses"),
        "primary_users": _texts(use.get("primary_users"), DEFAULT_USERS, "primary_users"),
        "out_of_scope": _texts(use.get("out_of_scope"), DEFAULT_OUT_OF_SCOPE, "out_of_scope"),
        "limitations": _texts(limitations, DEFAULT_LIMITATIONS, "limitations"),
        "ethical_considerations": _texts(ethical_considerations, DEFAULT_ETHICS,
                                         "ethical_considerations"),
    }


def _flags(value: Mapping[str, Any] | None, name: str, kind: type) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise fail(name, value, "is not a dict", "pass e.g. {'fleet': ...}")
    out: dict[str, Any] = {}
    for key, v in value.items():
        ok = (isinstance(v, bool) if kind is bool
              else v is None or (isinstance(v, int) and not isinstance(v, bool)))
        if not ok:
            raise fail(f"{name}[{key!r}]", v, f"is not a {kind.__name__}",
                       f"pass a {kind.__name__} per item")
        out[str(key)] = v
    return out


def _text_sections(title: str, details: Mapping[str, Any], simulated: Any, seeds: Any
                   ) -> dict[str, Any]:
    """Return the card's model details, considerations and flags, checked."""
    return {"model_details": _details(details.get("model_details"), title),
            "considerations": _considerations(details.get("intended_use"),
                                              details.get("limitations"),
                                              details.get("ethical_considerations")),
            "simulated": _flags(simulated, "simulated", bool),
            "seeds": _flags(seeds, "seeds", int)}


def _spec_entries(specs: Any) -> list[dict[str, Any]]:
    """Return the card's spec entries of a sequence of specs (or their dicts)."""
    if isinstance(specs, (str, bytes)) or not isinstance(specs, Sequence):
        raise fail("specs", specs, "is not a sequence of specs",
                   "pass e.g. [MetricSpec('loss', 0, 19)]")
    return [sections.spec_section(s) for s in specs]


def _cohorts(rounds: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Return the cohort section of the last round's report (None without rounds)."""
    return sections.cohorts_from_report(rounds[-1]) if rounds else None


class ModelCard:
    """A model card: model details, geography, sampling, coverage, privacy, metrics, query error.

    Build one with :meth:`build` (from a run's objects) or :meth:`from_run`
    (from a run folder, :class:`RunFolder`); :meth:`from_json`
    reads a written card back. The content is one JSON-ready dict
    (:meth:`to_dict`), validated against the shipped schema
    (:func:`~spatialdp.cards.validate_card`); :meth:`to_markdown` and the
    notebook display are rendered from it. Every section names its provenance:
    ``release`` (noised and charged), ``simulation``, ``unaccounted`` or
    ``bookkeeping`` (exact public parameters and selection records, refused on a
    card whose releases hold for add/remove neighbours).

    Parameters
    ----------
    content : mapping
        A card's content, as :meth:`to_dict` returns it; validated (with its digest).

    Raises
    ------
    InvalidCard
        Content that fails the schema or its digest.

    Examples
    --------
    >>> from spatialdp.datasets import us_states_partition
    >>> from spatialdp.federated import MetricSpec
    >>> card = ModelCard.build(partition=us_states_partition(),
    ...                        specs=[MetricSpec("loss", 0.0, 4.0)], title="demo model")
    >>> card.title, card.to_dict()["geography"]["specs"][0]["key"]
    ('demo model', 'loss@1')
    >>> "## Geography" in card.to_markdown()
    True
    """

    def __init__(self, content: Mapping[str, Any]) -> None:
        validate_card(content)
        self._content: dict[str, Any] = copy.deepcopy(dict(content))

    # ------------------------------------------------------------------ construction
    @classmethod
    def build(cls, *, partition: Any, specs: Sequence[Any] = (), strata: Any = None,
              merges: Sequence[Any] | None = None,
              cohort_sizes: Mapping[str, Any] | Any = None, coverage: Any = None,
              coverage_history: Any = None, ledger: Any = None,
              epochs: Sequence[int] | int | None = None, epoch: int | None = None,
              reports: Sequence[Any] | Any = (), report: Any = None,
              query_error: Any = None, title: str | None = None,
              model_details: Mapping[str, Any] | str | None = None,
              intended_use: Mapping[str, Any] | str | None = None,
              limitations: Sequence[str] | str | None = None,
              ethical_considerations: Sequence[str] | str | None = None,
              simulated: Mapping[str, bool] | None = None,
              seeds: Mapping[str, int | None] | None = None,
              figures: Mapping[str, str | os.PathLike[str]] | None = None,
              coverage_map: str | os.PathLike[str] | None = None,
              delta: float | None = None, cell_table: Any = None,
              training: Any = None, monitoring: Mapping[str, Any] | None = None,
              small_area: Any = None) -> ModelCard:
        """Build a card from a run's objects.

        Parameters
        ----------
        partition : Partition
            The report geography (its name and version go on the card).
        specs : sequence of MetricSpec / HistogramSpec
            The released metrics' specs (fingerprints, histogram edge versions).
        strata : Strata, optional
            The sampling strata.
        merges : sequence of Merge, optional
            Merges to list (default: ``coverage.merges``).
        cohort_sizes : mapping or Series region -> count, optional
            Per-region cohort sizes, exact (replace-one only; default: the
            largest published cohort per region of the last report).
        coverage : Coverage or ReleasedCoverage, optional
            :func:`~spatialdp.sampling.epoch_coverage`'s exact bookkeeping
            (replace-one) or :func:`~spatialdp.sampling.release_epoch_coverage`'s
            release (required under add/remove).
        coverage_history : Series or DataFrame, optional
            Coverage score per round (``round_index``, ``score``, optionally
            ``epoch``) across epochs (default: ``coverage.score_history``).
        ledger : PrivacyLedger, optional
            The run's ledger.
        epochs, epoch : int or sequence of int, optional
            The ledger epochs on the card (default: every epoch of the ledger).
        reports, report : RegionalReport or sequence of them
            The rounds' regional reports, in order.
        query_error : DataFrame, optional
            :func:`~spatialdp.queries.measure_query_error`'s table, measured
            against a released grid (a table measured against the truth grid
            is internal and refused).
        title : str, optional
            The card's title (default: the partition's name).
        model_details : dict or str, optional
            ``name``, ``overview``, ``version``, ``owners``, ``license``,
            ``references``, ``documentation`` (a str is the overview).
        intended_use : dict or str, optional
            ``primary_uses``, ``primary_users``, ``out_of_scope``.
        limitations, ethical_considerations : str or list of str, optional
            Replace the defaults (which state what DP and coverage do not cover).
        simulated : dict of str -> bool, optional
            Which inputs are simulated, e.g. ``{"fleet": True, "model": True}``.
        seeds : dict of str -> int or None, optional
            The seeds of the simulated inputs.
        figures : dict of str -> path, optional
            Figures to link (``coverage_map`` is embedded in the coverage section).
            A path to an existing file (absolute, or relative to the current
            directory) is linked relative to the folder :meth:`write` writes to;
            a path to no file is kept as given (relative to that folder).
        coverage_map : path, optional
            Shortcut for ``figures["coverage_map"]``.
        delta : float, optional
            For a zCDP ledger: report the per-client epsilon at this delta.
        cell_table : DataFrame, optional
            One row per H3 cell (index: cell id) with ``clients`` and
            ``clients_sampled``: adds the share of populated cells reached and the
            blind cells (default: ``coverage.cell_table``).
        training : TrainingPrivacy or dict, optional
            How training is accounted (``SpatialDPStrategy.training_privacy``):
            the card states the derived rho, or that training is not private.
        monitoring : dict, optional
            The alerts and drift found on the released values, with their rounds:
            ``metric``, ``alpha``, ``tests`` (what ran) and ``events`` (one row
            per alert or drifting region: ``test``, ``region_id``, ``round``,
            optionally ``first_round``, ``statistic``, ``threshold``).
        small_area : SmallAreaEstimates, optional
            The smoothed estimates of one metric
            (:func:`~spatialdp.smooth.small_area_estimates`): the card states the
            model, its covariates, the share of regions modelled, and that
            smoothing is post-processing (no epsilon charged).

        Returns
        -------
        ModelCard

        Raises
        ------
        InvalidInput
            An argument of the wrong kind; exact counts of people on a card whose
            releases hold for add/remove neighbours; an internal query-error table.
        """
        part = sections.partition_section(partition)
        spec_entries = _spec_entries(specs)
        name = check_text(title, "title") if title is not None else f"Model card: {part['name']}"
        report_list = cls._reports(reports, report)
        rounds = [sections.report_from_object(r) for r in report_list]
        cover = None if coverage is None else sections.coverage_section(
            coverage, coverage_history, cell_table)
        if merges is None and cover is not None:
            merges = list(cover.get("merges", []))
        sampling = (sections.sampling_section(strata, merges)
                    if strata is not None or merges else None)
        cohorts: dict[str, Any] | None
        if cohort_sizes is not None:  # exact counts from the caller: bookkeeping
            cohorts = sections.cohort_section(cohort_sizes, "given per region")
        else:
            cohorts = _cohorts(rounds)
        chosen = cls._epochs(epochs, epoch)
        privacy = None if ledger is None else sections.privacy_section(ledger, chosen, delta)
        qe = None if query_error is None else sections.query_error_section(query_error)
        given = dict(figures or {})
        if coverage_map is not None:
            given["coverage_map"] = coverage_map
        figs = {}
        for key, value in given.items():
            if not isinstance(value, (str, os.PathLike)):
                raise fail(f"figures[{key!r}]", value, "is not a path",
                           "pass the path of a saved PNG")
            path = os.fspath(value)
            # A file that exists from here is linked from wherever the card is written.
            figs[str(key)] = os.path.abspath(path) if os.path.exists(path) else path
        details = {"model_details": model_details, "intended_use": intended_use,
                   "limitations": limitations, "ethical_considerations": ethical_considerations}
        return cls.from_sections(
            title=name, **_text_sections(name, details, simulated, seeds), partition=part,
            specs=spec_entries, sampling=sampling, cohort_sizes=cohorts,
            coverage=cover, privacy=privacy, rounds=rounds, query_error=qe, figures=figs,
            training=sections.training_section(training),
            monitoring=sections.monitoring_section(monitoring),
            small_area=sections.small_area_section(small_area))

    @staticmethod
    def _check_details(manifest: Mapping[str, Any]) -> None:
        """Refuse a run manifest whose texts or flags a card could not hold."""
        details = manifest.get("details") or {}
        if not isinstance(details, Mapping):
            raise fail("details", details, "is not a dict",
                       "pass {'model_details': ..., 'intended_use': ..., 'limitations': ...}")
        unknown = sorted(set(details) - {"model_details", "intended_use", "limitations",
                                         "ethical_considerations"})
        if unknown:
            raise fail("details", dict(details), f"has unknown keys {unknown}",
                       "use model_details, intended_use, limitations, ethical_considerations")
        _text_sections(str(manifest.get("title") or "card"), details,
                       manifest.get("simulated"), manifest.get("seeds"))

    @staticmethod
    def _reports(reports: Sequence[Any] | Any, report: Any) -> list[Any]:
        if isinstance(reports, Sequence) and not isinstance(reports, (str, bytes)):
            out = list(reports)
        elif reports is None:
            out = []
        else:
            out = [reports]
        if report is not None:
            out.append(report)
        return out

    @staticmethod
    def _epochs(epochs: Sequence[int] | int | None, epoch: int | None) -> list[int] | None:
        if epochs is None and epoch is None:
            return None
        chosen: list[Any] = []
        if isinstance(epochs, Sequence) and not isinstance(epochs, (str, bytes)):
            chosen.extend(epochs)
        elif epochs is not None:
            chosen.append(epochs)
        if epoch is not None:
            chosen.append(epoch)
        return sorted({check_count(e, "epochs") for e in chosen})

    @classmethod
    def from_sections(cls, *, title: str, model_details: dict[str, Any],
                      considerations: dict[str, Any], simulated: dict[str, bool],
                      seeds: dict[str, int | None], partition: dict[str, Any],
                      specs: list[dict[str, Any]], sampling: dict[str, Any] | None,
                      cohort_sizes: dict[str, Any] | None, coverage: dict[str, Any] | None,
                      privacy: dict[str, Any] | None, rounds: list[dict[str, Any]],
                      query_error: dict[str, Any] | None, figures: dict[str, str],
                      created: str | None = None,
                      training: dict[str, Any] | None = None,
                      monitoring: dict[str, Any] | None = None,
                      small_area: dict[str, Any] | None = None) -> ModelCard:
        """Assemble a card from ready sections (what :meth:`build` and :meth:`from_run` use).

        The limitations gain what the sections themselves show (public
        participation, a fully spent budget, uninformative metrics, values
        outside their range: ``_sections.found_limitations``).
        """
        from spatialdp import __version__

        for r in rounds:
            if r["partition_version"] != partition["version"]:
                raise PartitionMismatch(
                    f"reports: round {r['round_index']} was made on partition version "
                    f"{r['partition_version']!r}, not the card's {partition['key']!r}; pass "
                    "the partition the reports are keyed by")
        sections.check_participation(sections.card_relations(rounds, privacy),
                                     sampling=sampling, coverage=coverage,
                                     cohort_sizes=cohort_sizes)
        if coverage is not None:
            coverage = {**coverage, "map": figures.get("coverage_map"),
                        "blind_summary": sections.blind_summary(coverage)}
        if monitoring is not None and rounds:
            monitoring = {**monitoring, "provenance": rounds[-1]["provenance"]}
        found = sections.found_limitations(rounds, privacy)
        considerations = {**considerations, "limitations": [
            *considerations["limitations"],
            *(text for text in found if text not in considerations["limitations"])]}
        content: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "card_format": "spatialdp-model-card",
            "title": title,
            "created": created or dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "spatialdp_version": str(__version__),
            "model_details": model_details,
            "considerations": considerations,
            "provenance": {"legend": dict(PROVENANCE), "simulated": simulated, "seeds": seeds},
            "geography": {"partition": partition, "specs": specs, "provenance": "bookkeeping"},
            "sampling": sampling,
            "cohort_sizes": cohort_sizes,
            "coverage": coverage,
            "privacy": privacy,
            "quantitative_analysis": {"rounds": rounds},
            "query_error": query_error,
            "figures": figures,
            "training": training,
            "monitoring": monitoring,
        }
        if small_area is not None:  # absent, not null: older readers' cards stay as they were
            content["small_area"] = small_area
        content["digest"] = canonical_digest(content)
        return cls(content)

    @classmethod
    def from_run(cls, run_dir: str | os.PathLike[str], *,
                 ledger: str | os.PathLike[str] | None = None) -> ModelCard:
        """Rebuild the card from a run folder alone (layout: :class:`RunFolder`).

        Parameters
        ----------
        run_dir : path
            A folder written by :class:`~spatialdp.cards.RunFolder` (``run.json``
            and the artefacts it lists): the output folder of ``spatialdp demo``
            or of ``spatialdp report``.
        ledger : path, optional
            The run's privacy ledger when it is kept outside the folder (``spatialdp
            report --ledger``: the folder never records a ledger's path); opened
            read-only, it gives the card its privacy section. Default: the
            folder's own ``ledger.sqlite`` when ``run.json`` lists it.

        Returns
        -------
        ModelCard

        Raises
        ------
        InvalidInput
            A missing folder or manifest, a manifest of another format, an
            artefact that cannot be read.
        LedgerError
            A damaged ledger file.
        """
        return RunFolder(run_dir).card(ledger=ledger)

    @classmethod
    def from_json(cls, source: str | os.PathLike[str]) -> ModelCard:
        """Read a card from a JSON file (or JSON text), validated and digest-checked.

        Raises
        ------
        InvalidCard
            Not JSON, not a card, a schema violation or a digest mismatch.
        InvalidInput
            A path that cannot be read.
        """
        if isinstance(source, str) and source.lstrip().startswith("{"):
            text = source
        elif isinstance(source, (str, os.PathLike)):
            try:
                text = Path(source).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as err:
                raise fail("source", os.fspath(source), f"cannot be read ({err})",
                           "pass the path of a model_card.json") from err
        else:
            raise fail("source", source, "is not a path or JSON text",
                       "pass the path of a model_card.json")
        try:
            content = json.loads(text)
        except json.JSONDecodeError as err:
            raise InvalidCard(f"card is not valid JSON ({err}); rebuild it with "
                              "ModelCard.from_run") from err
        return cls(content)

    # ------------------------------------------------------------------ views
    @property
    def title(self) -> str:
        """The card's title."""
        return str(self._content["title"])

    @property
    def digest(self) -> str:
        """``sha256:<hex>`` of the content."""
        return str(self._content["digest"])

    @property
    def simulated(self) -> bool:
        """True when any round is a simulation or any input is flagged simulated."""
        return (any(self._content["provenance"]["simulated"].values())
                or any(r["provenance"] == "simulation"
                       for r in self._content["quantitative_analysis"]["rounds"]))

    def to_dict(self) -> dict[str, Any]:
        """Return the card as plain JSON-ready values (a copy)."""
        return copy.deepcopy(self._content)

    def to_json(self, *, indent: int | None = 2) -> str:
        """Return the card as JSON text (with its content digest).

        The content was validated when the card was made and a card never
        changes (every accessor returns a copy), so it is not validated again.
        """
        return json.dumps(self._content, indent=indent, ensure_ascii=False, allow_nan=False)

    def to_markdown(self) -> str:
        """Return the card as Markdown (figures by path relative to the card's folder)."""
        from spatialdp.cards.markdown import render_markdown

        return render_markdown(self._content)

    def with_figures_relative_to(self, folder: str | os.PathLike[str]) -> ModelCard:
        """Return the card with absolute figure paths made relative to ``folder``."""
        figures = dict(self._content["figures"])
        changed = False
        for key, value in figures.items():
            if os.path.isabs(value):
                figures[key] = Path(os.path.relpath(value, folder)).as_posix()
                changed = True
        if not changed:
            return self
        content = copy.deepcopy(self._content)
        content["figures"] = figures
        if content["coverage"] is not None:
            content["coverage"]["map"] = figures.get("coverage_map")
        content["digest"] = canonical_digest(content)
        return type(self)._unchecked(content)  # only figure paths changed, strings as before

    @classmethod
    def _unchecked(cls, content: dict[str, Any]) -> ModelCard:
        """Return a card of content derived from a validated card's (no second validation)."""
        card = cls.__new__(cls)
        card._content = content
        return card

    def write(self, folder: str | os.PathLike[str], stem: str = "model_card") -> list[Path]:
        """Write ``<stem>.md`` and ``<stem>.json`` into ``folder``, each atomically.

        Figures given by absolute path are linked relative to ``folder``. The
        JSON was validated when the card was made. A simulation's card is
        ``<stem>.SIMULATION.md`` / ``.json``, so it never passes for a release.

        Returns
        -------
        list of Path
            The Markdown and the JSON file.
        """
        target, stem = check_output(folder, stem, "model_card")
        make_folder(target)
        card = self.with_figures_relative_to(target)
        label = ".SIMULATION" if any(r["provenance"] == "simulation" for r in
                                     card._content["quantitative_analysis"]["rounds"]) else ""
        text_json = card.to_json()
        text_md = card.to_markdown()
        return [write_text_atomically(target / f"{stem}{label}.md", text_md),
                write_text_atomically(target / f"{stem}{label}.json", text_json + "\n")]

    def summary(self) -> str:
        """Return a few lines: title, provenance, partition, rounds, epsilon, coverage."""
        c = self._content
        part = c["geography"]["partition"]
        lines = [f"{c['title']} (model card, schema {c['schema_version']})"]
        simulated = [k for k, v in c["provenance"]["simulated"].items() if v]
        rounds = c["quantitative_analysis"]["rounds"]
        sim_rounds = [("unnumbered" if r["round_index"] is None else str(r["round_index"]))
                  for r in rounds if r["provenance"] == "simulation"]
        if sim_rounds:
            lines.append(f"  SIMULATION rounds {', '.join(sim_rounds)}: not a release")
        if simulated:
            lines.append(f"  simulated inputs: {', '.join(simulated)}")
        lines.append(f"  partition {part['key']}, {len(c['geography']['specs'])} metric specs")
        if rounds:
            kinds = sorted({r["provenance"] for r in rounds})
            lines.append(f"  {len(rounds)} round(s) of regional metrics ({', '.join(kinds)}); "
                         f"suppressed regions in the last: {rounds[-1]['suppressed_regions']}")
        if c["privacy"] is not None:
            relations = c["privacy"].get("neighbours") or []
            if relations:
                lines.append(f"  neighbouring relations: {', '.join(relations)}")
            for e in c["privacy"]["epochs"]:
                eps = e["epsilon_per_client"]
                lines.append(f"  epoch {e['epoch']}: per-client epsilon "
                             f"{'n/a' if eps is None else format(eps, '.4g')}")
        if c["coverage"] is not None:
            cov = c["coverage"]
            if cov["provenance"] == "release":
                lines.append(f"  coverage (released): {cov['regions_confirmed']} of "
                             f"{cov['n_regions']} regions confirmed reached")
            else:
                lines.append(f"  coverage: {cov['share_strata_sampled']:.0%} of strata "
                             "sampled")
            blind = sections.blind_text(cov.get("blind_summary"))
            if blind:
                lines.append(f"  blind spots: {blind}")
        if c.get("monitoring") is not None:
            events = c["monitoring"]["events"]
            lines.append("  alerts and drift: " + (", ".join(
                f"{e['test']} in {e['region_id']} (round {e['round']})" for e in events)
                or "none"))
        flagged = [m["name"] for m in (rounds[-1]["metrics"] if rounds else [])
                   if m.get("uninformative")]
        if flagged:
            lines.append(f"  uninformative at this budget: {', '.join(flagged)}")
        if c["query_error"] is not None:
            lines.append(f"  query error: {len(c['query_error']['rows'])} buckets (against a "
                         f"released grid, {c['query_error']['provenance']})")
        if c.get("training") is not None:
            lines.append(f"  {c['training']['statement']}")
        if c.get("small_area") is not None:
            sa = c["small_area"]
            lines.append(f"  smoothed {sa['metric']}: {sa['model_name']}, "
                         f"{sa['modelled_share']:.0%} of regions modelled (post-processing, "
                         "no epsilon charged)")
        return "\n".join(lines)

    def __repr__(self) -> str:
        rounds = len(self._content["quantitative_analysis"]["rounds"])
        return (f"ModelCard(title={self.title!r}, partition="
                f"{self._content['geography']['partition']['key']!r}, rounds={rounds}, "
                f"digest={self.digest[:15]!r})")

    def _repr_html_(self) -> str:
        import pandas as pd

        from spatialdp._results import summary_html

        rounds = self._content["quantitative_analysis"]["rounds"]
        table = None
        if rounds:
            table = pd.DataFrame([{
                "round": r["round_index"], "provenance": r["provenance"],
                "epsilon per client": r["epsilon_total"],
                "suppressed regions": r["suppressed_regions"],
                **{f"median bar {m['name']}": m.get("median_error_bar")
                   for m in r["metrics"]}} for r in rounds]).set_index("round")
        return summary_html("ModelCard", self.summary(), table,
                            caption="Regional metrics per round (error bars: median over "
                                    "published regions)")


# ---------------------------------------------------------------------------- the run folder
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
    MONITORING = "monitoring.json"
    SMALL_AREA = "small_area.json"
    REPORTS = "reports"
    LEDGER = "ledger.sqlite"

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = check_path(path, "run_dir", "pass the run folder as a str or pathlib.Path")

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
                       training: Any = None, reports: Sequence[str] | None = None) -> Path:
        """Write ``run.json``; reports already listed in an existing one are kept.

        Parameters
        ----------
        partition : Partition
        specs : sequence of MetricSpec / HistogramSpec
        epsilon : float or dict name -> float, optional
            One round's epsilon: the total charged (a float), or its split over
            the metrics (a dict whose sum is the total).
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
        reports : sequence of str, optional
            The JSON sidecars of reports already written in the folder, relative
            to it, in round order (``RegionalReport.write(run_dir)`` makes
            ``regional_report.json``): they replace those an existing ``run.json``
            lists. Default: keep those (:meth:`write_report` adds more).

        Returns
        -------
        Path
        """
        from spatialdp import __version__

        old = self._read_json(self.MANIFEST) if (self.path / self.MANIFEST).exists() else {}
        spec_entries = _spec_entries(specs)
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
            "specs": spec_entries,
            "epsilon": eps,
            "rounds": None if rounds is None else int(rounds),
            "seeds": dict(seeds or {}),
            "simulated": {str(k): bool(v) for k, v in dict(simulated or {}).items()},
            "epochs": [int(e) for e in epochs],
            "alpha": None if alpha is None else float(alpha),
            "min_cohort": None if min_cohort is None else int(min_cohort),
            "delta": None if delta is None else float(delta),
            "ledger": self.LEDGER if ledger else None,
            "reports": (list(old.get("reports", [])) if reports is None
                        else self._report_entries(reports)),
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
                       "(layout: spatialdp.cards.RunFolder)") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise fail("run_dir", os.fspath(self.path), f"holds an unreadable {name} ({err})",
                       "rewrite the run's artefacts") from err

    def _report_entries(self, reports: Sequence[str]) -> list[str]:
        """Return report sidecars given relative to the folder, refusing any it does not hold."""
        if isinstance(reports, (str, bytes)) or not isinstance(reports, Sequence):
            raise fail("reports", reports, "is not a list of paths",
                       "pass e.g. ['regional_report.json']")
        entries = []
        for rel in reports:
            entry = Path(check_text(os.fspath(rel), "reports[]"))
            if entry.is_absolute() or entry.suffix != ".json" or not (self.path / entry).is_file():
                raise fail("reports[]", os.fspath(rel), f"is not a report's JSON sidecar in "
                           f"{os.fspath(self.path)}", "write the report into the run folder "
                           "first and pass its .json relative to the folder")
            entries.append(entry.as_posix())
        return entries

    def read_manifest(self) -> dict[str, Any]:
        """Return ``run.json``, checked (format, required keys)."""
        if not self.path.is_dir():
            raise fail("run_dir", os.fspath(self.path), "is not a folder",
                       "pass the folder a run was written into")
        if not (self.path / self.MANIFEST).exists() and any(self.path.glob("*.gpkg")):
            raise fail("run_dir", os.fspath(self.path), "holds report files but no "
                       f"{self.MANIFEST} (written by RegionalReport.write or an older "
                       "spatialdp report)", "run `spatialdp report` again (it writes "
                       "run.json), or write the run with RunFolder.write_manifest(..., "
                       "reports=['<stem>.json'])")
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

    def write_monitoring(self, monitoring: Mapping[str, Any]) -> Path:
        """Write ``monitoring.json``: the alerts and drift with their rounds (see ``build``)."""
        section = sections.monitoring_section(monitoring)
        assert section is not None
        section.pop("provenance")
        return self._write(self.MONITORING, _json(section))

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

    def write_small_area(self, small_area: Any) -> Path:
        """Write ``small_area.json``: the card's small-area section (see ``ModelCard.build``)."""
        section = sections.small_area_section(small_area)
        return self._write(self.SMALL_AREA, _json(section))

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

    def card(self, *, ledger: str | os.PathLike[str] | None = None) -> ModelCard:
        """Return the :class:`~spatialdp.cards.ModelCard` of this folder (``from_run``).

        ``ledger`` is the run's ledger when it lives outside the folder (see
        :meth:`ModelCard.from_run`).
        """
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
            cohorts: dict[str, Any] | None = {"provenance": "bookkeeping",
                                              **self._read_json(self.COHORT_SIZES)}
        else:
            cohorts = _cohorts(rounds)
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
        if ledger is not None:
            privacy = self._read_ledger(manifest, check_path(
                ledger, "ledger", "pass the path of the run's ledger file"))
        elif manifest.get("ledger"):
            privacy = self._read_ledger(manifest)
        # Absolute here; ModelCard.write links them relative to wherever the card goes.
        figures = {str(k): os.path.abspath(self.path / str(v))
                   for k, v in dict(manifest.get("figures") or {}).items()
                   if (self.path / str(v)).exists()}
        return ModelCard.from_sections(
            title=title, **_text_sections(title, details, manifest.get('simulated'),
                                          manifest.get('seeds')),
            partition=part, specs=specs, sampling=sampling, cohort_sizes=cohorts,
            coverage=coverage, privacy=privacy, rounds=rounds, query_error=query_error,
            figures=figures, training=sections.training_section(manifest.get("training")),
            monitoring=(sections.monitoring_section(self._read_json(self.MONITORING))
                        if (self.path / self.MONITORING).exists() else None),
            small_area=(sections.small_area_section(self._read_json(self.SMALL_AREA))
                        if (self.path / self.SMALL_AREA).exists() else None))

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

    def _read_ledger(self, manifest: Mapping[str, Any], given: Path | None = None
                     ) -> dict[str, Any]:
        from spatialdp.privacy.ledger import PrivacyLedger

        path = self.path / str(manifest["ledger"]) if given is None else given
        if given is not None and not given.is_file():
            raise fail("ledger", os.fspath(given), "does not exist",
                       "pass the ledger the run was charged to")
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
                     training: Any = None, monitoring: Mapping[str, Any] | None = None,
                     small_area: Any = None) -> RunFolder:
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
    ``reports`` (RegionalReports in round order), ``query_error``, ``training``
    (``SpatialDPStrategy.training_privacy``), ``monitoring`` (the alerts and
    drift with their rounds) and ``small_area`` (a smoothed metric's
    ``SmallAreaEstimates``), as :meth:`ModelCard.build` takes them.
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
    if monitoring is not None:
        run.write_monitoring(monitoring)
    if small_area is not None:
        run.write_small_area(small_area)
    return run
