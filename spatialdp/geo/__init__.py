"""The fixed, versioned geography every step of spatialdp is keyed by."""

from __future__ import annotations

from spatialdp.geo._assign import UnassignedPointsWarning
from spatialdp.geo.h3cells import (
    cell_parents,
    cell_polygons,
    cells_to_str,
    parse_cells,
    rollup_counts,
)
from spatialdp.geo.partition import MAX_PARTITION_CELLS, Assignment, CellIncidence, Partition

__all__ = [
    "MAX_PARTITION_CELLS",
    "Assignment",
    "CellIncidence",
    "Partition",
    "UnassignedPointsWarning",
    "cell_parents",
    "cell_polygons",
    "cells_to_str",
    "parse_cells",
    "rollup_counts",
]
