"""The empirical privacy auditor: a statistical lower bound on the epsilon a release achieves.

For each pair of neighbouring inputs the auditor draws the release's output
many times under both, picks an output event on a first part of the draws
(:func:`~spatialdp.audit.events.select_event`), counts the event on the
remaining, fresh draws, and bounds the ratio of its two probabilities with
exact one-sided Clopper-Pearson bounds (:mod:`spatialdp.audit.bounds`). The
result is a lower bound on the release's epsilon (or zCDP rho) that fails with
probability at most ``alpha`` (Bonferroni over the pairs and the two
proportions): if it exceeds the claim, the release is not as private as it says.

Three paths, and the result says which ran:

- ``"published"`` (the default): the release is called once per draw with a
  seeded :class:`~spatialdp.privacy.target.Simulation` target and *everything
  it publishes* is audited (:func:`~spatialdp.audit.published.capture`): every
  column of its result object, numeric or not (values, error bars, cohorts,
  reliability classes, suppression flags, labels), its metadata and summary
  text, the warnings and log records emitted during the call, and whatever
  files the release function reads back (:func:`~spatialdp.audit.published.read_files`).
  A number is audited with numeric events, anything else with categorical ones
  (a token seen under one input and not the other). This is the path that
  catches a value published without its noise, an exact count in a column or
  a warning whose text depends on private data. One release per draw: about
  1 ms for a small regional report, so thousands of draws, not millions.
- ``"tap"``: the release is run once per batch of draws with a
  :class:`~spatialdp.audit.tap.NoiseTap` target, which draws every noised
  vector ``n`` times in one vectorised, seeded call; the audit reads the noisy
  values *at the tap*, before the release's post-processing. Fast (10^5-10^6
  draws in seconds) and sharp for the noise itself (scales, sensitivities,
  epsilon splits, which values get noise), but blind to anything done after
  the noise is drawn: an extra check, not the audit of what users receive.
- ``"release"``: as ``"published"``, but with the real noise (OS entropy,
  ``Unaccounted`` target). Slow; it catches what only the real path can get
  wrong, such as noise drawn from a fixed seed.

A passing audit is evidence, not proof: it bounds epsilon (or rho) from below
for the pairs and events tried. Choose worst-case neighbours (:mod:`spatialdp.audit.neighbours`).

Examples
--------
>>> from spatialdp.privacy import LaplaceMechanism
>>> def release(x, target):
...     return target.add_noise(LaplaceMechanism(1.0), np.asarray(x, dtype=float))
>>> result = audit(release, ([0.0], [1.0]), epsilon=1.0, draws=100_000, rng=0, path="tap")
>>> result.passed, 0.8 < result.measured <= 1.0
(True, True)
>>> audit(release, ([0.0], [1.0]), epsilon=1.0, draws=4_000, rng=0).path
'published'
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp._random import RandomLike, as_generator
from spatialdp._validation import check_count, check_number, check_probability, fail
from spatialdp.audit.bounds import clopper_pearson, epsilon_lower_bound, rho_lower_bound
from spatialdp.audit.events import Event, as_draws, select_event
from spatialdp.audit.published import Publication, PublicationSchema, capture
from spatialdp.audit.tap import NoiseTap, tapped
from spatialdp.privacy.budget import check_neighbours
from spatialdp.privacy.target import Unaccounted

__all__ = ["AuditResult", "audit", "audit_sampler"]

Sampler = Callable[[Any, int, np.random.Generator], Any]
#: What a sampler returns for ``k`` draws: rows of numbers, or one Publication per draw.
Draws = NDArray[np.float64] | list[Publication]

#: The audit paths and their default draws per input of each pair.
DEFAULT_DRAWS = {"published": 4_000, "tap": 200_000, "release": 2_000}
_CHUNK = 50_000


@dataclass(frozen=True)
class PairAudit:
    """The audit of one neighbouring pair: the event and its counts on the fresh draws."""

    index: int
    event: Event
    k_first: int
    n_first: int
    k_second: int
    n_second: int
    p_first_lower: float
    p_second_upper: float
    measured: float


@dataclass(frozen=True)
class AuditResult:
    """Claimed epsilon (or rho) vs the empirical lower bound of one audit.

    Attributes
    ----------
    name : str
    path : str
        ``"published"`` (every published output, one seeded release per draw),
        ``"tap"`` (the noise at the tap, seeded, vectorised), ``"release"``
        (every published output of the real release, OS entropy), or what a
        caller's sampler says (``"simulation (sampler)"`` by default).
    unit : {"epsilon", "rho"}
        The unit of ``claimed`` and ``measured`` (pure/approximate DP epsilon, or
        zCDP rho), as a ledger's ``unit``.
    claimed, measured : float
        The claim and the lower bound (``measured`` exceeds the true epsilon or
        rho with probability at most ``alpha``).
    delta : float
        The claim's delta (epsilon audits).
    alpha : float
        The significance level of ``measured`` (split over the pairs).
    draws, selection_draws : int
        Draws per input of each pair: counted (fresh) and used to choose the event.
    pairs : list of PairAudit
        One per neighbouring pair; ``worst`` is the one that gave ``measured``.
    neighbours : str or None
        The neighbouring relation the pairs were built under (``"replace"`` or
        ``"add_remove"``), when the caller stated it.
    """

    name: str
    path: str
    unit: str
    claimed: float
    measured: float
    delta: float
    alpha: float
    draws: int
    selection_draws: int
    pairs: list[PairAudit] = field(repr=False)
    neighbours: str | None = None

    @property
    def passed(self) -> bool:
        """True when the lower bound does not exceed the claim."""
        return self.measured <= self.claimed

    @property
    def worst(self) -> PairAudit:
        """The pair whose event gave the largest bound."""
        return max(self.pairs, key=lambda p: p.measured)

    @property
    def event(self) -> str:
        """The event that gave ``measured``, in words."""
        return self.worst.event.describe()

    def to_dict(self) -> dict[str, Any]:
        """Return the result as plain values (JSON-ready)."""
        w = self.worst
        return {"name": self.name, "path": self.path, "unit": self.unit,
                "claimed": self.claimed, "measured": self.measured, "delta": self.delta,
                "alpha": self.alpha, "draws": self.draws,
                "selection_draws": self.selection_draws, "pairs": len(self.pairs),
                "neighbours": self.neighbours,
                "passed": self.passed, "event": self.event, "worst_pair": w.index,
                "counts": [w.k_first, w.n_first, w.k_second, w.n_second]}

    def table(self) -> pd.DataFrame:
        """Return one row per pair: its event, counts and bound."""
        return pd.DataFrame([{"pair": p.index, "event": p.event.describe(),
                              "k_first": p.k_first, "n_first": p.n_first,
                              "k_second": p.k_second, "n_second": p.n_second,
                              "p_first_lower": p.p_first_lower,
                              "p_second_upper": p.p_second_upper, "measured": p.measured}
                             for p in self.pairs]).set_index("pair")

    def summary(self) -> str:
        """Return a few lines: verdict, claim vs bound, level, path, the event."""
        w = self.worst
        verdict = "PASS" if self.passed else "VIOLATION"
        unit = self.unit + (f" (delta {self.delta:g})" if self.delta else "")
        return (f"privacy audit '{self.name}': {verdict}\n"
                f"  claimed {unit} {self.claimed:.4g}; measured lower bound {self.measured:.4g} "
                f"at alpha {self.alpha:g}\n"
                f"  path: {self.path}; {self.draws:,} counted + {self.selection_draws:,} "
                f"selection draws per input, {len(self.pairs)} neighbouring pair(s)"
                f"{'' if self.neighbours is None else f' ({self.neighbours})'}\n"
                f"  event (pair {w.index}): {w.event.describe()}; counts {w.k_first:,}/"
                f"{w.n_first:,} vs {w.k_second:,}/{w.n_second:,}")

    def _repr_html_(self) -> str:
        colour = "#1a7f37" if self.passed else "#cf222e"
        verdict = "PASS" if self.passed else "VIOLATION"
        rows = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                       f"<td style='text-align:left'>{html.escape(str(v))}</td></tr>"
                       for k, v in [("claimed " + self.unit, f"{self.claimed:.4g}"),
                                    ("measured lower bound", f"{self.measured:.4g}"),
                                    ("alpha", f"{self.alpha:g}"),
                                    ("path", self.path),
                                    ("draws per input", f"{self.draws:,} (+{self.selection_draws:,}"
                                                        " to pick the event)"),
                                    ("pairs", len(self.pairs)),
                                    ("neighbours", self.neighbours or "not stated"),
                                    ("event", self.event)])
        return (f"<div><b>privacy audit {html.escape(self.name)}: "
                f"<span style='color:{colour}'>{verdict}</span></b><table>{rows}</table></div>")


def _pairs(pairs: Any) -> list[tuple[Any, Any]]:
    if isinstance(pairs, tuple) and len(pairs) == 2:
        return [pairs]
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Iterable):
        raise fail("pairs", pairs, "is not a pair of inputs or an iterable of pairs",
                   "pass (dataset, neighbour) or a list/generator of such tuples")
    out = list(pairs)
    if not out or not all(isinstance(p, tuple) and len(p) == 2 for p in out):
        raise fail("pairs", pairs, "holds something other than (dataset, neighbour) tuples",
                   "give at least one pair, each a 2-tuple")
    return out


def _claim(epsilon: Any, rho: Any, delta: Any) -> tuple[str, float, float]:
    if (epsilon is None) == (rho is None):
        raise fail("epsilon/rho", (epsilon, rho), "must give exactly one claim",
                   "pass epsilon= (pure or approximate DP) or rho= (zCDP)")
    d = check_probability(delta, "delta")
    if rho is not None:
        if d:
            raise fail("delta", delta, "has no meaning for a zCDP claim", "drop delta")
        return "rho", check_number(rho, "rho", low=0.0), 0.0
    return "epsilon", check_number(epsilon, "epsilon", low=0.0), d


def _bound_fn(unit: str, delta: float, alpha: float) -> Callable[..., Any]:
    if unit == "rho":
        return lambda k1, n1, k0, n0: rho_lower_bound(k1, n1, k0, n0, alpha)
    return lambda k1, n1, k0, n0: epsilon_lower_bound(k1, n1, k0, n0, alpha, delta)


def _is_publications(part: Any) -> bool:
    return isinstance(part, list) and all(isinstance(p, Publication) for p in part)


def _draw(sample: Callable[[Any, int], Any], dataset: Any, n: int, chunk: int) -> Draws:
    parts = [sample(dataset, min(chunk, n - start)) for start in range(0, n, chunk)]
    kinds = {_is_publications(part) for part in parts}
    if kinds == {True}:
        return [pub for part in parts for pub in part]
    if kinds == {True, False}:
        raise fail("sampler output", "publications and arrays", "are mixed",
                   "return one kind of output for every draw")
    return np.concatenate([as_draws(part) for part in parts], axis=0)


@dataclass(frozen=True)
class _View:
    """How a pair's draws become the fixed-width rows events read (chosen on the selection)."""

    width: int
    labels: tuple[str, ...]
    schema: PublicationSchema | None = None

    @classmethod
    def of(cls, x0: Draws, x1: Draws, labels: Sequence[str], index: int) -> _View:
        if isinstance(x0, list) and isinstance(x1, list):
            schema = PublicationSchema(x0, x1)
            return cls(len(schema.labels), schema.labels, schema)
        if isinstance(x0, list) or isinstance(x1, list):
            raise fail("sampler output", type(x0).__name__, "mixes publications and arrays",
                       "return one kind of output for every input")
        if x0.shape[1] != x1.shape[1]:
            raise fail("release output", (x0.shape[1], x1.shape[1]), "differs in size between "
                       f"the inputs of pair {index}", "neighbours must give outputs of one shape")
        return cls(x0.shape[1], tuple(str(v) for v in labels))

    @property
    def categorical(self) -> Sequence[int]:
        return () if self.schema is None else self.schema.categorical

    def rows(self, draws: Draws) -> NDArray[np.float64]:
        if self.schema is not None:
            if not isinstance(draws, list):
                raise fail("sampler output", type(draws).__name__, "is an array where the "
                           "selection draws were publications", "return one kind of output")
            return self.schema.matrix(draws)
        if isinstance(draws, list):
            raise fail("sampler output", "publications", "where the selection draws were "
                       "arrays", "return one kind of output")
        x = as_draws(draws)
        if x.shape[1] != self.width:
            raise fail("release output", x.shape, f"has {x.shape[1]} values per draw, not "
                       f"{self.width}", "the output of a pair's inputs must have one fixed shape")
        return x


