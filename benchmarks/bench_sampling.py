"""Stratified capped selection: StratifiedSampler vs vectorised numpy, 100 rounds.

Target: a 1,000-client cohort from 1,000,000 clients in 200 strata, with a
participation cap, for 100 consecutive rounds.

- workload: 200 strata = 200 H3 cells (resolution 4, a disk round one cell),
  clients spread over them with Zipf weights (the largest stratum ~170,000
  clients, the smallest ~850), sqrt allocation, cap 3 per epoch of 100 rounds.
- ours: ``StratifiedSampler(...)``, ``new_state`` then ``select`` for 100 rounds,
  all inside the timed call: the sampler and the clients' layout are built in it,
  and every round runs the library's whole select path (the merge check,
  allocation, the capped draw from a per-round generator seeded from the state's
  secret, shortfall counts, the coverage score and the state's history).
- vectorised numpy (the strongest baseline, ``ratio:``): what an expert writes
  for this workload and nothing more. Clients sorted by stratum once (a counting
  sort: SciPy's COO to CSR conversion, 2-3x faster than numpy's radix argsort of
  16-bit keys, the same order), seats apportioned once, a ``used`` count array
  (one byte per client below cap 255) and per-stratum
  eligible counts; per round one array of uniform proposals for all strata at
  once (oversampled by size / eligible), capped proposals dropped, repeats dropped
  by ``np.unique``, the first ``take`` per stratum kept by rank; a stratum with too
  few proposals is drawn by ``choice`` among its eligible clients. No per-stratum
  Python loop, no rescan of the 1M clients per round; no merges, no score. It
  takes each round's generator as the library seeds a Simulation's rounds (and
  oversamples by the library's factor), so both sides draw the same random
  numbers and must select the same clients.
- numpy per stratum (the old baseline, ``ratio_per_stratum:``): per round and stratum
  ``ids[used[ids] < cap]`` and ``Generator.choice``; printed on its own line.
- the seed's list-based implementation: measured on ``--loop-rounds`` rounds and
  scaled to 100; printed for reference only.

Before timing, the benchmark asserts that the vectorised baseline selects exactly
ours' clients in every round, and that the per-stratum baseline (its own
generator) takes the same number of clients from every stratum in every round;
every cohort is checked for repeats and caps. Workloads where strata run dry
(``--cap 1 --cohort 5000``) stop there: ours merges exhausted strata, the
baselines do not. Timing follows the convention of
``benchmarks/_common.py`` (one warm-up call each, median of ``--repeats``
interleaved runs, wall and CPU time, peak memory from one extra run). Every build
(sampler, layout, sort) is inside the timed call, so ``ratio_cold:`` (no warm-up,
a fresh Strata each run) differs from ``ratio:`` only by process caches.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

import h3
import numpy as np
from _common import check_equal, compare, machine_line, print_results, ratio_line
from scipy import sparse

from spatialdp.geo import Partition
from spatialdp.privacy.target import Simulation
from spatialdp.sampling import ParticipationPolicy, Strata, StratifiedSampler
from spatialdp.sampling.allocation import apportion


def workload(n_clients: int, n_strata: int, seed: int) -> tuple[Strata, np.ndarray]:
    centre = h3.latlng_to_cell(40.0, -100.0, 4)
    k = 1
    while len(h3.grid_disk(centre, k)) < n_strata:
        k += 1
    cells = sorted(h3.grid_disk(centre, k))[:n_strata]
    strata = Strata(Partition.from_h3_cells(cells, name="bench"), basis="h3")
    gen = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, n_strata + 1)
    weights = gen.permutation(weights / weights.sum())
    client_strata = gen.choice(n_strata, size=n_clients, p=weights)
    return strata, client_strata


def ours(strata: Strata, client_strata: np.ndarray, cohort: int, rounds: int, cap: int,
         seed: int) -> list[np.ndarray]:
    policy = ParticipationPolicy(participation_cap=cap, epsilon_per_round=0.1,
                                 rounds_per_epoch=rounds)
    sampler = StratifiedSampler(strata, cohort=cohort, policy=policy, mode="sqrt")
    state = sampler.new_state(client_strata, target=Simulation(rng=seed))
    return [sampler.select(state, r).clients for r in range(rounds)]


def round_generators(seed: int, rounds: int) -> list[np.random.Generator]:
    """One generator per round, seeded as the library seeds a Simulation's rounds.

    Both sides then draw the same random numbers, so their cohorts can be asserted
    identical (creating them costs the baseline about 10 us a round).
    """
    entropy = int(np.random.default_rng(seed).integers(2**63))
    return [np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(0, r)))
            for r in range(rounds)]


def numpy_vectorised(client_strata: np.ndarray, n_strata: int, cohort: int, rounds: int,
                     cap: int, seed: int) -> list[np.ndarray]:
    """The expert's vectorised draw: all strata at once per round, no rescans."""
    n = client_strata.size
    by_stratum = sparse.coo_array(  # a counting sort: CSR keeps each row's columns in order
        (np.ones(n, dtype=bool), (client_strata.astype(np.int32), np.arange(n, dtype=np.int32))),
        shape=(n_strata, n)).tocsr()
    order, starts = by_stratum.indices, by_stratum.indptr[:-1].astype(np.int64)
    sizes = np.diff(by_stratum.indptr).astype(np.int64)
    seats, _ = apportion(sizes, cohort, "sqrt")
    used = np.zeros(n, dtype=np.uint8 if cap < 255 else np.uint16)
    eligible = sizes.copy()
    out = []
    for gen in round_generators(seed, rounds):
        take = np.minimum(seats, eligible)
        proposals = np.ceil(1.6 * take * sizes / np.maximum(eligible, 1)).astype(np.int64) + 6
        group = np.repeat(np.arange(n_strata), proposals)
        client = order[starts[group] + (gen.random(group.size) * sizes[group]).astype(np.int64)]
        ok = used[client] < cap
        client, group = client[ok], group[ok]
        _, first = np.unique(client, return_index=True)
        first.sort()  # first occurrences, in proposal order (grouped by stratum)
        client, group = client[first], group[first]
        rank = np.arange(group.size) - np.searchsorted(group, group)
        keep = rank < take[group]
        got = np.bincount(group[keep], minlength=n_strata)
        short = np.flatnonzero(got < take)
        pick = client[keep & ~np.isin(group, short)] if short.size else client[keep]
        extra = []
        for s in short:  # rare: too few distinct eligible proposals
            ids = order[starts[s]:starts[s] + sizes[s]]
            extra.append(gen.choice(ids[used[ids] < cap], take[s], replace=False, shuffle=False))
        pick = np.concatenate([pick, *extra])
        used[pick] += 1
        eligible -= np.bincount(client_strata[pick[used[pick] >= cap]], minlength=n_strata)
        out.append(pick)
    return out


