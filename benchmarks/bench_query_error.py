"""Query-error measurement: measure_query_error vs the expert's numpy and a sparse product.

A corpus of 10,000 irregular polygons (random ellipses, about 400 cells each)
over a grid of about 1,000,000 H3 resolution-8 cells, 200 simulated flat
releases at epsilon 1 (discrete Laplace, k = 1), negatives clamped to zero
(the seed's default, which makes the estimator biased on sparse cells).
Counts (the W1 grid): Poisson with log-normal intensity (median 80 devices a
cell; about a fifth of the cells are sparse enough for clamping to bite).
``--sparse-grid``: median 4 devices a cell, so clamping bites on most cells.

- ours: :func:`spatialdp.queries.measure_query_error` (validation, the exact
  shortcut below, and the summary table, all inside the timed call): each
  query's sum over cells where clamping cannot bite is ONE draw of the sum of
  ``m`` discrete Laplace cells (inverting its exact CDF, tabulated once per
  distinct ``m``; negative binomials beyond the table); only sparse cells are
  drawn cell by cell (a 16-bit word and a table lookup each, float32), summed
  by one sparse product per chunk of draws.
- numpy NB shortcut (the strongest baseline, ``ratio:``): what an expert writes
  with the same shortcut: per query and draw, the dense-cell sum as a
  difference of two negative binomials ``NB(m, 1 - a)`` (one vectorised call
  each); sparse cells drawn per cell as a difference of two geometrics, clamped,
  summed by one float32 sparse product per chunk of draws; the same clamp
  threshold (``clamp_skip_threshold``, a number).
- sparse product (the straightforward approach, ``ratio_sparse:``): per
  draw, noise every cell (a difference of two geometrics), clamp, one
  scipy.sparse incidence product.
- the seed's per-query Python loop: timed once on ``--loop-draws`` draws and
  scaled; printed for reference only.

The sides draw different random numbers, so their figures agree only within
Monte-Carlo error: before timing, the benchmark asserts that every contender's
mean absolute error and bias are within 5 standard errors (per-draw means) of
ours. Timing follows ``benchmarks/_common.py``: one warm-up call each (ours
builds its CDF tables then; ``ratio_cold:`` times the first call with the
tables cleared), median of ``--repeats`` interleaved runs, wall and CPU time.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import shapely
from _common import compare, machine_line, print_results, ratio_line
from scipy import sparse

from spatialdp.geo import CellIncidence, h3cells
from spatialdp.privacy import LaplaceMechanism, simulate_discrete_laplace
from spatialdp.queries import TruthGrid, grid_version, measure_query_error
from spatialdp.queries import sampling as qsampling
from spatialdp.queries.corpus import incidence_from_cell_lists
from spatialdp.queries.expectations import clamp_skip_threshold

EPSILON = 1.0
FLOOR = 25.0
AREA = shapely.box(-100.0, 35.0, -90.0, 42.3)  # about 1,000,000 resolution-8 cells


def build(n_queries: int, seed: int = 0, median: float = 80.0
          ) -> tuple[TruthGrid, CellIncidence]:
    rng = np.random.default_rng(seed)
    _, cells = h3cells.polygons_to_cell_lists([AREA], 8)
    cells = np.unique(cells)
    counts = rng.poisson(rng.lognormal(np.log(median), 1.0, cells.size)).astype(np.int64)
    version = grid_version(cells)
    truth = TruthGrid(counts=counts, cells=cells, resolution=8, partition_version=version,
                      partition_key=f"bench-r8@{version}", max_cells_per_device=1,
                      n_points=int(counts.sum()), n_unassigned=0, n_devices=int(counts.sum()),
                      n_clipped_pairs=0, n_clipped_devices=0)
    # random ellipses of about 400 cells (0.737 km^2 each): semi-axes ~0.1 x 0.07 degrees
    centre = np.column_stack([rng.uniform(-99.6, -90.4, n_queries),
                              rng.uniform(35.4, 41.9, n_queries)])
    circle = shapely.buffer(shapely.points(np.zeros((n_queries, 2))), 1.0, quad_segs=8)
    coords = shapely.get_coordinates(circle)
    per = coords.shape[0] // n_queries
    sx = np.repeat(rng.uniform(0.098, 0.152, n_queries), per)
    sy = np.repeat(rng.uniform(0.065, 0.098, n_queries), per)
    theta = np.repeat(rng.uniform(0, np.pi, n_queries), per)
    x, y = coords[:, 0] * sx, coords[:, 1] * sy
    rot = np.column_stack([x * np.cos(theta) - y * np.sin(theta),
                           x * np.sin(theta) + y * np.cos(theta)])
    polys = shapely.set_coordinates(circle, rot + np.repeat(centre, per, axis=0))
    offsets, qcells = h3cells.polygons_to_cell_lists(polys, 8)
    incidence = incidence_from_cell_lists(cells, version, offsets, qcells)
    return truth, incidence


def stats(err: np.ndarray, true: np.ndarray) -> dict[str, float]:
    """The figures of a (queries x draws) error matrix, with per-draw-mean standard errors."""
    above = true >= FLOOR
    rel = np.abs(err[above]) / true[above, None]
    draws = err.shape[1]
    return {"mean_abs": float(np.abs(err).mean()),
            "p95_abs": float(np.quantile(np.abs(err), 0.95, method="inverted_cdf")),
            "bias": float(err.mean()), "mean_rel": float(rel.mean()),
            "mean_abs_se": float(np.abs(err).mean(axis=0).std(ddof=1) / math.sqrt(draws)),
            "bias_se": float(err.mean(axis=0).std(ddof=1) / math.sqrt(draws))}


def agree(a: dict[str, float], b: dict[str, float]) -> bool:
    """Both figures' mean absolute error and bias within 5 standard errors of each other."""
    return all(abs(a[k] - b[k]) <= 5.0 * math.hypot(a[f"{k}_se"], b[f"{k}_se"])
               for k in ("mean_abs", "bias"))


