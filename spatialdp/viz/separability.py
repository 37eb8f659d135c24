"""Class breaks that respect the error bars: how separable two classes are, and breaks that are.

A choropleth sorts regions into classes; with noisy estimates two regions on
opposite sides of a break may have been swapped by the noise. After the class
separability of Sun & Wong (2010, *Cartography and Geographic Information
Science* 37(4)), proposed for American Community Survey estimates, each break
is graded by its least separable pair of regions, one on each side:

* ``separability``: the smallest probability, over every pair ``(i, j)`` with
  ``x_i`` below the break and ``x_j`` above it, that the noise keeps the pair in
  its order, ``P(N_i - N_j < x_j - x_i)``. With the published values taken as the
  truth it is the chance that a fresh release orders the pair the same way; with
  a flat prior it is the posterior probability that the true values are ordered
  as published (Laplace noise is symmetric, so both read the same number). For
  Laplace noise of scales ``b_i, b_j`` it is exact (closed form of the Laplace
  difference); for ratio estimators (not one Laplace) it is the normal
  approximation with the published ``noise_std``.
* ``overlap_level``: Sun & Wong's own reading, the highest confidence level at
  which the two intervals of that least separable pair do not overlap. For
  Laplace intervals ``x ± b ln(1/a)`` they touch when
  ``(b_i + b_j) ln(1/a) = x_j - x_i``, so the level is
  ``1 - exp(-(x_j - x_i) / (b_i + b_j))``; for normal intervals it is
  ``2 Phi((x_j - x_i) / (sd_i + sd_j)) - 1``.

Every pair across the break counts (up to ``PAIR_WINDOW`` ranks either side), not
only pairs in the two adjacent classes,
so a break's grade never depends on where the other breaks are (and is never
higher than Sun & Wong's adjacent-class grade).

:func:`separable_breaks` chooses ``k - 1`` breaks that maximise the smallest
separability (the bottleneck), then, among the break sets that reach it, the one
whose classes are closest to equal size. It always makes ``k`` classes, even on
pure noise.

:func:`honest_breaks` (the default classes of the maps) keeps a break only where
the gap between the published values is larger than noise alone produces
*anywhere on the map*: every pair of regions across the break must be ordered
with probability at least :func:`family_grade` ``= 1 - alpha / (n (n - 1))``
(a Bonferroni bound over the ``n (n - 1) / 2`` pairs, two-sided since the order
is read off the data). When no region truly differs, some break is kept only if
some pair's noise difference exceeds its ``alpha / (n (n - 1) / 2)`` two-sided
quantile, which happens with probability at most ``alpha``: the map shows one
class with probability at least ``1 - alpha``. ``k`` is then a maximum, and a
class may hold a single region, so one region shifted by several error bars
stands out alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from spatialdp._validation import check_alpha, check_count, check_finite_array
from spatialdp.exceptions import InvalidInput
from spatialdp.privacy.combined_noise import laplace_difference_sf

__all__ = [
    "FAMILY_ALPHA",
    "NoiseModel",
    "break_separability",
    "family_grade",
    "honest_breaks",
    "noise_model",
    "order_probability",
    "separable_breaks",
]

#: Family-wise error rate of :func:`honest_breaks` (the default classes of every map): on a
#: map where no region truly differs, the classes show a difference with at most this chance.
FAMILY_ALPHA = 0.05

#: Regions either side of a break whose pairs are graded: pairs further apart in rank
#: than this are not graded (every pair, for reports of up to this many regions).
PAIR_WINDOW = 200


@dataclass(frozen=True)
class NoiseModel:
    """The noise on each published value: Laplace scales, or normal sds where not Laplace.

    ``laplace[i]`` is True where the noise on value ``i`` is Laplace of scale
    ``scale[i]``; elsewhere it is treated as normal of sd ``sd[i]``.
    """

    scale: NDArray[np.float64]
    sd: NDArray[np.float64]
    laplace: NDArray[np.bool_]

    @classmethod
    def laplace_scales(cls, scales: ArrayLike) -> NoiseModel:
        """All-Laplace noise of the given scales."""
        b = check_finite_array(scales, "scales", ndim=(1,))
        if (b < 0).any():
            raise InvalidInput("scales must be non-negative; give the Laplace scale per region")
        return cls(b, math.sqrt(2.0) * b, np.ones(b.size, dtype=bool))

    def take(self, index: NDArray[np.int64]) -> NoiseModel:
        """Return the noise of the values at ``index``."""
        return NoiseModel(self.scale[index], self.sd[index], self.laplace[index])


def noise_model(report: pd.DataFrame, alpha: float | None = None) -> NoiseModel:
    """Read the noise of a regional report frame.

    ``noise_std`` (Laplace scale ``noise_std / sqrt(2)`` for the ``mean``
    estimator, a normal sd for ``ratio``); without it, the Laplace scale from the
    error bar, ``error_bar / ln(1 / alpha)`` (alpha from ``attrs["spatialdp"]``).

    Examples
    --------
    >>> frame = pd.DataFrame({"value": [1.0, 2.0], "noise_std": [0.2, 0.4]})
    >>> noise_model(frame).scale.round(4).tolist()
    [0.1414, 0.2828]
    """
    n = len(report)
    if "noise_std" in report.columns:
        sd = pd.to_numeric(report["noise_std"], errors="coerce").to_numpy(
            dtype=np.float64, na_value=np.nan)
        if "estimator" in report.columns:
            laplace = (report["estimator"].astype(str) != "ratio").to_numpy()
        else:
            laplace = np.ones(n, dtype=bool)
        return NoiseModel(sd / math.sqrt(2.0), sd, laplace)
    if "error_bar" not in report.columns:
        raise InvalidInput("the report has neither noise_std nor error_bar; class "
                           "separability needs the noise of each value")
    meta = report.attrs.get("spatialdp", {})
    level = alpha if alpha is not None else meta.get("alpha") if isinstance(meta, dict) else None
    if level is None:
        raise InvalidInput("the report has an error_bar but no noise_std and no alpha in "
                           "attrs['spatialdp']; pass alpha= (the error bars' level)")
    bar = pd.to_numeric(report["error_bar"], errors="coerce").to_numpy(
        dtype=np.float64, na_value=np.nan)
    scale = bar / math.log(1.0 / float(level))
    return NoiseModel(scale, math.sqrt(2.0) * scale, np.ones(n, dtype=bool))


def order_probability(gap: ArrayLike, noise_a: NoiseModel, noise_b: NoiseModel
                      ) -> NDArray[np.float64]:
    """``P(N_a - N_b < gap)``: the chance that values ``gap`` apart stay ordered.

    Exact for two Laplace noises (closed form); otherwise the normal approximation
    with the two sds. A zero gap gives 1/2 (a tie is a coin flip).

    Examples
    --------
    >>> one = NoiseModel.laplace_scales([1.0])
    >>> round(float(order_probability(np.array([1.0]), one, one)[0]), 4)
    0.7241
    """
    from scipy.special import ndtr

    d = np.asarray(gap, dtype=np.float64)
    both = noise_a.laplace & noise_b.laplace
    a, b = np.broadcast_arrays(noise_a.scale, noise_b.scale)
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = 1.0 - laplace_difference_sf(d, np.maximum(a, 1e-300), np.maximum(b, 1e-300))
        sd = np.hypot(noise_a.sd, noise_b.sd)
        approx = np.where(sd > 0, ndtr(d / np.where(sd > 0, sd, 1.0)),
                          np.where(d > 0, 1.0, np.where(d < 0, 0.0, 0.5)))
    return np.where(both, exact, approx)


def _overlap_level(gap: NDArray[np.float64], noise_a: NoiseModel, noise_b: NoiseModel
                   ) -> NDArray[np.float64]:
    from scipy.special import ndtr

    with np.errstate(divide="ignore", invalid="ignore"):
        lap = 1.0 - np.exp(-gap / (noise_a.scale + noise_b.scale))
        z = gap / (noise_a.sd + noise_b.sd)
        nrm = 2.0 * ndtr(z) - 1.0
    out = np.where(noise_a.laplace & noise_b.laplace, lap, nrm)
    return np.clip(np.nan_to_num(out, nan=1.0), 0.0, 1.0)


def _sorted(values: ArrayLike, noise: NoiseModel) -> tuple[NDArray[np.float64], NoiseModel,
                                                            NDArray[np.int64]]:
    x = check_finite_array(values, "values", ndim=(1,), finite=False)
    if noise.scale.size != x.size:
        raise InvalidInput(f"values has {x.size} entries but the noise model {noise.scale.size}; "
                           "give one noise per value")
    keep = np.flatnonzero(np.isfinite(x) & np.isfinite(noise.scale) & np.isfinite(noise.sd))
    order = keep[np.argsort(x[keep], kind="stable")]
    return x[order], noise.take(order), order


def _reshape(model: NoiseModel, shape: tuple[int, ...]) -> NoiseModel:
    return NoiseModel(model.scale.reshape(shape), model.sd.reshape(shape),
                      model.laplace.reshape(shape))


def break_separability(values: ArrayLike, noise: NoiseModel, bins: Sequence[float],
                       ids: Sequence[object] | None = None) -> pd.DataFrame:
    """Grade each class break by its least separable pair of regions (Sun & Wong 2010).

    Parameters
    ----------
    values : array-like
        The published values (NaN where suppressed: left out).
    noise : NoiseModel
        Their noise (:func:`noise_model` of a report frame).
    bins : sequence of float
        Upper bounds of the classes, as mapclassify gives them; the last (the top)
        is not a break.
    ids : sequence, optional
        Region ids, to name the least separable pair.

    Returns
    -------
    DataFrame
        One row per break: ``break`` (the upper bound of the class below),
        ``separability`` (smallest probability that a pair across it is ordered
        as published), ``overlap_level`` (Sun & Wong: highest confidence at which
        that pair's intervals do not overlap), ``below`` and ``above`` (the pair).

    Examples
    --------
    >>> noise = NoiseModel.laplace_scales([0.1, 0.1, 0.1, 0.1])
    >>> table = break_separability([1.0, 1.1, 3.0, 3.1], noise, bins=[1.1, 3.1])
    >>> round(float(table.separability.iloc[0]), 4)
    1.0
    """
    x, model, order = _sorted(values, noise)
    names = np.asarray(ids if ids is not None else np.arange(len(noise.scale)), dtype=object)
    edges = check_finite_array(bins, "bins", ndim=(1,))
    rows = []
    for edge in edges[:-1]:
        p = int(np.searchsorted(x, edge, side="right"))
        if p <= 0 or p >= x.size:
            rows.append({"break": float(edge), "separability": np.nan,
                         "overlap_level": np.nan, "below": None, "above": None})
            continue
        sep, lvl, lo, hi = _grade_one(x, model, p)
        rows.append({"break": float(edge), "separability": sep, "overlap_level": lvl,
                     "below": names[order[lo]], "above": names[order[hi]]})
    return pd.DataFrame(rows, columns=["break", "separability", "overlap_level", "below",
                                       "above"])


def _grade_one(x: NDArray[np.float64], noise: NoiseModel, p: int
               ) -> tuple[float, float, int, int]:
    """Grade the break between sorted positions p-1 and p (pairs up to the window apart)."""
    i = np.arange(max(0, p - PAIR_WINDOW), p)
    j = np.arange(p, min(x.size, p + PAIR_WINDOW))
    ii, jj = np.meshgrid(i, j, indexing="ij")
    a = _reshape(noise.take(ii.ravel()), ii.shape)
    b = _reshape(noise.take(jj.ravel()), jj.shape)
    gap = x[jj] - x[ii]
    near = (jj - ii) <= PAIR_WINDOW
    prob = np.where(near, order_probability(gap, a, b), np.inf)
    flat = int(np.argmin(prob))
    r, c = np.unravel_index(flat, prob.shape)
    level = np.where(near, _overlap_level(gap, a, b), np.inf)
    return float(prob[r, c]), float(level.min()), int(i[r]), int(j[c])


def _all_grades(x: NDArray[np.float64], noise: NoiseModel) -> NDArray[np.float64]:
    """Separability of every break position p = 1 .. n-1 at once (pairs within the window).

    ``P[i, d]`` is the order probability of the pair ``(i, i + d)``; the grade of
    position ``p`` is the minimum of ``P[p - a, d]`` over ``a >= 1`` and ``d >= a``
    (the pair straddles ``p``), a suffix minimum along ``d`` read at ``d = a``.
    """
    n = x.size
    w = min(PAIR_WINDOW, n - 1)
    i = np.broadcast_to(np.arange(n)[:, None], (n, w))
    j = i + np.arange(1, w + 1)[None, :]
    valid = j < n
    jj = np.where(valid, j, n - 1)
    prob = order_probability(x[jj] - x[i], _reshape(noise.take(i.ravel()), (n, w)),
                             _reshape(noise.take(jj.ravel()), (n, w)))
    prob = np.where(valid, prob, np.inf)
    suffix = np.minimum.accumulate(prob[:, ::-1], axis=1)[:, ::-1]  # min over d' >= d
    p = np.arange(1, n)[:, None]
    a = np.arange(1, w + 1)[None, :]
    rows = p - a
    return np.where(rows >= 0, suffix[np.maximum(rows, 0), a - 1], np.inf).min(axis=1)


def separable_breaks(values: ArrayLike, noise: NoiseModel, k: int = 5, *,
                     min_size: int | None = None) -> NDArray[np.float64]:
    """Class upper bounds whose breaks are as separable as the noise allows.

    Chooses ``k - 1`` breaks among the gaps between sorted values so that the
    least separable break is as separable as possible (a bottleneck, solved
    exactly: the grade of a break does not depend on the others), then, among
    the break sets that reach that grade, the one with the most even class
    sizes. Every class holds at least ``min_size`` regions (default
    ``max(1, n // (3 k))``).

    Returns
    -------
    ndarray
        ``k`` upper bounds (the last is the largest value), as mapclassify's ``bins``.

    Examples
    --------
    >>> noise = NoiseModel.laplace_scales([0.05] * 6)
    >>> separable_breaks([1.0, 1.02, 1.04, 2.0, 2.02, 2.04], noise, k=2).tolist()
    [1.04, 2.04]
    """
    k = check_count(k, "k", low=2)
    x, model, _ = _sorted(values, noise)
    n = x.size
    if n < k:
        raise InvalidInput(f"k={k} classes need at least {k} published values, got {n}; "
                           "lower k")
    size = max(1, n // (3 * k)) if min_size is None else check_count(min_size, "min_size",
                                                                      low=1)
    if size * k > n:
        raise InvalidInput(f"min_size={size} times k={k} exceeds the {n} published values; "
                           "lower min_size or k")
    positions = np.flatnonzero(np.diff(x) > 0) + 1  # a break never splits tied values
    if positions.size < k - 1:
        raise InvalidInput(f"k={k} classes need {k} distinct published values, got "
                           f"{positions.size + 1}; lower k")
    grades = _all_grades(x, model)[positions - 1]
    return _bins(x, _bottleneck(positions, grades, n, k - 1, size))


def family_grade(n: int, alpha: float = FAMILY_ALPHA) -> float:
    """Separability a break needs to be beyond the noise of a map of ``n`` values.

    ``1 - alpha / (n (n - 1))``: the pair across the break is ordered with a
    probability that noise alone reaches, for any of the ``n (n - 1) / 2``
    pairs of the map, with probability at most ``alpha`` (Bonferroni, two-sided).

    Examples
    --------
    >>> round(family_grade(48), 7)
    0.9999778
    """
    n = check_count(n, "n", low=1)
    return 1.0 - alpha / max(n * (n - 1), 1)


def honest_breaks(values: ArrayLike, noise: NoiseModel, k: int = 5, *,
                  alpha: float = FAMILY_ALPHA, min_size: int = 1) -> NDArray[np.float64]:
    """Class upper bounds at gaps the noise is unlikely to have made anywhere on the map.

    A break is a candidate only where every pair of values across it (up to
    ``PAIR_WINDOW`` ranks apart) is at least :func:`family_grade` separable;
    when more than ``k - 1`` candidates remain, the ``k - 1`` most separable
    (bottleneck, then most even class sizes, as :func:`separable_breaks`) are
    kept. With no true difference on the map, the result is one class with
    probability at least ``1 - alpha``.

    Parameters
    ----------
    values : array-like
        The published values (NaN where suppressed: left out).
    noise : NoiseModel
        Their noise.
    k : int
        The most classes to make (fewer when the noise explains the gaps).
    alpha : float
        Family-wise error rate (default :data:`FAMILY_ALPHA`).
    min_size : int
        Fewest regions per class (default 1: one region may stand out alone).

    Returns
    -------
    ndarray
        The upper bound of each class (the last is the largest value); one
        entry when the map is one class, none when no value is given.

    Examples
    --------
    >>> noise = NoiseModel.laplace_scales([0.05] * 6)
    >>> honest_breaks([1.0, 1.02, 1.04, 1.06, 1.08, 3.0], noise).tolist()
    [1.08, 3.0]
    >>> honest_breaks([1.0, 1.02, 1.04, 1.06, 1.08, 1.1], noise).tolist()
    [1.1]
    """
    k = check_count(k, "k", low=1)
    alpha = check_alpha(alpha)
    size = check_count(min_size, "min_size", low=1)
    x, model, _ = _sorted(values, noise)
    n = x.size
    if n == 0:
        return np.empty(0)
    positions = np.flatnonzero(np.diff(x) > 0) + 1  # a break never splits tied values
    grades = _all_grades(x, model)[positions - 1] if positions.size else np.empty(0)
    keep = grades >= family_grade(n, alpha)
    candidates, strong = positions[keep], grades[keep]
    m = min(k - 1, candidates.size)
    while m > 0 and not _fits(candidates, n, m, size):
        m -= 1
    if m == 0:
        return np.asarray([float(x[-1])])
    return _bins(x, _bottleneck(candidates, strong, n, m, size))


def _bins(x: NDArray[np.float64], chosen: Sequence[int]) -> NDArray[np.float64]:
    return np.asarray([float(x[p - 1]) for p in chosen] + [float(x[-1])])


def _bottleneck(positions: NDArray[np.int64], grades: NDArray[np.float64], n: int, m: int,
                size: int) -> list[int]:
    """Pick m breaks with the highest least grade, then the most even class sizes."""
    best = 0.0
    for tau in np.unique(grades)[::-1]:
        if _fits(positions[grades >= tau], n, m, size):
            best = float(tau)
            break
    return _balanced(positions[grades >= best], n, m, size)


def _fits(candidates: NDArray[np.int64], n: int, m: int, size: int) -> bool:
    """Can m breaks be picked from candidates, classes of at least ``size``? (greedy)."""
    last, picked = 0, 0
    for p in candidates:
        if p - last >= size and n - p >= size * (m - picked):
            last, picked = int(p), picked + 1
            if picked == m:
                return True
    return m == 0


def _balanced(candidates: NDArray[np.int64], n: int, m: int, size: int) -> list[int]:
    """Pick m breaks from the candidates minimising the squared deviation from n/(m+1)."""
    target = n / (m + 1)
    c = np.concatenate([[0], candidates]).astype(np.int64)
    inf = np.inf
    cost = np.where(c - 0 >= size, (c - target) ** 2, inf)
    cost[0] = inf
    back = np.zeros((m, c.size), dtype=np.int64)
    for stage in range(1, m):
        new = np.full(c.size, inf)
        for idx in range(1, c.size):
            span = c[idx] - c
            ok = (span >= size) & np.isfinite(cost)
            if not ok.any():
                continue
            total = np.where(ok, cost + (span - target) ** 2, inf)
            arg = int(np.argmin(total))
            new[idx], back[stage, idx] = total[arg], arg
        cost = new
    final = np.where(n - c >= size, cost + (n - c - target) ** 2, inf)
    idx = int(np.argmin(final))
    if not np.isfinite(final[idx]):
        raise InvalidInput("no set of breaks gives every class the minimum size; lower k")
    picks = [idx]
    for stage in range(m - 1, 0, -1):
        idx = int(back[stage, idx])
        picks.append(idx)
    return sorted(int(c[i]) for i in picks)
