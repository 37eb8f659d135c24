"""The comparison on real data (``compare_estimators``) that the benchmark and the notebook run."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from spatialdp.exceptions import InvalidInput
from spatialdp.regression import compare_estimators, load_reproduction_data
from spatialdp.regression.reproduction import ESTIMATORS

ROOT = Path(__file__).resolve().parent.parent


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
    spec = importlib.util.spec_from_file_location(
        "reproduce_modulated", ROOT / "benchmarks" / "reproduce_modulated.py")
    assert spec is not None
    assert spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    from spatialdp.regression import reproduction_findings

    assert script.findings is reproduction_findings
    pd.testing.assert_frame_equal(script.run(["modechoice"], 2, [8.0], progress=False),
                                  compare_estimators(["modechoice"], seeds=2, epsilons=[8.0]))


def test_unknown_data_set_is_refused() -> None:
    with pytest.raises(InvalidInput, match=r"name='iris' is not a data set of the "
                                           r"reproduction; pass one of \['fair'"):
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
