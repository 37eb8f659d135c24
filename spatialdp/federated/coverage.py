"""Coverage: which regions each client has samples in, and how many clients each region has.

Each device sends a capped 0/1 row of the regions it has samples in
(:func:`coverage`, at most ``max_cells`` ones). The
server securely sums the rows into a count per region and adds exact discrete
Laplace noise once to the whole vector; one client moves it by at most
``2 * max_cells`` in L1 (replace-one; ``max_cells`` when one client is added or
removed, ``neighbours="add_remove"``), so the whole map is ONE release at full
epsilon, whatever the number of regions.

What is published per region is the noised count of clients with a sample there
and whether that count clears its error bar. "Covered" is a confident statement:
a region nobody visited clears the bar with probability at most ``alpha``; a
region below it is "not shown to be covered", never "empty".

Examples
--------
>>> import geopandas as gpd, numpy as np, shapely
>>> from spatialdp.geo import Partition
>>> from spatialdp.privacy import Simulation
>>> boxes = gpd.GeoDataFrame({"id": ["w", "e"]}, crs=4326,
...                          geometry=[shapely.box(0, 0, 1, 1), shapely.box(1, 0, 2, 1)])
>>> part = Partition.from_geodataframe(boxes, "id")
>>> rows = coverage(np.full(500, 0.5), np.full(500, 0.5), np.arange(500), part, max_cells=1)
>>> out = release_coverage(rows, part, epsilon=1.0, target=Simulation(rng=0))
>>> out.frame.covered.to_dict()
{'e': False, 'w': True}
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import sparse

from spatialdp._clients import IntArray, check_same_length, client_codes
from spatialdp._results import Result
from spatialdp._validation import check_alpha, check_epsilon, check_instance
from spatialdp.exceptions import InvalidInput, PartitionMismatch
from spatialdp.federated._checks import MAX_COVERAGE_CELLS, _positive_int
from spatialdp.geo.partition import Partition
from spatialdp.privacy.budget import Neighbours, Single, check_neighbours
from spatialdp.privacy.noise import LaplaceMechanism
from spatialdp.privacy.pipeline import ReleasePlan, run_release
from spatialdp.privacy.target import Accounting, check_target

__all__ = ["CellCoverage", "CoverageRelease", "coverage", "plan_coverage", "release_coverage"]


@dataclass(frozen=True)
class CellCoverage:
    """Which partition regions each client has samples in, at most ``max_cells`` each.

    Attributes
    ----------
    matrix : scipy.sparse.csr_array of int8, shape (n_clients, n_regions)
        ``1`` where the client has a sample in the region (among its kept cells).
    client_ids : pandas.Index
        The rows' clients, sorted.
    partition_version : str
    max_cells : int
        The L1 cap of a row: replacing one client moves the summed coverage by at
        most ``2 * max_cells`` in L1 (:attr:`sensitivity`), adding or removing one
        by ``max_cells``.
    """

    matrix: sparse.csr_array
    client_ids: pd.Index
    partition_version: str
    max_cells: int

    @property
    def cells_per_client(self) -> IntArray:
        """Number of regions kept per client (at most ``max_cells``)."""
        return np.diff(self.matrix.indptr).astype(np.int64)

    @property
    def sensitivity(self) -> float:
        """L1 change of the summed coverage when one client is replaced."""
        return self.sensitivity_under("replace")

    def sensitivity_under(self, neighbours: Neighbours) -> float:
        """L1 change of the summed coverage: ``2 max_cells`` (replace) or ``max_cells``."""
        return float(self.max_cells) * (1.0 if check_neighbours(neighbours) == "add_remove"
                                        else 2.0)


def coverage(lon: ArrayLike, lat: ArrayLike, client_ids: ArrayLike, partition: Partition,
             *, max_cells: int = 10) -> CellCoverage:
    """Bounded 0/1 indicator of the partition regions each client has samples in.

    Each client keeps at most ``max_cells`` regions: those where it has the most
    samples, ties broken by the lower partition position. The cap bounds the L1
    norm of a row, and so the sensitivity of the summed coverage. Points in no
    region are ignored (a client with none has an empty row).

    Examples
    --------
    >>> import geopandas as gpd, shapely
    >>> regions = gpd.GeoDataFrame({"id": ["w", "e"]}, crs=4326,
    ...     geometry=[shapely.box(0, 0, 1, 1), shapely.box(1.5, 0, 2.5, 1)])
    >>> part = Partition.from_geodataframe(regions, "id")
    >>> cov = coverage([0.5, 2.0, 2.1, 9.0], [0.5] * 4, ["a", "a", "a", "b"], part,
    ...                max_cells=1)
    >>> cov.matrix.toarray().tolist(), list(cov.client_ids)
    ([[1, 0], [0, 0]], ['a', 'b'])
    """
    cap = _positive_int(max_cells, "max_cells", high=MAX_COVERAGE_CELLS)
    check_instance(partition, "partition", Partition,
                   "pass the Partition whose regions the coverage rows count")
    codes, clients = client_codes(client_ids)
    position = partition.assign(lon=lon, lat=lat).positions
    check_same_length(position.astype(np.float64), codes, "lon/lat")
    return _coverage(codes, clients, position, partition, cap)


def _coverage(codes: IntArray, clients: pd.Index, position: IntArray, partition: Partition,
              cap: int) -> CellCoverage:
    n_regions = partition.n_regions
    inside = position >= 0
    pair, count = np.unique(codes[inside] * n_regions + position[inside], return_counts=True)
    client, region = pair // n_regions, pair % n_regions
    order = np.lexsort((region, -count, client))
    client, region = client[order], region[order]
    rank = np.arange(client.size) - np.searchsorted(client, client, side="left")
    keep = rank < cap
    client, region = client[keep], region[keep]
    order = np.lexsort((region, client))
    matrix = sparse.csr_array(
        (np.ones(client.size, dtype=np.int8), (client[order], region[order])),
        shape=(clients.size, n_regions),
    )
    return CellCoverage(matrix, clients, partition.version, cap)


@dataclass(frozen=True)
class CoverageRelease(Result):
    """Noised per-region client counts and the regions confidently covered.

    Attributes
    ----------
    frame : GeoDataFrame
        Per region: ``clients`` (noised count, unclamped), ``error_bar`` (its
        ``1 - alpha`` half-width), ``covered`` (``clients > error_bar``), geometry.
    epsilon, alpha : float
        The release's privacy loss and error-bar level.
    partition_version : str
        The partition the counts are keyed by.
    accounting : dict
        How it was charged.
    neighbours : {"replace", "add_remove"}
        The neighbouring relation ``epsilon`` holds for.
    """

    frame: gpd.GeoDataFrame
    epsilon: float
    alpha: float
    partition_version: str
    accounting: dict[str, Any] = field(default_factory=dict)
    neighbours: str = "replace"

    @property
    def covered_share(self) -> float:
        """Return the share of regions whose noised count clears its error bar."""
        return float(self.frame.covered.mean())

    @property
    def n_confirmed(self) -> int:
        """Return how many regions' noised counts clear their error bar."""
        return int(self.frame.covered.sum())

    @property
    def error_bar(self) -> float:
        """Return the ``1 - alpha`` half-width of every region's count (one mechanism)."""
        return float(self.frame.error_bar.iloc[0])

    def summary(self) -> str:
        """Return one line: regions confidently covered, the bar, the cost."""
        return (f"coverage{self.accounting_note}: {self.n_confirmed} of {len(self.frame)} regions "
                f"confidently covered ({self.covered_share:.0%}), counts +/- "
                f"{self.error_bar:g} ({1 - self.alpha:.0%}), epsilon {self.epsilon:g}")



