"""read_report: a regional report read back from its files is the report that was written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import geopandas as gpd
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import shapely

import spatialdp
from spatialdp.datasets import load_us_states
from spatialdp.exceptions import InvalidInput, PartitionMismatch
from spatialdp.federated import (
    HistogramSpec,
    MetricSpec,
    RegionalReport,
    read_report,
    regional_report,
)
from spatialdp.geo.partition import Partition
from spatialdp.privacy import PrivacyLedger, ReleaseTarget
from spatialdp.privacy.target import Simulation
from spatialdp.viz import plot_uncertainty_choropleth
from tests._clients import histogram_columns, tagged

LOSS = MetricSpec("loss", 0.0, 2.5, label="squared position error", unit="m²")
HIST = HistogramSpec("err", edges=(0.5, 1, 2, 5), label="position error", unit="m")
RATIO = MetricSpec("ratio", 0.0, 10.0, present="has_ratio", label="along/across", unit="1")

#: Each way write() lays out a report, and the file read_report is given.
FORMATS = {
    "gpkg": ({}, ".gpkg"),
    "parquet": ({}, ".parquet"),
    "csv-wide-sql": ({"names": "sql", "layout": "wide"}, ".csv"),
    "csv-wide-dotted": ({"names": "dotted", "layout": "wide"}, ".csv"),
    "csv-long-sql": ({"names": "sql", "layout": "long"}, ".csv"),
    "json-long-dotted": ({"names": "dotted", "layout": "long"}, ".json"),
}


def _clients(partition: Partition, n: int, rng: np.random.Generator) -> pd.DataFrame:
    ids = np.asarray(partition.region_ids)
    weights = np.linspace(1, 30, ids.size)  # the smallest regions fall below the floor
    hists = rng.dirichlet(np.ones(HIST.n_buckets), size=n)
    has = (rng.random(n) < 0.7).astype(float)
    return tagged({"loss": LOSS.clip(rng.gamma(2.0, 0.3, n)), **histogram_columns(HIST, hists),
                   "ratio": RATIO.clip(rng.lognormal(0.5, 0.4, n)) * has, "has_ratio": has},
                  [LOSS, HIST, RATIO], partition=partition,
                  region_id=rng.choice(ids, size=n, p=weights / weights.sum()))


@pytest.fixture(scope="module")
def simulated(states_partition: Partition) -> RegionalReport:
    """Replace-one: a mean, a histogram and a ratio metric, suppressed regions, round 3."""
    rng = np.random.default_rng(23)
    return regional_report(_clients(states_partition, 12_000, rng), states_partition,
                           [LOSS, HIST, RATIO], epsilon={"loss": 0.5, "err": 0.4, "ratio": 0.3},
                           min_cohort=60, target=Simulation(rng, round_index=3))


@pytest.fixture(scope="module")
def add_remove(states_partition: Partition) -> RegionalReport:
    """Add/remove: every metric a ratio estimate over noised counts."""
    rng = np.random.default_rng(24)
    return regional_report(_clients(states_partition, 12_000, rng), states_partition,
                           [LOSS, HIST, RATIO], epsilon=0.5, min_cohort=60,
                           target=Simulation(rng), neighbours="add_remove")


@pytest.fixture(scope="module")
def h3_report(colorado_h3: Partition) -> RegionalReport:
    rng = np.random.default_rng(25)
    return regional_report(_clients(colorado_h3, 6_000, rng), colorado_h3, [LOSS, HIST],
                           epsilon=1.0, min_cohort=20, target=Simulation(rng))


@pytest.fixture(autouse=True)
def _close() -> Any:
    yield
    plt.close("all")


def _written(report: RegionalReport, folder: Path, fmt: str) -> Path:
    options, suffix = FORMATS[fmt]
    paths = report.write(folder, **options)
    return next(p for p in paths if p.suffix == suffix)


def _read(report: RegionalReport, folder: Path, fmt: str, partition: Partition
          ) -> RegionalReport:
    path = _written(report, folder, fmt)
    return read_report(path, partition=partition if path.suffix in (".csv", ".json") else None)


def _without_source(meta: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in meta.items() if k != "read_from"}


def assert_same_report(back: RegionalReport, report: RegionalReport) -> None:
    """Every field of the report, frame and estimate, exactly (see read_report's docstring)."""
    assert list(back) == list(report)
    for name in report:
        pd.testing.assert_frame_equal(back[name], report[name], check_exact=True)
        assert back[name].crs == report[name].crs
        assert _without_source(back[name].attrs["spatialdp"]) == report[name].attrs["spatialdp"]
        assert back[name].attrs["partition_version"] == report[name].attrs["partition_version"]
    for field in ("partition_version", "round_index", "epsilon", "alpha", "min_cohort",
                  "suppressed_regions", "metrics", "neighbours"):
        assert getattr(back, field) == getattr(report, field), field
    assert _without_source(back.accounting) == report.accounting
    assert _without_source(back.metadata()) == report.metadata()
    for name, est in report.estimates.items():
        got = back.estimates[name]
        assert got.spec == est.spec
        assert (got.spec.label, got.spec.unit, got.spec.key, got.spec.fingerprint) == (
            est.spec.label, est.spec.unit, est.spec.key, est.spec.fingerprint)
        assert (got.epsilon, got.estimator) == (est.epsilon, est.estimator)
        for field in ("values", "error_bar", "noise_scale", "noise_std", "cohort",
                      "suppressed"):
            np.testing.assert_array_equal(getattr(got, field), getattr(est, field),
                                          err_msg=field)
        exact = est.estimator == "mean" or est.values.ndim == 1
        for field in ("ci_low", "ci_high"):
            mine, theirs = getattr(got, field), getattr(est, field)
            if exact:
                np.testing.assert_array_equal(mine, theirs, err_msg=field)
            else:  # a ratio histogram's lower buckets: from value x count, to float rounding
                np.testing.assert_array_equal(mine[:, -1], theirs[:, -1])
                np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-15)
        shown = ~est.suppressed  # the noisy sums of suppressed regions were never published
        assert sorted(got.state) == sorted(est.state)
        for key, values in est.state.items():
            np.testing.assert_array_equal(got.state[key][shown], values[shown], err_msg=key)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_every_format_reads_back_the_same_report(
        fmt: str, simulated: RegionalReport, states_partition: Partition,
        tmp_path: Path) -> None:
    assert simulated["loss"].suppressed.any()
    assert not simulated["loss"].suppressed.all()
    back = _read(simulated, tmp_path, fmt, states_partition)
    assert_same_report(back, simulated)
    assert back.simulated
    assert back.round_index == 3
    assert ".SIMULATION." in back.accounting["read_from"]


