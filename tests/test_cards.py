"""Model cards: content of the JSON and the Markdown from real objects, schema, run folder.

One small real run is built once per module: the 48-state partition, a synthetic
fleet of 20,000 devices, a stratified sampler (one merge, six blind spots), a
SQLite ledger charged by the sampler and by two regional report releases, and a
query-error table on Connecticut measured against a released grid (and the same
measured against the truth: internal, refused). Every number the card shows is
checked against the object it came from. Counts of people are exact under
replace-one neighbours (participation is public, as in the report files); an
add/remove run's card holds only released, noised counts and refuses exact
bookkeeping.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import shapely
from jsonschema import Draft202012Validator

from spatialdp.cards import (
    InvalidCard,
    ModelCard,
    RunFolder,
    load_schema,
    validate_card,
    write_run_folder,
)
from spatialdp.cards.json_card import canonical_digest
from spatialdp.datasets import load_us_states, synthetic_fleet, us_states_partition
from spatialdp.exceptions import InvalidInput, PartitionMismatch
from spatialdp.federated import HistogramSpec, MetricSpec, device_report, regional_report
from spatialdp.federated.regional import RegionalReport
from spatialdp.geo import Partition
from spatialdp.privacy import PrivacyLedger, ReleaseTarget, Simulation
from spatialdp.queries import measure_query_error, query_corpus, release_flat, truth_grid
from spatialdp.sampling import (
    Coverage,
    ParticipationPolicy,
    ParticipationState,
    Strata,
    StratifiedSampler,
    epoch_coverage,
)

LOSS = MetricSpec("loss", 0.0, 4.0, label="squared position error", unit="m²")
ERRORS = HistogramSpec("abs_error_m", (0.5, 1.0, 2.0))


@dataclass
class Run:
    folder: Path
    partition: Partition
    strata: Strata
    state: ParticipationState
    coverage: Coverage
    ledger: PrivacyLedger
    reports: list[RegionalReport]
    query_error: pd.DataFrame
    cohorts: pd.Series  # exact clients per state
    internal_query_error: pd.DataFrame  # measured against the truth: never on a card

    def build(self, **kwargs: Any) -> ModelCard:
        args: dict[str, Any] = {
            "partition": self.partition, "specs": [LOSS, ERRORS], "strata": self.strata,
            "coverage": self.coverage, "ledger": self.ledger, "reports": self.reports,
            "query_error": self.query_error, "title": "Positioning model, test run",
            "model_details": {"overview": "A simulated positioning model.", "version": "0.3",
                              "owners": ["maps team"]},
            "simulated": {"fleet": True, "model": True}, "seeds": {"fleet": 0, "model": 1}}
        args.update(kwargs)
        return ModelCard.build(**args)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    folder = tmp_path_factory.mktemp("run")
    states = us_states_partition()
    fleet = synthetic_fleet(20_000, rng=0)
    strata = Strata(states, basis="administrative")
    client_strata = strata.assign(lon=fleet.lon.to_numpy(), lat=fleet.lat.to_numpy())
    policy = ParticipationPolicy(participation_cap=1, epsilon_per_round=0.1, rounds_per_epoch=3)
    sampler = StratifiedSampler(strata, cohort=150, policy=policy, mode="proportional",
                                min_stratum_cohort=20)
    ledger = PrivacyLedger(folder / "ledger.sqlite", epoch_budget=20.0)
    state = sampler.new_state(client_strata, target=ReleaseTarget(ledger, epoch=0))
    for round_index in range(3):
        sampler.select(state, round_index)
    coverage = epoch_coverage(sampler, state, report=states, client_regions=client_strata)
    rng = np.random.default_rng(5)
    examples = pd.DataFrame({"client_id": fleet.device_id, "region_id": fleet.region_id,
                             "loss": rng.uniform(0.0, 3.0, len(fleet)),
                             "error": rng.exponential(1.0, len(fleet))})
    clients = device_report(examples, loss_spec=LOSS, hist_spec=ERRORS, partition=states)
    reports = [regional_report(clients, states, [LOSS, ERRORS], epsilon=0.6, min_cohort=100,
                               target=ReleaseTarget(ledger, epoch=1, round_index=r,
                                                    why="card test"))
               for r in (1, 2)]
    ct = load_us_states().query("state == 'CT'")
    grid = Partition.from_h3_cover(ct, resolution=7, containment="overlap", name="ct-r7")
    pts = fleet[fleet.region_id == "CT"]
    truth = truth_grid(grid, lon=pts.lon.to_numpy(), lat=pts.lat.to_numpy(),
                       device_ids=pts.device_id.to_numpy())
    centre = ct.geometry.iloc[0].representative_point()
    polygons = ct.iloc[[0, 0, 0]].set_geometry(
        [shapely.Point(centre.x + dx, centre.y).buffer(r)
         for dx, r in ((-0.3, 0.05), (0.0, 0.1), (0.3, 0.2))], crs=4326)
    corpus = query_corpus(grid, polygons)
    # The grid is charged to a ledger of its own (the card's ledger tests count charges).
    with PrivacyLedger(":memory:", epoch_budget=5.0) as grid_ledger:
        released = release_flat(truth, epsilon=1.0, target=ReleaseTarget(
            grid_ledger, epoch=0, why="query-error grid"))
    query_error = measure_query_error(released, corpus, epsilon=1.0, draws=50, rng=0)
    internal = measure_query_error(truth, corpus, epsilon=1.0, draws=50, rng=0)
    return Run(folder, states, strata, state, coverage, ledger, reports, query_error,
               fleet.region_id.value_counts(), internal)


@pytest.fixture(scope="module")
def card(run: Run) -> ModelCard:
    return run.build()


# ----------------------------------------------------------------------------- JSON content
def test_the_run_has_what_the_card_must_show(run: Run) -> None:
    # Preconditions of the content tests: a merge, blind spots, suppressed regions.
    assert len(run.coverage.merges) == 1
    assert run.coverage.blind_spots
    assert run.reports[-1]["loss"].suppressed.sum() > 0


def test_json_geography_and_specs(card: ModelCard, run: Run) -> None:
    geo = card.to_dict()["geography"]
    assert geo["partition"]["name"] == run.partition.name
    assert geo["partition"]["version"] == run.partition.version
    assert geo["partition"]["n_regions"] == 48
    specs = {s["name"]: s for s in geo["specs"]}
    assert specs["loss"]["fingerprint"] == LOSS.fingerprint
    assert specs["loss"]["clip_high"] == 4.0
    assert (specs["loss"]["label"], specs["loss"]["unit"]) == ("squared position error", "m²")
    assert specs["abs_error_m"]["key"] == ERRORS.key  # histogram edge version
    assert specs["abs_error_m"]["edges"] == [0.5, 1.0, 2.0]
    assert specs["abs_error_m"]["fingerprint"] == ERRORS.fingerprint


def test_json_strata_and_merges_with_reasons(card: ModelCard, run: Run) -> None:
    sampling = card.to_dict()["sampling"]
    assert sampling["strata"]["key"] == run.strata.key
    assert sampling["strata"]["version"] == run.strata.version
    (merge,) = sampling["merges"]
    (truth,) = run.coverage.merges
    assert merge["members"] == list(truth.members)
    assert merge["into"] == list(truth.into)
    assert merge["round_index"] == truth.round_index
    # The reason as the sampler wrote it: under replace-one, pool sizes are public.
    assert merge["reason"] == truth.reason
    assert "below the floor 20" in merge["reason"]


def test_json_coverage_figures(card: ModelCard, run: Run) -> None:
    cov = card.to_dict()["coverage"]
    assert cov["share_strata_sampled"] == pytest.approx(run.coverage.share_strata_sampled)
    assert cov["share_strata_sampled"] < 1.0
    assert cov["blind_spots"] == run.coverage.blind_spots
    assert cov["blind_regions"] == run.coverage.blind_regions
    sampled = (run.coverage.report_table.clients_sampled > 0).mean()
    assert cov["share_regions_sampled"] == pytest.approx(sampled)
    history = [(h["round_index"], h["score"]) for h in cov["score_history"]]
    assert history == [(h["round_index"], pytest.approx(h["score"]))
                       for h in run.state.history]
    assert cov["epsilon_per_client"] == pytest.approx(0.1)
    table = {r["stratum"]: r for r in cov["strata_table"]}
    for stratum, row in run.coverage.table.iterrows():
        assert table[stratum]["clients_sampled"] == int(row.clients_sampled)
        assert table[stratum]["blind_spot"] == bool(row.blind_spot)


def test_json_ledger_per_epoch_and_line_item(card: ModelCard, run: Run) -> None:
    privacy = card.to_dict()["privacy"]
    assert privacy["accounting"] == "pure"
    assert privacy["epoch_budget"] == 20.0
    assert [e["epoch"] for e in privacy["epochs"]] == run.ledger.epochs() == [0, 1]
    for entry in privacy["epochs"]:
        summary = run.ledger.summary(entry["epoch"])
        items = {li["line_item"]: li for li in entry["line_items"]}
        assert set(items) == set(summary.index)
        for item, row in summary.iterrows():
            assert items[item]["spent"] == pytest.approx(row["spent"])
            assert items[item]["cap"] == pytest.approx(row["cap"])
            assert items[item]["n_charges"] == row["n_charges"]
            assert items[item]["epsilon_per_client"] == pytest.approx(row["spent"])
    epochs = {e["epoch"]: e for e in privacy["epochs"]}
    # Epoch 0: the sampler's cap x epsilon_per_round on training; epoch 1: two rounds of
    # two metrics at 0.3 on evaluation.regional.
    assert epochs[0]["epsilon_per_client"] == pytest.approx(0.1)
    assert epochs[1]["epsilon_per_client"] == pytest.approx(2 * 2 * 0.3)
    regional = {li["line_item"]: li for li in epochs[1]["line_items"]}["evaluation.regional"]
    assert regional["n_charges"] == 2


def test_json_metric_values_with_error_bars(card: ModelCard, run: Run) -> None:
    rounds = card.to_dict()["quantitative_analysis"]["rounds"]
    assert [r["round_index"] for r in rounds] == [1, 2]
    for section, report in zip(rounds, run.reports, strict=True):
        assert section["provenance"] == "release"
        assert section["accounting"] == "ledger"
        assert section["epoch"] == 1
        assert section["suppressed_regions"] == report.suppressed_regions
        assert section["epsilon"] == {"loss": 0.3, "abs_error_m": 0.3}
        metrics = {m["name"]: m for m in section["metrics"]}
        for name in ("loss", "abs_error_m"):
            frame = report[name]
            rows = {r["region_id"]: r for r in metrics[name]["regions"]}
            assert set(rows) == set(frame.index)
            for region, row in frame.iterrows():
                got = rows[region]
                assert got["suppressed"] == bool(row.suppressed)
                if row.suppressed:
                    assert got["value"] is None
                    assert got["cohort"] == "suppressed"
                else:
                    assert got["value"] == pytest.approx(row.value)
                    assert got["error_bar"] == pytest.approx(row.error_bar)
                    assert got["ci_low"] == pytest.approx(row.ci_low)
                    assert got["reliability"] == row.reliability
                    assert got["cohort"] == int(row.cohort)


def test_json_cohort_sizes_are_the_reports_exact_cohorts_under_replace(
        card: ModelCard, run: Run) -> None:
    section = card.to_dict()["cohort_sizes"]
    assert (section["neighbours"], section["provenance"]) == ("replace", "bookkeeping")
    cohorts = {r["region_id"]: r["cohort"] for r in section["regions"]}
    frame = run.reports[-1]["loss"]
    for region, row in frame.iterrows():
        expected = "suppressed" if row.suppressed else int(row.cohort)
        assert cohorts[region] == expected


def test_json_query_error_table(card: ModelCard, run: Run) -> None:
    qe = card.to_dict()["query_error"]
    assert qe["provenance"] == "release"  # post-processing of the charged grid
    assert qe["settings"]["reference"] == "released grid"
    assert qe["settings"]["internal"] is False
    assert qe["settings"]["reference_accounting"] == "ledger"
    assert qe["settings"]["title"].startswith("Query error measured against the flat grid")
    assert qe["settings"]["epsilon"] == 1.0
    assert qe["settings"]["draws"] == 50
    assert [r["bucket"] for r in qe["rows"]] == [str(b) for b in run.query_error.bucket]
    for got, (_, row) in zip(qe["rows"], run.query_error.iterrows(), strict=True):
        assert got["n_queries"] == row.n_queries
        assert got["mean_abs_error"] == pytest.approx(row.mean_abs_error)
        assert got["expected_rms"] == pytest.approx(row.expected_rms)


def test_json_details_and_provenance(card: ModelCard) -> None:
    content = card.to_dict()
    assert content["model_details"]["version"] == "0.3"
    assert content["model_details"]["owners"] == ["maps team"]
    assert content["provenance"]["simulated"] == {"fleet": True, "model": True}
    assert content["provenance"]["seeds"] == {"fleet": 0, "model": 1}
    assert set(content["provenance"]["legend"]) == {"release", "simulation", "unaccounted",
                                                    "bookkeeping"}
    assert content["considerations"]["limitations"]  # defaults state what is not covered
    assert card.simulated


# ----------------------------------------------------------------------------- schema
def test_json_validates_against_the_shipped_schema(card: ModelCard) -> None:
    schema = load_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator(schema).validate(json.loads(card.to_json()))


def _resealed(content: dict[str, Any]) -> dict[str, Any]:
    content["digest"] = canonical_digest(content)
    return content


def test_schema_refuses_a_cohort_that_is_not_a_count(card: ModelCard) -> None:
    content = card.to_dict()
    content["cohort_sizes"]["regions"][0]["cohort"] = "1234"
    with pytest.raises(InvalidCard, match="cohort_sizes/regions/0/cohort fails the model card"):
        ModelCard(_resealed(content))
    content = card.to_dict()
    content["quantitative_analysis"]["rounds"][0]["suppressed_regions"] = "7"
    with pytest.raises(InvalidCard, match="suppressed_regions"):
        validate_card(_resealed(content))


def test_schema_refuses_a_release_labelled_as_simulation(card: ModelCard) -> None:
    content = card.to_dict()
    content["quantitative_analysis"]["rounds"][0]["provenance"] = "simulation"
    with pytest.raises(InvalidCard, match="rounds/0/provenance"):
        validate_card(_resealed(content))


def test_schema_refuses_missing_and_unknown_sections(card: ModelCard) -> None:
    content = card.to_dict()
    del content["privacy"]
    with pytest.raises(InvalidCard, match="'privacy' is a required property"):
        validate_card(_resealed(content))
    content = card.to_dict()
    content["extra"] = 1
    with pytest.raises(InvalidCard, match="Additional properties"):
        validate_card(_resealed(content))


# ----------------------------------------------------------------------------- files
def test_write_and_read_back(card: ModelCard, tmp_path: Path) -> None:
    md, js = card.write(tmp_path)
    assert (md.name, js.name) == ("model_card.md", "model_card.json")
    again = ModelCard.from_json(js)
    assert again.to_dict() == card.to_dict()
    assert md.read_text() == card.to_markdown()
    assert not list(tmp_path.glob(".*"))  # no temporary file left behind


def test_tampered_json_is_refused(card: ModelCard, tmp_path: Path) -> None:
    _, js = card.write(tmp_path)
    content = json.loads(js.read_text())
    content["privacy"]["epochs"][1]["epsilon_per_client"] = 0.01  # a flattering edit
    js.write_text(json.dumps(content))
    with pytest.raises(InvalidCard, match="digest=.*does not match its content"):
        ModelCard.from_json(js)
    js.write_text(js.read_text()[:-40])
    with pytest.raises(InvalidCard, match="is not valid JSON"):
        ModelCard.from_json(js)
    with pytest.raises(InvalidCard, match="not a JSON object"):
        validate_card([1, 2])  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="cannot be read"):
        ModelCard.from_json(tmp_path / "missing.json")


def test_a_card_that_json_cannot_hold_is_refused(card: ModelCard) -> None:
    content = card.to_dict()
    content["quantitative_analysis"]["rounds"][0]["epsilon_total"] = float("nan")
    with pytest.raises(InvalidCard, match="cannot be written as JSON"):
        canonical_digest(content)


def test_write_refuses_bad_folders_and_stems(card: ModelCard, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="stem='a/b' is not a plain file name"):
        card.write(tmp_path, stem="a/b")
    with pytest.raises(InvalidInput, match="folder=3 is a int, not a path"):
        card.write(3)  # type: ignore[arg-type]
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InvalidInput, match="cannot be created"):
        card.write(blocker / "sub")


# ----------------------------------------------------------------------------- Markdown
def test_markdown_holds_every_element(run: Run, tmp_path: Path) -> None:
    card = run.build(coverage_map=tmp_path / "figures" / "coverage_map.png")
    md_path, js_path = card.write(tmp_path)
    md = md_path.read_text()
    # The coverage map, embedded by a path relative to the card.
    assert re.search(r"!\[Coverage map[^\]]*\]\(figures/coverage_map\.png\)", md)
    assert f"version `{run.partition.version}`" in md
    assert f"`{ERRORS.key}`" in md
    assert f"`{LOSS.fingerprint}`" in md
    merge = run.coverage.merges[0]
    assert f"| {'+'.join(merge.members)} | {'+'.join(merge.into)} | 0 |" in md
    for spot in run.coverage.blind_spots:
        assert f"- {spot}\n" in md
    assert "| 0 | 0 | " in md  # score history: epoch 0, round 0
    # Ledger: one table per epoch, per-client epsilon in the heading and per line item.
    assert "### Epoch 1: per-client epsilon 1.2" in md
    assert "| evaluation.regional | 4.8 | 1.2 | 3.6 | 2 | 1.2 |" in md
    assert "| training | 14 | 0.1 | 13.9 | 1 | 0.1 |" in md
    # Metrics: the last round per region with its error bar; the suppressed regions.
    last = run.reports[-1]
    ca = last["loss"].loc["CA"]
    assert f"| CA | {ca.value:.4g} | ± {ca.error_bar:.4g} | [{ca.ci_low:.4g}, " in md
    assert f"suppressed regions: **{last.suppressed_regions}**" in md
    assert "**Neighbouring relation** (replace): replace-one neighbours" in md
    assert "| VT | suppressed | - | - | suppressed | suppressed |" in md
    # Query error and provenance.
    assert "## Query error on real polygons [release: noised, charged to the ledger]" in md
    assert "compared with the released grid used as a plug-in truth" in md
    first = run.query_error.iloc[0]
    assert f"| {first.bucket} | {int(first.n_queries)} |" in md
    assert "[release: noised, charged to the ledger]" in md
    assert "> **SIMULATED INPUTS** (fleet, model)" in md
    assert "> **SIMULATION.** Rounds" not in md  # the rounds are releases
    assert "## Intended use" in md
    assert "## Limitations" in md
    assert "- **Owners:** maps team" in md
    front = md.split("---\n")[1]
    assert f'partition: "{run.partition.key}"' in front
    assert "simulated: true" in front
    assert f"digest: {json.loads(js_path.read_text())['digest']}" in front
    assert ("#### squared position error (m²), loss (`loss@1`, mean, epsilon 0.3 of the "
            "round's 0.6)") in md
    assert "| squared position error (m²) | metric | `loss@1` |" in md


def test_a_simulated_round_is_labelled_everywhere(run: Run, tmp_path: Path) -> None:
    clients = device_report(
        pd.DataFrame({"client_id": np.arange(6_000), "region_id": "CA", "loss": 1.0}),
        loss_spec=LOSS, partition=run.partition)
    sim = regional_report(clients, run.partition, [LOSS], epsilon=0.5, min_cohort=100,
                          target=Simulation(rng=3))
    card = ModelCard.build(partition=run.partition, specs=[LOSS], report=sim)
    (section,) = card.to_dict()["quantitative_analysis"]["rounds"]
    assert (section["accounting"], section["provenance"]) == ("simulation", "simulation")
    assert section["suppressed_regions"] == 47  # every state but CA
    assert card.simulated
    md, js = card.write(tmp_path)
    assert md.name == "model_card.SIMULATION.md"
    assert js.name == "model_card.SIMULATION.json"
    assert "> **SIMULATION.** Rounds unnumbered are seeded simulations" in md.read_text()
    assert "SIMULATION rounds unnumbered: not a release" in card._repr_html_()


def test_repr_html_summarises(card: ModelCard, run: Run) -> None:
    html = card._repr_html_()
    assert "Positioning model, test run" in html
    assert run.partition.version in html
    assert "epoch 1: per-client epsilon 1.2" in html
    assert "simulated inputs: fleet, model" in html
    assert "<table" in html
    assert "median bar loss" in html
    assert (f"blind spots: strata: {len(run.coverage.blind_spots)} of "
            f"{run.strata.n_strata} strata; regions: {len(run.coverage.blind_regions)} of 48 "
            "regions") in html


# ----------------------------------------------------------------------------- privacy
def _numbers(text: str) -> set[int]:
    """Every standalone integer in a text (not inside a decimal, a hash or a label)."""
    return {int(n) for n in re.findall(r"(?<![\w.:+<-])\d+(?![\w.:+-])", text)}


def _add_remove_run(run: Run, ledger: PrivacyLedger) -> dict[str, Any]:
    """An add/remove epoch on the run's fleet: two reports and a released coverage."""
    from spatialdp.sampling import release_epoch_coverage

    fleet = synthetic_fleet(20_000, rng=0)
    rng = np.random.default_rng(5)
    examples = pd.DataFrame({"client_id": fleet.device_id, "region_id": fleet.region_id,
                             "loss": rng.uniform(0.0, 3.0, len(fleet))})
    clients = device_report(examples, loss_spec=LOSS, partition=run.partition)
    reports = [regional_report(clients, run.partition, [LOSS], epsilon=0.3, min_cohort=100,
                               target=ReleaseTarget(ledger, epoch=0, round_index=r),
                               neighbours="add_remove") for r in (1, 2)]
    where = run.partition.assign(fleet).positions
    released = release_epoch_coverage(run.state, report=run.partition, client_regions=where,
                                      epsilon=0.4, target=ReleaseTarget(ledger, epoch=0))
    return {"reports": reports, "released": released}


