"""One validation layer for every public entry point.

In the spirit of scikit-learn's ``_param_validation``: each check takes the
value and the argument's name, returns the value in its canonical type, and
raises :class:`~spatialdp.exceptions.InvalidInput` with a message of one shape::

    {name}={value!r} {what is wrong}; {how to fix it}

Numbers are accepted as Python or numpy scalars (``np.float32(0.5)``,
``np.int64(3)``, :class:`fractions.Fraction`, :class:`decimal.Decimal`).
Refused everywhere: ``bool`` (``True`` is not an epsilon), strings even when
they spell a number (``"1.0"``), ``None`` where a number is needed, NaN and
infinities. No check coerces silently: a float cohort floor of ``50.0`` is
accepted only because it is integral, ``50.5`` is refused.

Examples
--------
>>> check_epsilon(np.float64(0.5))
0.5
>>> check_epsilon(True)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
spatialdp.exceptions.InvalidInput: epsilon=True is a bool, not a number; pass a positive ...
"""

from __future__ import annotations

import math
import numbers
import os
import reprlib
from collections.abc import Collection, Iterable
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from spatialdp.exceptions import InvalidInput

__all__ = [
    "MAX_EPSILON",
    "MAX_SCALE",
    "MIN_ALPHA",
    "as_array",
    "check_alpha",
    "check_choice",
    "check_cohort_floor",
    "check_count",
    "check_delta",
    "check_epsilon",
    "check_finite_array",
    "check_flag",
    "check_ids",
    "check_instance",
    "check_integer",
    "check_number",
    "check_output",
    "check_path",
    "check_positive",
    "check_probability",
    "check_real",
    "check_resolution",
    "check_scale",
    "check_text",
    "fail",
    "kind_name",
    "short_repr",
]

#: Smallest significance level: a bar at ``1 - 1e-15`` is already beyond what float
#: arithmetic can tell apart from certainty.
MIN_ALPHA = 1e-15

#: Largest epsilon (or rho) a check accepts: beyond it a release is not private in any
#: useful sense, and scales ``sensitivity / epsilon`` underflow.
MAX_EPSILON = 1e6

#: Largest noise scale (Laplace ``b`` or Gaussian ``sigma``) a mechanism, a sampler
#: or an error bar accepts. Beyond it a release carries no usable information.
MAX_SCALE = 1e15

_SCALE_FIX = ("pass the noise scale, b = laplace_scale(sensitivity, epsilon) or "
              "sigma = gaussian_sigma(sensitivity, rho), at most 1e15")

_T = TypeVar("_T")


def fail(name: str, value: Any, problem: str, fix: str) -> InvalidInput:
    """Build the one message shape, ``name=value problem; fix`` (returned, for ``raise``).

    Examples
    --------
    >>> str(fail("alpha", 2.0, "is above 1", "pass e.g. 0.05"))
    'alpha=2.0 is above 1; pass e.g. 0.05'
    """
    return InvalidInput(f"{name}={short_repr(value)} {problem}; {fix}")


class _ShortRepr(reprlib.Repr):
    """:mod:`reprlib` for lists and tuples (their first items), the plain repr for the rest."""

    def repr1(self, x: Any, level: int) -> str:
        if type(x) in (list, tuple):  # reprlib would sort dicts and sets: keep their order
            return super().repr1(x, level)
        if isinstance(x, (str, bytes)):
            x = x[: self.maxstring + 1]  # cut below like any long repr; never copy a huge text
        try:
            return repr(x)
        except Exception:  # a broken __repr__ must not hide the refusal
            return f"<{type(x).__name__} object>"