@pytest.mark.parametrize("fmt", ["gpkg", "parquet", "csv-long-sql"])
def test_add_remove_ratio_estimates_read_back(
        fmt: str, add_remove: RegionalReport, states_partition: Partition,
        tmp_path: Path) -> None:
    assert set(add_remove.metadata()["estimators"].values()) == {"ratio"}
    back = _read(add_remove, tmp_path, fmt, states_partition)
    assert_same_report(back, add_remove)
    # Intervals at another level come from the published columns alone, as before.
    pd.testing.assert_frame_equal(back.conf_int("err", 0.01), add_remove.conf_int("err", 0.01))


@pytest.mark.parametrize("fmt", ["gpkg", "parquet", "csv-wide-dotted"])
def test_a_report_on_h3_cells_reads_back(fmt: str, h3_report: RegionalReport,
                                         colorado_h3: Partition, tmp_path: Path) -> None:
    back = _read(h3_report, tmp_path, fmt, colorado_h3)
    assert_same_report(back, h3_report)
    assert all(len(cell) == 15 for cell in back["loss"].index)


def test_mixed_polygons_keep_their_geometry_type(tmp_path: Path) -> None:
    """A layer of polygons and multipolygons: the GeoPackage no longer promotes the polygons."""
    states = load_us_states()
    states = states[states.state.isin(["CO", "WY", "UT", "NM"])].copy()
    colorado = states.state == "CO"  # its one part as a Polygon beside MultiPolygons
    states.loc[colorado, "geometry"] = shapely.get_geometry(
        states.loc[colorado, "geometry"].to_numpy(), 0)
    part = Partition.from_geodataframe(states, id_column="state", name="four")
    rng = np.random.default_rng(1)
    report = regional_report(_clients(part, 2_000, rng), part, [LOSS], epsilon=1.0,
                             min_cohort=10, target=Simulation(rng))
    assert set(report["loss"].geom_type) == {"Polygon", "MultiPolygon"}
    assert_same_report(_read(report, tmp_path, "gpkg", part), report)


