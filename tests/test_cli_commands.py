"""The analyst subcommands: report, query-error, ledger show, card (and demo --partition)."""

from __future__ import annotations

import json
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest

from spatialdp.cli import main
from spatialdp.datasets import load_us_states, synthetic_fleet, us_states_partition
from spatialdp.federated import MetricSpec
from spatialdp.privacy import Disjoint
from spatialdp.privacy.ledger import PrivacyLedger

WEST = ["CA", "NV", "OR", "AZ", "UT", "ID", "WA", "NM"]


@pytest.fixture(scope="module")
def regions(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's polygon layer: 8 western states as GeoJSON, ids in ``state``."""
    path = tmp_path_factory.mktemp("layers") / "west.geojson"
    states = load_us_states()
    states[states.state.isin(WEST)][["state", "state_name", "geometry"]].to_file(path)
    return path


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, pd.DataFrame]:
    """A client table (Parquet): one row per client, lon/lat and its own mean loss."""
    fleet = synthetic_fleet(8_000, rng=3)
    fleet = fleet[fleet.region_id.isin(WEST)]
    rng = np.random.default_rng(4)
    loss = rng.gamma(2.0, 0.8, len(fleet)) + fleet.region_id.eq("NV").to_numpy() * 1.5
    table = pd.DataFrame({"client_id": fleet.device_id.to_numpy(), "lon": fleet.lon.to_numpy(),
                          "lat": fleet.lat.to_numpy(), "loss": loss,
                          "state": fleet.region_id.to_numpy()})
    path = tmp_path_factory.mktemp("clients") / "clients.parquet"
    table.drop(columns="state").to_parquet(path)
    return path, table


@pytest.mark.parametrize("command", [["demo"], ["report"], ["query-error"], ["ledger", "show"],
                                     ["card"], ["info"]])
