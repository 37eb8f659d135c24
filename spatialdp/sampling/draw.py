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

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["CappedDraw", "draw_capped"]

#: Proposals per wanted client, over the inverse eligible fraction (and a constant).
_OVERSAMPLE = 1.6
_EXTRA = 6


def _exact(order: NDArray[np.int64], start: int, stop: int, used: NDArray[np.uint16],
           cap: int, take: int, rng: np.random.Generator) -> NDArray[np.int64]:
    members = order[start:stop]
    eligible = members[used[members] < cap]
    picked: NDArray[np.int64] = rng.choice(eligible, size=take, replace=False, shuffle=False)
    return picked


#: Slots of the scratch table that finds repeated proposals (a power of two).
_SLOTS = 2**16


def _first_mask(client: NDArray[np.int64], scratch: NDArray[np.int64] | None
                ) -> NDArray[np.bool_] | None:
    """Return True at each value's first occurrence; None when no value repeats.

    With ``scratch`` (a table of :data:`_SLOTS` int64), no sort of all the values
    runs: each value hashes to a slot (its low bits), and after
    ``scratch[slot] = positions`` a position reads itself back when no other
    position shares its slot. The slots that lost a write (repeated values, and a
    few distinct values sharing a slot) are marked ``-1``, and only the positions
    in them (a small share of the proposals) are sorted to find the first
    occurrences. The table is small enough to stay in cache.
    """
    if scratch is None:
        _, first = np.unique(client, return_index=True)
        if first.size == client.size:
            return None
        mask = np.zeros(client.size, dtype=bool)
        mask[first] = True
        return mask
    positions = np.arange(client.size, dtype=np.int64)
    slot = client & (scratch.size - 1)
    scratch[slot] = positions
    lost = scratch[slot] != positions
    if not lost.any():
        return None
    scratch[slot[lost]] = -1
    mask = scratch[slot] != -1
    shared = np.flatnonzero(~mask)
    _, first = np.unique(client[shared], return_index=True)
    mask[shared[first]] = True
    return mask


@dataclass(frozen=True)
class _Plan:
    """The proposals of one (take, eligible) pair: what every round with them repeats."""

    fast: NDArray[np.int64]
    slow: NDArray[np.int64]
    group: NDArray[np.int64]
    starts: NDArray[np.int64]
    ends: NDArray[np.int64]
    base: NDArray[np.int64]
    width: NDArray[np.float64]
    take: NDArray[np.int64]
    first_take: NDArray[np.bool_]


