"""Spatial joins: a client's features from the region or H3 cell it sits in.

A client's point is assigned to a region of a fixed, versioned
:class:`~spatialdp.geo.Partition` (vectorised, :meth:`Partition.assign`), and
the region's attributes become (part of) its feature vector, next to any
features of its own. The partition version is recorded with the fit, and so is the join itself
(:class:`SpatialJoin`, the fitted attribute ``spatial_join_``), so that
:class:`~spatialdp.regression.ModulatedRegression` predicts new points from a
GeoDataFrame exactly as it was fitted.

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
from dataclasses import dataclass
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd

from spatialdp._validation import check_choice, check_instance, check_text, fail, short_repr
from spatialdp.exceptions import InvalidInput
from spatialdp.geo import Partition

__all__ = ["SpatialJoin", "fit_geodataframe", "spatial_features"]


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


@dataclass(frozen=True)
class SpatialJoin:
    """The spatial join a model was fitted on, kept to build the same features for new points.

    :func:`fit_geodataframe` stores it as the fitted attribute ``spatial_join_``;
    :meth:`ModulatedRegression.predict <spatialdp.regression.ModulatedRegression.predict>`
    and ``score`` use it on a GeoDataFrame. Any other estimator fitted by
    :func:`fit_geodataframe` predicts new points from
    ``estimator.predict(estimator.spatial_join_.features(points))``.

    Parameters
    ----------
    partition : Partition
    region_features : DataFrame
        The region attributes of the fit (a copy: editing the original later
        changes no prediction).
    point_columns : tuple of str
        The client's own feature columns, in the order of the fit.

    Examples
    --------
    >>> import geopandas as gpd
    >>> part = Partition.from_h3_cells(["872a100d2ffffff", "872a10725ffffff"])
    >>> join = SpatialJoin(part, pd.DataFrame({"density": [1.0, 3.0]}, index=part.region_ids),
    ...                    ("speed",))
    >>> pts = gpd.GeoDataFrame({"speed": [0.5]},
    ...                        geometry=gpd.points_from_xy([-73.98], [40.75]), crs=4326)
    >>> join.features(pts).columns.tolist()
    ['speed', 'density']
    >>> join.features(pts.drop(columns="speed"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: points=['speed'] lack the column(s) the model was ...
    """

    partition: Partition
    region_features: pd.DataFrame
    point_columns: tuple[str, ...]

    def features(self, points: gpd.GeoDataFrame) -> pd.DataFrame:
        """Return one feature row per point, in order, built as at fit time; refuse gaps.

        Raises
        ------
        InvalidInput
            ``points`` is not a GeoDataFrame, lacks a point column of the fit,
            or has points in no region (a prediction needs every row).
        """
        check_instance(points, "points", gpd.GeoDataFrame,
                       "pass a GeoDataFrame of points, one client per row")
        absent = [c for c in self.point_columns if c not in points.columns]
        if absent:
            raise fail("points", absent, "lack the column(s) the model was fitted on "
                       f"(point_columns={list(self.point_columns)})",
                       "add those columns to the points")
        X = spatial_features(points, self.partition, self.region_features,
                             point_columns=self.point_columns, unassigned="drop")
        if len(X) < len(points):
            raise InvalidInput(f"{len(points) - len(X)} of {len(points)} points lie in no "
                               f"region of {self.partition.key}, so they have no features (a "
                               "prediction needs every row); drop the points outside the "
                               "partition the model was fitted on")
        return X


def fit_geodataframe(points: gpd.GeoDataFrame, estimator: Any, *, partition: Partition,
                     region_features: pd.DataFrame, label: str,
                     point_columns: Sequence[str] = (), unassigned: str = "raise") -> Any:
    """Fit ``estimator`` on the spatially joined features of ``points``; return it.

    The estimator is fitted on the :func:`spatial_features` DataFrame, so a
    scikit-learn estimator records ``feature_names_in_`` and ``n_features_in_``
    (feature names must be strings). The fitted estimator also gets
    ``partition_version_``, ``feature_names_`` (a list) and ``spatial_join_``
    (a :class:`SpatialJoin`), with which
    :class:`~spatialdp.regression.ModulatedRegression` predicts and scores a
    GeoDataFrame of new points directly.

    Raises
    ------
    InvalidInput
        Bad points, partition, attributes or label (see :func:`spatial_features`),
        a feature name that is not a string, or an estimator without ``fit``.

    Examples
    --------
    >>> from spatialdp.privacy import Simulation
    >>> from spatialdp.regression import ModulatedRegression
    >>> part = Partition.from_h3_cells(["872a100d2ffffff", "872a10725ffffff"])
    >>> attrs = pd.DataFrame({"density": [0.2, 0.6]}, index=part.region_ids)
    >>> rng = np.random.default_rng(0)
    >>> speed = rng.uniform(-0.5, 0.5, size=2000)
    >>> pts = gpd.GeoDataFrame({"speed": speed, "y": 2 * speed},
    ...                        geometry=gpd.points_from_xy([-73.98] * 2000, [40.75] * 2000),
    ...                        crs=4326)
    >>> model = fit_geodataframe(pts, ModulatedRegression(rho=50.0, target=Simulation(rng=0)),
    ...                          partition=part, region_features=attrs, label="y",
    ...                          point_columns=["speed"])
    >>> model.feature_names_in_.tolist(), model.n_features_in_
    (['speed', 'density'], 2)
    >>> model.predict(pts.iloc[:3]).shape
    (3,)
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
    not_text = [c for c in X.columns if not isinstance(c, str)]
    if not_text:
        raise InvalidInput(f"feature names {short_repr(not_text)} are not strings "
                           "(scikit-learn records feature_names_in_, and checks them in "
                           "predict, for string names only); rename the columns, e.g. "
                           "region_features.rename(columns=str)")
    estimator.fit(X, labels.to_numpy(dtype=np.float64))
    estimator.partition_version_ = partition.version
    estimator.feature_names_ = list(X.columns)
    estimator.spatial_join_ = SpatialJoin(partition, region_features.copy(),
                                          tuple(point_columns))
    return estimator
