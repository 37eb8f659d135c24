"""The query-error audit: how wrong private counts are for real polygons.

The fleet is counted on an H3 grid covering the partition (one cell per
device) and that grid is released once, flat, charged to the caller's target
(:func:`spatialdp.queries.release_flat`, through the one release pipeline).
The queries are real polygons: the partition's own regions and a disc around
every city of 15,000+ inhabitants inside it. The error of a flat and of a
hierarchical release is then measured by seeded simulation against the
released grid, used as a plug-in truth
(:func:`spatialdp.queries.measure_query_error`): post-processing of the
release, so the tables and the figure drawn from them may be published. The
truth grid never reaches them.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from spatialdp._validation import check_integer
from spatialdp.datasets import load_us_cities
from spatialdp.geo import Partition
from spatialdp.privacy.target import Accounting
from spatialdp.queries import (
    NoisyGrid,
    measure_query_error,
    query_corpus,
    release_flat,
    truth_grid,
)
from spatialdp.queries.measure import check_measure_settings

__all__ = ["QueryAudit", "query_audit"]

#: Bucket edges (cells per query).
BUCKETS = (1, 4, 16, 64, 256, 1024, 4096)
MAX_CITY_QUERIES = 400
MAX_CELLS = 50_000
#: Average H3 cell area (km^2) per resolution 0 to 15.
_H3_AREA_KM2 = (4_357_449.0, 609_788.0, 86_801.8, 12_393.4, 1_770.3, 252.9, 36.13, 5.161,
                0.7373, 0.1053, 0.01505, 0.00215, 3.07e-4, 4.39e-5, 6.27e-6, 8.95e-7)


@dataclass
class QueryAudit:
    """The audit's error tables (measured against ``grid``) and what was measured on.

    Attributes
    ----------
    reports : dict of str to DataFrame
        Method label -> :func:`measure_query_error` table against ``grid``.
    resolution, n_cells, n_queries : int
        The grid's H3 resolution and cells, and the query polygons.
    epsilon : float
        Of the released grid, and of the releases whose error is measured.
    draws : int
        Simulated releases per method.
    grid : NoisyGrid
        The released count grid (the plug-in truth).
    """

    reports: dict[str, pd.DataFrame]
    resolution: int
    n_cells: int
    n_queries: int
    epsilon: float
    draws: int
    grid: NoisyGrid

    def table(self) -> pd.DataFrame:
        """One row per method and bucket (the columns a model card shows)."""
        cols = ["bucket", "n_queries", "mean_cells", "rms", "expected_rms",
                "mean_abs_error", "p95_abs_error", "mean_rel_error"]
        frames = []
        for method, rep in self.reports.items():
            keep = [c for c in cols if c in rep]
            frames.append(rep[keep].assign(method=method))
        out = pd.concat(frames, ignore_index=True)
        out["bucket"] = out["bucket"].astype(str)
        return out[["method", *[c for c in cols if c in out]]]


def _resolution(partition: Partition, n_devices: int, epsilon: float) -> int:
    """Return Qardaji et al.'s grid size (``N epsilon / 10`` cells) as an H3 resolution."""
    from spatialdp.queries import recommend_resolution

    area = float(partition.regions.to_crs(6933).area.sum()) / 1e6
    res = int(recommend_resolution(max(1, n_devices), epsilon, area).resolution)
    # Capped at about MAX_CELLS cells, to keep the audit a few seconds long.
    while res > 0 and area / _H3_AREA_KM2[res] > MAX_CELLS:
        res -= 1
    return res


def _city_discs(partition: Partition) -> gpd.GeoDataFrame:
    """Return a disc around every shipped city in the partition (radius grows with size)."""
    from spatialdp.exceptions import UnassignedPointsWarning

    cities = load_us_cities()
    with warnings.catch_warnings():  # most cities lie outside a small partition: expected
        warnings.simplefilter("ignore", UnassignedPointsWarning)
        where = partition.assign(cities).positions
    cities, where = cities[where >= 0], where[where >= 0]
    if len(cities) > MAX_CITY_QUERIES:
        top = np.argsort(-cities.population.to_numpy(), kind="stable")[:MAX_CITY_QUERIES]
        cities, where = cities.iloc[top], where[top]
    discs = cities.to_crs(6933).buffer(3_000 + 40 * cities.population.to_numpy() ** 0.5)
    # Each disc is cut to its region: a real query area that stays on the grid.
    regions = partition.regions.geometry.to_numpy()[where]
    clipped = shapely.intersection(discs.to_crs(4326).to_numpy(), regions)
    frame = gpd.GeoDataFrame({"name": cities["name"].to_numpy()}, geometry=clipped, crs=4326)
    return frame[frame.geom_type.isin(["Polygon", "MultiPolygon"]) & ~frame.is_empty]


