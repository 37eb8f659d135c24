"""The demo's smoothed loss map and the card's small-area section."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pytest

from spatialdp.datasets import synthetic_fleet, us_states_partition
from spatialdp.demo.outputs import smooth_loss
from spatialdp.demo.run import run_demo
from spatialdp.federated import MetricSpec, device_report, regional_report
from spatialdp.privacy.target import Simulation

LOSS = MetricSpec("loss", 0.0, 4.0)


def _report(devices: int, floor: int):
    states = us_states_partition()
    fleet = synthetic_fleet(devices, rng=0)
    loss = np.random.default_rng(1).uniform(0, 2, len(fleet))
    clients = device_report(pd.DataFrame({"client_id": fleet.device_id,
                                          "region_id": fleet.region_id, "loss": loss}),
                            loss_spec=LOSS, partition=states)
    report = regional_report(clients, states, [LOSS], epsilon=0.5, target=Simulation(rng=0),
                             min_cohort=floor)
    return SimpleNamespace(partition=states), report


def test_smooth_loss_fits_the_spatial_model_on_the_states():
    world, report = _report(20_000, 100)
    smoothed, notes = smooth_loss(world, SimpleNamespace(loss_sd=0.58), report)
    assert smoothed.model == "sfh"
    assert list(smoothed.coefficients.index) == ["intercept", "lat", "lon"]
    assert (smoothed.frame.label == "modelled").sum() == int(report["loss"].suppressed.sum())
    assert all(n.startswith("small-area model of the loss: ") for n in notes)


def test_smooth_loss_gives_up_with_the_reason_when_too_few_states_are_published():
    world, report = _report(20_000, 1500)
    assert int((~report["loss"].suppressed).sum()) <= 4
    smoothed, notes = smooth_loss(world, SimpleNamespace(loss_sd=0.58), report)
    assert smoothed is None
    assert len(notes) == 1
    assert notes[0].startswith("loss not smoothed: ")
    assert "the model needs more published regions" in notes[0]


@pytest.mark.slow  # a full-size demo run (about 15 s)
def test_the_full_demo_publishes_the_smoothed_loss_map_and_the_card_section(tmp_path: Path):
    result = run_demo(tmp_path / "demo", devices=200_000)
    out = result.out
    image = mpimg.imread(out / "loss_smoothed.png")
    assert image.shape[1] > 2 * image.shape[0]         # three panels side by side
    assert image[..., :3].std() > 0.05                  # drawn, not blank
    card = json.loads((out / "model_card.json").read_text())
    section = card["small_area"]
    assert section["model"] == "sfh"
    assert section["covariates"] == ["lat", "lon"]
    assert section["epsilon_charged"] == 0
    assert section["provenance"] == "release"
    assert card["figures"]["loss_smoothed"] == "loss_smoothed.png"
    md = (out / "model_card.md").read_text()
    assert "## Small-area estimates [release" in md
    assert "loss_smoothed.png" in md
    assert "loss_smoothed.png" in json.loads((out / "run.json").read_text())["demo"]["files"]
