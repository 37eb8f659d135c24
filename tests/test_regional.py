"""Regional reports: one charged release per round, honest bars, refusals that cost nothing."""

from __future__ import annotations

from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest

from spatialdp.datasets import load_us_states, us_states_partition
from spatialdp.exceptions import BudgetExceeded, ClippingFailure, InvalidInput, PartitionMismatch
from spatialdp.federated import (
    HistogramSpec,
    MetricSpec,
    aggregate_metric,
    calibration_specs,
    device_report,
    regional_report,
)
from spatialdp.geo.partition import Partition
from spatialdp.privacy.ledger import PrivacyLedger
from spatialdp.privacy.target import ReleaseTarget, Simulation
from tests._clients import histogram_columns, tagged

LOSS = MetricSpec("loss", 0.0, 2.5)
RATIO = MetricSpec("ratio", 0.0, 10.0)
HIST = HistogramSpec("err", edges=(0.5, 1, 2, 5, 10, 25))
ROAD_RATIO = MetricSpec("ratio", 0.0, 10.0, present="track_present")
Z6 = 4.89  # two-sided normal quantile at alpha = 1e-6


def _regions(partition: Partition, n: int, rng: np.random.Generator) -> np.ndarray:
    ids = np.asarray(partition.region_ids)
    weights = np.linspace(1, 30, ids.size)
    return rng.choice(ids, size=n, p=weights / weights.sum())


def _reports(partition: Partition, n: int, rng: np.random.Generator) -> pd.DataFrame:
    hists = rng.dirichlet(np.ones(HIST.n_buckets), size=n)
    return tagged({"loss": LOSS.clip(rng.gamma(2.0, 0.3, n)),
                   "ratio": RATIO.clip(rng.lognormal(0.0, 0.3, n)),
                   **histogram_columns(HIST, hists)},
                  [LOSS, RATIO, HIST], partition=partition,
                  region_id=_regions(partition, n, rng))


def test_regional_report_one_release_per_round(states_partition: Partition) -> None:
    rng = np.random.default_rng(0)
    reports = _reports(states_partition, 20_000, rng)
    ledger = PrivacyLedger(epoch_budget=10.0)
    report = regional_report(reports, states_partition, [LOSS, RATIO, HIST],
                             epsilon={"loss": 0.5, "ratio": 0.3, "err": 0.2},
                             min_cohort=150,
                             target=ReleaseTarget(ledger, 0, round_index=1, why="test"))
    # One charge for the whole partition: regions compose in parallel, metrics add up.
    assert len(ledger.audit(0)) == 1
    assert ledger.spent(0, "evaluation.regional") == pytest.approx(1.0)
    assert report.epsilon_total == pytest.approx(1.0)
    loss = report["loss"]
    assert isinstance(loss, gpd.GeoDataFrame)
    assert len(loss) == 48
    cohort = reports.region_id.value_counts().reindex(states_partition.region_ids, fill_value=0)
    small = (cohort < 150).to_numpy()
    # Published cohorts are exact; below the floor not even the cohort size is shown.
    np.testing.assert_array_equal(loss.cohort[~small].to_numpy(dtype=int), cohort[~small])
    assert loss.cohort[small].isna().all()
    assert small.any()
    assert (~small).any()
    assert loss.suppressed.to_numpy().tolist() == small.tolist()
    assert loss.value[small].isna().all()
    assert loss.value[~small].notna().all()
    assert (loss.reliability[small] == "suppressed").all()
    assert report.suppressed_regions == int(small.sum())  # exact: the flags are published
    # The bar is predicted from clip, epsilon and cohort: b ln(20) / n.
    shown = loss[~loss.suppressed]
    np.testing.assert_allclose(shown.error_bar, 2.5 / 0.5 * np.log(20) / shown.cohort)
    assert set(HIST.labels) <= set(report["err"].columns)
    assert set(loss.metric) == {"loss@1"}
    assert set(loss.round_index) == {1}
    assert "loss" in report.summary()
    assert "SIMULATION" not in report.summary()
    ledger.close()


