"""Re-noising per query: a fresh noisy answer per polygon, with its own ledger charge.

The default is to answer every polygon from one materialised grid (free after
the grid's release, and consistent). A caller who needs answers independent of
the grid can re-noise the query answers themselves: that is a NEW release,
charged to the ledger on its own. One device counts in at most ``k`` cells and
each cell lies in at most ``c`` of the queries (``c`` is the largest column
count of the incidence), so the L1 sensitivity of the answer vector is at most
``k c``; the noise is discrete Laplace of scale ``k c / epsilon``. Overlapping
queries therefore cost more noise, and answers are not consistent with each
other or with the grid.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy import sparse

from spatialdp._validation import check_alpha, check_epsilon, check_instance
from spatialdp.exceptions import InvalidInput
from spatialdp.geo import CellIncidence
from spatialdp.privacy import LaplaceMechanism
from spatialdp.privacy.accuracy import half_width
from spatialdp.privacy.budget import Neighbours, Overlapping, check_neighbours
from spatialdp.privacy.pipeline import ReleasePlan, run_release
from spatialdp.privacy.target import Accounting, check_target
from spatialdp.queries.flat import DEFAULT_LINE_ITEM, neighbour_sensitivity
from spatialdp.queries.grids import NOISE_KIND, check_incidence
from spatialdp.queries.truth import TruthGrid

__all__ = ["answer_fresh"]


def answer_fresh(truth: TruthGrid, queries: CellIncidence, *, epsilon: float,
                 target: Accounting, alpha: float = 0.05,
                 neighbours: Neighbours = "add_remove") -> pd.DataFrame:
    """Answer each query with fresh noise: a separate release with its own ledger charge.

    Parameters
    ----------
    truth : TruthGrid
    queries : CellIncidence
        Converted on the truth's partition.
    epsilon : float
        Privacy loss of this release (all queries together).
    target : ReleaseTarget, Simulation or Unaccounted
    alpha : float, default 0.05
    neighbours : {"add_remove", "replace"}, default "add_remove"
        One device added or removed, or one device's cells replaced (twice the
        sensitivity).

    Returns
    -------
    pandas.DataFrame
        ``answer``, ``error_bar`` (exact half-width of one discrete Laplace draw),
        ``cells``; ``attrs`` records the sensitivity ``k c`` and the accounting.

    Raises
    ------
    InvalidInput
        Bad epsilon, alpha or target; queries covering no cell (nothing charged).
    PartitionMismatch
        Queries of another partition version.

    Examples
    --------
    >>> from spatialdp.privacy import Simulation
    >>> from spatialdp.queries import truth_grid
    >>> from spatialdp.queries.corpus import incidence_from_cell_lists
    >>> from spatialdp.geo import h3cells
    >>> cells = h3cells.parse_cells(["85283473fffffff", "85283477fffffff"])
    >>> truth = truth_grid(cells, lon=[-121.9764], lat=[37.3458], device_ids=[1])
    >>> inc = incidence_from_cell_lists(cells, truth.partition_version,
    ...                                 np.array([0, 2, 3]), cells[[0, 1, 0]])
    >>> out = answer_fresh(truth, inc, epsilon=1.0, target=Simulation(rng=0))
    >>> out.attrs["sensitivity"]  # cell 0 is in both queries
    2
    """
    truth = check_instance(truth, "truth", TruthGrid, "build it with truth_grid(...)")
    check_incidence(truth, queries)
    eps = check_epsilon(epsilon)
    level = check_alpha(alpha)
    accounting = check_target(target)
    m = queries.cells_per_query
    if (m == 0).any():
        raise InvalidInput(f"{int((m == 0).sum())} queries cover no cell of the grid; drop "
                           "them before answering")
    relation = check_neighbours(neighbours)
    per_cell = np.diff(sparse.csc_array(queries.matrix).indptr)
    sensitivity = int(neighbour_sensitivity(truth, relation) * per_cell.max())
    mechanism = LaplaceMechanism(eps, float(sensitivity), discrete=True)
    bar = float(half_width(NOISE_KIND, mechanism.scale, 1, level))
    true = np.asarray(queries.matrix @ truth.counts, dtype=np.int64)
    n_queries = int(m.size)

    def finish(noisy: list[NDArray[np.int64]]) -> pd.DataFrame:
        out = pd.DataFrame({"answer": noisy[0], "error_bar": bar, "cells": m})
        out.attrs.update(accounting.metadata())
        out.attrs.update(sensitivity=sensitivity, epsilon=eps, alpha=level,
                         neighbours=relation)
        return out

    (answers,) = run_release(
        [ReleasePlan(eps, [(mechanism, true)], finish)], target=accounting,
        structure=Overlapping(truth.partition_key, n_queries, min(sensitivity, n_queries),
                              calibrated=True),
        default_line_item=DEFAULT_LINE_ITEM, neighbours=relation,
        what=f"fresh answers to {n_queries} polygon queries of {truth.partition_key} "
             f"(sensitivity {sensitivity})")
    return answers
