"""The participation policy: cap and per-round epsilon, stated together.

Each participation is a release against the client's budget, so the cap and the
per-round epsilon together *are* the per-client guarantee of an epoch:
``epsilon_per_client_epoch = participation_cap * epsilon_per_round`` (basic
sequential composition). A :class:`ParticipationPolicy` cannot be built without
both, so no sampler runs with a per-client epsilon nobody can state.
"""

from __future__ import annotations

from dataclasses import dataclass

from spatialdp._validation import check_epsilon, check_integer, fail
from spatialdp.privacy.budget import Overlapping

__all__ = ["ParticipationPolicy"]


@dataclass(frozen=True)
class ParticipationPolicy:
    """How often a client may take part per epoch, and what each participation costs.

    Parameters
    ----------
    participation_cap : int
        Most rounds one client takes part in per epoch (>= 1).
    epsilon_per_round : float
        The privacy loss of one participation (the training release of a round).
    rounds_per_epoch : int
        Rounds in an epoch (>= ``participation_cap``); the sampler refuses more.

    Examples
    --------
    >>> policy = ParticipationPolicy(participation_cap=3, epsilon_per_round=0.2,
    ...                              rounds_per_epoch=20)
    >>> round(policy.epsilon_per_client_epoch, 6)
    0.6
    """

    participation_cap: int
    epsilon_per_round: float
    rounds_per_epoch: int

    def __post_init__(self) -> None:
        cap = check_integer(self.participation_cap, "participation_cap", low=1, high=65_535,
                            fix="pass how many rounds one client may join per epoch, >= 1")
        rounds = check_integer(self.rounds_per_epoch, "rounds_per_epoch", low=1,
                               fix="pass the number of rounds in an epoch, >= 1")
        if cap > rounds:
            raise fail("participation_cap", cap,
                       f"exceeds rounds_per_epoch={rounds}: the cap could never bind and the "
                       "stated per-client epsilon would overstate nothing but confuse",
                       "pass a cap <= rounds_per_epoch")
        object.__setattr__(self, "participation_cap", cap)
        object.__setattr__(self, "rounds_per_epoch", rounds)
        object.__setattr__(self, "epsilon_per_round",
                           check_epsilon(self.epsilon_per_round, "epsilon_per_round"))

    @property
    def epsilon_per_client_epoch(self) -> float:
        """``participation_cap * epsilon_per_round``: the per-client loss of an epoch."""
        return self.participation_cap * self.epsilon_per_round

    def structure(self, name: str) -> Overlapping:
        """Return the ledger structure: ``rounds_per_epoch`` parts, ``cap`` per client.

        Charged with ``epsilon=epsilon_per_round``, the ledger multiplies by the cap,
        so the recorded charge is exactly :attr:`epsilon_per_client_epoch`.
        """
        return Overlapping(name, parts=self.rounds_per_epoch,
                           max_parts_per_client=self.participation_cap)

    def describe(self) -> str:
        """Return the one-line statement of the per-client guarantee."""
        return (f"per-client epsilon per epoch = participation_cap {self.participation_cap} x "
                f"epsilon_per_round {self.epsilon_per_round:g} = "
                f"{self.epsilon_per_client_epoch:g}")