def test_regional_coverage_and_unbiasedness(states_partition: Partition) -> None:
    rng = np.random.default_rng(1)
    reports = _reports(states_partition, 10_000, rng)
    truth = reports.groupby("region_id").loss.mean().reindex(states_partition.region_ids)
    sim = Simulation(rng)
    hits, hits_99, errors = [], [], []
    for _ in range(250):
        report = regional_report(reports, states_partition, [LOSS], epsilon=0.5,
                                 min_cohort=50, target=sim)
        frame = report["loss"]
        shown = ~frame.suppressed
        err = (frame.value - truth)[shown]
        hits.append((err.abs() <= frame.error_bar[shown]).to_numpy())
        ci = report.conf_int("loss", alpha=0.01)[shown]
        hits_99.append(((ci.ci_low <= truth[shown]) & (truth[shown] <= ci.ci_high)).to_numpy())
        errors.append((err / frame.noise_std[shown]).to_numpy())
    for level, got in ((0.95, np.concatenate(hits)), (0.99, np.concatenate(hits_99))):
        assert abs(got.mean() - level) < Z6 * np.sqrt(level * (1 - level) / got.size)
    z = np.concatenate(errors)
    assert abs(z.mean()) < Z6 / np.sqrt(z.size)


def _one_region_changed(reports: pd.DataFrame, region: object, dtype: object) -> pd.DataFrame:
    ids = reports["region_id"].astype(object).to_numpy().copy()
    ids[0] = region
    return reports.assign(region_id=pd.Series(ids, index=reports.index, dtype=dtype))


def test_categorical_region_ids_give_the_same_report(states_partition: Partition) -> None:
    # Categories no client uses (here one outside the partition) are not refused.
    reports = _reports(states_partition, 5_000, np.random.default_rng(4))
    ids = [*states_partition.region_ids, "XX"]
    coded = reports.assign(region_id=pd.Categorical(reports["region_id"], categories=ids))
    as_text, as_codes = (regional_report(r, states_partition, [LOSS], epsilon=0.5,
                                         target=Simulation(rng=3), min_cohort=20)
                         for r in (reports, coded))
    pd.testing.assert_frame_equal(as_text["loss"], as_codes["loss"])


def test_regional_refusals_charge_nothing(states_partition: Partition) -> None:
    rng = np.random.default_rng(2)
    reports = _reports(states_partition, 5_000, rng)
    ledger = PrivacyLedger(epoch_budget=1.0)
    target = ReleaseTarget(ledger, 0)
    bad = reports.copy()
    bad.iloc[0, 0] = 1e6
    other = Partition.from_geodataframe(load_us_states().iloc[:10], "state")
    cases: list[tuple[type[Exception], str, dict[str, object]]] = [
        (ClippingFailure, "some device did not clip", {"client_reports": bad}),
        (BudgetExceeded, "evaluation.regional", {"metrics": [LOSS, RATIO], "epsilon": 5.0}),
        (PartitionMismatch, "reassign every client on one partition",
         {"client_reports": pd.concat([reports.iloc[:10].assign(partition_version="0123"),
                                       reports.iloc[10:]])}),
        (InvalidInput, "not in 'us48-states@", {"client_reports": reports.assign(region_id="XX")}),
        (InvalidInput, r"^1 clients are in regions that are not in 'us48-states@\w+' "
                       r"\(first: \['XX'\]\)",
         {"client_reports": _one_region_changed(reports, "XX", "category")}),
        (InvalidInput, "^1 client reports have no region_id",
         {"client_reports": _one_region_changed(reports, None, object)}),
        (InvalidInput, "no 'region_id' column",
         {"client_reports": reports.drop(columns="region_id")}),
        (InvalidInput, "no 'partition_version' column",
         {"client_reports": reports.drop(columns="partition_version")}),
        (InvalidInput, "lack columns \\['ratio'\\]",
         {"client_reports": reports.drop(columns="ratio"), "metrics": [RATIO]}),
        (InvalidInput, "every region is below the cohort floor", {"min_cohort": 10**6}),
        (InvalidInput, "no value for metrics \\['ratio'\\]",
         {"metrics": [LOSS, RATIO], "epsilon": {"loss": 0.1}}),
        (InvalidInput, "values for unknown metrics \\['lost'\\]",
         {"epsilon": {"loss": 0.1, "lost": 0.1}}),
        (InvalidInput, "repeat the names \\['loss'\\]", {"metrics": [LOSS, LOSS]}),
        (InvalidInput, "min_cohort=nan is not finite", {"min_cohort": float("nan")}),
        (InvalidInput, "min_cohort=0 is below", {"min_cohort": 0}),
        (InvalidInput, "alpha=nan is not finite", {"alpha": float("nan")}),
        (InvalidInput, "repeated value", {"client_reports": pd.concat([reports, reports])}),
        (InvalidInput, "partition must be a Partition", {"partition": "us48"}),
        (PartitionMismatch, "assigned on partition version",
         {"partition": other, "client_reports": reports}),
        (InvalidInput, "clipped under another spec",
         {"metrics": [MetricSpec("loss", 0.0, 19.0)]}),
        (InvalidInput, "non-empty list of specs", {"metrics": []}),
    ]
    for error, message, change in cases:
        kwargs: dict[str, object] = {"client_reports": reports, "partition": states_partition,
                                     "metrics": [LOSS], "epsilon": 0.1, "target": target,
                                     **change}
        with pytest.raises(error, match=message):
            regional_report(**kwargs)  # type: ignore[arg-type]
    assert ledger.spent(0) == 0.0
    assert len(ledger.audit()) == 0
    ledger.close()


