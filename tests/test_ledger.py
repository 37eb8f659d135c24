"""Tests of spatialdp.privacy.ledger (the budget vocabulary is in test_budget.py)."""

from __future__ import annotations

import gc
import json
import math
import os
import select
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spatialdp.exceptions import BudgetExceeded, InvalidInput, LedgerError
from spatialdp.privacy import _ledger_store
from spatialdp.privacy.budget import (
    BudgetSplit,
    BudgetSplitWarning,
    Disjoint,
    LineItem,
    Overlapping,
    Single,
    epsilon_to_rho,
    rho_to_epsilon,
)
from spatialdp.privacy.ledger import Charge, PrivacyLedger

WORKER = Path(__file__).with_name("_ledger_worker.py")
STATES = Disjoint(name="partition:us48@ab12cd", parts=48)
REG = "evaluation.regional"
AUDIT = {"who": "ana", "what": "mean loss by state", "why": "dashboard"}
APPROVED = {"approver": "lead@example.org", "who": "ana", "why": "incident 4411"}


def charge(ledger: PrivacyLedger, epoch: int = 0, item: str = REG, **kw: object) -> Charge:
    """Spend with default audit fields and structure; ``kw`` overrides."""
    args: dict[str, object] = {"structure": STATES, **AUDIT, **kw}
    if "epsilon" not in kw and "rho" not in kw:
        args["epsilon"] = 0.1
    return ledger.spend(epoch, item, **args)  # type: ignore[arg-type]


def n_rows(ledger: PrivacyLedger) -> int:
    return len(ledger.audit())


def edit(path: Path, *statements: str) -> None:
    """Change a ledger file behind PrivacyLedger's back."""
    conn = sqlite3.connect(path)
    try:
        for statement in statements:
            conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


@pytest.fixture
def ledger() -> Iterator[PrivacyLedger]:
    with PrivacyLedger(":memory:", epoch_budget=10.0) as led:
        yield led


# -- storage --------------------------------------------------------------------------


def test_file_ledger_is_versioned_and_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    PrivacyLedger(path, epoch_budget=1.0).close()
    conn = sqlite3.connect(path)
    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    conn.close()
    assert meta["schema_version"] == "2"
    assert meta["ledger_id"].startswith("ledger-")
    assert meta["application"] == "spatialdp.PrivacyLedger"
    assert mode == "wal"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l.db"]  # no temporary file left


def test_reopening_resumes_and_context_manager_closes(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with PrivacyLedger(path, epoch_budget=2.0, accounting="zcdp") as led:
        charge(led, rho=0.05)
    with pytest.raises(LedgerError, match="is closed; open a new PrivacyLedger"):
        led.spent(0)
    with PrivacyLedger(path) as again:  # configuration comes from the file
        assert again.accounting == "zcdp"
        assert again.epoch_budget == 2.0
        assert again.spent(0, REG) == pytest.approx(0.05)
        assert again.verify()["charges"] == 1


def test_reopening_with_other_configuration_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    PrivacyLedger(path, epoch_budget=2.0).close()
    with pytest.raises(LedgerError, match=r"created with epoch_budget=2.0, but epoch_budget=3.0"):
        PrivacyLedger(path, epoch_budget=3.0)
    with pytest.raises(LedgerError, match="accounting='pure'"):
        PrivacyLedger(path, accounting="zcdp")
    PrivacyLedger(path, epoch_budget=np.float64(2.0), accounting="pure").close()  # same values


def test_new_ledger_needs_a_budget_and_creates_nothing_without_one(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="new ledger and epoch_budget was not given"):
        PrivacyLedger(tmp_path / "new.db")
    assert list(tmp_path.iterdir()) == []


def test_concurrent_creators_agree_on_one_ledger(tmp_path: Path) -> None:
    path, n = tmp_path / "l.db", 8
    barrier, errors = threading.Barrier(n), []

    def create() -> None:
        barrier.wait()
        try:
            with PrivacyLedger(path, epoch_budget=1.0, timeout=10.0) as led:
                charge(led, epsilon=0.01)
        except Exception as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=create) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with PrivacyLedger(path) as led:
        assert led.verify()["charges"] == n
    assert sorted(p.name for p in tmp_path.iterdir()) == ["l.db"]


