"""spatialdp.read_parquet on dask's local scheduler: where the paths are resolved, what is read.

Issue 24: a relative path was handed to the workers as it was (a worker started in
another directory raised FileNotFoundError), a URL was refused as a missing file,
and the driver read the whole first file to learn the columns.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import fsspec
import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely

from spatialdp import read_parquet
from spatialdp.exceptions import InvalidInput


def _examples(n: int = 60) -> pd.DataFrame:
    return pd.DataFrame({"client_id": np.arange(n), "region_id": ["CO", "WY"] * (n // 2),
                         "loss": np.arange(n) / 4.0})


def _write(folder: Path, frame: pd.DataFrame, files: int = 3) -> None:
    folder.mkdir(parents=True)
    for i, chunk in enumerate(np.array_split(np.arange(len(frame)), files)):
        frame.iloc[chunk].to_parquet(folder / f"part-{i}.parquet", index=False)


def test_relative_paths_are_resolved_on_the_driver(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    examples = _examples()
    _write(tmp_path / "driver" / "examples", examples)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "driver")
    frames = [read_parquet("examples", index="client_id"),  # a folder, a glob, a list
              read_parquet("examples/*.parquet", index="client_id"),
              read_parquet([f"examples/part-{i}.parquet" for i in range(3)],
                           index="client_id")]
    # a worker started in another directory: here the local scheduler, moved
    monkeypatch.chdir(tmp_path / "elsewhere")
    for frame in frames:
        pd.testing.assert_frame_equal(frame.compute(), examples.set_index("client_id"),
                                      check_dtype=False)  # string[pyarrow] (dask)


@pytest.fixture
def memory_bucket() -> Iterator[str]:
    fs = fsspec.filesystem("memory")
    yield "memory://bucket-issue24"
    if fs.exists("/bucket-issue24"):
        fs.rm("/bucket-issue24", recursive=True)


def test_urls_are_passed_to_the_workers_untouched(memory_bucket: str) -> None:
    examples = _examples()
    for i, chunk in enumerate(np.array_split(np.arange(len(examples)), 2)):
        with fsspec.open(f"{memory_bucket}/examples/part-{i}.parquet", "wb") as handle:
            examples.iloc[chunk].to_parquet(handle, index=False)
    frame = read_parquet(f"{memory_bucket}/examples", index="client_id")
    assert frame.npartitions == 2
    assert frame.known_divisions  # the footers were read through fsspec too
    pd.testing.assert_frame_equal(frame.compute(), examples.set_index("client_id"),
                                  check_dtype=False)
    points = gpd.GeoDataFrame({"device": [1, 2]}, crs=3857,
                              geometry=[shapely.Point(0, 0), shapely.Point(1, 1)])
    with fsspec.open(f"{memory_bucket}/points.parquet", "wb") as handle:
        points.to_parquet(handle)
    geo = read_parquet(f"{memory_bucket}/points.parquet", geometry=True,
                       storage_options={"skip_instance_cache": False})  # fsspec's own
    assert geo.crs == points.crs  # the meta's CRS, from the footer
    pd.testing.assert_frame_equal(geo.compute(), points)


def test_url_and_option_refusals(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="names a file system fsspec cannot open"):
        read_parquet("nosuchprotocol://bucket/examples")
    with pytest.raises(InvalidInput, match="storage_options='str' is not a mapping"):
        read_parquet(tmp_path, storage_options="anon")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="names no Parquet file"):
        read_parquet("memory://bucket-issue24-absent/examples")


def _spoil_data_pages(file: Path) -> None:
    """Overwrite everything between the magic bytes and the footer: the footer stays valid."""
    data = file.read_bytes()
    footer = struct.unpack("<i", data[-8:-4])[0]
    body_end = len(data) - 8 - footer
    file.write_bytes(data[:4] + b"\xff" * (body_end - 4) + data[body_end:])


def test_the_columns_come_from_the_footer_not_from_the_data(tmp_path: Path) -> None:
    examples = _examples().assign(kind=lambda f: pd.Categorical(f.region_id.str.lower()))
    _write(tmp_path / "examples", examples)
    first = tmp_path / "examples" / "part-0.parquet"
    _spoil_data_pages(first)
    # the driver reads no data page: the meta, the divisions and the checks are the footers'
    frame = read_parquet(tmp_path / "examples", index="client_id")
    assert frame.known_divisions
    rest = frame.partitions[1:].compute()  # what the workers read from the intact files
    pd.testing.assert_frame_equal(rest, examples.set_index("client_id").iloc[20:],
                                  check_dtype=False)  # dask's convert-string: string[pyarrow]
    assert frame._meta.dtypes.drop("kind").to_dict() == rest.dtypes.drop("kind").to_dict()
    assert frame._meta.index.name == "client_id"
    assert not frame.kind.cat.known  # each file has its own categories (as dask's reader)
    assert list(read_parquet(tmp_path / "examples", columns=["loss"]).columns) == ["loss"]
    # the data pages of the first file really are unreadable: the worker reading it fails
    with pytest.raises(OSError, match="page header"):
        frame.partitions[0].compute()
