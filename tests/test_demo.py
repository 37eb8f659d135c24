"""The main job, end to end, as the README runs it."""

from __future__ import annotations

from pathlib import Path

import geopandas as gpd
import pandas as pd

from spatialdp.cli import main
from spatialdp.privacy.ledger import PrivacyLedger


def test_demo_writes_report_map_and_ledger(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["demo", "--out", str(tmp_path), "--devices", "200000"]) == 0
    out = capsys.readouterr().out
    assert "regional report" in out
    assert "ledger (epoch 0)" in out
    names = {p.name for p in tmp_path.iterdir()}
    assert {"regional_report.gpkg", "regional_report.csv", "ratio_choropleth.png",
            "loss_choropleth.png", "abs_error_m_choropleth.png", "ledger.sqlite"} <= names
    assert not [n for n in names if n.startswith(".")]  # no half-written files left

    report = gpd.read_file(tmp_path / "regional_report.gpkg").set_index("region_id")
    ratio = report["ratio.value"]
    # The drifting region stands out beyond its error bar.
    assert ratio.idxmax() == "CO"
    runner_up = ratio.drop("CO").max()
    assert ratio["CO"] - report.loc["CO", "ratio.error_bar"] > runner_up
    suppressed = report["ratio.suppressed"].astype(bool)
    assert suppressed.any()
    assert ratio[suppressed].isna().all()
    assert (report.loc[~suppressed, "ratio.cohort"] >= 300).all()

    with PrivacyLedger(tmp_path / "ledger.sqlite") as ledger:
        audit = ledger.audit(0)
        assert len(audit) == 3
        # verify() raises on any inconsistency; its counts must match the audit trail.
        assert ledger.verify()["charges"] == 3
        assert set(audit.why) == {"regional evaluation round of the model", "national loss",
                                  "round health"}
    csv = pd.read_csv(tmp_path / "regional_report.csv")
    assert len(csv) == 48

    # A second run is a new epoch on the same ledger, not an overspend of the first.
    assert main(["demo", "--out", str(tmp_path), "--devices", "200000", "--seed", "1"]) == 0
    with PrivacyLedger(tmp_path / "ledger.sqlite") as ledger:
        assert ledger.epochs() == [0, 1]