# -- arguments ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"epoch": -1}, r"epoch=-1 is below the limit >= 0; pass a whole number"),
        ({"epoch": True}, r"epoch=True is a bool"),
        ({"epoch": "1"}, r"epoch='1' is a string"),
        ({"epoch": 1.5}, r"epoch=1.5 is not a whole number"),
        ({"epoch": 2**70}, r"epoch=\d+ is above the limit"),
        ({"item": "marketing"}, r"line_item='marketing' is not one of"),
        ({"epsilon": 0.0}, r"epsilon=0.0 is below the limit > 0"),
        ({"epsilon": math.nan}, r"epsilon=nan is not finite"),
        ({"epsilon": math.inf}, r"epsilon=inf is not finite"),
        ({"epsilon": "0.1"}, r"epsilon='0.1' is a string"),
        ({"epsilon": True}, r"epsilon=True is a bool"),
        ({"epsilon": 2e6}, r"epsilon=2000000.0 is above the limit"),
        ({"who": " "}, r"who=' ' is empty"),
        ({"why": ""}, r"why='' is empty"),
        ({"what": 3}, r"what=3 is a int, not a string"),
        ({"who": "\ud800"}, r"who='\\ud800' is not valid Unicode text"),
        ({"round_index": -1}, r"round_index=-1 is below the limit"),
        ({"round_index": 2.5}, r"round_index=2.5 is not a whole number"),
        ({"release_id": ""}, r"release_id='' is empty"),
        ({"structure": "states"}, r"structure='states' is a str, not a release structure"),
    ],
)
def test_invalid_charges_are_refused(
    ledger: PrivacyLedger, kwargs: dict[str, object], pattern: str
) -> None:
    with pytest.raises(InvalidInput, match=pattern) as err:
        charge(ledger, **kwargs)
    assert "; " in str(err.value)  # name=value problem; fix
    assert n_rows(ledger) == 0


def test_spend_needs_exactly_one_loss(ledger: PrivacyLedger) -> None:
    with pytest.raises(InvalidInput, match="pass exactly one"):
        ledger.spend(0, REG, structure=STATES, **AUDIT)
    with pytest.raises(InvalidInput, match="pass exactly one"):
        ledger.spend(0, REG, structure=STATES, epsilon=0.1, rho=0.1, **AUDIT)
    assert n_rows(ledger) == 0


def test_numpy_scalars_are_accepted(ledger: PrivacyLedger) -> None:
    c = ledger.spend(np.int64(2), REG, epsilon=np.float64(0.1), round_index=np.int32(7),
                     structure=Disjoint("partition:us48@ab12cd", parts=np.int64(48)), **AUDIT)
    row = ledger.audit().iloc[0]
    assert (c.epoch, c.charged, row["round_index"], row["parts"]) == (2, 0.1, 7, 48)
    assert ledger.cap(np.int64(2), REG) == pytest.approx(2.4)
    ledger.borrow(np.int64(2), np.float32(0.5), **APPROVED)
    assert ledger.cap(2, REG) == pytest.approx(2.4 + float(np.float32(0.5)))


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"epoch_budget": "1"}, r"epoch_budget='1' is a string"),
        ({"epoch_budget": True}, r"epoch_budget=True is a bool"),
        ({"epoch_budget": math.nan}, r"epoch_budget=nan is not finite"),
        ({"epoch_budget": float("1e400")}, r"epoch_budget=inf is not finite"),
        ({"epoch_budget": -1.0}, r"epoch_budget=-1.0 is below the limit > 0"),
        ({"epoch_budget": 1.0, "accounting": "approx"}, r"accounting='approx' is not one of"),
        ({"epoch_budget": 1.0, "split": 0.3}, r"split=0.3 is a float, not a BudgetSplit"),
        ({"epoch_budget": 1.0, "timeout": -1}, r"timeout=-1 is below the limit >= 0"),
        ({"epoch_budget": 1.0, "timeout": "5"}, r"timeout='5' is a string"),
        ({"epoch_budget": 1.0, "read_only": "yes"}, r"read_only='yes' is a str, not a bool"),
        ({"epoch_budget": 1.0, "read_only": True}, r"read_only=True cannot apply to a new in"),
        ({"path": 3, "epoch_budget": 1.0}, r"path=3 is a int, not a path"),
        ({"path": b"l.db", "epoch_budget": 1.0}, r"path=b'l.db' is a bytes, not a path"),
        ({"path": "", "epoch_budget": 1.0}, r"path='' is empty"),
    ],
)
def test_invalid_ledger_arguments_are_refused(kwargs: dict[str, object], pattern: str) -> None:
    with pytest.raises(InvalidInput, match=pattern):
        PrivacyLedger(**kwargs)  # type: ignore[arg-type]


# -- units and composition ------------------------------------------------------------


def test_pure_ledger_refuses_rho_and_records_nothing(ledger: PrivacyLedger) -> None:
    with pytest.raises(LedgerError, match=r"rho=0.01 cannot be charged to a pure-epsilon"):
        charge(ledger, rho=0.01)
    assert n_rows(ledger) == 0
    assert ledger.spent(0) == 0.0


def test_zcdp_ledger_counts_epsilon_as_half_its_square() -> None:
    with PrivacyLedger(epoch_budget=1.0, accounting="zcdp") as led:
        c = charge(led, epsilon=0.2)
        assert c.charged == pytest.approx(0.02)
        charge(led, rho=0.03)
        assert led.spent(0, REG) == pytest.approx(0.05)
        assert led.unit == "rho"
        assert list(led.audit()["loss_unit"]) == ["epsilon", "rho"]
    assert epsilon_to_rho(0.2) == pytest.approx(0.02)


def test_default_split_is_70_30_with_separate_line_items(ledger: PrivacyLedger) -> None:
    s = ledger.summary(0)
    expected = {"training": 7.0, "evaluation": 3.0, "evaluation.global": 0.6, REG: 2.4,
                "total": 10.0}
    assert {k: s.loc[k, "cap"] for k in expected} == pytest.approx(expected)


