"""The comparison on real data (``compare_estimators``) that the benchmark and the notebook run."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from spatialdp.exceptions import InvalidInput
from spatialdp.privacy.pipeline import exact_total
from spatialdp.regression import (
    Modulation,
    compare_estimators,
    load_reproduction_data,
    reproduction_findings,
)
from spatialdp.regression.accounting import rho_for_epsilon
from spatialdp.regression.reproduction import (
    ESTIMATORS,
    LABEL_PRIVATE,
    LABEL_PUBLIC,
    LEARNABLE_R2,
    PROTECTS,
    _ols_r2,
    _one_shot_label_private,
    label_budget_split,
    standardised_split,
)

ROOT = Path(__file__).resolve().parent.parent


def load_script() -> Any:
    spec = importlib.util.spec_from_file_location(
        "reproduce_modulated", ROOT / "benchmarks" / "reproduce_modulated.py")
    assert spec is not None
    assert spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def toy(n: int = 300) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(1)
    X = rng.normal(size=(n, 3))
    return {"toy": (X, X @ np.array([1.0, -0.5, 0.2]) + rng.normal(size=n))}


def test_table_has_one_row_per_estimator_and_budget_and_is_seeded() -> None:
    table = compare_estimators(toy(), seeds=2, epsilons=[1.0, 8.0])
    assert list(table["estimator"]) == [*ESTIMATORS, *ESTIMATORS]
    assert len(table.attrs["per_seed"]) == 2 * 2 * len(ESTIMATORS)
    again = compare_estimators(toy(), seeds=2, epsilons=[1.0, 8.0])
    pd.testing.assert_frame_equal(table, again)  # every fit is a seeded Simulation


def test_benchmark_runs_the_library_comparison() -> None:
    script = load_script()
    assert script.findings is reproduction_findings
    pd.testing.assert_frame_equal(script.run(["modechoice"], 2, [8.0], progress=False),
                                  compare_estimators(["modechoice"], seeds=2, epsilons=[8.0]))


def test_unknown_data_set_is_refused() -> None:
    with pytest.raises(InvalidInput, match=r"name='iris' is not a data set of the "
                                           r"reproduction; pass one of \['fair_affairs', "
                                           r"'fair_yrs_married', 'modechoice'\]"):
        load_reproduction_data("iris")


def test_one_seed_is_refused() -> None:
    with pytest.raises(InvalidInput, match=r"seeds=1 is below the limit >= 2; pass at least 2"):
        compare_estimators(toy(), seeds=1, epsilons=[1.0])


def test_no_budget_is_refused() -> None:
    with pytest.raises(InvalidInput, match=r"epsilons=\[\] is empty; pass at least one"):
        compare_estimators(toy(), seeds=2, epsilons=[])


def test_non_positive_budget_is_refused() -> None:
    with pytest.raises(InvalidInput, match=r"epsilons=0"):
        compare_estimators(toy(), seeds=2, epsilons=[0.0])


def test_data_that_is_not_a_pair_is_refused() -> None:
    with pytest.raises(InvalidInput, match=r"(?s)datasets\['toy'\]=.* is not a pair \(X, y\)"):
        compare_estimators({"toy": np.ones((30, 2))}, seeds=2, epsilons=[1.0])


def test_labels_that_do_not_match_the_rows_are_refused() -> None:
    X, y = toy()["toy"]
    with pytest.raises(InvalidInput, match=r"'300 feature rows, 299 labels' do not match or "
                                           r"are fewer than 25; give one label per"):
        compare_estimators({"toy": (X, y[:-1])}, seeds=2, epsilons=[1.0])


def test_non_finite_features_are_refused() -> None:
    X, y = toy()["toy"]
    X[3, 1] = np.nan
    with pytest.raises(InvalidInput, match=r"datasets\['toy'\] X has 1 NaN or infinite"):
        compare_estimators({"toy": (X, y)}, seeds=2, epsilons=[1.0])


def test_the_two_fair_targets_differ_in_what_there_is_to_learn() -> None:
    r2 = {}
    for name in ("fair_affairs", "fair_yrs_married"):
        X, y, names = load_reproduction_data(name)
        assert X.shape == (6366, 8)
        assert name.removeprefix("fair_") not in names  # the target is not a feature
        r2[name] = _ols_r2(*standardised_split(X, y, 0)["train"])
    assert r2["fair_affairs"] < LEARNABLE_R2 < r2["fair_yrs_married"]


@pytest.fixture(scope="module")
def small_table() -> pd.DataFrame:
    return compare_estimators(toy(), seeds=2, epsilons=[8.0])


def test_every_row_states_what_its_estimator_protects_and_the_ols_r2(small_table) -> None:
    table = small_table
    assert dict(zip(table["estimator"], table["protects"], strict=True)) == PROTECTS
    assert all(PROTECTS[e] == "x only (y public)" for e in LABEL_PUBLIC)
    assert all(PROTECTS[e] == "x and y" for e in LABEL_PRIVATE)
    X, y = toy()["toy"]
    r2 = np.mean([_ols_r2(*standardised_split(X, y, s)["train"]) for s in range(2)])
    assert table["ols_r2"].unique() == pytest.approx([r2])


def test_label_private_fits_noise_the_labels_at_the_same_total_rho() -> None:
    X, y = toy()["toy"]
    rho = rho_for_epsilon(2.0, 1e-6)
    fit = _one_shot_label_private(X, y, rho, 0.0)({"radius": 2.0, "label_bound": 2.0}, 0)
    assert fit.rho <= rho
    assert fit.rho == pytest.approx(rho, rel=1e-12)


def test_label_budget_split_spends_exactly_the_total_and_follows_the_noise_model() -> None:
    mod = Modulation(lam=0.0, radius=2.0)
    splits = {b: label_budget_split(0.1, n_clients=4000, n_features=8, modulation=mod,
                                    label_bound=b) for b in (0.5, 2.0, 8.0)}
    for rx, ry in splits.values():
        assert exact_total([rx, ry]) <= 0.1
        assert rx + ry == pytest.approx(0.1, rel=1e-12)
    # a wider label range needs more label noise: the label gets a larger share
    shares = [splits[b][1] for b in (0.5, 2.0, 8.0)]
    assert shares == sorted(shares)
    assert shares[0] < shares[-1]


def fake_table(gap: float, r2: dict[str, float]) -> pd.DataFrame:
    """A per-seed table: label-private one-shot beats local DP-SGD by ``gap`` everywhere."""
    rng = np.random.default_rng(0)
    rows = []
    for name, r in r2.items():
        for eps in (1.0, 8.0):
            for seed in range(10):
                base = 1.0 + 0.1 * rng.normal()
                for est in ESTIMATORS:
                    mse = base * (1 - r) if est == "ols" else base
                    if est == "one_shot_label_private":
                        mse = base * (1 - gap)
                    rows.append({"dataset": name, "ols_r2": r, "epsilon": eps, "seed": seed,
                                 "estimator": est, "mse": mse + 1e-3 * rng.normal()})
    table = pd.DataFrame()
    table.attrs["per_seed"] = pd.DataFrame(rows)
    return table


def test_findings_are_read_from_the_table_not_written_in_advance() -> None:
    better = reproduction_findings(fake_table(0.3, {"signal": 0.8}))
    worse = reproduction_findings(fake_table(-0.3, {"signal": 0.8}))
    suffer = [line for line in better if "suffering against one_shot_label_private" in line]
    assert "HOLDS. DP-SGD worse at epsilon in [1.0, 8.0], better at []" in suffer[0]
    suffer = [line for line in worse if "suffering against one_shot_label_private" in line]
    assert "DOES NOT HOLD. DP-SGD worse at epsilon in [], better at [1.0, 8.0]" in suffer[0]
    beats = next(line for line in better if "beats predicting the mean" in line)
    assert "protecting x and y, at epsilon in [1.0, 8.0]" in beats
    assert "protecting x only (y public), at epsilon in none" in beats


def test_a_target_with_nothing_to_learn_is_said_to_be_one() -> None:
    lines = reproduction_findings(fake_table(0.3, {"flat": 0.02, "signal": 0.8}))
    flat = [line for line in lines if line.startswith("- **flat**")]
    assert len(flat) == 1
    assert "OLS R^2 = 0.020" in flat[0]
    assert "LITTLE TO LEARN" in flat[0]
    assert "beats predicting the mean" not in flat[0]
    assert sum(line.startswith("- **signal**") for line in lines) > 1


def test_the_markdown_table_states_protection_and_r2_and_docs_are_rewritten(
        small_table, tmp_path: Path) -> None:
    script = load_script()
    text = script.report(small_table)
    assert "**toy** (OLS R^2 = " in text
    assert "| estimator | protects | eps=8 |" in text
    assert "| one_shot_label_private | x and y | " in text
    assert "| nss | x only (y public) | " in text
    page = tmp_path / "page.md"
    page.write_text(f"intro\n{script.BEGIN}\nold table\n{script.END}\noutro\n")
    script.write_docs(text, page)
    assert page.read_text() == f"intro\n{script.BEGIN}\n{text}\n{script.END}\noutro\n"
    assert (ROOT / "docs" / "modulated.md").read_text().count(script.BEGIN) == 1


def test_a_page_without_the_generated_section_is_refused(tmp_path: Path) -> None:
    script = load_script()
    page = tmp_path / "page.md"
    page.write_text("no markers here\n")
    with pytest.raises(SystemExit, match=r"must hold exactly one '<!-- reproduction:begin"):
        script.write_docs("text", page)
