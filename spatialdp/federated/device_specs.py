"""The specs the device module clips under, for the server to release with.

:func:`~spatialdp.federated.device.device_report` tags every report with the
fingerprints of these specs; the server must release each metric under the very
same spec (see :mod:`spatialdp.federated.client_reports`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from spatialdp._validation import check_flag
from spatialdp.exceptions import InvalidInput
from spatialdp.federated._checks import (
    MAX_CALIBRATION_BUCKETS,
    MAX_COVERAGE_CELLS,
    FloatArray,
    _is_real,
    _positive_int,
    positive_number,
)
from spatialdp.federated.metrics import MetricSpec

__all__ = ["DEFAULT_COUNT_EDGES", "calibration_specs", "count_bucket_spec", "coverage_spec",
           "track_ratio_spec"]

#: Lower edges of the sample-count buckets: 1-9, 10-99, 100-999, 1000+.
DEFAULT_COUNT_EDGES = (1, 10, 100, 1000)


def _count_edges(edges: Sequence[int]) -> FloatArray:
    try:
        raw = np.asarray(edges)
        numeric = raw.dtype.kind in "iuf" or (
            raw.dtype.kind == "O" and all(_is_real(e) for e in raw.ravel()))
        lower = raw.astype(np.float64) if numeric else np.array([np.nan])
    except (TypeError, ValueError, OverflowError):
        lower = np.array([np.nan])
    if (lower.ndim != 1 or lower.size == 0 or not np.isfinite(lower).all()
            or lower[0] != 1 or (np.diff(lower) <= 0).any()
            or (lower != np.round(lower)).any()):
        raise InvalidInput(
            f"count edges {edges!r} must be strictly increasing and start at 1 (they are "
            "the buckets' lower bounds; every reporting client has at least one example)"
        )
    return lower



def track_ratio_spec(ratio_clip: float = 10.0, *, roads: bool = False) -> MetricSpec:
    """Return the spec of the across/along ratio that :func:`device_report` clips under.

    With roads a client may have no example near a road, so the spec has
    ``present="track_present"`` and the ratio is released as a ratio estimator.

    Examples
    --------
    >>> track_ratio_spec(10.0, roads=True).present
    'track_present'
    """
    clip = positive_number(ratio_clip, "ratio_clip")
    with_roads = check_flag(roads, "roads")
    return MetricSpec("ratio", 0.0, clip, present="track_present" if with_roads else None)


def calibration_specs(n_buckets: int = 5) -> list[MetricSpec]:
    """Return the specs of the per-bucket calibration gaps (ratio estimators over presence).

    The gap of bucket ``b`` is published as the noised sum of the clients' gaps
    over the noised number of clients with a prediction in the bucket: the mean
    gap among the clients that have the bucket (each client one vote).

    Examples
    --------
    >>> [s.name for s in calibration_specs(2)]
    ['cal_gap_0', 'cal_gap_1']
    """
    return [MetricSpec(f"cal_gap_{b}", -1.0, 1.0, present=f"cal_present_{b}")
            for b in range(_positive_int(n_buckets, "n_buckets", high=MAX_CALIBRATION_BUCKETS))]


def count_bucket_spec(count_edges: Sequence[int] = DEFAULT_COUNT_EDGES) -> MetricSpec:
    """Return the spec of the sample-count bucket index.

    Examples
    --------
    >>> count_bucket_spec().clip_high
    3.0
    """
    return MetricSpec("count_bucket", 0.0, float(len(_count_edges(count_edges)) - 1))


def coverage_spec(max_cells: int = 10) -> MetricSpec:
    """Return the spec of ``coverage_cells``, the capped number of regions a client covers.

    Examples
    --------
    >>> coverage_spec(10).sensitivity
    10.0
    """
    return MetricSpec("coverage_cells", 0.0,
                      float(_positive_int(max_cells, "max_cells", high=MAX_COVERAGE_CELLS)))
