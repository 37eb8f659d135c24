"""Stratified, capped cohort selection, round by round, with every shortfall reported.

:class:`StratifiedSampler` holds the configuration (strata, cohort, allocation
mode, participation policy, merge floor); a :class:`ParticipationState` holds
what changes. Each epoch begins with :meth:`StratifiedSampler.new_state` (or
:meth:`~StratifiedSampler.next_epoch`), which charges the per-client epoch
epsilon (cap x per-round epsilon) to the target before any client is selected.
Each :meth:`~StratifiedSampler.select` then:

1. merges, with a spatial neighbour, every stratum (group) whose eligible pool is
   below ``min_stratum_cohort`` -- merges last for the epoch and are recorded;
2. allocates the cohort over the (merged) strata by population;
3. draws each group's seats uniformly among its clients under the cap, with a
   generator seeded from the state's secret, the epoch and the round id;
4. reports, per group, seats wanted, filled, eligible before and after, and the
   reason of any shortfall (``participation cap`` or ``pool smaller than seats``).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import sparse

from spatialdp._validation import check_choice, check_count, check_instance, fail
from spatialdp.exceptions import CohortTooSmall, InvalidInput
from spatialdp.federated.incidents import Incident
from spatialdp.privacy.budget import Neighbours, check_neighbours
from spatialdp.privacy.pipeline import ReleasePlan, run_release
from spatialdp.privacy.target import Accounting, ReleaseTarget, Simulation, check_target
from spatialdp.sampling.allocation import DEFAULT_MODE, MODES, _sigma, apportion
from spatialdp.sampling.draw import CappedDraw, group_layout
from spatialdp.sampling.merges import Merge, merge_small_groups
from spatialdp.sampling.policy import ParticipationPolicy
from spatialdp.sampling.score import score_against, unfilled_allocations
from spatialdp.sampling.state import ParticipationState
from spatialdp.sampling.strata import Strata, _as_array

__all__ = ["RoundCohort", "StratifiedSampler"]

SHORTFALL_CAP = "participation cap"
SHORTFALL_POOL = "pool smaller than seats"


@dataclass(frozen=True)
class RoundCohort:
    """The clients of one round and what each (merged) stratum got.

    Attributes
    ----------
    round_index, epoch : int
    clients : numpy.ndarray of int64
        Client indices (positions in the fleet the state was built on).
    groups : tuple of str
        The reporting groups (member stratum ids joined by ``+`` when merged).
    counts : dict of str to numpy.ndarray
        Per group: ``population``, ``wanted``, ``filled``, ``eligible_before``,
        ``eligible_after``, ``shortfall`` (see :attr:`table`).
    score : float
        The round's coverage score (1.0: seats match sqrt-of-population shares).
    merges : list of Merge
        Merges made in this round.
    """

    round_index: int
    epoch: int
    clients: NDArray[np.int64]
    groups: tuple[str, ...]
    counts: dict[str, NDArray[np.int64]]
    score: float
    merges: list[Merge] = field(default_factory=list)

    @cached_property
    def reasons(self) -> NDArray[np.str_]:
        """Per group, why seats went unfilled (empty when filled)."""
        c = self.counts
        return np.where(c["shortfall"] == 0, "",
                        np.where(c["population"] < c["wanted"], SHORTFALL_POOL, SHORTFALL_CAP))

    @cached_property
    def table(self) -> pd.DataFrame:
        """One row per group: the counts and the ``reason`` of any shortfall."""
        frame = pd.DataFrame(self.counts, index=pd.Index(list(self.groups), name="group"))
        frame["reason"] = self.reasons
        return frame

    @property
    def alerts(self) -> list[Incident]:
        """One ``unfilled_allocation`` incident per group whose seats went unfilled."""
        return unfilled_allocations(self.table, self.round_index)

    @property
    def notes(self) -> dict[str, str]:
        """``{group: reason}`` for every group whose seats went unfilled."""
        short = np.flatnonzero(self.counts["shortfall"] > 0)
        return {self.groups[i]: str(self.reasons[i]) for i in short}

    def _repr_html_(self) -> str:
        from spatialdp._results import summary_html

        return summary_html("RoundCohort", repr(self), self.table,
                            caption="seats per group (server-side selection, not a release)")

    def __repr__(self) -> str:
        return (f"RoundCohort(round_index={self.round_index}, epoch={self.epoch}, "
                f"clients={self.clients.size}, wanted={int(self.counts['wanted'].sum())}, "
                f"shortfalls={len(self.notes)}, score={self.score:.3f})")


def _names(labels: NDArray[np.int64], reps: NDArray[np.int64], ids: NDArray[np.object_]
           ) -> tuple[str, ...]:
    """Name each group by its member ids joined with ``+`` (one pass over the strata)."""
    members: dict[int, list[str]] = {}
    for label, name in zip(labels.tolist(), ids.tolist(), strict=True):
        members.setdefault(label, []).append(name)
    return tuple("+".join(members[r]) for r in reps.tolist())


@dataclass(frozen=True)
class _Grouping:
    """What depends only on the grouping of strata: kept until a merge changes it."""

    reps: NDArray[np.int64]
    inverse: NDArray[np.int64]
    population: NDArray[np.int64]
    wanted: NDArray[np.int64]
    wanted_total: int
    identity: bool  # every stratum its own group

    def per_group(self, per_stratum: NDArray[np.int64]) -> NDArray[np.int64]:
        """Return the sums over each group's strata of per-stratum counts."""
        if self.identity:
            return per_stratum.copy()
        return np.bincount(self.inverse, weights=per_stratum,
                           minlength=self.reps.size).astype(np.int64)


