"""Merge report regions suppressed for k consecutive rounds with a neighbour.

A regional report suppresses regions whose cohort is below the publication
floor. A region suppressed round after round is a permanent hole in the map;
merging it with a neighbour (the same merge engine as small strata, on the
report Partition's adjacency) lets the merged region be published, with its
members listed. The result is a new, versioned Partition: reports on it start
a new comparison baseline.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from spatialdp._validation import check_count, check_instance, fail
from spatialdp.geo.partition import Partition
from spatialdp.sampling.merges import merge_small_groups

__all__ = ["merge_suppressed_regions"]


def _positions(partition: Partition, ids: Collection[Any], what: str) -> np.ndarray:
    index = pd.Index([str(x) for x in partition.region_ids])
    values = [str(x) for x in ids]
    found = index.get_indexer(pd.Index(values))
    if (found < 0).any():
        bad = [v for v, f in zip(values, found, strict=True) if f < 0]
        raise fail(what, bad[:5], f"names regions that are not in {partition.key}",
                   "pass region ids of the report partition")
    return np.asarray(found, dtype=np.int64)


def merge_suppressed_regions(
    partition: Partition,
    suppressed_history: Sequence[Collection[Any]],
    k: int,
    *,
    counts: Mapping[Any, int] | None = None,
) -> tuple[Partition, pd.DataFrame]:
    """Merge every region suppressed in each of the last ``k`` rounds with a neighbour.

    Parameters
    ----------
    partition : Partition
        The report partition.
    suppressed_history : sequence of collections of region ids
        The suppressed regions of each round, oldest first.
    k : int
        Consecutive rounds of suppression that trigger a merge (>= 1).
    counts : mapping, optional
        Latest cohort per region; a suppressed region then joins the adjacent
        region with the smallest cohort (default: the first adjacent one).

    Returns
    -------
    merged : Partition
        One region per merged group, id = member ids joined by ``+`` (the partition
        itself, unchanged, when nothing is merged).
    membership : pandas.DataFrame
        One row per original region: ``merged_id``, ``region_id``, ``merged``,
        ``reason`` (empty when not merged).

    Raises
    ------
    InvalidInput
        Region ids not in the partition, ``k`` < 1, or a bad history.

    Examples
    --------
    >>> from spatialdp.datasets import us_states_partition
    >>> states = us_states_partition()
    >>> merged, members = merge_suppressed_regions(states, [{"VT"}, {"VT", "RI"}, {"VT"}], 2)
    >>> merged.n_regions, members.loc[members.region_id == "VT", "merged_id"].item()
    (47, 'MA+VT')
    """
    check_instance(partition, "partition", Partition, "pass the report Partition")
    k = check_count(k, "k", low=1)
    if isinstance(suppressed_history, (str, bytes)) or not isinstance(suppressed_history,
                                                                      Sequence):
        raise fail("suppressed_history", suppressed_history, "is not a sequence of rounds",
                   "pass a list with the suppressed region ids of each round, oldest first")
    n = partition.n_regions
    streak = np.zeros(n, dtype=np.int64)
    for round_ids in suppressed_history:
        if isinstance(round_ids, (str, bytes)) or not isinstance(round_ids, Collection):
            raise fail("suppressed_history", round_ids, "has a round that is not a collection "
                       "of region ids", "pass e.g. [{'VT'}, {'VT', 'RI'}]")
        hit = np.zeros(n, dtype=bool)
        hit[_positions(partition, round_ids, "suppressed_history")] = True
        streak = np.where(hit, streak + 1, 0)
    persistent = streak >= k
    sizes = np.ones(n, dtype=np.int64)
    if counts is not None:
        if not isinstance(counts, Mapping):
            raise fail("counts", counts, f"is a {type(counts).__name__}, not a mapping",
                       "pass {region_id: latest cohort}")
        pos = _positions(partition, list(counts), "counts")
        sizes[pos] = [check_count(v, "counts value") + 1 for v in counts.values()]
    sizes[persistent] = 0
    ids = pd.Index([str(x) for x in partition.region_ids])
    labels, merges = merge_small_groups(
        partition.adjacency(), sizes, 1, ids, what=f"suppressed for {k}+ rounds; size",
        centroids=None)
    reason = dict.fromkeys(ids, "")
    for m in merges:
        text = (f"suppressed in each of the last {k} rounds; merged with a neighbour "
                f"({'+'.join(m.into)}) so that the merged region can be published")
        for member in m.members:
            reason[member] = reason[member] or text
    reps = np.unique(labels)
    names = {int(r): "+".join(ids[labels == r]) for r in reps}
    membership = pd.DataFrame({
        "merged_id": [names[int(label)] for label in labels], "region_id": list(ids),
        "merged": [len(np.flatnonzero(labels == label)) > 1 for label in labels],
        "reason": [reason[i] for i in ids], "rounds_suppressed": streak})
    if reps.size == n:
        return partition, membership
    geoms = np.asarray(partition.regions.geometry.values)
    shapes = [shapely.union_all(geoms[labels == r], grid_size=1e-9) if (labels == r).sum() > 1
              else geoms[labels == r][0] for r in reps]
    frame = gpd.GeoDataFrame({"region_id": [names[int(r)] for r in reps]}, geometry=shapes,
                             crs=4326)
    merged = Partition.from_geodataframe(frame, "region_id", name=f"{partition.name}:merged")
    return merged, membership
