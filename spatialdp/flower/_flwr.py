"""Import Flower once, with a message that names the extra when it is missing.

Importing ``flwr`` 1.42 makes ``typer`` touch a deprecated ``click`` attribute,
which raises a ``DeprecationWarning`` at import time (under ``-W error`` an
error). It is Flower's import, not the caller's code, so it is silenced here,
for that one message only.
"""

from __future__ import annotations

import warnings
from types import ModuleType

from spatialdp.exceptions import InvalidInput

__all__ = ["flwr_modules"]


def flwr_modules() -> tuple[ModuleType, ModuleType, ModuleType]:
    """Return ``flwr.common``, ``flwr.server`` and ``flwr.server.strategy``."""
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r"'click\.", category=DeprecationWarning)
            import flwr.common as common
            import flwr.server as server
            import flwr.server.strategy as strategy
    except ImportError as err:  # pragma: no cover - the extra is installed in CI
        raise InvalidInput(
            f"flwr is not installed ({err}); install the extra: pip install 'spatialdp[flower]'"
        ) from None
    return common, server, strategy
