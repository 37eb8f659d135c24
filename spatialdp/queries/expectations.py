"""Analytic error of a polygon answer: a sum of ``m`` noisy cells, with or without clamping.

A polygon covering ``m`` cells of a flat grid sums ``m`` iid discrete Laplace
draws ``S_m`` of scale ``b = k / epsilon`` (``a = exp(-1/b)``). Its figures
come from :mod:`spatialdp.privacy.accuracy`, which has the exact distribution
of ``S_m`` for every ``m`` (no normal approximation):

* RMS ``= sqrt(m) sigma`` with ``sigma**2 = 2a / (1 - a)**2`` (about ``2 b**2``);
* mean absolute error ``E|S_m|``: NOT ``sqrt(m) sigma`` (the seed's formula).
  It is ``sigma`` times ``sqrt(2/pi)`` for large ``m`` (about ``0.80 sqrt(m)
  sigma``) and ``2a / (1 - a**2)`` at ``m = 1`` (about ``b``, i.e.
  ``0.71 sigma``);
* p95: the smallest integer ``h`` with ``P(|S_m| <= h) >= 0.95``.

Clamping negatives to zero is post-processing (free in privacy) but biased. A
cell with true count ``t`` then errs by ``max(Z, -t)``, whose mean is exactly
``a**(t+1) / (1 - a**2)`` (positive: answers come out too high, most on sparse
cells) and whose second moment is below (closed forms in :func:`clamped_moments`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from spatialdp.privacy.accuracy import half_width, mean_abs_error, noise_std, tail_probability

__all__ = [
    "LAWS_PER_BUCKET",
    "bucket_expectations",
    "check_floor",
    "clamp_skip_threshold",
    "clamped_moments",
    "flat_figures",
    "mixture_quantile",
    "sigma_of",
]

KIND = "discrete_laplace"


def flat_figures(scale: float, m: ArrayLike, quantile: float = 0.95) -> dict[str, NDArray[Any]]:
    """Return the RMS, mean absolute error and ``quantile`` of ``|S_m|`` (exact), per ``m``.

    Parameters
    ----------
    scale : float
        Discrete Laplace scale ``b`` of one cell.
    m : array-like of int
        Cells summed, each ``>= 1``.
    quantile : float, default 0.95

    Returns
    -------
    dict
        ``rms``, ``mean_abs_error``, ``p95`` (named for the default quantile), arrays like ``m``.

    Examples
    --------
    >>> fig = flat_figures(1.0, [1, 400])
    >>> [round(float(x), 2) for x in fig["rms"]]  # sqrt(m) * sigma
    [1.36, 27.14]
    >>> [round(float(x), 2) for x in fig["mean_abs_error"]]  # not sqrt(m) * sigma
    [0.85, 21.64]
    """
    arr = np.asarray(m, dtype=np.int64)
    return {
        "rms": np.asarray(noise_std(KIND, scale, arr)),
        "mean_abs_error": np.asarray(mean_abs_error(KIND, scale, arr)),
        "p95": np.asarray(half_width(KIND, scale, arr, 1.0 - quantile)),
    }


def mixture_quantile(scale: float, m: ArrayLike, quantile: float = 0.95) -> float:
    """Return the ``quantile`` of ``|error|`` pooled over queries of sizes ``m`` (flat, exact).

    The pooled errors of a bucket are a mixture of the ``|S_{m_i}|``; its
    quantile is the smallest integer ``h`` with ``mean_i P(|S_{m_i}| <= h) >=
    quantile``, found by bisection on the exact tails.

    Examples
    --------
    >>> mixture_quantile(1.0, [1, 1]) == float(flat_figures(1.0, [1])["p95"][0])
    True
    """
    values, weights = np.unique(np.asarray(m, dtype=np.int64), return_counts=True)
    w = weights / weights.sum()
    hw = np.asarray(half_width(KIND, scale, values, 1.0 - quantile))
    lo, hi = int(hw.min()) - 1, int(hw.max())  # the mixture quantile lies between

    def miss(h: int) -> float:
        return float(w @ np.asarray(tail_probability(KIND, scale, float(h), values)))

    while hi - lo > 1:
        mid = (lo + hi) // 2
        if miss(mid) <= 1.0 - quantile:
            hi = mid
        else:
            lo = mid
    return float(hi)


def _tail_sums(a: float, n: NDArray[np.float64]) -> tuple[NDArray[np.float64], ...]:
    """Return ``sum_{j>=n} a**j``, ``j a**j`` and ``j**2 a**j`` (closed forms)."""
    q = 1.0 - a
    an = np.power(a, n)
    s0 = an / q
    s1 = an * (n * q + a) / q**2
    s2 = an * (n**2 * q**2 + 2.0 * n * a * q + a * (1.0 + a)) / q**3
    return s0, s1, s2


def clamped_moments(truth: ArrayLike, scale: float) -> tuple[NDArray[np.float64],
                                                              NDArray[np.float64]]:
    """Return the exact mean and variance of each cell's error after clamping at zero.

    A cell with true count ``t`` and discrete Laplace noise ``Z`` publishes
    ``max(t + Z, 0)``; its error is ``max(Z, -t)``. With ``c = (1-a)/(1+a)``:
    mean ``a**(t+1) / (1 - a**2)``; second moment ``E[Z**2] - c S2(t+1) +
    t**2 c S0(t+1)`` with ``S_r(n) = sum_{j>=n} j**r a**j``.

    Parameters
    ----------
    truth : array-like of int
        True counts, ``>= 0``.
    scale : float

    Returns
    -------
    mean, variance : numpy.ndarray

    Examples
    --------
    >>> mean, var = clamped_moments([0, 1000], 1.0)
    >>> round(float(mean[0]), 4), float(mean[1])  # a / (1 - a**2) at t = 0
    (0.4255, 0.0)
    """
    t = np.asarray(truth, dtype=np.float64)
    a = math.exp(-1.0 / scale)
    c = (1.0 - a) / (1.0 + a)
    s0, _, s2 = _tail_sums(a, t + 1.0)
    mean = np.power(a, t + 1.0) / (1.0 - a * a)
    second = 2.0 * a / (1.0 - a) ** 2 - c * s2 + t**2 * c * s0
    return mean, np.maximum(second - mean**2, 0.0)


def clamp_skip_threshold(scale: float, cells_times_draws: int, tolerance: float = 1e-9) -> int:
    """Return the count ``T`` at and above which clamping is treated as unable to bite.

    A cell with true count ``t`` is clamped when ``Z < -t``, with probability
    ``a**(t+1) / (1 + a)``. ``T`` is the smallest count for which that, times
    the number of cell draws simulated, is below ``tolerance``: the chance
    that skipping the clamp on such cells changes any simulated answer at all.

    Examples
    --------
    >>> clamp_skip_threshold(1.0, 200 * 10**6)
    39
    """
    a = math.exp(-1.0 / scale)
    need = math.log(tolerance * (1.0 + a) / max(cells_times_draws, 1)) / math.log(a)
    return max(math.ceil(need) - 1, 0)


def sigma_of(scale: float) -> float:
    """Return the standard deviation of one discrete Laplace cell (``sqrt(2a)/(1-a)``)."""
    return float(noise_std(KIND, scale))


def check_floor(value: Any) -> float:
    """Return a ``report_floor``: a finite count ``>= 0``."""
    from spatialdp._validation import check_number

    return check_number(value, "report_floor", low=0.0,
                        fix="pass the smallest true answer worth a relative error, e.g. 25")


def bucket_expectations(scale: float, m: NDArray[np.int64], truth: NDArray[np.int64],
                        matrix: Any, true_answer: NDArray[np.float64], floor: float, *,
                        clamp: bool, model: Any = None) -> dict[str, float]:
    """Return the analytic figures of one bucket of queries (see :func:`measure_query_error`).

    Flat, no clamping: exact (:func:`flat_figures`, :func:`mixture_quantile`).
    Flat with clamping: bias and RMS exact (:func:`clamped_moments`); mean
    absolute error and p95 exact when clamping cannot bite in the bucket, NaN
    otherwise. Hierarchical: RMS exact from the consistency's linear map; mean
    absolute error and p95 from the exact laws of up to :data:`LAWS_PER_BUCKET`
    evenly spaced queries (NaN for clamped answers).
    """
    nan = float("nan")
    above = (true_answer >= floor) & (true_answer > 0)
    if model is not None:
        return _hierarchical_expectations(model, matrix, true_answer, above, clamp)
    fig = flat_figures(scale, np.unique(m))
    lookup = {int(k): i for i, k in enumerate(np.unique(m))}
    pos = np.array([lookup[int(k)] for k in m])
    mae = fig["mean_abs_error"][pos]
    var1 = sigma_of(scale) ** 2
    bites = False
    if clamp:
        mean_c, var_c = clamped_moments(truth, scale)
        bias_q = np.asarray(matrix @ mean_c, dtype=np.float64)
        var_q = np.asarray(matrix @ var_c, dtype=np.float64)
        second = var_q + bias_q**2
        bites = bool((bias_q > 1e-9 * np.sqrt(var1)).any())
        bias = float(bias_q.mean())
    else:
        second = m.astype(np.float64) * var1
        bias = 0.0
    return {
        "expected_rms": float(np.sqrt(second.mean())),
        "expected_mean_abs_error": nan if bites else float(mae.mean()),
        "expected_p95_abs_error": nan if bites else mixture_quantile(scale, m),
        "expected_bias": bias,
        "expected_mean_rel_error": nan if bites or not above.any()
        else float((mae[above] / true_answer[above]).mean()),
    }


#: Queries per bucket whose law is inverted for the hierarchical mean and p95 (evenly spaced).
LAWS_PER_BUCKET = 12


def _hierarchical_expectations(model: Any, matrix: Any, true_answer: NDArray[np.float64],
                               above: NDArray[np.bool_], clamp: bool) -> dict[str, float]:
    """Return a hierarchical bucket's figures: RMS exact on all queries, the rest from laws."""
    from spatialdp.queries.weighted_sum import WeightedSum, mixture_quantile_abs

    nan = float("nan")
    var = model.query_variance(matrix)
    out = {"expected_rms": float(np.sqrt(var.mean())), "expected_bias": 0.0,
           "expected_mean_abs_error": nan, "expected_p95_abs_error": nan,
           "expected_mean_rel_error": nan}
    if clamp:
        out["expected_rms"] = out["expected_bias"] = nan  # clamped leaves: simulation only
        return out
    pick = np.unique(np.linspace(0, matrix.shape[0] - 1, LAWS_PER_BUCKET).round().astype(int))
    weights = model.tree.query_weights(matrix[pick])
    laws = [WeightedSum.of_query(weights, model.scales, j) for j in range(pick.size)]
    mae = np.array([law.mean_abs() for law in laws])
    # scale the sampled laws' mean absolute error to every query by its exact sd
    ratio = float(np.mean(mae / np.sqrt(var[pick])))
    out["expected_mean_abs_error"] = float(np.sqrt(var).mean() * ratio)
    out["expected_p95_abs_error"] = mixture_quantile_abs(laws)  # the sample's pooled law
    if above.any():
        out["expected_mean_rel_error"] = float((np.sqrt(var[above]) * ratio
                                                / true_answer[above]).mean())
    return out
