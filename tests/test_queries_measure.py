"""Error measurement: analytic figures vs Monte Carlo, clamping bias, flat vs hierarchical,
and what measuring against a released grid (a plug-in truth) changes."""

from __future__ import annotations

from typing import Any

import h3
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from h3ronpy import change_resolution_list
from scipy import sparse

from spatialdp.exceptions import InvalidInput, PartitionMismatch
from spatialdp.geo import CellIncidence, h3cells
from spatialdp.privacy import Simulation, simulate_discrete_laplace
from spatialdp.queries import (
    TruthGrid,
    grid_version,
    measure_query_error,
    release_flat,
    truth_grid,
)
from spatialdp.queries.advice import flat_or_hierarchical
from spatialdp.queries.corpus import incidence_from_cell_lists
from spatialdp.queries.expectations import (
    clamped_moments,
    flat_figures,
    mixture_quantile,
    sigma_of,
)
from spatialdp.queries.hierarchy import HierarchyModel
from spatialdp.queries.sampling import discrete_laplace_draws, sum_draws
from spatialdp.queries.weighted_sum import WeightedSum

M_VALUES = [1, 2, 5, 10, 30, 100, 300, 1000, 3000, 10_000]


def children(cell: str, res: int, up: int | None = None) -> np.ndarray:
    parent = h3cells.parse_cells([cell])
    if up is not None:
        parent = h3cells.cell_parents(parent, up)
    return np.unique(pa.array(change_resolution_list(parent, res)).values.to_numpy()
                     .astype(np.uint64))


def synthetic_truth(cells: np.ndarray, counts: np.ndarray) -> TruthGrid:
    version = grid_version(cells)
    return TruthGrid(counts=counts.astype(np.int64), cells=cells,
                     resolution=h3cells.single_resolution(cells[:1]),
                     partition_version=version, partition_key=f"t@{version}",
                     max_cells_per_device=1, n_points=int(counts.sum()), n_unassigned=0,
                     n_devices=max(int(counts.sum()), 1), n_clipped_pairs=0,
                     n_clipped_devices=0)


def disks(cells: np.ndarray, version: str, centres: np.ndarray, k: int) -> sparse.csr_array:
    off, disk = h3cells.grid_disk_lists(centres, k)
    inc = incidence_from_cell_lists(cells, version, off, disk)
    return inc.matrix[np.flatnonzero(inc.cells_outside == 0)]


@pytest.mark.parametrize("scale", [1.0, 4.0])
def test_flat_figures_match_monte_carlo_within_2_percent(scale: float) -> None:
    gen = np.random.default_rng(11)
    fig = flat_figures(scale, M_VALUES)
    sums = sum_draws(gen, scale, np.array(M_VALUES), 100_000).astype(np.float64)
    rms = np.sqrt((sums**2).mean(axis=1))
    mae = np.abs(sums).mean(axis=1)
    p95 = np.quantile(np.abs(sums), 0.95, axis=1, method="inverted_cdf")
    np.testing.assert_allclose(rms, fig["rms"], rtol=0.02)
    np.testing.assert_allclose(mae, fig["mean_abs_error"], rtol=0.02)
    np.testing.assert_allclose(p95, fig["p95"], rtol=0.02, atol=1.0)
    # the seed's sqrt(m) sigma is the RMS, not the mean absolute error (off by ~20%)
    assert (fig["mean_abs_error"][3:] / fig["rms"][3:] < 0.81).all()


def test_sum_and_cell_samplers_match_numpy_cell_sums() -> None:
    # independent check of the fast samplers against the library's per-cell simulator
    gen = np.random.default_rng(5)
    for m in (1, 7, 60):
        cells = simulate_discrete_laplace(np.zeros((m, 20_000), dtype=np.int64), 2.0,
                                          rng=gen).sum(axis=0)
        fast = sum_draws(gen, 2.0, np.array([m]), 20_000)[0]
        mine = discrete_laplace_draws(gen, 2.0, (m, 20_000)).sum(axis=0)
        fig = flat_figures(2.0, [m])
        for sample in (cells, fast, mine):
            se = np.abs(sample).std() / np.sqrt(sample.size)
            assert abs(np.abs(sample).mean() - fig["mean_abs_error"][0]) < 5 * se


