"""The main job: a monitored private evaluation epoch, end to end, on shipped data.

On the shipped 48-state partition (or any polygon layer) and a synthetic fleet
placed by real city population, an epoch of several rounds: stratified cohort
selection (sqrt allocation, participation caps, merges), device-side metrics
from a simulated positioning model (worse in some regions, drifting sideways in
one from a given round on), noise-once regional releases charged to a SQLite
ledger, round-to-round alerts and a drift test, a query-error audit on real
polygons and the model card; every output is built aside and published into
the output folder atomically (:mod:`spatialdp._atomic`).

Modules: :mod:`~spatialdp.demo.world` (the seeded simulated world),
:mod:`~spatialdp.demo.epoch` (the rounds, charged), :mod:`~spatialdp.demo.audit`
(query error), :mod:`~spatialdp.demo.outputs` (figures and maps),
:mod:`~spatialdp.demo.progress` (tqdm bars), :mod:`~spatialdp.demo.run`
(:func:`run_demo`).
"""

from __future__ import annotations

from spatialdp.demo.run import EPOCH_BUDGET, DemoResult, load_partition, run_demo, runs_table

__all__ = ["EPOCH_BUDGET", "DemoResult", "load_partition", "run_demo", "runs_table"]