def test_a_read_ledger_release_is_marked_and_charges_nothing(
        states_partition: Partition, tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    with PrivacyLedger(tmp_path / "ledger.sqlite", epoch_budget=5.0) as ledger:
        report = regional_report(_clients(states_partition, 8_000, rng), states_partition,
                                 [LOSS], epsilon=0.5, min_cohort=60,
                                 target=ReleaseTarget(ledger, epoch=0, why="weekly"))
        spent = ledger.spent(0)
        charges = len(ledger.audit(0))
        paths = report.write(tmp_path / "out")
        back = [read_report(p) for p in paths if p.suffix in (".gpkg", ".parquet")]
        assert (ledger.spent(0), len(ledger.audit(0))) == (spent, charges)
    assert [p.name for p in paths][:2] == ["regional_report.gpkg", "regional_report.parquet"]
    for read in back:
        assert read.accounting["accounting"] == "ledger"
        assert not read.simulated
        assert read.accounting["ledger"] == report.accounting["ledger"]
        assert read.accounting["read_from"].endswith(("regional_report.gpkg",
                                                      "regional_report.parquet"))
        assert "not a new one (reading charges nothing)" in read.summary()
        assert "read from" not in report.summary()


def test_top_level_export_and_rewriting_a_read_report(
        simulated: RegionalReport, tmp_path: Path) -> None:
    assert spatialdp.read_report is read_report
    back = read_report(_written(simulated, tmp_path / "a", "parquet"))
    again = read_report(_written(back, tmp_path / "b", "gpkg"))  # a read report writes too
    assert_same_report(again, simulated)
    assert again.accounting["read_from"].endswith("regional_report.SIMULATION.gpkg")


# ---------------------------------------------------------------------------- maps


def test_maps_draw_what_was_read(simulated: RegionalReport, tmp_path: Path) -> None:
    back = read_report(_written(simulated, tmp_path, "gpkg"))
    title = simulated.plot("loss").get_title(loc="left")
    assert back.plot("loss").get_title(loc="left") == title
    assert plot_uncertainty_choropleth(back["err"]).get_title(loc="left").startswith(
        "[SIMULATION] share of position error > 5 m")
    sig = back.plot("loss", kind="significance", national=1.0)
    assert sig.get_legend().get_gid() == "legend:significance"


def test_a_raw_file_frame_is_refused_naming_read_report(simulated: RegionalReport,
                                                         tmp_path: Path) -> None:
    path = _written(simulated, tmp_path, "gpkg")
    raw = gpd.read_file(path)
    with pytest.raises(InvalidInput, match=r"columns of a report file \(loss_value.*"
                       r"spatialdp\.read_report\(path\)\['loss'\]"):
        plot_uncertainty_choropleth(raw)
    dotted = gpd.read_parquet(_written(simulated, tmp_path / "d", "parquet"))
    with pytest.raises(InvalidInput, match=r"read_report"):
        plot_uncertainty_choropleth(dotted, column="loss_value")


# ---------------------------------------------------------------------------- refusals


def test_refuses_a_file_that_is_not_a_report(tmp_path: Path,
                                             states_partition: Partition) -> None:
    regions = states_partition.regions.reset_index()
    regions.to_file(tmp_path / "plain.gpkg", layer="regional_report", engine="pyogrio")
    with pytest.raises(InvalidInput, match="is not a spatialdp regional report .no spatialdp "
                       "layer metadata.; pass a file that RegionalReport.write"):
        read_report(tmp_path / "plain.gpkg")
    regions.to_file(tmp_path / "other.gpkg", layer="states", engine="pyogrio")
    with pytest.raises(InvalidInput, match="no layer 'regional_report'"):
        read_report(tmp_path / "other.gpkg")
    regions.to_parquet(tmp_path / "plain.parquet")
    with pytest.raises(InvalidInput, match="no spatialdp file metadata"):
        read_report(tmp_path / "plain.parquet")
    pd.DataFrame({"region_id": ["CA"], "loss_value": [1.0]}).to_csv(tmp_path / "plain.csv")
    with pytest.raises(InvalidInput, match="has no metadata sidecar plain.json"):
        read_report(tmp_path / "plain.csv")
    (tmp_path / "text.gpkg").write_text("not a GeoPackage")
    with pytest.raises(InvalidInput, match="cannot be read as a GeoPackage"):
        read_report(tmp_path / "text.gpkg")
    with pytest.raises(InvalidInput, match=r"is not a report file \(.shp\)"):
        read_report(tmp_path / "regions.shp")
    with pytest.raises(InvalidInput, match="does not exist"):
        read_report(tmp_path / "missing.gpkg")
    with pytest.raises(InvalidInput, match="path=3 is a int, not a file path"):
        read_report(3)  # type: ignore[arg-type]


def _edit_sidecar(sidecar: Path, **changes: Any) -> None:
    meta = json.loads(sidecar.read_text())
    meta.update(changes)
    if changes.get("format") is None and "format" in changes:
        meta.pop("format")
    sidecar.write_text(json.dumps(meta))


def test_refuses_another_metadata_format(simulated: RegionalReport, tmp_path: Path) -> None:
    csv = _written(simulated, tmp_path, "csv-wide-sql")
    sidecar = csv.with_suffix(".json")
    _edit_sidecar(sidecar, format="spatialdp-regional-report/0")
    with pytest.raises(InvalidInput, match=r"of another format: format "
                       r"'spatialdp-regional-report/0', this spatialdp reads "
                       r"'spatialdp-regional-report/1'; write the report again"):
        read_report(csv)
    _edit_sidecar(sidecar, format=None)
    with pytest.raises(InvalidInput, match="written before read_report existed"):
        read_report(sidecar)
    gpkg = _written(simulated, tmp_path / "g", "gpkg")
    import pyogrio

    table = gpd.read_file(gpkg)
    meta = json.loads(pyogrio.read_info(gpkg)["layer_metadata"]["spatialdp"])
    meta["format"] = "spatialdp-regional-report/2"
    table.to_file(gpkg, layer="regional_report", engine="pyogrio",
                  metadata={"spatialdp": json.dumps(meta)})
    with pytest.raises(InvalidInput, match="'spatialdp-regional-report/2'"):
        read_report(gpkg)


def test_refuses_edited_files(simulated: RegionalReport, states_partition: Partition,
                              tmp_path: Path) -> None:
    csv = _written(simulated, tmp_path, "csv-wide-sql")
    table = pd.read_csv(csv, dtype={"region_id": str})
    table.drop(columns="loss_cv").to_csv(csv, index=False)
    with pytest.raises(InvalidInput, match=r"was edited: its columns disagree with its column "
                       r"table \(lacks \['loss_cv'\]\)"):
        read_report(csv)
    table.rename(columns={"loss_cv": "loss_cv2"}).to_csv(csv, index=False)
    with pytest.raises(InvalidInput, match=r"lacks \['loss_cv'\] and has columns not in its "
                       r"table \['loss_cv2'\]"):
        read_report(csv)
    table.assign(loss_metric="loss@2").to_csv(csv, index=False)
    with pytest.raises(InvalidInput, match=r"was edited: loss.metric holds \['loss@2'\], its "
                       r"metadata 'loss@1'"):
        read_report(csv)
    table.assign(accounting="ledger").to_csv(csv, index=False)
    with pytest.raises(InvalidInput, match=r"accounting column says \['ledger'\], its "
                       r"metadata 'simulation'"):
        read_report(csv)
    flipped = table.copy()
    flipped.loc[flipped.loss_suppressed, ["loss_suppressed", "err_suppressed",
                                          "ratio_suppressed"]] = False
    flipped.to_csv(csv, index=False)
    with pytest.raises(InvalidInput, match="regions are suppressed in every metric, its "
                       "metadata says"):
        read_report(csv)
    table.assign(loss_reliability="great").to_csv(csv, index=False)
    with pytest.raises(InvalidInput, match=r"column 'reliability' of 'loss' that does not "
                       r"hold what a report writes"):
        read_report(csv)
    table.to_csv(csv, index=False)
    _edit_sidecar(csv.with_suffix(".json"), metric_specs={
        **simulated.metadata()["metric_specs"],
        "loss": {**simulated.metadata()["metric_specs"]["loss"], "clip_high": 3.0}})
    with pytest.raises(InvalidInput, match=r"has a spec of 'loss' that is not the one released"):
        read_report(csv)
    long = _written(simulated, tmp_path / "long", "csv-long-sql")
    rows = pd.read_csv(long, dtype={"region_id": str})
    rows[rows.statistic != "noisy_sum"].to_csv(long, index=False)
    with pytest.raises(InvalidInput, match="metric 'loss' has the statistics"):
        read_report(long, partition=states_partition)


def test_partition_of_a_csv_must_be_the_reports(simulated: RegionalReport,
                                                states_partition: Partition,
                                                colorado_h3: Partition, tmp_path: Path) -> None:
    csv = _written(simulated, tmp_path, "csv-wide-sql")
    with pytest.raises(PartitionMismatch, match="is not the report's partition version"):
        read_report(csv, partition=colorado_h3)
    with pytest.raises(InvalidInput, match="partition='states' is not a Partition"):
        read_report(csv, partition="states")
    gpkg = next(p for p in tmp_path.iterdir() if p.suffix == ".gpkg")
    with pytest.raises(InvalidInput, match="carries its own geometries"):
        read_report(gpkg, partition=states_partition)
    # Without the partition a CSV reads its numbers; the geometries are empty.
    bare = read_report(csv)
    assert bare["loss"].geometry.isna().all()
    pd.testing.assert_series_equal(bare["loss"].value, simulated["loss"].value)


def test_written_parquet_is_geoparquet_with_the_metadata(simulated: RegionalReport,
                                                          tmp_path: Path) -> None:
    path = _written(simulated, tmp_path, "parquet")
    stored = pq.read_schema(path).metadata
    assert {b"geo", b"spatialdp", b"spatialdp_columns"} <= set(stored)
    assert json.loads(stored[b"spatialdp"])["format"] == "spatialdp-regional-report/1"
    frame = gpd.read_parquet(path)
    assert frame.crs == simulated["loss"].crs
    assert "loss_value" in frame.columns
    shown = simulated["loss"].index[~simulated["loss"].suppressed][0]
    assert frame.set_index("region_id").loc[shown, "loss_value"] == simulated["loss"].loc[
        shown, "value"]


@pytest.mark.parametrize("fmt", ["csv-wide-sql", "csv-long-sql"])
def test_csv_keeps_text_ids_as_text(fmt: str, states: gpd.GeoDataFrame, tmp_path: Path) -> None:
    """FIPS codes ("01" is Alabama) stay text: a CSV never turns them into numbers."""
    part = Partition.from_geodataframe(states, "state_fips", name="fips")
    rng = np.random.default_rng(2)
    report = regional_report(_clients(part, 4_000, rng), part, [LOSS], epsilon=1.0,
                             min_cohort=10, target=Simulation(rng))
    back = _read(report, tmp_path, fmt, part)
    assert_same_report(back, report)
    assert "01" in back["loss"].index
