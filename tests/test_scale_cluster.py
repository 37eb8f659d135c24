"""Dask scale-out on a real LocalCluster (2 worker processes), started once for the module.

The Dask paths must give the in-memory results: sums exactly (so a seeded
simulation is bit-identical), the release's noise within its exact Laplace
tail, and refusals that charge nothing.
"""

from __future__ import annotations

import logging
import math
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dask
import dask.dataframe as dd
import dask_geopandas
import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely
from distributed import Client, LocalCluster

from spatialdp import read_parquet, worker_environment
from spatialdp._dask_frames import WORKER_MALLOC
from spatialdp.exceptions import BudgetExceeded, InvalidInput, PartitionMismatch
from spatialdp.federated import HistogramSpec, MetricSpec, device_report, regional_report
from spatialdp.geo.partition import Partition
from spatialdp.privacy.ledger import PrivacyLedger
from spatialdp.privacy.target import ReleaseTarget, Simulation
from spatialdp.queries import measure_query_error, query_corpus, truth_grid
from spatialdp.queries.measure import _setup, _simulate, _summarise

pytestmark = pytest.mark.slow  # a 2-process LocalCluster, started once for the module

LOSS = MetricSpec("loss", 0.0, 4.0)
HIST = HistogramSpec("err", edges=(1.0, 2.0))


@contextmanager
def _port_taken(port: int) -> Iterator[None]:
    """Hold ``port`` while the block runs, unless another process already holds it."""
    try:
        sock = socket.create_server(("", port))
    except OSError:  # taken already (another Dask process): the case this guards against
        yield
        return
    with sock:
        yield


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    # Tiny frames: the task-based shuffle beats p2p's set-up cost (dask's default, kept
    # in the library: the choice is the deployment's, through dask's config).
    # The workers run with the recommended glibc settings (worker_environment);
    # Dask prefers a value already in os.environ (an earlier cluster leaves its own).
    # The scheduler's HTTP server takes an ephemeral port: Dask's default 8787 may be
    # held by another process (held here, to show that the cluster does not need it).
    saved = {k: os.environ.pop(k) for k in WORKER_MALLOC if k in os.environ}
    try:
        with (_port_taken(8787),
              dask.config.set({"dataframe.shuffle.method": "tasks",
                               "distributed.nanny.pre-spawn-environ": worker_environment()}),
              LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                           dashboard_address=":0", silence_logs=logging.ERROR) as cluster,
              Client(cluster) as c):
            yield c
    finally:
        os.environ.update(saved)


def test_workers_run_with_the_recommended_malloc_settings(client: Client) -> None:
    seen = client.run(lambda: {k: os.environ.get(k) for k in WORKER_MALLOC})
    assert len(seen) == 2
    assert all(env == WORKER_MALLOC for env in seen.values())
    assert worker_environment()["OMP_NUM_THREADS"] == "1"  # Dask's own settings are kept


def _examples(partition: Partition, n_clients: int, seed: int) -> pd.DataFrame:
    """2 or 4 examples per client, values on a 1/4 grid: every sum is exact in float."""
    rng = np.random.default_rng(seed)
    ids = np.asarray(partition.region_ids)
    weights = np.linspace(1, 30, ids.size)
    region = rng.choice(ids, size=n_clients, p=weights / weights.sum())
    per = rng.choice([2, 4], size=n_clients)
    client = np.repeat(np.arange(n_clients), per)
    frame = pd.DataFrame({
        "client_id": client,
        "region_id": region[client],
        "loss": rng.integers(0, 20, client.size) / 4.0,  # some above the clip: clipped
        "error": rng.integers(0, 12, client.size) / 4.0,
    })
    return frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)  # clients spread


