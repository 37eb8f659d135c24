"""Secure sum, then noise once: private global and regional metrics.

Devices send clipped, bounded numbers (:mod:`spatialdp.federated.device`).
Secure aggregation gives the server only the per-region SUMS and the number
of contributors; Laplace noise is added once to each sum (never per client),
at scale ``sensitivity / epsilon``, and the noised sum divided by the cohort is
published with its error bar. Regions are disjoint, so a whole partition is
one release at the full epsilon (parallel composition); a histogram's buckets
are one release too. Every release is charged to the ledger before any noise
is drawn, and nothing is charged for a refused release.

Neighbouring relation: replace one client's data by another's, with the
cohort (which clients take part, in which region) chosen by the server's
stratified selection and therefore known to it. The clip width is then the
sensitivity of a sum, and ``2 * mass_cap`` that of a histogram.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal, localcontext
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from spatialdp._random import RandomLike, as_generator
from spatialdp.exceptions import ClippingFailure, CohortTooSmall, InvalidInput, PartitionMismatch
from spatialdp.federated.metrics import HistogramSpec, MetricSpec
from spatialdp.federated.release import HistogramRelease, MetricRelease, predicted_error_bar
from spatialdp.privacy.budget import Single
from spatialdp.privacy.ledger import PrivacyLedger

__all__ = [
    "NoiseSource",
    "SecureSum",
    "aggregate_histogram",
    "aggregate_metric",
    "release_noise",
    "secure_sum",
    "simulation_noise",
]

#: Adds Laplace noise of the given scale to every entry of an array.
NoiseSource = Callable[[NDArray[np.float64], float], NDArray[np.float64]]


def laplace_scale(sensitivity: float, epsilon: float) -> float:
    """Noise scale ``sensitivity / epsilon``, rounded UP so the real loss never exceeds it.

    The ledger charges the epsilon the caller wrote (``0.1`` is charged as exactly
    0.1), so the scale is computed in exact decimal arithmetic from that same value
    and from the exact binary value of the sensitivity, and rounded up to a float.

    Examples
    --------
    >>> laplace_scale(1.0, 0.1)
    10.0
    >>> laplace_scale(10.0, 0.7) * 0.7 >= 10.0
    True
    """
    with localcontext() as ctx:
        ctx.prec = 50
        ctx.rounding = ROUND_CEILING
        exact = Decimal(float(sensitivity)) / Decimal(repr(float(epsilon)))
    scale = float(exact)
    if Decimal(scale) < exact:
        scale = math.nextafter(scale, math.inf)
    return scale


def release_noise(values: NDArray[np.float64], scale: float) -> NDArray[np.float64]:
    """The release path: floating-point-safe Laplace noise from OS entropy (no seed)."""
    from spatialdp.privacy.noise import release_laplace

    flat = np.asarray(values, dtype=np.float64).ravel()
    return np.asarray(release_laplace(flat, scale), dtype=np.float64).reshape(np.shape(values))


def simulation_noise(rng: RandomLike) -> NoiseSource:
    """The simulation path: seeded numpy Laplace noise, for measuring error only."""
    from spatialdp.privacy.noise import simulate_laplace

    gen = as_generator(rng)

    def add(values: NDArray[np.float64], scale: float) -> NDArray[np.float64]:
        return np.asarray(simulate_laplace(values, scale, rng=gen), dtype=np.float64)

    return add


@dataclass(frozen=True)
class SecureSum:
    """What secure aggregation reveals to the server: per-group sums and counts."""

    sums: NDArray[np.float64]
    counts: NDArray[np.int64]


def secure_sum(values: ArrayLike, groups: ArrayLike | None = None, n_groups: int = 1) -> SecureSum:
    """Sum client contributions per group (region), as secure aggregation would.

    Parameters
    ----------
    values : array-like, shape (n_clients,) or (n_clients, k)
        One row per client, already clipped on the device.
    groups : array-like of int, optional
        Group (region position) per client, ``0..n_groups-1``; default one group.
    n_groups : int

    Examples
    --------
    >>> s = secure_sum([1.0, 2.0, 4.0], groups=[0, 1, 1], n_groups=2)
    >>> s.sums.tolist(), s.counts.tolist()
    ([1.0, 6.0], [1, 2])
    """
    data = np.asarray(values, dtype=np.float64)
    if data.ndim not in (1, 2) or data.shape[0] == 0:
        raise InvalidInput(f"values has shape {data.shape}; give one row per client")
    if not np.isfinite(data).all():
        raise InvalidInput(
            f"{int((~np.isfinite(data)).sum())} client values are NaN or infinite; devices "
            "must send clipped finite numbers"
        )
    idx = np.zeros(data.shape[0], dtype=np.int64) if groups is None else np.asarray(groups)
    if idx.shape != (data.shape[0],) or (idx < 0).any() or (idx >= n_groups).any():
        raise InvalidInput(
            f"groups must give a position in 0..{n_groups - 1} for each of the "
            f"{data.shape[0]} clients"
        )
    counts = np.bincount(idx, minlength=n_groups).astype(np.int64)
    sums: NDArray[np.float64]
    if data.ndim == 1:
        sums = np.bincount(idx, weights=data, minlength=n_groups).astype(np.float64)
    else:
        sums = np.zeros((n_groups, data.shape[1]))
        for col in range(data.shape[1]):  # a handful of buckets, never a loop over clients
            sums[:, col] = np.bincount(idx, weights=data[:, col], minlength=n_groups)
    return SecureSum(sums, counts)


def check_clipping(spec: MetricSpec | HistogramSpec, sums: NDArray[np.float64],
                   counts: NDArray[np.int64]) -> None:
    """Detect a gross clipping failure: an aggregate beyond cap x cohort.

    The server cannot see clients, but a sum outside ``[low * n, high * n]`` (or a
    histogram mass above ``mass_cap * n``) proves that some device did not clip.

    Raises
    ------
    ClippingFailure
    """
    n = counts.astype(np.float64)
    tol = 1e-9 * np.maximum(1.0, n)
    if isinstance(spec, MetricSpec):
        low, high = spec.clip_low * n, spec.clip_high * n
        bad = (sums < low - tol * max(1.0, abs(spec.clip_low))) | (
            sums > high + tol * max(1.0, abs(spec.clip_high)))
        limit = f"[{spec.clip_low:g}, {spec.clip_high:g}] x cohort"
    else:
        by_group = np.atleast_2d(sums)
        bad = (by_group.sum(axis=1) > spec.mass_cap * n + tol) | (
            by_group < -tol[:, None]).any(axis=1)
        limit = f"mass_cap {spec.mass_cap:g} x cohort and non-negative buckets"
    bad = np.atleast_1d(bad)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise ClippingFailure(
            f"{spec.key}: the aggregate of group {first} lies beyond {limit} "
            f"(cohort {int(np.atleast_1d(counts)[first])}); some device did not clip. Nothing "
            "was published or charged: find the device build that skips clipping"
        )


def refuse_seeded_release(noise: object, ledger: PrivacyLedger | None) -> None:
    """A release charged to a ledger must use OS-entropy noise, never a seeded source."""
    if noise is not None and ledger is not None:
        raise InvalidInput(
            "a seeded (simulation) noise source was given together with a ledger; "
            "releases draw noise from OS entropy and take no seed: drop noise= to release, "
            "or drop ledger= to simulate"
        )


def charge(*, ledger: PrivacyLedger | None, epoch: int | None, line_item: str, structure: Any,
            epsilon: float, what: str, who: str, why: str, round_index: int | None) -> None:
    """Charge a release to the ledger (no-op without one, e.g. in simulations)."""
    if ledger is None:
        return
    if epoch is None:
        raise InvalidInput("epoch= is required when a ledger is given")
    ledger.spend(epoch, line_item, structure=structure, epsilon=epsilon, who=who, what=what,
                 why=why, round_index=round_index)


def _check_epsilon(epsilon: float) -> float:
    eps = float(epsilon)
    if not (np.isfinite(eps) and eps > 0):
        raise InvalidInput(f"epsilon={epsilon!r} must be a positive finite number")
    return eps


def _noised_cohort_mean(
    data: NDArray[np.float64],
    spec: MetricSpec | HistogramSpec,
    epsilon: float,
    *,
    min_cohort: int,
    structure: Any,
    target: dict[str, Any],
    noise: NoiseSource | None,
) -> tuple[NDArray[np.float64], int, float]:
    """Secure sum, floor, clipping check, ledger charge, one noise draw per value.

    Returns the noised mean(s), the cohort size and the noise scale on the sum.
    """
    refuse_seeded_release(noise, target["ledger"])
    total = secure_sum(data)
    n = int(total.counts[0])
    if n < min_cohort:
        raise CohortTooSmall(
            f"{spec.key}: cohort of {n} is below the floor of {min_cohort}; publishing it "
            "would expose individual clients. Wait for more clients or widen the window"
        )
    check_clipping(spec, total.sums, total.counts)
    charge(structure=structure, epsilon=epsilon, what=spec.key, **target)
    scale = laplace_scale(spec.sensitivity, epsilon)
    noisy = (noise or release_noise)(total.sums[0] if total.sums.ndim == 2 else total.sums, scale)
    return noisy / n, n, scale


def aggregate_metric(
    client_values: ArrayLike,
    spec: MetricSpec,
    *,
    epsilon: float,
    min_cohort: int = 50,
    alpha: float = 0.05,
    ledger: PrivacyLedger | None = None,
    epoch: int | None = None,
    line_item: str = "evaluation.global",
    who: str = "spatialdp",
    why: str = "global metric",
    round_index: int | None = None,
    noise: NoiseSource | None = None,
) -> MetricRelease:
    """Securely summed, noised mean of one clipped metric over a whole cohort.

    Noise is added once, to the sum, at scale ``spec.sensitivity / epsilon``; the
    published error bar is fixed before the round from the clip width, epsilon
    and the cohort size, and shrinks as 1/n.

    Parameters
    ----------
    client_values : array-like
        One clipped value per client (from the device module).
    spec : MetricSpec
    epsilon : float
        Privacy loss of this release.
    min_cohort : int
        Publication floor.
    ledger, epoch, line_item, who, why, round_index
        Where the release is charged (skip with ``ledger=None`` in simulations).
    noise : callable, optional
        Default: the release path (OS entropy). Simulations pass
        :func:`simulation_noise`; a release never takes a seed.

    Raises
    ------
    CohortTooSmall, ClippingFailure, BudgetExceeded

    Examples
    --------
    >>> spec = MetricSpec("loss", 0.0, 2.5)
    >>> rel = aggregate_metric(np.full(1000, 0.8), spec, epsilon=1.0,
    ...                        noise=simulation_noise(0))
    >>> rel.contributors, round(rel.error_bar, 4)
    (1000, 0.0075)
    """
    eps = _check_epsilon(epsilon)
    target = {"ledger": ledger, "epoch": epoch, "line_item": line_item, "who": who, "why": why,
              "round_index": round_index}
    means, n, scale = _noised_cohort_mean(
        np.asarray(client_values, dtype=np.float64), spec, eps, min_cohort=min_cohort,
        structure=Single(spec.key), target=target, noise=noise)
    return MetricRelease(
        metric=spec.key,
        value=float(means[0]),
        error_bar=predicted_error_bar(spec.sensitivity, eps, n, alpha),
        alpha=alpha,
        noise_scale=scale / n,
        contributors=n,
        epsilon=eps,
        round_index=round_index,
    )


def aggregate_histogram(
    client_histograms: ArrayLike,
    spec: HistogramSpec,
    *,
    epsilon: float,
    min_cohort: int = 50,
    alpha: float = 0.05,
    ledger: PrivacyLedger | None = None,
    epoch: int | None = None,
    line_item: str = "evaluation.global",
    who: str = "spatialdp",
    why: str = "global histogram",
    round_index: int | None = None,
    noise: NoiseSource | None = None,
) -> HistogramRelease:
    """Securely summed, noised histogram: the buckets are ONE release at full epsilon.

    Each bucket gets Laplace noise at scale ``spec.sensitivity / epsilon``
    (``2 * mass_cap`` in L1 under replace-one), whatever the bucket count. The
    published values are mean mass per client per bucket, unclamped so that they
    stay unbiased (clamp negatives yourself for display: it is post-processing).

    Examples
    --------
    >>> spec = HistogramSpec("err", edges=(1.0, 2.0))
    >>> hists = np.tile([0.5, 0.3, 0.2], (400, 1))
    >>> rel = aggregate_histogram(hists, spec, epsilon=1.0, noise=simulation_noise(1))
    >>> rel.labels, rel.contributors
    (('<=1', '(1, 2]', '>2'), 400)
    """
    eps = _check_epsilon(epsilon)
    data = np.asarray(client_histograms, dtype=np.float64)
    if data.ndim != 2 or data.shape[1] != spec.n_buckets:
        raise InvalidInput(
            f"client histograms have shape {data.shape}; {spec.key} has {spec.n_buckets} "
            "buckets: give one row of that many per client"
        )
    target = {"ledger": ledger, "epoch": epoch, "line_item": line_item, "who": who, "why": why,
              "round_index": round_index}
    means, n, scale = _noised_cohort_mean(
        data, spec, eps, min_cohort=min_cohort,
        structure=Single(spec.key), target=target, noise=noise)
    return HistogramRelease(
        metric=spec.key,
        labels=tuple(spec.labels),
        values=means,
        error_bar=predicted_error_bar(spec.sensitivity, eps, n, alpha),
        alpha=alpha,
        noise_scale=scale / n,
        contributors=n,
        epsilon=eps,
        round_index=round_index,
    )


def resolve_epsilons(specs: Sequence[MetricSpec | HistogramSpec],
                     epsilon: float | Mapping[str, float]) -> dict[str, float]:
    """Per-metric epsilon from one number (each metric) or a mapping by name."""
    if isinstance(epsilon, Mapping):
        missing = [s.name for s in specs if s.name not in epsilon]
        if missing:
            raise InvalidInput(f"no epsilon given for metrics {missing}")
        return {s.name: _check_epsilon(epsilon[s.name]) for s in specs}
    return {s.name: _check_epsilon(epsilon) for s in specs}


def check_partition_version(frame: pd.DataFrame, version: str) -> None:
    """Refuse client reports tagged with another partition version."""
    tagged = frame.attrs.get("partition_version")
    if tagged is not None and tagged != version:
        raise PartitionMismatch(
            f"the client reports were assigned on partition version {tagged!r}, but the "
            f"report is for version {version!r}; reassign the clients on one partition"
        )