def test_cell_sampler_pmf() -> None:
    z = discrete_laplace_draws(np.random.default_rng(2), 1.5, (1_000_000,))
    a = np.exp(-1 / 1.5)
    values = np.arange(-6, 7)
    pmf = (1 - a) / (1 + a) * a ** np.abs(values)
    observed = np.array([(z == v).sum() for v in values])
    chi2 = ((observed - 1e6 * pmf) ** 2 / (1e6 * pmf)).sum()
    assert chi2 < 50  # 13 cells: P(chi2_13 > 50) < 1e-5


def test_clamped_moments_match_monte_carlo() -> None:
    z = simulate_discrete_laplace(np.zeros(400_000, dtype=np.int64), 2.0, rng=9)
    for t in (0, 1, 3, 8):
        err = np.maximum(z, -t)
        mean, var = clamped_moments([t], 2.0)
        assert abs(err.mean() - mean[0]) < 5 * err.std() / np.sqrt(err.size)
        assert abs(err.var() / var[0] - 1) < 0.02


@pytest.fixture(scope="module")
def grid2401() -> tuple[np.ndarray, str]:
    cells = children("85283473fffffff", 8, up=4)  # the 2,401 resolution-8 cells of a r4 cell
    return cells, grid_version(cells)


def test_measure_flat_matches_expectations_and_clamping_bias(grid2401) -> None:  # type: ignore[no-untyped-def]
    cells, version = grid2401
    rng = np.random.default_rng(4)
    sparse_counts = rng.integers(0, 3, cells.size)
    truth = synthetic_truth(cells, sparse_counts)
    queries = sparse.vstack([disks(cells, version, cells[rng.choice(cells.size, 80)], k)
                             for k in (0, 2, 6)]).tocsr()
    inc = CellIncidence(queries, np.zeros(queries.shape[0], np.int64), "center", version)
    plain = measure_query_error(truth, inc, epsilon=0.5, draws=400, clamp_negative=False,
                                report_floor=10, rng=1)
    for _, row in plain.iterrows():
        n = row.n_queries * 400
        assert abs(row.mean_abs_error / row.expected_mean_abs_error - 1) < 5 * 0.8 / np.sqrt(n)
        assert abs(row.rms / row.expected_rms - 1) < 5 * 1.2 / np.sqrt(n)
        assert abs(row.bias) < 5 * row.expected_rms / np.sqrt(n)
    clamped = measure_query_error(truth, inc, epsilon=0.5, draws=400, clamp_negative=True,
                                  report_floor=10, rng=2)
    for _, row in clamped.iterrows():  # sparse geography: answers come out too high
        n = row.n_queries * 400
        assert row.bias > 0
        assert abs(row.bias - row.expected_bias) < 5 * row.expected_rms / np.sqrt(n)
        assert abs(row.rms / row.expected_rms - 1) < 5 * 1.2 / np.sqrt(n)
    assert clamped.bias.iloc[-1] > 10 * plain.bias.abs().iloc[-1]


def test_measure_on_dense_grid_is_unbiased_with_clamping(grid2401) -> None:  # type: ignore[no-untyped-def]
    cells, version = grid2401
    truth = synthetic_truth(cells, np.full(cells.size, 500))
    inc = CellIncidence(disks(cells, version, cells[:50], 3), np.zeros(50, np.int64), "center",
                        version)
    rep = measure_query_error(truth, inc, epsilon=1.0, draws=300, rng=3)
    row = rep.iloc[0]
    assert 0 <= row.expected_bias < 1e-12  # exact: a**501 / (1 - a**2)
    assert row.expected_mean_abs_error == pytest.approx(flat_figures(1.0, [37])
                                                        ["mean_abs_error"][0])
    assert row.expected_p95_abs_error == mixture_quantile(1.0, [37])
    assert abs(row.mean_rel_error - row.expected_mean_rel_error) < 0.05 * row.mean_rel_error


