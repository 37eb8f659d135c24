"""Merging small regions with a spatial neighbour, every merge recorded with its reason.

One engine serves both uses: strata whose eligible pool falls below
``min_stratum_cohort`` (sampling and reporting), and report regions suppressed
for k consecutive rounds (:mod:`spatialdp.sampling.regional`). Regions are
merged into *groups*; a group is small while its size is below the floor. The
smallest small group merges first, with the adjacent group (Partition
adjacency, shared borders) of the smallest size, so merged groups stay as fine
as the floor allows. A group with no neighbour (an island) merges with the
group whose centroid is nearest, and the record says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy import sparse

from spatialdp._validation import check_count, fail

__all__ = ["Merge", "merge_small_groups", "merges_frame"]


@dataclass(frozen=True)
class Merge:
    """One merge: a small group joined to a neighbour.

    Attributes
    ----------
    members : tuple of str
        The regions of the small group.
    into : tuple of str
        The regions of the group it joined.
    reason : str
        Why (the size against the floor, and how the neighbour was chosen).
    round_index : int or None
        The round in which the merge was made (``None`` for plans made up front).
    """

    members: tuple[str, ...]
    into: tuple[str, ...]
    reason: str
    round_index: int | None = None

    def to_dict(self) -> dict[str, object]:
        """Return the merge as plain JSON-ready values."""
        return {"members": list(self.members), "into": list(self.into), "reason": self.reason,
                "round_index": self.round_index}


def merges_frame(merges: list[Merge]) -> pd.DataFrame:
    """Return merges as a table (one row per merge)."""
    return pd.DataFrame([{**m.to_dict(), "members": "+".join(m.members),
                          "into": "+".join(m.into)} for m in merges],
                        columns=["members", "into", "reason", "round_index"])


def merge_small_groups(
    adjacency: sparse.csr_array | sparse.csr_matrix,
    sizes: NDArray[np.int64],
    floor: int,
    region_ids: pd.Index,
    *,
    groups: NDArray[np.int64] | None = None,
    centroids: NDArray[np.float64] | None = None,
    what: str = "eligible pool",
    round_index: int | None = None,
) -> tuple[NDArray[np.int64], list[Merge]]:
    """Merge groups of regions until every group's size is at least ``floor``.

    Parameters
    ----------
    adjacency : sparse (n, n)
        Region adjacency (symmetric, no self loops).
    sizes : array of int, shape (n,)
        Size of each region (eligible clients, cohort...).
    floor : int
        Smallest acceptable group size.
    region_ids : pandas.Index
        Region ids in position order (for the records).
    groups : array of int, optional
        Existing group label per region (merges already made are kept); default
        one group per region.
    centroids : array (n, 2), optional
        Region centroids, for islands; without them an island stays small and is
        reported by the caller.
    what : str
        What ``sizes`` counts, for the reasons.
    round_index : int, optional
        Written into the records.

    Returns
    -------
    labels : array of int, shape (n,)
        The group of each region: the smallest region position in the group.
    merges : list of Merge
        The merges made by this call, in order.

    Examples
    --------
    >>> from scipy import sparse
    >>> adj = sparse.csr_array(np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=bool))
    >>> labels, merges = merge_small_groups(adj, np.array([50, 40, 3]), 5,
    ...                                     pd.Index(["a", "b", "c"]))
    >>> labels.tolist(), merges[0].members, merges[0].into
    ([0, 1, 1], ('c',), ('b',))
    """
    sizes = np.asarray(sizes)
    n = sizes.size
    if sizes.ndim != 1 or sizes.dtype.kind not in "iuf" or (sizes < 0).any():
        raise fail("sizes", sizes, "are not non-negative sizes, one per region",
                   "pass an array of counts")
    if not sparse.issparse(adjacency) or adjacency.shape != (n, n) or len(region_ids) != n:
        raise fail("adjacency", adjacency, f"is not a sparse ({n}, {n}) matrix matching "
                   "sizes and region_ids", "pass Partition.adjacency()")
    floor = check_count(floor, "floor")
    if groups is not None and (np.shape(groups) != (n,)
                               or np.asarray(groups).dtype.kind not in "iu"):
        raise fail("groups", groups, "is not one integer label per region",
                   "pass the labels a previous call returned")
    labels = np.arange(n, dtype=np.int64) if groups is None else groups.astype(np.int64).copy()
    adj = sparse.csr_array(adjacency, dtype=np.int64)
    ids = np.asarray(region_ids, dtype=object)
    merges: list[Merge] = []
    while True:
        reps, inverse = np.unique(labels, return_inverse=True)
        group_size = np.bincount(inverse, weights=sizes, minlength=reps.size)
        small = np.flatnonzero(group_size < floor)
        if small.size == 0 or reps.size == 1:
            break
        member = sparse.csr_array((np.ones(n, dtype=np.int64), (np.arange(n), inverse)),
                                  shape=(n, reps.size))
        group_adj = (member.T @ adj @ member).tocsr()
        order = small[np.lexsort((small, group_size[small]))]
        done = False
        for g in order:
            row = group_adj.indices[group_adj.indptr[g]:group_adj.indptr[g + 1]]
            row = row[row != g]
            how = "adjacent group with the smallest " + what
            if row.size == 0:
                if centroids is None:
                    continue
                own = np.flatnonzero(inverse == g)
                centre = centroids[own].mean(axis=0)
                others = np.flatnonzero(inverse != g)
                nearest = others[np.argmin(((centroids[others] - centre) ** 2).sum(axis=1))]
                row = np.array([inverse[nearest]])
                how = "no adjacent region; nearest group by centroid"
            partner = int(row[np.lexsort((row, group_size[row]))][0])
            small_members = tuple(str(x) for x in ids[inverse == g])
            into = tuple(str(x) for x in ids[inverse == partner])
            reason = (f"{what} {int(group_size[g])} below the floor {floor}; merged with the "
                      f"{how} ({int(group_size[partner])})")
            merges.append(Merge(small_members, into, reason, round_index))
            both = (inverse == g) | (inverse == partner)
            labels[both] = int(np.flatnonzero(both)[0])
            done = True
            break
        if not done:  # only islands without centroids are left small
            break
    canonical = np.empty(n, dtype=np.int64)
    for rep in np.unique(labels):
        members = np.flatnonzero(labels == rep)
        canonical[members] = members[0]
    return canonical, merges
