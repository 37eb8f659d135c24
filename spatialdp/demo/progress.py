"""Progress bars for the demo's steps (tqdm, on stderr, silent when not a terminal)."""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

__all__ = ["Progress"]


class Progress:
    """One tqdm bar per step; no bar with ``quiet`` or when the stream is not a TTY.

    The time of every step is recorded in :attr:`seconds` either way.

    Examples
    --------
    >>> progress = Progress(quiet=True)
    >>> with progress.step("fleet", total=2) as tick:
    ...     tick(2)
    >>> list(progress.seconds)
    ['fleet']
    """

    def __init__(self, *, quiet: bool = False, stream: TextIO | None = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        isatty = getattr(self.stream, "isatty", None)
        self.enabled = not quiet and bool(isatty is not None and isatty())
        self.seconds: dict[str, float] = {}

    @contextmanager
    def step(self, name: str, total: int = 1, unit: str = "step"
             ) -> Iterator[Callable[[int], None]]:
        """Run one step under a bar; yield ``tick(n)`` to advance it."""
        start = time.perf_counter()
        bar = None
        if self.enabled:
            from tqdm import tqdm

            size = shutil.get_terminal_size((100, 20))
            # A terminal reporting no size (0 x 0) would hide the bar: assume 100 x 20.
            bar = tqdm(total=total, desc=f"{name:<30}", unit=unit, file=self.stream,
                       leave=True, ncols=min(max(size.columns or 100, 60), 120),
                       nrows=max(size.lines, 20),
                       bar_format="{desc} {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
                                  "[{elapsed}]")
        done = 0

        def tick(n: int = 1) -> None:
            nonlocal done
            done += n
            if bar is not None:
                bar.update(n)

        try:
            yield tick
            if bar is not None and done < total:
                bar.update(total - done)
        finally:
            if bar is not None:
                bar.close()
            self.seconds[name] = time.perf_counter() - start
