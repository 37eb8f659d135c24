"""The coverage score, and the seed's incident list as detectors.

The score of a round is ``max(0, 1 - sum_s |filled_s - ideal_s| / total)``,
where ``ideal`` is the square-root allocation of the round's filled total over
the strata's populations (whole seats, largest remainder). It is 1.0 exactly
when the seats match the sqrt-of-population shares, and falls as caps bind and
sparse strata go unfilled (a drifting score is the early sign). Each detector
returns :class:`~spatialdp.federated.incidents.Incident` records.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from spatialdp._validation import check_finite_array, check_number, fail
from spatialdp.federated.incidents import Incident
from spatialdp.sampling.allocation import MAX_CLIENTS, apportion

__all__ = [
    "coverage_drift",
    "coverage_score",
    "exhausted_pools",
    "over_represented",
    "repeated_selection",
    "score_against",
    "unfilled_allocations",
]


def coverage_score(filled: ArrayLike, populations: ArrayLike) -> float:
    """Return how closely per-stratum counts follow sqrt-of-population shares (0 to 1).

    Parameters
    ----------
    filled : array of int
        Clients selected per stratum.
    populations : array of int
        Clients per stratum (same order).

    Examples
    --------
    >>> pops = [420, 260, 120, 55, 18]
    >>> coverage_score([27, 22, 15, 10, 6], pops)
    1.0
    >>> coverage_score([38, 24, 11, 5, 2], pops)  # a proportional cohort
    0.675
    """
    got = check_finite_array(filled, "filled")
    pops = check_finite_array(populations, "populations")
    for name, given, values in (("filled", filled, got), ("populations", populations, pops)):
        if (values < 0).any() or (values > MAX_CLIENTS).any() or (values % 1 != 0).any():
            raise fail(name, given, f"are not whole counts in [0, {MAX_CLIENTS:.0e}]",
                       "pass one count of clients per stratum")
    if got.shape != pops.shape or pops.sum() <= 0:
        raise fail("filled", filled, "does not match populations (same length, >= 0, some "
                   "population)", "pass one count per stratum in the populations' order")
    total = int(got.sum())
    if total == 0:
        return 0.0
    ideal, _ = apportion(pops.astype(np.int64), total, "sqrt")
    return score_against(got, ideal, total)


def score_against(filled: NDArray[Any], ideal: NDArray[np.int64], total: int) -> float:
    """Return the coverage score of checked counts against their ``ideal`` seats.

    The arithmetic of :func:`coverage_score` for callers that hold the ideal
    (the sampler keeps it between rounds); ``total`` is ``filled.sum()``.

    Examples
    --------
    >>> score_against(np.array([3, 1]), np.array([2, 2]), 4)
    0.5
    """
    if total == 0:
        return 0.0
    return float(max(0.0, 1.0 - np.abs(filled - ideal).sum() / total))


def unfilled_allocations(table: Any, round_index: int) -> list[Incident]:
    """Return one incident per group whose seats went unfilled in a round (from its table)."""
    rows = table[table["shortfall"] > 0]
    return [Incident("unfilled_allocation", str(gid),
                     f"round {round_index}: wanted {int(r.wanted)}, filled {int(r.filled)} "
                     f"({r.reason})",
                     "merge the stratum, extend the epoch, or accept a smaller cohort; the "
                     "model sees less of this stratum until then")
            for gid, r in rows.iterrows()]


def coverage_drift(scores: Sequence[float], *, threshold: float = 0.8,
                   max_drop: float = 0.1) -> list[Incident]:
    """Flag a score below ``threshold`` or more than ``max_drop`` below the epoch's first.

    Examples
    --------
    >>> [i.kind for i in coverage_drift([0.98, 0.95, 0.84])]
    ['coverage_drift']
    """
    threshold = check_number(threshold, "threshold", low=0.0, high=1.0, fix="pass e.g. 0.8")
    max_drop = check_number(max_drop, "max_drop", low=0.0, high=1.0, fix="pass e.g. 0.1")
    values = check_finite_array(list(scores), "scores", allow_empty=True)
    out: list[Incident] = []
    if values.size == 0:
        return out
    last = float(values[-1])
    if last < threshold or values[0] - last > max_drop:
        out.append(Incident(
            "coverage_drift", None,
            f"coverage score {last:.2f} (epoch started at {values[0]:.2f}, threshold "
            f"{threshold:.2f}): later rounds are more urban than earlier ones",
            "a within-epoch bias that is easy to mistake for drift: merge exhausted strata "
            "or raise the cap, and compare early and late rounds"))
    return out


def exhausted_pools(eligible: NDArray[np.int64], wanted: NDArray[np.int64],
                    ids: Sequence[str]) -> list[Incident]:
    """Flag strata whose eligible pool is empty while seats are still wanted."""
    hit = np.flatnonzero((eligible == 0) & (wanted > 0))
    return [Incident("pool_exhausted", str(ids[int(i)]),
                     "no client left under the participation cap; the stratum is silent for the "
                     "rest of the epoch",
                     "merge it and record the merge in the model card, so nobody claims "
                     "coverage it does not have") for i in hit]


def over_represented(selected: NDArray[np.int64], populations: NDArray[np.int64],
                     ids: Sequence[str], *, factor: float = 2.0) -> list[Incident]:
    """Flag strata selected more than ``factor`` times their sqrt-of-population share."""
    total = int(selected.sum())
    if total == 0:
        return []
    _, ideal = apportion(populations.astype(np.int64), total, "sqrt")
    hit = np.flatnonzero(selected > factor * np.maximum(ideal, 1.0))
    return [Incident("over_represented", str(ids[int(i)]),
                     f"selected {int(selected[i])} times against a sqrt share of "
                     f"{ideal[i]:.1f}: its metrics will look better-determined",
                     "compare each region's metric with its own error bar, not with other "
                     "regions' point estimates") for i in hit]


def repeated_selection(previous: NDArray[np.int64], current: NDArray[np.int64],
                       client_stratum: NDArray[np.int32], eligible: NDArray[np.int64],
                       ids: Sequence[str], *, small: int = 200) -> list[Incident]:
    """Flag small strata whose consecutive cohorts overlap far more than chance allows.

    Two independent uniform draws of ``a`` and ``b`` clients from a pool of ``N``
    share ``a * b / N`` clients on average (hypergeometric); an overlap above that
    plus four standard deviations and a half is flagged: a fixed seed.
    """
    n = eligible.size
    a = np.bincount(client_stratum[previous], minlength=n)
    b = np.bincount(client_stratum[current], minlength=n)
    both = np.intersect1d(previous, current)
    shared = np.bincount(client_stratum[both], minlength=n)
    pool = np.maximum(eligible, 1).astype(np.float64)
    expected = a * b / pool
    # Hypergeometric variance of the overlap of two independent uniform draws.
    variance = a * (b / pool) * (1 - b / pool) * (pool - a) / np.maximum(pool - 1, 1)
    limit = expected + 4 * np.sqrt(np.maximum(variance, 0)) + 0.5
    hit = np.flatnonzero((eligible <= small) & (shared > limit))
    return [Incident("repeated_selection", str(ids[int(i)]),
                     f"consecutive rounds share {int(shared[i])} clients (chance: "
                     f"{expected[i]:.1f})",
                     "seed selection from the round id; a fixed seed reuses the same clients")
            for i in hit]
