"""Run the spatialdp regional report on Kubernetes with the dask-kubernetes operator (untested).

Either apply docs/cluster/daskcluster.yaml and connect to its scheduler service
(``Client("tcp://spatialdp-scheduler.fleet:8786")``), or let the operator create the
cluster from Python as below. Run this driver in a pod of the same namespace (a Job),
with the ledger on a volume only this pod mounts read-write.
"""

from __future__ import annotations

from dask_kubernetes.operator import KubeCluster
from distributed import Client

from spatialdp import read_parquet
from spatialdp.datasets import us_states_partition
from spatialdp.federated import MetricSpec, device_report, regional_report
from spatialdp.privacy import PrivacyLedger, ReleaseTarget

IMAGE = "registry.example.org/fleet/spatialdp:1.0-dask2026.8"

if __name__ == "__main__":
    cluster = KubeCluster(
        name="spatialdp",
        namespace="fleet",
        image=IMAGE,
        n_workers=8,
        resources={"requests": {"cpu": "2", "memory": "8Gi"},
                   "limits": {"cpu": "2", "memory": "8Gi"}},
        env={"DASK_DATAFRAME__SHUFFLE__METHOD": "p2p",
             # glibc keeps freed arrays in the heap (docs/scale.md, "Worker memory settings")
             "MALLOC_TRIM_THRESHOLD_": "67108864", "MALLOC_MMAP_THRESHOLD_": "16777216"},
        worker_command=["dask-worker", "--nthreads", "2", "--memory-limit", "7GiB"],
    )
    cluster.adapt(minimum=2, maximum=32)
    with Client(cluster):
        states = us_states_partition()
        spec = MetricSpec("loss", 0.0, 4.0)
        examples = read_parquet("/data/examples", index="client_id",
                                columns=["region_id", "loss"])
        clients = device_report(examples, loss_spec=spec, partition=states)
        with PrivacyLedger("/ledger/ledger.db", epoch_budget=5.0) as ledger:
            report = regional_report(
                clients, states, [spec], epsilon=0.5, min_cohort=100,
                target=ReleaseTarget(ledger, epoch=48, why="weekly regional loss"))
        report.write("/releases/2026-11-30")
    cluster.close()