def test_an_add_remove_card_holds_only_released_counts(run: Run, tmp_path: Path) -> None:
    with PrivacyLedger(tmp_path / "ledger.sqlite", epoch_budget=20.0) as ledger:
        made = _add_remove_run(run, ledger)
        card = ModelCard.build(partition=run.partition, specs=[LOSS], strata=run.strata,
                               coverage=made["released"], ledger=ledger,
                               reports=made["reports"])
    content = card.to_dict()
    assert content["privacy"]["neighbours"] == ["add_remove"]
    assert "whether and where a client took part is protected" in content["privacy"][
        "participation"]
    # Cohorts: the reports' noised counts, labelled as a release.
    section = content["cohort_sizes"]
    assert (section["neighbours"], section["provenance"]) == ("add_remove", "release")
    last = made["reports"][-1]["loss"]
    for row in section["regions"]:
        published = last.loc[row["region_id"]]
        assert row["cohort"] == ("suppressed" if published.suppressed
                                 else int(published.cohort))
    # Coverage: the released counts, not the server's selection records.
    cov = content["coverage"]
    assert cov["provenance"] == "release"
    frame = made["released"].regions.frame
    assert {r["region_id"]: r["clients_sampled"] for r in cov["regions_table"]} == {
        str(k): int(v) for k, v in frame.clients.items()}
    assert cov["blind_regions"] == made["released"].blind_regions
    assert "score_history" not in cov  # exact bookkeeping: not on an add/remove card
    assert content["sampling"]["merges"] == []
    md = card.to_markdown()
    assert "Cohort sizes per region (noised)" in md
    assert "confirmed reached" in md
    assert "(add_remove): add/remove neighbours" in md