def test_regional_report_equals_memory_with_clients_spread_over_partitions(
        client: Client, states_partition: Partition) -> None:
    examples = _examples(states_partition, 4_000, seed=1)
    lazy = dd.from_pandas(examples, npartitions=4, sort=False)
    # the examples of one client really sit in several partitions
    spread = lazy.client_id.map_partitions(pd.Series.drop_duplicates).compute()
    assert spread.duplicated().sum() > 500
    kwargs = {"loss_spec": LOSS, "hist_spec": HIST, "partition": states_partition}
    specs = [LOSS, HIST]
    memory = regional_report(device_report(examples, **kwargs), states_partition, specs,
                             epsilon={"loss": 0.5, "err": 0.25}, target=Simulation(rng=7),
                             min_cohort=40)
    clients = device_report(lazy, **kwargs)
    scaled = regional_report(clients, states_partition, specs,
                                  epsilon={"loss": 0.5, "err": 0.25},
                                  target=Simulation(rng=7), min_cohort=40)
    for name in ("loss", "err"):
        pd.testing.assert_frame_equal(scaled[name], memory[name])  # same sums, same noise
    assert scaled.suppressed_regions == memory.suppressed_regions
    assert scaled.metadata() == memory.metadata()
    # the client reports themselves are the in-memory ones, row for row
    pd.testing.assert_frame_equal(
        clients.compute().sort_index(), device_report(examples, **kwargs),
        check_categorical=False, check_like=True)


