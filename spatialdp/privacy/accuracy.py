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

This module is the public entry point; the numerics live in private modules:
``_accuracy_numerics`` (quadrature, lattice inversion, integer search),
``_accuracy_laplace`` (continuous Laplace), ``_accuracy_lattice`` (discrete
Laplace and discrete Gaussian), ``_accuracy_figures`` (the table by kind) and
``_accuracy_checks`` (argument checks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, TypeAlias, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from spatialdp._validation import check_number, fail
from spatialdp.privacy._accuracy_checks import (
    MAX_LATTICE_SD,
    MAX_M,
    MIN_ALPHA,
    NOISE_KINDS,
    FloatOrArray,
    NoiseKind,
    check_kind,
    check_level,
    check_m,
    check_scale,
    is_array,
    per_m,
)
from spatialdp.privacy._accuracy_figures import FIGURES
from spatialdp.privacy.calibration import MAX_SCALE

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

ScalarInt: TypeAlias = "int | np.integer[Any]"


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
    a = check_level(alpha)
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
        alpha=check_level(alpha),
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
    t = check_scale(target, "target")
    a = check_level(alpha)
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
