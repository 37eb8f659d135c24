"""What a release publishes, as the auditor sees it: numbers and tokens.

A user receives far more than the noised values: a result object (every
column of its frames, numeric or not: values, error bars, cohorts,
reliability classes, suppression flags, labels; its metadata and its summary
text), the warnings and log records emitted while it ran, and the files its
writers produce. :func:`capture` runs one release and turns all of it into a
:class:`Publication`:

- ``numbers``: every number, under a label that says where it was published
  (``result.frames.loss.value[CO]``, ``warning UserWarning#0#1``: the second
  number in the first ``UserWarning``'s text);
- ``tokens``: everything else, as ``label=text`` (``result.frames.loss.
  reliability[CO]=high``, the file name ``file=report.csv``). A text's numbers
  are taken out of it (``'only 57 clients'`` becomes the token ``'only #
  clients'`` and the number 57), so that text with noisy numbers in it gives
  one token and numbers that can be compared across draws.

The auditor (:func:`~spatialdp.audit.audit`) draws many publications under
each of two neighbouring inputs and looks for a number whose distribution moves
(:func:`~spatialdp.audit.events.select_event`'s numeric events) or a token seen
under one input and not the other (its categorical events).
:func:`read_files` does the same for written files (CSV, JSON, GeoPackage,
Parquet, Markdown, HTML and other text; any other file by its digest).

Examples
--------
>>> import warnings
>>> def release(x, target):
...     warnings.warn(f"only {x} clients have the metric")
...     return {"value": x + 0.5, "class": "high"}
>>> pub = capture(release, 57, None)
>>> pub.numbers
{'result.value': 57.5, 'warning UserWarning#0#0': 57.0}
>>> sorted(pub.tokens)
['result.class=high', 'warning UserWarning#0=only # clients have the metric']
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import hashlib
import json
import logging
import math
import numbers
import os
import re
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp._validation import fail
from spatialdp.privacy.target import Accounting

__all__ = ["Publication", "PublicationSchema", "capture", "emitted", "publication",
           "read_files", "split_numbers"]

#: A number inside text: not glued to a word (``loss@1`` gives 1; ``463d22`` gives none).
_NUMBER = re.compile(r"(?<!\w)[-+]?(?:\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|nan|inf)(?!\w)")
_MAX_DEPTH = 12
#: File suffixes read as tables (through pyogrio) and as text.
_VECTOR = (".gpkg", ".geojson", ".fgb", ".shp")
_TEXT = (".md", ".txt", ".html", ".htm", ".svg", ".log", ".xml", ".yaml", ".yml")


@dataclass
class Publication:
    """Everything one release published: labelled numbers and ``label=text`` tokens.

    Attributes
    ----------
    numbers : dict of str -> float
    tokens : set of str
    """

    numbers: dict[str, float] = field(default_factory=dict)
    tokens: set[str] = field(default_factory=set)

    def number(self, label: str, value: float) -> None:
        """Record one number."""
        self.numbers[label] = float(value)

    def token(self, label: str, text: str) -> None:
        """Record one non-numeric output."""
        self.tokens.add(f"{label}={text}")

    def text(self, label: str, text: str) -> None:
        """Record a text: its template per line as a token, its numbers as numbers."""
        lines = text.splitlines() or [""]
        for j, line in enumerate(lines):
            where = label if len(lines) == 1 else f"{label}:{j}"
            template, values = split_numbers(line)
            self.token(where, template)
            for k, value in enumerate(values):
                self.number(f"{where}#{k}", value)

    def merge(self, other: Publication, prefix: str = "") -> None:
        """Add ``other``'s numbers and tokens, their labels prefixed."""
        head = f"{prefix}." if prefix else ""
        self.numbers.update({head + k: v for k, v in other.numbers.items()})
        self.tokens.update(head + t for t in other.tokens)

    def add(self, label: str, value: Any) -> None:
        """Record any output: numbers, text, arrays, frames, mappings, dataclasses...

        See :func:`publication` for what each kind of object contributes.
        """
        _Walker(self).add(label, value, 0)

    def __len__(self) -> int:
        return len(self.numbers) + len(self.tokens)


