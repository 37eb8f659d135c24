"""Alerts that respect error bars, drift across releases, and incident detectors.

Every published mean carries Laplace noise of a known scale, so the
distribution of a difference between two releases under "nothing changed" is
known exactly. An alert fires only when the observed difference exceeds the
``1 - alpha`` quantile of that noise difference: with no real change it fires
with probability ``alpha`` exactly, and a movement well inside the error bars
cannot fire.

A ratio estimate (a ``present`` metric, and every metric under add/remove
neighbours) is a noisy sum over a noisy count, ``(S + L_s) / (n + L_n)``. Its
noise is, to first order, ``(L_s - R L_n) / n``: two Laplace noises of scales
``b_s / n`` and ``|R| b_n / n``, read from the published noisy sum, count,
value and scales (the delta method; the second-order term is of relative size
``b_n / n``, below 2% at the demo's floor). Comparisons and trends of ratio
estimates use the exact quantile of that linearised noise
(:func:`noise_sum_quantile`); their false-alarm rate is checked by Monte Carlo
at the floor in the tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from spatialdp._validation import (
    check_alpha,
    check_flag,
    check_integer,
    check_number,
    check_real,
    fail,
)
from spatialdp.exceptions import InvalidInput, PartitionMismatch
from spatialdp.federated.release import MetricRelease
from spatialdp.privacy.combined_noise import (
    difference_threshold,
    noise_sum_quantile,
    noise_sum_quantiles,
    ratio_noise_scales,
)

__all__ = [
    "Comparison",
    "compare_releases",
    "compare_reports",
    "drift",
    "latest_baseline",
]


@dataclass(frozen=True)
class Comparison:
    """The outcome of comparing two releases of one metric."""

    difference: float
    threshold: float
    alpha: float
    fired: bool

    def __bool__(self) -> bool:
        return self.fired


def _same_baseline(a: MetricRelease, b: MetricRelease) -> None:
    for rel in (a, b):
        if not isinstance(rel, MetricRelease):
            raise InvalidInput(f"expected two MetricRelease objects, got {type(rel).__name__}")
        if rel.estimator != "mean":
            raise InvalidInput(
                f"{rel.metric} is a ratio estimate, whose noise is not one Laplace; compare "
                "ratio estimates by their intervals (conf_int) instead")
        _release_numbers(rel)
    if a.metric != b.metric:
        raise PartitionMismatch(
            f"cannot compare {a.metric} with {b.metric}: a new spec version starts a new "
            "comparison baseline"
        )
    if a.partition_version != b.partition_version:
        raise PartitionMismatch(
            f"cannot compare releases on partition versions {a.partition_version!r} and "
            f"{b.partition_version!r}: a new partition starts a new comparison baseline"
        )


def _release_numbers(rel: MetricRelease) -> None:
    """Refuse a release whose numbers could not come from a release (edited or built by hand)."""
    fix = "compare the releases aggregate_metric returned, unmodified"
    for name in ("value", "noise_scale", "clip_low", "clip_high"):
        check_number(getattr(rel, name), f"{rel.metric}.{name}", fix=fix)
    if not check_real(rel.noise_scale, "noise_scale") > 0:
        raise fail(f"{rel.metric}.noise_scale", rel.noise_scale, "is not positive", fix)
    if not rel.clip_low < rel.clip_high:
        raise fail(f"{rel.metric}.clip_low", rel.clip_low, "is not below clip_high", fix)
    check_integer(rel.cohort, f"{rel.metric}.cohort", low=1, fix=fix)


def _sampling_sd(sampling_sd: ArrayLike | None, same_clients: bool, clip_range: ArrayLike,
                 cohort_a: ArrayLike, cohort_b: ArrayLike) -> NDArray[np.float64]:
    """Return standard deviation of the sampling error of a difference of two cohort means.

    Fresh cohorts (the default) add ``s * sqrt(1/n_a + 1/n_b)``; without a given
    ``s`` the bound ``(high - low) / 2`` on the spread of a bounded value is used
    (conservative: valid for any population). ``same_clients`` means no sampling
    error (a fixed panel or a re-release).
    """
    a = np.asarray(cohort_a, dtype=np.float64)
    b = np.asarray(cohort_b, dtype=np.float64)
    if check_flag(same_clients, "same_clients"):
        if sampling_sd is not None:
            raise InvalidInput("sampling_sd= and same_clients=True contradict each other; "
                               "give one")
        return np.zeros(np.broadcast(a, b).shape)
    if sampling_sd is None:
        sd = np.asarray(clip_range, dtype=np.float64) / 2.0
    else:
        sd = np.asarray(check_number(sampling_sd, "sampling_sd", low=0.0, high=1e150,
                                     fix="pass the per-client standard deviation (>= 0)"))
    return np.asarray(sd * np.sqrt(1.0 / a + 1.0 / b))


def compare_releases(current: MetricRelease, previous: MetricRelease, *, alpha: float = 0.01,
                     sampling_sd: float | None = None, same_clients: bool = False
                     ) -> Comparison:
    """Fire only when two releases differ by more than their combined uncertainty.

    The threshold is the exact ``1 - alpha`` quantile of what the difference would
    be if nothing had changed, so the false-alarm rate is at most ``alpha``:

    - default (fresh cohorts, the seeds' normal mode): each round draws a fresh
      cohort from an unchanged population. The sampling error
      ``s * sqrt(1/n_a + 1/n_b)`` is added to the two Laplace noises, with ``s``
      the bound ``(clip_high - clip_low) / 2`` on the spread of a bounded value,
      valid for any population (conservative), or ``sampling_sd`` when you know a
      tighter one (from a public pilot or a published histogram).
    - ``same_clients=True``: the two releases measure the same clients (a fixed
      panel, or a re-release); only the two Laplace noises differ.

    (The seed's rule "difference > bar_a + bar_b" has an uncalibrated
    false-alarm rate.)

    Raises
    ------
    PartitionMismatch
        The releases belong to different metric or partition versions.

    Examples
    --------
    >>> from spatialdp.federated import MetricSpec, aggregate_metric, device_report
    >>> from spatialdp.privacy import Simulation
    >>> spec = MetricSpec("loss", 0.0, 2.0)
    >>> def round_of(level, seed):
    ...     frame = pd.DataFrame({"client_id": np.arange(5000), "loss": level})
    ...     return aggregate_metric(device_report(frame, loss_spec=spec), spec, epsilon=1.0,
    ...                             target=Simulation(rng=seed))
    >>> bool(compare_releases(round_of(0.5, 1), round_of(0.5, 2)))
    False
    >>> bool(compare_releases(round_of(0.9, 3), round_of(0.5, 4)))
    True
    """
    _same_baseline(current, previous)
    level = check_alpha(alpha)
    spread = _sampling_sd(sampling_sd, same_clients, current.clip_high - current.clip_low,
                          current.cohort, previous.cohort)
    threshold = float(difference_threshold(current.noise_scale, previous.noise_scale, level,
                                           spread))
    diff = current.value - previous.value
    return Comparison(diff, threshold, level, bool(abs(diff) > threshold))


_FRAME_KEYS = ("partition_version", "metric")
#: Most rounds a drift window may span.
MAX_WINDOW = 10_000


_NUMERIC = ("value", "noise_std", "cohort", "clip_low", "clip_high")
#: What a ratio estimate's frame publishes to recompute its interval at any level.
_RATIO_COLUMNS = ("noisy_sum", "noisy_count", "sum_scale", "count_scale", "estimator")


def _numbers(frame: pd.DataFrame, columns: tuple[str, ...], what: str) -> pd.DataFrame:
    """Return ``frame`` with ``columns`` as float64 (NA as NaN); refuse non-numeric columns."""
    out = {}
    for column in columns:
        try:
            out[column] = pd.to_numeric(frame[column]).astype("float64")
        except (TypeError, ValueError):
            raise InvalidInput(f"{what} column {column!r} is not numeric (dtype "
                               f"{frame[column].dtype}); give numbers, NaN where "
                               "suppressed") from None
    return frame.assign(**out)


def _published_numbers(data: pd.DataFrame, published: NDArray[np.bool_], what: str,
                       *, cohorts: bool) -> None:
    """Refuse published rows whose numbers no release produces (a value needs its noise)."""
    rows = data[published]
    bad = ~np.isfinite(rows.value) | ~np.isfinite(rows.noise_std) | (rows.noise_std <= 0) | (
        ~np.isfinite(rows.clip_low) | ~np.isfinite(rows.clip_high)
        | (rows.clip_high <= rows.clip_low))
    if cohorts:
        bad |= ~(rows.cohort >= 1)
    if bad.any():
        raise InvalidInput(
            f"{what}: {int(bad.sum())} published rows have a value, noise_std, cohort or clip "
            f"range no release gives (first: {rows.index[bad.to_numpy()][0]!r}); pass the "
            "frames of a RegionalReport, unmodified")


def _check_frames(*frames: pd.DataFrame) -> list[pd.DataFrame]:
    needed = {"value", "noise_std", "cohort", "suppressed", "clip_low", "clip_high",
              *_FRAME_KEYS}
    out = []
    for frame in frames:
        if not isinstance(frame, pd.DataFrame) or not needed <= set(frame.columns):
            have = list(frame.columns) if isinstance(frame, pd.DataFrame) else type(frame)
            raise InvalidInput(
                f"expected a regional report frame with columns {sorted(needed)}, got {have}; "
                "pass report[metric] of a RegionalReport")
        if frame.columns.duplicated().any() or not frame.index.is_unique:
            raise InvalidInput("the report frame repeats a column name or a region; pass "
                               "report[metric] of a RegionalReport")
        if "estimator" in frame.columns and (frame.estimator == "ratio").any():
            missing = sorted(set(_RATIO_COLUMNS) - set(frame.columns))
            if missing or (frame.estimator != "ratio").any():
                raise InvalidInput(
                    f"the ratio-estimate frame lacks {missing} or mixes estimators; pass "
                    "report[metric] of a RegionalReport, unmodified")
        flags = frame["suppressed"]
        if not (pd.api.types.is_bool_dtype(flags.dtype) or flags.isin([0, 1]).all()):
            raise InvalidInput("the report frame's 'suppressed' column is not True/False; pass "
                               "report[metric] of a RegionalReport")
        out.append(_numbers(frame, _NUMERIC, "the report frame").assign(
            suppressed=flags.astype(bool)))
    return out


def compare_reports(current: pd.DataFrame, previous: pd.DataFrame, *, alpha: float = 0.01,
                    sampling_sd: float | None = None, same_clients: bool = False
                    ) -> pd.DataFrame:
    """Compare two regional report frames of one metric, region by region.

    Parameters
    ----------
    current, previous : GeoDataFrame
        Frames of :class:`~spatialdp.federated.regional.RegionalReport` for the same
        metric and partition (their ``metric`` and ``partition_version`` columns
        are checked).
    alpha : float
        False-alarm rate per region when nothing changed.
    sampling_sd : float, optional
        Per-client standard deviation when the rounds draw fresh cohorts; default
        the bound ``(clip_high - clip_low) / 2``. See :func:`compare_releases`.
    same_clients : bool
        The two rounds measured the same clients (no sampling error).

    Returns
    -------
    DataFrame
        Per region published in both: ``difference``, ``threshold``, ``fired``.

    Examples
    --------
    >>> from spatialdp.datasets import synthetic_fleet, us_states_partition
    >>> from spatialdp.federated import MetricSpec, device_report, regional_report
    >>> from spatialdp.privacy import Simulation
    >>> states, spec = us_states_partition(), MetricSpec("loss", 0.0, 4.0)
    >>> def week(level, seed):
    ...     fleet = synthetic_fleet(30_000, rng=seed)
    ...     frame = pd.DataFrame({"client_id": fleet.device_id, "region_id": fleet.region_id,
    ...                           "loss": np.where(fleet.region_id == "CO", level, 1.0)})
    ...     clients = device_report(frame, loss_spec=spec, partition=states)
    ...     return regional_report(clients, states, [spec], epsilon=1.0, min_cohort=200,
    ...                            target=Simulation(rng=seed))["loss"]
    >>> alerts = compare_reports(week(3.0, 2), week(1.0, 1))
    >>> alerts.index[alerts.fired].tolist()
    ['CO']
    """
    current, previous = _check_frames(current, previous)
    level = check_alpha(alpha)
    try:
        same_regions = set(current.index) == set(previous.index)
    except TypeError:
        raise InvalidInput("the report frames have unhashable region ids; pass report[metric] "
                           "of a RegionalReport") from None
    if not same_regions:
        raise PartitionMismatch(
            "the two reports cover different regions; compare frames of one partition")
    previous = previous.reindex(current.index)
    for key in _FRAME_KEYS:
        now = pd.unique(current[key].astype(str))
        then = pd.unique(previous[key].astype(str))
        if len(now) != 1 or len(then) != 1 or now[0] != then[0]:
            raise PartitionMismatch(
                f"the two reports differ in {key}: {list(now)} vs {list(then)}; a new version "
                "starts a new comparison baseline")
    both = ((~current.suppressed) & (~previous.suppressed)).to_numpy()
    fresh = not check_flag(same_clients, "same_clients")
    _published_numbers(current, both, "current", cohorts=fresh)
    _published_numbers(previous, both, "previous", cohorts=fresh)
    scale_now = current.noise_std.to_numpy()[both] / np.sqrt(2.0)
    scale_then = previous.noise_std.to_numpy()[both] / np.sqrt(2.0)
    width = (current.clip_high - current.clip_low).to_numpy(dtype=float)[both]
    spread = _sampling_sd(sampling_sd, same_clients, width,
                          current.cohort.to_numpy(dtype=float, na_value=np.nan)[both],
                          previous.cohort.to_numpy(dtype=float, na_value=np.nan)[both])
    diff = (current.value - previous.value)[both]
    if _is_ratio(current):
        threshold = _ratio_threshold(current[both], previous[both], level, spread)
    else:
        threshold = difference_threshold(scale_now, scale_then, level, spread)
    return pd.DataFrame(
        {"difference": diff, "threshold": threshold, "fired": np.abs(diff) > threshold},
        index=diff.index,
    )


def _is_ratio(frame: pd.DataFrame) -> bool:
    return "estimator" in frame.columns and bool((frame.estimator == "ratio").any())


def _ratio_threshold(current: pd.DataFrame, previous: pd.DataFrame, alpha: float,
                     spread: NDArray[np.float64]) -> NDArray[np.float64]:
    """Return the ``1 - alpha`` quantile of the noise on a difference of two ratio estimates."""
    scales = np.hstack([ratio_noise_scales(current), ratio_noise_scales(previous)])
    return noise_sum_quantiles(scales, spread, alpha)


def latest_baseline(history: pd.DataFrame) -> pd.DataFrame:
    """Return the rows of each region since its last partition or spec version change.

    A changed partition or spec starts a new baseline (seed 001): earlier rounds
    measured something else and must not enter a trend.
    """
    data = history.sort_values(["region_id", "round_index"], kind="stable")
    key = data["partition_version"].astype(str) + "|" + data["metric"].astype(str)
    changed = key.ne(key.groupby(data["region_id"]).shift()).astype(np.int64)
    era = changed.groupby(data["region_id"]).cumsum()
    last = era.groupby(data["region_id"]).transform("max")
    return data[era == last]


def drift(history: pd.DataFrame, *, window: int = 8, alpha: float = 0.01,
          sampling_sd: float | None = None, same_clients: bool = False) -> pd.DataFrame:
    """Trend over the last ``window`` releases of each region, tested against the noise.

    A weighted least-squares slope of value on round (weights 1 / variance of
    each release's error). Its noise is a weighted sum of the releases' Laplace
    noises plus the normal sampling error of fresh cohorts (by default with the
    conservative spread ``(clip_high - clip_low) / 2``, or ``sampling_sd``; none
    with ``same_clients``); the drift is flagged when ``|slope|`` exceeds the
    exact ``1 - alpha`` quantile of that sum (:func:`noise_sum_quantile`), not a
    normal approximation, whose lighter tails would raise too many alarms.
    Rounds before a region's last partition or spec version change are left out.

    Parameters
    ----------
    history : DataFrame
        The concatenated report frames of one metric over rounds
        (``pd.concat([r["loss"] for r in reports]).reset_index()``): columns
        ``region_id``, ``round_index``, ``value``, ``noise_std``, ``cohort``,
        ``clip_low``, ``clip_high``, ``metric``, ``partition_version``;
        suppressed rounds are NaN and skipped.
    window : int
        Number of most recent published rounds per region (at least 3).
    alpha : float
        False-alarm rate per region.
    sampling_sd : float, optional
        Per-client standard deviation when each round draws a fresh cohort.
    same_clients : bool
        Every round measured the same clients.

    Returns
    -------
    DataFrame
        Indexed by region: ``slope`` (per round), ``se``, ``z``, ``threshold``,
        ``rounds``, ``drifting``.

    Examples
    --------
    >>> rounds = np.arange(1, 7)
    >>> history = pd.DataFrame({
    ...     "region_id": np.repeat(["CO", "UT"], 6), "round_index": np.tile(rounds, 2),
    ...     "value": np.r_[1.0 + 0.3 * rounds, np.full(6, 1.0)], "noise_std": 0.01,
    ...     "cohort": 5000, "clip_low": 0.0, "clip_high": 4.0, "metric": "ratio@1",
    ...     "partition_version": "v1"})
    >>> drift(history).drifting.to_dict()
    {'CO': True, 'UT': False}
    """
    needed = {"region_id", "round_index", "value", "noise_std", "cohort", "clip_low",
              "clip_high", *_FRAME_KEYS}
    if not isinstance(history, pd.DataFrame) or not needed <= set(history.columns):
        have = set(history.columns) if isinstance(history, pd.DataFrame) else set()
        raise InvalidInput(f"history lacks columns {sorted(needed - have)}; concatenate the "
                           "report frames of one metric and reset_index()")
    span = check_integer(window, "window", low=3, high=MAX_WINDOW,
                         fix="use at least 3 rounds for a trend")
    level = check_alpha(alpha)
    fresh = not check_flag(same_clients, "same_clients")
    if history.columns.duplicated().any():
        raise InvalidInput("history repeats a column name; concatenate the report frames of "
                           "one metric and reset_index()")
    try:
        mixed = len(pd.unique(history["metric"].astype(str))) > 1 and history[
            "region_id"].is_unique
    except TypeError:
        raise InvalidInput("history's region_id holds unhashable values") from None
    if mixed:
        raise PartitionMismatch("history mixes metrics; give one metric's frames")
    history = _numbers(history, (*_NUMERIC, "round_index"), "history")
    if history["round_index"].isna().any() or not np.isfinite(history["round_index"]).all():
        raise InvalidInput("history has rows without a finite round_index; every row needs "
                           "the round it was published in")
    try:
        repeated = history.duplicated(["region_id", "round_index"])
    except TypeError:
        raise InvalidInput("history's region_id holds unhashable values") from None
    if repeated.any():
        raise InvalidInput(f"history has {int(repeated.sum())} repeated (region_id, "
                           "round_index) rows; keep one row per region and round")
    try:
        data = latest_baseline(history.dropna(subset=["value", "noise_std"]))
    except TypeError:
        raise InvalidInput("history's region_id mixes kinds of ids that cannot be sorted "
                           "(e.g. numbers and text); give one kind") from None
    _published_numbers(data, np.ones(len(data), dtype=bool), "history", cohorts=fresh)
    data = data.groupby("region_id", sort=True).tail(span)
    laplace = data.noise_std.to_numpy(dtype=np.float64) / np.sqrt(2.0)  # ratio: sd / sqrt 2
    cohort = data.cohort.to_numpy(dtype=np.float64, na_value=np.nan)
    width = (data.clip_high - data.clip_low).to_numpy(dtype=np.float64)
    sampling_var = _sampling_sd(sampling_sd, same_clients, width, cohort, np.inf) ** 2
    w = 1.0 / (2.0 * laplace**2 + sampling_var)
    x = data["round_index"].to_numpy(dtype=np.float64)
    y = data.value.to_numpy(dtype=np.float64)
    codes, regions = pd.factorize(data.region_id, sort=True)
    sums = {name: np.bincount(codes, weights=v) for name, v in
            {"w": w, "wx": w * x, "wy": w * y, "wxx": w * x * x, "wxy": w * x * y}.items()}
    rounds = np.bincount(codes)
    xbar = sums["wx"] / sums["w"]
    sxx = sums["wxx"] - sums["wx"] * xbar
    with np.errstate(divide="ignore", invalid="ignore"):
        slope = (sums["wxy"] - xbar * sums["wy"]) / sxx
        # slope = sum_i c_i y_i with c_i = w_i (x_i - xbar) / sxx: its noise is sum_i c_i e_i.
        c = w * (x - xbar[codes]) / sxx[codes]
    # Rows are sorted by region, so each region's rows are one contiguous block.
    blocks = np.cumsum(rounds)[:-1]
    # Each release's Laplace scales: a mean's one, a ratio estimate's two linearised ones.
    scales = ratio_noise_scales(data) if _is_ratio(data) else laplace[:, None]
    threshold = np.array([
        noise_sum_quantile((cr[:, None] * sr).ravel(), float(np.sqrt(np.sum(cr**2 * vr))),
                           level) if cr.size >= 3 else np.inf
        for cr, sr, vr in zip(np.split(c, blocks), np.split(scales, blocks),
                              np.split(sampling_var, blocks), strict=True)
    ])  # one exact quantile per region, cached by shape
    with np.errstate(divide="ignore", invalid="ignore"):
        se = 1.0 / np.sqrt(sxx)
    out = pd.DataFrame({"slope": slope, "se": se, "rounds": rounds,
                        "threshold": threshold}, index=pd.Index(regions, name="region_id"))
    out["z"] = out.slope / out.se
    out["drifting"] = (out.rounds >= 3) & (out.slope.abs() > out.threshold)
    return out