def test_an_add_remove_card_refuses_exact_bookkeeping(run: Run, tmp_path: Path) -> None:
    with PrivacyLedger(tmp_path / "ledger.sqlite", epoch_budget=20.0) as ledger:
        made = _add_remove_run(run, ledger)
        base = {"partition": run.partition, "specs": [LOSS], "ledger": ledger,
                "reports": made["reports"]}
        with pytest.raises(InvalidInput, match=r"coverage='exact bookkeeping \(epoch_coverage"
                           r"\)' holds exact counts.*release_epoch_coverage"):
            ModelCard.build(**base, coverage=run.coverage)
        with pytest.raises(InvalidInput, match=r"merges='1 merge\(s\)' were decided on exact "
                           r"pool sizes"):
            ModelCard.build(**base, strata=run.strata, merges=run.coverage.merges)
        with pytest.raises(InvalidInput, match="cohort_sizes='exact per-region counts'"):
            ModelCard.build(**base, cohort_sizes=run.cohorts)


def test_a_schema_1_card_is_refused_with_the_fix(card: ModelCard) -> None:
    content = card.to_dict()
    content["schema_version"] = "1.0.0"
    with pytest.raises(InvalidCard, match="schema_version='1.0.0'.*ModelCard.from_run"):
        ModelCard(_resealed(content))


