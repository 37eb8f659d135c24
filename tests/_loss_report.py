"""One recipe for the simulated loss reports several test files draw, smooth and card."""

from __future__ import annotations

import numpy as np
import pandas as pd

from spatialdp.datasets import synthetic_fleet
from spatialdp.federated import MetricSpec, device_report, regional_report
from spatialdp.federated.regional import RegionalReport
from spatialdp.geo import Partition
from spatialdp.privacy.target import Simulation

LOSS = MetricSpec("loss", 0.0, 4.0)


def simulated_loss_report(states: Partition, *, loss: float | None = None,
                          epsilon: float = 0.5) -> RegionalReport:
    """A loss report over ``states`` from 20,000 simulated devices (floor 100).

    Each device's loss is ``loss`` (one true value everywhere) or, by default,
    uniform on [0, 2].
    """
    fleet = synthetic_fleet(20_000, rng=0)
    values = (np.random.default_rng(1).uniform(0, 2, len(fleet)) if loss is None
              else np.full(len(fleet), loss))
    examples = pd.DataFrame({"client_id": fleet.device_id, "region_id": fleet.region_id,
                             "loss": values})
    clients = device_report(examples, loss_spec=LOSS, partition=states)
    return regional_report(clients, states, [LOSS], epsilon=epsilon, target=Simulation(rng=0),
                           min_cohort=100)
