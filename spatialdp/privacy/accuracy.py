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

This module is the public entry point; the numerics live in private modules:
``_accuracy_numerics`` (quadrature, lattice inversion, integer search),
``_accuracy_laplace`` (continuous Laplace) and ``_accuracy_lattice`` (discrete
Laplace and discrete Gaussian).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from spatialdp.exceptions import InvalidInput
from spatialdp.privacy._accuracy_laplace import lap_half_width, lap_log_sf, lap_mae
from spatialdp.privacy._accuracy_lattice import (
    dg_half_width,
    dg_log_tail,
    dg_mae,
    dg_var,
    dlap_half_width,
    dlap_log_tail,
    dlap_mae,
    dlap_var,
)

__all__ = [
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


# ---------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------


def _check_kind(kind: str) -> str:
    if kind not in NOISE_KINDS:
        raise InvalidInput(
            f"noise kind {kind!r} is not supported; use one of {', '.join(NOISE_KINDS)}"
        )
    return kind


def _check_scale(scale: Any, name: str = "scale") -> float:
    try:
        s = float(scale)
    except (TypeError, ValueError):
        raise InvalidInput(f"{name}={scale!r} is not a number; pass the noise scale") from None
    if not math.isfinite(s) or s <= 0 or s > 1e15:
        raise InvalidInput(
            f"{name}={scale!r} must be finite, > 0 and <= 1e15; pass the noise scale "
            "(b = sensitivity / epsilon, or sigma)"
        )
    return s


def _check_alpha(alpha: Any) -> float:
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        raise InvalidInput(f"alpha={alpha!r} is not a number; pass e.g. 0.05") from None
    if not (1e-15 <= a < 1):
        raise InvalidInput(
            f"alpha={alpha!r} must lie in [1e-15, 1); pass the miss probability of the "
            "interval, e.g. 0.05 for a 95% error bar"
        )
    return a


def _check_m(m: ArrayLike) -> tuple[NDArray[np.int64], bool]:
    arr = np.asarray(m)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.number):
        raise InvalidInput(f"m={m!r} must be integer cell counts >= 1; pass e.g. m=1")
    f = arr.astype(np.float64)
    bad = ~np.isfinite(f) | (f < 1) | (f != np.round(f)) | (f > 1e12)
    if bad.any():
        v = f.ravel()[int(np.flatnonzero(bad.ravel())[0])]
        raise InvalidInput(
            f"m must be whole numbers in [1, 1e12] (cells summed per polygon), got {v!r}; "
            "pass the number of noisy cells in the sum, e.g. m=1"
        )
    return f.astype(np.int64), arr.ndim == 0 and not isinstance(m, np.ndarray)


def _per_m(m: ArrayLike, fn: Callable[[int], float]) -> FloatOrArray:
    arr, scalar = _check_m(m)
    if scalar:
        return float(fn(int(arr)))
    uniq, inv = np.unique(arr, return_inverse=True)
    vals = np.array([fn(int(u)) for u in uniq], dtype=np.float64)
    return vals[inv].reshape(arr.shape)


# ---------------------------------------------------------------------------
# error figures by noise kind
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Figures:
    """One noise kind's error figures at scale ``s`` for a sum ``S`` of ``m`` draws."""

    var: Callable[[float], float]  # s -> variance of one draw
    mae: Callable[[int, float], float]  # (m, s) -> E|S|
    half_width: Callable[[int, float, float], float]  # (m, s, alpha) -> h
    tail: Callable[[int, float, float], float]  # (m, x, s) -> P(|S| > x)


def _lattice_tail(
    log_tail: Callable[[int, int, float], float],
) -> Callable[[int, float, float], float]:
    """``P(|S| > x)`` of an integer S from ``log P(S >= j)``, as ``|S| >= floor(x) + 1``."""
    return lambda m, x, s: min(1.0, 2 * math.exp(log_tail(m, math.floor(x) + 1, s)))


