"""A small federated task on the shipped geography: logistic regression, one client per device.

Used by the example script (``examples/flower_simulation.py``) and the tests.
Each device of :func:`spatialdp.datasets.synthetic_fleet` holds a few labelled
examples; the label depends on the features and, a little, on the device's
latitude, so regional metrics differ. :class:`LogisticClient` is an ordinary
Flower ``NumPyClient``: ``fit`` runs local gradient steps, ``evaluate`` answers
with the bounded report only (:func:`~spatialdp.flower.client.bounded_evaluate_result`),
``get_properties`` registers the device's region.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp._random import RandomLike, as_generator
from spatialdp._validation import check_count
from spatialdp.datasets import synthetic_fleet, us_states_partition
from spatialdp.flower._flwr import flwr_modules
from spatialdp.flower.client import bounded_evaluate_result, registration_properties
from spatialdp.geo.partition import Partition

flwr_modules()
from flwr.client import NumPyClient  # noqa: E402  (imported quietly by flwr_modules first)

__all__ = ["N_FEATURES", "LogisticClient", "make_clients"]

#: Features per example (an intercept and three covariates).
N_FEATURES = 4
_TRUE = np.array([-0.3, 1.2, -0.8, 0.5])


def _sigmoid(z: NDArray[np.float64]) -> NDArray[np.float64]:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -30, 30)))


class LogisticClient(NumPyClient):
    """One device: local examples, local SGD, bounded evaluation report.

    Parameters
    ----------
    X : array, shape (n, N_FEATURES)
    y : array of 0/1, shape (n,)
    region_id : str
    partition : Partition
    lr : float
    local_steps : int
    """

    def __init__(self, X: NDArray[np.float64], y: NDArray[np.float64], region_id: str,
                 partition: Partition, *, lr: float = 0.5, local_steps: int = 5) -> None:
        self.X, self.y = X, y
        self.region_id = region_id
        self.partition = partition
        self.lr, self.local_steps = lr, local_steps

    def get_properties(self, config: dict[str, Any]) -> dict[str, Any]:
        """Register this device's region (read once by the wrapper)."""
        return registration_properties(self.region_id, self.partition)

    def get_parameters(self, config: dict[str, Any]) -> list[NDArray[np.float64]]:
        """Start from zeros."""
        return [np.zeros(N_FEATURES)]

    def fit(self, parameters: list[NDArray[np.float64]], config: dict[str, Any]
            ) -> tuple[list[NDArray[np.float64]], int, dict[str, Any]]:
        """Run full-batch gradient steps on the local examples."""
        w = np.array(parameters[0], dtype=np.float64)
        for _ in range(self.local_steps):
            w -= self.lr * self.X.T @ (_sigmoid(self.X @ w) - self.y) / len(self.y)
        return [w], len(self.y), {}

    def examples(self, parameters: list[NDArray[np.float64]]) -> pd.DataFrame:
        """Return the per-example evaluation columns: log loss and absolute error."""
        p = _sigmoid(self.X @ np.asarray(parameters[0], dtype=np.float64))
        eps = 1e-12
        loss = -(self.y * np.log(p + eps) + (1 - self.y) * np.log(1 - p + eps))
        return pd.DataFrame({"loss": loss, "error": np.abs(p - self.y)})

    def evaluate(self, parameters: list[NDArray[np.float64]], config: dict[str, Any]
                 ) -> tuple[float, int, dict[str, Any]]:
        """Answer with the bounded report only: clipped on this device."""
        return bounded_evaluate_result(self.examples(parameters), config,
                                       partition=self.partition, region_id=self.region_id)


def make_clients(n_clients: int, *, rng: RandomLike = None, partition: Partition | None = None,
                 client_class: type[LogisticClient] = LogisticClient
                 ) -> tuple[dict[str, LogisticClient], pd.DataFrame]:
    """Return ``{client id: client}`` for ``n_clients`` devices of the synthetic fleet.

    Returns
    -------
    clients : dict
    fleet : DataFrame
        The fleet (``device_id``, ``lon``, ``lat``, ``region_id``...), with ``cid``.

    Examples
    --------
    >>> clients, fleet = make_clients(20, rng=0)
    >>> len(clients), fleet.region_id.notna().all()
    (20, np.True_)
    """
    n = check_count(n_clients, "n_clients", low=1)
    gen = as_generator(rng)
    states = us_states_partition() if partition is None else partition
    fleet = synthetic_fleet(n, rng=gen).reset_index(drop=True)
    fleet["cid"] = [f"device-{i}" for i in fleet.device_id]
    sizes = gen.integers(5, 41, n)
    lat_z = ((fleet.lat.to_numpy() - 38.0) / 6.0)
    clients: dict[str, LogisticClient] = {}
    for i, (cid, region) in enumerate(zip(fleet.cid, fleet.region_id, strict=True)):
        X = np.column_stack([np.ones(sizes[i]), gen.normal(size=(sizes[i], N_FEATURES - 1))])
        shift = 0.8 * lat_z[i]  # the north sees more positives: regional metrics differ
        y = (gen.random(sizes[i]) < _sigmoid(X @ _TRUE + shift)).astype(np.float64)
        clients[cid] = client_class(X, y, str(region), states)
    return clients, fleet