def dlap(gen: np.random.Generator, p: float, size: Any) -> np.ndarray:
    """Discrete Laplace noise as numpy draws it: a difference of two geometrics."""
    return gen.geometric(p, size) - gen.geometric(p, size)


def loop_baseline(truth: TruthGrid, queries: list[np.ndarray], scale: float, draws: int,
                  seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    counts = truth.counts
    abs_errors, rel_errors, signed = [], [], []
    for _ in range(draws):
        noisy = np.maximum(simulate_discrete_laplace(counts, scale, rng=rng), 0)
        for idx in queries:
            true_answer = float(counts[idx].sum())
            err = float(noisy[idx].sum()) - true_answer
            abs_errors.append(abs(err))
            signed.append(err)
            if true_answer >= FLOOR:
                rel_errors.append(abs(err) / true_answer)
    return {"mean_abs": float(np.mean(abs_errors)),
            "p95_abs": float(np.quantile(abs_errors, 0.95, method="inverted_cdf")),
            "bias": float(np.mean(signed)), "mean_rel": float(np.mean(rel_errors))}


def sparse_baseline(truth: TruthGrid, matrix: sparse.csr_array, scale: float, draws: int,
                    seed: int) -> dict[str, float]:
    """Per draw: noise every cell, clamp, one sparse product."""
    gen = np.random.default_rng(seed)
    p = -math.expm1(-1.0 / scale)
    true = np.asarray(matrix @ truth.counts, dtype=np.float64)
    err = np.empty((true.size, draws))
    for d in range(draws):
        noisy = np.maximum(truth.counts + dlap(gen, p, truth.counts.size), 0)
        err[:, d] = matrix @ noisy - true
    return stats(err, true)


def numpy_nb_shortcut(truth: TruthGrid, matrix: sparse.csr_array, scale: float, draws: int,
                      seed: int) -> dict[str, float]:
    """The expert's numpy with the library's shortcut: NB pairs per query, sparse cells per cell."""
    gen = np.random.default_rng(seed)
    p = -math.expm1(-1.0 / scale)
    counts = truth.counts
    true = np.asarray(matrix @ counts, dtype=np.float64)
    sparse_cell = counts < clamp_skip_threshold(scale, counts.size * draws)
    dense_m = (matrix @ (~sparse_cell).astype(np.int64))[:, None]
    size = (true.size, draws)
    err = (gen.negative_binomial(np.maximum(dense_m, 1), p, size)
           - gen.negative_binomial(np.maximum(dense_m, 1), p, size)) * (dense_m > 0)
    err = err.astype(np.float64)
    idx = np.flatnonzero(sparse_cell)
    sub = sparse.csr_array(matrix[:, idx], dtype=np.float32)
    floor = -counts[idx].astype(np.float32)[:, None]
    step = max(1, (1 << 18) // max(idx.size, 1))
    for start in range(0, draws, step):
        stop = min(draws, start + step)
        cell = np.maximum(dlap(gen, p, (idx.size, stop - start)).astype(np.float32), floor)
        err[:, start:stop] += sub @ cell
    return stats(err, true)


def ours(truth: TruthGrid, incidence: CellIncidence, draws: int, seed: int,
         expected: bool = False) -> dict[str, float]:
    frame = measure_query_error(truth, incidence, epsilon=EPSILON, draws=draws,
                                report_floor=FLOOR, clamp_negative=True, buckets=(1, 10**9),
                                expected=expected, rng=seed)
    row = frame.iloc[0]
    n = row.n_queries * draws
    out = {"mean_abs": row.mean_abs_error, "p95_abs": row.p95_abs_error, "bias": row.bias,
           "mean_rel": row.mean_rel_error, "mean_abs_se": row.mean_abs_error_se,
           # ours draws every query independently: the bias's SE is the RMS over sqrt(n)
           "bias_se": row.rms / math.sqrt(n)}
    if expected:
        out.update(expected_rms=row.expected_rms, rms=row.rms, expected_bias=row.expected_bias)
    return out


def scale_check(n_points: int) -> None:
    """Time truth_grid, release_flat and release_hierarchical on grids up to ~10^7 cells."""
    import resource

    import h3ronpy.vector as hv
    import pyarrow as pa
    from h3ronpy import change_resolution_list

    from spatialdp.privacy import Unaccounted
    from spatialdp.queries import release_flat, release_hierarchical, truth_grid

    parents = h3cells.parse_cells(["822837fffffffff", "822807fffffffff"])  # two res-2 cells
    print("| grid cells | truth_grid (s) | release_flat (s) | hierarchical 2 / 3 / 4 "
          "levels (s) | peak RSS (MB) |")
    print("|---:|---:|---:|---:|---:|")
    rng = np.random.default_rng(0)
    for res in (8, 9, 10):
        cells = np.unique(pa.array(change_resolution_list(parents, res)).values
                          .to_numpy().astype(np.uint64))
        pick = rng.integers(0, cells.size, n_points)
        coords = hv.cells_to_coordinates(cells[pick])  # the cells' centres
        lat = pa.array(coords.column("lat")).to_numpy()
        lon = pa.array(coords.column("lng")).to_numpy()
        start = time.perf_counter()
        truth = truth_grid(cells, lon=lon, lat=lat, device_ids=np.arange(n_points) // 2)
        t_truth = time.perf_counter() - start
        start = time.perf_counter()
        release_flat(truth, epsilon=1.0, target=Unaccounted("scale check"))
        t_flat = time.perf_counter() - start
        t_hier = []
        for lev in (2, 3, 4):
            start = time.perf_counter()
            release_hierarchical(truth, epsilon=1.0, levels=lev,
                                 target=Unaccounted("scale check"))
            t_hier.append(time.perf_counter() - start)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"| {cells.size:,} | {t_truth:.2f} | {t_flat:.2f} | "
              f"{' / '.join(f'{t:.1f}' for t in t_hier)} | {peak:,.0f} |")


def clear_tables() -> None:
    """Forget ours' cached CDF and sampler tables (the one-off builds of a first call)."""
    qsampling._sum_cdf.cache_clear()
    qsampling._signed_table.cache_clear()


def print_figures(figures: dict[str, dict[str, float]]) -> None:
    print("figures (mean abs error +- se, p95 abs error, signed bias +- se, mean rel error):")
    for name, f in figures.items():
        print(f"  {name:18s} {f['mean_abs']:8.3f} +- {f['mean_abs_se']:.3f} {f['p95_abs']:8.1f} "
              f"{f['bias']:8.3f} +- {f['bias_se']:.3f} {f['mean_rel']:.5f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--draws", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--loop-draws", type=int, default=5)
    parser.add_argument("--sparse-grid", action="store_true",
                        help="median 4 devices a cell instead of 80: clamping bites on most cells")
    parser.add_argument("--scale", action="store_true",
                        help="time the releases on grids of 0.2M to 11.5M cells instead")
    parser.add_argument("--points", type=int, default=10_000_000)
    args = parser.parse_args()
    if args.scale:
        scale_check(args.points)
        return
    print(machine_line())
    truth, incidence = build(args.queries, median=4.0 if args.sparse_grid else 80.0)
    keep = np.flatnonzero(incidence.cells_outside == 0)
    incidence = CellIncidence(incidence.matrix[keep], incidence.cells_outside[keep],
                              "center", incidence.partition_version)
    m = incidence.cells_per_query
    scale = LaplaceMechanism(EPSILON, 1.0, discrete=True).scale
    threshold = clamp_skip_threshold(scale, truth.n_cells * args.draws)
    sparse_share = float((truth.counts < threshold).mean())
    print(f"grid: {truth.n_cells:,} H3 res-8 cells, {truth.counts.sum():,} devices, "
          f"{sparse_share:.0%} of cells below {threshold} (clamping can bite: drawn per cell)")
    print(f"corpus: {m.size:,} polygons, cells per polygon mean {m.mean():.0f} "
          f"(min {m.min()}, max {m.max()}); {args.draws} draws; epsilon {EPSILON}, k=1, clamp")
    matrix = incidence.matrix.astype(np.int64)

    contenders: dict[str, Callable[[], dict[str, float]]] = {
        "ours": lambda: ours(truth, incidence, args.draws, 1),
        "numpy NB shortcut": lambda: numpy_nb_shortcut(truth, matrix, scale, args.draws, 2),
        "sparse product": lambda: sparse_baseline(truth, matrix, scale, args.draws, 3),
    }
    figures = {name: run() for name, run in contenders.items()}
    figures["ours"] = ours(truth, incidence, args.draws, 4, expected=True)
    print_figures(figures)
    print(f"  expected: rms {figures['ours']['expected_rms']:.3f} (measured "
          f"{figures['ours']['rms']:.3f}), bias {figures['ours']['expected_bias']:.3f} "
          "(exact, clamped)")
    results = compare(contenders, repeats=args.repeats, check=agree)
    print_results(results, f"{args.draws} draws (one warm-up call each; figures asserted equal "
                           "within 5 Monte-Carlo standard errors):")
    cold = compare({"ours": (clear_tables, lambda _: contenders["ours"]()),
                    "numpy NB shortcut": contenders["numpy NB shortcut"]},
                   repeats=args.repeats, warmup=0, check=agree, memory=False)
    print_results(cold, "cold: ours with its CDF and sampler tables cleared before each run:")
    if args.loop_draws:
        queries = [incidence.cell_indices(i) for i in range(m.size)]
        start = time.perf_counter()
        loop_baseline(truth, queries, scale, args.loop_draws, 5)
        loop_s = (time.perf_counter() - start) * args.draws / args.loop_draws
        print(f"  per-query loop         {loop_s:8.3f} s   (measured on {args.loop_draws} draws, "
              f"scaled to {args.draws}; loop / ours = {loop_s / results['ours'].median:.1f})")
    print(ratio_line(results, "sparse product", label="ratio_sparse"))
    print(ratio_line(cold, "numpy NB shortcut", label="ratio_cold"))
    print(ratio_line(results, "numpy NB shortcut"))


if __name__ == "__main__":
    main()
