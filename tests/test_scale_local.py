"""Dask input to the public functions, without a cluster: optional import, refusals, progress."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from itertools import pairwise
from pathlib import Path

import dask
import dask.dataframe as dd
import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spatialdp import read_parquet
from spatialdp._dask_frames import compute, is_dask
from spatialdp.exceptions import ClippingFailure, InvalidInput
from spatialdp.federated import MetricSpec, device_report, regional_report
from spatialdp.geo.partition import Partition
from spatialdp.privacy.ledger import PrivacyLedger
from spatialdp.privacy.target import ReleaseTarget, Simulation
from spatialdp.queries import measure_query_error, query_corpus, truth_grid

LOSS = MetricSpec("loss", 0.0, 2.0)


def test_in_memory_paths_never_import_dask() -> None:
    code = textwrap.dedent("""
        import sys
        import numpy as np, pandas as pd
        import spatialdp
        from spatialdp.datasets import us_states_partition
        from spatialdp.federated import MetricSpec, device_report, regional_report
        from spatialdp.privacy import Simulation
        from spatialdp.queries import truth_grid
        from spatialdp._dask_frames import is_dask
        states = us_states_partition()
        examples = pd.DataFrame({"client_id": np.arange(200), "region_id": "CA", "loss": 1.0})
        spec = MetricSpec("loss", 0.0, 2.0)
        regional_report(device_report(examples, loss_spec=spec, partition=states), states,
                        [spec], epsilon=1.0, target=Simulation(rng=0), min_cohort=10)
        cells = ["85283473fffffff"]
        truth_grid(cells, lon=[-121.9764], lat=[37.3458], device_ids=[1])
        import geopandas as gpd, shapely
        from spatialdp.geo import Partition
        from spatialdp.queries import measure_query_error, query_corpus
        part = Partition.from_h3_cover(
            gpd.GeoDataFrame(geometry=[shapely.box(-100, 40, -99, 41)], crs=4326), 5)
        truth = truth_grid(part, lon=[-99.5], lat=[40.5], device_ids=[1])
        corpus = query_corpus(part, gpd.GeoSeries([shapely.box(-99.8, 40.2, -99.2, 40.8)],
                                                  crs=4326))
        measure_query_error(truth, corpus, epsilon=1.0, draws=5, rng=0)
        assert not is_dask(examples)
        assert "dask" not in sys.modules and "distributed" not in sys.modules, "dask imported"
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def test_is_dask_recognises_collections() -> None:
    frame = pd.DataFrame({"a": [1, 2]})
    assert not is_dask(frame)
    assert is_dask(dd.from_pandas(frame, npartitions=1))
    assert is_dask(dd.from_pandas(frame, npartitions=1).a)
    assert not is_dask(np.arange(3))


def test_dask_collections_other_than_frames_are_refused(states_partition: Partition) -> None:
    examples = pd.DataFrame({"client_id": [1, 2], "region_id": "CA", "loss": 1.0})
    series = dd.from_pandas(examples, npartitions=1).loss
    with pytest.raises(InvalidInput, match="not a Dask DataFrame"):
        device_report(series, loss_spec=MetricSpec("loss", 0.0, 2.0))
    with pytest.raises(InvalidInput, match="not a Dask DataFrame"):
        regional_report(series, states_partition, [MetricSpec("loss", 0.0, 2.0)],
                        epsilon=1.0, target=Simulation(rng=0))
    with pytest.raises(InvalidInput, match="not a Dask DataFrame"):
        truth_grid(_GRID, series, device_ids="client_id")
    with pytest.raises(InvalidInput, match="progress"):
        regional_report(examples, states_partition, [MetricSpec("loss", 0.0, 2.0)],
                        epsilon=1.0, target=Simulation(rng=0), progress=1)


def test_device_report_refusals() -> None:
    no_ids = dd.from_pandas(pd.DataFrame({"device": [1, 2], "loss": 1.0}), npartitions=1)
    with pytest.raises(InvalidInput, match="have no client_id"):
        device_report(no_ids, loss_spec=MetricSpec("loss", 0.0, 2.0))
    empty = dd.from_pandas(pd.DataFrame({"client_id": [], "loss": []}), npartitions=1)
    with pytest.raises(InvalidInput, match="empty"):
        device_report(empty, loss_spec=MetricSpec("loss", 0.0, 2.0))


