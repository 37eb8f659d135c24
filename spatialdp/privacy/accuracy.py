"""Error bars from a noise scale: one noisy value, or the sum of ``m`` of them.

A released statistic over a polygon is often the sum of ``m`` independently
noised cells, so its error is the sum ``S`` of ``m`` iid noise draws. For the
four noise kinds

* ``"laplace"`` - Laplace(b), density ``exp(-|x|/b) / (2b)``;
* ``"gaussian"`` - N(0, sigma**2);
* ``"discrete_laplace"`` - ``P(z)`` proportional to ``exp(-|z|/b)`` on the integers;
* ``"discrete_gaussian"`` - ``P(z)`` proportional to ``exp(-z**2 / (2 sigma**2))``,

this module gives the standard deviation, the mean absolute error ``E|S|`` and
the two-sided ``(1 - alpha)`` half-width ``h`` (``P(|S| <= h) >= 1 - alpha``),
for any ``m >= 1`` (vectorised over an array of ``m``; the work is done once per
distinct ``m`` and cached).

Methods - all exact up to quadrature/rounding error (relative error well below
1e-6 in the tests), never a normal approximation:

* Gaussian: closed forms.
* Laplace: ``std = b sqrt(2m)``; ``E|S| = 2 m b C(2m, m) / 4**m`` (note: NOT
  ``sqrt(2m) b``, which is the RMS); the tail uses the exact identity
  ``P(S > x) = P(N + K <= m - 1)`` with ``N ~ Poisson(x/b)`` and
  ``K ~ NegBin(m, 1/2)`` independent, a finite sum of positive terms (a
  window of it for large ``m``). At ``m = 1`` the half-width is
  ``b ln(1/alpha)``.
* Discrete Laplace (``a = exp(-1/b)``): for ``j >= m``,
  ``P(S >= j) = P(K1 + K2 <= m - 1)`` with ``K1 ~ NegBin(j - m, a)`` and
  ``K2 ~ NegBin(m, a / (1 + a))`` (residue of the rational generating
  function at its pole ``1/a``); for ``j < m`` the lattice inversion below.
* Discrete Gaussian: lattice inversion on a circle through the saddle point ``t``,
  ``P(S >= j) = (1/pi) Re int_0^pi M(t+iu)**m e^{-(t+iu) j} / (1 - e^{-(t+iu)}) du``,
  with ``M`` the moment generating function (Poisson summation for
  ``sigma >= 1``, a direct sum below), integrated by composite Gauss-Legendre
  on the range where ``|M|**m`` is not negligible. The discrete Laplace uses
  the same inversion for ``j < m``.
* Mean absolute error of the lattice kinds:
  ``E|S| = (1/pi) int_0^pi (1 - phi(u)**m) / (1 - cos u) du``.

Discrete half-widths are integers: the smallest ``k`` with ``P(|S| <= k) >=
1 - alpha``, so the interval covers AT LEAST ``1 - alpha`` (usually a bit more).

Limits: scales ``0 < scale <= 1e15``; ``1 <= m <= 1e10`` (:data:`MAX_M`);
``alpha`` in ``[1e-15, 1)`` (:data:`MIN_ALPHA`); for the discrete kinds, the
noise of the sum has a standard deviation ``scale * sqrt(m)`` of at most
``1e14`` (:data:`MAX_LATTICE_SD`; beyond it the discrete noise is
indistinguishable from the continuous kind, whose figures have no such
limit). Arguments are checked by the shared validation layer; every refusal
is an :class:`~spatialdp.exceptions.InvalidInput`.

This module holds the public functions, their argument checks and the table
of figures by noise kind (:data:`FIGURES`); the numerics (quadrature, lattice
inversion, the Laplace and lattice figures) live in the private
``_accuracy_numerics``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from spatialdp._validation import (
    MAX_SCALE,
    MIN_ALPHA,
    check_alpha,
    check_choice,
    check_integer,
    check_number,
    check_scale,
    fail,
)
from spatialdp.exceptions import InvalidInput
from spatialdp.privacy._accuracy_numerics import (
    dg_half_width,
    dg_log_tail,
    dg_mae,
    dg_var,
    dlap_half_width,
    dlap_log_tail,
    dlap_mae,
    dlap_var,
    lap_half_width,
    lap_log_sf,
    lap_mae,
)

__all__ = [
    "MAX_LATTICE_SD",
    "MAX_M",
    "MIN_ALPHA",
    "NOISE_KINDS",
    "Accuracy",
    "NoiseKind",
    "accuracy",
    "half_width",
    "mean_abs_error",
    "noise_std",
    "scale_for_half_width",
    "tail_probability",
]

NoiseKind: TypeAlias = Literal["laplace", "gaussian", "discrete_laplace", "discrete_gaussian"]
NOISE_KINDS: tuple[str, ...] = ("laplace", "gaussian", "discrete_laplace", "discrete_gaussian")
FloatOrArray: TypeAlias = "float | NDArray[np.float64]"
ScalarInt: TypeAlias = "int | np.integer[Any]"

#: Largest number of noisy values in one sum (the lattice numerics lose digits beyond).
MAX_M = 10**10
#: Largest standard deviation of a sum of lattice (discrete) draws whose figures are computed.
MAX_LATTICE_SD = 1e14

_M_FIX = f"pass the number of noisy values summed, a whole number in [1, {MAX_M:.0e}], e.g. m=1"


def check_kind(kind: Any) -> str:
    """Return a supported noise kind."""
    if not isinstance(kind, str):
        raise fail("kind", kind, f"is a {type(kind).__name__}, not a noise kind",
                   f"pass one of {', '.join(NOISE_KINDS)}")
    return check_choice(kind, "kind", NOISE_KINDS)


def is_array(m: Any) -> bool:
    """Return whether ``m`` is an array (ndarray, even 0-d, or a sequence), not a scalar."""
    if isinstance(m, (np.ndarray, list, tuple)):
        return True
    if isinstance(m, (str, bytes)):
        return False
    try:
        return bool(np.ndim(m) > 0)
    except (TypeError, ValueError):
        return True  # ragged: refused by check_m


def check_m(m: Any) -> tuple[NDArray[np.int64], bool]:
    """Return ``m`` as int64 (any shape) and whether it was a scalar."""
    if not is_array(m):
        return np.asarray(check_integer(m, "m", low=1, high=MAX_M, fix=_M_FIX)), True
    try:
        arr = np.asarray(m)
    except (TypeError, ValueError):
        raise InvalidInput(f"m is ragged or not an array of numbers; {_M_FIX}") from None
    if arr.dtype == np.bool_ or not (np.issubdtype(arr.dtype, np.integer)
                                     or np.issubdtype(arr.dtype, np.floating)):
        raise InvalidInput(f"m has dtype {arr.dtype}, not whole numbers; {_M_FIX}")
    f = arr.astype(np.float64)
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(f) | (f < 1) | (f != np.round(f)) | (f > MAX_M)
    if bad.any():
        first = int(np.flatnonzero(bad.ravel())[0])
        raise InvalidInput(
            f"m has {int(bad.sum())} entries that are not whole numbers in [1, {MAX_M:.0e}] "
            f"(first: {float(f.ravel()[first])!r} at flat index {first}); {_M_FIX}")
    return f.astype(np.int64), False


def per_m(m: ArrayLike, fn: Callable[[int], float], kind: str, scale: float) -> FloatOrArray:
    """Return ``fn(m)`` for a scalar ``m``, or ``fn`` per distinct entry of an array ``m``.

    For the lattice kinds the sum's standard deviation ``scale * sqrt(m)`` must be
    at most :data:`MAX_LATTICE_SD`.
    """
    arr, scalar = check_m(m)
    if kind.startswith("discrete_") and arr.size:
        top = int(arr.max())
        if scale * math.sqrt(top) > MAX_LATTICE_SD * (1 + 1e-12):  # rounding slack
            raise fail(
                "scale", scale,
                f"with m={top} gives a sum whose noise has standard deviation about "
                f"{scale * math.sqrt(top):.3g}, beyond {MAX_LATTICE_SD:g} where the discrete "
                "figures are computed",
                f"use kind={kind.removeprefix('discrete_')!r}: at this scale the discrete "
                "noise is indistinguishable from it")
    if scalar:
        return float(fn(int(arr)))
    uniq, inv = np.unique(arr, return_inverse=True)
    vals = np.array([fn(int(u)) for u in uniq], dtype=np.float64)
    return vals[inv.reshape(-1)].reshape(arr.shape)

# ---------------------------------------------------------------------------
# the figures of each noise kind
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Figures:
    """One noise kind's error figures at scale ``s`` for a sum ``S`` of ``m`` draws."""

    var: Callable[[float], float]  # s -> variance of one draw
    mae: Callable[[int, float], float]  # (m, s) -> E|S|
    half_width: Callable[[int, float, float], float]  # (m, s, alpha) -> h
    tail: Callable[[int, float, float], float]  # (m, x, s) -> P(|S| > x)


