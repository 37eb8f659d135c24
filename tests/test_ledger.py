"""Tests of spatialdp.privacy.ledger and spatialdp.privacy.budget."""

from __future__ import annotations

import itertools
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
import warnings
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq, minimize_scalar

from spatialdp.exceptions import BudgetExceeded, InvalidInput, LedgerError
from spatialdp.privacy import _ledger_schema
from spatialdp.privacy.budget import (
    BudgetSplit,
    BudgetSplitWarning,
    Disjoint,
    LineItem,
    Overlapping,
    Single,
    epsilon_to_rho,
    rho_to_epsilon,
    rho_to_epsilon_classic,
)
from spatialdp.privacy.ledger import Charge, PrivacyLedger

WORKER = Path(__file__).with_name("_ledger_worker.py")
STATES = Disjoint(name="partition:us48@ab12cd", parts=48)
REG = "evaluation.regional"
AUDIT = {"who": "ana", "what": "mean loss by state", "why": "dashboard"}


def charge(ledger: PrivacyLedger, epoch: int = 0, item: str = REG, **kw: object) -> Charge:
    """Spend with default audit fields and structure; ``kw`` overrides."""
    args: dict[str, object] = {"structure": STATES, **AUDIT, **kw}
    if "epsilon" not in kw and "rho" not in kw:
        args["epsilon"] = 0.1
    return ledger.spend(epoch, item, **args)  # type: ignore[arg-type]


def n_rows(ledger: PrivacyLedger) -> int:
    return len(ledger.audit())


@pytest.fixture
def ledger() -> PrivacyLedger:
    with PrivacyLedger(":memory:", epoch_budget=10.0) as led:
        yield led


# -- storage --------------------------------------------------------------------------


def test_file_ledger_is_versioned_and_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    PrivacyLedger(path, epoch_budget=1.0).close()
    conn = sqlite3.connect(path)
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    assert meta["schema_version"] == "1"
    assert meta["application"] == "spatialdp.PrivacyLedger"
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_memory_ledger_works(ledger: PrivacyLedger) -> None:
    charge(ledger)
    assert ledger.path == ":memory:"
    assert ledger.spent(0, REG) == pytest.approx(0.1)


