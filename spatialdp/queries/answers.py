"""Answers to polygon queries from one materialised noisy grid, with honest error bars.

Every answer comes from the same published grid, so answers are consistent by
construction (a union of disjoint polygons answers the sum of their answers)
and cost no budget beyond the grid's one release. The error bar of a flat
answer is the exact two-sided ``(1 - alpha)`` half-width of a sum of ``m``
discrete Laplace cells (:func:`~spatialdp.privacy.accuracy.half_width`, exact
for small ``m`` too, never ``1.96 sqrt(m) sigma``); a hierarchical answer's
bar is the exact quantile of its law, a weighted sum of independent draws
(:mod:`~spatialdp.queries.weighted_sum`; ``z_(1-alpha/2)`` times its exact
standard deviation beyond :data:`EXACT_BARS_UP_TO` polygons). An
out-of-range answer (negative, or larger than the population) is published
as it is, with its bar: clipping it to a plausible range would add a second,
harder-to-model bias.

The discretisation error is reported next to it: the polygon is answered by
the cells that stand for it, whose total area differs from the polygon's.
"""

from __future__ import annotations

from typing import Any

import geopandas as gpd
import numpy as np
from scipy import special

from spatialdp._validation import check_alpha, check_instance
from spatialdp.geo import Partition, h3cells
from spatialdp.privacy.accuracy import half_width
from spatialdp.queries.corpus import query_corpus
from spatialdp.queries.grids import NOISE_KIND, NoisyGrid, check_incidence

__all__ = ["EXACT_BARS_UP_TO", "answer_polygons"]

#: Hierarchical answers get exact bars (inversion of the answer's law) for up to this
#: many polygons; beyond, ``z * sd`` (each answer is a weighted sum of many draws).
EXACT_BARS_UP_TO = 200


def _hierarchical_bars(grid: NoisyGrid, incidence: Any, std: Any, level: float) -> Any:
    """Return the hierarchical half-widths: exact quantiles, or z * sd for many polygons."""
    from spatialdp.queries.weighted_sum import WeightedSum

    assert grid.tree is not None
    if std.size > EXACT_BARS_UP_TO:
        return std * float(special.ndtri(1.0 - level / 2.0))
    weights = grid.tree.query_weights(incidence.matrix)
    bars = np.empty(std.size)
    for j in range(std.size):
        bars[j] = WeightedSum.of_query(weights, grid.scales, j).quantile_abs(1.0 - level)
    return bars


def answer_polygons(grid: NoisyGrid, polygons: gpd.GeoDataFrame, partition: Partition, *,
                    containment: h3cells.Containment = "center",
                    alpha: float = 0.05) -> gpd.GeoDataFrame:
    """Answer each polygon from the released grid: value, exact error bar, ``m``, discretisation.

    Parameters
    ----------
    grid : NoisyGrid
        The published grid (:func:`release_flat` or :func:`release_hierarchical`).
    polygons : GeoDataFrame of (Multi)Polygons in EPSG:4326
    partition : Partition
        The H3 partition the grid was released on (same version).
    containment : {"center", "overlap", "full"}
        Which cells stand for each polygon.
    alpha : float, default 0.05
        The bars cover the true answer with probability at least ``1 - alpha``.

    Returns
    -------
    GeoDataFrame
        The polygons' rows and geometry plus ``answer``, ``error_bar`` (half-width),
        ``lower``, ``upper``, ``std``, ``cells`` (``m``), ``polygon_area_km2``,
        ``cell_area_km2``, ``discretisation_error`` (``cell_area / polygon_area - 1``),
        ``method``; ``attrs`` holds the grid's accounting and ``alpha``.

    Raises
    ------
    CRSError
        Polygons not in EPSG:4326.
    InvalidInput
        Polygons reaching outside the partition, or covering none of its cells.
    PartitionMismatch
        A partition of another version than the grid's.

    Examples
    --------
    >>> import shapely
    >>> from spatialdp.privacy import Simulation
    >>> from spatialdp.queries import release_flat, truth_grid
    >>> area = gpd.GeoDataFrame(geometry=[shapely.box(-100, 40, -99, 41)], crs=4326)
    >>> part = Partition.from_h3_cover(area, 6)
    >>> truth = truth_grid(part, lon=[-99.5] * 30, lat=[40.5] * 30, device_ids=range(30))
    >>> grid = release_flat(truth, epsilon=1.0, target=Simulation(rng=0))
    >>> polygons = gpd.GeoDataFrame({"name": ["centre"]}, crs=4326,
    ...                             geometry=[shapely.box(-99.7, 40.3, -99.3, 40.7)])
    >>> out = answer_polygons(grid, polygons, part)
    >>> out[["name", "cells", "error_bar"]].values.tolist()
    [['centre', 41, 17.0]]
    """
    grid = check_instance(grid, "grid", NoisyGrid,
                          "pass the result of release_flat(...) or release_hierarchical(...)")
    level = check_alpha(alpha)
    partition = check_instance(partition, "partition", Partition,
                               "pass the H3 partition the grid was released on")
    partition.require_version(grid.partition_version, what="the released grid")
    corpus = query_corpus(partition, polygons, containment=containment)
    incidence = corpus.incidence
    check_incidence(grid, incidence)
    m = incidence.cells_per_query
    if grid.tree is None:
        answer = np.asarray(incidence.matrix @ grid.values, dtype=np.int64)
        bar = np.asarray(half_width(NOISE_KIND, grid.scales[-1], m, level))
        std = np.sqrt(grid.query_variance(incidence))
        out_answer: Any = answer
    else:
        out_answer = grid.tree.answer_from_cover(incidence.matrix)
        std = np.sqrt(grid.query_variance(incidence))
        bar = _hierarchical_bars(grid, incidence, std, level)
    frame = gpd.GeoDataFrame(polygons.copy())
    frame["answer"] = out_answer
    frame["error_bar"] = bar
    frame["lower"] = out_answer - bar
    frame["upper"] = out_answer + bar
    frame["std"] = std
    frame["cells"] = m
    area = corpus.polygon_area_km2
    frame["polygon_area_km2"] = area
    frame["cell_area_km2"] = corpus.cell_area_km2
    frame["discretisation_error"] = corpus.cell_area_km2 / np.asarray(area) - 1.0
    frame["method"] = grid.method
    frame.attrs.update(grid.accounting)
    frame.attrs.update(alpha=level, epsilon=grid.epsilon, partition=grid.partition_key,
                       containment=containment)
    return frame