def _lattice_tail(
    log_tail: Callable[[int, int, float], float],
) -> Callable[[int, float, float], float]:
    """Return ``P(|S| > x)`` of an integer S from ``log P(S >= j)``, as ``|S| >= floor(x) + 1``."""
    return lambda m, x, s: min(1.0, 2 * math.exp(log_tail(m, math.floor(x) + 1, s)))


def _exp_or_zero(log_value: float) -> float:
    return 0.0 if log_value < -745.0 else math.exp(log_value)


def _gauss_tail(m: int, x: float, s: float) -> float:
    from scipy import special  # lazy: scipy is slow to import
    return 2 * float(special.ndtr(-(x / s) / math.sqrt(m)))


def _gauss_half_width(m: int, s: float, alpha: float) -> float:
    from scipy import special  # lazy: scipy is slow to import
    return s * -float(special.ndtri(alpha / 2)) * math.sqrt(m)


FIGURES: dict[str, Figures] = {
    "laplace": Figures(
        var=lambda s: 2 * s * s,
        mae=lambda m, s: s * lap_mae(m),
        half_width=lambda m, s, a: s * lap_half_width(m, a),
        tail=lambda m, x, s: min(1.0, 2 * _exp_or_zero(lap_log_sf(m, x / s))),
    ),
    "gaussian": Figures(
        var=lambda s: s * s,
        mae=lambda m, s: s * math.sqrt(2 * m / math.pi),
        half_width=_gauss_half_width,
        tail=_gauss_tail,
    ),
    "discrete_laplace": Figures(
        var=dlap_var,
        mae=dlap_mae,
        half_width=lambda m, s, a: float(dlap_half_width(m, s, a)),
        tail=_lattice_tail(dlap_log_tail),
    ),
    "discrete_gaussian": Figures(
        var=dg_var,
        mae=dg_mae,
        half_width=lambda m, s, a: float(dg_half_width(m, s, a)),
        tail=_lattice_tail(dg_log_tail),
    ),
}


