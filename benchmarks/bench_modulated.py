"""Benchmark: the one-shot modulated fit of K = 1,000,000 client reports, d = 20.

The workload of an experiment: every client clips, modulates (lambda = 1,
omega = 1, alpha = 0.1, one direction) and noises its sample (seeded
simulation at rho = 0.5); the server then debiases the moments, centres them,
projects onto the PSD cone, applies the ridge and the norm cap and solves.

Timing follows the convention of ``benchmarks/_common.py`` (median of
``--repeats`` interleaved runs with min and max, wall and CPU; one warm-up call
each; answers asserted equal before timing; peak memory from one separate run).
**Both sides run on one BLAS thread**: the library enters
``spatialdp._blas.single_blas()`` (threadpoolctl) itself, and every numpy
baseline call runs inside the same ``single_blas()`` context.

- ``ratio:`` the fit, from the same ``ClientReports`` (built once, untimed).
  Ours: ``fit_one_shot(reports)``, what a user calls (it chooses the ridge and the
  norm cap itself). Baselines: the same estimator written tidily in numpy by
  someone who knows it, given the ridge and cap our fit chose (so it skips the
  ridge rule): ``G.T @ G`` (one ``syrk``), ``G.T @ y``, the feature mean, the
  known noise terms subtracted, the exact centring, the PSD projection (``eigh``),
  ``solve`` and the cap, no large temporaries. Two variants: the mean by
  ``G.mean(axis=0)`` and by a BLAS product ``G.T @ ones``; ``ratio:`` is against the
  faster, ``ratio_weaker:`` against the other. Answers: coefficients equal to 1e-10.
- ``ratio_given_ridge:`` ours with the same ridge and cap passed in (the
  estimator alone, like for like).
- ``ratio_cold:`` the same, with the ridge rule's one-off table (the
  eigendecomposition of its fixed unit-scale noise draws, cached per process and
  number of features) cleared before every run of ours; no warm-up.
- Costs printed apart: the ridge choice (``regularization_from_moments``, inside
  ``fit_one_shot``) and the sandwich covariance (one more pass over the reports,
  deferred by ``fit_one_shot`` until ``bse``/``conf_int``/``summary`` asks; this
  workload's PSD projection binds, so its fit has none, and the pass is timed
  directly with ``sandwich_covariance``).
- ``ratio_end_to_end:`` transform + fit against the straightforward numpy
  transform and estimator (large temporaries, BLAS on its default threads): a
  weaker baseline, answers not comparable (different random streams).
- per-client Python loop (transform only, ``--loop-clients`` scaled to K) and the
  RELEASE path of the transform (exact discrete Gaussian noise on a lattice from
  OS entropy), once each, for reference.

Run::

    python benchmarks/bench_modulated.py [--clients 1000000] [--repeats 7] [--no-release]
    python benchmarks/bench_modulated.py --scaling   # 10^4 .. 10^7 clients, the fit
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    Timing,
    compare,
    fastest,
    machine_line,
    print_results,
    ratio_line,
    scaling_table,
)

from spatialdp._blas import single_blas
from spatialdp.privacy import Simulation, Unaccounted
from spatialdp.regression import Modulation, fit_one_shot, transform_clients
from spatialdp.regression.client import ClientReports
from spatialdp.regression.covariance import sandwich_covariance
from spatialdp.regression.oneshot import centered_moments
from spatialdp.regression.regularization import _standard_draws, regularization_from_moments
from spatialdp.regression.server import project_psd

D, RHO, ALPHA, LAM, OMEGA, RADIUS = 20, 0.5, 0.1, 1.0, 1.0, 3.0
TOLERANCE = 1e-10


def make_reports(K: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, ClientReports]:
    """Return the clients' data and one simulated release of their reports."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(K, D)) * 0.5
    y = X @ np.linspace(-1, 1, D) + 0.5 * rng.normal(size=K)
    mod = Modulation(alpha=ALPHA, lam=LAM, omega=OMEGA, radius=RADIUS)
    return X, y, transform_clients(X, y, modulation=mod, rho=RHO, target=Simulation(rng=1))


def tidy_numpy(G: np.ndarray, y: np.ndarray, V: np.ndarray, *, sigma: float, ridge: float,
               cap: float, blas_mean: bool = False) -> np.ndarray:
    """The one-shot estimator in tidy numpy, given the ridge and the cap (on the caller's threads).

    ``g~ = (1 - alpha) x + lambda/sqrt(m) sum_j cos(.) v_j + N(0, sigma^2 I)``: subtract
    the known second moments of the cosine (``lambda^2 / (2m) V^T V``) and of the noise,
    centre exactly (the mean's own noise added back), project onto the PSD cone,
    add the ridge, solve, cap the norm.
    """
    K, d = G.shape
    scale = 1.0 / (1.0 - ALPHA)
    known = LAM**2 / (2 * V.shape[0]) * (V.T @ V) + sigma**2 * np.eye(d)
    S = (G.T @ G / K - known) * scale**2
    b = (G.T @ y) * (scale / K)
    xm = (G.T @ np.ones(K) / K if blas_mean else G.mean(axis=0)) * scale
    S += known * (scale**2 / K) - np.outer(xm, xm)
    b -= y.mean() * xm
    w, Q = np.linalg.eigh(S)
    beta = np.linalg.solve((Q * np.maximum(w, 0.0)) @ Q.T + ridge * np.eye(d), b)
    norm = math.sqrt(float(beta @ beta))
    return beta if norm <= cap else beta * (cap / norm)