class _Layout:
    """Clients sorted by stratum, the eligible counts and the draw, kept between rounds.

    Not saved: rebuilt from the state when it is new to the sampler or was advanced
    elsewhere. The draw holds the participation counts in its layout order, in step
    with ``state.used`` (which only :meth:`StratifiedSampler.select` changes).
    """

    def __init__(self, state: ParticipationState, n_strata: int) -> None:
        self.used, self.client_stratum = state.used, state.client_stratum
        self.order, self.offsets = group_layout(state.client_stratum, n_strata)
        self.population = np.diff(self.offsets)
        most = int(state.used.max(initial=0))
        if most < state.policy.participation_cap:  # nobody capped yet
            self.eligible = self.population.copy()
        else:
            self.eligible = state.eligible_per_stratum(n_strata).astype(np.int64)
        self.untouched = most == 0  # the draw's counts start as zeros, no gather
        # The draw's counts stop at the cap: one byte each below 255 (half the cache).
        self.count_dtype = np.uint8 if state.policy.participation_cap < 255 else np.uint16
        self.groups_key = b""
        self.draw: CappedDraw | None = None
        self.previous: NDArray[np.int64] | None = None
        self.rounds_seen = len(state.rounds)
        self._names: tuple[bytes, tuple[str, ...]] = (b"", ())
        self._grouping: tuple[bytes, _Grouping | None] = (b"", None)
        self._ideal: dict[int, NDArray[np.int64]] = {}

    def is_for(self, state: ParticipationState) -> bool:
        """Return whether this layout is in step with ``state`` (not advanced elsewhere)."""
        return (self.rounds_seen == len(state.rounds) and self.used is state.used
                and self.client_stratum is state.client_stratum)

    def names(self, labels: NDArray[np.int64], reps: NDArray[np.int64],
              ids: NDArray[np.object_]) -> tuple[str, ...]:
        key = labels.tobytes()
        if self._names[0] != key:
            self._names = (key, _names(labels, reps, ids))
        return self._names[1]

    def grouping(self, labels: NDArray[np.int64],
                 allocate: Callable[[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64]],
                                    NDArray[np.int64]]) -> _Grouping:
        """Return the groups of ``labels``, their populations and seats (cached per labels)."""
        key = labels.tobytes()
        cached = self._grouping[1]
        if cached is None or self._grouping[0] != key:
            reps, inverse = np.unique(labels, return_inverse=True)
            population = np.bincount(inverse, weights=self.population).astype(np.int64)
            wanted = allocate(inverse, population, self.population)
            cached = _Grouping(reps, inverse, population, wanted, int(wanted.sum()),
                               reps.size == labels.size)
            self._grouping = (key, cached)
        return cached

    def ideal(self, total: int) -> NDArray[np.int64]:
        """Return the sqrt allocation of ``total`` seats over the strata (the score's ideal)."""
        if total not in self._ideal:
            self._ideal[total] = apportion(self.population, total, "sqrt")[0]
        return self._ideal[total]

    def regroup(self, labels: NDArray[np.int64]) -> CappedDraw:
        """Return the draw over the groups of ``labels`` (rebuilt when they change)."""
        key = labels.tobytes()
        if key == self.groups_key and self.draw is not None:
            return self.draw
        self.groups_key = key
        if np.array_equal(labels, np.arange(labels.size)):
            order, offsets = self.order, self.offsets
        else:
            strata = np.lexsort((np.arange(labels.size), labels))
            order = np.concatenate(
                [self.order[self.offsets[s]:self.offsets[s + 1]] for s in strata])
            _, inverse = np.unique(labels, return_inverse=True)
            sizes = np.bincount(inverse, weights=self.population).astype(np.int64)
            offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        used_at: NDArray[np.unsignedinteger] = (
            np.zeros(order.size, dtype=self.count_dtype) if self.untouched
            else self.used[order].astype(self.count_dtype))
        self.draw = CappedDraw(order, offsets, used_at)
        return self.draw


