"""Where a release is charged and how its noise is drawn: the release target.

Every function that publishes something takes ``target=`` and nothing else
about accounting. There are exactly three kinds, and none is a default:

- :class:`ReleaseTarget` — a real release, charged to a :class:`PrivacyLedger`
  before any noise is drawn; noise from OS entropy, no seed.
- :class:`Unaccounted` — a real release (OS entropy) that is charged nowhere.
  It must say why, and the reason is written into the result's metadata, its
  titles and its files, so an uncharged release never looks like a charged one.
- :class:`Simulation` — seeded noise for measuring error. Its results are
  marked as simulations everywhere they appear and must never be published.

Examples
--------
>>> from spatialdp.privacy import PrivacyLedger
>>> ledger = PrivacyLedger(":memory:", epoch_budget=5.0)
>>> target = ReleaseTarget(ledger, epoch=0, why="weekly report", round_index=3)
>>> target.metadata()["accounting"], target.simulated
('ledger', False)
>>> target.metadata()["ledger"] == ledger.ledger_id      # an identifier, never a path
True
>>> Simulation(rng=0).metadata()["accounting"]
'simulation'
>>> Unaccounted("a public benchmark on synthetic data").label
'UNACCOUNTED'
>>> ledger.close()
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from numpy.typing import NDArray

from spatialdp._random import RandomLike, as_generator
from spatialdp._validation import check_count, check_text, fail
from spatialdp.exceptions import InvalidInput

if TYPE_CHECKING:
    from spatialdp.privacy.budget import Neighbours, Structure
    from spatialdp.privacy.ledger import PrivacyLedger

__all__ = ["Accounting", "ReleaseTarget", "Simulation", "Unaccounted", "check_target"]


class Mechanism(Protocol):
    """What a target needs of a mechanism: a release and a simulation sampler."""

    def release(self, x: Any) -> Any:
        """Return ``x`` noised from OS entropy."""

    def simulate(self, x: Any, *, rng: RandomLike = None) -> Any:
        """Return ``x`` noised from a seeded generator."""


class Accounting(Protocol):
    """What the release pipeline needs of a target (all three kinds implement it).

    Only :func:`spatialdp.privacy.pipeline.run_release` calls :meth:`charge`;
    release functions take a target typed by this protocol and hand it to the
    pipeline. A charge is pure ``epsilon`` or zCDP ``rho``, for a stated
    neighbouring relation.
    """

    simulated: bool
    round_index: int | None
    label: str

    def check_affordable(self, *, default_line_item: str, structure: Structure | None = None,
                         epsilon: float | None = None, rho: float | None = None,
                         charges: int = 1) -> None:
        """Refuse (charging nothing) when ``charges`` such charges would not fit."""

    def charge(self, *, structure: Structure, what: str, default_line_item: str,
               epsilon: float | None = None, rho: float | None = None,
               neighbours: Neighbours = "replace", round_index: int | None = None) -> None:
        """Record the release (or do nothing, for the uncharged kinds)."""

    def add_noise(self, mechanism: Mechanism, values: NDArray[Any]) -> NDArray[Any]:
        """Draw the noise of one release."""

    def metadata(self) -> dict[str, Any]:
        """Return what the result records about its accounting."""

    def for_round(self, round_index: int | None) -> Accounting:
        """Return the same target for another round (same ledger, epoch and line item)."""


def _round_index(value: Any) -> int | None:
    return None if value is None else check_count(value, "round_index")


def _mechanism(mechanism: Any) -> Mechanism:
    """Return ``mechanism`` if it has the release and simulation samplers a target draws from."""
    if callable(getattr(mechanism, "release", None)) and callable(
            getattr(mechanism, "simulate", None)):
        return mechanism  # type: ignore[no-any-return]
    raise fail("mechanism", mechanism, "has no release/simulate samplers",
               "pass a LaplaceMechanism or GaussianMechanism")


class ReleaseTarget:
    """A real release, charged to a ledger before any noise is drawn.

    Parameters
    ----------
    ledger : PrivacyLedger
        Where the release is charged (required).
    epoch : int
        The ledger epoch.
    line_item : str, optional
        ``"training"``, ``"evaluation.global"`` or ``"evaluation.regional"``;
        default: the one the releasing function names.
    who, why : str
        Who released it and why, for the audit trail.
    round_index : int, optional
        The federated round, recorded with the charge and on the result.

    Notes
    -----
    A copy of a target (``copy.copy``, ``copy.deepcopy``, so scikit-learn's
    ``clone`` of an estimator holding it) charges the same ledger object: a
    :class:`PrivacyLedger` is never copied, since a copy would be a second
    budget for the same clients. A pickled target (joblib's ``n_jobs`` > 1)
    re-opens its ledger file by path in the other process; an in-memory
    ledger cannot be pickled (:class:`~spatialdp.exceptions.LedgerError`).

    Examples
    --------
    >>> import copy
    >>> from spatialdp.privacy import PrivacyLedger
    >>> with PrivacyLedger(":memory:", epoch_budget=5.0) as ledger:
    ...     target = ReleaseTarget(ledger, epoch=0, why="round 1")
    ...     target.metadata()["epoch"], copy.deepcopy(target).ledger is ledger
    (0, True)
    """

    simulated = False
    label = ""

    def __init__(self, ledger: PrivacyLedger, epoch: int, *, line_item: str | None = None,
                 who: str = "spatialdp", why: str = "release",
                 round_index: int | None = None) -> None:
        from spatialdp.privacy.ledger import PrivacyLedger

        if not isinstance(ledger, PrivacyLedger):
            raise fail("ledger", ledger, "is not a PrivacyLedger",
                       "pass PrivacyLedger(path, epoch_budget=...), or Simulation(rng=...) / "
                       "Unaccounted(reason) to opt out of accounting visibly")
        self.ledger = ledger
        self.epoch = check_count(epoch, "epoch")
        self.line_item = None if line_item is None else check_text(line_item, "line_item")
        self.who = check_text(who, "who")
        self.why = check_text(why, "why")
        self.round_index = _round_index(round_index)

    def _item(self, default_line_item: str) -> str:
        return self.line_item or default_line_item

    def check_affordable(self, *, default_line_item: str, structure: Structure | None = None,
                         epsilon: float | None = None, rho: float | None = None,
                         charges: int = 1) -> None:
        """Refuse, charging nothing, when the ledger cannot cover ``charges`` such charges.

        See :meth:`PrivacyLedger.check_charge`.
        """
        self.ledger.check_charge(self.epoch, self._item(default_line_item), structure=structure,
                                 epsilon=epsilon, rho=rho, charges=charges)

    def charge(self, *, structure: Structure, what: str, default_line_item: str,
               epsilon: float | None = None, rho: float | None = None,
               neighbours: Neighbours = "replace", round_index: int | None = None) -> None:
        """Charge the release (atomic: refused in full, or recorded once)."""
        self.ledger.spend(self.epoch, self._item(default_line_item), structure=structure,
                          epsilon=epsilon, rho=rho, who=self.who, what=what, why=self.why,
                          round_index=self.round_index if round_index is None else round_index,
                          neighbours=neighbours)

    def add_noise(self, mechanism: Mechanism, values: NDArray[Any]) -> NDArray[Any]:
        """Noise from OS entropy (the mechanism's release sampler; no seed)."""
        return np.asarray(_mechanism(mechanism).release(values))

    def metadata(self) -> dict[str, Any]:
        """Accounting kind, ledger identifier (never its path), epoch, line item and round."""
        return {"accounting": "ledger", "simulated": False, "ledger": self.ledger.ledger_id,
                "epoch": self.epoch, "line_item": self.line_item, "round_index": self.round_index}

    def for_round(self, round_index: int | None) -> ReleaseTarget:
        """Return a target charging the same ledger, epoch and line item for ``round_index``.

        The ledger is shared, not copied (a PrivacyLedger may be used from any thread).
        """
        return ReleaseTarget(self.ledger, self.epoch, line_item=self.line_item, who=self.who,
                             why=self.why, round_index=round_index)

    def __repr__(self) -> str:
        return (f"ReleaseTarget({self.ledger.path!r}, epoch={self.epoch}, "
                f"line_item={self.line_item!r}, round_index={self.round_index})")


class _ChargedNowhere:
    """The charging side of the two kinds that charge no ledger: nothing to check or record."""

    def check_affordable(self, *, default_line_item: str, structure: Structure | None = None,
                         epsilon: float | None = None, rho: float | None = None,
                         charges: int = 1) -> None:
        """Pass: nothing will be charged."""

    def charge(self, *, structure: Structure, what: str, default_line_item: str,
               epsilon: float | None = None, rho: float | None = None,
               neighbours: Neighbours = "replace", round_index: int | None = None) -> None:
        """Charge nothing (the result's metadata says why: unaccounted, or a simulation)."""


class Unaccounted(_ChargedNowhere):
    """A real release (OS-entropy noise) that is charged to no ledger, visibly.

    Parameters
    ----------
    reason : str
        Why nothing is charged; recorded in the result's metadata and titles.
    round_index : int, optional

    Examples
    --------
    >>> Unaccounted("public synthetic data").metadata()["reason"]
    'public synthetic data'
    """

    simulated = False
    label = "UNACCOUNTED"

    def __init__(self, reason: str, *, round_index: int | None = None) -> None:
        self.reason = check_text(reason, "reason")
        self.round_index = _round_index(round_index)

    def for_round(self, round_index: int | None) -> Unaccounted:
        """Return the same opt-out for ``round_index``."""
        return Unaccounted(self.reason, round_index=round_index)

    def add_noise(self, mechanism: Mechanism, values: NDArray[Any]) -> NDArray[Any]:
        """Noise from OS entropy (the mechanism's release sampler)."""
        return np.asarray(_mechanism(mechanism).release(values))

    def metadata(self) -> dict[str, Any]:
        """Accounting kind ``unaccounted`` and the reason."""
        return {"accounting": "unaccounted", "simulated": False, "reason": self.reason,
                "round_index": self.round_index}

    def __repr__(self) -> str:
        return f"Unaccounted({self.reason!r})"


class Simulation(_ChargedNowhere):
    """Seeded noise for measuring error: never a release, marked as a simulation.

    Parameters
    ----------
    rng : numpy.random.Generator, int or None
        The simulation's random source.
    round_index : int, optional

    Examples
    --------
    >>> sim = Simulation(rng=7)
    >>> sim.simulated, sim.label
    (True, 'SIMULATION')
    """

    simulated = True
    label = "SIMULATION"

    def __init__(self, rng: RandomLike = None, *, round_index: int | None = None) -> None:
        self.rng = as_generator(rng)
        self.round_index = _round_index(round_index)

    def for_round(self, round_index: int | None) -> Simulation:
        """Return this simulation for ``round_index``, drawing from the same generator.

        A shallow copy: a subclass keeps its own state too (an audit's
        :class:`~spatialdp.audit.tap.NoiseTap` keeps its draws and its rewrite).
        """
        sim = copy.copy(self)
        sim.round_index = _round_index(round_index)
        return sim

    def add_noise(self, mechanism: Mechanism, values: NDArray[Any]) -> NDArray[Any]:
        """Seeded noise (the mechanism's simulation sampler)."""
        return np.asarray(_mechanism(mechanism).simulate(values, rng=self.rng))

    def metadata(self) -> dict[str, Any]:
        """Accounting kind ``simulation``; ``simulated`` is True."""
        return {"accounting": "simulation", "simulated": True, "round_index": self.round_index}

    def __repr__(self) -> str:
        return "Simulation()"


_TARGETS = (ReleaseTarget, Unaccounted, Simulation)


def check_target(target: Any) -> Accounting:
    """Return ``target`` if it is one of the three kinds, else refuse with the choices.

    Examples
    --------
    >>> check_target(None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: target=None is not a release target; ...
    """
    if isinstance(target, _TARGETS):
        return target
    raise InvalidInput(
        f"target={target!r} is not a release target; pass ReleaseTarget(ledger, epoch=...) to "
        "release and charge, Simulation(rng=...) to simulate, or Unaccounted(reason) to release "
        "without a ledger (recorded in the result)")


#: A mechanism factory: (sensitivity, epsilon) -> mechanism.
MechanismFactory = Callable[[float, float], Mechanism]
