"""The :class:`ModelCard`: one JSON-ready document built from a run's objects or folder."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["COHORT_EDGES", "PROVENANCE", "ModelCard"]

#: Bucket edges for cohort sizes in the card (``coarsen_count(n, COHORT_EDGES)``).
COHORT_EDGES: tuple[int, ...] = (1, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000,
                                 10_000, 20_000, 50_000, 100_000)

#: Where a section's numbers come from.
PROVENANCE: dict[str, str] = {
    "release": "noised under differential privacy and charged to the ledger",
    "simulation": "seeded simulation: never a release, never publish it as one",
    "unaccounted": "noised, but charged to no ledger",
    "bookkeeping": "exact server-side bookkeeping of public parameters and selection "
                   "(no noise; counts coarsened)",
}


class ModelCard:
    """A model card: model details, geography, sampling, coverage, privacy, metrics, query error.

    Build one with :meth:`build` (from objects) or :meth:`from_run` (from a run
    folder); :meth:`from_json` reads a card back (validated, digest checked).
    The content is one JSON-ready dict (:meth:`to_dict`), validated against the
    shipped schema; Markdown and HTML are rendered from it.
    """

    def __init__(self, content: Mapping[str, Any]) -> None:
        raise NotImplementedError

    @classmethod
    def build(cls, *, partition: Any, specs: Sequence[Any] = (), strata: Any = None,
              merges: Sequence[Any] | None = None,
              cohort_sizes: Mapping[str, int] | Any = None, coverage: Any = None,
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
              figures: Mapping[str, str] | None = None,
              coverage_map: str | os.PathLike[str] | None = None,
              delta: float | None = None) -> ModelCard:
        """Build a card from a run's objects."""
        raise NotImplementedError

    @classmethod
    def from_run(cls, run_dir: str | os.PathLike[str]) -> ModelCard:
        """Rebuild the card from a run folder alone (layout: :mod:`spatialdp.cards.run_folder`)."""
        raise NotImplementedError

    @classmethod
    def from_json(cls, source: str | os.PathLike[str]) -> ModelCard:
        """Read a card from a JSON file (or JSON text), validated and digest-checked."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """Return the card as plain JSON-ready values (a copy)."""
        raise NotImplementedError

    def to_json(self, *, indent: int = 2) -> str:
        """Return the card as JSON text (validated; with its content digest)."""
        raise NotImplementedError

    def to_markdown(self) -> str:
        """Return the card as Markdown (figures by path relative to the card's folder)."""
        raise NotImplementedError

    def write(self, folder: str | os.PathLike[str], stem: str = "model_card") -> list[Path]:
        """Write ``<stem>.md`` and ``<stem>.json`` into ``folder``, each atomically."""
        raise NotImplementedError

    def _repr_html_(self) -> str:
        raise NotImplementedError
