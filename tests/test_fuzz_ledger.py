"""Refusals are never charged: fuzzed releases against a real ledger.

Every release entry point (``regional_report``, ``aggregate_metric``,
``aggregate_histogram``, ``round_health``, ``release_coverage``) and every path
that writes the ledger (``PrivacyLedger.spend``, ``PrivacyLedger.borrow``,
``ReleaseTarget.charge``) gets the fuzzed arguments of ``test_fuzz.py`` with a
fresh ``PrivacyLedger(":memory:", epoch_budget=...)`` behind
``ReleaseTarget(ledger, epoch=...)``. Whenever the call raises, the ledger must be
untouched: nothing spent in any epoch, no audit row, no borrow. Whenever it
returns, exactly one charge of the released epsilon is recorded.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spatialdp.exceptions import CohortTooSmall
from spatialdp.privacy import Disjoint, PrivacyLedger, ReleaseTarget, Single
from tests.test_fuzz import (
    aggregate_histogram_calls,
    aggregate_metric_calls,
    epsilons,
    line_items,
    regional_report_calls,
    release_coverage_calls,
    round_health_calls,
)
from tests.test_fuzz_support import (
    Call,
    arg,
    fuzz_settings,
    ledger_targets,
    maybe,
    mixed,
    number,
    run,
    text,
)

EPOCHS = (0, 1, 2)


def fuzz_targets() -> st.SearchStrategy[ReleaseTarget]:
    """A ReleaseTarget on a fresh in-memory ledger; small budgets make BudgetExceeded likely."""
    return ledger_targets(budgets=(0.05, 0.5, 5.0, 50.0), accountings=("pure", "pure", "zcdp"),
                          items=(None, None, "evaluation.global", "evaluation.regional",
                                 "training", "marketing"), epochs=EPOCHS, rounds=(None, 3))


def untouched(ledger: PrivacyLedger) -> None:
    assert all(ledger.spent(epoch) == 0 for epoch in EPOCHS), "a refusal was charged"
    assert len(ledger.audit()) == 0, "a refusal left an audit row"
    assert len(ledger.borrows()) == 0, "a refusal left a borrow"


def charged_once(ledger: PrivacyLedger, target: ReleaseTarget, epsilon: float) -> None:
    audit = ledger.audit()
    assert len(audit) == 1, "a release must be one charge"
    amount = epsilon if ledger.accounting == "pure" else epsilon**2 / 2
    assert ledger.spent(target.epoch) == pytest.approx(amount, rel=1e-9)
    assert sum(ledger.spent(e) for e in EPOCHS) == pytest.approx(amount, rel=1e-9)


def charged_by_design(refusal: BaseException) -> bool:
    """A ratio release whose NOISED count falls below the floor: charged, then withheld.

    The noise had to be drawn to know, so the charge is right; that the release
    then raises instead of returning a suppressed result is reported to the lead.
    """
    return isinstance(refusal, CohortTooSmall) and "was charged" in str(refusal)


def released_epsilon(call: Call) -> float:
    """The epsilon a successful call charges (one number is the total; a mapping, its sum)."""
    eps = call.kwargs["epsilon"]
    if call.name != "regional_report" or not isinstance(eps, dict):
        return float(eps)
    metrics = call.args[2]
    parts = [float(eps[m.name]) for m in metrics]
    return float(sum((Decimal(repr(p)) for p in parts), Decimal(0)))


RELEASES: dict[str, Callable[..., st.SearchStrategy[Call]]] = {
    "regional_report": regional_report_calls,
    "aggregate_metric": aggregate_metric_calls,
    "aggregate_histogram": aggregate_histogram_calls,
    "round_health": round_health_calls,
    "release_coverage": release_coverage_calls,
}


@pytest.mark.parametrize("name", sorted(RELEASES))
def test_refused_releases_leave_the_ledger_untouched(name: str) -> None:
    @fuzz_settings(60)
    @given(mixed(RELEASES[name](fuzz_targets())))
    def fuzz(one: Call) -> None:
        target = one.kwargs["target"]
        assert isinstance(target, ReleaseTarget)
        result, refusal = run(one)
        if refusal is None:
            charged_once(target.ledger, target, released_epsilon(one))
            assert result is not None
        elif charged_by_design(refusal):
            assert len(target.ledger.audit()) == 1
        else:
            untouched(target.ledger)

    fuzz()


structures = arg(st.sampled_from([Single("s"), Disjoint("d", 3)]))
epochs = arg(st.sampled_from(EPOCHS), -1, 1.5)


@st.composite
def spend_calls(draw: st.DrawFn) -> tuple[PrivacyLedger, Call]:
    ledger = PrivacyLedger(":memory:", epoch_budget=draw(st.sampled_from([0.05, 1.0, 10.0])))
    return ledger, Call("PrivacyLedger.spend", ledger.spend,
                        (draw(epochs), draw(line_items)),
                        {"structure": draw(structures), "who": draw(text()),
                         "what": draw(text()), "why": draw(text()),
                         "epsilon": draw(maybe(epsilons)),
                         "rho": draw(st.one_of(st.none(), st.none(), epsilons)),
                         "round_index": draw(maybe(epochs)),
                         "release_id": draw(maybe(text()))})


@st.composite
def borrow_calls(draw: st.DrawFn) -> tuple[PrivacyLedger, Call]:
    ledger = PrivacyLedger(":memory:", epoch_budget=draw(st.sampled_from([0.05, 1.0, 10.0])))
    return ledger, Call("PrivacyLedger.borrow", ledger.borrow,
                        (draw(epochs), draw(arg(number(1e-3, 20)))),
                        {"approver": draw(text()), "who": draw(text()), "why": draw(text()),
                         "line_item": draw(line_items)})


@st.composite
def charge_calls(draw: st.DrawFn) -> tuple[PrivacyLedger, Call]:
    target = draw(fuzz_targets())
    return target.ledger, Call("ReleaseTarget.charge", target.charge, (),
                               {"structure": draw(structures), "epsilon": draw(epsilons),
                                "what": draw(text()),
                                "default_line_item": draw(line_items)})


@pytest.mark.parametrize("calls", [spend_calls, borrow_calls, charge_calls],
                         ids=["spend", "borrow", "charge"])
def test_refused_ledger_writes_leave_nothing(calls: Callable[[], Any]) -> None:
    @fuzz_settings(60)
    @given(mixed(calls()))
    def fuzz(pair: tuple[PrivacyLedger, Call]) -> None:
        ledger, one = pair
        _, refusal = run(one)
        if refusal is not None:
            untouched(ledger)
        elif one.name == "PrivacyLedger.borrow":
            assert len(ledger.borrows()) == 1
            assert len(ledger.audit()) == 0
        else:
            assert len(ledger.audit()) == 1
            assert math.isfinite(sum(ledger.spent(e) for e in EPOCHS))

    fuzz()
