"""A wrapper around any Flower strategy: private regional evaluation, stratified selection.

:class:`SpatialDPStrategy` is itself a Flower ``Strategy``
(:class:`flwr.server.strategy.Strategy`) and delegates training (parameters,
``aggregate_fit``, centralised ``evaluate``) to the strategy it wraps. It takes
over two things:

- **Who takes part.** With a :class:`~spatialdp.sampling.StratifiedSampler`,
  ``configure_fit`` and ``configure_evaluate`` choose the clients per stratum
  (allocation mode, participation caps, merges, the coverage score per round)
  instead of Flower's uniform ``ClientManager.sample``. A client's stratum is
  the region it reports once, the first time the wrapper sees it
  (``get_properties``, see :func:`spatialdp.flower.client.registration_properties`);
  the region is then frozen for the run.
- **What evaluation publishes.** The wrapper writes the evaluation instructions
  (the specs devices clip under) and reads back one bounded report per client.
  ``aggregate_evaluate`` never averages raw client numbers: it runs
  :func:`~spatialdp.flower.evaluation.release_evaluation` (noise once per region
  and metric, charged once per round to the ledger, regions below the floor
  suppressed) and returns the published values as Flower's ``(loss, metrics)``,
  so Flower's ``History`` only ever holds noised, clipped numbers. Each round's
  :class:`~spatialdp.federated.RegionalReport` is kept (:attr:`reports`), with
  alerts and drift as in :mod:`spatialdp.federated.monitor`.

Training stays the wrapped strategy's, but the ledger's ``training`` line comes
from it (:mod:`spatialdp.flower.training`): inside one of Flower's fixed-clipping
DP wrappers, the run's zCDP rho ``cap / (2 z**2)`` is derived from the wrapper's
noise and reserved once before the first training round; any other strategy's
training is recorded as not private (:attr:`SpatialDPStrategy.training_privacy`)
and nothing is charged for it.
"""

from __future__ import annotations

import concurrent.futures
import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from logging import INFO, WARNING
from typing import Any

import numpy as np
import pandas as pd

from spatialdp._validation import (
    check_alpha,
    check_choice,
    check_cohort_floor,
    check_count,
    check_instance,
    fail,
)
from spatialdp.exceptions import InvalidInput, SpatialDPError
from spatialdp.federated.metrics import (
    Spec,
    check_specs,
    resolve_epsilons,
)
from spatialdp.federated.monitor import compare_reports, drift
from spatialdp.federated.regional import REGIONAL_LINE_ITEM, RegionalReport
from spatialdp.flower._flwr import flwr_modules
from spatialdp.flower.codec import (
    KEY_PARTITION,
    KEY_REGION,
    KEY_ROUND,
    KEY_SPECS,
    specs_to_config,
)
from spatialdp.flower.evaluation import EvaluationRelease, _loss_metric, release_evaluation
from spatialdp.flower.feasibility import check_evaluation_plan, check_fleet, planned_rounds
from spatialdp.flower.secagg import EVALUATION_TRUST, check_secaggplus
from spatialdp.flower.training import (
    KEY_TRAINING,
    TrainingPrivacy,
    check_fit_cohort,
    check_fit_target,
    equal_weights,
    reserve_training,
    round_refusal,
    training_privacy,
)
from spatialdp.geo.partition import Partition
from spatialdp.privacy.budget import LineItem, Neighbours, check_neighbours
from spatialdp.privacy.pipeline import exact_total
from spatialdp.privacy.target import (
    Accounting,
    ReleaseTarget,
    Simulation,
    Unaccounted,
    check_target,
)
from spatialdp.sampling.coverage import Coverage, epoch_coverage
from spatialdp.sampling.sampler import StratifiedSampler
from spatialdp.sampling.score import coverage_score
from spatialdp.sampling.state import ParticipationState

flwr_modules()  # imports Flower quietly, or names the missing extra
from flwr.common import EvaluateIns, GetPropertiesIns, parameters_to_ndarrays  # noqa: E402
from flwr.common.logger import log  # noqa: E402
from flwr.server.client_manager import ClientManager  # noqa: E402
from flwr.server.strategy import Strategy  # noqa: E402

__all__ = ["SpatialDPStrategy"]

KINDS = ("fit", "evaluate")