def test_ratio_estimator_for_a_metric_some_clients_lack(states_partition: Partition) -> None:
    # Road mode: 40% of clients have no example near a road. Their ratio is absent,
    # not 0: the published ratio is the mean among clients that have one.
    rng = np.random.default_rng(4)
    n = 30_000
    present = rng.random(n) < 0.6
    ratio = np.where(present, RATIO.clip(rng.lognormal(1.0, 0.4, n)), 0.0)
    reports = tagged({"ratio": ratio, "track_present": present.astype(int)}, [ROAD_RATIO],
                     partition=states_partition, region_id=_regions(states_partition, n, rng))
    frame = reports[reports.track_present == 1]
    truth = frame.groupby("region_id").ratio.mean().reindex(states_partition.region_ids)
    sim = Simulation(rng)
    hits, errors = [], []
    for _ in range(150):
        out = regional_report(reports, states_partition, [ROAD_RATIO], epsilon=1.0,
                              min_cohort=100, target=sim)["ratio"]
        shown = ~out.suppressed
        hits.append(((out.ci_low <= truth) & (truth <= out.ci_high))[shown].to_numpy())
        errors.append((out.value - truth)[shown].to_numpy())
        assert (out.estimator == "ratio").all()
    # The interval is conservative: it covers at least 95% (alpha = 1e-6 test).
    hit = np.concatenate(hits)
    assert hit.mean() >= 0.95 - Z6 * np.sqrt(0.05 * 0.95 / hit.size)
    # Nearly unbiased (the ratio of noisy sums has O(1/n^2) bias), nowhere near
    # the 40% downward bias of counting absent clients as 0.
    err = np.concatenate(errors)
    assert abs(err.mean()) < Z6 * err.std() / np.sqrt(err.size) + 0.01
    assert float(truth.mean()) > 2.5


def test_calibration_gap_is_published_as_a_ratio_estimator() -> None:
    # Each client predicts 0.9 with outcome 0 in bucket 4 (gap 0.9) on 40% of
    # clients, and nothing there on the others. A mean over ALL clients gives 0.36.
    rng = np.random.default_rng(5)
    n = 4000
    has = rng.random(n) < 0.4
    rows = pd.DataFrame({"client_id": np.arange(n), "p_pred": np.where(has, 0.9, 0.1),
                         "outcome": 0})
    clients = device_report(rows)
    spec = calibration_specs(5)[4]
    rel = aggregate_metric(clients, spec, epsilon=2.0, target=Simulation(rng))
    low, high = rel.conf_int()
    assert low <= 0.9 <= high
    assert abs(rel.value - 0.9) < 0.05
    assert abs(rel.cohort - has.sum()) < 30


