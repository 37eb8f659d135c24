"""The training line of a Flower run comes from the training mechanism (real flwr objects).

Inside Flower's fixed-clipping DP wrappers the ledger's training charge is the
zCDP rho ``cap / (2 z**2)`` derived from the wrapper's noise multiplier, charged
once through the release pipeline with ``neighbours="add_remove"``; a strategy
that adds no noise is recorded as not private and charges nothing; what cannot
be accounted is refused before anything is charged.
"""

from __future__ import annotations

import numpy as np
import pytest

from spatialdp.cards import ModelCard, RunFolder
from spatialdp.datasets import us_states_partition
from spatialdp.exceptions import BudgetExceeded, InvalidInput, LedgerError
from spatialdp.federated import MetricSpec
from spatialdp.flower._flwr import flwr_modules
from spatialdp.flower.demo import LogisticClient, make_clients
from spatialdp.flower.simulation import InProcessClientProxy, run_inprocess
from spatialdp.flower.strategy import SpatialDPStrategy
from spatialdp.flower.training import KEY_TRAINING, NOT_PRIVATE, training_privacy
from spatialdp.privacy import PrivacyLedger, ReleaseTarget, Simulation
from tests._flower import make_manager, make_sampler

common, server, flwr_strategy = flwr_modules()
from flwr.supercore.differential_privacy import compute_clip_model_update  # noqa: E402

LOSS = MetricSpec("loss", 0.0, 3.0)
WRAPPERS = {"server": flwr_strategy.DifferentialPrivacyServerSideFixedClipping,
            "client": flwr_strategy.DifferentialPrivacyClientSideFixedClipping}


@pytest.fixture(scope="module")
def states():
    return us_states_partition()


def _dp(kind="server", *, z=1.5, c=0.7, n=10, inner=None, **fedavg):
    inner = inner or flwr_strategy.FedAvg(min_available_clients=2, **fedavg)
    return WRAPPERS[kind](inner, noise_multiplier=z, clipping_norm=c, num_sampled_clients=n)




def _strategy(states, inner, **kwargs):
    kwargs.setdefault("target", Simulation(rng=0))
    return SpatialDPStrategy(inner, partition=states, metrics=[LOSS], epsilon=0.5, **kwargs)


class ClippingClient(LogisticClient):
    """What Flower's fixedclipping_mod does on a ClientApp: clip the update to the norm sent."""

    def fit(self, parameters, config):
        new, n, metrics = super().fit(parameters, config)
        compute_clip_model_update(new, parameters, float(config["clipping_norm"]))
        return new, n, {**metrics, "raw_train_size": float(n)}


# ----------------------------------------------------------------------------- the charge
@pytest.mark.parametrize("kind", sorted(WRAPPERS))
@pytest.mark.parametrize("source", ["fit_sampler", "num_rounds"])
def test_the_derived_rho_is_charged_once_to_training_with_add_remove(states, kind, source):
    z, cap = 1.5, 2 if source == "fit_sampler" else 3
    clients, _ = make_clients(40, rng=6)
    manager = make_manager(clients)
    cohort = {"fit_sampler": make_sampler(states, cap=2, rounds=4)} if source == "fit_sampler" \
        else {"num_rounds": 3}
    inner = _dp(kind, z=z, n=10, fraction_fit=0.25)
    with PrivacyLedger(":memory:", epoch_budget=10.0, accounting="zcdp") as ledger:
        strategy = _strategy(states, inner, fit_target=ReleaseTarget(ledger, epoch=2), **cohort)
        assert ledger.spent(2) == 0.0  # built, checked, nothing charged yet
        params = common.ndarrays_to_parameters([np.zeros(4)])
        for r in (1, 2):
            assert len(strategy.configure_fit(r, params, manager)) == 10
        expected = cap / (2 * z**2)
        assert strategy.training_privacy.rho == pytest.approx(expected, rel=1e-12)
        assert ledger.spent(2, "training") == pytest.approx(expected, rel=1e-12)
        assert ledger.spent(2, "training") >= expected * (1 - 1e-15)
        assert strategy.rho_spent() == {"training": ledger.spent(2, "training")}
        assert ledger.spent(0) == 0.0
        audit = ledger.audit(2)
        assert len(audit) == 1  # reserved once for the run, not per round
        row = audit.iloc[0]
        assert row.line_item == "training"
        assert row.neighbours == "add_remove"
        assert row.loss_unit == "rho"
        assert row.max_parts_per_client == cap
        assert strategy.training_privacy.participation_cap == cap
        assert (strategy.round_table().training == strategy.training_privacy.label).all()


