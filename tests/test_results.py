"""The result objects' shared base: accounting, simulated, summary, repr and HTML agree."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from spatialdp._results import Result, accounting_note
from spatialdp.federated import MetricSpec, aggregate_metric
from spatialdp.geo import h3cells
from spatialdp.privacy import PrivacyLedger, ReleaseTarget, Simulation, Unaccounted
from spatialdp.queries import release_flat, truth_grid
from spatialdp.regression import Modulation, fit_one_shot, transform_clients


def _grid(target):
    cells = h3cells.grid_disk_lists(["85283473fffffff"], 1)[1]
    truth = truth_grid(cells, lon=[-121.9764], lat=[37.3458], device_ids=[7])
    return release_flat(truth, epsilon=1.0, target=target)


def _reports(target):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2_000, 2)) / 2
    return transform_clients(X, X @ [1.0, -1.0], modulation=Modulation(lam=1.0, radius=3.0),
                             rho=1.0, target=target)


def _release(target):
    frame = pd.DataFrame({"client_id": np.arange(200), "loss": np.linspace(0, 1, 200)})
    from spatialdp.federated import device_report

    reports = device_report(frame, loss_spec=MetricSpec("loss", 0.0, 1.0))
    return aggregate_metric(reports, MetricSpec("loss", 0.0, 1.0), epsilon=1.0, target=target)


MAKERS = {"NoisyGrid": _grid, "ClientReports": _reports,
          "RegressionFit": lambda t: fit_one_shot(_reports(t)),
          "MetricRelease": _release}


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_a_simulation_says_so_everywhere(kind: str) -> None:
    result = MAKERS[kind](Simulation(rng=1))
    assert isinstance(result, Result)
    assert result.simulated
    assert result.summary().endswith("[SIMULATION: not a release]")
    assert repr(result).startswith(f"{kind}(")
    block = result._repr_html_()
    assert block.startswith(f"<div class='spatialdp'><strong>{kind}</strong>")
    assert "SIMULATION: not a release" in block


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_a_ledger_release_carries_no_label(kind: str) -> None:
    zcdp = kind in ("ClientReports", "RegressionFit")  # a Gaussian release is charged rho
    ledger = PrivacyLedger(epoch_budget=100.0, accounting="zcdp" if zcdp else "pure")
    result = MAKERS[kind](ReleaseTarget(ledger, 0))
    assert not result.simulated
    assert result.accounting["accounting"] == "ledger"
    assert "SIMULATION" not in result.summary()
    assert "UNACCOUNTED" not in result.summary()


def test_unaccounted_names_its_reason() -> None:
    fit = MAKERS["RegressionFit"](Unaccounted("public synthetic data"))
    assert fit.summary().endswith("[UNACCOUNTED: public synthetic data]")
    assert accounting_note(fit.accounting) == " [UNACCOUNTED: public synthetic data]"


def test_the_summaries_state_the_numbers() -> None:
    grid = _grid(Simulation(rng=1))
    assert grid.summary().startswith(f"flat noisy grid: {grid.n_cells} cells at resolution 5,")
    assert grid.n_cells == 7
    reports = _reports(Simulation(rng=1))
    assert reports.summary().startswith("2000 client reports, d=2, sigma ")
    assert "public labels" in reports.summary()
