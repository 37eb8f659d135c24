"""Flat and hierarchical releases: one charge, the right noise, exact least-squares consistency."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from h3ronpy import change_resolution_list
from scipy import sparse

from spatialdp.exceptions import BudgetExceeded, InvalidInput
from spatialdp.geo import h3cells
from spatialdp.privacy import PrivacyLedger, ReleaseTarget, Simulation, Unaccounted
from spatialdp.queries import (
    level_epsilons,
    release_flat,
    release_hierarchical,
    truth_grid,
)
from spatialdp.queries.corpus import incidence_from_cell_lists
from spatialdp.queries.grids import Tree


def children(cell: str, res: int) -> np.ndarray:
    parent = h3cells.parse_cells([cell])
    out = pa.array(change_resolution_list(parent, res)).values.to_numpy()
    return np.unique(out.astype(np.uint64))


@pytest.fixture(scope="module")
def fine() -> np.ndarray:
    return children("85283473fffffff", 8)  # 343 cells


@pytest.fixture(scope="module")
def truth(fine: np.ndarray):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(0)
    cells = fine[rng.integers(0, fine.size, 4000)]
    xy = h3cells.cell_polygons(cells)
    import shapely

    c = shapely.get_coordinates(shapely.centroid(xy))
    return truth_grid(fine, lon=c[:, 0], lat=c[:, 1], device_ids=np.arange(4000) // 2,
                      max_cells_per_device=2)


def test_flat_noise_is_discrete_laplace_of_scale_k_over_epsilon(truth) -> None:  # type: ignore[no-untyped-def]
    draws = np.stack([release_flat(truth, epsilon=0.5, target=Simulation(rng=s)).values
                      for s in range(60)])
    noise = (draws - truth.counts).ravel()
    b = 2 / 0.5  # k / epsilon
    a = np.exp(-1 / b)
    var = 2 * a / (1 - a) ** 2
    se = np.sqrt(noise.size) ** -1 * np.sqrt(var)
    assert abs(noise.mean()) < 5 * se
    # variance: fourth moment of the discrete Laplace gives the SE; 5 SE
    assert abs(noise.var() / var - 1) < 5 * np.sqrt(5.0 / noise.size)
    assert draws.dtype == np.int64


def test_flat_release_charges_once_with_disjoint_structure(fine: np.ndarray) -> None:
    one = truth_grid(fine, lon=[-121.98], lat=[37.35], device_ids=[1])
    with PrivacyLedger(":memory:", epoch_budget=10.0) as ledger:
        before = ledger.remaining(0, "evaluation.regional")
        grid = release_flat(one, epsilon=0.7, target=ReleaseTarget(ledger, 0))
        assert ledger.remaining(0, "evaluation.regional") == pytest.approx(before - 0.7)
        history = ledger.audit(0)
        assert len(history) == 1
        assert history.iloc[0]["structure_kind"] == "disjoint"
        assert history.iloc[0]["parts"] == fine.size
    assert grid.values.dtype == np.int64
    assert not grid.simulated


def test_refused_release_charges_nothing(truth) -> None:  # type: ignore[no-untyped-def]
    with PrivacyLedger(":memory:", epoch_budget=1.0) as ledger:
        before = ledger.remaining(0, "evaluation.regional")
        with pytest.raises(InvalidInput, match="epsilon=0"):
            release_flat(truth, epsilon=0, target=ReleaseTarget(ledger, 0))
        with pytest.raises(InvalidInput, match="epsilon=-1"):
            release_hierarchical(truth, epsilon=-1, target=ReleaseTarget(ledger, 0))
        with pytest.raises(BudgetExceeded):
            release_flat(truth, epsilon=5.0, target=ReleaseTarget(ledger, 0))
        with pytest.raises(InvalidInput, match="levels=10"):
            release_hierarchical(truth, epsilon=0.1, levels=10, target=ReleaseTarget(ledger, 0))
        assert ledger.remaining(0, "evaluation.regional") == before
    with pytest.raises(InvalidInput, match="target=None"):
        release_flat(truth, epsilon=1.0, target=None)


def test_hierarchical_is_consistent_and_charges_the_total(truth) -> None:  # type: ignore[no-untyped-def]
    with PrivacyLedger(":memory:", epoch_budget=10.0) as ledger:
        before = ledger.remaining(0, "evaluation.regional")
        grid = release_hierarchical(truth, epsilon=1.0, levels=3,
                                    target=ReleaseTarget(ledger, 0))
        spent = before - ledger.remaining(0, "evaluation.regional")
    assert spent == pytest.approx(1.0)
    assert spent <= 1.0 + 1e-12
    tree = grid.tree
    assert tree is not None
    assert tree.estimates is not None
    for lev in range(tree.levels - 1):  # every parent equals the sum of its children
        np.testing.assert_allclose(tree.up[lev] @ tree.estimates[lev + 1], tree.estimates[lev],
                                   atol=1e-9)
    assert grid.resolutions == (6, 7, 8)
    assert sum(grid.level_epsilons) <= 1.0


def _dense_design(tree: Tree) -> np.ndarray:
    n = tree.nodes[-1].size
    mats = [sparse.identity(n, format="csr")]
    for lev in range(tree.levels - 2, -1, -1):
        mats.insert(0, tree.up[lev] @ mats[0])
    return sparse.vstack(mats).toarray()


def test_consistency_is_the_weighted_least_squares_solution(fine: np.ndarray) -> None:
    rng = np.random.default_rng(3)
    cells = fine[rng.random(fine.size) < 0.8]  # ragged parents at the edge
    variances = (9.0, 4.0, 1.0)
    tree = Tree.build(cells, (6, 7, 8), variances)
    design = _dense_design(tree)
    w = np.concatenate([np.full(n.size, 1 / v) for n, v in zip(tree.nodes, variances,
                                                                  strict=True)])
    y = [rng.normal(size=n.size) * np.sqrt(v) for n, v in zip(tree.nodes, variances,
                                                               strict=True)]
    gls = np.linalg.lstsq(design * np.sqrt(w)[:, None], np.concatenate(y) * np.sqrt(w),
                          rcond=None)[0]
    np.testing.assert_allclose(tree.consistent(y)[-1], gls, atol=1e-10)
    # exact variance of query answers = q^T (A^T W A)^-1 q
    off, disk = h3cells.grid_disk_lists(cells[rng.choice(cells.size, 15)], 2)
    q = incidence_from_cell_lists(cells, "v", off, disk).matrix.astype(float)
    cov = np.linalg.inv((design * w[:, None]).T @ design)
    exact = np.einsum("ij,jk,ik->i", q.toarray(), cov, q.toarray())
    np.testing.assert_allclose(tree.query_variance(q), exact, rtol=1e-9)
    # cheapest cover: fewer nodes, same answer
    tree.estimates = tree.consistent(y)
    np.testing.assert_allclose(tree.answer_from_cover(q), q @ tree.estimates[-1], atol=1e-9)
    assert (tree.cover_size(q) <= np.diff(q.indptr)).all()


def test_pentagon_has_six_children() -> None:
    pentagon = h3cells.parse_cells(["8009fffffffffff"])  # a resolution-0 pentagon
    fine = children("8009fffffffffff", 2)
    tree = Tree.build(fine, (0, 1, 2), (1.0, 1.0, 1.0))
    assert tree.nodes[0].tolist() == pentagon.tolist()
    assert np.asarray(tree.up[0].sum(axis=1)).ravel().tolist() == [6]
    assert fine.size == 6 * 7 - 1  # the pentagon child has 6 children too


def test_level_epsilons_split() -> None:
    geo = level_epsilons(1.0, 4)
    assert sum(geo) <= 1.0
    assert geo[-1] / geo[-2] == pytest.approx(7 ** (1 / 6))
    assert level_epsilons(1.0, 2, [1, 3])[1] == pytest.approx(0.75)
    with pytest.raises(InvalidInput, match="split="):
        level_epsilons(1.0, 2, [1, -1])
    with pytest.raises(InvalidInput, match="split='fancy'"):
        level_epsilons(1.0, 2, "fancy")


@pytest.mark.parametrize(("levels", "message"), [
    (0.5, r"levels=0\.5 is not a whole number; pass a whole number of levels from 1 to 16"),
    (Decimal("NaN"), r"levels=Decimal\('NaN'\) is not finite; pass a whole number of levels"),
    (17, r"levels=17 is above the limit <= 16; pass a whole number of levels from 1 to 16"),
    (0, r"levels=0 is below the limit >= 1"),
    ("3", r"levels='3' is a string"),
])
def test_level_epsilons_refuses_bad_levels(levels: object, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        level_epsilons(1.0, levels, "uniform")  # type: ignore[arg-type]


def test_level_epsilons_accepts_numpy_levels() -> None:
    assert level_epsilons(1.0, np.float32(2.0), "uniform") == level_epsilons(1.0, 2, "uniform")


@pytest.mark.parametrize(("split", "message"), [
    ({"a": 1}, r"split=\{'a': 1\} is not 3 positive finite weights; give one weight per level"),
    (b"x", r"split=b'x' is not one of the accepted values; pass one of \['geometric', "
           r"'uniform'\]"),
    ((1.0, float("nan"), 1.0), r"split=\(1\.0, nan, 1\.0\) is not 3 positive finite"),
    ((1.0, 2.0), r"split=\(1\.0, 2\.0\) is not 3 positive finite weights"),
    ((1.0, 0.0, 1.0), r"is not 3 positive finite weights"),
])
def test_level_epsilons_refuses_bad_split(split: object, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        level_epsilons(1.0, 3, split)


def test_level_epsilons_huge_weights_and_tiny_epsilon() -> None:
    # weights near the float limit: shares are computed without overflow
    assert level_epsilons(1.0, 2, [1e308, 1e308]) == level_epsilons(1.0, 2, "uniform")
    with pytest.raises(InvalidInput, match=r"epsilon=5e-324 is too small to split over 3 levels"):
        level_epsilons(5e-324, 3)


@pytest.mark.parametrize("split", [b"x", {"a": 1}, (1.0, 2.0)])
def test_bad_split_refused_before_charging(truth, split: object) -> None:  # type: ignore[no-untyped-def]
    with PrivacyLedger(":memory:", epoch_budget=10.0) as ledger:
        before = ledger.remaining(0, "evaluation.regional")
        with pytest.raises(InvalidInput, match="split="):
            release_hierarchical(truth, epsilon=1.0, target=ReleaseTarget(ledger, 0), levels=3,
                                 split=split)
        assert ledger.remaining(0, "evaluation.regional") == before
        assert len(ledger.audit()) == 0


def test_unaccounted_release_is_marked(truth) -> None:  # type: ignore[no-untyped-def]
    grid = release_flat(truth, epsilon=1.0, target=Unaccounted("test data"))
    assert grid.accounting["accounting"] == "unaccounted"
