"""Benchmark: exact discrete Laplace release vs numpy's inexact samplers and OpenDP.

Adds integer (two-sided geometric) noise to a count vector (default 1M cells)
with ``spatialdp.privacy.release.release_discrete_laplace`` (exact, OS entropy)
at realistic scales: sensitivity / epsilon for real epsilons and clip widths
(1/0.5 = 2, 2.5, 1/0.1 = 10, 19/0.4 = 47.5, 250, 1e4), and two larger ones for
information (1e7, 1e12). Baselines:

* numpy (seeded PCG64, floating point, NOT exact: a release could not use it,
  but it is the strongest baseline): ``counts + (rng.geometric(p, n) -
  rng.geometric(p, n))`` with ``p = 1 - exp(-1/b)``, and ``counts +
  (floor(rng.exponential(b, n)) - floor(rng.exponential(b, n)))`` (the same
  distribution: ``floor`` of an exponential is geometric). Per scale, ``ratio``
  is against the faster of the two;
* OpenDP's ``make_laplace`` on a vector of 64-bit integers (exact, scalar
  loop in Rust behind a Python list), at scale 47.5 only: ``ratio_opendp``.

Timing follows the convention of ``benchmarks/_common.py`` (median of
``--repeats`` interleaved runs with min and max, wall and CPU; one warm-up call
each; peak memory in a separate run). The noise is random, so instead of equal
answers the benchmark asserts before timing that every contender returns
int64 counts of the input's shape whose noise ``out - counts`` has the same
distribution as ours: a chi-square test of the binned noise against the exact
discrete Laplace pmf at p > 1e-6, for every contender.

``ratio_cold:`` ours with the sampler's tables for the scale (cached per
scale) cleared before each run, against numpy's (which has none), at scale 47.5.
Run::

    python benchmarks/bench_discrete_laplace.py [--cells N] [--repeats R] [--scaling]

The last lines are ``ratio`` (numpy / ours at scale 47.5, clip 19 and epsilon
0.4), ``ratio_cold`` and ``ratio_opendp``, and the worst ``ratio`` over the
realistic scales is printed as a verdict line.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import (
    Timing,
    compare,
    fastest,
    machine_line,
    print_results,
    ratio_line,
    scaling_table,
)
from scipy import stats

REALISTIC = (2.0, 2.5, 10.0, 47.5, 250.0, 1e4)
EXTRA = (1e7, 1e12)
HEADLINE = 47.5
P_MIN = 1e-6


def discrete_laplace_p(noise: np.ndarray, scale: float, bins: int = 50) -> float:
    """Chi-square p-value of integer noise against the discrete Laplace of ``scale``."""
    a = np.exp(-1.0 / scale)
    q = np.linspace(0, 1, bins + 1)[1:-1]
    edges = np.unique(np.floor(np.where(q < 0.5, scale * np.log(2 * q),
                                        -scale * np.log(2 * (1 - q)))))
    cdf = np.where(edges >= 0, 1 - np.exp(-(edges + 1) / scale) / (1 + a),
                   np.exp(edges / scale) / (1 + a))  # P(Z <= edge)
    probs = np.diff(np.concatenate([[0.0], cdf, [1.0]]))
    observed = np.bincount(np.searchsorted(edges, noise, side="left"), minlength=probs.size)
    expected = probs * noise.size
    keep = expected >= 5
    chi2 = float(((observed - expected)[keep] ** 2 / expected[keep]).sum())
    return float(stats.chi2.sf(chi2, max(int(keep.sum()) - 1, 1)))


def same_noise(counts: np.ndarray, scale: float) -> Callable[[Any, Any], bool]:
    """Return a check: int64 answers of the input's shape with discrete Laplace noise."""
    def ok(out: Any) -> bool:
        out = np.asarray(out)
        return (out.shape == counts.shape and out.dtype == np.int64
                and discrete_laplace_p((out - counts)[:200_000], scale) > P_MIN)

    return lambda a, b: ok(a) and ok(b)


def contenders(counts: np.ndarray, scale: float, rng: np.random.Generator
               ) -> dict[str, Callable[[], np.ndarray]]:
    from spatialdp.privacy.release import release_discrete_laplace

    n = counts.size
    p = -np.expm1(-1.0 / scale)

    def geometric() -> np.ndarray:
        return counts + (rng.geometric(p, n) - rng.geometric(p, n))

    def exponential() -> np.ndarray:
        return counts + (np.floor(rng.exponential(scale, n))
                         - np.floor(rng.exponential(scale, n))).astype(np.int64)

    return {"ours": lambda: release_discrete_laplace(counts, scale),
            "numpy geometric": geometric, "numpy floor-exponential": exponential}


