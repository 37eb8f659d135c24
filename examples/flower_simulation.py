"""Flower simulation with spatialdp: private regional evaluation and stratified selection.

A fleet of devices placed on the shipped 48-state geography
(:func:`spatialdp.datasets.synthetic_fleet`) trains a small logistic model
(numpy) with Flower's FedAvg inside Flower's own DP wrapper
(``DifferentialPrivacyServerSideFixedClipping``: each update clipped to the norm
``C``, Gaussian noise ``z C / n`` on the mean) for a few rounds.
:class:`SpatialDPStrategy` wraps that: the training cohort is chosen per state by
spatialdp's stratified sampler (sqrt allocation, participation cap, merges), every
client answers evaluation with a bounded report clipped on the device, and each
round's evaluation is released per state with noise added once. One zCDP
SQLite privacy ledger holds both lines: training, the rho ``cap / (2 z**2)``
derived from the DP wrapper's noise multiplier and reserved before the first
round, and every evaluation round. Outputs (``--out``, default ``docs/figures``):

- ``flower_choropleth.png``: the last round's published loss per state, with
  its reliability; states below the floor suppressed;
- ``flower_coverage_map.png``: clients sampled for training per state over the run;
- ``flower_coverage_score.png``: the coverage score of every training round,
  the wrapper's stratified cohort vs Flower's own uniform ``ClientManager.sample``
  on the same fleet (20 uniform draws per round: their mean and range);
- ``flower_ledger.sqlite`` and ``flower_ledger_summary.csv`` (in ``--ledger-dir``),
  ``flower_rounds.csv`` (one row per round: scores, cohorts, drops, epsilon,
  training), ``model_card.md`` / ``model_card.json`` (with the training line).

Engines: ``--engine inprocess`` (default) runs Flower's own ``Server`` loop over
in-process clients (:func:`spatialdp.flower.run_inprocess`); ``--engine ray`` runs
the same strategy and clients under Flower's simulation engine
(``flwr.simulation.run_simulation``, one Ray actor per CPU), the way a Flower
project runs. Usage::

    python examples/flower_simulation.py                     # 1,500 clients, 5 rounds
    python examples/flower_simulation.py --engine ray --clients 200 --rounds 3
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np

from spatialdp.cards import ModelCard
from spatialdp.datasets import us_states_partition
from spatialdp.federated import HistogramSpec, MetricSpec
from spatialdp.flower import SpatialDPStrategy, run_inprocess, training_privacy
from spatialdp.flower._flwr import flwr_modules
from spatialdp.flower.demo import N_FEATURES, make_clients
from spatialdp.flower.simulation import InProcessClientProxy
from spatialdp.privacy import PrivacyLedger, ReleaseTarget
from spatialdp.privacy.budget import epsilon_to_rho
from spatialdp.sampling import (
    ParticipationPolicy,
    Strata,
    StratifiedSampler,
    plot_coverage_map,
)
from spatialdp.viz import plot_uncertainty_choropleth, save_figure

common, server, flwr_strategy = flwr_modules()

LOSS = MetricSpec("loss", 0.0, 3.0)
ERROR = HistogramSpec("abs_error", edges=(0.25, 0.5, 0.75))
DELTA = 1e-6  # the per-client epsilon of the zCDP ledger is reported at this delta


def parse() -> argparse.Namespace:
    """Return the command-line options."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clients", type=int, default=1_500)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--cohort", type=int, default=150, help="training clients per round")
    p.add_argument("--epsilon", type=float, default=1.0,
                   help="total per evaluation round, split equally over the two metrics")
    p.add_argument("--noise-multiplier", type=float, default=2.0,
                   help="z of Flower's DP wrapper (training noise z C / n on the mean)")
    p.add_argument("--clipping-norm", type=float, default=0.5,
                   help="C of Flower's DP wrapper (each update clipped to this L2 norm)")
    p.add_argument("--min-cohort", type=int, default=25)
    p.add_argument("--engine", choices=("inprocess", "ray"), default="inprocess")
    p.add_argument("--seed", type=int, default=0, help="the synthetic fleet and its data")
    p.add_argument("--out", type=Path, default=Path("docs/figures"))
    p.add_argument("--ledger-dir", type=Path, default=Path("flower_outputs"))
    return p.parse_args()


def private_fedavg(args: argparse.Namespace) -> object:
    """Return FedAvg inside Flower's server-side fixed-clipping DP wrapper."""
    initial = common.ndarrays_to_parameters([np.zeros(N_FEATURES)])
    fedavg = flwr_strategy.FedAvg(fraction_fit=args.cohort / args.clients,
                                  fraction_evaluate=1.0, min_available_clients=2,
                                  initial_parameters=initial)
    return flwr_strategy.DifferentialPrivacyServerSideFixedClipping(
        fedavg, noise_multiplier=args.noise_multiplier, clipping_norm=args.clipping_norm,
        num_sampled_clients=args.cohort)


