"""Stratified cohort selection on the fixed geography.

Strata (:class:`Strata`, :func:`density_strata`), allocation rules
(:func:`allocate`), capped selection seeded from the round id
(:class:`StratifiedSampler`, :class:`ParticipationState`), merges of small
strata and of persistently suppressed report regions, the coverage score and
its detectors, the :class:`Coverage` result for the model card, and figures.
"""

from __future__ import annotations

from spatialdp.sampling.allocation import (
    DEFAULT_MODE,
    MODES,
    Allocation,
    allocate,
    allocation_table,
    largest_remainder,
)
from spatialdp.sampling.density import DENSITY_CLASSES, density_cells, density_strata
from spatialdp.sampling.merges import Merge, merge_small_groups
from spatialdp.sampling.policy import ParticipationPolicy
from spatialdp.sampling.sampler import RoundCohort, StratifiedSampler
from spatialdp.sampling.score import coverage_score
from spatialdp.sampling.state import ParticipationState, StateFileError
from spatialdp.sampling.strata import Strata

__all__ = [
    "DEFAULT_MODE",
    "DENSITY_CLASSES",
    "MODES",
    "Allocation",
    "Merge",
    "ParticipationPolicy",
    "ParticipationState",
    "RoundCohort",
    "StateFileError",
    "Strata",
    "StratifiedSampler",
    "allocate",
    "allocation_table",
    "coverage_score",
    "density_cells",
    "density_strata",
    "largest_remainder",
    "merge_small_groups",
]
