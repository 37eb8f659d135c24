"""Run a Flower strategy in this process, without Ray: real Server, ClientManager, clients.

Flower's simulation engine runs each client in a Ray actor, which is heavy for a
test suite or a laptop run of a few hundred clients. :class:`InProcessClientProxy`
is a :class:`flwr.server.client_proxy.ClientProxy` that hands each instruction to
a Flower ``Client`` (or ``NumPyClient``) object in this process, and
:func:`run_inprocess` registers such proxies with Flower's
``SimpleClientManager`` and runs Flower's own ``Server.fit`` loop: the rounds,
the thread pool that calls the clients, and the ``History`` are Flower's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spatialdp._validation import check_count, fail
from spatialdp.flower._flwr import flwr_modules

flwr_modules()  # imports Flower quietly, or names the missing extra
from flwr.client import Client, NumPyClient  # noqa: E402
from flwr.common import DisconnectRes  # noqa: E402
from flwr.server import History, Server, SimpleClientManager  # noqa: E402
from flwr.server.client_proxy import ClientProxy  # noqa: E402

__all__ = ["InProcessClientProxy", "run_inprocess"]


def _as_client(client: Any) -> Any:
    """Return a Flower ``Client`` for a ``Client`` or ``NumPyClient`` object."""
    if isinstance(client, NumPyClient):
        return client.to_client()
    if isinstance(client, Client):
        return client
    raise fail("client", type(client).__name__, "is not a Flower Client or NumPyClient",
               "pass flwr.client.NumPyClient (or Client) objects")


class InProcessClientProxy(ClientProxy):
    """A Flower ClientProxy whose client lives in this process.

    Parameters
    ----------
    cid : str
        The client id Flower's ClientManager keys it by.
    client : flwr.client.Client or flwr.client.NumPyClient
    """

    def __init__(self, cid: str, client: Any) -> None:
        super().__init__(str(cid))
        self.client = _as_client(client)

    def get_properties(self, ins: Any, timeout: float | None, group_id: int | None) -> Any:
        """Ask the client for its properties (the region it registers)."""
        return self.client.get_properties(ins)

    def get_parameters(self, ins: Any, timeout: float | None, group_id: int | None) -> Any:
        """Ask the client for its parameters."""
        return self.client.get_parameters(ins)

    def fit(self, ins: Any, timeout: float | None, group_id: int | None) -> Any:
        """Train on the client."""
        return self.client.fit(ins)

    def evaluate(self, ins: Any, timeout: float | None, group_id: int | None) -> Any:
        """Evaluate on the client."""
        return self.client.evaluate(ins)

    def reconnect(self, ins: Any, timeout: float | None, group_id: int | None) -> Any:
        """Nothing to disconnect in process."""
        return DisconnectRes(reason="in-process client")


def run_inprocess(strategy: Any, clients: Mapping[str, Any], *, num_rounds: int,
                  max_workers: int | None = None) -> History:
    """Run ``num_rounds`` of Flower's server loop over in-process clients.

    Parameters
    ----------
    strategy : flwr.server.strategy.Strategy
        Any Flower strategy (e.g. a :class:`~spatialdp.flower.SpatialDPStrategy`).
    clients : mapping client id -> Client or NumPyClient
    num_rounds : int
    max_workers : int, optional
        Threads of Flower's client pool (Flower's default when None).

    Returns
    -------
    flwr.server.History
        Flower's record of the run (what a server-side dashboard reads).

    Raises
    ------
    InvalidInput
        Bad arguments, or more rounds than a ``SpatialDPStrategy``'s
        ``num_rounds`` (checked before the first round).
    """
    if not isinstance(clients, Mapping) or not clients:
        raise fail("clients", type(clients).__name__, "is not a non-empty mapping",
                   "pass {client_id: NumPyClient}")
    rounds = check_count(num_rounds, "num_rounds", low=1)
    planned = getattr(strategy, "num_rounds", None)  # a SpatialDPStrategy's training rounds
    if isinstance(planned, int) and rounds > planned:
        raise fail("num_rounds", rounds, f"exceeds the strategy's num_rounds={planned} (the "
                   "rounds its training charge covers)", f"run at most {planned} rounds, or "
                   "build the strategy with the run's num_rounds")
    manager = SimpleClientManager()
    for cid, client in clients.items():
        manager.register(InProcessClientProxy(str(cid), client))
    flower_server = Server(client_manager=manager, strategy=strategy)
    flower_server.set_max_workers(max_workers)
    history, _ = flower_server.fit(num_rounds=rounds, timeout=None)
    return history