def release_coverage(coverage: CellCoverage, partition: Partition, *, epsilon: float,
                     target: Accounting, alpha: float = 0.05,
                     neighbours: Neighbours = "replace") -> CoverageRelease:
    """Release how many clients have samples in each region, noised once.

    Parameters
    ----------
    coverage : CellCoverage
        The devices' capped indicator rows (:func:`~spatialdp.federated.device.coverage`).
    partition : Partition
        The partition the rows were computed on (its version is checked).
    epsilon : float
        Privacy loss of the whole map.
    target : ReleaseTarget, Simulation or Unaccounted
        Where it is charged and how its noise is drawn; required.
    alpha : float
        ``error_bar`` is the ``1 - alpha`` half-width of one region's noise.
    neighbours : {"replace", "add_remove"}, default "replace"
        The neighbouring relation: one client's rows replaced (sensitivity
        ``2 max_cells``) or one client added or removed (``max_cells``).

    Returns
    -------
    CoverageRelease
    """
    account = check_target(target)
    relation = check_neighbours(neighbours)
    plan = plan_coverage(coverage, partition, epsilon=epsilon, alpha=alpha, neighbours=relation)
    (released,) = run_release([plan], target=account,
                              structure=Single(f"coverage:{partition.key}"),
                              what=f"coverage counts (max_cells {coverage.max_cells})",
                              default_line_item="evaluation.regional", neighbours=relation)
    return replace(released, accounting=account.metadata())


