"""Audit of the Flower wrapper's evaluation round (spatialdp.flower.release_evaluation).

One round's replies, as Flower delivers them (encoded bounded reports of 240
clients in four states), released per region; the neighbouring round replaces
one client's reply (its loss at one end of the clip range, then the other),
participation fixed (``"replace"``), one pair per region. Everything the round
publishes passes at its claim (the regional report's every column, the
metrics dict Flower records, the global loss, the reply counts, the warnings),
and so does its noise at the tap; a half-scale noise variant is caught at the
tap, and a round whose metrics dict carries one region's exact mean is caught
on the published path.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr")

from spatialdp.audit import audit
from spatialdp.audit.cases import BROKEN_REGION, REGIONS, HalfScale, _states
from spatialdp.federated import MetricSpec, device_report

SPEC = MetricSpec("loss", 0.0, 4.0)
EPSILON = 1.0


@cache
def _pairs() -> list[tuple[dict[str, Any], dict[str, Any]]]:
    from spatialdp.flower.codec import encode_report

    n = 60 * len(REGIONS)
    examples = pd.DataFrame({"client_id": np.arange(n),
                             "region_id": np.repeat(REGIONS, n // len(REGIONS)),
                             "loss": np.linspace(0.5, 3.5, n)})
    rows = device_report(examples, loss_spec=SPEC, partition=_states())
    replies = {str(c): encode_report(rows.loc[[c]], [SPEC]) for c in rows.index}
    pairs = []
    for client in rows.index[::60]:  # the first client of each region
        ends = []
        for value in (SPEC.clip_low, SPEC.clip_high):
            one = rows.loc[[client]].copy()
            one[SPEC.name] = value
            ends.append({**replies, str(client): encode_report(one, [SPEC])})
        pairs.append((ends[0], ends[1]))
    return pairs


def _release(replies: dict[str, Any], target: Any) -> Any:
    from spatialdp.flower.evaluation import release_evaluation

    return release_evaluation(replies, partition=_states(), metrics=[SPEC], epsilon=EPSILON,
                              target=target, min_cohort=50)


def _exact_region_metric(replies: dict[str, Any], target: Any) -> Any:
    """Broken: the metrics dict Flower records carries one region's exact mean loss."""
    from spatialdp.flower.codec import decode_reports

    out = _release(replies, target)
    frame, _ = decode_reports(replies, [SPEC], _states())
    exact = float(frame.loc[frame.region_id == BROKEN_REGION, SPEC.name].mean())
    out.metrics[f"{SPEC.name}/{BROKEN_REGION}"] = exact
    return out


@pytest.mark.slow  # a long audit run (many releases per input)
def test_what_a_flower_evaluation_round_publishes_passes_at_its_claim() -> None:
    result = audit(_release, _pairs(), epsilon=EPSILON, draws=200, rng=21,
                   name="flower release_evaluation", neighbours="replace")
    assert result.path == "published"
    assert result.passed, result.summary()
    assert result.worst.event.statistic != "none", result.summary()


@pytest.mark.slow  # a long audit run (many releases per input)
def test_the_noise_of_a_flower_evaluation_round_passes_at_its_claim() -> None:
    result = audit(_release, _pairs(), epsilon=EPSILON, draws=50_000, rng=21, path="tap",
                   name="flower release_evaluation")
    assert result.passed, result.summary()
    assert result.measured >= 0.5 * EPSILON, result.summary()


@pytest.mark.slow  # a long audit run (many releases per input)
def test_flower_evaluation_with_half_the_noise_is_caught() -> None:
    result = audit(_release, _pairs(), epsilon=EPSILON, draws=50_000, rng=22, path="tap",
                   rewrite=lambda mech, i: HalfScale(mech), name="flower [half_scale]")
    assert not result.passed, result.summary()
    assert result.measured >= 1.25 * EPSILON, result.summary()


@pytest.mark.slow  # a long audit run (many releases per input)
def test_flower_metrics_with_an_exact_region_mean_are_caught() -> None:
    pair = _pairs()[0]  # the pair of the region whose exact mean leaks
    result = audit(_exact_region_metric, pair, epsilon=EPSILON, draws=150, rng=23,
                   name="flower [exact metric]")
    assert not result.passed, result.summary()
    assert result.measured >= 1.25 * EPSILON, result.summary()
    assert result.event.startswith(f"result.metrics.loss/{BROKEN_REGION}"), result.summary()
