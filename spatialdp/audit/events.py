"""Output events for an audit: a scalar statistic of the output and a threshold.

The auditor draws outputs of both neighbouring inputs, picks an event on one
part of the draws (:func:`select_event`) and counts it on fresh draws. The
statistics searched, over the output coordinates whose distribution moves most
between the two inputs (at most ``max_columns``):

- ``coordinate``: one output value (the whole story for a one-cell change);
- ``laplace``: the Laplace log-likelihood ratio ``sum_j (|x_j - m0_j| - |x_j -
  m1_j|) / b_j`` with medians ``m`` and mean absolute deviations ``b``
  estimated on the selection draws (the exact log density ratio of Laplace
  noise, so tail events of it reach the claimed epsilon when several values move);
- ``linear``: the Gaussian log-likelihood ratio ``sum_j (m1_j - m0_j) x_j /
  s_j^2`` (the exact log density ratio of Gaussian noise);
- ``token``: a categorical event on a non-numeric output (the columns named by
  ``categorical``, 0/1 indicators of an output token such as
  ``reliability[CO]=high`` or a warning's text, see
  :class:`~spatialdp.audit.published.PublicationSchema`): the token is seen, or
  not seen. A token seen under one input and never under the other is the
  categorical form of a deterministic difference.

Each numeric statistic is cut at thresholds spread over its pooled quantiles, both
``{s > t}`` and ``{s <= t}``, and both ratio directions; the event with the
best bound on the selection draws wins. Choosing on separate draws keeps the
final bound honest (no multiple-comparison inflation).

Examples
--------
>>> rng = np.random.default_rng(0)
>>> x0, x1 = rng.laplace(0.0, 1.0, (20000, 3)), rng.laplace(0.0, 1.0, (20000, 3))
>>> x1[:, 1] += 1.0
>>> event = select_event(x0, x1, bound=lambda *c: epsilon_lower_bound(*c, 0.01))
>>> event.columns[0]
1
>>> seen = np.zeros((1000, 1)), np.ones((1000, 1))   # a token seen only under input 1
>>> select_event(*seen, bound=lambda *c: epsilon_lower_bound(*c, 0.01), categorical=[0],
...              labels=["token warning=only # clients"]).describe()
"output token 'warning=only # clients' seen (ratio P1/P0)"
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from spatialdp._validation import fail
from spatialdp.audit.bounds import epsilon_lower_bound  # noqa: F401 (doctest)

__all__ = ["Event", "as_draws", "select_event"]

FloatArray = NDArray[np.float64]
#: Bound function of event counts (k1, n1, k0, n0), vectorised.
BoundFn = Callable[[Any, Any, Any, Any], Any]

_SENTINEL = -1e300  # a missing (NaN) output value: below every real value
_LARGE = 1e300  # the score of a column that moves while constant within each input
_THRESHOLDS = 512


def as_draws(x: Any, n: int | None = None) -> FloatArray:
    """Return draws as a 2-D float array ``(n, k)``: one row per draw, NaN kept.

    Examples
    --------
    >>> as_draws(np.zeros((4, 2, 3))).shape
    (4, 6)
    """
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim == 0:
        arr = arr.reshape(1, 1)
    rows = arr.shape[0] if n is None else n
    return arr.reshape(rows, -1)


@dataclass(frozen=True)
class Event:
    """An output event ``{statistic(x) > threshold}`` (or ``<=``) and the ratio it bounds.

    Attributes
    ----------
    statistic : {"coordinate", "laplace", "linear", "token", "none"}
    columns : tuple of int
        Output coordinates (flattened) the statistic reads.
    threshold : float
    above : bool
        ``True``: the event is ``statistic > threshold``; else ``<=``.
    first : int
        0 or 1: the input whose probability is the numerator of the ratio.
    labels : tuple of str
        Names of the output coordinates, for :meth:`describe`.
    """

    statistic: str
    columns: tuple[int, ...]
    threshold: float
    above: bool
    first: int
    m0: FloatArray = field(default_factory=lambda: np.zeros(0), repr=False)
    m1: FloatArray = field(default_factory=lambda: np.zeros(0), repr=False)
    spread: FloatArray = field(default_factory=lambda: np.zeros(0), repr=False)
    labels: tuple[str, ...] = ()

    def values(self, x: FloatArray) -> FloatArray:
        """Return the statistic of each draw (rows of the flattened output)."""
        cols = x[:, list(self.columns)]
        if self.statistic == "token":
            return np.nan_to_num(cols[:, 0], nan=0.0)
        if self.statistic == "coordinate":
            return np.nan_to_num(cols[:, 0], nan=_SENTINEL)
        if self.statistic == "laplace":
            # |x - m0| - |x - m1| as a clip, so that its plateaus are exact constants: computed
            # as a difference, their float rounding would depend on x's low bits, an artefact
            # of float arithmetic (x + 1.0 rounds differently from x) rather than of the noise.
            gap = self.m1 - self.m0
            with np.errstate(invalid="ignore"):
                terms = np.sign(gap) * np.clip(2.0 * cols - (self.m0 + self.m1), -np.abs(gap),
                                               np.abs(gap))
                llr = (terms / self.spread).sum(axis=1)
            return np.nan_to_num(llr, nan=_SENTINEL)
        if self.statistic == "linear":
            w = (self.m1 - self.m0) / self.spread**2
            with np.errstate(invalid="ignore"):
                return np.nan_to_num(cols @ w, nan=_SENTINEL)
        return np.zeros(x.shape[0])

    def contains(self, x: FloatArray) -> NDArray[np.bool_]:
        """Return which draws fall in the event."""
        s = self.values(x)
        return s > self.threshold if self.above else s <= self.threshold

    def describe(self) -> str:
        """Return the event in words, e.g. ``'x[3] > 1.25 (ratio P1/P0)'``."""
        if self.statistic == "none":
            return "no output value differs between the inputs"
        names = [self.labels[c] if c < len(self.labels) else f"x[{c}]" for c in self.columns]
        ratio = "P1/P0" if self.first == 1 else "P0/P1"
        if self.statistic == "token":
            token = names[0].removeprefix("token ")
            return f"output token {token!r} {'seen' if self.above else 'not seen'} (ratio {ratio})"
        if self.statistic == "coordinate":
            what = names[0]
        elif self.statistic == "laplace":
            what = f"Laplace LLR of ({', '.join(names)})"
        else:
            what = f"Gaussian LLR of ({', '.join(names)})"
        op = ">" if self.above else "<="
        return f"{what} {op} {self.threshold:.6g} (ratio {ratio})"


def _column_scores(x0: FloatArray, x1: FloatArray) -> tuple[Any, ...]:
    """Return per-column medians, spreads and how far the two inputs' columns move."""
    a = np.nan_to_num(x0, nan=_SENTINEL)
    b = np.nan_to_num(x1, nan=_SENTINEL)
    m0, m1 = np.median(a, axis=0), np.median(b, axis=0)
    finite = (np.isfinite(x0).all(axis=0) & np.isfinite(x1).all(axis=0))
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        spread = 0.5 * (np.abs(a - m0).mean(axis=0) + np.abs(b - m1).mean(axis=0))
        sd = np.sqrt(0.5 * (a.var(axis=0) + b.var(axis=0)))
        mean_gap = np.abs(a.mean(axis=0) - b.mean(axis=0))
        median_gap = np.abs(m1 - m0)
        location = np.fmax(np.where(spread > 0, median_gap / spread, _LARGE * (median_gap > 0)),
                           np.where(sd > 0, mean_gap / sd, _LARGE * (mean_gap > 0)))
        nan0, nan1 = np.isnan(x0).mean(axis=0), np.isnan(x1).mean(axis=0)
        both = 0.5 * (nan0 + nan1)
        missing = np.abs(nan0 - nan1) / np.sqrt(np.maximum(both * (1.0 - both), 1e-12))
    score = np.fmax(np.nan_to_num(location, nan=0.0, posinf=_LARGE), missing)
    # Ranges that do not overlap: a deterministic difference (an exact count, a value without
    # noise, a NaN under one input only) separates every draw; it goes first.
    apart = (a.max(axis=0) < b.min(axis=0)) | (b.max(axis=0) < a.min(axis=0))
    score = np.where(apart, np.inf, score)
    return m0, m1, spread, score, finite


