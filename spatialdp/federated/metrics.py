"""The metric registry the server and the devices agree on.

A :class:`MetricSpec` bounds one scalar metric (its clip range is its
sensitivity); a :class:`HistogramSpec` fixes the bucket edges of an error
histogram and the L1 mass one client may add. Specs are versioned: a changed
bound or edge is a new version, and a new version starts a new comparison
baseline.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from spatialdp._validation import (
    MAX_EPSILON,
    check_alpha,
    check_count,
    check_epsilon,
    check_finite_array,
    check_instance,
    check_number,
    check_real,
    fail,
    short_repr,
)
from spatialdp.exceptions import InvalidInput, InvalidSpec
from spatialdp.federated.release import predicted_error_bar
from spatialdp.privacy.budget import NEIGHBOURS, Neighbours, check_neighbours

__all__ = [
    "HistogramSpec",
    "MetricRegistry",
    "MetricSpec",
    "Spec",
    "calibrate_clip",
    "check_specs",
    "clip_tradeoff",
    "min_cohort_for",
    "resolve_epsilons",
]


def _finite(name: str, what: str, value: float) -> float:
    try:
        number = check_real(value, what)
    except InvalidInput:
        kind = ("a bool" if isinstance(value, (bool, np.bool_)) else
                "a string" if isinstance(value, (str, bytes)) else f"a {type(value).__name__}")
        raise InvalidSpec(f"{name}: {what}={short_repr(value)} is not a number ({kind}); "
                          "give a finite float") from None
    if not math.isfinite(number):
        raise InvalidSpec(
            f"{name}: {what}={value!r} is not finite; every metric needs finite clip bounds "
            "(derive them with calibrate_clip from a held-out sample)"
        )
    return number


def _check_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise InvalidSpec(f"{what} needs a non-empty name (a string), got {short_repr(name)}")
    if any(c in name for c in ";=") or name != name.strip():
        raise InvalidSpec(
            f"{what} name {name!r} has ';', '=' or surrounding spaces, which the device_specs "
            "tag of every client report cannot carry; pick a plain name such as 'loss'")
    return name


def _check_label(name: str, label: object, unit: object) -> None:
    for what, text in (("label", label), ("unit", unit)):
        if text is not None and (not isinstance(text, str) or not text.strip()):
            raise InvalidSpec(f"{name}: {what}={short_repr(text)} must be a non-empty string "
                              f"or None; give e.g. label='position error', unit='m'")


def _title(name: str, label: str | None, unit: str | None) -> str:
    head = label or name
    return f"{head} ({unit})" if unit else head


def _check_version(name: str, version: object) -> None:
    if not isinstance(version, str) or not version:
        raise InvalidSpec(f"{name}: version={short_repr(version)} must be a non-empty string "
                          "such as '1' or '2'")


#: Largest cohort :func:`min_cohort_for` reports (far beyond any fleet).
MAX_COHORT = 1e15


def _digest(fields: tuple[object, ...]) -> str:
    return hashlib.sha256(repr(fields).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class MetricSpec:
    """One reportable scalar metric and the clip range that bounds it.

    Devices clip every value to ``[clip_low, clip_high]`` before it leaves, so
    one client moves the cohort's sum by at most ``clip_high - clip_low``
    (replacing one client's value by another's): that width is the sensitivity.

    Parameters
    ----------
    name : str
    clip_low, clip_high : float
        Finite, ``clip_low < clip_high``.
    version : str
        Bump it when the bounds change: it starts a new comparison baseline.
    present : str, optional
        Name of a 0/1 column saying whether the client HAS this metric (a client
        with no example near a road has no along/across ratio; a client with no
        prediction in a confidence bucket has no calibration gap). With it the
        metric is published as a ratio estimator, the noised sum of values over the
        noised count of present clients, and absent clients leave its cohort
        instead of entering it as 0 (see :mod:`spatialdp.federated.aggregate`).
    label : str, optional
        What a reader calls the metric (``"mean squared position error"``), used in
        map titles and legend keys instead of ``name``. Presentation only: it is
        not part of the fingerprint, the key or equality, so relabelling never
        invalidates a device report.
    unit : str, optional
        Unit of the values (``"m²"``, ``"%"``); shown after the label.

    Examples
    --------
    >>> spec = MetricSpec("loss", 0.0, 2.5)
    >>> spec.sensitivity
    2.5
    >>> spec.clip([-1.0, 1.0, 9.0]).tolist()
    [0.0, 1.0, 2.5]
    >>> labelled = MetricSpec("loss", 0.0, 2.5, label="squared position error", unit="m²")
    >>> labelled.title, labelled.fingerprint == spec.fingerprint, labelled == spec
    ('squared position error (m²)', True, True)
    """

    name: str
    clip_low: float
    clip_high: float
    version: str = "1"
    present: str | None = None
    label: str | None = field(default=None, compare=False)
    unit: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        _check_name(self.name, "a metric")
        _check_version(self.name, self.version)
        _check_label(self.name, self.label, self.unit)
        if self.present is not None and (not isinstance(self.present, str) or not self.present):
            raise InvalidSpec(f"{self.name}: present={short_repr(self.present)} must name a "
                              "0/1 column")
        low = _finite(self.name, "clip_low", self.clip_low)
        high = _finite(self.name, "clip_high", self.clip_high)
        if not low < high:
            raise InvalidSpec(
                f"{self.name}: clip_low={low} must be below clip_high={high}; "
                "give the range a device clips its value into"
            )
        object.__setattr__(self, "clip_low", low)
        object.__setattr__(self, "clip_high", high)
        for relation in NEIGHBOURS:
            if not math.isfinite(self.sensitivity_under(relation)):
                raise InvalidSpec(
                    f"{self.name}: the clip range [{low:g}, {high:g}] gives an infinite "
                    f"{relation} sensitivity (one client's largest change of the sum), which "
                    "no noise can cover; clip to a range you can state in numbers")

    @property
    def value_range(self) -> tuple[float, float]:
        """The range a client's reported value lies in: ``(clip_low, clip_high)``.

        Examples
        --------
        >>> MetricSpec("loss", 0, 4).value_range
        (0.0, 4.0)
        """
        return (float(self.clip_low), float(self.clip_high))

    @property
    def sensitivity(self) -> float:
        """One client's largest influence on the cohort SUM (replace-one): the clip width.

        With ``present``, an absent client contributes 0, so the width of
        ``[min(clip_low, 0), max(clip_high, 0)]``.
        """
        return self.sensitivity_under("replace")

    def sensitivity_under(self, neighbours: Neighbours) -> float:
        """One client's largest influence on the cohort SUM under a neighbouring relation.

        ``"replace"``: :attr:`sensitivity`. ``"add_remove"``: adding or removing a
        client moves the sum by its own value, at most ``max(|clip_low|, |clip_high|)``
        (the count of clients moves by one).

        Examples
        --------
        >>> spec = MetricSpec("loss", 0.0, 4.0)
        >>> spec.sensitivity_under("replace"), spec.sensitivity_under("add_remove")
        (4.0, 4.0)
        >>> MetricSpec("bias", -1.0, 3.0).sensitivity_under("add_remove")
        3.0
        """
        if check_neighbours(neighbours) == "add_remove":
            return max(abs(self.clip_low), abs(self.clip_high))
        if self.present is None:
            return self.clip_high - self.clip_low
        return max(self.clip_high, 0.0) - min(self.clip_low, 0.0)

    @property
    def fingerprint(self) -> str:
        """Digest of every field: device reports are bound to it, not to the name alone."""
        return _digest((self.name, self.version, self.clip_low, self.clip_high, self.present))

    @property
    def key(self) -> str:
        """``name@version``, recorded with every release of this metric."""
        return f"{self.name}@{self.version}"

    @property
    def title(self) -> str:
        """``label (unit)`` for titles and legend keys (the name when there is no label)."""
        return _title(self.name, self.label, self.unit)

    def describe(self) -> dict[str, object]:
        """Return the spec as plain JSON-ready fields (written beside every output file)."""
        return {"kind": "mean", "name": self.name, "version": self.version, "key": self.key,
                "clip_low": self.clip_low, "clip_high": self.clip_high,
                "present": self.present, "label": self.label, "unit": self.unit,
                "fingerprint": self.fingerprint}

    def clip(self, values: ArrayLike) -> NDArray[np.float64]:
        """Clip values into the spec's range (what the device does)."""
        data = check_finite_array(values, "values", ndim=(0, 1, 2), allow_empty=True)
        return np.clip(data, self.clip_low, self.clip_high)