def split_numbers(text: str) -> tuple[str, list[float]]:
    """Return ``text`` with each number replaced by ``#``, and the numbers.

    Examples
    --------
    >>> split_numbers("loss@1: 0.25 +/- 1.5e-02 (95%), cohort=60, suppressed 5-9")
    ('loss@#: # +/- # (#%), cohort=#, suppressed #-#', [1.0, 0.25, 0.015, 95.0, 60.0, 5.0, 9.0])
    >>> split_numbers("partition 463d2264bda49dac")
    ('partition 463d2264bda49dac', [])
    """
    found = [float(m) for m in _NUMBER.findall(text)]
    return _NUMBER.sub("#", text), found


class _Walker:
    """Turns an object into numbers and tokens (see :func:`publication`)."""

    def __init__(self, out: Publication) -> None:
        self.out = out
        self.seen: set[int] = set()

    def add(self, label: str, value: Any, depth: int) -> None:
        out = self.out
        if depth > _MAX_DEPTH:
            out.token(label, "<nested too deep>")
        elif isinstance(value, Publication):
            out.merge(value, label)
        elif value is None or value is pd.NA or value is pd.NaT:
            out.token(label, "missing")
        elif isinstance(value, (bool, np.bool_)):
            out.token(label, str(bool(value)))
        elif isinstance(value, (numbers.Real, np.integer, np.floating)):
            out.number(label, float(value))
        elif isinstance(value, (complex, np.complexfloating)):
            out.number(f"{label}.real", float(value.real))
            out.number(f"{label}.imag", float(value.imag))
        elif isinstance(value, str):
            out.text(label, value)
        elif isinstance(value, (dt.date, dt.time, enum.Enum)):
            out.token(label, value.isoformat() if not isinstance(value, enum.Enum) else
                      str(value))
        elif isinstance(value, (bytes, bytearray, memoryview)):
            out.token(label, "sha256:" + hashlib.sha256(bytes(value)).hexdigest())
        elif isinstance(value, os.PathLike):
            out.token(label, Path(value).name)  # a path, not its folder (a temporary one)
        elif isinstance(value, pd.DataFrame):
            self.frame(label, value, depth)
        elif isinstance(value, pd.Series):
            self.column(label, [str(i) for i in value.index], value, depth)
        elif isinstance(value, np.ndarray):
            self.array(label, value, depth)
        else:
            self.container(label, value, depth)

    def container(self, label: str, value: Any, depth: int) -> None:
        if id(value) in self.seen:
            self.out.token(label, "<cycle>")
            return
        self.seen.add(id(value))
        try:
            if isinstance(value, Mapping):
                for key, item in value.items():
                    self.add(f"{label}.{key}", item, depth + 1)
            elif isinstance(value, (list, tuple)):
                for i, item in enumerate(value):
                    self.add(f"{label}[{i}]", item, depth + 1)
            elif isinstance(value, (set, frozenset)):
                for item in sorted(map(str, value)):
                    self.out.token(label, item)
            elif dataclasses.is_dataclass(value) and not isinstance(value, type):
                self.record(label, value, depth)
            elif callable(getattr(value, "to_dict", None)):
                self.add(label, value.to_dict(), depth + 1)
                self.methods(label, value, depth)
            else:
                self.out.token(label, f"<{type(value).__name__}>")
        finally:
            self.seen.discard(id(value))

    def record(self, label: str, value: Any, depth: int) -> None:
        """Add a result object: its public fields, then ``metadata()`` and ``summary()``."""
        self.out.token(label, f"<{type(value).__name__}>")
        for f in dataclasses.fields(value):
            if not f.name.startswith("_"):
                self.add(f"{label}.{f.name}", getattr(value, f.name), depth + 1)
        self.methods(label, value, depth)

    def methods(self, label: str, value: Any, depth: int) -> None:
        for name in ("metadata", "summary"):
            method = getattr(value, name, None)
            if callable(method):
                self.add(f"{label}.{name}()", method(), depth + 1)

    def array(self, label: str, value: NDArray[Any], depth: int) -> None:
        self.out.token(f"{label}.shape", "x".join(map(str, value.shape)))
        flat = value.ravel()
        if value.dtype.kind in "iuf":
            self.out.numbers.update(zip([f"{label}[{k}]" for k in range(flat.size)],
                                        flat.astype(np.float64).tolist(), strict=True))
            return
        for k, item in enumerate(flat.tolist()):
            self.add(f"{label}[{k}]", item, depth + 1)

    def frame(self, label: str, frame: pd.DataFrame, depth: int) -> None:
        rows = [str(i) for i in frame.index]
        self.out.token(f"{label}.rows", "|".join(rows))
        self.out.token(f"{label}.columns", "|".join(map(str, frame.columns)))
        # One conversion of the whole frame: column access copies attrs (deeply) every time.
        cells = frame.to_numpy(dtype=object)
        for i, (column, dtype) in enumerate(zip(frame.columns, frame.dtypes, strict=True)):
            self.cells(f"{label}.{column}", rows, cells[:, i], dtype, depth)
        if frame.attrs:
            self.add(f"{label}.attrs", dict(frame.attrs), depth + 1)

    def column(self, label: str, rows: list[str], series: pd.Series, depth: int) -> None:
        self.cells(label, rows, series.to_numpy(dtype=object), series.dtype, depth)

    def cells(self, label: str, rows: list[str], cells: NDArray[Any], dtype: Any,
              depth: int) -> None:
        """One column's cells (as objects): numbers, geometry bounds, or anything else."""
        if getattr(dtype, "name", "") == "geometry":
            import shapely

            bounds = shapely.bounds(cells)
            for row, box in zip(rows, bounds.tolist(), strict=True):
                for side, number in zip(("minx", "miny", "maxx", "maxy"), box, strict=True):
                    self.out.number(f"{label}[{row}].{side}", number)
        elif _is_numeric(dtype):
            self.out.numbers.update(
                (f"{label}[{row}]", math.nan if v is pd.NA or v is None else float(v))
                for row, v in zip(rows, cells.tolist(), strict=True))
        else:
            for row, item in zip(rows, cells.tolist(), strict=True):
                self.add(f"{label}[{row}]", item, depth + 1)