# ---------------------------------------------------------------------------
# public API
# ---------------------------------------------------------------------------


@overload
def noise_std(kind: NoiseKind | str, scale: float, m: ScalarInt = 1) -> float: ...
@overload
def noise_std(kind: NoiseKind | str, scale: float, m: ArrayLike) -> NDArray[np.float64]: ...


def noise_std(kind: NoiseKind | str, scale: float, m: ArrayLike = 1) -> FloatOrArray:
    """Return the standard deviation of the sum of ``m`` iid noise draws.

    Parameters
    ----------
    kind : {"laplace", "gaussian", "discrete_laplace", "discrete_gaussian"}
        Noise distribution.
    scale : float
        ``b`` for the Laplace kinds, ``sigma`` for the Gaussian kinds.
    m : int or array_like of int, default 1
        Number of noisy values summed (cells in a polygon).

    Returns
    -------
    float or numpy.ndarray
        Same shape as ``m``.

    Examples
    --------
    >>> noise_std("laplace", 2.0)  # b * sqrt(2)
    2.8284271247461903
    >>> noise_std("gaussian", 1.0, [1, 4])
    array([1., 2.])
    """
    var1 = FIGURES[check_kind(kind)].var(check_scale(scale))
    arr, scalar = check_m(m)
    out = np.sqrt(arr * var1)
    return float(out) if scalar else out


@overload
def mean_abs_error(kind: NoiseKind | str, scale: float, m: ScalarInt = 1) -> float: ...
@overload
def mean_abs_error(kind: NoiseKind | str, scale: float, m: ArrayLike) -> NDArray[np.float64]: ...


def mean_abs_error(kind: NoiseKind | str, scale: float, m: ArrayLike = 1) -> FloatOrArray:
    """Return the mean absolute error ``E|S|`` of the sum ``S`` of ``m`` iid noise draws.

    For Laplace this is ``2 m b C(2m, m) / 4**m`` (``b`` at ``m = 1``,
    about ``sqrt(4m/pi) b`` for large ``m``), not the RMS ``sqrt(2m) b``.

    Parameters
    ----------
    kind : {"laplace", "gaussian", "discrete_laplace", "discrete_gaussian"}
        Noise distribution.
    scale : float
        ``b`` or ``sigma``.
    m : int or array_like of int, default 1
        Number of noisy values summed.

    Returns
    -------
    float or numpy.ndarray

    Examples
    --------
    >>> mean_abs_error("laplace", 3.0)
    3.0
    >>> round(mean_abs_error("laplace", 1.0, 2), 6)  # 2*2*C(4,2)/16
    1.5
    """
    fig = FIGURES[check_kind(kind)]
    s = check_scale(scale)
    return per_m(m, lambda k: fig.mae(k, s), kind, s)


