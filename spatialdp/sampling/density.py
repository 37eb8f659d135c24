"""Density strata derived once from the shipped city data, then frozen and versioned.

The contiguous US is covered with coarse H3 cells; each cell's population is the
sum of the GeoNames cities (15,000+ inhabitants, shipped in ``data/``) whose
centre lies in it; the cells are classed by fixed thresholds into urban,
suburban, exurban, rural and remote. The classes are dissolved into one
(multi)polygon per class, which is the strata :class:`Partition` (adjacency,
maps, merges); clients are located with the H3 cells (vectorised) and mapped
to their class. The thresholds, the cells and the class geometry are all in the
version: any change is a new stratification.
"""

from __future__ import annotations

from functools import lru_cache

import geopandas as gpd
import numpy as np
import pandas as pd
import shapely

from spatialdp._validation import check_integer, fail
from spatialdp.datasets import load_us_cities, load_us_states
from spatialdp.geo.partition import Partition
from spatialdp.sampling.strata import Strata

__all__ = ["DENSITY_CLASSES", "DENSITY_THRESHOLDS", "MAX_DENSITY_RESOLUTION", "density_cells",
           "density_strata"]

#: Class names, densest first.
DENSITY_CLASSES = ("urban", "suburban", "exurban", "rural", "remote")

#: Lower bounds of city population per cell for urban, suburban, exurban and rural;
#: a cell with no city of 15,000+ is remote.
DENSITY_THRESHOLDS = (1_000_000, 200_000, 50_000, 1)


#: Finest resolution classed: the cities are points of 15,000+ people, so finer cells
#: add nothing but time (resolution 6 takes about 40 s to dissolve, 7 minutes).
MAX_DENSITY_RESOLUTION = 5


def _check_resolution(resolution: object) -> int:
    return check_integer(resolution, "resolution", low=0, high=MAX_DENSITY_RESOLUTION,
                         fix=f"pass an H3 resolution from 0 to {MAX_DENSITY_RESOLUTION} "
                             "(3, the default, is about 12,000 km^2 per cell)")


def _check_thresholds(thresholds: object) -> tuple[int, int, int, int]:
    if (not isinstance(thresholds, tuple) or len(thresholds) != 4
            or any(not isinstance(t, int) or isinstance(t, bool) for t in thresholds)
            or list(thresholds) != sorted(thresholds, reverse=True) or thresholds[-1] < 1):
        raise fail("thresholds", thresholds, "is not four decreasing whole numbers >= 1",
                   f"pass e.g. {DENSITY_THRESHOLDS}")
    return thresholds


def density_cells(resolution: int = 3,
                  thresholds: tuple[int, int, int, int] = DENSITY_THRESHOLDS
                  ) -> tuple[Partition, pd.DataFrame]:
    """Return the H3 cover of the 48 states and a per-cell table of population and class.

    Examples
    --------
    >>> cells, table = density_cells()
    >>> cells.n_regions, sorted(table["density_class"].unique())[:2]
    (705, ['exurban', 'remote'])
    """
    resolution = _check_resolution(resolution)
    thresholds = _check_thresholds(thresholds)
    part = Partition.from_h3_cover(load_us_states(), resolution, containment="overlap",
                                   name=f"us48-h3r{resolution}")
    cities = load_us_cities()
    where = part.assign(lon=cities.longitude.to_numpy(), lat=cities.latitude.to_numpy())
    ok = where.assigned
    population = np.bincount(where.positions[ok], weights=cities.population.to_numpy()[ok],
                             minlength=part.n_regions)
    # np.searchsorted on the ascending thresholds: 0 -> remote ... 4 -> urban.
    level = np.searchsorted(np.array(thresholds[::-1]), population, side="right")
    classes = np.array(DENSITY_CLASSES[::-1], dtype=object)[level]
    table = pd.DataFrame({"population": population.astype(np.int64),
                          "density_class": classes}, index=part.region_ids)
    return part, table


@lru_cache(maxsize=4)
def _build(resolution: int, thresholds: tuple[int, int, int, int]) -> Strata:
    cells, table = density_cells(resolution, thresholds)
    present = [c for c in DENSITY_CLASSES if (table.density_class == c).any()]
    geoms = np.asarray(cells.regions.geometry.values)
    shapes = [shapely.union_all(geoms[(table.density_class == c).to_numpy()], grid_size=1e-9)
              for c in present]
    frame = gpd.GeoDataFrame({"stratum": present}, geometry=shapes, crs=4326)
    partition = Partition.from_geodataframe(frame, "stratum",
                                            name=f"us48-density-h3r{resolution}")
    lookup = pd.Index([str(x) for x in partition.region_ids])
    cell_stratum = lookup.get_indexer(pd.Index(table.density_class.to_numpy()))
    return Strata(partition, basis="density", cell_partition=cells,
                  cell_stratum=cell_stratum, order=present)


def density_strata(resolution: int = 3,
                   thresholds: tuple[int, int, int, int] = DENSITY_THRESHOLDS) -> Strata:
    """Return the shipped density stratification of the contiguous US (frozen, versioned).

    Parameters
    ----------
    resolution : int, default 3
        H3 resolution of the cells that are classed (about 12,000 km^2 at 3), at most
        :data:`MAX_DENSITY_RESOLUTION` (5).
    thresholds : tuple of 4 ints
        City population per cell at which urban, suburban, exurban and rural start.

    Returns
    -------
    Strata
        Five strata (``urban`` ... ``remote``), one dissolved polygon each; clients are
        located by H3 cell. Built once per process for given arguments.

    Examples
    --------
    >>> strata = density_strata()
    >>> strata.order
    ['urban', 'suburban', 'exurban', 'rural', 'remote']
    >>> strata.ids[strata.assign(lon=[-73.99, -110.5], lat=[40.73, 44.4])].tolist()
    ['urban', 'remote']
    """
    resolution = _check_resolution(resolution)
    return _build(resolution, _check_thresholds(thresholds))