def test_cohort_sizes_given_are_exact_under_replace(run: Run) -> None:
    card = run.build(cohort_sizes=run.cohorts)
    rows = {r["region_id"]: r["cohort"] for r in card.to_dict()["cohort_sizes"]["regions"]}
    assert rows["VT"] == int(run.cohorts["VT"])
    assert rows["CA"] == int(run.cohorts["CA"])


# ----------------------------------------------------------------------------- run folder
def test_from_run_rebuilds_the_card_from_the_folder_alone(run: Run, card: ModelCard) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from spatialdp.sampling import plot_coverage_map

    ax = plot_coverage_map(run.coverage)
    ax.figure.savefig(run.folder / "coverage_map.png", dpi=60)
    plt.close(ax.figure)
    folder = write_run_folder(
        run.folder, partition=run.partition, specs=[LOSS, ERRORS], strata=run.strata,
        coverage=run.coverage, reports=run.reports, query_error=run.query_error,
        epsilon={"loss": 0.3, "abs_error_m": 0.3}, rounds=2, seeds={"fleet": 0, "model": 1},
        simulated={"fleet": True, "model": True}, title="Positioning model, test run",
        figures={"coverage_map": "coverage_map.png"},
        details={"model_details": {"overview": "A simulated positioning model.",
                                   "version": "0.3", "owners": ["maps team"]}})
    assert isinstance(folder, RunFolder)
    manifest = json.loads((run.folder / "run.json").read_text())
    assert manifest["format"] == "spatialdp-run/1"
    assert manifest["ledger"] == "ledger.sqlite"
    assert manifest["reports"] == ["reports/round_001.json", "reports/round_002.json"]
    rebuilt = ModelCard.from_run(run.folder)
    got, want = rebuilt.to_dict(), card.to_dict()
    for key in ("geography", "sampling", "cohort_sizes", "privacy", "considerations",
                "model_details", "provenance", "title"):
        assert got[key] == want[key], key
    assert got["coverage"] == {**want["coverage"], "map": str(run.folder / "coverage_map.png")}
    for a, b in zip(got["quantitative_analysis"]["rounds"],
                    want["quantitative_analysis"]["rounds"], strict=True):
        assert a["source"].startswith("reports/round_")
        rest = ("source", "metrics")
        assert {k: v for k, v in a.items() if k not in rest} == {
            k: v for k, v in b.items() if k not in rest}
        for ma, mb in zip(a["metrics"], b["metrics"], strict=True):
            assert ma["key"] == mb["key"]
            assert ma["median_error_bar"] == pytest.approx(mb["median_error_bar"])
            for ra, rb in zip(ma["regions"], mb["regions"], strict=True):
                assert ra == pytest.approx(rb, nan_ok=True), ra["region_id"]
    for ra, rb in zip(got["query_error"]["rows"], want["query_error"]["rows"], strict=True):
        assert ra == pytest.approx(rb)
    md, js = rebuilt.write(run.folder)
    assert "](coverage_map.png)" in md.read_text()
    assert json.loads(js.read_text())["figures"] == {"coverage_map": "coverage_map.png"}
    elsewhere = run.folder / "cards" / "v1"
    md, _ = rebuilt.write(elsewhere)  # `spatialdp card RUN_DIR --out DIR`: links still work
    assert "](../../coverage_map.png)" in md.read_text()


