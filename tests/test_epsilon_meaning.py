"""One meaning of epsilon: the total charged for a release, split over its metrics.

``epsilon=0.4`` with two metrics charges the ledger 0.4 (0.2 each), and the
summary, the map titles, the folium caption, the metadata and the CLI say 0.4;
a mapping gives the split explicitly and its sum is the total. The old code
charged 0.8 here while the title said 0.4.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pytest

from spatialdp.cli import main
from spatialdp.cli._report import client_reports
from spatialdp.datasets import synthetic_fleet, us_states_partition
from spatialdp.exceptions import InvalidInput
from spatialdp.federated import MetricSpec, regional_report
from spatialdp.federated.metrics import resolve_epsilons
from spatialdp.federated.regional import RegionalReport
from spatialdp.privacy import PrivacyLedger, ReleaseTarget
from spatialdp.viz import explore_report, plot_uncertainty_choropleth

matplotlib.use("Agg")

LOSS = MetricSpec("loss", 0.0, 4.0)
SPEED = MetricSpec("speed", 0.0, 10.0)


@pytest.fixture(scope="module")
def clients() -> pd.DataFrame:
    """Client reports with two metrics, clipped and tagged as a device would (CLI helper)."""
    fleet = synthetic_fleet(20_000, rng=5)
    rng = np.random.default_rng(6)
    table = pd.DataFrame({"client_id": fleet.device_id, "region_id": fleet.region_id,
                          "loss": rng.gamma(2.0, 0.5, len(fleet)),
                          "speed": rng.uniform(0, 10, len(fleet))})
    return client_reports(table, us_states_partition(), [LOSS, SPEED])


def _charged(epsilon: float | dict[str, float], clients: pd.DataFrame
             ) -> tuple[RegionalReport, pd.DataFrame]:
    states = us_states_partition()
    with PrivacyLedger(":memory:", epoch_budget=5.0) as ledger:
        report = regional_report(clients, states, [LOSS, SPEED], epsilon=epsilon,
                                 min_cohort=100, target=ReleaseTarget(ledger, epoch=0))
        return report, ledger.audit(0)


def test_one_number_is_the_total_split_equally(clients: pd.DataFrame) -> None:
    report, audit = _charged(0.4, clients)
    # The ledger: one charge of 0.4 for the release, not 0.4 per metric.
    assert len(audit) == 1
    assert Decimal(str(audit["loss"].iloc[0])) == Decimal("0.4")
    assert report.epsilon == {"loss": 0.2, "speed": 0.2}
    assert report.epsilon_total == 0.4
    assert report.metadata()["epsilon_total"] == 0.4
    assert "epsilon 0.4 (loss 0.2, speed 0.2) per client" in report.summary()
    meta = report["loss"].attrs["spatialdp"]
    assert (meta["epsilon"], meta["metric_epsilon"]) == (0.4, 0.2)
    # The map's title and the folium caption say what was charged.
    title = plot_uncertainty_choropleth(report["loss"]).get_title(loc="left")
    assert "ε = 0.4 (loss 0.2, speed 0.2) (replace-one)" in title
    html = explore_report(report["speed"], tiles=None).get_root().render()
    box = html[html.index('id="spatialdp-title"'):]
    box = box[:box.index("</div>")]
    assert "ε = 0.4 (loss 0.2, speed 0.2) (replace-one)" in box  # the map's title box
    assert "ε = 0.2 " not in html


def test_a_mapping_is_the_split_and_its_sum_the_total(clients: pd.DataFrame) -> None:
    report, audit = _charged({"loss": 0.1, "speed": 0.3}, clients)
    assert Decimal(str(audit["loss"].iloc[0])) == Decimal("0.4")
    assert report.epsilon_total == 0.4
    title = plot_uncertainty_choropleth(report["speed"]).get_title(loc="left")
    assert "ε = 0.4 (loss 0.1, speed 0.3)" in title
    # The noise follows the split: the loss metric gets the smaller share, the larger scale.
    scale = {name: float(np.nanmedian(report[name].noise_scale)) for name in report}
    width = {"loss": LOSS.clip_high - LOSS.clip_low, "speed": SPEED.clip_high - SPEED.clip_low}
    assert scale["loss"] / width["loss"] == pytest.approx(3 * scale["speed"] / width["speed"],
                                                          rel=0.05)


def test_equal_shares_never_add_up_to_more_than_the_total() -> None:
    specs = [MetricSpec(f"m{i}", 0, 1) for i in range(7)]
    for total in (1.0, 0.7, 0.1, 2.9, 1 / 3):
        shares = resolve_epsilons(specs, total)
        exact = sum((Decimal(repr(v)) for v in shares.values()), Decimal(0))
        assert exact <= Decimal(repr(total))
        assert float(exact) == pytest.approx(total, rel=1e-12)


def test_a_mapping_that_misses_a_metric_is_refused() -> None:
    with pytest.raises(InvalidInput, match=r"no value for metrics \['speed'\].*their sum is "
                                           r"the total"):
        resolve_epsilons([LOSS, SPEED], {"loss": 0.4})


def test_report_and_demo_epsilon_mean_the_total(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                ) -> None:
    for command in ("report", "demo"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "--epsilon EPSILON total epsilon" in text
    fleet = synthetic_fleet(8_000, rng=3)
    table = pd.DataFrame({"client_id": fleet.device_id, "region_id": fleet.region_id,
                          "loss": 1.0, "speed": 2.0})
    path = tmp_path / "clients.csv"
    table.to_csv(path, index=False)
    states = tmp_path / "states.gpkg"
    us_states_partition().regions.reset_index()[["region_id", "geometry"]].to_file(states)
    out = tmp_path / "out"
    out.mkdir()
    ledger = out / "ledger.sqlite"  # the ledger kept in the output folder
    assert main(["report", str(path), "--partition", str(states), "--id-column", "region_id",
                 "--metric", "loss:0:4", "--metric", "speed:0:10", "--epsilon", "0.4",
                 "--ledger", str(ledger), "--out", str(out), "--min-cohort", "30"]) == 0
    assert "epsilon 0.4 (loss 0.2, speed 0.2) per client" in capsys.readouterr().out
    with PrivacyLedger(ledger, read_only=True) as read:
        assert Decimal(str(read.audit(0)["loss"].sum())) == Decimal("0.4")
    # Nothing but outputs: the report's files and the ledger the user put there; no lock
    # file, no -wal/-shm of the ledger.
    assert sorted(p.name for p in out.iterdir()) == [
        "ledger.sqlite", "regional_report.csv", "regional_report.gpkg", "regional_report.json",
        "regional_report.parquet", "run.json"]
