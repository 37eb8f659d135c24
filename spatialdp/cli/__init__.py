"""The ``spatialdp`` command: ``info``, ``demo``, ``report``, ``query-error``, ``ledger``, ``card``.

Every subcommand has ``--help``. A refusal or an I/O failure is printed as ONE
line on stderr (``spatialdp: <Kind>: <message>``), never as a traceback: exit
status 2 for a refusal (:class:`~spatialdp.exceptions.SpatialDPError`), 1 for
a file-system error, 130 for an interruption (Ctrl-C or SIGTERM).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence
from types import FrameType

from spatialdp.cli import _card, _demo, _info, _ledger, _query, _report

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``spatialdp`` command."""
    parser = argparse.ArgumentParser(
        prog="spatialdp",
        description="Differential privacy for federated spatial models.",
    )
    from spatialdp import __version__

    parser.add_argument("--version", action="version", version=f"spatialdp {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (_info, _demo, _report, _query, _ledger, _card):
        module.add_parser(sub)
    return parser


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``spatialdp`` console script.

    A refusal (a :class:`~spatialdp.exceptions.SpatialDPError`) is printed as one
    line on stderr with exit status 2, not as a traceback; a file-system error
    with status 1; Ctrl-C or SIGTERM with status 130 (the demo then publishes
    nothing: see :mod:`spatialdp._atomic`). A closed output pipe (``| head``)
    ends the command quietly with status 1.
    """
    from spatialdp.exceptions import SpatialDPError

    args = build_parser().parse_args(argv)
    previous = None
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread: leave SIGTERM alone
        previous = None
    try:
        status = int(args.run(args))
        sys.stdout.flush()  # a closed pipe shows here, inside the handlers below
        return status
    except SpatialDPError as err:
        print(f"spatialdp: {type(err).__name__}: {_one_line(str(err))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("spatialdp: interrupted: nothing was published (charges already made stay in "
              "the ledger)", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader left (`spatialdp ledger ... | head`): say nothing
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes stdout
        return 1
    except OSError as err:
        where = f" ({err.filename})" if getattr(err, "filename", None) else ""
        print(f"spatialdp: OSError: {_one_line(err.strerror or str(err))}{where}",
              file=sys.stderr)
        return 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
