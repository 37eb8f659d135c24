"""The empirical privacy auditor: a statistical lower bound on the loss a release achieves.

For each pair of neighbouring inputs the auditor draws the release's output
many times under both, picks an output event on a first part of the draws
(:func:`~spatialdp.audit.events.select_event`), counts the event on the
remaining, fresh draws, and bounds the ratio of its two probabilities with
exact one-sided Clopper-Pearson bounds (:mod:`spatialdp.audit.bounds`). The
result is a lower bound on the privacy loss that holds with probability at
least ``confidence`` (Bonferroni over the pairs and the two proportions): if it
exceeds the claimed loss, the release is not as private as it says.

Two paths, and the result says which ran:

- ``"simulation"``: the release is run once per batch of draws with a
  :class:`~spatialdp.audit.tap.NoiseTap` target, which draws every noised
  vector ``n`` times in one vectorised, seeded call; the audit reads the noisy
  values before the release's post-processing. Fast (10^5-10^6 draws in
  seconds); it audits the values, sensitivities, scales and epsilon splits the
  release uses, not the OS-entropy samplers.
- ``"release"``: the real release (OS entropy, ``Unaccounted`` target) is called
  once per draw and its published output is audited. Slow (one call per draw);
  it catches what only the real path can get wrong, such as seeded noise.

A passing audit is evidence, not proof: it bounds the loss from below for the
pairs and events tried. Choose worst-case neighbours (:mod:`spatialdp.audit.neighbours`).

Examples
--------
>>> from spatialdp.privacy import LaplaceMechanism
>>> def release(x, target):
...     return target.add_noise(LaplaceMechanism(1.0), np.asarray(x, dtype=float))
>>> result = audit(release, ([0.0], [1.0]), epsilon=1.0, draws=100_000, rng=0)
>>> result.passed, 0.8 < result.measured <= 1.0
(True, True)
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
from spatialdp.audit.tap import tapped
from spatialdp.privacy.target import Unaccounted

__all__ = ["AuditResult", "audit", "audit_sampler"]

Sampler = Callable[[Any, int, np.random.Generator], Any]

DEFAULT_DRAWS = {"simulation": 200_000, "release": 2_000}
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
    """Claimed privacy loss vs the empirical lower bound of one audit.

    Attributes
    ----------
    name : str
    path : str
        ``"simulation"`` (tapped, seeded, vectorised), ``"simulation (sampler)"``
        (a caller's vectorised sampler) or ``"release"`` (the real release, OS entropy).
    loss : {"epsilon", "rho"}
        The unit of ``claimed`` and ``measured`` (pure/approximate DP epsilon, or zCDP rho).
    claimed, measured : float
        The claim and the lower bound (``measured`` is below the true loss with
        probability at least ``confidence``).
    delta : float
        The claim's delta (epsilon audits).
    confidence : float
    draws, selection_draws : int
        Draws per input of each pair: counted (fresh) and used to choose the event.
    pairs : list of PairAudit
        One per neighbouring pair; ``worst`` is the one that gave ``measured``.
    """

    name: str
    path: str
    loss: str
    claimed: float
    measured: float
    delta: float
    confidence: float
    draws: int
    selection_draws: int
    pairs: list[PairAudit] = field(repr=False)

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
        return {"name": self.name, "path": self.path, "loss": self.loss,
                "claimed": self.claimed, "measured": self.measured, "delta": self.delta,
                "confidence": self.confidence, "draws": self.draws,
                "selection_draws": self.selection_draws, "pairs": len(self.pairs),
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
        unit = self.loss + (f" (delta {self.delta:g})" if self.delta else "")
        return (f"privacy audit '{self.name}': {verdict}\n"
                f"  claimed {unit} {self.claimed:.4g}; measured lower bound {self.measured:.4g} "
                f"at confidence {self.confidence:.10g}\n"
                f"  path: {self.path}; {self.draws:,} counted + {self.selection_draws:,} "
                f"selection draws per input, {len(self.pairs)} neighbouring pair(s)\n"
                f"  event (pair {w.index}): {w.event.describe()}; counts {w.k_first:,}/"
                f"{w.n_first:,} vs {w.k_second:,}/{w.n_second:,}")

    def _repr_html_(self) -> str:
        colour = "#1a7f37" if self.passed else "#cf222e"
        verdict = "PASS" if self.passed else "VIOLATION"
        rows = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                       f"<td style='text-align:left'>{html.escape(str(v))}</td></tr>"
                       for k, v in [("claimed " + self.loss, f"{self.claimed:.4g}"),
                                    ("measured lower bound", f"{self.measured:.4g}"),
                                    ("confidence", f"{self.confidence:.10g}"),
                                    ("path", self.path),
                                    ("draws per input", f"{self.draws:,} (+{self.selection_draws:,}"
                                                        " to pick the event)"),
                                    ("pairs", len(self.pairs)), ("event", self.event)])
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


def _bound_fn(loss: str, delta: float, confidence: float) -> Callable[..., Any]:
    if loss == "rho":
        return lambda k1, n1, k0, n0: rho_lower_bound(k1, n1, k0, n0, confidence)
    return lambda k1, n1, k0, n0: epsilon_lower_bound(k1, n1, k0, n0, confidence, delta)


def _draw(sample: Callable[[Any, int], NDArray[np.float64]], dataset: Any, n: int,
          chunk: int) -> NDArray[np.float64]:
    parts = [as_draws(sample(dataset, min(chunk, n - start)))
             for start in range(0, n, chunk)]
    return np.concatenate(parts, axis=0)


def _count(sample: Callable[[Any, int], NDArray[np.float64]], dataset: Any, n: int,
           chunk: int, event: Event, width: int) -> int:
    hits = 0
    for start in range(0, n, chunk):
        x = as_draws(sample(dataset, min(chunk, n - start)))
        if x.shape[1] != width:
            raise fail("release output", x.shape, f"has {x.shape[1]} values per draw, not "
                       f"{width}", "the output of a pair's inputs must have one fixed shape")
        hits += int(event.contains(x).sum())
    return hits


def _run(sample: Callable[[Any, int], NDArray[np.float64]], pairs: Any, *, path: str,
         name: str, epsilon: Any, rho: Any, delta: Any, draws: int, confidence: float,
         selection: float, labels: Sequence[str], chunk: int) -> AuditResult:
    loss, claimed, d = _claim(epsilon, rho, delta)
    pair_list = _pairs(pairs)
    level = check_number(confidence, "confidence", low=0.5, high=1.0, high_open=True,
                         fix="pass a level such as 1 - 1e-6")
    share = check_number(selection, "selection", low=0.05, high=0.95,
                         fix="pass the share of draws used to choose the event, e.g. 0.3")
    n = check_count(draws, "draws", low=100)
    n_sel = max(50, round(n * share))
    n_est = n - n_sel
    each = 1.0 - (1.0 - level) / len(pair_list)  # Bonferroni over the pairs
    bound = _bound_fn(loss, d, each)
    half = 1.0 - (1.0 - each) / 2.0
    results = []
    for i, (d0, d1) in enumerate(pair_list):
        x0, x1 = _draw(sample, d0, n_sel, chunk), _draw(sample, d1, n_sel, chunk)
        if x0.shape[1] != x1.shape[1]:
            raise fail("release output", (x0.shape[1], x1.shape[1]), "differs in size between "
                       f"the inputs of pair {i}", "neighbours must give outputs of one shape")
        event = select_event(x0, x1, bound=bound, labels=labels)
        if event.statistic == "none":
            results.append(PairAudit(i, event, 0, n_est, 0, n_est, 0.0, 1.0, 0.0))
            continue
        k = [_count(sample, dd, n_est, chunk, event, x0.shape[1]) for dd in (d0, d1)]
        k_first, k_second = (k[1], k[0]) if event.first == 1 else (k[0], k[1])
        p_lo, _ = clopper_pearson(k_first, n_est, half)
        _, p_hi = clopper_pearson(k_second, n_est, half)
        measured = float(bound(k_first, n_est, k_second, n_est))
        results.append(PairAudit(i, event, k_first, n_est, k_second, n_est, float(p_lo),
                                 float(p_hi), measured))
    return AuditResult(name=name, path=path, loss=loss, claimed=claimed,
                       measured=max(p.measured for p in results), delta=d, confidence=level,
                       draws=n_est, selection_draws=n_sel, pairs=results)


def audit(release: Callable[[Any, Any], Any], pairs: Any, *, epsilon: float | None = None,
          rho: float | None = None, delta: float = 0.0, path: str = "simulation",
          draws: int | None = None, confidence: float = 1 - 1e-6, selection: float = 0.3,
          rng: RandomLike = None, name: str = "release", labels: Sequence[str] = (),
          rewrite: Callable[[Any, int], Any] | None = None,
          chunk: int = _CHUNK) -> AuditResult:
    """Audit a spatialdp release on neighbouring inputs: claimed vs measured privacy loss.

    Parameters
    ----------
    release : callable
        ``release(dataset, target)`` runs one release of ``dataset`` with
        ``target=target`` and returns its published output as an array (e.g.
        ``report["loss"]["value"].to_numpy()``). The simulation path ignores the
        return value and audits the noise the release draws through ``target``.
    pairs : tuple or iterable of tuples
        One ``(dataset, neighbour)`` 2-tuple, or a list/generator of them (build
        them with :mod:`spatialdp.audit.neighbours`). The bound is the largest
        over the pairs; the confidence is split over them.
    epsilon, rho : float
        The claim: exactly one. ``epsilon`` (with ``delta``) for pure or
        approximate DP; ``rho`` for zCDP, audited as ``D_a <= rho a`` on events.
    delta : float, default 0
    path : {"simulation", "release"}
        See the module docstring.
    draws : int, optional
        Draws per input of each pair (default 200,000 simulated or 2,000 released);
        ``selection`` of them choose the event, the rest are counted.
    confidence : float, default 1 - 1e-6
        The level of the lower bound.
    rng : numpy Generator, int or None
        Seed of the simulation path (the release path uses OS entropy, as releases do).
    name : str
    labels : sequence of str
        Names of the output coordinates, for the event's description.
    rewrite : callable, optional
        Simulation path: ``rewrite(mechanism, i)`` replaces the ``i``-th noise
        draw's mechanism (to build broken variants in tests).
    chunk : int
        Draws per batch (bounds memory: ``chunk x output size`` floats).

    Returns
    -------
    AuditResult

    Raises
    ------
    InvalidInput
        A bad claim, path, pair or level; outputs whose size differs between inputs.
    """
    mode = path if path in DEFAULT_DRAWS else None
    if mode is None:
        raise fail("path", path, "is not an audit path", "use 'simulation' or 'release'")
    n = DEFAULT_DRAWS[mode] if draws is None else draws
    size = check_count(chunk, "chunk", low=1)
    if mode == "simulation":
        gen = as_generator(rng)
        sampler = tapped(release, rewrite=rewrite)

        def sample(dataset: Any, k: int) -> NDArray[np.float64]:
            return np.asarray(sampler(dataset, k, gen), dtype=np.float64)
    else:
        if rewrite is not None:
            raise fail("rewrite", rewrite, "applies to the simulation path only",
                       "drop rewrite=, or use path='simulation'")
        target = Unaccounted(f"privacy audit '{name}'")

        def sample(dataset: Any, k: int) -> NDArray[np.float64]:
            rows = [np.asarray(release(dataset, target), dtype=np.float64).ravel()
                    for _ in range(k)]
            return np.stack(rows)
    return _run(sample, pairs, path=mode, name=name, epsilon=epsilon, rho=rho, delta=delta,
                draws=n, confidence=confidence, selection=selection, labels=labels,
                chunk=size)


def audit_sampler(sampler: Sampler, pairs: Any, *, epsilon: float | None = None,
                  rho: float | None = None, delta: float = 0.0, draws: int = 200_000,
                  confidence: float = 1 - 1e-6, selection: float = 0.3,
                  rng: RandomLike = None, name: str = "release", labels: Sequence[str] = (),
                  chunk: int = _CHUNK, path: str = "simulation (sampler)") -> AuditResult:
    """Audit a vectorised sampler of a release's output (simulation path, your own sampler).

    ``sampler(dataset, n, rng)`` returns ``n`` independent outputs of the release
    of ``dataset`` as an array with one row per draw; ``path`` says in the
    result what it ran (e.g. ``"release (rows)"`` for real releases drawn as
    rows). Use it for releases that are vectorised over independent releases
    already (one row per client, as in
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

    def sample(dataset: Any, k: int) -> NDArray[np.float64]:
        return np.asarray(sampler(dataset, k, gen), dtype=np.float64)

    return _run(sample, pairs, path=path, name=name, epsilon=epsilon,
                rho=rho, delta=delta, draws=draws, confidence=confidence, selection=selection,
                labels=labels, chunk=size)

