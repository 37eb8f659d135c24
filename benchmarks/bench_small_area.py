"""Small-area estimation on private regional maps: direct estimates vs EBLUPs (issue 26).

Simulated truths on two partitions, the 48 states and an H3 resolution-5 cover
of them (30,772 cells), with real cohort sizes: the per-region counts of
:func:`spatialdp.datasets.synthetic_fleet` (20,000 devices on the states,
1,000,000 on the cells). Per region, the truth is

    theta = 1.5 + 0.25 lat + 0.15 lon + u + r,

with ``lat``/``lon`` the standardised centroid coordinates (public covariates),
``u`` a smooth spatial field (a SAR(0.8) process on the neighbour graph) and
``r`` independent region noise, both drawn afresh each round. Each round
publishes, per region above the floor, the mean of its cohort's clipped values
(client sd 0.6 around theta) plus the Laplace noise of
:func:`~spatialdp.federated.regional_report` under replace-one neighbours
(scale ``(clip_high - clip_low) / (epsilon n)``; checked
against a real report once). The direct estimate is that value; the EBLUP is
:func:`spatialdp.smooth.small_area_estimates` on the published frame with the
public covariates (spatial Fay-Herriot on the states, Fay-Herriot on the
cells: the dense spatial model stops at ``DENSE_LIMIT`` regions), with the
client variance known (``client_variance=0.36``, as from a published spread).
Suppressed regions get a modelled estimate (``include_suppressed=True``).

The table: MSE of the direct estimates and of the EBLUPs against the truth, by
region-size class (cohort within 2x of the floor, 2-10x, above 10x; and the
suppressed regions, which have no direct estimate), 95% interval coverage,
and the share of suppressed regions given a modelled estimate. Then the fit
times on the 30,772-cell partition of Fay-Herriot, the CAR and the SAR model
(every cell estimated; median [min, max] of 3 runs, wall and CPU; the
factorisation backend is CHOLMOD when cvxopt is installed, else SuperLU;
``--fit-time-only`` prints only these).

``--oracle-only`` prints, for the states, the change of the best linear
predictor (the BLUP with the truths' own covariance and known parameters): a
floor on what any EBLUP can reach in this setting; and that of the
Laplace-aware predictor with the same (oracle) priors of each area given the
others, exact (no simulation).

``--predictor laplace`` (or ``laplace-mixture``) smooths with the
Laplace-aware predictor (:mod:`spatialdp.smooth.laplace`), ``--predictor
both`` with the linear and the Laplace-aware one on the same rounds, ``all``
with the three. ``SE`` is the standard error of ``change`` (delta method,
the rounds as independent clusters); ``SE diff`` (``both``, ``all``) that of
a predictor's change minus the linear one's, paired on the rounds: much
smaller, as they share the direct estimates' errors.

Usage: ``python benchmarks/bench_small_area.py [--reps 40] [--h3-reps 10]
[--epsilon 0.1 ...] [--interval mixture|plug-in]
[--predictor linear|laplace|laplace-mixture|both|all] [--states-only] [--oracle-only]
[--h3-model fh|car|sfh] [--fit-time-only]``.
"""

from __future__ import annotations

import argparse
import math
import time
import warnings
from collections.abc import Callable

import _common
import numpy as np
import pandas as pd
from scipy import sparse
from scipy.sparse import linalg as sla

from spatialdp.datasets import load_us_states, synthetic_fleet, us_states_partition
from spatialdp.federated import MetricSpec, device_report, regional_report
from spatialdp.geo import Partition
from spatialdp.privacy import Simulation
from spatialdp.smooth import SmallAreaModelWarning, small_area_estimates
from spatialdp.smooth.cholesky import default_backend
from spatialdp.smooth.laplace import laplace_bayes_risk, leave_one_out_prior
from spatialdp.smooth.weights import row_standardised

