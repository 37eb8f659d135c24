"""The audit suite's cases: every spatialdp release path, with worst-case neighbours.

Each :class:`AuditCase` builds a small, realistic input of one release path,
its worst-case neighbouring pairs under the relation the release claims
(:attr:`AuditCase.neighbours`: ``"replace"``, one client's values replaced with
participation fixed, or ``"add_remove"``, one client or device added or
removed), and the release as ``release(dataset, target)`` returning what it
publishes (the result object; for the file case, the written files);
:func:`run_case` audits it at its claimed epsilon (or rho), on the published outputs by
default (:func:`~spatialdp.audit.audit`'s ``"published"`` path).

Each case also has deliberately broken *variants* (:data:`VARIANTS`), built
here and never in library code, which a sound audit must catch. They break
a release at every stage:

- the input: a device that skips clipping or the mass cap (a report no correct
  device sends, built by hand: the neighbour builders refuse it);
- the noise: half the scale, a value without noise, a wrong epsilon split (a
  rewritten mechanism) or noise from a fixed seed;
- after the noise: a region published without its noise, an exact private
  count in an output column, a warning whose text holds an exact private
  count, a written file holding an exact value (the release function wrapped,
  or its result object post-processed). Only the published path sees these:
  the tap reads the noise before them.

``tests/test_audit_*.py`` runs them all in CI; ``benchmarks/audit_full.py``
runs them longer and writes the claimed-vs-measured table of ``docs/audit.md``.

Examples
--------
>>> sorted(CASES)[:4]
['aggregate_histogram', 'aggregate_histogram (add/remove)', 'aggregate_metric', 'aggregate_ratio']
>>> CASES["regional_report (add/remove)"].neighbours
'add_remove'
>>> CASES["release_flat"].variants, CASES["release_flat"].neighbours
(('correct', 'half_scale', 'skip_cell'), 'add_remove')
>>> VARIANTS["unnoised_region"].path, VARIANTS["half_scale"].path
('published', 'tap')
"""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp._random import RandomLike, as_generator
from spatialdp._validation import fail
from spatialdp.audit.auditor import DEFAULT_DRAWS, AuditResult, audit, audit_sampler
from spatialdp.audit.neighbours import (
    _with_values,
    drop_device,
    extreme_pairs,
    remove_client,
    replace_client,
    status_pair,
)
from spatialdp.audit.published import Publication, emitted, publication, read_files
from spatialdp.exceptions import UninformativeReleaseWarning
from spatialdp.privacy.noise import LaplaceMechanism
from spatialdp.privacy.target import Accounting, Simulation, Unaccounted

__all__ = ["CASES", "VARIANTS", "AuditCase", "HalfScale", "SkipOne", "Variant", "run_case"]

EPSILON = 1.0
RHO = 0.5
#: The region whose value the ``unnoised_region`` variant publishes without noise.
BROKEN_REGION = "CO"


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
class Variant:
    """A way a release can be broken, where, and the path that audits it by default.

    Attributes
    ----------
    name : str
    broken : str
        What is broken, in words.
    stage : {"none", "input", "noise", "after the noise"}
        Where: the client's report, the noise, or what is done with the noisy values.
    path : {"published", "tap", "release"}
        The audit path run by default (the tap is faster and sharper for the
        noise itself; only the published path sees what happens after the noise;
        a seeded release needs the real release path).
    true_epsilon : str
        The variant's real epsilon (or rho, in a zCDP case) against the claim.
    """

    name: str
    broken: str
    stage: str
    path: str
    true_epsilon: str


