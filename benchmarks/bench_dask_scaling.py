"""Internet scale, measured: the Dask regional report from 10^7 to 2*10^8 example rows.

Run by hand, once, for the docs (never in CI: the largest size writes ~1.7 GB of
Parquet and takes minutes). The product is that of ``bench_dask_report.py``
(per-client clipped mean loss, then the regional report over the 48 states,
``Simulation(rng=0)``), on a fresh ``distributed.LocalCluster`` of ``--workers``
worker processes of one thread per size, with the same settings.

Data: ``--rows-per-file`` examples per Parquet file (500,000 by default, ~4 MB),
sorted by client, written in chunks of files (each chunk with its own seed and
its own clients), so that writing needs the memory of one chunk whatever the
size. The files are written once into ``--data`` (kept between runs) and each
size reads the first ``size / rows-per-file`` of them.

Per size: the first call on the fresh cluster (worker imports inside), then the
median of ``--repeat`` calls (wall and CPU of driver + workers); the driver's
peak RSS over a call (``_common.peak_memory_mb``) and each worker's peak RSS
(VmHWM since the cluster started, so the largest over every call), next to its
RSS before the first task. The table shows whether time grows linearly with the
rows and memory stays flat; the last line is the CPU per million rows.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from _common import machine_line, peak_memory_mb, scaling_table
from bench_dask_report import (
    LOSS,
    _peak_mb,
    _release,
    _rss_mb,
    cluster,
    cluster_cpu,
    write_examples,
)

from spatialdp.datasets import us_states_partition
from spatialdp.federated import RegionalReport, device_report

CHUNK_FILES = 20


def ensure_files(folder: Path, n_files: int, rows_per_file: int) -> list[Path]:
    """Write the missing files up to ``n_files`` (chunks of CHUNK_FILES); return the first n."""
    folder.mkdir(parents=True, exist_ok=True)
    have = len(list(folder.glob("examples-*.parquet")))
    for first in range(have - have % CHUNK_FILES, n_files, CHUNK_FILES):
        write_examples(folder, rows_per_file * CHUNK_FILES, CHUNK_FILES, seed=first,
                       first_file=first)
    return sorted(folder.glob("examples-*.parquet"))[:n_files]


def report(files: list[Path]) -> RegionalReport:
    """The Dask regional report of these files (see bench_dask_report.on_dask)."""
    from spatialdp import read_parquet

    examples = read_parquet(files, index="client_id", columns=["region_id", "loss"])
    return _release(device_report(examples, loss_spec=LOSS, partition=us_states_partition()))


def measure(files: list[Path], workers: int, repeats: int) -> dict[str, float]:
    """Time and memory of the report of ``files`` on a fresh cluster."""
    with cluster(workers) as client:
        before = client.run(_rss_mb)
        clock = cluster_cpu(client)
        wall0 = time.perf_counter()
        report(files)
        first = time.perf_counter() - wall0
        walls, cpus = [], []
        for _ in range(repeats):
            cpu0, wall0 = clock(), time.perf_counter()
            report(files)
            walls.append(time.perf_counter() - wall0)
            cpus.append(clock() - cpu0)
        driver = peak_memory_mb(lambda: report(files))
        peaks = client.run(_peak_mb)
    return {"first call s": first, "median s": statistics.median(walls),
            "CPU s": statistics.median(cpus), "driver peak MB": driver,
            "worker RSS before MB": max(before.values()),
            "worker peak MB": max(peaks.values())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+",
                        default=[10_000_000, 20_000_000, 50_000_000, 100_000_000,
                                 200_000_000])
    parser.add_argument("--rows-per-file", type=int, default=500_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--data", type=Path, default=Path("/tmp/spatialdp-dask-scaling"))
    args = parser.parse_args()
    print(machine_line())
    rows = []
    for size in args.sizes:
        n_files = max(1, size // args.rows_per_file)
        start = time.perf_counter()
        files = ensure_files(args.data, n_files, args.rows_per_file)
        written = time.perf_counter() - start
        row: dict[str, object] = {"rows": n_files * args.rows_per_file, "files": n_files}
        row.update(measure(files, args.workers, args.repeat))
        row["CPU s per 10^6 rows"] = float(row["CPU s"]) / (int(row["rows"]) / 1e6)
        rows.append(row)
        print(f"{row} (files ready in {written:.0f} s)", flush=True)
    columns = list(rows[0])
    print(scaling_table(rows, columns))
    per_row = statistics.median(float(r["CPU s per 10^6 rows"]) for r in rows)
    print(f"CPU per 10^6 rows (median over sizes): {per_row:.3f} s; {args.workers} workers")


if __name__ == "__main__":
    main()
