from __future__ import annotations

import numpy as np
import pandas as pd

from spatialdp.federated.incidents import (
    estimate_quantile,
    persistently_empty_buckets,
    ratio_pinned_at_clip,
    stale_clip_bound,
    suspiciously_good_region,
)
from spatialdp.federated.metrics import HistogramSpec
from spatialdp.federated.release import HistogramRelease

SPEC = HistogramSpec("err", edges=(0.5, 1, 2, 5, 10, 25))


def _frame(values: list[float], bars: list[float], cohorts: list[int]) -> pd.DataFrame:
    idx = pd.Index([f"r{i}" for i in range(len(values))], name="region_id")
    return pd.DataFrame({"value": values, "error_bar": bars, "cohort": cohorts,
                         "suppressed": False}, index=idx)


def _hist(values: list[float], bar: float = 0.01) -> HistogramRelease:
    return HistogramRelease(SPEC.key, tuple(SPEC.labels), np.array(values), bar, 0.05,
                            bar / 3, 1000, 1.0)


def test_ratio_pinned_at_clip() -> None:
    frame = _frame([1.1, 9.8, 3.0], [0.05, 0.3, 0.1], [500, 400, 600])
    found = ratio_pinned_at_clip(frame, clip=10.0)
    assert [i.region_id for i in found] == ["r1"]
    assert "CRS" in found[0].hint


def test_persistently_empty_bucket() -> None:
    mostly_low = [0.9, 0.08, 0.02, 0.0, 0.0, 0.0, 0.0]
    releases = [_hist(mostly_low, 0.004) for _ in range(3)]
    found = persistently_empty_buckets(releases, rounds=3)
    assert {i.message.split()[1] for i in found} == {"(2,", "(5,", "(10,", ">25"}
    assert all("bump the edge version" in i.hint for i in found)
    assert persistently_empty_buckets(releases[:2], rounds=3) == []


def test_suspiciously_good_region() -> None:
    frame = _frame([0.5, 0.9, 1.0, 1.1], [0.5, 0.05, 0.05, 0.05], [30, 900, 800, 700])
    found = suspiciously_good_region(frame)
    assert [i.region_id for i in found] == ["r0"]
    assert "cohort" in found[0].hint
    clear = _frame([0.5, 0.9, 1.0, 1.1], [0.01, 0.05, 0.05, 0.05], [900] * 4)
    assert suspiciously_good_region(clear) == []


def test_stale_clip_from_published_histogram_only() -> None:
    improved = _hist([0.6, 0.3, 0.08, 0.02, 0.0, 0.0, 0.0])
    assert estimate_quantile(improved, SPEC, 0.99) == 5.0
    found = stale_clip_bound(improved, SPEC, current_clip=25.0)
    assert found
    assert "about 5" in found[0].hint
    assert stale_clip_bound(improved, SPEC, current_clip=6.0) == []
