"""Audit of the Flower wrapper's evaluation round (spatialdp.flower.release_evaluation).

One round's replies, as Flower delivers them (encoded bounded reports of 240
clients in four states), released per region; the neighbouring round replaces
one client's reply (its loss at one end of the clip range, then the other),
participation fixed, one pair per region. Passes at its claim; a half-scale
noise variant is caught.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr")

from spatialdp.audit import audit
from spatialdp.audit.cases import REGIONS, HalfScale, _states
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


def _release(replies: dict[str, Any], target: Any) -> np.ndarray:
    from spatialdp.flower.evaluation import release_evaluation

    out = release_evaluation(replies, partition=_states(), metrics=[SPEC], epsilon=EPSILON,
                             target=target, min_cohort=50)
    return out.report["loss"]["value"].reindex(list(REGIONS)).to_numpy()


def test_flower_evaluation_round_passes_at_its_claim() -> None:
    result = audit(_release, _pairs(), epsilon=EPSILON, draws=50_000, rng=21,
                   name="flower release_evaluation")
    assert result.passed, result.summary()
    assert result.measured >= 0.5 * EPSILON, result.summary()


def test_flower_evaluation_with_half_the_noise_is_caught() -> None:
    result = audit(_release, _pairs(), epsilon=EPSILON, draws=50_000, rng=22,
                   rewrite=lambda mech, i: HalfScale(mech), name="flower [half_scale]")
    assert not result.passed, result.summary()
    assert result.measured >= 1.25 * EPSILON, result.summary()