@overload
def half_width(
    kind: NoiseKind | str, scale: float, m: ScalarInt = 1, alpha: float = 0.05
) -> float: ...
@overload
def half_width(
    kind: NoiseKind | str, scale: float, m: ArrayLike, alpha: float = 0.05
) -> NDArray[np.float64]: ...


def half_width(
    kind: NoiseKind | str, scale: float, m: ArrayLike = 1, alpha: float = 0.05
) -> FloatOrArray:
    """Return the half-width ``h`` with ``P(|S| <= h) >= 1 - alpha`` for a sum of ``m`` draws.

    For the continuous kinds ``P(|S| <= h) = 1 - alpha`` exactly. For the
    discrete kinds ``h`` is the smallest INTEGER with coverage at least
    ``1 - alpha`` (the interval ``[x - h, x + h]`` around an integer release).

    Parameters
    ----------
    kind : {"laplace", "gaussian", "discrete_laplace", "discrete_gaussian"}
        Noise distribution.
    scale : float
        ``b`` or ``sigma``.
    m : int or array_like of int, default 1
        Number of noisy values summed; computed once per distinct value.
    alpha : float, default 0.05
        Miss probability, in ``[1e-15, 1)``.

    Returns
    -------
    float or numpy.ndarray
        Same shape as ``m`` (integral values for the discrete kinds).

    Examples
    --------
    >>> round(half_width("laplace", 1.0, alpha=0.01), 6)  # b ln(1/alpha)
    4.60517
    >>> half_width("discrete_laplace", 1.0, [1, 1, 100])
    array([ 3.,  3., 27.])
    """
    fig = FIGURES[check_kind(kind)]
    s = check_scale(scale)
    a = check_alpha(alpha)
    return per_m(m, lambda k: fig.half_width(k, s, a), kind, s)


@overload
def tail_probability(
    kind: NoiseKind | str, scale: float, threshold: float, m: ScalarInt = 1
) -> float: ...
@overload
def tail_probability(
    kind: NoiseKind | str, scale: float, threshold: float, m: ArrayLike
) -> NDArray[np.float64]: ...


def tail_probability(
    kind: NoiseKind | str, scale: float, threshold: float, m: ArrayLike = 1
) -> FloatOrArray:
    """Return ``P(|S| > threshold)`` for the sum ``S`` of ``m`` iid noise draws.

    Parameters
    ----------
    kind : {"laplace", "gaussian", "discrete_laplace", "discrete_gaussian"}
        Noise distribution.
    scale : float
        ``b`` or ``sigma``.
    threshold : float
        Finite and >= 0.
    m : int or array_like of int, default 1
        Number of noisy values summed.

    Returns
    -------
    float or numpy.ndarray

    Examples
    --------
    >>> round(tail_probability("laplace", 1.0, 2.0), 6)  # exp(-2)
    0.135335
    >>> round(tail_probability("discrete_laplace", 1.0, 0), 6)  # 2a/(1+a), a = 1/e
    0.537883
    """
    fig = FIGURES[check_kind(kind)]
    s = check_scale(scale)
    x = check_number(threshold, "threshold", low=0.0,
                     fix="pass a finite distance >= 0 from the true value, e.g. 10.0")
    return per_m(m, lambda k: fig.tail(k, x, s), kind, s)


@dataclass(frozen=True)
class Accuracy:
    """Error figures of the sum of ``m`` noisy values.

    Attributes
    ----------
    kind : str
        Noise kind.
    scale : float
        ``b`` or ``sigma``.
    m : int or numpy.ndarray
        Number of values summed.
    alpha : float
        Miss probability of the interval.
    std, mean_abs_error, half_width : float or numpy.ndarray
        Standard deviation, ``E|S|`` and the ``(1 - alpha)`` half-width.

    Examples
    --------
    >>> acc = accuracy("gaussian", 2.0, m=1, alpha=0.05)
    >>> acc.std, round(acc.half_width, 4)
    (2.0, 3.9199)
    """

    kind: str
    scale: float
    m: int | NDArray[np.int64]
    alpha: float
    std: float | NDArray[np.float64]
    mean_abs_error: float | NDArray[np.float64]
    half_width: float | NDArray[np.float64]