def test_mixed_partition_versions_are_refused_after_concat(states_partition: Partition
                                                           ) -> None:
    rng = np.random.default_rng(6)
    states = _reports(states_partition, 2_000, rng)
    other = us_states_partition()  # same content, same version: accepted
    assert other.version == states_partition.version
    coarse = Partition.from_geodataframe(load_us_states().iloc[::2], "state")
    odd = tagged({"loss": np.ones(100)}, [LOSS], partition=coarse,
                 region_id=np.asarray(coarse.region_ids)[:1].repeat(100),
                 client_ids=np.arange(10_000, 10_100))
    mixed = pd.concat([states, odd.reindex(columns=states.columns, fill_value=0.0)])
    mixed["device_specs"] = states.device_specs.iloc[0]
    with pytest.raises(PartitionMismatch, match="assigned on partition version"):
        regional_report(mixed, states_partition, [LOSS], epsilon=0.5, target=Simulation(0))


def test_report_written_atomically_and_labelled(tmp_path: Path, states_partition: Partition,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    report = regional_report(_reports(states_partition, 5_000, rng), states_partition,
                             [LOSS, HIST], epsilon=0.5, min_cohort=60,
                             target=Simulation(rng))
    paths = report.write(tmp_path)
    # A simulation's files say so in their names, columns and metadata.
    assert sorted(p.name for p in paths) == ["regional_report.SIMULATION.csv",
                                             "regional_report.SIMULATION.gpkg",
                                             "regional_report.SIMULATION.json",
                                             "regional_report.SIMULATION.parquet"]
    back = gpd.read_file(tmp_path / "regional_report.SIMULATION.gpkg")
    assert len(back) == 48
    assert "loss_value" in back.columns
    assert set(back.accounting) == {"simulation"}
    csv = pd.read_csv(tmp_path / "regional_report.SIMULATION.csv")
    assert "err_error_bar" in csv.columns
    assert '"simulated": true' in (tmp_path / "regional_report.SIMULATION.json").read_text()
    # A writer that fails midway leaves the earlier file intact and no temporary file.
    before = (tmp_path / "regional_report.SIMULATION.csv").read_bytes()

    def broken(self: pd.DataFrame, path: str, *args: object, **kwargs: object) -> None:
        Path(path).write_text("half a file")
        raise OSError("disk full")

    monkeypatch.setattr(pd.DataFrame, "to_csv", broken)
    with pytest.raises(OSError, match="disk full"):
        report.write(tmp_path)
    assert (tmp_path / "regional_report.SIMULATION.csv").read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_bounded_display_clamps_and_says_it_is_biased(states_partition: Partition) -> None:
    rng = np.random.default_rng(7)
    reports = _reports(states_partition, 3_000, rng)
    with pytest.warns(Warning, match="exceeds the whole clip range"):
        report = regional_report(reports, states_partition, [LOSS], epsilon=0.002,
                                 min_cohort=20, target=Simulation(rng))
    raw = report["loss"].value.dropna()
    assert (raw < 0).any() or (raw > 2.5).any()
    shown = report.bounded("loss")
    assert shown.value.dropna().between(0.0, 2.5).all()
    assert "biased" in shown.attrs["spatialdp"]["bounded"]


def test_coverage_counts_are_one_release_with_honest_bars(states_partition: Partition
                                                          ) -> None:
    from spatialdp.federated import release_coverage
    from spatialdp.federated.device import coverage

    rng = np.random.default_rng(9)
    n = 3000
    # Devices in the western states only: the east must not be called covered.
    west = states_partition.region_ids[:20]
    fleet_regions = rng.choice(np.asarray(west), size=n)
    centroids = load_us_states().set_index("state").geometry.representative_point()
    lon = centroids.x.reindex(fleet_regions).to_numpy()
    lat = centroids.y.reindex(fleet_regions).to_numpy()
    rows = coverage(lon, lat, np.arange(n), states_partition, max_cells=2)
    truth = np.bincount(rows.matrix.indices, minlength=48)
    ledger = PrivacyLedger(epoch_budget=5.0)
    out = release_coverage(rows, states_partition, epsilon=0.5, target=ReleaseTarget(ledger, 0))
    assert len(ledger.audit(0)) == 1
    assert ledger.spent(0) == pytest.approx(0.5)
    assert out.accounting["accounting"] == "ledger"
    assert "confidently covered" in out.summary()
    ledger.close()
    sim = Simulation(rng)
    hits, false_cover = [], []
    for _ in range(300):
        frame = release_coverage(rows, states_partition, epsilon=0.5, target=sim).frame
        hits.append(np.abs(frame.clients.to_numpy() - truth) <= frame.error_bar.to_numpy())
        false_cover.append(frame.covered.to_numpy()[truth == 0])
    rate = np.mean(hits)
    assert rate >= 0.95 - Z6 * np.sqrt(0.05 * 0.95 / np.size(hits))
    assert np.mean(false_cover) <= 0.05 + Z6 * np.sqrt(0.05 * 0.95 / np.size(false_cover))
    other = Partition.from_geodataframe(load_us_states().iloc[:5], "state")
    with pytest.raises(PartitionMismatch, match="recompute them on the released partition"):
        release_coverage(rows, other, epsilon=0.5, target=sim)


def test_client_ids_of_two_types_are_refused_before_any_charge(
        states_partition: Partition) -> None:
    # issue 21: client 7 as an int and as a str "7" counted as two clients
    reports = _reports(states_partition, 400, np.random.default_rng(3))
    reports.index = pd.Index([*range(399), "7"], dtype=object, name="client_id")
    ledger = PrivacyLedger(":memory:", epoch_budget=5.0)
    target = ReleaseTarget(ledger, 0, why="id types")
    match = "client_id mixes ids of types int and str"
    with pytest.raises(InvalidInput, match=match):
        regional_report(reports, states_partition, [LOSS], epsilon=0.5, target=target,
                        min_cohort=1)
    with pytest.raises(InvalidInput, match=match):
        aggregate_metric(reports, LOSS, epsilon=0.5, target=target)
    as_column = reports.reset_index()  # the ids in a column: the same refusal
    with pytest.raises(InvalidInput, match=match):
        regional_report(as_column, states_partition, [LOSS], epsilon=0.5, target=target,
                        min_cohort=1)
    with pytest.raises(InvalidInput, match="client_id holds booleans"):
        aggregate_metric(reports.iloc[:2].set_axis(pd.Index([True, False], name="client_id")),
                         LOSS, epsilon=0.5, target=target)
    assert len(ledger.audit(0)) == 0
    # numpy and Python ints are one kind: accepted
    reports.index = pd.Index([np.int64(i) if i % 2 else i for i in range(400)], dtype=object,
                             name="client_id")
    regional_report(reports, states_partition, [LOSS], epsilon=0.5, target=target, min_cohort=1)
    assert len(ledger.audit(0)) == 1


def test_flower_replies_keyed_by_7_and_str_7_are_one_repeated_client(
        states_partition: Partition) -> None:
    # the codec reads every reply's client id as text: 7 and "7" are one id, repeated, and
    # both replies are dropped (never counted as two clients)
    from spatialdp.federated.client_reports import spec_tag
    from spatialdp.flower.codec import (
        KEY_DEVICE_SPECS,
        KEY_PARTITION,
        KEY_REGION,
        METRIC_PREFIX,
        decode_reports,
    )

    good = {KEY_REGION: "CA", KEY_PARTITION: states_partition.version,
            KEY_DEVICE_SPECS: spec_tag([LOSS]), METRIC_PREFIX + "loss": 1.5}
    frame, dropped = decode_reports({7: good, "7": good, 8: good}, [LOSS], states_partition)
    assert frame.index.tolist() == ["8"]
    assert dropped == {"repeated client id": 2}
