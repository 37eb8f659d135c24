"""Add/remove neighbours (participation privacy) and the leaks of counts before the noise.

Under ``neighbours="add_remove"`` every release noises the count of clients as
well as their sums, nothing before the noise looks at a count, and floors,
suppression, cohorts and reliability come from the noised counts. The
statistical claims (interval coverage, unbiasedness, the sensitivities) are
checked against simulation with tolerances from the standard error.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from spatialdp.datasets import synthetic_fleet, us_states_partition
from spatialdp.exceptions import InvalidInput, InvalidSpec
from spatialdp.federated import (
    HistogramSpec,
    MetricSpec,
    UninformativeReleaseWarning,
    aggregate_histogram,
    aggregate_metric,
    device_report,
    regional_report,
    round_health,
)
from spatialdp.federated.coverage import release_coverage
from spatialdp.federated.device import coverage
from spatialdp.privacy import PrivacyLedger, ReleaseTarget, Simulation

LOSS = MetricSpec("loss", 0.0, 4.0)
HIST = HistogramSpec("error", edges=(0.5, 1.0, 2.0))
RATIO = MetricSpec("ratio", 0.0, 10.0, present="has_ratio")


@pytest.fixture(scope="module")
def states():
    return us_states_partition()


@pytest.fixture(scope="module")
def clients(states):
    fleet = synthetic_fleet(20_000, rng=3, partition=states)
    rng = np.random.default_rng(4)
    n = len(fleet)
    examples = pd.DataFrame({"client_id": fleet.device_id, "region_id": fleet.region_id,
                             "loss": rng.uniform(0.0, 3.0, n),
                             "error": rng.exponential(0.8, n)})
    return device_report(examples, loss_spec=LOSS, hist_spec=HIST, partition=states)


def _truth(clients: pd.DataFrame, states) -> tuple[pd.Series, pd.Series]:
    mean = clients.groupby("region_id", observed=True)["loss"].mean()
    count = clients.groupby("region_id", observed=True).size()
    return mean.reindex(states.region_ids), count.reindex(states.region_ids).fillna(0)


# ----------------------------------------------------------------------------- specs


def test_sensitivities_under_each_relation() -> None:
    assert LOSS.sensitivity_under("replace") == 4.0
    assert LOSS.sensitivity_under("add_remove") == 4.0
    assert MetricSpec("bias", -3.0, 1.0).sensitivity_under("add_remove") == 3.0
    assert MetricSpec("bias", -3.0, 1.0).sensitivity_under("replace") == 4.0
    assert HIST.sensitivity_under("replace") == 2.0  # mass leaves a bucket, lands in another
    assert HIST.sensitivity_under("add_remove") == 1.0  # one whole histogram added
    with pytest.raises(InvalidInput, match="neighbours='both' is not one of"):
        LOSS.sensitivity_under("both")


def test_a_histogram_whose_sensitivity_overflows_is_refused_at_construction() -> None:
    # 34d6ca8 accepted it (sensitivity inf) and refused it only at the release.
    with pytest.raises(InvalidSpec, match=r"mass_cap=1e\+308 gives an infinite replace-one"):
        HistogramSpec("err", edges=(1.0,), mass_cap=1e308)


def test_a_wide_but_finite_clip_range_is_accepted() -> None:
    # 34d6ca8 refused it as "infinite width" though the width 1e308 is finite.
    spec = MetricSpec("loss", 0.0, 1e308)
    assert spec.sensitivity == 1e308
    assert spec.sensitivity_under("add_remove") == 1e308
    with pytest.raises(InvalidSpec, match="infinite replace sensitivity"):
        MetricSpec("loss", -1e308, 1e308)


# ----------------------------------------------------------------------------- warnings


def _ratio_clients(n_present: int, cohort: int = 200) -> pd.DataFrame:
    present = np.zeros(cohort)
    present[:n_present] = 1.0
    examples = pd.DataFrame({"client_id": np.arange(cohort)})
    frame = device_report(examples.assign(loss=0.5), loss_spec=LOSS)
    frame = frame.drop(columns="loss").assign(ratio=present * 2.0, has_ratio=present)
    from spatialdp.federated.client_reports import DEVICE_SPECS, spec_tag

    frame[DEVICE_SPECS] = spec_tag([RATIO])
    return frame


def _warnings_of(release) -> list[str]:  # type: ignore[no-untyped-def]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        release()
    return [str(w.message) for w in caught if issubclass(w.category,
                                                         UninformativeReleaseWarning)]


def test_the_uninformative_warning_does_not_depend_on_who_has_the_metric() -> None:
    # 34d6ca8 built the text from the exact count of clients that have the metric: it
    # changed when one or two clients switched to absent, before the charge.
    spec = MetricSpec("ratio", 0.0, 10.0, present="has_ratio")
    seen = []
    for n_present in (3, 4, 5):
        frame = _ratio_clients(n_present, cohort=12)
        seen.append(_warnings_of(lambda f=frame: aggregate_metric(
            f, spec, epsilon=0.05, min_cohort=1, target=Simulation(rng=0))))
    assert seen[0]  # the bar is uninformative for every cohort of 12 at epsilon 0.05
    assert seen[0] == seen[1] == seen[2]


def test_under_add_remove_the_warning_comes_after_the_release_from_published_bars(
        clients, states) -> None:
    # A region's interval is narrower than the clip range only when its count noise
    # clears about twice its own 1 - alpha/2 quantile: about (alpha/2)**2 / 2 per region,
    # whatever epsilon. At alpha 0.05 that made this test fail 5% of the time (48
    # regions, both tails); at alpha 1e-6 it is below 1e-11.
    with PrivacyLedger(":memory:", epoch_budget=100.0) as ledger:
        with pytest.warns(UninformativeReleaseWarning, match="every published error bar spans"):
            regional_report(clients, states, [LOSS], epsilon=0.001, min_cohort=1, alpha=1e-6,
                            target=ReleaseTarget(ledger, epoch=0), neighbours="add_remove")
        assert ledger.spent(0) == 0.001  # charged: the warning came after the release


# ----------------------------------------------------------------------------- regional


def test_add_remove_is_one_charge_over_every_region_recorded_with_its_relation(
        clients, states) -> None:
    with PrivacyLedger(":memory:", epoch_budget=20.0) as ledger:
        report = regional_report(clients, states, [LOSS, HIST], epsilon={"loss": 0.3,
                                                                        "error": 0.2},
                                 min_cohort=50, target=ReleaseTarget(ledger, epoch=0),
                                 neighbours="add_remove")
        audit = ledger.audit()
    assert len(audit) == 1
    row = audit.iloc[0]
    assert row.neighbours == "add_remove"
    assert row.charged == pytest.approx(0.5)
    # every region is noised: the structure does not count the regions above the floor
    assert row.parts == states.n_regions
    assert report.neighbours == "add_remove"
    assert report.metadata()["neighbours"] == "add_remove"
    assert report["loss"].attrs["spatialdp"]["neighbours"] == "add_remove"
    assert "add/remove" in report.summary()
    assert (report["loss"].estimator == "ratio").all()


def test_add_remove_cohorts_are_the_shared_noised_counts(clients, states) -> None:
    report = regional_report(clients, states, [LOSS, HIST], epsilon=0.5, min_cohort=50,
                             target=Simulation(rng=1), neighbours="add_remove")
    _, count = _truth(clients, states)
    loss, hist = report["loss"], report["error"]
    shown = ~loss.suppressed.to_numpy()
    # one cohort per region: the mean metrics share one noised count
    np.testing.assert_array_equal(loss.cohort[shown].to_numpy(dtype=float),
                                  hist.cohort[shown].to_numpy(dtype=float))
    noise = loss.cohort[shown].to_numpy(dtype=float) - count[shown].to_numpy()
    assert (noise != 0).mean() > 0.5  # noised, not exact (scale 1/0.25 per region)
    # the floor is applied to the noised count, never to the exact one
    assert (loss.cohort[shown].to_numpy(dtype=float) >= 50).all()


def test_replace_cohorts_stay_exact_and_public(clients, states) -> None:
    report = regional_report(clients, states, [LOSS], epsilon=0.5, min_cohort=50,
                             target=Simulation(rng=1))
    _, count = _truth(clients, states)
    shown = ~report["loss"].suppressed.to_numpy()
    np.testing.assert_array_equal(report["loss"].cohort[shown].to_numpy(dtype=float),
                                  count[shown].to_numpy())
    assert report.suppressed_regions == int((count < 50).sum())


def test_add_remove_every_region_below_the_floor_is_published_suppressed_and_charged(
        clients, states) -> None:
    # Under replace-one the report is refused (cohorts are public); under add/remove the
    # decision needs the noised counts, so the release happens and shows nothing.
    with PrivacyLedger(":memory:", epoch_budget=20.0) as ledger:
        target = ReleaseTarget(ledger, epoch=0)
        with pytest.raises(InvalidInput, match="every region is below the cohort floor"):
            regional_report(clients, states, [LOSS], epsilon=0.5, min_cohort=100_000,
                            target=target)
        assert ledger.spent(0) == 0
        report = regional_report(clients, states, [LOSS], epsilon=0.5, min_cohort=100_000,
                                 target=target, neighbours="add_remove")
        assert ledger.spent(0) == 0.5
    assert report["loss"].suppressed.all()
    assert report.suppressed_regions == states.n_regions
    assert report["loss"].value.isna().all()
    assert report["loss"].cohort.isna().all()


@pytest.mark.parametrize("spec", [LOSS, HIST], ids=["mean", "histogram"])
def test_add_remove_intervals_cover_at_least_their_level(clients, states, spec) -> None:
    alpha, reps = 0.1, 120
    if isinstance(spec, MetricSpec):
        truth = clients.groupby("region_id", observed=True)["loss"].mean()
    else:
        truth = clients.groupby("region_id", observed=True)[spec.columns[-1]].mean()
    truth = truth.reindex(states.region_ids)
    hits = total = 0
    sim = Simulation(rng=11)
    for _ in range(reps):
        report = regional_report(clients, states, [spec], epsilon=0.3, min_cohort=20,
                                 target=sim, alpha=alpha, neighbours="add_remove")
        frame = report[spec.name]
        shown = ~frame.suppressed.to_numpy()
        t = truth.to_numpy()[shown]
        hits += int(((frame.ci_low.to_numpy()[shown] <= t)
                     & (t <= frame.ci_high.to_numpy()[shown])).sum())
        total += int(shown.sum())
    rate = hits / total
    se = math.sqrt(alpha * (1 - alpha) / total)
    assert total > 30 * reps
    assert rate >= 1 - alpha - 4 * se  # conservative by construction (union bound)


def test_add_remove_values_are_unbiased_where_the_count_is_large(clients, states) -> None:
    truth, count = _truth(clients, states)
    big = count.to_numpy() >= 800
    reps = 300
    values = np.empty((reps, int(big.sum())))
    sim = Simulation(rng=12)
    for i in range(reps):
        report = regional_report(clients, states, [LOSS], epsilon=0.5, min_cohort=20,
                                 target=sim, neighbours="add_remove")
        values[i] = report["loss"].value.to_numpy()[big]
    err = values.mean(axis=0) - truth.to_numpy()[big]
    se = values.std(axis=0, ddof=1) / math.sqrt(reps)
    # The ratio's bias is O(var(count) / count^2) ~ 1e-5 here, far below the SE.
    assert np.all(np.abs(err) < 4.5 * se), (err / se).round(2)


def test_add_remove_costs_wider_bars_than_replace(clients, states) -> None:
    reps = 40
    bars = {}
    for relation in ("replace", "add_remove"):
        sim = Simulation(rng=5)
        bars[relation] = np.nanmedian([regional_report(
            clients, states, [LOSS], epsilon=0.5, min_cohort=50, target=sim,
            neighbours=relation)["loss"].error_bar.to_numpy() for _ in range(reps)])
    assert 2.0 < bars["add_remove"] / bars["replace"] < 4.0  # the price, see docs/


# ----------------------------------------------------------------------------- global


def test_aggregate_metric_add_remove_floor_is_applied_after_the_noise() -> None:
    examples = pd.DataFrame({"client_id": np.arange(30), "loss": 1.0})
    clients = device_report(examples, loss_spec=LOSS)
    with PrivacyLedger(":memory:", epoch_budget=100.0) as ledger:
        target = ReleaseTarget(ledger, epoch=0)
        from spatialdp.exceptions import CohortTooSmall

        with pytest.raises(CohortTooSmall, match="cohort=30 is below the floor"):
            aggregate_metric(clients, LOSS, epsilon=1.0, min_cohort=1000, target=target)
        assert ledger.spent(0) == 0  # replace-one: the cohort is public, refused first
        rel = aggregate_metric(clients, LOSS, epsilon=1.0, min_cohort=1000, target=target,
                               neighbours="add_remove")
        assert ledger.spent(0) == 1.0
        assert list(ledger.audit().neighbours) == ["add_remove"]
    assert rel.suppressed
    assert math.isnan(rel.value)
    assert rel.neighbours == "add_remove"


def test_aggregate_histogram_add_remove_interval_coverage() -> None:
    rng = np.random.default_rng(8)
    examples = pd.DataFrame({"client_id": np.arange(400), "error": rng.exponential(0.8, 400)})
    clients = device_report(examples, hist_spec=HIST)
    truth = clients[HIST.columns].mean().to_numpy()
    alpha, reps = 0.1, 400
    sim = Simulation(rng=9)
    hits = 0
    for _ in range(reps):
        rel = aggregate_histogram(clients, HIST, epsilon=0.5, min_cohort=50, target=sim,
                                  neighbours="add_remove")
        low, high = rel.conf_int()
        hits += int(((low <= truth) & (truth <= high)).sum())
    total = reps * HIST.n_buckets
    assert rel.estimator == "ratio"
    assert hits / total >= 1 - alpha - 4 * math.sqrt(alpha * (1 - alpha) / total)


# ----------------------------------------------------------------------------- counts


def test_round_health_and_coverage_halve_their_sensitivity_under_add_remove(states) -> None:
    status = np.array(["returned"] * 900 + ["dropped"] * 100)
    where = np.full(1000, "CO")
    scales = {}
    for relation in ("replace", "add_remove"):
        sim = Simulation(rng=0)
        draws = np.concatenate([round_health(status, where, states, epsilon=1.0, target=sim,
                                             granularity=1, neighbours=relation)
                                .table.loc["CO", ["returned", "dropped", "rejected"]]
                                .to_numpy(dtype=float) - [900, 100, 0] for _ in range(400)])
        scales[relation] = float(np.mean(np.abs(draws)))
    # E|discrete Laplace(b)| ~ b for b >= 1: 2 vs 1
    assert scales["replace"] / scales["add_remove"] == pytest.approx(2.0, rel=0.15)
    lon, lat = np.full(300, -105.5), np.full(300, 39.0)
    rows = coverage(lon, lat, np.arange(300), states, max_cells=1)
    for relation, factor in (("replace", 2.0), ("add_remove", 1.0)):
        out = release_coverage(rows, states, epsilon=1.0, target=Simulation(rng=0),
                               neighbours=relation)
        assert out.neighbours == relation
        expected = float(np.log(1 / 0.05)) * factor  # discrete Laplace bar ~ b ln(1/alpha)
        assert float(out.frame.error_bar.iloc[0]) == pytest.approx(expected, abs=1.0)


# ----------------------------------------------------------------------------- monitoring


def test_ratio_estimates_are_compared_and_trended_at_their_false_alarm_rate(
        clients, states) -> None:
    """Add/remove frames (ratio estimates): no change fires at most alpha, by Monte Carlo."""
    from spatialdp.federated import compare_reports, drift

    alpha, reps = 0.2, 8
    sim = Simulation(rng=21)
    fired = trended = compared = tested = 0
    for _ in range(reps):
        frames = [regional_report(clients, states, [LOSS], epsilon=0.3, min_cohort=30,
                                  target=sim, neighbours="add_remove")["loss"]
                  for _ in range(3)]
        out = compare_reports(frames[1], frames[0], alpha=alpha, same_clients=True)
        fired += int(out.fired.sum())
        compared += len(out)
        history = pd.concat([f.assign(round_index=i + 1) for i, f in enumerate(frames)])
        trend = drift(history.drop(columns="geometry").reset_index(), window=3, alpha=alpha,
                      same_clients=True)
        trended += int(trend.drifting.sum())
        tested += int((trend.rounds >= 3).sum())
    for hits, total in ((fired, compared), (trended, tested)):
        se = math.sqrt(alpha * (1 - alpha) / total)
        assert abs(hits / total - alpha) < 4 * se, (hits, total)


def test_a_real_change_of_a_ratio_estimate_fires(states) -> None:
    from spatialdp.federated import compare_reports

    fleet = synthetic_fleet(20_000, rng=3, partition=states)

    def week(co_loss: float):  # type: ignore[no-untyped-def]
        frame = pd.DataFrame({"client_id": fleet.device_id, "region_id": fleet.region_id,
                              "loss": np.where(fleet.region_id == "CA", co_loss, 1.0)})
        made = device_report(frame, loss_spec=LOSS, partition=states)
        return regional_report(made, states, [LOSS], epsilon=1.0, min_cohort=100,
                               target=Simulation(rng=2), neighbours="add_remove")["loss"]

    out = compare_reports(week(3.0), week(1.0), alpha=0.01, same_clients=True)
    assert out.fired.loc["CA"]
    assert out.fired.sum() <= 2


# ----------------------------------------------------------------------------- paths


def test_flower_evaluation_releases_under_add_remove(states) -> None:
    from spatialdp.flower._flwr import flwr_modules
    from spatialdp.flower.demo import make_clients
    from spatialdp.flower.simulation import run_inprocess
    from spatialdp.flower.strategy import SpatialDPStrategy

    fedavg = flwr_modules()[2].FedAvg(min_available_clients=2, fraction_fit=0.1)
    clients, _ = make_clients(200, rng=5)
    with PrivacyLedger(":memory:", epoch_budget=40.0) as ledger:
        strategy = SpatialDPStrategy(fedavg, partition=states, metrics=[LOSS], epsilon=4.0,
                                     target=ReleaseTarget(ledger, epoch=0), min_cohort=3,
                                     neighbours="add_remove")
        history = run_inprocess(strategy, clients, num_rounds=2, max_workers=2)
        audit = ledger.audit(0)
    assert list(audit.neighbours) == ["add_remove", "add_remove"]
    for release in strategy.releases.values():
        assert release.report.neighbours == "add_remove"
        assert release.metrics["neighbours"] == "add_remove"
        assert (release.report["loss"].estimator == "ratio").all()
    assert len(history.losses_distributed) == 2
    table = strategy.round_table()  # no exact count of people under add/remove
    assert not [c for c in table.columns if c.endswith(("_selected", "_received", "_used",
                                                        "_dropped", "_wanted", "_offline"))]
    assert set(table.neighbours) == {"add_remove"}


def test_the_dask_path_releases_under_add_remove_as_memory_does(clients, states) -> None:
    import dask.dataframe as dd

    frame = dd.from_pandas(clients, npartitions=4)
    with PrivacyLedger(":memory:", epoch_budget=10.0) as ledger:
        on_dask = regional_report(frame, states, [LOSS, HIST], epsilon=0.5, min_cohort=50,
                                  target=Simulation(rng=9), neighbours="add_remove")
        memory = regional_report(clients, states, [LOSS, HIST], epsilon=0.5, min_cohort=50,
                                 target=Simulation(rng=9), neighbours="add_remove")
        regional_report(frame, states, [LOSS], epsilon=0.5, min_cohort=50,
                        target=ReleaseTarget(ledger, epoch=0), neighbours="add_remove")
        assert list(ledger.audit(0).neighbours) == ["add_remove"]
    assert on_dask.neighbours == "add_remove"
    for name in ("loss", "error"):
        a, b = on_dask[name], memory[name]
        np.testing.assert_allclose(a.value.to_numpy(dtype=float),
                                   b.value.to_numpy(dtype=float), rtol=1e-9)
        np.testing.assert_array_equal(a.cohort.to_numpy(dtype=float, na_value=np.nan),
                                      b.cohort.to_numpy(dtype=float, na_value=np.nan))


def test_significance_of_ratio_estimates_flags_equal_regions_at_alpha(states) -> None:
    """Add/remove frames against an add/remove national value: equal regions flag at alpha."""
    from spatialdp.viz import significance_table

    fleet = synthetic_fleet(20_000, rng=3, partition=states)
    made = device_report(pd.DataFrame({"client_id": fleet.device_id,
                                       "region_id": fleet.region_id, "loss": 1.0}),
                         loss_spec=LOSS, partition=states)
    alpha, reps = 0.1, 10
    sim = Simulation(rng=31)
    flagged = tested = 0
    for _ in range(reps):
        frame = regional_report(made, states, [LOSS], epsilon=0.5, min_cohort=50, target=sim,
                                neighbours="add_remove")["loss"]
        national = aggregate_metric(made, LOSS, epsilon=0.5, target=sim,
                                    neighbours="add_remove")
        table = significance_table(frame, national, alpha=alpha)  # every cohort measures 1.0
        shown = table.verdict != "suppressed"
        flagged += int(table.verdict[shown].isin(["above", "below"]).sum())
        tested += int(shown.sum())
    se = math.sqrt(alpha * (1 - alpha) / tested)
    assert abs(flagged / tested - alpha) < 4 * se, (flagged, tested)