def straightforward_numpy(X: np.ndarray, y: np.ndarray, seed: int, ridge: float,
                          cap: float) -> np.ndarray:
    """The transform and the estimator written straightforwardly (temporaries, default threads)."""
    rng = np.random.default_rng(seed)
    K, d = X.shape
    sens = 2 * RADIUS * (1 - ALPHA) + 2 * LAM * min(1.0, RADIUS * OMEGA)
    sigma = sens / math.sqrt(2 * RHO)
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    Xc = X * np.minimum(1.0, RADIUS / np.maximum(norms, 1e-300))
    v = rng.normal(size=d)
    v /= np.linalg.norm(v)
    phi = rng.uniform(0, 2 * np.pi, size=K)
    G = (1 - ALPHA) * Xc + LAM * np.cos(OMEGA * (Xc @ v) + phi)[:, None] * v[None, :]
    G = G + rng.normal(0.0, sigma, size=G.shape)
    S = (G.T @ G / K - LAM**2 / 2 * np.outer(v, v) - sigma**2 * np.eye(d)) / (1 - ALPHA) ** 2
    b = G.T @ y / K / (1 - ALPHA)
    xm = G.mean(axis=0) / (1 - ALPHA)
    S = S - np.outer(xm, xm) + (LAM**2 / 2 * np.outer(v, v) + sigma**2 * np.eye(d)) / (
        K * (1 - ALPHA) ** 2)
    b = b - y.mean() * xm
    w, Q = np.linalg.eigh(S)
    beta = np.linalg.solve((Q * np.maximum(w, 0)) @ Q.T + ridge * np.eye(d), b)
    n = np.linalg.norm(beta)
    return beta if n <= cap else beta * cap / n


def per_client_loop(X: np.ndarray, seed: int) -> np.ndarray:
    """The transform, one client at a time (the slow way)."""
    rng = np.random.default_rng(seed)
    K, d = X.shape
    sens = 2 * RADIUS * (1 - ALPHA) + 2 * LAM * min(1.0, RADIUS * OMEGA)
    sigma = sens / math.sqrt(2 * RHO)
    v = rng.normal(size=d)
    v /= np.linalg.norm(v)
    out = np.empty_like(X)
    for i in range(K):
        x = X[i]
        n = math.sqrt(float(x @ x))
        if n > RADIUS:
            x = x * (RADIUS / n)
        g = (1 - ALPHA) * x + LAM * math.cos(OMEGA * float(x @ v) + rng.uniform(0, 2 * np.pi)) * v
        out[i] = g + rng.normal(0.0, sigma, size=d)
    return out


def close(a: Any, b: Any) -> bool:
    """Coefficients equal to :data:`TOLERANCE`."""
    return bool(np.allclose(a, b, rtol=0.0, atol=TOLERANCE))


def fit_contenders(rep: ClientReports, ridge: float, cap: float) -> dict[str, Any]:
    """Ours (what users call) and the tidy numpy baselines, given our ridge and cap."""
    G, y, V = rep.features, rep.labels, rep.directions

    def tidy(blas_mean: bool) -> Any:
        def run() -> np.ndarray:
            with single_blas():
                return tidy_numpy(G, y, V, sigma=rep.sigma, ridge=ridge, cap=cap,
                                  blas_mean=blas_mean)
        return run

    return {"ours": lambda: fit_one_shot(rep).coef,
            "ours, given ridge": lambda: fit_one_shot(rep, ridge=ridge, norm_cap=cap).coef,
            "numpy tidy": tidy(False), "numpy tidy, BLAS mean": tidy(True)}


def run_fit(rep: ClientReports, repeats: int) -> dict[str, dict[str, Timing]]:
    """Time the fit (steady state and cold); return the results per ratio line."""
    fit = fit_one_shot(rep)
    contenders = fit_contenders(rep, fit.ridge, fit.norm_cap)
    steady = compare(contenders, repeats=repeats, check=close)
    baselines = {k: v for k, v in contenders.items() if k.startswith("numpy")}
    cold = compare({"ours": (_standard_draws.cache_clear, lambda _: fit_one_shot(rep).coef),
                    **baselines}, repeats=repeats, warmup=0, check=close, memory=False)
    return {"ratio": {k: v for k, v in steady.items() if k != "ours, given ridge"},
            "ratio_given_ridge": {"ours": steady["ours, given ridge"],
                                  **{k: steady[k] for k in baselines}},
            "ratio_cold": cold}


