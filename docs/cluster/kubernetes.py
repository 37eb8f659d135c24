"""Run the spatialdp regional report on Kubernetes with the dask-kubernetes operator.

Either apply docs/cluster/daskcluster.yaml and connect to its scheduler service
(``Client("tcp://spatialdp-scheduler.fleet:8786")``), or let the operator create the
cluster from Python as below, from that same file. Run this driver in a pod of the same
namespace (a Job), with the ledger on a volume only this pod mounts read-write and the
examples' volume mounted at the workers' path (/data/examples): the driver reads the
files' footers (columns, divisions) before the workers read the data.

Why the DaskCluster file rather than ``KubeCluster(name=..., image=..., ...)``: the spec
that dask-kubernetes generates from keywords (up to its July 2025 release at least) starts
the scheduler with ``dask-scheduler``, a script distributed 2026.8 no longer ships
(``dask scheduler`` replaced it), so its scheduler pod would not start. A
``custom_cluster_spec`` runs the commands written in the file.

CI compiles this file and checks the file it names (tests/test_cluster_configs.py);
it has not run on Kubernetes here.
"""

from __future__ import annotations

from pathlib import Path

from dask_kubernetes.operator import KubeCluster
from distributed import Client

from spatialdp import read_parquet
from spatialdp.datasets import us_states_partition
from spatialdp.federated import MetricSpec, device_report, regional_report
from spatialdp.privacy import PrivacyLedger, ReleaseTarget

#: the DaskCluster resource (image, `dask scheduler` and `dask worker` commands, volumes)
SPEC = Path(__file__).with_name("daskcluster.yaml")

if __name__ == "__main__":
    cluster = KubeCluster(custom_cluster_spec=str(SPEC), namespace="fleet")
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