def _count(sample: Callable[[Any, int], Any], dataset: Any, n: int, chunk: int,
           event: Event, view: _View) -> int:
    hits = 0
    for start in range(0, n, chunk):
        hits += int(event.contains(view.rows(sample(dataset, min(chunk, n - start)))).sum())
    return hits


def _run(sample: Callable[[Any, int], Any], pairs: Any, *, path: str, name: str,
         epsilon: Any, rho: Any, delta: Any, draws: int, alpha: float, selection: float,
         labels: Sequence[str], chunk: int, neighbours: Any = None) -> AuditResult:
    unit, claimed, d = _claim(epsilon, rho, delta)
    pair_list = _pairs(pairs)
    relation = None if neighbours is None else check_neighbours(neighbours)
    level = check_number(alpha, "alpha", low=0.0, high=0.5, low_open=True,
                         fix="pass a level such as 1e-6")
    share = check_number(selection, "selection", low=0.05, high=0.95,
                         fix="pass the share of draws used to choose the event, e.g. 0.3")
    n = check_count(draws, "draws", low=100)
    n_sel = max(50, round(n * share))
    n_est = n - n_sel
    each = level / len(pair_list)  # Bonferroni over the pairs
    bound = _bound_fn(unit, d, each)
    half = each / 2.0  # and over the two proportions
    results = []
    for i, (d0, d1) in enumerate(pair_list):
        s0, s1 = _draw(sample, d0, n_sel, chunk), _draw(sample, d1, n_sel, chunk)
        view = _View.of(s0, s1, labels, i)
        event = select_event(view.rows(s0), view.rows(s1), bound=bound, labels=view.labels,
                             categorical=view.categorical)
        if event.statistic == "none":
            results.append(PairAudit(i, event, 0, n_est, 0, n_est, 0.0, 1.0, 0.0))
            continue
        k = [_count(sample, dd, n_est, chunk, event, view) for dd in (d0, d1)]
        k_first, k_second = (k[1], k[0]) if event.first == 1 else (k[0], k[1])
        p_lo, _ = clopper_pearson(k_first, n_est, half)
        _, p_hi = clopper_pearson(k_second, n_est, half)
        measured = float(bound(k_first, n_est, k_second, n_est))
        results.append(PairAudit(i, event, k_first, n_est, k_second, n_est, float(p_lo),
                                 float(p_hi), measured))
    return AuditResult(name=name, path=path, unit=unit, claimed=claimed,
                       measured=max(p.measured for p in results), delta=d, alpha=level,
                       draws=n_est, selection_draws=n_sel, pairs=results, neighbours=relation)


