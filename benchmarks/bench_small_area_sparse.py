"""The spatial small-area models on the 30,772-cell H3 partition (sparse SAR and CAR), timed.

The simulated round of ``bench_small_area.py`` (its truths, cohorts, floor,
Laplace noise and public covariates; epsilon 0.5, one round): the spatial
Fay-Herriot model with a SAR effect (``model="sfh"``, beyond ``DENSE_LIMIT``
regions it runs on sparse matrices) and with a CAR effect (``model="car"``),
every suppressed cell modelled. Prints the wall and CPU time of each fit
(one run each: a fit takes many seconds; on a shared machine the CPU time is
the better guide), the variance parameters, and the MSE of the
EBLUPs against the truth by size class, next to the direct estimates' and
Fay-Herriot's.

``--dense-check N`` instead compares the sparse SAR with the dense one on an
N-area lattice (about 60% published): log-likelihoods and EBLUPs at the
sparse fit's parameters, and the MSEs (the sparse ``g1 + g2`` against the
dense ``g1 + g2 + 2 g3 - g4``).

Usage: ``python benchmarks/bench_small_area_sparse.py [--dense-check 1521]``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from bench_small_area import (
    CLASSES,
    CLIENT_SD,
    public_covariates,
    published_frame,
    setting,
    size_class,
    truth_generator,
)

from spatialdp._blas import single_blas
from spatialdp.smooth import SmallAreaModelWarning, small_area_estimates
from spatialdp.smooth.sparse_spatial import fit_sparse, sparse_predict
from spatialdp.smooth.spatial import SarModel, sar_predict


def h3_run() -> None:
    """Time the SAR, CAR (and Fay-Herriot) fits on one round over the H3 cells."""
    part, cohort, floor, _ = setting("h3")
    covariates = public_covariates(part)
    rng = np.random.default_rng(0)
    truth = truth_generator(part, covariates)(rng)
    frame = published_frame(part, truth, cohort, floor, 0.5, rng)
    classes = size_class(cohort, floor)
    print(f"{part.n_regions:,} cells, {int((cohort >= floor).sum()):,} published (floor {floor})")
    rows = {"direct": (frame.value.to_numpy() - truth) ** 2}
    for model in ("car", "sfh", "fh"):
        start, cpu = time.perf_counter(), time.process_time()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SmallAreaModelWarning)
            smooth = small_area_estimates(frame, covariates=covariates, model=model,
                                          weights=part, include_suppressed=True,
                                          client_variance=CLIENT_SD**2)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        rows[model] = (smooth.frame.eblup.to_numpy() - truth) ** 2
        print(f"{model}: fit {seconds:.1f} s wall, {cpu:.1f} s CPU; s2u {smooth.sigma2_u:.4g} "
              f"(se {smooth.sigma2_u_se:.2g}), rho {smooth.rho:.3f} (se {smooth.rho_se:.2g}); "
              f"mean est. MSE / mean sq. error {smooth.frame.mse.mean() / rows[model].mean():.3f}")
    table = pd.DataFrame(rows).groupby(classes).mean().reindex(list(CLASSES))
    print("\nMSE against the truth by size class:")
    print(table.to_string(float_format=lambda v: f"{v:.4f}"))


def dense_check(n: int) -> None:
    """Compare the sparse and dense SAR models on an n-area lattice."""
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from tests.test_smooth_sparse import simulated

    side = math.isqrt(n)
    model, _ = simulated(side, 0)
    start = time.perf_counter()
    fit = fit_sparse(model)
    print(f"{side * side} areas, {int(model.observed.sum())} published: sparse fit "
          f"{time.perf_counter() - start:.1f} s, s2u {fit.s2u:.4g}, rho {fit.rho:.4f}")
    dense = SarModel(model.y, model.X_all, model.d, model.W.toarray(), model.observed)
    with single_blas():
        gap = abs(dense.loglik(fit.s2u, fit.rho, "REML") - fit.loglik)
        eblup, mse, _, _ = sar_predict(dense, fit)
    ours = sparse_predict(model, fit)
    print(f"|loglik dense - sparse| {gap:.2e}; max |EBLUP dense - sparse| "
          f"{np.abs(eblup - ours[0]).max():.2e}")
    ratio = mse / ours[1]
    print(f"MSE dense / sparse: min {ratio.min():.4f}, median {np.median(ratio):.4f}, "
          f"max {ratio.max():.4f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dense-check", type=int, default=0,
                        help="compare with the dense model on a lattice of about N areas")
    args = parser.parse_args()
    if args.dense_check:
        dense_check(args.dense_check)
    else:
        h3_run()


if __name__ == "__main__":
    main()
