"""Capped stratified selection: uniformity, caps, shortfalls, merges, seeding, refusals."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from spatialdp.exceptions import BudgetExceeded, CohortTooSmall, InvalidInput, PartitionMismatch
from spatialdp.privacy import PrivacyLedger
from spatialdp.privacy.target import ReleaseTarget, Simulation, Unaccounted
from spatialdp.sampling import ParticipationPolicy, Strata, StratifiedSampler
from spatialdp.sampling.draw import draw_capped
from spatialdp.sampling.score import repeated_selection
from spatialdp.sampling.simulation import SEED_POPULATIONS, row_strata


def _policy(cap: int = 1, rounds: int = 12, eps: float = 0.1) -> ParticipationPolicy:
    return ParticipationPolicy(participation_cap=cap, epsilon_per_round=eps,
                               rounds_per_epoch=rounds)


@pytest.mark.parametrize("take", [3, 9])  # the proposal path (3 of 12) and the exact path
def test_draw_is_uniform_among_eligible_clients(take: int) -> None:
    # One group of 20 clients, 8 of them at the cap: each eligible client must be drawn
    # with probability take / 12; capped clients never.
    order = np.arange(20, dtype=np.int64)
    offsets = np.array([0, 20])
    used = np.zeros(20, dtype=np.uint16)
    used[::5] = 1
    used[1::5] = 1
    eligible = int((used < 1).sum())
    rng = np.random.default_rng(11)
    draws = 4000
    hits = np.zeros(20, dtype=np.int64)
    for _ in range(draws):
        got = draw_capped(order, offsets, used, 1, np.array([take]), np.array([eligible]), rng)
        assert got.size == take
        assert np.unique(got).size == take
        hits[got] += 1
    assert hits[used >= 1].sum() == 0
    observed = hits[used < 1]
    expected = np.full(eligible, draws * take / eligible)
    assert stats.chisquare(observed, expected).pvalue > 1e-6


def test_draw_many_groups_at_once_takes_what_each_wants() -> None:
    rng = np.random.default_rng(0)
    sizes = rng.integers(5, 300, 50)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    order = rng.permutation(int(offsets[-1])).astype(np.int64)
    used = rng.integers(0, 3, order.size).astype(np.uint16)
    eligible = np.add.reduceat((used[order] < 2).astype(np.int64), offsets[:-1])
    take = np.minimum(rng.integers(0, 20, 50), eligible)
    got = draw_capped(order, offsets, used, 2, take, eligible, rng)
    group_of = np.empty(order.size, dtype=np.int64)
    group_of[order] = np.repeat(np.arange(50), sizes)
    assert np.unique(got).size == got.size
    assert (used[got] < 2).all()
    np.testing.assert_array_equal(np.bincount(group_of[got], minlength=50), take)


def test_caps_hold_over_an_epoch_and_shortfalls_are_reported_with_reasons() -> None:
    strata, fleet = row_strata(SEED_POPULATIONS)
    sampler = StratifiedSampler(strata, cohort=98, policy=_policy(cap=1, rounds=8),
                                min_stratum_cohort=0)
    state = sampler.new_state(fleet, target=Simulation(rng=3))
    seen = np.zeros(fleet.size, dtype=np.int64)
    remote = []
    for r in range(6):
        result = sampler.select(state, r)
        seen[result.clients] += 1
        remote.append(result.table.loc["remote"])
    assert seen.max() == 1  # cap of one participation per epoch
    # The seed's staircase: 18 clients, 7 wanted: 18 -> 11 -> 4 -> 0, silent from round 4.
    assert [int(r.eligible_before) for r in remote[:4]] == [18, 11, 4, 0]
    assert [int(r.filled) for r in remote[:4]] == [7, 7, 4, 0]
    assert remote[2].reason == "participation cap"
    assert remote[3].shortfall == 7
    assert remote[0].reason == ""
    assert remote[0].shortfall == 0
    # Round 6: both small strata are capped out; each unfilled group is an incident.
    assert [a.region_id for a in result.alerts] == ["remote", "rural"]


def test_a_pool_smaller_than_its_seats_is_named_as_such() -> None:
    strata, fleet = row_strata({"big": 400, "tiny": 6})
    sampler = StratifiedSampler(strata, cohort=20, policy=_policy(cap=2), mode="equal")
    state = sampler.new_state(fleet, target=Simulation(rng=0))
    result = sampler.select(state, 0)
    assert result.notes == {"tiny": "pool smaller than seats"}
    assert int(result.table.loc["tiny", "filled"]) == 6
    assert result.clients.size == 16  # the unfilled seats are reported, not silently refilled


def test_a_small_stratum_is_merged_with_a_neighbour_and_the_merge_recorded() -> None:
    strata, fleet = row_strata({"a": 300, "b": 200, "c": 3})
    sampler = StratifiedSampler(strata, cohort=30, policy=_policy(cap=3), min_stratum_cohort=5)
    state = sampler.new_state(fleet, target=Simulation(rng=0))
    result = sampler.select(state, 0)
    assert list(result.table.index) == ["a", "b+c"]
    assert len(result.merges) == 1
    assert result.merges[0].members == ("c",)
    assert "eligible pool 3 below the floor 5" in result.merges[0].reason
    assert sampler.group_names(state).to_dict() == {"a": "a", "b": "b+c", "c": "b+c"}
    # Merges last for the epoch.
    assert list(sampler.select(state, 1).table.index) == ["a", "b+c"]


def test_an_island_is_merged_with_the_nearest_stratum() -> None:
    import geopandas as gpd
    import shapely

    from spatialdp.geo import Partition

    boxes = gpd.GeoDataFrame({"id": ["a", "b", "far"]}, crs=4326, geometry=[
        shapely.box(0, 0, 1, 1), shapely.box(1, 0, 2, 1), shapely.box(10, 0, 11, 1)])
    strata = Strata(Partition.from_geodataframe(boxes, "id"), basis="administrative")
    fleet = strata.positions(np.repeat(["a", "b", "far"], [100, 100, 2]))
    sampler = StratifiedSampler(strata, cohort=10, policy=_policy(cap=2))
    state = sampler.new_state(fleet, target=Simulation(rng=0))
    merge = sampler.select(state, 0).merges[0]
    assert merge.into == ("b",)
    assert "nearest group by centroid" in merge.reason


def test_the_round_id_seeds_the_draw() -> None:
    strata, fleet = row_strata({"a": 5000, "b": 30})
    sampler = StratifiedSampler(strata, cohort=100, policy=_policy(cap=12, rounds=12))
    one = sampler.new_state(fleet, target=Simulation(rng=5))
    two = sampler.new_state(fleet, target=Simulation(rng=5))
    assert np.array_equal(sampler.select(one, 7).clients, sampler.select(two, 7).clients)
    assert not np.array_equal(sampler.select(one, 8).clients, sampler.select(two, 9).clients)


def test_consecutive_rounds_overlap_in_a_small_stratum_only_by_chance() -> None:
    # A 30-client stratum gives 6 seats per round (cap not binding): two independent
    # draws share 6 * 6 / 30 = 1.2 clients on average (hypergeometric).
    strata, fleet = row_strata({"a": 720, "b": 30})
    rounds = 200
    sampler = StratifiedSampler(strata, cohort=36, policy=_policy(cap=rounds, rounds=rounds))
    state = sampler.new_state(fleet, target=Simulation(rng=9))
    small = np.flatnonzero(fleet == strata.positions(["b"])[0])
    picks = [np.intersect1d(sampler.select(state, r).clients, small) for r in range(rounds)]
    assert all(p.size == 6 for p in picks)
    overlap = np.array([np.intersect1d(p, q).size for p, q in itertools.pairwise(picks)])
    # Hypergeometric(N=30, K=6, n=6): mean 1.2, variance 6*(6/30)*(24/30)*(24/29).
    se = np.sqrt(6 * 0.2 * 0.8 * 24 / 29 / overlap.size)
    assert abs(overlap.mean() - 1.2) < 5 * se
    # The detector stays quiet on these rounds and fires on a fixed seed.
    eligible = np.bincount(fleet, minlength=2)
    assert repeated_selection(picks[0], picks[1], fleet, eligible, list(strata.ids)) == []
    assert [i.kind for i in repeated_selection(picks[0], picks[0], fleet, eligible,
                                               list(strata.ids))] == ["repeated_selection"]


def test_the_epoch_is_charged_cap_times_epsilon_to_the_ledger() -> None:
    strata, fleet = row_strata(SEED_POPULATIONS)
    policy = _policy(cap=3, rounds=12, eps=0.05)
    sampler = StratifiedSampler(strata, cohort=80, policy=policy)
    with PrivacyLedger(":memory:", epoch_budget=1.0) as ledger:
        before = ledger.remaining(0, "training")
        state = sampler.new_state(fleet, target=ReleaseTarget(ledger, epoch=0, why="epoch 0"))
        assert ledger.remaining(0, "training") == pytest.approx(before - 0.15)
        audit = ledger.audit(0)
        assert audit["charged"].iloc[0] == pytest.approx(policy.epsilon_per_client_epoch)
        assert state.charge["epsilon_per_client_epoch"] == pytest.approx(0.15)
        nxt = sampler.next_epoch(state, target=ReleaseTarget(ledger, epoch=1, why="epoch 1"))
        assert nxt.epoch == 1
        assert nxt.used.max() == 0
        assert ledger.remaining(1, "training") == pytest.approx(before - 0.15)


def test_an_epoch_the_ledger_cannot_pay_is_refused_and_charges_nothing() -> None:
    strata, fleet = row_strata(SEED_POPULATIONS)
    sampler = StratifiedSampler(strata, cohort=80, policy=_policy(cap=10, rounds=12, eps=0.2))
    with PrivacyLedger(":memory:", epoch_budget=1.0) as ledger:
        before = ledger.remaining(0, "training")
        with pytest.raises(BudgetExceeded):
            sampler.new_state(fleet, target=ReleaseTarget(ledger, epoch=0))
        assert ledger.remaining(0, "training") == before


def test_a_target_of_another_epoch_is_refused() -> None:
    strata, fleet = row_strata(SEED_POPULATIONS)
    sampler = StratifiedSampler(strata, cohort=80, policy=_policy(cap=3))
    with PrivacyLedger(":memory:", epoch_budget=1.0) as ledger:
        with pytest.raises(InvalidInput, match="is not the state's epoch 0"):
            sampler.new_state(fleet, target=ReleaseTarget(ledger, epoch=2))
        assert ledger.remaining(2, "training") == pytest.approx(0.7)


def test_a_policy_without_epsilon_cannot_be_built() -> None:
    with pytest.raises(TypeError):
        ParticipationPolicy(participation_cap=3, rounds_per_epoch=10)  # type: ignore[call-arg]
    with pytest.raises(InvalidInput, match="exceeds rounds_per_epoch=2"):
        _policy(cap=3, rounds=2)


def test_refuses_a_cohort_larger_than_the_eligible_fleet() -> None:
    strata, fleet = row_strata(SEED_POPULATIONS)
    sampler = StratifiedSampler(strata, cohort=500, policy=_policy(cap=1))
    state = sampler.new_state(fleet, target=Unaccounted("test fleet"))
    first = sampler.select(state, 0)
    used = state.used.copy()
    left = 873 - first.clients.size
    with pytest.raises(InvalidInput, match=f"exceeds the eligible fleet of {left} clients"):
        sampler.select(state, 1)
    assert np.array_equal(state.used, used)
    assert state.rounds == [0]


def test_refuses_a_repeated_round_id_and_rounds_beyond_the_epoch() -> None:
    strata, fleet = row_strata(SEED_POPULATIONS)
    sampler = StratifiedSampler(strata, cohort=10, policy=_policy(cap=1, rounds=2))
    state = sampler.new_state(fleet, target=Simulation(rng=0))
    sampler.select(state, 4)
    with pytest.raises(InvalidInput, match="round_index=4 was already selected in epoch 0"):
        sampler.select(state, 4)
    sampler.select(state, 5)
    with pytest.raises(InvalidInput, match="of an epoch of 2"):
        sampler.select(state, 6)


def test_refuses_stratum_ids_not_in_the_partition() -> None:
    strata, _ = row_strata(SEED_POPULATIONS)
    sampler = StratifiedSampler(strata, cohort=10, policy=_policy())
    with pytest.raises(InvalidInput, match="1 stratum ids are not strata of .*first: 'lunar'"):
        sampler.new_state(np.array(["urban", "lunar"]), target=Simulation(rng=0))
    with pytest.raises(InvalidInput, match="positions outside 0..4"):
        sampler.new_state(np.array([0, 5]), target=Simulation(rng=0))


def test_refuses_a_state_of_other_strata() -> None:
    strata, _fleet = row_strata(SEED_POPULATIONS)
    other, _ = row_strata({"x": 10, "y": 10})
    state = StratifiedSampler(other, cohort=4, policy=_policy()).new_state(
        np.array([0, 1] * 10), target=Simulation(rng=0))
    with pytest.raises(PartitionMismatch, match="start a new state on these strata"):
        StratifiedSampler(strata, cohort=10, policy=_policy()).select(state, 0)


def test_a_fleet_below_the_floor_is_refused_not_sampled() -> None:
    strata, fleet = row_strata({"islet": 2})
    sampler = StratifiedSampler(strata, cohort=2, policy=_policy(cap=3))
    state = sampler.new_state(fleet, target=Simulation(rng=0))
    with pytest.raises(CohortTooSmall, match="below min_stratum_cohort=5"):
        sampler.select(state, 0)
    assert state.used.sum() == 0
    assert state.merges == []


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"mode": "random"}, "mode='random' is not one of"),
    ({"mode": "neyman"}, "neyman' needs a per-stratum sigma"),
    ({"cohort": 0}, "cohort=0 is below the limit"),
    ({"policy": None}, "policy=None is a NoneType"),
])
def test_sampler_refuses_bad_configuration(kwargs: dict[str, object], match: str) -> None:
    strata, _ = row_strata(SEED_POPULATIONS)
    config: dict[str, object] = {"cohort": 10, "policy": _policy(), **kwargs}
    with pytest.raises(InvalidInput, match=match):
        StratifiedSampler(strata, **config)  # type: ignore[arg-type]


def test_strata_from_model_error_are_refused() -> None:
    strata, _ = row_strata(SEED_POPULATIONS)
    with pytest.raises(InvalidInput, match="is derived from the model"):
        Strata(strata.partition, basis="model_error")


def test_neyman_sampler_follows_sigma() -> None:
    strata, fleet = row_strata({"a": 200, "b": 200})
    sampler = StratifiedSampler(strata, cohort=30, policy=_policy(cap=2), mode="neyman",
                                sigma={"a": 1.0, "b": 2.0})
    result = sampler.select(sampler.new_state(fleet, target=Simulation(rng=0)), 0)
    assert result.table.wanted.tolist() == [10, 20]


@settings(max_examples=25, deadline=None)
@given(pops=st.lists(st.integers(0, 400), min_size=2, max_size=8).filter(
           lambda xs: sum(xs) >= 40),
       cap=st.integers(1, 3), floor=st.integers(0, 6), data=st.data())
def test_every_round_keeps_its_books(pops: list[int], cap: int, floor: int,
                                     data: st.DataObject) -> None:
    # Contract: seats sum to the cohort, filled + shortfall = wanted, no repeats, caps
    # held, eligible counts match the clients, every shortfall has a reason.
    strata, fleet = row_strata({f"s{i}": n for i, n in enumerate(pops)})
    cohort = data.draw(st.integers(1, sum(pops) // 4))
    mode = data.draw(st.sampled_from(["proportional", "sqrt", "equal"]))
    policy = ParticipationPolicy(participation_cap=cap, epsilon_per_round=0.1,
                                 rounds_per_epoch=4)
    sampler = StratifiedSampler(strata, cohort=cohort, policy=policy, mode=mode,
                                min_stratum_cohort=floor)
    state = sampler.new_state(fleet, target=Simulation(rng=data.draw(st.integers(0, 99))))
    for r in range(4):
        eligible = int((state.used < cap).sum())
        if cohort > eligible:
            with pytest.raises(InvalidInput, match="exceeds the eligible fleet"):
                sampler.select(state, r)
            break
        try:
            result = sampler.select(state, r)
        except CohortTooSmall:
            assert eligible < floor
            break
        table = result.table
        assert int(table.wanted.sum()) == cohort
        assert (table.filled + table.shortfall == table.wanted).all()
        assert int(table.filled.sum()) == result.clients.size
        assert np.unique(result.clients).size == result.clients.size
        assert ((table.shortfall > 0) == (table.reason != "")).all()
        assert int(table.eligible_after.sum()) == int((state.used < cap).sum())
    assert state.used.max() <= cap


def test_a_merged_group_is_sampled_uniformly_across_its_members() -> None:
    # c (3 clients) merges into b (40): the 43 clients of b+c must be equally likely.
    strata, fleet = row_strata({"a": 300, "b": 40, "c": 3})
    sampler = StratifiedSampler(strata, cohort=30, policy=_policy(cap=1, rounds=1))
    group = np.flatnonzero(fleet != strata.positions(["a"])[0])
    hits = np.zeros(fleet.size, dtype=np.int64)
    draws, seats = 600, 0
    for seed in range(draws):
        result = sampler.select(sampler.new_state(fleet, target=Simulation(rng=seed)), 0)
        hits[result.clients] += 1
        seats = int(result.counts["filled"][result.groups.index("b+c")])
    observed = hits[group]
    assert stats.chisquare(observed, np.full(group.size, draws * seats / group.size)
                           ).pvalue > 1e-6


@pytest.mark.parametrize("slots", [4, 2**16])  # 4 slots: nearly every proposal collides
def test_capped_draw_round_after_round_equals_draw_capped(
        slots: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # CappedDraw keeps its counts in layout order, its proposal layout and a
    # repeat-finding table between rounds; every round must still give exactly
    # draw_capped's clients (per-client counts, np.unique) for the same generator,
    # and its recorded counts must stay those of the clients.
    from spatialdp.sampling import draw

    monkeypatch.setattr(draw, "_SLOTS", slots)
    rng = np.random.default_rng(5)
    sizes = rng.integers(3, 400, 40)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    order = rng.permutation(int(offsets[-1])).astype(np.int32)
    used = np.zeros(order.size, dtype=np.uint16)
    kept = draw.CappedDraw(order, offsets, used[order])
    wanted = rng.integers(0, 12, sizes.size)
    cap = 2
    for round_index in range(30):
        eligible = np.add.reduceat((used[order] < cap).astype(np.int64), offsets[:-1])
        take = np.minimum(wanted, eligible)
        positions = kept.positions(cap, take, eligible, np.random.default_rng(round_index))
        got = kept.clients(positions)
        expected = draw_capped(order, offsets, used, cap, take, eligible,
                               np.random.default_rng(round_index))
        np.testing.assert_array_equal(got, expected)
        assert got.dtype == np.int64
        used[got] = kept.record(positions)
        np.testing.assert_array_equal(kept.used_at, used[order])
    assert (used == cap).any()  # caps bound, so the kept layout was rebuilt on the way


def test_select_gives_the_same_cohorts_as_before_its_speed_ups() -> None:
    # Digest of every round's clients, counts, groups and score (with merges), recorded
    # with the sampler before the cached allocation, lazy adjacency and CappedDraw.
    import hashlib

    from spatialdp.datasets import us_states_partition

    strata = Strata(us_states_partition(), basis="administrative")
    rng = np.random.default_rng(1)
    client_strata = rng.choice(48, size=4000, p=rng.dirichlet(np.full(48, 0.3)))
    sampler = StratifiedSampler(strata, cohort=500, policy=_policy(cap=2, rounds=10))
    state = sampler.new_state(client_strata, target=Simulation(rng=1))
    digest = hashlib.sha256()
    for round_index in range(10):
        result = sampler.select(state, round_index)
        digest.update(result.clients.tobytes())
        digest.update(repr(result.score).encode())
        for key in sorted(result.counts):
            digest.update(result.counts[key].tobytes())
        digest.update("|".join(result.groups).encode())
    assert len(state.merges) == 33
    assert digest.hexdigest()[:16] == "da85b5ce5a5a218e"


@settings(max_examples=30, deadline=None)
@given(labels=st.lists(st.integers(0, 6), max_size=60), extra=st.integers(0, 3))
def test_group_layout_is_the_stable_sort_by_group(labels: list[int], extra: int) -> None:
    # The counting sort must give exactly np.argsort(kind="stable"), empty groups included.
    from spatialdp.sampling.draw import group_layout

    values = np.array(labels, dtype=np.int32)
    n_groups = 7 + extra
    order, offsets = group_layout(values, n_groups)
    np.testing.assert_array_equal(order, np.argsort(values, kind="stable"))
    np.testing.assert_array_equal(offsets,
                                  np.concatenate([[0], np.cumsum(np.bincount(values,
                                                                             minlength=n_groups))]))
    assert offsets.dtype == np.int64


@pytest.mark.parametrize("cap", [2, 300])  # one-byte counts in the draw's layout, and two
def test_select_draws_what_draw_capped_draws_on_the_states_counts(cap: int) -> None:
    # The sampler's draw keeps its own counts in layout order and a repeat table; each
    # round must select exactly what the reference draw (per-client counts, np.unique)
    # selects from the state's counts with the round's generator.
    strata, fleet = row_strata({"a": 400, "b": 90, "c": 25})
    rounds = cap + 3
    sampler = StratifiedSampler(strata, cohort=60, policy=_policy(cap=cap, rounds=rounds),
                                min_stratum_cohort=0)
    state = sampler.new_state(fleet, target=Simulation(rng=4))
    order = np.argsort(fleet, kind="stable")
    offsets = np.concatenate([[0], np.cumsum(np.bincount(fleet, minlength=3))])
    for r in range(rounds):
        used = state.used.copy()
        eligible = np.bincount(fleet[used < cap], minlength=3)
        result = sampler.select(state, r)
        take = result.counts["filled"]
        expected = draw_capped(order, offsets, used, cap, take, eligible, sampler._rng(state, r))
        np.testing.assert_array_equal(result.clients, expected)
        np.testing.assert_array_equal(state.used, used + np.isin(np.arange(fleet.size),
                                                                 expected))
    assert (state.used == cap).any() == (cap == 2)  # caps bound (at 2) on the way


def test_select_is_uniform_within_each_stratum_given_the_counts() -> None:
    # After a first round under cap 1, every later round id drawn from the same state
    # must pick each eligible client of a stratum with the same probability (take /
    # eligible) and no capped client: the sampler's own path (layout-ordered one-byte
    # counts, repeat table, cached proposal layout), not only the reference draw.
    import copy

    strata, fleet = row_strata({"a": 300, "b": 40})
    sampler = StratifiedSampler(strata, cohort=30, policy=_policy(cap=1, rounds=2000),
                                min_stratum_cohort=0)
    start = sampler.new_state(fleet, target=Simulation(rng=2))
    sampler.select(start, 0)
    draws = 1500
    hits = np.zeros(fleet.size, dtype=np.int64)
    for r in range(1, draws + 1):
        state = copy.deepcopy(start)
        hits[sampler.select(state, r).clients] += 1
    capped = start.used >= 1
    assert hits[capped].sum() == 0
    for s in range(2):
        pool = np.flatnonzero((fleet == s) & ~capped)
        take = hits[pool].sum() / draws
        assert take == int(take)  # every round fills the stratum's seats exactly
        expected = np.full(pool.size, draws * take / pool.size)
        assert stats.chisquare(hits[pool], expected).pvalue > 1e-6
