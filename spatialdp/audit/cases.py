"""The audit suite's cases: every spatialdp release path, with worst-case neighbours.

Each :class:`AuditCase` builds a small, realistic input of one release path,
its worst-case neighbouring pairs under the library's privacy model, and the
release as ``release(dataset, target)``; :func:`run_case` audits it at its
claimed loss. Each case also has deliberately broken *variants*, built here
and never in library code (a rewritten mechanism on the simulation tap, an
unclipped or uncapped device report, a seeded release), which a sound audit
must catch. ``tests/test_audit_*.py`` runs them all in CI;
``benchmarks/audit_full.py`` runs them longer and writes the claimed-vs-measured
table of ``docs/audit.md``.

Examples
--------
>>> sorted(CASES)[:4]
['aggregate_histogram', 'aggregate_metric', 'aggregate_ratio', 'published_composition']
>>> CASES["release_flat"].variants
('correct', 'half_scale', 'skip_cell')
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp._random import RandomLike, as_generator
from spatialdp._validation import fail
from spatialdp.audit.auditor import AuditResult, audit, audit_sampler
from spatialdp.audit.neighbours import drop_device, extreme_pairs, replace_client, status_pair
from spatialdp.privacy.noise import LaplaceMechanism
from spatialdp.privacy.target import Accounting, Simulation, Unaccounted

__all__ = ["CASES", "AuditCase", "HalfScale", "SkipOne", "run_case"]

EPSILON = 1.0
RHO = 0.5


class HalfScale:
    """A broken mechanism: ``mechanism``'s noise at half its scale (for audit tests only)."""

    def __init__(self, mechanism: Any) -> None:
        self.mechanism = mechanism

    def simulate(self, x: Any, *, rng: RandomLike = None) -> Any:
        """Half the noise of the wrapped mechanism."""
        arr = np.asarray(x, dtype=np.float64)
        return arr + 0.5 * (np.asarray(self.mechanism.simulate(arr, rng=rng)) - arr)

    def release(self, x: Any) -> Any:
        """Half the noise of the wrapped mechanism (OS entropy)."""
        arr = np.asarray(x, dtype=np.float64)
        return arr + 0.5 * (np.asarray(self.mechanism.release(arr)) - arr)


class SkipOne:
    """A broken mechanism: ``mechanism``'s noise, except on value ``index`` (audit tests only)."""

    def __init__(self, mechanism: Any, index: int) -> None:
        self.mechanism = mechanism
        self.index = index

    def simulate(self, x: Any, *, rng: RandomLike = None) -> Any:
        """Noise every value but the last axis' ``index``-th."""
        arr = np.asarray(x)
        out = np.asarray(self.mechanism.simulate(arr, rng=rng)).copy()
        out[..., self.index] = arr[..., self.index]
        return out

    def release(self, x: Any) -> Any:
        """Noise every value but the ``index``-th (OS entropy)."""
        arr = np.asarray(x)
        out = np.asarray(self.mechanism.release(arr)).copy()
        out[..., self.index] = arr[..., self.index]
        return out


@dataclass(frozen=True)
class AuditCase:
    """One release path: what it claims, and how to audit it and its broken variants.

    Attributes
    ----------
    name : str
        The release function audited.
    mechanism : str
        Its noise, in words.
    loss : {"epsilon", "rho"}
    claimed : float
    variants : tuple of str
        ``"correct"`` first, then the broken variants.
    run : callable
        ``run(variant, draws, rng) -> AuditResult``.
    """

    name: str
    mechanism: str
    loss: str
    claimed: float
    variants: tuple[str, ...]
    run: Callable[[str, int | None, RandomLike], AuditResult]


# --- inputs -----------------------------------------------------------------------------------

REGIONS = ("CO", "UT", "CA", "TX")


@cache
def _states() -> Any:
    """Return the four states of :data:`REGIONS` as a partition (every region is noised)."""
    from spatialdp.datasets import load_us_states
    from spatialdp.geo import Partition

    frame = load_us_states()
    return Partition.from_geodataframe(frame[frame.state.isin(REGIONS)], "state",
                                       name="audit-states")