def _sampler(value: Any, name: str, partition: Partition) -> StratifiedSampler | None:
    if value is None:
        return None
    sampler = check_instance(value, name, StratifiedSampler,
                             "pass StratifiedSampler(Strata(partition, basis=...), ...) or None")
    missing = set(map(str, partition.region_ids)) - set(sampler.strata.ids)
    if missing:
        raise fail(name, sampler.strata.key, f"has no stratum for regions {sorted(missing)[:5]}",
                   "build the sampler on strata of the release partition: "
                   "Strata(partition, basis='administrative')")
    return sampler


#: How long a selection waits for the wrapped strategy's ``min_available_clients``
#: (Flower's own ``ClientManager.sample`` waits as long).
WAIT_SECONDS = 86_400


def _min_available(strategy: Any) -> int:
    """Return the ``min_available_clients`` of the innermost strategy that sets one (else 1)."""
    while strategy is not None:
        value = getattr(strategy, "min_available_clients", None)
        if isinstance(value, int):
            return value
        strategy = getattr(strategy, "strategy", None)
    return 1


def _refuse_message_api(strategy: Any) -> None:
    """Refuse a Message-API strategy (``flwr.serverapp.strategy``), naming the boundary."""
    from flwr.serverapp.strategy import Strategy as MessageStrategy

    if isinstance(strategy, MessageStrategy):
        raise fail("strategy", type(strategy).__name__,
                   "is a Message-API strategy (flwr.serverapp.strategy), which this wrapper "
                   "does not wrap: it implements flwr.server.strategy.Strategy (configure_fit "
                   "/ aggregate_evaluate with ClientProxy and History), and derives the "
                   "training charge only for that API's fixed-clipping DP wrappers",
                   "wrap the flwr.server.strategy equivalent (e.g. flwr.server.strategy.FedAvg "
                   "inside DifferentialPrivacyServerSideFixedClipping), run it with "
                   "ServerApp(server_fn=...) returning ServerAppComponents(strategy=...), or "
                   "call release_evaluation from your own Message-API strategy")


class _Cohort(ClientManager):
    """The stratified cohort as a client manager: the wrapped strategy configures exactly it.

    ``sample`` returns the whole cohort (the selection is the sampler's), so the
    wrapped strategy writes each chosen client's own instructions.
    """

    def __init__(self, proxies: Sequence[Any]) -> None:
        self._clients = {str(p.cid): p for p in proxies}

    def num_available(self) -> int:
        return len(self._clients)

    def register(self, client: Any) -> bool:
        return False

    def unregister(self, client: Any) -> None:
        return None

    def all(self) -> dict[str, Any]:
        return dict(self._clients)

    def wait_for(self, num_clients: int, timeout: int) -> bool:
        return len(self._clients) >= num_clients

    def sample(self, num_clients: int, min_num_clients: int | None = None,
               criterion: Any = None) -> list[Any]:
        return list(self._clients.values())


