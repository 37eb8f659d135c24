"""Shared benchmark helpers, and THE convention every benchmark follows.

The convention (issue 27)
-------------------------
1. **Both sides are timed the same way.** :func:`compare` runs every contender
   once per round, in turn (interleaved: load on the shared machine hits all
   alike), after the same ``warmup`` untimed calls each, for the same ``repeats``
   rounds. Each run records wall time (:func:`time.perf_counter`) and CPU time of
   the process (:func:`time.process_time`: all threads, so a multi-threaded
   contender is not flattered by wall time). The statistic is the **median**;
   min and max are printed next to it.
2. **Output is equal before timing.** :func:`compare` calls every contender once,
   untimed, and asserts with ``check`` (default :func:`same`: ``np.array_equal``,
   or ``.equals`` for pandas objects) that each answer equals the first
   contender's; a contender that answers differently (e.g. sjoin "within", which
   drops border points) must be named in ``unchecked`` and is then printed as
   not comparable.
3. **Cold cost is part of the story.** ``ratio:`` is the steady state (both sides
   warmed by the same policy, one-off builds done). Every one-off build
   (index, raster, tables, JIT, imports beyond numpy/pandas/geopandas/shapely) is
   timed inside a **cold** run and reported on a ``ratio_cold:`` line: either
   :func:`compare` with ``warmup=0`` on contenders that build their state inside
   the call (``setup`` gives each run fresh, untimed inputs such as unprepared
   geometry copies), or :func:`fresh_process`, which times the first call in a new
   Python process. Fresh processes import compiled bytecode, as an installed
   package does (pip compiles it at install): the child may write ``__pycache__``
   even where ``PYTHONDONTWRITEBYTECODE`` is set, and :func:`compare_fresh` runs
   every contender once, untimed, before timing (otherwise each process would
   compile the side with more Python source from scratch: 30-45 ms for spatialdp).
4. **``ratio:`` is against the strongest baseline** (vectorised numpy/pandas/
   scipy, prepared shapely or sjoin, h3ronpy, a per-file loop for Dask). Weaker
   baselines may be printed on their own lines (:func:`ratio_line` with another
   ``label``), never as ``ratio:``.
5. **Standard lines.** :func:`ratio_line` prints
   ``ratio: X (CPU Y; <baseline> median / <ours> median, N runs)``: ``X`` is the
   baseline's median wall time over ours (above 1: we are faster), ``Y`` the same
   for CPU time. ``ratio_cold:`` uses the same format. A parser takes the second
   whitespace-separated field.
6. **Sizes.** ``--scaling`` prints a Markdown table (:func:`scaling_table`) from
   10^4 to 10^7 points (or the workload's natural range) with each side's median,
   CPU and peak memory, so the crossover is visible.
7. **Peak memory** (:func:`peak_memory_mb`) is measured in one separate, untimed
   run per contender. On Linux it is the peak resident set size (``VmHWM``, reset
   through ``/proc/self/clear_refs`` before the run, after ``malloc_trim`` returned
   freed heap pages) minus the resident size before it: this counts GEOS and
   h3ronpy memory, which tracemalloc cannot see. Elsewhere it falls back to
   tracemalloc's peak of Python/numpy allocations. :data:`MEMORY_METHOD` says which.
8. Say in the output on which machine and under what load it ran (:func:`machine_line`).

Example
-------
A benchmark script (run from ``benchmarks/``, where ``_common`` is importable)::

    import numpy as np
    from _common import compare, compare_fresh, fresh_process, print_results, ratio_line

    x = np.random.default_rng(0).random(10**6)
    results = compare({"ours": lambda: np.sort(x), "baseline": lambda: sorted(x)},
                      repeats=5)              # asserts equal answers first
    print_results(results)                     # median [min, max] wall, CPU, peak MB
    print(ratio_line(results, "baseline", "ours"))            # ratio: ...
    cold = compare_fresh({"ours": fresh_process("import numpy as np", "np.sort(np.ones(9))"),
                          "baseline": fresh_process("", "sorted(range(9))")},
                         repeats=3)           # first call in a new process, each side
    print(ratio_line(cold, "baseline", "ours", label="ratio_cold"))
    cold = compare({"ours": (make_fresh_state, lambda state: ours(state)),
                    "baseline": (make_fresh_input, baseline_with_its_builds)},
                   repeats=5, warmup=0)       # or in-process: setup untimed, builds inside

The older helpers (:func:`best_times`, :func:`best_of`, :func:`measure`: best of
interleaved runs, wall time only) remain for the benchmarks not yet converted;
new code uses :func:`compare`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import json
import os
import platform
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")
_HERE = Path(__file__).resolve().parent

#: A contender: a call without arguments, or ``(setup, run)``: ``setup()`` runs untimed
#: before every timed ``run(setup())`` (fresh inputs for cold runs).
Contender = Callable[[], Any] | tuple[Callable[[], Any], Callable[[Any], Any]]


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


# ---------------------------------------------------------------------- the convention
@dataclass
class Timing:
    """Wall and CPU seconds of each timed run of one contender, and its peak memory."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    peak_mb: float = float("nan")
    note: str = ""

    @property
    def median(self) -> float:
        """Median wall time (s): the statistic every ratio uses."""
        return float(np.median(self.wall))

    @property
    def cpu_median(self) -> float:
        """Median CPU time of the process (s)."""
        return float(np.median(self.cpu))

    def describe(self) -> str:
        """Return ``median [min, max] s, CPU median s, peak MB`` as one line."""
        peak = "" if np.isnan(self.peak_mb) else f"   peak {self.peak_mb:8.1f} MB"
        note = f"  ({self.note})" if self.note else ""
        return (f"{self.median:8.4f} s [{min(self.wall):.4f}, {max(self.wall):.4f}]   "
                f"CPU {self.cpu_median:8.4f} s{peak}{note}")