CLIP = (0.0, 4.0)
CLIENT_SD = 0.6
EPSILONS = (0.1, 0.25, 0.5, 1.0, 2.0)
SPATIAL_RHO, SPATIAL_VAR, REGION_VAR = 0.8, 0.03, 0.01
STATE_DEVICES = 20_000
CLASSES = ("<2x floor", "2-10x floor", ">10x floor", "suppressed")
#: ``--predictor`` values that smooth every round with several predictors (the first is the
#: reference of ``SE diff``).
PREDICTOR_SETS = {"both": ("linear", "laplace"), "all": ("linear", "laplace", "laplace-mixture")}


def setting(kind: str) -> tuple[Partition, np.ndarray, int, str]:
    """Return the partition, its real cohort sizes, the floor and the model used."""
    if kind == "states":
        part, devices, floor, model = us_states_partition(), STATE_DEVICES, 100, "sfh"
    else:
        part = Partition.from_h3_cover(load_us_states(), 5, containment="overlap",
                                       name="us-r5")
        devices, floor, model = 1_000_000, 20, "fh"
    fleet = synthetic_fleet(devices, rng=0, partition=part, progress=False)
    counts = fleet.region_id.value_counts().reindex(part.region_ids, fill_value=0)
    return part, counts.to_numpy(), floor, model


def public_covariates(part: Partition) -> pd.DataFrame:
    """Standardised centroid latitude and longitude: public geography."""
    centre = part.regions.geometry.to_crs(5070).centroid.to_crs(4326)
    frame = pd.DataFrame({"lat": centre.y.to_numpy(), "lon": centre.x.to_numpy()},
                         index=part.region_ids.astype(str))
    return (frame - frame.mean()) / frame.std()


def truth_generator(part: Partition, covariates: pd.DataFrame):
    """Return a function drawing one truth: a fresh spatial field and fresh region noise.

    The MSE and the intervals are statements over the model (field included),
    so each round draws both; with one fixed field, the few suppressed states
    would measure a handful of field values, not the model.
    """
    W = row_standardised(part.adjacency())
    n = part.n_regions
    lu = sla.splu(sparse.csc_matrix(sparse.identity(n) - SPATIAL_RHO * W))
    trend = 1.5 + 0.25 * covariates.lat.to_numpy() + 0.15 * covariates.lon.to_numpy()
    innovation = math.sqrt(SPATIAL_VAR * (1 - SPATIAL_RHO**2))

    def draw(rng: np.random.Generator) -> np.ndarray:
        field = lu.solve(rng.normal(0.0, innovation, n))
        return trend + field + rng.normal(0.0, math.sqrt(REGION_VAR), n)

    return draw


def published_frame(part: Partition, truth: np.ndarray, cohort: np.ndarray, floor: int,
                    epsilon: float, rng: np.random.Generator) -> pd.DataFrame:
    """One round's published frame (replace-one mean: sampling error plus Laplace noise)."""
    shown = cohort >= floor
    n = np.maximum(cohort, 1)
    scale = (CLIP[1] - CLIP[0]) / (epsilon * n)
    value = truth + rng.normal(0.0, CLIENT_SD / np.sqrt(n)) + rng.laplace(0.0, scale)
    return pd.DataFrame({
        "value": np.where(shown, value, np.nan),
        "noise_std": np.where(shown, math.sqrt(2.0) * scale, np.nan),
        "cohort": pd.arrays.IntegerArray(cohort.astype(np.int64), ~shown),
        "suppressed": ~shown, "clip_low": CLIP[0], "clip_high": CLIP[1]},
        index=part.region_ids.astype(str))


def check_noise_scale(part: Partition, cohort: np.ndarray, floor: int) -> None:
    """Assert that the simulated noise is the real report's (one real release on the states)."""
    fleet = synthetic_fleet(STATE_DEVICES, rng=0, partition=part, progress=False)
    spec = MetricSpec("loss", *CLIP)
    examples = pd.DataFrame({"client_id": fleet.device_id, "region_id": fleet.region_id,
                             "loss": 1.0})
    report = regional_report(device_report(examples, loss_spec=spec, partition=part), part,
                             [spec], epsilon=0.5, target=Simulation(rng=0), min_cohort=floor)
    frame = report["loss"]
    ours = published_frame(part, np.ones(part.n_regions), cohort, floor, 0.5,
                           np.random.default_rng(0))
    assert np.allclose(frame.noise_std.to_numpy(dtype=float), ours.noise_std, equal_nan=True)
    assert (frame.suppressed.to_numpy() == ours.suppressed.to_numpy()).all()


