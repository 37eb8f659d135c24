"""Shared Flower test pieces: a stratified sampler over the states, an in-process client manager."""

from __future__ import annotations

from typing import Any

from spatialdp.flower._flwr import flwr_modules
from spatialdp.flower.simulation import InProcessClientProxy
from spatialdp.sampling import ParticipationPolicy, Strata, StratifiedSampler


def make_sampler(states: Any, *, cohort: int = 10, cap: int = 2, rounds: int = 4
                 ) -> StratifiedSampler:
    """Return a sqrt-allocation sampler over ``states`` with a participation cap."""
    policy = ParticipationPolicy(participation_cap=cap, epsilon_per_round=0.1,
                                 rounds_per_epoch=rounds)
    return StratifiedSampler(Strata(states, basis="administrative"), cohort=cohort,
                             policy=policy)


def make_manager(clients: dict[str, Any]) -> Any:
    """Return a Flower ``SimpleClientManager`` with every client registered in process."""
    _, server, _ = flwr_modules()
    manager = server.SimpleClientManager()
    for cid, client in clients.items():
        manager.register(InProcessClientProxy(cid, client))
    return manager