VARIANTS: dict[str, Variant] = {v.name: v for v in [
    Variant("correct", "nothing", "none", "published", "at most the claim"),
    Variant("half_scale", "noise at half the needed scale (for zCDP: 4x rho)", "noise", "tap",
            "2x epsilon (4x rho)"),
    Variant("skip_region", "no noise on one region's value", "noise", "tap", "unbounded"),
    Variant("skip_cell", "no noise on one cell's count", "noise", "tap", "unbounded"),
    Variant("split_wrong", "every hierarchy level (or both parts of a ratio) at the whole "
            "epsilon", "noise", "tap", "3x (3 levels), 2x (ratio)"),
    Variant("unclipped_device", "one device reports 4x the clip bound (or 4x the radius)",
            "input", "tap", "4x"),
    Variant("cap_ignored", "one device puts mass 1 in two buckets (cap 1)", "input", "tap",
            "1.5x"),
    Variant("seeded", "noise from a fixed seed", "noise", "release", "unbounded"),
    Variant("outcome_unnoised", "composition counts who returned (private) instead of who "
            "was selected", "after the noise", "published", "unbounded"),
    Variant("unnoised_region", f"region {BROKEN_REGION} published without its noise (value "
            "and interval)", "after the noise", "published", "unbounded"),
    Variant("exact_count", "an exact count of the clients at the clip bound, per region, in "
            "an output column", "after the noise", "published", "unbounded"),
    Variant("private_warning", "a warning whose text holds the exact number of clients that "
            "have the metric", "after the noise", "published", "unbounded"),
    Variant("exact_in_file", "the written CSV holds each region's exact sum",
            "after the noise", "published", "unbounded"),
    Variant("exact_floor", "under add/remove, the cohort floor applied to the exact count "
            "of clients (a region published or suppressed by who took part)",
            "after the noise", "published", "unbounded"),
]}


@dataclass(frozen=True)
class AuditCase:
    """One release path: what it claims, for which neighbours, and its broken variants.

    Attributes
    ----------
    name : str
        The release function audited.
    mechanism : str
        Its noise, in words.
    unit : {"epsilon", "rho"}
        The unit of the claim (as :attr:`AuditResult.unit`).
    claimed : float
    neighbours : {"replace", "add_remove"}
        The neighbouring relation of the claim, and of the case's pairs.
    variants : tuple of str
        ``"correct"`` first, then the broken variants (keys of :data:`VARIANTS`).
    run : callable
        ``run(variant, path, draws, rng) -> AuditResult``.
    paths : tuple of str
        The audit paths the case can run.
    """

    name: str
    mechanism: str
    unit: str
    claimed: float
    neighbours: str
    variants: tuple[str, ...]
    run: Callable[[str, str, int | None, RandomLike], AuditResult]
    paths: tuple[str, ...] = ("published", "tap", "release")


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


# --- variants ---------------------------------------------------------------------------------

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


def _label(name: str, variant: str) -> str:
    return name if variant == "correct" else f"{name} [{variant}]"


def _audit(variant: str, path: str, release: Callable[[Any, Any], Any], pairs: Any, *,
           case: str, draws: int | None, rng: RandomLike, skip: int = 0,
           **claim: Any) -> AuditResult:
    """Audit one variant of a case on ``path`` (the seeded variant: the release path)."""
    relation = CASES[case].neighbours
    if variant == "seeded":  # the release path is slow: one pair is enough for a seed
        first = pairs if isinstance(pairs, tuple) else pairs[0]
        return audit(_seeded(release), first, path="release", draws=draws or 120,
                     name=_label(case, variant), neighbours=relation, **claim)
    return audit(release, pairs, path=path, rewrite=None if path == "release" else
                 _rewrite(variant, skip=skip), draws=draws, rng=rng,
                 name=_label(case, variant), neighbours=relation, **claim)


def _unnoised_region(release: Callable[[Any, Any], Any], spec: Any
                     ) -> Callable[[Any, Any], Any]:
    """Wrap a regional release: :data:`BROKEN_REGION` gets its exact mean, no noise."""
    def broken(frame: pd.DataFrame, target: Accounting) -> Any:
        report = release(frame, target)
        exact = float(frame.loc[frame.region_id == BROKEN_REGION, spec.name].mean())
        out = report[spec.name]
        bar = float(out.loc[BROKEN_REGION, "error_bar"])
        out.loc[BROKEN_REGION, ["value", "ci_low", "ci_high"]] = [exact, exact - bar,
                                                                  exact + bar]
        return report
    return broken


