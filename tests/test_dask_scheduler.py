"""The recipe of docs/scale.md, "An existing scheduler", run for real on localhost.

A ``dask scheduler`` and two ``dask worker`` processes (the installed
distributed's own command line) start in one folder; the driver connects by
address from another folder and runs the regional report on Parquet files named
by a path relative to the driver's folder. The report must equal the in-memory
one (same seed, sums exact in floating point), the work must have run on the two
workers, and every process must be gone afterwards, whatever happened.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from distributed import Client, get_task_stream

import spatialdp
from spatialdp import read_parquet
from spatialdp.federated import MetricSpec, device_report, regional_report
from spatialdp.geo.partition import Partition
from spatialdp.privacy.target import Simulation

LOSS = MetricSpec("loss", 0.0, 4.0)
START_TIMEOUT = 60.0  # seconds, on a loaded 2-core machine a worker starts in 2-10 s


def _dask(*args: str) -> list[str]:
    """The ``dask`` command of this interpreter's environment (``python -m dask`` is it)."""
    return [sys.executable, "-m", "dask", *args]


def _signal_group(group: int, sig: int) -> bool:
    """Send ``sig`` to a process group this test started; False if none of it is left."""
    try:
        os.killpg(group, sig)  # the group of a process started with start_new_session
    except ProcessLookupError:
        return False
    return True


def _running(process: subprocess.Popen[bytes]) -> bool:
    """The process or anything of its group (a worker's nanny and its child) still runs."""
    return process.poll() is None or _signal_group(process.pid, 0)  # 0: is it there


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group, SIGKILL it if anything of it is left after 20 s."""
    for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        _signal_group(process.pid, sig)
        deadline = time.monotonic() + wait
        while _running(process) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not _running(process):
            return


@contextmanager
def _processes(logs: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes started in the block are stopped at its end, the last started first."""
    started: list[subprocess.Popen[bytes]] = []
    try:
        yield started
    finally:
        for process in reversed(started):
            _stop(process)
        leaked = [p.pid for p in started if _running(p)]
        assert not leaked, f"processes still running: {leaked}; logs in {logs}"


def _start(started: list[subprocess.Popen[bytes]], command: list[str], cwd: Path,
           log: Path) -> subprocess.Popen[bytes]:
    """Start ``command`` in ``cwd``, its own process group, output to ``log``."""
    env = dict(os.environ)
    here = str(Path(spatialdp.__file__).resolve().parents[1])  # the driver's spatialdp
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [here, env.get("PYTHONPATH")]))
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    started.append(process)
    return process


def _scheduler_address(file: Path, scheduler: subprocess.Popen[bytes], log: Path) -> str:
    """Wait for ``dask scheduler --scheduler-file`` to write its address (port 0: a free one)."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if scheduler.poll() is not None:
            raise AssertionError(f"dask scheduler exited:\n{log.read_text()[-3000:]}")
        if file.exists():
            try:
                return str(json.loads(file.read_text())["address"])
            except (ValueError, KeyError):  # written but not complete yet
                pass
        time.sleep(0.2)
    raise AssertionError(f"dask scheduler did not start:\n{log.read_text()[-3000:]}")


def _examples(partition: Partition, n_clients: int, seed: int) -> pd.DataFrame:
    """2 or 4 examples per client, sorted by client, losses on a 1/4 grid (exact sums)."""
    rng = np.random.default_rng(seed)
    region = rng.choice(np.asarray(partition.region_ids), size=n_clients)
    client = np.repeat(np.arange(n_clients), rng.choice([2, 4], size=n_clients))
    return pd.DataFrame({"client_id": client, "region_id": region[client],
                         "loss": rng.integers(0, 20, client.size) / 4.0})


def test_a_scheduler_and_two_workers_run_the_report_from_relative_paths(
        states_partition: Partition, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    cluster, driver = tmp_path / "cluster", tmp_path / "driver"
    cluster.mkdir()
    (driver / "examples").mkdir(parents=True)
    examples = _examples(states_partition, 3_000, seed=24)
    for i in range(4):  # sorted by client, a client in one file: known divisions, no shuffle
        chunk = examples[examples.client_id // 750 == i]
        chunk.to_parquet(driver / "examples" / f"part-{i}.parquet", index=False)
    address_file = cluster / "scheduler.json"
    with _processes(cluster) as started:
        scheduler = _start(started, _dask(
            "scheduler", "--host", "127.0.0.1", "--port", "0", "--dashboard-address", ":0",
            "--scheduler-file", str(address_file), "--idle-timeout", "300s"),
            cluster, cluster / "scheduler.log")
        address = _scheduler_address(address_file, scheduler, cluster / "scheduler.log")
        for name in ("w0", "w1"):
            _start(started, _dask(
                "worker", address, "--name", name, "--nthreads", "1", "--memory-limit", "1GiB",
                "--dashboard-address", ":0", "--local-directory", str(cluster / name),
                "--death-timeout", "60s"),
                cluster, cluster / f"{name}.log")
        monkeypatch.chdir(driver)
        with Client(address, timeout="30s") as client:
            client.wait_for_workers(2, timeout=START_TIMEOUT)
            # the workers run in the cluster's folder, where "examples" names nothing
            assert set(client.run(os.getcwd).values()) == {str(cluster.resolve())}
            with get_task_stream(client) as stream:
                lazy = read_parquet("examples", index="client_id", columns=["region_id", "loss"])
                assert lazy.known_divisions
                report = regional_report(
                    device_report(lazy, loss_spec=LOSS, partition=states_partition),
                    states_partition, [LOSS], epsilon=0.5, target=Simulation(rng=7),
                    min_cohort=20)
            readers = {task["worker"] for task in stream.data
                       if task["key"][0].startswith("read-parquet")}
            assert readers  # the files were read on the workers, not on the driver
            assert readers <= set(client.scheduler_info()["workers"])
    memory = regional_report(
        device_report(pd.read_parquet(driver / "examples"), loss_spec=LOSS,
                      partition=states_partition),
        states_partition, [LOSS], epsilon=0.5, target=Simulation(rng=7), min_cohort=20)
    pd.testing.assert_frame_equal(report["loss"], memory["loss"])  # same sums, same noise
    assert report.metadata() == memory.metadata()
    assert report["loss"].cohort.sum() == 3_000
