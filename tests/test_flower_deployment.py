"""What a Flower deployment meets (issue 24): early refusals, per-client instructions,
per-region error bars and clamped displays in History, SecAgg+ shares, the trust statement."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from spatialdp.datasets import synthetic_fleet, us_states_partition
from spatialdp.exceptions import BudgetExceeded, InvalidInput
from spatialdp.federated import HistogramSpec, MetricSpec, device_report
from spatialdp.flower._flwr import flwr_modules
from spatialdp.flower.codec import KEY_SPECS, encode_report
from spatialdp.flower.demo import make_clients
from spatialdp.flower.evaluation import RELIABILITY_CODES, release_evaluation
from spatialdp.flower.secagg import EVALUATION_TRUST, check_secaggplus
from spatialdp.flower.simulation import run_inprocess
from spatialdp.flower.strategy import SpatialDPStrategy
from spatialdp.privacy import PrivacyLedger, ReleaseTarget, Simulation
from tests._flower import make_manager, make_sampler

common, server, flwr_strategy = flwr_modules()
from flwr.server.workflow import SecAggPlusWorkflow  # noqa: E402

LOSS = MetricSpec("loss", 0.0, 3.0)
HIST = HistogramSpec("abs_error", edges=(0.25, 0.5, 0.75))


@pytest.fixture(scope="module")
def states():
    return us_states_partition()




def _wrap(states, inner=None, **kwargs):
    kwargs.setdefault("target", Simulation(rng=0))
    kwargs.setdefault("min_cohort", 5)
    return SpatialDPStrategy(inner or flwr_strategy.FedAvg(min_available_clients=2),
                             partition=states, metrics=[LOSS], epsilon=0.5, **kwargs)


# ----------------------------------------------------------------------------- late failures
def test_the_issues_infeasible_plan_is_refused_at_construction_with_nothing_charged(states):
    """Cohort 20, cap 1, 3 rounds, 50 clients: 60 seats wanted, 50 available."""
    with PrivacyLedger(":memory:", epoch_budget=10.0) as ledger:
        with pytest.raises(InvalidInput, match=r"fit_sampler.cohort=20 cannot be filled for "
                           r"the 3 planned rounds by a fleet of 50 clients under "
                           r"participation_cap=1: 3 x 20 = 60 seats, the fleet has 50 x 1 = 50"
                           r"; lower the cohort to at most 16, raise the participation cap "
                           r"to 2"):
            _wrap(states, target=ReleaseTarget(ledger, epoch=0), num_rounds=3, fleet_size=50,
                  fit_sampler=make_sampler(states, cohort=20, cap=1, rounds=3))
        assert ledger.spent(0) == 0.0
    _wrap(states, num_rounds=3, fleet_size=60,
          fit_sampler=make_sampler(states, cohort=20, cap=1, rounds=3))  # 60 seats: feasible


@pytest.mark.parametrize("kind", ["fit", "evaluate"])
def test_without_fleet_size_the_plan_is_refused_when_the_fleet_registers(states, kind):
    """The old code trained and charged rounds 1-2, then raised in round 3."""
    clients, _ = make_clients(50, rng=3)
    with PrivacyLedger(":memory:", epoch_budget=10.0) as ledger:
        strategy = _wrap(states, target=ReleaseTarget(ledger, epoch=0), num_rounds=3,
                         **{f"{kind}_sampler": make_sampler(states, cohort=20, cap=1, rounds=3)})
        with pytest.raises(InvalidInput, match=rf"{kind}_sampler.cohort=20 .* 3 x 20 = 60 "
                           r"seats, the fleet has 50 x 1 = 50"):
            run_inprocess(strategy, clients, num_rounds=3, max_workers=2)
        assert ledger.spent(0) == 0.0
        assert strategy.releases == {}
        assert strategy._fit_rounds == set()  # no round trained


def test_rounds_cohorts_and_budget_of_the_plan_are_refused_at_construction(states):
    with pytest.raises(InvalidInput, match=r"num_rounds=4 exceeds the evaluate sampler's "
                       r"rounds_per_epoch=3.*pass num_rounds <= 3"):
        _wrap(states, num_rounds=4, evaluate_sampler=make_sampler(states, cohort=20, cap=1,
                                                               rounds=3))
    with pytest.raises(InvalidInput, match=r"evaluate_sampler.cohort=20 is below "
                       r"min_cohort=50.*raise the evaluation cohort to at least 50"):
        _wrap(states, min_cohort=50, evaluate_sampler=make_sampler(states, cohort=20, cap=1,
                                                                rounds=3))
    with PrivacyLedger(":memory:", epoch_budget=10.0) as ledger:
        line = ledger.remaining(0, "evaluation.regional")
        affordable = math.floor(line / 0.5)  # epsilon 0.5 per evaluation round
        _wrap(states, target=ReleaseTarget(ledger, epoch=0), num_rounds=affordable)
        with pytest.raises(BudgetExceeded):
            _wrap(states, target=ReleaseTarget(ledger, epoch=0), num_rounds=affordable + 1)
        assert ledger.spent(0) == 0.0


def test_an_exhausted_fleet_mid_run_shrinks_the_cohort_instead_of_raising(states):
    """Cap 2, cohort 10, 3 rounds on 15 clients: 30 seats, feasible on paper, but seats
    concentrate on clients that hit the cap; the old code raised 'cohort exceeds the
    eligible fleet' inside Flower's loop."""
    clients, _ = make_clients(15, rng=5)
    manager = make_manager(clients)
    strategy = _wrap(states, num_rounds=3,
                     evaluate_sampler=make_sampler(states, cohort=10, cap=2, rounds=3),
                     target=Simulation(rng=1), min_cohort=5)
    params = common.ndarrays_to_parameters([np.zeros(4)])
    sizes = [len(strategy.configure_evaluate(r, params, manager)) for r in (1, 2)]
    state = strategy._states["evaluate"][0]
    eligible = int((state.used < 2).sum())
    assert sizes == [10, 10]
    assert eligible < 10
    third = strategy.configure_evaluate(3, params, manager)  # the old code raised here
    assert 0 < len(third) <= eligible
    assert strategy.round_table().loc[3, "evaluate_cohort_shortfall"] == {
        "planned": 10, "available": eligible,
        "reason": "the eligible fleet under the participation cap is smaller than the cohort"}


# ----------------------------------------------------------------------------- instructions
class PerClientFedAvg(flwr_strategy.FedAvg):
    """An inner strategy that writes each client its own instructions."""

    def configure_fit(self, server_round, parameters, client_manager):
        pairs = super().configure_fit(server_round, parameters, client_manager)
        return [(proxy, common.FitIns(ins.parameters, {**ins.config, "cid": proxy.cid}))
                for proxy, ins in pairs]

    def configure_evaluate(self, server_round, parameters, client_manager):
        pairs = super().configure_evaluate(server_round, parameters, client_manager)
        return [(proxy, common.EvaluateIns(ins.parameters, {**ins.config, "cid": proxy.cid}))
                for proxy, ins in pairs]


@pytest.mark.parametrize("stratified", [False, True])
def test_each_client_keeps_its_own_instructions(states, stratified):
    clients, _ = make_clients(40, rng=6)
    manager = make_manager(clients)
    samplers = ({"fit_sampler": make_sampler(states, cohort=12, cap=2, rounds=2),
                 "evaluate_sampler": make_sampler(states, cohort=12, cap=2, rounds=2)}
                if stratified else {})
    strategy = _wrap(states, PerClientFedAvg(min_available_clients=2, fraction_fit=0.5),
                     num_rounds=2, **samplers)
    params = common.ndarrays_to_parameters([np.zeros(4)])
    fit = strategy.configure_fit(1, params, manager)
    evaluate = strategy.configure_evaluate(1, params, manager)
    assert len(fit) == (12 if stratified else 20)
    assert len(evaluate) == (12 if stratified else 40)
    assert all(ins.config["cid"] == proxy.cid for proxy, ins in fit)
    assert all(ins.config["cid"] == proxy.cid and KEY_SPECS in ins.config
               for proxy, ins in evaluate)
    if stratified:  # the wrapper's cohort, not the inner strategy's own sample
        table = strategy.round_table()
        assert table.loc[1, "fit_selected"] == table.loc[1, "evaluate_selected"] == 12


# ----------------------------------------------------------------------------- History
@pytest.fixture(scope="module")
def noisy_release(states):
    """Small epsilon: per-region values spill outside [0, 3] and below 0 for the histogram."""
    fleet = synthetic_fleet(800, rng=4)
    rng = np.random.default_rng(9)
    rows = device_report(pd.DataFrame({"client_id": fleet.device_id,
                                       "loss": rng.uniform(0, 0.3, len(fleet)),
                                       "error": rng.uniform(0, 1, len(fleet)),
                                       "region_id": fleet.region_id}),
                         loss_spec=LOSS, hist_spec=HIST, partition=states)
    replies = {str(c): encode_report(rows.loc[[c]], [LOSS, HIST]) for c in rows.index}
    return release_evaluation(replies, partition=states, metrics=[LOSS, HIST],
                              epsilon=0.2, target=Simulation(rng=2), min_cohort=10)


@pytest.mark.parametrize("metric", ["loss", "abs_error"])
def test_history_keys_carry_value_error_bar_reliability_and_a_labelled_clamped_display(
        noisy_release, metric):
    out, frame = noisy_release.metrics, noisy_release.report[metric]
    low, high = (LOSS if metric == "loss" else HIST).value_range
    shown = frame[~frame.suppressed.to_numpy(dtype=bool)]
    assert len(shown) >= 3
    outside = 0
    for region, row in shown.iterrows():
        key = f"{metric}/{region}"
        assert out[key] == row.value  # the unbiased value, unclamped
        assert out[f"{key}/error_bar"] == row.error_bar
        assert (out[f"{key}/ci_low"], out[f"{key}/ci_high"]) == (row.ci_low, row.ci_high)
        assert out[f"{key}/reliability"] == RELIABILITY_CODES[str(row.reliability)]
        assert out[f"{key}/display"] == float(np.clip(row.value, low, high))
        assert low <= out[f"{key}/display_low"] <= out[f"{key}/display_high"] <= high
        outside += not low <= row.value <= high
    assert outside > 0  # the case the display exists for: noise outside the range
    assert low <= out[f"{metric}.display"] <= high
    suppressed = frame.index[frame.suppressed.to_numpy(dtype=bool)]
    assert not any(k.startswith(f"{metric}/{r}") for r in suppressed for k in out)


def test_history_of_a_run_holds_the_per_region_bars(states):
    clients, _ = make_clients(60, rng=7)
    strategy = _wrap(states, num_rounds=2)
    history = run_inprocess(strategy, clients, num_rounds=2, max_workers=2)
    report = strategy.reports[2]["loss"]
    region = report.index[~report.suppressed.to_numpy(dtype=bool)][0]
    bars = history.metrics_distributed[f"loss/{region}/error_bar"]
    assert bars == [(r, float(strategy.reports[r]["loss"].loc[region, "error_bar"]))
                    for r in (1, 2)]
    assert f"loss/{region}/display" in history.metrics_distributed


# ----------------------------------------------------------------------------- SecAgg+
def test_even_secaggplus_shares_are_refused_before_training(states):
    with pytest.raises(InvalidInput, match=r"secure_aggregation.num_shares=4 is even.*"
                       r"IndexError.*pass an odd num_shares \(e.g. 5\)"):
        _wrap(states, num_rounds=2,
              secure_aggregation=SecAggPlusWorkflow(num_shares=4, reconstruction_threshold=2))
    with pytest.raises(InvalidInput, match="is not a flwr.server.workflow.SecAggPlusWorkflow"):
        check_secaggplus("secagg+")
    odd = SecAggPlusWorkflow(num_shares=3, reconstruction_threshold=2)
    assert _wrap(states, num_rounds=2, secure_aggregation=odd).secure_aggregation is odd
    fraction = SecAggPlusWorkflow(num_shares=0.5, reconstruction_threshold=0.7)
    assert check_secaggplus(fraction) is fraction  # Flower makes a fraction odd itself
    # Shares equal to a fixed cohort of 4 are what Flower accepts.
    whole = SecAggPlusWorkflow(num_shares=4, reconstruction_threshold=3)
    assert check_secaggplus(whole, cohort=4) is whole


def test_the_wrapper_states_that_evaluation_assumes_a_trusted_server(states):
    strategy = _wrap(states, num_rounds=2)
    assert strategy.limitations[-1] == EVALUATION_TRUST
    assert "trusted server" in EVALUATION_TRUST
    assert "training updates only" in EVALUATION_TRUST


def test_a_message_api_strategy_is_refused_naming_the_boundary(states):
    from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping, FedAvg

    dp = DifferentialPrivacyServerSideFixedClipping(FedAvg(), noise_multiplier=1.0,
                                                    clipping_norm=1.0, num_sampled_clients=4)
    with pytest.raises(InvalidInput, match=r"strategy='DifferentialPrivacyServerSideFixedClipping' "
                       r"is a Message-API strategy \(flwr.serverapp.strategy\), which this "
                       r"wrapper does not wrap.*wrap the flwr.server.strategy equivalent"):
        _wrap(states, dp, num_rounds=2)
