"""Resolution advice (Qardaji's N epsilon / 10); fresh per-query answers with their own charge."""

from __future__ import annotations

import numpy as np
import pytest

from spatialdp.exceptions import InvalidInput, PartitionMismatch
from spatialdp.geo import CellIncidence, h3cells
from spatialdp.privacy import PrivacyLedger, ReleaseTarget, Simulation
from spatialdp.queries import answer_fresh, recommend_resolution, truth_grid
from spatialdp.queries.corpus import incidence_from_cell_lists


def test_recommendation_follows_n_epsilon_over_10() -> None:
    advice = recommend_resolution(2_000_000, 0.5, 50_000.0)
    assert advice.target_cells == pytest.approx(100_000)
    table = advice.table
    # the chosen resolution is the one whose cell count is nearest in log scale
    assert advice.resolution == int(np.argmin(np.abs(np.log(table.cells / 100_000))))
    assert table.cells.iloc[advice.resolution] == pytest.approx(
        50_000 / table.cell_area_km2.iloc[advice.resolution])
    assert "N epsilon / c" in advice.reasoning
    # ten times the data (or the epsilon) asks for about ten times the cells: finer
    assert recommend_resolution(20_000_000, 0.5, 50_000.0).resolution >= advice.resolution + 1


def test_recommendation_refusals() -> None:
    with pytest.raises(InvalidInput, match="epsilon=0"):
        recommend_resolution(1000, 0.0, 10.0)
    with pytest.raises(InvalidInput, match="area_km2=-1"):
        recommend_resolution(1000, 1.0, -1.0)
    with pytest.raises(InvalidInput, match="n_devices=0"):
        recommend_resolution(0, 1.0, 10.0)


@pytest.mark.parametrize(("args", "kwargs", "message"), [
    ((1000, 1.0, 100.0), {"c": 1e308},
     r"c=1e\+308 is above the limit <= 1000; pass Qardaji's constant, about 10"),
    ((1000, 1.0, 100.0), {"c": 5e-324},
     r"c=5e-324 is below the limit >= 0\.001; pass Qardaji's constant, about 10"),
    ((1e308, 1.0, 100.0), {}, r"n_devices=1e\+308 is above the limit <= 10000000000000; pass"),
    ((1000, 1.0, 1e308), {}, r"area_km2=1e\+308 is above the limit <= 5\.101e\+08; pass"),
    ((1000, 1.0, 5e-324), {}, r"area_km2=5e-324 is below the limit >= 1e-06; pass"),
])
def test_recommendation_bounds(args: tuple, kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        recommend_resolution(*args, **kwargs)


@pytest.mark.parametrize(("n", "eps", "area", "c"), [
    (10**13, 1e6, 5.101e8, 1e-3),  # every bound at its largest: no overflow, zero noise
    (1, 1e-12, 1e-6, 1e3),  # smallest: 1e-15 cells advised, cells of 1e9 km^2
])
def test_recommendation_at_the_bounds_is_finite(n: int, eps: float, area: float,
                                                c: float) -> None:
    advice = recommend_resolution(n, eps, area, c=c)
    assert 0 <= advice.resolution <= 15
    assert np.isfinite(advice.table["log_distance"]).all()


@pytest.fixture(scope="module")
def setup():  # type: ignore[no-untyped-def]
    cells = np.unique(h3cells.grid_disk_lists(["85283473fffffff"], 3)[1])
    truth = truth_grid(cells, lon=[-121.9764] * 50, lat=[37.3458] * 50,
                       device_ids=np.arange(50), max_cells_per_device=2)
    off = np.array([0, 3, 6, 7])
    inc = incidence_from_cell_lists(cells, truth.partition_version, off,
                                    cells[[0, 1, 2, 2, 3, 4, 5]])
    return truth, inc


def test_fresh_answers_charge_their_own_release(setup) -> None:  # type: ignore[no-untyped-def]
    truth, inc = setup
    with PrivacyLedger(":memory:", epoch_budget=10.0) as ledger:
        before = ledger.remaining(0, "evaluation.regional")
        out = answer_fresh(truth, inc, epsilon=0.5, target=ReleaseTarget(ledger, 0))
        assert before - ledger.remaining(0, "evaluation.regional") == pytest.approx(0.5)
        audit = ledger.audit(0)
    assert audit.iloc[0]["structure_kind"] == "overlapping"
    assert out.attrs["sensitivity"] == 4  # k = 2, cell 2 lies in two queries
    assert len(out) == 3


def test_fresh_answers_noise_scale(setup) -> None:  # type: ignore[no-untyped-def]
    truth, inc = setup
    true = inc.matrix @ truth.counts
    noise = np.stack([answer_fresh(truth, inc, epsilon=1.0, target=Simulation(rng=s)).answer
                      for s in range(300)]) - true
    a = np.exp(-1 / 4.0)  # scale k c / epsilon = 4
    var = 2 * a / (1 - a) ** 2
    assert abs(noise.var() / var - 1) < 5 * np.sqrt(5.0 / noise.size)


def test_fresh_answers_refusals(setup) -> None:  # type: ignore[no-untyped-def]
    truth, inc = setup
    other = CellIncidence(inc.matrix, inc.cells_outside, "center", "elsewhere")
    with pytest.raises(PartitionMismatch, match="elsewhere"):
        answer_fresh(truth, other, epsilon=1.0, target=Simulation(rng=0))
    with pytest.raises(InvalidInput, match="epsilon=-0.5"):
        answer_fresh(truth, inc, epsilon=-0.5, target=Simulation(rng=0))