@dataclass(frozen=True)
class HistogramSpec:
    """Fixed, versioned bucket edges and the L1 mass one client may add.

    ``edges`` are the inner edges: ``k`` edges make ``k + 1`` buckets, the first
    ``(-inf, edges[0]]`` and the last ``(edges[-1], inf)``. A client's
    histogram is scaled down to total mass ``mass_cap`` when it holds more, so a
    device with 10,000 samples cannot outweigh one with a handful. Replacing one
    client by another moves the summed histogram by at most ``2 * mass_cap`` in
    L1 (mass leaves one bucket and lands in another): that is the sensitivity.

    Parameters
    ----------
    name : str
    edges : sequence of float
        Strictly increasing, finite, at least one.
    mass_cap : float
        Largest L1 mass of one client's histogram (default 1: each client adds a
        distribution).
    version : str
        Bump it when the edges change; data-dependent edges would be a release.
    label, unit : str, optional
        What a reader calls the measured quantity and its unit
        (``"position error"``, ``"m"``), for titles, legend keys and bucket
        descriptions. Presentation only, as for :class:`MetricSpec`.

    Examples
    --------
    >>> spec = HistogramSpec("abs_error_m", edges=(0.5, 1, 2, 5, 10, 25))
    >>> spec.n_buckets, spec.sensitivity
    (7, 2.0)
    >>> spec.labels[0], spec.labels[-1]
    ('<=0.5', '>25')
    >>> HistogramSpec("abs_error_m", (0.5, 1), label="position error", unit="m").tail_title
    'share of position error > 1 m'
    """

    name: str
    edges: tuple[float, ...]
    mass_cap: float = 1.0
    version: str = "1"
    label: str | None = field(default=None, compare=False)
    unit: str | None = field(default=None, compare=False)
    _edges: NDArray[np.float64] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_name(self.name, "a histogram")
        _check_version(self.name, self.version)
        _check_label(self.name, self.label, self.unit)
        raw = self.edges
        if isinstance(raw, np.ndarray):
            raw = raw.ravel().tolist() if raw.ndim else [raw[()]]
        if isinstance(raw, (str, bytes, Mapping)) or not isinstance(raw, Iterable):
            raise InvalidSpec(f"{self.name}: edges={short_repr(self.edges)} is not a sequence "
                              "of numbers; give the inner bucket edges, e.g. (0.5, 1, 2)")
        edges = tuple(_finite(self.name, "edge", e) for e in raw)
        if len(edges) == 0:
            raise InvalidSpec(f"{self.name}: a histogram needs at least one edge")
        diffs = np.diff(edges)
        if (diffs <= 0).any():
            i = int(np.flatnonzero(diffs <= 0)[0])
            kind = "duplicate" if diffs[i] == 0 else "unsorted"
            raise InvalidSpec(
                f"{self.name}: {kind} edges {edges[i]} and {edges[i + 1]}; edges must be "
                "strictly increasing"
            )
        cap = _finite(self.name, "mass_cap", self.mass_cap)
        if cap <= 0:
            raise InvalidSpec(f"{self.name}: mass_cap={cap} must be positive")
        if not math.isfinite(2.0 * cap):
            raise InvalidSpec(
                f"{self.name}: mass_cap={cap!r} gives an infinite replace-one sensitivity "
                "(2 x mass_cap), which no noise can cover; give a cap such as 1 (each client "
                "adds a distribution)")
        object.__setattr__(self, "edges", edges)
        object.__setattr__(self, "mass_cap", cap)
        object.__setattr__(self, "_edges", np.asarray(edges, dtype=np.float64))

    @property
    def n_buckets(self) -> int:
        """Number of buckets (``len(edges) + 1``)."""
        return len(self.edges) + 1

    @property
    def value_range(self) -> tuple[float, float]:
        """The range each reported bucket lies in: ``(0, mass_cap)`` (their sum is capped too).

        Examples
        --------
        >>> HistogramSpec("err", edges=(1.0, 2.0), mass_cap=1.0).value_range
        (0.0, 1.0)
        """
        return (0.0, float(self.mass_cap))

    @property
    def sensitivity(self) -> float:
        """L1 change of the summed histogram when one client is replaced: ``2 * mass_cap``."""
        return self.sensitivity_under("replace")

    def sensitivity_under(self, neighbours: Neighbours) -> float:
        """L1 change of the summed histogram under a neighbouring relation.

        ``"replace"``: ``2 * mass_cap`` (mass leaves one bucket, lands in another).
        ``"add_remove"``: ``mass_cap`` (one client's whole histogram added or removed).

        Examples
        --------
        >>> spec = HistogramSpec("err", edges=(1.0,), mass_cap=0.5)
        >>> spec.sensitivity_under("replace"), spec.sensitivity_under("add_remove")
        (1.0, 0.5)
        """
        if check_neighbours(neighbours) == "add_remove":
            return self.mass_cap
        return 2.0 * self.mass_cap

    @property
    def key(self) -> str:
        """``name@version`` plus a digest of the edges, recorded with every release."""
        digest = hashlib.sha256(repr((self.edges, self.mass_cap)).encode()).hexdigest()[:8]
        return f"{self.name}@{self.version}:{digest}"

    @property
    def fingerprint(self) -> str:
        """Digest of every field: device reports are bound to it, not to the name alone."""
        return _digest((self.name, self.version, self.edges, self.mass_cap))

    @property
    def columns(self) -> list[str]:
        """The client-report columns of the buckets: ``<name>_0 .. <name>_k``."""
        return [f"{self.name}_{b}" for b in range(self.n_buckets)]

    @property
    def labels(self) -> list[str]:
        """Readable bucket labels, e.g. ``'<=0.5'``, ``'(0.5, 1]'``, ``'>25'``."""
        fmt = [f"{e:g}" for e in self.edges]
        inner = [f"({a}, {b}]" for a, b in itertools.pairwise(fmt)]
        return [f"<={fmt[0]}", *inner, f">{fmt[-1]}"]

    @property
    def title(self) -> str:
        """``label (unit)`` for titles and legend keys (the name when there is no label)."""
        return _title(self.name, self.label, self.unit)

    @property
    def tail_title(self) -> str:
        """What a report's ``value`` of this histogram is: the share in the top bucket."""
        unit = f" {self.unit}" if self.unit else ""
        return f"share of {self.label or self.name} > {self.edges[-1]:g}{unit}"

    def describe(self) -> dict[str, object]:
        """Return the spec as plain JSON-ready fields, with one row per bucket."""
        lows = (None, *self.edges)
        highs = (*self.edges, None)
        return {"kind": "histogram", "name": self.name, "version": self.version,
                "key": self.key, "mass_cap": self.mass_cap, "edges": list(self.edges),
                "label": self.label, "unit": self.unit, "fingerprint": self.fingerprint,
                "buckets": [{"bucket": b, "column": f"{self.name}_b{b}", "label": text,
                             "low": lo, "high": hi}
                            for b, (text, lo, hi) in enumerate(
                                zip(self.labels, lows, highs, strict=True))]}

    def bucket_of(self, values: ArrayLike) -> NDArray[np.int64]:
        """Bucket index of each value (``v > edge`` moves it up a bucket)."""
        data = check_finite_array(values, "values", ndim=(0, 1, 2), allow_empty=True)
        return np.searchsorted(self._edges, data, side="left").astype(np.int64)


