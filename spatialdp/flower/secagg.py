"""What secure aggregation covers in a wrapped Flower run, and a SecAgg+ set-up it refuses.

Flower's SecAgg+ (``flwr.server.workflow.SecAggPlusWorkflow`` with
``secaggplus_mod`` on the clients) protects the **training** updates only: the
server sees their weighted sum, not each client's update. **Evaluation** goes
through Flower's default path in the clear: each client's bounded report (clipped
values, never raw data) reaches the server, which adds the noise once per region.
The differential-privacy guarantee covers what is published; it assumes a
trusted server for the per-client reports (:data:`EVALUATION_TRUST`).

An integer ``num_shares`` that is even (and not the whole cohort) halts SecAgg+
rounds: Flower warns that shares should be odd, adds one on the server, but has
already told the clients the even number, and the clients fail with
``IndexError``. :func:`check_secaggplus` refuses it before training.

Examples
--------
>>> from flwr.server.workflow import SecAggPlusWorkflow
>>> from spatialdp.exceptions import InvalidInput
>>> _ = check_secaggplus(SecAggPlusWorkflow(num_shares=3, reconstruction_threshold=2))
>>> try:
...     check_secaggplus(SecAggPlusWorkflow(num_shares=4, reconstruction_threshold=2))
... except InvalidInput as err:
...     print(str(err).split(" is ")[0])
secure_aggregation.num_shares=4
"""

from __future__ import annotations

from typing import Any

from spatialdp._validation import fail
from spatialdp.flower._flwr import flwr_modules

flwr_modules()  # imports Flower quietly, or names the missing extra
from flwr.server.workflow import SecAggPlusWorkflow  # noqa: E402

__all__ = ["EVALUATION_TRUST", "check_secaggplus"]

#: The limitation every wrapped run states (logs, ``SpatialDPStrategy.limitations``, cards).
EVALUATION_TRUST = (
    "evaluation assumes a trusted server: each client's bounded (clipped) evaluation report "
    "reaches the Flower server in the clear, which adds the noise once per region; "
    "differential privacy protects what is published, and secure aggregation (SecAgg+), "
    "when used, protects the training updates only")


def check_secaggplus(workflow: Any, cohort: int | None = None) -> Any:
    """Return a SecAgg+ workflow whose share count the clients can use, else refuse it.

    Parameters
    ----------
    workflow : flwr.server.workflow.SecAggPlusWorkflow
        The workflow the ServerApp runs training under.
    cohort : int, optional
        The training cohort when it is fixed (a fit sampler's cohort, a DP
        wrapper's ``num_sampled_clients``): ``num_shares`` equal to it is fine.

    Raises
    ------
    InvalidInput
        Not a SecAgg+ workflow, or an even integer ``num_shares`` other than
        the cohort (the clients would fail every round with ``IndexError``).
    """
    if not isinstance(workflow, SecAggPlusWorkflow):
        raise fail("secure_aggregation", type(workflow).__name__,
                   "is not a flwr.server.workflow.SecAggPlusWorkflow",
                   "pass the SecAggPlusWorkflow the ServerApp runs, or None")
    shares = workflow.num_shares
    if isinstance(shares, int) and shares % 2 == 0 and shares != cohort:
        raise fail("secure_aggregation.num_shares", shares,
                   "is even: Flower tells the clients this number, then adds one on the "
                   "server (it warns that shares should be odd), and the clients fail with "
                   "IndexError in every round",
                   f"pass an odd num_shares (e.g. {shares + 1}), or a fraction of the cohort "
                   "(a float, which Flower rounds to an odd number itself)")
    return workflow
