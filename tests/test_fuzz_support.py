"""Shared machinery of the fuzz suite (no tests here): guarded calls, junk, valid inputs.

The fuzz suite (``tests/test_fuzz*.py``) throws a mix of valid and adversarial
arguments at every public callable of spatialdp. A call may return, or raise a
:class:`~spatialdp.exceptions.SpatialDPError`; any other exception, a warning
other than spatialdp's own, or a call running past :data:`TIME_LIMIT_S` fails.

Valid building blocks (partitions, client reports, releases) are made once per
process and cached; every strategy copies what it mutates.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import os
import re
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from typing import Any

import geopandas as gpd
import matplotlib
import numpy as np
import pandas as pd
import shapely
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spatialdp.exceptions import ReprojectedLayerWarning, SpatialDPError
from spatialdp.federated import (
    HistogramSpec,
    MetricSpec,
    UninformativeReleaseWarning,
    aggregate_histogram,
    aggregate_metric,
    regional_report,
)
from spatialdp.federated import device as dev
from spatialdp.geo import Partition, UnassignedPointsWarning
from spatialdp.privacy import (
    BudgetSplitWarning,
    PrivacyLedger,
    ReleaseTarget,
    Simulation,
    Unaccounted,
)
from tests._clients import histogram_columns, tagged
from tests._timeouts import time_limit

matplotlib.use("Agg")

# Import what spatialdp imports lazily now, outside any time limit: a first import cut by
# SIGALRM leaves a half-registered module (opendp then refuses every later import).
import folium  # noqa: F401
import mapclassify  # noqa: F401
import matplotlib.pyplot
import opendp.prelude  # noqa: F401
import pyogrio  # noqa: F401

#: Seconds one call may run before it counts as a hang (a slow machine stays well below).
TIME_LIMIT_S = 10

#: spatialdp's own warnings are outcomes, not failures; anything else is a failure.
ALLOWED_WARNINGS: tuple[type[Warning], ...] = (
    UninformativeReleaseWarning, UnassignedPointsWarning, BudgetSplitWarning,
    ReprojectedLayerWarning)


#: Multiplies every entry's number of examples (``SPATIALDP_FUZZ_SCALE=10`` for a long hunt).
SCALE = float(os.environ.get("SPATIALDP_FUZZ_SCALE", "1"))
#: The suite is derandomized (the same examples every run, so CI stays reproducible);
#: ``SPATIALDP_FUZZ_RANDOM=1`` draws fresh examples, for a hunt.
RANDOM = os.environ.get("SPATIALDP_FUZZ_RANDOM", "") not in ("", "0")


def fuzz_settings(n: int) -> settings:
    """Return hypothesis settings for ``n`` examples: no deadline, no example database."""
    return settings(max_examples=max(1, round(n * SCALE)), deadline=None, database=None,
                    derandomize=not RANDOM,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


# --------------------------------------------------------------------------- guarded calls


@dataclass
class Call:
    """One fuzzed call: the callable, its arguments, and what must hold of its result."""

    name: str
    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    check: Callable[[Any], None] | None = None

    def __repr__(self) -> str:
        args = ", ".join([*(_short(a) for a in self.args),
                          *(f"{k}={_short(v)}" for k, v in self.kwargs.items())])
        return f"{self.name}({args})"


def _short(value: Any) -> str:
    if isinstance(value, pd.DataFrame):
        return f"<{type(value).__name__} {value.shape} cols={list(value.columns)[:8]}>"
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


@dataclass(frozen=True)
class Defect:
    """A defect in a file this suite may not edit, reported to its owner (see the report).

    An exception of ``kind`` whose message matches ``message``, raised by ``callable``,
    is tolerated so that the suite stays green meanwhile; delete the entry once the
    owner fixes it (the suite then holds the callable to the rule again).
    """

    callable: str
    kind: type[BaseException] | tuple[type[BaseException], ...]
    message: str
    owner: str
    trigger: str

    def matches(self, name: str, err: BaseException) -> bool:
        return (name == self.callable and isinstance(err, self.kind)
                and re.search(self.message, str(err)) is not None)


OPEN_DEFECTS: tuple[Defect, ...] = (
    # federated/group_sums.py (the lead's)
    Defect("check_clipping", ValueError, "truth value of", "spatialdp/federated/group_sums.py",
           "absent_allowed=np.array([1.0, 2.0]) (or a Series): the flag is used in `if` "
           "unchecked; refuse non-bools (_validation.check_flag)"),
    # privacy (noise and ledger owners)
    Defect("PrivacyLoss", AssertionError, "a positive loss became zero rho",
           "spatialdp/privacy/noise.py (PrivacyLoss.rho)",
           "PrivacyLoss('pure', 1e-200).as_zcdp(): epsilon**2/2 underflows to rho=0.0 (a "
           "positive loss converted to none; round up instead)"),
    Defect("PrivacyLoss", OverflowError, "out of range", "spatialdp/privacy/noise.py",
           "PrivacyLoss('pure', 1e308) is accepted (no MAX_EPSILON bound, unlike every "
           "mechanism); its .rho and .as_zcdp() then raise OverflowError"),
    Defect("PrivacyLedger.spend", AssertionError, "a positive loss charged nothing",
           "spatialdp/privacy/_ledger_store.py (zCDP conversion)",
           "a zCDP ledger, spend(epsilon=1e-200): epsilon**2/2 underflows and 0.0 is charged "
           "and audited"),
    Defect("rho_to_epsilon", AssertionError, "a positive rho became zero epsilon",
           "spatialdp/privacy/budget.py (rho_to_epsilon)",
           "rho_to_epsilon(5e-324, 0.5) returns 0.0 (rho + 2 sqrt(rho log(1/delta)) is about "
           "3.7e-162): the conversion loses the loss"),
    Defect("LaplaceMechanism.lattice_step", OverflowError, "too large for a float",
           "spatialdp/privacy/exact.py (check_units)",
           "size=1e308: formatting the refusal, float(Fraction) overflows"),
    *(Defect(name, OverflowError, "too large to convert to float",
             "spatialdp/privacy/cadence.py (plan_cadence)",
             "every=1e308 (whole, accepted without an upper bound): int(every) is then "
             "converted back to float and overflows")
      for name in ("plan_cadence", "cadence_table")),
)


def open_defect(name: str, err: BaseException) -> Defect | None:
    return next((d for d in OPEN_DEFECTS if d.matches(name, err)), None)


def run(call: Call) -> tuple[Any, BaseException | None]:
    """Run ``call`` under the time limit: return ``(result, None)`` or ``(None, refusal)``.

    Any exception that is not a SpatialDPError propagates (the test fails), unless it
    is a reported :data:`OPEN_DEFECTS` entry; so does any warning that is not one of
    :data:`ALLOWED_WARNINGS`. Figures are closed.
    """
    try:
        with time_limit(TIME_LIMIT_S), warnings.catch_warnings():
            warnings.simplefilter("error")
            for kind in ALLOWED_WARNINGS:
                warnings.simplefilter("ignore", kind)
            try:
                result = call.fn(*call.args, **call.kwargs)
            except SpatialDPError as err:
                if call.name not in VAGUE_REFUSALS:
                    assert_names_the_input(err, call.fn, call.args, call.kwargs)
                return None, err
            except Exception as err:
                if open_defect(call.name, err) is None:
                    raise
                return None, err
            if call.check is not None:
                try:
                    call.check(result)
                except Exception as err:  # the result broke a promise (or its methods raised)
                    if open_defect(call.name, err) is None:
                        raise
            return result, None
    finally:
        import matplotlib.pyplot as plt

        plt.close("all")


def parameter_names(fn: Callable[..., Any], kwargs: dict[str, Any]) -> set[str]:
    """The names of the call's parameters (of ``fn``, or of a wrapper's variables)."""
    names = set(kwargs)
    with contextlib.suppress(TypeError, ValueError):
        names |= set(inspect.signature(fn).parameters)
    code = getattr(fn, "__code__", None)
    names |= {*getattr(code, "co_freevars", ()), *getattr(code, "co_varnames", ())}
    return {n for n in names if len(n) > 2}


def input_words(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
                ) -> set[str]:
    """What a refusal of ``fn(*args, **kwargs)`` may name: a parameter, a value or its type."""
    words = set(kwargs)
    with contextlib.suppress(TypeError, ValueError):
        words |= set(inspect.signature(fn).parameters)
    cells = [c.cell_contents for c in getattr(fn, "__closure__", None) or ()
             if c.cell_contents is not fn]  # a wrapper's real arguments, and their names
    code = getattr(fn, "__code__", None)
    words |= {*getattr(code, "co_freevars", ()), *getattr(code, "co_varnames", ())}
    cells += list(getattr(fn, "__defaults__", None) or ())
    values = [*args, *kwargs.values(), *cells, getattr(fn, "__self__", None)]
    for value in list(values):  # the first elements and keys of containers too
        with contextlib.suppress(Exception):
            if isinstance(value, dict):
                values += list(value)[:5] + list(value.values())[:5]
            elif isinstance(value, pd.Series | pd.DataFrame):
                values += list(value.index)[:5] + list(np.ravel(value.to_numpy()))[:5]
            elif not isinstance(value, str | bytes) and len(value) > 0:
                values += list(value)[:5]
    for value in values:
        words.add(type(value).__name__)
        with contextlib.suppress(Exception):  # repr and str, as messages print them
            words |= {repr(value)[:40], str(value)[:40]}
        if isinstance(value, int | float | np.number) and not isinstance(value, bool):
            with contextlib.suppress(OverflowError, TypeError, ValueError):
                words.add(repr(float(value)))  # 2**53 + 1 is printed as 9007199254740992.0
    words |= {w.replace("_", sep) for w in words for sep in ("-", " ")}  # held_out: held-out
    return {w for w in words if w.strip()}


#: How a refusal names a value besides quoting the call: the house shape ``name=value
#: problem; fix`` (``_validation.fail``), ``[the] name has/holds/...``, ``got value``;
#: ``key@version`` (a spec, partition or strata key) and a quoted name or path count too.
NAMING = re.compile(r"[\w\])'@]=|^(?:the )?[\w.@:' -]{1,30}? (?:has|have|holds|is|are|must)\b"
                    r"|\bgot \S"
                    r"|\w@\w|'[^']+'")


#: Callables whose refusal does not name the refused value yet (owner to fix; see the report).
VAGUE_REFUSALS: dict[str, str] = {
    "RegionalReport.explore": "passes GeoDataFrame.explore's own error through ('refused the "
                              "map options (ValueError: max() arg is an empty sequence)'), "
                              "naming neither the keyword nor its value (spatialdp/viz)",
}


def assert_names_the_input(err: BaseException, fn: Callable[..., Any], args: tuple[Any, ...],
                           kwargs: dict[str, Any]) -> None:
    """A refusal names what it refuses: a parameter, a value, its type, or ``name=value``.

    The oracle of every refused fuzz call (its message, not only its type): a bare
    ``InvalidInput("bad input")`` fails it.
    """
    text = str(err)
    if NAMING.search(text):
        return
    words = input_words(fn, args, kwargs)
    names = parameter_names(fn, kwargs)  # also as a prefix: lon -> longitude
    named = (any(re.search(rf"(?<!\w){re.escape(word)}(?!\w)", text) for word in words)
             or any(re.search(rf"(?<!\w){re.escape(name)}", text) for name in names))
    assert named, (f"{type(err).__name__}({text!r}) names none of the call's parameters or "
                   f"values {sorted(words, key=len)[:12]}")


# --------------------------------------------------------------------------- junk


class Opaque:
    """An object of no known kind (what a caller might pass by mistake)."""

    def __repr__(self) -> str:
        return "Opaque()"


#: Values that are wrong almost everywhere: no number, no frame, no spec accepts all.
JUNK: tuple[Any, ...] = (
    None, True, False, np.True_, "1.0", "", "abc", b"x", math.nan, math.inf, -math.inf,
    np.float64("nan"), 1e308, -1e308, 2**70, -(2**70), 0, -1, 1 + 1j, Decimal("NaN"),
    Fraction(1, 3), Opaque(), [], (), {}, {"a": 1}, [1.0, "a"], [math.nan],
    np.array([1.0, 2.0]), np.array([], dtype=float), np.array(["a"], dtype=object),
    np.zeros((2, 2)), pd.Series([1.0, 2.0]), pd.DataFrame(), frozenset({1}),
)
junk = st.sampled_from(JUNK)

#: Numbers at the edges: zero, signs, tiny, huge, non-finite, and the types they come in.
EDGE_NUMBERS: tuple[Any, ...] = (
    0, 0.0, -0.0, -1, 1, 5e-324, 1e-300, 1e308, -1e308, math.inf, -math.inf, math.nan,
    2**63, 2**70, np.float32(0.5), np.int64(50), np.uint8(3), Fraction(1, 2),
    Decimal("0.5"), Decimal("1e400"), 50.0, 0.5, 1.5,
)
edge_numbers = st.sampled_from(EDGE_NUMBERS)


def variants(x: float) -> list[Any]:
    """Return ``x`` as each kind of number spatialdp must accept (Python, numpy, Fraction...)."""
    out: list[Any] = [x, np.float64(x), Fraction(x), Decimal(repr(float(x)))]
    if abs(x) < 3e38:
        out.append(np.float32(x))
    if float(x).is_integer() and abs(x) < 2**62:
        out += [int(x), np.int64(int(x)), float(x)]
    return out


def number(low: float, high: float, *, integer: bool = False, exclude_low: bool = False
           ) -> st.SearchStrategy[Any]:
    """Valid numbers in ``[low, high]`` in every accepted type."""
    base = (st.integers(int(low), int(high)) if integer else
            st.floats(low, high, allow_nan=False, exclude_min=exclude_low))
    return base.flatmap(lambda x: st.sampled_from(variants(x)))


#: While a "clean" call is drawn, every :func:`arg` and :func:`mutated` gives a valid value.
_CLEAN = [False]


@st.composite
def arg(draw: st.DrawFn, valid: st.SearchStrategy[Any], *bad: Any, weight: int = 3) -> Any:
    """Mostly ``valid``, sometimes junk, edge numbers or the given ``bad`` values."""
    if _CLEAN[0]:
        return draw(valid)
    others = [junk, edge_numbers]
    if bad:
        others.append(st.sampled_from(bad))
    return draw(st.one_of(*([valid] * weight), *others))


@st.composite
def mixed(draw: st.DrawFn, calls: st.SearchStrategy[Any]) -> Any:
    """Draw from ``calls``, a third of the time with every argument valid (a "clean" call).

    Junk in every argument at once would make nearly every call a refusal at its first
    check; clean calls reach the computation, the charge and the result invariants.
    """
    _CLEAN[0] = draw(st.integers(0, 2)) == 0
    try:
        return draw(calls)
    finally:
        _CLEAN[0] = False


def maybe(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), valid)


def flag() -> st.SearchStrategy[Any]:
    return arg(st.sampled_from([True, False, np.True_, np.False_]), 1, 0, "yes")


def text() -> st.SearchStrategy[Any]:
    return arg(st.text(min_size=1, max_size=6), "", "  ")


# --------------------------------------------------------------------------- valid inputs


LOSS = MetricSpec("loss", 0.0, 2.5)
HIST = HistogramSpec("err", edges=(1.0, 2.0))
RATIO = MetricSpec("ratio", 0.0, 10.0, present="track_present")
SPECS = (LOSS, HIST, RATIO)


@functools.cache
def boxes() -> Partition:
    """Three unit boxes side by side, ids ``a``, ``b``, ``c``."""
    frame = gpd.GeoDataFrame(
        {"id": ["a", "b", "c"]}, crs=4326,
        geometry=[shapely.box(i, 0, i + 1, 1) for i in range(3)])
    return Partition.from_geodataframe(frame, "id", name="fuzz-boxes")


@functools.cache
def other_boxes() -> Partition:
    """Another partition with the same ids (a different version)."""
    frame = gpd.GeoDataFrame(
        {"id": ["a", "b", "c"]}, crs=4326,
        geometry=[shapely.box(i, 5, i + 1, 6) for i in range(3)])
    return Partition.from_geodataframe(frame, "id", name="fuzz-other")


def reports(n: int, regions: Any, seed: int = 0, partition: Partition | None = None
            ) -> pd.DataFrame:
    """Client reports of ``n`` clients under LOSS, HIST and RATIO, tagged as devices tag them."""
    rng = np.random.default_rng(seed)
    return tagged({"loss": rng.uniform(0, 2.5, n), "ratio": rng.uniform(0, 10, n),
                   "track_present": rng.integers(0, 2, n),
                   **histogram_columns(HIST, rng.dirichlet(np.ones(3), n))},
                  list(SPECS), partition=partition or boxes(), region_id=regions)


@functools.cache
def base_reports() -> pd.DataFrame:
    """130 clients: 70 in ``a``, 55 in ``b``, 5 in ``c`` (below a floor of 50)."""
    return reports(130, np.array(["a"] * 70 + ["b"] * 55 + ["c"] * 5))


@functools.cache
def base_regional() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UninformativeReleaseWarning)
        return regional_report(base_reports(), boxes(), [LOSS, HIST, RATIO], epsilon=1.0,
                               target=Simulation(rng=0), min_cohort=50)


@functools.cache
def base_release() -> Any:
    return aggregate_metric(base_reports(), LOSS, epsilon=1.0, target=Simulation(rng=1))


@functools.cache
def base_ratio_release() -> Any:
    return aggregate_metric(base_reports(), RATIO, epsilon=5.0, target=Simulation(rng=1),
                            min_cohort=10)


@functools.cache
def base_histogram() -> Any:
    return aggregate_histogram(base_reports(), HIST, epsilon=1.0, target=Simulation(rng=2))


@functools.cache
def base_coverage() -> Any:
    lon = np.r_[np.full(40, 0.5), np.full(40, 1.5), np.full(20, 2.5)]
    return dev.coverage(lon, np.full(100, 0.5), np.arange(100) % 80, boxes(), max_cells=2)


def history(rounds: int = 4, seed: int = 0) -> pd.DataFrame:
    """The concatenated loss frames of ``rounds`` regional reports (a drift history)."""
    frames = []
    for r in range(rounds):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UninformativeReleaseWarning)
            rep = regional_report(base_reports(), boxes(), [LOSS], epsilon=1.0, min_cohort=50,
                                  target=Simulation(rng=seed + r, round_index=r))
        frames.append(rep["loss"])
    return pd.concat(frames).reset_index()


@functools.cache
def base_history() -> pd.DataFrame:
    return history()


def fresh_ledger(budget: float = 5.0) -> PrivacyLedger:
    return PrivacyLedger(":memory:", epoch_budget=budget)


def targets() -> st.SearchStrategy[Any]:
    """Release targets, valid or not (a ReleaseTarget gets a fresh in-memory ledger)."""
    return arg(st.sampled_from(["sim", "unaccounted", "ledger"]).map(_target), "sim",
               Simulation, ReleaseTarget)


def _target(kind: str) -> Any:
    if kind == "sim":
        return Simulation(rng=0)
    if kind == "unaccounted":
        return Unaccounted("fuzz")
    return ReleaseTarget(fresh_ledger(), epoch=0, why="fuzz")


# --------------------------------------------------------------------------- frame mutations


CELL_JUNK: tuple[Any, ...] = (math.nan, math.inf, -1e308, 1e308, "x", None, True, -5.0,
                              1e9, pd.NA, [1], "1.0")


@st.composite
def mutated(draw: st.DrawFn, frame: pd.DataFrame, *, index_ids: bool = False,
            protect: tuple[str, ...] = ()) -> pd.DataFrame:
    """Return ``frame`` (a copy), possibly broken in one or two ways a caller might break it.

    ``index_ids``: the ids live in the index (client reports), so repeating a row
    repeats an id. ``protect``: columns never dropped.
    """
    out = frame.copy()
    out.attrs = dict(frame.attrs)
    if _CLEAN[0]:
        return out
    for _ in range(draw(st.integers(0, 2))):
        kind = draw(st.sampled_from([
            "none", "none", "drop", "cell", "column", "repeat", "empty", "shuffle", "dup_col",
            "object", "head", "nullable"]))
        cols = [c for c in out.columns if c not in protect and c != "geometry"]
        if kind == "drop" and cols:
            out = out.drop(columns=draw(st.sampled_from(cols)))
        elif kind == "cell" and len(out) and cols:
            col = draw(st.sampled_from(cols))
            row = draw(st.integers(0, len(out) - 1))
            value = draw(st.sampled_from(CELL_JUNK))
            cells = out[col].to_numpy(dtype=object).copy()
            cells[row] = value
            out[col] = cells
        elif kind == "column" and cols:
            col = draw(st.sampled_from(cols))
            out[col] = draw(st.sampled_from(["text", 0, math.nan, True, None]))
        elif kind == "repeat" and len(out):
            row = draw(st.integers(0, len(out) - 1))
            out = pd.concat([out, out.iloc[[row]]])
        elif kind == "empty":
            out = out.iloc[:0]
        elif kind == "shuffle" and len(out):
            out = out.sample(frac=1.0, random_state=draw(st.integers(0, 9)))
        elif kind == "dup_col" and cols:
            col = draw(st.sampled_from(cols))
            extra = out[[col]]
            out = pd.concat([out, extra], axis=1)
            break  # out[col] is now a frame: no more column edits
        elif kind == "object" and cols:
            col = draw(st.sampled_from(cols))
            out[col] = out[col].astype(object)
        elif kind == "head" and len(out):
            out = out.iloc[: draw(st.integers(1, len(out)))]
        elif kind == "nullable" and cols:
            col = draw(st.sampled_from(cols))
            if pd.api.types.is_float_dtype(out[col].dtype):
                out[col] = out[col].astype("Float64")
    if index_ids and draw(st.booleans()) and len(out):
        ids = out.index.to_numpy(dtype=object).copy()
        ids[draw(st.integers(0, len(ids) - 1))] = draw(st.sampled_from(
            [ids[0], None, math.nan, "x", (1, 2)]))
        out.index = pd.Index(ids, name=frame.index.name)
    return out


# --------------------------------------------------------------------------- open defects
# (shared by the fuzz suites of the packages other engineers own)


def strict(check: Callable[[Any], None]) -> Callable[[Any], None]:
    """A check whose every failure is an AssertionError (junk returned as a result)."""

    @functools.wraps(check)
    def wrapper(result: Any) -> None:
        try:
            check(result)
        except AssertionError:
            raise
        except Exception as err:
            raise AssertionError(f"the result fails its check ({type(err).__name__}: "
                                 f"{err}): {result!r}"[:300]) from None

    return wrapper


@dataclass(frozen=True)
class Open:
    """A defect in a file this suite may not edit: tolerated by the fuzz, pinned by an xfail.

    The fuzz tolerates, for ``callable`` only, an exception of ``kind`` whose message
    matches ``message`` and whose innermost spatialdp frame is in ``where``.
    ``reproduce`` builds the exact failing :class:`Call` (run through :func:`run`, so
    a warning counts as an error). ``skip`` recognises calls that would hang: the fuzz
    does not make them (a hang costs the whole time limit), the reproduction does,
    under a short alarm.
    """

    callable: str
    kind: type[BaseException] | tuple[type[BaseException], ...]
    message: str
    where: str
    reproduce: Callable[[], Call]
    reason: str
    skip: Callable[[Call], bool] | None = None
    pinned: bool = True

    def matches(self, name: str, err: BaseException) -> bool:
        if name != self.callable or not isinstance(err, self.kind):
            return False
        if re.search(self.message, str(err)) is None:
            return False
        if not self.where:
            return True
        frames = [f.filename for f in traceback.extract_tb(err.__traceback__)
                  if "/spatialdp/" in f.filename]
        return bool(frames) and self.where in frames[-1]


def run_tolerating(one: Call, known: tuple[Open, ...]) -> None:
    """Run ``one``; an exception is tolerated only if it is one of the ``known`` defects."""
    if any(d.skip is not None and d.callable == one.name and d.skip(one) for d in known):
        return
    try:
        run(one)
    except Exception as err:
        if not any(d.matches(one.name, err) for d in known):
            raise


def fuzz_only_spatialdp_errors(factory: Callable[[], st.SearchStrategy[Any]], n: int,
                               known: tuple[Open, ...] = ()) -> None:
    """Fuzz ``n`` calls from ``factory``: each returns or raises a spatialdp error."""

    @fuzz_settings(n)
    @given(mixed(factory()))
    def fuzz(one: Call) -> None:
        run_tolerating(one, known)

    fuzz()


@contextlib.contextmanager
def working_directory(path: str) -> Iterator[None]:
    """Run in ``path`` (a fuzzed relative path such as "abc" or "1.0" lands there)."""
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


# --------------------------------------------------------------------------- census


def public_callables(*packages: str) -> set[str]:
    """Every public callable: the packages' ``__all__`` and their classes' public methods."""
    import enum
    import importlib
    import inspect

    found: set[str] = set()
    for package in packages:
        module = importlib.import_module(package)
        for name in module.__all__:
            obj = getattr(module, name)
            found.add(name)
            if not inspect.isclass(obj) or issubclass(obj, BaseException):
                continue
            if issubclass(obj, enum.Enum):
                members = [k for k, v in vars(obj).items()
                           if isinstance(v, (classmethod, staticmethod))]
            else:
                members = [k for k, v in inspect.getmembers(obj)
                           if inspect.isfunction(v) or inspect.ismethod(v)]
            found.update(f"{name}.{m}" for m in members if not m.startswith("_"))
    return found


def check_census(public: set[str], fuzz: dict[str, Any], skip: dict[str, str],
                 open_defects: tuple[Any, ...] = ()) -> None:
    """Every public callable is fuzzed or skipped with a reason; nothing stale; no overlap."""
    missing = sorted(public - set(fuzz) - set(skip))
    assert not missing, f"public callables with no fuzz entry and no reasoned skip: {missing}"
    stale = sorted((set(fuzz) | set(skip)) - public)
    assert not stale, f"fuzz entries for names that are no longer public: {stale}"
    assert not set(fuzz) & set(skip)
    assert {d.callable for d in open_defects} <= set(fuzz)


def ledger_targets(*, budgets: tuple[float, ...], accountings: tuple[str, ...],
                   items: tuple[str | None, ...], epochs: tuple[int, ...],
                   rounds: tuple[int | None, ...] = (None,)
                   ) -> st.SearchStrategy[ReleaseTarget]:
    """ReleaseTargets, each on a fresh in-memory ledger (small budgets: BudgetExceeded)."""

    @st.composite
    def targets(draw: st.DrawFn) -> ReleaseTarget:
        ledger = PrivacyLedger(":memory:", epoch_budget=draw(st.sampled_from(budgets)),
                               accounting=draw(st.sampled_from(accountings)))
        return ReleaseTarget(ledger, draw(st.sampled_from(epochs)),
                             line_item=draw(st.sampled_from(items)), why="fuzz",
                             round_index=draw(st.sampled_from(rounds)))

    return targets()
