"""The model card's small-area section: the model, its covariates, the share modelled, no ε."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from spatialdp.cards import ModelCard, write_run_folder
from spatialdp.cards._sections import small_area_section
from spatialdp.cards.json_card import SCHEMA_VERSION, canonical_digest
from spatialdp.datasets import us_states_partition
from spatialdp.exceptions import InvalidCard, InvalidInput
from spatialdp.smooth import small_area_estimates
from tests._loss_report import LOSS, simulated_loss_report


@pytest.fixture(scope="module")
def states():
    return us_states_partition()


@pytest.fixture(scope="module")
def report(states):
    return simulated_loss_report(states)


@pytest.fixture(scope="module")
def smooth(report, states):
    area = pd.DataFrame({"area": states.regions.to_crs(5070).area.to_numpy() / 1e12},
                        index=states.region_ids.astype(str))
    return small_area_estimates(report, "loss", covariates=area, model="sfh", weights=states,
                                include_suppressed=True, client_variance=1 / 3)


@pytest.fixture(scope="module")
def card(states, report, smooth):
    return ModelCard.build(partition=states, specs=[LOSS], report=report, small_area=smooth)


def test_the_section_states_model_covariates_share_modelled_and_no_epsilon(card, smooth):
    section = card.to_dict()["small_area"]
    assert section["model_name"] == "spatial Fay-Herriot (SAR)"
    assert section["covariates"] == ["area"]
    assert [c["name"] for c in section["coefficients"]] == ["intercept", "area"]
    assert section["rho"] == pytest.approx(smooth.rho)
    labels = smooth.frame["label"].value_counts()
    assert section["labels"]["modelled"] == labels["modelled"] == 9
    assert section["modelled_share"] == pytest.approx(9 / 48)
    assert section["epsilon_charged"] == 0
    assert "no epsilon charged" in section["statement"]
    assert section["mse"].startswith("analytic: Singh, Steel & Salvati")
    assert section["provenance"] == "simulation"    # the smoothed report was a simulation


def test_the_markdown_and_summary_say_post_processing(card):
    text = card.to_markdown()
    assert "## Small-area estimates [SIMULATION: not a release]" in text
    assert "**Post-processing of published values: no epsilon charged.**" in text
    assert "public covariates: `area`" in text
    assert "9 modelled (no published value; 19% of all regions)" in text
    assert "smoothed loss: spatial Fay-Herriot (SAR), 19% of regions modelled" in card.summary()


def test_the_section_survives_json_and_the_run_folder(card, states, report, smooth, tmp_path):
    (tmp_path / "card").mkdir()
    written = card.write(tmp_path / "card")
    again = ModelCard.from_json(next(p for p in written if p.suffix == ".json"))
    assert again.to_dict()["small_area"] == card.to_dict()["small_area"]
    run = tmp_path / "run"
    run.mkdir()
    write_run_folder(run, partition=states, specs=[LOSS], reports=[report], small_area=smooth)
    assert json.loads((run / "small_area.json").read_text())["model"] == "sfh"
    rebuilt = ModelCard.from_run(run)
    assert rebuilt.to_dict()["small_area"] == card.to_dict()["small_area"]


def test_a_card_without_smoothing_has_no_section_and_older_cards_are_read(states, report):
    plain = ModelCard.build(partition=states, specs=[LOSS], report=report)
    assert "small_area" not in plain.to_dict()
    assert "Small-area estimates" not in plain.to_markdown()
    for version in ("2.0.0", "2.1.0"):
        content = plain.to_dict()
        content["schema_version"] = version
        content["digest"] = canonical_digest(content)
        assert ModelCard(content).to_dict()["schema_version"] == version
    assert SCHEMA_VERSION == "2.2.0"


def test_the_schema_refuses_a_section_that_charges_epsilon(card):
    content = card.to_dict()
    content["small_area"]["epsilon_charged"] = 0.5
    content["digest"] = canonical_digest(content)
    with pytest.raises(InvalidCard, match="small_area"):
        ModelCard(content)


def test_a_record_missing_keys_is_refused():
    with pytest.raises(InvalidInput, match=r"small_area=.*is not a small-area record "
                       r"\(missing \['alpha'"):
        small_area_section({"metric": "loss"})
    with pytest.raises(InvalidInput, match="pass the SmallAreaEstimates"):
        small_area_section("fh")