def policy(args: argparse.Namespace) -> ParticipationPolicy:
    """Each client trains in at most 2 rounds of the run (the training charge's cap).

    The policy's ``epsilon_per_round`` is not charged under the wrapper: the
    training line is derived from the DP wrapper's noise.
    """
    return ParticipationPolicy(participation_cap=2, epsilon_per_round=0.1,
                               rounds_per_epoch=args.rounds)


def epoch_budget(args: argparse.Namespace) -> float:
    """Return a zCDP epoch budget (rho) with room for the run twice over on both lines.

    Evaluation: every round charges its total epsilon as epsilon^2 / 2 on the
    regional line (30% x 80% of the budget); training: the rho derived from the
    DP wrapper (70% of the budget).
    """
    evaluation = args.rounds * epsilon_to_rho(args.epsilon) / (0.3 * 0.8)
    training = training_privacy(private_fedavg(args), policy=policy(args),
                                num_rounds=args.rounds).rho
    assert training is not None
    return 2.0 * max(evaluation, training / 0.7)


def build(args: argparse.Namespace, ledger: PrivacyLedger) -> tuple[SpatialDPStrategy, dict]:
    """Return the wrapped private FedAvg and the clients (the same fleet for a given seed)."""
    states = us_states_partition()
    clients, _ = make_clients(args.clients, rng=args.seed, partition=states)
    sampler = StratifiedSampler(Strata(states, basis="administrative"), cohort=args.cohort,
                                policy=policy(args), mode="sqrt")
    strategy = SpatialDPStrategy(
        private_fedavg(args), partition=states, metrics=[LOSS, ERROR], epsilon=args.epsilon,
        target=ReleaseTarget(ledger, epoch=0, who="examples/flower_simulation.py",
                             why="regional evaluation of the demo model"),
        min_cohort=args.min_cohort, fit_sampler=sampler,
        fit_target=ReleaseTarget(ledger, epoch=0, who="examples/flower_simulation.py",
                                 why="training: rho derived from the DP wrapper's noise"),
        num_rounds=args.rounds)
    return strategy, clients


def run_ray(args: argparse.Namespace, ledger_path: Path) -> tuple[SpatialDPStrategy, dict]:
    """Run under Flower's simulation engine (Ray): ServerApp + ClientApp, as a Flower app runs.

    The ServerApp runs in its own thread, and a PrivacyLedger belongs to the thread
    that opened it: ``server_fn`` opens the ledger (same file) and builds the
    strategy there.
    """
    from flwr.client import ClientApp
    from flwr.server import ServerApp, ServerAppComponents, ServerConfig
    from flwr.simulation import run_simulation

    built: dict[str, object] = {}
    clients, _ = make_clients(args.clients, rng=args.seed)
    ordered = list(clients.values())

    def client_fn(context):  # type: ignore[no-untyped-def]
        return ordered[int(context.node_config["partition-id"])].to_client()

    def server_fn(context):  # type: ignore[no-untyped-def]
        strategy, _ = build(args, PrivacyLedger(ledger_path))
        built["strategy"] = strategy
        return ServerAppComponents(strategy=strategy, config=ServerConfig(num_rounds=args.rounds))

    run_simulation(server_app=ServerApp(server_fn=server_fn),
                   client_app=ClientApp(client_fn=client_fn), num_supernodes=len(ordered),
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}})
    strategy = built["strategy"]
    assert isinstance(strategy, SpatialDPStrategy)
    return strategy, clients


def uniform_scores(strategy: SpatialDPStrategy, clients: dict, args: argparse.Namespace,
                   draws: int = 20) -> np.ndarray:
    """Coverage score of Flower's uniform sample (FedAvg + SimpleClientManager), per round."""
    import random

    manager = server.SimpleClientManager()
    anyone = next(iter(clients.values()))  # sampling never calls the client: only ids matter
    for cid in strategy.regions.index:  # the ids the wrapper registered (Ray: node ids)
        manager.register(InProcessClientProxy(cid, anyone))
    params = common.ndarrays_to_parameters([np.zeros(N_FEATURES)])
    fedavg = flwr_strategy.FedAvg(fraction_fit=args.cohort / args.clients,
                                  min_available_clients=2)
    random.seed(1)
    return np.array([[strategy.coverage_of(p.cid for p, _ in
                                           fedavg.configure_fit(r, params, manager))
                      for r in range(1, args.rounds + 1)] for _ in range(draws)])