class CappedDraw:
    """The capped draw of :func:`draw_capped`, for one grouping, round after round.

    It keeps what does not change between rounds: the proposal layout (rebuilt
    only when the number of proposals of some group changes), and a small table
    that finds repeated proposals without a sort. Answers are those of
    :func:`draw_capped` with the same arguments and generator state.

    Parameters
    ----------
    order, offsets : arrays of int64
        As in :func:`draw_capped`.
    n_clients : int, optional
        Clients in the fleet; given, the draw keeps a small table that finds
        repeated proposals without a sort.

    Examples
    --------
    >>> order = np.arange(10); offsets = np.array([0, 6, 10])
    >>> draw = CappedDraw(order, offsets, 10)
    >>> used = np.zeros(10, dtype=np.uint16)
    >>> out = draw(used, 1, np.array([2, 4]), np.array([6, 4]), np.random.default_rng(0))
    >>> sorted(out[2:].tolist())
    [6, 7, 8, 9]
    """

    def __init__(self, order: NDArray[np.int64], offsets: NDArray[np.int64],
                 n_clients: int | None = None) -> None:
        self.order, self.offsets = order, offsets
        self.size = np.diff(offsets)
        self.scratch = None if n_clients is None else np.empty(_SLOTS, dtype=np.int64)
        self._plan: tuple[bytes, _Plan] | None = None
        self._given = b""

    def plan(self, take: NDArray[np.int64], eligible: NDArray[np.int64]) -> _Plan:
        """Return the proposal layout for ``take`` and ``eligible`` (cached for the last).

        The layout depends on them only through the proposals per group, so it is
        rebuilt only when those change (not each time a client reaches the cap).
        """
        given = take.tobytes() + eligible.tobytes()
        if self._plan is not None and self._given == given:
            return self._plan[1]
        self._given = given
        fast = np.flatnonzero((take > 0) & (2 * take <= eligible))
        inverse_fraction = self.size[fast] / eligible[fast]
        proposals = np.ceil(_OVERSAMPLE * take[fast] * inverse_fraction).astype(np.int64) + _EXTRA
        key = fast.tobytes() + proposals.tobytes() + take.tobytes()
        if self._plan is not None and self._plan[0] == key:
            return self._plan[1]
        slow = np.flatnonzero((take > 0) & (2 * take > eligible))
        group = np.repeat(np.arange(fast.size), proposals)
        ends = np.cumsum(proposals).astype(np.int64)
        starts = ends - proposals
        wanted = take[fast][group]
        plan = _Plan(fast, slow, group, starts, ends, self.offsets[fast][group],
                     self.size[fast][group].astype(np.float64), wanted,
                     np.arange(group.size) - starts[group] < wanted)
        self._plan = (key, plan)
        return plan

    def __call__(self, used: NDArray[np.uint16], cap: int, take: NDArray[np.int64],
                 eligible: NDArray[np.int64], rng: np.random.Generator) -> NDArray[np.int64]:
        """Return ``take[g]`` clients of each group ``g`` (see :func:`draw_capped`)."""
        plan = self.plan(take, eligible)
        slow = plan.slow
        parts: list[NDArray[np.int64]] = []
        if plan.fast.size:
            position = plan.base + (rng.random(plan.group.size) * plan.width).astype(np.int64)
            client = self.order[position]
            kept = used[client] < cap
            first = _first_mask(client, self.scratch)
            if first is not None:
                kept &= first
            if kept.all():  # nothing lost: every group has enough proposals
                parts.append(client[plan.first_take])
            else:
                picked, short = _first_takes(client, kept, plan)
                parts.append(picked)
                slow = np.concatenate([slow, plan.fast[short]])
        for g in np.sort(slow).tolist() if slow.size else ():
            parts.append(_exact(self.order, int(self.offsets[g]), int(self.offsets[g + 1]), used,
                                cap, int(take[g]), rng))
        if len(parts) == 1:
            return parts[0].astype(np.int64, copy=False)
        if not parts:
            return np.empty(0, dtype=np.int64)
        return np.concatenate(parts).astype(np.int64, copy=False)


def _first_takes(client: NDArray[np.int64], kept: NDArray[np.bool_], plan: _Plan
                 ) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Return the first ``take`` kept proposals of each group, and which groups are short.

    A group with fewer kept proposals than it wants gives none here (it is drawn
    exactly instead).
    """
    seen = np.cumsum(kept)  # kept proposals up to and including each position
    before_group: NDArray[np.int64] = seen[plan.starts] - kept[plan.starts]
    rank: NDArray[np.int64] = seen - kept - before_group[plan.group]
    keep = kept & (rank < plan.take)
    short = seen[plan.ends - 1] - before_group < plan.take[plan.starts]
    if short.any():
        keep &= ~short[plan.group]
    return client[keep], short


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

    See Also
    --------
    CappedDraw : the same draw, keeping its layout between rounds.

    Examples
    --------
    >>> order = np.arange(10); offsets = np.array([0, 6, 10])
    >>> used = np.zeros(10, dtype=np.uint16)
    >>> out = draw_capped(order, offsets, used, 1, np.array([2, 4]), np.array([6, 4]),
    ...                   np.random.default_rng(0))
    >>> sorted(out[2:].tolist())
    [6, 7, 8, 9]
    """
    return CappedDraw(order, offsets)(used, cap, take, eligible, rng)
