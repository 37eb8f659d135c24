"""The Flower example runs, small, and the optional extra stays optional."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from spatialdp.cards import ModelCard
from spatialdp.privacy import PrivacyLedger

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "flower_simulation.py"


def test_import_spatialdp_does_not_import_flower():
    code = ("import sys, spatialdp, spatialdp.flower\n"
            "from spatialdp.flower import release_evaluation, bounded_report, decode_reports\n"
            "assert 'flwr' not in sys.modules, sorted(m for m in sys.modules if 'flwr' in m)\n")
    subprocess.run([sys.executable, "-W", "error", "-c", code], check=True, timeout=120)


def test_example_runs_small(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", [
        str(EXAMPLE), "--clients", "120", "--rounds", "2", "--cohort", "30",
        "--min-cohort", "10", "--out", str(tmp_path), "--ledger-dir", str(tmp_path)])
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    for name in ("flower_choropleth.png", "flower_coverage_map.png",
                 "flower_coverage_score.png", "flower_ledger.sqlite", "model_card.md",
                 "model_card.json"):
        assert (tmp_path / name).stat().st_size > 0
    rounds = pd.read_csv(tmp_path / "flower_rounds.csv", index_col="round")
    summary = pd.read_csv(tmp_path / "flower_ledger_summary.csv", index_col="line_item")
    # One zCDP ledger: each evaluation round's epsilon as epsilon^2 / 2 ...
    assert summary.loc["evaluation.regional", "spent"] == pytest.approx(
        (rounds.epsilon**2 / 2).sum())
    # ... and the training line derived from the DP wrapper: cap 2 / (2 z^2), z = 2 (default)
    assert summary.loc["training", "spent"] == pytest.approx(2 / (2 * 2.0**2), rel=1e-12)
    assert (rounds.training == "zCDP rho 0.25 per client").all()
    with PrivacyLedger(tmp_path / "flower_ledger.sqlite", read_only=True) as ledger:
        training = ledger.audit(0).query("line_item == 'training'")
    assert list(training.neighbours) == ["add_remove"]
    card = ModelCard.from_json(tmp_path / "model_card.json")
    assert card.to_dict()["training"]["rho"] == pytest.approx(0.25)
    assert "training: zCDP rho 0.25 per client" in (tmp_path / "model_card.md").read_text()
    assert "engine inprocess" in capsys.readouterr().out
