"""The wrapper under Flower's real simulation engine: ``flwr.simulation.run_simulation`` on Ray.

Around Flower's own server-side DP wrapper: per-region values, error bars and the
labelled clamped display reach History, each client gets its own instruction, and
the ledger's training charge is the zCDP rho derived from the noise multiplier.

Slow (Ray starts a local cluster): listed in ``tests/conftest.py`` SLOW. Needs the
``flower`` extra (``flwr[simulation]``, which brings Ray); without Ray it is skipped
with the reason.
"""

from __future__ import annotations

import gc
import importlib.util
from typing import Any

import numpy as np
import pytest

from spatialdp.datasets import us_states_partition
from spatialdp.federated import MetricSpec
from spatialdp.flower._flwr import flwr_modules
from spatialdp.flower.demo import LogisticClient, make_clients
from spatialdp.flower.strategy import SpatialDPStrategy
from spatialdp.privacy import PrivacyLedger, ReleaseTarget, Simulation

common, server, flwr_strategy = flwr_modules()

LOSS = MetricSpec("loss", 0.0, 3.0)
N_CLIENTS, ROUNDS = 4, 2
Z = 1.5  # the DP wrapper's noise multiplier


class EchoClient(LogisticClient):
    """A client that sends back the instruction written for it (``config["cid"]``)."""

    def fit(self, parameters, config):
        new, n, metrics = super().fit(parameters, config)
        return new, n, {**metrics, "echo": str(config["cid"])}


class PerClientFedAvg(flwr_strategy.FedAvg):
    """Writes each client its own instruction (FedAvg's aggregation, as the DP wrapper needs)."""

    def configure_fit(self, server_round, parameters, client_manager):
        pairs = super().configure_fit(server_round, parameters, client_manager)
        return [(proxy, common.FitIns(ins.parameters, {**ins.config, "cid": str(proxy.cid)}))
                for proxy, ins in pairs]


class EchoingDP(flwr_strategy.DifferentialPrivacyServerSideFixedClipping):
    """Flower's server-side DP wrapper that keeps what the clients echo back."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.echoes: list[tuple[str, str]] = []

    def aggregate_fit(self, server_round, results, failures):
        self.echoes += [(str(proxy.cid), str(res.metrics["echo"])) for proxy, res in results]
        return super().aggregate_fit(server_round, results, failures)


def ray_starts_or_skip() -> None:
    """Skip, saying why, when this machine cannot start a local Ray cluster."""
    import ray

    try:
        ray.init(num_cpus=2, include_dashboard=False)
    except Exception as err:  # pragma: no cover - the machine's reason, stated
        pytest.skip(f"Ray cannot start a local cluster here: {type(err).__name__}: {err}")
    finally:
        ray.shutdown()


# Ray's own warnings (a FutureWarning on accelerator env vars, DeprecationWarnings from
# its imports, ResourceWarnings for its daemons' Popen objects at shutdown) are Ray's
# business, not the wrapper's: they must not turn into errors in Ray's threads.
@pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::DeprecationWarning",
                            "ignore::ResourceWarning",
                            "ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                    reason="Ray is not installed: install the flower extra "
                           "(pip install 'spatialdp[flower]', which brings flwr[simulation])")
def test_run_simulation_on_ray_publishes_bars_displays_and_keeps_instructions(tmp_path):
    from flwr.client import ClientApp
    from flwr.server import ServerApp, ServerAppComponents, ServerConfig
    from flwr.simulation import run_simulation

    states = us_states_partition()
    clients, _ = make_clients(N_CLIENTS, rng=3, partition=states, client_class=EchoClient)
    ordered = list(clients.values())
    built: dict[str, Any] = {}

    class KeepHistory(server.Server):  # Flower's own loop; keeps the History it returns
        def fit(self, num_rounds, timeout):
            built["history"], elapsed = super().fit(num_rounds, timeout)
            return built["history"], elapsed

    def client_fn(context):
        return ordered[int(context.node_config["partition-id"])].to_client()

    def server_fn(context):
        inner = PerClientFedAvg(min_available_clients=N_CLIENTS, min_fit_clients=N_CLIENTS,
                                min_evaluate_clients=N_CLIENTS)
        # Inside Flower's own DP wrapper: the training charge is the derived zCDP rho.
        dp = EchoingDP(inner, noise_multiplier=Z, clipping_norm=0.7,
                       num_sampled_clients=N_CLIENTS)
        # Opened in the ServerApp's own thread (SQLite connections stay in their thread).
        ledger = PrivacyLedger(tmp_path / "ledger.sqlite", epoch_budget=10.0,
                               accounting="zcdp")
        strategy = SpatialDPStrategy(dp, partition=states, metrics=[LOSS], epsilon=20.0,
                                     target=Simulation(rng=0), min_cohort=1,
                                     num_rounds=ROUNDS, fit_target=ReleaseTarget(ledger, 0))
        built["strategy"] = strategy
        manager = server.SimpleClientManager()
        return ServerAppComponents(server=KeepHistory(client_manager=manager,
                                                      strategy=strategy),
                                   config=ServerConfig(num_rounds=ROUNDS))

    ray_starts_or_skip()
    try:
        run_simulation(server_app=ServerApp(server_fn=server_fn),
                       client_app=ClientApp(client_fn=client_fn), num_supernodes=N_CLIENTS,
                       backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                       "init_args": {"num_cpus": 2}})
    finally:
        # Ray leaves its daemons' /dev/null files to the garbage collector: shut down and
        # collected here, not in whichever later test the collector happens to run
        import ray

        ray.shutdown()
        gc.collect()
    assert "history" in built, "the ServerApp did not finish Flower's loop (see its log)"
    strategy, history = built["strategy"], built["history"]
    assert sorted(strategy.releases) == list(range(1, ROUNDS + 1))
    report = strategy.reports[ROUNDS]["loss"]
    shown = report.index[~report.suppressed.to_numpy(dtype=bool)]
    assert len(shown) >= 1
    metrics = history.metrics_distributed
    for region in shown:
        key = f"loss/{region}"
        assert metrics[key][-1] == (ROUNDS, float(report.loc[region, "value"]))
        assert metrics[f"{key}/error_bar"][-1] == (ROUNDS, float(report.loc[region, "error_bar"]))
        display = metrics[f"{key}/display"][-1][1]
        assert display == float(np.clip(report.loc[region, "value"], 0.0, 3.0))
    dp = strategy.strategy  # ours -> Flower's DP wrapper -> PerClientFedAvg
    assert len(dp.echoes) == N_CLIENTS * ROUNDS
    assert all(cid == echo for cid, echo in dp.echoes)  # each client got its own
    with PrivacyLedger(tmp_path / "ledger.sqlite", read_only=True) as ledger:
        expected = ROUNDS / (2 * Z**2)  # each client in at most ROUNDS rounds
        assert ledger.spent(0, "training") == pytest.approx(expected, rel=1e-12)
        (row,) = ledger.audit(0).itertuples()
        assert (row.line_item, row.neighbours, row.loss_unit) == ("training", "add_remove",
                                                                  "rho")
