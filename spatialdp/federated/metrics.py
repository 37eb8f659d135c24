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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from spatialdp.exceptions import InvalidInput, InvalidSpec
from spatialdp.federated.release import predicted_error_bar

__all__ = [
    "HistogramSpec",
    "MetricRegistry",
    "MetricSpec",
    "calibrate_clip",
    "clip_tradeoff",
    "min_cohort_for",
]


def _finite(name: str, what: str, value: float) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidSpec(f"{name}: {what}={value!r} is not a number") from None
    if not math.isfinite(number):
        raise InvalidSpec(
            f"{name}: {what}={value!r} is not finite; every metric needs finite clip bounds "
            "(derive them with calibrate_clip from a held-out sample)"
        )
    return number


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

    Examples
    --------
    >>> spec = MetricSpec("loss", 0.0, 2.5)
    >>> spec.sensitivity
    2.5
    >>> spec.clip([-1.0, 1.0, 9.0]).tolist()
    [0.0, 1.0, 2.5]
    """

    name: str
    clip_low: float
    clip_high: float
    version: str = "1"
    present: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidSpec("a metric needs a non-empty name")
        if self.present is not None and (not isinstance(self.present, str) or not self.present):
            raise InvalidSpec(f"{self.name}: present={self.present!r} must name a 0/1 column")
        low = _finite(self.name, "clip_low", self.clip_low)
        high = _finite(self.name, "clip_high", self.clip_high)
        if not low < high:
            raise InvalidSpec(
                f"{self.name}: clip_low={low} must be below clip_high={high}; "
                "give the range a device clips its value into"
            )
        if not math.isfinite(high - low) or not math.isfinite(max(abs(low), abs(high)) * 2):
            raise InvalidSpec(
                f"{self.name}: the clip range [{low:g}, {high:g}] has an infinite width, so "
                "its sensitivity cannot be noised; clip to a range you can state in numbers")
        object.__setattr__(self, "clip_low", low)
        object.__setattr__(self, "clip_high", high)

    @property
    def sensitivity(self) -> float:
        """One client's largest influence on the cohort SUM (replace-one): the clip width.

        With ``present``, an absent client contributes 0, so the width of
        ``[min(clip_low, 0), max(clip_high, 0)]``.
        """
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

    def clip(self, values: ArrayLike) -> NDArray[np.float64]:
        """Clip values into the spec's range (what the device does)."""
        return np.clip(np.asarray(values, dtype=np.float64), self.clip_low, self.clip_high)


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

    Examples
    --------
    >>> spec = HistogramSpec("abs_error_m", edges=(0.5, 1, 2, 5, 10, 25))
    >>> spec.n_buckets, spec.sensitivity
    (7, 2.0)
    >>> spec.labels[0], spec.labels[-1]
    ('<=0.5', '>25')
    """

    name: str
    edges: tuple[float, ...]
    mass_cap: float = 1.0
    version: str = "1"
    _edges: NDArray[np.float64] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise InvalidSpec("a histogram needs a non-empty name")
        edges = tuple(_finite(self.name, "edge", e) for e in self.edges)
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
        object.__setattr__(self, "edges", edges)
        object.__setattr__(self, "mass_cap", cap)
        object.__setattr__(self, "_edges", np.asarray(edges, dtype=np.float64))

    @property
    def n_buckets(self) -> int:
        """Number of buckets (``len(edges) + 1``)."""
        return len(self.edges) + 1

    @property
    def sensitivity(self) -> float:
        """L1 change of the summed histogram when one client is replaced: ``2 * mass_cap``."""
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

    def bucket_of(self, values: ArrayLike) -> NDArray[np.int64]:
        """Bucket index of each value (``v > edge`` moves it up a bucket)."""
        return np.searchsorted(self._edges, np.asarray(values, dtype=np.float64),
                               side="left").astype(np.int64)


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
        except KeyError:
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
    values = np.asarray(held_out, dtype=np.float64)
    if values.size == 0 or not np.isfinite(values).all():
        raise InvalidInput(
            f"the held-out sample has {values.size} values, some not finite; give finite values"
        )
    if not 0 < percentile <= 100:
        raise InvalidInput(f"percentile={percentile} is outside (0, 100]")
    bound = float(np.percentile(values, percentile))
    return max(bound, low + np.finfo(float).eps * max(1.0, abs(low)))


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
    values = np.asarray(held_out, dtype=np.float64)
    rows = []
    for p in percentiles:
        bound = calibrate_clip(values, p, low=low)
        clipped = np.clip(values, low, bound)
        rows.append({
            "percentile": float(p),
            "clip_high": bound,
            "noise_half_width": predicted_error_bar(bound - low, epsilon, cohort, alpha),
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
    target = float(target_error_bar)
    if not (math.isfinite(target) and target > 0):
        raise InvalidInput(f"target_error_bar={target_error_bar!r} must be a positive number")
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise InvalidInput(f"epsilon={epsilon!r} must be a positive number")
    one = predicted_error_bar(spec.sensitivity, epsilon, 1, alpha)
    return max(1, math.ceil(one / target - 1e-12))

