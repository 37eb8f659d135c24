"""The accuracy price of add/remove neighbours against replace-one, on the demo's geography.

One round of the demo (200,000 simulated devices on the 48 states, a cohort of
30,000, the demo's metrics, floors and epsilon per metric) is released many
times under each relation with seeded simulation noise; the table gives the
median published 95% error bar per metric and cohort class, their ratio, and
the share of regions suppressed. Printed as Markdown for docs/threat_model.md.

    python benchmarks/neighbours_price.py [--reps 200]
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from spatialdp.datasets import us_states_partition
from spatialdp.demo.epoch import RATIO_CLIP, plan_epoch
from spatialdp.demo.world import build_world, round_examples
from spatialdp.federated import device_report, regional_report
from spatialdp.privacy import Simulation
from spatialdp.sampling import ParticipationPolicy, StratifiedSampler

CLASSES = [(0, 400, "< 400"), (400, 800, "400-799"), (800, 10**9, ">= 800")]


def one_round(seed: int = 0) -> tuple[pd.DataFrame, object]:
    """Return one demo round's device reports and the epoch plan (the simulation path)."""
    world = build_world(us_states_partition(), 200_000, seed, 6)
    rng = np.random.default_rng([seed, 1])
    plan = plan_epoch(world, rounds=6, epsilon_per_round=0.4, rng=rng)
    sampler = StratifiedSampler(world.strata, cohort=plan.cohort, policy=ParticipationPolicy(
        plan.participation_cap, 1.0, plan.rounds), mode="sqrt",
        min_stratum_cohort=plan.min_stratum_cohort)
    state = sampler.new_state(world.client_strata, target=Simulation(rng=seed))
    cohort = sampler.select(state, 1)
    examples = round_examples(world, cohort.clients, 1, rng)
    device = device_report(examples, loss_spec=plan.loss_spec, hist_spec=plan.hist_spec,
                           ratio_clip=RATIO_CLIP, partition=world.partition)
    return device, plan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200)
    args = parser.parse_args()
    device, plan = one_round()
    exact = device.groupby("region_id", observed=True).size()
    states = us_states_partition()
    exact = exact.reindex(states.region_ids).fillna(0)
    rows = []
    bars: dict[tuple[str, str], list[np.ndarray]] = {}
    suppressed: dict[str, list[float]] = {"replace": [], "add_remove": []}
    for relation in ("replace", "add_remove"):
        sim = Simulation(rng=1)
        for _ in range(args.reps):
            report = regional_report(device, states, plan.specs, epsilon=plan.epsilons,
                                     min_cohort=plan.min_cohort, target=sim,
                                     neighbours=relation)
            for name, frame in report.frames.items():
                bars.setdefault((relation, name), []).append(frame.error_bar.to_numpy())
            suppressed[relation].append(report.suppressed_regions / states.n_regions)
    for name in plan.epsilons:
        for low, high, label in CLASSES:
            where = ((exact >= low) & (exact < high)).to_numpy()
            med = {r: float(np.nanmedian(np.stack(bars[(r, name)])[:, where]))
                   for r in ("replace", "add_remove")}
            rows.append({"metric": name, "cohort": label, "regions": int(where.sum()),
                         "bar replace": med["replace"], "bar add/remove": med["add_remove"],
                         "ratio": med["add_remove"] / med["replace"]})
    table = pd.DataFrame(rows)
    print(f"one demo round, epsilon per metric {plan.epsilons}, floor {plan.min_cohort}, "
          f"{args.reps} releases per relation (medians of the 95% error bars)\n")
    print("| " + " | ".join(table.columns) + " |")
    print("|" + "---|" * len(table.columns))
    for row in table.itertuples(index=False):
        print("| " + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v)
                                for v in row) + " |")
    print(f"\nregions suppressed: replace {np.mean(suppressed['replace']):.1%}, "
          f"add/remove {np.mean(suppressed['add_remove']):.1%} (mean over releases)")


if __name__ == "__main__":
    main()
