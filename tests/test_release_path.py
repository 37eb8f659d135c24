"""One release path: only spatialdp.privacy.pipeline charges, every target is typed by the protocol.

These tests read the package's syntax trees (the stdlib ``ast``), so a new
module that charges a ledger on its own, or takes an untyped target, fails here
whatever its tests do.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import spatialdp
from spatialdp.exceptions import BudgetExceeded, InvalidInput, LedgerError
from spatialdp.privacy import LaplaceMechanism, PrivacyLedger, ReleaseTarget, Simulation
from spatialdp.privacy.budget import Single
from spatialdp.privacy.pipeline import ReleasePlan, check_affordable, run_release

PACKAGE = Path(spatialdp.__file__).parent


def _modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE.parent).with_suffix("").as_posix().replace("/", ".")
        yield name, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _calls_of(attribute: str) -> dict[str, list[int]]:
    """Return module -> lines of every call ``<anything>.<attribute>(...)`` (docstrings aside)."""
    found: dict[str, list[int]] = {}
    for name, tree in _modules():
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == attribute):
                found.setdefault(name, []).append(node.lineno)
    return found


def _enclosing_functions(module: str, attribute: str) -> set[str]:
    """Return the qualified functions of ``module`` that call ``.<attribute>(...)``."""
    tree = dict(_modules())[module]
    out: set[str] = set()

    def visit(node: ast.AST, scope: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = scope
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                inner = f"{scope}.{child.name}" if scope else child.name
            if (isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute)
                    and child.func.attr == attribute):
                out.add(scope)
            visit(child, inner)

    visit(tree, "")
    return out


def test_only_the_pipeline_charges_a_target() -> None:
    callers = _calls_of("charge")
    assert set(callers) == {"spatialdp.privacy.pipeline"}, callers
    assert _enclosing_functions("spatialdp.privacy.pipeline", "charge") == {"run_release"}


def test_only_the_pipelines_target_calls_the_ledgers_spend() -> None:
    callers = _calls_of("spend")
    assert set(callers) == {"spatialdp.privacy.target"}, callers
    # ReleaseTarget.charge is what run_release calls: the pipeline is the only way in.
    assert _enclosing_functions("spatialdp.privacy.target", "spend") == {
        "ReleaseTarget.charge"}


def test_no_module_reaches_a_targets_ledger_outside_the_privacy_package() -> None:
    reached = []
    for name, tree in _modules():
        if name.startswith("spatialdp.privacy."):
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr == "ledger"
                    and isinstance(node.value, ast.Name)
                    and node.value.id in {"target", "acct", "account", "accounting",
                                          "checked"}):
                reached.append((name, node.lineno))
    assert reached == []


def test_every_target_parameter_is_typed_by_the_accounting_protocol() -> None:
    untyped = []
    for name, tree in _modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            args = [*node.args.args, *node.args.kwonlyargs]
            for arg in args:
                if arg.arg not in {"target", "fit_target"}:
                    continue
                text = ast.unparse(arg.annotation) if arg.annotation else ""
                if text == "float":  # accuracy.scale_for_half_width's target half-width
                    continue
                if "Accounting" not in text and name != "spatialdp.privacy.target":
                    untyped.append(f"{name}.{node.name}({arg.arg}: {text or 'untyped'})")
    assert untyped == []


# ----------------------------------------------------------------------------- behaviour


def _plan(eps: float = 0.5, finish=lambda noisy: noisy[0]) -> ReleasePlan:
    return ReleasePlan(eps, [(LaplaceMechanism(eps, 1.0, discrete=True), np.arange(4))],
                       finish)


def test_the_pipeline_charges_once_then_draws_then_finishes_in_order() -> None:
    events: list[str] = []

    class Recording(ReleaseTarget):
        def charge(self, **kw):  # type: ignore[no-untyped-def]
            events.append(f"charge {kw['epsilon']} {kw['neighbours']}")
            super().charge(**kw)

        def add_noise(self, mechanism, values):  # type: ignore[no-untyped-def]
            events.append("draw")
            return super().add_noise(mechanism, values)

    def finish(noisy):  # type: ignore[no-untyped-def]
        events.append("finish")
        return noisy[0]

    with PrivacyLedger(":memory:", epoch_budget=20.0) as ledger:  # global cap 1.2
        out = run_release([_plan(0.25, finish), _plan(0.5, finish)],
                          target=Recording(ledger, epoch=0), structure=Single("x"),
                          what="two", default_line_item="evaluation.global",
                          neighbours="add_remove")
        assert ledger.spent(0) == 0.75
        assert list(ledger.audit()["neighbours"]) == ["add_remove"]
    assert events == ["charge 0.75 add_remove", "draw", "finish", "draw", "finish"]
    assert [o.shape for o in out] == [(4,), (4,)]


def test_a_refused_release_draws_nothing_and_charges_nothing() -> None:
    drawn: list[int] = []

    class Counting(Simulation):
        def add_noise(self, mechanism, values):  # type: ignore[no-untyped-def]
            drawn.append(1)
            return super().add_noise(mechanism, values)

    with PrivacyLedger(":memory:", epoch_budget=1.0) as ledger:
        target = ReleaseTarget(ledger, epoch=0)
        with pytest.raises(BudgetExceeded, match="nothing was charged"):
            run_release([_plan(0.5)], target=target, structure=Single("x"), what="x",
                        default_line_item="evaluation.global")  # global cap is 0.06
        with pytest.raises(InvalidInput, match="neighbours='both' is not one of"):
            run_release([_plan(0.01)], target=target, structure=Single("x"), what="x",
                        default_line_item="evaluation.global", neighbours="both")
        with pytest.raises(InvalidInput, match="mix epsilon and rho"):
            run_release([_plan(0.01), ReleasePlan(None, [], lambda _: 0, rho=0.01)],
                        target=target, structure=Single("x"), what="x",
                        default_line_item="evaluation.global")
        with pytest.raises(InvalidInput, match="exactly one of epsilon and rho"):
            run_release([ReleasePlan(0.01, [], lambda _: 0, rho=0.01)], target=target,
                        structure=Single("x"), what="x", default_line_item="training")
        with pytest.raises(LedgerError, match="pure-epsilon ledger"):
            run_release([ReleasePlan(None, [], lambda _: 0, rho=0.01)], target=target,
                        structure=Single("x"), what="x", default_line_item="training")
        assert ledger.audit().empty
    run_release([_plan(0.01)], target=Counting(rng=0), structure=Single("x"), what="x",
                default_line_item="training")
    assert drawn == [1]


def test_a_protocol_of_rounds_is_checked_whole_before_its_first_charge() -> None:
    with PrivacyLedger(":memory:", epoch_budget=1.0, accounting="zcdp") as ledger:
        target = ReleaseTarget(ledger, epoch=0)  # training cap 0.7 rho
        check_affordable(target, rho=0.1, charges=7, default_line_item="training")
        with pytest.raises(BudgetExceeded, match=r"8 charge\(s\) of 0.1 rho"):
            check_affordable(target, rho=0.1, charges=8, default_line_item="training")
        assert ledger.audit().empty
    check_affordable(Simulation(rng=0), rho=1e9, charges=8, default_line_item="training")


def test_for_round_keeps_the_ledger_and_changes_only_the_round() -> None:
    with PrivacyLedger(":memory:", epoch_budget=1.0) as ledger:
        target = ReleaseTarget(ledger, epoch=3, line_item="evaluation.regional", who="w",
                               why="y", round_index=1)
        later = target.for_round(7)
        assert later.ledger is ledger
        assert later.round_index == 7
        assert (later.epoch, later.line_item, later.who, later.why) == (3, target.line_item,
                                                                         "w", "y")
    sim = Simulation(rng=0)
    assert sim.for_round(2).rng is sim.rng
