"""Regional report over 20,000,000 per-example rows from Parquet: pandas in one process vs Dask.

The data: ``--rows`` per-example predictions (``client_id``, ``region_id``,
``loss``) of ~50 examples per client, written once into a temporary folder as
``--files`` Parquet files sorted by client (each client in one file, as a
device store partitioned by upload batch writes them). Nothing is committed.

The product (both sides, the same): every client's clipped mean loss
(:func:`spatialdp.federated.device_report`), then the regional report over the
48 states (``Simulation(rng=0)``: same seed, so both publish the same numbers,
checked at the end).

- Baseline: ``pandas.read_parquet`` of the whole folder in one process, then
  ``device_report`` and ``regional_report`` in memory (what a competent user
  with the same library writes when the data fit).
- Ours: :func:`spatialdp.read_parquet` (file by file, divisions from the
  footers: no shuffle), then the same :func:`spatialdp.federated.device_report`
  and :func:`spatialdp.federated.regional_report` given the Dask DataFrame, on a
  ``distributed.LocalCluster`` of 1 and then 2 worker processes (1 thread each)
  started with :func:`spatialdp.worker_environment`; the driver receives only
  the per-region sums.

Memory: peak RSS over one call, of the driver (``_common.peak_memory_mb``), of
each worker (VmHWM reset before the call), and of the baseline's process.
The last line is ``ratio: X`` = baseline time / time on 2 workers. On this
shared 2-core machine timings are noisy (load from other jobs): the best of
``--repeat`` runs is kept.
"""

from __future__ import annotations

import argparse
import logging
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _common
import numpy as np
import pandas as pd

from spatialdp.datasets import us_states_partition
from spatialdp.federated import MetricSpec, RegionalReport, device_report, regional_report
from spatialdp.privacy import Simulation

LOSS = MetricSpec("loss", 0.0, 4.0)
EPSILON = 0.5
FLOOR = 50


def write_examples(folder: Path, rows: int, files: int, seed: int = 0) -> int:
    """Write ``rows`` examples into ``files`` Parquet files sorted by client; return clients."""
    states = us_states_partition()
    rng = np.random.default_rng(seed)
    regions = np.asarray(states.region_ids)
    weights = np.linspace(1, 30, regions.size)
    per_file = rows // files
    clients_per_file = max(1, per_file // 50)
    n_clients = clients_per_file * files
    client_region = pd.Categorical(
        rng.choice(regions, size=n_clients, p=weights / weights.sum()), categories=regions)
    for f in range(files):
        ids = f * clients_per_file + np.sort(rng.integers(0, clients_per_file, per_file))
        frame = pd.DataFrame({
            "client_id": ids,
            "region_id": client_region[ids],
            "loss": rng.gamma(2.0, 0.6, per_file),
        })
        frame.to_parquet(folder / f"examples-{f:04d}.parquet", index=False)
    return n_clients


def in_memory(folder: Path) -> RegionalReport:
    states = us_states_partition()
    examples = pd.read_parquet(folder)
    clients = device_report(examples, loss_spec=LOSS, partition=states)
    return regional_report(clients, states, [LOSS], epsilon=EPSILON,
                           target=Simulation(rng=0), min_cohort=FLOOR)


def on_dask(folder: Path) -> RegionalReport:
    from spatialdp import read_parquet

    states = us_states_partition()
    examples = read_parquet(folder, index="client_id", columns=["region_id", "loss"])
    clients = device_report(examples, loss_spec=LOSS, partition=states)  # a Dask DataFrame
    return regional_report(clients, states, [LOSS], epsilon=EPSILON,
                           target=Simulation(rng=0), min_cohort=FLOOR)


def _reset_peak() -> bool:
    """Reset this process's peak RSS (VmHWM) on Linux; False where that is not possible."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _rest_mb() -> float:
    """Resident size of this process now (the imports and Dask's own state)."""
    return _status_mb("VmRSS") if Path("/proc/self/status").exists() else float("nan")


def _peak_mb() -> float:
    """Peak RSS of this process since the last reset (VmHWM), else its lifetime peak.

    Not ``getrusage``'s ``ru_maxrss`` where VmHWM exists: a spawned worker inherits
    in it the RSS of the parent it was forked from (the driver, after the baseline).
    """
    if Path("/proc/self/status").exists():
        return _status_mb("VmHWM")
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_on_cluster(folder: Path, workers: int, repeats: int
                   ) -> tuple[float, float, list[tuple[float, float]], RegionalReport]:
    """Best time, driver peak MB, workers' (peak, at rest) MB and the report."""
    import dask
    from distributed import Client, LocalCluster

    from spatialdp import worker_environment

    # The recommended worker settings (docs/scale.md): glibc keeps freed arrays in
    # the heap instead of Dask's default trim threshold, which maps every array anew.
    with (dask.config.set({"distributed.nanny.pre-spawn-environ": worker_environment()}),
          LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                       dashboard_address=":0", silence_logs=logging.ERROR) as cluster,
          Client(cluster) as client):
        client.run(__import__, "spatialdp.federated._dask")  # imports are not the measurement
        report = on_dask(folder)  # warm-up (also the report checked below)
        best = min(_timed(lambda: on_dask(folder)) for _ in range(repeats))
        rest = client.run(_rest_mb)
        client.run(_reset_peak)
        driver = _common.peak_memory_mb(lambda: on_dask(folder))
        peaks = [(peak, rest[w]) for w, peak in client.run(_peak_mb).items()]
    return best, driver, peaks, report


def _timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="spatialdp-bench-") as tmp:
        folder = Path(tmp)
        start = time.perf_counter()
        n_clients = write_examples(folder, args.rows, args.files)
        size = sum(p.stat().st_size for p in folder.glob("*.parquet")) / 2**20
        print(f"data: {args.rows:,} examples of {n_clients:,} clients in {args.files} Parquet "
              f"files ({size:,.0f} MB on disk), written in {time.perf_counter() - start:.1f} s")

        base_time = min(_timed(lambda: in_memory(folder)) for _ in range(args.repeat))
        base_peak = _common.peak_memory_mb(lambda: in_memory(folder))
        baseline = in_memory(folder)
        print(f"baseline (pandas.read_parquet + device_report + regional_report, 1 process): "
              f"{base_time:.2f} s, peak {base_peak:,.0f} MB over the call")

        times = {}
        for workers in (1, 2):
            best, driver, peaks, report = run_on_cluster(folder, workers, args.repeat)
            times[workers] = best
            print(f"dask, {workers} worker process(es): {best:.2f} s; driver peak "
                  f"{driver:,.0f} MB over the call; worker peak RSS over the call "
                  + ", ".join(f"{p:,.0f} MB (+{p - r:,.0f} MB over {r:,.0f} MB at rest)"
                              for p, r in peaks))
            for column in ("value", "ci_low", "ci_high", "error_bar"):
                a, b = report["loss"][column].to_numpy(), baseline["loss"][column].to_numpy()
                if not np.allclose(a, b, rtol=1e-9, atol=1e-12, equal_nan=True):
                    raise SystemExit(f"the Dask report differs from the in-memory one: {column}")
            if not (report["loss"].suppressed == baseline["loss"].suppressed).all():
                raise SystemExit("the Dask report suppresses other regions")
        print("reports: identical to the in-memory report (same seed; values to 1e-9)")
        print(f"speed-up of 2 workers over 1: {times[1] / times[2]:.2f}x "
              "(2 cores shared with other jobs)")
        print(_common.ratio_line(base_time, times[2]))


if __name__ == "__main__":
    main()
