"""Error measurement: analytic figures vs Monte Carlo, clamping bias, flat vs hierarchical."""

from __future__ import annotations

import h3
import numpy as np
import pyarrow as pa
import pytest
from h3ronpy import change_resolution_list
from scipy import sparse

from spatialdp.exceptions import InvalidInput, PartitionMismatch
from spatialdp.geo import CellIncidence, h3cells
from spatialdp.privacy import simulate_discrete_laplace
from spatialdp.queries import TruthGrid, grid_version, measure_query_error, truth_grid
from spatialdp.queries.advice import compare_releases
from spatialdp.queries.corpus import incidence_from_cell_lists
from spatialdp.queries.expectations import clamped_moments, flat_figures, mixture_quantile
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
    cmp_big = compare_releases(truth, inc_big, epsilon=1.0)
    cmp_small = compare_releases(truth, inc_small, epsilon=1.0)
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
    with pytest.raises(InvalidInput, match=r"truth=1\.5 is a float, not a TruthGrid; build it"):
        measure_query_error(1.5, good, epsilon=0.5)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=r"split=\{'a': 1\} is not 3 positive finite"):
        measure_query_error(truth, good, epsilon=1.0, method="hierarchical", levels=3,
                            split={"a": 1}, draws=2, rng=0)


def test_compare_releases_refusals(grid2401) -> None:  # type: ignore[no-untyped-def]
    cells, version = grid2401
    truth = synthetic_truth(cells, np.zeros(cells.size, np.int64))
    good = CellIncidence(disks(cells, version, cells[:3], 1), np.zeros(3, np.int64), "center",
                         version)
    with pytest.raises(InvalidInput, match=r"truth=-1 is a int, not a TruthGrid; build it"):
        compare_releases(-1, good, epsilon=1.0)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match=r"split=b'x' is not one of the accepted values"):
        compare_releases(truth, good, epsilon=1.0, levels=3, split=b"x")


def test_truth_grid_from_points_feeds_measurement(grid2401) -> None:  # type: ignore[no-untyped-def]
    cells, version = grid2401
    truth = truth_grid(cells, lon=[-121.98], lat=[37.35], device_ids=[1])
    inc = CellIncidence(disks(cells, version, cells[:5], 1), np.zeros(5, np.int64), "center",
                        version)
    rep = measure_query_error(truth, inc, epsilon=1.0, draws=20, rng=0)
    assert rep.attrs["simulated"] is True
    assert rep.n_queries.sum() == 5


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
