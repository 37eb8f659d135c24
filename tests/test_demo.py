"""The main job as the README runs it: a monitored epoch, interrupted and rerun.

One module-scoped scenario (the demo is the slow part of this file): a run killed
with SIGKILL at a random point, a run interrupted with Ctrl-C (SIGINT) at a random
point once it is under way, then a complete run into the same folder. Small
sizes (20,000 devices, 2 rounds); the full-size run is measured, not tested.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import geopandas as gpd
import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pytest

from spatialdp._atomic import LOCK
from spatialdp.cli import main
from spatialdp.demo import runs_table
from spatialdp.privacy.ledger import PrivacyLedger

ARGS = ["--devices", "20000", "--rounds", "2", "--quiet"]
LEDGER_FILES = {"ledger.sqlite", "ledger.sqlite-wal", "ledger.sqlite-shm",
                "ledger.sqlite-journal", LOCK}
PNGS = {"ratio_choropleth.png", "loss_choropleth.png", "loss_significance.png",
        "coverage_map.png", "ratio_timeseries.png", "query_error.png"}
TOP_FILES = PNGS | {"ratio_map.html", "model_card.md", "model_card.json", "run.json",
                    "regional_report.gpkg", "regional_report.csv", "regional_report.json",
                    "regional_report.parquet",
                    "alerts.csv", "demo_runs.csv", "strata.json", "coverage.json",
                    "query_error.csv", "query_error.json", "monitoring.json", "ledger.sqlite"}


def _terminal_signals() -> None:
    # A command started in the background by a non-interactive shell (as CI may run the
    # suite) inherits SIGINT ignored, and Python then keeps ignoring it; a user's
    # terminal delivers it. Run the demo as a terminal would.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _spawn(out: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "spatialdp.cli", "demo", "--out", str(out),
                             *ARGS], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_terminal_signals)


def _interrupt(out: Path, sig: int, delay: float) -> dict[str, Any]:
    """Start a demo run, send ``sig`` ``delay`` s after its staging folder appears."""
    proc = _spawn(out)
    deadline = time.monotonic() + 120
    while not list(out.parent.glob(f".{out.name}.staging-{proc.pid}-*")):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(delay)
    assert proc.poll() is None, "the run finished before it could be interrupted"
    proc.send_signal(sig)
    _stdout, stderr = proc.communicate(timeout=120)
    return {"sig": sig, "delay": delay, "code": proc.returncode, "stderr": stderr,
            "out": sorted(p.name for p in out.iterdir())}


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("demo") / "spatialdp-demo"
    rng = random.Random(1130)  # the interruption points (the test's own seed)
    # Within the first 1.5 s of the run's work: a run of this size now works for about
    # 3-6 s after its staging folder appears, and a signal that lands after main() has
    # returned (interpreter shutdown) interrupts nothing the test is about.
    interrupted = [_interrupt(out, signal.SIGKILL, rng.uniform(0.0, 1.5)),
                   _interrupt(out, signal.SIGINT, rng.uniform(0.0, 1.5))]
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        code = main(["demo", "--out", str(out), *ARGS])
    return {"out": out, "interrupted": interrupted, "code": code, "stdout": stdout.getvalue()}


@pytest.mark.slow  # the module's demo scenario (two demo runs)
def test_an_interrupted_run_leaves_nothing_that_looks_complete(scenario: dict[str, Any]
                                                               ) -> None:
    killed, stopped = scenario["interrupted"]
    assert killed["code"] == -signal.SIGKILL
    # Ctrl-C: one line, no traceback, status 130.
    assert stopped["code"] == 130
    assert stopped["stderr"].count("\n") == 1
    assert stopped["stderr"].startswith("spatialdp: interrupted: nothing was published")
    for run in (killed, stopped):
        # Only the ledger (with whatever it charged) is in the output folder.
        assert set(run["out"]) <= LEDGER_FILES, run


@pytest.mark.slow  # the module's demo scenario (two demo runs)
def test_the_rerun_recovers_and_publishes_everything(scenario: dict[str, Any]) -> None:
    out: Path = scenario["out"]
    assert scenario["code"] == 0
    names = {p.name for p in out.iterdir()}
    assert TOP_FILES <= names
    # Nothing but outputs: the dead runs' lock file and the ledger's side files are gone.
    # (The smoothed loss map and its card section come when enough states are published.)
    assert names - TOP_FILES - {"loss_smoothed.png", "small_area.json"} == {"reports"}
    assert {p.name for p in (out / "reports").iterdir()} == {
        f"round_00{r}.{ext}" for r in (1, 2) for ext in ("csv", "gpkg", "json", "parquet")}
    # The dead runs' staging folders are gone.
    assert not list(out.parent.glob(f".{out.name}.staging-*"))
    manifest = json.loads((out / "run.json").read_text())
    assert sorted(manifest["demo"]["files"]) == sorted(
        str(p.relative_to(out)) for p in out.rglob("*")
        if p.is_file() and p.name not in LEDGER_FILES)
    assert manifest["reports"] == ["reports/round_001.json", "reports/round_002.json"]


@pytest.mark.slow  # the module's demo scenario (two demo runs)
def test_every_figure_is_a_drawn_image(scenario: dict[str, Any]) -> None:
    for name in PNGS:
        image = mpimg.imread(scenario["out"] / name)
        assert image.shape[0] > 300, name
        assert image.shape[1] > 400, name
        assert float(np.std(image[..., :3])) > 0.05, f"{name} is blank"
    html = (scenario["out"] / "ratio_map.html").read_text()
    assert "folium" in html
    assert "CO" in html


@pytest.mark.slow  # the module's demo scenario (two demo runs)
def test_ledger_keeps_every_charge_and_marks_interrupted_epochs(
        scenario: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    out: Path = scenario["out"]
    runs = runs_table(out)  # run ids as text: "06399e74" is not the number 6.399e+77
    assert list(runs.status) == ["complete"]
    epoch = int(runs.epoch.iloc[0])
    run_id = str(runs.run_id.iloc[0])
    with PrivacyLedger(out / "ledger.sqlite", read_only=True) as ledger:
        epochs = ledger.epochs()
        audit = ledger.audit(epoch)
        assert epoch == max(epochs)
        # The complete run: the per-client training charge, one regional release per
        # round, the national loss of the last round, the coverage release (regions and
        # H3 cells, one charge) and the query-error audit's grid; all under add/remove.
        assert len(audit) == 6
        assert sorted(audit.line_item) == ["evaluation.global", *["evaluation.regional"] * 4,
                                           "training"]
        assert set(audit.who) == {f"spatialdp demo run {run_id}"}
        assert set(audit.neighbours) == {"add_remove"}
        assert audit.what.str.startswith("flat count grid h3r").sum() == 1
        assert ledger.remaining(epoch, "evaluation.regional") == pytest.approx(
            3.2 - 2 * 0.4 - 0.3 - 0.5)
        earlier = [e for e in epochs if e != epoch]
        for e in earlier:  # interrupted runs' charges stand, under their own epoch
            assert len(ledger.audit(e)) >= 1
    assert earlier == list(range(epoch))
    if earlier:
        assert f"ledger epoch(s) {earlier} were charged by runs that never published" in (
            scenario["stdout"])
    assert main(["ledger", "show", str(out / "ledger.sqlite")]) == 0
    shown = capsys.readouterr().out
    assert f"epoch {epoch} (demo run: complete)" in shown
    for e in earlier:
        assert f"epoch {e} (no published demo run: interrupted" in shown


@pytest.mark.slow  # the module's demo scenario (two demo runs)
def test_summary_names_both_random_paths_and_the_story(scenario: dict[str, Any]) -> None:
    text = scenario["stdout"]
    assert "simulation path (seed 0): fleet, model errors" in text
    assert "release path (OS entropy, charged to the ledger before any noise)" in text
    assert "sideways drift in CO from round 2" in text
    assert re.search(r"wrote \d+ files into", text)
    assert "model_card.md" in text
    alerts = pd.read_csv(scenario["out"] / "alerts.csv")
    assert set(alerts.columns) == {"test", "region_id", "round", "statistic", "threshold",
                                   "before_drift"}
    assert (alerts.before_drift == (alerts["round"] < 2)).all()
    report = gpd.read_file(scenario["out"] / "regional_report.gpkg")
    assert len(report) == 48
    card = json.loads((scenario["out"] / "model_card.json").read_text())
    assert card["privacy"] is not None
    assert "neighbouring relation: add/remove: participation protected" in text
    assert card["query_error"]["provenance"] == "release"  # measured against the released grid
    assert card["figures"]["coverage_map"] == "coverage_map.png"
    assert "coverage_map.png" in (scenario["out"] / "model_card.md").read_text()


@pytest.mark.slow  # the module's demo scenario (two demo runs)
def test_the_demo_publishes_only_noised_counts_of_people(scenario: dict[str, Any]) -> None:
    """Under add/remove (the default) every count of people written is a release."""
    out: Path = scenario["out"]
    card = json.loads((out / "model_card.json").read_text())
    assert card["privacy"]["neighbours"] == ["add_remove"]
    assert card["cohort_sizes"]["provenance"] == "release"
    assert card["coverage"]["provenance"] == "release"
    assert card["sampling"]["merges"] == []  # decided on exact pools: not published
    assert not (out / "coverage_history.csv").exists()
    assert not (out / "cohort_sizes.json").exists()
    for meta in [out / "regional_report.json", *sorted((out / "reports").glob("*.json"))]:
        assert json.loads(meta.read_text())["neighbours"] == "add_remove"
    report = pd.read_csv(out / "regional_report.csv", index_col=0)
    assert (report.filter(like="_estimator") == "ratio").all().all()  # noised counts below
    shown = report.ratio_suppressed.astype(str).str.lower() == "false"
    np.testing.assert_array_equal(report.ratio_cohort[shown],
                                  np.round(report.ratio_noisy_count[shown]))
    coverage = json.loads((out / "coverage.json").read_text())
    assert coverage["provenance"] == "release"
    assert {r["region_id"] for r in coverage["regions_table"]} == set(report.index)
    strata = json.loads((out / "strata.json").read_text())
    assert strata["merges"] == []


def test_refusals_are_one_line_and_write_nothing(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    cases = [
        (["--devices", "10"], "InvalidInput: --devices 10 is too small"),
        (["--epsilon", "0.5", "--rounds", "6"], "InvalidInput: epsilon=0.5 x 6 rounds plus "
                                                 "the epoch's other releases = 3.8 exceeds the "
                                                 "regional evaluation budget"),
        (["--rounds", "1"], "InvalidInput: rounds=1"),
        (["--partition", str(tmp_path / "missing.gpkg")], "InvalidInput: partition="),
    ]
    for args, message in cases:
        assert main(["demo", "--out", str(out), *args]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"spatialdp: {message}"), err
        assert err.count("\n") == 1
        assert not out.exists()
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["demo", "--out", str(afile / "sub"), "--devices", "20000"]) == 2
    err = capsys.readouterr().err
    assert "cannot be written" in err
    assert err.count("\n") == 1
    assert list(tmp_path.iterdir()) == [afile]
