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

import heapq
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy import sparse

from spatialdp._validation import check_count, check_finite_array, check_text, fail
from spatialdp.sampling.allocation import MAX_CLIENTS

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


def _array(values: object) -> NDArray[np.object_]:
    """``values`` as an object array (a 0-d one when it is not a sequence)."""
    if isinstance(values, (str, bytes)):
        return np.empty((), dtype=object)
    try:
        return np.asarray(values, dtype=object)
    except (TypeError, ValueError):
        return np.empty((), dtype=object)


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
    sizes = check_finite_array(sizes, "sizes", allow_empty=True)
    n = sizes.size
    if (sizes < 0).any() or (sizes > MAX_CLIENTS).any():
        raise fail("sizes", sizes, f"are not sizes in [0, {MAX_CLIENTS:.0e}], one per region",
                   "pass an array of counts")
    ids = _array(region_ids)
    if not sparse.issparse(adjacency) or adjacency.shape != (n, n) or ids.shape != (n,):
        raise fail("adjacency", adjacency, f"is not a sparse ({n}, {n}) matrix matching "
                   "sizes and region_ids (one id per region)", "pass Partition.adjacency()")
    floor = check_count(floor, "floor")
    what = check_text(what, "what")
    if round_index is not None:
        round_index = check_count(round_index, "round_index")
    if groups is not None and (_array(groups).shape != (n,)
                               or np.asarray(groups).dtype.kind not in "iu"):
        raise fail("groups", groups, "is not one integer label per region",
                   "pass the labels a previous call returned")
    if centroids is not None:
        centroids = check_finite_array(centroids, "centroids", ndim=(2,), allow_empty=True)
        if centroids.shape != (n, 2):
            raise fail("centroids", centroids, f"has shape {centroids.shape}",
                       f"pass one (lon, lat) row per region, shape ({n}, 2)")
    raw = np.arange(n, dtype=np.int64) if groups is None else np.asarray(groups, np.int64)
    # Canonical labels: each group is named by its smallest region position.
    _, first, inverse = np.unique(raw, return_index=True, return_inverse=True)
    labels = first[inverse].astype(np.int64)
    members: dict[int, list[int]] = {}
    for position, label in enumerate(labels.tolist()):
        members.setdefault(label, []).append(position)
    size = {g: float(sizes[m].sum()) for g, m in members.items()}
    # Group adjacency as sets, updated per merge (a loop over merges, not clients).
    adj = sparse.csr_array(adjacency)
    rows = np.repeat(np.arange(n), np.diff(adj.indptr))
    left, right = labels[rows], labels[adj.indices]
    pairs = np.unique(np.column_stack([left, right])[left != right], axis=0)
    neighbours: dict[int, set[int]] = {g: set() for g in members}
    for a, b in pairs.tolist():
        neighbours[a].add(b)
    heap = [(size[g], g) for g in members if size[g] < floor]
    heapq.heapify(heap)
    merges: list[Merge] = []
    while heap and len(size) > 1:
        small, g = heapq.heappop(heap)
        if size.get(g) != small:
            continue  # stale: the group was merged since
        how = "adjacent group with the smallest " + what
        candidates = neighbours[g]
        if not candidates:
            if centroids is None:
                continue  # an island stays small; the caller reports it
            centre = centroids[members[g]].mean(axis=0)
            others = np.flatnonzero(labels != g)
            nearest = others[np.argmin(((centroids[others] - centre) ** 2).sum(axis=1))]
            candidates = {int(labels[nearest])}
            how = "no adjacent region; nearest group by centroid"
        partner = min(candidates, key=lambda h: (size[h], h))
        merges.append(Merge(
            tuple(str(x) for x in ids[members[g]]), tuple(str(x) for x in ids[members[partner]]),
            f"{what} {int(size[g])} below the floor {floor}; merged with the {how} "
            f"({int(size[partner])})", round_index))
        keep, drop = min(g, partner), max(g, partner)
        members[keep] = sorted(members[g] + members[partner])
        size[keep] = size[g] + size[partner]
        joined = (neighbours[g] | neighbours[partner]) - {g, partner}
        for h in joined:
            neighbours[h] -= {g, partner}
            neighbours[h].add(keep)
        neighbours[keep] = joined
        del members[drop], size[drop], neighbours[drop]
        labels[members[keep]] = keep
        if size[keep] < floor:
            heapq.heappush(heap, (size[keep], keep))
    return labels, merges
