"""The regional report of sorted examples on Dask: one task per file, the in-memory answer.

Issue 27: Dask spent about twice the CPU of a one-process per-file loop. The
client reports of each file went through a Dask DataFrame (a read task, a report
task, two item tasks, a partition of the reports' collection, a totals task per
file); now a file is read, reported and reduced to per-region sums in one task,
and the answer is unchanged.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from dask.callbacks import Callback

from spatialdp import read_parquet
from spatialdp._dask_frames import parquet_source
from spatialdp.exceptions import InvalidInput
from spatialdp.federated import (
    MetricSpec,
    RegionalReport,
    _dask,
    device_report,
    regional_report,
)
from spatialdp.geo.partition import Partition
from spatialdp.privacy.target import Simulation

LOSS = MetricSpec("loss", 0.0, 2.0)


def _examples(partition: Partition, n_clients: int, seed: int) -> pd.DataFrame:
    """3 to 5 examples per client, sorted by client; losses in quarters (exact sums)."""
    rng = np.random.default_rng(seed)
    client = np.repeat(np.arange(n_clients), rng.integers(3, 6, n_clients))
    region = np.asarray(partition.region_ids)[rng.integers(0, 6, n_clients)]
    return pd.DataFrame({"client_id": client, "region_id": region[client],
                         "loss": rng.integers(0, 12, client.size) / 4.0})

def _write_by_client(examples: pd.DataFrame, folder: Path, files: int) -> None:
    """Write ``examples`` to ``files`` Parquet files of consecutive clients (p00, p01, ...)."""
    for i, part in enumerate(np.array_split(np.unique(examples.client_id), files)):
        examples[examples.client_id.isin(part)].to_parquet(folder / f"p{i:02d}.parquet",
                                                             index=False)



def _report(clients: Any, partition: Partition) -> RegionalReport:
    return regional_report(clients, partition, [LOSS], epsilon=1.0, target=Simulation(rng=0),
                           min_cohort=5)


def _assert_same(got: RegionalReport, expected: RegionalReport) -> None:
    # quarters add up exactly in any order: the released values are equal, not just close
    pd.testing.assert_frame_equal(got["loss"], expected["loss"])


class _Tasks(Callback):
    """Count the tasks dask's local scheduler runs."""

    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def _pretask(self, key: Any, dsk: Any, state: Any) -> None:
        self.n += 1


def test_each_parquet_file_is_read_and_reduced_in_one_task(states_partition: Partition,
                                                            tmp_path: Path) -> None:
    examples = _examples(states_partition, 400, seed=1)
    files = 6
    _write_by_client(examples, tmp_path, files)
    lazy = read_parquet(tmp_path, index="client_id", columns=["region_id", "loss"])
    assert lazy.known_divisions
    assert parquet_source(lazy) is not None
    expected = _report(device_report(examples, loss_spec=LOSS, partition=states_partition),
                       states_partition)
    clients = device_report(lazy, loss_spec=LOSS, partition=states_partition)
    with dask.config.set(scheduler="sync"), _Tasks() as tasks:
        got = _report(clients, states_partition)
    _assert_same(got, expected)
    # a task per file, one sum of their inner clients, one for the edge clients, the root
    # (the collection of reports took 47 tasks for these 6 files)
    assert tasks.n <= files + 3


def test_partitions_not_read_by_spatialdp_give_the_same_report(states_partition: Partition
                                                               ) -> None:
    from dask import delayed

    examples = _examples(states_partition, 120, seed=2).set_index("client_id")
    ids = examples.index.to_numpy()
    # client 40's rows in two partitions, under divisions that say they are apart
    cut = int(np.flatnonzero(ids == 40)[1])
    bounds = [0, int(np.flatnonzero(ids == 20)[0]), cut, len(examples)]
    pieces = [delayed(examples.iloc[lo:hi]) for lo, hi in pairwise(bounds)]
    lazy = dd.from_delayed(pieces, meta=examples.iloc[:0], divisions=(0, 20, 40, 119))
    assert parquet_source(lazy) is None  # the partitions themselves feed the fused tasks
    expected = _report(device_report(examples.reset_index(), loss_spec=LOSS,
                                     partition=states_partition), states_partition)
    clients = device_report(lazy, loss_spec=LOSS, partition=states_partition)
    _assert_same(_report(clients, states_partition), expected)
    # the collection itself still computes to one row per client
    assert len(clients.compute()) == 120


def test_the_reports_collection_keeps_its_checks_once_forgotten(
        states_partition: Partition, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_dask, "_MAX_RECIPES", 2)
    examples = _examples(states_partition, 60, seed=3).set_index("client_id")
    lazy = dd.from_pandas(examples, npartitions=3)
    clients = [device_report(lazy, loss_spec=MetricSpec("loss", 0.0, 2.0 + k / 8),
                             partition=states_partition) for k in range(4)]
    assert len(_dask._SORTED_REPORTS) == 2  # the oldest recipes are dropped
    assert clients[0]._name not in _dask._SORTED_REPORTS
    expected = _report(device_report(examples.reset_index(), loss_spec=LOSS,
                                     partition=states_partition), states_partition)
    # a forgotten recipe: the reports' collection is computed, ids counted across partitions
    _assert_same(_report(clients[0], states_partition), expected)


