"""Regional report over 20,000,000 per-example rows from Parquet: Dask vs one process.

Targets (issue 27, on 2 quiet cores, by wall AND CPU time): ``ratio:`` >= 0.8
against the per-file loop, ``ratio_pandas:`` >= 1.0 against one pandas process.

The data: ``--rows`` per-example predictions (``client_id``, ``region_id``,
``loss``) of ~50 examples per client, written once into a temporary folder as
``--files`` Parquet files sorted by client (each client in one file, as a
device store partitioned by upload batch writes them). Nothing is committed.

The product (every side, the same): every client's clipped mean loss
(:func:`spatialdp.federated.device_report`), then the regional report over the
48 states (``Simulation(rng=0)``: the same seed, so every side publishes the same
numbers; checked before timing, values to 1e-9 as the sums are added in another
order, suppression exactly).

- per-file loop (the strongest baseline, ``ratio:``): one process reads a file
  (the three columns, with pyarrow's ``ParquetFile.read`` and its threads: about
  25% less CPU and wall time than ``pandas.read_parquet``, which goes through the
  dataset API and a Python file object), runs ``device_report`` on it, keeps the
  client rows; then ``pandas.concat`` and ``regional_report``. Its memory is one
  file plus the client rows, like Dask's.
- pandas, one process (``ratio_pandas:``): pyarrow's ``read_table`` of the whole
  folder (the files read with both cores; level with ``pandas.read_parquet``, a
  little less CPU), then ``device_report`` and ``regional_report`` in memory.
- Dask (ours): :func:`spatialdp.read_parquet` (divisions from the footers: no
  shuffle), the same ``device_report`` and ``regional_report`` given the Dask
  DataFrame, on a ``distributed.LocalCluster`` of 2 (and, for the speed-up, 1)
  worker processes of 1 thread, started with :func:`dask_settings`
  (:func:`spatialdp.worker_environment`, and :data:`QUIET`: distributed's
  profiler, tick monitor and work stealing off or slowed). Files are read in
  batches (about 4 tasks per worker thread), each file reported in turn and the
  batch reduced to 48 per-region sums in its task; the settings reach each
  worker once; the driver receives the sums.

Timing follows the convention of ``benchmarks/_common.py``: median of
``--repeat`` interleaved rounds after one warm-up call each, min and max
printed, wall and CPU. The CPU of Dask is the driver process's (which also runs
the scheduler and the nannies) plus every worker's, read before and after each
run. Memory: peak RSS over one call of each baseline and of the Dask driver
(``_common.peak_memory_mb``); the workers' memory on a FRESH cluster started for
that measurement: each worker's RSS before its first task, and its peak (VmHWM)
over the first call (imports included). ``cold:`` times that first call too.
"""

from __future__ import annotations

import argparse
import logging
import resource
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from _common import Timing, compare, machine_line, print_results, ratio_line

from spatialdp.datasets import us_states_partition
from spatialdp.federated import MetricSpec, RegionalReport, device_report, regional_report
from spatialdp.privacy import Simulation

LOSS = MetricSpec("loss", 0.0, 4.0)
EPSILON = 0.5
FLOOR = 50
COLUMNS = ["client_id", "region_id", "loss"]


def write_examples(folder: Path, rows: int, files: int, seed: int = 0,
                   first_file: int = 0) -> int:
    """Write ``rows`` examples into ``files`` Parquet files sorted by client; return clients.

    ``first_file`` numbers the files (and offsets the client ids) so that a large
    data set can be written in chunks of files, each chunk with its own seed.
    """
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
        local = f * clients_per_file + np.sort(rng.integers(0, clients_per_file, per_file))
        frame = pd.DataFrame({
            "client_id": local + first_file * clients_per_file,
            "region_id": client_region[local],
            "loss": rng.gamma(2.0, 0.6, per_file),
        })
        frame.to_parquet(folder / f"examples-{first_file + f:05d}.parquet", index=False)
    return n_clients


def _release(clients: Any) -> RegionalReport:
    return regional_report(clients, us_states_partition(), [LOSS], epsilon=EPSILON,
                           target=Simulation(rng=0), min_cohort=FLOOR)


def in_memory(folder: Path) -> RegionalReport:
    """The whole folder in one pandas frame, then the in-memory report."""
    examples = pq.read_table(folder, columns=COLUMNS).to_pandas()
    return _release(device_report(examples, loss_spec=LOSS, partition=us_states_partition()))


def read_file(file: Path) -> pd.DataFrame:
    """One file's three columns (pyarrow's file reader: less CPU than pandas.read_parquet)."""
    return pq.ParquetFile(file).read(columns=COLUMNS).to_pandas()


def per_file_loop(folder: Path) -> RegionalReport:
    """Read a file, report its clients, keep the rows; concatenate; report."""
    states = us_states_partition()
    clients = [device_report(read_file(file), loss_spec=LOSS, partition=states)
               for file in sorted(folder.glob("*.parquet"))]
    return _release(pd.concat(clients))


def on_dask(folder: Path) -> RegionalReport:
    """Lazy examples, lazy client reports, region sums on the workers, release here."""
    from spatialdp import read_parquet

    examples = read_parquet(folder, index="client_id", columns=["region_id", "loss"])
    return _release(device_report(examples, loss_spec=LOSS, partition=us_states_partition()))


def same_report(a: RegionalReport, b: RegionalReport) -> bool:
    """Equal releases: values to 1e-9 (sums added in another order), suppression exactly."""
    x, y = a["loss"], b["loss"]
    values = all(np.allclose(x[c].to_numpy(), y[c].to_numpy(), rtol=1e-9, atol=1e-12,
                             equal_nan=True)
                 for c in ("value", "ci_low", "ci_high", "error_bar"))
    return values and bool((x["suppressed"] == y["suppressed"]).all())


