"""Public covariates of a small-area model: checked, and refused when the report made them.

A covariate must be public: a region's area, a density class, a population
from the shipped city data, a previous round's published value, any column
joined onto the partition. A column the report itself produced from private
data (a cohort, an error bar, a reliability class, a noisy count...) is not a
covariate: it would let the cohort, and through it the clients, drive the
model in a way no one has accounted. Such columns are refused by name (any
report column but ``value``, with or without a ``metric.`` prefix) and by
content (a column equal to one of them, or to the response itself).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp._validation import fail
from spatialdp.exceptions import InvalidInput
from spatialdp.schema import REPORT_COLUMNS

__all__ = ["PRIVATE_COLUMNS", "design_matrix"]

#: Report columns that are not published values: never a covariate.
PRIVATE_COLUMNS: tuple[str, ...] = tuple(c for c in REPORT_COLUMNS if c != "value")

#: Report columns compared by content with every covariate.
_COMPARED = ("cohort", "error_bar", "noise_std", "cv", "noise_scale", "noisy_count",
             "noisy_sum", "ci_low", "ci_high", "value")


def design_matrix(covariates: pd.DataFrame | None, frame: pd.DataFrame,
                  intercept: bool = True) -> tuple[NDArray[np.float64], list[str]]:
    """Return the model's design matrix, one row per region of ``frame``, and its column names.

    Parameters
    ----------
    covariates : DataFrame or None
        Numeric public covariates indexed by region id (every region of the
        frame must have a row; extra rows are ignored). Categorical columns are
        one-hot encoded (first level dropped).
    frame : DataFrame
        The metric's report frame (compared by content with the covariates).
    intercept : bool
        Add a constant column.

    Raises
    ------
    InvalidInput
        A covariate that the report produced (by name or content), a missing
        region, a NaN, a non-numeric column, or a rank-deficient design.

    Examples
    --------
    >>> frame = pd.DataFrame({"value": [1.0, 2.0, 3.0], "cohort": [10, 20, 30]},
    ...                      index=["a", "b", "c"])
    >>> X, names = design_matrix(pd.DataFrame({"area": [1.0, 5.0, 2.0]}, index=["a", "b", "c"]),
    ...                          frame)
    >>> names, X.shape
    (['intercept', 'area'], (3, 2))
    """
    n = len(frame)
    parts: list[NDArray[np.float64]] = [np.ones((n, 1))] if intercept else []
    names = ["intercept"] if intercept else []
    if covariates is not None:
        table = _aligned(covariates, frame)
        for column in table.columns:
            block, labels = _encoded(table[column], str(column))
            _refuse_report_content(block, str(column), frame)
            parts.append(block)
            names += labels
    if not parts:
        raise InvalidInput("the model has no column: pass covariates or intercept=True")
    X = np.hstack(parts)
    if np.linalg.matrix_rank(X) < X.shape[1]:
        raise InvalidInput(
            f"the covariates {names} are collinear (the design has rank "
            f"{np.linalg.matrix_rank(X)} < {X.shape[1]} columns); drop a redundant column")
    return X, names


def _aligned(covariates: pd.DataFrame, frame: pd.DataFrame) -> pd.DataFrame:
    """Return the covariates in the frame's region order, refusing report columns and gaps."""
    if isinstance(covariates, pd.Series):
        covariates = covariates.to_frame()
    if not isinstance(covariates, pd.DataFrame):
        raise fail("covariates", covariates, "is not a DataFrame",
                   "pass a DataFrame of public covariates indexed by region id")
    for column in covariates.columns:
        bare = str(column).rsplit(".", 1)[-1]
        if bare in PRIVATE_COLUMNS or str(column).split("_")[-1] in PRIVATE_COLUMNS:
            raise fail("covariates", column,
                       "is a column the report produced from private data, not a covariate",
                       "use public covariates (area, density, population, a previous "
                       "round's published value)")
    index = covariates.index.astype(str)
    if index.has_duplicates:
        raise InvalidInput("covariates has repeated region ids; give one row per region")
    table = covariates.set_axis(index)
    absent = ~frame.index.astype(str).isin(index)
    if absent.any():
        raise InvalidInput(
            f"covariates has no row for {int(absent.sum())} region(s) of the report (first "
            f"{frame.index[np.flatnonzero(absent)[0]]!r}); give every region a row")
    return table.loc[frame.index.astype(str)]


def _encoded(column: pd.Series, name: str) -> tuple[NDArray[np.float64], list[str]]:
    """Return a covariate as numbers: a numeric column as is, a categorical one-hot encoded."""
    if (isinstance(column.dtype, pd.CategoricalDtype) or column.dtype == object
            or pd.api.types.is_string_dtype(column.dtype)):
        dummies = pd.get_dummies(column.astype("category"), prefix=name, drop_first=True,
                                 dtype=float)
        if column.isna().any():
            raise InvalidInput(f"covariate {name!r} has missing values; fill or drop them")
        return dummies.to_numpy(), [str(c) for c in dummies.columns]
    if column.dtype == bool or not pd.api.types.is_numeric_dtype(column.dtype):
        raise fail("covariates", name, f"has dtype {column.dtype}, not numbers",
                   "pass numeric or categorical columns")
    values = column.to_numpy(dtype=float, na_value=np.nan)
    if not np.isfinite(values).all():
        raise InvalidInput(f"covariate {name!r} has NaN or infinite values; fill or drop them")
    return values[:, None], [name]


def _refuse_report_content(block: NDArray[np.float64], name: str, frame: pd.DataFrame) -> None:
    """Refuse a covariate equal to a report column on the published regions (a renamed copy)."""
    if "suppressed" not in frame.columns:
        return
    shown = ~frame["suppressed"].to_numpy(dtype=bool)
    for column in _COMPARED:
        if column not in frame.columns or shown.sum() < 2:
            continue
        made = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float,
                                                                      na_value=np.nan)[shown]
        for j in range(block.shape[1]):
            if np.allclose(block[shown, j], made, rtol=1e-9, atol=0.0, equal_nan=False):
                raise fail("covariates", name, f"equals the report's {column!r} column",
                           "a covariate must be public data, not what the report produced "
                           "from the clients (a previous round's value is fine)")