def same(a: Any, b: Any) -> bool:
    """Default equality of two answers: ``.equals`` for pandas objects, else array_equal."""
    if hasattr(a, "equals"):
        return bool(a.equals(b))
    return bool(np.array_equal(a, b))


def _call(contender: Contender) -> tuple[Any, Callable[[], Any]]:
    """Return ``(inputs, run)``: the untimed setup's result and the call to time."""
    if isinstance(contender, tuple):
        setup, run = contender
        inputs = setup()
        return inputs, lambda: run(inputs)
    return None, contender


def timed(contender: Contender, cpu_clock: Callable[[], float] = time.process_time
          ) -> tuple[float, float]:
    """Run a contender once (its setup untimed); return (wall s, CPU s).

    ``cpu_clock`` reads the CPU seconds to count: this process by default; for a
    contender that works in other processes (Dask workers) the sum over all of them.
    """
    inputs, run = _call(contender)
    gc.collect()
    cpu0, wall0 = cpu_clock(), time.perf_counter()
    result = run()
    wall, cpu = time.perf_counter() - wall0, cpu_clock() - cpu0
    del result, inputs
    return wall, cpu


def check_equal(contenders: Mapping[str, Contender],
                check: Callable[[Any, Any], bool] = same,
                unchecked: tuple[str, ...] = ()) -> None:
    """Call every contender once, untimed; exit if one answers unlike the first."""
    names = list(contenders)
    expected = _call(contenders[names[0]])[1]()
    for name in names[1:]:
        if name in unchecked:
            continue
        if not check(_call(contenders[name])[1](), expected):
            raise SystemExit(f"{name} disagrees with {names[0]}: the benchmark is void")


def compare(contenders: Mapping[str, Contender], *, repeats: int, warmup: int = 1,
            check: Callable[[Any, Any], bool] | None = same, unchecked: tuple[str, ...] = (),
            memory: bool = True, cpu_clocks: Mapping[str, Callable[[], float]] | None = None
            ) -> dict[str, Timing]:
    """Time contenders by the convention; the first one is the reference answer.

    Parameters
    ----------
    contenders : mapping of name to a call, or to ``(setup, run)``
        ``setup()`` runs untimed before each run of ``run(setup())``.
    repeats : int
        Timed rounds; every contender runs once per round, in turn.
    warmup : int
        Untimed calls of each contender before timing (0 for cold runs; the equality
        check then uses its own setup, so it warms nothing a setup renews).
    check : callable or None
        Equality of two answers, asserted before timing (None: no check).
    unchecked : tuple of str
        Contenders whose answer is known to differ (printed as not comparable).
    memory : bool
        Measure peak memory in one extra, untimed run of each.
    cpu_clocks : mapping of name to a call, optional
        The CPU clock of a contender that works in other processes too (e.g. the
        driver's plus every Dask worker's CPU seconds); default :func:`time.process_time`.
    """
    if check is not None:
        check_equal(contenders, check, unchecked)
    for _ in range(warmup):
        for contender in contenders.values():
            _call(contender)[1]()
    out = {name: Timing(note="answer not checked" if name in unchecked else "")
           for name in contenders}
    for _ in range(repeats):
        for name, contender in contenders.items():
            wall, cpu = timed(contender, (cpu_clocks or {}).get(name, time.process_time))
            out[name].wall.append(wall)
            out[name].cpu.append(cpu)
    if memory:
        for name, contender in contenders.items():
            inputs, run = _call(contender)
            out[name].peak_mb = peak_memory_mb(run)
            del inputs
    return out


