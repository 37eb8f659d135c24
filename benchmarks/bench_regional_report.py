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
where per-value float release noise dominates. Best of ``--repeat`` interleaved
runs; peak memory in a separate, untimed run (``_common.MEMORY_METHOD``). ``--scaling`` prints a
table over 10^4..10^7 clients. The last line is ``ratio: X`` = baseline / ours.
"""

from __future__ import annotations

import argparse

import _common
import geopandas as gpd
import numpy as np
import pandas as pd

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


def time_both(n: int, partition: Partition, repeat: int) -> tuple[float, float, float, float]:
    frame = client_reports(n, partition, np.random.default_rng(0))
    regions = partition.regions
    ours(frame, partition)  # warm caches on both sides
    baseline(frame, regions)
    results = _common.measure({"baseline": lambda: baseline(frame, regions),
                       "ours": lambda: ours(frame, partition)}, repeat)
    (t_base, m_base), (t_ours, m_ours) = results["baseline"], results["ours"]
    return t_base, t_ours, m_base, m_ours


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--partition", choices=["states", "h3"], default="states")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--scaling", action="store_true",
                        help="a table over 10^4..10^7 clients instead of one size")
    args = parser.parse_args()
    partition = partition_for(args.partition)
    print(f"partition: {partition.key} ({partition.n_regions:,} regions); metrics: loss, "
          f"7-bucket histogram, count bucket; epsilon {EPSILON} each; floor {FLOOR}")
    if args.scaling:
        print("| clients | groupby + noise (s) | regional_report (s) | ratio | "
              "peak MB groupby | peak MB ours |")
        print("|---:|---:|---:|---:|---:|---:|")
        for n in (10**4, 10**5, 10**6, 10**7):
            tb, to, mb, mo = time_both(n, partition, max(1, args.repeat // (1 + n // 10**6)))
            print(f"| {n:,} | {tb:.3f} | {to:.3f} | {tb / to:.2f} | {mb:.0f} | {mo:.0f} |")
        return
    tb, to, mb, mo = time_both(args.n, partition, args.repeat)
    print(f"clients: {args.n:,}")
    print(f"pandas groupby + same noise, error bars, join: {tb:.3f} s (peak {mb:.0f} MB)")
    print(f"regional_report (validates, charges, noises once): {to:.3f} s (peak {mo:.0f} MB)")
    print(f"ratio: {tb / to:.2f}")


if __name__ == "__main__":
    main()
