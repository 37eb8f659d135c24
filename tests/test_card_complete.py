"""A complete card: alerts and drift, blind spots at every level, honest flags and limitations.

Small cards built from real releases check each element against the objects it
came from; one demo run (slow) checks the demo's card end to end: its alerts
and drift with their rounds, the blind spots over the coverage map's own
denominator, and an output folder that holds nothing but the documented
outputs (no lock file, no SQLite side files).
"""

from __future__ import annotations

import contextlib
import io
import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from spatialdp.cards import ModelCard, write_run_folder
from spatialdp.cards._sections import PUBLIC_PARTICIPATION
from spatialdp.cards.json_card import load_schema
from spatialdp.cli import main
from spatialdp.datasets import synthetic_fleet, us_states_partition
from spatialdp.exceptions import InvalidInput, UninformativeReleaseWarning
from spatialdp.federated import HistogramSpec, MetricSpec, device_report, regional_report
from spatialdp.federated.regional import RegionalReport
from spatialdp.privacy import PrivacyLedger, ReleaseTarget, Simulation

LOSS = MetricSpec("loss", 0.0, 4.0, label="squared position error", unit="m²")
ERRORS = HistogramSpec("abs_error_m", (0.5, 1.0, 2.0))
ALERTS = pd.DataFrame({"test": ["round-to-round", "drift (trend)"], "region_id": ["CO", "CO"],
                       "round": [5, 6], "first_round": [4, 1], "statistic": [2.1, 0.84],
                       "threshold": [1.2, 0.52]})
MONITORING = {"metric": "ratio", "alpha": 0.001, "events": ALERTS,
              "tests": ["round-to-round: rounds 2 to 6", "drift: rounds 1 to 6"]}


@pytest.fixture(scope="module")
def clients() -> pd.DataFrame:
    fleet = synthetic_fleet(20_000, rng=0)
    rng = np.random.default_rng(5)
    examples = pd.DataFrame({"client_id": fleet.device_id, "region_id": fleet.region_id,
                             "loss": rng.uniform(0.0, 3.0, len(fleet)),
                             "error": rng.exponential(1.0, len(fleet))})
    return device_report(examples, loss_spec=LOSS, hist_spec=ERRORS,
                         partition=us_states_partition())


def _report(clients: pd.DataFrame, epsilon: float, seed: int = 0) -> RegionalReport:
    return regional_report(clients, us_states_partition(), [LOSS, ERRORS], epsilon=epsilon,
                           min_cohort=100, target=Simulation(rng=seed))


def _card(report: RegionalReport, **kwargs: Any) -> ModelCard:
    return ModelCard.build(partition=us_states_partition(), specs=[LOSS, ERRORS],
                           reports=[report], **kwargs)


def test_alerts_and_drift_are_on_the_card_with_their_rounds(clients: pd.DataFrame,
                                                            tmp_path: Path) -> None:
    card = _card(_report(clients, 1.0), monitoring=MONITORING)
    mon = card.to_dict()["monitoring"]
    assert mon["provenance"] == "simulation"  # the round's own provenance
    assert [(e["test"], e["region_id"], e["round"], e["first_round"]) for e in mon["events"]] \
        == [("round-to-round", "CO", 5, 4), ("drift (trend)", "CO", 6, 1)]
    md = card.to_markdown()
    assert "## Alerts and drift [SIMULATION: not a release]" in md
    assert "| drift (trend) | CO | 6 | 1 | 0.84 | 0.52 |" in md
    assert "- drift: rounds 1 to 6" in md
    assert ("alerts and drift: round-to-round in CO (round 5), drift (trend) in CO "
            "(round 6)") in card.summary()
    # From a run folder alone: the same section.
    write_run_folder(tmp_path, partition=us_states_partition(), specs=[LOSS, ERRORS],
                     reports=[_report(clients, 1.0)], monitoring=MONITORING)
    assert ModelCard.from_run(tmp_path).to_dict()["monitoring"]["events"] == mon["events"]
    quiet = _card(_report(clients, 1.0), monitoring={**MONITORING, "events": ALERTS.iloc[:0]})
    assert "No alert fired and no region drifted." in quiet.to_markdown()


def test_a_monitoring_record_without_rounds_is_refused(clients: pd.DataFrame) -> None:
    with pytest.raises(InvalidInput, match=r"(?s)monitoring\['events'\].*is not one row per "
                                           r"alert with test, region_id and round"):
        _card(_report(clients, 1.0),
              monitoring={**MONITORING, "events": ALERTS.drop(columns="round")})


