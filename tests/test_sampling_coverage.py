"""Coverage score, Coverage result, detectors, density strata, regional merges, figures."""

from __future__ import annotations

import json
from decimal import Decimal

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

from spatialdp.datasets import synthetic_fleet, us_states_partition
from spatialdp.exceptions import BudgetExceeded, InvalidInput
from spatialdp.geo import Partition
from spatialdp.privacy import PrivacyLedger, ReleaseTarget
from spatialdp.privacy.target import Simulation
from spatialdp.sampling import (
    ParticipationPolicy,
    Strata,
    StratifiedSampler,
    allocate,
    coverage_score,
    density_strata,
    release_epoch_coverage,
)
from spatialdp.sampling.composition import published_composition
from spatialdp.sampling.coverage import Coverage, epoch_coverage
from spatialdp.sampling.plots import plot_allocation, plot_coverage_map, plot_staircase
from spatialdp.sampling.regional import merge_suppressed_regions
from spatialdp.sampling.score import coverage_drift, over_represented
from spatialdp.sampling.simulation import SEED_POPULATIONS, row_strata, simulate_rounds


def _policy(cap: int, rounds: int) -> ParticipationPolicy:
    return ParticipationPolicy(participation_cap=cap, epsilon_per_round=0.25,
                               rounds_per_epoch=rounds)


@pytest.fixture(scope="module")
def states_epoch() -> tuple[StratifiedSampler, object, list[object]]:
    strata = Strata(us_states_partition(), basis="administrative")
    fleet = synthetic_fleet(30_000, rng=3)
    sampler = StratifiedSampler(strata, cohort=150, policy=_policy(1, 8), mode="proportional",
                                min_stratum_cohort=110)
    state = sampler.new_state(strata.positions(fleet.region_id.to_numpy()),
                              target=Simulation(rng=1))
    rounds = [sampler.select(state, r) for r in range(8)]
    return sampler, state, rounds


def test_score_is_one_exactly_when_seats_follow_sqrt_shares() -> None:
    pops = list(SEED_POPULATIONS.values())
    sqrt = allocate(SEED_POPULATIONS, 80).seats.to_numpy()
    assert coverage_score(sqrt, pops) == 1.0
    prop = allocate(SEED_POPULATIONS, 80, mode="proportional").seats.to_numpy()
    # 1 - L1 distance / cohort: |38-27|+|24-22|+|11-15|+|5-10|+|2-6| = 26 of 80.
    assert coverage_score(prop, pops) == pytest.approx(1 - 26 / 80)
    with pytest.raises(InvalidInput, match="does not match populations"):
        coverage_score([1, 2], pops)


def test_coverage_reports_blind_spots_merges_and_epsilon(states_epoch: tuple) -> None:
    sampler, state, _ = states_epoch
    cov = epoch_coverage(sampler, state)
    table = cov.table
    assert cov.blind_spots == list(table.index[table.clients_sampled == 0])
    assert cov.share_strata_sampled == pytest.approx(1 - len(cov.blind_spots) / 48)
    assert cov.epsilon_per_client == pytest.approx(0.25)
    assert len(cov.merges) == int(table.merged.sum()) - len(set(table.group[table.merged]))
    assert int(table.selections.sum()) == sum(r.clients.size for r in states_epoch[2])
    assert list(cov.score_history.index) == list(range(8))
    payload = json.loads(cov.to_json())
    assert payload["blind_spots"] == cov.blind_spots
    assert payload["merges"][0]["reason"].startswith("eligible pool")
    assert len(payload["strata_table"]) == 48
    frame = cov.to_geodataframe()
    assert frame.crs.to_epsg() == 4326
    assert "blind_spot" in frame
    assert "blind spots" in cov.summary()
    merges = cov.merges_table()
    assert len(merges) == len(cov.merges)
    assert merges.reason.str.contains("below the floor 110").all()


def test_h3_strata_report_the_share_of_cells() -> None:
    import h3

    from spatialdp.geo import Partition

    cells = sorted(h3.grid_disk(h3.latlng_to_cell(40.0, -100.0, 4), 2))
    strata = Strata(Partition.from_h3_cells(cells), basis="h3")
    fleet = np.repeat(np.arange(19), 50)
    sampler = StratifiedSampler(strata, cohort=9, policy=_policy(1, 2), mode="proportional")
    state = sampler.new_state(fleet, target=Simulation(rng=0))
    sampler.select(state, 0)
    cov = epoch_coverage(sampler, state)
    assert cov.n_cells == 19
    assert cov.cells_sampled == 9
    assert cov.share_cells_sampled == pytest.approx(9 / 19)
    assert len(cov.blind_spots) == 10