def test_device_report_on_parquet_reads_its_sample_row_on_the_driver(
        states_partition: Partition, tmp_path: Path) -> None:
    examples = _examples(states_partition, 90, seed=4)
    examples.iloc[:0].to_parquet(tmp_path / "p0.parquet", index=False)  # an empty file first
    for i, part in enumerate(np.array_split(np.arange(90), 2), start=1):
        examples[examples.client_id.isin(part)].to_parquet(tmp_path / f"p{i}.parquet",
                                                             index=False)
    expected = device_report(examples, loss_spec=LOSS, partition=states_partition)
    nonempty = read_parquet(sorted(tmp_path.glob("p[12].parquet")), index="client_id")
    with dask.config.set(scheduler="sync"), _Tasks() as tasks:
        lazy = device_report(nonempty, loss_spec=LOSS, partition=states_partition)
    assert tasks.n == 0  # was 1: the first file read whole (on a worker) for one row
    # an empty first file: the sample comes from the data, as before
    with_empty = device_report(read_parquet(tmp_path, index="client_id"), loss_spec=LOSS,
                               partition=states_partition)
    for clients in (lazy, with_empty):
        pd.testing.assert_frame_equal(clients.compute().sort_index(), expected,
                                      check_categorical=False, check_like=True)


def test_files_read_in_batches_give_the_in_memory_report(states_partition: Partition,
                                                         tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    # one thread: 4 tasks of 3 files for 12 files (not 12 tasks: Dask's cost per task,
    # about 4 ms of CPU, was most of the overhead over a one-process per-file loop)
    monkeypatch.setattr(_dask, "worker_threads", lambda: 1)
    examples = _examples(states_partition, 600, seed=5)
    _write_by_client(examples, tmp_path, 12)
    lazy = read_parquet(tmp_path, index="client_id", columns=["region_id", "loss"])
    assert lazy.known_divisions
    expected = _report(device_report(examples, loss_spec=LOSS, partition=states_partition),
                       states_partition)
    clients = device_report(lazy, loss_spec=LOSS, partition=states_partition)
    with dask.config.set(scheduler="sync"), _Tasks() as tasks:
        got = _report(clients, states_partition)
    _assert_same(got, expected)
    assert tasks.n <= 4 + 2  # the batches, the settings, the sum


def test_both_workers_share_the_batches_without_work_stealing(states_partition: Partition,
                                                              tmp_path: Path) -> None:
    # the settings were a key of the graph that every batch depended on: all batches ran
    # on the worker holding it (no speed-up from a second worker with work stealing off)
    import logging

    from distributed import Client, LocalCluster, get_task_stream

    examples = _examples(states_partition, 800, seed=6)
    _write_by_client(examples, tmp_path, 16)
    expected = _report(device_report(examples, loss_spec=LOSS, partition=states_partition),
                       states_partition)
    with (dask.config.set({"distributed.scheduler.work-stealing": False}),
          LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                       dashboard_address=":0", silence_logs=logging.ERROR) as cluster,
          Client(cluster) as client):
        lazy = read_parquet(tmp_path, index="client_id", columns=["region_id", "loss"])
        clients = device_report(lazy, loss_spec=LOSS, partition=states_partition)
        with get_task_stream(client) as stream:
            got = _report(clients, states_partition)
    _assert_same(got, expected)
    batches = [t for t in stream.data if str(t["key"]).startswith("('read-parquet-totals")
               and isinstance(t["key"][1], int)]
    assert len({t["worker"] for t in batches}) == 2
    assert len(batches) == 8  # 4 a thread


def test_files_rewritten_out_of_order_are_refused_within_a_batch(
        states_partition: Partition, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a batch sums the inner clients of its files at once: their id ranges are checked
    # first, with the message of the edge task (files changed after read_parquet)
    monkeypatch.setattr(_dask, "worker_threads", lambda: 1)  # 8 files: 4 batches of 2
    examples = _examples(states_partition, 160, seed=7)
    _write_by_client(examples, tmp_path, 8)
    lazy = read_parquet(tmp_path, index="client_id", columns=["region_id", "loss"])
    assert lazy.known_divisions
    # file 1 now holds clients 5 to 34: clients 6 to 18 are inner clients of files 0 and 1
    examples[examples.client_id.isin(np.arange(5, 35))].to_parquet(tmp_path / "p01.parquet",
                                                                     index=False)
    clients = device_report(lazy, loss_spec=LOSS, partition=states_partition)
    with (dask.config.set(scheduler="sync"),
          pytest.raises(InvalidInput, match="partitions are not sorted by client_id")):
        _report(clients, states_partition)
