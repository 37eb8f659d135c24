"""The vectorised capped draw: uniform samples without replacement in every group at once.

Clients are held sorted by group (``order``, with ``offsets`` delimiting each
group's slice), with a participation count per client. For every group that
wants ``take`` of its ``eligible`` clients, the draw proposes positions uniformly
in the group's slice, all groups in one array, keeps those whose client is still
under the cap, drops repeats (keeping the first), and takes the first ``take``
of each group. The first ``take`` distinct eligible clients of an i.i.d. uniform
stream are a uniform sample without replacement; groups whose proposals fall
short (rare; or groups that want more than half their eligible pool) are drawn
exactly from their eligible list. No Python loop runs over clients.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

__all__ = ["draw_capped"]

#: Proposals per wanted client, over the inverse eligible fraction (and a constant).
_OVERSAMPLE = 1.6
_EXTRA = 6


def _exact(order: NDArray[np.int64], start: int, stop: int, used: NDArray[np.uint16],
           cap: int, take: int, rng: np.random.Generator) -> NDArray[np.int64]:
    members = order[start:stop]
    eligible = members[used[members] < cap]
    picked: NDArray[np.int64] = rng.choice(eligible, size=take, replace=False, shuffle=False)
    return picked


def draw_capped(order: NDArray[np.int64], offsets: NDArray[np.int64], used: NDArray[np.uint16],
                cap: int, take: NDArray[np.int64], eligible: NDArray[np.int64],
                rng: np.random.Generator) -> NDArray[np.int64]:
    """Return ``take[g]`` clients of each group ``g``, uniformly among those under ``cap``.

    Parameters
    ----------
    order : array of int64
        Client indices sorted by group.
    offsets : array of int64, shape (groups + 1,)
        Group ``g`` is ``order[offsets[g]:offsets[g + 1]]``.
    used : array of uint16
        Participations so far, per client index (not modified here).
    cap : int
    take : array of int64
        Clients to draw per group; at most ``eligible``.
    eligible : array of int64
        Clients under the cap per group.
    rng : numpy.random.Generator

    Returns
    -------
    numpy.ndarray of int64
        Client indices, no repeats (the proposal-drawn groups first, then the
        exactly drawn ones).

    Examples
    --------
    >>> order = np.arange(10); offsets = np.array([0, 6, 10])
    >>> used = np.zeros(10, dtype=np.uint16)
    >>> out = draw_capped(order, offsets, used, 1, np.array([2, 4]), np.array([6, 4]),
    ...                   np.random.default_rng(0))
    >>> sorted(out[2:].tolist())
    [6, 7, 8, 9]
    """
    size = np.diff(offsets)
    fast = np.flatnonzero((take > 0) & (2 * take <= eligible))
    slow = np.flatnonzero((take > 0) & (2 * take > eligible))
    parts: list[NDArray[np.int64]] = []
    if fast.size:
        inverse_fraction = size[fast] / eligible[fast]
        proposals = np.ceil(_OVERSAMPLE * take[fast] * inverse_fraction).astype(np.int64) + _EXTRA
        group = np.repeat(np.arange(fast.size), proposals)
        position = offsets[fast][group] + (rng.random(group.size) * size[fast][group]).astype(
            np.int64)
        client = order[position]
        ok = used[client] < cap
        client, group = client[ok], group[ok]
        _, first = np.unique(client, return_index=True)
        first.sort()  # keep the draw order: the first occurrences, grouped as proposed
        client, group = client[first], group[first]
        starts = np.searchsorted(group, np.arange(fast.size))
        rank = np.arange(group.size) - starts[group]
        keep = rank < take[fast][group]
        got = np.bincount(group[keep], minlength=fast.size)
        short = got < take[fast]
        parts.append(client[keep & ~short[group]])
        slow = np.concatenate([slow, fast[short]])
    for g in np.sort(slow):
        parts.append(_exact(order, int(offsets[g]), int(offsets[g + 1]), used, cap,
                            int(take[g]), rng))
    if not parts:
        return np.empty(0, dtype=np.int64)
    return np.concatenate(parts).astype(np.int64, copy=False)