def test_a_pure_ledger_is_refused_before_anything_is_charged(states):
    with PrivacyLedger(":memory:", epoch_budget=10.0) as ledger:
        with pytest.raises(LedgerError, match=r"cannot be charged to a pure-epsilon ledger.*"
                                              r"accounting='zcdp'"):
            _strategy(states, _dp(), fit_target=ReleaseTarget(ledger, epoch=0), num_rounds=3,
                      target=ReleaseTarget(ledger, epoch=0))
        assert ledger.spent(0) == 0.0
        assert ledger.audit().empty
    with PrivacyLedger(":memory:", epoch_budget=10.0, accounting="zcdp") as ledger:
        with pytest.raises(InvalidInput, match=r"fit_target.line_item='evaluation.regional' is "
                                               r"not the training line item"):
            _strategy(states, _dp(), num_rounds=3, fit_target=ReleaseTarget(
                ledger, epoch=0, line_item="evaluation.regional"))
        assert ledger.audit().empty


def _results(pairs, current, updates):
    status = common.Status(code=common.Code.OK, message="")
    return [(proxy, common.FitRes(status=status, num_examples=1, metrics={},
                                  parameters=common.ndarrays_to_parameters([current + u])))
            for (proxy, _), u in zip(pairs, updates, strict=True)]


@pytest.mark.parametrize("kind", sorted(WRAPPERS))
def test_a_round_the_charge_does_not_cover_is_not_aggregated(states, kind):
    clients, _ = make_clients(20, rng=4)
    manager = make_manager(clients)
    dp = _dp(kind, n=10, c=1.0, fraction_fit=0.5)
    strategy = _strategy(states, dp, fit_target=Simulation(rng=0), num_rounds=3)
    current = np.zeros(4)
    small = np.full((10, 4), 0.1)  # norm 0.2 < C
    pairs = strategy.configure_fit(1, common.ndarrays_to_parameters([current]), manager)
    assert strategy.aggregate_fit(1, _results(pairs[:9], current, small[:9]), []) == (
        None, {KEY_TRAINING: strategy.training_privacy.label})
    assert "not exactly num_sampled_clients=10" in strategy.round_table().loc[1, "fit_refused"]
    pairs = strategy.configure_fit(2, common.ndarrays_to_parameters([current]), manager)
    dp.noise_multiplier = 0.1  # after the charge was derived from z = 1.5
    assert strategy.aggregate_fit(2, _results(pairs, current, small), [])[0] is None
    assert "changed after the training charge" in strategy.round_table().loc[2, "fit_refused"]
    dp.noise_multiplier = 1.5
    if kind == "client":  # a round whose parameters this strategy never configured
        assert strategy.aggregate_fit(4, _results(pairs, current, small), [])[0] is None
        assert "not configured by this strategy" in strategy.round_table().loc[
            4, "fit_refused"]
    pairs = strategy.configure_fit(3, common.ndarrays_to_parameters([current]), manager)
    assert strategy.aggregate_fit(3, _results(pairs, current, small), [])[0] is not None


def test_a_strategy_without_noise_is_not_private_and_charges_nothing(states):
    clients, _ = make_clients(100, rng=2)
    with PrivacyLedger(":memory:", epoch_budget=10.0, accounting="zcdp") as ledger:
        strategy = _strategy(states, flwr_strategy.FedAvg(fraction_fit=0.1,
                                                          min_available_clients=2),
                             target=ReleaseTarget(ledger, epoch=0), min_cohort=5)
        history = run_inprocess(strategy, clients, num_rounds=2, max_workers=2)
        assert strategy.training_privacy.statement == NOT_PRIVATE
        assert strategy.training_privacy.rho is None
        assert ledger.spent(0, "training") == 0.0
        assert set(ledger.audit(0).line_item) == {"evaluation.regional"}
        assert history.metrics_distributed_fit[KEY_TRAINING] == [(1, "not private"),
                                                                 (2, "not private")]


# ----------------------------------------------------------------------------- refusals
def test_a_missing_or_infeasible_cap_is_refused(states):
    with pytest.raises(InvalidInput, match=r"num_rounds=None is missing: without a fit_sampler"):
        _strategy(states, _dp(), fit_target=Simulation(rng=0))
    with pytest.raises(InvalidInput, match=r"num_rounds=5 exceeds the fit sampler's "
                                           r"rounds_per_epoch=4"):
        _strategy(states, _dp(), fit_target=Simulation(rng=0), num_rounds=5,
                  fit_sampler=make_sampler(states, rounds=4))
    with pytest.raises(InvalidInput, match=r"fit_sampler.cohort=12 differs from the DP "
                                           r"wrapper's num_sampled_clients=10"):
        _strategy(states, _dp(n=10), fit_target=Simulation(rng=0),
                  fit_sampler=make_sampler(states, cohort=12))
    with pytest.raises(InvalidInput, match="num_rounds=0 is below the limit"):
        _strategy(states, _dp(), fit_target=Simulation(rng=0), num_rounds=0)
    with pytest.raises(InvalidInput, match=r"fit_target=None is missing while the inner "
                                           r"strategy \(DifferentialPrivacyServerSide"):
        _strategy(states, _dp(), num_rounds=3)


