"""The clients of an examples frame: their sorted index and each example's position in it.

Every device metric factorises ``client_id`` once (:func:`client_codes`) and
reduces over the codes with ``np.bincount``.

Client ids are integers or strings, one kind per column (:func:`id_kind`): an
int ``7`` and a str ``"7"`` are different keys to a hash table, so a column
mixing them would count one client twice; a bool ``True`` equals ``1`` and a
float ``7.0`` equals ``7`` in memory but hashes apart from it on Dask. Such
columns are refused, never guessed at. Numpy and Python integers are one kind
(``np.int64(7)`` and ``7`` are the same client).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from spatialdp._validation import check_text, fail
from spatialdp.exceptions import InvalidInput

__all__ = ["CLIENT_COLUMN", "ID_KINDS", "IntArray", "canonical_ids", "check_examples_frame",
           "check_same_length", "client_codes", "id_kind", "mixed_ids", "one_kind"]

CLIENT_COLUMN = "client_id"

#: The kinds of id a client (or device) may have, as ``pandas.api.types.infer_dtype`` names
#: them; one kind per column.
ID_KINDS = ("integer", "string")

IntArray = NDArray[np.int64]


def client_codes(client_ids: ArrayLike) -> tuple[IntArray, pd.Index]:
    """Sorted client index and each example's position in it (a factorisation)."""
    if isinstance(client_ids, pd.DataFrame):
        raise InvalidInput(
            f"client_id is a table of {client_ids.shape[1]} columns (is the column name "
            "repeated?); give one client id per example")
    if isinstance(client_ids, (str, bytes)) or np.ndim(client_ids) == 0:
        raise fail("client_ids", client_ids, "is not a sequence of ids",
                   "give one client id per example (a column, list or array)")
    if not isinstance(client_ids, (pd.Series, pd.Index, np.ndarray)):
        # a list: numpy would turn [7, "7"] into two "7"s and [True, 2] into [1, 2]
        id_kind(np.asarray(client_ids, dtype=object).ravel(), "client_ids")
    values = client_ids if isinstance(client_ids, pd.Series) else np.asarray(client_ids).ravel()
    if len(values) == 0:
        raise InvalidInput(
            "there are no examples; a client with no examples reports nothing: skip it"
        )
    fast = _sorted_int_codes(values)
    if fast is not None:
        return fast
    id_kind(values, str(values.name) if isinstance(values, pd.Series) else "client_ids")
    try:
        codes, uniques = pd.factorize(values, sort=True)
    except TypeError:
        raise _unhashable() from None
    missing = np.flatnonzero(codes < 0)
    if missing.size:
        raise InvalidInput(f"{missing.size} examples have no client_id (first at row "
                           f"{int(missing[0])}); every example needs its client")
    return codes.astype(np.int64), pd.Index(uniques, name=CLIENT_COLUMN)


def _unhashable() -> InvalidInput:
    return InvalidInput(
        "client ids must be hashable values such as ints or strings (found lists, dicts "
        "or arrays); give one plain id per example")


def id_kind(values: Any, name: str = CLIENT_COLUMN) -> str | None:
    """Return the one kind of a column of ids, ``"integer"`` or ``"string"``; refuse others.

    Missing values are skipped (None when there is no id at all): refusing them
    is the caller's job, with its own wording. Numpy and Python integers are
    one kind; a categorical column is judged by its categories.

    Parameters
    ----------
    values : array-like, Series or Index
        The ids (client or device ids).
    name : str
        The column or argument, named in a refusal.

    Raises
    ------
    InvalidInput
        Ids of more than one type (ints and strs), booleans, floats, or
        anything but integers and strings.

    Examples
    --------
    >>> id_kind(pd.Series([7, np.int64(8)], dtype=object))
    'integer'
    >>> id_kind(pd.Series(["a", "b"], dtype="string[pyarrow]"))
    'string'
    >>> id_kind(pd.Series([7, "7"], dtype=object))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: client_id mixes ids of types int and str: ...
    """
    dtype = getattr(values, "dtype", None)
    if isinstance(dtype, pd.CategoricalDtype):
        values, dtype = dtype.categories, dtype.categories.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iu":
        return "integer"  # the usual case, from the dtype alone
    if isinstance(dtype, pd.StringDtype):
        return "string"
    kind = pd.api.types.infer_dtype(values, skipna=True)
    if kind in ID_KINDS:
        return str(kind)
    if kind == "empty":
        return None
    raise _refuse_kind(values, str(kind), name)


