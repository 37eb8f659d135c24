"""Shared benchmark helpers: interleaved best-of timing, peak memory, the ratio line.

Timing: every contender runs once per round, in turn, for ``repeats`` rounds, and
its best time is kept (the machine is shared; the best run is the least disturbed).

Peak memory: a separate, untimed run of each contender. On Linux it is the peak
resident set size (``VmHWM``, reset through ``/proc/self/clear_refs`` before the
run, after ``malloc_trim`` returned freed heap pages) minus the resident size
before it: this counts GEOS and h3ronpy memory, which tracemalloc cannot see.
Elsewhere it falls back to tracemalloc's peak of Python/numpy allocations.
:data:`MEMORY_METHOD` says which one was used.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def _trim() -> None:
    """Give freed heap pages back to the OS, so that reused pages count as new."""
    name = ctypes.util.find_library("c")
    if name:
        libc = ctypes.CDLL(name)
        if hasattr(libc, "malloc_trim"):
            libc.malloc_trim(0)


def _can_reset_peak() -> bool:
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return _STATUS.exists()


MEMORY_METHOD = ("peak RSS over the RSS before the call (malloc_trim, then VmHWM reset "
                 "via /proc/self/clear_refs)"
                 if _can_reset_peak() else "tracemalloc peak (Python/numpy allocations only)")


def _status_kb(field: str) -> int:
    for line in _STATUS.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in {_STATUS}")


def peak_memory_mb(fn: Callable[[], Any]) -> float:
    """Run ``fn`` once and return its peak memory in MB (see :data:`MEMORY_METHOD`)."""
    gc.collect()
    if MEMORY_METHOD.startswith("peak RSS"):
        _trim()
        _CLEAR_REFS.write_text("5")
        before = _status_kb("VmRSS")
        result = fn()
        peak = _status_kb("VmHWM")
        del result
        return max(peak - before, 0) / 1024
    tracemalloc.start()
    try:
        result = fn()
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del result
    return peak_bytes / 2**20


def best_times(contenders: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """Return the best wall time (s) of each contender over ``repeats`` interleaved rounds."""
    best = dict.fromkeys(contenders, float("inf"))
    for _ in range(repeats):
        for name, fn in contenders.items():
            gc.collect()
            start = time.perf_counter()
            result = fn()
            elapsed = time.perf_counter() - start
            del result
            best[name] = min(best[name], elapsed)
    return best


def best_of(fn: Callable[[], Any], repeats: int) -> float:
    """Return the best wall time (s) of ``fn`` over ``repeats`` runs."""
    return best_times({"fn": fn}, repeats)["fn"]


def measure(contenders: dict[str, Callable[[], Any]], repeats: int
            ) -> dict[str, tuple[float, float]]:
    """Return ``{name: (best seconds, peak MB)}``; memory is measured in extra runs."""
    times = best_times(contenders, repeats)
    return {name: (times[name], peak_memory_mb(fn)) for name, fn in contenders.items()}


def ratio_line(baseline_s: float, ours_s: float) -> str:
    """Return the final ``ratio: X`` line (baseline time / our time)."""
    return f"ratio: {baseline_s / ours_s:.2f}"


def scaling_table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    """Return a Markdown table of ``rows`` (dicts) with the given columns."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = []
        for col in columns:
            value = row[col]
            if isinstance(value, float):
                cells.append(f"{value:.3f}" if value < 100 else f"{value:,.0f}")
            elif isinstance(value, int):
                cells.append(f"{value:,}")
            else:
                cells.append(str(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
