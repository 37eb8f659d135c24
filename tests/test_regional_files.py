"""Regional reports as files and maps: metadata that travels, SQL-safe names, tidy layout."""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import geopandas as gpd
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pyogrio
import pytest

from spatialdp.exceptions import InvalidInput
from spatialdp.federated import HistogramSpec, MetricSpec, regional_report
from spatialdp.geo.partition import Partition
from spatialdp.privacy.target import Simulation
from tests._clients import histogram_columns, tagged

LOSS = MetricSpec("loss", 0.0, 2.5, label="squared position error", unit="m²")
HIST = HistogramSpec("err", edges=(0.5, 1, 2, 5), label="position error", unit="m")
SQL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@pytest.fixture(scope="module")
def report(states_partition: Partition):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(8)
    n = 12_000
    ids = np.asarray(states_partition.region_ids)
    weights = np.linspace(1, 30, ids.size)
    hists = rng.dirichlet(np.ones(HIST.n_buckets), size=n)
    clients = tagged({"loss": LOSS.clip(rng.gamma(2.0, 0.3, n)),
                      **histogram_columns(HIST, hists)},
                     [LOSS, HIST], partition=states_partition,
                     region_id=rng.choice(ids, size=n, p=weights / weights.sum()))
    return regional_report(clients, states_partition, [LOSS, HIST], epsilon=1.0,
                           min_cohort=60, target=Simulation(rng))


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_labels_reach_the_frames_and_unlabelled_specs_stay_compatible(
        report, states_partition: Partition) -> None:  # type: ignore[no-untyped-def]
    meta = report["loss"].attrs["spatialdp"]
    assert meta["value_label"] == "squared position error (m²)"
    assert report["err"].attrs["spatialdp"]["value_label"] == "share of position error > 5 m"
    specs = report.metadata()["metric_specs"]
    assert specs["loss"]["unit"] == "m²"
    assert specs["loss"]["fingerprint"] == MetricSpec("loss", 0.0, 2.5).fingerprint
    # Reports tagged under the unlabelled spec are accepted by the labelled one.
    rng = np.random.default_rng(1)
    plain = MetricSpec("loss", 0.0, 2.5)
    clients = tagged({"loss": plain.clip(rng.gamma(2.0, 0.3, 4000))}, [plain],
                     partition=states_partition,
                     region_id=rng.choice(np.asarray(states_partition.region_ids), 4000))
    again = regional_report(clients, states_partition, [LOSS], epsilon=0.5, min_cohort=30,
                            target=Simulation(rng))
    assert again["loss"].value.notna().any()


def test_write_sql_names_metadata_and_sidecar(report, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    paths = report.write(tmp_path, names="sql")
    gpkg, _, csv, sidecar = paths
    back = gpd.read_file(gpkg)  # one layer: no warning about several
    assert all(SQL_NAME.match(c) for c in back.columns if c != "geometry")
    assert {"loss_value", "loss_error_bar", "err_b0", "err_b4", "err_value"} <= set(back.columns)
    assert not [c for c in back.columns if "(" in c or "." in c]
    # The metadata travels inside the GeoPackage (layer metadata) ...
    info = pyogrio.read_info(gpkg)
    meta = json.loads(info["layer_metadata"]["spatialdp"])
    assert meta["alpha"] == report.alpha
    assert meta["epsilon"] == {"loss": 0.5, "err": 0.5}
    assert meta["epsilon_total"] == 1.0
    assert meta["partition_version"] == report.partition_version
    assert "round_index" in meta
    assert meta["metric_specs"]["err"]["edges"] == [0.5, 1.0, 2.0, 5.0]
    columns = {c["column"]: c for c in json.loads(info["layer_metadata"]["spatialdp_columns"])}
    assert columns["err_b1"]["low"] == 0.5
    assert columns["err_b1"]["high"] == 1.0
    assert columns["err_b1"]["bucket_label"] == "(0.5, 1]"
    assert columns["loss_value"]["unit"] == "m²"
    # ... and beside the CSV, whose columns are the same SQL names.
    side = json.loads(sidecar.read_text())
    table = pd.read_csv(csv)
    assert [c["column"] for c in side["columns"]] == list(table.columns)
    assert side["metric_specs"]["loss"]["label"] == "squared position error"
    np.testing.assert_allclose(table.set_index("region_id")["err_b4"],
                               report["err"][">5"].reindex(table.region_id).to_numpy())


def test_write_long_layout(report, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    *_, csv, sidecar = report.write(tmp_path, stem="tidy", layout="long")
    long = pd.read_csv(csv, keep_default_na=True)
    assert list(long.columns) == ["region_id", "metric", "statistic", "estimate",
                                  "reliability", "suppressed", "partition_version",
                                  "round_index"]
    loss = report["loss"]
    values = long[(long.metric == "loss") & (long.statistic == "value")].set_index("region_id")
    np.testing.assert_allclose(values.estimate, loss.value.reindex(values.index), equal_nan=True)
    buckets = long[(long.metric == "err") & long.statistic.str.fullmatch(r"b\d")]
    assert sorted(buckets.statistic.unique()) == ["b0", "b1", "b2", "b3", "b4"]
    assert json.loads(sidecar.read_text())["layout"] == "long"
    assert len(long) == len(report.to_long())


def test_write_refuses_unknown_options(report, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidInput, match="names='camel' is not a naming"):
        report.write(tmp_path, names="camel")
    with pytest.raises(InvalidInput, match="layout='pivot' is not a layout"):
        report.write(tmp_path, layout="pivot")
    assert not list(tmp_path.iterdir())  # refused before anything is written


def test_plot_and_explore_hand_off_to_viz(report) -> None:  # type: ignore[no-untyped-def]
    ax = report.plot("loss")
    assert ax.get_title(loc="left").splitlines()[0].endswith("squared position error (m²)")
    classed = report.plot("loss", scheme="quantiles", k=4)
    assert classed.get_legend().get_gid() == "legend:classes"
    fig = report.plot("loss", kind="moe")
    assert [a.get_gid() for a in fig.axes if a.get_gid()] == ["panel:value", "panel:moe"]
    national = float(np.nanmedian(report["loss"].value))
    sig = report.plot("loss", kind="significance", national=national)
    assert sig.get_legend().get_gid() == "legend:significance"
    biv = report.plot("loss", kind="bivariate", k=3)
    assert biv.child_axes[0].get_gid() == "legend:bivariate"
    with pytest.raises(InvalidInput, match="kind='bars' is not a kind of map"):
        report.plot("loss", kind="bars")
    with pytest.raises(InvalidInput, match="no metric 'nope'"):
        report.plot("nope")
    html = report.explore("loss").get_root().render()
    assert "Opacity = reliability" in html
