"""Benchmark: floating-point-safe real-valued Laplace release, spatialdp vs OpenDP and numpy.

The release a pipeline makes: ``LaplaceMechanism(epsilon=0.4, sensitivity=19.0)
.release(values)`` (clip width 19, epsilon 0.4: scale 47.5) on 26,000 values (a
regional report) and 1,000,000 values. spatialdp rounds to a fixed-point lattice
and adds exact discrete Laplace noise from OS entropy. Baselines:

* OpenDP ``make_laplace`` on a float vector domain (L1 distance): the
  floating-point-safe reference a competent user would call;
* numpy ``rng.laplace``: the (unsafe: floating-point leaks, seeded) speed limit.

Every time is the best of ``--repeats`` runs (OpenDP at most 2 runs: it is slow),
except ``cold``: the first release at that size, which builds the sampler's tables
for the lattice (cached afterwards).
Run::

    python benchmarks/bench_real_release.py [--sizes 26000 1000000] [--repeats R]

The last line is ``ratio: X`` with X = OpenDP time / spatialdp time at the
largest size.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from _common import best_of, peak_memory_mb

EPSILON, SENSITIVITY = 0.4, 19.0


def main(argv: list[str] | None = None) -> float:
    """Time the three releases at each size; print them and return the OpenDP ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[26_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=5, help="runs per timing (best kept)")
    args = parser.parse_args(argv)

    import opendp.prelude as dp

    from spatialdp.privacy import exact
    from spatialdp.privacy.noise import LaplaceMechanism

    dp.enable_features("contrib")
    mech = LaplaceMechanism(EPSILON, SENSITIVITY)
    scale = mech.scale
    meas = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=float, nan=False)),
                             dp.l1_distance(T=float), scale=scale)
    rng = np.random.default_rng(0)
    print(f"epsilon={EPSILON} sensitivity={SENSITIVITY} scale={scale!r}; "
          f"best of {args.repeats} runs")
    print(f"{'values':>9} {'numpy s':>9} {'spatialdp s':>12} {'cold s':>8} {'opendp s':>10} "
          f"{'opendp/ours':>12} {'ours/numpy':>11} {'ours MiB':>9} {'step':>10}")
    ratio = float("nan")
    for n in args.sizes:
        values = rng.normal(5_000.0, 1_000.0, n)  # noisy sums of clipped values
        exact._plan.cache_clear()  # cold: the first release at this size builds the tables
        t0 = time.perf_counter()
        mech.release(values)
        t_cold = time.perf_counter() - t0
        t_np = best_of(lambda v=values: v + rng.laplace(0.0, scale, v.size), args.repeats)
        t_ours = best_of(lambda v=values: mech.release(v), args.repeats)
        mem = peak_memory_mb(lambda v=values: mech.release(v))
        as_list = values.tolist()
        t_odp = best_of(lambda a=as_list: meas(a), min(2, args.repeats))
        ratio = t_odp / t_ours
        print(f"{n:>9} {t_np:>9.4f} {t_ours:>12.4f} {t_cold:>8.4f} {t_odp:>10.3f} {ratio:>12.1f} "
              f"{t_ours / t_np:>11.2f} {mem:>9.1f} {mech.lattice_step(n):>10.3g}")
    print(f"ratio: {ratio:.1f}")
    return ratio


if __name__ == "__main__":
    main()