def audit(release: Callable[[Any, Any], Any], pairs: Any, *, epsilon: float | None = None,
          rho: float | None = None, delta: float = 0.0, path: str = "published",
          draws: int | None = None, alpha: float = 1e-6, selection: float = 0.3,
          rng: RandomLike = None, name: str = "release", labels: Sequence[str] = (),
          rewrite: Callable[[Any, int], Any] | None = None, neighbours: str | None = None,
          chunk: int | None = None) -> AuditResult:
    """Audit a spatialdp release on neighbouring inputs: claimed vs measured epsilon (or rho).

    Parameters
    ----------
    release : callable
        ``release(dataset, target)`` runs one release of ``dataset`` with
        ``target=target`` and returns what it publishes: the result object
        itself (a :class:`~spatialdp.federated.RegionalReport`, a grid ...),
        anything else the user receives (a tuple of several), and, for file
        writers, :func:`~spatialdp.audit.published.read_files` of the written
        files. The tap path ignores the return value and audits the noise the
        release draws through ``target``.
    pairs : tuple or iterable of tuples
        One ``(dataset, neighbour)`` 2-tuple, or a list/generator of them (build
        them with :mod:`spatialdp.audit.neighbours`). The bound is the largest
        over the pairs; ``alpha`` is split over them.
    epsilon, rho : float
        The claim: exactly one. ``epsilon`` (with ``delta``) for pure or
        approximate DP; ``rho`` for zCDP, audited as ``D_a <= rho a`` on events.
    delta : float, default 0
    path : {"published", "tap", "release"}
        What is audited (see the module docstring): every published output of a
        seeded release per draw (default), the noise at the tap, or every
        published output of the real release (OS entropy).
    draws : int, optional
        Draws per input of each pair (default 4,000 published, 200,000 at the
        tap, 2,000 released); ``selection`` of them choose the event, the rest
        are counted.
    alpha : float, default 1e-6
        The significance level of the lower bound, in ``(0, 0.5]``: it exceeds
        the true epsilon (or rho) with probability at most ``alpha``.
    rng : numpy Generator, int or None
        Seed of the published and tap paths (the release path uses OS entropy,
        as releases do).
    name : str
    labels : sequence of str
        Tap path: names of the noised values, for the event's description
        (published outputs carry their own labels).
    rewrite : callable, optional
        Published and tap paths: ``rewrite(mechanism, i)`` replaces the ``i``-th
        noise draw's mechanism (to build broken variants in tests).
    neighbours : {"replace", "add_remove"}, optional
        The relation the pairs were built under, recorded in the result.
    chunk : int, optional
        Draws per batch (bounds memory: ``chunk x output size`` floats; default
        50,000 at the tap, 500 otherwise).

    Returns
    -------
    AuditResult

    Raises
    ------
    InvalidInput
        A bad claim, path, pair or alpha; outputs whose size differs between
        inputs (tap path).
    """
    if path == "simulation":
        raise fail("path", path, "is the old name of the noise-tap path, which audits the "
                   "noise and not what users receive", "use path='published' (the default) "
                   "or path='tap'")
    if path not in DEFAULT_DRAWS:
        raise fail("path", path, "is not an audit path", f"use one of {list(DEFAULT_DRAWS)}")
    n = DEFAULT_DRAWS[path] if draws is None else draws
    size = check_count((_CHUNK if path == "tap" else 500) if chunk is None else chunk, "chunk",
                       low=1)
    if path == "release" and rewrite is not None:
        raise fail("rewrite", rewrite, "applies to the published and tap paths only (seeded "
                   "noise)", "drop rewrite=, or use path='published' or 'tap'")
    gen = as_generator(rng)
    sample: Callable[[Any, int], Any]
    if path == "tap":
        sampler = tapped(release, rewrite=rewrite)

        def sample(dataset: Any, k: int) -> Draws:
            return np.asarray(sampler(dataset, k, gen), dtype=np.float64)
    elif path == "published":
        def sample(dataset: Any, k: int) -> Draws:
            return [capture(release, dataset, NoiseTap(1, gen, rewrite=rewrite))
                    for _ in range(k)]
    else:
        target = Unaccounted(f"privacy audit '{name}'")

        def sample(dataset: Any, k: int) -> Draws:
            return [capture(release, dataset, target) for _ in range(k)]
    return _run(sample, pairs, path=path, name=name, epsilon=epsilon, rho=rho, delta=delta,
                draws=n, alpha=alpha, selection=selection, labels=labels,
                chunk=size, neighbours=neighbours)


