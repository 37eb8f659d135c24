"""Classed choropleths: classes the noise respects by default, or any mapclassify scheme.

:func:`classify_report` sorts the published regions of a report into classes.
The default, ``"separable"``, keeps a class break only where the gap between
published values is larger than noise alone would produce anywhere on the map
(:func:`spatialdp.viz.separability.honest_breaks`, family-wise error
``alpha = 0.05``): a map of pure noise is one class with probability at least
95%, and a region shifted by several error bars forms a class of its own; ``k``
is then the most classes drawn. Any mapclassify scheme is available as
``GeoDataFrame.plot(scheme=..., k=...)`` offers it (``"quantiles"``,
``"natural_breaks"``, ``"fisher_jenks"``, ``"equal_interval"``,
``"user_defined"`` with ``classification_kwds={"bins": [...]}``...). Whatever
the scheme, each break is graded by its separability (Sun & Wong 2010), and
said to be beyond the noise, or within the neighbouring classes' error bars.

:func:`map_colours` is the fill of every region, shared by the static map
(:func:`~spatialdp.viz.maps.plot_uncertainty_choropleth`) and the folium map
(:func:`~spatialdp.viz.maps.explore_report`), so the two always agree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp._validation import check_alpha, check_cmap, check_count, check_text, fail
from spatialdp.exceptions import InvalidInput
from spatialdp.viz._report import (
    _check_report,
    _colour_range,
    _meta_number,
    _numeric_column,
    _optional_flag,
    _optional_number,
    _suppressed,
)
from spatialdp.viz.separability import (
    FAMILY_ALPHA,
    break_separability,
    family_grade,
    honest_breaks,
    noise_model,
)

__all__ = ["SCHEMES", "Classification", "MapColours", "classify_report", "map_colours"]

#: Schemes :func:`classify_report` knows: ``separable`` (the default), and mapclassify's.
SCHEMES: tuple[str, ...] = (
    "separable", "quantiles", "natural_breaks", "fisher_jenks", "equal_interval",
    "user_defined", "jenks_caspall", "headtail_breaks", "max_breaks", "box_plot",
    "std_mean", "percentiles", "maximum_breaks", "prettybreaks")

#: Columns that carry the report's noise: the default classes are drawn for them.
NOISY_COLUMNS: tuple[str, ...] = ("value", "ci_low", "ci_high")

#: Legend text of a map whose published values are one class.
ONE_CLASS_TEXT = "no class break beyond the noise"


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
        :func:`~spatialdp.viz.separability.break_separability`), plus
        ``beyond_noise`` (the break passes the family-wise test at ``alpha``)
        and ``bars_overlap`` (the least separable pair's error bars overlap:
        neighbouring classes are within each other's error bars).
    alpha : float
        Family-wise error rate the breaks are judged at.
    """

    scheme: str
    bins: NDArray[np.float64]
    lower: float
    yb: NDArray[np.int64]
    counts: NDArray[np.int64]
    separability: pd.DataFrame
    alpha: float = FAMILY_ALPHA

    @property
    def k(self) -> int:
        """Number of classes."""
        return int(self.bins.size)

    def labels(self, fmt: str = "{:.3g}") -> list[str]:
        """Class-interval labels, ``'0.31 – 0.42'`` (first closed, others open below).

        A map of one class reads ``'0.31 – 0.42: no class break beyond the noise'``.
        """
        lows = [self.lower, *self.bins[:-1]]
        labels = [f"{fmt.format(lo)} – {fmt.format(hi)}"
                  for lo, hi in zip(lows, self.bins, strict=True)]
        if self.k == 1:
            labels[0] += f": {ONE_CLASS_TEXT}"
        return labels

    def colours(self, cmap: Any = "viridis") -> list[str]:
        """Hex colour of each class: the ramp evenly, or its middle for a single class.

        Examples
        --------
        >>> one = Classification("separable", np.array([1.0]), 0.5, np.zeros(3, np.int64),
        ...                      np.array([3]), pd.DataFrame())
        >>> one.colours("viridis")
        ['#21918c']
        """
        from matplotlib.colors import to_hex

        ramp = check_cmap(cmap)
        stops = [0.5] if self.k == 1 else np.linspace(0.0, 1.0, self.k)
        return [to_hex(ramp(float(s)), keep_alpha=False) for s in stops]

    def break_notes(self) -> list[str]:
        """One sentence per break: beyond the noise, or within the error bars.

        ``'break 0.42: beyond the noise (99.9% separable)'``; a break the
        family-wise test does not pass reads ``'within each other's error
        bars'`` when the least separable pair's error bars overlap, and ``'error
        bars apart, not beyond the map's noise'`` otherwise.
        """
        notes = []
        table = self.separability
        for edge, grade, beyond, overlap in zip(table["break"], table["separability"],
                                                table["beyond_noise"], table["bars_overlap"],
                                                strict=True):
            if not math.isfinite(grade):
                notes.append(f"break {edge:.3g}: no published region on one side")
                continue
            verdict = ("beyond the noise" if beyond else
                       "classes within each other's error bars" if overlap else
                       "error bars apart, not beyond the map's noise")
            notes.append(f"break {edge:.3g}: {verdict} ({_percent(grade)} separable)")
        return notes