def extras(rep: ClientReports, repeats: int) -> dict[str, Timing]:
    """Time the ridge choice and the (deferred) sandwich covariance pass, each alone."""
    mom = centered_moments(rep)
    reg = mom.reg
    mod = rep.modulation
    fit = fit_one_shot(rep)
    bread = project_psd(mom.S) + fit.ridge * np.eye(D)

    def ridge_choice() -> Any:
        return regularization_from_moments(
            mom.S, mom.b, n_clients=rep.n_clients, sigma=rep.sigma, alpha=mod.alpha,
            lam=mod.lam, radius=mod.radius, label_second_moment=mom.label_second_moment)

    assert ridge_choice() == reg
    return compare({"ridge choice": ridge_choice,
                    "covariance (deferred)": lambda: sandwich_covariance(
                        rep, fit.coef, bread, x_mean=mom.x_mean)},
                   repeats=repeats, check=None, memory=False)


def scaling(sizes: list[int], repeats: int) -> None:
    """Print the fit's table over ``sizes`` clients: medians, CPU and peak memory."""
    rows = []
    for K in sizes:
        _, _, rep = make_reports(K)
        res = run_fit(rep, repeats if K < 10**7 else 3)
        steady = res["ratio"]
        base = fastest(steady, exclude=("ours",))
        rows.append({"K": K, "ours s": steady["ours"].median,
                     "ours CPU s": steady["ours"].cpu_median, "baseline": base,
                     "baseline s": steady[base].median, "baseline CPU s": steady[base].cpu_median,
                     "ratio": steady[base].median / steady["ours"].median,
                     "ours MB": steady["ours"].peak_mb, "baseline MB": steady[base].peak_mb})
        print(f"  K = {K:,}: done")
        del rep
    print(scaling_table(rows, list(rows[0])))


def main(argv: list[str] | None = None) -> float:
    """Time the contenders; print the figures and the ratio lines; return ``ratio``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--loop-clients", type=int, default=20_000)
    parser.add_argument("--no-release", action="store_true")
    parser.add_argument("--scaling", action="store_true")
    parser.add_argument("--sizes", type=int, nargs="+",
                        default=[10_000, 100_000, 1_000_000, 10_000_000])
    args = parser.parse_args(argv)
    print(f"one-shot fit, d={D}, rho={RHO}; both sides on one BLAS thread (single_blas, "
          f"threadpoolctl); {machine_line()}")
    if args.scaling:
        scaling(args.sizes, args.repeats)
        return float("nan")

    K = args.clients
    X, y, rep = make_reports(K)
    fit = fit_one_shot(rep)
    print(f"K={K:,} clients; reports built once, untimed; ridge {fit.ridge:.4g}, norm cap "
          f"{fit.norm_cap:.4g}; coefficients asserted equal to {TOLERANCE:g}")
    res = run_fit(rep, args.repeats)
    print_results({**res["ratio"], "ours, given ridge": res["ratio_given_ridge"]["ours"]},
                  "fit from the same reports (median [min, max] wall, CPU, peak):", width=24)
    print_results(res["ratio_cold"], "cold (ridge table rebuilt in every run of ours, "
                  "no warm-up):", width=24)
    print_results(extras(rep, args.repeats), "inside or after fit_one_shot, timed alone:",
                  width=24)

    def ours_end_to_end() -> Any:
        mod = Modulation(alpha=ALPHA, lam=LAM, omega=OMEGA, radius=RADIUS)
        reports = transform_clients(X, y, modulation=mod, rho=RHO, target=Simulation(rng=1))
        return fit_one_shot(reports, ridge=fit.ridge, norm_cap=fit.norm_cap).coef

    end = compare({"ours": ours_end_to_end,
                   "numpy straightforward": lambda: straightforward_numpy(
                       X, y, 1, fit.ridge, fit.norm_cap)},
                  repeats=max(3, args.repeats // 2), unchecked=("numpy straightforward",),
                  memory=False)
    print_results(end, "transform + fit, simulation (given ridge and cap):", width=24)
    nl = min(args.loop_clients, K)
    t0 = time.perf_counter()
    per_client_loop(X[:nl], 1)
    loop_s = (time.perf_counter() - t0) * K / nl
    print(f"per-client Python loop (transform only, {nl:,} clients scaled to K): {loop_s:.1f} s")
    if not args.no_release:
        t0 = time.perf_counter()
        transform_clients(X, y, modulation=Modulation(alpha=ALPHA, lam=LAM, omega=OMEGA,
                                                      radius=RADIUS),
                          rho=RHO, target=Unaccounted("benchmark"))
        print(f"release path of the transform (lattice discrete Gaussian, OS entropy), "
              f"{K:,} x {D} values: {time.perf_counter() - t0:.1f} s (once)")
    print(ratio_line(end, "numpy straightforward", label="ratio_end_to_end"))
    for label, results in (("ratio_given_ridge", res["ratio_given_ridge"]),
                           ("ratio_cold", res["ratio_cold"])):
        print(ratio_line(results, fastest(results), label=label))
    steady = res["ratio"]
    base = fastest(steady)
    for weaker in (k for k in steady if k not in ("ours", base)):
        print(ratio_line(steady, weaker, label="ratio_weaker"))
    print(ratio_line(steady, base))
    return steady[base].median / steady["ours"].median


if __name__ == "__main__":
    main()