def test_regional_report_on_local_scheduler_with_progress(
        states_partition: Partition, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(0)
    n = 3_000
    examples = pd.DataFrame({"client_id": rng.integers(0, 600, n), "region_id": "CA",
                             "loss": rng.integers(0, 8, n) / 4.0})
    examples["region_id"] = np.where(examples.client_id % 2 == 0, "CA", "TX")
    spec = MetricSpec("loss", 0.0, 2.0)
    memory = regional_report(device_report(examples, loss_spec=spec, partition=states_partition),
                             states_partition, [spec], epsilon=1.0, target=Simulation(rng=4),
                             min_cohort=20)
    lazy = dd.from_pandas(examples, npartitions=3, sort=False)
    scaled = regional_report(device_report(lazy, loss_spec=spec, partition=states_partition),
                             states_partition, [spec], epsilon=1.0, target=Simulation(rng=4),
                             min_cohort=20, progress=True)
    pd.testing.assert_frame_equal(scaled["loss"], memory["loss"])
    assert "Completed" in capsys.readouterr().out  # dask.diagnostics.ProgressBar
    with pytest.raises(InvalidInput, match="progress"):
        compute(lazy.loss.sum(), progress=1)


def test_read_parquet_refusals(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="names no Parquet file"):
        read_parquet(tmp_path)
    with pytest.raises(InvalidInput, match="names no Parquet file"):
        read_parquet(tmp_path / "missing.parquet")
    with pytest.raises(InvalidInput, match="is not a path"):
        read_parquet(3)  # type: ignore[arg-type]
    # overlapping client ranges: no divisions (a later shuffle gathers the clients)
    for i in range(2):
        pd.DataFrame({"client_id": [0, 5], "loss": 1.0}).to_parquet(
            tmp_path / f"p{i}.parquet", index=False)
    frame = read_parquet(tmp_path, index="client_id")
    assert not frame.known_divisions
    assert frame.compute().shape == (4, 1)
    # what the files do not hold is refused from the first file's footer, before any read
    # (pyarrow's ArrowInvalid, pandas' KeyError and geopandas' ValueError before)
    with pytest.raises(InvalidInput, match=r"columns=\['nope'\] are not columns of .*p0"):
        read_parquet(tmp_path, columns=["nope"])
    with pytest.raises(InvalidInput, match="index='nope' is not a column"):
        read_parquet(tmp_path, index="nope")
    with pytest.raises(InvalidInput, match="has no geo metadata"):
        read_parquet(tmp_path, geometry=True)
    with pytest.raises(InvalidInput, match="is not a list of column names"):
        read_parquet(tmp_path, columns="loss")
    (tmp_path / "p2.parquet").write_text("not parquet")
    with pytest.raises(InvalidInput, match="is not a Parquet file"):
        read_parquet(tmp_path / "p2.parquet")
    with pytest.raises(InvalidInput, match="p2.parquet.*is not a Parquet file"):
        read_parquet(tmp_path, index="client_id")  # its footer is read for the divisions


def test_query_error_chunks_on_dask() -> None:
    area = gpd.GeoDataFrame(geometry=[shapely.box(-100, 40, -99, 41)], crs=4326)
    part = Partition.from_h3_cover(area, 5)
    lon, lat = np.linspace(-99.9, -99.1, 200), np.linspace(40.1, 40.9, 200)
    truth = truth_grid(part, lon=lon, lat=lat, device_ids=np.arange(200))
    corpus = query_corpus(part, gpd.GeoSeries([shapely.box(-99.8, 40.2, -99.2, 40.8)],
                                              crs=4326))
    with pytest.raises(InvalidInput, match="chunks"):
        measure_query_error(truth, corpus, epsilon=1.0, chunks=0)
    with pytest.raises(InvalidInput, match="epsilon"):
        measure_query_error(truth, corpus, epsilon=-1.0, chunks=2)
    with pytest.raises(InvalidInput, match="progress"):
        measure_query_error(truth, corpus, epsilon=1.0, chunks=2, progress=1)
    # same rng and chunks: the same table, on any scheduler
    a = measure_query_error(truth, corpus, epsilon=1.0, draws=50, rng=2, chunks=3)
    b = measure_query_error(truth, corpus, epsilon=1.0, draws=50, rng=2, chunks=8)
    assert a.attrs["draws"] == b.attrs["draws"] == 50
    c = measure_query_error(truth, corpus, epsilon=1.0, draws=50, rng=2, chunks=3)
    pd.testing.assert_frame_equal(a, c)


def test_truth_grid_dispatch_refusals(capsys: pytest.CaptureFixture[str]) -> None:
    points = dd.from_pandas(pd.DataFrame({"lon": [-121.9764], "lat": [37.3458], "d": [1]}),
                            npartitions=1)
    with pytest.raises(ClippingFailure, match="device_ids=None"):
        truth_grid(["85283473fffffff"], points, device_ids=None)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="max_cells_per_device"):
        truth_grid(["85283473fffffff"], points, device_ids="d", max_cells_per_device=0)
    with pytest.raises(InvalidInput, match="progress"):
        truth_grid(["85283473fffffff"], points, device_ids="d", progress=1)
    truth = truth_grid(["85283473fffffff"], points, device_ids="d", progress=True)
    assert truth.counts.tolist() == [1]
    assert "Completed" in capsys.readouterr().out  # dask.diagnostics.ProgressBar