def test_a_histogram_value_is_named_for_what_it_is(clients: pd.DataFrame) -> None:
    card = _card(_report(clients, 1.0))
    metrics = {m["name"]: m for m in card.to_dict()["quantitative_analysis"]["rounds"][0][
        "metrics"]}
    assert metrics["abs_error_m"]["value_is"].startswith(
        f"share of abs_error_m in the top bucket {ERRORS.labels[-1]}")
    assert metrics["loss"]["value_is"] == "mean of squared position error per client"
    md = card.to_markdown()
    heading = next(line for line in md.splitlines() if line.startswith("#### abs_error_m"))
    assert "mean" not in heading
    assert "The value is the share of abs_error_m in the top bucket" in md


def test_uninformative_metrics_and_values_outside_the_range_are_flagged(
        clients: pd.DataFrame) -> None:
    # At epsilon 0.02 (seeded) every published share is mostly noise, and some go negative.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeReleaseWarning)
        report = _report(clients, 0.02, seed=0)
    frame = report["abs_error_m"]
    shown = frame[~frame.suppressed]
    assert (shown.reliability == "low").all()
    negative = int((shown.value < 0).sum())
    above = int((shown.value > ERRORS.mass_cap).sum())
    assert negative > 0
    card = _card(report).to_dict()
    flags = {m["name"]: m for m in card["quantitative_analysis"]["rounds"][0]["metrics"]}
    hist = flags["abs_error_m"]
    assert hist["uninformative"] is True
    assert hist["published"] == len(shown) == hist["low_reliability"]
    assert hist["value_range"] == [0.0, ERRORS.mass_cap]
    assert hist["outside_range"] == negative + above
    limitations = card["considerations"]["limitations"]
    assert any(text.startswith("abs_error_m is uninformative at this budget (epsilon 0.01 of "
                               "the round's 0.02)")
               and f"{len(shown)} of its {len(shown)} published regions" in text
               for text in limitations)
    assert any(f"{negative + above} published abs_error_m values" in text
               and "unbiased noisy values" in text for text in limitations)
    md = _card(report).to_markdown()
    assert f"> **Uninformative at this budget:** {len(shown)} of {len(shown)} published" in md
    assert "deliberately not clamped" in md
    assert "uninformative at this budget: abs_error_m" in _card(report).summary()
    # A well-measured metric is not flagged.
    good = _card(_report(clients, 5.0)).to_dict()["quantitative_analysis"]["rounds"][0]
    assert not next(m for m in good["metrics"] if m["name"] == "loss")["uninformative"]


def test_limitations_are_honest(clients: pd.DataFrame, tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    with PrivacyLedger(path, epoch_budget=2.0) as ledger:
        cap = float(ledger.summary(0).loc["evaluation.regional", "cap"])
        report = regional_report(clients, us_states_partition(), [LOSS, ERRORS], epsilon=cap,
                                 min_cohort=100, target=ReleaseTarget(ledger, epoch=0))
        card = _card(report, ledger=ledger)
    limitations = card.to_dict()["considerations"]["limitations"]
    assert PUBLIC_PARTICIPATION in limitations  # a replace-one release
    assert any("The server is trusted" in text and "reaches the aggregator" in text
               for text in limitations)
    assert any(text.startswith("Clipping bounds") for text in limitations)
    assert (f"The ledger's evaluation.regional budget of epoch 0 is fully spent ({cap:g} of "
            f"{cap:g})") in " ".join(limitations)
    # Under add/remove, participation is protected: no such statement.
    protected = regional_report(clients, us_states_partition(), [LOSS], epsilon=1.0,
                                min_cohort=100, target=Simulation(rng=1),
                                neighbours="add_remove")
    other = ModelCard.build(partition=us_states_partition(), specs=[LOSS], reports=[protected])
    assert PUBLIC_PARTICIPATION not in other.to_dict()["considerations"]["limitations"]


def test_the_schema_documents_the_new_fields() -> None:
    schema = load_schema()
    assert "monitoring" in schema["properties"]
    metric = schema["$defs"]["round"]["properties"]["metrics"]["items"]["properties"]
    assert {"value_is", "uninformative", "outside_range"} <= set(metric)


# ----------------------------------------------------------------------------- the demo
@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo") / "out"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["demo", "--out", str(out), "--devices", "20000", "--rounds", "3",
                     "--quiet"]) == 0
    return out


