"""Regional report vs what a competent analyst would write: pandas groupby + the same noise.

Clients report a clipped loss, a 7-bucket error histogram and a sample-count
bucket (device_report's output, with its provenance columns). Both sides
publish, per region, the noised mean of each metric with the SAME release noise
(``LaplaceMechanism.release``, OS entropy) and suppress regions under the floor.

- Baseline: ``frame.groupby("region_id")[columns]`` sums and sizes, the same
  noise per metric, then the same published product a competent analyst would
  build by hand: per metric the noised mean, its exact 95% Laplace error bar
  (``scale * ln(1/alpha) / n``) and interval, the cohort and the suppression
  flag, joined onto the region geometries (``regions.join``). It checks nothing.
- Ours: :func:`spatialdp.regional_report`, which also validates everything
  (unique client ids, spec fingerprints, partition version, region ids, finite
  values, gross clipping) before it charges, then noises once and builds the
  GeoDataFrames.

Partitions: the 48 states, or an H3 resolution-5 cover of them (~30k cells),
where per-value float release noise dominates.

Timing follows the convention of ``benchmarks/_common.py``: median of
``--repeat`` interleaved runs (min and max printed), wall and CPU time, one
warm-up call each, peak memory in a separate, untimed run
(``_common.MEMORY_METHOD``). The noise makes the published values differ, so
before timing the benchmark asserts that everything deterministic agrees, per
metric: the regions and their order, the cohorts, the suppression flags and
the error bars (to 1e-12 relative), and that every published value lies within
its error bar's distance times 20 of the true mean (a 20-fold bar is exceeded
with probability ``alpha**20``). ``ratio_cold:`` is the first report in a fresh
Python process against the baseline's first run in one (data generated
untimed in the child; spatialdp's import of its federated modules, the noise
tables and the partition's caches fall inside ours). ``--scaling`` prints a
table over 10^4..10^7 clients with peak memory. The last line is ``ratio: X``
= baseline median / ours (wall; CPU in the same line).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
from _common import (
    Timing,
    compare,
    compare_fresh,
    fresh_process,
    machine_line,
    print_results,
    ratio_line,
    scaling_table,
)

from spatialdp.datasets import load_us_states, us_states_partition
from spatialdp.federated import HistogramSpec, MetricSpec, device_report, regional_report
from spatialdp.federated.device_specs import count_bucket_spec
from spatialdp.geo import Partition
from spatialdp.privacy import LaplaceMechanism, Unaccounted

LOSS = MetricSpec("loss", 0.0, 2.5)
HIST = HistogramSpec("err", edges=(0.5, 1, 2, 5, 10, 25))
COUNT = count_bucket_spec()
SPECS = [LOSS, HIST, COUNT]
EPSILON = 0.4
ALPHA = 0.05
FLOOR = 50


def partition_for(kind: str) -> Partition:
    if kind == "states":
        return us_states_partition()
    return Partition.from_h3_cover(load_us_states(), 5, containment="overlap", name="us-r5")


def client_reports(n: int, partition: Partition, rng: np.random.Generator) -> pd.DataFrame:
    """One example per client, through the device module (so the provenance is real)."""
    ids = np.asarray(partition.region_ids)
    weights = rng.pareto(1.2, ids.size) + 0.05  # skewed, like a real fleet
    examples = pd.DataFrame({
        "client_id": np.arange(n),
        "region_id": rng.choice(ids, size=n, p=weights / weights.sum()),
        "loss": rng.gamma(2.0, 0.3, n),
        "error": rng.lognormal(0.5, 1.0, n),
    })
    return device_report(examples, loss_spec=LOSS, hist_spec=HIST, partition=partition)


def baseline(frame: pd.DataFrame, regions: gpd.GeoDataFrame) -> dict[str, pd.DataFrame]:
    """What a competent analyst writes: groupby sums and sizes, the same noise, a join."""
    columns = {"loss": ["loss"], "err": HIST.columns, "count_bucket": ["count_bucket"]}
    sens = {"loss": LOSS.sensitivity, "err": HIST.sensitivity,
            "count_bucket": COUNT.sensitivity}
    flat = [c for cols in columns.values() for c in cols]
    grouped = frame.groupby("region_id", sort=False, observed=True)[flat]
    sums, counts = grouped.sum(), grouped.size()
    shown = counts[counts >= FLOOR].index
    cohort = counts[shown].to_numpy()
    out = {}
    for name, cols in columns.items():
        mechanism = LaplaceMechanism(EPSILON, sens[name])
        noisy = mechanism.release(sums.loc[shown, cols].to_numpy()) / cohort[:, None]
        table = pd.DataFrame(noisy, index=shown, columns=cols)
        table["value"] = noisy[:, -1]
        table["error_bar"] = mechanism.scale * np.log(1 / ALPHA) / cohort
        table["ci_low"] = table["value"] - table["error_bar"]
        table["ci_high"] = table["value"] + table["error_bar"]
        table["cohort"] = cohort
        joined = regions[["geometry"]].join(table)
        joined["suppressed"] = joined["value"].isna()
        out[name] = joined
    return out


def ours(frame: pd.DataFrame, partition: Partition) -> object:
    # epsilon: the release's total; EPSILON per metric, as the baseline spends it.
    return regional_report(frame, partition, SPECS, epsilon={s.name: EPSILON for s in SPECS},
                           min_cohort=FLOOR, alpha=ALPHA, target=Unaccounted("benchmark"))


def deterministic_parts_agree(frame: pd.DataFrame, partition: Partition
                              ) -> Callable[[Any, Any], bool]:
    """Return a check of what the noise cannot change (see the module docstring)."""
    true_means = frame.groupby("region_id", observed=True)[["loss", *HIST.columns,
                                                            "count_bucket"]].mean()

    def frames(answer: Any) -> dict[str, pd.DataFrame]:
        return answer if isinstance(answer, dict) else answer.frames

    def agree(a: Any, b: Any) -> bool:
        for name, column in (("loss", "loss"), ("err", HIST.columns[-1]),
                             ("count_bucket", "count_bucket")):
            x, y = frames(a)[name], frames(b)[name]
            if not x.index.equals(y.index) or not x["suppressed"].equals(y["suppressed"]):
                return False
            shown = ~x["suppressed"].to_numpy()
            if not np.array_equal(x["cohort"].to_numpy()[shown].astype(np.int64),
                                  y["cohort"].to_numpy()[shown].astype(np.int64)):
                return False
            bars = x["error_bar"].to_numpy()[shown]
            if not np.allclose(bars, y["error_bar"].to_numpy()[shown], rtol=1e-12, atol=0):
                return False
            truth = true_means.loc[x.index[shown], column].to_numpy()
            for f in (x, y):
                if np.any(np.abs(f["value"].to_numpy()[shown] - truth) > 20 * bars):
                    return False
        return True

    return agree


def time_both(n: int, partition: Partition, repeat: int) -> dict[str, Timing]:
    frame = client_reports(n, partition, np.random.default_rng(0))
    regions = partition.regions
    return compare({"ours": lambda: ours(frame, partition),
                    "baseline": lambda: baseline(frame, regions)},
                   repeats=repeat, check=deterministic_parts_agree(frame, partition))


def time_cold(n: int, kind: str, repeat: int) -> dict[str, Timing]:
    """First report in a fresh process, each side (data made untimed in the child)."""
    setup = ("import numpy as np, bench_regional_report as b\n"
             f"partition = b.partition_for({kind!r})\n"
             f"frame = b.client_reports({n}, partition, np.random.default_rng(0))\n")
    return compare_fresh(
        {"ours": fresh_process("", setup_first(setup, "b.ours(frame, partition)")),
         "baseline": fresh_process("", setup_first(setup, "b.baseline(frame, partition.regions)"))},
        repeats=repeat)


def setup_first(setup: str, statement: str) -> str:
    """Run ``setup`` untimed inside the child, then time ``statement`` (the first call)."""
    return (f"exec(compile({setup!r}, '<setup>', 'exec'))\n"
            "cpu0, wall0 = time.process_time(), time.perf_counter()\n" + statement)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--partition", choices=["states", "h3"], default="states")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--scaling", action="store_true",
                        help="a table over 10^4..10^7 clients instead of one size")
    parser.add_argument("--no-cold", action="store_true", help="skip the fresh-process runs")
    args = parser.parse_args()
    partition = partition_for(args.partition)
    print(f"partition: {partition.key} ({partition.n_regions:,} regions); metrics: loss, "
          f"7-bucket histogram, count bucket; epsilon {EPSILON} each; floor {FLOOR}")
    print(machine_line())
    if args.scaling:
        rows = []
        for n in (10**4, 10**5, 10**6, 10**7):
            res = time_both(n, partition, max(3, args.repeat // (1 + n // 10**6)))
            print_results(res, f"{n:,} clients:")
            rows.append({"clients": n, "groupby + noise s": res["baseline"].median,
                         "regional_report s": res["ours"].median,
                         "ratio": res["baseline"].median / res["ours"].median,
                         "ratio CPU": res["baseline"].cpu_median / res["ours"].cpu_median,
                         "peak MB groupby": res["baseline"].peak_mb,
                         "peak MB ours": res["ours"].peak_mb})
        print(scaling_table(rows, list(rows[0])))
        return
    res = time_both(args.n, partition, args.repeat)
    print(f"clients: {args.n:,}")
    print_results(res, "steady state (one warm-up call each):", width=10)
    print("  baseline: pandas groupby + the same noise, error bars, join; ours: "
          "regional_report (validates, charges, noises once)")
    lines = []
    if not args.no_cold:
        cold = time_cold(args.n, args.partition, max(3, args.repeat // 2))
        print_results(cold, "first report in a fresh process (data made untimed):", width=10)
        lines.append(ratio_line(cold, "baseline", label="ratio_cold"))
    print("\n".join([*lines, ratio_line(res, "baseline")]))


if __name__ == "__main__":
    main()