def test_from_run_refusals(tmp_path: Path, run: Run) -> None:
    with pytest.raises(InvalidInput, match="is not a folder"):
        ModelCard.from_run(tmp_path / "nowhere")
    with pytest.raises(InvalidInput, match="has no run.json"):
        ModelCard.from_run(tmp_path)
    (tmp_path / "run.json").write_text('{"format": "other/9"}')
    with pytest.raises(InvalidInput, match="is not a spatialdp-run/1 manifest"):
        ModelCard.from_run(tmp_path)
    (tmp_path / "run.json").write_text("{not json")
    with pytest.raises(InvalidInput, match="unreadable run.json"):
        ModelCard.from_run(tmp_path)
    folder = RunFolder(tmp_path / "r")
    folder.write_manifest(partition=run.partition, specs=[LOSS], ledger=True)
    with pytest.raises(InvalidInput, match="has no ledger.sqlite though run.json lists it"):
        folder.card()
    with pytest.raises(InvalidInput, match="details=.* has unknown keys"):
        folder.write_manifest(partition=run.partition, details={"intended_uses": "x"})
    with pytest.raises(InvalidInput, match="is not a RegionalReport"):
        folder.write_report("report")


# ----------------------------------------------------------------------------- refusals
def test_build_refusals(run: Run) -> None:
    with pytest.raises(InvalidInput, match="partition=.* is not a Partition"):
        ModelCard.build(partition="us48")
    with pytest.raises(InvalidInput, match="specs=.* is not a sequence"):
        ModelCard.build(partition=run.partition, specs=LOSS)
    with pytest.raises(InvalidInput, match="is not a MetricSpec or HistogramSpec"):
        ModelCard.build(partition=run.partition, specs=["loss"])
    other = Partition.from_geodataframe(load_us_states().iloc[:5], id_column="state",
                                        name="five")
    with pytest.raises(PartitionMismatch, match="round 2 was made on partition version"):
        ModelCard.build(partition=other, reports=run.reports[-1:])
    with pytest.raises(InvalidInput, match="intended_use=.* has unknown keys"):
        ModelCard.build(partition=run.partition, intended_use={"users": ["x"]})
    with pytest.raises(InvalidInput, match=r"simulated\['fleet'\]='yes' is not a bool"):
        ModelCard.build(partition=run.partition, simulated={"fleet": "yes"})
    with pytest.raises(InvalidInput, match="coverage=.* is not a Coverage"):
        ModelCard.build(partition=run.partition, coverage=3)
    with pytest.raises(InvalidInput, match="ledger=.* is not a PrivacyLedger"):
        ModelCard.build(partition=run.partition, ledger="ledger.sqlite")
    with pytest.raises(InvalidInput, match="(?s)query_error=.* is not measure_query_error"):
        ModelCard.build(partition=run.partition, query_error=pd.DataFrame({"x": [1]}))
    with pytest.raises(InvalidInput, match="epochs=-1"):
        ModelCard.build(partition=run.partition, ledger=run.ledger, epochs=[-1])