def numpy_per_stratum(client_strata: np.ndarray, n_strata: int, cohort: int, rounds: int,
                      cap: int, seed: int) -> list[np.ndarray]:
    order = np.argsort(client_strata, kind="stable")
    sizes = np.bincount(client_strata, minlength=n_strata)
    members = np.split(order, np.cumsum(sizes)[:-1])
    seats, _ = apportion(sizes, cohort, "sqrt")
    used = np.zeros(client_strata.size, dtype=np.uint16)
    gen = np.random.default_rng(seed)
    out = []
    for _ in range(rounds):
        picks, notes = [], {}
        for s in range(n_strata):
            ids = members[s]
            eligible = ids[used[ids] < cap]
            k = min(int(seats[s]), eligible.size)
            if k < seats[s]:
                notes[s] = f"capped: wanted {seats[s]}, {eligible.size} eligible"
            pick = gen.choice(eligible, size=k, replace=False)
            used[pick] += 1
            picks.append(pick)
        out.append(np.concatenate(picks))
    return out


def seed_list_based(client_strata: np.ndarray, n_strata: int, cohort: int, rounds: int,
                    cap: int, seed: int) -> tuple[float, float]:
    """The seed's reference implementation (lists of string ids, a used dict).

    Returns the setup time and the time of ``rounds`` rounds (seconds).
    """
    start = time.perf_counter()
    clients: list[list[str]] = [[] for _ in range(n_strata)]
    for i, s in enumerate(client_strata.tolist()):
        clients[s].append(f"c{i}")
    used: list[dict[str, int]] = [{} for _ in range(n_strata)]
    seats, _ = apportion(np.array([len(c) for c in clients]), cohort, "sqrt")
    rnd = random.Random(seed)
    setup = time.perf_counter() - start
    for _ in range(rounds):
        for s in range(n_strata):
            pool = [c for c in clients[s] if used[s].get(c, 0) < cap]
            picked = rnd.sample(pool, min(int(seats[s]), len(pool)))
            for c in picked:
                used[s][c] = used[s].get(c, 0) + 1
    return setup, time.perf_counter() - start - setup


def check(cohorts: list[np.ndarray], cohort: int, cap: int, n: int, name: str) -> int:
    """Refuse a void run (oversized rounds, repeats, caps broken); return the clients drawn."""
    counts = np.zeros(n, dtype=np.int64)
    for c in cohorts:
        if c.size > cohort or np.unique(c).size != c.size:
            raise SystemExit(f"{name}: a round has {c.size} clients or repeats: void")
        counts[c] += 1
    if counts.max() > cap:
        raise SystemExit(f"{name}: a client took part {counts.max()} times (cap {cap}): void")
    return int(counts.sum())


