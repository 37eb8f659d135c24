"""Stratified cohort selection on the fixed geography.

Strata (:class:`Strata`, :func:`density_strata`), allocation rules
(:func:`allocate`), capped selection seeded from the round id
(:class:`StratifiedSampler`, :class:`ParticipationState`), merges of small
strata and of persistently suppressed report regions, the coverage score and
its detectors, the :class:`Coverage` result for the model card, and figures.
Names resolve on first use (:mod:`spatialdp._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spatialdp._lazy import attach

if TYPE_CHECKING:  # the public names, imported on first use (spatialdp._lazy)
    from spatialdp.exceptions import StateFileError
    from spatialdp.sampling.allocation import (
        DEFAULT_MODE,
        MODES,
        Allocation,
        allocate,
        allocation_table,
        largest_remainder,
    )
    from spatialdp.sampling.composition import published_composition
    from spatialdp.sampling.coverage import (
        Coverage,
        ReleasedCoverage,
        epoch_coverage,
        release_epoch_coverage,
    )
    from spatialdp.sampling.density import DENSITY_CLASSES, density_cells, density_strata
    from spatialdp.sampling.explore import explore_coverage
    from spatialdp.sampling.merges import Merge, merge_small_groups
    from spatialdp.sampling.plots import (
        plot_allocation,
        plot_coverage_map,
        plot_coverage_maps,
        plot_staircase,
    )
    from spatialdp.sampling.policy import ParticipationPolicy
    from spatialdp.sampling.regional import merge_suppressed_regions
    from spatialdp.sampling.sampler import RoundCohort, StratifiedSampler
    from spatialdp.sampling.score import coverage_score
    from spatialdp.sampling.simulation import SEED_POPULATIONS, row_strata, simulate_rounds
    from spatialdp.sampling.state import ParticipationState
    from spatialdp.sampling.strata import Strata

__getattr__, __dir__ = attach(__name__, __file__)

__all__ = [
    "DEFAULT_MODE",
    "DENSITY_CLASSES",
    "MODES",
    "SEED_POPULATIONS",
    "Allocation",
    "Coverage",
    "Merge",
    "ParticipationPolicy",
    "ParticipationState",
    "ReleasedCoverage",
    "RoundCohort",
    "StateFileError",
    "Strata",
    "StratifiedSampler",
    "allocate",
    "allocation_table",
    "coverage_score",
    "density_cells",
    "density_strata",
    "epoch_coverage",
    "explore_coverage",
    "largest_remainder",
    "merge_small_groups",
    "merge_suppressed_regions",
    "plot_allocation",
    "plot_coverage_map",
    "plot_coverage_maps",
    "plot_staircase",
    "published_composition",
    "release_epoch_coverage",
    "row_strata",
    "simulate_rounds",
]
