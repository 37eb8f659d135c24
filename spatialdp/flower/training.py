"""The training line of a Flower run: derived from Flower's DP wrapper, or recorded as none.

:class:`~spatialdp.flower.SpatialDPStrategy` passes training to the strategy it
wraps. What the ledger's ``training`` line says about that training comes from
the training mechanism itself, never from a number typed in:

- **Flower's fixed-clipping DP wrappers**
  (``flwr.server.strategy.DifferentialPrivacyServerSideFixedClipping`` and
  ``DifferentialPrivacyClientSideFixedClipping``). Each round they clip every
  update to the L2 norm ``C`` (on the server, or on the client with
  ``fixedclipping_mod``), let the wrapped FedAvg average them, and add Gaussian
  noise of standard deviation ``z C / n`` to the average (``z`` the noise
  multiplier, ``n = num_sampled_clients``; Flower's ``compute_stdv``). With
  equal weights and exactly ``n`` updates the average is the sum of the clipped
  updates divided by the public ``n``, so each round is a Gaussian sum with
  noise ``z C`` and L2 sensitivity ``C`` for one client added or removed: zCDP
  ``rho = 1 / (2 z**2)`` per round (Bun & Steinke 2016, Prop. 1.6). A client
  trains in at most ``cap`` rounds (the fit sampler's participation cap, or the
  number of rounds without one), so its loss over the run is
  ``rho = cap / (2 z**2)`` (zCDP composition). It is charged with
  ``neighbours="add_remove"``: under replace-one neighbours (one client's update
  swapped for another's) the sensitivity is ``2 C`` and rho four times larger.
- **Any other strategy** adds no noise that spatialdp can account for: training
  is recorded as not private (:data:`NOT_PRIVATE`), and nothing is charged.
- Flower's other noising wrappers (adaptive clipping, the deprecated
  ``DPFedAvgFixed`` / ``DPFedAvgAdaptive``) are refused: their loss is not
  derived here.

Examples
--------
>>> from flwr.server.strategy import DifferentialPrivacyServerSideFixedClipping, FedAvg
>>> training_privacy(FedAvg(), num_rounds=5).statement
'training: not private (the inner strategy adds no noise)'
>>> dp = DifferentialPrivacyServerSideFixedClipping(FedAvg(), noise_multiplier=2.0,
...                                                 clipping_norm=0.5, num_sampled_clients=20)
>>> derived = training_privacy(dp, num_rounds=4)
>>> derived.participation_cap, derived.rho_per_round, derived.rho     # 4 / (2 * 2**2)
(4, 0.125, 0.5)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from spatialdp._validation import check_count, check_positive, fail
from spatialdp.flower._flwr import flwr_modules
from spatialdp.privacy.budget import LineItem, Neighbours, Overlapping
from spatialdp.privacy.calibration import smallest_float_at_least
from spatialdp.privacy.pipeline import ReleasePlan, check_affordable, exact_total, run_release
from spatialdp.privacy.target import Accounting, ReleaseTarget, check_target
from spatialdp.sampling.policy import ParticipationPolicy

_, _, flwr_strategy = flwr_modules()  # imports Flower quietly, or names the missing extra
from flwr.common import FitRes, parameters_to_ndarrays  # noqa: E402
from flwr.supercore.differential_privacy import compute_stdv  # noqa: E402

__all__ = ["KEY_TRAINING", "NOT_PRIVATE", "TRAINING_NEIGHBOURS", "TrainingPrivacy",
           "training_privacy"]

#: The statement recorded when the wrapped strategy adds no noise.
NOT_PRIVATE = "training: not private (the inner strategy adds no noise)"
#: The neighbouring relation the derived training charge holds for.
TRAINING_NEIGHBOURS: Neighbours = "add_remove"
#: Key of the training statement in each round's fit metrics (Flower's History).
KEY_TRAINING = "spatialdp/training"

FIXED_CLIPPING = (flwr_strategy.DifferentialPrivacyServerSideFixedClipping,
                  flwr_strategy.DifferentialPrivacyClientSideFixedClipping)
_NOT_DERIVED = (flwr_strategy.DifferentialPrivacyServerSideAdaptiveClipping,
                flwr_strategy.DifferentialPrivacyClientSideAdaptiveClipping,
                flwr_strategy.DPFedAvgFixed, flwr_strategy.DPFedAvgAdaptive)
#: Relative slack on a client-clipped update's norm (float rounding of the clip itself).
CLIP_TOLERANCE = 1e-6


@dataclass(frozen=True)
class TrainingPrivacy:
    """What a run's training costs each client, derived from the wrapped strategy.

    Attributes
    ----------
    private : bool
        False when the wrapped strategy adds no noise (nothing is charged).
    statement : str
        One line for logs, files and the model card.
    mechanism : str
        The wrapped strategy's class.
    noise_multiplier, clipping_norm : float or None
        Flower's ``z`` and ``C``.
    num_sampled_clients : int or None
        Flower's ``n``: the noise ``z C / n`` is added to the mean of ``n`` updates.
    clipping : {"server", "client"} or None
        Where the updates are clipped.
    participation_cap : int or None
        The most training rounds one client takes part in.
    cap_source : str or None
        Where the cap comes from (the fit sampler's policy, or the number of rounds).
    rounds : int or None
        Training rounds the run may configure.
    rho_per_round : float or None
        ``1 / (2 z**2)`` (rounded up), one client's zCDP loss in one round.
    rho : float or None
        ``participation_cap x rho_per_round``: one client's loss over the run,
        reserved on the ledger before the first training round.
    neighbours : str or None
        ``"add_remove"``: the relation ``rho`` holds for.
    """

    private: bool
    statement: str
    mechanism: str
    noise_multiplier: float | None = None
    clipping_norm: float | None = None
    num_sampled_clients: int | None = None
    clipping: str | None = None
    participation_cap: int | None = None
    cap_source: str | None = None
    rounds: int | None = None
    rho_per_round: float | None = None
    rho: float | None = None
    neighbours: Neighbours | None = None

    @property
    def label(self) -> str:
        """A short label for round tables and Flower's History."""
        return f"zCDP rho {self.rho:.6g} per client" if self.private else "not private"

    def to_dict(self) -> dict[str, Any]:
        """Return the fields as plain JSON-ready values."""
        return asdict(self)

    def structure(self) -> Overlapping:
        """Return the ledger structure: ``rounds`` parts, at most ``cap`` per client."""
        assert self.rounds is not None
        assert self.participation_cap is not None
        return Overlapping(f"flower training:{self.mechanism}", parts=self.rounds,
                           max_parts_per_client=self.participation_cap)


def rho_per_round(noise_multiplier: float, clipping_norm: float,
                  num_sampled_clients: int) -> float:
    """Return one client's zCDP rho for one round of Flower's fixed-clipping noise.

    The noise is the standard deviation Flower itself adds to the mean of
    ``num_sampled_clients`` clipped updates (``flwr``'s ``compute_stdv``:
    ``z C / n``); one client added or removed moves that mean by at most
    ``C / n``. ``rho = (C / n)**2 / (2 sigma**2)``, computed exactly and rounded
    up to a float: ``1 / (2 z**2)`` up to float rounding.

    Examples
    --------
    >>> rho_per_round(2.0, 0.5, 20)
    0.125
    >>> rho_per_round(1.0, 0.5, 30)   # Flower's float z C / n is a hair below 1/60: rounded up
    0.5000000000000001
    """
    sigma = compute_stdv(noise_multiplier, clipping_norm, num_sampled_clients)
    sensitivity = Fraction(clipping_norm) / num_sampled_clients
    return smallest_float_at_least(sensitivity**2 / (2 * Fraction(sigma) ** 2),
                                    "rho per round", "raise the noise multiplier")


def _cap(policy: ParticipationPolicy | None, num_rounds: int | None) -> tuple[int, int, str]:
    """Return (participation cap, rounds, where the cap comes from)."""
    if policy is None:
        if num_rounds is None:
            raise fail("num_rounds", None, "is missing: without a fit_sampler every client "
                       "may train in every round, so the participation cap is the number of "
                       "training rounds, and Flower does not tell a strategy how many there "
                       "will be (ServerConfig(num_rounds) goes to the server loop)",
                       "pass num_rounds= the run's ServerConfig num_rounds, or a fit_sampler "
                       "whose ParticipationPolicy caps each client's rounds")
        return num_rounds, num_rounds, "num_rounds (no fit sampler: any client, every round)"
    if num_rounds is not None and num_rounds > policy.rounds_per_epoch:
        raise fail("num_rounds", num_rounds, f"exceeds the fit sampler's rounds_per_epoch="
                   f"{policy.rounds_per_epoch}: one Flower run is one sampler epoch",
                   "pass num_rounds <= rounds_per_epoch, or a ParticipationPolicy with "
                   "more rounds_per_epoch")
    rounds = policy.rounds_per_epoch if num_rounds is None else num_rounds
    return (min(policy.participation_cap, rounds), rounds,
            "the fit sampler's ParticipationPolicy.participation_cap")


def _check_wrapper(strategy: Any) -> tuple[float, float, int]:
    """Return (z, C, n) of a fixed-clipping wrapper whose noise can be accounted."""
    name = type(strategy).__name__
    z = check_positive(strategy.noise_multiplier, f"{name}.noise_multiplier",
                       fix="pass noise_multiplier > 0 (zero adds no noise: wrap the strategy "
                           "without the DP wrapper, and training is recorded as not private)")
    c = check_positive(strategy.clipping_norm, f"{name}.clipping_norm",
                       fix="pass a finite clipping_norm > 0")
    n = check_count(strategy.num_sampled_clients, f"{name}.num_sampled_clients", low=1)
    inner = strategy.strategy
    if type(inner).aggregate_fit is not flwr_strategy.FedAvg.aggregate_fit:
        raise fail(f"{name}.strategy", type(inner).__name__,
                   "does not aggregate by FedAvg's mean: the wrapper adds its noise z C / n "
                   "after the inner strategy's aggregation, which covers one client's "
                   "influence only when that aggregation is the mean of the clipped updates "
                   "(a server optimiser or a robust aggregator transforms it first)",
                   "wrap FedAvg (or FedProx, whose aggregation is FedAvg's) in the DP wrapper")
    return z, c, n


def training_privacy(strategy: Any, *, policy: ParticipationPolicy | None = None,
                     num_rounds: int | None = None) -> TrainingPrivacy:
    """Return the training privacy of a wrapped Flower strategy (nothing is charged).

    Parameters
    ----------
    strategy : flwr.server.strategy.Strategy
        The strategy :class:`~spatialdp.flower.SpatialDPStrategy` wraps.
    policy : ParticipationPolicy, optional
        The fit sampler's policy: its participation cap bounds each client's rounds.
    num_rounds : int, optional
        The run's training rounds (required for a DP wrapper without ``policy``).

    Returns
    -------
    TrainingPrivacy

    Raises
    ------
    InvalidInput
        A noising wrapper whose loss cannot be derived (adaptive clipping, the
        deprecated wrappers, ``z <= 0``, a non-finite ``C``, an inner strategy
        that does not average), or a missing or infeasible participation cap.
    """
    name = type(strategy).__name__
    if isinstance(strategy, _NOT_DERIVED):
        raise fail("strategy", name, "adds noise whose privacy loss spatialdp does not derive",
                   "use DifferentialPrivacyServerSideFixedClipping or "
                   "DifferentialPrivacyClientSideFixedClipping, whose Gaussian sum spatialdp "
                   "charges as zCDP rho = cap / (2 z^2)")
    rounds = None if num_rounds is None else check_count(num_rounds, "num_rounds", low=1)
    if not isinstance(strategy, FIXED_CLIPPING):
        return TrainingPrivacy(private=False, statement=NOT_PRIVATE, mechanism=name,
                               rounds=rounds)
    z, c, n = _check_wrapper(strategy)
    cap, rounds, source = _cap(policy, rounds)
    per_round = rho_per_round(z, c, n)
    rho = exact_total([per_round] * cap)  # what the ledger records: cap x per round
    server_side = flwr_strategy.DifferentialPrivacyServerSideFixedClipping
    where = "server" if isinstance(strategy, server_side) else "client"
    statement = (f"training: zCDP rho {rho:.6g} per client over the run = participation cap "
                 f"{cap} x 1/(2 z^2) with noise multiplier z = {z:g} (clipping norm "
                 f"C = {c:g}, {where}-side clipping): a Gaussian sum with L2 sensitivity C, "
                 f"one client added or removed ({name})")
    return TrainingPrivacy(private=True, statement=statement, mechanism=name,
                           noise_multiplier=z, clipping_norm=c, num_sampled_clients=n,
                           clipping=where, participation_cap=cap, cap_source=source,
                           rounds=rounds, rho_per_round=per_round, rho=rho,
                           neighbours=TRAINING_NEIGHBOURS)


def check_fit_target(value: Any, privacy: TrainingPrivacy) -> Accounting | None:
    """Return where training is charged, refusing what cannot pay or has nothing to pay.

    A DP wrapper needs a target; a ledger target is checked as the charge will
    be (:func:`~spatialdp.privacy.pipeline.check_affordable`): a pure-epsilon
    ledger is refused (``LedgerError``: the Gaussian's rho has no pure epsilon;
    open it with ``accounting="zcdp"``), and so is a budget that cannot pay the
    run (``BudgetExceeded``), before anything is charged. With a strategy that
    adds no noise a ledger target is refused (there is nothing to charge),
    while a ``Simulation`` (it seeds the fit sampler) or an ``Unaccounted`` is kept.
    """
    if value is None:
        if privacy.private:
            raise fail("fit_target", None, f"is missing while the inner strategy "
                       f"({privacy.mechanism}) adds training noise",
                       "pass where its rho is charged: ReleaseTarget(ledger, epoch) on a "
                       "PrivacyLedger(..., accounting='zcdp'), Simulation(rng) or "
                       "Unaccounted(reason)")
        return None
    target = check_target(value)
    if not isinstance(target, ReleaseTarget):
        return target
    if not privacy.private:
        raise fail("fit_target", target, f"charges a ledger, but the inner strategy "
                   f"({privacy.mechanism}) adds no noise: training is not private and there is "
                   "nothing to charge (no made-up epsilon is recorded for it)",
                   "drop fit_target= (training is then recorded as not private), or wrap "
                   "the strategy in DifferentialPrivacyServerSideFixedClipping")
    if target.line_item not in (None, LineItem.TRAINING.value):
        raise fail("fit_target.line_item", target.line_item, "is not the training line item",
                   "leave line_item unset: training is charged to 'training'")
    assert privacy.rho_per_round is not None
    assert privacy.participation_cap is not None
    # The ledger's own check: a pure-epsilon ledger refuses rho (LedgerError: zCDP
    # implies no pure epsilon), and a budget that cannot pay the run is refused.
    check_affordable(target, default_line_item=LineItem.TRAINING.value,
                     rho=privacy.rho_per_round, charges=privacy.participation_cap)
    return target


def check_fit_cohort(cohort: int, privacy: TrainingPrivacy) -> None:
    """Refuse a fit sampler whose cohort is not the wrapper's ``num_sampled_clients``."""
    if privacy.private and cohort != privacy.num_sampled_clients:
        raise fail("fit_sampler.cohort", cohort, f"differs from the DP wrapper's "
                   f"num_sampled_clients={privacy.num_sampled_clients}: its noise z C / n is "
                   "calibrated to the mean of exactly n updates",
                   "build the sampler with cohort = num_sampled_clients")


def reserve_training(privacy: TrainingPrivacy, target: Accounting) -> dict[str, Any]:
    """Charge the run's training loss once, before the first training round; return where.

    A reservation, like a sampler epoch's: the per-round noise is Flower's to
    draw, so the plan draws nothing; the ledger records ``rho_per_round`` for
    each of the cap's rounds (``Overlapping`` structure), ``neighbours="add_remove"``.
    """
    assert privacy.private
    assert privacy.rho_per_round is not None
    plan: ReleasePlan[dict[str, Any]] = ReleasePlan(
        None, [], lambda _: dict(target.metadata()), rho=privacy.rho_per_round)
    (where,) = run_release(
        [plan], target=target, structure=privacy.structure(),
        what=f"Flower training noise of {privacy.mechanism} (z={privacy.noise_multiplier:g}, "
             f"C={privacy.clipping_norm:g}, num_sampled_clients={privacy.num_sampled_clients}),"
             f" participation cap {privacy.participation_cap} from {privacy.cap_source}",
        default_line_item=LineItem.TRAINING.value, neighbours=TRAINING_NEIGHBOURS)
    return where


def _update_norm(result: Any, current: Sequence[np.ndarray]) -> float:
    arrays = parameters_to_ndarrays(result.parameters)
    return math.sqrt(sum(float(np.sum((np.asarray(a, dtype=np.float64) - b) ** 2))
                         for a, b in zip(arrays, current, strict=True)))


def round_refusal(privacy: TrainingPrivacy, strategy: Any, results: Sequence[Any],
                  current: Sequence[np.ndarray] | None) -> str | None:
    """Return why a round's updates cannot be aggregated under the charge, or None.

    The charge holds for the mean of exactly ``num_sampled_clients`` updates,
    each clipped to ``C``, under the parameters it was derived from.
    """
    now = (strategy.noise_multiplier, strategy.clipping_norm, strategy.num_sampled_clients)
    if now != (privacy.noise_multiplier, privacy.clipping_norm, privacy.num_sampled_clients):
        return ("the DP wrapper's noise_multiplier, clipping_norm or num_sampled_clients "
                "changed after the training charge was derived")
    if len(results) != privacy.num_sampled_clients:
        return (f"not exactly num_sampled_clients={privacy.num_sampled_clients} updates: the "
                "noise is calibrated to the mean of exactly that many")
    if privacy.clipping == "client":
        if current is None:
            return "the round's parameters were not configured by this strategy"
        limit = float(privacy.clipping_norm) * (1 + CLIP_TOLERANCE)  # type: ignore[arg-type]
        if any(_update_norm(res, current) > limit for _, res in results):
            return ("an update is longer than clipping_norm: the clients did not clip (add "
                    "Flower's fixedclipping_mod to the ClientApp)")
    return None


def equal_weights(results: Sequence[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Return the results with ``num_examples`` 1 each: FedAvg's mean, unweighted.

    A client-reported example count would scale one client's weight in the mean
    beyond ``1 / n``, and the noise ``z C / n`` would no longer cover it.
    """
    return [(proxy, FitRes(status=res.status, parameters=res.parameters, num_examples=1,
                           metrics=res.metrics)) for proxy, res in results]

