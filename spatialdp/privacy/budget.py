"""Budget vocabulary: accounting units, the training/evaluation split, release structures.

A :class:`~spatialdp.privacy.ledger.PrivacyLedger` keeps one accounting unit:

* ``"pure"`` — losses are pure epsilon and add up (basic sequential composition);
* ``"zcdp"`` — losses are zero-concentrated DP rho and add up; a pure-epsilon
  release is counted as ``rho = epsilon**2 / 2`` (Bun & Steinke 2016, Prop. 1.4).

The per-epoch budget is split into three line items (:class:`LineItem`):
training, and evaluation divided into a global and a regional share
(:class:`BudgetSplit`). Shares are fractions *of the ledger's unit*: in a zCDP
ledger a 30% evaluation share is 30% of rho, which is about 55% of the
epsilon a lone evaluation item could have spent (epsilon grows like sqrt(rho)).

What a release costs depends on the structure it releases over, which the
caller states instead of a number of cells (:class:`Single`, :class:`Disjoint`,
:class:`Overlapping`). Nothing here divides a budget by a count of parts.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from spatialdp._validation import (
    MAX_EPSILON,
    check_choice,
    check_count,
    check_delta,
    check_flag,
    check_number,
    check_probability,
    fail,
)
from spatialdp.exceptions import BudgetSplitWarning, InvalidInput

__all__ = [
    "NEIGHBOURS",
    "Accounting",
    "BudgetSplit",
    "BudgetSplitWarning",
    "Disjoint",
    "LineItem",
    "Neighbours",
    "Overlapping",
    "Single",
    "Structure",
    "check_neighbours",
    "epsilon_to_rho",
    "rho_to_epsilon",
    "rho_to_epsilon_classic",
]

Accounting = Literal["pure", "zcdp"]

#: The neighbouring relations a release's privacy loss can hold for:
#: ``"replace"`` — one client's values replaced, its participation (and region)
#: fixed and public; ``"add_remove"`` — one client added or removed, so whether
#: and where a client took part is protected too.
Neighbours = Literal["replace", "add_remove"]
NEIGHBOURS: tuple[Neighbours, ...] = ("replace", "add_remove")


def check_neighbours(neighbours: Any) -> Neighbours:
    """Return a neighbouring relation, ``"replace"`` or ``"add_remove"``.

    Examples
    --------
    >>> check_neighbours("add_remove")
    'add_remove'
    >>> check_neighbours("add-remove")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: neighbours='add-remove' is not one of ...
    """
    return check_choice(neighbours, "neighbours", NEIGHBOURS)

#: Evaluation shares outside this closed interval trigger a BudgetSplitWarning.
EVALUATION_SHARE_RANGE = (0.10, 0.40)




class LineItem(StrEnum):
    """The per-epoch line items of a ledger."""

    TRAINING = "training"
    EVALUATION_GLOBAL = "evaluation.global"
    EVALUATION_REGIONAL = "evaluation.regional"

    @classmethod
    def parse(cls, value: str | LineItem) -> LineItem:
        """Return the line item named ``value``, or raise :class:`InvalidInput`.

        Examples
        --------
        >>> LineItem.parse("evaluation.regional") is LineItem.EVALUATION_REGIONAL
        True
        >>> LineItem.parse("marketing")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        spatialdp.exceptions.InvalidInput: line_item='marketing' is not one of the ledger's ...
        """
        if isinstance(value, cls):
            return value
        allowed = [m.value for m in cls]
        if isinstance(value, str) and value in allowed:
            return cls(value)
        raise fail("line_item", value, "is not one of the ledger's line items",
                   f"pass one of {allowed} (or a LineItem member)")

    @property
    def is_evaluation(self) -> bool:
        """Whether this item belongs to the evaluation allocation."""
        return self is not LineItem.TRAINING


_SHARE_FIX = "pass a share such as 0.3 (=30%)"


@dataclass(frozen=True)
class BudgetSplit:
    """How each epoch's budget is divided between training and evaluation.

    Parameters
    ----------
    evaluation_share : float, default 0.3
        Fraction of the epoch budget reserved for evaluation (the rest trains).
        Outside 10%-40% a :class:`BudgetSplitWarning` is issued: below 10% the
        error bars swallow the signal, above 40% training slows for monitoring.
    global_share : float, default 0.2
        Fraction of the *evaluation* allocation for global metrics; the rest
        goes to regional metrics. A global metric averages over the whole
        cohort, so it needs little epsilon for a narrow error bar.

    Examples
    --------
    >>> split = BudgetSplit(evaluation_share=0.3, global_share=0.2)
    >>> {k: round(v, 6) for k, v in split.allocate(1.0).items()}
    {'training': 0.7, 'evaluation.global': 0.06, 'evaluation.regional': 0.24}
    """

    evaluation_share: float = 0.3
    global_share: float = 0.2

    def __post_init__(self) -> None:
        for share in ("evaluation_share", "global_share"):
            value = check_probability(getattr(self, share), share, fix=_SHARE_FIX)
            object.__setattr__(self, share, value)
        lo, hi = EVALUATION_SHARE_RANGE
        if self.evaluation_share < lo:
            warnings.warn(
                f"evaluation_share={self.evaluation_share:g} is below {lo:.0%} of the epoch "
                "budget: regional error bars will likely be wider than the regressions you "
                f"need to see; use a share in [{lo:.0%}, {hi:.0%}] (default 30%).",
                BudgetSplitWarning,
                stacklevel=3,
            )
        elif self.evaluation_share > hi:
            warnings.warn(
                f"evaluation_share={self.evaluation_share:g} is above {hi:.0%} of the epoch "
                "budget: training gets markedly less budget for monitoring precision that is "
                f"rarely read; use a share in [{lo:.0%}, {hi:.0%}] (default 30%).",
                BudgetSplitWarning,
                stacklevel=3,
            )

    def allocate(self, epoch_budget: float) -> dict[str, float]:
        """Split ``epoch_budget`` into the three line-item caps (floats, for display).

        Parameters
        ----------
        epoch_budget : float
            The per-client budget of an epoch, positive and finite.

        Returns
        -------
        dict of str to float
            Cap of each line item, keyed by its name.
        """
        epoch_budget = check_number(epoch_budget, "epoch_budget", low=0.0, low_open=True,
                                    fix="pass a positive finite budget such as 1.0")
        evaluation = epoch_budget * self.evaluation_share
        glob = evaluation * self.global_share
        return {
            LineItem.TRAINING.value: epoch_budget - evaluation,
            LineItem.EVALUATION_GLOBAL.value: glob,
            LineItem.EVALUATION_REGIONAL.value: evaluation - glob,
        }


# --------------------------------------------------------------------------------------
# Release structures
# --------------------------------------------------------------------------------------


def _check_name(obj: object, name: object) -> None:
    fix = ("name the partition or histogram released over, with its version, "
           "e.g. 'partition:us48@ab12cd'")
    if not isinstance(name, str):
        raise fail("name", name, f"is a {type(name).__name__}, not a string", fix)
    if not name.strip():
        raise fail("name", name, "is empty", fix)
    object.__setattr__(obj, "name", name)


def _check_parts(obj: object, *fields: str) -> None:
    """Store each count field as a Python int >= 1 (numpy integers accepted)."""
    for field in fields:
        object.__setattr__(obj, field, check_count(getattr(obj, field), field, low=1))


class _ChargedOnce:
    """Structures where each client touches one part: the release is charged once."""

    @property
    def multiplier(self) -> int:
        """How many times the per-release loss is charged (always 1)."""
        return 1

    @property
    def max_parts_per_client(self) -> int:
        """The most parts one client can influence (always 1)."""
        return 1

    @property
    def calibrated(self) -> bool:
        """Whether the loss already accounts for multi-part contributions."""
        return False


@dataclass(frozen=True)
class Single(_ChargedOnce):
    """One value computed over everyone who contributes (e.g. a global loss).

    Examples
    --------
    >>> Single("global_loss").multiplier
    1
    """

    name: str

    kind = "single"

    def __post_init__(self) -> None:
        _check_name(self, self.name)

    @property
    def parts(self) -> int:
        """Number of values released."""
        return 1

    def describe(self) -> str:
        """Return a one-line description for the audit trail."""
        return f"single {self.name!r}"


@dataclass(frozen=True)
class Disjoint(_ChargedOnce):
    """Values over disjoint parts (regions, cells, histogram buckets); a client is in one.

    Parallel composition: the release costs the per-release loss once, whatever
    ``parts`` is. ``parts`` is recorded in the audit trail, never divided by.

    Examples
    --------
    >>> Disjoint(name="partition:us48@ab12cd", parts=48).multiplier
    1
    """

    name: str
    parts: int

    kind = "disjoint"

    def __post_init__(self) -> None:
        _check_name(self, self.name)
        _check_parts(self, "parts")

    def describe(self) -> str:
        """Return a one-line description for the audit trail."""
        return f"disjoint {self.name!r}, {self.parts} parts, charged once"


@dataclass(frozen=True)
class Overlapping:
    """Values over parts where one client can touch up to ``max_parts_per_client``.

    Parameters
    ----------
    name : str
        The partition / histogram released over, with its version.
    parts : int
        Number of parts released (recorded only).
    max_parts_per_client : int
        The bound k on the parts one client contributes to (enforced on device).
    calibrated : bool, default False
        ``False``: the loss passed to the ledger is the loss of each part's
        value, and the release is charged ``k`` times that (basic composition;
        in a zCDP ledger each part's rho, times k). ``True``: the caller
        calibrated the noise to a sensitivity covering all k contributions, so
        the loss passed is already that of the whole release and is charged once.

    Examples
    --------
    >>> Overlapping(name="h3:res7@v2", parts=900, max_parts_per_client=3).multiplier
    3
    >>> Overlapping("h3:res7@v2", 900, 3, calibrated=True).multiplier
    1
    """

    name: str
    parts: int
    max_parts_per_client: int
    calibrated: bool = False

    kind = "overlapping"

    def __post_init__(self) -> None:
        _check_name(self, self.name)
        _check_parts(self, "parts", "max_parts_per_client")
        object.__setattr__(self, "calibrated", check_flag(self.calibrated, "calibrated"))
        if self.max_parts_per_client > self.parts:
            raise fail("max_parts_per_client", self.max_parts_per_client,
                       f"exceeds parts={self.parts}: a client cannot touch more parts than "
                       "are released", "lower the bound")

    @property
    def multiplier(self) -> int:
        """How many times the per-release loss is charged (k, or 1 when calibrated)."""
        return 1 if self.calibrated else self.max_parts_per_client

    def describe(self) -> str:
        """Return a one-line description for the audit trail."""
        how = "sensitivity calibrated to k" if self.calibrated else "basic composition x k"
        return (
            f"overlapping {self.name!r}, {self.parts} parts, "
            f"k={self.max_parts_per_client} per client, {how}"
        )


Structure = Single | Disjoint | Overlapping


# --------------------------------------------------------------------------------------
# Unit conversions
# --------------------------------------------------------------------------------------


def _check_nonneg(name: str, value: Any) -> float:
    return check_number(value, name, low=0.0, fix="privacy losses are finite and >= 0")


def epsilon_to_rho(epsilon: float) -> float:
    """Return the zCDP rho of a pure epsilon-DP release: ``epsilon**2 / 2``.

    Parameters
    ----------
    epsilon : float
        The pure-DP loss, finite and ``>= 0``.

    Returns
    -------
    float
        ``epsilon**2 / 2`` (Bun & Steinke 2016, Prop. 1.4).

    Examples
    --------
    >>> epsilon_to_rho(1.0)
    0.5
    """
    eps = _check_nonneg("epsilon", epsilon)
    return eps * eps / 2.0


def rho_to_epsilon_classic(rho: float, delta: float) -> float:
    """Return the classic bound ``rho + 2 sqrt(rho ln(1/delta))`` (Bun & Steinke, Prop. 1.3).

    Looser than :func:`rho_to_epsilon`; kept for comparison.

    Parameters
    ----------
    rho : float
        The zCDP loss, finite and ``>= 0``.
    delta : float
        Failure probability, strictly between 0 and 1.

    Returns
    -------
    float
        An epsilon such that rho-zCDP implies (epsilon, delta)-DP.

    Examples
    --------
    >>> round(rho_to_epsilon_classic(0.5, 1e-6), 4)
    5.7565
    """
    r = _check_nonneg("rho", rho)
    d = check_delta(delta)
    return r + 2.0 * math.sqrt(r * math.log(1.0 / d))


def rho_to_epsilon(rho: float, delta: float) -> float:
    """Return the smallest epsilon such that rho-zCDP implies (epsilon, delta)-DP.

    Uses OpenDP's ``make_zCDP_to_approxDP``, which implements the exact
    conversion of Canonne, Kamath & Steinke (2020, Prop. 12) with conservative
    (upward) rounding. The measurement handed to OpenDP is a Gaussian mechanism
    whose privacy map at the chosen input distance is at least ``rho``.

    Parameters
    ----------
    rho : float
        The zCDP loss, finite and ``>= 0``.
    delta : float
        Failure probability, strictly between 0 and 1.

    Returns
    -------
    float
        The epsilon, rounded up.

    Examples
    --------
    >>> eps = rho_to_epsilon(0.5, 1e-6)
    >>> round(eps, 3), eps < rho_to_epsilon_classic(0.5, 1e-6)
    (5.222, True)
    """
    r = check_number(rho, "rho", low=0.0, high=MAX_EPSILON,
                     fix="privacy losses are finite, >= 0 and at most 1e6")
    d = check_delta(delta)
    if r == 0.0:
        return 0.0
    if r < 1e-300:  # below OpenDP's float range for the map; the bound is monotone in rho
        r = 1e-300
    import opendp.prelude as dp

    dp.enable_features("contrib")
    # Gaussian with scale 1 has rho = d_in**2 / 2; nudge d_in up so the map is >= rho.
    d_in = math.nextafter(math.sqrt(2.0 * r), math.inf)
    gauss = dp.m.make_gaussian(
        dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=1.0
    )
    try:
        curve = dp.c.make_zCDP_to_approxDP(gauss).map(d_in)  # type: ignore[no-untyped-call]
        return float(curve.epsilon(d))
    except dp.OpenDPException as err:
        raise InvalidInput(
            f"rho={rho!r} with delta={delta!r} is outside what the exact conversion can "
            "compute; pass a rho between 1e-300 and 1e6") from err