def test_split_is_configurable_and_warns_once_at_creation(tmp_path: Path) -> None:
    with PrivacyLedger(epoch_budget=1.0, split=BudgetSplit(0.25, global_share=0.5)) as led:
        caps = [led.cap(0, i) for i in ("evaluation.global", REG, "training")]
    assert caps == pytest.approx([0.125, 0.125, 0.75])
    with pytest.warns(BudgetSplitWarning, match="below 10%"):
        PrivacyLedger(tmp_path / "l.db", epoch_budget=1.0, split=BudgetSplit(0.05)).close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PrivacyLedger(tmp_path / "l.db").close()


def test_structures_set_the_multiplier(ledger: PrivacyLedger) -> None:
    assert charge(ledger, structure=Disjoint("histogram:loss@v1", parts=1)).charged == 0.1
    assert charge(ledger, structure=Single("national")).charged == 0.1
    basic = Overlapping("h3:res7@v2", parts=900, max_parts_per_client=3)
    calibrated = Overlapping("h3:res7@v2", parts=900, max_parts_per_client=3, calibrated=True)
    assert charge(ledger, structure=basic).charged == pytest.approx(0.3)
    assert charge(ledger, structure=calibrated).charged == pytest.approx(0.1)
    with PrivacyLedger(epoch_budget=1.0, accounting="zcdp") as z:  # k * eps^2/2, not (k eps)^2/2
        assert charge(z, epsilon=0.2, structure=basic).charged == pytest.approx(0.06)


def test_ten_tenths_fill_a_cap_of_one_exactly() -> None:
    with PrivacyLedger(epoch_budget=1.0, split=BudgetSplit(0.4, global_share=0.0)) as led:
        assert led.cap(0, REG) == 0.4
        for r in range(4):
            charge(led, epsilon=0.1, round_index=r)
        assert led.remaining(0, REG) == 0.0
        assert list(led.audit()["round_index"]) == [0, 1, 2, 3]
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


@pytest.mark.parametrize("error", [RuntimeError("disk on fire"),
                                   sqlite3.OperationalError("disk I/O error")])
def test_charge_is_atomic_if_the_second_write_fails(
    ledger: PrivacyLedger, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    def boom(*args: object) -> None:
        raise error

    monkeypatch.setattr(_ledger_store, "add_to_total", boom)
    expected = LedgerError if isinstance(error, sqlite3.Error) else RuntimeError
    with pytest.raises(expected) as err:
        charge(ledger)
    if expected is LedgerError:  # raw SQLite errors are explained, the original chained
        assert err.value.__cause__ is error
        assert "':memory:' could not be read or written while charging" in str(err.value)
    monkeypatch.undo()
    assert n_rows(ledger) == 0
    assert ledger.verify()["charges"] == 0


@pytest.mark.parametrize("where", ["file", "memory"])
def test_threads_share_one_ledger_and_never_overspend(tmp_path: Path, where: str) -> None:
    # 8 threads race 160 charges of 0.05 at a cap of 2.4 while 2 more read: exactly
    # 48 fit, the rest are refused with BudgetExceeded, and the file stays consistent.
    path = str(tmp_path / "ledger.sqlite") if where == "file" else ":memory:"
    ledger = PrivacyLedger(path, epoch_budget=10.0)
    cap = ledger.cap(0, "evaluation.regional")
    go = threading.Barrier(10)
    outcomes: list[str] = []
    errors: list[BaseException] = []
    readings: list[float] = []

    def charge(tag: int) -> None:
        go.wait()
        for k in range(20):
            try:
                ledger.spend(0, "evaluation.regional", epsilon=0.05, structure=Single("race"),
                             who=f"t{tag}", what="race", why="test", release_id=f"{tag}-{k}")
                outcomes.append("ok")
            except BudgetExceeded:
                outcomes.append("refused")
            except BaseException as err:  # anything else is a failure of the test
                errors.append(err)

    def read() -> None:
        go.wait()
        for _ in range(40):
            try:
                readings.append(ledger.spent(0, "evaluation.regional"))
                ledger.summary(0)
            except BaseException as err:
                errors.append(err)

    threads = [threading.Thread(target=charge, args=(t,)) for t in range(8)]
    threads += [threading.Thread(target=read) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with ledger:
        assert errors == []
        assert cap == pytest.approx(2.4)
        assert Counter(outcomes) == {"ok": 48, "refused": 112}
        assert ledger.spent(0, "evaluation.regional") == pytest.approx(cap)
        assert max(readings) <= cap + 1e-12
        assert ledger.verify()["charges"] == 48
        assert len(ledger.audit(0)) == 48


def test_a_ledger_opened_in_one_thread_is_used_in_another(ledger: PrivacyLedger) -> None:
    caught: list[BaseException] = []
    thread = threading.Thread(target=lambda: caught.extend(_catch(lambda: ledger.spend(
        0, "training", epsilon=0.1, structure=Single("race"), who="w", what="x", why="y"))))
    thread.start()
    thread.join()
    assert caught == []
    assert ledger.spent(0, "training") == pytest.approx(0.1)


def _catch(call: Callable[[], object]) -> list[BaseException]:
    try:
        call()
    except BaseException as err:
        return [err]
    return []


# -- borrowing ------------------------------------------------------------------------


def test_evaluation_borrows_from_next_epoch_once_with_an_approver(ledger: PrivacyLedger) -> None:
    ledger.borrow(0, 0.5, **APPROVED)
    assert ledger.cap(0, REG) == pytest.approx(2.9)
    assert ledger.cap(1, REG) == pytest.approx(1.9)
    charge(ledger, epsilon=2.9)  # the whole borrowed cap is usable
    row = ledger.borrows().iloc[0]
    assert (row["approver"], row["amount"], row["epoch"]) == ("lead@example.org", 0.5, 0)
    assert ledger.summary(1).loc[REG, "borrowed"] == pytest.approx(-0.5)
    with pytest.raises(LedgerError, match=r"epoch 0 already borrowed 0\.5.*approved by"):
        ledger.borrow(0, 0.1, **APPROVED)
    assert len(ledger.borrows()) == 1


def test_borrowing_cannot_be_chained(ledger: PrivacyLedger) -> None:
    # epoch 1 borrows all of epoch 2; epoch 0 then asks for all of epoch 1's doubled cap
    ledger.borrow(1, 2.4, **APPROVED)
    with pytest.raises(LedgerError, match=r"epoch 1 borrowed 2.4 epsilon from epoch 2 .*lend"):
        ledger.borrow(0, 4.8, **APPROVED)
    with pytest.raises(LedgerError, match=r"epoch 2 cannot borrow: it lent 2.4 epsilon"):
        ledger.borrow(2, 0.1, **APPROVED)
    assert [ledger.cap(e, REG) for e in range(4)] == pytest.approx([2.4, 4.8, 0.0, 2.4])
    assert len(ledger.borrows()) == 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, 5), st.floats(0.01, 5.0),
                          st.sampled_from(["evaluation.global", REG])), max_size=12))
