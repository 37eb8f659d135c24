"""The regional report's schema: its columns and reliability classes.

One place for what a published per-region frame holds; the report builder
(:mod:`spatialdp.federated.regional`) writes it and the maps
(:mod:`spatialdp.viz`) read it.

=====================  ======================================================
``value``              the noised estimate (NaN where suppressed)
``error_bar``          half-width of the (1 - alpha) interval of the noise
``ci_low``,            the interval (exact for means; conservative for ratio
``ci_high``            estimators)
``noise_std``          sd of the noise on ``value`` (ratio estimators: delta
                       method, approximate)
``noise_scale``        Laplace scale of the noise on a mean's ``value`` (NaN
                       for ratio estimators)
``noisy_sum``,         a ratio estimator's released sum and count (a
``noisy_count``        histogram: its top bucket's sum), NaN for means
``sum_scale``,         the Laplace scales of those two noises: with them any
``count_scale``        level's interval and comparison is recomputed
                       (public parameters; NaN for means)
``cohort``             clients behind the value (<NA> where suppressed):
                       exact under replace-one neighbours (participation is
                       public), the rounded noised count under add/remove
``cv``                 ``noise_std / |value|``
``reliability``        ``high`` / ``medium`` / ``low`` / ``suppressed`` (ACS)
``suppressed``         below the floor: nothing published, not even the cohort
``clip_low``,          the range a client's value is clipped into (a histogram
``clip_high``          bucket: 0 to the mass cap)
``estimator``          ``mean`` or ``ratio`` (every metric under add/remove)
``metric``             the spec key; a change starts a new baseline
``partition_version``  the partition; a change starts a new baseline
``round_index``        the federated round
=====================  ======================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

import numpy as np
import pandas as pd
from numpy.typing import NDArray

__all__ = ["MAP_COLUMNS", "NEIGHBOUR_NAME", "NEIGHBOUR_TEXT", "RELIABILITY_CLASSES",
           "REPORT_COLUMNS", "epsilon_text", "reliability_class"]

#: The short name of each neighbouring relation (legends, titles).
NEIGHBOUR_NAME: dict[str, str] = {"replace": "replace-one", "add_remove": "add/remove"}

#: How summaries and cards name each neighbouring relation, with what it protects.
NEIGHBOUR_TEXT: dict[str, str] = {
    "replace": f"{NEIGHBOUR_NAME['replace']}: participation public",
    "add_remove": f"{NEIGHBOUR_NAME['add_remove']}: participation protected",
}

#: Columns every regional report frame has (besides ``geometry``).
REPORT_COLUMNS: tuple[str, ...] = (
    "value", "error_bar", "ci_low", "ci_high", "noise_std", "cohort", "cv", "reliability",
    "suppressed", "clip_low", "clip_high", "estimator", "metric", "partition_version",
    "round_index", "noise_scale", "noisy_sum", "noisy_count", "sum_scale", "count_scale")

#: The columns a map reads (:mod:`spatialdp.viz`); any frame with them can be drawn.
MAP_COLUMNS: tuple[str, ...] = ("value", "error_bar", "cohort", "reliability", "suppressed")

#: Reliability classes by coefficient of variation (noise sd / |value|), as the US
#: Census Bureau's American Community Survey grades its estimates.
RELIABILITY_CLASSES: tuple[str, ...] = ("high", "medium", "low", "suppressed")
_CV_EDGES = (0.12, 0.40)


def reliability_class(cv: NDArray[np.float64], suppressed: NDArray[np.bool_]
                      ) -> pd.Categorical[str]:
    """Grade estimates: high (cv < 0.12), medium (<= 0.40), low, or suppressed.

    Examples
    --------
    >>> list(reliability_class(np.array([0.05, 0.3, 2.0]), np.array([False, False, True])))
    ['high', 'medium', 'suppressed']
    """
    graded = np.where(cv < _CV_EDGES[0], 0, np.where(cv <= _CV_EDGES[1], 1, 2))
    # Codes into RELIABILITY_CLASSES: no per-region string work.
    codes = np.where(suppressed, 3, graded).astype(np.int8)
    return pd.Categorical.from_codes(codes, categories=pd.Index(list(RELIABILITY_CLASSES)),
                                     ordered=True)


def epsilon_text(split: Mapping[str, float]) -> str:
    """Say what a release was charged: its total epsilon, then the split over its metrics.

    One meaning of epsilon everywhere (titles, summaries, the card): the total
    charged for the release (the exact decimal sum of the metrics' shares, as the
    ledger adds them); with several metrics the split follows in parentheses.

    Examples
    --------
    >>> epsilon_text({"loss": 0.2, "ratio": 0.2})
    '0.4 (loss 0.2, ratio 0.2)'
    >>> epsilon_text({"loss": 0.5})
    '0.5'
    """
    total = float(sum((Decimal(repr(float(v))) for v in split.values()), Decimal(0)))
    if len(split) < 2:
        return f"{total:g}"
    return f"{total:g} (" + ", ".join(f"{name} {float(v):g}" for name, v in split.items()) + ")"