def test_hierarchical_law_matches_monte_carlo_within_2_percent(grid2401) -> None:  # type: ignore[no-untyped-def]
    cells, version = grid2401
    truth = synthetic_truth(cells, np.zeros(cells.size, np.int64))
    model = HierarchyModel.build(truth, 1.0, levels=4)
    centre = cells[1200:1201]
    queries = sparse.vstack([disks(cells, version, centre, k) for k in (0, 4, 10)]).tocsr()
    weights = model.tree.query_weights(queries)
    gen = np.random.default_rng(8)
    for j in range(queries.shape[0]):
        w = [wl[:, [j]].toarray().ravel() for wl in weights]
        law = WeightedSum(np.concatenate(w), np.concatenate(
            [np.full(x.size, s) for x, s in zip(w, model.scales, strict=True)]))
        x = np.zeros(40_000)
        for wl, s in zip(w, model.scales, strict=True):
            nz = np.flatnonzero(wl)
            x += wl[nz] @ discrete_laplace_draws(gen, s, (nz.size, 40_000))
        assert np.sqrt((x**2).mean()) == pytest.approx(law.sd, rel=0.02)
        assert np.abs(x).mean() == pytest.approx(law.mean_abs(), rel=0.02)
        assert np.quantile(np.abs(x), 0.95) == pytest.approx(law.quantile_abs(), rel=0.02)


def test_measure_hierarchical_matches_expectations(grid2401) -> None:  # type: ignore[no-untyped-def]
    cells, version = grid2401
    truth = synthetic_truth(cells, np.zeros(cells.size, np.int64))
    rng = np.random.default_rng(6)
    queries = sparse.vstack([disks(cells, version, cells[rng.choice(cells.size, n)], k)
                             for k, n in ((0, 200), (5, 20))]).tocsr()
    inc = CellIncidence(queries, np.zeros(queries.shape[0], np.int64), "center", version)
    rep = measure_query_error(truth, inc, epsilon=1.0, method="hierarchical", draws=600,
                              clamp_negative=False, rng=7, buckets=(1, 2, 200))
    for _, row in rep.iterrows():
        n = row.n_queries * 600
        assert abs(row.rms / row.expected_rms - 1) < 5 * 1.2 / np.sqrt(n) + 0.01
        assert abs(row.mean_abs_error / row.expected_mean_abs_error - 1) < 0.04


def test_hierarchical_beats_flat_for_large_queries_flat_for_small() -> None:
    cells = children("85283473fffffff", 8, up=2)  # 117,649 cells
    version = grid_version(cells)
    truth = synthetic_truth(cells, np.zeros(cells.size, np.int64))
    centre = h3cells.parse_cells([h3.cell_to_center_child(h3.cell_to_parent(
        "85283473fffffff", 2), 8)])
    far = h3cells.grid_disk_lists(centre, 60)[1][-1:]  # a cell 60 steps away
    one = disks(cells, version, centre, 100)
    union = one + disks(cells, version, far, 100)
    union.data[:] = 1
    big = sparse.csr_array(sparse.vstack([one, union]), dtype=np.int8)
    small = sparse.vstack([disks(cells, version, centre, k) for k in (0, 1, 3)]).tocsr()
    inc_big = CellIncidence(big, np.zeros(big.shape[0], np.int64), "center", version)
    inc_small = CellIncidence(small, np.zeros(3, np.int64), "center", version)
    assert inc_big.cells_per_query[0] == 30_301
    assert inc_big.cells_per_query[1] > 40_000
    cmp_big = flat_or_hierarchical(truth, inc_big, epsilon=1.0)
    cmp_small = flat_or_hierarchical(truth, inc_small, epsilon=1.0)
    assert (cmp_big.better == "hierarchical").all()
    assert (cmp_big.std_ratio < 0.5).all()  # the margin: less than half the flat error
    assert (cmp_small.better == "flat").all()
    # and the simulation agrees: hierarchical RMS well below flat's sqrt(m) sigma
    model = HierarchyModel.build(truth, 1.0, levels=4)
    err = model.simulate_errors(big[:1], 150, clamp_negative=False,
                                gen=np.random.default_rng(1))
    measured = np.sqrt((err**2).mean())
    assert measured < 0.6 * cmp_big.flat_std.iloc[0]
    assert measured == pytest.approx(cmp_big.hierarchical_std.iloc[0], rel=5 * 0.71 / np.sqrt(150))


