"""Dask scale-out without a cluster: optional import, engine choice, refusals, progress bar."""

from __future__ import annotations

import subprocess
import sys
import textwrap
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

from spatialdp.exceptions import ClippingFailure, InvalidInput
from spatialdp.federated import MetricSpec
from spatialdp.geo.partition import Partition
from spatialdp.privacy.target import Simulation
from spatialdp.queries import measure_query_error, query_corpus, truth_grid
from spatialdp.scale import compute, device_report, is_dask, read_parquet, regional_report


def test_in_memory_paths_never_import_dask() -> None:
    code = textwrap.dedent("""
        import sys
        import numpy as np, pandas as pd
        import spatialdp
        from spatialdp.datasets import us_states_partition
        from spatialdp.federated import MetricSpec, device_report, regional_report
        from spatialdp.privacy import Simulation
        from spatialdp.queries import truth_grid
        from spatialdp.scale import is_dask
        states = us_states_partition()
        examples = pd.DataFrame({"client_id": np.arange(200), "region_id": "CA", "loss": 1.0})
        spec = MetricSpec("loss", 0.0, 2.0)
        regional_report(device_report(examples, loss_spec=spec, partition=states), states,
                        [spec], epsilon=1.0, target=Simulation(rng=0), min_cohort=10)
        cells = ["85283473fffffff"]
        truth_grid(cells, lon=[-121.9764], lat=[37.3458], device_ids=[1])
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


def test_pandas_input_is_refused_not_shipped(states_partition: Partition) -> None:
    examples = pd.DataFrame({"client_id": [1, 2], "region_id": "CA", "loss": 1.0})
    with pytest.raises(InvalidInput, match="not a Dask DataFrame"):
        device_report(examples, loss_spec=MetricSpec("loss", 0.0, 2.0))
    with pytest.raises(InvalidInput, match="not a Dask DataFrame"):
        regional_report(examples, states_partition, [MetricSpec("loss", 0.0, 2.0)],
                        epsilon=1.0, target=Simulation(rng=0))


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
    from spatialdp.federated import device_report as memory_device_report
    from spatialdp.federated import regional_report as memory_report

    memory = memory_report(memory_device_report(examples, loss_spec=spec,
                                                partition=states_partition),
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


def test_query_error_engine_refusals() -> None:
    area = gpd.GeoDataFrame(geometry=[shapely.box(-100, 40, -99, 41)], crs=4326)
    part = Partition.from_h3_cover(area, 5)
    lon, lat = np.linspace(-99.9, -99.1, 200), np.linspace(40.1, 40.9, 200)
    truth = truth_grid(part, lon=lon, lat=lat, device_ids=np.arange(200))
    corpus = query_corpus(part, gpd.GeoSeries([shapely.box(-99.8, 40.2, -99.2, 40.8)],
                                              crs=4326))
    with pytest.raises(InvalidInput, match="engine"):
        measure_query_error(truth, corpus, epsilon=1.0, engine="spark")  # type: ignore[arg-type]
    from spatialdp.scale import measure_query_error as on_dask

    with pytest.raises(InvalidInput, match="chunks"):
        on_dask(truth, corpus, epsilon=1.0, chunks=0)
    with pytest.raises(InvalidInput, match="epsilon"):
        on_dask(truth, corpus, epsilon=-1.0)
    # same rng and chunks: the same table, on any scheduler
    a = on_dask(truth, corpus, epsilon=1.0, draws=50, rng=2, chunks=3)
    b = measure_query_error(truth, corpus, epsilon=1.0, draws=50, rng=2, engine="dask")
    assert a.attrs["draws"] == b.attrs["draws"] == 50
    c = on_dask(truth, corpus, epsilon=1.0, draws=50, rng=2, chunks=3)
    pd.testing.assert_frame_equal(a, c)


def test_truth_grid_dispatch_refusals() -> None:
    points = dd.from_pandas(pd.DataFrame({"lon": [-121.9764], "lat": [37.3458], "d": [1]}),
                            npartitions=1)
    with pytest.raises(ClippingFailure, match="device_ids=None"):
        truth_grid(["85283473fffffff"], points, device_ids=None)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="max_cells_per_device"):
        truth_grid(["85283473fffffff"], points, device_ids="d", max_cells_per_device=0)
    truth = truth_grid(["85283473fffffff"], points, device_ids="d")
    assert truth.counts.tolist() == [1]


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