def short_repr(value: Any, limit: int = 80) -> str:
    """Return ``repr(value)`` cut to ``limit`` characters, for a message.

    Lists and tuples are read only as far as their first items (as :mod:`reprlib`
    does), so a list of a million cells costs no more than a short one; the text
    is then cut at ``limit``.

    Examples
    --------
    >>> short_repr([1, 2, 3])
    '[1, 2, 3]'
    >>> short_repr(list(range(100)), limit=20)
    '[0, 1, 2, 3, 4, 5...'
    >>> short_repr("x" * 100, limit=8)
    "'xxxx..."
    """
    short = _ShortRepr()
    short.maxlist = short.maxtuple = max(limit // 2, 1)  # each item takes 3 characters or more
    short.maxstring = limit
    text = short.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def as_array(values: Any, name: str, fix: str) -> np.ndarray:
    """Return ``np.asarray(values)``, refusing what numpy cannot hold as one array.

    Examples
    --------
    >>> as_array([1, 2], "x", "pass numbers").tolist()
    [1, 2]
    >>> as_array([[1], [1, 2]], "x", "pass rows of one length")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: x=[[1], [1, 2]] cannot be read as one array; ...
    """
    try:
        return np.asarray(values)
    except (TypeError, ValueError, UnicodeError):  # ragged lists, undecodable bytes...
        raise fail(name, values, "cannot be read as one array", fix) from None


_KIND_NAMES = {"U": "string", "S": "bytes", "b": "bool", "c": "complex", "M": "datetime",
               "m": "timedelta", "V": "raw", "O": "object", "f": "float", "i": "integer",
               "u": "integer"}


def kind_name(dtype: np.dtype[Any]) -> str:
    """Return a plain name for the kind of values a numpy dtype holds, for a message.

    Examples
    --------
    >>> kind_name(np.dtype("<U3")), kind_name(np.dtype(bool))
    ('string', 'bool')
    """
    return _KIND_NAMES.get(dtype.kind, str(dtype))


def check_path(value: Any, name: str, fix: str, *, kind: str = "path") -> Path:
    """Return a ``str`` or ``os.PathLike`` as a :class:`~pathlib.Path`; refuse anything else.

    Examples
    --------
    >>> check_path("out", "folder", "pass a folder")
    PosixPath('out')
    >>> check_path(3, "path", "pass a str or pathlib.Path", kind="file path")
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: path=3 is a int, not a file path; pass a str or pathlib.Path
    """
    if not isinstance(value, (str, os.PathLike)):
        raise fail(name, value, f"is a {type(value).__name__}, not a {kind}", fix)
    return Path(value)


def check_number(
    value: Any,
    name: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    fix: str = "pass a finite number",
) -> float:
    """Return a finite real number within optional bounds, as a Python float.

    Parameters
    ----------
    value : Any
        Python or numpy real scalar, ``Fraction`` or ``Decimal``.
    name : str
        The argument's name, used in the message.
    low, high : float, optional
        Bounds; closed unless ``low_open`` / ``high_open``.
    fix : str
        What the caller should do instead, appended to every message.

    Raises
    ------
    InvalidInput
        For bools, strings, non-numbers, NaN, infinities and values out of bounds.

    Examples
    --------
    >>> check_number(np.int64(3), "k", low=0)
    3.0
    >>> check_number("3", "k")
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: k='3' is a string, not a number; pass a finite number
    """
    number = check_real(value, name, fix=fix)
    if not math.isfinite(number):
        raise fail(name, value, "is not finite", fix)
    if low is not None and (number < low or (low_open and number == low)):
        raise fail(name, value, f"is below the limit {'>' if low_open else '>='} {low:g}", fix)
    if high is not None and (number > high or (high_open and number == high)):
        raise fail(name, value, f"is above the limit {'<' if high_open else '<='} {high:g}", fix)
    return number


def check_real(value: Any, name: str, *, fix: str = "pass a finite number") -> float:
    """Return a real number as a Python float; NaN and infinities pass (callers decide).

    The type half of :func:`check_number`: bools, strings, ``None``, complex
    numbers, arrays and every other non-real are refused.

    Examples
    --------
    >>> check_real(np.float32(0.5), "x")
    0.5
    >>> check_real(float("inf"), "x")
    inf
    >>> check_real(True, "x")
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: x=True is a bool, not a number; pass a finite number
    """
    if isinstance(value, (bool, np.bool_)):
        raise fail(name, value, "is a bool, not a number", fix)
    if isinstance(value, (str, bytes)):
        raise fail(name, value, "is a string, not a number", fix)
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if not isinstance(value, (numbers.Real, Decimal)):
        raise fail(name, value, f"is a {type(value).__name__}, not a real number", fix)
    try:
        return float(value)
    except (OverflowError, ValueError):
        raise fail(name, value, "does not fit in a float", fix) from None


def check_flag(value: Any, name: str, *, fix: str = "pass True or False") -> bool:
    """Return a yes/no switch: ``True``/``False`` (or a numpy bool), nothing else.

    ``1``, ``"yes"`` or an array are refused: a switch given a number is a mistake
    (often an argument in the wrong position), not a truth value.

    Examples
    --------
    >>> check_flag(np.True_, "same_clients")
    True
    >>> check_flag(1, "same_clients")
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: same_clients=1 is a int, not a bool; pass True or False
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise fail(name, value, f"is a {type(value).__name__}, not a bool", fix)


def check_instance(value: Any, name: str, types: type[_T] | tuple[type[_T], ...],
                   fix: str) -> _T:
    """Return ``value`` if it is an instance of ``types``, else refuse naming the type.

    Examples
    --------
    >>> check_instance(None, "spec", dict, "pass a dict")
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: spec=None is a NoneType, not a dict; pass a dict
    """
    if isinstance(value, types):
        return value
    kinds = types if isinstance(types, tuple) else (types,)
    wanted = " or ".join(t.__name__ for t in kinds)
    raise fail(name, value, f"is a {type(value).__name__}, not a {wanted}", fix)


def check_positive(value: Any, name: str, *, high: float | None = None,
                   fix: str = "pass a positive finite number") -> float:
    """Return a finite number ``> 0`` (and ``<= high`` when given).

    Examples
    --------
    >>> check_positive(2, "scale")
    2.0
    """
    return check_number(value, name, low=0.0, low_open=True, high=high, fix=fix)


def check_epsilon(value: Any, name: str = "epsilon") -> float:
    """Return a privacy parameter: finite, ``> 0`` and at most :data:`MAX_EPSILON`.

    Examples
    --------
    >>> check_epsilon(0.4)
    0.4
    """
    return check_positive(value, name, high=MAX_EPSILON,
                          fix="pass a positive finite privacy parameter such as 1.0")


def check_scale(value: Any, name: str = "scale", *, fix: str = _SCALE_FIX) -> float:
    """Return a noise scale (``b`` or ``sigma``): finite, ``> 0``, at most :data:`MAX_SCALE`.

    Examples
    --------
    >>> check_scale(2.0, "sigma")
    2.0
    >>> check_scale(1e16)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: scale=1e+16 is above the limit <= 1e+15; pass the noise ...
    """
    return check_positive(value, name, high=MAX_SCALE, fix=fix)


def check_alpha(value: Any, name: str = "alpha") -> float:
    """Return a significance level strictly between 0 and 1 (bars cover ``1 - alpha``).

    Examples
    --------
    >>> check_alpha(0.05)
    0.05
    """
    return check_number(value, name, low=MIN_ALPHA, high=1.0, high_open=True,
                        fix="pass a level in [1e-15, 1), e.g. 0.05 for 95% bars")


def check_delta(value: Any, name: str = "delta") -> float:
    """Return a failure probability ``delta`` of approximate DP: strictly between 0 and 1.

    Examples
    --------
    >>> check_delta(1e-6)
    1e-06
    >>> check_delta(0.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: delta=0.0 is below the limit > 0; pass a small ...
    """
    return check_number(value, name, low=0.0, high=1.0, low_open=True, high_open=True,
                        fix="pass a small failure probability such as 1e-6 (well below "
                            "1/population)")


def check_probability(value: Any, name: str, *,
                      fix: str = "pass a probability in [0, 1]") -> float:
    """Return a probability in ``[0, 1]``.

    Examples
    --------
    >>> check_probability(1, "p")
    1.0
    """
    return check_number(value, name, low=0.0, high=1.0, fix=fix)


def check_integer(value: Any, name: str, *, low: int | None = None, high: int | None = None,
                  fix: str = "pass a whole number") -> int:
    """Return a whole number as a Python int; integral floats (``50.0``) are accepted.

    Examples
    --------
    >>> check_integer(np.int32(7), "k", low=0)
    7
    >>> check_integer(2.5, "k")
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: k=2.5 is not a whole number; pass a whole number
    """
    if isinstance(value, (numbers.Integral, np.integer)) and not isinstance(
            value, (bool, np.bool_)):
        number = int(value)
    else:
        real = check_number(value, name, fix=fix)
        if real != round(real):
            raise fail(name, value, "is not a whole number", fix)
        number = int(real)
    if low is not None and number < low:
        raise fail(name, value, f"is below the limit >= {low}", fix)
    if high is not None and number > high:
        raise fail(name, value, f"is above the limit <= {high}", fix)
    return number


def check_count(value: Any, name: str, *, low: int = 0, high: int | None = None) -> int:
    """Return a count: a whole number ``>= low`` (default 0).

    Examples
    --------
    >>> check_count(0, "n")
    0
    """
    return check_integer(value, name, low=low, high=high,
                         fix=f"pass a whole number >= {low}")


def check_cohort_floor(value: Any, name: str = "min_cohort") -> int:
    """Return a publication floor: a whole number of clients, at least 1.

    The floor cannot be switched off: NaN, 0 and negative floors are refused.

    Examples
    --------
    >>> check_cohort_floor(50)
    50
    >>> check_cohort_floor(float("nan"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: min_cohort=nan is not finite; pass the smallest cohort ...
    """
    return check_integer(
        value, name, low=1,
        fix="pass the smallest cohort that may be published, a whole number >= 1 (e.g. 50)")


def check_resolution(value: Any, name: str = "resolution") -> int:
    """Return an H3 resolution, 0 to 15.

    Examples
    --------
    >>> check_resolution(7)
    7
    """
    return check_integer(value, name, low=0, high=15,
                         fix="pass an H3 resolution between 0 and 15")


def check_choice(value: Any, name: str, choices: Collection[_T]) -> _T:
    """Return one of a fixed set of values (compared with ``==``; strings are not fuzzy).

    Examples
    --------
    >>> check_choice("sqrt", "mode", ("sqrt", "equal"))
    'sqrt'
    """
    scalar = isinstance(value, (str, bytes, int, float, np.generic)) or value is None
    if scalar:  # never compare an array or a frame with the choices
        try:
            if value in choices:
                return value  # type: ignore[no-any-return]
        except (TypeError, ValueError):  # a numpy scalar compared with text
            pass
    raise fail(name, value, "is not one of the accepted values",
               f"pass one of {sorted(map(str, choices))}")


def check_text(value: Any, name: str, *, allow_empty: bool = False) -> str:
    """Return a string (a name, a label, a reason), non-empty unless ``allow_empty``.

    Examples
    --------
    >>> check_text("weekly report", "why")
    'weekly report'
    """
    if not isinstance(value, str):
        raise fail(name, value, f"is a {type(value).__name__}, not a string", "pass text")
    if not allow_empty and not value.strip():
        raise fail(name, value, "is empty", "say it in a few words")
    return value


def check_cmap(cmap: Any, name: str = "cmap") -> Any:
    """Return a matplotlib colour map from its name or a Colormap (matplotlib loads lazily).

    Examples
    --------
    >>> check_cmap("viridis").name
    'viridis'
    """
    import matplotlib.pyplot as plt
    from matplotlib.colors import Colormap

    if isinstance(cmap, Colormap):
        return cmap
    text = check_text(cmap, name)
    try:
        return plt.get_cmap(text)
    except ValueError:
        raise fail(name, cmap, "is not a matplotlib colour map",
                   "pass a name such as 'viridis' or 'cividis', or a Colormap") from None


def check_axes(ax: Any, name: str = "ax") -> Any:
    """Return ``ax`` if it is a matplotlib Axes or None (matplotlib loads lazily).

    Examples
    --------
    >>> check_axes(None) is None
    True
    """
    from matplotlib.axes import Axes

    if ax is None or isinstance(ax, Axes):
        return ax
    raise fail(name, ax, f"is a {type(ax).__name__}, not a matplotlib Axes",
               "pass an Axes (fig, ax = plt.subplots()) or None for a new figure")


def check_finite_array(values: Any, name: str, *, ndim: Iterable[int] = (1,),
                       allow_empty: bool = False, finite: bool = True) -> np.ndarray:
    """Return a float64 array with no NaN or infinity, of an accepted dimension.

    With ``finite=False`` NaN and infinities pass (the caller words that refusal).

    Examples
    --------
    >>> check_finite_array([1, 2.5], "values").tolist()
    [1.0, 2.5]
    """
    fix = "pass finite numbers, one per client"
    if isinstance(values, (str, bytes)):
        raise fail(name, values, "is a string, not an array of numbers", fix)
    try:
        raw = np.asarray(values)
    except (TypeError, ValueError):
        raise InvalidInput(f"{name} is not an array of numbers; {fix}") from None
    if raw.dtype.kind not in "iuf" or (raw.dtype == object):
        raise InvalidInput(
            f"{name} has dtype {raw.dtype} (strings, bools, objects or complex are not "
            f"numbers); {fix}")
    arr = raw.astype(np.float64, copy=False)
    dims = tuple(ndim)
    if arr.ndim not in dims:
        raise InvalidInput(f"{name} has shape {arr.shape}; give an array of {dims} dimensions")
    if arr.size == 0 and not allow_empty:
        raise InvalidInput(f"{name} is empty; {fix}")
    bad = ~np.isfinite(arr)
    if finite and bad.any():
        first = int(np.flatnonzero(bad.ravel())[0])
        raise InvalidInput(
            f"{name} has {int(bad.sum())} NaN or infinite values (first at flat index {first}); "
            f"{fix}")
    return arr


def check_ids(values: Any, name: str, *, unique: bool = True,
              fix: str = "one client, one row: drop or merge the repeats before the release"
              ) -> pd.Index:
    """Return identifiers (client or region ids) as an Index: no missing values, unique.

    Examples
    --------
    >>> list(check_ids(["a", "b"], "client_id"))
    ['a', 'b']
    >>> check_ids(["a", "a"], "client_id")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: client_id has 1 repeated value (first: 'a'); ...
    """
    index: pd.Index = pd.Index(values)
    if index.isna().any():
        raise InvalidInput(
            f"{name} has {int(np.sum(index.isna()))} missing values; every row needs its id")
    if unique and not index.is_unique:
        repeated = index[index.duplicated()]
        raise InvalidInput(
            f"{name} has {len(repeated)} repeated value{'s' if len(repeated) > 1 else ''} "
            f"(first: {repeated.tolist()[0]!r}); {fix}")
    return index


def check_output(folder: Any, stem: Any, example: str) -> tuple[Path, str]:
    """Return an output folder and a file stem (a plain name, e.g. ``example``).

    Examples
    --------
    >>> check_output("out", "report", "report")
    (PosixPath('out'), 'report')
    >>> check_output("out", "../x", "report")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: stem='../x' is not a plain file name; ...
    """
    path = check_path(folder, "folder", "pass the output folder as a str or pathlib.Path")
    name = check_text(stem, "stem")
    if Path(name).name != name or name.startswith("."):
        raise fail("stem", stem, "is not a plain file name",
                   f"pass a name without folders or a leading dot, e.g. {example!r}")
    return path, name
