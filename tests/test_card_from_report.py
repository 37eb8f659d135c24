"""`spatialdp card` on a `spatialdp report` folder: the card of the user's own data."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from spatialdp.cards import ModelCard, RunFolder, validate_card
from spatialdp.cli import main
from spatialdp.datasets import data_dir, synthetic_fleet, us_states_partition
from spatialdp.exceptions import InvalidInput
from spatialdp.federated import read_report
from spatialdp.privacy.ledger import PrivacyLedger


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A client table (Parquet): one row per client, lon/lat, its mean loss and its speed."""
    fleet = synthetic_fleet(12_000, rng=11)
    rng = np.random.default_rng(12)
    table = pd.DataFrame({"client_id": fleet.device_id.to_numpy(), "lon": fleet.lon.to_numpy(),
                          "lat": fleet.lat.to_numpy(),
                          "loss": rng.gamma(2.0, 0.8, len(fleet)),
                          "speed": rng.uniform(0, 30, len(fleet))})
    path = tmp_path_factory.mktemp("clients") / "clients.parquet"
    table.to_parquet(path)
    return path


def _report_args(clients: Path, out: Path, ledger: Path) -> list[str]:
    return ["report", str(clients), "--partition", str(data_dir() / "us48_states.gpkg"),
            "--id-column", "state", "--metric", "loss:0:4", "--metric", "speed:0:30",
            "--epsilon", "0.5", "--min-cohort", "80", "--ledger", str(ledger), "--epoch", "2",
            "--out", str(out)]


@pytest.fixture(scope="module")
def report_folder(clients: Path, tmp_path_factory: pytest.TempPathFactory
                  ) -> tuple[Path, Path]:
    """`spatialdp report --plot` on the shipped states layer, charged to a ledger."""
    root = tmp_path_factory.mktemp("run")
    out, ledger = root / "out", root / "ledger.sqlite"
    assert main([*_report_args(clients, out, ledger), "--plot"]) == 0
    return out, ledger


def test_a_report_folder_is_a_run_folder(report_folder: tuple[Path, Path]) -> None:
    out, _ = report_folder
    manifest = RunFolder(out).read_manifest()
    assert manifest["reports"] == ["regional_report.json"]
    assert manifest["partition"]["version"] == us_states_partition().version
    assert [s["name"] for s in manifest["specs"]] == ["loss", "speed"]
    assert manifest["epochs"] == [2]
    assert manifest["ledger"] is None  # never the ledger's path
    assert manifest["figures"] == {"loss_choropleth": "loss_choropleth.png",
                                   "speed_choropleth": "speed_choropleth.png"}
    assert "ledger.sqlite" not in (out / "run.json").read_text()


