"""How a cohort is divided across strata: four rules, exact integer seats.

Every rule turns per-stratum weights into fractional shares of the cohort
(``cohort * w_s / sum(w)``), then into whole seats by largest-remainder
(Hamilton) apportionment: each stratum gets the floor of its share, and the
seats left over go to the largest fractional parts (ties to the stratum that
comes first). The seats therefore sum to the cohort exactly, for any
populations, and no stratum is more than one seat from its share.

============  ========================  ===========================================
mode          weight of stratum s       use
============  ========================  ===========================================
proportional  ``N_s``                   mirrors the fleet (and its imbalance)
sqrt          ``sqrt(N_s)``             the default: sparse strata get a real voice
equal         ``1`` (if ``N_s > 0``)    over-samples and exhausts sparse strata
neyman        ``N_s * sigma_s``         best when per-stratum sigma is known, stable
============  ========================  ===========================================
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp._validation import check_choice, check_count, check_finite_array, check_ids, fail
from spatialdp.exceptions import InvalidInput

__all__ = ["DEFAULT_MODE", "MODES", "Allocation", "allocate", "allocation_table",
           "apportion", "largest_remainder"]

#: The allocation rules, in the order figures and tables show them.
MODES = ("proportional", "sqrt", "equal", "neyman")

#: The practical default (see the module docstring).
DEFAULT_MODE = "sqrt"

#: Most clients a stratum (or a cohort) may count: int64 sums of millions of strata
#: stay exact, and seats convert to int64 without overflow.
MAX_CLIENTS = 10**12


def largest_remainder(shares: NDArray[np.float64], total: int) -> NDArray[np.int64]:
    """Round non-negative ``shares`` summing to ``total`` into integers that sum to it.

    Each entry gets its floor; the remaining units go to the largest fractional
    parts, ties to the lower position (a stable sort, so the result is deterministic).

    Examples
    --------
    >>> largest_remainder(np.array([2.5, 2.5, 1.0]), 6).tolist()
    [3, 2, 1]
    """
    shares = check_finite_array(shares, "shares")
    total = check_count(total, "total", high=MAX_CLIENTS)
    if (shares < 0).any() or abs(shares.sum() - total) > 1e-6 * max(total, 1):
        raise fail("shares", shares, f"are not non-negative numbers summing to total={total}",
                   "pass fractional shares of the total")
    floors = np.floor(shares + 1e-9).astype(np.int64)  # 2.9999999999 is 3 seats, not 2
    left = int(total - floors.sum())
    if left > 0:
        order = np.argsort(-(shares - floors), kind="stable")
        floors[order[:left]] += 1
    elif left < 0:  # float round-off pushed a floor up; take units back from the smallest
        order = np.argsort(shares - floors, kind="stable")
        floors[order[:-left]] -= 1
    return floors


@dataclass(frozen=True)
class Allocation:
    """Seats per stratum under one rule, with the fractional shares behind them.

    Attributes
    ----------
    seats : pandas.Series of int64
        Whole seats per stratum (index: stratum id); they sum to :attr:`cohort`.
    shares : pandas.Series of float64
        The fractional shares ``cohort * w_s / sum(w)`` (the values of the
        seed's allocation chart).
    mode : str
    cohort : int
    """

    seats: pd.Series
    shares: pd.Series
    mode: str
    cohort: int

    def to_frame(self) -> pd.DataFrame:
        """Return ``seats`` and ``shares`` side by side, one row per stratum."""
        return pd.DataFrame({"seats": self.seats, "share": self.shares})

    def __repr__(self) -> str:
        return (f"Allocation(mode={self.mode!r}, cohort={self.cohort}, "
                f"strata={len(self.seats)}, seats={self.seats.to_dict()})")


def _populations(populations: Any) -> pd.Series:
    fix = "pass {stratum_id: clients} or a pandas Series of whole numbers >= 0"
    if isinstance(populations, Mapping):
        series = pd.Series(dict(populations), dtype=object)
    elif isinstance(populations, pd.Series):
        series = populations
    else:
        raise fail("populations", populations,
                   f"is a {type(populations).__name__}, not a mapping", fix)
    if series.empty:
        raise fail("populations", populations, "has no strata", fix)
    check_ids(series.index, "stratum ids", fix="give each stratum once")
    values = np.array([check_count(v, f"populations[{k!r}]", high=MAX_CLIENTS)
                       for k, v in series.items()], dtype=np.int64)
    if values.sum() == 0:
        raise fail("populations", populations, "are all zero", "give at least one client")
    return pd.Series(values, index=series.index, name="population")


def _sigma(sigma: Any, index: pd.Index) -> NDArray[np.float64]:
    fix = "pass sigma={stratum_id: standard deviation}, one finite value >= 0 per stratum"
    if sigma is None:
        raise InvalidInput("mode='neyman' needs a per-stratum sigma (the standard deviation "
                           f"of the quantity each stratum estimates); {fix}, or use "
                           "mode='sqrt'")
    if not isinstance(sigma, (Mapping, pd.Series)):
        raise fail("sigma", sigma, f"is a {type(sigma).__name__}, not a mapping", fix)
    given = pd.Series(dict(sigma.items()), dtype=object)
    missing = index.difference(given.index)
    if len(missing):
        raise fail("sigma", sigma, f"has no value for strata {missing.tolist()[:5]}", fix)
    extra = given.index.difference(index)
    if len(extra):
        raise fail("sigma", sigma, f"names strata that are not populated: {extra.tolist()[:5]}",
                   fix)
    values = given.reindex(index).to_numpy()
    out = np.empty(len(index))
    for i, v in enumerate(values):
        if isinstance(v, (bool, np.bool_, str)) or not isinstance(v, (int, float, np.number)):
            raise fail(f"sigma[{index[i]!r}]", v, "is not a number", fix)
        out[i] = float(v)
    if not np.all(np.isfinite(out)) or (out < 0).any():
        raise fail("sigma", sigma, "has a negative, NaN or infinite value", fix)
    return out


def _weights(pops: NDArray[np.int64], mode: str, sigma: NDArray[np.float64] | None
             ) -> NDArray[np.float64]:
    n = pops.astype(np.float64)
    if mode == "proportional":
        return n
    if mode == "sqrt":
        return np.sqrt(n)
    if mode == "equal":
        return (pops > 0).astype(np.float64)  # an empty stratum has nobody to seat
    assert sigma is not None
    return n * sigma


def apportion(populations: NDArray[np.int64], cohort: int, mode: str,
              sigma: NDArray[np.float64] | None = None
              ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Return (seats, shares) for checked arrays: the arithmetic of :func:`allocate`.

    For callers that already validated their inputs (the sampler, every round).

    Examples
    --------
    >>> apportion(np.array([420, 18]), 10, "sqrt")[0].tolist()
    [8, 2]
    """
    weights = _weights(populations, mode, sigma)
    shares = cohort * weights / weights.sum()
    return largest_remainder(shares, cohort), shares


def allocate(populations: Mapping[Any, int] | pd.Series, cohort: int, *,
             mode: str = DEFAULT_MODE, sigma: Mapping[Any, float] | None = None) -> Allocation:
    """Split a cohort of ``cohort`` clients across strata under one rule.

    Parameters
    ----------
    populations : mapping or Series
        Clients per stratum (whole numbers >= 0, not all zero).
    cohort : int
        Clients to select, at most the total population.
    mode : {"proportional", "sqrt", "equal", "neyman"}, default "sqrt"
    sigma : mapping, optional
        Per-stratum standard deviation; required for ``"neyman"`` (and only used there).

    Returns
    -------
    Allocation
        Integer seats summing to ``cohort`` exactly, and the fractional shares.

    Raises
    ------
    InvalidInput
        An unknown mode, ``neyman`` without sigma (or with all-zero weights), bad
        populations, or a cohort larger than the population.

    Examples
    --------
    >>> pops = {"urban": 420, "suburban": 260, "exurban": 120, "rural": 55, "remote": 18}
    >>> allocate(pops, 80).seats.tolist()
    [27, 22, 15, 10, 6]
    >>> allocate(pops, 80, mode="proportional").shares.round(1).tolist()
    [38.5, 23.8, 11.0, 5.0, 1.6]
    """
    mode = check_choice(mode, "mode", MODES)
    pops = _populations(populations)
    cohort = check_count(cohort, "cohort", low=1)
    total = int(pops.sum())
    if cohort > total:
        raise fail("cohort", cohort, f"exceeds the {total:,} clients of all strata together",
                   "select at most the whole population, or lower the cohort")
    sig = _sigma(sigma, pops.index) if mode == "neyman" else None
    weights = _weights(pops.to_numpy(), mode, sig)
    if weights.sum() <= 0:
        raise fail("sigma", sigma, "is zero in every populated stratum",
                   "give a positive sigma for at least one stratum, or use mode='sqrt'")
    seats, shares = apportion(pops.to_numpy(), cohort, mode, sig)
    return Allocation(pd.Series(seats, index=pops.index, name="seats"),
                      pd.Series(shares, index=pops.index, name="share"), mode, cohort)


def allocation_table(populations: Mapping[Any, int] | pd.Series, cohort: int, *,
                     modes: tuple[str, ...] = ("proportional", "sqrt", "equal"),
                     sigma: Mapping[Any, float] | None = None) -> pd.DataFrame:
    """Return the fractional shares and seats of several modes, one row per stratum.

    Columns are a two-level index ``(mode, "share" | "seats")``; this is the table
    behind the allocation bar chart.

    Examples
    --------
    >>> pops = {"urban": 420, "remote": 18}
    >>> allocation_table(pops, 10)[("equal", "seats")].tolist()
    [5, 5]
    """
    if not isinstance(modes, tuple) or not modes:
        raise fail("modes", modes, "is not a non-empty tuple", f"pass a tuple from {MODES}")
    parts = {m: allocate(populations, cohort, mode=m, sigma=sigma).to_frame()
             .rename(columns={"share": "share", "seats": "seats"})[["share", "seats"]]
             for m in modes}
    return pd.concat(parts, axis=1)