def size_class(cohort: np.ndarray, floor: int) -> np.ndarray:
    return np.where(cohort < floor, "suppressed",
                    np.where(cohort < 2 * floor, "<2x floor",
                             np.where(cohort < 10 * floor, "2-10x floor", ">10x floor")))


def ratio_se(numerator: np.ndarray, denominator: np.ndarray) -> float:
    """Standard error of ``mean(numerator) / mean(denominator)`` over rounds (delta method).

    One entry per round (the rounds are independent clusters; the regions of
    one round are not independent of each other).
    """
    if numerator.size < 2:
        return math.nan
    ratio = numerator.mean() / denominator.mean()
    return float(np.std(numerator - ratio * denominator, ddof=1)
                 / math.sqrt(numerator.size) / denominator.mean())


def run(kind: str, reps: int, epsilons: tuple[float, ...] = EPSILONS,
        interval: str = "mixture", predictors: tuple[str, ...] = ("linear",),
        model: str | None = None
        ) -> tuple[list[dict[str, object]], Partition, pd.DataFrame, np.ndarray, int, str]:
    """Return the table rows (one per predictor, epsilon and class) and the setting.

    Every predictor smooths the same rounds; ``SE`` is the standard error of
    ``change`` (rounds as clusters) and, with several predictors, ``SE diff``
    that of each later one's change minus the first's (paired on the rounds).
    ``model`` overrides the setting's model.
    """
    part, cohort, floor, default_model = setting(kind)
    model = model or default_model
    if kind == "states":
        check_noise_scale(part, cohort, floor)
    covariates = public_covariates(part)
    draw = truth_generator(part, covariates)
    classes = size_class(cohort, floor)
    rows = []
    for epsilon in epsilons:
        rng = np.random.default_rng(int(epsilon * 1000))
        parts = []
        for rep in range(reps):
            truth = draw(rng)
            frame = published_frame(part, truth, cohort, floor, epsilon, rng)
            for predictor in predictors:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", SmallAreaModelWarning)
                    out = small_area_estimates(frame, covariates=covariates, model=model,
                                               weights=part, include_suppressed=True,
                                               client_variance=CLIENT_SD**2,
                                               interval=interval, predictor=predictor).frame
                parts.append(pd.DataFrame({
                    "round": rep, "predictor": predictor, "class": classes,
                    "direct": (frame.value.to_numpy() - truth) ** 2,
                    "eblup": (out.eblup.to_numpy() - truth) ** 2,
                    "covered": ((out.ci_low.to_numpy() <= truth)
                                & (truth <= out.ci_high.to_numpy())),
                    "modelled": out.label.to_numpy() == "modelled"}))
        table = pd.concat(parts)
        for name in CLASSES:
            if not (classes == name).any():
                continue
            per_round = {p: table[(table["class"] == name) & (table.predictor == p)]
                         .groupby("round")[["direct", "eblup", "covered", "modelled"]].mean()
                         for p in predictors}
            for predictor, group in per_round.items():
                rows.append(_row(kind, model, epsilon, name, int((classes == name).sum()),
                                 predictor, group, per_round[predictors[0]]))
    return rows, part, covariates, cohort, floor, model


