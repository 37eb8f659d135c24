"""The regional report's schema: its columns, reliability classes and coarsened counts.

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

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd
from numpy.typing import NDArray

__all__ = ["MAP_COLUMNS", "NEIGHBOUR_TEXT", "RELIABILITY_CLASSES", "REPORT_COLUMNS",
           "coarsen_count", "reliability_class"]

#: How titles, summaries and cards name each neighbouring relation.
NEIGHBOUR_TEXT: dict[str, str] = {
    "replace": "replace-one: participation public",
    "add_remove": "add/remove: participation protected",
}

#: Columns every regional report frame has (besides ``geometry``).
REPORT_COLUMNS: tuple[str, ...] = (
    "value", "error_bar", "ci_low", "ci_high", "noise_std", "cohort", "cv", "reliability",
    "suppressed", "clip_low", "clip_high", "estimator", "metric", "partition_version",
    "round_index")

#: The columns a map reads (:mod:`spatialdp.viz`); any frame with them can be drawn.
MAP_COLUMNS: tuple[str, ...] = ("value", "error_bar", "cohort", "reliability", "suppressed")

#: Reliability classes by coefficient of variation (noise sd / |value|), as the US
#: Census Bureau's American Community Survey grades its estimates.
RELIABILITY_CLASSES: tuple[str, ...] = ("high", "medium", "low", "suppressed")
_CV_EDGES = (0.12, 0.40)


def coarsen_count(count: int, edges: Sequence[int] = (1, 5, 10, 20)) -> str:
    """Return a count as a bucket label, e.g. ``'5-9'`` or ``'20+'``, never exactly.

    Examples
    --------
    >>> [coarsen_count(k) for k in (0, 3, 7, 12, 40)]
    ['0', '1-4', '5-9', '10-19', '20+']
    """
    if count < edges[0]:
        return "0" if edges[0] == 1 else f"<{edges[0]}"
    for low, high in itertools.pairwise(edges):
        if low <= count < high:
            return f"{low}-{high - 1}"
    return f"{edges[-1]}+"


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