def _refuse_kind(values: Any, kind: str, name: str) -> InvalidInput:
    """Build the refusal of a column of ids that are not all integers or all strings."""
    dtype = getattr(values, "dtype", None)
    if dtype is not None and dtype != np.dtype(object):
        types = [str(dtype)]  # a numpy or an extension dtype (nullable float or bool)
    else:
        present = [v for v in np.asarray(values, dtype=object).ravel() if not _missing(v)]
        if any(not isinstance(v, Hashable) for v in present):
            return _unhashable()
        types = sorted({type(v).__name__ for v in present})
    if kind == "boolean":
        problem = "holds booleans (True would be the same client as 1)"
    elif kind in ("floating", "mixed-integer-float", "decimal"):
        problem = ("holds floating-point ids (7.0 is one client with 7 in memory but a "
                   "different key on Dask)")
    elif len(types) > 1:
        return mixed_ids(name, types)
    else:
        problem = "holds ids that are neither integers nor strings"
    return InvalidInput(
        f"{name} {problem}: types {', '.join(types)}; give every client one integer or one "
        "string id, all of one type (e.g. .astype('int64') for whole numbers, .astype(str))")


def mixed_ids(name: str, types: Collection[str], where: str = "") -> InvalidInput:
    """Build the refusal of ids of more than one type (``where``: e.g. " across partitions")."""
    listed = sorted(types)
    shown = " and ".join([", ".join(listed[:-1]), listed[-1]]) if len(listed) > 1 else listed[0]
    return InvalidInput(
        f"{name} mixes ids of types {shown}{where}: one client could count twice (an int 7 "
        "and a str '7') or two as one (True and 1); give every id as one type (all integers "
        "or all strings, e.g. .astype(str) on every source)")


def one_kind(kinds: Collection[str | None], name: str = CLIENT_COLUMN) -> str | None:
    """Return the one id kind of several partitions (None if none has ids); refuse a mix.

    Examples
    --------
    >>> one_kind({"integer", None})
    'integer'
    >>> one_kind({"integer", "string"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: client_id mixes ids of types integer and string across...
    """
    seen = {k for k in kinds if k is not None}
    if len(seen) > 1:
        raise mixed_ids(name, seen, " across partitions")
    return next(iter(seen), None)


def canonical_ids(values: pd.Series, name: str = CLIENT_COLUMN) -> pd.Series:
    """Return ids in one dtype per kind, so that equal ids hash alike in every partition.

    A shuffle by id (Dask's) sends each row to the partition its id's hash
    picks, and pandas hashes an int64 ``7`` by its bits but an object ``7`` by
    its text: over partitions of different dtypes one client would land in two
    partitions. Integer ids become int64 (uint64 beyond it); strings hash by
    their text in every string dtype and are returned as they are. Refuses ids
    that are not all integers or all strings (:func:`id_kind`).

    Examples
    --------
    >>> canonical_ids(pd.Series([7, np.int32(8)], dtype=object)).dtype
    dtype('int64')
    """
    if id_kind(values, name) != "integer" or values.dtype in (np.int64, np.uint64):
        return values
    for dtype in (np.int64, np.uint64):
        try:
            return values.astype(dtype)
        except (OverflowError, TypeError, ValueError):  # beyond int64; or missing ids,
            continue                                    # refused later with their count
    return values


def _missing(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value))


def _sorted_int_codes(values: pd.Series | NDArray[np.generic]
                      ) -> tuple[IntArray, pd.Index] | None:
    """Factorise integer ids that are already sorted, without hashing; or return None.

    Examples stored by client (Parquet files sorted by ``client_id``, Dask
    partitions with known divisions) arrive sorted: each run of one id is one
    client, so the codes repeat each client's number over its run (no hash
    table, no sort). Anything else (strings, unsorted ids, nullable integers) returns
    None for the general factorisation.
    """
    if isinstance(values, pd.Series) and not isinstance(values.dtype, np.dtype):
        return None  # categorical or nullable: the general path keeps its semantics
    ids: NDArray[np.integer] = np.asarray(values)
    if ids.dtype.kind not in "iu" or ids.ndim != 1:
        return None
    if ids.size > 1 and not bool((ids[1:] >= ids[:-1]).all()):
        return None
    starts = np.empty(ids.size, dtype=bool)
    starts[0] = True
    np.not_equal(ids[1:], ids[:-1], out=starts[1:])
    first = np.flatnonzero(starts)  # each client's first row
    codes = np.repeat(np.arange(first.size, dtype=np.int64), np.diff(first, append=ids.size))
    return codes, pd.Index(ids[first], name=CLIENT_COLUMN)


def check_same_length(values: NDArray[np.float64], codes: IntArray, what: str) -> None:
    if values.shape != codes.shape:
        raise InvalidInput(
            f"{what} has {values.size} values but there are {codes.size} client ids; "
            "give one client id per example"
        )


def check_examples_frame(frame: pd.DataFrame, columns: Sequence[str], purpose: str) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise InvalidInput(f"expected a DataFrame of examples, got {type(frame).__name__}")
    if len(frame) == 0:
        raise InvalidInput(
            "the examples frame is empty; a client with no examples reports nothing: skip it"
        )
    repeated = frame.columns[frame.columns.duplicated()]
    if len(repeated):
        raise InvalidInput(
            f"the examples frame repeats the column names {list(repeated)[:5]}; give each "
            "column once")
    for column in columns:
        check_text(column, "column name")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InvalidInput(
            f"{purpose} needs columns {missing}; the frame has {list(frame.columns)[:10]}"
        )