def plan_coverage(coverage: CellCoverage, partition: Partition, *, epsilon: float,
                  alpha: float = 0.05, neighbours: Neighbours = "replace"
                  ) -> ReleasePlan[CoverageRelease]:
    """Validate the rows and build the release plan of one coverage map (nothing charged).

    The plan's result has empty ``accounting``: whoever runs the plan fills it
    in. :func:`release_coverage` runs one plan; an epoch's region and cell maps
    are two plans of one release (:func:`~spatialdp.sampling.release_epoch_coverage`).
    Parameters as in :func:`release_coverage`.
    """
    eps = check_epsilon(epsilon)
    level = check_alpha(alpha)
    relation = check_neighbours(neighbours)
    if not isinstance(coverage, CellCoverage):
        raise InvalidInput(f"coverage must be a CellCoverage from device.coverage(), got "
                           f"{type(coverage).__name__}")
    if not isinstance(partition, Partition):
        raise InvalidInput(f"partition must be a Partition, got {type(partition).__name__}")
    if coverage.partition_version != partition.version:
        raise PartitionMismatch(
            f"the coverage rows were computed on partition {coverage.partition_version!r}, not "
            f"{partition.version!r}; recompute them on the released partition")
    rows = coverage.matrix
    if rows.shape[1] != partition.n_regions or (np.diff(rows.indptr) > coverage.max_cells).any():
        raise InvalidInput("coverage rows exceed max_cells or do not match the partition; "
                           "compute them with device.coverage()")
    if rows.shape[0] != coverage.client_ids.size or not coverage.client_ids.is_unique:
        raise InvalidInput("coverage rows must be one per client, with unique client ids")
    counts: NDArray[np.int64] = np.bincount(rows.indices, minlength=partition.n_regions
                                            ).astype(np.int64)
    mech = LaplaceMechanism(eps, coverage.sensitivity_under(relation), discrete=True)
    finish = _Finish(partition, float(mech.error_bar(1, level)), eps, level, relation)
    return ReleasePlan(eps, [(mech, counts)], finish)


@dataclass(frozen=True)
class _Finish:
    """Turn a coverage map's noisy counts into its :class:`CoverageRelease`."""

    partition: Partition
    bar: float
    epsilon: float
    alpha: float
    relation: Neighbours

    def __call__(self, noisy: list[NDArray[Any]]) -> CoverageRelease:
        table = pd.DataFrame({"clients": noisy[0].astype(np.int64), "error_bar": self.bar},
                             index=self.partition.region_ids)
        table["covered"] = table.clients > self.bar
        return CoverageRelease(self.partition.join(table), self.epsilon, self.alpha,
                               self.partition.version, {}, self.relation)