def _row(kind: str, model: str, epsilon: float, name: str, regions: int, predictor: str,
         group: pd.DataFrame, first: pd.DataFrame) -> dict[str, object]:
    """One row of the table from the per-round class means of one predictor."""
    published = name != "suppressed"
    direct, eblup = group.direct.to_numpy(), group.eblup.to_numpy()
    paired = published and group is not first
    return {
        "partition": kind, "model": model, "predictor": predictor, "epsilon": epsilon,
        "class": name, "regions": regions,
        "MSE direct": float(direct.mean()) if published else math.nan,
        "MSE EBLUP": float(eblup.mean()),
        "change": float(eblup.mean() / direct.mean() - 1) if published else math.nan,
        "SE": ratio_se(eblup, direct) if published else math.nan,
        "SE diff": (ratio_se(eblup - first.eblup.to_numpy(), direct) if paired
                    else math.nan),
        "coverage": float(group.covered.mean()),
        "modelled share": float(group.modelled.mean()) if not published else math.nan}


def oracle_change(part: Partition, cohort: np.ndarray, floor: int,
                  covariates: pd.DataFrame) -> list[dict[str, object]]:
    """The best any linear predictor can do: the BLUP with the truths' own covariance.

    Known variance parameters and the true covariance of the simulated truths
    (the SAR(0.8) field plus the independent region noise; ``beta`` by GLS):
    the MSE ``g1 + g2`` of each published region, over the direct estimate's
    error variance, per size class and epsilon. An EBLUP with estimated
    parameters (and a model without the independent part) can only do worse
    on average; this bounds the ``change`` column from below.
    """
    W = row_standardised(part.adjacency()).toarray()
    B = np.eye(part.n_regions) - SPATIAL_RHO * W
    truth_cov = (SPATIAL_VAR * (1 - SPATIAL_RHO**2) * np.linalg.inv(B.T @ B)
                 + REGION_VAR * np.eye(part.n_regions))
    X = np.column_stack([np.ones(part.n_regions), covariates.to_numpy()])
    shown, classes = cohort >= floor, size_class(cohort, floor)
    n = np.maximum(cohort, 1)
    rows = []
    for epsilon in EPSILONS:
        d = 2.0 * ((CLIP[1] - CLIP[0]) / (epsilon * n)) ** 2 + CLIENT_SD**2 / n
        vinv = np.linalg.inv(truth_cov[np.ix_(shown, shown)] + np.diag(d[shown]))
        weight = truth_cov[:, shown] @ vinv
        beta_cov = np.linalg.inv(X[shown].T @ vinv @ X[shown])
        dmat = X - weight @ X[shown]
        mse = (np.diag(truth_cov) - np.einsum("ij,ij->i", weight, truth_cov[:, shown])
               + np.einsum("ij,jk,ik->i", dmat, beta_cov, dmat))
        laplace = _oracle_laplace(mse, d, CLIENT_SD**2 / n, (CLIP[1] - CLIP[0]) / (epsilon * n))
        for name in CLASSES[:3]:
            pick = classes == name
            rows.append({"epsilon": epsilon, "class": name,
                         "oracle change": float(mse[pick].mean() / d[pick].mean() - 1),
                         "oracle laplace change": float(laplace[pick].mean() / d[pick].mean()
                                                        - 1)})
    return rows


def _oracle_laplace(variance: np.ndarray, d: np.ndarray, sampling: np.ndarray,
                    scale: np.ndarray) -> np.ndarray:
    """The MSE of the Laplace-aware predictor with the oracle's leave-one-out priors.

    The oracle BLUP's error variance gives each area's prior given the others
    (:func:`spatialdp.smooth.laplace.leave_one_out_prior`); the exact Bayes
    risk of the posterior mean under the Laplace-plus-normal likelihood
    (:func:`spatialdp.smooth.laplace.laplace_bayes_risk`) is what the
    Laplace predictor reaches with the truth's own covariance.
    """
    _, tau2 = leave_one_out_prior(np.zeros_like(d), variance, np.zeros_like(d), d)
    return laplace_bayes_risk(tau2, sampling, scale)


