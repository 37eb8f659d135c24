"""DP spatial count queries on H3: truth grids, flat and hierarchical releases, error.

The flow: :func:`truth_grid` (device counts per cell, each device clipped to
``k`` cells) -> :func:`release_flat` or :func:`release_hierarchical` (one
ledger charge, discrete Laplace noise) -> :func:`answer_polygons` (one row per
polygon with its noisy answer, exact error bar, cell count ``m`` and
discretisation error) and :func:`measure_query_error` (error per bucket of a
real query corpus, next to its analytic expectation). Measured against the
released grid (a plug-in truth) the error table is post-processing of the
release and may be published; measured against the truth grid it is internal
planning, and the publishing helpers refuse it (:func:`require_publishable`).
"""

from __future__ import annotations

from spatialdp.queries.advice import flat_or_hierarchical, recommend_resolution
from spatialdp.queries.answers import answer_polygons
from spatialdp.queries.corpus import QueryCorpus, query_corpus
from spatialdp.queries.flat import release_flat
from spatialdp.queries.fresh import answer_fresh
from spatialdp.queries.grids import NoisyGrid
from spatialdp.queries.hierarchy import level_epsilons, release_hierarchical
from spatialdp.queries.measure import measure_query_error, require_publishable
from spatialdp.queries.truth import TruthGrid, grid_version, truth_grid

__all__ = [
    "NoisyGrid",
    "QueryCorpus",
    "TruthGrid",
    "answer_fresh",
    "answer_polygons",
    "flat_or_hierarchical",
    "grid_version",
    "level_epsilons",
    "measure_query_error",
    "query_corpus",
    "recommend_resolution",
    "release_flat",
    "release_hierarchical",
    "require_publishable",
    "truth_grid",
]
