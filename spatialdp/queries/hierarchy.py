"""The hierarchical release: noisy counts at several H3 resolutions, made consistent.

Counts at coarser resolutions are sums of fine cells along the H3 parent
relation (never re-binned points: H3 children do not tile their parent). The
tree is therefore the parent relation of the fine cells present in the grid:
a parent has 7 children (6 for the 12 pentagons) or fewer at the grid's edge.

Each level is a disjoint release at its own epsilon ``epsilon_l`` (the
levels compose sequentially: ``sum(epsilon_l) = epsilon``), with discrete
Laplace noise of scale ``k / epsilon_l``. Least-squares consistency (Hay et
al. 2010, generalised to any fan-out and per-level variances) then gives the
best linear unbiased estimate of every node, with every parent equal to the
sum of its children, in two vectorised passes:

* up: ``z = y`` at the leaves; for a parent, ``s`` = sum of its children's
  ``z`` (variance ``V_s`` = sum of theirs), ``z = alpha y + (1 - alpha) s`` with
  ``alpha = (1/sigma_l**2) / (1/sigma_l**2 + 1/V_s)``, ``V = 1 / (1/sigma_l**2 + 1/V_s)``;
* down: ``x = z`` at the roots; for a child ``c`` of ``v``,
  ``x_c = z_c + (V_c / V_s(v)) (x_v - s_v)``.

Both passes are linear with coefficients from public parameters only, so the
variance of any query's answer is computed exactly without the data (the
adjoint passes, :meth:`Tree.query_variance`), and the library can say before
answering whether the flat or the hierarchical release answers it better.

Default budget split ("geometric"): finer levels get ``7**(1/6)`` times the
epsilon of the level above. A polygon's cover holds about ``sqrt(7)`` times
more boundary nodes per finer level; minimising ``sum n_l / epsilon_l**2``
under ``sum epsilon_l = epsilon`` gives ``epsilon_l`` proportional to
``n_l**(1/3)`` (Cormode et al. 2012 derive ``2**(1/3)`` for quadtrees the same way).

Cost: the tree has at most ``n (1 + 1/7 + 1/49 + ...) < 1.17 n`` nodes; the
release and the consistency are O(nodes) per level, O(L n) in all.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from spatialdp._validation import (
    check_choice,
    check_epsilon,
    check_finite_array,
    check_instance,
    check_integer,
    fail,
)
from spatialdp.exceptions import InvalidInput
from spatialdp.privacy import LaplaceMechanism
from spatialdp.privacy.accuracy import noise_std
from spatialdp.privacy.budget import Neighbours, check_neighbours
from spatialdp.privacy.pipeline import ReleasePlan, exact_total, run_release
from spatialdp.privacy.target import Accounting, check_target
from spatialdp.queries.flat import DEFAULT_LINE_ITEM, grid_structure, neighbour_sensitivity
from spatialdp.queries.grids import NOISE_KIND, NoisyGrid, Tree
from spatialdp.queries.sampling import discrete_laplace_draws
from spatialdp.queries.truth import TruthGrid

__all__ = ["HierarchyModel", "check_levels", "level_epsilons", "release_hierarchical"]

#: Ratio of a level's epsilon to the next coarser level's in the default split.
GEOMETRIC_RATIO = 7.0 ** (1.0 / 6.0)

#: Most levels a split can have: H3 has 16 resolutions (0 to 15).
MAX_LEVELS = 16


def level_epsilons(epsilon: float, levels: int, split: Any = "geometric") -> tuple[float, ...]:
    """Return the epsilon of each level, coarsest first, summing to at most ``epsilon``.

    Parameters
    ----------
    epsilon : float
    levels : int
        1 to :data:`MAX_LEVELS` (16, the H3 resolutions).
    split : {"geometric", "uniform"} or sequence of positive weights (coarsest first)

    Raises
    ------
    InvalidInput
        Bad epsilon or levels; a split that is neither a named split nor one
        positive finite weight per level; an epsilon too small for every level
        to get a normal float (release_hierarchical, flat_or_hierarchical and
        measure_query_error inherit these refusals, before anything is charged).

    Examples
    --------
    >>> [round(e, 3) for e in level_epsilons(1.0, 3, "uniform")]
    [0.333, 0.333, 0.333]
    >>> sum(level_epsilons(1.0, 4)) <= 1.0
    True
    """
    eps = check_epsilon(epsilon)
    n_levels = check_integer(levels, "levels", low=1, high=MAX_LEVELS,
                             fix=f"pass a whole number of levels from 1 to {MAX_LEVELS}")
    if isinstance(split, (str, bytes)):
        kind = check_choice(split, "split", ("geometric", "uniform"))
        weights = (GEOMETRIC_RATIO ** np.arange(n_levels, dtype=np.float64)
                   if kind == "geometric" else np.ones(n_levels))
    else:
        try:
            weights = check_finite_array(split, "split")
        except InvalidInput:
            raise fail("split", split, f"is not {n_levels} positive finite weights",
                       "give one weight per level, coarsest first, or 'geometric'") from None
        if weights.size != n_levels or (weights <= 0).any():
            raise fail("split", split, f"is not {n_levels} positive finite weights",
                       "give one weight per level, coarsest first, or 'geometric'")
    weights = weights / weights.max()  # the sum cannot overflow
    shares = weights / weights.sum()
    if eps * float(shares.min()) < sys.float_info.min:
        raise fail("epsilon", epsilon,
                   f"is too small to split over {n_levels} levels (a level would get less than "
                   f"{sys.float_info.min:g})",
                   "pass a larger epsilon, fewer levels or less uneven split weights")
    out = [math.nextafter(eps * float(s), 0.0) for s in shares]  # never above eps in total
    while math.fsum(out) > eps:
        out = [math.nextafter(e, 0.0) for e in out]
    return tuple(out)


def _resolutions(fine: int, levels: Any) -> tuple[int, ...]:
    n = check_integer(levels, "levels", low=1, high=fine + 1,
                      fix=f"pass 1 to {fine + 1} levels (the grid is at resolution {fine})")
    return tuple(range(fine - n + 1, fine + 1))


def check_levels(resolution: int, epsilon: float, *, levels: int = 4,
                 split: Any = "geometric") -> tuple[tuple[int, ...], tuple[float, ...]]:
    """Return the levels' resolutions and epsilons of a hierarchy over a grid at ``resolution``.

    Parameters
    ----------
    resolution : int
        The grid's (finest) H3 resolution.
    epsilon, levels, split
        As in :func:`release_hierarchical`.

    Raises
    ------
    InvalidInput
        More levels than resolutions from 0 to ``resolution``, and the
        refusals of :func:`level_epsilons`.

    Examples
    --------
    >>> resolutions, epsilons = check_levels(7, 1.0, levels=2, split="uniform")
    >>> resolutions, [round(e, 6) for e in epsilons]
    ((6, 7), [0.5, 0.5])
    """
    resolutions = _resolutions(resolution, levels)
    return resolutions, level_epsilons(epsilon, len(resolutions), split)


@dataclass(eq=False)
class HierarchyModel:
    """The public side of a hierarchical release: tree, levels, epsilons and scales."""

    tree: Tree
    epsilons: tuple[float, ...]
    scales: tuple[float, ...]
    sensitivity: int

    @classmethod
    def build(cls, truth: TruthGrid | NoisyGrid, epsilon: float, *, levels: int = 4,
              split: Any = "geometric", sensitivity: int | None = None) -> HierarchyModel:
        """Build the tree and per-level noise of a grid's cells (no counts used).

        ``truth`` is any grid with ``cells``, ``resolution`` and ``sensitivity``:
        the truth, or a released grid measured against as a plug-in truth.
        ``sensitivity`` overrides the grid's (``2 k`` for replace-one neighbours).
        """
        resolutions, eps_l = check_levels(truth.resolution, epsilon, levels=levels, split=split)
        k = int(truth.sensitivity if sensitivity is None else sensitivity)
        mechs = [LaplaceMechanism(e, float(k), discrete=True) for e in eps_l]
        scales = tuple(m.scale for m in mechs)
        variances = tuple(float(noise_std(NOISE_KIND, b)) ** 2 for b in scales)
        return cls(Tree.build(truth.cells, resolutions, variances), eps_l, scales, k)

    def query_variance(self, matrix: sparse.csr_array) -> NDArray[np.float64]:
        """Exact variance of each query's hierarchical answer."""
        return self.tree.query_variance(matrix)

    def level_counts(self, counts: NDArray[np.int64]) -> list[NDArray[np.int64]]:
        """Roll the fine counts up every level (along the parent relation)."""
        out = [counts]
        for lev in range(self.tree.levels - 2, -1, -1):
            out.insert(0, np.asarray(self.tree.up[lev] @ out[0]).astype(np.int64))
        return out

    def simulate_errors(self, matrix: sparse.csr_array, draws: int, *, clamp_negative: bool,
                        gen: np.random.Generator, truth: NDArray[np.int64] | None = None
                        ) -> NDArray[np.float64]:
        """Return simulated answer errors ``(n_queries, draws)`` (consistent leaves, summed)."""
        n_leaf = self.tree.nodes[-1].size
        step = max(1, 2_000_000 // max(self.tree.n_nodes, 1))
        out = np.empty((matrix.shape[0], draws))
        for start in range(0, draws, step):
            k = min(draws, start + step) - start
            noise = [discrete_laplace_draws(gen, b, (n.size, k)).astype(np.float64)
                     for b, n in zip(self.scales, self.tree.nodes, strict=True)]
            err = self.tree.consistent(noise)[-1]
            if clamp_negative:
                if truth is None:
                    raise fail("truth", None, "is needed to clamp", "pass the truth counts")
                t = truth.astype(np.float64)[:, None]
                err = np.maximum(err, -t)
            out[:, start:start + k] = matrix @ err
            del err
        assert n_leaf == matrix.shape[1]
        return out


def release_hierarchical(truth: TruthGrid, *, epsilon: float, target: Accounting, levels: int = 4,
                         split: Any = "geometric",
                         neighbours: Neighbours = "add_remove") -> NoisyGrid:
    """Release counts at ``levels`` H3 resolutions with per-level noise, made consistent.

    Parameters
    ----------
    truth : TruthGrid
    epsilon : float
        Total privacy loss, split over the levels (they compose sequentially).
    target : ReleaseTarget, Simulation or Unaccounted
        Charged once, with the total epsilon, before any noise is drawn.
    levels : int, default 4
        The grid's resolution and the ``levels - 1`` coarser ones.
    split : {"geometric", "uniform"} or sequence of weights, default "geometric"
        How epsilon is divided over the levels, coarsest first.
    neighbours : {"add_remove", "replace"}, default "add_remove"
        One device added or removed (sensitivity ``k`` per level), or one
        device's cells replaced (``2 k``).

    Returns
    -------
    NoisyGrid
        ``method="hierarchical"``; ``values`` are the consistent fine-cell
        estimates (floats), ``tree`` holds every level's.

    Raises
    ------
    InvalidInput
        Bad epsilon, levels, split or target (nothing charged).
    BudgetExceeded
        Not enough budget left (nothing charged or drawn).

    Examples
    --------
    >>> from spatialdp.privacy import Simulation
    >>> from spatialdp.geo import h3cells
    >>> from spatialdp.queries import truth_grid
    >>> cells = h3cells.grid_disk_lists(["85283473fffffff"], 2)[1]
    >>> truth = truth_grid(cells, lon=[-121.9764], lat=[37.3458], device_ids=[1])
    >>> grid = release_hierarchical(truth, epsilon=1.0, levels=2, target=Simulation(rng=0))
    >>> grid.resolutions, bool(abs(grid.tree.estimates[0].sum() - grid.values.sum()) < 1e-6)
    ((4, 5), True)
    """
    truth = check_instance(truth, "truth", TruthGrid, "build it with truth_grid(...)")
    eps = check_epsilon(epsilon)
    accounting = check_target(target)
    relation = check_neighbours(neighbours)
    model = HierarchyModel.build(truth, eps, levels=levels, split=split,
                                 sensitivity=neighbour_sensitivity(truth, relation))
    tree = model.tree
    mechs = [LaplaceMechanism(e, float(model.sensitivity), discrete=True)
             for e in model.epsilons]
    counts = model.level_counts(truth.counts)
    structure = grid_structure(truth, tree.n_nodes, levels=tree.levels)
    total = exact_total(model.epsilons)

    def finish(noisy: list[NDArray[np.int64]]) -> NoisyGrid:
        tree.estimates = tree.consistent(noisy)
        return NoisyGrid(values=tree.estimates[-1], cells=truth.cells,
                         resolution=truth.resolution, partition_version=truth.partition_version,
                         partition_key=truth.partition_key, method="hierarchical",
                         epsilon=total, sensitivity=model.sensitivity, scales=model.scales,
                         level_epsilons=model.epsilons, resolutions=tree.resolutions,
                         accounting=accounting.metadata(), tree=tree, neighbours=relation)

    (grid,) = run_release(
        [ReleasePlan(total, list(zip(mechs, counts, strict=True)), finish)],
        target=accounting, structure=structure, default_line_item=DEFAULT_LINE_ITEM,
        neighbours=relation,
        what=f"hierarchical count grid {truth.partition_key} (resolutions "
             f"{list(tree.resolutions)}, {tree.n_nodes} nodes, k={truth.sensitivity})")
    return grid