#: What `spatialdp demo` documents as its outputs (docs/demo.md), and the ledger.
DEMO_FILES = {"ratio_choropleth.png", "loss_choropleth.png", "loss_significance.png",
              "coverage_map.png", "ratio_timeseries.png", "query_error.png", "ratio_map.html",
              "model_card.md", "model_card.json", "run.json", "regional_report.gpkg",
              "regional_report.csv", "regional_report.json", "regional_report.parquet",
              "alerts.csv", "demo_runs.csv",
              "strata.json", "coverage.json", "monitoring.json", "query_error.csv",
              "query_error.json", "ledger.sqlite", "reports"}


#: Written together when enough regions are published to fit the small-area model.
SMOOTHED_FILES = {"loss_smoothed.png", "small_area.json"}


def test_the_demo_folder_holds_nothing_but_its_outputs(demo: Path) -> None:
    # No lock file, no -wal/-shm of the ledger.
    names = {p.name for p in demo.iterdir()}
    assert names - SMOOTHED_FILES == DEMO_FILES
    # The smoothed loss map and the card's section come together, or the card says why not.
    card = json.loads((demo / "model_card.json").read_text())
    if names & SMOOTHED_FILES:
        assert names >= SMOOTHED_FILES
        assert card["small_area"]["metric"] == "loss"
        assert card["figures"]["loss_smoothed"] == "loss_smoothed.png"
    else:
        assert "small_area" not in card
        assert any(text.startswith("loss not smoothed: ") for text in
                   card["considerations"]["limitations"])


def test_the_demo_card_lists_its_alerts_and_drift_with_rounds(demo: Path) -> None:
    card = json.loads((demo / "model_card.json").read_text())
    alerts = pd.read_csv(demo / "alerts.csv", dtype={"region_id": str})
    mon = card["monitoring"]
    assert [(e["test"], e["region_id"], e["round"]) for e in mon["events"]] == list(
        zip(alerts.test, alerts.region_id, alerts["round"], strict=True))
    assert mon["tests"][1] == "drift: a trend in each region's ratio over rounds 1 to 3"
    assert "## Alerts and drift" in (demo / "model_card.md").read_text()


def test_the_demo_card_counts_blind_spots_as_its_coverage_map_does(demo: Path) -> None:
    card = json.loads((demo / "model_card.json").read_text())
    cov = card["coverage"]
    summary = cov["blind_summary"]
    # The map's titles: "<confirmed> of <n> confirmed reached", regions and H3 cells.
    assert summary["regions"] == {"blind": cov["n_regions"] - cov["regions_confirmed"],
                                  "of": cov["n_regions"],
                                  "of_what": "regions (not confirmed reached)"}
    assert summary["cells"]["of"] == cov["n_cells"]
    assert summary["cells"]["blind"] == cov["n_cells"] - cov["cells_confirmed"] > 0
    md = (demo / "model_card.md").read_text()
    assert (f"cells: {summary['cells']['blind']:,} of {cov['n_cells']:,} cells of the "
            "partition") in md


def test_the_card_and_the_coverage_map_count_cells_over_one_denominator() -> None:
    import matplotlib.pyplot as plt

    from spatialdp.sampling import ParticipationPolicy, StratifiedSampler, epoch_coverage
    from spatialdp.sampling.density import density_strata
    from spatialdp.sampling.plots import plot_coverage_map

    strata = density_strata()
    fleet = synthetic_fleet(20_000, rng=5)
    lon, lat = fleet.lon.to_numpy(), fleet.lat.to_numpy()
    sampler = StratifiedSampler(strata, cohort=2_000, policy=ParticipationPolicy(
        participation_cap=1, epsilon_per_round=0.25, rounds_per_epoch=1))
    state = sampler.new_state(strata.assign(lon=lon, lat=lat), target=Simulation(rng=0))
    sampler.select(state, 0)
    cov = epoch_coverage(sampler, state,
                         client_cells=strata.cell_partition.assign(lon=lon, lat=lat).positions)
    table = cov.cell_table
    with_clients = int((table.clients > 0).sum())
    blind = int(table.blind_spot.sum())
    assert blind > 0
    assert with_clients < cov.n_cells  # empty cells exist: the two denominators differ
    card = ModelCard.build(partition=strata.partition, coverage=cov)
    cells = card.to_dict()["coverage"]["blind_summary"]["cells"]
    assert cells == {"blind": blind, "of": with_clients, "of_what": "cells with clients"}
    ax = plot_coverage_map(cov, level="cells", cells=strata.cell_partition)
    assert f"{with_clients - blind:,} of {with_clients:,} cells with clients sampled" in (
        ax.get_title())
    plt.close(ax.figure)
    md = card.to_markdown()
    assert f"({with_clients - blind:,} of {with_clients:,} cells with clients;" in md
    assert f"of {cov.n_cells:,}" not in md