def test_release_charges_once_and_noise_within_exact_tail(
        client: Client, states_partition: Partition, tmp_path: Path) -> None:
    examples = _examples(states_partition, 6_000, seed=2)
    per_client = device_report(examples, loss_spec=LOSS, partition=states_partition)
    # Parquet sorted by client, read back partition by partition (known divisions: no shuffle)
    folder = tmp_path / "examples"
    folder.mkdir()
    ordered = examples.sort_values("client_id", kind="stable")
    for i in range(4):  # a client's rows in one file: the files' id ranges do not overlap
        chunk = ordered[ordered.client_id // 1_500 == i]
        chunk.to_parquet(folder / f"part-{i}.parquet", index=False)
    lazy = read_parquet(folder, index="client_id", columns=["region_id", "loss"])
    assert lazy.npartitions == 4
    assert lazy.known_divisions
    ledger = PrivacyLedger(":memory:", epoch_budget=5.0)
    target = ReleaseTarget(ledger, epoch=0, why="scale test", round_index=3)
    report = regional_report(
        device_report(lazy, loss_spec=LOSS, partition=states_partition),
        states_partition, [LOSS], epsilon=0.4, target=target, min_cohort=40)
    assert len(ledger.audit(0)) == 1
    assert ledger.spent(0, "evaluation.regional") == pytest.approx(0.4)
    frame = report["loss"]
    truth = per_client.groupby("region_id", observed=True)["loss"].agg(["mean", "size"])
    shown = frame[~frame.suppressed]
    assert (shown.cohort.astype(int) == truth.loc[shown.index, "size"]).all()
    # P(|Laplace| > b ln(1/alpha)) = alpha: with alpha = 1e-6 over ~48 regions this never fails
    tail = shown.noise_std / math.sqrt(2.0) * math.log(1e6)
    assert ((shown.value - truth.loc[shown.index, "mean"]).abs() <= tail).all()
    assert report.round_index == 3
    assert not report.simulated


# dask.dataframe.read_parquet calls set_index(inplace=True), deprecated in pandas 3.1
@pytest.mark.filterwarnings("ignore:The inplace keyword in DataFrame.set_index")
def test_clients_split_across_files_are_one_client_each_on_workers(
        client: Client, states_partition: Partition, tmp_path: Path) -> None:
    # issue 21: divisions from Parquet statistics put a client whose rows two files share
    # on both sides of a boundary; the edge clients are gathered on a worker
    examples = _examples(states_partition, 2_000, seed=4).sort_values("client_id",
                                                                     kind="stable")
    starts = np.flatnonzero(np.diff(examples.client_id.to_numpy())) + 1
    cuts = [0, *(starts[[500, 1000, 1500]] + 1), len(examples)]  # one row into a client
    for i in range(4):
        examples.iloc[cuts[i]:cuts[i + 1]].to_parquet(tmp_path / f"part-{i}.parquet",
                                                      index=False)
    lazy = dd.read_parquet(tmp_path, index="client_id", calculate_divisions=True,
                           columns=["region_id", "loss"])
    assert lazy.known_divisions
    ledger = PrivacyLedger(":memory:", epoch_budget=5.0)
    target = ReleaseTarget(ledger, epoch=0, why="split files")
    report = regional_report(
        device_report(lazy, loss_spec=LOSS, partition=states_partition),
        states_partition, [LOSS], epsilon=0.5, target=target, min_cohort=1)
    truth = examples.groupby("client_id").region_id.first().value_counts()
    shown = report["loss"].cohort.dropna().astype(int)
    assert shown.to_dict() == truth[shown.index].to_dict()
    assert shown.sum() == 2_000
    assert len(ledger.audit(0)) == 1


def test_parquet_on_workers_gives_memory_and_unpickles_the_settings_once(
        client: Client, states_partition: Partition, tmp_path: Path) -> None:
    # issue 27: the settings (device module, partitions: a few hundred kB of polygons)
    # were pickled and unpickled with every task; they are now unpickled once a worker
    def shared_tokens() -> set[str]:  # local: pickled by value (workers cannot import tests)
        from spatialdp import _dask_frames

        return set(_dask_frames._SHARED)

    examples = _examples(states_partition, 3_000, seed=6).sort_values("client_id",
                                                                     kind="stable")
    for i, part in enumerate(np.array_split(np.arange(3_000), 12)):
        examples[examples.client_id.isin(part)].to_parquet(tmp_path / f"p{i:02d}.parquet",
                                                             index=False)
    before = client.run(shared_tokens)
    lazy = read_parquet(tmp_path, index="client_id", columns=["region_id", "loss"])
    scaled = regional_report(device_report(lazy, loss_spec=LOSS, partition=states_partition),
                             states_partition, [LOSS], epsilon=0.5, target=Simulation(rng=3),
                             min_cohort=20)
    memory = regional_report(device_report(examples, loss_spec=LOSS, partition=states_partition),
                             states_partition, [LOSS], epsilon=0.5, target=Simulation(rng=3),
                             min_cohort=20)
    pd.testing.assert_frame_equal(scaled["loss"], memory["loss"])
    after = client.run(shared_tokens)
    # 8 batches (4 a thread) and a sum over both workers, one unpickled value each
    assert [len(after[w] - before[w]) for w in sorted(after)] == [1, 1]


def test_refusals_charge_nothing(client: Client, states_partition: Partition) -> None:
    examples = _examples(states_partition, 2_000, seed=3)
    reports = device_report(examples, loss_spec=LOSS, partition=states_partition)
    ledger = PrivacyLedger(":memory:", epoch_budget=1.0)
    target = ReleaseTarget(ledger, epoch=0, why="refusal test")
    before = ledger.remaining(0, "evaluation.regional")
    repeated = dd.from_pandas(pd.concat([reports, reports.iloc[:5]]), npartitions=3,
                              sort=False)  # the repeats sit in another partition
    with pytest.raises(InvalidInput, match="5 repeated values across partitions"):
        regional_report(repeated, states_partition, [LOSS], epsilon=0.5, target=target)
    other = MetricSpec("loss", 0.0, 3.0)  # the devices clipped under LOSS: refused on a worker
    lazy = dd.from_pandas(reports, npartitions=3)
    with pytest.raises(InvalidInput, match="clipped under another spec"):
        regional_report(lazy, states_partition, [other], epsilon=0.5, target=target)
    stale = reports.assign(partition_version="0000000000000000")
    with pytest.raises(PartitionMismatch, match="partition version"):
        regional_report(dd.from_pandas(stale, npartitions=2), states_partition, [LOSS],
                             epsilon=0.5, target=target)
    with pytest.raises(InvalidInput, match="below the cohort floor"):
        regional_report(lazy, states_partition, [LOSS], epsilon=0.5, target=target,
                             min_cohort=10**6)
    with pytest.raises(BudgetExceeded):
        regional_report(lazy, states_partition, [LOSS], epsilon=2.0, target=target)
    with pytest.raises(InvalidInput, match="not a Dask DataFrame"):
        regional_report(lazy.loss, states_partition, [LOSS], epsilon=0.5, target=target)
    assert ledger.remaining(0, "evaluation.regional") == before
    assert len(ledger.audit(0)) == 0


@pytest.fixture(scope="module")
def grid() -> Partition:
    area = gpd.GeoDataFrame(geometry=[shapely.box(-100, 40, -99, 41)], crs=4326)
    return Partition.from_h3_cover(area, 6)


def _points(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"lon": rng.uniform(-100.1, -98.9, n),
                         "lat": rng.uniform(39.9, 41.1, n),
                         "device": rng.integers(0, 300, n)})


