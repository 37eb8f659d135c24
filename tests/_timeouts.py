"""One time limit for tests that must fail rather than hang (SIGALRM; the handler is restored)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def time_limit(seconds: int = 10) -> Iterator[None]:
    """Raise TimeoutError in the block after ``seconds``: an unbounded loop fails the test."""

    def stop(signum: int, frame: object) -> None:
        raise TimeoutError(f"the call ran for more than {seconds} s: a hang or an unbounded loop")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
