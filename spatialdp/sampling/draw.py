"""The vectorised capped draw: uniform samples without replacement in every group at once.

Clients are held sorted by group (``order``, with ``offsets`` delimiting each
group's slice; :func:`group_layout` builds both with one counting sort), with a
participation count per client. For every group that wants ``take`` of its
``eligible`` clients, the draw proposes positions uniformly in the group's slice,
all groups in one array, keeps those whose client is still under the cap, drops
repeats (keeping the first), and takes the first ``take`` of each group. The
first ``take`` distinct eligible clients of an i.i.d. uniform stream are a
uniform sample without replacement; groups whose proposals fall short (rare; or
groups that want more than half their eligible pool) are drawn exactly from
their eligible list. No Python loop runs over clients.

:class:`CappedDraw` runs the draw round after round on positions of the layout:
it keeps its own copy of the participation counts in layout order (so a
proposal's cap check reads the slice it was drawn in, and only the clients kept
are looked up in ``order``), and the proposal layout while it is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

__all__ = ["CappedDraw", "draw_capped", "group_layout"]

#: Proposals per wanted client, over the inverse eligible fraction (and a constant).
_OVERSAMPLE = 1.6
_EXTRA = 6

#: Slots of the scratch table that finds repeated proposals (a power of two).
_SLOTS = 2**16


def group_layout(labels: NDArray[np.integer], n_groups: int
                 ) -> tuple[NDArray[np.int32] | NDArray[np.int64], NDArray[np.int64]]:
    """Return the positions sorted by group (stable) and each group's slice in them.

    One counting sort (SciPy's COO to CSR conversion, linear in the number of
    labels): ``order`` equals ``np.argsort(labels, kind="stable")``, in a 32-bit
    dtype where it fits, and group ``g`` is ``order[offsets[g]:offsets[g + 1]]``.

    Parameters
    ----------
    labels : array of int
        A group in ``0..n_groups - 1`` per position (checked by the caller).
    n_groups : int

    Returns
    -------
    order : array of int32 (int64 beyond 2**31 positions)
    offsets : array of int64, shape (n_groups + 1,)

    Examples
    --------
    >>> order, offsets = group_layout(np.array([2, 0, 2, 1, 0]), 3)
    >>> order.tolist(), offsets.tolist()
    ([1, 4, 3, 0, 2], [0, 2, 3, 5])
    """
    n = labels.size
    index = np.int32 if n < np.iinfo(np.int32).max else np.int64
    members = sparse.coo_array(
        (np.ones(n, dtype=np.bool_), (labels.astype(index, copy=False), np.arange(n, dtype=index))),
        shape=(n_groups, max(n, 1))).tocsr()
    # Canonical CSR holds each row's columns ascending: the stable order of the labels.
    members.sort_indices()
    return members.indices, members.indptr.astype(np.int64)


def _exact(offsets: NDArray[np.int64], used_at: NDArray[np.unsignedinteger], group: int, cap: int,
           take: int, rng: np.random.Generator) -> NDArray[np.int64]:
    """Draw ``take`` positions of ``group`` exactly among those under ``cap``."""
    start, stop = int(offsets[group]), int(offsets[group + 1])
    eligible = start + np.flatnonzero(used_at[start:stop] < cap)
    picked: NDArray[np.int64] = rng.choice(eligible, size=take, replace=False, shuffle=False)
    return picked


def _repeats(position: NDArray[np.int64], scratch: NDArray[np.int32] | None,
             numbers: NDArray[np.signedinteger]) -> NDArray[np.signedinteger]:
    """Return the indices of proposals that repeat an earlier one (in no set order).

    With ``scratch`` (a table of :data:`_SLOTS` entries), no sort of all the
    proposals runs: each hashes to a slot (its low bits), and after
    ``scratch[slot] = numbers`` a proposal reads its own number back unless
    another one shares its slot. Only the proposals of contested slots (those
    that lost a write and the winners they lost to: repeated positions and a few
    distinct ones sharing a slot) are sorted by (position, index) to find the
    repeats. The table is small enough to stay in cache.
    """
    if scratch is None or numbers.dtype != scratch.dtype:  # beyond 2**31 proposals: sort
        candidates = numbers
    else:
        slot = position & (scratch.size - 1)
        scratch[slot] = numbers
        lost = np.flatnonzero(scratch[slot] != numbers)
        if not lost.size:
            return lost
        candidates = np.concatenate((lost, scratch[slot[lost]]))  # a winner may come twice
    value = position[candidates]
    by_value = np.lexsort((candidates, value))
    value, candidates = value[by_value], candidates[by_value]
    later = (value[1:] == value[:-1]) & (candidates[1:] != candidates[:-1])
    repeated: NDArray[np.signedinteger] = candidates[1:][later]
    return repeated


@dataclass(frozen=True)
class _Plan:
    """The proposals of one (take, eligible) pair: what every round with them repeats."""

    fast: NDArray[np.int64]  # groups drawn by proposals
    slow: NDArray[np.int64]  # groups drawn exactly
    starts: NDArray[np.int64]  # each fast group's first proposal
    ends: NDArray[np.int64]  # one past its last
    take: NDArray[np.int64]  # seats of each fast group
    base: NDArray[np.int64]  # per proposal: its group's first layout position
    width: NDArray[np.float64]  # per proposal: its group's size
    numbers: NDArray[np.signedinteger]  # 0, 1, ..., proposals - 1 (int32 below 2**31)
    first_take: NDArray[np.int64]  # the first take proposals of each fast group
    take_group: NDArray[np.int64]  # the fast group of each of them


class CappedDraw:
    """The capped draw of :func:`draw_capped` for one grouping, round after round.

    It works on positions of the layout (``order``, ``offsets``) and keeps what
    does not change between rounds: the participation counts in layout order
    (``used_at``: a proposal's cap check reads the group's own slice, and only
    the kept positions are looked up in ``order``), the proposal layout (rebuilt
    only when the number of proposals of some group changes), and a small table
    that finds repeated proposals without a sort. :meth:`record` adds a round's
    participations to the counts. Answers are those of :func:`draw_capped` with
    the same counts and generator state.

    Parameters
    ----------
    order, offsets : arrays of int
        As in :func:`draw_capped`.
    used_at : array of uint8 or uint16
        Participations so far per layout position (``used[order]``; uint8 when
        the cap is below 255); the draw owns it from here and updates it in
        :meth:`record`.
    repeat_table : bool, default True
        Find repeated proposals with the small table (else with ``np.unique``).

    Examples
    --------
    >>> order = np.arange(10); offsets = np.array([0, 6, 10])
    >>> draw = CappedDraw(order, offsets, np.zeros(10, dtype=np.uint16))
    >>> position = draw.positions(1, np.array([2, 4]), np.array([6, 4]),
    ...                           np.random.default_rng(0))
    >>> sorted(draw.clients(position[2:]).tolist())
    [6, 7, 8, 9]
    >>> draw.record(position).tolist()  # participations after this round
    [1, 1, 1, 1, 1, 1]
    """

    def __init__(self, order: NDArray[np.integer], offsets: NDArray[np.int64],
                 used_at: NDArray[np.unsignedinteger], *, repeat_table: bool = True) -> None:
        self.order, self.offsets = order, np.asarray(offsets, dtype=np.int64)
        self.size = np.diff(self.offsets)
        self.used_at = used_at
        self.scratch = np.empty(_SLOTS, dtype=np.int32) if repeat_table else None
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
        # Per proposal-drawn group: ceil(oversample x take x size / eligible) + extra
        # (eligible >= 2 there, so the floor of 1 changes no such group).
        needed = np.ceil(_OVERSAMPLE * take * (self.size / np.maximum(eligible, 1)))
        is_fast = (take > 0) & (2 * take <= eligible)
        key = needed.tobytes() + is_fast.tobytes() + take.tobytes()
        if self._plan is not None and self._plan[0] == key:
            return self._plan[1]
        fast = np.flatnonzero(is_fast)
        proposals = needed[fast].astype(np.int64) + _EXTRA
        slow = np.flatnonzero((take > 0) & ~is_fast)
        group = np.repeat(np.arange(fast.size), proposals)
        ends = np.cumsum(proposals).astype(np.int64)
        starts = ends - proposals
        seats = take[fast]
        take_group = np.repeat(np.arange(fast.size), seats)
        first_take = (np.arange(take_group.size) - (np.cumsum(seats) - seats)[take_group]
                      + starts[take_group])
        numbers: NDArray[np.signedinteger] = (np.arange(group.size, dtype=np.int32)
                                              if group.size < 2**31 else np.arange(group.size))
        plan = _Plan(fast, slow, starts, ends, seats, self.offsets[fast][group],
                     self.size[fast][group].astype(np.float64), numbers, first_take, take_group)
        self._plan = (key, plan)
        return plan

    def positions(self, cap: int, take: NDArray[np.int64], eligible: NDArray[np.int64],
                  rng: np.random.Generator) -> NDArray[np.int64]:
        """Return ``take[g]`` layout positions of each group ``g`` under ``cap`` (not recorded).

        The proposal-drawn groups come first (in group order), then the exactly
        drawn ones.
        """
        plan = self.plan(take, eligible)
        slow = plan.slow
        parts: list[NDArray[np.int64]] = []
        if plan.fast.size:
            uniform = rng.random(plan.base.size)
            uniform *= plan.width
            position = uniform.astype(np.int64)
            position += plan.base
            dropped = self.used_at[position] >= cap
            dropped[_repeats(position, self.scratch, plan.numbers)] = True
            lost = np.flatnonzero(dropped)
            if not lost.size:  # nothing lost: every group has its first take
                parts.append(position[plan.first_take])
            else:
                picked, short = _first_takes(position, dropped, lost, plan)
                parts.append(picked)
                slow = np.concatenate([slow, plan.fast[short]])
        for g in np.sort(slow).tolist() if slow.size else ():
            parts.append(_exact(self.offsets, self.used_at, g, cap, int(take[g]), rng))
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return np.empty(0, dtype=np.int64)
        return np.concatenate(parts)

    def clients(self, positions: NDArray[np.int64]) -> NDArray[np.int64]:
        """Return the client indices at layout ``positions`` (int64)."""
        return self.order[positions].astype(np.int64, copy=False)

    def record(self, positions: NDArray[np.int64]) -> NDArray[np.unsignedinteger]:
        """Add one participation at each of ``positions`` (no repeats); return the new counts."""
        participations: NDArray[np.unsignedinteger] = self.used_at[positions]
        participations += 1
        self.used_at[positions] = participations
        return participations

    def __call__(self, cap: int, take: NDArray[np.int64], eligible: NDArray[np.int64],
                 rng: np.random.Generator) -> NDArray[np.int64]:
        """Return the clients of :meth:`positions` (not recorded; see :func:`draw_capped`)."""
        return self.clients(self.positions(cap, take, eligible, rng))


def _first_takes(position: NDArray[np.int64], dropped: NDArray[np.bool_],
                 lost: NDArray[np.int64], plan: _Plan
                 ) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """Return the first ``take`` kept proposals of each group, and which groups are short.

    ``dropped`` marks the proposals dropped (capped or repeated), ``lost`` lists
    them (ascending). A group with fewer kept proposals than it wants gives none
    here (it is drawn exactly instead).
    """
    lost_before_start = np.searchsorted(lost, plan.starts)
    lost_inside = np.searchsorted(lost, plan.ends) - lost_before_start
    short = plan.ends - plan.starts - lost_inside < plan.take
    # The j-th kept proposal of a group that is not short: past the lost ones before it.
    index = plan.first_take - lost_before_start[plan.take_group]
    if short.any():
        index = index[~short[plan.take_group]]
    return position[~dropped][index], short


def draw_capped(order: NDArray[np.integer], offsets: NDArray[np.int64], used: NDArray[np.uint16],
                cap: int, take: NDArray[np.int64], eligible: NDArray[np.int64],
                rng: np.random.Generator) -> NDArray[np.int64]:
    """Return ``take[g]`` clients of each group ``g``, uniformly among those under ``cap``.

    Parameters
    ----------
    order : array of int
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
    CappedDraw : the same draw, keeping its counts and layout between rounds.

    Examples
    --------
    >>> order = np.arange(10); offsets = np.array([0, 6, 10])
    >>> used = np.zeros(10, dtype=np.uint16)
    >>> out = draw_capped(order, offsets, used, 1, np.array([2, 4]), np.array([6, 4]),
    ...                   np.random.default_rng(0))
    >>> sorted(out[2:].tolist())
    [6, 7, 8, 9]
    """
    return CappedDraw(order, offsets, used[order], repeat_table=False)(cap, take, eligible, rng)
