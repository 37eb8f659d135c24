"""Strata: a fixed, versioned Partition that clients are sampled within.

Strata come from geography fixed in advance: administrative polygons, coarse H3
cells, or density classes derived once from a public source
(:func:`~spatialdp.sampling.density.density_strata`). Strata derived from the
current model's error are refused: they are a function of the data, which
makes selection adaptive and leaks.
"""

from __future__ import annotations

import hashlib
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely
from numpy.typing import ArrayLike, NDArray
from scipy import sparse

from spatialdp._validation import check_finite_array, check_instance, check_text, fail
from spatialdp.exceptions import InvalidInput
from spatialdp.geo.partition import Partition

__all__ = ["BASES", "Strata"]

#: The accepted origins of strata: geography fixed in advance.
BASES = ("administrative", "h3", "density")

_ADAPTIVE = ("error", "loss", "residual", "model", "accuracy", "gradient", "adaptive")


def _as_array(values: object) -> NDArray[Any]:
    """``np.asarray(values)``, or a 0-d object array for ragged nests numpy refuses."""
    try:
        return np.asarray(values)
    except (TypeError, ValueError):
        return np.empty((), dtype=object)


class Strata:
    """A stratification: one stratum per region of a fixed :class:`Partition`.

    Parameters
    ----------
    partition : Partition
        The strata's geometry; its regions are the strata, its adjacency is used
        to merge small strata.
    basis : {"administrative", "h3", "density"}
        Where the strata come from. Anything derived from a model (``"model_error"``,
        ``"loss"``...) is refused.
    cell_partition : Partition, optional
        For derived strata (density classes): the H3 partition clients are located
        in, and ``cell_stratum`` the stratum position of each of its cells.
    cell_stratum : array of int, optional
    order : sequence of str, optional
        Display order of the strata (default: partition order).

    Examples
    --------
    >>> from spatialdp.datasets import us_states_partition
    >>> strata = Strata(us_states_partition(), basis="administrative")
    >>> strata.n_strata, strata.assign(lon=[-120.0], lat=[37.0]).tolist()
    (48, [3])
    >>> Strata(us_states_partition(), basis="model_error")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: basis='model_error' is derived from the model: ...
    """

    def __init__(self, partition: Partition, *, basis: str,
                 cell_partition: Partition | None = None,
                 cell_stratum: ArrayLike | None = None,
                 order: list[str] | None = None) -> None:
        self.partition = check_instance(partition, "partition", Partition,
                                        "pass a spatialdp.geo.Partition")
        text = check_text(basis, "basis")
        if any(word in text.lower() for word in _ADAPTIVE):
            raise fail("basis", basis,
                       "is derived from the model: such strata are a function of the data, "
                       "so selection becomes adaptive and leaks",
                       f"stratify on fixed geography {list(BASES)}; for error-driven "
                       "targeting use published DP metrics and account for them")
        if text not in BASES:
            raise fail("basis", basis, "is not a fixed geographic basis", f"pass one of {BASES}")
        self.basis = text
        if (cell_partition is None) != (cell_stratum is None):
            raise InvalidInput("cell_partition and cell_stratum go together; pass both or "
                               "neither")
        self.cell_partition = cell_partition
        self.cell_stratum: NDArray[np.int64] | None = None
        if cell_partition is not None:
            check_instance(cell_partition, "cell_partition", Partition,
                           "pass the H3 Partition the strata are derived from")
            mapping = np.asarray(cell_stratum)
            if (mapping.shape != (cell_partition.n_regions,) or mapping.dtype.kind not in "iu"
                    or mapping.min() < 0 or mapping.max() >= partition.n_regions):
                raise InvalidInput(
                    f"cell_stratum must hold one stratum position (0..{partition.n_regions - 1})"
                    f" per cell of cell_partition ({cell_partition.n_regions} cells)")
            self.cell_stratum = mapping.astype(np.int64)
        ids = [str(x) for x in partition.region_ids]
        if order is None:
            self.order = ids
        else:
            if not isinstance(order, list) or sorted(map(str, order)) != sorted(ids):
                raise fail("order", order, "is not a permutation of the stratum ids",
                           f"list each of {ids[:5]}... once")
            self.order = list(order)
        self.version = self._hash()

    def _hash(self) -> str:
        digest = hashlib.sha256(f"{self.basis}|{self.partition.version}|".encode())
        if self.cell_partition is not None and self.cell_stratum is not None:
            digest.update(self.cell_partition.version.encode())
            digest.update(self.cell_stratum.tobytes())
        return digest.hexdigest()[:16]

    # ------------------------------------------------------------------ identity
    @property
    def ids(self) -> pd.Index:
        """Stratum ids in partition (position) order."""
        return pd.Index([str(x) for x in self.partition.region_ids], name="stratum")

    @property
    def n_strata(self) -> int:
        """Number of strata."""
        return self.partition.n_regions

    @property
    def key(self) -> str:
        """``name@version`` of the stratification."""
        return f"{self.partition.name}:{self.basis}@{self.version}"

    def __repr__(self) -> str:
        cells = (f", cells={self.cell_partition.n_regions}"
                 if self.cell_partition is not None else "")
        return (f"Strata(basis={self.basis!r}, strata={self.n_strata}{cells}, "
                f"version={self.version!r})")

    # ------------------------------------------------------------------ geometry
    def adjacency(self) -> sparse.csr_array:
        """Return the strata's adjacency (the partition's)."""
        return self.partition.adjacency()

    def centroids(self) -> NDArray[np.float64]:
        """Return a representative lon/lat point of every stratum, shape (n, 2)."""
        points = shapely.point_on_surface(np.asarray(self.partition.regions.geometry.values))
        return np.column_stack([shapely.get_x(points), shapely.get_y(points)])

    # ------------------------------------------------------------------ clients
    def assign(self, points: gpd.GeoDataFrame | gpd.GeoSeries | None = None, *,
               lon: ArrayLike | None = None, lat: ArrayLike | None = None) -> NDArray[np.int64]:
        """Return the stratum position of every point, ``-1`` where it is in none.

        Vectorised: the partition's (or the cell partition's) :meth:`Partition.assign`.
        """
        if self.cell_partition is not None and self.cell_stratum is not None:
            cells = self.cell_partition.assign(points, lon=lon, lat=lat).positions
            return np.where(cells >= 0, self.cell_stratum[np.maximum(cells, 0)], -1)
        return self.partition.assign(points, lon=lon, lat=lat).positions

    def positions(self, stratum_ids: ArrayLike) -> NDArray[np.int64]:
        """Return the positions of stratum ids; ids not in the partition are refused.

        Raises
        ------
        InvalidInput
            Ids that are not strata of this partition.

        Examples
        --------
        >>> from spatialdp.datasets import us_states_partition
        >>> strata = Strata(us_states_partition(), basis="administrative")
        >>> strata.positions(["CA", "TX"]).tolist()
        [3, 40]
        >>> strata.positions(["CA", "ZZ"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        spatialdp.exceptions.InvalidInput: 1 stratum ids are not strata of ...; first: 'ZZ'; ...
        """
        values = pd.Index(np.asarray(stratum_ids, dtype=object).ravel())
        found = self.ids.get_indexer(values.astype(str) if len(values) else values)
        bad = found < 0
        if bad.any() or values.hasnans:
            missing = values[bad | np.asarray(values.isna())]
            raise InvalidInput(
                f"{len(missing)} stratum ids are not strata of {self.key}; first: "
                f"{missing[0]!r}; assign clients with Strata.assign "
                "or pass ids from Strata.ids")
        return np.asarray(found, dtype=np.int64)

    def crosswalk(self, report: Partition, *, weights: ArrayLike | None = None) -> pd.DataFrame:
        """Return the fixed mapping from strata to the regions of a report partition.

        For derived strata each cell goes to the report region that holds its
        centre; for partition strata each stratum's representative point is used
        when it lies wholly in one region, else its area is split by overlay.

        Parameters
        ----------
        report : Partition
            The reporting geography (e.g. the 48 states).
        weights : array, optional
            A weight per cell (derived strata) to sum per pair, e.g. population.

        Returns
        -------
        DataFrame
            Columns ``stratum``, ``region_id``, ``cells`` (or ``area_share``),
            ``weight``; plus ``strata_version`` and ``report_version`` columns.
        """
        check_instance(report, "report", Partition, "pass the reporting Partition")
        if self.cell_partition is not None and self.cell_stratum is not None:
            centres = shapely.centroid(np.asarray(self.cell_partition.regions.geometry.values))
            region = report.assign(lon=shapely.get_x(centres), lat=shapely.get_y(centres))
            w = (np.ones(self.cell_stratum.size) if weights is None
                 else check_finite_array(weights, "weights"))
            if w.shape != self.cell_stratum.shape:
                raise fail("weights", weights, f"has shape {w.shape}",
                           f"pass one weight per cell ({self.cell_stratum.size})")
            frame = pd.DataFrame({"stratum": self.ids[self.cell_stratum],
                                  "region_id": region.ids(), "cells": 1, "weight": w})
            frame = frame.dropna(subset=["region_id"])
            table = frame.groupby(["stratum", "region_id"], as_index=False)[
                ["cells", "weight"]].sum()
        else:
            left = self.partition.regions.reset_index().rename(columns={"region_id": "stratum"})
            right = report.regions.reset_index()
            both = gpd.overlay(left.to_crs(6933), right.to_crs(6933), how="intersection",
                               keep_geom_type=True)
            both["area"] = both.area
            both["area_share"] = both.area / both.groupby("stratum")["area"].transform("sum")
            table = both[["stratum", "region_id", "area_share"]].copy()
            table["weight"] = table["area_share"]
        table["strata_version"] = self.version
        table["report_version"] = report.version
        return table.reset_index(drop=True)

    def population(self, stratum_positions: ArrayLike) -> pd.Series:
        """Count clients per stratum from their positions (``-1`` refused).

        Examples
        --------
        >>> from spatialdp.sampling.simulation import row_strata
        >>> strata, fleet = row_strata({"a": 3, "b": 1})
        >>> strata.population(fleet).tolist()
        [3, 1]
        """
        stratum_positions = _as_array(stratum_positions)
        if stratum_positions.ndim != 1 or stratum_positions.dtype.kind not in "iu":
            raise fail("stratum_positions", stratum_positions, "are not whole-number positions",
                       "pass Strata.assign(...) output")
        if (stratum_positions < 0).any() or (stratum_positions >= self.n_strata).any():
            raise InvalidInput(
                f"{int(((stratum_positions < 0) | (stratum_positions >= self.n_strata)).sum())}"
                f" clients have no stratum of {self.key}; drop them or use a partition that "
                "covers the fleet")
        counts = np.bincount(stratum_positions, minlength=self.n_strata)
        return pd.Series(counts, index=self.ids, name="population")
