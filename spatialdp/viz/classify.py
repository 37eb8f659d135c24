"""Classed choropleths: mapclassify schemes, and breaks that respect the error bars.

:func:`classify_report` sorts the published regions of a report into classes,
as ``GeoDataFrame.plot(scheme=..., k=...)`` does through mapclassify
(``"quantiles"``, ``"natural_breaks"``, ``"fisher_jenks"``,
``"equal_interval"``, ``"user_defined"`` with ``classification_kwds={"bins":
[...]}``, and the other mapclassify schemes), plus ``"separable"``: breaks
chosen so that regions in different classes are distinguishable given their
noise (:func:`spatialdp.viz.separability.separable_breaks`). Whatever the
scheme, each break is graded by its separability (Sun & Wong 2010), so a
reader knows which class boundaries the noise could have crossed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp._validation import check_count, check_text, fail
from spatialdp.exceptions import InvalidInput
from spatialdp.viz._report import _check_report, _numeric_column, _suppressed
from spatialdp.viz.separability import break_separability, noise_model, separable_breaks

__all__ = ["SCHEMES", "Classification", "classify_report"]

#: Schemes :func:`classify_report` knows: mapclassify's, and ``separable``.
SCHEMES: tuple[str, ...] = (
    "separable", "quantiles", "natural_breaks", "fisher_jenks", "equal_interval",
    "user_defined", "jenks_caspall", "headtail_breaks", "max_breaks", "box_plot",
    "std_mean", "percentiles", "maximum_breaks", "prettybreaks")


@dataclass(frozen=True)
class Classification:
    """The classes of a report's published values and the grade of each break.

    Attributes
    ----------
    scheme : str
    bins : ndarray
        Upper bound of each class (mapclassify's ``bins``); the lowest class
        starts at ``lower``.
    lower : float
        The smallest published value.
    yb : ndarray of int
        Class of each region (-1 where nothing is published).
    counts : ndarray of int
        Regions per class.
    separability : DataFrame
        One row per break (see
        :func:`~spatialdp.viz.separability.break_separability`).
    """

    scheme: str
    bins: NDArray[np.float64]
    lower: float
    yb: NDArray[np.int64]
    counts: NDArray[np.int64]
    separability: pd.DataFrame

    @property
    def k(self) -> int:
        """Number of classes."""
        return int(self.bins.size)

    def labels(self, fmt: str = "{:.3g}") -> list[str]:
        """Class-interval labels, ``'0.31 – 0.42'`` (first closed, others open below)."""
        lows = [self.lower, *self.bins[:-1]]
        return [f"{fmt.format(lo)} – {fmt.format(hi)}"
                for lo, hi in zip(lows, self.bins, strict=True)]


def classify_report(
    report: Any,
    column: str = "value",
    scheme: str = "quantiles",
    k: int = 5,
    classification_kwds: Mapping[str, Any] | None = None,
) -> Classification:
    """Sort a report's published regions into classes and grade every break.

    Parameters
    ----------
    report : GeoDataFrame
        A regional report (``value``, ``error_bar`` or ``noise_std``, ``suppressed``).
    column : str
        Column to classify (its noise is the report's: use it for ``value``,
        ``ci_low`` and ``ci_high``).
    scheme : str
        One of :data:`SCHEMES`.
    k : int
        Number of classes (``user_defined`` takes its bins instead).
    classification_kwds : dict, optional
        Passed to the mapclassify classifier (``bins`` for ``user_defined``,
        ``min_size`` for ``separable``).

    Returns
    -------
    Classification

    Raises
    ------
    InvalidInput
        Unknown scheme, a ``k`` below 2, too few published regions, or keywords
        mapclassify refuses.

    Examples
    --------
    >>> import pandas as pd
    >>> from spatialdp.datasets import us_states_partition
    >>> part = us_states_partition()
    >>> rng = np.random.default_rng(0)
    >>> table = pd.DataFrame({"value": rng.normal(1, 0.3, 48), "error_bar": 0.05,
    ...                       "noise_std": 0.02, "cohort": 500, "reliability": "high",
    ...                       "suppressed": False}, index=part.region_ids)
    >>> classes = classify_report(part.join(table), scheme="separable", k=4)
    >>> classes.k, int(classes.counts.sum())
    (4, 48)
    >>> bool((classes.separability.separability > 0.5).all())
    True
    """
    column = check_text(column, "column")
    frame = _check_report(report, extra=[column])
    name = check_text(scheme, "scheme").lower()
    if name not in SCHEMES:
        raise fail("scheme", scheme, "is not a classification scheme",
                   f"pass one of {list(SCHEMES)}")
    kwds = _kwds(classification_kwds)
    values = _numeric_column(frame, column, "the report")
    published = ~_suppressed(frame) & np.isfinite(values)
    shown = values[published]
    noise = noise_model(frame)
    if name != "user_defined":
        k = check_count(k, "k", low=2, high=100)
        if shown.size < k:
            raise InvalidInput(f"k={k} classes need at least {k} published regions, got "
                               f"{shown.size}; lower k")
    if name == "separable":
        extra = set(kwds) - {"min_size"}
        if extra:
            raise fail("classification_kwds", dict(kwds), f"has {sorted(extra)}",
                       "the separable scheme takes only min_size")
        bins = separable_breaks(values[published], noise.take(np.flatnonzero(published)), k,
                                min_size=kwds.get("min_size"))
    else:
        bins = _mapclassify_bins(shown, name, k, kwds)
    yb = np.full(values.size, -1, dtype=np.int64)
    yb[published] = np.minimum(np.searchsorted(bins, shown, side="left"), bins.size - 1)
    counts = np.bincount(yb[published], minlength=bins.size).astype(np.int64)
    grades = break_separability(values, _published_noise(noise, published), list(bins),
                                ids=list(frame.index))
    return Classification(name, bins, float(shown.min()), yb, counts, grades)


def _published_noise(noise: Any, published: NDArray[np.bool_]) -> Any:
    """Return the noise with unpublished regions' scales set to NaN (left out of the grades)."""
    from spatialdp.viz.separability import NoiseModel

    return NoiseModel(np.where(published, noise.scale, np.nan),
                      np.where(published, noise.sd, np.nan), noise.laplace)


def _kwds(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise fail("classification_kwds", value, "is not a mapping of keywords",
                   "pass e.g. {'bins': [0.3, 0.5, 1.0]} or None")
    return dict(value)


def _mapclassify_bins(shown: NDArray[np.float64], scheme: str, k: int,
                      kwds: dict[str, Any]) -> NDArray[np.float64]:
    import warnings

    import mapclassify

    if scheme == "user_defined" and "bins" not in kwds:
        raise fail("classification_kwds", kwds, "has no 'bins'",
                   "user_defined needs the upper bounds, e.g. {'bins': [0.3, 0.5]}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # mapclassify warns about fewer unique values
            args = {} if scheme in ("user_defined", "headtail_breaks", "box_plot",
                                    "std_mean", "percentiles") else {"k": k}
            fitted = mapclassify.classify(shown, scheme, **args, **kwds)
    except (TypeError, ValueError, KeyError) as err:
        raise InvalidInput(f"mapclassify refused scheme={scheme!r} ({type(err).__name__}: "
                           f"{str(err)[:160]}); check classification_kwds") from None
    bins = np.asarray(fitted.bins, dtype=np.float64)
    bins = bins[np.isfinite(bins)]
    if bins.size == 0 or bins[-1] < shown.max():
        bins = np.append(bins, shown.max())
    return np.unique(bins)