def _exact_count(release: Callable[[Any, Any], Any], spec: Any) -> Callable[[Any, Any], Any]:
    """Wrap a regional release: a column with each region's exact count of clipped clients."""
    def broken(frame: pd.DataFrame, target: Accounting) -> Any:
        report = release(frame, target)
        at_clip = (frame[spec.name] >= spec.clip_high).groupby(frame.region_id).sum()
        out = report[spec.name]
        out["clients_at_clip"] = at_clip.reindex(out.index, fill_value=0).to_numpy()
        return report
    return broken


def _private_warning(release: Callable[[Any, Any], Any], spec: Any
                     ) -> Callable[[Any, Any], Any]:
    """Wrap a release: a warning, before it, naming the exact number of clients with the metric."""
    def broken(frame: pd.DataFrame, target: Accounting) -> Any:
        present = int(frame[spec.present].sum())
        warnings.warn(f"{spec.key}: only {present} clients have the metric; the release may "
                      "be dominated by noise", UninformativeReleaseWarning, stacklevel=2)
        return release(frame, target)
    return broken


# --- the cases --------------------------------------------------------------------------------

def _client_zero(variant: str, path: str, draws: int | None, rng: RandomLike, *, case: str,
                 aggregate: Callable[..., Any], spec: Any,
                 broken: dict[str, dict[str, float]] | None = None) -> AuditResult:
    """Audit ``aggregate(reports, spec)`` on client 0's worst-case pair under the case's relation.

    ``broken`` maps a broken-device variant to the values client 0's report
    holds in the second input instead: a report no correct device sends, which
    :func:`~spatialdp.audit.neighbours.replace_client` refuses, as it must, so
    it is written here by hand.
    """
    relation = CASES[case].neighbours
    reports = _reports()

    def release(frame: pd.DataFrame, target: Accounting) -> Any:
        return aggregate(frame, spec, epsilon=EPSILON, target=target, neighbours=relation)

    pair = next(extreme_pairs(reports, spec, clients=[0], neighbours=relation))
    if broken is not None and variant in broken:
        pair = (pair[0], _with_values(reports, 0, broken[variant]))
    return _audit(variant, path, release, pair, case=case, draws=draws, rng=rng,
                  epsilon=EPSILON)


def _aggregate_metric(variant: str, path: str, draws: int | None,
                      rng: RandomLike) -> AuditResult:
    from spatialdp.federated import aggregate_metric

    spec = _loss()
    # unclipped_device: the device reports its raw loss, 4x the clip
    return _client_zero(variant, path, draws, rng, case="aggregate_metric",
                        aggregate=aggregate_metric, spec=spec,
                        broken={"unclipped_device": {spec.name: 4.0 * spec.clip_high}})


@cache
def _ratio_reports() -> tuple[Any, pd.DataFrame]:
    """240 clients along one road, every one with an along/across ratio."""
    import geopandas as gpd
    import shapely

    from spatialdp.federated import device_report, track_ratio_spec

    spec = track_ratio_spec(10.0, roads=True)
    n = 240
    lon, lat = np.full(n, -105.0), np.full(n, 39.7)
    examples = pd.DataFrame({"client_id": np.arange(n), "true_lon": lon, "true_lat": lat,
                             "pred_lon": lon + 1e-5 * np.linspace(1.0, 3.0, n),
                             "pred_lat": lat + 1e-5})
    road = gpd.GeoDataFrame(geometry=[shapely.LineString([(-105.01, 39.7), (-104.99, 39.7)])],
                            crs=4326)  # every client drives along it: all have the ratio
    return spec, device_report(examples, ratio_clip=10.0, roads=road, metric_crs="EPSG:32613")