def accuracy(
    kind: NoiseKind | str, scale: float, m: ArrayLike = 1, alpha: float = 0.05
) -> Accuracy:
    """Return the standard deviation, mean absolute error and half-width together.

    Parameters
    ----------
    kind : {"laplace", "gaussian", "discrete_laplace", "discrete_gaussian"}
        Noise distribution.
    scale : float
        ``b`` or ``sigma``.
    m : int or array_like of int, default 1
        Number of noisy values summed.
    alpha : float, default 0.05
        Miss probability of the interval.

    Returns
    -------
    Accuracy

    Examples
    --------
    >>> accuracy("discrete_laplace", 1.0, m=[1, 100]).half_width
    array([ 3., 27.])
    """
    arr, scalar = check_m(m)
    return Accuracy(
        kind=check_kind(kind),
        scale=check_scale(scale),
        m=int(arr) if scalar else arr,
        alpha=check_alpha(alpha),
        std=noise_std(kind, scale, m),
        mean_abs_error=mean_abs_error(kind, scale, m),
        half_width=half_width(kind, scale, m, alpha),
    )


def scale_for_half_width(
    kind: NoiseKind | str, target: float, m: int = 1, alpha: float = 0.05
) -> float:
    """Return the largest noise scale whose half-width for a sum of ``m`` is at most ``target``.

    The half-width is the ``(1 - alpha)`` one of :func:`half_width`.

    The largest scale means the least privacy spent for the wanted accuracy
    (``epsilon = sensitivity / scale`` or ``rho = sensitivity**2 / (2 scale**2)``).
    For the discrete kinds the half-width is an integer step function of the
    scale; the jump is located by :func:`scipy.optimize.brentq` on the log
    scale, and the result is accurate to a relative 1e-9.

    Parameters
    ----------
    kind : {"laplace", "gaussian", "discrete_laplace", "discrete_gaussian"}
        Noise distribution.
    target : float
        Wanted half-width (finite, > 0, at most 1e15; >= 1 is sensible for the
        discrete kinds).
    m : int, default 1
        Number of noisy values summed.
    alpha : float, default 0.05
        Miss probability of the interval.

    Returns
    -------
    float
        At most 1e15, and for the discrete kinds at most ``1e14 / sqrt(m)`` (the
        largest scales with error figures).

    Raises
    ------
    InvalidInput
        On an unknown kind, a bad target, a bad ``alpha`` or an array ``m``.

    Examples
    --------
    >>> round(scale_for_half_width("laplace", 2.995732273553991, alpha=0.05), 9)
    1.0
    >>> b = scale_for_half_width("discrete_laplace", 27, m=100)
    >>> half_width("discrete_laplace", b, m=100)
    27.0
    """
    from scipy import optimize  # lazy: scipy is slow to import
    kind = check_kind(kind)
    t = check_scale(target, "target",
                    fix="pass the wanted half-width, finite, > 0 and at most 1e15")
    a = check_alpha(alpha)
    if is_array(m):
        raise fail("m", m, "is an array", "pass a single integer here; call once per m")
    mm = int(check_m(m)[0])
    if kind in ("laplace", "gaussian"):
        return min(t / float(half_width(kind, 1.0, mm, a)), MAX_SCALE)

    whole = math.floor(t)  # an integer half-width h meets the target iff h <= floor(t)

    def excess(log_scale: float) -> float:  # +-0.5 or more: never 0, sign flips at the jump
        return float(half_width(kind, math.exp(log_scale), mm, a)) - whole - 0.5

    top = min(MAX_SCALE, MAX_LATTICE_SD / math.sqrt(mm))  # the largest scale with figures
    log_top = math.log(top)
    lo = math.log(1e-6)  # half-width 0 here for any m <= 1e10 and alpha >= 1e-15
    hi = min(math.log(max(2 * t / float(noise_std(kind, 1.0, mm)), 1.0)), log_top)
    for _ in range(64):  # widen the bracket (a few steps: the guess is within a factor 2)
        if hi >= log_top or excess(hi) > 0:
            break
        lo, hi = hi, min(hi + math.log(2.0), log_top)
    if excess(hi) <= 0:
        return top
    root = float(optimize.brentq(excess, lo, hi, xtol=1e-10, rtol=1e-12))
    for _ in range(64):  # brentq may land just past the jump: step back onto the good side
        if excess(root) <= 0:
            break
        root -= 1e-10
    return math.exp(root)
