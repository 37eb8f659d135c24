"""A released noisy grid: the one materialised answer source for polygon queries.

:class:`NoisyGrid` is what :func:`~spatialdp.queries.release_flat` and
:func:`~spatialdp.queries.release_hierarchical` publish: one value per fine
cell (plus, for the hierarchical release, the consistent estimates of every
coarser node). Every polygon is answered from it, so answers are consistent by
construction: the answer to a union of disjoint polygons is the sum of their
answers. It also knows the variance of any answer before it is given, from
public parameters only (the noise scales and the query's cells).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import NDArray

from spatialdp.exceptions import PartitionMismatch
from spatialdp.privacy.accuracy import noise_std

if TYPE_CHECKING:
    from spatialdp.geo import CellIncidence
    from spatialdp.queries.hierarchy import Tree

__all__ = ["NoisyGrid", "check_incidence"]

NOISE_KIND = "discrete_laplace"


@dataclass(frozen=True, eq=False)
class NoisyGrid:
    """A published noisy count grid (flat or hierarchical), keyed by its partition version.

    Attributes
    ----------
    values : numpy.ndarray
        One published value per fine cell, in grid order: int64 noisy counts for
        the flat release, the consistent float estimates for the hierarchical one.
    cells : numpy.ndarray of uint64
        The fine H3 cells (sorted).
    resolution : int
    partition_version, partition_key : str
    method : {"flat", "hierarchical"}
    epsilon : float
        The total privacy loss of the release (what the ledger was charged).
    sensitivity : int
        The L1 sensitivity the noise is calibrated to, per level: ``k`` (the most
        cells one device counts in) when one device is added or removed, ``2 k``
        when one device's cells are replaced.
    scales : tuple of float
        Discrete Laplace scale per level, coarsest first (one entry for flat).
    level_epsilons : tuple of float
        Epsilon per level, coarsest first (one entry for flat).
    resolutions : tuple of int
        H3 resolution of each level, coarsest first.
    accounting : dict
        The release target's metadata (ledger, simulation or unaccounted).
    tree : Tree or None
        The parent relation and node estimates (hierarchical only).
    neighbours : {"add_remove", "replace"}
        The neighbouring relation ``epsilon`` holds for.
    """

    values: NDArray[Any]
    cells: NDArray[np.uint64]
    resolution: int
    partition_version: str
    partition_key: str
    method: Literal["flat", "hierarchical"]
    epsilon: float
    sensitivity: int
    scales: tuple[float, ...]
    level_epsilons: tuple[float, ...]
    resolutions: tuple[int, ...]
    accounting: dict[str, Any] = field(default_factory=dict)
    tree: Tree | None = field(default=None, repr=False)
    neighbours: str = "add_remove"

    @property
    def simulated(self) -> bool:
        """Whether the noise came from a seeded simulation (never publish it)."""
        return bool(self.accounting.get("simulated", False))

    @property
    def n_cells(self) -> int:
        """Number of fine cells."""
        return int(self.cells.size)

    def cell_std(self) -> float:
        """Return the standard deviation of one flat cell's noise (flat release only)."""
        return float(noise_std(NOISE_KIND, self.scales[-1]))

    def query_variance(self, incidence: CellIncidence) -> NDArray[np.float64]:
        """Return the noise variance of each query's answer, from public parameters only.

        Flat: ``m`` times the variance of one cell's discrete Laplace noise.
        Hierarchical: exact, through the linear map of the least-squares
        consistency (see :meth:`Tree.query_variance`).

        Raises
        ------
        PartitionMismatch
            Queries of another partition version.
        """
        check_incidence(self, incidence)
        if self.tree is None:
            m = incidence.cells_per_query.astype(np.float64)
            return m * self.cell_std() ** 2
        return self.tree.query_variance(incidence.matrix)

    def __repr__(self) -> str:
        label = {True: ", SIMULATION"}.get(self.simulated, "")
        return (f"NoisyGrid({self.method}, cells={self.n_cells:,}, epsilon={self.epsilon:g}, "
                f"k={self.sensitivity}, levels={list(self.resolutions)}, "
                f"partition={self.partition_key!r}{label})")


def check_incidence(grid: Any, incidence: CellIncidence) -> None:
    """Refuse queries converted on another partition version than ``grid``'s.

    Raises
    ------
    PartitionMismatch
        If the versions differ.
    """
    from spatialdp.geo import CellIncidence

    if not isinstance(incidence, CellIncidence):
        from spatialdp._validation import fail

        raise fail("queries", incidence, "is not a CellIncidence",
                   "convert polygons with partition.polygons_to_cells(frame) or pass a "
                   "GeoDataFrame with the partition")
    if incidence.partition_version != grid.partition_version:
        raise PartitionMismatch(
            f"the queries were converted on partition version {incidence.partition_version!r}, "
            f"but the grid is {grid.partition_key!r}; convert them with this grid's partition "
            "(partition.polygons_to_cells)")