@cache
def _reports() -> pd.DataFrame:
    """240 clients in 4 states: a loss in [0, 4] and a 3-bucket histogram (cap 1)."""
    from spatialdp.federated import device_report

    n = 60 * len(REGIONS)
    spread = np.linspace(0.5, 3.5, n)
    examples = pd.DataFrame({"client_id": np.arange(n),
                             "region_id": np.repeat(REGIONS, n // len(REGIONS)),
                             "loss": spread, "error": spread / 2.0})
    frame = device_report(examples, loss_spec=_loss(), hist_spec=_hist(), partition=_states())
    for column in _hist().columns:  # a mass of 0.6 per client, below the cap of 1
        frame[column] = 0.2
    return frame


@cache
def _loss() -> Any:
    from spatialdp.federated import MetricSpec

    return MetricSpec("loss", 0.0, 4.0)


@cache
def _hist() -> Any:
    from spatialdp.federated import HistogramSpec

    return HistogramSpec("err", edges=(1.0, 2.0))


def _values(x: Any) -> NDArray[np.float64]:
    return np.asarray(x, dtype=np.float64).ravel()


def _rewrite(variant: str, *, skip: int = 0, epsilon: float = EPSILON
             ) -> Callable[[Any, int], Any] | None:
    if variant == "half_scale":
        return lambda mech, i: HalfScale(mech)
    if variant in ("skip_region", "skip_cell"):
        return lambda mech, i: SkipOne(mech, skip)
    if variant == "split_wrong":  # every part (level, value/count) at the whole epsilon
        return lambda mech, i: LaplaceMechanism(epsilon, mech.sensitivity,
                                                discrete=mech.discrete)
    return None


def _seeded(release: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """Return a broken release that ignores its target and draws from a fixed seed."""
    return lambda dataset, target: release(dataset, Simulation(rng=20240601))


def _run(variant: str, release: Callable[[Any, Any], Any], pairs: Any, *, name: str,
         draws: int | None, rng: RandomLike, skip: int = 0, **claim: Any) -> AuditResult:
    if variant == "seeded":  # the release path is slow: one pair is enough for a seed
        first = pairs if isinstance(pairs, tuple) else pairs[0]
        return audit(_seeded(release), first, path="release", draws=draws or 120,
                     name=f"{name} [seeded]", **claim)
    label = name if variant == "correct" else f"{name} [{variant}]"
    return audit(release, pairs, rewrite=_rewrite(variant, skip=skip), draws=draws, rng=rng,
                 name=label, **claim)


# --- the cases --------------------------------------------------------------------------------

def _aggregate_metric(variant: str, draws: int | None, rng: RandomLike) -> AuditResult:
    from spatialdp.federated import aggregate_metric

    spec, reports = _loss(), _reports()

    def release(frame: pd.DataFrame, target: Accounting) -> NDArray[np.float64]:
        return _values(aggregate_metric(frame, spec, epsilon=EPSILON, target=target).value)

    pair = next(extreme_pairs(reports, spec, clients=[0]))
    if variant == "unclipped_device":  # the device reports its raw loss, 4x the clip
        pair = (pair[0], replace_client(reports, 0, loss=4.0 * spec.clip_high))
    return _run(variant, release, pair, name="aggregate_metric", draws=draws, rng=rng,
                epsilon=EPSILON)


def _aggregate_ratio(variant: str, draws: int | None, rng: RandomLike) -> AuditResult:
    import geopandas as gpd
    import shapely

    from spatialdp.federated import aggregate_metric, device_report, track_ratio_spec

    spec = track_ratio_spec(10.0, roads=True)
    n = 240
    lon, lat = np.full(n, -105.0), np.full(n, 39.7)
    examples = pd.DataFrame({"client_id": np.arange(n), "true_lon": lon, "true_lat": lat,
                             "pred_lon": lon + 1e-5 * np.linspace(1.0, 3.0, n),
                             "pred_lat": lat + 1e-5})
    road = gpd.GeoDataFrame(geometry=[shapely.LineString([(-105.01, 39.7), (-104.99, 39.7)])],
                            crs=4326)  # every client drives along it: all have the ratio
    reports = device_report(examples, ratio_clip=10.0, roads=road, metric_crs="EPSG:32613")

    def release(frame: pd.DataFrame, target: Accounting) -> NDArray[np.float64]:
        return _values(aggregate_metric(frame, spec, epsilon=EPSILON, target=target).value)

    # Client 0 has no ratio (absent: 0 and present 0), then the largest ratio: the value
    # sum moves by the clip width and the count of present clients by 1.
    pair = (replace_client(reports, 0, ratio=0.0, track_present=0),
            replace_client(reports, 0, ratio=10.0, track_present=1))
    return _run(variant, release, pair, name="aggregate_metric (ratio)", draws=draws, rng=rng,
                epsilon=EPSILON)


def _aggregate_histogram(variant: str, draws: int | None, rng: RandomLike) -> AuditResult:
    from spatialdp.federated import aggregate_histogram

    spec, reports = _hist(), _reports()

    def release(frame: pd.DataFrame, target: Accounting) -> NDArray[np.float64]:
        return _values(aggregate_histogram(frame, spec, epsilon=EPSILON, target=target).values)

    pair = next(extreme_pairs(reports, spec, clients=[0]))
    if variant == "cap_ignored":  # the device skips the L1 mass cap: 1 in every bucket
        cols = list(spec.columns)
        pair = (pair[0], replace_client(reports, 0, **{cols[0]: 0.0, cols[1]: 1.0,
                                                       cols[2]: 1.0}))
    return _run(variant, release, pair, name="aggregate_histogram", draws=draws, rng=rng,
                epsilon=EPSILON)


def _regional_report(variant: str, draws: int | None, rng: RandomLike) -> AuditResult:
    from spatialdp.federated import regional_report

    spec, reports, states = _loss(), _reports(), _states()

    def release(frame: pd.DataFrame, target: Accounting) -> NDArray[np.float64]:
        report = regional_report(frame, states, [spec], epsilon=EPSILON, target=target,
                                 min_cohort=50)
        return _values(report["loss"]["value"].reindex(list(REGIONS)))

    pairs = list(extreme_pairs(reports, spec))  # one per region
    return _run(variant, release, pairs, name="regional_report", draws=draws, rng=rng,
                skip=2, epsilon=EPSILON)


def _round_health(variant: str, draws: int | None, rng: RandomLike) -> AuditResult:
    from spatialdp.federated import round_health

    states = _states()
    regions = np.repeat(REGIONS[:3], 40)
    status = np.array(["returned", "dropped", "rejected", "returned"] * 30, dtype=object)

    def release(stat: NDArray[Any], target: Accounting) -> NDArray[np.float64]:
        health = round_health(stat, regions, states, epsilon=EPSILON, target=target,
                              granularity=1)
        return _values(health.table.loc[list(REGIONS[:3]), ["returned", "dropped",
                                                             "rejected"]])

    pair = status_pair(status, 0, first="returned", second="dropped")
    return _run(variant, release, pair, name="round_health", draws=draws, rng=rng,
                epsilon=EPSILON)


def _release_coverage(variant: str, draws: int | None, rng: RandomLike) -> AuditResult:
    from spatialdp.datasets import load_us_states
    from spatialdp.federated import release_coverage
    from spatialdp.federated._coverage import coverage

    states = _states()
    frame = load_us_states().set_index("state").loc[list(REGIONS)]
    spots = frame.geometry.representative_point()
    lon, lat = spots.x.to_numpy(), spots.y.to_numpy()
    # 40 clients, each with samples in two states; client 0 moves from (CO, UT) to (CA, TX).
    home = np.array([[i % 4, (i + 1) % 4] for i in range(40)])

    def rows(first: tuple[int, int]) -> Any:
        where = home.copy()
        where[0] = first
        ids = np.repeat(np.arange(40), 2)
        return coverage(lon[where.ravel()], lat[where.ravel()], ids, states, max_cells=2)

    def release(cov: Any, target: Accounting) -> NDArray[np.float64]:
        out = release_coverage(cov, states, epsilon=EPSILON, target=target)
        return _values(out.frame["clients"].reindex(list(REGIONS)))

    return _run(variant, release, (rows((0, 1)), rows((2, 3))), name="release_coverage",
                draws=draws, rng=rng, skip=2, epsilon=EPSILON)


@cache
def _pings() -> tuple[pd.DataFrame, tuple[str, ...]]:
    """Pings of 60 devices over 19 H3 res-5 cells; device 0 visits two cells."""
    import h3

    centre = h3.latlng_to_cell(39.74, -104.99, 5)
    cells = tuple(sorted(h3.grid_disk(centre, 2)))
    gen = np.random.default_rng(5)
    rows = []
    for device in range(60):
        for cell in gen.choice(len(cells), size=2, replace=False):
            lat, lon = h3.cell_to_latlng(cells[int(cell)])
            rows.append((device, lon, lat))
    frame = pd.DataFrame(rows, columns=["device_id", "lon", "lat"])
    return frame, cells


def _truth(frame: pd.DataFrame) -> Any:
    from spatialdp.queries import truth_grid

    _, cells = _pings()
    return truth_grid(list(cells), lon=frame.lon.to_numpy(), lat=frame.lat.to_numpy(),
                      device_ids=frame.device_id.to_numpy(), max_cells_per_device=2)


def _grid_pair() -> tuple[Any, Any]:
    frame, _ = _pings()
    return _truth(frame), _truth(drop_device(frame, 0))


def _release_flat(variant: str, draws: int | None, rng: RandomLike) -> AuditResult:
    from spatialdp.queries import release_flat

    def release(truth: Any, target: Accounting) -> NDArray[np.float64]:
        return _values(release_flat(truth, epsilon=EPSILON, target=target).values)

    pair = _grid_pair()
    moved = np.flatnonzero(pair[0].counts != pair[1].counts)
    return _run(variant, release, pair, name="release_flat", draws=draws, rng=rng,
                skip=int(moved[0]), epsilon=EPSILON)


def _release_hierarchical(variant: str, draws: int | None, rng: RandomLike) -> AuditResult:
    from spatialdp.queries import release_hierarchical

    def release(truth: Any, target: Accounting) -> NDArray[np.float64]:
        return _values(release_hierarchical(truth, epsilon=EPSILON, levels=3,
                                            target=target).values)

    return _run(variant, release, _grid_pair(), name="release_hierarchical", draws=draws,
                rng=rng, epsilon=EPSILON)


def _composition(variant: str, draws: int | None, rng: RandomLike) -> AuditResult:
    from spatialdp.sampling import RoundCohort, published_composition

    groups = ("urban", "rural")
    selected = np.arange(60)
    group_of = np.repeat([0, 1], 30)

    def release(status: NDArray[Any], target: Accounting) -> NDArray[np.float64]:
        if variant == "outcome_unnoised":  # broken: counts who RETURNED (private), exactly
            filled = np.bincount(group_of[status == "returned"], minlength=2)
        else:  # the seats filled by selection (public), whatever each client then did
            filled = np.bincount(group_of, minlength=2)
        cohort = RoundCohort(3, 0, selected, groups,
                             {"filled": filled, "wanted": filled,
                              "shortfall": np.zeros(2, np.int64),
                              "population": np.array([500, 80])}, 1.0)
        table = published_composition([cohort], current_round=4)
        return _values(table.clients)

    status = np.array(["returned"] * 15 + ["dropped"] * 15 + ["returned"] * 30, dtype=object)
    # 15 -> 14 returned clients in "urban": rounded to 10, that is 20 -> 10
    pair = status_pair(status, 14, first="returned", second="dropped")
    label = "published_composition" + ("" if variant == "correct" else f" [{variant}]")
    return audit(release, pair, path="release", draws=draws or 400, epsilon=0.0, name=label)


def _transform(variant: str, draws: int | None, rng: RandomLike) -> AuditResult:
    from spatialdp.regression import transform_clients
    from spatialdp.regression.modulation import Modulation

    modulation = Modulation(alpha=0.5, lam=0.0, radius=1.0)
    directions = np.array([[1.0, 0.0, 0.0]])
    rho = RHO * (4.0 if variant == "half_scale" else 1.0)  # 4x rho: half the noise scale
    gen = as_generator(rng)

    def sampler(x: NDArray[np.float64], n: int, g: np.random.Generator) -> NDArray[np.float64]:
        rows = np.tile(x, (n, 1))  # n copies of one client: n independent releases
        if variant == "unclipped_device":  # a device that skips clipping: 4x the radius
            from spatialdp.regression.lattice_gaussian import LatticeGaussianMechanism
            from spatialdp.regression.modulation import modulate

            mech = LatticeGaussianMechanism(rho, modulation.sensitivity, x.size)
            raw = rows * np.where(np.linalg.norm(x) > 0.5, 4.0, 1.0)
            g_rows = modulate(raw, directions, modulation, np.zeros((n, 1)))
            return np.asarray(mech.simulate(g_rows, rng=g))
        if variant == "release":
            target: Any = Unaccounted("privacy audit")
        else:
            target = Simulation(rng=g)
        out = transform_clients(rows, np.zeros(n), modulation=modulation, rho=rho,
                                directions=directions, target=target)
        return out.features

    pair = (np.array([1.0, 0.0, 0.0]), np.array([-1.0, 0.0, 0.0]))
    label = "transform_clients" + ("" if variant == "correct" else f" [{variant}]")
    return audit_sampler(sampler, pair, rho=RHO, draws=draws or 200_000, rng=gen, name=label,
                         path="release (rows)" if variant == "release"
                         else "simulation (sampler)")


CASES: dict[str, AuditCase] = {
    case.name: case for case in [
        AuditCase("aggregate_metric", "Laplace on the clipped sum (lattice)", "epsilon", EPSILON,
                  ("correct", "half_scale", "unclipped_device", "seeded"), _aggregate_metric),
        AuditCase("aggregate_ratio", "Laplace on the value sum and the present count, "
                  "epsilon split", "epsilon", EPSILON, ("correct", "split_wrong", "half_scale"),
                  _aggregate_ratio),
        AuditCase("aggregate_histogram", "Laplace on the bucket sums, L1 cap", "epsilon",
                  EPSILON, ("correct", "half_scale", "cap_ignored"), _aggregate_histogram),
        AuditCase("regional_report", "Laplace per region (disjoint)", "epsilon", EPSILON,
                  ("correct", "half_scale", "skip_region", "seeded"), _regional_report),
        AuditCase("round_health", "discrete Laplace on status counts", "epsilon", EPSILON,
                  ("correct", "half_scale", "seeded"), _round_health),
        AuditCase("release_coverage", "discrete Laplace on covered-region counts", "epsilon",
                  EPSILON, ("correct", "half_scale", "skip_region"), _release_coverage),
        AuditCase("release_flat", "discrete Laplace per cell", "epsilon", EPSILON,
                  ("correct", "half_scale", "skip_cell"), _release_flat),
        AuditCase("release_hierarchical", "discrete Laplace per level, epsilon split",
                  "epsilon", EPSILON, ("correct", "split_wrong", "half_scale"),
                  _release_hierarchical),
        AuditCase("published_composition", "none (public participation, coarsened)",
                  "epsilon", 0.0, ("correct", "outcome_unnoised"), _composition),
        AuditCase("transform_clients", "Gaussian per client (lattice), zCDP", "rho", RHO,
                  ("correct", "release", "half_scale", "unclipped_device"), _transform),
    ]
}


def run_case(name: str, variant: str = "correct", *, draws: int | None = None,
             rng: RandomLike = None) -> AuditResult:
    """Audit one case of the suite (a release path, or one of its broken variants).

    Parameters
    ----------
    name : str
        A key of :data:`CASES`.
    variant : str
        ``"correct"`` or one of the case's broken variants.
    draws : int, optional
        Draws per input (default: the path's default).
    rng : numpy Generator, int or None
        Seed of the simulation path.
    """
    case = CASES.get(name)
    if case is None:
        raise fail("name", name, "is not an audit case", f"use one of {sorted(CASES)}")
    if variant not in case.variants:
        raise fail("variant", variant, f"is not a variant of {name}",
                   f"use one of {list(case.variants)}")
    return case.run(variant, draws, rng)



