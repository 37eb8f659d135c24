"""The error figures of each noise kind, as one table (private).

:data:`FIGURES` maps a noise kind to its variance, mean absolute error,
half-width and tail probability for a sum of ``m`` draws at scale ``s``; the
numerics are in ``_accuracy_laplace`` and ``_accuracy_lattice`` and the methods
are described in :mod:`spatialdp.privacy.accuracy`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

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

__all__ = ["FIGURES", "Figures"]


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
