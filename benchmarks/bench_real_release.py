"""Benchmark: floating-point-safe real-valued Laplace release vs numpy's laplace and OpenDP.

The release a pipeline makes: ``LaplaceMechanism(epsilon=0.4, sensitivity=19.0)
.release(values)`` (clip width 19, epsilon 0.4: scale 47.5) on ``--sizes``
values (default 26,000: a regional report, and 1,000,000). spatialdp rounds to
a fixed-point lattice (step ``mech.lattice_step(n)``) and adds exact discrete
Laplace noise from OS entropy (``spatialdp.privacy.exact``: about 2**40 lattice
units of noise, drawn by the split sampler from one 64-bit word per value; the
words are ChaCha20 keystream under fresh ``os.urandom`` keys, see
``spatialdp.privacy.exact.random_bytes``).

Timing follows the convention of ``benchmarks/_common.py`` (median of
``--repeats`` interleaved runs with min and max, wall and CPU; peak memory in
one separate run).

- ``ratio:`` against numpy ``values + rng.laplace(0, scale, n)`` (seeded PCG64,
  floating point): the strongest baseline, and an UNSAFE one (its floats leak,
  Mironov 2012; its seed is a secret that reproduces every release).
- ``ratio_opendp:`` OpenDP ``make_laplace`` on a float vector domain (L1
  distance): the floating-point-safe release a competent user would call.
  It is slow (about 40 s for 10^6 values), so it runs at the first (smallest)
  size only, at most 2 runs, and its line says at which size.
- ``ratio_cold:`` the first release in a fresh Python process, against numpy's
  first laplace call in one: ours imports spatialdp's privacy modules and builds
  the sampler's table for the scale inside the timed run.
- ``ratio_cold_tables:`` in process, the sampler's tables for the lattice and
  the lattice exponent and units (cached per public parameters) cleared before
  each run of ours.

Outputs cannot be equal (the noise is random). Before timing the benchmark
asserts what must agree: every contender returns the input's shape, and its
noise ``out - values`` passes a Kolmogorov-Smirnov test against Laplace(0,
scale) at p > 1e-6 (ours is in fact discrete Laplace on a lattice of step
about 1e-12: the KS test cannot tell). Run::

    python benchmarks/bench_real_release.py [--sizes 26000 1000000] [--repeats R]
    python benchmarks/bench_real_release.py --scaling   # 10^4 .. 10^7 values, steady and cold

The ``ratio``, ``ratio_cold*`` lines are printed for the largest size.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import (
    Timing,
    compare,
    compare_fresh,
    fresh_process,
    machine_line,
    print_results,
    ratio_line,
    scaling_table,
)
from scipy import stats

EPSILON, SENSITIVITY = 0.4, 19.0
P_MIN = 1e-6


def laplace_check(values: np.ndarray, scale: float) -> Callable[[Any, Any], bool]:
    """Return a check: both answers have the input's shape and Laplace(scale) noise."""
    def noise_ok(out: Any) -> bool:
        out = np.asarray(out, dtype=np.float64)
        if out.shape != values.shape:
            return False
        sample = (out - values)[:200_000]
        return bool(stats.kstest(sample, stats.laplace(scale=scale).cdf).pvalue > P_MIN)

    return lambda a, b: noise_ok(a) and noise_ok(b)


def steady(values: np.ndarray, repeats: int) -> dict[str, Timing]:
    from spatialdp.privacy.noise import LaplaceMechanism

    mech = LaplaceMechanism(EPSILON, SENSITIVITY)
    rng = np.random.default_rng(0)
    return compare({"ours": lambda: mech.release(values),
                    "numpy laplace": lambda: values + rng.laplace(0.0, mech.scale, values.size)},
                   repeats=repeats, check=laplace_check(values, mech.scale))


def cold_tables(values: np.ndarray, repeats: int) -> dict[str, Timing]:
    from spatialdp.privacy import exact
    from spatialdp.privacy.noise import LaplaceMechanism

    mech = LaplaceMechanism(EPSILON, SENSITIVITY)
    rng = np.random.default_rng(1)

    def clear() -> None:
        exact._clear_caches()  # tables, lattice exponents and units of every scale

    def numpy_laplace(_: None) -> np.ndarray:
        return values + rng.laplace(0.0, mech.scale, values.size)

    return compare({"ours": (clear, lambda _: mech.release(values)),
                    "numpy laplace": (lambda: None, numpy_laplace)},
                   repeats=repeats, warmup=0, check=laplace_check(values, mech.scale),
                   memory=False)