def test_alerts_fire_on_drift_and_unfilled_seats() -> None:
    strata, fleet = row_strata(SEED_POPULATIONS)
    sampler = StratifiedSampler(strata, cohort=98, policy=_policy(1, 8), min_stratum_cohort=0)
    state = sampler.new_state(fleet, target=Simulation(rng=0))
    for r in range(6):
        sampler.select(state, r)
    kinds = {a.kind for a in epoch_coverage(sampler, state).alerts}
    assert {"coverage_drift", "unfilled_allocation", "pool_exhausted"} <= kinds
    assert coverage_drift([0.99, 0.98, 0.97]) == []
    over = over_represented(np.array([40, 40]), np.array([1000, 10]), ["a", "b"])
    assert [i.region_id for i in over] == ["b"]


def test_density_strata_are_frozen_versioned_and_assign_clients() -> None:
    strata = density_strata()
    assert strata.order == ["urban", "suburban", "exurban", "rural", "remote"]
    assert density_strata().version == strata.version
    fleet = synthetic_fleet(20_000, rng=0)
    positions = strata.assign(lon=fleet.lon.to_numpy(), lat=fleet.lat.to_numpy())
    assert (positions >= 0).all()
    counts = strata.population(positions)
    assert counts["urban"] > counts["suburban"] > counts["remote"] > 0
    # The published mapping between density strata and the states is fixed.
    walk = strata.crosswalk(us_states_partition())
    assert set(walk.stratum) == set(strata.order)
    assert walk.cells.sum() > 600
    assert walk.strata_version.nunique() == 1


def test_density_thresholds_are_validated() -> None:
    with pytest.raises(InvalidInput, match="thresholds"):
        density_strata(thresholds=(1, 2, 3, 4))


def test_a_region_suppressed_k_rounds_is_merged_and_published_with_its_members() -> None:
    states = us_states_partition()
    merged, members = merge_suppressed_regions(states, [{"VT"}, {"VT", "RI"}, {"VT"}], 2,
                                               counts={"NH": 40, "NY": 900, "MA": 700})
    assert merged.n_regions == 47
    assert "NH+VT" in merged.region_ids
    rows = members[members.merged_id == "NH+VT"]
    assert sorted(rows.region_id) == ["NH", "VT"]
    assert "suppressed in each of the last 2 rounds" in rows.set_index("region_id").reason["VT"]
    assert merged.version != states.version
    # RI was suppressed once only: not merged. Fewer than k rounds: nothing merges.
    assert "RI" in merged.region_ids
    same, table = merge_suppressed_regions(states, [{"VT"}], 2)
    assert same is states
    assert not table.merged.any()


def test_regional_merge_refuses_unknown_regions() -> None:
    with pytest.raises(InvalidInput, match="names regions that are not in"):
        merge_suppressed_regions(us_states_partition(), [{"Atlantis"}], 1)
    with pytest.raises(InvalidInput, match="k=0 is below the limit"):
        merge_suppressed_regions(us_states_partition(), [{"VT"}], 0)


def test_composition_is_rounded_merged_and_delayed(states_epoch: tuple) -> None:
    _, _, rounds = states_epoch
    table = published_composition(rounds, current_round=7, delay_rounds=2, rounding=10)
    assert table.round_index.max() == 5
    assert (table.clients % 10 == 0).all()
    assert set(table[table.round_index == 5].group) == set(rounds[5].groups)
    with pytest.raises(InvalidInput, match="rounding=0 is below the limit"):
        published_composition(rounds, current_round=7, rounding=0)
    with pytest.raises(InvalidInput, match="is not a sequence of RoundCohort"):
        published_composition("rounds", current_round=7)  # type: ignore[arg-type]


def test_simulation_table_has_a_staircase_per_mode() -> None:
    strata, fleet = row_strata(SEED_POPULATIONS)
    table = simulate_rounds(strata, fleet, cohort=80, rounds=6, participation_cap=1,
                            min_stratum_cohort=0, rng=0)
    remote = table[table.group == "remote"].pivot(index="round_index", columns="mode",
                                                  values="eligible_remaining")
    seats = {m: allocate(SEED_POPULATIONS, 80, mode=m).seats["remote"] for m in remote}
    for mode in remote:
        expected = np.maximum(18 - seats[mode] * np.arange(1, 7), 0)
        np.testing.assert_array_equal(remote[mode].to_numpy(), expected)


