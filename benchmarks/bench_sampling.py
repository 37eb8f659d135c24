"""Stratified capped selection: StratifiedSampler vs numpy per stratum, 100 rounds.

Target: a 1,000-client cohort from 1,000,000 clients in 200 strata, with a
participation cap, for 100 consecutive rounds, under 2 s in total.

- workload: 200 strata = 200 H3 cells (resolution 4, a disk round one cell),
  clients spread over them with Zipf weights (the largest stratum ~170,000
  clients, the smallest ~850), sqrt allocation, cap 3 per epoch of 100 rounds.
- ours: ``StratifiedSampler.new_state`` then ``select`` for 100 rounds (the
  per-round merge check, allocation, vectorised capped draw, shortfall counts,
  coverage score and state updates are all inside the timing).
- numpy per stratum (the strong baseline): the members of every stratum
  precomputed once (one argsort), then per round and per stratum
  ``ids[used[ids] < cap]`` and ``Generator.choice(eligible, k, replace=False)``,
  ``used[pick] += 1``, shortfalls noted in a dict. Same seats per stratum.
- the seed's list-based implementation (``StratumState`` with Python lists and a
  ``used`` dict, ``random.sample``): measured on ``--loop-rounds`` rounds and
  scaled to 100; printed for reference only.

Both contenders' cohorts are checked: no round above the cohort, no repeats, caps
honoured; the clients drawn over the epoch are printed (below the cohort x rounds
where caps bind, e.g. ``--cap 1 --cohort 5000``).
The last line is ``ratio: X`` = baseline time / our time (best of ``--repeats``
interleaved runs).
"""

from __future__ import annotations

import argparse
import random
import time

import h3
import numpy as np
from _common import MEMORY_METHOD, measure, ratio_line

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=1_000_000)
    parser.add_argument("--strata", type=int, default=200)
    parser.add_argument("--cohort", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--cap", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--loop-rounds", type=int, default=2)
    args = parser.parse_args()
    print(f"memory: {MEMORY_METHOD}")
    strata, client_strata = workload(args.clients, args.strata, args.seed)
    sizes = np.bincount(client_strata, minlength=args.strata)
    print(f"{args.clients:,} clients in {args.strata} strata (sizes {sizes.min():,} to "
          f"{sizes.max():,}), cohort {args.cohort:,}, cap {args.cap}, {args.rounds} rounds")

    def run_ours() -> list[np.ndarray]:
        return ours(strata, client_strata, args.cohort, args.rounds, args.cap, args.seed)

    def run_numpy() -> list[np.ndarray]:
        return numpy_per_stratum(client_strata, args.strata, args.cohort, args.rounds, args.cap,
                                 args.seed)

    drawn = {"ours": check(run_ours(), args.cohort, args.cap, args.clients, "ours"),
             "numpy per stratum": check(run_numpy(), args.cohort, args.cap, args.clients,
                                        "numpy per stratum")}
    wanted = args.cohort * args.rounds
    print("clients drawn over the epoch (shortfalls where caps bind): " + ", ".join(
        f"{k} {v:,} of {wanted:,}" for k, v in drawn.items()))
    results = measure({"ours": run_ours, "numpy per stratum": run_numpy}, args.repeats)
    ours_s = results["ours"][0]
    print(f"StratifiedSampler, {args.rounds} rounds: {ours_s:.3f} s in total "
          f"({1000 * ours_s / args.rounds:.2f} ms per round; target: under 2 s)")
    for name, (seconds, mb) in results.items():
        print(f"  {name:<18} {seconds:8.3f} s   peak {mb:8.1f} MB")
    if args.loop_rounds:
        m = min(args.loop_rounds, args.rounds)
        setup_s, rounds_s = seed_list_based(client_strata, args.strata, args.cohort, m,
                                            args.cap, args.seed)
        loop_s = setup_s + rounds_s * args.rounds / m
        print(f"  seed's list-based  {loop_s:8.3f} s   (setup {setup_s:.2f} s + {m} rounds "
              f"measured, scaled to {args.rounds}; list / ours = {loop_s / ours_s:.1f})")
    print(ratio_line(results["numpy per stratum"][0], ours_s))


if __name__ == "__main__":
    main()
