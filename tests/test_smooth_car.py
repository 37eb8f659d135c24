"""The CAR spatial Fay-Herriot model: recovery of simulated parameters, refusals, end to end."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse

from spatialdp.datasets import us_states_partition
from spatialdp.exceptions import InvalidInput
from spatialdp.smooth import small_area_estimates
from spatialdp.smooth.car import car_adjacency
from spatialdp.smooth.sparse_spatial import fit_sparse
from tests._loss_report import simulated_loss_report
from tests.test_smooth_sparse import simulated

TRUE_S2U, TRUE_RHO, TRUE_BETA = 0.3, 0.8, (1.0, 0.5)


@pytest.mark.parametrize("method", ["REML", "ML"])
def test_the_car_fit_recovers_simulated_parameters_within_their_standard_errors(method):
    model, _ = simulated(22, 7, kind="car", rho=TRUE_RHO, s2u=TRUE_S2U, beta=TRUE_BETA,
                         share=0.8)
    fit = fit_sparse(model, method)
    se = fit.parameter_se
    assert np.isfinite(se).all()
    assert se[0] > 0
    assert se[1] > 0
    assert abs(fit.s2u - TRUE_S2U) < 3 * se[0]
    assert abs(fit.rho - TRUE_RHO) < 3 * se[1]
    beta_se = np.sqrt(np.diag(fit.beta_cov))
    assert (np.abs(fit.beta - np.array(TRUE_BETA)) < 3 * beta_se).all()


def test_the_car_model_end_to_end_on_the_states():
    states = us_states_partition()
    report = simulated_loss_report(states)
    smooth = small_area_estimates(report, model="car", weights=states, include_suppressed=True,
                                  client_variance=1 / 3)
    assert smooth.model == "car"
    assert np.isfinite(smooth.rho)
    assert smooth.sigma2_u >= 0
    assert smooth.spatial_test is not None
    assert "rho" in smooth.summary()
    assert "CAR" in smooth.summary()
    assert "sparse" in smooth.mse_method
    shown = smooth.frame[smooth.frame.label != "suppressed"]
    assert (shown.mse > 0).all()
    assert set(shown.label) <= {"direct", "composite", "modelled"}
    assert (smooth.frame.label == "modelled").sum() == report["loss"].suppressed.sum()


def test_the_car_lr_statistic_is_large_when_rho_is():
    model, _ = simulated(16, 11, kind="car", rho=0.95, s2u=1.0, share=0.9)
    full = fit_sparse(model)
    null = fit_sparse(model, rho=0.0)
    assert null.rho == 0.0
    assert np.isnan(null.fisher).all()
    assert 2 * (full.loglik - null.loglik) > 10.8  # chi-squared(1) at 0.1%


def test_the_car_refuses_asymmetric_graphs_and_islands():
    asymmetric = sparse.csr_array(np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]], float))
    with pytest.raises(InvalidInput, match="not symmetric"):
        car_adjacency(asymmetric)
    island = sparse.csr_array(np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]], float))
    with pytest.raises(InvalidInput, match="1 region\\(s\\) have no neighbour"):
        car_adjacency(island)


def test_the_car_model_needs_weights():
    states = us_states_partition()
    report = simulated_loss_report(states)
    with pytest.raises(InvalidInput, match="weights=None is needed by the spatial model"):
        small_area_estimates(report, model="car", client_variance=1 / 3)
