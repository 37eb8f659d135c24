"""The flwr-free parts of the Flower integration: wire format, device helper, release."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from spatialdp.datasets import synthetic_fleet, us_states_partition
from spatialdp.exceptions import BudgetExceeded, InvalidInput, InvalidSpec
from spatialdp.federated import HistogramSpec, MetricSpec, device_report
from spatialdp.flower.client import bounded_report, registration_properties
from spatialdp.flower.codec import (
    KEY_DEVICE_SPECS,
    KEY_PARTITION,
    KEY_REGION,
    KEY_SPECS,
    METRIC_PREFIX,
    decode_reports,
    encode_report,
    specs_from_config,
    specs_to_config,
)
from spatialdp.flower.evaluation import release_evaluation
from spatialdp.privacy import PrivacyLedger, ReleaseTarget, Simulation

LOSS = MetricSpec("loss", 0.0, 3.0)
HIST = HistogramSpec("abs_error", edges=(0.25, 0.5, 0.75))
SPECS = [LOSS, HIST]


@pytest.fixture(scope="module")
def states():
    return us_states_partition()


@pytest.fixture(scope="module")
def replies(states):
    """500 devices' bounded reports, computed by the device module (one call, vectorised)."""
    fleet = synthetic_fleet(4_000, rng=3)
    fleet = fleet[fleet.region_id.isin(["CA", "TX", "NY", "FL"])].head(500)
    rng = np.random.default_rng(0)
    n = len(fleet)
    examples = pd.DataFrame({
        "client_id": np.repeat(fleet.device_id.to_numpy(), 4),
        "region_id": np.repeat(fleet.region_id.to_numpy(), 4),
        "loss": rng.exponential(1.0, 4 * n), "error": rng.random(4 * n)})
    rows = device_report(examples, loss_spec=LOSS, hist_spec=HIST, partition=states)
    return {f"c{c}": encode_report(rows.loc[[c]], SPECS) for c in rows.index}, rows


def test_specs_round_trip_and_tampering():
    config = {KEY_SPECS: specs_to_config(SPECS)}
    assert specs_from_config(config) == SPECS
    tampered = config[KEY_SPECS].replace('"clip_high": 3.0', '"clip_high": 30.0')
    with pytest.raises(InvalidSpec, match="does not match its fingerprint"):
        specs_from_config({KEY_SPECS: tampered})
    with pytest.raises(InvalidInput, match="has no 'spatialdp/specs'"):
        specs_from_config({"lr": 0.1})
    with pytest.raises(InvalidInput, match="does not parse"):
        specs_from_config({KEY_SPECS: "[{]"})


def test_device_clips_and_sends_only_what_was_asked(states):
    config = {KEY_SPECS: specs_to_config(SPECS), "lr": 0.1}
    local = pd.DataFrame({"loss": [0.5, 1e6, 1.0], "error": [0.1, 0.9, 0.3],
                          "secret": [1.0, 2.0, 3.0]})
    report = bounded_report(local, config, partition=states, region_id="CO")
    assert report[METRIC_PREFIX + "loss"] == pytest.approx((0.5 + 3.0 + 1.0) / 3)
    expected = {KEY_REGION, KEY_PARTITION, KEY_DEVICE_SPECS, "spatialdp/device_module_version",
                METRIC_PREFIX + "loss", *(METRIC_PREFIX + c for c in HIST.columns)}
    assert set(report) == expected  # no count_bucket, no raw column, no example count
    masses = [report[METRIC_PREFIX + c] for c in HIST.columns]
    assert sum(masses) == pytest.approx(HIST.mass_cap)


def test_device_refusals(states):
    config = {KEY_SPECS: specs_to_config(SPECS)}
    with pytest.raises(InvalidInput, match="is not a region of"):
        registration_properties("ZZ", states)
    with pytest.raises(InvalidInput, match="needs an 'error' column"):
        bounded_report(pd.DataFrame({"loss": [1.0]}), config, partition=states, region_id="CO")
    two = {KEY_SPECS: specs_to_config([LOSS, MetricSpec("other", 0, 1)])}
    with pytest.raises(InvalidInput, match="one loss metric"):
        bounded_report(pd.DataFrame({"loss": [1.0]}), two, partition=states, region_id="CO")


