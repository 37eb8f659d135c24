"""Spatial joins: a client's features from the region or H3 cell it sits in.

A client's point is assigned to a region of a fixed, versioned
:class:`~spatialdp.geo.Partition` (vectorised, :meth:`Partition.assign`), and
the region's attributes become (part of) its feature vector, next to any
features of its own. The partition version is recorded with the fit.

Examples
--------
>>> import geopandas as gpd
>>> from spatialdp.geo import Partition
>>> part = Partition.from_h3_cells(["872a100d2ffffff", "872a10725ffffff"])
>>> attrs = pd.DataFrame({"density": [1.0, 3.0]}, index=part.region_ids)
>>> pts = gpd.GeoDataFrame({"speed": [0.5]},
...                        geometry=gpd.points_from_xy([-73.98], [40.75]), crs=4326)
>>> spatial_features(pts, part, attrs, point_columns=["speed"]).columns.tolist()
['speed', 'density']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd

from spatialdp._validation import check_choice, fail
from spatialdp.exceptions import InvalidInput
from spatialdp.geo import Partition

__all__ = ["fit_geodataframe", "spatial_features"]


def spatial_features(points: gpd.GeoDataFrame, partition: Partition,
                     region_features: pd.DataFrame, *, point_columns: Sequence[str] = (),
                     unassigned: str = "raise") -> pd.DataFrame:
    """Return one feature row per point: its own columns, then its region's attributes.

    Parameters
    ----------
    points : GeoDataFrame of points (EPSG:4326)
        One client per row.
    partition : Partition
        Regions or H3 cells.
    region_features : DataFrame
        Indexed by the partition's region ids; numeric columns.
    point_columns : sequence of str
        Columns of ``points`` that are features of the client itself.
    unassigned : {"raise", "drop"}
        What to do with points in no region.

    Returns
    -------
    DataFrame
        Indexed like the (kept) points, ``point_columns`` then ``region_features``'
        columns; ``attrs["partition_version"]`` records the partition.
    """
    if not isinstance(partition, Partition):
        raise fail("partition", partition, "is not a Partition", "build one with "
                   "Partition.from_h3_cells or Partition.from_geodataframe")
    how = check_choice(unassigned, "unassigned", ("raise", "drop"))
    missing = partition.region_ids.difference(region_features.index)
    if len(missing):
        raise fail("region_features", list(missing[:3]), f"are {len(missing)} regions of the "
                   "partition without attributes", "give one row per region id")
    assignment = partition.assign(points)
    keep = assignment.assigned
    if not keep.all() and how == "raise":
        raise InvalidInput(f"{assignment.n_unassigned} points lie in no region of "
                           f"{partition.key}; pass unassigned='drop' or extend the partition")
    region_rows = region_features.loc[partition.region_ids].to_numpy(dtype=np.float64)
    own = points.loc[keep, list(point_columns)].to_numpy(dtype=np.float64)
    joined = region_rows[assignment.positions[keep]]
    out = pd.DataFrame(np.hstack([own, joined]), index=points.index[keep],
                       columns=[*point_columns, *region_features.columns])
    out.attrs["partition_version"] = partition.version
    return out


def fit_geodataframe(points: gpd.GeoDataFrame, estimator: Any, *, partition: Partition,
                     region_features: pd.DataFrame, label: str,
                     point_columns: Sequence[str] = (), unassigned: str = "raise") -> Any:
    """Fit ``estimator`` on the spatially joined features of ``points``; return it.

    The fitted estimator gets ``partition_version_`` and ``feature_names_``.
    """
    X = spatial_features(points, partition, region_features, point_columns=point_columns,
                         unassigned=unassigned)
    y = points.loc[X.index, label].to_numpy(dtype=np.float64)
    estimator.fit(X.to_numpy(), y)
    estimator.partition_version_ = partition.version
    estimator.feature_names_ = list(X.columns)
    return estimator
