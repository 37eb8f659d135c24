"""Run the spatialdp regional report on a SLURM cluster with dask-jobqueue.

dask-jobqueue starts each worker with ``python -m distributed.cli.dask_worker`` (the
module behind ``dask worker``); CI compiles this file and checks the worker flags these
settings produce against the installed distributed, and that they are those of
jobqueue.yaml (tests/test_cluster_configs.py). It has not run on SLURM here.

Assumes: a shared file system (Lustre/GPFS/NFS) visible from the login node and every
compute node; the same Python environment (spatialdp, dask, distributed, pyarrow, numpy,
pandas at the same versions) on all of them, e.g. a conda env on the shared file system;
the privacy ledger on storage only the driver (this script) writes. The driver reads the
files' footers, so the examples folder is on the shared file system; a relative path is
resolved against the folder this script runs in.

    pip install "spatialdp[dask]" dask-jobqueue
    python docs/cluster/slurm.py /shared/fleet/examples-2026-11-30/ /shared/ledger/ledger.db
"""

from __future__ import annotations

import sys

from dask_jobqueue import SLURMCluster
from distributed import Client

from spatialdp import read_parquet
from spatialdp.datasets import us_states_partition
from spatialdp.federated import MetricSpec, device_report, regional_report
from spatialdp.privacy import PrivacyLedger, ReleaseTarget


def main(examples_folder: str, ledger_path: str) -> None:
    cluster = SLURMCluster(
        queue="compute",                    # partition: sbatch -p
        account="fleet-analytics",          # sbatch -A
        cores=8,                            # threads per job (split over processes)
        processes=4,                        # 4 worker processes per job, 2 threads each
        memory="32GiB",                     # per job: 8 GiB per worker process
        walltime="02:00:00",
        interface="ib0",                    # the nodes' fast network (or "eth0")
        local_directory="$TMPDIR",          # node-local scratch for spilling and shuffles
        log_directory="/shared/dask-logs",
        job_script_prologue=[
            "module load python/3.11",
            "source /shared/envs/spatialdp/bin/activate",
            # glibc keeps freed arrays in the heap (docs/scale.md, "Worker memory settings")
            "export MALLOC_TRIM_THRESHOLD_=67108864 MALLOC_MMAP_THRESHOLD_=16777216",
        ],
        job_extra_directives=["--exclusive", "--constraint=skylake"],
        worker_extra_args=["--lifetime", "110m", "--lifetime-stagger", "5m"],  # < walltime
        python="/shared/envs/spatialdp/bin/python",
    )
    cluster.adapt(minimum_jobs=1, maximum_jobs=16)  # results do not depend on the size
    with Client(cluster) as client:
        client.wait_for_workers(4, timeout=600)
        states = us_states_partition()
        spec = MetricSpec("loss", 0.0, 4.0)
        examples = read_parquet(examples_folder, index="client_id",
                                columns=["region_id", "loss"])
        clients = device_report(examples, loss_spec=spec, partition=states)
        with PrivacyLedger(ledger_path, epoch_budget=5.0) as ledger:
            report = regional_report(
                clients, states, [spec], epsilon=0.5, min_cohort=100, progress=True,
                target=ReleaseTarget(ledger, epoch=48, why="weekly regional loss"))
        report.write("/shared/releases/2026-11-30")
        print(report.summary())
    cluster.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
