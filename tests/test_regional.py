from __future__ import annotations

from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest

from spatialdp.exceptions import BudgetExceeded, ClippingFailure, InvalidInput, PartitionMismatch
from spatialdp.federated.aggregate import simulation_noise
from spatialdp.federated.metrics import HistogramSpec, MetricSpec
from spatialdp.federated.regional import coarsen_count, regional_report
from spatialdp.geo.partition import Partition
from spatialdp.privacy.ledger import PrivacyLedger

LOSS = MetricSpec("loss", 0.0, 2.5)
RATIO = MetricSpec("ratio", 0.0, 10.0)
HIST = HistogramSpec("err", edges=(0.5, 1, 2, 5, 10, 25))


def _reports(partition: Partition, n: int, rng: np.random.Generator) -> pd.DataFrame:
    ids = np.asarray(partition.region_ids)
    weights = np.linspace(1, 30, ids.size)
    region = rng.choice(ids, size=n, p=weights / weights.sum())
    frame = pd.DataFrame({
        "region": region,
        "loss": LOSS.clip(rng.gamma(2.0, 0.3, n)),
        "ratio": RATIO.clip(rng.lognormal(0.0, 0.3, n)),
    })
    hists = rng.dirichlet(np.ones(HIST.n_buckets), size=n)
    for i in range(HIST.n_buckets):
        frame[f"err_{i}"] = hists[:, i]
    return frame


def test_regional_report_one_release_per_round(states_partition: Partition) -> None:
    rng = np.random.default_rng(0)
    reports = _reports(states_partition, 20_000, rng)
    ledger = PrivacyLedger(epoch_budget=10.0)
    report = regional_report(reports, states_partition, [LOSS, RATIO, HIST],
                             epsilon={"loss": 0.5, "ratio": 0.3, "err": 0.2},
                             min_cohort=150, ledger=ledger, epoch=0, round_index=1)
    # One charge for the whole partition: regions compose in parallel, metrics add up.
    audit = ledger.audit(0)
    assert len(audit) == 1
    assert ledger.spent(0, "evaluation.regional") == pytest.approx(1.0)
    assert report.epsilon_total == pytest.approx(1.0)
    loss = report["loss"]
    assert isinstance(loss, gpd.GeoDataFrame) and len(loss) == 48
    cohort = reports.region.value_counts().reindex(states_partition.region_ids, fill_value=0)
    small = cohort < 150
    # Published cohorts are exact; below the floor not even the cohort size is shown.
    np.testing.assert_array_equal(loss.cohort[~small.to_numpy()].to_numpy(dtype=int),
                                  cohort[~small].to_numpy())
    assert loss.cohort[small.to_numpy()].isna().all()
    assert small.any() and (~small).any()
    assert loss.suppressed.to_numpy().tolist() == small.to_numpy().tolist()
    assert loss.value[small.to_numpy()].isna().all() and loss.value[~small.to_numpy()].notna().all()
    assert (loss.reliability[small.to_numpy()] == "suppressed").all()
    assert report.suppressed_regions == coarsen_count(int(small.sum()))
    # The bar is predicted from clip, epsilon and cohort: b ln(20) / n.
    shown = loss[~loss.suppressed]
    np.testing.assert_allclose(shown.error_bar, 2.5 / 0.5 * np.log(20) / shown.cohort)
    hist = report["err"]
    assert set(HIST.labels) <= set(hist.columns)
    assert "loss" in report.summary()


def test_regional_coverage_and_unbiasedness(states_partition: Partition) -> None:
    rng = np.random.default_rng(1)
    reports = _reports(states_partition, 10_000, rng)
    truth = reports.groupby("region").loss.mean().reindex(states_partition.region_ids)
    noise = simulation_noise(rng)
    hits, errors = [], []
    for _ in range(250):
        frame = regional_report(reports, states_partition, [LOSS], epsilon=0.5,
                                min_cohort=50, noise=noise)["loss"]
        shown = ~frame.suppressed
        err = (frame.value - truth)[shown]
        hits.append((err.abs() <= frame.error_bar[shown]).to_numpy())
        errors.append((err / frame.noise_std[shown]).to_numpy())
    rate = np.concatenate(hits).mean()
    n = np.concatenate(hits).size
    assert abs(rate - 0.95) < 4 * np.sqrt(0.95 * 0.05 / n)
    z = np.concatenate(errors)
    assert abs(z.mean()) < 4 / np.sqrt(z.size)


def test_regional_refusals_charge_nothing(states_partition: Partition) -> None:
    rng = np.random.default_rng(2)
    reports = _reports(states_partition, 5_000, rng)
    ledger = PrivacyLedger(epoch_budget=1.0)
    bad = reports.copy()
    bad.loc[0, "loss"] = 1e6
    with pytest.raises(ClippingFailure, match="some device did not clip"):
        regional_report(bad, states_partition, [LOSS], epsilon=0.1, ledger=ledger, epoch=0)
    with pytest.raises(BudgetExceeded, match="evaluation.regional"):
        regional_report(reports, states_partition, [LOSS, RATIO], epsilon=5.0, ledger=ledger,
                        epoch=0)
    tagged = reports.copy()
    tagged.attrs["partition_version"] = "0123456789abcdef"
    with pytest.raises(PartitionMismatch, match="reassign the clients on one partition"):
        regional_report(tagged, states_partition, [LOSS], epsilon=0.1, ledger=ledger, epoch=0)
    with pytest.raises(InvalidInput, match="not in 'us48-states@"):
        regional_report(reports.assign(region="XX"), states_partition, [LOSS], epsilon=0.1)
    with pytest.raises(InvalidInput, match="lack columns \\['ratio'\\]"):
        regional_report(reports.drop(columns="ratio"), states_partition, [RATIO], epsilon=0.1)
    with pytest.raises(InvalidInput, match="every region is below the cohort floor"):
        regional_report(reports, states_partition, [LOSS], epsilon=0.1, min_cohort=10**6)
    with pytest.raises(InvalidInput, match="no epsilon given for metrics \\['ratio'\\]"):
        regional_report(reports, states_partition, [LOSS, RATIO], epsilon={"loss": 0.1})
    assert ledger.spent(0) == 0.0


def test_report_written_atomically(tmp_path: Path, states_partition: Partition) -> None:
    rng = np.random.default_rng(3)
    report = regional_report(_reports(states_partition, 5_000, rng), states_partition,
                             [LOSS, HIST], epsilon=0.5, min_cohort=60,
                             noise=simulation_noise(rng))
    paths = report.write(tmp_path)
    assert sorted(p.name for p in paths) == ["regional_report.csv", "regional_report.gpkg"]
    back = gpd.read_file(tmp_path / "regional_report.gpkg")
    assert len(back) == 48 and "loss.value" in back.columns
    csv = pd.read_csv(tmp_path / "regional_report.csv")
    assert "err.error_bar" in csv.columns
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_coarsen_count() -> None:
    assert [coarsen_count(k) for k in (0, 1, 4, 5, 19, 20)] == ["0", "1-4", "1-4", "5-9",
                                                                 "10-19", "20+"]
