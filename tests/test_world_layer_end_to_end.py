"""A world layer as it comes, from layer to report to map to file and back to a card.

Issue 23's acceptance: a layer generated like a real world layer (float-noise
longitudes, an edge along the pole, countries split at the antimeridian, a projected
CRS, names beside codes such as ``-99``) goes through every step with no manual fix,
once through the Python API and once through the CLI (``spatialdp report`` then
``spatialdp card``).
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
import pandas.testing as pdt
import pytest

from spatialdp import read_report
from spatialdp.cards import ModelCard
from spatialdp.cli import main
from spatialdp.cli._report import client_reports
from spatialdp.exceptions import ReprojectedLayerWarning
from spatialdp.federated import MetricSpec, regional_report
from spatialdp.geo import Partition
from spatialdp.privacy import Simulation
from spatialdp.viz import explore_report, plot_uncertainty_choropleth, plotting_crs
from spatialdp.viz.classify import map_colours
from tests.world_layer import world_layer, world_points

matplotlib.use("Agg")

LOSS = MetricSpec("loss", 0.0, 4.0, label="squared error", unit="m²")
SPEED = MetricSpec("speed", 0.0, 30.0)


@pytest.fixture(scope="module")
def points() -> pd.DataFrame:
    table = world_points(6_000, seed=3)
    rng = np.random.default_rng(4)
    table["client_id"] = np.arange(len(table))
    table["loss"] = rng.gamma(2.0, 0.6, len(table))
    table["speed"] = rng.uniform(0, 30, len(table))
    return table


@pytest.fixture(scope="module")
def partition() -> Partition:
    # Equal Earth metres: reprojected to lon/lat, and the warning says so.
    with pytest.warns(ReprojectedLayerWarning, match="EPSG:8857"):
        return Partition.from_geodataframe(world_layer("EPSG:8857"), "ADM0_A3",
                                           name_column="NAME")


def _report(partition: Partition, points: pd.DataFrame) -> object:
    assigned = partition.assign(lon=points["lon"], lat=points["lat"])
    table = points.assign(region_id=assigned.region)
    assert table.index.equals(points.index)  # one region per point, aligned
    table = table[table.region_id.notna()]
    clients = client_reports(table[["client_id", "region_id", "loss", "speed"]],
                             partition, [LOSS, SPEED])
    return regional_report(clients, partition, [LOSS, SPEED], epsilon=1.0, min_cohort=100,
                           target=Simulation(rng=np.random.default_rng(5)))


def test_layer_report_map_file_and_back_to_a_card(partition: Partition, points: pd.DataFrame,
                                                  tmp_path: Path) -> None:
    assert partition.names is not None
    assert "Russia" in set(partition.names)
    report = _report(partition, points)
    frame = report["loss"]  # type: ignore[index]
    assert "name" in frame.columns
    assert frame.loc["RUS", "name"] == "Russia"
    # The map: a world extent is drawn in Equal Earth, no lon/lat axes, simulation said.
    ax = plot_uncertainty_choropleth(frame)
    assert plotting_crs(frame).to_epsg() == 8857
    assert not ax.axison
    assert ax.get_title(loc="left").startswith("[SIMULATION]")
    # Folium: the same classes and colours as the PNG, names in the tooltip.
    html = explore_report(frame, tiles=None).get_root().render()
    colours = map_colours(frame)
    for region in ("RUS", "FJI", "ATA"):
        if not frame.loc[region, "suppressed"]:
            position = frame.index.get_loc(region)
            assert colours.fill[position] in html
    assert "Russia" in html
    assert "[SIMULATION]" in html
    # Files and back: every format reads back to the same frames.
    paths = report.write(tmp_path / "out")  # type: ignore[attr-defined]
    for path in paths:
        if path.suffix in (".gpkg", ".parquet"):
            back = read_report(path)
        elif path.suffix == ".json":
            back = read_report(path, partition=partition)
        else:
            continue
        for metric in ("loss", "speed"):
            pdt.assert_frame_equal(back[metric].drop(columns="geometry"),
                                   report[metric].drop(columns="geometry"),  # type: ignore[index]
                                   check_exact=True)
        assert back.partition_version == partition.version
    back = read_report(tmp_path / "out" / "regional_report.SIMULATION.gpkg")
    plot_uncertainty_choropleth(back["loss"])  # plotting what was read
    card = ModelCard.build(partition=partition, specs=[LOSS, SPEED], report=back)
    written = card.write(tmp_path / "card")
    text = next(p for p in written if p.suffix == ".md").read_text()
    assert "loss" in text
    assert "speed" in text
    assert "SIMULATION" in text.upper()


def test_the_cli_takes_the_same_layer_as_it_comes(points: pd.DataFrame, tmp_path: Path) -> None:
    layer = tmp_path / "world.gpkg"
    world_layer("EPSG:8857").to_file(layer)
    clients = tmp_path / "clients.parquet"
    points[["client_id", "lon", "lat", "loss", "speed"]].to_parquet(clients)
    out = tmp_path / "report"
    with pytest.warns(ReprojectedLayerWarning):
        assert main(["report", str(clients), "--partition", str(layer), "--id-column",
                     "ADM0_A3", "--name-column", "NAME", "--metric", "loss:0:4", "--metric",
                     "speed:0:30", "--epsilon", "1.0", "--min-cohort", "100", "--unaccounted",
                     "end-to-end test", "--plot", "--out", str(out)]) == 0
    gpkg = next(out.glob("regional_report*.gpkg"))
    back = read_report(gpkg)
    assert back["loss"].loc["FJI", "name"] == "Fiji"
    assert main(["card", str(out)]) == 0
    card = json.loads(next(out.glob("model_card*.json")).read_text())
    (round_,) = card["quantitative_analysis"]["rounds"]
    assert [m["name"] for m in round_["metrics"]] == ["loss", "speed"]
    assert round_["partition_version"] == back.partition_version
    assert round_["provenance"] == "unaccounted"
    assert set(card["figures"]) == {"loss_choropleth", "speed_choropleth"}
