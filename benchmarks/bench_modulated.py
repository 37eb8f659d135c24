"""Benchmark: one-shot modulated regression for K = 1,000,000 clients, d = 20, simulation included.

The workload of an experiment: every client clips, modulates (lambda = 1,
omega = 1, alpha = 0.1, one direction) and noises its sample (seeded
simulation at rho = 0.5), then the server debiases the moments, centres them,
projects onto the PSD cone, chooses the ridge and the norm cap and solves.

Contenders, in one run on the same data:

* **spatialdp**: ``transform_clients(..., target=Simulation(rng))`` then ``fit_one_shot``;
* **numpy** (the strong baseline): the same transform and estimator written
  straightforwardly with numpy, as a competent user would (``np.linalg.norm``,
  one ``X @ v``, ``rng.normal``, ``G.T @ G``, ``eigh``, ``solve``);
* **per-client loop** (extra line): the same transform one client at a time in
  Python, timed on 20,000 clients and scaled to K.

Also printed, not part of the ratio: the RELEASE path of the transform (exact
discrete Gaussian noise on a lattice from OS entropy) at the same size, once.

Run::

    python benchmarks/bench_modulated.py [--clients 1000000] [--repeats 3] [--no-release]

The last line is ``ratio: X`` = numpy time / spatialdp time.
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

from _common import best_times, ratio_line

D, RHO, ALPHA, LAM, OMEGA, RADIUS = 20, 0.5, 0.1, 1.0, 1.0, 3.0


def numpy_baseline(X: np.ndarray, y: np.ndarray, seed: int) -> np.ndarray:
    """The same transform and one-shot estimator in plain numpy."""
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
    ym = y.mean()
    S = S - np.outer(xm, xm) + sigma**2 / (K * (1 - ALPHA) ** 2) * np.eye(d)
    b = b - ym * xm
    w, Q = np.linalg.eigh(S)
    S = (Q * np.maximum(w, 0)) @ Q.T
    s = np.clip(np.trace(S) / d, RADIUS**2 / d * 1e-3, RADIUS**2 / d)
    y2 = np.mean((y - ym) ** 2)
    a = (1 - ALPHA) ** 2 * s + LAM**2 / (2 * d)
    v_S = (sigma**2 + a) ** 2 / (K * (1 - ALPHA) ** 4)
    v_b = y2 * (sigma**2 + a) / (K * (1 - ALPHA) ** 2)
    b2 = min(max(b @ b - d * v_b, 1e-12) / s**2, y2 / s)
    mu = d * (v_b + v_S * b2) / (s * b2)
    beta = np.linalg.solve(S + mu * np.eye(d), b)
    cap = 2 * math.sqrt(y2 / s)
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


def main(argv: list[str] | None = None) -> float:
    """Time the contenders; print the figures and the ratio line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--loop-clients", type=int, default=20_000)
    parser.add_argument("--no-release", action="store_true")
    args = parser.parse_args(argv)

    from spatialdp.privacy import Simulation, Unaccounted
    from spatialdp.regression import Modulation, fit_one_shot, transform_clients

    K = args.clients
    rng = np.random.default_rng(0)
    X = rng.normal(size=(K, D)) * 0.5
    y = X @ np.linspace(-1, 1, D) + 0.5 * rng.normal(size=K)
    mod = Modulation(alpha=ALPHA, lam=LAM, omega=OMEGA, radius=RADIUS)

    def ours() -> Any:
        rep = transform_clients(X, y, modulation=mod, rho=RHO, target=Simulation(rng=1))
        return fit_one_shot(rep).coef

    def baseline() -> Any:
        return numpy_baseline(X, y, 1)

    times = best_times({"spatialdp": ours, "numpy": baseline}, args.repeats)
    nl = min(args.loop_clients, K)
    t0 = time.perf_counter()
    per_client_loop(X[:nl], 1)
    loop_s = (time.perf_counter() - t0) * K / nl
    ref = np.linalg.lstsq(X - X.mean(0), y - y.mean(), rcond=None)[0]
    err_ours = float(np.linalg.norm(ours() - ref))
    err_np = float(np.linalg.norm(baseline() - ref))
    print(f"one-shot fit, K={K:,} clients, d={D}, rho={RHO}, simulation included; "
          f"best of {args.repeats}")
    print(f"spatialdp (transform_clients + fit_one_shot): {times['spatialdp']:.3f} s "
          f"(||beta - OLS|| = {err_ours:.3f})")
    print(f"numpy baseline (same transform and estimator): {times['numpy']:.3f} s "
          f"(||beta - OLS|| = {err_np:.3f})")
    print(f"per-client Python loop (transform only, {nl:,} clients scaled to K): {loop_s:.1f} s "
          f"(x{loop_s / times['spatialdp']:.0f} of spatialdp)")
    if not args.no_release:
        t0 = time.perf_counter()
        transform_clients(X, y, modulation=mod, rho=RHO, target=Unaccounted("benchmark"))
        print(f"release path (lattice discrete Gaussian, OS entropy), {K:,} x {D} values: "
              f"{time.perf_counter() - t0:.1f} s (once)")
    line = ratio_line(times["numpy"], times["spatialdp"])
    print(line)
    return times["numpy"] / times["spatialdp"]


if __name__ == "__main__":
    main()