def test_figures_draw_blind_spots_hatched_and_merges_outlined(states_epoch: tuple) -> None:
    sampler, state, _ = states_epoch
    cov = epoch_coverage(sampler, state)
    ax = plot_coverage_map(cov)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0] == (f"blind spot: clients, none sampled this epoch "
                         f"({len(cov.blind_spots)} strata)")
    assert any(text.startswith("merged strata, one outline") for text in labels)
    hatched = [p for c in ax.collections for p in [c] if c.get_hatch() == "xxx"]
    assert len(hatched) == (1 if cov.blind_spots else 0)
    merged_labels = [text for text in labels if text.startswith("merged: ")]
    assert len(merged_labels) == len(set(cov.table.group[cov.table.merged]))
    plt.close(ax.figure)
    ax = plot_allocation(SEED_POPULATIONS, 80)
    assert len(ax.containers) == 3
    plt.close(ax.figure)
    strata, fleet = row_strata(SEED_POPULATIONS)
    table = simulate_rounds(strata, fleet, cohort=80, rounds=4, participation_cap=1,
                            modes=("sqrt",), min_stratum_cohort=0, rng=0)
    ax = plot_staircase(table, "remote")
    assert ax.get_lines()[0].get_ydata()[0] == 18
    plt.close(ax.figure)
    with pytest.raises(InvalidInput, match="level='report' needs a report partition"):
        plot_coverage_map(cov, level="report")
    with pytest.raises(InvalidInput, match="not a Coverage"):
        plot_coverage_map(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="group='nowhere' is not a group"):
        plot_staircase(table, "nowhere")


def test_coverage_result_type() -> None:
    assert Coverage.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_sampling_on_density_while_reporting_on_states() -> None:
    strata = density_strata()
    states = us_states_partition()
    fleet = synthetic_fleet(20_000, rng=5)
    lon, lat = fleet.lon.to_numpy(), fleet.lat.to_numpy()
    sampler = StratifiedSampler(strata, cohort=100, policy=_policy(1, 2))
    state = sampler.new_state(strata.assign(lon=lon, lat=lat), target=Simulation(rng=0))
    sampler.select(state, 0)
    cells = strata.cell_partition.assign(lon=lon, lat=lat).positions
    cov = epoch_coverage(sampler, state, client_cells=cells, report=states,
                         client_regions=states.assign(lon=lon, lat=lat).positions)
    report = cov.report_table
    assert int(report.clients.sum()) == 20_000
    assert int(report.clients_sampled.sum()) == 100
    assert cov.blind_regions == list(report.index[(report.clients > 0)
                                                  & (report.clients_sampled == 0)])
    assert 0 < cov.cells_sampled <= 100
    assert cov.n_cells == strata.cell_partition.n_regions
    assert json.loads(cov.to_json())["blind_regions"] == cov.blind_regions
    cells_table = cov.cell_table
    assert int(cells_table.clients_sampled.sum()) == 100
    assert int(cells_table.blind_spot.sum()) == int(
        ((cells_table.clients > 0) & (cells_table.clients_sampled == 0)).sum())
    ax = plot_coverage_map(cov, level="cells", cells=strata.cell_partition)
    hatched = [c for c in ax.collections if c.get_hatch() == "xxx"]
    assert len(hatched) == 1
    assert len(hatched[0].get_paths()) == int(cells_table.blind_spot.sum())
    plt.close(ax.figure)
    ax = plot_coverage_map(cov, level="report")
    assert ax.get_legend().get_texts()[0].get_text().endswith(
        f"({len(cov.blind_regions)} regions)")
    plt.close(ax.figure)
    with pytest.raises(InvalidInput, match="not one region position per client"):
        epoch_coverage(sampler, state, report=states, client_regions=[0])


def test_polygon_strata_crosswalk_splits_area_between_report_regions() -> None:
    import geopandas as gpd
    import shapely

    from spatialdp.geo import Partition

    strata, _ = row_strata({"a": 1, "b": 1})  # unit squares [0, 1] and [1, 2]
    halves = gpd.GeoDataFrame({"id": ["west", "east"]}, crs=4326, geometry=[
        shapely.box(0, 0, 1.5, 1), shapely.box(1.5, 0, 2, 1)])
    walk = strata.crosswalk(Partition.from_geodataframe(halves, "id"))
    shares = walk.set_index(["stratum", "region_id"]).area_share
    assert shares[("a", "west")] == pytest.approx(1.0)
    assert shares[("b", "west")] == pytest.approx(0.5, abs=1e-3)
    assert shares[("b", "east")] == pytest.approx(0.5, abs=1e-3)