@settings(max_examples=8, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), parts=st.integers(1, 6), k=st.integers(1, 3))
def test_truth_grid_equals_memory_for_any_partitioning(seed: int, parts: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    points = pd.DataFrame({"lon": rng.uniform(-100.05, -98.95, n),
                           "lat": rng.uniform(39.95, 41.05, n),
                           "device": rng.integers(0, 25, n)})
    memory = truth_grid(_GRID, lon=points.lon, lat=points.lat, device_ids=points.device,
                        max_cells_per_device=k)
    with dask.config.set(scheduler="synchronous"):
        scaled = truth_grid(_GRID, dd.from_pandas(points, npartitions=parts, sort=False),
                            device_ids="device", max_cells_per_device=k)
    np.testing.assert_array_equal(scaled.counts, memory.counts)
    assert (scaled.n_devices, scaled.n_clipped_pairs, scaled.n_clipped_devices,
            scaled.n_unassigned) == (memory.n_devices, memory.n_clipped_pairs,
                                     memory.n_clipped_devices, memory.n_unassigned)


_GRID = Partition.from_h3_cover(
    gpd.GeoDataFrame(geometry=[shapely.box(-100, 40, -99, 41)], crs=4326), 5)


# --------------------------------------------------------------------------- one client, one row


def _per_example(partition: Partition, n_clients: int, seed: int) -> pd.DataFrame:
    """3 to 5 examples per client, sorted by client, each client in one region."""
    rng = np.random.default_rng(seed)
    per = rng.integers(3, 6, n_clients)
    client = np.repeat(np.arange(n_clients), per)
    region = np.asarray(partition.region_ids)[rng.integers(0, 4, n_clients)]
    return pd.DataFrame({"client_id": client, "region_id": region[client],
                         "loss": rng.integers(0, 12, client.size) / 4.0})


def _split_files(examples: pd.DataFrame, folder: Path, cuts: list[int]) -> None:
    """Parquet files cut at these rows: a cut inside a client's rows splits the client."""
    bounds = [0, *cuts, len(examples)]
    for i, (lo, hi) in enumerate(pairwise(bounds)):
        examples.iloc[lo:hi].to_parquet(folder / f"part-{i}.parquet", index=False)


def _ledger_target() -> tuple[PrivacyLedger, ReleaseTarget]:
    ledger = PrivacyLedger(":memory:", epoch_budget=5.0)
    return ledger, ReleaseTarget(ledger, epoch=0, why="one client, one row")


# dask.dataframe.read_parquet calls set_index(inplace=True), deprecated in pandas 3.1
@pytest.mark.filterwarnings("ignore:The inplace keyword in DataFrame.set_index")
def test_client_split_across_parquet_files_is_one_client(states_partition: Partition,
                                                         tmp_path: Path) -> None:
    # issue 21: dd.read_parquet(calculate_divisions=True) gives divisions from the files'
    # statistics that put a client whose rows two files share on both sides of a boundary
    examples = _per_example(states_partition, 300, seed=5)
    starts = np.flatnonzero(np.diff(examples.client_id.to_numpy())) + 1  # each client's first
    # mid-client cuts (3 to 5 rows each): client 51's rows in 3 files, the middle one of 1 row
    cuts = [starts[50] + 1, starts[50] + 2, starts[120] + 1, starts[200] + 2]
    _split_files(examples, tmp_path, cuts)
    lazy = dd.read_parquet(tmp_path, index="client_id", calculate_divisions=True)
    assert lazy.known_divisions
    assert lazy.npartitions == 5
    memory = device_report(examples, loss_spec=LOSS, partition=states_partition)
    clients = device_report(lazy, loss_spec=LOSS, partition=states_partition)
    got = clients.compute().sort_index()
    assert len(got) == 300  # was 304: client 51 three times, 121 and 201 twice
    pd.testing.assert_frame_equal(got, memory, check_categorical=False, check_like=True)
    report = regional_report(clients, states_partition, [LOSS], epsilon=1.0,
                             target=Simulation(rng=0), min_cohort=10)
    truth = memory.groupby("region_id", observed=True).size()
    assert report["loss"].cohort.dropna().astype(int).to_dict() == truth.to_dict()


def test_divisions_that_lie_are_not_trusted(states_partition: Partition) -> None:
    from dask import delayed

    examples = _per_example(states_partition, 60, seed=6).set_index("client_id")
    # client 20's rows in partitions 0 and 1, client 40's in 1, 2 and 3 (a file of one client)
    ids = examples.index.to_numpy()
    cuts = [int(np.flatnonzero(ids == 20)[1]), int(np.flatnonzero(ids == 40)[1]),
            int(np.flatnonzero(ids == 40)[2])]
    bounds = [0, *cuts, len(examples)]
    pieces = [delayed(examples.iloc[lo:hi]) for lo, hi in pairwise(bounds)]
    claimed = (0, 20, 40, 41, 59)  # [0, 20), [20, 40), [40, 41), [41, 59]: all wrong
    lazy = dd.from_delayed(pieces, meta=examples.iloc[:0], divisions=claimed)
    memory = device_report(examples.reset_index(), loss_spec=LOSS)
    got = device_report(lazy, loss_spec=LOSS).compute().sort_index()
    pd.testing.assert_frame_equal(got, memory, check_categorical=False, check_like=True)
    # partitions that are not sorted at all, under divisions that say they are: refused
    shuffled = examples.sample(frac=1.0, random_state=0)
    unsorted = dd.from_delayed([delayed(shuffled.iloc[:100]), delayed(shuffled.iloc[100:])],
                               meta=examples.iloc[:0], divisions=(0, 30, 59))
    ledger, target = _ledger_target()
    with pytest.raises(InvalidInput, match="partitions are not sorted by client_id"):
        regional_report(device_report(unsorted, loss_spec=LOSS, partition=states_partition),
                        states_partition, [LOSS], epsilon=1.0, target=target, min_cohort=1)
    assert len(ledger.audit(0)) == 0


def test_reports_repeated_across_partitions_with_known_divisions_are_refused(
        states_partition: Partition) -> None:
    from dask import delayed

    reports = device_report(_per_example(states_partition, 60, seed=7),
                                      loss_spec=LOSS, partition=states_partition)
    ok = dd.from_pandas(reports, npartitions=3)  # sorted, disjoint: no count needed
    assert ok.known_divisions
    ledger, target = _ledger_target()
    regional_report(ok, states_partition, [LOSS], epsilon=1.0, target=target, min_cohort=1)
    assert len(ledger.audit(0)) == 1
    # client 29 in both partitions, under divisions [0, 30), [30, 59]
    twice = dd.from_delayed([delayed(reports.iloc[:30]), delayed(reports.iloc[29:])],
                            meta=reports.iloc[:0], divisions=(0, 30, 59))
    ledger, target = _ledger_target()
    with pytest.raises(InvalidInput, match=r"1 repeated value across partitions \(first: 29\)"):
        regional_report(twice, states_partition, [LOSS], epsilon=1.0, target=target,
                        min_cohort=1)
    assert len(ledger.audit(0)) == 0


def _typed(frame: pd.DataFrame, kind: str) -> pd.DataFrame:
    """``frame`` with its client ids as strings or as Python ints in an object column."""
    ids = frame.client_id.astype(str) if kind == "str" else frame.client_id.astype(object)
    return frame.assign(client_id=ids)


def test_client_ids_of_two_types_across_partitions_are_refused(
        states_partition: Partition) -> None:
    from dask import delayed

    examples = _per_example(states_partition, 40, seed=8)
    # the same 40 clients, once with int ids and once with str ids: 7 and "7" are one
    # client each time, never two
    halves = [delayed(examples), delayed(_typed(examples, "str"))]
    lazy = dd.from_delayed(halves, meta=examples.iloc[:0], verify_meta=False)
    ledger, target = _ledger_target()
    with pytest.raises(InvalidInput, match="client_id mixes ids of types"):
        regional_report(device_report(lazy, loss_spec=LOSS, partition=states_partition),
                        states_partition, [LOSS], epsilon=1.0, target=target, min_cohort=1)
    # the same through the no-shuffle path (index, known divisions)
    indexed = [delayed(examples.set_index("client_id")),
               delayed(_typed(examples, "str").set_index("client_id"))]
    sorted_lazy = dd.from_delayed(indexed, meta=examples.set_index("client_id").iloc[:0],
                                  divisions=(0, 39, 39), verify_meta=False)
    with pytest.raises(InvalidInput, match="mixes ids of types integer and string"):
        regional_report(device_report(sorted_lazy, loss_spec=LOSS, partition=states_partition),
                        states_partition, [LOSS], epsilon=1.0, target=target, min_cohort=1)
    # client reports given directly
    reports = device_report(examples, loss_spec=LOSS, partition=states_partition)
    mixed = dd.from_delayed([delayed(reports.iloc[:20]),
                             delayed(reports.iloc[20:].rename(index=str))],
                            meta=reports.iloc[:0], verify_meta=False)
    with pytest.raises(InvalidInput, match="mixes ids of types integer and string"):
        regional_report(mixed, states_partition, [LOSS], epsilon=1.0, target=target,
                        min_cohort=1)
    # one partition mixing them
    inside = dd.from_delayed([delayed(_typed(examples, "object").assign(
        client_id=lambda f: np.where(f.client_id == 7, "7", f.client_id).astype(object)))],
        meta=examples.iloc[:0], verify_meta=False)
    with pytest.raises(InvalidInput, match="mixes ids of types int and str"):
        regional_report(device_report(inside, loss_spec=LOSS, partition=states_partition),
                        states_partition, [LOSS], epsilon=1.0, target=target, min_cohort=1)
    assert len(ledger.audit(0)) == 0


def test_one_client_in_partitions_of_different_dtypes_is_gathered(
        states_partition: Partition) -> None:
    from dask import delayed

    # the same ids as Python ints in an object column and as int64: pandas hashes the
    # first by their text and the second by their bits, so the shuffle sent one client to
    # two partitions; they are given one dtype before it
    # (dask's convert-string off: it would make the object column strings)
    examples = _per_example(states_partition, 200, seed=9).sample(frac=1.0, random_state=1)
    a, b = examples.iloc[: len(examples) // 2], examples.iloc[len(examples) // 2:]
    with dask.config.set({"dataframe.convert-string": False}):
        lazy = dd.from_delayed([delayed(_typed(a, "object")), delayed(b)],
                               meta=_typed(a, "object").iloc[:0], verify_meta=False)
    with dask.config.set({"dataframe.shuffle.method": "tasks"}):
        got = device_report(lazy, loss_spec=LOSS).compute()
    assert got.index.is_unique
    assert len(got) == 200
    memory = device_report(examples, loss_spec=LOSS)
    np.testing.assert_allclose(got.sort_index().loss.to_numpy(), memory.loss.to_numpy())


def test_truth_grid_device_ids_of_two_types_are_refused() -> None:
    from dask import delayed

    points = pd.DataFrame({"lon": np.linspace(-99.9, -99.1, 40),
                           "lat": np.linspace(40.1, 40.9, 40), "device": np.arange(40) % 8})
    halves = [delayed(points.iloc[:20]), delayed(_typed(points.rename(
        columns={"device": "client_id"}), "str").rename(columns={"client_id": "device"})
        .iloc[20:])]
    lazy = dd.from_delayed(halves, meta=points.iloc[:0], verify_meta=False)
    with pytest.raises(InvalidInput, match="device mixes ids of types integer and string"):
        truth_grid(_GRID, lazy, device_ids="device")
    mixed = points.device.astype(object).where(points.index % 2 == 0, points.device.astype(str))
    with pytest.raises(InvalidInput, match="device_ids mixes ids of types int and str"):
        truth_grid(_GRID, lon=points.lon, lat=points.lat, device_ids=mixed)  # in memory
    # the same ids in object and int64 partitions: one device each, as in memory
    memory = truth_grid(_GRID, lon=points.lon, lat=points.lat, device_ids=points.device)
    with dask.config.set({"dataframe.shuffle.method": "tasks",
                          "dataframe.convert-string": False}):
        objects = dd.from_delayed([delayed(points.iloc[:20].astype({"device": object})),
                                   delayed(points.iloc[20:])],
                                  meta=points.iloc[:0].astype({"device": object}),
                                  verify_meta=False)
        scaled = truth_grid(_GRID, objects, device_ids="device")
    np.testing.assert_array_equal(scaled.counts, memory.counts)
    assert scaled.n_devices == memory.n_devices == 8
