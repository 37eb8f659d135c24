"""Saving and loading partitions as GeoParquet, with their version in the metadata."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import geopandas as gpd
import pyarrow.parquet as pq

from spatialdp.exceptions import InvalidInput, PartitionMismatch

if TYPE_CHECKING:
    from spatialdp.geo.partition import Partition

_META_KEY = b"spatialdp.partition"


def write_partition(partition: Partition, path: str | os.PathLike[str]) -> None:
    """Write atomically: temporary file in the same folder, then ``os.replace``."""
    target = Path(path)
    frame = partition.regions.reset_index()
    meta = {
        "kind": partition.kind,
        "name": partition.name,
        "resolution": partition.resolution,
        "version": partition.version,
        "format": 1,
    }
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        frame.to_parquet(tmp, index=False)
        table = pq.read_table(tmp)
        merged = {**(table.schema.metadata or {}), _META_KEY: json.dumps(meta).encode()}
        pq.write_table(table.replace_schema_metadata(merged), tmp)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_partition(path: str | os.PathLike[str]) -> Partition:
    """Read a partition file and check that its content still hashes to its version."""
    from spatialdp.geo.partition import Partition

    schema_meta = pq.read_schema(path).metadata or {}
    if _META_KEY not in schema_meta:
        raise InvalidInput(
            f"{path} is not a spatialdp partition file (no {_META_KEY.decode()!r} metadata); "
            "build one with Partition.from_geodataframe(...) and save it with .to_file()"
        )
    meta = json.loads(schema_meta[_META_KEY])
    frame = gpd.read_parquet(path)
    if meta["kind"] == "h3":
        part = Partition.from_h3_cells(frame["region_id"].to_numpy(), name=meta["name"])
    else:
        part = Partition.from_geodataframe(frame, "region_id", name=meta["name"])
    if part.version != meta["version"]:
        raise PartitionMismatch(
            f"{path} claims partition version {meta['version']!r} but its content hashes "
            f"to {part.version!r}; the file was edited or corrupted: rebuild it from source"
        )
    return part


__all__ = ["read_partition", "write_partition"]