def test_reopening_resumes_and_context_manager_closes(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with PrivacyLedger(path, epoch_budget=2.0, accounting="zcdp") as led:
        charge(led, rho=0.05)
    with pytest.raises(LedgerError, match="closed"):
        led.spent(0)
    with PrivacyLedger(path) as again:  # configuration comes from the file
        assert again.accounting == "zcdp" and again.epoch_budget == 2.0
        assert again.spent(0, REG) == pytest.approx(0.05)
        assert again.verify()["charges"] == 1


def test_reopening_with_other_configuration_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    PrivacyLedger(path, epoch_budget=2.0).close()
    with pytest.raises(LedgerError, match=r"created with epoch_budget=Decimal\('2.0'\).*omit"):
        PrivacyLedger(path, epoch_budget=3.0)
    with pytest.raises(LedgerError, match="accounting='pure'"):
        PrivacyLedger(path, accounting="zcdp")
    PrivacyLedger(path, epoch_budget=2.0, accounting="pure").close()  # same values are fine


def test_new_ledger_needs_a_budget(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="new ledger and epoch_budget was not given"):
        PrivacyLedger(tmp_path / "new.db")


def test_foreign_or_newer_files_are_refused(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(LedgerError, match="not a spatialdp privacy ledger"):
        PrivacyLedger(other)
    newer = tmp_path / "newer.db"
    PrivacyLedger(newer, epoch_budget=1.0).close()
    conn = sqlite3.connect(newer)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    with pytest.raises(LedgerError, match="schema version 99, newer than the 1"):
        PrivacyLedger(newer)


# -- units ----------------------------------------------------------------------------


def test_pure_ledger_refuses_rho_and_records_nothing(ledger: PrivacyLedger) -> None:
    with pytest.raises(LedgerError, match=r"rho=0.01 cannot be charged to a pure-epsilon"):
        charge(ledger, rho=0.01)
    assert n_rows(ledger) == 0 and ledger.spent(0) == 0.0


def test_zcdp_ledger_counts_epsilon_as_half_its_square() -> None:
    with PrivacyLedger(epoch_budget=1.0, accounting="zcdp") as led:
        c = charge(led, epsilon=0.2)
        assert c.charged == pytest.approx(0.02)
        charge(led, rho=0.03)
        assert led.spent(0, REG) == pytest.approx(0.05)
        assert led.unit == "rho"
        assert list(led.audit()["loss_unit"]) == ["epsilon", "rho"]
    assert epsilon_to_rho(0.2) == pytest.approx(0.02)


def test_spend_needs_exactly_one_loss(ledger: PrivacyLedger) -> None:
    with pytest.raises(InvalidInput, match="pass exactly one"):
        ledger.spend(0, REG, structure=STATES, **AUDIT)
    with pytest.raises(InvalidInput, match="pass exactly one"):
        ledger.spend(0, REG, structure=STATES, epsilon=0.1, rho=0.1, **AUDIT)
    assert n_rows(ledger) == 0


def _cks_epsilon(rho: float, delta: float) -> float:
    """Canonne-Kamath-Steinke 2020 Prop. 12, solved numerically (independent of OpenDP)."""

    def log_delta(eps: float) -> float:
        def f(t: float) -> float:
            a = 1.0 + math.exp(t)
            return (a - 1) * (a * rho - eps) - math.log(a - 1) + a * math.log1p(-1 / a)

        res = minimize_scalar(f, bounds=(-30, 30), method="bounded", options={"xatol": 1e-12})
        return min(float(res.fun), 0.0)

    hi = rho_to_epsilon_classic(rho, delta) + 1
    return float(brentq(lambda e: log_delta(e) - math.log(delta), 0.0, hi, xtol=1e-14))


@pytest.mark.parametrize("rho", [1e-4, 0.01, 0.5, 10.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-9])
def test_rho_to_epsilon_matches_cks_formula_and_beats_classic(rho: float, delta: float) -> None:
    eps = rho_to_epsilon(rho, delta)
    assert eps == pytest.approx(_cks_epsilon(rho, delta), rel=1e-9)
    assert eps < rho_to_epsilon_classic(rho, delta)


@settings(max_examples=25, deadline=None)
@given(st.floats(1e-6, 50.0), st.floats(1e-12, 0.1))
def test_rho_to_epsilon_is_never_above_the_classic_bound(rho: float, delta: float) -> None:
    assert 0.0 <= rho_to_epsilon(rho, delta) < rho_to_epsilon_classic(rho, delta)


def test_conversion_refuses_bad_delta() -> None:
    with pytest.raises(InvalidInput, match=r"delta=0 is not in \(0, 1\)"):
        rho_to_epsilon(0.5, 0)
    assert rho_to_epsilon(0.0, 1e-6) == 0.0


# -- split ----------------------------------------------------------------------------


def test_default_split_is_70_30_with_separate_line_items(ledger: PrivacyLedger) -> None:
    s = ledger.summary(0)
    assert s.loc["training", "cap"] == pytest.approx(7.0)
    assert s.loc["evaluation", "cap"] == pytest.approx(3.0)
    assert s.loc["evaluation.global", "cap"] == pytest.approx(0.6)
    assert s.loc["evaluation.regional", "cap"] == pytest.approx(2.4)
    assert s.loc["total", "cap"] == pytest.approx(10.0)


def test_global_regional_share_is_configurable() -> None:
    with PrivacyLedger(epoch_budget=1.0, split=BudgetSplit(0.25, global_share=0.5)) as led:
        assert led.cap(0, "evaluation.global") == pytest.approx(0.125)
        assert led.cap(0, REG) == pytest.approx(0.125)
        assert led.cap(0, "training") == pytest.approx(0.75)


@pytest.mark.parametrize(
    ("share", "pattern"),
    [(0.05, "evaluation_share=0.05 is below 10%"), (0.5, "evaluation_share=0.5 is above 40%")],
)
def test_evaluation_share_outside_10_40_warns(share: float, pattern: str) -> None:
    with pytest.warns(BudgetSplitWarning, match=pattern):
        BudgetSplit(evaluation_share=share)


@pytest.mark.parametrize("share", [0.1, 0.3, 0.4])
def test_evaluation_share_inside_10_40_is_quiet(share: float) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        BudgetSplit(evaluation_share=share)


def test_split_warns_once_at_creation_not_on_reopen(tmp_path: Path) -> None:
    with pytest.warns(BudgetSplitWarning, match="below 10%"):
        PrivacyLedger(tmp_path / "l.db", epoch_budget=1.0, split=BudgetSplit(0.05)).close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PrivacyLedger(tmp_path / "l.db").close()


def test_split_shares_must_be_fractions() -> None:
    with pytest.raises(InvalidInput, match=r"evaluation_share=1.5 is not a fraction in \[0, 1\]"):
        BudgetSplit(evaluation_share=1.5)
    with pytest.raises(InvalidInput, match=r"global_share=-0\.1"):
        BudgetSplit(global_share=-0.1)


# -- composition ----------------------------------------------------------------------


def test_disjoint_release_is_charged_once_whatever_the_parts(ledger: PrivacyLedger) -> None:
    a = charge(ledger, structure=Disjoint("partition:us48@ab12cd", parts=48))
    b = charge(ledger, structure=Disjoint("histogram:loss@v1", parts=1))
    c = charge(ledger, structure=Single("national"))
    assert a.charged == b.charged == c.charged == pytest.approx(0.1)


def test_overlapping_release_scales_with_k_unless_calibrated(ledger: PrivacyLedger) -> None:
    basic = Overlapping("h3:res7@v2", parts=900, max_parts_per_client=3)
    calibrated = Overlapping("h3:res7@v2", parts=900, max_parts_per_client=3, calibrated=True)
    assert charge(ledger, structure=basic).charged == pytest.approx(0.3)
    assert charge(ledger, structure=calibrated).charged == pytest.approx(0.1)
    with PrivacyLedger(epoch_budget=1.0, accounting="zcdp") as z:  # k * eps^2/2, not (k eps)^2/2
        assert charge(z, epsilon=0.2, structure=basic).charged == pytest.approx(0.06)


def test_structures_validate_their_fields() -> None:
    with pytest.raises(InvalidInput, match="max_parts_per_client=5 exceeds parts=3"):
        Overlapping("grid@v1", parts=3, max_parts_per_client=5)
    with pytest.raises(InvalidInput, match="parts=0 must be an integer >= 1"):
        Disjoint("grid@v1", parts=0)
    with pytest.raises(InvalidInput, match="structure name '' is empty"):
        Disjoint("", parts=3)


def test_repeated_releases_add_up(ledger: PrivacyLedger) -> None:
    for r in range(5):
        charge(ledger, epsilon=0.2, round_index=r)
    assert ledger.spent(0, REG) == pytest.approx(1.0)
    assert list(ledger.audit()["round_index"]) == [0, 1, 2, 3, 4]


def test_ten_tenths_fill_a_cap_of_one_exactly() -> None:
    # cap 1.0 on evaluation.regional; binary floats would drift past it
    with PrivacyLedger(epoch_budget=1.0, split=BudgetSplit(0.4, global_share=0.0)) as led:
        led_cap = led.cap(0, REG)
        assert led_cap == 0.4
        for _ in range(4):
            charge(led, epsilon=0.1)
        assert led.remaining(0, REG) == 0.0
        with pytest.raises(BudgetExceeded):
            charge(led, epsilon=1e-12)


# -- refusals -------------------------------------------------------------------------


def test_overspend_is_refused_with_a_useful_message_and_nothing_recorded(
    ledger: PrivacyLedger,
) -> None:
    charge(ledger, epsilon=2.0)
    before = ledger.summary(0)
    with pytest.raises(
        BudgetExceeded,
        match=r"charge of 0.5 epsilon .*epoch 0 line item 'evaluation.regional' exceeds its cap: "
        r"2 of 2.4 spent, 0.4 remaining.*borrow from epoch 1",
    ):
        charge(ledger, epsilon=0.5)
    assert n_rows(ledger) == 1
    assert ledger.summary(0).equals(before)


def test_duplicate_release_id_is_refused(ledger: PrivacyLedger) -> None:
    charge(ledger, release_id="round-3/regional")
    with pytest.raises(LedgerError, match="release_id='round-3/regional' is already charged"):
        charge(ledger, release_id="round-3/regional")
    assert n_rows(ledger) == 1


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"epoch": -1}, "epoch=-1 is not an integer >= 0"),
        ({"item": "marketing"}, "line item 'marketing' is not one of"),
        ({"epsilon": 0.0}, "epsilon=0.0 is not > 0"),
        ({"epsilon": math.nan}, "epsilon=nan is not a finite number"),
        ({"who": " "}, "who=' ' is empty"),
        ({"why": ""}, "why='' is empty"),
    ],
)
def test_invalid_charges_are_refused(
    ledger: PrivacyLedger, kwargs: dict[str, object], pattern: str
) -> None:
    with pytest.raises(InvalidInput, match=pattern):
        charge(ledger, **kwargs)
    assert n_rows(ledger) == 0


