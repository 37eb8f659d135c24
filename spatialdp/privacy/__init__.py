"""The accountable core: release noise, error bars, and the privacy ledger.

Two random paths never mix: ``release_*`` functions
(:mod:`spatialdp.privacy.release`) and ``Mechanism.release`` draw from OS
entropy and take no seed; ``simulate_*`` (:mod:`spatialdp.privacy.simulate`)
and ``Mechanism.simulate`` take ``rng=`` (a numpy Generator or seed) and are for
measuring error only. Noise scales come from one exact rule,
:mod:`spatialdp.privacy.calibration`; the mechanisms live in
:mod:`spatialdp.privacy.noise`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spatialdp._lazy import attach

if TYPE_CHECKING:  # the public names, imported on first use (spatialdp._lazy)
    from spatialdp.privacy.accuracy import (
        NOISE_KINDS,
        Accuracy,
        half_width,
        mean_abs_error,
        noise_std,
        scale_for_half_width,
        tail_probability,
    )
    from spatialdp.privacy.budget import (
        BudgetSplit,
        BudgetSplitWarning,
        Disjoint,
        LineItem,
        Overlapping,
        Single,
        epsilon_to_rho,
        rho_to_epsilon,
    )
    from spatialdp.privacy.cadence import CadencePlan, cadence_table, plan_cadence
    from spatialdp.privacy.calibration import MAX_SCALE, gaussian_sigma, laplace_scale
    from spatialdp.privacy.ledger import Charge, PrivacyLedger
    from spatialdp.privacy.noise import GaussianMechanism, LaplaceMechanism, PrivacyLoss
    from spatialdp.privacy.release import (
        release_discrete_gaussian,
        release_discrete_laplace,
        release_gaussian,
        release_laplace,
    )
    from spatialdp.privacy.simulate import (
        simulate_discrete_gaussian,
        simulate_discrete_laplace,
        simulate_gaussian,
        simulate_laplace,
    )
    from spatialdp.privacy.target import ReleaseTarget, Simulation, Unaccounted

__getattr__, __dir__ = attach(__name__, __file__)

__all__ = [
    "MAX_SCALE",
    "NOISE_KINDS",
    "Accuracy",
    "BudgetSplit",
    "BudgetSplitWarning",
    "CadencePlan",
    "Charge",
    "Disjoint",
    "GaussianMechanism",
    "LaplaceMechanism",
    "LineItem",
    "Overlapping",
    "PrivacyLedger",
    "PrivacyLoss",
    "ReleaseTarget",
    "Simulation",
    "Single",
    "Unaccounted",
    "cadence_table",
    "epsilon_to_rho",
    "gaussian_sigma",
    "half_width",
    "laplace_scale",
    "mean_abs_error",
    "noise_std",
    "plan_cadence",
    "release_discrete_gaussian",
    "release_discrete_laplace",
    "release_gaussian",
    "release_laplace",
    "rho_to_epsilon",
    "scale_for_half_width",
    "simulate_discrete_gaussian",
    "simulate_discrete_laplace",
    "simulate_gaussian",
    "simulate_laplace",
    "tail_probability",
]