def _aggregate_ratio(variant: str, path: str, draws: int | None,
                     rng: RandomLike) -> AuditResult:
    from spatialdp.federated import aggregate_metric

    spec, reports = _ratio_reports()

    def correct(frame: pd.DataFrame, target: Accounting) -> Any:
        return aggregate_metric(frame, spec, epsilon=EPSILON, target=target)

    release = _private_warning(correct, spec) if variant == "private_warning" else correct
    # Client 0 has no ratio (absent: 0 and present 0), then the largest ratio: the value
    # sum moves by the clip width and the count of present clients by 1.
    pair = (replace_client(reports, 0, ratio=0.0, track_present=0),
            replace_client(reports, 0, ratio=10.0, track_present=1))
    return _audit(variant, path, release, pair, case="aggregate_ratio", draws=draws, rng=rng,
                  epsilon=EPSILON)


def _aggregate_histogram(variant: str, path: str, draws: int | None,
                         rng: RandomLike) -> AuditResult:
    from spatialdp.federated import aggregate_histogram

    spec = _hist()
    cols = list(spec.columns)
    # cap_ignored: the device skips the L1 mass cap: 1 in two buckets
    return _client_zero(variant, path, draws, rng, case="aggregate_histogram",
                        aggregate=aggregate_histogram, spec=spec,
                        broken={"cap_ignored": {cols[0]: 0.0, cols[1]: 1.0, cols[2]: 1.0}})


def _regional_release(spec: Any) -> Callable[[Any, Any], Any]:
    from spatialdp.federated import regional_report

    states = _states()

    def release(frame: pd.DataFrame, target: Accounting) -> Any:
        return regional_report(frame, states, [spec], epsilon=EPSILON, target=target,
                               min_cohort=50)
    return release


def _regional_report(variant: str, path: str, draws: int | None,
                     rng: RandomLike) -> AuditResult:
    spec, reports = _loss(), _reports()
    release = _regional_release(spec)
    if variant == "unnoised_region":
        release = _unnoised_region(release, spec)
    elif variant == "exact_count":
        release = _exact_count(release, spec)
    pairs = list(extreme_pairs(reports, spec))  # one per region
    return _audit(variant, path, release, pairs, case="regional_report", draws=draws, rng=rng,
                  skip=2, epsilon=EPSILON)


def _regional_files(variant: str, path: str, draws: int | None,
                    rng: RandomLike) -> AuditResult:
    """Audit the files a regional round writes: the report (GeoPackage, CSV, JSON), its card."""
    from spatialdp.cards import ModelCard

    spec, reports, states = _loss(), _reports(), _states()
    report_of = _regional_release(spec)

    def release(frame: pd.DataFrame, target: Accounting) -> Publication:
        report = report_of(frame, target)
        with tempfile.TemporaryDirectory() as folder:
            paths = report.write(folder)
            paths += ModelCard.build(partition=states, specs=[spec], report=report).write(folder)
            if variant == "exact_in_file":  # a writer that leaves each region's exact sum in
                csv = next(p for p in paths if p.suffix == ".csv")
                table = pd.read_csv(csv, index_col=0)
                sums = frame.groupby("region_id")[spec.name].sum()
                table["loss_sum"] = sums.reindex(table.index).to_numpy()
                table.to_csv(csv)
            return read_files(paths, folder)

    # One pair: the files of the region that moves (the regional case covers every region).
    pair = next(extreme_pairs(reports, spec))
    return _audit(variant, path, release, pair, case="regional_report.write", draws=draws,
                  rng=rng, epsilon=EPSILON)


def _round_health(variant: str, path: str, draws: int | None, rng: RandomLike) -> AuditResult:
    from spatialdp.federated import round_health

    states = _states()
    regions = np.repeat(REGIONS[:3], 40)
    status = np.array(["returned", "dropped", "rejected", "returned"] * 30, dtype=object)

    def release(stat: NDArray[Any], target: Accounting) -> Any:
        return round_health(stat, regions, states, epsilon=EPSILON, target=target,
                            granularity=1)

    pair = status_pair(status, 0, first="returned", second="dropped")
    return _audit(variant, path, release, pair, case="round_health", draws=draws, rng=rng,
                  epsilon=EPSILON)