def fit_times(part: Partition, covariates: pd.DataFrame, cohort: np.ndarray, floor: int
              ) -> dict[str, _common.Timing]:
    """Wall and CPU time of one fit per model on the whole partition (epsilon 0.5).

    Fay-Herriot, the CAR and the SAR model; estimates, MSEs and intervals of
    every cell (suppressed ones modelled), 3 runs each, the first of them cold
    (nothing cached from an earlier fit).
    """
    draw = truth_generator(part, covariates)
    rng = np.random.default_rng(0)
    frame = published_frame(part, draw(rng), cohort, floor, 0.5, rng)

    def fit(model: str) -> Callable[[], object]:
        def run() -> object:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SmallAreaModelWarning)
                return small_area_estimates(frame, covariates=covariates, model=model,
                                            weights=part, include_suppressed=True,
                                            client_variance=CLIENT_SD**2)
        return run

    return _common.compare({name: fit(name) for name in ("fh", "car", "sfh")}, repeats=3,
                           warmup=0, check=None, memory=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=40, help="rounds per epsilon (states)")
    parser.add_argument("--h3-reps", type=int, default=10, help="rounds per epsilon (H3)")
    parser.add_argument("--epsilon", type=float, action="append",
                        help="an epsilon to run (repeatable; default all of EPSILONS)")
    parser.add_argument("--interval", choices=("mixture", "plug-in"), default="mixture",
                        help="how the intervals are built (small_area_estimates(interval=))")
    parser.add_argument("--predictor", choices=(*PREDICTOR_SETS, "linear", "laplace",
                                                "laplace-mixture"), default="linear",
                        help="small_area_estimates(predictor=); 'both' (linear, laplace) and "
                             "'all' smooth every round with each (paired: 'SE diff' is the SE "
                             "of a predictor's change minus the linear one's)")
    parser.add_argument("--states-only", action="store_true", help="skip the H3 partition")
    parser.add_argument("--oracle-only", action="store_true",
                        help="print only the states' oracle (true-covariance BLUP) changes")
    parser.add_argument("--h3-model", choices=("fh", "car", "sfh"), default=None,
                        help="the model on the H3 cells (default fh)")
    parser.add_argument("--fit-time-only", action="store_true",
                        help="print only the fit times on the H3 partition")
    args = parser.parse_args()
    if args.fit_time_only:
        print_fit_times()
        return
    if args.oracle_only:
        part, cohort, floor, _ = setting("states")
        print(_common.scaling_table(oracle_change(part, cohort, floor, public_covariates(part)),
                                    ["epsilon", "class", "oracle change",
                                     "oracle laplace change"]))
        return
    epsilons = tuple(args.epsilon) if args.epsilon else EPSILONS
    start = time.perf_counter()
    predictors = PREDICTOR_SETS.get(args.predictor, (args.predictor,))
    rows, *_ = run("states", args.reps, epsilons, args.interval, predictors)
    columns = ["partition", "model", "predictor", "epsilon", "class", "regions", "MSE direct",
               "MSE EBLUP", "change", "SE", "SE diff", "coverage", "modelled share"]
    if args.states_only:
        print(_common.scaling_table(rows, columns).replace("nan", "-"))
        print(f"benchmark wall time {time.perf_counter() - start:.0f} s")
        return
    h3_rows, *_ = run("h3", args.h3_reps, epsilons, args.interval, predictors,
                      args.h3_model)
    rows += h3_rows
    print(_common.scaling_table(rows, columns).replace("nan", "-"))
    print_fit_times()
    print(f"benchmark wall time {time.perf_counter() - start:.0f} s")


def print_fit_times() -> None:
    """Print the fit times of the three models on the H3 partition (median of 3 runs)."""
    part, cohort, floor, _ = setting("h3")
    results = fit_times(part, public_covariates(part), cohort, floor)
    print(f"\nfit of the {part.n_regions:,}-cell H3 partition ({int((cohort >= floor).sum()):,} "
          f"published, floor {floor}, every cell estimated; factorisation backend "
          f"{default_backend()}; {_common.machine_line()}):")
    _common.print_results(results, width=4)


if __name__ == "__main__":
    main()