def _distinct_top(x0: FloatArray, x1: FloatArray, score: FloatArray,
                  finite: NDArray[np.bool_], max_columns: int) -> list[int]:
    """Return the most-moved columns, skipping near-copies (|correlation| > 0.99) of one taken.

    A published output repeats one noisy value in many places (the value, the
    ends of its interval, its summary text, its estimate): read as separate
    columns they would crowd out the values that move independently, and a
    likelihood ratio over copies counts one noise several times.
    """
    pooled = np.concatenate([x0, x1])
    top: list[int] = []
    taken: list[FloatArray] = []
    for c in np.argsort(-score, kind="stable"):
        if score[c] <= 0 or len(top) == max_columns:
            break
        if finite[c]:
            column = pooled[:, c]
            sd = float(column.std())
            if sd > 0:
                z = (column - column.mean()) / sd
                if any(abs(float(z @ t)) > 0.99 * z.size for t in taken):
                    continue
                taken.append(z)
        top.append(int(c))
    return top


def _candidates(x0: FloatArray, x1: FloatArray, max_columns: int,
                labels: tuple[str, ...], categorical: list[int]) -> list[Event]:
    m0, m1, spread, score, finite = _column_scores(x0, x1)
    score[categorical] = 0.0  # token indicators get categorical events (_best_token)
    top = _distinct_top(x0, x1, score, finite, max_columns)
    if not top:
        return []
    events = [Event("coordinate", (c,), 0.0, True, 1, labels=labels) for c in top]
    smooth = [c for c in top if finite[c] and spread[c] > 0]
    for size in sorted({2, 4, len(smooth)}):
        cols = tuple(smooth[:size])
        if len(cols) < 2 or size > len(smooth):
            continue
        idx = list(cols)
        sd = np.sqrt(0.5 * (x0[:, idx].var(axis=0) + x1[:, idx].var(axis=0)))
        mu0, mu1 = x0[:, idx].mean(axis=0), x1[:, idx].mean(axis=0)
        events.append(Event("laplace", cols, 0.0, True, 1, m0[idx], m1[idx], spread[idx],
                            labels))
        if (sd > 0).all():
            events.append(Event("linear", cols, 0.0, True, 1, mu0, mu1, sd, labels))
    return events