def test_an_internal_query_error_table_is_refused_everywhere(run: Run, tmp_path: Path) -> None:
    truth_table = ("(?s)query_error='INTERNAL: query error measured against the truth grid.*' "
                   "is an INTERNAL table: it was measured against the truth grid.*release a "
                   r"grid first \(grid = release_flat")
    with pytest.raises(InvalidInput, match=truth_table):
        run.build(query_error=run.internal_query_error)
    folder = RunFolder(tmp_path / "direct")
    with pytest.raises(InvalidInput, match=truth_table):
        folder.write_query_error(run.internal_query_error)
    assert not (tmp_path / "direct" / "query_error.csv").exists()
    with pytest.raises(InvalidInput, match=truth_table):  # refused before anything is written
        write_run_folder(tmp_path / "whole", partition=run.partition, specs=[LOSS],
                         query_error=run.internal_query_error)
    assert not (tmp_path / "whole").exists()
    # A grid released by a Simulation is seeded noise on the truth: internal too.
    from scipy import sparse

    from spatialdp.geo import CellIncidence

    tiny = truth_grid(["85283473fffffff", "85283477fffffff"], lon=[-121.9764],
                      lat=[37.3458], device_ids=[1])
    both = CellIncidence(sparse.csr_array(np.ones((1, 2), np.int8)), np.zeros(1, np.int64),
                         "center", tiny.partition_version)
    simulated = measure_query_error(release_flat(tiny, epsilon=1.0, target=Simulation(rng=0)),
                                    both, epsilon=1.0, draws=5, rng=0)
    with pytest.raises(InvalidInput, match="measured against a SIMULATION of the grid"):
        run.build(query_error=simulated)