#: distributed's periodic work, at rest, costs more CPU than a file's report: its
#: statistical profiler samples every worker's stack each 10 ms, the event-loop tick
#: monitor runs each 20 ms in every process, work stealing and the memory monitor each
#: 100 ms. Measured idle on this machine: driver (scheduler, 2 nannies) 43 ms of CPU a
#: second and each worker 17 ms with the profiler off; 8 and 3 ms with these settings.
QUIET = {"distributed.worker.profile.enabled": False,
         "distributed.admin.system-monitor.interval": "5s",
         "distributed.admin.tick.interval": "1s",
         "distributed.scheduler.work-stealing": False,
         "distributed.worker.memory.monitor-interval": "1s"}


def dask_settings() -> dict[str, Any]:
    """The cluster's configuration: the library's worker environment, and :data:`QUIET`."""
    from spatialdp import worker_environment

    return {"distributed.nanny.pre-spawn-environ": worker_environment(), **QUIET}


@contextmanager
def cluster(workers: int) -> Iterator[Any]:
    """A fresh LocalCluster of ``workers`` processes of one thread, and its Client."""
    import dask
    from distributed import Client, LocalCluster

    with (dask.config.set(dask_settings()),
          LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                       dashboard_address=":0", silence_logs=logging.ERROR) as local,
          Client(local) as client):
        yield client


def cluster_cpu(client: Any) -> Callable[[], float]:
    """CPU seconds of the driver (scheduler and nannies included) plus every worker."""
    return lambda: time.process_time() + sum(client.run(time.process_time).values())


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _rss_mb() -> float:
    """Resident size of this process now (run on a worker)."""
    return _status_mb("VmRSS") if Path("/proc/self/status").exists() else float("nan")


def _peak_mb() -> float:
    """Peak RSS of this process (VmHWM; run on a worker), else its lifetime peak."""
    if Path("/proc/self/status").exists():
        return _status_mb("VmHWM")
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _reset_peak() -> None:
    """Reset this process's VmHWM to its RSS (Linux; run on a worker)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass


def fresh_workers(folder: Path, workers: int) -> tuple[float, float, list[tuple[float, float]]]:
    """First call on a new cluster: wall s, CPU s, and each worker's (RSS before, peak) MB."""
    with cluster(workers) as client:
        before = client.run(_rss_mb)
        client.run(_reset_peak)
        clock = cluster_cpu(client)
        cpu0, wall0 = clock(), time.perf_counter()
        on_dask(folder)
        wall, cpu = time.perf_counter() - wall0, clock() - cpu0
        peaks = client.run(_peak_mb)
    return wall, cpu, [(before[w], peaks[w]) for w in before]


def steady(folder: Path, repeats: int, reference: RegionalReport) -> dict[str, Timing]:
    """Both baselines and Dask on 2 workers, interleaved; then Dask on 1 worker."""
    baselines: dict[str, Any] = {"per-file loop": lambda: per_file_loop(folder),
                                 "pandas, 1 process": lambda: in_memory(folder)}
    with cluster(2) as client:
        client.run(__import__, "spatialdp.federated._dask")  # imports: see cold
        results = compare({**baselines, "dask, 2 workers": lambda: on_dask(folder)},
                          repeats=repeats, check=same_report,
                          cpu_clocks={"dask, 2 workers": cluster_cpu(client)})
    with cluster(1) as client:
        client.run(__import__, "spatialdp.federated._dask")
        if not same_report(on_dask(folder), reference):
            raise SystemExit("dask on 1 worker disagrees with the per-file loop")
        results |= compare({"dask, 1 worker": lambda: on_dask(folder)}, repeats=repeats,
                           check=None, cpu_clocks={"dask, 1 worker": cluster_cpu(client)})
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000_000)
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--data", type=Path, default=None,
                        help="use (and fill, if empty) this folder instead of a temporary one")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="spatialdp-bench-") as tmp:
        folder = args.data or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        if not any(folder.glob("*.parquet")):
            write_examples(folder, args.rows, args.files)
        size = sum(p.stat().st_size for p in folder.glob("*.parquet")) / 2**20
        print(machine_line())
        print(f"data: {args.rows:,} examples in {args.files} Parquet files "
              f"({size:,.0f} MB on disk)")
        reference = per_file_loop(folder)
        for n in (2, 1):  # fresh workers: RSS before the first task, peak over it
            wall, cpu, rss = fresh_workers(folder, n)
            print(f"cold: first call on a fresh cluster of {n} worker(s): {wall:.2f} s, "
                  f"CPU {cpu:.2f} s (worker imports inside; cluster start not); worker RSS "
                  + ", ".join(f"{b:,.0f} MB before the first task, peak {p:,.0f} MB"
                              for b, p in rss))
        results = steady(folder, args.repeat, reference)
        print_results(results, "steady state (one warm-up call each; Dask CPU = driver + "
                               "workers; peak = driver or the process):")
        one, two = results["dask, 1 worker"], results["dask, 2 workers"]
        print(f"speed-up of 2 workers over 1: {one.median / two.median:.2f}x "
              f"(CPU {one.cpu_median / two.cpu_median:.2f})")
        print("reports: identical on every side (same seed; values to 1e-9)")
        print(ratio_line(results, "pandas, 1 process", "dask, 2 workers",
                         label="ratio_pandas"))
        print(ratio_line(results, "per-file loop", "dask, 2 workers"))


if __name__ == "__main__":
    main()