def test_no_borrow_sequence_raises_a_cap_above_base_plus_one_borrow(
    requests: list[tuple[int, float, str]],
) -> None:
    with PrivacyLedger(epoch_budget=10.0) as led:
        for epoch, amount, item in requests:
            try:
                led.borrow(epoch, amount, line_item=item, **APPROVED)
            except (LedgerError, BudgetExceeded):
                pass
        for item, base in (("evaluation.global", 0.6), (REG, 2.4)):
            caps = [led.cap(e, item) for e in range(8)]
            assert all(-1e-12 <= c <= 2 * base + 1e-12 for c in caps)
            assert sum(caps) == pytest.approx(8 * base)  # moved between epochs, never created
        borrowed = set(led.borrows()["epoch"])
        assert not any(e + 1 in borrowed for e in borrowed)  # a borrower never lends


def test_borrow_checks_its_arguments_and_the_lender(ledger: PrivacyLedger) -> None:
    with pytest.raises(InvalidInput, match="approver='' is empty"):
        ledger.borrow(0, 0.5, approver="", who="ana", why="incident")
    with pytest.raises(InvalidInput, match=r"amount=-0.5 is below the limit > 0"):
        ledger.borrow(0, -0.5, **APPROVED)
    with pytest.raises(LedgerError, match="only evaluation may borrow"):
        ledger.borrow(0, 0.5, line_item="training", **APPROVED)
    charge(ledger, epoch=1, epsilon=2.0)
    with pytest.raises(BudgetExceeded, match=r"exceeds what epoch 1 has left on that item \(0.4\)"):
        ledger.borrow(0, 0.5, **APPROVED)
    assert ledger.borrows().empty
    assert ledger.cap(0, REG) == pytest.approx(2.4)


# -- reporting ------------------------------------------------------------------------


def test_audit_trail_records_who_what_when_why_and_structure(ledger: PrivacyLedger) -> None:
    charge(ledger, epoch=3, release_id="r1", round_index=7)
    row = ledger.audit(epoch=3).iloc[0]
    assert (row["who"], row["what"], row["why"]) == ("ana", "mean loss by state", "dashboard")
    assert (row["epoch"], row["line_item"], row["release_id"]) == (3, REG, "r1")
    assert (row["loss"], row["charged"]) == pytest.approx((0.1, 0.1))
    assert (row["structure_kind"], row["parts"]) == ("disjoint", 48)
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
    assert s.loc["evaluation", "n_charges"] == 1
    assert ledger.remaining(0, REG) == pytest.approx(1.4)
    assert ledger.spent(0) == pytest.approx(4.0)
    assert ledger.epochs() == [0]
    assert "epoch_budget=10 epsilon" in repr(ledger)
    assert "70%/30% training/evaluation" in repr(ledger)
    assert repr(ledger).endswith("; 1 epochs, 2 charges)")


def test_summary_converts_zcdp_spend_to_epsilon_at_delta() -> None:
    with PrivacyLedger(epoch_budget=1.0, accounting="zcdp") as led:
        charge(led, rho=0.1)
        s = led.summary(0, delta=1e-6)
        assert s.loc[REG, "spent_epsilon"] == pytest.approx(rho_to_epsilon(0.1, 1e-6))
        with pytest.raises(InvalidInput, match=r"delta=0 is below the limit > 0"):
            led.summary(0, delta=0)