def figures(strategy: SpatialDPStrategy, uniform: np.ndarray, out: Path) -> list[Path]:
    """Write the choropleth, the coverage map and the coverage-score figure."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    last = max(strategy.releases)
    report = strategy.releases[last].report
    ax = plot_uncertainty_choropleth(
        report["loss"], title=f"Published mean log loss per state, round {last} "
        f"(epsilon {sum(strategy.epsilon.values()):g} for both metrics, floor "
        f"{strategy.min_cohort} clients)")
    paths.append(save_figure(ax, out / "flower_choropleth.png"))
    plt.close("all")

    coverage = strategy.coverage("fit")
    fig, ax = plt.subplots(figsize=(10, 6))
    plot_coverage_map(coverage, ax=ax)
    assert strategy.fit_sampler is not None
    cap = strategy.fit_sampler.policy.participation_cap
    ax.set_title(f"Training clients sampled per state over {len(strategy.round_table())} "
                 f"Flower rounds (sqrt allocation, cap {cap} per client)")
    paths.append(save_figure(fig, out / "flower_coverage_map.png"))
    plt.close("all")

    table = strategy.round_table()
    rounds = table.index.to_numpy()
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(rounds, table.fit_score, "o-", color="#1b7837",
            label="SpatialDPStrategy (stratified, sqrt)")
    ax.plot(rounds, uniform.mean(axis=0), "s--", color="#762a83",
            label=f"Flower uniform sample (mean of {uniform.shape[0]} draws)")
    ax.fill_between(rounds, uniform.min(axis=0), uniform.max(axis=0), color="#762a83",
                    alpha=0.2, label="uniform: range of the draws")
    ax.set_ylim(0, 1.05)
    ax.set_xticks(rounds)
    ax.set_xlabel("Flower round")
    ax.set_ylabel("coverage score (1 = sqrt shares)")
    ax.set_title("Per-round coverage score of the training cohort")
    ax.legend(loc="lower right", fontsize=8)
    paths.append(save_figure(fig, out / "flower_coverage_score.png"))
    plt.close("all")
    return paths


def model_card(strategy: SpatialDPStrategy, args: argparse.Namespace, ledger_path: Path,
               coverage_map: Path) -> list[Path]:
    """Write the run's model card (training line, ledger, coverage, regional metrics)."""
    assert strategy.fit_sampler is not None
    with PrivacyLedger(ledger_path, read_only=True) as ledger:
        card = ModelCard.build(
            partition=strategy.partition, specs=strategy.metrics,
            strata=strategy.fit_sampler.strata, coverage=strategy.coverage("fit"),
            ledger=ledger, epoch=0, delta=DELTA,
            reports=[strategy.reports[r] for r in sorted(strategy.reports)],
            training=strategy.training_privacy, coverage_map=coverage_map,
            limitations=strategy.limitations,
            title="Flower demo: logistic model on the synthetic fleet",
            simulated={"fleet": True, "model": True}, seeds={"fleet": args.seed})
    return card.write(args.ledger_dir)


def main() -> None:
    """Run the simulation and write the outputs."""
    args = parse()
    args.ledger_dir.mkdir(parents=True, exist_ok=True)
    ledger_path = args.ledger_dir / "flower_ledger.sqlite"
    ledger_path.unlink(missing_ok=True)
    PrivacyLedger(ledger_path, epoch_budget=epoch_budget(args),
                  accounting="zcdp").close()  # create the file, then reopen
    start = time.perf_counter()
    if args.engine == "ray":
        strategy, clients = run_ray(args, ledger_path)
    else:
        with PrivacyLedger(ledger_path) as ledger:
            strategy, clients = build(args, ledger)
            history = run_inprocess(strategy, clients, num_rounds=args.rounds)
        print("Flower History, distributed loss (published, noised):",
              [(r, round(v, 4)) for r, v in history.losses_distributed])
    elapsed = time.perf_counter() - start
    uniform = uniform_scores(strategy, clients, args)
    paths = figures(strategy, uniform, args.out)
    paths += model_card(strategy, args, ledger_path, args.out / "flower_coverage_map.png")
    table = strategy.round_table()
    table.to_csv(args.ledger_dir / "flower_rounds.csv")
    with PrivacyLedger(ledger_path, read_only=True) as ledger:
        summary = ledger.summary(0, delta=DELTA)
    summary.to_csv(args.ledger_dir / "flower_ledger_summary.csv")
    print(f"{args.clients} clients, {args.rounds} rounds, engine {args.engine}: "
          f"{elapsed:.1f} s")
    print(table[["fit_score", "fit_selected", "evaluate_used", "epsilon", "training"]
                ].to_string())
    print("uniform score per round (mean of draws):", uniform.mean(axis=0).round(3))
    print(strategy.training_privacy.statement)
    print("wrapper's charges: evaluation epsilon", strategy.epsilon_spent(),
          "training rho", strategy.rho_spent())
    print(summary[["cap", "spent", "remaining", "spent_epsilon"]].to_string())
    print(strategy.releases[max(strategy.releases)].report.summary())
    for path in [*paths, ledger_path]:
        print("wrote", path)

if __name__ == "__main__":
    main()