class StratifiedSampler:
    """Select a cohort per round within fixed strata, under per-client participation caps.

    Parameters
    ----------
    strata : Strata
    cohort : int
        Clients per round.
    policy : ParticipationPolicy
        Participation cap, per-round epsilon and rounds per epoch (required: the
        per-client epoch epsilon is stated by construction).
    mode : {"proportional", "sqrt", "equal", "neyman"}, default "sqrt"
    sigma : mapping, optional
        Per-stratum sigma for ``"neyman"`` (required there). Merged strata use the
        population-weighted mean of their members' sigma.
    min_stratum_cohort : int, default 5
        A stratum whose eligible pool is below this is merged with a neighbour
        (``0``: never merge; an exhausted stratum then goes silent, reported as a
        shortfall every round).

    Examples
    --------
    >>> from spatialdp.datasets import us_states_partition
    >>> strata = Strata(us_states_partition(), basis="administrative")
    >>> rng = np.random.default_rng(0)
    >>> client_strata = rng.integers(0, 48, 20_000)
    >>> policy = ParticipationPolicy(participation_cap=2, epsilon_per_round=0.1,
    ...                              rounds_per_epoch=10)
    >>> sampler = StratifiedSampler(strata, cohort=200, policy=policy)
    >>> state = sampler.new_state(client_strata, target=Simulation(rng=1))
    >>> result = sampler.select(state, round_index=0)
    >>> result.clients.size, round(result.score, 2)
    (200, 1.0)
    """

    def __init__(self, strata: Strata, *, cohort: int, policy: ParticipationPolicy,
                 mode: str = DEFAULT_MODE, sigma: Any = None,
                 min_stratum_cohort: int = 5) -> None:
        self.strata = check_instance(strata, "strata", Strata, "pass a spatialdp Strata")
        self.cohort = check_count(cohort, "cohort", low=1)
        self.policy = check_instance(policy, "policy", ParticipationPolicy,
                                     "pass ParticipationPolicy(participation_cap=..., "
                                     "epsilon_per_round=..., rounds_per_epoch=...)")
        self.mode = check_choice(mode, "mode", MODES)
        self.sigma = _sigma(sigma, self.strata.ids) if self.mode == "neyman" else None
        self.min_stratum_cohort = check_count(min_stratum_cohort, "min_stratum_cohort")
        self._ids = np.asarray(self.strata.ids, dtype=object)
        self._n_strata = self.strata.n_strata
        self._layouts: dict[int, tuple[ParticipationState, _Layout]] = {}

    @cached_property
    def _adjacency(self) -> sparse.csr_array:
        """The strata's adjacency, built on the first merge (most epochs never merge)."""
        return self.strata.adjacency()

    @cached_property
    def _centroids(self) -> NDArray[np.float64]:
        """The strata's centroids, for merging islands (built on the first merge)."""
        return self.strata.centroids()

    def __repr__(self) -> str:
        return (f"StratifiedSampler(strata={self.strata!r}, cohort={self.cohort}, "
                f"mode={self.mode!r}, {self.policy.describe()}, "
                f"min_stratum_cohort={self.min_stratum_cohort})")

    # ------------------------------------------------------------------ epochs
    def _client_strata(self, client_strata: ArrayLike) -> NDArray[np.int32]:
        values = _as_array(client_strata)
        if values.ndim != 1 or values.size == 0:
            raise fail("client_strata", client_strata, "is not a 1-d array with one entry per "
                       "client", "pass Strata.assign(...) or stratum ids, one per client")
        if values.dtype.kind in "iu":
            n = self.strata.n_strata
            if values.min() < 0 or values.max() >= n:  # two passes; the count only on refusal
                bad = (values < 0) | (values >= n)
                raise InvalidInput(
                    f"client_strata has {int(bad.sum())} positions outside 0..{n - 1} (the "
                    f"strata of {self.strata.key}); clients in no stratum (-1) must be dropped "
                    "or the strata must cover the fleet")
            return values.astype(np.int32)
        return self.strata.positions(values).astype(np.int32)

    def _charge(self, target: Accounting, epoch: int, neighbours: Neighbours
                ) -> dict[str, Any]:
        checked = check_target(target)
        if isinstance(checked, ReleaseTarget) and checked.epoch != epoch:
            raise fail("target.epoch", checked.epoch, f"is not the state's epoch {epoch}",
                       "charge the epoch being started")
        # A reservation: the epoch's training rounds draw their own noise later, each
        # client's loss over the epoch is bounded by the cap; nothing is drawn here.
        run_release([ReleasePlan(self.policy.epsilon_per_round, [], lambda _: None)],
                    target=checked,
                    structure=self.policy.structure(f"cohort:{self.strata.key}"),
                    what=f"per-client epoch epsilon of stratified selection "
                         f"({self.policy.describe()})",
                    default_line_item="training", neighbours=neighbours)
        meta = dict(checked.metadata())
        meta["neighbours"] = neighbours
        meta["epsilon_per_client_epoch"] = self.policy.epsilon_per_client_epoch
        return meta

    def new_state(self, client_strata: ArrayLike, *, target: Accounting, epoch: int = 0,
                  neighbours: Neighbours = "replace") -> ParticipationState:
        """Start an epoch for a fleet, charging the per-client epoch epsilon first.

        Parameters
        ----------
        client_strata : array
            Stratum position (``Strata.assign``) or stratum id of every client.
        target : ReleaseTarget, Simulation or Unaccounted
            Where ``participation_cap x epsilon_per_round`` is charged (line item
            ``training``). A ``Simulation``'s generator also seeds the rounds;
            otherwise the seed secret comes from OS entropy.
        epoch : int, default 0
        neighbours : {"replace", "add_remove"}, default "replace"
            The neighbouring relation the training rounds' per-round epsilon
            holds for (recorded with the charge).

        Raises
        ------
        InvalidInput
            Ids not in the strata, positions out of range, a bad target.
        BudgetExceeded
            The ledger cannot pay the epoch; nothing is recorded.
        """
        strata = self._client_strata(client_strata)
        epoch = check_count(epoch, "epoch")
        charge = self._charge(target, epoch, check_neighbours(neighbours))
        entropy = (int(target.rng.integers(2**63)) if isinstance(target, Simulation)
                   else secrets.randbits(128))
        n = self.strata.n_strata
        return ParticipationState(
            strata_version=self.strata.version, policy=self.policy, epoch=epoch,
            client_stratum=strata, used=np.zeros(strata.size, dtype=np.uint16),
            entropy=entropy, groups=np.arange(n, dtype=np.int64),
            selected=np.zeros(n, dtype=np.int64), charge=charge)

    def next_epoch(self, state: ParticipationState, *, target: Accounting
                   ) -> ParticipationState:
        """Return the state of the next epoch: caps reset, merges undone, epoch charged.

        The charge holds for the neighbouring relation of the previous epoch's.
        """
        self._check_state(state)
        new = self.new_state(state.client_stratum, target=target, epoch=state.epoch + 1,
                             neighbours=state.charge.get("neighbours", "replace"))
        if not isinstance(target, Simulation):
            new.entropy = state.entropy  # rounds stay reproducible from the same secret
        return new

    # ------------------------------------------------------------------ rounds
    def _check_state(self, state: ParticipationState) -> None:
        check_instance(state, "state", ParticipationState,
                       "pass the state from new_state or ParticipationState.load")
        if state.strata_version != self.strata.version:
            from spatialdp.exceptions import PartitionMismatch

            raise PartitionMismatch(
                f"the state was made on strata version {state.strata_version!r}, the sampler "
                f"samples on {self.strata.version!r}; start a new state on these strata")
        if state.policy is not self.policy and state.policy != self.policy:
            raise fail("state.policy", state.policy, "differs from the sampler's policy",
                       "use the sampler configured with the policy the epoch was charged for")

    def _layout(self, state: ParticipationState) -> _Layout:
        cached = self._layouts.get(id(state))
        # Rebuilt when the state is new to this sampler or was advanced by another one.
        if cached is None or cached[0] is not state or not cached[1].is_for(state):
            self._layouts = {id(state): (state, _Layout(state, self._n_strata))}
            return self._layouts[id(state)][1]
        return cached[1]

    def _allocate(self, inverse: NDArray[np.int64], population: NDArray[np.int64],
                  stratum_population: NDArray[np.int64]) -> NDArray[np.int64]:
        """Return each group's seats (group of each stratum ``inverse``, group ``population``).

        Merged strata use the population-weighted mean of their members' sigma.
        """
        sigma = None
        if self.sigma is not None:
            weighted = np.bincount(inverse, weights=self.sigma * stratum_population)
            sigma = weighted / np.maximum(population, 1)
        return apportion(population, self.cohort, self.mode, sigma)[0]

    def _rng(self, state: ParticipationState, round_index: int) -> np.random.Generator:
        seq = np.random.SeedSequence(state.entropy, spawn_key=(state.epoch, round_index))
        return np.random.default_rng(seq)

    def select(self, state: ParticipationState, round_index: int) -> RoundCohort:
        """Select the cohort of one round and record it in ``state``.

        Parameters
        ----------
        state : ParticipationState
        round_index : int
            The round id (each id once per epoch); the draw is seeded from it.

        Returns
        -------
        RoundCohort

        Raises
        ------
        InvalidInput
            A round id already used this epoch, more rounds than the policy's
            epoch, or a cohort larger than the eligible fleet.
        PartitionMismatch
            A state of other strata.
        """
        self._check_state(state)
        round_index = check_count(round_index, "round_index")
        if round_index in state.rounds:
            raise fail("round_index", round_index, f"was already selected in epoch "
                       f"{state.epoch}", "use a new round id: a repeated id repeats the cohort")
        if len(state.rounds) >= self.policy.rounds_per_epoch:
            raise fail("round_index", round_index,
                       f"would be round {len(state.rounds) + 1} of an epoch of "
                       f"{self.policy.rounds_per_epoch}", "start the next epoch (next_epoch)")
        lay = self._layout(state)
        total = int(lay.eligible.sum())
        if self.cohort > total:
            raise fail("cohort", self.cohort, f"exceeds the eligible fleet of {total:,} clients "
                       f"(under the cap of {self.policy.participation_cap})",
                       "lower the cohort, raise the cap, or start the next epoch")
        labels = state.groups
        merges: list[Merge] = []
        grouping = lay.grouping(labels, self._allocate)
        eligible = grouping.per_group(lay.eligible)
        floor = self.min_stratum_cohort
        if floor and (eligible < floor).any():
            labels, merges = merge_small_groups(
                self._adjacency, lay.eligible, floor, pd.Index(self._ids), groups=labels,
                centroids=self._centroids, round_index=round_index)
            grouping = lay.grouping(labels, self._allocate)
            if grouping.reps.size == 1 and total < floor:
                raise CohortTooSmall(
                    f"the whole eligible fleet ({total} clients) is below "
                    f"min_stratum_cohort={floor}, so no stratum can be sampled or reported "
                    "without exposing its clients; wait for the next epoch or enlarge the fleet")
            state.groups = labels
            state.merges.extend(merges)
            eligible = grouping.per_group(lay.eligible)
        draw = lay.regroup(labels)
        reps, wanted = grouping.reps, grouping.wanted
        take = np.minimum(wanted, eligible)
        rng = self._rng(state, round_index)
        positions = draw.positions(self.policy.participation_cap, take, eligible, rng)
        clients = draw.clients(positions)
        participations = draw.record(positions)
        lay.untouched = False
        state.used[clients] = participations
        capped = clients[participations >= self.policy.participation_cap]
        capped_per_stratum = np.bincount(state.client_stratum[capped], minlength=self._n_strata)
        lay.eligible -= capped_per_stratum
        # Every group gets exactly its take: without merges, groups are the strata.
        filled_strata = (take if grouping.identity else
                         np.bincount(state.client_stratum[clients], minlength=self._n_strata))
        state.selected += filled_strata
        shortfall = wanted - take
        names = lay.names(labels, reps, self._ids)
        counts = {"population": grouping.population, "wanted": wanted, "filled": take,
                  "eligible_before": eligible,
                  "eligible_after": eligible - grouping.per_group(capped_per_stratum),
                  "shortfall": shortfall}
        filled_total = int(take.sum())
        score = score_against(filled_strata, lay.ideal(filled_total), filled_total)
        state.rounds.append(round_index)
        state.history.append({
            "round_index": round_index, "score": score, "wanted": grouping.wanted_total,
            "filled": filled_total, "shortfall": grouping.wanted_total - filled_total,
            "unfilled_groups": ([names[i] for i in np.flatnonzero(shortfall > 0)]
                                if filled_total < grouping.wanted_total else []),
            "groups": len(reps)})
        lay.previous = clients
        lay.rounds_seen = len(state.rounds)
        return RoundCohort(round_index, state.epoch, clients, names, counts, score, merges)

    def group_names(self, state: ParticipationState) -> pd.Series:
        """Return the reporting group of every stratum this epoch (``a+b`` when merged)."""
        self._check_state(state)
        reps = np.unique(state.groups)
        names = np.asarray(_names(state.groups, reps, self._ids), dtype=object)
        return pd.Series(names[np.searchsorted(reps, state.groups)], index=self.strata.ids,
                         name="group")
