"""Modulated regression for clients holding one sample each, and its DP-SGD baseline.

Device side: :func:`transform_clients` (clip, cosine-modulate, Gaussian noise on
a lattice from OS entropy, or seeded for simulations). Server side: the
debiased moments (:func:`debiased_covariance`, :func:`unbiased_gradient`), the
one-shot estimator (:func:`fit_one_shot`) and the iterative protocol
(:func:`fit_iterative`). A planner (:func:`plan_regression`) predicts every
estimator's error before any budget is spent. :class:`ModulatedRegression` is
the scikit-learn face; :func:`fit_geodataframe` fits from a spatial join;
:func:`fit_dpsgd` is the baseline; :func:`reconstruction_bound` the
Cramér-Rao bound; :func:`compare_estimators` the comparison on real data (every row one
client) that ``benchmarks/reproduce_modulated.py`` runs in full. See ``docs/modulated.md``.

``ModulatedRegression`` (scikit-learn), the spatial helpers (GeoPandas) and the
comparison (pandas) are imported on first use, so that the numerical core loads fast.
"""

from __future__ import annotations

import importlib
from typing import Any

from spatialdp.regression.accounting import resolve_rho, rho_for_epsilon
from spatialdp.regression.client import ClientReports, transform_clients
from spatialdp.regression.dpsgd import fit_dpsgd, tune_dpsgd
from spatialdp.regression.iterative import fit_iterative
from spatialdp.regression.lattice_gaussian import LatticeGaussianMechanism
from spatialdp.regression.modulation import Modulation, clip_rows, modulate, random_directions
from spatialdp.regression.oneshot import fit_one_shot
from spatialdp.regression.planner import FeasibilityWarning, RegressionPlan, plan_regression
from spatialdp.regression.reconstruction import reconstruction_bound, reconstruction_table
from spatialdp.regression.regularization import Regularization, optimal_ridge
from spatialdp.regression.results import RegressionFit
from spatialdp.regression.server import (
    debiased_covariance,
    debiased_cross_moment,
    project_ball,
    project_psd,
    unbiased_gradient,
)

__all__ = [
    "ClientReports",
    "FeasibilityWarning",
    "LatticeGaussianMechanism",
    "ModulatedRegression",
    "Modulation",
    "NotFitted",
    "RegressionFit",
    "RegressionPlan",
    "Regularization",
    "clip_rows",
    "compare_estimators",
    "debiased_covariance",
    "debiased_cross_moment",
    "fit_dpsgd",
    "fit_geodataframe",
    "fit_iterative",
    "fit_one_shot",
    "load_reproduction_data",
    "modulate",
    "optimal_ridge",
    "plan_regression",
    "project_ball",
    "project_psd",
    "random_directions",
    "reconstruction_bound",
    "reconstruction_table",
    "reproduction_findings",
    "resolve_rho",
    "rho_for_epsilon",
    "spatial_features",
    "transform_clients",
    "tune_dpsgd",
    "unbiased_gradient",
]

_LAZY = {
    "ModulatedRegression": "spatialdp.regression.estimator",
    "NotFitted": "spatialdp.exceptions",
    "compare_estimators": "spatialdp.regression.reproduction",
    "load_reproduction_data": "spatialdp.regression.reproduction",
    "reproduction_findings": "spatialdp.regression.reproduction",
    "fit_geodataframe": "spatialdp.regression.spatial",
    "spatial_features": "spatialdp.regression.spatial",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'spatialdp.regression' has no attribute {name!r}")
