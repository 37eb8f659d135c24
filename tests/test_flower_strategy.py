"""SpatialDPStrategy inside Flower's own server loop (real Server, ClientManager, clients)."""

from __future__ import annotations

import random
import re
import threading

import numpy as np
import pytest

from spatialdp.datasets import us_states_partition
from spatialdp.exceptions import InvalidInput
from spatialdp.federated import HistogramSpec, MetricSpec
from spatialdp.flower._flwr import flwr_modules
from spatialdp.flower.codec import KEY_SPECS, METRIC_PREFIX
from spatialdp.flower.demo import LogisticClient, make_clients
from spatialdp.flower.simulation import InProcessClientProxy, run_inprocess
from spatialdp.flower.strategy import SpatialDPStrategy
from spatialdp.flower.training import KEY_TRAINING, NOT_PRIVATE
from spatialdp.privacy import PrivacyLedger, ReleaseTarget, Simulation, Unaccounted
from spatialdp.sampling import ParticipationPolicy, Strata, StratifiedSampler

common, server, flwr_strategy = flwr_modules()

LOSS = MetricSpec("loss", 0.0, 3.0)
HIST = HistogramSpec("abs_error", edges=(0.25, 0.5, 0.75))
ROUNDS = 3
EPS = {"loss": 0.4, "abs_error": 0.6}
RAW_SENTINEL = 987.654321


class LeakyClient(LogisticClient):
    """A client that also sends its raw loss, raw count and a raw metric next to the report."""

    def evaluate(self, parameters, config):
        _, _, metrics = super().evaluate(parameters, config)
        raw = float(self.examples(parameters)["loss"].mean())
        self.raw_losses.append(raw)
        return raw, len(self.y), {**metrics, "raw_loss": raw, "sentinel": RAW_SENTINEL}


class TamperedClient(LogisticClient):
    """A client whose report lies outside the spec (an unclipped value)."""

    def evaluate(self, parameters, config):
        _, _, metrics = super().evaluate(parameters, config)
        return 0.0, 0, {**metrics, METRIC_PREFIX + "loss": 50.0}


def _fedavg(**kwargs):
    return flwr_strategy.FedAvg(min_available_clients=2, **kwargs)


@pytest.fixture(scope="module")
def states():
    return us_states_partition()


@pytest.fixture(scope="module")
def run(states):
    """110 honest, 15 leaky and 5 tampered clients; 3 rounds; stratified fit cohort of 30.

    FedAvg adds no training noise: training is recorded as not private and no
    ``fit_target`` is needed (nothing is charged for it).
    """
    clients, _fleet = make_clients(130, rng=11)
    ids = list(clients)
    for cid in ids[:15]:
        c = clients[cid]
        clients[cid] = LeakyClient(c.X, c.y, c.region_id, c.partition)
        clients[cid].raw_losses = []
    for cid in ids[15:20]:
        c = clients[cid]
        clients[cid] = TamperedClient(c.X, c.y, c.region_id, c.partition)
    ledger = PrivacyLedger(":memory:", epoch_budget=20.0)
    before = {item: ledger.remaining(0, item) for item in ("training", "evaluation.regional")}
    policy = ParticipationPolicy(participation_cap=2, epsilon_per_round=0.1,
                                 rounds_per_epoch=ROUNDS)
    sampler = StratifiedSampler(Strata(states, basis="administrative"), cohort=30,
                                policy=policy)
    strategy = SpatialDPStrategy(
        _fedavg(fraction_fit=0.2), partition=states, metrics=[LOSS, HIST], epsilon=EPS,
        target=ReleaseTarget(ledger, epoch=0, why="flower test"), min_cohort=8,
        fit_sampler=sampler)
    history = run_inprocess(strategy, clients, num_rounds=ROUNDS, max_workers=4)
    yield {"history": history, "strategy": strategy, "ledger": ledger, "clients": clients,
           "before": before, "leaky": ids[:15]}
    ledger.close()


def test_history_records_exactly_the_published_values(run):
    history, strategy = run["history"], run["strategy"]
    assert sorted(strategy.releases) == list(range(1, ROUNDS + 1))
    assert history.losses_distributed == [(r, strategy.releases[r].loss)
                                          for r in range(1, ROUNDS + 1)]
    for key, series in history.metrics_distributed.items():
        assert series == [(r, strategy.releases[r].metrics[key]) for r in range(1, ROUNDS + 1)]
    assert "loss/CA" in history.metrics_distributed
    assert all(rel.dropped == {"out of bounds": 5} for rel in strategy.releases.values())