def test_truth_grid_clips_devices_across_partitions(client: Client, grid: Partition,
                                                    tmp_path: Path) -> None:
    points = _points(12_000, seed=4)
    lazy = dd.from_pandas(points, npartitions=5, sort=False)  # each device in every partition
    for k in (1, 4):
        memory = truth_grid(grid, lon=points.lon, lat=points.lat, device_ids=points.device,
                            max_cells_per_device=k)
        scaled = truth_grid(grid, lazy, device_ids="device", max_cells_per_device=k)
        np.testing.assert_array_equal(scaled.counts, memory.counts)
        for field in ("n_points", "n_unassigned", "n_devices", "n_clipped_pairs",
                      "n_clipped_devices", "partition_version", "max_cells_per_device"):
            assert getattr(scaled, field) == getattr(memory, field), field
        assert scaled.counts.sum() <= k * scaled.n_devices
    # GeoParquet read file by file, and a grid given as cells: the same counts
    frame = gpd.GeoDataFrame(points[["device"]], crs=4326,
                             geometry=gpd.points_from_xy(points.lon, points.lat))
    for i, chunk in enumerate(np.array_split(np.arange(len(frame)), 3)):
        frame.iloc[chunk].to_parquet(tmp_path / f"points-{i}.parquet")
    geo = read_parquet(tmp_path, geometry=True)
    assert isinstance(geo, dask_geopandas.GeoDataFrame)
    scaled = truth_grid(grid.cells, geo, device_ids="device", max_cells_per_device=4)
    np.testing.assert_array_equal(scaled.counts, memory.counts)


def test_truth_grid_refusals(client: Client, grid: Partition) -> None:
    points = _points(100, seed=0).astype({"device": "float64"})
    points.loc[[3, 50], "device"] = np.nan
    lazy = dd.from_pandas(points, npartitions=2)
    with pytest.raises(InvalidInput, match="2 missing"):
        truth_grid(grid, lazy, device_ids="device")
    with pytest.raises(InvalidInput, match="not a column"):
        truth_grid(grid, lazy, device_ids="phone")
    with pytest.raises(InvalidInput, match="lack"):
        truth_grid(grid, lazy, device_ids="device", lon="x", lat="y")


def test_query_error_split_by_draws(client: Client, grid: Partition) -> None:
    points = _points(20_000, seed=5)
    truth = truth_grid(grid, lon=points.lon, lat=points.lat, device_ids=np.arange(20_000))
    corpus = query_corpus(grid, gpd.GeoSeries([shapely.box(-99.8, 40.2, -99.4, 40.6)],
                                              crs=4326))
    draws = 4_000
    table = measure_query_error(truth, corpus, epsilon=0.5, draws=draws, rng=11,
                                clamp_negative=False, chunks=8)
    row = table.iloc[0]
    assert table.attrs["draws"] == draws
    # Identical in distribution: the moments match the exact expectations within 5 SE.
    # err is a sum of m iid discrete Laplace draws, so Var(err^2) = sigma^4 (2 + kappa / m),
    # kappa = (1 + 10a + a^2) / (2a) - 3 the excess kurtosis of one draw, a = exp(-1/scale).
    a = math.exp(-1.0 / table.attrs["scale"])
    kappa = (1 + 10 * a + a * a) / (2 * a) - 3
    sigma2 = row.expected_rms ** 2
    se = math.sqrt((2 + kappa / row.mean_cells) / draws) * sigma2
    assert abs(row.rms ** 2 - sigma2) <= 5 * se
    assert abs(row.bias) <= 5 * math.sqrt(sigma2 / draws)
    # The draws depend on rng and chunks, not on the workers: the same as one process.
    setup = _setup(truth, corpus, epsilon=0.5, method="flat", levels=4, split="geometric",
                   draws=40, report_floor=25.0, clamp_negative=True,
                   buckets=(1, 16, 256), bucket_by="cells")
    gens = np.random.default_rng(3).spawn(4)
    local = _summarise(setup, np.hstack([_simulate(setup, 10, g) for g in gens]), True)
    scaled = measure_query_error(truth, corpus, epsilon=0.5, draws=40, buckets=(1, 16, 256),
                                 rng=3, chunks=4)
    pd.testing.assert_frame_equal(scaled, local)