def test_a_run_folder_with_an_internal_query_error_table_makes_no_card(
        run: Run, tmp_path: Path) -> None:
    # A folder written before plug-in measurement (or by hand) holds a table measured
    # against the truth: the card refuses it, naming the file.
    folder = RunFolder(tmp_path)
    folder.write_manifest(partition=run.partition, specs=[LOSS], ledger=False)
    run.internal_query_error.to_csv(tmp_path / "query_error.csv", index=False)
    (tmp_path / "query_error.json").write_text(json.dumps(
        {k: v for k, v in run.internal_query_error.attrs.items()}))
    with pytest.raises(InvalidInput, match=f"(?s){re.escape(str(tmp_path))}/query_error.csv="
                                           "'INTERNAL.* is an INTERNAL table"):
        ModelCard.from_run(tmp_path)
    (tmp_path / "query_error.json").unlink()
    with pytest.raises(InvalidInput, match="does not say it was measured against a released "
                                           "grid"):
        ModelCard.from_run(tmp_path)
    folder.write_query_error(run.query_error)  # measured against the released grid
    assert ModelCard.from_run(tmp_path).to_dict()["query_error"]["provenance"] == "release"


def test_one_epoch_of_the_ledger(run: Run) -> None:
    card = run.build(epoch=1)
    assert [e["epoch"] for e in card.to_dict()["privacy"]["epochs"]] == [1]