def same_cohorts(cohort: int, cap: int, n: int
                 ) -> Callable[[list[np.ndarray], list[np.ndarray]], bool]:
    """Equality of two answers: both valid, and the same clients in every round."""
    def equal(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
        check(a, cohort, cap, n, "a contender")
        check(b, cohort, cap, n, "a contender")
        return len(a) == len(b) and all(np.array_equal(np.sort(x), np.sort(y))
                                        for x, y in zip(a, b, strict=True))

    return equal


def same_per_stratum(client_strata: np.ndarray, n_strata: int, cohort: int, cap: int
                     ) -> Callable[[list[np.ndarray], list[np.ndarray]], bool]:
    """Equality for other generators: both valid, the same clients per stratum every round."""
    def per_round(cohorts: list[np.ndarray]) -> np.ndarray:
        check(cohorts, cohort, cap, client_strata.size, "a contender")
        return np.array([np.bincount(client_strata[c], minlength=n_strata) for c in cohorts])

    def equal(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
        return len(a) == len(b) and bool(np.array_equal(per_round(a), per_round(b)))

    return equal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=1_000_000)
    parser.add_argument("--strata", type=int, default=200)
    parser.add_argument("--cohort", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--cap", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--loop-rounds", type=int, default=2)
    args = parser.parse_args()
    print(machine_line())
    strata, client_strata = workload(args.clients, args.strata, args.seed)
    sizes = np.bincount(client_strata, minlength=args.strata)
    print(f"{args.clients:,} clients in {args.strata} strata (sizes {sizes.min():,} to "
          f"{sizes.max():,}), cohort {args.cohort:,}, cap {args.cap}, {args.rounds} rounds")

    def run_ours() -> list[np.ndarray]:
        return ours(strata, client_strata, args.cohort, args.rounds, args.cap, args.seed)

    def run_vectorised() -> list[np.ndarray]:
        return numpy_vectorised(client_strata, args.strata, args.cohort, args.rounds, args.cap,
                                args.seed)

    def run_per_stratum() -> list[np.ndarray]:
        return numpy_per_stratum(client_strata, args.strata, args.cohort, args.rounds, args.cap,
                                 args.seed)

    wanted = args.cohort * args.rounds
    print("clients drawn over the epoch (shortfalls where caps bind): " + ", ".join(
        f"{name} {check(run(), args.cohort, args.cap, args.clients, name):,} of {wanted:,}"
        for name, run in (("ours", run_ours), ("vectorised numpy", run_vectorised))))
    identical = same_cohorts(args.cohort, args.cap, args.clients)
    per_stratum = same_per_stratum(client_strata, args.strata, args.cohort, args.cap)
    check_equal({"ours": run_ours, "vectorised numpy": run_vectorised}, identical)
    check_equal({"ours": run_ours, "numpy per stratum": run_per_stratum}, per_stratum)
    results = compare({"ours": run_ours, "vectorised numpy": run_vectorised,
                       "numpy per stratum": run_per_stratum}, repeats=args.repeats, check=None)
    print_results(results, f"{args.rounds} rounds, every build inside the call (one warm-up "
                           "call each; asserted: vectorised numpy selects the same clients as "
                           "ours in every round, numpy per stratum the same number per "
                           "stratum):")
    cold = compare({"ours": (lambda: Strata(strata.partition, basis="h3"),
                             lambda fresh: ours(fresh, client_strata, args.cohort, args.rounds,
                                                args.cap, args.seed)),
                    "vectorised numpy": run_vectorised},
                   repeats=args.repeats, warmup=0, check=identical, memory=False)
    print_results(cold, "cold: no warm-up, ours on a fresh Strata each run:")
    if args.loop_rounds:
        m = min(args.loop_rounds, args.rounds)
        setup_s, rounds_s = seed_list_based(client_strata, args.strata, args.cohort, m,
                                            args.cap, args.seed)
        loop_s = setup_s + rounds_s * args.rounds / m
        print(f"  seed's list-based      {loop_s:8.3f} s   (setup {setup_s:.2f} s + {m} rounds "
              f"measured, scaled to {args.rounds}; list / ours = "
              f"{loop_s / results['ours'].median:.1f})")
    print(ratio_line(results, "numpy per stratum", label="ratio_per_stratum"))
    print(ratio_line(cold, "vectorised numpy", label="ratio_cold"))
    print(ratio_line(results, "vectorised numpy"))


if __name__ == "__main__":
    main()