def test_raw_per_client_values_never_reach_the_history(run):
    history, strategy, clients = run["history"], run["strategy"], run["clients"]
    recorded = [v for _, v in history.losses_distributed]
    recorded += [v for series in history.metrics_distributed.values() for _, v in series]
    numbers = np.array([v for v in recorded if isinstance(v, float)])
    assert numbers.size > 40
    raw = np.array([x for cid in run["leaky"] for x in clients[cid].raw_losses])
    assert raw.size == 15 * ROUNDS
    assert "raw_loss" not in history.metrics_distributed
    assert "sentinel" not in history.metrics_distributed
    assert not np.isin(raw, numbers).any()
    assert not np.isin([RAW_SENTINEL, 50.0], numbers).any()
    # Not even the clipped per-client reports nor their exact regional means are recorded:
    # every published value carries noise.
    for r, rel in strategy.releases.items():
        frame = rel.report["loss"]
        shown = frame[~frame.suppressed]
        assert (shown.noise_std > 0).all()
        for region, value in shown.value.items():
            assert dict(history.metrics_distributed[f"loss/{region}"])[r] == value
    suppressed = [k for k in history.metrics_distributed
                  if k.startswith("loss/") and k[5:] in set(
                      frame.index[frame.suppressed.to_numpy(dtype=bool)])]
    assert suppressed == []  # nothing below the floor is published


def test_ledger_totals_equal_what_the_wrapper_reports(run):
    strategy, ledger, before = run["strategy"], run["ledger"], run["before"]
    spent = strategy.epsilon_spent()
    assert spent == {"evaluation.regional": ledger.spent(0, "evaluation.regional")}
    assert ledger.spent(0, "evaluation.regional") == pytest.approx(ROUNDS * sum(EPS.values()))
    assert ledger.remaining(0, "evaluation.regional") == pytest.approx(
        before["evaluation.regional"] - spent["evaluation.regional"])
    audit = ledger.audit(0)
    assert sorted(audit.round_index.dropna().astype(int)) == list(range(1, ROUNDS + 1))


def test_training_without_noise_is_recorded_as_not_private_and_charges_nothing(run):
    """FedAvg adds no noise: no made-up epsilon reaches the training line (0.2 before)."""
    strategy, ledger, history = run["strategy"], run["ledger"], run["history"]
    assert ledger.spent(0, "training") == 0.0
    assert ledger.remaining(0, "training") == run["before"]["training"]
    assert set(ledger.audit(0).line_item) == {"evaluation.regional"}
    assert strategy.training_privacy.private is False
    assert strategy.training_privacy.statement == NOT_PRIVATE
    assert strategy.training_charge is None
    assert strategy.rho_spent() == {}
    assert (strategy.round_table().training == "not private").all()
    assert history.metrics_distributed_fit[KEY_TRAINING] == [
        (r, "not private") for r in range(1, ROUNDS + 1)]
    assert "training='not private'" in repr(strategy)
    assert strategy.coverage("fit").charge["accounting"] == "unaccounted"


def test_stratified_fit_rounds_are_recorded(run):
    table = run["strategy"].round_table()
    assert list(table.index) == list(range(1, ROUNDS + 1))
    assert (table.fit_selected == 30).all()
    assert (table.fit_offline == 0).all()
    assert table.fit_score.between(0, 1).all()
    coverage = run["strategy"].coverage("fit")
    assert coverage.table.selections.sum() == 30 * ROUNDS


def test_alerts_and_drift_run_on_the_kept_reports(run):
    strategy = run["strategy"]
    last, previous = (strategy.reports[r]["loss"] for r in (ROUNDS, ROUNDS - 1))
    both = (~last.suppressed & ~previous.suppressed).to_numpy(dtype=bool)
    alerts = strategy.alerts("loss")
    assert sorted(alerts.index) == sorted(last.index[both])
    assert alerts.threshold.gt(0).all()
    history = strategy.history_frame("loss")
    assert len(history) == ROUNDS * 48
    trend = strategy.drift("loss", window=3)
    assert {"slope", "threshold", "drifting"} <= set(trend.columns)