def test_charge_is_atomic_if_the_second_write_fails(
    ledger: PrivacyLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*args: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(_ledger_schema, "add_to_total", boom)
    with pytest.raises(RuntimeError, match="disk on fire"):
        charge(ledger)
    monkeypatch.undo()
    assert n_rows(ledger) == 0 and ledger.spent(0) == 0.0
    assert ledger.verify()["charges"] == 0


# -- borrowing ------------------------------------------------------------------------


def test_evaluation_borrows_from_next_epoch_once_with_an_approver(ledger: PrivacyLedger) -> None:
    ledger.borrow(0, 0.5, approver="lead@example.org", who="ana", why="incident 4411")
    assert ledger.cap(0, REG) == pytest.approx(2.9)
    assert ledger.cap(1, REG) == pytest.approx(1.9)
    charge(ledger, epsilon=2.9)  # the whole borrowed cap is usable
    row = ledger.borrows().iloc[0]
    assert (row["approver"], row["amount"], row["epoch"]) == ("lead@example.org", 0.5, 0)
    assert ledger.summary(1).loc[REG, "borrowed"] == pytest.approx(-0.5)
    with pytest.raises(LedgerError, match=r"epoch 0 already borrowed 0\.5.*approved by"):
        ledger.borrow(0, 0.1, approver="lead@example.org", who="ana", why="again")
    assert len(ledger.borrows()) == 1


def test_borrow_needs_a_named_approver(ledger: PrivacyLedger) -> None:
    with pytest.raises(InvalidInput, match="approver='' is empty"):
        ledger.borrow(0, 0.5, approver="", who="ana", why="incident")
    assert ledger.borrows().empty and ledger.cap(0, REG) == pytest.approx(2.4)


def test_training_cannot_borrow(ledger: PrivacyLedger) -> None:
    with pytest.raises(LedgerError, match="only evaluation may borrow"):
        ledger.borrow(0, 0.5, approver="lead", who="ana", why="x", line_item="training")


def test_borrow_is_limited_by_what_next_epoch_has_left(ledger: PrivacyLedger) -> None:
    charge(ledger, epoch=1, epsilon=2.0)
    with pytest.raises(BudgetExceeded, match=r"exceeds what epoch 1 has left on that item \(0.4\)"):
        ledger.borrow(0, 0.5, approver="lead", who="ana", why="incident")
    assert ledger.borrows().empty


# -- reporting ------------------------------------------------------------------------


def test_audit_trail_records_who_what_when_why_and_structure(ledger: PrivacyLedger) -> None:
    charge(ledger, epoch=3, release_id="r1", round_index=7)
    row = ledger.audit(epoch=3).iloc[0]
    assert (row["who"], row["what"], row["why"]) == ("ana", "mean loss by state", "dashboard")
    assert (row["epoch"], row["line_item"], row["release_id"]) == (3, REG, "r1")
    assert row["loss"] == pytest.approx(0.1) and row["charged"] == pytest.approx(0.1)
    assert row["structure_kind"] == "disjoint" and row["parts"] == 48
    assert row["structure_name"] == "partition:us48@ab12cd"
    assert "charged once" in row["structure"]
    assert str(row["recorded_at"].tz) == "UTC"
    assert ledger.audit(epoch=2).empty


def test_summary_remaining_spent_and_repr(ledger: PrivacyLedger) -> None:
    charge(ledger, epsilon=1.0)
    charge(ledger, item="training", epsilon=3.0)
    s = ledger.summary(0)
    assert list(s.index) == [*(i.value for i in LineItem), "evaluation", "total"]
    assert s.loc["total", "spent"] == pytest.approx(4.0)
    assert s.loc["total", "spent"] <= s.loc["total", "cap"]
    assert s.loc["evaluation", "n_charges"] == 1
    assert ledger.remaining(0, REG) == pytest.approx(1.4)
    assert ledger.spent(0) == pytest.approx(4.0)
    assert ledger.epochs() == [0]
    assert "epoch_budget=10 epsilon" in repr(ledger) and "2 charges" in repr(ledger)
    assert "70%/30% training/evaluation" in repr(ledger)


def test_summary_converts_zcdp_spend_to_epsilon_at_delta() -> None:
    with PrivacyLedger(epoch_budget=1.0, accounting="zcdp") as led:
        charge(led, rho=0.1)
        s = led.summary(0, delta=1e-6)
        assert s.loc[REG, "spent_epsilon"] == pytest.approx(rho_to_epsilon(0.1, 1e-6))


# -- concurrency and crashes ----------------------------------------------------------


def test_concurrent_processes_never_overspend(tmp_path: Path) -> None:
    path, go = tmp_path / "shared.db", tmp_path / "go"
    amount, n_proc, n_each = 0.013, 4, 50
    PrivacyLedger(path, epoch_budget=10.0).close()  # regional cap 2.4 -> 184 charges fit
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                "hammer",
                str(path),
                f"p{i}",
                str(n_each),
                str(amount),
                str(go),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(n_proc)
    ]
    # Start the race only when every worker has imported and opened the ledger, so a
    # slow start cannot make one process run alone.
    deadline = time.monotonic() + 60.0
    while (not all((tmp_path / f"go.p{i}.ready").exists() for i in range(n_proc))
           and time.monotonic() < deadline):
        time.sleep(0.01)
    go.touch()
    results = [json.loads(p.communicate(timeout=90)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    ok = sum(r["ok"] for r in results)
    assert ok == math.floor(Decimal("2.4") / Decimal(str(amount))) == 184
    assert ok + sum(r["refused"] for r in results) == n_proc * n_each
    with PrivacyLedger(path) as led:
        assert led.verify()["charges"] == ok
        tags = [rid.split("-")[0] for rid in led.audit()["release_id"]]
        assert len(tags) == ok
        assert sum(a != b for a, b in itertools.pairwise(tags)) > 20  # interleaved
        assert led.remaining(0, REG) >= 0.0
        assert Decimal(str(led.spent(0, REG))) == ok * Decimal(str(amount))


def test_killed_process_leaves_a_consistent_ledger(tmp_path: Path) -> None:
    path = tmp_path / "crash.db"
    PrivacyLedger(path, epoch_budget=1e9).close()
    for run in range(2):  # kill twice: the second run resumes a crashed file
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), "loop", str(path), f"run{run}", "0.001"],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(0.4)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
    with PrivacyLedger(path) as led:
        report = led.verify()  # integrity_check ok, line-item totals == audit rows
        audit = led.audit()
        assert report["charges"] == len(audit) > 2
        spent = sum(led.spent(e) for e in led.epochs())
        assert spent == pytest.approx(audit["charged"].sum())