def _is_numeric(dtype: Any) -> bool:
    """Integers and floats (numpy or nullable); not bools, categories, text or geometry."""
    return (getattr(dtype, "kind", "") in "iuf" and not isinstance(dtype, pd.CategoricalDtype)
            and getattr(dtype, "name", "") != "geometry")


def publication(value: Any, label: str = "result") -> Publication:
    """Return what ``value`` publishes, as labelled numbers and tokens.

    - numbers (Python, numpy) are numbers; bools, None and missing values are
      tokens; text gives one token per line (its numbers taken out, see
      :func:`split_numbers`) and the numbers;
    - arrays: every element (and the shape, as a token);
    - DataFrames and Series (GeoDataFrames too): every cell of every column,
      numeric or not, under ``<label>.<column>[<row>]``; a geometry by its
      bounds; the row and column labels and ``attrs`` (the metadata);
    - mappings, lists, tuples, sets: every item;
    - result objects (dataclasses such as
      :class:`~spatialdp.federated.RegionalReport`): every public field, then
      what ``metadata()`` and ``summary()`` return; other objects with
      ``to_dict()``: that, and the same methods; anything else: its type name;
    - a :class:`Publication` (e.g. :func:`read_files`' output): itself.

    Parameters
    ----------
    value : object
        What a release returned (or any part of it).
    label : str, default "result"
        The prefix of every number's and token's label.

    Returns
    -------
    Publication

    Examples
    --------
    >>> pub = publication(pd.DataFrame({"value": [1.5], "reliability": ["high"]},
    ...                                index=["CO"]))
    >>> pub.numbers
    {'result.value[CO]': 1.5}
    >>> sorted(pub.tokens)
    ['result.columns=value|reliability', 'result.reliability[CO]=high', 'result.rows=CO']
    """
    out = Publication()
    out.add(label, value)
    return out


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def emitted(call: Callable[[], Any]) -> tuple[Any, Publication]:
    """Run ``call()``; return its result and what it emitted on the way (warnings, logs).

    Every warning (``warning <Category>#<i>``: its text, whatever the warning
    filters say) and every log record (``log <logger> <LEVEL>#<i>``:
    spatialdp's loggers at DEBUG, other loggers at their configured levels).
    Exceptions propagate.

    Examples
    --------
    >>> import logging
    >>> result, side = emitted(lambda: logging.getLogger("spatialdp.x").info("%d rows", 3))
    >>> side.numbers, sorted(side.tokens)
    ({'log spatialdp.x INFO#0#0': 3.0}, ['log spatialdp.x INFO#0=# rows'])
    """
    handler = _Records()
    ours = logging.getLogger("spatialdp")
    level = ours.level
    root = logging.getLogger()
    root.addHandler(handler)
    ours.setLevel(logging.DEBUG)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = call()
    finally:
        ours.setLevel(level)
        root.removeHandler(handler)
    out = Publication()
    seen: Counter[str] = Counter()
    for message in caught:
        kind = f"warning {message.category.__name__}"
        out.text(f"{kind}#{seen[kind]}", str(message.message))
        seen[kind] += 1
    for record in handler.records:
        kind = f"log {record.name} {record.levelname}"
        out.text(f"{kind}#{seen[kind]}", record.getMessage())
        seen[kind] += 1
    return result, out


