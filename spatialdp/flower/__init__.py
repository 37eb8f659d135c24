"""Flower integration: private regional evaluation and stratified client selection.

:class:`SpatialDPStrategy` wraps any Flower strategy: it chooses the clients of
``configure_fit`` and ``configure_evaluate`` with spatialdp's
:class:`~spatialdp.sampling.StratifiedSampler` (strata from each client's region,
reported once and frozen), owns the evaluation instructions, and releases each
round's evaluation per region with noise added once, charged to the ledger
(:func:`release_evaluation`, usable without Flower). The training line comes from
the wrapped strategy (:func:`training_privacy`): derived from Flower's
fixed-clipping DP wrapper's noise, or recorded as not private. The client side
turns local predictions into the bounded report (:func:`bounded_report`).
``flwr`` is an optional extra (``pip install 'spatialdp[flower]'``): only
:mod:`spatialdp.flower.strategy`, :mod:`spatialdp.flower.training`,
:mod:`spatialdp.flower.simulation` and :mod:`spatialdp.flower.demo` import
it. Names resolve on first use (:mod:`spatialdp._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spatialdp._lazy import attach

if TYPE_CHECKING:  # the public names, imported on first use (spatialdp._lazy)
    from spatialdp.flower.client import (
        bounded_evaluate_result,
        bounded_report,
        evaluation_specs,
        registration_properties,
    )
    from spatialdp.flower.codec import decode_reports, encode_report, specs_to_config
    from spatialdp.flower.evaluation import (
        EvaluationRelease,
        published_metrics,
        release_evaluation,
    )
    from spatialdp.flower.secagg import EVALUATION_TRUST, check_secaggplus
    from spatialdp.flower.simulation import InProcessClientProxy, run_inprocess
    from spatialdp.flower.strategy import SpatialDPStrategy
    from spatialdp.flower.training import TrainingPrivacy, training_privacy

__getattr__, __dir__ = attach(__name__, __file__)

__all__ = [
    "EVALUATION_TRUST",
    "EvaluationRelease",
    "InProcessClientProxy",
    "SpatialDPStrategy",
    "TrainingPrivacy",
    "bounded_evaluate_result",
    "bounded_report",
    "check_secaggplus",
    "decode_reports",
    "encode_report",
    "evaluation_specs",
    "published_metrics",
    "registration_properties",
    "release_evaluation",
    "run_inprocess",
    "specs_to_config",
    "training_privacy",
]
