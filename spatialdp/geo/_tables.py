"""Per-region tables joined onto the region geometries, for maps."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import geopandas as gpd
import pandas as pd

from spatialdp.exceptions import InvalidInput
from spatialdp.geo._checks import short_repr

if TYPE_CHECKING:
    from spatialdp.geo.partition import Partition

__all__ = ["join_values"]


def join_values(partition: Partition, values: Any) -> gpd.GeoDataFrame:
    """Join a table indexed by region id (or a dict) onto the partition's regions.

    Raises
    ------
    InvalidInput
        Another type, a MultiIndex, a ``geometry`` column, ids that are not regions
        of the partition, or repeated ids.
    """
    if isinstance(values, dict):
        values = pd.Series(values, name="value", dtype=None if values else object)
    if isinstance(values, pd.Series):
        values = values.to_frame(values.name if values.name is not None else "value")
    if not isinstance(values, pd.DataFrame):
        raise InvalidInput(
            f"values={short_repr(values)} is a {type(values).__name__}; pass a DataFrame "
            "or Series indexed by region id, or a dict {region_id: value}")
    if "region_id" in values.columns:
        values = values.set_index("region_id")
    if isinstance(values.index, pd.MultiIndex):
        raise InvalidInput("values has a MultiIndex; index it by region id alone")
    if "geometry" in values.columns:
        raise InvalidInput("values has a 'geometry' column, which would hide the region "
                           "geometries; rename or drop it")
    index = values.index.astype(str)
    unknown = ~index.isin(partition.region_ids)
    if unknown.any():
        raise InvalidInput(
            f"{int(unknown.sum())} ids are not regions of {partition.key!r} (first: "
            f"{list(index[unknown][:3])}); was the table made on another partition?"
        )
    if index.duplicated().any():
        raise InvalidInput(
            f"duplicate region ids {list(index[index.duplicated()][:3])} in the table"
        )
    table = values.set_axis(index, axis=0)
    joined = partition.regions.join(table, how="left")
    joined.attrs["partition_version"] = partition.version
    return joined