def test_a_refused_round_charges_nothing_and_records_nothing(states):
    clients, _ = make_clients(30, rng=2)
    with PrivacyLedger(":memory:", epoch_budget=10.0) as ledger:
        before = ledger.remaining(0, "evaluation.regional")
        strategy = SpatialDPStrategy(_fedavg(fraction_fit=0.1), partition=states,
                                     metrics=[LOSS], epsilon=0.5,
                                     target=ReleaseTarget(ledger, epoch=0), min_cohort=1_000)
        history = run_inprocess(strategy, clients, num_rounds=1, max_workers=2)
        assert ledger.remaining(0, "evaluation.regional") == before
        assert history.losses_distributed == []
        assert history.metrics_distributed == {}
        assert "below the cohort floor" in strategy.refusals[1]
        assert strategy.epsilon_spent() == {"evaluation.regional": 0.0}


def test_evaluation_instructions_carry_the_specs(states):
    clients, _ = make_clients(12, rng=4)
    manager = server.SimpleClientManager()
    for cid, client in clients.items():
        manager.register(InProcessClientProxy(cid, client))
    inner = _fedavg(on_evaluate_config_fn=lambda r: {"batch": 8})
    strategy = SpatialDPStrategy(inner, partition=states, metrics=[LOSS], epsilon=0.5,
                                 target=Simulation(rng=0))
    params = common.ndarrays_to_parameters([np.zeros(4)])
    pairs = strategy.configure_evaluate(1, params, manager)
    assert len(pairs) == 12
    config = pairs[0][1].config
    assert config["batch"] == 8
    assert KEY_SPECS in config
    assert len(strategy.regions) == 12


def test_stratified_evaluation_cohort_charges_nothing_itself(states):
    clients, _ = make_clients(60, rng=4)
    manager = server.SimpleClientManager()
    for cid, client in clients.items():
        manager.register(InProcessClientProxy(cid, client))
    policy = ParticipationPolicy(participation_cap=1, epsilon_per_round=0.1,
                                 rounds_per_epoch=2)
    sampler = StratifiedSampler(Strata(states, basis="administrative"), cohort=20,
                                policy=policy)
    with PrivacyLedger(":memory:", epoch_budget=10.0) as ledger:
        strategy = SpatialDPStrategy(_fedavg(), partition=states, metrics=[LOSS], epsilon=0.5,
                                     target=ReleaseTarget(ledger, epoch=0), min_cohort=10,
                                     evaluate_sampler=sampler)
        params = common.ndarrays_to_parameters([np.zeros(4)])
        first = {p.cid for p, _ in strategy.configure_evaluate(1, params, manager)}
        second = {p.cid for p, _ in strategy.configure_evaluate(2, params, manager)}
        assert len(first) == len(second) == 20
        assert not first & second  # cap 1: nobody twice in the epoch
        assert ledger.spent(0) == 0.0  # each evaluation round is charged by its release
        # A round beyond the sampler's epoch no longer raises inside Flower's loop:
        # it selects no one, and the shortfall is recorded.
        assert strategy.configure_evaluate(3, params, manager) == []
        table = strategy.round_table()
        assert table.evaluate_score.dropna().between(0, 1).all()
        assert table.loc[3, "evaluate_cohort_shortfall"] == {
            "planned": 20, "available": 0,
            "reason": "the sampler's epoch of 2 rounds is used up"}


def test_constructor_refusals(states):
    policy = ParticipationPolicy(participation_cap=1, epsilon_per_round=0.1,
                                 rounds_per_epoch=3)
    sampler = StratifiedSampler(Strata(states, basis="administrative"), cohort=5, policy=policy)
    with PrivacyLedger(":memory:", epoch_budget=10.0) as ledger, pytest.raises(
            InvalidInput, match=r"fit_target=.* charges a ledger, but the inner strategy "
            r"\(FedAvg\) adds no noise"):
        SpatialDPStrategy(_fedavg(), partition=states, metrics=[LOSS], epsilon=0.5,
                          target=Simulation(rng=0), fit_sampler=sampler,
                          fit_target=ReleaseTarget(ledger, epoch=0))
    with pytest.raises(InvalidInput, match="strategy="):
        SpatialDPStrategy("FedAvg", partition=states, metrics=[LOSS], epsilon=0.5,
                          target=Simulation(rng=0))
    with pytest.raises(InvalidInput, match="is not a release target"):
        SpatialDPStrategy(_fedavg(), partition=states, metrics=[LOSS], epsilon=0.5,
                          target=None)
    with pytest.raises(InvalidInput, match="epsilon"):
        SpatialDPStrategy(_fedavg(), partition=states, metrics=[LOSS], epsilon=-1.0,
                          target=Unaccounted("test"))
    with pytest.raises(InvalidInput, match="metrics"):
        SpatialDPStrategy(_fedavg(), partition=states, metrics=[], epsilon=1.0,
                          target=Unaccounted("test"))