def cold_process(n: int, repeats: int) -> dict[str, Timing]:
    data = f"values = numpy.random.default_rng(0).normal(5_000.0, 1_000.0, {n})\n"
    ours = fresh_process(data + "from spatialdp.privacy.noise import LaplaceMechanism\n",
                         f"LaplaceMechanism({EPSILON}, {SENSITIVITY}).release(values)")
    scale = f"{SENSITIVITY} / {EPSILON} * (1 + 2**-24)"
    numpy_first = fresh_process(data, f"values + numpy.random.default_rng(1).laplace(0.0, "
                                      f"{scale}, values.size)")
    return compare_fresh({"ours": ours, "numpy laplace": numpy_first}, repeats=repeats)


def opendp(values: np.ndarray, repeats: int) -> dict[str, Timing]:
    import opendp.prelude as dp

    from spatialdp.privacy.noise import LaplaceMechanism

    dp.enable_features("contrib")
    mech = LaplaceMechanism(EPSILON, SENSITIVITY)
    meas = dp.m.make_laplace(dp.vector_domain(dp.atom_domain(T=float, nan=False)),
                             dp.l1_distance(T=float), scale=mech.scale)
    as_list = values.tolist()
    return compare({"ours": lambda: mech.release(values), "opendp": lambda: meas(as_list)},
                   repeats=repeats, check=laplace_check(values, mech.scale), memory=False)


def main(argv: list[str] | None = None) -> float:
    """Time the releases; print the results and the ratio lines; return ``ratio``."""
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[26_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--scaling", action="store_true",
                        help="a table over 10^4 .. 10^7 values instead")
    parser.add_argument("--no-opendp", action="store_true", help="skip the OpenDP baseline")
    args = parser.parse_args(argv)

    from spatialdp.privacy.noise import LaplaceMechanism

    mech = LaplaceMechanism(EPSILON, SENSITIVITY)
    print(f"epsilon={EPSILON} sensitivity={SENSITIVITY} scale={mech.scale!r}")
    print(machine_line())
    rng = np.random.default_rng(0)
    if args.scaling:
        rows = []
        for n in (10_000, 100_000, 1_000_000, 10_000_000):
            values = rng.normal(5_000.0, 1_000.0, n)
            res = steady(values, args.repeats if n < 10**7 else 3)
            print_results(res, f"\n{n:,} values (lattice step {mech.lattice_step(n):.3g}):")
            fresh = cold_process(n, 3)
            print_results(fresh, "first release in a fresh process (imports and tables inside):")
            rows.append({"values": n, "ours s": res["ours"].median,
                         "numpy laplace s": res["numpy laplace"].median,
                         "ours CPU s": res["ours"].cpu_median,
                         "numpy CPU s": res["numpy laplace"].cpu_median,
                         "ratio": res["numpy laplace"].median / res["ours"].median,
                         "ratio CPU": res["numpy laplace"].cpu_median / res["ours"].cpu_median,
                         "ratio_cold": fresh["numpy laplace"].median / fresh["ours"].median,
                         "ratio_cold CPU": (fresh["numpy laplace"].cpu_median
                                            / fresh["ours"].cpu_median),
                         "ours MB": res["ours"].peak_mb,
                         "numpy MB": res["numpy laplace"].peak_mb})
        print(scaling_table(rows, list(rows[0])))
        return rows[-1]["ratio"]

    lines, opendp_line = [], ""
    for n in args.sizes:
        values = rng.normal(5_000.0, 1_000.0, n)  # noisy sums of clipped values
        res = steady(values, args.repeats)
        print_results(res, f"\n{n:,} values (lattice step {mech.lattice_step(n):.3g}), "
                           "steady state:")
        cold = cold_tables(values, args.repeats)
        print_results(cold, "first release at this scale (tables built inside ours):")
        lines = [ratio_line(res, "numpy laplace"),
                 ratio_line(cold, "numpy laplace", label="ratio_cold_tables")]
        fresh = cold_process(n, max(3, args.repeats // 3))
        print_results(fresh, "first release in a fresh process (imports and tables inside):")
        lines.append(ratio_line(fresh, "numpy laplace", label="ratio_cold"))
        if not args.no_opendp and n == args.sizes[0]:
            odp = opendp(values, min(2, args.repeats))
            print_results(odp, "OpenDP make_laplace (float vector, L1):")
            opendp_line = (ratio_line(odp, "opendp", label="ratio_opendp")
                           + f" at {n:,} values")
    print(f"\nat {args.sizes[-1]:,} values:")
    print("\n".join([*lines, opendp_line] if opendp_line else lines))
    return res["numpy laplace"].median / res["ours"].median


if __name__ == "__main__":
    main()
