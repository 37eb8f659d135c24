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

from spatialdp._validation import check_choice, check_instance, check_text, fail
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
    check_instance(points, "points", gpd.GeoDataFrame,
                   "pass a GeoDataFrame of points, one client per row")
    check_instance(region_features, "region_features", pd.DataFrame,
                   "pass a DataFrame of numeric attributes indexed by the region ids")
    columns = _check_columns(points, point_columns)
    if not region_features.columns.is_unique:
        raise fail("region_features", list(region_features.columns), "has repeated columns",
                   "give each attribute one column")
    repeated = set(columns) & set(region_features.columns)
    if repeated:
        raise fail("point_columns", sorted(map(str, repeated)), "repeat columns of "
                   "region_features", "rename the point columns or the region attributes")
    if not all(pd.api.types.is_numeric_dtype(t) and not pd.api.types.is_bool_dtype(t)
               for t in region_features.dtypes):
        raise fail("region_features", dict(region_features.dtypes.astype(str)),
                   "has columns that are not numbers", "keep numeric attributes only")
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
    own = points.loc[keep, columns].to_numpy(dtype=np.float64)
    joined = region_rows[assignment.positions[keep]]
    out = pd.DataFrame(np.hstack([own, joined]), index=points.index[keep],
                       columns=[*columns, *region_features.columns])
    out.attrs["partition_version"] = partition.version
    return out


def _check_columns(points: gpd.GeoDataFrame, point_columns: Any) -> list[Any]:
    """Return ``point_columns`` as a list of numeric, existing, distinct columns, or refuse."""
    fix = "pass a list of numeric column names of points, e.g. ['speed']"
    if isinstance(point_columns, (str, bytes)) or not isinstance(point_columns, Sequence):
        raise fail("point_columns", point_columns, f"is a {type(point_columns).__name__}, "
                   "not a sequence of column names", fix)
    columns = list(point_columns)
    absent = [c for c in columns if c not in points.columns]
    if absent:
        raise fail("point_columns", absent, "are not columns of points", fix)
    if len(set(columns)) != len(columns) or any(
            int((points.columns == c).sum()) > 1 for c in columns):
        raise fail("point_columns", columns, "repeat a column (or points repeats column "
                   "names)", "name each column once")
    for c in columns:
        if (not pd.api.types.is_numeric_dtype(points[c])
                or pd.api.types.is_bool_dtype(points[c])):
            raise fail("point_columns", c, f"is a column of {points[c].dtype}, not numbers", fix)
    return columns


def fit_geodataframe(points: gpd.GeoDataFrame, estimator: Any, *, partition: Partition,
                     region_features: pd.DataFrame, label: str,
                     point_columns: Sequence[str] = (), unassigned: str = "raise") -> Any:
    """Fit ``estimator`` on the spatially joined features of ``points``; return it.

    The fitted estimator gets ``partition_version_`` and ``feature_names_``.
    """
    X = spatial_features(points, partition, region_features, point_columns=point_columns,
                         unassigned=unassigned)
    check_text(label, "label")
    if label not in points.columns:
        raise fail("label", label, "is not a column of points", "name the label column")
    labels = points.loc[X.index, label]
    if labels.ndim != 1 or not pd.api.types.is_numeric_dtype(labels):
        raise fail("label", label, "is not one numeric column of points (repeated name or "
                   "not numbers)", "name one numeric label column")
    if not hasattr(estimator, "fit"):
        raise fail("estimator", estimator, "has no fit method",
                   "pass an estimator such as ModulatedRegression(...)")
    y = labels.to_numpy(dtype=np.float64)
    estimator.fit(X.to_numpy(), y)
    estimator.partition_version_ = partition.version
    estimator.feature_names_ = list(X.columns)
    return estimator