class SpatialDPStrategy(Strategy):
    """Private regional evaluation and stratified client selection around a Flower strategy.

    Parameters
    ----------
    strategy : flwr.server.strategy.Strategy
        The wrapped strategy (``FedAvg``, a DP training wrapper, your own); it
        keeps training, parameters and centralised evaluation. Inside Flower's
        ``DifferentialPrivacyServerSideFixedClipping`` or
        ``DifferentialPrivacyClientSideFixedClipping`` (around FedAvg) the
        training charge is derived from the wrapper's noise; any other
        strategy's training is recorded as not private
        (:mod:`spatialdp.flower.training`).
    partition : Partition
        The fixed geography of the regional evaluation (and of the strata).
    metrics : sequence of MetricSpec / HistogramSpec
        What devices report, clipped under these specs (sent as instructions).
    epsilon : float or mapping name -> float
        Per-client privacy loss of each evaluation round's release, all metrics
        together (what the ledger is charged per round): one number is split
        equally over the metrics, a mapping gives the split (its sum is the total).
    target : ReleaseTarget, Simulation or Unaccounted
        Where each round's release is charged: a template; each round gets a copy
        with ``round_index`` set to Flower's server round. Use a ``ReleaseTarget``
        with ``line_item`` unset (the regional line item is used).
    min_cohort : int, default 50
        Publication floor per region: below it nothing is published, not even the
        cohort size.
    alpha : float, default 0.05
        Level of the published error bars.
    loss_metric : str, optional
        The MetricSpec published as Flower's loss (default: the first MetricSpec).
    fit_sampler, evaluate_sampler : StratifiedSampler, optional
        Stratified selection of the training / evaluation cohorts (default: the
        wrapped strategy's own selection). Their policy's ``rounds_per_epoch``
        bounds the rounds of the run: one Flower run is one sampler epoch. The fit
        sampler's ``participation_cap`` is the training charge's cap; its
        ``epsilon_per_round`` is not charged (training is charged from the DP
        wrapper's noise, or is not private). The evaluation sampler charges
        nothing itself: every evaluation round is charged in full by its
        regional release.
    fit_target : ReleaseTarget, Simulation or Unaccounted
        Where training is charged. Required inside a DP wrapper: the run's rho
        (``cap / (2 z**2)``, ``neighbours="add_remove"``) is reserved there once,
        before the first training round; a ``ReleaseTarget`` must charge a zCDP
        ledger (a pure one is refused here, before anything is charged). With a
        strategy that adds no noise a ``ReleaseTarget`` is refused (nothing to
        charge); a ``Simulation`` still seeds the fit sampler.
    num_rounds : int, optional
        The training rounds of the run (the ``ServerConfig``'s ``num_rounds``;
        Flower does not tell a strategy). Required inside a DP wrapper without a
        fit sampler (every client may train in every round: the cap is the
        number of rounds); with one, it may lower the cap. Training rounds
        beyond it are not configured.
    region_fn : callable, optional
        ``region_fn(client_proxy) -> region id`` for deployments that know the
        regions out of band; default: ask the client once (``get_properties``).
    max_workers : int, default 16
        Threads used to read the new clients' registration properties.
    secure_aggregation : flwr.server.workflow.SecAggPlusWorkflow, optional
        The SecAgg+ workflow the ServerApp trains under, for the wrapper to check
        before training (an even integer ``num_shares`` halts every round: refused,
        :func:`~spatialdp.flower.secagg.check_secaggplus`). SecAgg+ protects
        training only: evaluation reports reach the server in the clear
        (:data:`~spatialdp.flower.secagg.EVALUATION_TRUST`, in :attr:`limitations`).
    fleet_size : int, optional
        The number of clients expected to register. With it the samplers'
        cohorts, caps and planned rounds are checked against the fleet here;
        without it, when the fleet registers (before the first round selects
        anyone and before anything is charged). A shortfall that appears later
        (clients dropped out) shrinks the round's cohort, recorded in
        :meth:`round_table`, instead of stopping Flower's loop.
    neighbours : {"replace", "add_remove"}, default "replace"
        The neighbouring relation of every evaluation release: under
        ``"add_remove"`` which clients answered, and from which region, is
        protected too (noised cohorts and floors; see
        :func:`~spatialdp.federated.regional_report`).

    Examples
    --------
    >>> from flwr.server.strategy import FedAvg
    >>> from spatialdp.datasets import us_states_partition
    >>> from spatialdp.federated import MetricSpec
    >>> from spatialdp.privacy import Simulation
    >>> wrapped = SpatialDPStrategy(FedAvg(), partition=us_states_partition(),
    ...                             metrics=[MetricSpec("loss", 0.0, 4.0)], epsilon=0.5,
    ...                             target=Simulation(rng=0))
    >>> wrapped  # doctest: +NORMALIZE_WHITESPACE
    SpatialDPStrategy(FedAvg, metrics=['loss@1'], epsilon={'loss': 0.5}, min_cohort=50,
                      training='not private')
    >>> wrapped.training_privacy.statement
    'training: not private (the inner strategy adds no noise)'
    """

    def __init__(
        self,
        strategy: Any,
        *,
        partition: Partition,
        metrics: Sequence[Spec],
        epsilon: float | Mapping[str, float],
        target: Accounting,
        min_cohort: int = 50,
        alpha: float = 0.05,
        loss_metric: str | None = None,
        fit_sampler: StratifiedSampler | None = None,
        evaluate_sampler: StratifiedSampler | None = None,
        fit_target: Accounting | None = None,
        num_rounds: int | None = None,
        region_fn: Callable[[Any], str] | None = None,
        max_workers: int = 16,
        secure_aggregation: Any = None,
        fleet_size: int | None = None,
        neighbours: Neighbours = "replace",
    ) -> None:
        super().__init__()
        _refuse_message_api(strategy)
        self.strategy = check_instance(strategy, "strategy", Strategy,
                                       "pass a Flower strategy, e.g. flwr.server.strategy.FedAvg()")
        self.partition = check_instance(partition, "partition", Partition,
                                        "pass a spatialdp Partition, e.g. us_states_partition()")
        self.metrics = check_specs(metrics)
        self.epsilon = resolve_epsilons(self.metrics, epsilon)
        self.target = check_target(target)
        self.neighbours = check_neighbours(neighbours)
        self.min_cohort = check_cohort_floor(min_cohort)
        self.alpha = check_alpha(alpha)
        self.loss_metric = _loss_metric(self.metrics, loss_metric)
        self.fit_sampler = _sampler(fit_sampler, "fit_sampler", partition)
        self.evaluate_sampler = _sampler(evaluate_sampler, "evaluate_sampler", partition)
        #: How training is accounted: derived from the DP wrapper, or not private.
        self.training_privacy: TrainingPrivacy = training_privacy(
            self.strategy, policy=None if self.fit_sampler is None else self.fit_sampler.policy,
            num_rounds=num_rounds)
        self.num_rounds = self.training_privacy.rounds
        if self.fit_sampler is not None:
            check_fit_cohort(self.fit_sampler.cohort, self.training_privacy)
        self.fit_target = check_fit_target(fit_target, self.training_privacy)
        cohort = (self.training_privacy.num_sampled_clients if self.fit_sampler is None
                  else self.fit_sampler.cohort)
        #: The checked SecAgg+ workflow (None: no secure aggregation was declared).
        self.secure_aggregation = (None if secure_aggregation is None
                                   else check_secaggplus(secure_aggregation, cohort))
        self.fleet_size = (None if fleet_size is None
                           else check_count(fleet_size, "fleet_size", low=1))
        check_evaluation_plan(self.target, self.epsilon, self.evaluate_sampler,
                              num_rounds=self.num_rounds, min_cohort=self.min_cohort)
        for kind in KINDS:
            sampler = self._sampler_of(kind)
            if sampler is not None:
                planned_rounds(sampler, kind, self.num_rounds)
                if self.fleet_size is not None:
                    check_fleet(sampler, kind, self.fleet_size,
                                planned_rounds(sampler, kind, self.num_rounds))
        if region_fn is not None and not callable(region_fn):
            raise fail("region_fn", region_fn, "is not callable",
                       "pass a function client_proxy -> region id, or None")
        self.region_fn = region_fn
        self.max_workers = check_count(max_workers, "max_workers", low=1, high=1024)
        self._instructions = specs_to_config(self.metrics)
        self._regions: dict[str, str] = {}
        self._unregistered: dict[str, str] = {}
        self._states: dict[str, tuple[ParticipationState, np.ndarray]] = {}
        self._records: dict[int, dict[str, Any]] = {}
        self._fit_rounds: set[int] = set()
        self._fit_parameters: dict[int, list[np.ndarray]] = {}
        self._fleet_checked = self.fit_sampler is None and self.evaluate_sampler is None
        #: Where the training rho was reserved (target metadata), once it is.
        self.training_charge: dict[str, Any] | None = None
        #: Per evaluation round: the release (report, published values, drops).
        self.releases: dict[int, EvaluationRelease] = {}
        #: Per evaluation round that was refused: why (nothing was charged).
        self.refusals: dict[int, str] = {}

    def __repr__(self) -> str:
        return (f"SpatialDPStrategy({type(self.strategy).__name__}, "
                f"metrics={[s.key for s in self.metrics]}, epsilon={self.epsilon}, "
                f"min_cohort={self.min_cohort}, training={self.training_privacy.label!r})")

    @property
    def limitations(self) -> list[str]:
        """Return the card's limitations: the defaults and what this wrapper assumes.

        Pass them to ``ModelCard.build(..., limitations=strategy.limitations)``:
        evaluation assumes a trusted server (:data:`~spatialdp.flower.secagg.EVALUATION_TRUST`).
        """
        from spatialdp.cards.card import DEFAULT_LIMITATIONS

        return [*DEFAULT_LIMITATIONS, EVALUATION_TRUST]

    # ------------------------------------------------------------------ delegation
    def initialize_parameters(self, client_manager: Any) -> Any:
        """Delegate to the wrapped strategy."""
        return self.strategy.initialize_parameters(client_manager)

    def aggregate_fit(self, server_round: int, results: list[Any],
                      failures: list[Any]) -> Any:
        """Delegate to the wrapped strategy, under the conditions its training charge needs.

        Not private: the wrapped strategy's result, with the training statement
        added to the metrics (:data:`~spatialdp.flower.training.KEY_TRAINING`).
        Inside a DP wrapper: the round is aggregated only as the charge assumes
        (exactly ``num_sampled_clients`` updates, clipped, the wrapper's
        parameters unchanged; else nothing is aggregated and the reason is
        recorded), with equal weights, and only the noised parameters are
        returned: the wrapped strategy's fit metrics are client values without
        noise, withheld from Flower's History.
        """
        privacy = self.training_privacy
        if not privacy.private:
            parameters, metrics = self.strategy.aggregate_fit(server_round, results, failures)
            return parameters, {**(metrics or {}), KEY_TRAINING: privacy.label}
        refusal = round_refusal(privacy, self.strategy, results,
                                self._fit_parameters.pop(server_round, None))
        if refusal is not None:
            self._record(server_round, {"fit_refused": refusal})
            log(WARNING, "spatialdp: training round %s not aggregated: %s", server_round, refusal)
            return None, {KEY_TRAINING: privacy.label}
        parameters, metrics = self.strategy.aggregate_fit(server_round, equal_weights(results),
                                                          failures)
        self._record(server_round, {"fit_metrics_withheld": len(metrics)})
        return parameters, {KEY_TRAINING: privacy.label}

    def evaluate(self, server_round: int, parameters: Any) -> Any:
        """Delegate centralised (server-side data) evaluation to the wrapped strategy."""
        return self.strategy.evaluate(server_round, parameters)

    # ------------------------------------------------------------------ registration
    def _region_of(self, proxy: Any) -> tuple[str, str | None, str]:
        """Return (cid, region or None, reason) for one client, asked once."""
        try:
            if self.region_fn is not None:
                region, version = self.region_fn(proxy), self.partition.version
            else:
                res = proxy.get_properties(GetPropertiesIns(config={}), timeout=None,
                                           group_id=0)
                region = res.properties.get(KEY_REGION)
                version = res.properties.get(KEY_PARTITION)
        except Exception as err:  # a client that cannot answer is left out, not fatal
            return proxy.cid, None, f"registration failed: {type(err).__name__}"
        if version != self.partition.version:
            return proxy.cid, None, "partition version"
        if (not isinstance(region, str)
                or self.partition.region_ids.get_indexer(pd.Index([region]))[0] < 0):
            return proxy.cid, None, "unknown region"
        return proxy.cid, region, ""

    def _register(self, client_manager: Any) -> dict[str, Any]:
        """Read the region of every client seen for the first time; return all clients."""
        clients: dict[str, Any] = client_manager.all()
        new = [p for cid, p in clients.items()
               if cid not in self._regions and cid not in self._unregistered]
        if new:
            workers = min(self.max_workers, len(new))
            with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
                for cid, region, reason in pool.map(self._region_of, new):
                    if region is None:
                        self._unregistered[cid] = reason
                    else:
                        self._regions[cid] = region
            if self.neighbours == "replace":  # participation is public
                log(INFO, "spatialdp: %s clients registered their region (%s refused)",
                    len(self._regions), len(self._unregistered))
            else:  # add/remove: no exact count of people leaves the server's memory
                log(INFO, "spatialdp: new clients registered their region")
        return clients

    @property
    def regions(self) -> pd.Series:
        """The frozen region of every registered client (index: client id)."""
        return pd.Series(self._regions, name="region_id", dtype=object).rename_axis("client_id")

    # ------------------------------------------------------------------ selection
    def _sampler_of(self, kind: str) -> StratifiedSampler | None:
        return self.fit_sampler if kind == "fit" else self.evaluate_sampler

    def _selection_target(self, kind: str) -> Accounting:
        if kind == "fit":
            if isinstance(self.fit_target, Simulation):
                return self.fit_target.for_round(None)
            return Unaccounted("training cohort selection: the training charge comes from the "
                               f"wrapped strategy ({self.training_privacy.statement})")
        if isinstance(self.target, Simulation):
            return Simulation(rng=int(self.target.rng.integers(2**63)))
        return Unaccounted("evaluation cohort selection: every evaluation round is charged "
                           "in full by its regional release")

    def _state(self, kind: str) -> tuple[ParticipationState, np.ndarray]:
        if kind not in self._states:
            sampler = self._sampler_of(kind)
            assert sampler is not None
            fleet = np.array(sorted(self._regions), dtype=object)
            if fleet.size == 0:
                raise InvalidInput("no client has registered a region of "
                                   f"{self.partition.key!r}; nothing can be selected")
            self._check_registered_fleet()
            strata = np.array([self._regions[c] for c in fleet], dtype=object)
            target = self._selection_target(kind)
            charged = self.fit_target if kind == "fit" else target
            epoch = charged.epoch if isinstance(charged, ReleaseTarget) else 0
            state = sampler.new_state(strata, target=target, epoch=epoch)
            self._states[kind] = (state, fleet)
        return self._states[kind]

    def _check_registered_fleet(self) -> None:
        """Refuse, once, before the first selection and any charge, plans the fleet cannot fill.

        Both samplers are checked against the registered fleet the first time
        either is needed (or training is about to be reserved), so an evaluation
        plan the fleet cannot fill is refused before round 1 trains too.
        """
        if self._fleet_checked:
            return
        for kind in KINDS:
            sampler = self._sampler_of(kind)
            if sampler is not None:
                check_fleet(sampler, kind, len(self._regions),
                            planned_rounds(sampler, kind, self.num_rounds))
        self._fleet_checked = True

    def _round_sampler(self, kind: str, server_round: int, state: ParticipationState
                       ) -> StratifiedSampler | None:
        """Return the sampler for this round: the configured one, or one with a smaller cohort.

        A round the epoch cannot hold, or a fleet exhausted under the cap (clients
        dropped out, seats concentrated), does not stop Flower's loop: the round is
        not selected (None) or gets the cohort the eligible fleet can fill, and
        the shortfall is recorded (``<kind>_cohort_shortfall`` in :meth:`round_table`).
        """
        sampler = self._sampler_of(kind)
        assert sampler is not None
        if len(state.rounds) >= sampler.policy.rounds_per_epoch:
            self._shortfall(kind, server_round, sampler.cohort, 0,
                            f"the sampler's epoch of {sampler.policy.rounds_per_epoch} "
                            "rounds is used up")
            return None
        eligible = int(state.eligible_per_stratum(sampler.strata.n_strata).sum())
        if eligible >= sampler.cohort:
            return sampler
        self._shortfall(kind, server_round, sampler.cohort, eligible,
                        "the eligible fleet under the participation cap is smaller than "
                        "the cohort")
        if eligible == 0:
            return None
        smaller = copy.copy(sampler)
        smaller.cohort = eligible
        return smaller

    def _shortfall(self, kind: str, server_round: int, planned: int, available: int,
                   reason: str) -> None:
        if self.neighbours == "replace":  # the selection records are public
            self._record(server_round, {f"{kind}_cohort_shortfall": {
                "planned": planned, "available": available, "reason": reason}})
            log(WARNING, "spatialdp: %s round %s: cohort of %s shrunk to %s: %s", kind,
                server_round, planned, available, reason)
        else:  # add/remove: no exact counts leave the server's memory
            log(WARNING, "spatialdp: %s round %s: cohort shrunk: %s", kind, server_round, reason)

    def _select(self, kind: str, server_round: int, client_manager: Any) -> list[Any]:
        # Wait, as the wrapped strategy's own sampling would, for its minimum fleet.
        client_manager.wait_for(_min_available(self.strategy), timeout=WAIT_SECONDS)
        clients = self._register(client_manager)
        state, fleet = self._state(kind)
        sampler = self._round_sampler(kind, server_round, state)
        if sampler is None:
            return []
        cohort = sampler.select(state, server_round)
        chosen = fleet[cohort.clients]
        proxies = [clients[c] for c in chosen if c in clients]
        if self.neighbours == "replace":  # the selection records are public
            self._record(server_round, {
                f"{kind}_score": cohort.score,
                f"{kind}_wanted": int(cohort.counts["wanted"].sum()),
                f"{kind}_selected": int(chosen.size),
                f"{kind}_offline": int(chosen.size - len(proxies)),
                f"{kind}_shortfalls": dict(cohort.notes),
                f"{kind}_merges": [m.to_dict() for m in cohort.merges],
            })
            log(INFO, "spatialdp: %s round %s: %s clients in %s groups, coverage score %.3f",
                kind, server_round, len(proxies), len(cohort.groups), cohort.score)
        else:  # add/remove: exact counts and merges on exact pools stay on the server
            log(INFO, "spatialdp: %s round %s: cohort selected", kind, server_round)
        return proxies

    def _record(self, server_round: int, values: Mapping[str, Any]) -> None:
        self._records.setdefault(server_round, {"round": server_round}).update(values)

    def configure_fit(self, server_round: int, parameters: Any, client_manager: Any
                      ) -> list[tuple[Any, Any]]:
        """Return the wrapped strategy's FitIns, sent to a stratified cohort (with a sampler).

        Inside a DP wrapper the run's training rho is reserved before the first
        round's instructions leave (once). A round that cannot be accounted is
        not configured (nothing trains; the reason is recorded and logged):
        a round beyond ``num_rounds``, or a cohort of other than
        ``num_sampled_clients`` clients.
        """
        if self.num_rounds is not None and server_round not in self._fit_rounds and len(
                self._fit_rounds) >= self.num_rounds:
            return self._refuse_fit(server_round, f"the run's num_rounds={self.num_rounds} "
                                    "training rounds are configured already")
        manager = client_manager
        if self.fit_sampler is not None:
            manager = _Cohort(self._select("fit", server_round, client_manager))
            if not manager.num_available():
                return self._refuse_fit(server_round, "no client could be selected")
        pairs = list(self.strategy.configure_fit(server_round, parameters, manager) or [])
        if not pairs:
            return []
        privacy = self.training_privacy
        if not self._fleet_checked:  # an evaluation sampler only: its plan before training
            self._register(client_manager)
            self._check_registered_fleet()
        if privacy.private:
            if len(pairs) != privacy.num_sampled_clients:
                return self._refuse_fit(server_round, "the cohort is not num_sampled_clients="
                                        f"{privacy.num_sampled_clients} clients")
            self._reserve_training()
            if privacy.clipping == "client":
                self._fit_parameters[server_round] = parameters_to_ndarrays(parameters)
        elif not self._fit_rounds:
            log(WARNING, "spatialdp: %s; nothing is charged to training", privacy.statement)
        self._fit_rounds.add(server_round)
        self._record(server_round, {"training": privacy.label})
        return pairs

    def _refuse_fit(self, server_round: int, reason: str) -> list[tuple[Any, Any]]:
        self._record(server_round, {"fit_refused": reason})
        log(WARNING, "spatialdp: training round %s not configured: %s", server_round, reason)
        return []

    def _reserve_training(self) -> None:
        """Charge the run's training rho once (a reservation for every capped round)."""
        if self.training_charge is not None:
            return
        assert self.fit_target is not None
        self.training_charge = reserve_training(self.training_privacy, self.fit_target)
        log(INFO, "spatialdp: %s; reserved on %s", self.training_privacy.statement,
            self.training_charge.get("accounting"))

    def configure_evaluate(self, server_round: int, parameters: Any, client_manager: Any
                           ) -> list[tuple[Any, Any]]:
        """Return the wrapper's evaluation instructions for the evaluation cohort.

        The wrapped strategy's config is kept and the specs the devices must clip
        under are added (:data:`~spatialdp.flower.codec.KEY_SPECS`). The cohort is
        the stratified one with ``evaluate_sampler``, else the wrapped strategy's.
        """
        if self.evaluate_sampler is None:
            base = self.strategy.configure_evaluate(server_round, parameters, client_manager)
            self._register(client_manager)
        else:
            cohort = _Cohort(self._select("evaluate", server_round, client_manager))
            if not cohort.num_available():
                return []
            base = self.strategy.configure_evaluate(server_round, parameters, cohort)
        extra: dict[str, Any] = {KEY_SPECS: self._instructions, KEY_ROUND: int(server_round)}
        return [(proxy, EvaluateIns(parameters=ins.parameters, config={**ins.config, **extra}))
                for proxy, ins in base or []]

    # ------------------------------------------------------------------ evaluation
    def _round_target(self, server_round: int) -> Accounting:
        return self.target.for_round(server_round)

    def aggregate_evaluate(self, server_round: int, results: list[Any], failures: list[Any]
                           ) -> tuple[float | None, dict[str, Any]]:
        """Release the round's bounded reports per region; return the published values.

        Returns ``(loss, metrics)`` as Flower expects, both published (noised,
        from clipped reports; see
        :func:`~spatialdp.flower.evaluation.published_metrics`). A refused release
        (every region below the floor, budget exhausted, no usable report)
        charges nothing, is recorded in :attr:`refusals` and returns
        ``(None, {})``: Flower then records nothing for the round.
        """
        replies = {str(proxy.cid): res.metrics for proxy, res in results}
        try:
            release = release_evaluation(
                replies, partition=self.partition, metrics=self.metrics, epsilon=self.epsilon,
                target=self._round_target(server_round), min_cohort=self.min_cohort,
                alpha=self.alpha, regions=self._regions, loss_metric=self.loss_metric,
                neighbours=self.neighbours)
        except SpatialDPError as err:
            self.refusals[server_round] = f"{type(err).__name__}: {err}"
            failed = ({"evaluate_failures": len(failures)} if self.neighbours == "replace"
                      else {})  # add/remove: no exact counts
            self._record(server_round, {"evaluate_refused": str(err), **failed})
            log(WARNING, "spatialdp: evaluation round %s refused, nothing charged: %s",
                server_round, err)
            return None, {}
        self.releases[server_round] = release
        counts = ({"evaluate_received": release.received, "evaluate_used": release.used,
                   "evaluate_dropped": dict(release.dropped),
                   "evaluate_failures": len(failures)}
                  if self.neighbours == "replace" else {})  # add/remove: no exact counts
        self._record(server_round, {
            **counts, "epsilon": release.epsilon, "neighbours": self.neighbours,
            "accounting": release.report.accounting.get("accounting"),
        })
        return release.loss, dict(release.metrics)

    # ------------------------------------------------------------------ results
    @property
    def reports(self) -> dict[int, RegionalReport]:
        """The regional report of every released evaluation round."""
        return {r: rel.report for r, rel in self.releases.items()}

    def round_table(self) -> pd.DataFrame:
        """Return one row per round: coverage scores, cohort sizes, drops, epsilon.

        Under ``neighbours="add_remove"`` the exact counts of people (selected,
        received, used, dropped) and the merges are left out: they are the
        server's own records, and what is published may hold only noised counts.
        """
        return pd.DataFrame(list(self._records.values())).set_index("round").sort_index()

    def epsilon_spent(self) -> dict[str, float]:
        """Return the epsilon the evaluation rounds charged, per line item (exact decimal sums).

        Every released round's total, when ``target`` is a ``ReleaseTarget``
        (a zCDP ledger records each as ``epsilon**2 / 2``). Simulated and
        unaccounted rounds charge nothing. Training is charged in rho:
        :meth:`rho_spent`.
        """
        if not isinstance(self.target, ReleaseTarget):
            return {}
        item = self.target.line_item or REGIONAL_LINE_ITEM
        return {item: exact_total([rel.epsilon for rel in self.releases.values()])}

    def rho_spent(self) -> dict[str, float]:
        """Return the training rho reserved on the fit target's ledger (``{}`` without one).

        ``{"training": rho}`` once the first training round reserved it
        (``training_privacy.rho``), ``0.0`` before; a strategy that adds no noise
        charges nothing and has no ledger target.
        """
        if not isinstance(self.fit_target, ReleaseTarget):
            return {}
        rho = self.training_privacy.rho if self.training_charge is not None else 0.0
        return {LineItem.TRAINING.value: float(rho or 0.0)}

    def coverage_of(self, client_ids: Iterable[str]) -> float:
        """Return the coverage score of any set of registered clients (e.g. Flower's sample).

        The score of :func:`spatialdp.sampling.coverage_score`: how closely the
        clients per region follow sqrt-of-population shares of the registered fleet.
        """
        positions = self.partition.region_ids.get_indexer(pd.Index(
            [self._regions[str(c)] for c in client_ids if str(c) in self._regions]))
        n = self.partition.n_regions
        population = np.bincount(self.partition.region_ids.get_indexer(
            pd.Index(list(self._regions.values()))), minlength=n)
        return coverage_score(np.bincount(positions, minlength=n), population)

    def coverage(self, kind: str = "fit", **kwargs: Any) -> Coverage:
        """Return the run's :class:`~spatialdp.sampling.Coverage` (model card, coverage map).

        ``kwargs`` go to :func:`spatialdp.sampling.epoch_coverage`.
        """
        kind = check_choice(kind, "kind", KINDS)
        sampler = self._sampler_of(kind)
        if sampler is None or kind not in self._states:
            raise fail("kind", kind, "has no stratified selection in this run",
                       f"pass {kind}_sampler= and run at least one round")
        return epoch_coverage(sampler, self._states[kind][0], **kwargs)

    def history_frame(self, metric: str) -> pd.DataFrame:
        """Return one metric's published frames over rounds, the input of :func:`drift`."""
        frames = [rep[metric] for rep in self.reports.values()]
        if not frames:
            raise fail("metric", metric, "has no released round yet", "run evaluation rounds")
        return pd.concat(frames).reset_index()

    def alerts(self, metric: str, *, alpha: float = 0.01, **kwargs: Any) -> pd.DataFrame:
        """Compare the last two released rounds region by region (``compare_reports``)."""
        rounds = sorted(self.releases)
        if len(rounds) < 2:
            raise fail("metric", metric, "has fewer than two released rounds",
                       "run another evaluation round")
        return compare_reports(self.releases[rounds[-1]].report[metric],
                               self.releases[rounds[-2]].report[metric], alpha=alpha, **kwargs)

    def drift(self, metric: str, *, window: int = 8, alpha: float = 0.01, **kwargs: Any
              ) -> pd.DataFrame:
        """Trend of each region over the released rounds, tested against the noise."""
        return drift(self.history_frame(metric), window=window, alpha=alpha, **kwargs)
