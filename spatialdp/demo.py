"""The main job: one private regional evaluation round, end to end, on shipped data.

On the 48-state partition and a synthetic fleet placed by real city
population, a simulated positioning model (worse in some mountain states,
drifting sideways in Colorado) is evaluated on the devices; the bounded
per-client metrics are securely summed, noised once, charged to a SQLite
ledger, published per state with error bars, checked by the incident
detectors and drawn as an uncertainty choropleth.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

from spatialdp._random import as_generator
from spatialdp._validation import check_epsilon, check_integer, check_number, fail
from spatialdp.datasets import synthetic_fleet, us_states_partition
from spatialdp.federated.aggregate import aggregate_metric
from spatialdp.federated.device import device_report, track_ratio_spec
from spatialdp.federated.health import round_health
from spatialdp.federated.incidents import (
    Incident,
    ratio_pinned_at_clip,
    suspiciously_good_region,
)
from spatialdp.federated.metrics import HistogramSpec, MetricSpec, calibrate_clip, min_cohort_for
from spatialdp.federated.regional import RegionalReport, regional_report
from spatialdp.privacy.ledger import PrivacyLedger
from spatialdp.privacy.target import ReleaseTarget
from spatialdp.simulation import positioning_predictions

__all__ = ["DemoResult", "run_demo"]

log = logging.getLogger(__name__)

#: Where the simulated model is worse (both error components x factor).
WORSE_REGIONS = {"WV": 1.8, "MT": 1.6, "WY": 1.6, "ID": 1.4}
#: Where it drifts sideways (across-track error x factor).
DRIFTING_REGIONS = {"CO": 6.0}
RATIO_CLIP = 10.0
#: Fleet sizes the demo runs (below 1,000 most states fall under the cohort floor).
MIN_DEVICES = 1_000
MAX_DEVICES = 20_000_000


@dataclass
class DemoResult:
    """What the demo produced: the report, the files, the incidents, the ledger."""

    report: RegionalReport
    files: list[Path]
    incidents: list[Incident]
    ledger_summary: str
    seconds: float


def run_demo(
    out: str | Path,
    *,
    devices: int = 200_000,
    participation: float = 0.5,
    seed: int = 0,
    epsilon_per_metric: float = 0.4,
) -> DemoResult:
    """Run one private regional evaluation round and write its outputs into ``out``.

    Parameters
    ----------
    out : path
        Output folder: ``regional_report.gpkg``, ``regional_report.csv``,
        ``ratio_choropleth.png``, ``loss_choropleth.png``,
        ``abs_error_m_choropleth.png`` and ``ledger.sqlite``.
    devices : int
        Fleet size (at least 200,000 for the documented run).
    participation : float
        Share of the fleet selected into this round's cohort.
    seed : int
        Seed of the SIMULATION (fleet, model errors, selection). The release noise
        comes from OS entropy and takes no seed.
    epsilon_per_metric : float
        Privacy loss of each regional metric release.
    """
    start = time.perf_counter()
    if not isinstance(out, (str, os.PathLike)) or not str(out).strip():
        raise fail("out", out, "is not a folder path", "pass a folder such as 'spatialdp-demo'")
    devices = check_integer(devices, "devices", low=MIN_DEVICES, high=MAX_DEVICES,
                            fix=f"pass a fleet size from {MIN_DEVICES:,} to {MAX_DEVICES:,}")
    share = check_number(participation, "participation", low=0.0, high=1.0, low_open=True,
                         fix="pass the share of the fleet selected, in (0, 1], e.g. 0.5")
    eps = check_epsilon(epsilon_per_metric, "epsilon_per_metric")
    rng = as_generator(seed, "seed")
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise fail("out", out, "is a file", "pass a folder (it is created if missing)")
    folder.mkdir(parents=True, exist_ok=True)
    partition = us_states_partition()

    # Clip bounds come from a held-out pilot fleet, never from the cohort measured.
    pilot = positioning_predictions(synthetic_fleet(20_000, rng=rng, partition=partition),
                                    rng=rng, region_error_factor=WORSE_REGIONS,
                                    sideways_drift=DRIFTING_REGIONS)
    # Devices clip each example's loss, so the bound comes from per-example losses.
    loss_spec = MetricSpec("loss", 0.0, round(calibrate_clip(pilot.loss, 99.0), 2))
    ratio_spec = track_ratio_spec(RATIO_CLIP)
    hist_spec = HistogramSpec("abs_error_m", edges=(0.25, 0.5, 1.0, 2.0, 4.0, 8.0))
    min_cohort = min_cohort_for(0.25, ratio_spec, eps)

    fleet = synthetic_fleet(devices, rng=rng, partition=partition)
    selected = fleet[rng.random(len(fleet)) < share]
    status = rng.choice(["returned", "dropped", "rejected"], size=len(selected),
                        p=[0.93, 0.06, 0.01])
    returned = selected[status == "returned"]
    examples = positioning_predictions(returned, rng=rng, region_error_factor=WORSE_REGIONS,
                                       sideways_drift=DRIFTING_REGIONS)

    # On the devices: bounded per-client numbers only, tagged with specs and partition.
    clients = device_report(examples, loss_spec=loss_spec, hist_spec=hist_spec,
                            ratio_clip=RATIO_CLIP, partition=partition)

    ledger = PrivacyLedger(folder / "ledger.sqlite", epoch_budget=10.0)
    epoch = max(ledger.epochs(), default=-1) + 1  # each run of the demo is a new epoch

    def target(why: str) -> ReleaseTarget:
        return ReleaseTarget(ledger, epoch, who="spatialdp demo", why=why, round_index=1)

    report = regional_report(
        clients, partition, [loss_spec, ratio_spec, hist_spec],
        epsilon={"loss": eps, "ratio": eps, "abs_error_m": eps / 2},
        min_cohort=min_cohort, target=target("regional evaluation round of the model"),
    )
    national = aggregate_metric(clients, loss_spec, epsilon=0.1, target=target("national loss"))
    health = round_health(status, selected.region_id.to_numpy(), partition, epsilon=0.2,
                          target=target("round health"))
    incidents = ratio_pinned_at_clip(report["ratio"], RATIO_CLIP) + suspiciously_good_region(
        report["loss"])

    files = report.write(folder)
    files += _draw(report, folder)
    summary = ledger.summary(epoch)
    ledger.close()
    seconds = time.perf_counter() - start
    lines = [
        report.summary(),
        f"national {national.summary()}",
        health.summary(),
        f"cohort floor {min_cohort} (error bar on the ratio <= 0.25 at eps "
        f"{eps:g}); loss clip {loss_spec.clip_high:g} m^2 from a pilot fleet",
        "incidents:" if incidents else "incidents: none",
        *[f"  {i}" for i in incidents],
        f"ledger (epoch {epoch}):",
        summary.to_string(),
    ]
    return DemoResult(report, files, incidents, "\n".join(lines), seconds)


def _draw(report: RegionalReport, folder: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from spatialdp.viz.maps import plot_uncertainty_choropleth, save_figure

    paths = []
    for metric, title in (("ratio", "across/along-track error ratio"),
                          ("loss", "clipped mean loss (m^2)"),
                          ("abs_error_m", "share of position errors above 8 m")):
        fig, ax = plt.subplots(figsize=(11, 6.5))
        plot_uncertainty_choropleth(report[metric], ax=ax)
        fig.suptitle(f"{title}: private regional report by state", fontsize=13, x=0.5, y=1.0)
        path = folder / f"{metric}_choropleth.png"
        save_figure(fig, path)
        plt.close(fig)
        paths.append(path)
    return paths