def capture(release: Callable[[Any, Any], Any], dataset: Any, target: Accounting | None
            ) -> Publication:
    """Run ``release(dataset, target)`` once and return everything it published.

    The result object (:func:`publication`, under ``result``) and what the
    call emitted (:func:`emitted`: warnings and log records). Exceptions
    propagate: an audit runs a release that publishes.

    Examples
    --------
    >>> import logging
    >>> def release(x, target):
    ...     logging.getLogger("spatialdp.example").info("released %d rows", x)
    ...     return x
    >>> capture(release, 3, None).numbers
    {'result': 3.0, 'log spatialdp.example INFO#0#0': 3.0}
    """
    result, side = emitted(lambda: release(dataset, target))
    out = publication(result)
    out.merge(side)
    return out


def read_files(paths: Iterable[str | os.PathLike[str]], root: str | os.PathLike[str] | None = None
               ) -> Publication:
    """Return what written files publish: their names and their whole contents.

    Call it inside the release's temporary folder, before the files go (an
    audit case writes each draw's files into a fresh folder and returns this).

    Parameters
    ----------
    paths : iterable of path
        The written files (e.g. what ``RegionalReport.write`` returns).
    root : path, optional
        Labels are paths relative to it (default: each file's name).

    Notes
    -----
    CSV, JSON and Parquet files are read as tables or documents; GeoPackage,
    GeoJSON, FlatGeobuf and Shapefiles through pyogrio (features and layer
    metadata); Markdown, HTML, SVG and other text line by line; any other file
    (an image) by its SHA-256 digest, which shows that it changed but not how.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = Path(folder) / "report.csv"
    ...     _ = pd.DataFrame({"region": ["CO"], "value": [1.5]}).to_csv(path, index=False)
    ...     pub = read_files([path], folder)
    >>> pub.numbers
    {'file report.csv.value[0]': 1.5}
    >>> sorted(pub.tokens)[-1]
    'file=report.csv'
    """
    out = Publication()
    base = None if root is None else Path(root)
    for item in paths:
        path = Path(item)
        if not path.is_file():
            raise fail("path", str(path), "is not a written file",
                       "read the files before their folder is removed")
        name = path.name if base is None else path.relative_to(base).as_posix()
        out.token("file", name)
        _read_one(out, f"file {name}", path)
    return out