def test_decode_drops_each_bad_reply_by_reason(states, replies):
    good, _ = replies
    ids = list(good)
    bad = dict(good)
    bad[ids[0]] = {**good[ids[0]], METRIC_PREFIX + "loss": 7.0}
    bad[ids[1]] = {**good[ids[1]], KEY_PARTITION: "other@1"}
    bad[ids[2]] = {**good[ids[2]], KEY_DEVICE_SPECS: "loss=abc;abs_error=def"}
    bad[ids[3]] = {**good[ids[3]], METRIC_PREFIX + "abs_error_0": math.nan}
    bad[ids[4]] = {"raw_loss": 0.3}
    bad[ids[5]] = {**good[ids[5]], "raw_loss": 123.456}
    registered = {c: str(m[KEY_REGION]) for c, m in good.items()}
    registered[ids[6]] = "VT"
    frame, dropped = decode_reports(bad, SPECS, states, regions=registered)
    assert dropped == {"no spatialdp report": 1, "partition version": 1,
                       "region differs from registration": 1, "spec fingerprint": 1,
                       "missing or non-finite value": 1, "out of bounds": 1}
    assert len(frame) == len(good) - 6
    assert ids[5] in frame.index
    assert "raw_loss" not in frame.columns


def test_release_is_noised_unbiased_and_reports_its_noise(states, replies):
    good, rows = replies
    truth = rows.groupby("region_id", observed=True)["loss"].mean()
    draws, stds = [], []
    for seed in range(50):
        out = release_evaluation(good, partition=states, metrics=[LOSS], epsilon=0.5,
                                 target=Simulation(rng=seed), min_cohort=40)
        draws.append(out.metrics["loss/CA"])
        stds.append(out.metrics["loss.noise_std"])
        assert out.used == len(good)
        assert not out.dropped
    frame = out.report["loss"]
    published = frame[~frame.suppressed]
    # Deterministic: the global noise is the cohort-weighted sum of the regional noises.
    w = published.cohort.to_numpy(dtype=float)
    expected_std = np.sqrt((w**2 * published.noise_std.to_numpy() ** 2).sum()) / w.sum()
    assert stds[-1] == pytest.approx(expected_std)
    # Noise was added (no draw equals the truth) and the release is unbiased (5 SE).
    draws = np.asarray(draws)
    se = frame.loc["CA", "noise_std"] / np.sqrt(draws.size)
    assert (draws != truth["CA"]).all()
    assert abs(draws.mean() - truth["CA"]) < 5 * se


def test_release_refusals_charge_nothing(states, replies):
    good, _ = replies
    with PrivacyLedger(":memory:", epoch_budget=2.0) as ledger:
        before = ledger.remaining(0, "evaluation.regional")
        with pytest.raises(InvalidInput, match="below the cohort floor"):
            release_evaluation(good, partition=states, metrics=SPECS, epsilon=0.1,
                               target=ReleaseTarget(ledger, epoch=0), min_cohort=10_000)
        with pytest.raises(BudgetExceeded, match="exceeds its cap"):
            release_evaluation(good, partition=states, metrics=SPECS, epsilon=1.0,
                               target=ReleaseTarget(ledger, epoch=0), min_cohort=40)
        with pytest.raises(InvalidInput, match="hold no usable bounded report"):
            release_evaluation({"a": {"loss": 1.0}}, partition=states, metrics=SPECS,
                               epsilon=0.1, target=ReleaseTarget(ledger, epoch=0))
        with pytest.raises(InvalidInput, match="loss_metric"):
            release_evaluation(good, partition=states, metrics=SPECS, epsilon=0.1,
                               target=ReleaseTarget(ledger, epoch=0), loss_metric="abs_error")
        assert ledger.remaining(0, "evaluation.regional") == before