@pytest.mark.parametrize(("call", "match"), [
    (lambda: merge_suppressed_regions(us_states_partition(), [{"VT"}], 1, counts=[1]),
     "counts=.* is a list, not a mapping"),
    (lambda: density_strata(thresholds=[1, 2, 3, 4]), "thresholds=.* is not four decreasing"),
    (lambda: plot_allocation(SEED_POPULATIONS, 80, order=["urban"]),
     "order=.* is not a list of the strata"),
    (lambda: simulate_rounds(row_strata(SEED_POPULATIONS)[0], [0, 1], cohort=1, rounds=1,
                             participation_cap=1, modes="sqrt"), "modes='sqrt' is not a"),
    (lambda: row_strata(SEED_POPULATIONS)[0].population([0.5]), "not whole-number positions"),
    (lambda: Strata(row_strata(SEED_POPULATIONS)[0].partition, basis="h3", order=3),
     "order=3 is not a permutation"),
])
def test_helpers_refuse_bad_arguments(call: object, match: str) -> None:
    before = set(plt.get_fignums())  # other tests may have left figures open
    with pytest.raises(InvalidInput, match=match):
        call()  # type: ignore[operator]
    assert set(plt.get_fignums()) == before  # a refused figure leaves no open figure


def test_interactive_map_flags_blind_spots_and_merged_groups(states_epoch: tuple) -> None:
    from spatialdp.sampling import explore_coverage

    sampler, state, _ = states_epoch
    cov = epoch_coverage(sampler, state)
    html = explore_coverage(cov).get_root().render()
    assert cov.blind_spots  # this epoch has one (proportional allocation)
    assert "BLIND SPOT: clients, none sampled this epoch" in html
    for group in set(cov.table.group[cov.table.merged]):
        assert f"merged: {group}" in html
    with pytest.raises(InvalidInput, match="not a Coverage"):
        explore_coverage(None)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def sampled_epoch() -> dict[str, object]:
    states = us_states_partition()
    fleet = synthetic_fleet(5_000, rng=0)
    where = states.assign(fleet).positions
    cells = Partition.from_h3_cover(states.regions, 2, containment="overlap", name="h3r2")
    sampler = StratifiedSampler(Strata(states, basis="administrative"), cohort=1_000,
                                policy=ParticipationPolicy(1, 0.1, 1))
    state = sampler.new_state(where, target=Simulation(rng=0))
    sampler.select(state, 1)
    return {"state": state, "report": states, "client_regions": where, "cells": cells,
            "client_cells": cells.assign(fleet).positions}


def test_epoch_coverage_regions_and_cells_are_one_charge(sampled_epoch: dict) -> None:
    with PrivacyLedger(":memory:", epoch_budget=10.0) as ledger:  # regional line: 2.4
        out = release_epoch_coverage(**sampled_epoch, epsilon=2.0,
                                     target=ReleaseTarget(ledger, epoch=0))
        audit = ledger.audit(0)
    assert len(audit) == 1
    assert audit.charged.iloc[0] == 2.0 == out.epsilon
    assert audit.what.iloc[0].startswith("epoch 0 coverage counts")
    assert out.regions.epsilon + out.cells.epsilon == 2.0
    assert out.regions.accounting == out.cells.accounting
    assert out.regions.accounting["accounting"] == "ledger"


def test_epoch_coverage_refused_whole_when_the_cells_do_not_fit(sampled_epoch: dict) -> None:
    # The region map alone (1.5) would fit the regional line (2.4); both (3.0) do not.
    with PrivacyLedger(":memory:", epoch_budget=10.0) as ledger:
        with pytest.raises(BudgetExceeded, match="nothing was charged"):
            release_epoch_coverage(**sampled_epoch, epsilon=3.0, cell_share=0.5,
                                   target=ReleaseTarget(ledger, epoch=0))
        assert ledger.spent(0) == 0.0
        assert ledger.audit(0).empty


def test_epoch_coverage_never_charges_more_than_its_epsilon(sampled_epoch: dict) -> None:
    # A pair whose float split used to add up to one step above epsilon.
    epsilon, share = 3.8137776114651305, 0.01206393228408848
    out = release_epoch_coverage(**sampled_epoch, epsilon=epsilon, cell_share=share,
                                 target=Simulation(rng=0))
    assert out.epsilon <= epsilon
    assert Decimal(repr(out.regions.epsilon)) + Decimal(repr(out.cells.epsilon)) <= Decimal(
        repr(epsilon))
