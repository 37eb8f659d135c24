"""Model cards for federated spatial models: built from a run's artefacts.

A :class:`ModelCard` holds what a reviewer needs to trust a private regional
evaluation: the partition and its version, the metric specs and histogram edge
versions, the strata and every merge with its reason, cohort sizes, coverage
figures with the blind spots and the coverage score's history, the privacy
ledger per epoch and line item with the per-client epsilon and the neighbouring
relations, metric values with error bars and the suppressed regions, and the
query-error table (measured against a released grid; an internal table measured
against the truth is refused). Every section says whether its numbers are noised
releases, simulation, or exact bookkeeping; counts of people are exact under
replace-one neighbours and noised releases under add/remove (:data:`PARTICIPATION`).

It is written as Markdown for people (:mod:`spatialdp.cards.markdown`, with
the coverage map embedded) and JSON for machines (:mod:`spatialdp.cards.json_card`),
validated against ``model_card.schema.json`` shipped in this package. A run
folder (:class:`RunFolder`, layout in :mod:`spatialdp.cards.card`) keeps the artefacts;
:meth:`ModelCard.from_run` rebuilds the card from that folder alone.
Names resolve on first use (:mod:`spatialdp._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spatialdp._lazy import attach

if TYPE_CHECKING:  # the public names, imported on first use (spatialdp._lazy)
    from spatialdp.cards.card import (
        PARTICIPATION,
        PROVENANCE,
        RUN_FORMAT,
        ModelCard,
        RunFolder,
        write_run_folder,
    )
    from spatialdp.cards.json_card import (
        SCHEMA_VERSION,
        InvalidCard,
        load_schema,
        validate_card,
    )
    from spatialdp.cards.markdown import render_markdown

__getattr__, __dir__ = attach(__name__, __file__)

__all__ = [
    "PARTICIPATION",
    "PROVENANCE",
    "RUN_FORMAT",
    "SCHEMA_VERSION",
    "InvalidCard",
    "ModelCard",
    "RunFolder",
    "load_schema",
    "render_markdown",
    "validate_card",
    "write_run_folder",
]
