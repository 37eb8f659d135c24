"""The Flower example runs, small, and the optional extra stays optional."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

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
                 "flower_coverage_score.png", "flower_ledger.sqlite"):
        assert (tmp_path / name).stat().st_size > 0
    rounds = pd.read_csv(tmp_path / "flower_rounds.csv", index_col="round")
    summary = pd.read_csv(tmp_path / "flower_ledger_summary.csv", index_col="line_item")
    assert summary.loc["evaluation.regional", "spent"] == pytest.approx(rounds.epsilon.sum())
    assert "engine inprocess" in capsys.readouterr().out