class MetricRegistry:
    """The specs a deployment publishes, by name: what server and devices agree on.

    Examples
    --------
    >>> reg = MetricRegistry([MetricSpec("loss", 0, 2.5)])
    >>> reg["loss"].sensitivity
    2.5
    >>> reg.register(MetricSpec("loss", 0, 3.0))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidSpec: metric 'loss' is already registered as loss@1 ...
    """

    def __init__(self, specs: Sequence[MetricSpec | HistogramSpec] = ()) -> None:
        self._specs: dict[str, MetricSpec | HistogramSpec] = {}
        if isinstance(specs, (MetricSpec, HistogramSpec, str, bytes, Mapping)) or not isinstance(
                specs, Iterable):
            raise InvalidSpec(f"specs={short_repr(specs)} is not a sequence of specs; give a "
                              "list of MetricSpec / HistogramSpec")
        for spec in specs:
            self.register(spec)

    def register(self, spec: MetricSpec | HistogramSpec) -> None:
        """Add a spec; a changed spec under the same name and version is refused."""
        if not isinstance(spec, (MetricSpec, HistogramSpec)):
            raise InvalidSpec(
                f"cannot register {spec!r}: give a MetricSpec or HistogramSpec with finite bounds"
            )
        old = self._specs.get(spec.name)
        if old is not None and old != spec:
            if old.version == spec.version:
                raise InvalidSpec(
                    f"metric {spec.name!r} is already registered as {old.key} with other "
                    "bounds; bump its version to change them"
                )
        self._specs[spec.name] = spec

    def __getitem__(self, name: str) -> MetricSpec | HistogramSpec:
        try:
            return self._specs[name]
        except (KeyError, TypeError):
            raise InvalidSpec(
                f"no metric named {name!r}; registered: {sorted(self._specs)}"
            ) from None

    def __iter__(self) -> Iterator[MetricSpec | HistogramSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def __repr__(self) -> str:
        return f"MetricRegistry({[s.key for s in self._specs.values()]})"


# ---------------------------------------------------------------- clip calibration


def calibrate_clip(held_out: ArrayLike, percentile: float = 99.0, *, low: float = 0.0) -> float:
    """Clip bound at a percentile of a held-out (public or already released) sample.

    Parameters
    ----------
    held_out : array-like
        Per-client values from a held-out fleet, never the cohort being measured.
    percentile : float
        Default the 99th: it clips about 1% of clients and keeps the noise far below
        a "safe" bound at the maximum.
    low : float
        The lower clip bound; the returned bound is at least slightly above it.

    Examples
    --------
    >>> round(calibrate_clip(np.arange(1, 101), 90), 2)
    90.1
    """
    values = _held_out(held_out)
    return _clip_at(values, _percentile(percentile), _low(low))


def _held_out(held_out: ArrayLike) -> NDArray[np.float64]:
    if isinstance(held_out, pd.DataFrame):
        raise InvalidInput("held_out is a table; give one column of per-client values")
    values = check_finite_array(held_out, "held_out", ndim=(1,), finite=False)
    bad = ~np.isfinite(values)
    if bad.any():
        raise InvalidInput(
            f"the held-out sample has {int(bad.sum())} of {values.size} values not finite; "
            "give finite values")
    return values


def _percentile(value: float, name: str = "percentile") -> float:
    number = check_real(value, name, fix="pass a percentile in (0, 100], e.g. 99")
    if not 0 < number <= 100:  # NaN fails too
        raise fail(name, value, "is outside (0, 100]", "pass a percentile such as 99")
    return number


def _low(value: float) -> float:
    return check_number(value, "low", low=-1e300, high=1e300,
                        fix="pass the lower clip bound, a finite number")


def _clip_at(values: NDArray[np.float64], percentile: float, low: float) -> float:
    bound = float(np.percentile(values, percentile))
    return max(bound, low + float(np.finfo(float).eps) * max(1.0, abs(low)))


def clip_tradeoff(
    held_out: ArrayLike,
    *,
    epsilon: float,
    cohort: int,
    percentiles: Sequence[float] = (50, 90, 95, 99, 100),
    low: float = 0.0,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Where to put the clip bound: bound, noise on the published mean, share clipped.

    One row per candidate percentile: the bound it gives, the (1 - alpha)
    half-width of the Laplace noise on the published mean for a cohort of
    ``cohort`` clients at ``epsilon``, and the share of held-out clients the bound
    would clip (the bias the bound introduces).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> table = clip_tradeoff(rng.lognormal(-1, 1, 2000), epsilon=1.0, cohort=2000)
    >>> list(table.columns)
    ['percentile', 'clip_high', 'noise_half_width', 'share_clipped', 'clip_bias']
    >>> bool(table.noise_half_width.is_monotonic_increasing)
    True
    """
    values = _held_out(held_out)
    eps = check_epsilon(epsilon)
    n = check_count(cohort, "cohort", low=1)
    level = check_alpha(alpha)
    floor = _low(low)
    if isinstance(percentiles, (str, bytes, Mapping)) or not isinstance(percentiles, Iterable):
        raise fail("percentiles", percentiles, "is not a sequence of percentiles",
                   "pass candidates such as (50, 90, 99, 100)")
    candidates = [_percentile(p, "percentiles[]") for p in percentiles]
    if not candidates:
        raise fail("percentiles", percentiles, "is empty",
                   "pass at least one candidate, e.g. (99,)")
    rows = []
    for p in candidates:
        bound = _clip_at(values, p, floor)
        clipped = np.clip(values, floor, bound)
        width = bound - floor
        if not math.isfinite(width):
            raise fail("low", low, f"and the p{p:g} bound {bound:g} make an infinite clip width",
                       "give values and bounds whose difference is a finite number")
        rows.append({
            "percentile": p,
            "clip_high": bound,
            "noise_half_width": predicted_error_bar(width, eps, n, level),
            "share_clipped": float((values > bound).mean()),
            "clip_bias": float(clipped.mean() - values.mean()),
        })
    return pd.DataFrame(rows)


def min_cohort_for(
    target_error_bar: float,
    spec: MetricSpec | HistogramSpec,
    epsilon: float,
    *,
    alpha: float = 0.05,
) -> int:
    """Smallest cohort whose published (1 - alpha) error bar is within the target.

    The error bar on a noised mean is ``q * sensitivity / (epsilon * n)``, with
    ``q`` the Laplace quantile, so it shrinks as 1/n: the floor is the first n
    that brings it under ``target_error_bar``. For a histogram the bar is on each
    bucket's mean mass per client.

    Examples
    --------
    >>> min_cohort_for(0.05, MetricSpec("loss", 0, 2.5), epsilon=1.0)
    150
    """
    target = check_real(target_error_bar, "target_error_bar")
    if not (math.isfinite(target) and target > 0):
        raise fail("target_error_bar", target_error_bar, "must be a positive number",
                   "pass the widest acceptable error bar, e.g. 0.05")
    eps = check_real(epsilon, "epsilon")
    if not (math.isfinite(eps) and 0 < eps <= MAX_EPSILON):
        raise fail("epsilon", epsilon, f"must be a positive number (at most {MAX_EPSILON:g})",
                   "pass the release's privacy loss, e.g. 1.0")
    check_instance(spec, "spec", (MetricSpec, HistogramSpec),
                   "pass the MetricSpec or HistogramSpec to be released")
    one = predicted_error_bar(spec.sensitivity, eps, 1, check_alpha(alpha))
    cohort = one / target
    if not math.isfinite(cohort) or cohort > MAX_COHORT:
        raise fail("target_error_bar", target_error_bar,
                   f"needs a cohort above {MAX_COHORT:.0e} clients at epsilon {eps:g}",
                   "accept a wider error bar, raise epsilon or narrow the clip range")
    return max(1, math.ceil(cohort - 1e-12))


#: A released metric's spec: a scalar metric or a histogram.
Spec = MetricSpec | HistogramSpec


def check_specs(metrics: object) -> list[Spec]:
    """Return the specs of one release as a list: non-empty, all specs, no name twice.

    Raises
    ------
    InvalidInput
        Not a non-empty list or tuple, an item that is not a spec, or a repeated name.

    Examples
    --------
    >>> [s.name for s in check_specs((MetricSpec("loss", 0, 4),))]
    ['loss']
    """
    if not isinstance(metrics, (list, tuple)) or len(metrics) == 0:
        raise fail("metrics", metrics, "must be a non-empty list of specs",
                   "pass e.g. [MetricSpec('loss', 0, 19)]")
    bad = [m for m in metrics if not isinstance(m, (MetricSpec, HistogramSpec))]
    if bad:
        raise InvalidInput(f"metrics has {bad[:2]!r}, not MetricSpec or HistogramSpec")
    names = [m.name for m in metrics]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise InvalidInput(
            f"metrics repeat the names {repeated}; each metric is released once per round")
    return list(metrics)


def resolve_epsilons(specs: Sequence[Spec], epsilon: float | Mapping[str, float]
                     ) -> dict[str, float]:
    """Return each metric's share of a release's total epsilon.

    ``epsilon`` is what the whole release is charged. One number is split
    equally over the metrics (each share rounded down, so the shares never add
    up to more than the number); a mapping by metric name gives the split
    explicitly, and its sum is the total.

    Raises
    ------
    InvalidInput
        A mapping that misses a metric or names an unknown one, or a bad epsilon.

    Examples
    --------
    >>> resolve_epsilons([MetricSpec("loss", 0, 4), MetricSpec("ratio", 0, 9)], 0.4)
    {'loss': 0.2, 'ratio': 0.2}
    >>> resolve_epsilons([MetricSpec("loss", 0, 4), MetricSpec("ratio", 0, 9)],
    ...                  {"loss": 0.1, "ratio": 0.3})
    {'loss': 0.1, 'ratio': 0.3}
    """
    if isinstance(epsilon, Mapping):
        missing = [s.name for s in specs if s.name not in epsilon]
        extra = sorted(set(epsilon) - {s.name for s in specs})
        if missing or extra:
            raise InvalidInput(
                f"epsilon has no value for metrics {missing} and values for unknown metrics "
                f"{extra}; give one epsilon per released metric (their sum is the total), "
                "or one number, the total, to split equally")
        return {s.name: check_epsilon(epsilon[s.name], f"epsilon[{s.name!r}]") for s in specs}
    total = check_epsilon(epsilon)
    share = _equal_share(total, len(specs))
    return {s.name: share for s in specs}


def _equal_share(total: float, parts: int) -> float:
    """Return ``total / parts``, lowered until ``parts`` shares add up to at most ``total``.

    The ledger adds the decimals the floats print as; a share one ulp too large
    would charge more than the total the caller asked for.

    Examples
    --------
    >>> _equal_share(1.0, 3), _equal_share(0.4, 2)
    (0.3333333333333333, 0.2)
    """
    share = total / parts
    while share > 0 and Decimal(repr(share)) * parts > Decimal(repr(total)):
        share = math.nextafter(share, 0.0)
    return share