# -- files that are not (or no longer) a ledger ---------------------------------------


def _ledger_file(path: Path) -> Path:
    """A ledger with charges in two epochs and a borrow, closed (WAL checkpointed)."""
    with PrivacyLedger(path, epoch_budget=10.0) as led:
        led.borrow(0, 0.5, **APPROVED)
        charge(led, epsilon=0.1, release_id="a")
        charge(led, epsilon=0.2, release_id="b")
        charge(led, epoch=1, item="training", epsilon=1.0, release_id="c")
    return path


def _edited(*statements: str) -> Callable[[Path], None]:
    def build(path: Path) -> None:
        _ledger_file(path)
        edit(path, *statements)

    return build


def _bytes(cut: Callable[[bytes], bytes]) -> Callable[[Path], None]:
    """Write ``cut(bytes of a good ledger)``; the good ledger lives outside the case folder."""

    def build(path: Path) -> None:
        path.write_bytes(cut(_ledger_file(path.parent.parent / "good.db").read_bytes()))

    return build


def _foreign(*statements: str) -> Callable[[Path], None]:
    return lambda path: edit(path, *statements)


def _meta(key: str, value: str) -> str:
    return f"UPDATE meta SET value = '{value}' WHERE key = '{key}'"


RANDOM = np.random.default_rng(7).bytes(65536)
BAD_FILES: dict[str, Callable[[Path], None]] = {
    "empty file": lambda p: p.write_bytes(b""),
    **{f"truncated at {n}": _bytes(lambda good, n=n: good[:n])
       for n in (1, 50, 99, 1000, 4096, 4096 + 512, 8192)},
    "truncated by one page": _bytes(lambda good: good[:-4096]),
    "truncated by one byte": _bytes(lambda good: good[:-1]),
    "random bytes": lambda p: p.write_bytes(RANDOM[:8192]),
    "a few random bytes": lambda p: p.write_bytes(RANDOM[:37]),
    "text file": lambda p: p.write_text("epoch,spent\n0,0.1\n" * 100),
    "SQLite header then garbage": lambda p: p.write_bytes(b"SQLite format 3\x00" + RANDOM[:8192]),
    "pages overwritten": _bytes(lambda good: good[:4096] + RANDOM[: len(good) - 4096]),
    "SQLite database with no tables": _foreign("PRAGMA user_version = 7"),
    "foreign schema": _foreign("CREATE TABLE users (id INTEGER, name TEXT)",
                               "INSERT INTO users VALUES (1, 'ana')"),
    "foreign meta table": _foreign("CREATE TABLE meta (key TEXT, value TEXT)",
                                   "INSERT INTO meta VALUES ('application', 'other-app')"),
    "meta with other columns": _foreign("CREATE TABLE meta (name TEXT, data TEXT)"),
    **{f"table {t} dropped": _edited(f"DROP TABLE {t}")
       for t in ("meta", "spend", "charges", "borrows")},
    "charges.charged renamed": _edited("ALTER TABLE charges RENAME COLUMN charged TO amount"),
    "spend.spent renamed": _edited("ALTER TABLE spend RENAME COLUMN spent TO total"),
    "meta.value renamed": _edited("ALTER TABLE meta RENAME COLUMN value TO val"),
    **{f"schema_version {v!r}": _edited(_meta("schema_version", v))
       for v in ("99", "0", "abc", "-1")},
    "schema_version deleted": _edited("DELETE FROM meta WHERE key = 'schema_version'"),
    "application edited": _edited(_meta("application", "other-app")),
    "accounting 'approx'": _edited(_meta("accounting", "approx")),
    "accounting deleted": _edited("DELETE FROM meta WHERE key = 'accounting'"),
    **{f"epoch_budget {v!r}": _edited(_meta("epoch_budget", v))
       for v in ("1e400", "-1", "NaN", "abc", "0", "Infinity", "2e6", "sNaN")},
    "evaluation_share '1.5'": _edited(_meta("evaluation_share", "1.5")),
    "evaluation_share 'x'": _edited(_meta("evaluation_share", "x")),
    "global_share '-0.1'": _edited(_meta("global_share", "-0.1")),
    **{f"charge amount {v!r}": _edited(f"UPDATE charges SET charged = '{v}' WHERE seq = 1")
       for v in ("-0.1", "abc", "NaN", "0.15")},
    "charge loss '-1'": _edited("UPDATE charges SET loss = '-1' WHERE seq = 2"),
    "charge epoch 'x'": _edited("UPDATE charges SET epoch = 'x' WHERE seq = 1"),
    "charge line item 'marketing'": _edited("UPDATE charges SET line_item = 'marketing'"),
    "total '-5'": _edited("UPDATE spend SET spent = '-5'"),
    "total lowered": _edited(f"UPDATE spend SET spent = '0' WHERE line_item = '{REG}'"),
    "charge count edited": _edited("UPDATE spend SET n_charges = 99"),
    "spent above cap": _edited("UPDATE charges SET charged = '2.8' WHERE release_id = 'a'",
                               f"UPDATE spend SET spent = '3.0' WHERE line_item = '{REG}'"),
    "borrow amount '-1'": _edited("UPDATE borrows SET amount = '-1'"),
    "borrow above the base cap": _edited("UPDATE borrows SET amount = '9'"),
    "borrow by training": _edited("UPDATE borrows SET line_item = 'training'"),
    "chained borrows": _edited(
        "INSERT INTO borrows SELECT 1, line_item, amount, approver, who, why, recorded_at "
        "FROM borrows"),
    "directory": lambda p: p.mkdir(),
}