def test_sqrt_selection_beats_flower_uniform_sampling_on_a_skewed_fleet(states):
    """Paired over seeds: the wrapper's per-round coverage score vs Flower's uniform sample."""
    clients, fleet = make_clients(200, rng=5)
    # Skew the fleet: 70% of the devices in three states, the rest spread thinly.
    rng = np.random.default_rng(5)
    crowded = rng.random(len(fleet)) < 0.7
    regions = np.where(crowded, rng.choice(["CA", "TX", "NY"], len(fleet)), fleet.region_id)
    region_of = dict(zip(fleet.cid, regions, strict=True))
    manager = server.SimpleClientManager()
    for cid, client in clients.items():
        manager.register(InProcessClientProxy(cid, client))
    params = common.ndarrays_to_parameters([np.zeros(4)])
    strata = Strata(states, basis="administrative")
    policy = ParticipationPolicy(participation_cap=5, epsilon_per_round=0.1,
                                 rounds_per_epoch=5)
    ours, uniform = [], []
    for seed in range(6):
        strategy = SpatialDPStrategy(
            _fedavg(fraction_fit=0.25), partition=states, metrics=[LOSS], epsilon=0.5,
            target=Simulation(rng=seed), region_fn=lambda proxy: region_of[proxy.cid],
            fit_sampler=StratifiedSampler(strata, cohort=50, policy=policy, min_stratum_cohort=0),
            fit_target=Simulation(rng=seed))
        random.seed(seed)  # Flower's ClientManager.sample draws from Python's random
        for r in range(1, 6):
            ours.append(len(strategy.configure_fit(r, params, manager)) and
                        strategy.round_table().loc[r, "fit_score"])
            flower = _fedavg(fraction_fit=0.25).configure_fit(r, params, manager)
            uniform.append(strategy.coverage_of(proxy.cid for proxy, _ in flower))
    diff = np.asarray(ours) - np.asarray(uniform)
    se = diff.std(ddof=1) / np.sqrt(diff.size)
    assert diff.mean() > 0.1
    assert diff.mean() > 5 * se


@pytest.mark.parametrize("where", ["file", "memory"])
def test_a_server_thread_charges_the_same_ledger(states, tmp_path, where):
    """Flower's ServerApp runs the strategy in its own thread; it charges the given ledger."""
    clients, _ = make_clients(40, rng=3)
    path = tmp_path / "ledger.sqlite" if where == "file" else ":memory:"
    with PrivacyLedger(path, epoch_budget=10.0) as ledger:
        strategy = SpatialDPStrategy(_fedavg(fraction_fit=0.1), partition=states,
                                     metrics=[LOSS], epsilon=0.5,
                                     target=ReleaseTarget(ledger, epoch=0), min_cohort=3)
        out: dict[str, object] = {}
        worker = threading.Thread(target=lambda: out.update(
            history=run_inprocess(strategy, clients, num_rounds=2, max_workers=2)))
        worker.start()
        worker.join()
        assert len(out["history"].losses_distributed) == 2
        assert ledger.spent(0, "evaluation.regional") == strategy.epsilon_spent()[
            "evaluation.regional"] == pytest.approx(1.0)
        assert len(ledger.audit(0)) == 2  # two rounds, two charges, in this very ledger



def test_an_add_remove_refusal_records_and_logs_no_exact_count(states, caplog):
    clients, _ = make_clients(37, rng=2)
    strategy = SpatialDPStrategy(_fedavg(), partition=states, metrics=[LOSS], epsilon=0.5,
                                 target=Simulation(rng=0), neighbours="add_remove")
    status = common.Status(code=common.Code.OK, message="")
    # 37 replies without a spatialdp report, and 3 failures: both counts are private.
    results = [(InProcessClientProxy(cid, client),
                common.EvaluateRes(status=status, loss=0.0, num_examples=1, metrics={}))
               for cid, client in clients.items()]
    with caplog.at_level("WARNING"):
        assert strategy.aggregate_evaluate(1, results, [RuntimeError()] * 3) == (None, {})
    row = strategy.round_table().loc[1].dropna().to_dict()
    assert "evaluate_failures" not in row
    shown = " ".join([str(row), strategy.refusals[1], *caplog.messages])
    assert "hold no usable bounded report" in shown
    assert not re.search(r"\b(37|3)\b", shown), shown
