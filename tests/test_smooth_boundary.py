"""The spatial model at the boundary ``s2u = 0`` (no area effect left to estimate)."""

from __future__ import annotations

import numpy as np

from spatialdp.smooth.spatial import SarModel, fit_sar, sar_predict


def test_a_spatial_fit_at_s2u_zero_predicts_instead_of_failing():
    # Regions that differ only by their (large) noise: REML puts s2u on the boundary,
    # where rho is not identified and the Fisher information is singular. The
    # prediction used to raise LinAlgError("Singular matrix") here.
    n = 12
    W = np.zeros((n, n))
    for i in range(n):
        W[i, (i - 1) % n] = W[i, (i + 1) % n] = 0.5
    y = np.array([1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99, 1.0, 1.0, 1.0])
    model = SarModel(y, np.ones((n, 1)), np.full(n, 4.0), W, np.ones(n, dtype=bool))
    fit = fit_sar(model)
    assert fit.s2u == 0.0
    assert np.linalg.matrix_rank(fit.fisher) < 2
    eblup, mse, own, synthetic = sar_predict(model, fit)
    assert np.allclose(eblup, synthetic)          # all weight on the regression
    assert np.isfinite(mse).all()
    assert (mse > 0).all()
    assert np.allclose(own, 0.0)