def time_scale(counts: np.ndarray, scale: float, repeats: int,
               rng: np.random.Generator) -> dict[str, Timing]:
    return compare(contenders(counts, scale, rng), repeats=repeats,
                   check=same_noise(counts, scale))


def time_cold(counts: np.ndarray, scale: float, repeats: int,
              rng: np.random.Generator) -> dict[str, Timing]:
    from spatialdp.privacy import exact

    def clear() -> None:
        exact._plan.cache_clear()
        exact._split.cache_clear()

    runs = contenders(counts, scale, rng)
    return compare({"ours": (clear, lambda _: runs["ours"]()),
                    "numpy geometric": (lambda: None, lambda _: runs["numpy geometric"]())},
                   repeats=repeats, warmup=0, check=same_noise(counts, scale), memory=False)


def time_opendp(counts: np.ndarray, scale: float, repeats: int) -> dict[str, Timing]:
    import opendp.prelude as dp

    from spatialdp.privacy.release import release_discrete_laplace

    dp.enable_features("contrib")
    meas = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int),
                             scale=scale)
    as_list = counts.tolist()
    return compare({"ours": lambda: release_discrete_laplace(counts, scale),
                    "opendp": lambda: np.asarray(meas(as_list), dtype=np.int64)},
                   repeats=repeats, check=same_noise(counts, scale), memory=False)


def main(argv: list[str] | None = None) -> float:
    """Time the samplers; print the results and return the headline ``ratio``."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", type=int, default=1_000_000, help="vector length")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--scaling", action="store_true",
                        help="also a table over 10^4 .. 10^7 cells at scales 2.5 and 1e4")
    parser.add_argument("--no-opendp", action="store_true", help="skip the OpenDP baseline")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    counts = rng.poisson(20, size=args.cells).astype(np.int64)
    print(f"cells: {args.cells:,}; {machine_line()}")
    rows, results = [], {}
    for scale in REALISTIC + EXTRA:
        res = time_scale(counts, scale, args.repeats, rng)
        results[scale] = res
        tag = "" if scale in REALISTIC else "  (not a realistic scale)"
        print_results(res, f"scale {scale:g}{tag}:", width=24)
        base = fastest(res)
        rows.append({"scale": f"{scale:g}", "ours s": res["ours"].median,
                     "fastest numpy": base, "numpy s": res[base].median,
                     "ratio": res[base].median / res["ours"].median,
                     "ratio CPU": res[base].cpu_median / res["ours"].cpu_median,
                     "ours MB": res["ours"].peak_mb, "numpy MB": res[base].peak_mb})
    print(scaling_table(rows, list(rows[0])))
    worst = min(r["ratio"] for r, s in zip(rows, REALISTIC + EXTRA, strict=True)
                if s in REALISTIC)
    print(f"worst ratio over the realistic scales: {worst:.2f} (numpy / ours, wall)")

    if args.scaling:
        table = []
        for n in (10_000, 100_000, 1_000_000, 10_000_000):
            c = rng.poisson(20, size=n).astype(np.int64)
            for scale in (2.5, 1e4):
                res = time_scale(c, scale, args.repeats if n < 10**7 else 3, rng)
                base = fastest(res)
                table.append({"cells": n, "scale": f"{scale:g}", "ours s": res["ours"].median,
                              "numpy s": res[base].median,
                              "ratio": res[base].median / res["ours"].median,
                              "ns/cell ours": res["ours"].median / n * 1e9,
                              "ours MB": res["ours"].peak_mb, "numpy MB": res[base].peak_mb})
        print(scaling_table(table, list(table[0])))

    head = results[HEADLINE]
    lines = [ratio_line(head, fastest(head))]
    cold = time_cold(counts, HEADLINE, args.repeats, rng)
    print_results(cold, f"scale {HEADLINE:g}, tables built inside ours:", width=24)
    lines.append(ratio_line(cold, "numpy geometric", label="ratio_cold"))
    if not args.no_opendp:
        odp = time_opendp(counts, HEADLINE, min(args.repeats, 2))
        print_results(odp, f"OpenDP make_laplace (int vector, exact) at scale {HEADLINE:g}:",
                      width=24)
        lines.append(ratio_line(odp, "opendp", label="ratio_opendp"))
    print(f"at scale {HEADLINE:g} (clip 19, epsilon 0.4), {args.cells:,} cells:")
    print("\n".join(lines))
    return head[fastest(head)].median / head["ours"].median


if __name__ == "__main__":
    main()