def test_noise_that_cannot_be_accounted_is_refused(states):
    with pytest.raises(InvalidInput, match=r"noise_multiplier=0.0 is below the limit > 0"):
        training_privacy(_dp(z=0.0), num_rounds=2)
    wrapper = _dp()
    wrapper.clipping_norm = float("nan")  # Flower's own check (<= 0) lets NaN through
    with pytest.raises(InvalidInput, match=r"clipping_norm=nan is not finite"):
        training_privacy(wrapper, num_rounds=2)
    adaptive = flwr_strategy.DifferentialPrivacyServerSideAdaptiveClipping(
        flwr_strategy.FedAvg(), noise_multiplier=1.0, num_sampled_clients=100)
    with pytest.raises(InvalidInput, match="adds noise whose privacy loss spatialdp does not "
                                           "derive"):
        training_privacy(adaptive, num_rounds=2)
    adam = flwr_strategy.FedAdam(initial_parameters=common.ndarrays_to_parameters(
        [np.zeros(4)]))
    with pytest.raises(InvalidInput, match=r"strategy='FedAdam' does not aggregate by "
                                           r"FedAvg's mean"):
        training_privacy(_dp(inner=adam), num_rounds=2)
    assert training_privacy(_dp(inner=flwr_strategy.FedProx(proximal_mu=0.1)),
                            num_rounds=2).private


def test_a_budget_that_cannot_pay_is_refused_at_construction(states):
    with PrivacyLedger(":memory:", epoch_budget=1.0, accounting="zcdp") as ledger:
        # rho = 3 / (2 * 1**2) = 1.5 exceeds the training line's cap 0.7 x 1.0
        with pytest.raises(BudgetExceeded, match="nothing was charged"):
            _strategy(states, _dp(z=1.0), fit_target=ReleaseTarget(ledger, epoch=0),
                      num_rounds=3)
        assert ledger.audit().empty


def test_more_rounds_than_the_charge_covers_are_refused(states):
    clients, _ = make_clients(20, rng=1)
    strategy = _strategy(states, _dp(n=10, fraction_fit=0.5), fit_target=Simulation(rng=0),
                         num_rounds=1)
    with pytest.raises(InvalidInput, match=r"num_rounds=2 exceeds the strategy's num_rounds=1"):
        run_inprocess(strategy, clients, num_rounds=2)
    manager = make_manager(clients)
    params = common.ndarrays_to_parameters([np.zeros(4)])
    assert len(strategy.configure_fit(1, params, manager)) == 10
    assert strategy.configure_fit(2, params, manager) == []  # beyond the reservation
    assert "num_rounds=1 training rounds" in strategy.round_table().loc[2, "fit_refused"]


# ----------------------------------------------------------------------------- whole runs
def test_a_run_inside_the_server_side_wrapper(states):
    clients, _ = make_clients(100, rng=8)
    inner = _dp("server", z=2.0, c=0.5, n=15, fraction_fit=0.15)
    with PrivacyLedger(":memory:", epoch_budget=10.0, accounting="zcdp") as ledger:
        strategy = _strategy(states, inner, target=ReleaseTarget(ledger, epoch=0),
                             fit_target=ReleaseTarget(ledger, epoch=0), num_rounds=2,
                             min_cohort=5)
        history = run_inprocess(strategy, clients, num_rounds=2, max_workers=2)
        assert ledger.spent(0, "training") == pytest.approx(2 / (2 * 2.0**2), rel=1e-12)
        assert len(ledger.audit(0).query("line_item == 'training'")) == 1
        # evaluation on the same zCDP ledger: each round's epsilon as epsilon^2 / 2
        assert ledger.spent(0, "evaluation.regional") == pytest.approx(2 * 0.5**2 / 2)
        assert "fit_refused" not in strategy.round_table()
        # only the noised model leaves training: no client fit metric reaches the History
        assert set(history.metrics_distributed_fit) == {KEY_TRAINING}
        assert strategy.training_privacy.label.startswith("zCDP rho 0.25 ")


def test_client_side_clipping_is_checked_on_the_server(states):
    """The charge assumes clipped updates: a client that does not clip stops the round."""
    def run(client_class):
        clients, _ = make_clients(100, rng=9, client_class=client_class)
        inner = _dp("client", z=1.0, c=0.05, n=10, fraction_fit=0.1)
        strategy = _strategy(states, inner, fit_target=Simulation(rng=0), num_rounds=1,
                             min_cohort=5)
        history = run_inprocess(strategy, clients, num_rounds=1, max_workers=2)
        return strategy, history

    unclipped, _ = run(LogisticClient)  # updates of norm ~0.6 > C = 0.05
    assert "did not clip" in unclipped.round_table().loc[1, "fit_refused"]
    clipped, history = run(ClippingClient)
    assert "fit_refused" not in clipped.round_table()
    assert clipped.round_table().loc[1, "fit_metrics_withheld"] == 0  # FedAvg: no fn, {}
    assert set(history.metrics_distributed_fit) == {KEY_TRAINING}