_CHILD = """
import json, resource, sys, time
import numpy, pandas, geopandas, shapely  # not counted: every contender has them
sys.path.insert(0, {here!r})
cpu0, wall0 = time.process_time(), time.perf_counter()
exec(compile({prelude!r}, "<prelude>", "exec"))
exec(compile({statement!r}, "<statement>", "exec"))
wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"wall": wall, "cpu": cpu, "peak_mb": peak}}))
"""


def fresh_process(prelude: str, statement: str) -> Callable[[], tuple[float, float, float]]:
    """Return a call that times ``prelude`` + ``statement`` in a new Python process.

    The child imports numpy, pandas, geopandas and shapely untimed (every contender
    has them), then times everything else: the prelude's imports and data loading,
    and the statement (the first call). It returns (wall s, CPU s, peak RSS MB of
    the whole child process). Use with :func:`compare_fresh`.
    """
    script = _CHILD.format(here=str(_HERE), prelude=prelude, statement=statement)

    def run() -> tuple[float, float, float]:
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode as installed (see the convention)
        env["PYTHONPATH"] = os.pathsep.join(p for p in [str(_HERE.parent),
                                                        env.get("PYTHONPATH", "")] if p)
        done = subprocess.run([sys.executable, "-c", script], capture_output=True,
                              text=True, env=env, check=False)
        if done.returncode:
            raise SystemExit(f"fresh process failed:\n{done.stderr}")
        got = json.loads(done.stdout.strip().splitlines()[-1])
        return got["wall"], got["cpu"], got["peak_mb"]

    return run


def compare_fresh(contenders: Mapping[str, Callable[[], tuple[float, float, float]]], *,
                  repeats: int) -> dict[str, Timing]:
    """Time :func:`fresh_process` calls, interleaved; peak is the largest child RSS.

    Each contender first runs once, untimed, so that its modules' bytecode is cached.
    """
    out = {name: Timing(peak_mb=0.0, note="first call in a fresh process")
           for name in contenders}
    for run in contenders.values():
        run()
    for _ in range(repeats):
        for name, run in contenders.items():
            wall, cpu, peak = run()
            out[name].wall.append(wall)
            out[name].cpu.append(cpu)
            out[name].peak_mb = max(out[name].peak_mb, peak)
    return out


def print_results(results: Mapping[str, Timing], title: str = "", width: int = 22) -> None:
    """Print one line per contender: median [min, max] wall, CPU, peak memory."""
    if title:
        print(title)
    for name, timing in results.items():
        print(f"  {name:<{width}} {timing.describe()}")


def ratio_line(results: Mapping[str, Timing] | float, baseline: str | float,
               ours: str = "ours", label: str = "ratio") -> str:
    """Return ``label: X (CPU Y; ...)``: baseline median / our median, wall then CPU.

    ``ratio_line(baseline_s, ours_s)`` (two numbers, the old form) still works.
    """
    if not isinstance(results, Mapping):  # legacy: ratio_line(baseline_s, ours_s)
        return f"{label}: {float(results) / float(baseline):.2f}"
    assert isinstance(baseline, str)
    base, mine = results[baseline], results[ours]
    return (f"{label}: {base.median / mine.median:.2f} (CPU "
            f"{base.cpu_median / mine.cpu_median:.2f}; {baseline} / {ours}, median of "
            f"{len(mine.wall)})")


def fastest(results: Mapping[str, Timing], exclude: tuple[str, ...] = ("ours",)) -> str:
    """Return the name of the fastest contender (median wall) outside ``exclude``."""
    return min((n for n in results if n not in exclude), key=lambda n: results[n].median)


def machine_line() -> str:
    """Return where and under what load the benchmark ran."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return (f"machine: {platform.machine()} {platform.processor() or ''} "
            f"{os.cpu_count()} cores, load average {load[0]:.1f} (1 min); "
            f"python {platform.python_version()}, numpy {np.__version__}; "
            f"memory: {MEMORY_METHOD}")


# ---------------------------------------------------------------------- older helpers
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