def _best_reading(k0: NDArray[np.int64], n0: int, k1: NDArray[np.int64], n1: int,
                  bound: BoundFn) -> tuple[float, int, bool, int]:
    """Return ``(score, i, above, first)``: the best of candidate events ``i`` read four ways.

    ``k0[i]`` of ``n0`` draws under input 0 (``k1[i]`` of ``n1`` under input 1)
    fall in candidate ``i``. Each candidate is read as itself (``above``) or its
    complement, with either input's probability as the ratio's numerator
    (``first``); the first reading wins ties.
    """
    readings = [  # (k_first, n_first, k_second, n_second, above, first)
        (k1, n1, k0, n0, True, 1), (k0, n0, k1, n1, True, 0),
        (n1 - k1, n1, n0 - k0, n0, False, 1), (n0 - k0, n0, n1 - k1, n1, False, 0),
    ]
    best = (-math.inf, 0, True, 1)
    for k_f, n_f, k_s, n_s, above, first in readings:
        scores = np.asarray(bound(k_f, n_f, k_s, n_s), dtype=np.float64)
        i = int(np.argmax(scores))
        if scores[i] > best[0]:
            best = (float(scores[i]), i, above, first)
    return best


def _best_cut(s0: FloatArray, s1: FloatArray, bound: BoundFn) -> tuple[float, float, bool, int]:
    """Return (score, threshold, above, first) of the best cut of one statistic."""
    a, b = np.sort(s0), np.sort(s1)
    pooled = np.concatenate([a, b])
    probs = np.concatenate([np.geomspace(1e-5, 0.5, _THRESHOLDS // 2),
                            1.0 - np.geomspace(1e-5, 0.5, _THRESHOLDS // 2)])
    cuts = np.unique(np.concatenate([np.quantile(pooled, np.clip(probs, 0, 1)),
                                     np.unique(pooled)[:_THRESHOLDS]]))
    above0 = a.size - np.searchsorted(a, cuts, side="right")
    above1 = b.size - np.searchsorted(b, cuts, side="right")
    score, i, above, first = _best_reading(above0, a.size, above1, b.size, bound)
    return score, float(cuts[i]), above, first


def _best_token(x0: FloatArray, x1: FloatArray, columns: list[int], bound: BoundFn,
                labels: tuple[str, ...]) -> tuple[float, Event] | None:
    """Return the best categorical event over the token columns: token seen, or not seen."""
    if not columns:
        return None
    k0 = (np.nan_to_num(x0[:, columns]) > 0.5).sum(axis=0)
    k1 = (np.nan_to_num(x1[:, columns]) > 0.5).sum(axis=0)
    score, i, above, first = _best_reading(k0, x0.shape[0], k1, x1.shape[0], bound)
    return score, Event("token", (columns[i],), 0.5, above, first, labels=labels)


def select_event(x0: Any, x1: Any, *, bound: BoundFn, max_columns: int = 8,
                 labels: Sequence[str] = (), categorical: Iterable[int] = ()) -> Event:
    """Return the event whose bound is largest on these (selection) draws.

    Parameters
    ----------
    x0, x1 : array_like, shape (n, ...)
        Draws of the output under each input (one row per draw).
    bound : callable
        ``bound(k1, n1, k0, n0)``, vectorised over the counts: the epsilon (or
        rho) bound an event's counts give (e.g.
        :func:`~spatialdp.audit.bounds.epsilon_lower_bound` at the audit's alpha).
    max_columns : int
        How many of the most-moved output coordinates the statistics read
        (near-copies of one already read are skipped).
    labels : sequence of str
        Names of the flattened output coordinates, for the event's description.
    categorical : iterable of int
        Columns that are 0/1 indicators of a non-numeric output token: they get
        categorical events (token seen / not seen), never numeric statistics.

    Returns
    -------
    Event
        Statistic ``"none"`` (bound 0) when no output coordinate moves at all.
    """
    a, b = as_draws(x0), as_draws(x1)
    names = tuple(str(v) for v in labels)
    tokens = sorted({int(c) for c in categorical})
    if any(not 0 <= c < a.shape[1] for c in tokens):
        raise fail("categorical", tokens, f"names columns outside the {a.shape[1]} output "
                   "columns", "pass the positions of the token indicator columns")
    best = _best_token(a, b, tokens, bound, names)
    for event in _candidates(a, b, max_columns, names, tokens):
        score, cut, above, first = _best_cut(event.values(a), event.values(b), bound)
        if best is None or score > best[0]:
            best = (score, Event(event.statistic, event.columns, cut, above, first, event.m0,
                                 event.m1, event.spread, names))
    if best is None:
        return Event("none", (0,), 0.0, True, 1, labels=names)
    return best[1]

