"""The direct estimates a small-area model starts from, read from a report's published columns.

A regional report publishes, per region, a noisy ``value`` whose noise law is
public: its standard deviation ``noise_std`` (a mean: the Laplace ``sqrt(2) b``;
a ratio estimate: the delta method's) is a public parameter of the release, so
the noise part of each direct estimate's error variance is **known exactly**,
not estimated as in survey statistics.

The value also carries the sampling error of a fresh cohort: the region's
clients are a sample of the region's population. Its variance is bounded by
the clip range over the cohort size, ``(clip_high - clip_low)^2 / (4 n)`` (a
variable confined to ``[lo, hi]`` has variance at most ``(hi - lo)^2 / 4``),
or, when a per-client variance is known from a published spread (or another
public source), ``client_variance / n``. The cohort of a published region is
itself published (exact under replace-one neighbours, where participation is
public; the rounded noised count under add/remove). A suppressed region's
cohort is not published and is never read: a suppressed region has no direct
estimate at all.

Only the columns in :data:`READ_COLUMNS` are read: nothing else of the report
(nor any client datum) can enter a model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp._validation import check_real, fail
from spatialdp.exceptions import InvalidInput

__all__ = ["READ_COLUMNS", "DirectEstimates", "read_direct"]

#: The only columns of a report frame that a small-area model reads: published
#: values and public parameters of the release.
READ_COLUMNS: tuple[str, ...] = ("value", "noise_std", "cohort", "suppressed", "clip_low",
                                 "clip_high")

FloatArray = NDArray[np.float64]


@dataclass(frozen=True)
class DirectEstimates:
    """Per-region direct estimates and their error variances (region order of the frame).

    Attributes
    ----------
    region_ids : Index
        Every region of the frame, published or suppressed.
    observed : ndarray of bool
        Regions with a published value.
    value : ndarray
        The published values (NaN where suppressed).
    noise_variance : ndarray
        The exact variance of the privacy noise (``noise_std ** 2``; NaN where suppressed).
    sampling_variance : ndarray
        The sampling variance of the fresh cohort (bound or ``client_variance / n``).
    sampling : str
        How ``sampling_variance`` was obtained.
    """

    region_ids: pd.Index
    observed: NDArray[np.bool_]
    value: FloatArray
    noise_variance: FloatArray
    sampling_variance: FloatArray
    sampling: str

    @property
    def variance(self) -> FloatArray:
        """The direct estimates' error variance: noise plus sampling."""
        return self.noise_variance + self.sampling_variance


def read_direct(frame: pd.DataFrame, client_variance: float | str = "bound"
                ) -> DirectEstimates:
    """Read the direct estimates of one metric's frame (its :data:`READ_COLUMNS` only).

    Parameters
    ----------
    frame : DataFrame
        One metric's frame of a :class:`~spatialdp.federated.RegionalReport`
        (``report[metric]``), or a frame read back from its files, indexed by region id.
    client_variance : "bound" or float
        ``"bound"``: the sampling variance of a region's mean is bounded by
        ``(clip_high - clip_low)^2 / (4 n)`` (conservative: no assumption on the
        clients). A number: the variance of one client's (clipped) value, known
        from a published spread or another public source; the sampling variance
        is then ``client_variance / n``.

    Returns
    -------
    DirectEstimates

    Raises
    ------
    InvalidInput
        A missing column, no published region, a published region without a
        finite value, noise or cohort, or a bad ``client_variance``.

    Examples
    --------
    >>> frame = pd.DataFrame({"value": [1.0, np.nan], "noise_std": [0.1, np.nan],
    ...                       "cohort": pd.array([100, pd.NA], dtype="Int64"),
    ...                       "suppressed": [False, True], "clip_low": 0.0, "clip_high": 4.0},
    ...                      index=["a", "b"])
    >>> d = read_direct(frame)
    >>> d.observed.tolist(), round(float(d.variance[0]), 4)    # 0.01 + 16 / 400
    ([True, False], 0.05)
    """
    if not isinstance(frame, pd.DataFrame):
        raise fail("frame", frame, "is not a report frame",
                   "pass report[metric] (a GeoDataFrame of one metric)")
    missing = [c for c in READ_COLUMNS if c not in frame.columns]
    if missing:
        raise InvalidInput(
            f"the frame has no column(s) {missing}; pass one metric's frame of a "
            "RegionalReport (report[metric]) or the report itself with metric=")
    observed = ~frame["suppressed"].to_numpy(dtype=bool)
    if not observed.any():
        raise InvalidInput("every region of the frame is suppressed; nothing to model")
    value = _published(frame, "value", observed)
    noise = _published(frame, "noise_std", observed) ** 2
    cohort = _published(frame, "cohort", observed)
    if (cohort[observed] < 1).any():
        raise InvalidInput("a published region has a cohort below 1; pass a report's frame")
    sampling, how = _sampling_variance(frame, cohort, observed, client_variance)
    return DirectEstimates(frame.index, observed, value, np.where(observed, noise, np.nan),
                           sampling, how)


def _published(frame: pd.DataFrame, column: str, observed: NDArray[np.bool_]) -> FloatArray:
    """Return a column as floats, NaN where suppressed, refusing gaps in published rows."""
    values = pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    bad = observed & ~np.isfinite(values)
    if bad.any():
        raise InvalidInput(
            f"column {column!r} has no finite number for {int(bad.sum())} published "
            f"region(s) (first {frame.index[np.flatnonzero(bad)[0]]!r}); pass the report's "
            "frame unchanged")
    return np.where(observed, values, np.nan)


def _sampling_variance(frame: pd.DataFrame, cohort: FloatArray, observed: NDArray[np.bool_],
                       client_variance: Any) -> tuple[FloatArray, str]:
    """Return the sampling variance of each published mean and how it was obtained."""
    if isinstance(client_variance, str):
        if client_variance != "bound":
            raise fail("client_variance", client_variance, "is not 'bound' or a number",
                       "pass 'bound' or the public variance of one client's value")
        width = (_published(frame, "clip_high", observed)
                 - _published(frame, "clip_low", observed))
        return width**2 / (4.0 * cohort), "bound (clip_high - clip_low)^2 / (4 n)"
    var = check_real(client_variance, "client_variance",
                     fix="pass 'bound' or the public variance of one client's value")
    if var < 0:
        raise fail("client_variance", client_variance, "is negative",
                   "pass a variance >= 0 or 'bound'")
    return var / cohort, f"client variance {var:g} / n"