def test_every_subcommand_has_help(command: list[str],
                                   capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main([*command, "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: spatialdp {' '.join(command)}")


def test_report_publishes_charged_metrics_within_their_error_bars(
        tmp_path: Path, regions: Path, clients: tuple[Path, pd.DataFrame],
        capsys: pytest.CaptureFixture[str]) -> None:
    path, table = clients
    ledger_path = tmp_path / "ledger.sqlite"
    # alpha 1e-6: each region's bar covers its noise with probability 1 - 1e-6.
    assert main(["report", str(path), "--partition", str(regions), "--id-column", "state",
                 "--metric", "loss:0:4", "--epsilon", "0.5", "--ledger", str(ledger_path),
                 "--out", str(tmp_path / "out"), "--min-cohort", "40", "--alpha", "1e-6",
                 "--plot"]) == 0
    out = capsys.readouterr().out
    assert "charged to" in out
    assert "epoch 0, evaluation.regional (1.9 left)" in out
    report = gpd.read_file(tmp_path / "out" / "regional_report.gpkg").set_index("region_id")
    truth = table.assign(loss=table.loss.clip(0, 4)).groupby("state").loss.mean()
    published = report[~report["loss_suppressed"].astype(bool)]
    assert len(published) >= 6
    gap = (published["loss_value"] - truth.reindex(published.index)).abs()
    assert (gap <= published["loss_error_bar"]).all()
    assert (published["loss_error_bar"] < 1.0).sum() >= 4  # the check is not vacuous
    assert published["loss_value"].idxmax() == "NV"
    assert (tmp_path / "out" / "loss_choropleth.png").stat().st_size > 10_000
    with PrivacyLedger(ledger_path, read_only=True) as ledger:
        assert len(ledger.audit(0)) == 1
        assert ledger.remaining(0, "evaluation.regional") == pytest.approx(1.9)


def test_report_refusals_charge_nothing(tmp_path: Path, regions: Path,
                                        clients: tuple[Path, pd.DataFrame],
                                        capsys: pytest.CaptureFixture[str]) -> None:
    path, table = clients
    ledger_path = tmp_path / "ledger.sqlite"
    with PrivacyLedger(ledger_path, epoch_budget=10.0):
        pass
    by_region = tmp_path / "by_region.csv"
    table.assign(region_id="ZZ").to_csv(by_region, index=False)
    base = ["--partition", str(regions), "--epsilon", "0.5", "--ledger", str(ledger_path),
            "--out", str(tmp_path / "out")]
    state = ["--id-column", "state"]
    cases = [
        ([str(path), "--metric", "loss:0", *state], "InvalidInput: --metric='loss:0' is not"),
        ([str(path), "--metric", "speed:0:4", *state], "InvalidInput: --metric='speed' is no"),
        ([str(by_region), "--metric", "loss:0:4", *state], "InvalidInput: CLIENTS="),
        ([str(path), "--metric", "loss:0:4", "--id-column", "nope"], "InvalidInput: id_column"),
        ([str(tmp_path / "none.parquet"), "--metric", "loss:0:4"], "InvalidInput: CLIENTS="),
    ]
    for args, message in cases:
        assert main(["report", *args, *base]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"spatialdp: {message}"), err
        assert err.count("\n") == 1
    with PrivacyLedger(ledger_path, read_only=True) as ledger:
        assert ledger.epochs() == []
    assert not (tmp_path / "out").exists()


def test_report_unaccounted_is_marked_on_its_files(
        tmp_path: Path, regions: Path, clients: tuple[Path, pd.DataFrame],
        capsys: pytest.CaptureFixture[str]) -> None:
    _, table = clients
    # A CSV locating clients by region id (no coordinates).
    path = tmp_path / "by_region.csv"
    table[["client_id", "loss"]].assign(region_id=table.state).to_csv(path, index=False)
    out = tmp_path / "out"
    assert main(["report", str(path), "--partition", str(regions), "--id-column", "state",
                 "--metric", "loss:0:4", "--epsilon", "1", "--unaccounted",
                 "synthetic benchmark", "--out", str(out)]) == 0
    assert "not charged to any ledger: synthetic benchmark" in capsys.readouterr().out
    assert {p.name for p in out.iterdir()} == {"run.json", *(
        f"regional_report.UNACCOUNTED.{ext}" for ext in ("gpkg", "parquet", "csv", "json"))}
    report = pd.read_csv(out / "regional_report.UNACCOUNTED.csv", index_col=0)
    assert int(report["loss_cohort"].sum()) == len(table)


def test_report_add_remove_publishes_noised_cohorts_and_no_ledger_path(
        tmp_path: Path, regions: Path, clients: tuple[Path, pd.DataFrame],
        capsys: pytest.CaptureFixture[str]) -> None:
    path, _table = clients
    ledger_path = tmp_path / "private" / "ledger.sqlite"
    ledger_path.parent.mkdir()
    out = tmp_path / "out"
    assert main(["report", str(path), "--partition", str(regions), "--id-column", "state",
                 "--metric", "loss:0:4", "--epsilon", "0.5", "--ledger", str(ledger_path),
                 "--out", str(out), "--min-cohort", "40", "--neighbours", "add_remove"]) == 0
    capsys.readouterr()
    meta = json.loads((out / "regional_report.json").read_text())
    assert meta["neighbours"] == "add_remove"
    with PrivacyLedger(ledger_path, read_only=True) as ledger:
        assert list(ledger.audit(0).neighbours) == ["add_remove"]
        ledger_id = ledger.ledger_id
    # 34d6ca8 wrote the machine's absolute ledger path into every file: now its identifier.
    assert meta["ledger"] == ledger_id
    import pyogrio

    layer = pyogrio.read_info(out / "regional_report.gpkg")["layer_metadata"]
    for text in [*(p.read_text() for p in out.iterdir() if p.suffix in (".json", ".csv")),
                 json.dumps(layer)]:
        assert str(ledger_path) not in text
        assert str(tmp_path) not in text
    report = pd.read_csv(out / "regional_report.csv", index_col=0)
    shown = ~report.loss_suppressed.astype(bool)
    np.testing.assert_array_equal(report.loss_cohort[shown],
                                  np.round(report.loss_noisy_count[shown]))
    assert (report.loss_estimator == "ratio").all()


def test_report_refuses_ledger_flags_without_a_ledger(
        tmp_path: Path, regions: Path, clients: tuple[Path, pd.DataFrame],
        capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = clients
    for flag, value in (("--epoch", "3"), ("--epoch-budget", "4"), ("--why", "x")):
        assert main(["report", str(path), "--partition", str(regions), "--id-column",
                     "state", "--metric", "loss:0:4", "--epsilon", "1", "--unaccounted",
                     "synthetic", flag, value, "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err
        assert f"{flag}=" in err
        assert "is a ledger setting, but --unaccounted releases without a ledger" in err
    assert not (tmp_path / "out").exists()


def test_report_reopens_a_ledger_with_its_own_budget(
        tmp_path: Path, regions: Path, clients: tuple[Path, pd.DataFrame],
        capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = clients
    ledger_path = tmp_path / "ledger.sqlite"
    with PrivacyLedger(ledger_path, epoch_budget=4.0):
        pass
    # 34d6ca8 sent its default budget of 10 and was refused by a ledger made with 4.
    assert main(["report", str(path), "--partition", str(regions), "--id-column", "state",
                 "--metric", "loss:0:4", "--epsilon", "0.5", "--ledger", str(ledger_path),
                 "--out", str(tmp_path / "out"), "--min-cohort", "40"]) == 0
    assert "(0.46 left)" in capsys.readouterr().out


def test_query_error_measures_real_polygons(tmp_path: Path, regions: Path,
                                            clients: tuple[Path, pd.DataFrame],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = clients
    ledger = tmp_path / "ledger.sqlite"
    out = tmp_path / "qe"
    assert main(["query-error", str(regions), "--grid", "4", "--points", str(path),
                 "--device-column", "client_id", "--method", "flat", "--draws", "200",
                 "--ledger", str(ledger), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("Query error measured against the flat grid released at epsilon 1")
    assert "query error (200 simulated draws, epsilon 1): 8 polygons" in text
    assert f"grid: charged to {ledger}, epoch 0, evaluation.regional" in text
    assert f"points from {path}" in text  # no exact count of points beside a publishable table
    with PrivacyLedger(ledger, read_only=True) as book:
        (charged,) = book.audit(0).charged
        assert charged == pytest.approx(1.0)  # the grid, released once
    table = pd.read_csv(out / "query_error.csv")
    assert set(table.method) == {"flat (clamped)"}
    assert table.n_queries.sum() == 8
    settings = json.loads((out / "query_error.json").read_text())
    assert settings["flat (clamped)"]["reference"] == "released grid"
    assert settings["flat (clamped)"]["reference_ledger"] == book.ledger_id
    assert (out / "query_error.png").stat().st_size > 10_000
    assert main(["query-error", str(regions), "--grid", "99"]) == 2
    assert capsys.readouterr().err.startswith("spatialdp: InvalidInput: --grid=99")


def test_query_error_unaccounted_files_say_so(tmp_path: Path, regions: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["query-error", str(regions), "--grid", "3", "--devices", "20000",
                 "--method", "flat", "--draws", "20", "--unaccounted", "synthetic fleet",
                 "--out", str(tmp_path)]) == 0
    assert "[UNACCOUNTED: synthetic fleet]" in capsys.readouterr().out
    assert {p.name for p in tmp_path.iterdir()} == {
        f"query_error.UNACCOUNTED.{ext}" for ext in ("csv", "json", "png")}


def test_query_error_internal_table_is_printed_labelled_and_never_written(
        tmp_path: Path, regions: Path, clients: tuple[Path, pd.DataFrame],
        capsys: pytest.CaptureFixture[str]) -> None:
    from spatialdp.cli import build_parser
    from spatialdp.cli._query import _write
    from spatialdp.exceptions import InvalidInput
    from spatialdp.geo import Partition
    from spatialdp.queries import measure_query_error, query_corpus, truth_grid

    path, table = clients
    argv = ["query-error", str(regions), "--grid", "4", "--points", str(path),
            "--method", "flat", "--draws", "20"]
    assert main(argv) == 0  # planning: measured against the truth, labelled INTERNAL
    text = capsys.readouterr().out
    assert text.startswith("INTERNAL: query error measured against the truth grid")
    assert "grid: INTERNAL: measured against the truth of your points" in text
    out = tmp_path / "qe"
    args = build_parser().parse_args([*argv, "--out", str(out)])
    with pytest.raises(InvalidInput, match=r"--out='.*qe' would write an INTERNAL table: "
                                           r"without --ledger.*pass --ledger LEDGER\.sqlite"):
        args.run(args)
    assert main([*argv, "--out", str(out)]) == 2
    assert "InvalidInput: --out=" in capsys.readouterr().err
    assert not out.exists()
    # ... and the writer itself refuses an internal table, whoever calls it.
    west = gpd.read_file(regions)
    cells = Partition.from_h3_cover(west, 3, containment="overlap")
    truth = truth_grid(cells, lon=table.lon.to_numpy(), lat=table.lat.to_numpy(),
                       device_ids=table.client_id.to_numpy())
    internal = measure_query_error(truth, query_corpus(cells, west), epsilon=1.0, draws=5,
                                   rng=0)
    with pytest.raises(InvalidInput, match="query-error table 'flat'='INTERNAL: query error "
                                           "measured against the truth grid"):
        _write(out, internal, {"flat": internal})
    assert not out.exists()


def test_ledger_show_lists_epochs_and_charges(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ledger.sqlite"
    with PrivacyLedger(path, epoch_budget=4.0) as ledger:
        for epoch in (0, 1):
            ledger.spend(epoch, "evaluation.regional", structure=Disjoint("p", parts=3),
                         epsilon=0.25, who="analyst", what="loss", why=f"week {epoch}")
    assert main(["ledger", "show", str(path), "--epoch", "1", "--audit"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"ledger {path}: pure accounting, epoch budget 4 epsilon, 2 epoch(s)")
    assert "epoch 1\n" in out
    assert "epoch 0\n" not in out
    assert "week 1" in out
    assert "week 0" not in out
    assert main(["ledger", "show", str(path), "--epoch", "7"]) == 2
    assert "is not an epoch of the ledger ([0, 1])" in capsys.readouterr().err
    assert main(["ledger", "show", str(tmp_path / "none.sqlite")]) == 2
    assert capsys.readouterr().err.startswith("spatialdp: InvalidInput: LEDGER=")


def test_card_is_written_from_a_run_folder(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from spatialdp.cards import RunFolder, validate_card

    run = RunFolder(tmp_path / "run")
    run.write_manifest(partition=us_states_partition(), specs=[MetricSpec("loss", 0.0, 4.0)],
                       rounds=1, seeds={"fleet": 0}, simulated={"fleet": True}, ledger=False)
    assert main(["card", str(tmp_path / "run"), "--out", str(tmp_path / "card")]) == 0
    assert "us48-states" in capsys.readouterr().out
    card = json.loads((tmp_path / "card" / "model_card.json").read_text())
    validate_card(card)
    assert card["geography"]["partition"]["n_regions"] == 48
    assert "\n# " in (tmp_path / "card" / "model_card.md").read_text()
    assert main(["card", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_demo_on_a_users_polygon_layer(tmp_path: Path, regions: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["demo", "--out", str(out), "--partition", str(regions), "--id-column",
                 "state", "--devices", "10000", "--rounds", "2", "--quiet"]) == 0
    text = capsys.readouterr().out
    # On a user's layer the drifting region is the one with the most devices.
    assert "west@" in text
    assert "(8 regions)" in text
    assert "sideways drift in CA from round 2" in text
    report = gpd.read_file(out / "regional_report.gpkg")
    assert sorted(report.region_id) == sorted(WEST)
    assert (out / "model_card.json").exists()
    assert (out / "coverage_map.png").exists()


def test_demo_under_replace_one_publishes_participation_but_no_cell_locations(
        tmp_path: Path, regions: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["demo", "--out", str(out), "--partition", str(regions), "--id-column",
                 "state", "--devices", "10000", "--rounds", "2", "--quiet",
                 "--neighbours", "replace"]) == 0
    text = capsys.readouterr().out
    assert "neighbouring relation: replace-one: participation public" in text
    with PrivacyLedger(out / "ledger.sqlite", read_only=True) as ledger:
        audit = ledger.audit()
    grid = audit.what.str.startswith("flat count grid")
    assert set(audit.neighbours[~grid]) == {"replace"}
    assert set(audit.neighbours[grid]) == {"add_remove"}  # a device added or removed: k
    card = json.loads((out / "model_card.json").read_text())
    assert card["privacy"]["neighbours"] == ["replace", "add_remove"]
    assert card["privacy"]["participation"].startswith("Mixed")
    assert card["cohort_sizes"]["provenance"] == "bookkeeping"  # exact: public by the model
    report = pd.read_csv(out / "regional_report.csv", index_col=0)
    assert (report.loss_estimator == "mean").all()
    # The H3 cells are below the region level: their coverage is a release in both modes.
    assert card["coverage"]["provenance"] == "release"
    assert card["coverage"]["neighbours"] == "replace"


@pytest.mark.parametrize(("extra", "match"), [
    (["--draws", "0"], "draws=0 is below the limit"),
    (["--method", "hierarchical", "--levels", "0"], "levels=0 is below the limit"),
    (["--method", "hierarchical", "--levels", "9"], "levels=9 is above the limit <= 5"),
])
def test_query_error_refuses_its_settings_before_the_grid_is_charged(
        tmp_path: Path, regions: Path, clients: tuple[Path, pd.DataFrame], extra: list[str],
        match: str, capsys: pytest.CaptureFixture[str]) -> None:
    path, _ = clients
    ledger = tmp_path / "ledger.sqlite"
    with PrivacyLedger(ledger, epoch_budget=10.0):
        pass
    assert main(["query-error", str(regions), "--grid", "4", "--points", str(path),
                 "--ledger", str(ledger), "--out", str(tmp_path / "qe"), *extra]) == 2
    assert match in capsys.readouterr().err
    with PrivacyLedger(ledger, read_only=True) as book:
        assert book.audit(0).empty  # 34d6ca8 charged the grid, then refused
    assert not (tmp_path / "qe").exists()


def test_query_error_refuses_an_unwritable_out_before_the_grid_is_charged(
        tmp_path: Path, regions: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    ledger = tmp_path / "ledger.sqlite"
    assert main(["query-error", str(regions), "--grid", "3", "--devices", "5000",
                 "--ledger", str(ledger), "--out", str(blocker / "qe")]) == 2
    assert "cannot be written" in capsys.readouterr().err
    assert not ledger.exists()  # never opened: nothing charged


def test_query_error_reopens_a_ledger_with_its_own_budget_and_refuses_ledger_flags(
        tmp_path: Path, regions: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = tmp_path / "ledger.sqlite"
    with PrivacyLedger(ledger, epoch_budget=5.0):
        pass
    # 34d6ca8 sent its default budget of 10 to a ledger made with 5, and was refused.
    assert main(["query-error", str(regions), "--grid", "3", "--devices", "5000",
                 "--method", "flat", "--draws", "10", "--ledger", str(ledger)]) == 0
    assert "evaluation.regional (0.2 left)" in capsys.readouterr().out
    assert main(["query-error", str(regions), "--grid", "3", "--unaccounted", "synthetic",
                 "--epoch-budget", "4"]) == 2
    assert "is a ledger setting, but --unaccounted" in capsys.readouterr().err