@cache
def _coverage_homes() -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64]]:
    """Return a point in each state of :data:`REGIONS` and 40 clients' two states each."""
    from spatialdp.datasets import load_us_states

    frame = load_us_states().set_index("state").loc[list(REGIONS)]
    spots = frame.geometry.representative_point()
    home = np.array([[i % 4, (i + 1) % 4] for i in range(40)])
    return spots.x.to_numpy(), spots.y.to_numpy(), home


def _release_coverage(variant: str, path: str, draws: int | None,
                      rng: RandomLike) -> AuditResult:
    from spatialdp.federated import release_coverage
    from spatialdp.federated.coverage import coverage

    states = _states()
    lon, lat, home = _coverage_homes()
    # Client 0 moves from (CO, UT) to (CA, TX).

    def rows(first: tuple[int, int]) -> Any:
        where = home.copy()
        where[0] = first
        ids = np.repeat(np.arange(40), 2)
        return coverage(lon[where.ravel()], lat[where.ravel()], ids, states, max_cells=2)

    def release(cov: Any, target: Accounting) -> Any:
        return release_coverage(cov, states, epsilon=EPSILON, target=target)

    return _audit(variant, path, release, (rows((0, 1)), rows((2, 3))),
                  case="release_coverage", draws=draws, rng=rng, skip=2, epsilon=EPSILON)


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


def _release_flat(variant: str, path: str, draws: int | None, rng: RandomLike) -> AuditResult:
    from spatialdp.queries import release_flat

    def release(truth: Any, target: Accounting) -> Any:
        return release_flat(truth, epsilon=EPSILON, target=target)

    pair = _grid_pair()
    moved = np.flatnonzero(pair[0].counts != pair[1].counts)
    return _audit(variant, path, release, pair, case="release_flat", draws=draws, rng=rng,
                  skip=int(moved[0]), epsilon=EPSILON)


def _release_hierarchical(variant: str, path: str, draws: int | None,
                          rng: RandomLike) -> AuditResult:
    from spatialdp.queries import release_hierarchical

    def release(truth: Any, target: Accounting) -> Any:
        return release_hierarchical(truth, epsilon=EPSILON, levels=3, target=target)

    return _audit(variant, path, release, _grid_pair(), case="release_hierarchical",
                  draws=draws, rng=rng, epsilon=EPSILON)


def _composition(variant: str, path: str, draws: int | None, rng: RandomLike) -> AuditResult:
    from spatialdp.sampling import RoundCohort, published_composition

    groups = ("urban", "rural")
    selected = np.arange(60)
    group_of = np.repeat([0, 1], 30)

    def release(status: NDArray[Any], target: Accounting) -> Any:
        if variant == "outcome_unnoised":  # broken: counts who RETURNED (private), exactly
            filled = np.bincount(group_of[status == "returned"], minlength=2)
        else:  # the seats filled by selection (public), whatever each client then did
            filled = np.bincount(group_of, minlength=2)
        cohort = RoundCohort(3, 0, selected, groups,
                             {"filled": filled, "wanted": filled,
                              "shortfall": np.zeros(2, np.int64),
                              "population": np.array([500, 80])}, 1.0)
        return published_composition([cohort], current_round=4)

    status = np.array(["returned"] * 15 + ["dropped"] * 15 + ["returned"] * 30, dtype=object)
    # 15 -> 14 returned clients in "urban": rounded to 10, that is 20 -> 10
    pair = status_pair(status, 14, first="returned", second="dropped")
    return audit(release, pair, path=path, draws=draws or 400, rng=rng, epsilon=0.0,
                 name=_label("published_composition", variant),
                 neighbours=CASES["published_composition"].neighbours)


