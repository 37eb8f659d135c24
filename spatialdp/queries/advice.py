"""Before answering: which release answers a query better, and which resolution to use.

Both questions are answered from public parameters only (the grid's cells,
epsilon, ``k``, the number of devices), never from the data.

**Flat or hierarchical?** A flat answer over ``m`` cells has noise variance
``m sigma**2``; a hierarchical answer's variance is computed exactly from the
least-squares consistency (:meth:`~spatialdp.queries.grids.Tree.query_variance`).
Small polygons are answered better by the flat grid (all of epsilon on the
fine cells); polygons of tens of thousands of cells by the hierarchy (a few
hundred coarse nodes instead of ``m`` fine ones).

**Which resolution?** Qardaji, Yang and Li (2013, "Differentially private grids
for geospatial data") balance two errors of a query covering a share ``r`` of
the study area split into ``M`` equal cells:

* noise: about ``r M`` cells each with noise sd ``sqrt(2)/epsilon``, so
  ``sqrt(2 r M) / epsilon``, which grows with ``M``;
* non-uniformity: the cells cut by the query's border (about ``sqrt(r M)`` of
  them) hold points that are in or out of the query, an error proportional to
  ``sqrt(r) N / (c0 sqrt(M))``, which shrinks with ``M``.

Equating the two gives ``M = N epsilon / c`` with ``c = sqrt(2) c0``; their
experiments put ``c`` near 10: about ``N epsilon / 10`` cells. With ``k``
cells per device the noise grows by ``k`` and the counts by up to ``k``, so
the rule is unchanged in ``N`` devices. :func:`recommend_resolution` picks the
H3 resolution whose cell count over the study area is nearest (in log scale).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import h3
import numpy as np
import pandas as pd

from spatialdp._validation import check_epsilon, check_instance, check_integer, check_number
from spatialdp.geo import CellIncidence
from spatialdp.privacy import LaplaceMechanism
from spatialdp.privacy.accuracy import noise_std
from spatialdp.queries.grids import NOISE_KIND, check_incidence
from spatialdp.queries.hierarchy import HierarchyModel
from spatialdp.queries.truth import TruthGrid

__all__ = ["QARDAJI_C", "ResolutionAdvice", "flat_or_hierarchical", "recommend_resolution"]

#: Qardaji et al.'s constant: about ``N epsilon / QARDAJI_C`` cells over the study area.
QARDAJI_C = 10.0

#: Bounds on ``c``: Qardaji et al. measure it near 10; far outside, the rule is meaningless.
C_BOUNDS = (1e-3, 1e3)

#: Most devices :func:`recommend_resolution` accepts (a thousand per person on Earth).
MAX_DEVICES = 10**13

#: Study areas accepted, km^2: one square metre up to the Earth's surface.
MIN_AREA_KM2 = 1e-6
EARTH_AREA_KM2 = 5.101e8


def flat_or_hierarchical(truth: TruthGrid, queries: CellIncidence, *, epsilon: float,
                     levels: int = 4, split: Any = "geometric") -> pd.DataFrame:
    """Return, per query, the noise sd of the flat and the hierarchical answer, and the better.

    Uses the grid's cells, ``k`` and epsilon only (the counts are not read).

    Parameters
    ----------
    truth : TruthGrid
        Its cells and bound ``k`` (the structure); its counts are not used.
    queries : CellIncidence
        Converted on the truth's partition.
    epsilon : float
        The same total epsilon for both releases.
    levels, split
        Of the hierarchical release.

    Returns
    -------
    pandas.DataFrame
        ``cells``, ``cover_nodes``, ``flat_std``, ``hierarchical_std``, ``better``
        (``"flat"`` or ``"hierarchical"``) and ``std_ratio`` (hierarchical / flat).
    """
    truth = check_instance(truth, "truth", TruthGrid, "build it with truth_grid(...)")
    check_incidence(truth, queries)
    eps = check_epsilon(epsilon)
    m = queries.cells_per_query
    flat_scale = LaplaceMechanism(eps, float(truth.sensitivity), discrete=True).scale
    flat_sd = np.sqrt(m) * float(noise_std(NOISE_KIND, flat_scale))
    model = HierarchyModel.build(truth, eps, levels=levels, split=split)
    hier_sd = np.sqrt(model.query_variance(queries.matrix))
    return pd.DataFrame({
        "cells": m, "cover_nodes": model.tree.cover_size(queries.matrix),
        "flat_std": flat_sd, "hierarchical_std": hier_sd,
        "better": np.where(hier_sd < flat_sd, "hierarchical", "flat"),
        "std_ratio": hier_sd / flat_sd})


@dataclass(frozen=True)
class ResolutionAdvice:
    """The recommended H3 resolution and the reasoning behind it.

    Attributes
    ----------
    resolution : int
        The recommended resolution.
    target_cells : float
        ``N epsilon / c`` (Qardaji et al.).
    table : pandas.DataFrame
        Per resolution: ``cells`` over the area, ``devices_per_cell`` (mean),
        ``noise_sd`` per cell, ``signal_to_noise`` and ``log_distance`` to the target.
    reasoning : str
    """

    resolution: int
    target_cells: float
    table: pd.DataFrame
    reasoning: str


def recommend_resolution(n_devices: int, epsilon: float, area_km2: float, *,
                         max_cells_per_device: int = 1, c: float = QARDAJI_C
                         ) -> ResolutionAdvice:
    """Recommend the H3 resolution that balances noise against non-uniformity.

    Parameters
    ----------
    n_devices : int
        Devices in the study area (N), 1 to :data:`MAX_DEVICES`.
    epsilon : float
        Epsilon of the grid release.
    area_km2 : float
        Area of the study area, 1e-6 km^2 to the Earth's surface.
    max_cells_per_device : int, default 1
        ``k`` (sets the per-cell noise).
    c : float, default 10
        Qardaji et al.'s constant, within :data:`C_BOUNDS` (0.001 to 1000).

    Returns
    -------
    ResolutionAdvice

    Examples
    --------
    >>> advice = recommend_resolution(1_000_000, 1.0, 100_000.0)
    >>> advice.resolution, round(advice.target_cells)
    (8, 100000)
    """
    n = check_integer(n_devices, "n_devices", low=1, high=MAX_DEVICES,
                      fix=f"pass the number of devices, 1 to {MAX_DEVICES:.0e}")
    eps = check_epsilon(epsilon)
    area = check_number(area_km2, "area_km2", low=MIN_AREA_KM2, high=EARTH_AREA_KM2,
                        fix=f"pass the study area in km^2, {MIN_AREA_KM2:g} to "
                            f"{EARTH_AREA_KM2:.3g} (the Earth)")
    k = check_integer(max_cells_per_device, "max_cells_per_device", low=1,
                      fix="pass the bound k, e.g. 1")
    const = check_number(c, "c", low=C_BOUNDS[0], high=C_BOUNDS[1],
                         fix=f"pass Qardaji's constant, about 10 (between {C_BOUNDS[0]:g} and "
                             f"{C_BOUNDS[1]:g})")
    # in log scale: N epsilon / c underflows for epsilon near 0, and cells / target overflows
    log_target = math.log(n) + math.log(eps) - math.log(const)
    target = math.exp(log_target)
    cell_km2 = math.exp(min(math.log(area) - log_target, 700.0))  # a text figure: cap it
    res = np.arange(16)
    cell_area = np.array([h3.average_hexagon_area(int(r), unit="km^2") for r in res])
    cells = area / cell_area
    sd = float(noise_std(NOISE_KIND, LaplaceMechanism(eps, float(k), discrete=True).scale))
    table = pd.DataFrame({
        "resolution": res, "cell_area_km2": cell_area, "cells": cells,
        "devices_per_cell": n / cells, "noise_sd": sd,
        "signal_to_noise": n / cells / sd if sd > 0 else np.full_like(cells, np.inf),
        "log_distance": np.abs(np.log(cells) - log_target)}).set_index("resolution")
    best = int(np.argmin(table["log_distance"].to_numpy()))
    reasoning = (
        f"N epsilon / c = {n:,} x {eps:g} / {const:g} = {target:,.0f} cells over "
        f"{area:,.0f} km^2, i.e. cells of about {cell_km2:,.3g} km^2. H3 resolution "
        f"{best} has {cells[best]:,.0f} cells of {cell_area[best]:,.3g} km^2 (nearest in log "
        f"scale): about {n / cells[best]:,.1f} devices a cell against a noise sd of "
        f"{sd:.2f}. Finer cells would add noise (error grows like sqrt(cells)); coarser "
        "ones would blur the density (cells cut by a polygon's border hold devices on both "
        "sides).")
    if not math.isfinite(target) or target < 1:
        reasoning += " Fewer than one cell is advised: the data are too few for this epsilon."
    return ResolutionAdvice(best, target, table, reasoning)
