"""The clients of an examples frame: their sorted index and each example's position in it.

Every device metric factorises ``client_id`` once (:func:`_client_codes`) and
reduces over the codes with ``np.bincount``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from spatialdp._validation import check_text, fail
from spatialdp.exceptions import InvalidInput
from spatialdp.federated._checks import FloatArray, _refuse_rows

CLIENT_COLUMN = "client_id"

IntArray = NDArray[np.int64]


def _client_codes(client_ids: ArrayLike) -> tuple[IntArray, pd.Index]:
    """Sorted client index and each example's position in it (a factorisation)."""
    if isinstance(client_ids, pd.DataFrame):
        raise InvalidInput(
            f"client_id is a table of {client_ids.shape[1]} columns (is the column name "
            "repeated?); give one client id per example")
    if isinstance(client_ids, (str, bytes)) or np.ndim(client_ids) == 0:
        raise fail("client_ids", client_ids, "is not a sequence of ids",
                   "give one client id per example (a column, list or array)")
    values = client_ids if isinstance(client_ids, pd.Series) else np.asarray(client_ids).ravel()
    if len(values) == 0:
        raise InvalidInput(
            "there are no examples; a client with no examples reports nothing: skip it"
        )
    fast = _sorted_int_codes(values)
    if fast is not None:
        return fast
    try:
        codes, uniques = pd.factorize(values, sort=True)
    except TypeError:
        raise InvalidInput(
            "client ids must be hashable values such as ints or strings (found lists, dicts "
            "or arrays); give one plain id per example") from None
    _refuse_rows(codes < 0, InvalidInput, lambda first: (
        f"{int((codes < 0).sum())} examples have no client_id (first at row {first}); "
        "every example needs its client"
    ))
    return codes.astype(np.int64), pd.Index(uniques, name=CLIENT_COLUMN)


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


def _same_length(values: FloatArray, codes: IntArray, what: str) -> None:
    if values.shape != codes.shape:
        raise InvalidInput(
            f"{what} has {values.size} values but there are {codes.size} client ids; "
            "give one client id per example"
        )


def _frame_columns(frame: pd.DataFrame, columns: Sequence[str], purpose: str) -> None:
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

