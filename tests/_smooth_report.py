"""The simulated report the small-area map and card tests smooth (one recipe, two test files)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from spatialdp.datasets import synthetic_fleet
from spatialdp.federated import MetricSpec, device_report, regional_report
from spatialdp.federated.regional import RegionalReport
from spatialdp.geo import Partition
from spatialdp.privacy.target import Simulation

LOSS = MetricSpec("loss", 0.0, 4.0)


def simulated_loss_report(states: Partition) -> RegionalReport:
    """A loss report over ``states`` from 20,000 simulated devices (epsilon 0.5, floor 100)."""
    fleet = synthetic_fleet(20_000, rng=0)
    rng = np.random.default_rng(1)
    examples = pd.DataFrame({"client_id": fleet.device_id, "region_id": fleet.region_id,
                             "loss": rng.uniform(0, 2, len(fleet))})
    clients = device_report(examples, loss_spec=LOSS, partition=states)
    return regional_report(clients, states, [LOSS], epsilon=0.5, target=Simulation(rng=0),
                           min_cohort=100)
