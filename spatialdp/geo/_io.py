"""Saving and loading partitions as GeoParquet, with their version in the metadata."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import geopandas as gpd
import pyarrow as pa
import pyarrow.parquet as pq

from spatialdp._atomic import write_atomically
from spatialdp.exceptions import InvalidInput, PartitionMismatch, SpatialDPError
from spatialdp.geo._checks import short_repr

if TYPE_CHECKING:
    from spatialdp.geo.partition import Partition

_META_KEY = b"spatialdp.partition"


def _check_path(path: Any) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidInput(f"path={short_repr(path)} is a {type(path).__name__}, not a file "
                           "path; pass a str or pathlib.Path")
    if not os.fspath(path):
        raise InvalidInput("path='' is empty; pass the name of a .parquet file")
    return Path(path)


def write_partition(partition: Partition, path: str | os.PathLike[str]) -> None:
    """Write atomically: temporary file in the same folder, then ``os.replace``."""
    target = _check_path(path)
    if target.is_dir():
        raise InvalidInput(f"path={str(path)!r} is a folder; name the partition file to write, "
                           "e.g. folder / 'partition.parquet'")
    if not target.parent.is_dir():
        raise InvalidInput(f"path={str(path)!r} is in a folder that does not exist; create "
                           f"{str(target.parent)!r} first")
    frame = partition.regions.reset_index()
    meta = {
        "kind": partition.kind,
        "name": partition.name,
        "resolution": partition.resolution,
        "version": partition.version,
        "format": 1,
    }

    def write(tmp: str) -> None:
        frame.to_parquet(tmp, index=False)
        table = pq.read_table(tmp)
        merged = {**(table.schema.metadata or {}), _META_KEY: json.dumps(meta).encode()}
        pq.write_table(table.replace_schema_metadata(merged), tmp)

    write_atomically(target, write)


def read_partition(path: str | os.PathLike[str]) -> Partition:
    """Read a partition file and check that its content still hashes to its version."""
    from spatialdp.geo.partition import Partition

    source = _check_path(path)
    fix = "build one with Partition.from_geodataframe(...) and save it with .to_file()"
    if not source.is_file():
        raise InvalidInput(f"path={str(path)!r} is not a file (missing or a folder); {fix}")
    try:
        schema_meta = pq.read_schema(path).metadata or {}
    except (pa.ArrowException, OSError, ValueError) as err:  # not Parquet, a damaged footer
        raise InvalidInput(f"{path} is not a Parquet file or is damaged ({err}); {fix}"
                           ) from None
    if _META_KEY not in schema_meta:
        raise InvalidInput(
            f"{path} is not a spatialdp partition file (no {_META_KEY.decode()!r} metadata); "
            f"{fix}"
        )
    try:
        meta = json.loads(schema_meta[_META_KEY])
        kind, name, version = meta["kind"], meta["name"], meta["version"]
    except (ValueError, TypeError, KeyError):
        raise InvalidInput(f"{path} has unreadable spatialdp metadata; rebuild the file from "
                           "source and save it with .to_file()") from None
    try:
        frame = gpd.read_parquet(path)
        if "region_id" not in frame.columns or kind not in ("h3", "polygons"):
            raise InvalidInput(f"{path} has no region_id column or an unknown kind {kind!r}; "
                               "rebuild the file from source and save it with .to_file()")
        if kind == "h3":
            part = Partition.from_h3_cells(frame["region_id"].to_numpy(), name=name)
        else:
            part = Partition.from_geodataframe(frame, "region_id", name=name)
    except SpatialDPError:
        raise
    except Exception as err:  # Arrow, Parquet (OSError), GEOS and H3 errors of a damaged file
        raise InvalidInput(
            f"{path} is damaged and cannot be decoded ({type(err).__name__}: "
            f"{short_repr(str(err))}); the file was truncated, edited or corrupted: restore it "
            "or rebuild it from source and save it with .to_file()") from err
    if part.version != version:
        raise PartitionMismatch(
            f"{path} claims partition version {version!r} but its content hashes "
            f"to {part.version!r}; the file was edited or corrupted: rebuild it from source"
        )
    return part


__all__ = ["read_partition", "write_partition"]