def audit_sampler(sampler: Sampler, pairs: Any, *, epsilon: float | None = None,
                  rho: float | None = None, delta: float = 0.0, draws: int = 200_000,
                  alpha: float = 1e-6, selection: float = 0.3,
                  rng: RandomLike = None, name: str = "release", labels: Sequence[str] = (),
                  chunk: int = _CHUNK, path: str = "simulation (sampler)",
                  neighbours: str | None = None) -> AuditResult:
    """Audit a vectorised sampler of a release's output (your own sampler).

    ``sampler(dataset, n, rng)`` returns ``n`` independent outputs of the
    release of ``dataset``: an array with one row per draw, or a list of ``n``
    :class:`~spatialdp.audit.published.Publication` (build them with
    :func:`~spatialdp.audit.published.publication` from each draw's published
    objects). ``path`` says in the result what it ran (e.g. ``"release
    (rows)"`` for real releases drawn as rows). Use it for releases that are
    vectorised over independent releases already (one row per client, as in
    :func:`spatialdp.regression.transform_clients`: give it ``n`` copies of one
    client) or for your own mechanisms. Other parameters as in :func:`audit`.

    Examples
    --------
    >>> def sampler(x, n, rng):
    ...     return x + rng.laplace(0.0, 2.0, size=(n, 1))
    >>> audit_sampler(sampler, (0.0, 1.0), epsilon=0.5, draws=50_000, rng=1).passed
    True
    """
    gen = as_generator(rng)
    size = check_count(chunk, "chunk", low=1)

    def sample(dataset: Any, k: int) -> Draws:
        out = sampler(dataset, k, gen)
        return out if _is_publications(out) else np.asarray(out, dtype=np.float64)

    return _run(sample, pairs, path=path, name=name, epsilon=epsilon,
                rho=rho, delta=delta, draws=draws, alpha=alpha, selection=selection,
                labels=labels, chunk=size, neighbours=neighbours)