def test_measure_refusals(grid2401) -> None:  # type: ignore[no-untyped-def]
    cells, version = grid2401
    truth = synthetic_truth(cells, np.zeros(cells.size, np.int64))
    inc = CellIncidence(disks(cells, version, cells[:3], 1), np.zeros(3, np.int64), "center",
                        "another")
    with pytest.raises(PartitionMismatch, match="partition version 'another'"):
        measure_query_error(truth, inc, epsilon=1.0)
    good = CellIncidence(inc.matrix, inc.cells_outside, "center", version)
    with pytest.raises(InvalidInput, match="epsilon=0"):
        measure_query_error(truth, good, epsilon=0.0)
    with pytest.raises(InvalidInput, match="bucket_by='area' needs polygon areas"):
        measure_query_error(truth, good, epsilon=1.0, bucket_by="area")
    outside = CellIncidence(inc.matrix, np.array([0, 2, 0]), "center", version)
    with pytest.raises(InvalidInput, match="reach outside the partition"):
        measure_query_error(truth, outside, epsilon=1.0)
    with pytest.raises(InvalidInput, match="buckets="):
        measure_query_error(truth, good, epsilon=1.0, buckets=(5, 1))
    with pytest.raises(InvalidInput, match=r"reference=1\.5 is a float, not a NoisyGrid or "
                                           r"TruthGrid; release a grid first"):
        measure_query_error(1.5, good, epsilon=0.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=r"split=\{'a': 1\} is not 3 positive finite"):
        measure_query_error(truth, good, epsilon=1.0, method="hierarchical", levels=3,
                            split={"a": 1}, draws=2, rng=0)


def test_a_floor_of_zero_leaves_empty_answers_out_of_the_relative_error(grid2401) -> None:  # type: ignore[no-untyped-def]
    # report_floor=0 is accepted; an answer of 0 has no relative error (it divided by 0).
    cells, version = grid2401
    truth = synthetic_truth(cells, np.zeros(cells.size, np.int64))
    rep = measure_query_error(truth, single_cells(cells, version), epsilon=1.0, draws=3,
                              report_floor=0, rng=0)
    assert rep.n_above_floor.iloc[0] == 0
    assert np.isnan(rep.mean_rel_error.iloc[0])
    assert np.isnan(rep.expected_mean_rel_error.iloc[0])


def test_compare_releases_refusals(grid2401) -> None:  # type: ignore[no-untyped-def]
    cells, version = grid2401
    truth = synthetic_truth(cells, np.zeros(cells.size, np.int64))
    good = CellIncidence(disks(cells, version, cells[:3], 1), np.zeros(3, np.int64), "center",
                         version)
    with pytest.raises(InvalidInput, match=r"truth=-1 is a int, not a TruthGrid; build it"):
        flat_or_hierarchical(-1, good, epsilon=1.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=r"split=b'x' is not one of the accepted values"):
        flat_or_hierarchical(truth, good, epsilon=1.0, levels=3, split=b"x")


def test_truth_grid_from_points_feeds_measurement(grid2401) -> None:  # type: ignore[no-untyped-def]
    cells, version = grid2401
    truth = truth_grid(cells, lon=[-121.98], lat=[37.35], device_ids=[1])
    inc = CellIncidence(disks(cells, version, cells[:5], 1), np.zeros(5, np.int64), "center",
                        version)
    rep = measure_query_error(truth, inc, epsilon=1.0, draws=20, rng=0)
    assert rep.attrs["simulated"] is True
    assert rep.n_queries.sum() == 5
    # Against the truth: an internal table, labelled so in its settings and title.
    assert rep.attrs["reference"] == "truth"
    assert rep.attrs["internal"] is True
    assert rep.attrs["title"].startswith("INTERNAL")


def test_sum_law_table_equals_exact_tails() -> None:
    from spatialdp.privacy.accuracy import tail_probability
    from spatialdp.queries.sampling import _sum_cdf

    for scale, m in ((0.5, 1), (1.0, 7), (1.0, 400), (4.0, 3000)):
        cdf, half = _sum_cdf(scale, m)
        for h in (0, 3, 20):
            inside = cdf[h + half] - cdf[-h - 1 + half]
            exact = tail_probability("discrete_laplace", scale, float(h), m)
            assert abs((1.0 - inside) - exact) < 1e-10