def test_cell_coverage_and_blind_cells(run: Run) -> None:
    fleet = synthetic_fleet(20_000, rng=0)  # the fixture's fleet, same seed
    grid = Partition.from_h3_cover(load_us_states().query("state == 'CT'"), resolution=5,
                                   containment="overlap", name="ct-r5")
    inside = (fleet.region_id == "CT").to_numpy()
    where = grid.assign(lon=fleet.lon.to_numpy()[inside], lat=fleet.lat.to_numpy()[inside])
    sampled = run.state.used[inside] > 0
    located = where.positions >= 0
    n = grid.n_regions
    table = pd.DataFrame({
        "clients": np.bincount(where.positions[located], minlength=n),
        "clients_sampled": np.bincount(where.positions[located & sampled], minlength=n)},
        index=pd.Index(grid.region_ids, name="region_id"))
    cov = run.build(cell_table=table).to_dict()["coverage"]
    populated = table.clients > 0
    blind = table.index[populated & (table.clients_sampled == 0)]
    assert cov["cells_with_clients"] == int(populated.sum())
    assert cov["blind_cells"] == [str(c) for c in blind]
    assert len(blind) > 0
    assert cov["share_populated_cells_sampled"] == pytest.approx(
        1 - len(blind) / populated.sum())
    md = run.build(cell_table=table).to_markdown()
    # One denominator for the cells, the cells with clients, in every line that counts them.
    assert (f"cells: {len(blind)} of {int(populated.sum()):,} cells with clients") in md
    assert f"of {int(populated.sum()):,} cells with clients; cells with no client" in md
    assert "cells of the partition" not in md
    assert f"`{blind[0]}`" in md


def test_zcdp_ledger_reports_epsilon_at_delta(run: Run) -> None:
    from spatialdp.privacy.budget import Disjoint, rho_to_epsilon

    with PrivacyLedger(":memory:", epoch_budget=2.0, accounting="zcdp") as ledger:
        ledger.spend(0, "evaluation.regional", rho=0.05, who="t", what="loss", why="card",
                     structure=Disjoint(run.partition.key, parts=48))
        card = ModelCard.build(partition=run.partition, ledger=ledger, delta=1e-6)
        blind = ModelCard.build(partition=run.partition, ledger=ledger)
    (epoch,) = card.to_dict()["privacy"]["epochs"]
    items = {li["line_item"]: li for li in epoch["line_items"]}
    assert items["evaluation.regional"]["spent"] == pytest.approx(0.05)
    expected = rho_to_epsilon(0.05, delta=1e-6)
    assert items["evaluation.regional"]["epsilon_per_client"] == pytest.approx(expected)
    assert epoch["epsilon_per_client"] == pytest.approx(expected)
    assert items["training"]["epsilon_per_client"] == 0.0
    assert card.to_dict()["privacy"]["unit"] == "rho"
    assert "Per-client epsilon converted from rho at delta = 1e-06." in card.to_markdown()
    # Without a delta the epsilon is unknown, and the card says so rather than guess.
    assert blind.to_dict()["privacy"]["epochs"][0]["epsilon_per_client"] is None


def test_a_report_written_with_sql_names_is_read_back(run: Run, tmp_path: Path) -> None:
    folder = RunFolder(tmp_path)
    folder.write_manifest(partition=run.partition, specs=[LOSS, ERRORS], ledger=False)
    report = run.reports[-1]
    report.write(tmp_path / "reports", stem="sql", names="sql")
    manifest = json.loads((tmp_path / "run.json").read_text())
    manifest["reports"] = ["reports/sql.json"]
    (tmp_path / "run.json").write_text(json.dumps(manifest))
    (section,) = folder.card().to_dict()["quantitative_analysis"]["rounds"]
    loss = {r["region_id"]: r for r in section["metrics"][0]["regions"]}
    assert loss["CA"]["value"] == pytest.approx(report["loss"].loc["CA", "value"])
    assert loss["VT"]["suppressed"]


def test_figure_paths_link_from_the_card_folder(run: Run, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "coverage_map.png").write_bytes(b"")
    card = ModelCard.build(partition=run.partition, coverage=run.coverage,
                           coverage_map="out/coverage_map.png",  # from the working folder
                           figures={"later": "maps/later.png"})  # no file: as given
    md, js = card.write("out")
    assert "](coverage_map.png)" in md.read_text()
    assert json.loads(js.read_text())["figures"] == {"later": "maps/later.png",
                                                      "coverage_map": "coverage_map.png"}
    with pytest.raises(InvalidInput, match=r"figures\['x'\]=3 is not a path"):
        ModelCard.build(partition=run.partition, figures={"x": 3})


def test_a_mixed_card_says_its_per_client_epsilon_bounds_neither_relation() -> None:
    from spatialdp.cards._sections import participation_text

    text = participation_text(["add_remove", "replace"])
    assert text.startswith("Mixed: some releases hold for replace-one neighbours")
    assert "bounds neither relation alone" in text
    assert "an add/remove charge counts up to twice" in text
    assert "bounds neither" not in participation_text(["replace"])
