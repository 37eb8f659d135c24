"""The fixed, versioned geography every step of spatialdp is keyed by."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spatialdp._lazy import attach

if TYPE_CHECKING:  # the public names, imported on first use (spatialdp._lazy)
    from spatialdp.exceptions import ReprojectedLayerWarning, UnassignedPointsWarning
    from spatialdp.geo.h3cells import (
        cell_parents,
        cell_polygons,
        cells_to_str,
        parse_cells,
        rollup_counts,
    )
    from spatialdp.geo.partition import MAX_PARTITION_CELLS, Assignment, CellIncidence, Partition

__getattr__, __dir__ = attach(__name__, __file__)

__all__ = [
    "MAX_PARTITION_CELLS",
    "Assignment",
    "CellIncidence",
    "Partition",
    "ReprojectedLayerWarning",
    "UnassignedPointsWarning",
    "cell_parents",
    "cell_polygons",
    "cells_to_str",
    "parse_cells",
    "rollup_counts",
]