def classify_report(
    report: Any,
    column: str = "value",
    scheme: str = "separable",
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
        One of :data:`SCHEMES`; default ``"separable"``: breaks beyond the noise
        of the whole map (family-wise, see
        :func:`~spatialdp.viz.separability.honest_breaks`).
    k : int
        Number of classes; the most classes for ``separable`` (fewer when the
        noise explains the gaps); ``user_defined`` takes its bins instead.
    classification_kwds : dict, optional
        Passed to the mapclassify classifier (``bins`` for ``user_defined``);
        ``alpha`` (family-wise error, default 0.05) and ``min_size`` (default 1)
        for ``separable``.

    Returns
    -------
    Classification

    Raises
    ------
    InvalidInput
        Unknown scheme, a ``k`` below 2, no published region, too few published
        regions for a mapclassify scheme, or keywords mapclassify refuses.

    Examples
    --------
    >>> import pandas as pd
    >>> from spatialdp.datasets import us_states_partition
    >>> part = us_states_partition()
    >>> rng = np.random.default_rng(0)
    >>> table = pd.DataFrame({"value": 1 + rng.laplace(0, 0.02, 48), "error_bar": 0.06,
    ...                       "noise_std": 0.02 * np.sqrt(2), "cohort": 500,
    ...                       "reliability": "high", "suppressed": False},
    ...                      index=part.region_ids)
    >>> classify_report(part.join(table)).k  # noise only: one class
    1
    >>> table.loc["CO", "value"] = 2.0  # one region truly apart
    >>> classes = classify_report(part.join(table))
    >>> classes.k, classes.counts.tolist()
    (2, [47, 1])
    >>> classes.break_notes()[0].split(" (")[0]
    'break 1.1: beyond the noise'
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
    if not shown.size:
        raise InvalidInput("the report publishes no value to classify (every region is "
                           "suppressed or empty); there are no classes to draw")
    noise = noise_model(frame)
    family = FAMILY_ALPHA
    if name != "user_defined":
        k = check_count(k, "k", low=2, high=100)
        if name != "separable" and shown.size < k:
            raise InvalidInput(f"k={k} classes need at least {k} published regions, got "
                               f"{shown.size}; lower k")
    if name == "separable":
        extra = set(kwds) - {"min_size", "alpha"}
        if extra:
            raise fail("classification_kwds", dict(kwds), f"has {sorted(extra)}",
                       "the separable scheme takes only alpha and min_size")
        family = check_alpha(kwds.get("alpha", FAMILY_ALPHA), "classification_kwds['alpha']")
        bins = honest_breaks(values[published], noise.take(np.flatnonzero(published)), k,
                             alpha=family, min_size=kwds.get("min_size", 1))
    else:
        bins = _mapclassify_bins(shown, name, k, kwds)
    yb = np.full(values.size, -1, dtype=np.int64)
    yb[published] = np.minimum(np.searchsorted(bins, shown, side="left"), bins.size - 1)
    counts = np.bincount(yb[published], minlength=bins.size).astype(np.int64)
    grades = break_separability(values, _published_noise(noise, published), list(bins),
                                ids=list(frame.index))
    bar_level = _meta_number(frame.attrs.get("spatialdp", {}) if isinstance(
        frame.attrs.get("spatialdp"), Mapping) else {}, "alpha")
    bar_level = bar_level if bar_level is not None and 0 < bar_level < 1 else 0.05
    grades["beyond_noise"] = grades["separability"] >= family_grade(shown.size, family)
    grades["bars_overlap"] = grades["overlap_level"] < 1.0 - bar_level
    return Classification(name, bins, float(shown.min()), yb, counts, grades, family)


@dataclass(frozen=True)
class MapColours:
    """The fill of every region of a map: what the PNG and the folium map both draw.

    Attributes
    ----------
    classes : Classification or None
        The classes (None: the continuous ramp, ``scheme=None``).
    fill : ndarray of object
        Hex colour of each region (None where nothing is published).
    out_of_range : ndarray of int
        -1 below the colour range, +1 above it, 0 inside (always 0 for classes:
        they hold every published value).
    vmin, vmax : float
        The continuous ramp's range (the classes' span for a classed map).
    published : ndarray of bool
    values : ndarray of float
    """

    classes: Classification | None
    fill: NDArray[np.object_]
    out_of_range: NDArray[np.int8]
    vmin: float
    vmax: float
    published: NDArray[np.bool_]
    values: NDArray[np.float64]

    def frame(self, index: Any) -> pd.DataFrame:
        """Per region: ``class`` (-1: not published), ``fill`` and ``range``.

        ``range`` is ``"below"``, ``"above"`` or ``""``.
        """
        cls = self.classes.yb if self.classes is not None else np.where(self.published, 0, -1)
        side = np.where(self.out_of_range < 0, "below",
                        np.where(self.out_of_range > 0, "above", ""))
        return pd.DataFrame({"class": cls, "fill": self.fill, "range": side}, index=index)


def map_colours(
    report: Any,
    column: str = "value",
    *,
    cmap: Any = "viridis",
    scheme: str | None = "auto",
    k: int = 5,
    classification_kwds: Mapping[str, Any] | None = None,
    vmin: float | None = None,
    vmax: float | None = None,
    robust: bool | None = None,
) -> MapColours:
    """Colour every region of a report as the maps do (classes, or a ramp with marked ends).

    Parameters
    ----------
    report : GeoDataFrame
        A regional report.
    column : str
        Column to colour by.
    cmap : str or Colormap
    scheme : str or None
        ``"auto"`` (default): the ``separable`` classes for a noisy estimate
        (``value``, ``ci_low``, ``ci_high``) whose noise the report gives
        (``noise_std``, or ``error_bar`` with ``attrs["spatialdp"]["alpha"]``);
        the continuous ramp for other columns, a report without its noise, or
        when ``vmin``, ``vmax`` or ``robust`` is given. ``None``: the continuous
        ramp. A scheme of :data:`SCHEMES`.
    k, classification_kwds
        As for :func:`classify_report`.
    vmin, vmax, robust
        The continuous ramp's range (see
        :func:`~spatialdp.viz.maps.plot_uncertainty_choropleth`); values
        outside it are drawn in the end colour and flagged in ``out_of_range``.

    Returns
    -------
    MapColours

    Raises
    ------
    InvalidInput
        ``vmin``, ``vmax`` or ``robust`` with a classification scheme (they set
        the continuous ramp's range), or anything :func:`classify_report` refuses.

    Examples
    --------
    >>> import pandas as pd
    >>> from spatialdp.datasets import us_states_partition
    >>> part = us_states_partition()
    >>> table = pd.DataFrame({"value": 1.0, "error_bar": 0.06, "cohort": 500,
    ...                       "reliability": "high", "suppressed": False},
    ...                      index=part.region_ids)
    >>> table.loc["CO", "value"] = 9.0
    >>> report = part.join(table)
    >>> report.attrs["spatialdp"] = {"alpha": 0.05}
    >>> sorted(set(map_colours(report).fill))
    ['#440154', '#fde725']
    >>> ramp = map_colours(report, vmax=2.0)
    >>> ramp.frame(report.index).loc["CO", "range"]
    'above'
    """
    from matplotlib.colors import Normalize, to_hex

    column = check_text(column, "column")
    frame = _check_report(report, extra=[column])
    ramp = check_cmap(cmap)
    robust = _optional_flag(robust, "robust")
    vmin = _optional_number(vmin, "vmin")
    vmax = _optional_number(vmax, "vmax")
    ranged = vmin is not None or vmax is not None or robust is not None
    name = None if scheme is None else check_text(scheme, "scheme").lower()
    if name == "auto":
        name = "separable" if not ranged and _noise_known(frame, column) else None
    elif name is not None and ranged:
        raise fail("scheme", scheme, "is a classification, but vmin, vmax or robust is given",
                   "pass scheme=None for a continuous ramp with that range, or leave out "
                   "vmin, vmax and robust (the classes span every published value)")
    try:
        values = _numeric_column(frame, column, "the report")
    except InvalidInput:
        raise InvalidInput(
            f"column {column!r} is not numeric (dtype {frame[column].dtype}); colour by a "
            "numeric column such as 'value', 'error_bar' or 'cv'") from None
    values = np.where(np.isinf(values), np.nan, values)
    published = ~_suppressed(frame) & np.isfinite(values)
    fill = np.full(values.size, None, dtype=object)
    out = np.zeros(values.size, dtype=np.int8)
    if name is not None and published.any():
        classes = classify_report(frame, column, name, k, classification_kwds)
        colours = np.asarray(classes.colours(ramp), dtype=object)
        fill[published] = colours[classes.yb[published]]
        return MapColours(classes, fill, out, classes.lower, float(classes.bins[-1]),
                          published, values)
    lo, hi = _ramp_range(values[published], robust, vmin, vmax)
    norm = Normalize(vmin=lo, vmax=hi, clip=True)
    shown = values[published]
    fill[published] = [to_hex(c, keep_alpha=False) for c in ramp(norm(shown))]
    out[published] = np.where(shown < lo, -1, np.where(shown > hi, 1, 0))
    return MapColours(None, fill, out, lo, hi, published, values)


def _noise_known(frame: pd.DataFrame, column: str) -> bool:
    """Return whether the report gives the noise of ``column`` (noise_std, or a level)."""
    if column not in NOISY_COLUMNS:
        return False
    try:
        noise_model(frame)
    except InvalidInput:
        return False
    return True


def _ramp_range(shown: NDArray[np.float64], robust: bool | None, vmin: float | None,
                vmax: float | None) -> tuple[float, float]:
    """Return the continuous ramp's range (widened around a single value)."""
    lo, hi = _colour_range(shown, robust)
    lo = lo if vmin is None else vmin
    hi = hi if vmax is None else vmax
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
        raise InvalidInput(f"vmin={lo!r} and vmax={hi!r} do not make a colour range; "
                           "give finite vmin <= vmax")
    if not math.isfinite(hi - lo):
        raise InvalidInput(f"vmin={lo!r} and vmax={hi!r} span more than a float holds; give a "
                           "narrower colour range")
    if hi - lo <= 1e-9 * max(1.0, abs(lo), abs(hi)):  # one colour: widen around it
        pad = max(abs(lo) * 0.05, 1e-9 * max(1.0, abs(lo))) if lo else 0.5
        lo, hi = lo - pad, hi + pad
    return lo, hi


def _percent(p: float) -> str:
    """Format a probability as a percentage that never rounds a doubt away (99.96% is not 100%)."""
    if p >= 1.0:
        return "100%"
    if p >= 0.99:
        return f"{np.floor(p * 1000) / 10:.1f}%"
    return f"{np.floor(p * 100):.0f}%"


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