def test_card_of_a_report_folder_through_the_cli(report_folder: tuple[Path, Path],
                                                 tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    out, ledger = report_folder
    report = read_report(out / "regional_report.gpkg")
    capsys.readouterr()
    assert main(["card", str(out), "--ledger", str(ledger), "--out", str(tmp_path)]) == 0
    assert "model_card.json" in capsys.readouterr().out
    card = json.loads((tmp_path / "model_card.json").read_text())
    validate_card(card)
    (round_,) = card["quantitative_analysis"]["rounds"]
    assert [m["name"] for m in round_["metrics"]] == ["loss", "speed"]
    assert round_["epsilon"] == report.epsilon
    assert round_["min_cohort"] == 80 == report.min_cohort
    assert round_["accounting"] == "ledger"
    assert round_["provenance"] == "release"
    assert round_["epoch"] == 2
    assert round_["partition_version"] == report.partition_version
    assert card["geography"]["partition"]["version"] == report.partition_version
    assert round_["suppressed_regions"] == report.suppressed_regions
    values = {r["region_id"]: r["value"] for r in round_["metrics"][0]["regions"]}
    shown = report["loss"][~report["loss"].suppressed]
    assert values == {**{str(k): None for k in report["loss"].index},
                      **{str(k): float(v) for k, v in shown.value.items()}}
    with PrivacyLedger(ledger, read_only=True) as book:
        spent = book.spent(2)
    (epoch,) = card["privacy"]["epochs"]
    assert epoch["epoch"] == 2
    assert epoch["epsilon_per_client"] == pytest.approx(spent)
    assert set(card["figures"]) == {"loss_choropleth", "speed_choropleth"}
    markdown = (tmp_path / "model_card.md").read_text()
    assert "loss_choropleth.png" in markdown
    # no cohort selection in a report folder: the card says coverage is not recorded
    assert card["coverage"] is None
    coverage = markdown.split("## Coverage", 1)[1].split("\n## ", 1)[0]
    assert "Not recorded for this run" in coverage


def test_card_without_the_ledger_keeps_the_reports_accounting(
        report_folder: tuple[Path, Path]) -> None:
    out, _ = report_folder
    card = ModelCard.from_run(out).to_dict()
    assert card["privacy"] is None
    assert card["quantitative_analysis"]["rounds"][0]["accounting"] == "ledger"


def test_card_refusals_name_the_fix(report_folder: tuple[Path, Path], tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = report_folder
    assert main(["card", str(out), "--ledger", str(tmp_path / "none.sqlite"),
                 "--out", str(tmp_path)]) == 2
    assert "ledger=" in capsys.readouterr().err
    bare = tmp_path / "bare"
    read_report(out / "regional_report.gpkg").write(bare)  # written from Python: no run.json
    assert main(["card", str(bare)]) == 2
    err = capsys.readouterr().err
    assert "holds report files but no run.json" in err
    assert "run `spatialdp report` again" in err
    with pytest.raises(InvalidInput, match=r"reports\[\]='nope.json' is not a report's JSON "
                       "sidecar"):
        RunFolder(bare).write_manifest(partition=us_states_partition(), reports=["nope.json"])
    RunFolder(bare).write_manifest(partition=us_states_partition(),
                                   reports=["regional_report.json"], ledger=False)
    assert ModelCard.from_run(bare).to_dict()["quantitative_analysis"]["rounds"][0][
        "partition_version"] == us_states_partition().version


def test_an_unaccounted_report_folder_makes_a_card(
        clients: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["report", str(clients), "--partition", str(data_dir() / "us48_states.gpkg"),
                 "--id-column", "state", "--metric", "loss:0:4", "--epsilon", "1",
                 "--unaccounted", "benchmark", "--out", str(out)]) == 0
    assert "run.json" in capsys.readouterr().out
    assert {p.name for p in out.iterdir()} == {
        "run.json", *(f"regional_report.UNACCOUNTED.{ext}"
                      for ext in ("gpkg", "parquet", "csv", "json"))}
    assert main(["card", str(out)]) == 0
    card = json.loads((out / "model_card.json").read_text())
    assert card["quantitative_analysis"]["rounds"][0]["provenance"] == "unaccounted"


def test_a_read_report_makes_the_same_card_round(report_folder: tuple[Path, Path]) -> None:
    out, _ = report_folder
    back = read_report(out / "regional_report.parquet")
    built = ModelCard.build(partition=us_states_partition(), report=back).to_dict()
    from_folder = ModelCard.from_run(out).to_dict()
    (mine,) = built["quantitative_analysis"]["rounds"]
    (theirs,) = from_folder["quantitative_analysis"]["rounds"]
    assert {k: v for k, v in mine.items() if k != "source"} == {
        k: v for k, v in theirs.items() if k != "source"}


@pytest.mark.slow  # two Python processes (about 15 s)
def test_python_m_spatialdp_report_then_card(clients: Path, tmp_path: Path) -> None:
    """The same chain as a user types it, each command in its own process."""
    out, ledger = tmp_path / "out", tmp_path / "ledger.sqlite"
    for args in (_report_args(clients, out, ledger),
                 ["card", str(out), "--ledger", str(ledger)]):
        subprocess.run([sys.executable, "-m", "spatialdp.cli", *args], check=True,
                       capture_output=True, text=True)
    card = json.loads((out / "model_card.json").read_text())
    (round_,) = card["quantitative_analysis"]["rounds"]
    assert (round_["accounting"], round_["epoch"]) == ("ledger", 2)
    with PrivacyLedger(ledger, read_only=True) as book:
        assert card["privacy"]["epochs"][0]["epsilon_per_client"] == pytest.approx(
            book.spent(2))
