"""Cohort composition, published only coarsened and, optionally, late.

"This round drew 16 clients from the remote stratum" says who is where. The
published form is per reporting group (merged strata stay merged), with counts
rounded to a multiple of ``rounding`` (never exact), and only for rounds at
least ``delay_rounds`` old.

It is exact bookkeeping of the server's selection, rounded: publishable only
under replace-one neighbours, where participation is public by assumption.
Under add/remove neighbours it is refused; publish noised counts instead
(:func:`~spatialdp.sampling.release_epoch_coverage`, or a regional report's
noised cohorts).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from spatialdp._validation import check_count, check_instance, fail
from spatialdp.privacy.budget import Neighbours, check_neighbours
from spatialdp.sampling.sampler import RoundCohort

__all__ = ["published_composition"]


def published_composition(cohorts: Sequence[RoundCohort], *, current_round: int,
                          delay_rounds: int = 1, rounding: int = 10,
                          neighbours: Neighbours = "replace") -> pd.DataFrame:
    """Return the coarsened composition of the rounds old enough to publish.

    Parameters
    ----------
    cohorts : sequence of RoundCohort
    current_round : int
        The latest round id; rounds with ``round_index > current_round - delay_rounds``
        are withheld.
    delay_rounds : int, default 1
    rounding : int, default 10
        Counts are rounded to the nearest multiple of this (>= 1).
    neighbours : {"replace", "add_remove"}, default "replace"
        The relation of the run's releases; ``"add_remove"`` is refused (the
        table is exact selection bookkeeping, which that relation protects).

    Returns
    -------
    pandas.DataFrame
        Columns ``round_index``, ``group``, ``clients`` (rounded), ``rounding``.

    Examples
    --------
    >>> import numpy as np
    >>> c = RoundCohort(3, 0, np.arange(23), ("a", "b+c"),
    ...                 {"filled": np.array([17, 6]), "wanted": np.array([17, 6]),
    ...                  "shortfall": np.array([0, 0]), "population": np.array([99, 40])}, 1.0)
    >>> published_composition([c], current_round=4).clients.tolist()
    [20, 10]
    >>> len(published_composition([c], current_round=3))
    0
    >>> published_composition([c], current_round=4, neighbours="add_remove")
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: neighbours='add_remove' protects participation, and the composition is exact (rounded) selection bookkeeping; publish noised counts instead: release_epoch_coverage(...) or the regional report's noised cohorts
    """  # noqa: E501
    if check_neighbours(neighbours) == "add_remove":
        raise fail("neighbours", neighbours, "protects participation, and the composition is "
                   "exact (rounded) selection bookkeeping",
                   "publish noised counts instead: release_epoch_coverage(...) or the "
                   "regional report's noised cohorts")
    current_round = check_count(current_round, "current_round")
    delay_rounds = check_count(delay_rounds, "delay_rounds")
    rounding = check_count(rounding, "rounding", low=1)
    if isinstance(cohorts, (str, bytes)) or not isinstance(cohorts, Sequence):
        raise fail("cohorts", cohorts, "is not a sequence of RoundCohort",
                   "pass the list of round results")
    rows = []
    for cohort in cohorts:
        check_instance(cohort, "cohorts[i]", RoundCohort, "pass RoundCohort results")
        if cohort.round_index > current_round - delay_rounds:
            continue
        rounded = (np.round(cohort.counts["filled"] / rounding) * rounding).astype(np.int64)
        rows.append(pd.DataFrame({"round_index": cohort.round_index,
                                  "group": list(cohort.groups), "clients": rounded,
                                  "rounding": rounding}))
    if not rows:
        return pd.DataFrame(columns=["round_index", "group", "clients", "rounding"])
    return pd.concat(rows, ignore_index=True)
