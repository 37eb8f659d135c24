"""Benchmark: exact discrete Laplace release, OpenDP's vector sampler vs spatialdp's.

Both add integer (two-sided geometric) noise of scale 1 to the same count
vector. Run::

    python benchmarks/bench_discrete_laplace.py [--cells N] [--scale B]

The last line is ``ratio: X`` with X = OpenDP time / spatialdp time.
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def main(argv: list[str] | None = None) -> float:
    """Time both samplers once on the same vector; print and return the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=1_000_000, help="vector length")
    parser.add_argument("--scale", type=float, default=1.0, help="noise scale b")
    args = parser.parse_args(argv)

    import opendp.prelude as dp

    from spatialdp.privacy.noise import release_discrete_laplace

    dp.enable_features("contrib")
    counts = np.random.default_rng(0).poisson(20, size=args.cells).astype(np.int64)
    as_list = counts.tolist()

    meas = dp.m.make_laplace(
        dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int), scale=args.scale
    )
    t0 = time.perf_counter()
    meas(as_list)
    t_opendp = time.perf_counter() - t0

    release_discrete_laplace(counts[:1000], args.scale)  # warm-up (imports, caches)
    t0 = time.perf_counter()
    release_discrete_laplace(counts, args.scale)
    t_ours = time.perf_counter() - t0

    print(f"cells: {args.cells}  scale: {args.scale:g}")
    print(f"opendp make_laplace (vector, int): {t_opendp:.3f} s")
    print(f"spatialdp release_discrete_laplace: {t_ours:.3f} s")
    ratio = t_opendp / t_ours
    print(f"ratio: {ratio:.1f}")
    return ratio


if __name__ == "__main__":
    main()