def _transform_rows(out: Any, side: Publication) -> list[Publication]:
    """One publication per client row of a :class:`~spatialdp.regression.ClientReports`."""
    shared = publication({"directions": out.directions, "modulation": out.modulation,
                          "sigma": out.sigma, "label_sigma": out.label_sigma, "rho": out.rho,
                          "accounting": out.accounting})
    shared.merge(side)
    rows = []
    for features, label in zip(out.features, out.labels, strict=True):
        pub = publication({"features": features, "labels": label})
        pub.merge(shared)
        rows.append(pub)
    return rows


def _transform(variant: str, path: str, draws: int | None, rng: RandomLike) -> AuditResult:
    from spatialdp.regression import transform_clients
    from spatialdp.regression.modulation import Modulation

    modulation = Modulation(alpha=0.5, lam=0.0, radius=1.0)
    directions = np.array([[1.0, 0.0, 0.0]])
    rho = RHO * (4.0 if variant == "half_scale" else 1.0)  # 4x rho: half the noise scale

    def sampler(x: NDArray[np.float64], n: int, g: np.random.Generator) -> Any:
        rows = np.tile(x, (n, 1))  # n copies of one client: n independent releases
        if variant == "unclipped_device":  # a device that skips clipping: 4x the radius
            from spatialdp.regression.lattice_gaussian import LatticeGaussianMechanism
            from spatialdp.regression.modulation import modulate

            mech = LatticeGaussianMechanism(rho, modulation.sensitivity, x.size)
            raw = rows * np.where(np.linalg.norm(x) > 0.5, 4.0, 1.0)
            g_rows = modulate(raw, directions, modulation, np.zeros((n, 1)))
            return np.asarray(mech.simulate(g_rows, rng=g))
        target: Accounting = (Unaccounted("privacy audit") if path == "release"
                              else Simulation(rng=g))
        out, side = emitted(lambda: transform_clients(rows, np.zeros(n), modulation=modulation,
                                                      rho=rho, directions=directions,
                                                      target=target))
        return out.features if path == "tap" else _transform_rows(out, side)

    pair = (np.array([1.0, 0.0, 0.0]), np.array([-1.0, 0.0, 0.0]))
    return audit_sampler(sampler, pair, rho=RHO, draws=draws or DEFAULT_DRAWS["tap"],
                         rng=as_generator(rng), name=_label("transform_clients", variant),
                         neighbours=CASES["transform_clients"].neighbours,
                         path=f"{path} (rows)" if variant != "unclipped_device"
                         else "tap (sampler)")


# --- add/remove neighbours: one client added or removed -------------------------------------

#: The cohort floor of the add/remove regional case: region CO holds exactly this many
#: clients with client 0 and one fewer without it.
AR_FLOOR = 60


def _regional_add_remove(variant: str, path: str, draws: int | None,
                         rng: RandomLike) -> AuditResult:
    """Audit the regional report under add/remove: client 0 of CO absent, then at the clip."""
    from spatialdp.federated import regional_report

    spec, reports, states = _loss(), _reports(), _states()

    def release(frame: pd.DataFrame, target: Accounting) -> Any:
        return regional_report(frame, states, [spec], epsilon=EPSILON, target=target,
                               min_cohort=AR_FLOOR, neighbours="add_remove")

    if variant == "exact_floor":  # broken: the floor decided on who took part, exactly
        def broken(frame: pd.DataFrame, target: Accounting) -> Any:
            report = regional_report(frame, states, [spec], epsilon=EPSILON, target=target,
                                     min_cohort=1, neighbours="add_remove")
            out = report[spec.name]
            exact = frame.groupby("region_id", observed=True).size().reindex(out.index)
            below = (exact < AR_FLOOR).to_numpy()
            out.loc[below, ["value", "ci_low", "ci_high"]] = np.nan
            out["suppressed"] = below
            return report
        chosen: Callable[[Any, Any], Any] = broken
    else:
        chosen = release
    pair = next(extreme_pairs(reports, spec, clients=[0], neighbours="add_remove"))
    return _audit(variant, path, chosen, pair, case="regional_report (add/remove)",
                  draws=draws, rng=rng, epsilon=EPSILON)