def test_the_wrappers_noise_is_the_gaussian_sum_the_charge_assumes(states):
    """Measured: Flower adds noise of std z C / n to the unweighted mean of the clipped updates.

    That is a Gaussian sum with noise z C and sensitivity C: rho = C^2 / (2 (z C)^2).
    The implied rho of the measured noise matches the derived one within 5 standard
    errors (relative SE of a std estimate over d coordinates: 1 / sqrt(2 d); of
    rho, twice that). Half the clients push along +e, half along -e, the latter
    reporting 1,000 times the examples: had the mean been weighted by the
    reported counts (which the charge cannot cover), the measured noise would be
    off-centre by about C / sqrt(d) per coordinate, n / z = 33 of its standard
    errors.
    """
    d, n, z, c = 20_000, 20, 0.6, 0.8
    proxies = [InProcessClientProxy(f"c{i}", LogisticClient(
        np.zeros((1, 4)), np.zeros(1), "CA", states)) for i in range(n)]
    manager = server.SimpleClientManager()
    for proxy in proxies:
        manager.register(proxy)
    inner = _dp("server", z=z, c=c, n=n, fraction_fit=1.0, min_fit_clients=n)
    strategy = _strategy(states, inner, fit_target=Simulation(rng=0), num_rounds=1)
    current = np.zeros(d)
    pairs = strategy.configure_fit(1, common.ndarrays_to_parameters([current]), manager)
    rng = np.random.default_rng(11)
    sign = np.repeat([1.0, -1.0], n // 2)
    updates = sign[:, None] * 5.0 / np.sqrt(d) + rng.normal(scale=0.01, size=(n, d))
    clipped = updates * (c / np.linalg.norm(updates, axis=1, keepdims=True))  # all longer than c
    examples = np.where(sign > 0, 1, 1_000)
    status = common.Status(code=common.Code.OK, message="")
    results = [(proxy, common.FitRes(status=status, num_examples=int(k),
                                     parameters=common.ndarrays_to_parameters([current + u]),
                                     metrics={}))
               for (proxy, _), u, k in zip(pairs, updates, examples, strict=True)]
    # Flower draws its noise from numpy's legacy global generator: seed it, then restore it.
    state = np.random.get_state()  # noqa: NPY002
    np.random.seed(3)  # noqa: NPY002
    try:
        parameters, _ = strategy.aggregate_fit(1, results, [])
    finally:
        np.random.set_state(state)  # noqa: NPY002
    noise = common.parameters_to_ndarrays(parameters)[0] - clipped.mean(axis=0)
    sigma = z * c / n
    assert abs(noise.mean()) < 5 * sigma / np.sqrt(d)
    implied_rho = (c / n) ** 2 / (2 * noise.std() ** 2)
    derived = strategy.training_privacy.rho_per_round
    assert derived == pytest.approx(1 / (2 * z**2), rel=1e-12)
    assert abs(implied_rho / derived - 1) < 5 * 2 / np.sqrt(2 * d)


# ----------------------------------------------------------------------------- the card
@pytest.mark.parametrize("private", [False, True])
def test_the_model_card_states_the_training_line(states, tmp_path, private):
    inner = _dp(z=2.0, n=10) if private else flwr_strategy.FedAvg()
    strategy = _strategy(states, inner, num_rounds=3,
                         fit_target=Simulation(rng=0) if private else None)
    built = ModelCard.build(partition=states, specs=[LOSS], training=strategy.training_privacy)
    run = RunFolder(tmp_path)
    run.write_manifest(partition=states, specs=[LOSS], ledger=False,
                       training=strategy.training_privacy)
    for card in (built, ModelCard.from_run(tmp_path)):
        section = card.to_dict()["training"]
        assert section["private"] is private
        assert section["statement"] == strategy.training_privacy.statement
        assert "num_sampled_clients" not in section  # a cohort size: not on the card
        text = card.to_markdown()
        assert "## Training privacy" in text
        assert strategy.training_privacy.statement in text
        assert strategy.training_privacy.statement in card.summary()
        assert ModelCard.from_json(card.to_json()).to_dict() == card.to_dict()
    if not private:
        assert "training: not private (the inner strategy adds no noise)" in built.to_markdown()
    else:
        assert section["rho"] == pytest.approx(3 / 8)
        assert section["neighbours"] == "add_remove"