def _read_one(out: Publication, label: str, path: Path) -> None:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        out.add(label, pd.read_csv(path))
    elif suffix == ".json":
        out.add(label, json.loads(path.read_text(encoding="utf-8")))
    elif suffix == ".parquet":
        out.add(label, pd.read_parquet(path))
    elif suffix in _VECTOR:
        import pyogrio

        out.add(label, pyogrio.read_dataframe(path))
        meta = pyogrio.read_info(path).get("layer_metadata") or {}
        out.add(f"{label}.layer_metadata", {k: _maybe_json(v) for k, v in meta.items()})
    elif suffix in _TEXT:
        out.text(label, path.read_text(encoding="utf-8"))
    else:
        out.token(label, "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest())


def _maybe_json(text: Any) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


class PublicationSchema:
    """The columns an audit reads from publications: one per number, one per telling token.

    Built from the selection draws of both inputs of a pair; it turns any
    publication into a fixed-width row, so the counted draws are read with the
    columns chosen on the selection draws. Numbers are every label seen (NaN in
    a draw that lacks it); tokens are those whose frequency differs between the
    two inputs (at most ``max_tokens``, the most different first), as 0/1
    indicator columns after the numbers (:attr:`categorical`).

    Examples
    --------
    >>> a = [publication({"v": 1.0, "c": "x"}) for _ in range(3)]
    >>> b = [publication({"v": 2.0, "c": "y"}) for _ in range(3)]
    >>> schema = PublicationSchema(a, b)
    >>> schema.labels
    ('result.v', 'token result.c=x', 'token result.c=y')
    >>> schema.matrix(b).tolist()
    [[2.0, 0.0, 1.0], [2.0, 0.0, 1.0], [2.0, 0.0, 1.0]]
    """

    def __init__(self, first: Sequence[Publication], second: Sequence[Publication], *,
                 max_tokens: int = 256) -> None:
        numbers_: dict[str, None] = {}
        for pub in (*first, *second):
            numbers_.update(dict.fromkeys(pub.numbers))
        self.numbers = tuple(numbers_)
        in_first = Counter(t for pub in first for t in pub.tokens)
        in_second = Counter(t for pub in second for t in pub.tokens)
        share = {t: abs(in_first[t] / max(len(first), 1) - in_second[t] / max(len(second), 1))
                 for t in in_first.keys() | in_second.keys()}
        telling = sorted((t for t, gap in share.items() if gap > 0),
                         key=lambda t: (-share[t], t))
        self.tokens = tuple(sorted(telling[:max_tokens]))

    @property
    def labels(self) -> tuple[str, ...]:
        """Names of the columns: number labels, then ``token <label>=<text>``."""
        return self.numbers + tuple(f"token {t}" for t in self.tokens)

    @property
    def categorical(self) -> range:
        """Positions of the token columns."""
        return range(len(self.numbers), len(self.numbers) + len(self.tokens))

    def matrix(self, pubs: Sequence[Publication]) -> NDArray[np.float64]:
        """Return one row per publication: its numbers (NaN if absent), then token indicators."""
        out = np.empty((len(pubs), len(self.numbers) + len(self.tokens)))
        for i, pub in enumerate(pubs):
            got = pub.numbers.get
            out[i, :len(self.numbers)] = [got(label, math.nan) for label in self.numbers]
            out[i, len(self.numbers):] = [t in pub.tokens for t in self.tokens]
        return out