def _histogram_add_remove(variant: str, path: str, draws: int | None,
                          rng: RandomLike) -> AuditResult:
    from spatialdp.federated import aggregate_histogram

    return _client_zero(variant, path, draws, rng, case="aggregate_histogram (add/remove)",
                        aggregate=aggregate_histogram, spec=_hist())


def _ratio_add_remove(variant: str, path: str, draws: int | None,
                      rng: RandomLike) -> AuditResult:
    from spatialdp.federated import aggregate_metric

    spec, reports = _ratio_reports()

    def release(frame: pd.DataFrame, target: Accounting) -> Any:
        return aggregate_metric(frame, spec, epsilon=EPSILON, target=target,
                                neighbours="add_remove")

    # Client 0 absent, then present with the largest ratio: sum +10, count of present +1.
    pair = (remove_client(reports, 0), replace_client(reports, 0, ratio=10.0, track_present=1))
    return _audit(variant, path, release, pair, case="aggregate_ratio (add/remove)",
                  draws=draws, rng=rng, epsilon=EPSILON)


def _health_add_remove(variant: str, path: str, draws: int | None,
                       rng: RandomLike) -> AuditResult:
    from spatialdp.federated import round_health

    states = _states()
    regions = np.repeat(REGIONS[:3], 40).astype(object)
    status = np.array(["returned", "dropped", "rejected", "returned"] * 30, dtype=object)

    def release(data: tuple[NDArray[Any], NDArray[Any]], target: Accounting) -> Any:
        stat, where = data
        return round_health(stat, where, states, epsilon=EPSILON, target=target,
                            granularity=1, neighbours="add_remove")

    pair = ((status[1:], regions[1:]), (status, regions))  # selected client 0 removed
    return _audit(variant, path, release, pair, case="round_health (add/remove)",
                  draws=draws, rng=rng, epsilon=EPSILON)


def _coverage_add_remove(variant: str, path: str, draws: int | None,
                         rng: RandomLike) -> AuditResult:
    from spatialdp.federated import release_coverage
    from spatialdp.federated.coverage import coverage

    states = _states()
    lon, lat, home = _coverage_homes()

    def rows(first: int) -> Any:  # clients first..39, each with samples in two states
        where = home[first:]
        ids = np.repeat(np.arange(first, 40), 2)
        return coverage(lon[where.ravel()], lat[where.ravel()], ids, states, max_cells=2)

    def release(cov: Any, target: Accounting) -> Any:
        return release_coverage(cov, states, epsilon=EPSILON, target=target,
                                neighbours="add_remove")

    return _audit(variant, path, release, (rows(1), rows(0)),
                  case="release_coverage (add/remove)", draws=draws, rng=rng, skip=0,
                  epsilon=EPSILON)


