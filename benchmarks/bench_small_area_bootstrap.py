"""Analytic vs parametric bootstrap MSE of the spatial model on the 48 states (issue 26).

The setting of ``bench_small_area.py`` (states, spatial Fay-Herriot, a fresh
spatial field and region noise each round, real cohort sizes, replace-one
Laplace noise, ``client_variance=0.36``, every suppressed state modelled), at
one epsilon. Each round is smoothed twice: with the analytic MSE
(``mse="analytic"``) and with the parametric bootstrap (``mse="bootstrap"``,
``--replicates`` refits, seeded by the round), both with plug-in intervals
(``interval="plug-in"``: ``eblup +/- q sqrt(mse)``, what this compares).
Per size class it prints the 95% interval coverage, its standard error (rounds
as clusters: the states of one round share the field), the mean squared error
against the truth, the mean estimated MSE and their ratio.

Usage: ``python benchmarks/bench_small_area_bootstrap.py [--epsilon 0.1] [--reps 300]
[--replicates 100]``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import bench_small_area as base
import numpy as np
import pandas as pd

from spatialdp.smooth import SmallAreaModelWarning, small_area_estimates


def run(epsilon: float, reps: int, replicates: int) -> pd.DataFrame:
    """Return one row per (MSE method, region, round): class, squared error, MSE, covered."""
    part, cohort, floor, _ = base.setting("states")
    covariates = base.public_covariates(part)
    draw = base.truth_generator(part, covariates)
    classes = base.size_class(cohort, floor)
    rng = np.random.default_rng(int(epsilon * 1000))
    rows = []
    for rep in range(reps):
        truth = draw(rng)
        frame = base.published_frame(part, truth, cohort, floor, epsilon, rng)
        for how in ("analytic", "bootstrap"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SmallAreaModelWarning)
                out = small_area_estimates(frame, covariates=covariates, model="sfh",
                                           weights=part, include_suppressed=True,
                                           client_variance=base.CLIENT_SD**2, mse=how,
                                           replicates=replicates, rng=rep,
                                           interval="plug-in").frame
            rows.append(pd.DataFrame({
                "mse method": how, "round": rep, "class": classes,
                "squared error": (out.eblup.to_numpy() - truth) ** 2, "mse": out.mse.to_numpy(),
                "covered": (out.ci_low.to_numpy() <= truth) & (truth <= out.ci_high.to_numpy())}))
    return pd.concat(rows, ignore_index=True)


def summary(table: pd.DataFrame, reps: int) -> pd.DataFrame:
    """Coverage (with its cluster SE), mean squared error, mean estimated MSE, by class."""
    groups = table.groupby(["mse method", "class"])
    out = groups.agg(coverage=("covered", "mean"), mse_true=("squared error", "mean"),
                     mse_estimated=("mse", "mean"))
    per_round = table.groupby(["mse method", "class", "round"]).covered.mean()
    out["coverage se"] = per_round.groupby(["mse method", "class"]).std() / np.sqrt(reps)
    out["true / estimated"] = out.mse_true / out.mse_estimated
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=0.1)
    parser.add_argument("--reps", type=int, default=300, help="rounds")
    parser.add_argument("--replicates", type=int, default=100, help="bootstrap replicates")
    args = parser.parse_args()
    start = time.perf_counter()
    table = run(args.epsilon, args.reps, args.replicates)
    print(f"epsilon {args.epsilon}, {args.reps} rounds, {args.replicates} bootstrap replicates")
    print(summary(table, args.reps).to_string(float_format=lambda v: f"{v:.4f}"))
    print(f"benchmark wall time {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
