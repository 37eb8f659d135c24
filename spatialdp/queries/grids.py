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
from scipy import sparse

from spatialdp._results import Result
from spatialdp._validation import fail
from spatialdp.exceptions import PartitionMismatch
from spatialdp.geo import h3cells
from spatialdp.privacy.accuracy import noise_std

if TYPE_CHECKING:
    from spatialdp.geo import CellIncidence

__all__ = ["NoisyGrid", "Tree", "check_incidence"]

NOISE_KIND = "discrete_laplace"


#: Queries whose weights :meth:`Tree.query_variance` holds at once.
QUERY_CHUNK = 256

@dataclass(eq=False)
class Tree:
    """The H3 parent relation of a grid's fine cells, and the consistency's coefficients.

    Attributes
    ----------
    resolutions : tuple of int
        Coarsest first; the last is the grid's.
    nodes : list of numpy.ndarray of uint64
        The cells of each level (sorted).
    up : list of scipy.sparse.csr_array
        ``up[l]`` sums level ``l + 1`` into level ``l`` (shape ``n_l x n_(l+1)``).
    variances : tuple of float
        Noise variance of one node per level.
    alpha, share : list of numpy.ndarray
        Weight of a node's own measurement (per level; 1 at the leaves), and
        each node's share of its parent's correction (per level; unused at the roots).
    estimates : list of numpy.ndarray or None
        Consistent node estimates, per level (after a release).
    """

    resolutions: tuple[int, ...]
    nodes: list[NDArray[np.uint64]]
    up: list[sparse.csr_array]
    variances: tuple[float, ...]
    alpha: list[NDArray[np.float64]] = field(default_factory=list)
    share: list[NDArray[np.float64]] = field(default_factory=list)
    estimates: list[NDArray[np.float64]] | None = None

    @classmethod
    def build(cls, cells: NDArray[np.uint64], resolutions: tuple[int, ...],
              variances: tuple[float, ...]) -> Tree:
        """Build the tree of ``cells`` (sorted, at ``resolutions[-1]``) and its coefficients."""
        nodes = [cells]
        up: list[sparse.csr_array] = []
        for res in resolutions[-2::-1]:
            child = nodes[0]
            parents, inverse = np.unique(h3cells.cell_parents_unchecked(child, res),
                                         return_inverse=True)
            up.insert(0, sparse.csr_array(
                (np.ones(child.size), (inverse.ravel(), np.arange(child.size))),
                shape=(parents.size, child.size)))
            nodes.insert(0, parents)
        tree = cls(resolutions, nodes, up, variances)
        tree._coefficients()
        return tree

    @property
    def levels(self) -> int:
        """Number of levels."""
        return len(self.nodes)

    @property
    def n_nodes(self) -> int:
        """Nodes in all levels."""
        return int(sum(n.size for n in self.nodes))

    def _coefficients(self) -> None:
        n_lev = self.levels
        var_z: list[NDArray[np.float64]] = [np.empty(0)] * n_lev
        alpha: list[NDArray[np.float64]] = [np.empty(0)] * n_lev
        var_s: list[NDArray[np.float64]] = [np.empty(0)] * n_lev
        var_z[-1] = np.full(self.nodes[-1].size, self.variances[-1])
        alpha[-1] = np.ones(self.nodes[-1].size)
        for lev in range(n_lev - 2, -1, -1):
            vs = self.up[lev] @ var_z[lev + 1]
            own = 1.0 / self.variances[lev]
            var_s[lev] = vs
            alpha[lev] = own / (own + 1.0 / vs)
            var_z[lev] = 1.0 / (own + 1.0 / vs)
        share = [np.zeros(self.nodes[0].size)]
        for lev in range(1, n_lev):
            parent_vs = self.up[lev - 1].T @ var_s[lev - 1]
            share.append(var_z[lev] / parent_vs)
        self.alpha, self.share = alpha, share

    def consistent(self, measured: list[NDArray[Any]]) -> list[NDArray[np.float64]]:
        """Return the least-squares consistent estimates of noisy per-level measurements.

        ``measured[l]`` has one row per node of level ``l`` (1-D, or 2-D with one
        column per simulated draw).
        """
        n_lev = self.levels
        z: list[Any] = [None] * n_lev
        s: list[Any] = [None] * n_lev
        z[-1] = np.asarray(measured[-1], dtype=np.float64)
        for lev in range(n_lev - 2, -1, -1):
            s[lev] = self.up[lev] @ z[lev + 1]
            a = self.alpha[lev].reshape((-1,) + (1,) * (z[-1].ndim - 1))
            z[lev] = a * measured[lev] + (1.0 - a) * s[lev]
        x: list[Any] = [None] * n_lev
        x[0] = z[0]
        for lev in range(1, n_lev):
            b = self.share[lev].reshape((-1,) + (1,) * (z[-1].ndim - 1))
            x[lev] = z[lev] + b * (self.up[lev - 1].T @ (x[lev - 1] - s[lev - 1]))
        return x

    def query_weights(self, matrix: sparse.csr_array) -> list[sparse.csc_array]:
        """Return the weight of every node's measurement in each query's answer, per level.

        The answer ``q @ x_leaves`` is linear in the measurements; its weights
        (shape ``n_l x n_queries`` per level) come from running the two passes
        backwards (the adjoint). Public parameters only.
        """
        n_lev = self.levels
        g_x: list[Any] = [None] * n_lev
        g_x[-1] = sparse.csc_array(matrix.T, dtype=np.float64)
        g_z: list[Any] = [None] * n_lev
        g_s: list[Any] = [None] * n_lev
        for lev in range(n_lev - 1, 0, -1):
            g_z[lev] = g_x[lev]
            back = self.up[lev - 1] @ sparse.csc_array(g_x[lev].multiply(
                self.share[lev][:, None]))
            g_x[lev - 1] = back if g_x[lev - 1] is None else g_x[lev - 1] + back
            g_s[lev - 1] = -back
        g_z[0] = g_x[0]
        weights: list[sparse.csc_array] = []
        for lev in range(n_lev - 1):
            weights.append(sparse.csc_array(g_z[lev].multiply(self.alpha[lev][:, None])))
            through = g_s[lev] + sparse.csc_array(g_z[lev].multiply(
                (1.0 - self.alpha[lev])[:, None]))
            g_z[lev + 1] = g_z[lev + 1] + self.up[lev].T @ through
        weights.append(sparse.csc_array(g_z[-1]))
        return weights

    def query_variance(self, matrix: sparse.csr_array) -> NDArray[np.float64]:
        """Return the exact noise variance of each query's consistent answer.

        ``sum_l sigma_l**2 * sum(w_l**2)`` over the weights of :meth:`query_weights`,
        in chunks of :data:`QUERY_CHUNK` queries (a query's weights fill the whole
        trees it touches, so memory is bounded by chunking).
        """
        total = np.zeros(matrix.shape[0])
        rows = sparse.csr_array(matrix)
        for start in range(0, rows.shape[0], QUERY_CHUNK):
            stop = min(rows.shape[0], start + QUERY_CHUNK)
            for var, w in zip(self.variances, self.query_weights(rows[start:stop]),
                              strict=True):
                total[start:stop] += var * np.asarray(w.multiply(w).sum(axis=0)).ravel()
        return total

    def cover(self, matrix: sparse.csr_array) -> list[sparse.csr_array]:
        """Return the cheapest node set of each query: per level, which nodes answer it.

        A node replaces its children when all of them are in the query, level by
        level upwards; the result is the fewest nodes whose fine descendants are
        exactly the query's cells (nodes nest, so the maximal full nodes are it).
        """
        n_lev = self.levels
        chosen: list[sparse.csr_array] = [sparse.csr_array((0, 0))] * n_lev
        current = sparse.csr_array(matrix, dtype=np.float64)
        for lev in range(n_lev - 2, -1, -1):
            children = np.asarray(self.up[lev].sum(axis=1)).ravel()
            covered = sparse.csr_array(current @ self.up[lev].T)  # children in the query
            covered.sum_duplicates()
            full = covered.copy()
            full.data = (np.rint(covered.data) == children[covered.indices]).astype(np.float64)
            full.eliminate_zeros()
            chosen[lev + 1] = sparse.csr_array(current - full @ self.up[lev])
            chosen[lev + 1].eliminate_zeros()
            current = full
        chosen[0] = current
        return chosen

    def answer_from_cover(self, matrix: sparse.csr_array) -> NDArray[np.float64]:
        """Answer each query from its cheapest node set (equal to the sum of its leaves)."""
        if self.estimates is None:
            raise fail("tree", self, "holds no estimates", "release the grid first")
        parts = self.cover(matrix)
        return np.asarray(sum(parts[lev] @ self.estimates[lev] for lev in range(self.levels)),
                          dtype=np.float64)

    def cover_size(self, matrix: sparse.csr_array) -> NDArray[np.int64]:
        """Return how many nodes each query's cheapest cover holds."""
        return np.asarray(sum(np.diff(p.indptr) for p in self.cover(matrix)), dtype=np.int64)


@dataclass(frozen=True, eq=False)
class NoisyGrid(Result):
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


    def summary(self) -> str:
        """Return one line: the release's method, cells, epsilon and partition."""
        return (f"{self.method} noisy grid: {self.n_cells} cells at resolution "
                f"{self.resolution}, epsilon {self.epsilon:g} ({self.neighbours}), partition "
                f"{self.partition_version}{self.accounting_note}")

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
                f"sensitivity={self.sensitivity} ({self.neighbours}), "
                f"levels={list(self.resolutions)}, "
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