CASES: dict[str, AuditCase] = {
    case.name: case for case in [
        AuditCase("aggregate_metric", "Laplace on the clipped sum (lattice)", "epsilon", EPSILON,
                  "replace", ("correct", "half_scale", "unclipped_device", "seeded"),
                  _aggregate_metric),
        AuditCase("aggregate_ratio", "Laplace on the value sum and the present count, "
                  "epsilon split", "epsilon", EPSILON, "replace",
                  ("correct", "split_wrong", "half_scale", "private_warning"), _aggregate_ratio),
        AuditCase("aggregate_histogram", "Laplace on the bucket sums, L1 cap", "epsilon",
                  EPSILON, "replace", ("correct", "half_scale", "cap_ignored"),
                  _aggregate_histogram),
        AuditCase("regional_report", "Laplace per region (disjoint)", "epsilon", EPSILON,
                  "replace", ("correct", "half_scale", "skip_region", "seeded",
                              "unnoised_region", "exact_count"), _regional_report),
        AuditCase("regional_report.write", "Laplace per region; the written report and card",
                  "epsilon", EPSILON, "replace", ("correct", "exact_in_file"),
                  _regional_files, paths=("published", "release")),
        AuditCase("round_health", "discrete Laplace on status counts", "epsilon", EPSILON,
                  "replace", ("correct", "half_scale", "seeded"), _round_health),
        AuditCase("release_coverage", "discrete Laplace on covered-region counts", "epsilon",
                  EPSILON, "replace", ("correct", "half_scale", "skip_region"),
                  _release_coverage),
        AuditCase("release_flat", "discrete Laplace per cell", "epsilon", EPSILON, "add_remove",
                  ("correct", "half_scale", "skip_cell"), _release_flat),
        AuditCase("release_hierarchical", "discrete Laplace per level, epsilon split",
                  "epsilon", EPSILON, "add_remove", ("correct", "split_wrong", "half_scale"),
                  _release_hierarchical),
        AuditCase("published_composition", "none (public participation, coarsened)",
                  "epsilon", 0.0, "replace", ("correct", "outcome_unnoised"), _composition,
                  paths=("published", "release")),
        AuditCase("transform_clients", "Gaussian per client (lattice), zCDP, local", "rho", RHO,
                  "replace", ("correct", "half_scale", "unclipped_device"), _transform),
        AuditCase("regional_report (add/remove)", "Laplace on each region's sum and on the "
                  "shared count, floor on the noised count", "epsilon", EPSILON, "add_remove",
                  ("correct", "half_scale", "exact_floor"), _regional_add_remove),
        AuditCase("aggregate_histogram (add/remove)", "Laplace on the bucket sums (L1 cap) "
                  "and on the count", "epsilon", EPSILON, "add_remove",
                  ("correct", "half_scale"), _histogram_add_remove),
        AuditCase("aggregate_ratio (add/remove)", "Laplace on the value sum and the present "
                  "count, epsilon split evenly", "epsilon", EPSILON, "add_remove",
                  ("correct", "split_wrong"), _ratio_add_remove),
        AuditCase("round_health (add/remove)", "discrete Laplace on status counts "
                  "(sensitivity 1)", "epsilon", EPSILON, "add_remove",
                  ("correct", "half_scale"), _health_add_remove),
        AuditCase("release_coverage (add/remove)", "discrete Laplace on covered-region counts "
                  "(sensitivity max_cells)", "epsilon", EPSILON, "add_remove",
                  ("correct", "half_scale"), _coverage_add_remove),
    ]
}


def run_case(name: str, variant: str = "correct", *, path: str | None = None,
             draws: int | None = None, rng: RandomLike = None) -> AuditResult:
    """Audit one case of the suite (a release path, or one of its broken variants).

    Parameters
    ----------
    name : str
        A key of :data:`CASES`.
    variant : str
        ``"correct"`` or one of the case's broken variants.
    path : {"published", "tap", "release"}, optional
        The audit path (default: the variant's, :attr:`Variant.path`; the
        correct release's is ``"published"``). The seeded variant always runs
        the release path.
    draws : int, optional
        Draws per input (default: the path's default).
    rng : numpy Generator, int or None
        Seed of the published and tap paths.
    """
    case = CASES.get(name)
    if case is None:
        raise fail("name", name, "is not an audit case", f"use one of {sorted(CASES)}")
    if variant not in case.variants:
        raise fail("variant", variant, f"is not a variant of {name}",
                   f"use one of {list(case.variants)}")
    chosen = VARIANTS[variant].path if path is None else path
    if chosen not in case.paths:
        raise fail("path", chosen, f"is not a path of {name}", f"use one of {list(case.paths)}")
    return case.run(variant, chosen, draws, rng)