def test_sum_draws_large_scale_uses_negative_binomials() -> None:
    s = sum_draws(np.random.default_rng(3), 1000.0, np.array([3]), 40_000)[0]
    sd = float(np.sqrt(3) * flat_figures(1000.0, [1])["rms"][0])
    assert abs(s.std() / sd - 1) < 5 * np.sqrt(1.25 / s.size)  # kurtosis of a 3-sum: 4


# ----------------------------------------------------------------------------- plug-in truth
# docs/queries.md, "Measuring against a released grid": each statement is checked here
# against simulation (fixed seeds; tolerances from the standard error).
def single_cells(cells: np.ndarray, version: str) -> CellIncidence:
    """One query per cell (m = 1): the per-cell statements, query by query."""
    matrix = sparse.csr_array(sparse.identity(cells.size, dtype=np.int8, format="csr"))
    return CellIncidence(matrix, np.zeros(cells.size, np.int64), "center", version)


def released_law(t: int, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """Return the values ``max(t + Z0, 0)`` a released cell of true count ``t`` may take,
    and their probabilities (discrete Laplace ``Z0``, support wide enough for 1e-15)."""
    a = np.exp(-1.0 / scale)
    z = np.arange(-int(40 * scale) - 40, int(40 * scale) + 41)
    p = (1 - a) / (1 + a) * a ** np.abs(z)
    return np.maximum(t + z, 0), p


def test_plug_in_leaves_unclamped_absolute_errors_unchanged(grid2401) -> None:  # type: ignore[no-untyped-def]
    # Without clamping the simulated noise does not depend on the counts: the same seed
    # gives the same absolute-error figures against the truth and against a released grid.
    cells, version = grid2401
    rng = np.random.default_rng(12)
    truth = synthetic_truth(cells, rng.integers(0, 40, cells.size))
    grid = release_flat(truth, epsilon=0.5, target=Simulation(rng=13))
    queries = sparse.vstack([disks(cells, version, cells[rng.choice(cells.size, 60)], k)
                             for k in (0, 2, 6)]).tocsr()
    inc = CellIncidence(queries, np.zeros(queries.shape[0], np.int64), "center", version)
    absolute = ["bucket", "n_queries", "mean_cells", "mean_abs_error", "p95_abs_error", "rms",
                "bias", "expected_mean_abs_error", "expected_p95_abs_error", "expected_rms",
                "expected_bias"]
    for method in ("flat", "hierarchical"):
        kw: dict[str, Any] = dict(epsilon=0.5, method=method, levels=3, draws=100,
                                  clamp_negative=False, report_floor=10)
        on_truth = measure_query_error(truth, inc, rng=5, **kw)
        on_grid = measure_query_error(grid, inc, rng=5, **kw)
        pd.testing.assert_frame_equal(on_truth[absolute], on_grid[absolute])
        # ... but the relative errors divide by the reference's answers, which differ.
        assert not np.allclose(on_truth.mean_rel_error, on_grid.mean_rel_error)
        assert on_grid.attrs["reference"] == "released grid"
        assert on_truth.attrs["reference"] == "truth"


@pytest.mark.parametrize("t", [0, 2])
def test_plug_in_clamping_bias_and_rms_are_averaged_over_the_released_count(
        grid2401, t: int) -> None:  # type: ignore[no-untyped-def]
    # Clamped, a cell of true count t is measured at the released max(t + Z0, 0): every
    # per-cell figure is its truth value averaged over that law. The bias in closed form:
    # b(t) * (1 + a + a**2 + (1 - a**2) t) / (1 + a)**2, with b(t) = a**(t+1) / (1 - a**2).
    cells, version = grid2401
    truth = synthetic_truth(cells, np.full(cells.size, t))
    inc = single_cells(cells, version)
    scale, releases, draws = 1.0, 5, 40
    a = np.exp(-1.0 / scale)
    values, p = released_law(t, scale)
    mean_c, var_c = clamped_moments(values, scale)
    bias = float(p @ mean_c)  # E over the released count of the expected bias
    second = float(p @ (var_c + mean_c**2))
    true_bias, true_var = clamped_moments([t], scale)
    closed = true_bias[0] * (1 + a + a * a + (1 - a * a) * t) / (1 + a) ** 2
    assert bias == pytest.approx(closed, rel=1e-12)
    n = cells.size * releases
    se_bias = np.sqrt((p @ mean_c**2 - bias**2) / n)
    se_second = np.sqrt((p @ (var_c + mean_c**2) ** 2 - second**2) / n)
    se_measured = np.sqrt(se_bias**2 + float(p @ var_c) / (n * draws))
    tables = [measure_query_error(release_flat(truth, epsilon=1.0, target=Simulation(rng=r)),
                                  inc, epsilon=1.0, draws=draws, rng=100 + r)
              for r in range(releases)]
    expected_bias = np.mean([tab.expected_bias.iloc[0] for tab in tables])
    expected_second = np.mean([tab.expected_rms.iloc[0] ** 2 for tab in tables])
    measured_bias = np.mean([tab.bias.iloc[0] for tab in tables])
    assert abs(expected_bias - bias) < 4 * se_bias
    assert abs(measured_bias - bias) < 4 * se_measured
    assert abs(expected_second - second) < 4 * se_second
    # ... which is not the truth's: under it at t = 0 (0.80 of it), above it at t = 2.
    assert abs(bias - true_bias[0]) > 10 * se_measured
    assert abs(second - (true_var[0] + true_bias[0] ** 2)) > 10 * se_second
    assert (bias < true_bias[0]) == (t == 0)
    assert (second > true_var[0] + true_bias[0] ** 2) == (t == 0)


def test_plug_in_relative_error_is_inflated_by_the_reference_noise(grid2401) -> None:  # type: ignore[no-untyped-def]
    # Far above the floor the relative error divides by the released answer A + N:
    # E[A / (A + N)] = 1 + s**2 / A**2 + ..., s the sd of the reference's noise N.
    cells, version = grid2401
    t, scale, releases, draws = 14, 1.0, 4, 20
    truth = synthetic_truth(cells, np.full(cells.size, t))
    inc = single_cells(cells, version)
    values, p = released_law(t, scale)
    counted = values >= 5  # the floor: queries whose released answer is at least 5
    w = p[counted] / p[counted].sum()
    ratio = float(w @ (t / values[counted]))  # exact E[A / Â] over the counted queries
    ratio_var = float(w @ (t / values[counted]) ** 2) - ratio**2
    s2 = float(sigma_of(scale)) ** 2
    assert abs(ratio - (1 + s2 / t**2)) < 0.1 * s2 / t**2  # the documented approximation
    mae = float(flat_figures(scale, [1])["mean_abs_error"][0])
    n = cells.size * releases
    tables = [measure_query_error(release_flat(truth, epsilon=1.0, target=Simulation(rng=r)),
                                  inc, epsilon=1.0, draws=draws, report_floor=5,
                                  clamp_negative=False, rng=200 + r)
              for r in range(releases)]
    on_truth = measure_query_error(truth, inc, epsilon=1.0, draws=1, report_floor=5,
                                   clamp_negative=False, rng=0)
    assert on_truth.expected_mean_rel_error.iloc[0] == pytest.approx(mae / t)
    expected = np.mean([tab.expected_mean_rel_error.iloc[0] for tab in tables]) / (mae / t)
    measured = np.mean([tab.mean_rel_error.iloc[0] for tab in tables]) / (mae / t)
    se = np.sqrt(ratio_var / n)
    # |e| / Â per draw: the spread of |e| over the draws, then of 1 / Â over the queries
    se_measured = np.sqrt((s2 - mae**2) / mae**2 * (ratio**2 + ratio_var) / (n * draws)
                          + ratio_var / n)
    assert abs(expected - ratio) < 4 * se
    assert abs(measured - ratio) < 4 * se_measured
    assert ratio - 1 > 6 * se  # the inflation is there, and the test could see its absence