def _snapshot(folder: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(folder)): None if p.is_dir() else p.read_bytes()
            for p in sorted(folder.rglob("*"))}


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[sqlite3.Connection]:
    """Every SQLite connection the ledger opens during the test."""
    opened: list[sqlite3.Connection] = []
    real = sqlite3.connect

    def tracked(*args: object, **kwargs: object) -> sqlite3.Connection:
        conn = real(*args, **kwargs)  # type: ignore[arg-type]
        opened.append(conn)
        return conn

    monkeypatch.setattr(_ledger_store.sqlite3, "connect", tracked)
    return opened


def _is_closed(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("SELECT 1")
    except sqlite3.ProgrammingError:
        return True
    return False


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_file_is_refused_clearly_and_left_untouched(
    tmp_path: Path, connections: list[sqlite3.Connection], case: str
) -> None:
    folder = tmp_path / "case"
    folder.mkdir()
    path = folder / "l.db"
    BAD_FILES[case](path)
    before = _snapshot(folder)
    for kwargs in ({}, {"epoch_budget": 10.0}, {"timeout": 0.0}):
        with pytest.raises(LedgerError) as err:
            PrivacyLedger(path, **kwargs)  # type: ignore[arg-type]
        message = str(err.value)
        assert message.startswith(f"ledger {str(path)!r} "), message
        assert "; " in message, message  # what is wrong; the fix
        assert _snapshot(folder) == before, "the refused file was modified"
    with pytest.raises(LedgerError):
        PrivacyLedger(path, read_only=True)
    assert all(_is_closed(c) for c in connections)  # no connection left open on any path
    if path.is_file():
        assert path.read_bytes() == before["l.db"]


def test_edited_budget_is_not_taken_as_no_limit(tmp_path: Path) -> None:
    path = _ledger_file(tmp_path / "l.db")
    edit(path, _meta("epoch_budget", "1e400"))
    with pytest.raises(LedgerError, match=r"stores the setting epoch_budget='1e400', which is not "
                       r"a positive finite budget.*restore it from a backup") as err:
        PrivacyLedger(path)
    assert isinstance(err.value.__cause__, InvalidInput)


def test_file_edited_while_open_gives_a_ledger_error_at_next_use(tmp_path: Path) -> None:
    path = _ledger_file(tmp_path / "l.db")
    with PrivacyLedger(path) as led:
        edit(path, f"UPDATE spend SET spent = 'abc' WHERE line_item = '{REG}'",
             "UPDATE charges SET charged = 'x' WHERE release_id = 'a'")
        with pytest.raises(LedgerError, match=r"holds a value spatialdp cannot read while "
                           r"charging \(a stored amount is not a decimal number.*; the file was "
                           r"edited outside PrivacyLedger: restore") as err:
            charge(led, release_id="refused")
        assert isinstance(err.value.__cause__, ArithmeticError)  # decimal.InvalidOperation
        with pytest.raises(LedgerError, match="while reading the audit trail"):
            led.audit()
        with pytest.raises(LedgerError, match=r"stores charged='x' in charge #1"):
            led.verify()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM charges").fetchone()[0] == 3
    conn.close()


def test_locked_ledger_gives_a_clear_error_at_first_use(tmp_path: Path) -> None:
    path = _ledger_file(tmp_path / "l.db")
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        holder.execute("DELETE FROM borrows")
        with PrivacyLedger(path, timeout=0.2) as led:  # WAL: readers see the last commit
            assert led.spent(0, REG) == pytest.approx(0.3)
            started = time.monotonic()
            with pytest.raises(LedgerError, match=r"is locked by another connection: charging "
                               r"waited timeout=0.2 s.*pass a longer timeout=") as err:
                charge(led, release_id="refused")
            assert time.monotonic() - started < 5.0
            assert isinstance(err.value.__cause__, sqlite3.OperationalError)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with PrivacyLedger(path) as led:
        assert "refused" not in set(led.audit()["release_id"])
        charge(led, release_id="later")
        assert led.verify() == {"charges": 4, "line_items": 2, "borrows": 1}


def test_locked_rollback_journal_ledger_gives_a_clear_error_at_open(tmp_path: Path) -> None:
    path = _ledger_file(tmp_path / "l.db")
    edit(path, "PRAGMA journal_mode = DELETE")
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        before = path.read_bytes()
        with pytest.raises(LedgerError, match=r"is locked by another connection: opening the "
                           r"ledger waited timeout=0.1 s"):
            PrivacyLedger(path, timeout=0.1)
        assert path.read_bytes() == before
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    PrivacyLedger(path).close()


def test_read_only_ledger_reads_and_refuses_writes(tmp_path: Path) -> None:
    path = _ledger_file(tmp_path / "l.db")
    path.chmod(0o444)
    before = path.read_bytes()
    with PrivacyLedger(path, read_only=True) as led:
        assert led.read_only
        assert led.spent(0, REG) == pytest.approx(0.3)
        assert led.verify()["charges"] == 3
        with pytest.raises(LedgerError, match=r"was opened with read_only=True, so charging is"):
            charge(led)
        with pytest.raises(LedgerError, match=r"so borrowing is refused"):
            led.borrow(3, 0.1, **APPROVED)
        led._read_only = False  # past the ledger's own check, SQLite's mode=ro still refuses
        with pytest.raises(LedgerError, match=r"cannot be written while charging") as err:
            charge(led)
        assert isinstance(err.value.__cause__, sqlite3.OperationalError)
    assert path.read_bytes() == before
    with pytest.raises(LedgerError, match=r"does not exist"):
        PrivacyLedger(tmp_path / "missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()


def test_unwritable_file_is_refused_unless_opened_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file this process may not write is refused at open, before any SQL.

    The tests run as root, which ignores permission bits: chmod 0o444 does not
    stop root writing and os.access reports the file writable (correctly). So,
    as root only, os.access is given the answer a non-root owner would get;
    as any other user the permission bits alone decide.
    """
    path = _ledger_file(tmp_path / "l.db")
    path.chmod(0o444)
    before = path.read_bytes()
    if os.geteuid() == 0:
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **kw: real(p, mode, **kw) and not (
            mode & os.W_OK and not os.stat(p).st_mode & 0o200))
    with pytest.raises(LedgerError, match=r"is read-only for this process; open it with "
                       r"read_only=True"):
        PrivacyLedger(path)
    with PrivacyLedger(path, read_only=True) as led:
        assert led.epochs() == [0, 1]
    assert path.read_bytes() == before


def test_connections_are_closed_when_dropped_or_on_failure(
    tmp_path: Path, connections: list[sqlite3.Connection]
) -> None:
    led = PrivacyLedger(tmp_path / "l.db", epoch_budget=1.0)
    del led
    gc.collect()
    with pytest.raises(LedgerError):
        PrivacyLedger(tmp_path / "l.db", epoch_budget=2.0)  # configuration differs
    with pytest.raises(LedgerError):
        PrivacyLedger(":memory:")  # no budget
    assert len(connections) >= 3
    assert all(_is_closed(c) for c in connections)


# -- concurrency and crashes ----------------------------------------------------------


def test_concurrent_processes_keep_the_ledger_invariants(tmp_path: Path) -> None:
    path, go = tmp_path / "shared.db", tmp_path / "go"
    amount, n_proc, n_each = "0.07", 3, 20  # 60 attempts; 34 fit in the cap
    PrivacyLedger(path, epoch_budget=10.0).close()  # regional cap 2.4
    procs = [subprocess.Popen([sys.executable, str(WORKER), "hammer", str(path), f"p{i}",
                               str(n_each), amount, str(go)], stdout=subprocess.PIPE, text=True)
             for i in range(n_proc)]
    try:
        # The race starts only when every worker has opened the ledger; if one never
        # does, the test fails rather than letting some processes run alone.
        deadline = time.monotonic() + 60.0
        while not all((tmp_path / f"go.p{i}.ready").exists() for i in range(n_proc)):
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                pytest.fail("the workers were not all ready within 60 s; the race did not run")
            time.sleep(0.01)
        go.touch()
        results = [json.loads(p.communicate(timeout=90)[0]) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.communicate()
    assert [p.returncode for p in procs] == [0] * n_proc
    accepted = [rid for r in results for rid in r["ok"]]
    refused = [rid for r in results for rid in r["refused"]]
    assert len(accepted) + len(refused) == n_proc * n_each
    with PrivacyLedger(path) as led:
        audit = Counter(led.audit()["release_id"])
        spent = Decimal(str(led.spent(0, REG)))
        assert audit == Counter(accepted)  # every accepted charge recorded exactly once
        assert not set(refused) & set(audit)  # the refused ones left no trace
        assert spent <= Decimal("2.4")  # never above the cap
        assert spent == len(accepted) * Decimal(amount)
        assert len(accepted) == 34  # the cap is filled: floor(2.4 / 0.07), then refusals
        assert led.verify()["charges"] == len(accepted)


def _read_line(proc: subprocess.Popen[str], timeout: float) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    return proc.stdout.readline() if ready else ""


def test_process_killed_inside_a_write_transaction_leaves_a_consistent_ledger(
    tmp_path: Path,
) -> None:
    path = tmp_path / "crash.db"
    PrivacyLedger(path, epoch_budget=10.0).close()
    committed: list[str] = []
    # Killed after the audit row, then after both writes: each time inside the open
    # transaction, before COMMIT. The second run resumes the file the first one left.
    for run, hang_at in enumerate(("insert_charge", "add_to_total")):
        with subprocess.Popen([sys.executable, str(WORKER), "crash", str(path), f"r{run}",
                               "3", hang_at], stdout=subprocess.PIPE, text=True) as proc:
            try:
                line = _read_line(proc, 60.0)
                assert line == f"in-transaction r{run}-3\n"
            finally:
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
        committed += [f"r{run}-{i}" for i in range(3)]
    with PrivacyLedger(path, timeout=5.0) as led:
        audit = led.audit()
        assert list(audit["release_id"]) == committed  # the half-done charges are absent
        assert led.verify() == {"charges": 6, "line_items": 3, "borrows": 0}
        assert sum(led.spent(e) for e in led.epochs()) == pytest.approx(0.06)
        charge(led, release_id="after")  # the killed writer's lock is gone


# ----------------------------------------------------------------------------- schema 2


def _as_version_1(path: Path) -> None:
    """Turn a ledger file into what spatialdp wrote before schema version 2."""
    edit(path, "ALTER TABLE charges DROP COLUMN neighbours",
         "DELETE FROM meta WHERE key = 'ledger_id'",
         "UPDATE meta SET value = '1' WHERE key = 'schema_version'")


def test_each_charge_records_its_neighbouring_relation(tmp_path: Path) -> None:
    with PrivacyLedger(tmp_path / "l.db", epoch_budget=1.0) as led:
        charge(led, release_id="a")
        charge(led, release_id="b", neighbours="add_remove")
        assert list(led.audit()["neighbours"]) == ["replace", "add_remove"]
        with pytest.raises(InvalidInput, match="neighbours='add/remove' is not one of"):
            charge(led, neighbours="add/remove")
        assert n_rows(led) == 2


def test_an_edited_neighbouring_relation_is_refused_on_open(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with PrivacyLedger(path, epoch_budget=1.0) as led:
        charge(led)
    edit(path, "UPDATE charges SET neighbours = 'none'")
    with pytest.raises(LedgerError, match=r"stores neighbours='none' in charge #1"):
        PrivacyLedger(path)


def test_a_version_1_file_is_read_as_replace_one_and_upgraded_when_written(
        tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with PrivacyLedger(path, epoch_budget=1.0) as led:
        charge(led, release_id="old")
    _as_version_1(path)
    with PrivacyLedger(path, read_only=True) as old:  # read as it is: nothing written
        first_id = old.ledger_id
        assert list(old.audit()["neighbours"]) == ["replace"]
    conn = sqlite3.connect(path)
    assert dict(conn.execute("SELECT key, value FROM meta").fetchall())["schema_version"] == "1"
    conn.close()
    with PrivacyLedger(path) as led:  # opened for writing: upgraded in place
        assert led.ledger_id == first_id  # the identifier does not change
        charge(led, release_id="new", neighbours="add_remove")
        assert list(led.audit()["neighbours"]) == ["replace", "add_remove"]
        assert led.verify()["charges"] == 2
    conn = sqlite3.connect(path)
    assert dict(conn.execute("SELECT key, value FROM meta").fetchall())["schema_version"] == "2"
    conn.close()


def test_the_ledger_id_is_stable_and_is_not_a_path(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with PrivacyLedger(path, epoch_budget=1.0) as led:
        ident = led.ledger_id
    with PrivacyLedger(path) as again:
        assert again.ledger_id == ident
    assert str(tmp_path) not in ident
    assert ident.startswith("ledger-")
    assert len(ident) == 23
    with PrivacyLedger(":memory:", epoch_budget=1.0) as a, \
            PrivacyLedger(":memory:", epoch_budget=1.0) as b:
        assert a.ledger_id != b.ledger_id


@pytest.mark.parametrize("accounting", ["pure", "zcdp"])
def test_check_charge_computes_what_spend_would_record(accounting: str) -> None:
    with PrivacyLedger(":memory:", epoch_budget=1.0, accounting=accounting) as led:
        left = led.remaining(0, REG)  # 0.24
        half = math.sqrt(left) if accounting == "zcdp" else left / 2  # costs half of it
        led.check_charge(0, REG, epsilon=half * (1 - 1e-9), charges=2)
        with pytest.raises(BudgetExceeded, match="nothing was charged"):
            led.check_charge(0, REG, epsilon=half, charges=3)
        over = Overlapping("cells", 10, 2)  # k = 2 parts per client: twice the loss
        with pytest.raises(BudgetExceeded, match=r"2 charge\(s\)"):
            led.check_charge(0, REG, structure=over, epsilon=half * (1 - 1e-9), charges=2)
        assert n_rows(led) == 0
        if accounting == "pure":
            with pytest.raises(LedgerError, match="cannot be charged to a pure-epsilon"):
                led.check_charge(0, REG, rho=0.01)


def test_a_charge_without_any_loss_says_so() -> None:
    with PrivacyLedger(":memory:", epoch_budget=1.0) as led:
        with pytest.raises(InvalidInput, match=r"epsilon=None and rho=None: no loss was given"):
            charge(led, epsilon=None)
        with pytest.raises(InvalidInput, match=r"epsilon=0.1 was passed with rho=0.1"):
            charge(led, epsilon=0.1, rho=0.1)