def query_audit(partition: Partition, fleet: pd.DataFrame, *, target: Accounting,
                epsilon: float, seed: int, draws: int = 100,
                tick: Callable[[int], None] | None = None) -> QueryAudit:
    """Release the fleet's count grid once and measure polygon-count error against it.

    Parameters
    ----------
    partition : Partition
        The report regions (the grid covers them; they are queries too).
    fleet : DataFrame
        ``device_id``, ``lon``, ``lat``: one row per device (its size is the
        demo's public fleet size and sets the grid's resolution).
    target : ReleaseTarget, Unaccounted or Simulation
        Where the grid release is charged (``evaluation.regional`` unless the
        target names another line item), through ``release_flat``. A
        ``Simulation`` makes the tables internal (the publishing helpers refuse them).
    epsilon : float
        Of the released grid, and of the releases whose error is measured.
    seed : int
        Seed of the error simulation (not of the release's noise: OS entropy).
    draws : int, default 100
        Simulated releases per method.
    tick : callable, optional
        ``tick(1)`` after the grid is released and after each method (3 steps).

    Returns
    -------
    QueryAudit
        The tables, and the released grid they were measured against.

    Raises
    ------
    InvalidInput, BudgetExceeded
        Bad draws or seed, or a grid too coarse for the hierarchy's 4 levels (the
        settings :func:`~spatialdp.queries.measure.check_measure_settings`
        refuses); from ``release_flat``, a bad epsilon or target, or a ledger
        that cannot afford the grid. All before the grid is charged.
    """
    step = tick if tick is not None else (lambda n: None)
    rng = np.random.default_rng([check_integer(seed, "seed", low=0, high=2**63 - 1,
                                               fix="pass a whole-number seed >= 0"), 7])
    res = _resolution(partition, len(fleet), epsilon)
    cells = Partition.from_h3_cover(partition.regions, res, containment="overlap",
                                    name=f"h3r{res}")
    truth = truth_grid(cells, lon=fleet.lon.to_numpy(), lat=fleet.lat.to_numpy(),
                       device_ids=fleet.device_id.to_numpy(), max_cells_per_device=1)
    regions = gpd.GeoDataFrame({"name": [str(i) for i in partition.region_ids]},
                               geometry=partition.regions.geometry.to_numpy(), crs=4326)
    polygons = pd.concat([regions, _city_discs(partition)], ignore_index=True)
    # A small disc cut at a border may hold no cell centre: such a query cannot be asked.
    polygons = polygons[cells.polygons_to_cells(polygons).cells_per_query > 0]
    corpus = query_corpus(cells, gpd.GeoDataFrame(polygons, crs=4326))
    settings: dict[str, dict[str, Any]] = {
        "flat (clamped)": {"draws": draws, "buckets": BUCKETS},
        "hierarchical (4 levels)": {"draws": draws, "buckets": BUCKETS, "method": "hierarchical",
                                    "levels": 4, "clamp_negative": False}}
    for setting in settings.values():  # refused here, before the grid is charged
        check_measure_settings(truth, corpus, epsilon=epsilon, **setting)
    grid = release_flat(truth, epsilon=epsilon, target=target)
    del truth  # from here on only the released grid: the tables are its post-processing
    step(1)
    reports = {}
    for label, setting in settings.items():
        reports[label] = measure_query_error(grid, corpus, epsilon=grid.epsilon, rng=rng,
                                             **setting)
        step(1)
    return QueryAudit(reports=reports, resolution=res, n_cells=cells.n_regions,
                      n_queries=len(polygons), epsilon=grid.epsilon, draws=int(draws), grid=grid)
