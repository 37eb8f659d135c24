from __future__ import annotations

import math

import matplotlib
import numpy as np
import pytest

from spatialdp.exceptions import InvalidInput, InvalidSpec
from spatialdp.federated.metrics import (
    HistogramSpec,
    MetricRegistry,
    MetricSpec,
    calibrate_clip,
    clip_tradeoff,
    min_cohort_for,
)
from spatialdp.federated.release import predicted_error_bar
from spatialdp.viz import plot_clip_tradeoff

matplotlib.use("Agg")


@pytest.mark.parametrize(
    ("low", "high", "message"),
    [
        (0.0, math.inf, "clip_high=inf is not finite"),
        (-math.inf, 1.0, "clip_low=-inf is not finite"),
        (0.0, math.nan, "clip_high=nan is not finite"),
        (1.0, 1.0, "clip_low=1.0 must be below clip_high=1.0"),
        (0.0, None, "clip_high=None is not a number"),
    ],
)
def test_metric_spec_refuses_unbounded(low: float, high: float, message: str) -> None:
    with pytest.raises(InvalidSpec, match=message):
        MetricSpec("loss", low, high)


def test_histogram_spec_refuses_bad_edges() -> None:
    with pytest.raises(InvalidSpec, match="unsorted edges 2.0 and 1.0"):
        HistogramSpec("h", edges=(0.5, 2.0, 1.0))
    with pytest.raises(InvalidSpec, match="duplicate edges 1.0 and 1.0"):
        HistogramSpec("h", edges=(0.5, 1.0, 1.0))
    with pytest.raises(InvalidSpec, match="edge=inf is not finite"):
        HistogramSpec("h", edges=(0.5, math.inf))
    with pytest.raises(InvalidSpec, match="at least one edge"):
        HistogramSpec("h", edges=())
    with pytest.raises(InvalidSpec, match="mass_cap=0.0 must be positive"):
        HistogramSpec("h", edges=(1.0,), mass_cap=0)


def test_histogram_buckets_and_key_version() -> None:
    spec = HistogramSpec("err", edges=(0.5, 1, 2, 5, 10, 25))
    assert spec.n_buckets == 7
    assert spec.bucket_of([0.1, 0.5, 0.51, 30]).tolist() == [0, 0, 1, 6]
    bumped = HistogramSpec("err", edges=(0.1, 0.5, 1, 2, 5, 10), version="2")
    assert bumped.key != spec.key


def test_registry_refuses_silent_change_and_non_specs() -> None:
    reg = MetricRegistry([MetricSpec("loss", 0, 2.5)])
    reg.register(MetricSpec("loss", 0, 3.0, version="2"))  # a version bump is fine
    assert reg["loss"].version == "2"
    with pytest.raises(InvalidSpec, match="already registered as loss@2 with other bounds"):
        reg.register(MetricSpec("loss", 0, 4.0, version="2"))
    with pytest.raises(InvalidSpec, match="give a MetricSpec or HistogramSpec"):
        reg.register({"name": "loss", "clip_high": None})  # type: ignore[arg-type]
    with pytest.raises(InvalidSpec, match="no metric named 'ratio'"):
        reg["ratio"]


def test_calibrate_clip_and_tradeoff() -> None:
    rng = np.random.default_rng(0)
    losses = rng.lognormal(-1.0, 1.5, 2000)
    bound = calibrate_clip(losses)
    assert abs((losses > bound).mean() - 0.01) < 0.002
    table = clip_tradeoff(losses, epsilon=1.0, cohort=2000)
    assert table.share_clipped.is_monotonic_decreasing
    assert table.noise_half_width.is_monotonic_increasing
    # Clipping at the maximum costs far more noise than at the 99th percentile.
    p99, p100 = table.set_index("percentile").loc[[99.0, 100.0], "noise_half_width"]
    assert p100 > 3 * p99
    ax = plot_clip_tradeoff(table)
    assert len(ax.patches) + len(ax.figure.axes[1].patches) == 2 * len(table)
    with pytest.raises(InvalidInput, match="not finite|some not finite"):
        calibrate_clip([1.0, np.nan])
    with pytest.raises(InvalidInput, match=r"percentile=0 is outside \(0, 100\]"):
        calibrate_clip([1.0], 0)


def test_min_cohort_for_meets_target_exactly() -> None:
    spec = MetricSpec("loss", 0.0, 2.5)
    for target in (0.5, 0.05, 0.013):
        n = min_cohort_for(target, spec, epsilon=0.7)
        assert predicted_error_bar(spec.sensitivity, 0.7, n) <= target
        assert n == 1 or predicted_error_bar(spec.sensitivity, 0.7, n - 1) > target
    with pytest.raises(InvalidInput, match="target_error_bar=0 must be a positive"):
        min_cohort_for(0, spec, 1.0)
    with pytest.raises(InvalidInput, match="epsilon=-1 must be a positive"):
        min_cohort_for(0.1, spec, -1)


def test_labels_and_units_are_presentation_only() -> None:
    """label/unit change titles, never the fingerprint, key, equality or the registry."""
    from spatialdp.federated.metrics import HistogramSpec as _H
    from spatialdp.federated.metrics import MetricRegistry as _R
    from spatialdp.federated.metrics import MetricSpec as _M

    plain = _M("loss", 0.0, 4.0)
    labelled = _M("loss", 0.0, 4.0, label="squared position error", unit="m²")
    assert labelled.fingerprint == plain.fingerprint
    assert labelled.key == plain.key
    assert labelled == plain
    assert hash(labelled) == hash(plain)
    assert labelled.title == "squared position error (m²)"
    assert plain.title == "loss"
    _R([plain]).register(labelled)  # a relabel is not a changed spec
    hist = _H("abs_error_m", (0.5, 1.0), label="position error", unit="m")
    assert hist.fingerprint == _H("abs_error_m", (0.5, 1.0)).fingerprint
    assert hist.tail_title == "share of position error > 1 m"
    described = hist.describe()
    assert [b["column"] for b in described["buckets"]] == [
        "abs_error_m_b0", "abs_error_m_b1", "abs_error_m_b2"]
    assert described["buckets"][0]["low"] is None
    assert described["buckets"][2]["low"] == 1.0
    assert labelled.describe()["unit"] == "m²"


@pytest.mark.parametrize("kwargs", [{"label": ""}, {"unit": 3}, {"label": "  "}])
def test_labels_refuse_junk(kwargs: dict) -> None:
    from spatialdp.exceptions import InvalidSpec as _Invalid
    from spatialdp.federated.metrics import MetricSpec as _M

    with pytest.raises(_Invalid, match="must be a non-empty string or None"):
        _M("loss", 0.0, 1.0, **kwargs)