_FIGURES: dict[str, _Figures] = {
    "laplace": _Figures(
        var=lambda s: 2 * s * s,
        mae=lambda m, s: s * lap_mae(m),
        half_width=lambda m, s, a: s * lap_half_width(m, a),
        tail=lambda m, x, s: 2 * math.exp(lap_log_sf(m, x / s)),
    ),
    "gaussian": _Figures(
        var=lambda s: s * s,
        mae=lambda m, s: s * math.sqrt(2 * m / math.pi),
        half_width=lambda m, s, a: s * float(special.ndtri(1 - a / 2)) * math.sqrt(m),
        tail=lambda m, x, s: 2 * float(special.ndtr(-x / (s * math.sqrt(m)))),
    ),
    "discrete_laplace": _Figures(
        var=dlap_var,
        mae=dlap_mae,
        half_width=lambda m, s, a: float(dlap_half_width(m, s, a)),
        tail=_lattice_tail(dlap_log_tail),
    ),
    "discrete_gaussian": _Figures(
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
    """Standard deviation of the sum of ``m`` iid noise draws.

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
    var1 = _FIGURES[_check_kind(kind)].var(_check_scale(scale))
    arr, scalar = _check_m(m)
    out = np.sqrt(arr * var1)
    return float(out) if scalar else out


@overload
def mean_abs_error(kind: NoiseKind | str, scale: float, m: ScalarInt = 1) -> float: ...
@overload
def mean_abs_error(kind: NoiseKind | str, scale: float, m: ArrayLike) -> NDArray[np.float64]: ...


def mean_abs_error(kind: NoiseKind | str, scale: float, m: ArrayLike = 1) -> FloatOrArray:
    """Mean absolute error ``E|S|`` of the sum ``S`` of ``m`` iid noise draws.

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
    fig = _FIGURES[_check_kind(kind)]
    s = _check_scale(scale)
    return _per_m(m, lambda k: fig.mae(k, s))


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
    """Two-sided half-width ``h`` with ``P(|S| <= h) >= 1 - alpha`` for a sum of ``m`` draws.

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
    fig = _FIGURES[_check_kind(kind)]
    s = _check_scale(scale)
    a = _check_alpha(alpha)
    return _per_m(m, lambda k: fig.half_width(k, s, a))


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
    """``P(|S| > threshold)`` for the sum ``S`` of ``m`` iid noise draws.

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
    fig = _FIGURES[_check_kind(kind)]
    s = _check_scale(scale)
    try:
        x = float(threshold)
    except (TypeError, ValueError):
        raise InvalidInput(f"threshold={threshold!r} is not a number; pass e.g. 10.0") from None
    if not math.isfinite(x) or x < 0:
        raise InvalidInput(f"threshold={threshold!r} must be finite and >= 0; pass e.g. 10.0")
    return _per_m(m, lambda k: fig.tail(k, x, s))


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
    """Standard deviation, mean absolute error and half-width together.

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
    arr, scalar = _check_m(m)
    return Accuracy(
        kind=_check_kind(kind),
        scale=_check_scale(scale),
        m=int(arr) if scalar else arr,
        alpha=_check_alpha(alpha),
        std=noise_std(kind, scale, m),
        mean_abs_error=mean_abs_error(kind, scale, m),
        half_width=half_width(kind, scale, m, alpha),
    )


def scale_for_half_width(
    kind: NoiseKind | str, target: float, m: int = 1, alpha: float = 0.05
) -> float:
    """Largest noise scale whose ``(1 - alpha)`` half-width for a sum of ``m`` is <= ``target``.

    The largest scale means the least privacy spent for the wanted accuracy
    (``epsilon = sensitivity / scale`` or ``rho = sensitivity**2 / (2 scale**2)``).
    For the discrete kinds the half-width is an integer step function of the
    scale; the result is accurate to a relative 1e-9.

    Parameters
    ----------
    kind : {"laplace", "gaussian", "discrete_laplace", "discrete_gaussian"}
        Noise distribution.
    target : float
        Wanted half-width (finite, > 0; >= 1 is sensible for the discrete kinds).
    m : int, default 1
        Number of noisy values summed.
    alpha : float, default 0.05
        Miss probability of the interval.

    Returns
    -------
    float

    Raises
    ------
    InvalidInput
        On an unknown kind, a non-positive target, a bad ``alpha`` or an array ``m``.

    Examples
    --------
    >>> round(scale_for_half_width("laplace", 2.995732273553991, alpha=0.05), 9)
    1.0
    >>> b = scale_for_half_width("discrete_laplace", 27, m=100)
    >>> half_width("discrete_laplace", b, m=100)
    27.0
    """
    kind = _check_kind(kind)
    t = _check_scale(target, "target")
    a = _check_alpha(alpha)
    arr, scalar = _check_m(m)
    if not scalar:
        raise InvalidInput(f"m={m!r} must be a single integer here; call once per m")
    mm = int(arr)
    if kind in ("laplace", "gaussian"):
        unit = float(half_width(kind, 1.0, mm, a))
        return t / unit

    def ok(scale: float) -> bool:
        return float(half_width(kind, scale, mm, a)) <= t

    lo = 1e-6  # half-width 0 here for any m <= 1e12 and alpha >= 1e-15
    if not ok(lo):  # pragma: no cover - defensive
        raise InvalidInput(f"target half-width {target!r} is not reachable; ask for more")
    sd1 = float(noise_std(kind, 1.0, mm))
    hi = max(2 * t / sd1, 1.0)
    while ok(hi):
        lo, hi = hi, hi * 2
    while hi / lo > 1 + 1e-9:
        mid = math.sqrt(lo * hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo
