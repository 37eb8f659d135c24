"""``run_demo``: the monitored epoch end to end, published atomically into one folder."""

from __future__ import annotations

import csv
import datetime as dt
import os
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from spatialdp._atomic import StagedFolder
from spatialdp._random import as_generator
from spatialdp._validation import check_epsilon, check_integer, check_text, fail
from spatialdp.geo import Partition
from spatialdp.privacy.budget import BudgetSplit, Neighbours, check_neighbours
from spatialdp.privacy.ledger import PrivacyLedger
from spatialdp.privacy.target import ReleaseTarget
from spatialdp.schema import NEIGHBOUR_TEXT

from .audit import QueryAudit, query_audit
from .epoch import (
    COVERAGE_EPSILON,
    FAMILY_ALPHA,
    MIN_DRIFT_ROUNDS,
    NATIONAL_EPSILON,
    PARTICIPATION_CAP,
    TRAINING_EPSILON_PER_ROUND,
    WHO,
    EpochPlan,
    EpochResult,
    drift_window,
    plan_epoch,
    run_epoch,
)
from .outputs import (
    alerts_table,
    cohort_sizes,
    draw_choropleths,
    draw_coverage,
    draw_dashboard,
    draw_query_error,
    draw_significance,
    draw_smoothed,
    smooth_loss,
    write_interactive_map,
)
from .progress import Progress
from .world import World, build_world

__all__ = ["EPOCH_BUDGET", "MARKERS", "RUNS_FILE", "SPLIT", "DemoResult",
           "load_partition", "run_demo", "runs_table"]

#: The ledger's epoch budget (pure epsilon) and its split for a new ledger: training 6,
#: evaluation 4, of which 3.2 regional (six rounds at 0.4, the coverage release and the
#: query audit's grid) and 0.8 global (the national loss).
EPOCH_BUDGET = 10.0
SPLIT = BudgetSplit(evaluation_share=0.4, global_share=0.2)
#: Epsilon reserved on evaluation.regional for the query audit's released count grid.
AUDIT_GRID_EPSILON = 0.5
MIN_DEVICES = 10_000
MAX_DEVICES = 20_000_000
MAX_ROUNDS = 24
MAX_MERGES_SHOWN = 6
LEDGER = "ledger.sqlite"
#: The files that make the folder look complete, in publication order (manifest last).
MARKERS = ("model_card.md", "model_card.json", "run.json")
#: The demo's run log: one row per run into this folder (epoch, run id, status).
RUNS_FILE = "demo_runs.csv"
_RUN_COLUMNS = ["epoch", "run_id", "finished", "status", "devices", "rounds", "seed"]


@dataclass
class DemoResult:
    """What a demo run published."""

    out: Path
    files: list[Path]
    summary: str
    seconds: float
    epoch: int
    run_id: str
    timings: dict[str, float]
    world: World
    plan: EpochPlan
    epoch_result: EpochResult
    audit: QueryAudit

    @property
    def reports(self) -> list[Any]:
        """The epoch's regional reports, in round order."""
        return self.epoch_result.reports


def load_partition(path: str | os.PathLike[str], id_column: str | None,
                   name_column: str | None = None) -> Partition:
    """Read a user's polygon layer (GeoPackage, GeoJSON, Shapefile...) as a Partition.

    A layer in another CRS is reprojected to EPSG:4326 by
    :meth:`Partition.from_geodataframe` (the one reprojection path, with a
    :class:`~spatialdp.exceptions.ReprojectedLayerWarning`); ``id_column`` names the
    region ids (default: the first text or integer column with unique values);
    ``name_column`` keeps the regions' names for titles, labels and tooltips.
    """
    import geopandas as gpd

    file = Path(path)
    if not file.exists():
        raise fail("partition", os.fspath(path), "does not exist",
                   "pass a polygon file (GeoPackage, GeoJSON, Shapefile)")
    try:
        frame = gpd.read_file(file)
    except Exception as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise fail("partition", os.fspath(path), f"cannot be read as a polygon layer ({first})",
                   "pass a GeoPackage, GeoJSON or Shapefile of polygons") from None
    if frame.crs is None:
        raise fail("partition", os.fspath(path), "has no CRS",
                   "set the layer's CRS (e.g. in QGIS) and export it again")
    if id_column is None:
        candidates = [c for c in frame.columns if c != frame.geometry.name
                      and frame[c].dtype.kind in "OUiu" and frame[c].is_unique
                      and frame[c].notna().all()]
        if not candidates:
            raise fail("id_column", None, f"cannot be guessed (columns: {list(frame.columns)})",
                       "pass --id-column with a column of unique region ids")
        id_column = str(candidates[0])
    id_column = check_text(id_column, "id_column")
    if id_column not in frame.columns:
        raise fail("id_column", id_column, f"is not a column of {file.name} "
                   f"({[c for c in frame.columns if c != frame.geometry.name]})",
                   "pass --id-column with one of them")
    keep = [id_column]
    if name_column is not None:
        name_column = check_text(name_column, "name_column")
        if name_column not in frame.columns:
            raise fail("name_column", name_column, f"is not a column of {file.name} "
                       f"({[c for c in frame.columns if c != frame.geometry.name]})",
                       "pass --name-column with one of them")
        keep.append(name_column)
    return Partition.from_geodataframe(frame[[*dict.fromkeys(keep), frame.geometry.name]],
                                       id_column, name=file.stem, name_column=name_column)


def runs_table(folder: str | os.PathLike[str]) -> pd.DataFrame:
    """Return the demo's run log of a folder (``demo_runs.csv``), empty when there is none."""
    path = Path(folder) / RUNS_FILE
    if not path.exists():
        return pd.DataFrame(columns=_RUN_COLUMNS)
    try:
        return pd.read_csv(path, dtype={"run_id": str})
    except (OSError, ValueError) as err:
        raise fail("out", os.fspath(folder), f"holds an unreadable {RUNS_FILE} ({err})",
                   f"remove {RUNS_FILE}; the ledger keeps every charge") from err


def _previous_files(out: Path) -> list[str]:
    """Files the previous complete run published (from its manifest), to replace or remove."""
    import json

    manifest = out / "run.json"
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    files = data.get("demo", {}).get("files", []) if isinstance(data, dict) else []
    return [str(f) for f in files if isinstance(f, str) and not Path(f).is_absolute()
            and ".." not in Path(f).parts]


def _check_args(devices: Any, epsilon: Any, rounds: Any, seed: Any
                ) -> tuple[int, float, int, int]:
    n = check_integer(devices, "devices", low=MIN_DEVICES, high=MAX_DEVICES,
                      fix=f"pass a fleet size from {MIN_DEVICES:,} to {MAX_DEVICES:,}")
    eps = check_epsilon(epsilon, "epsilon")
    r = check_integer(rounds, "rounds", low=2, high=MAX_ROUNDS,
                      fix=f"pass 2 to {MAX_ROUNDS} rounds (alerts compare consecutive rounds)")
    as_generator(seed, "seed")  # the simulation's seed: the messages every seed gets
    s = check_integer(seed, "seed", low=0, high=2**63 - 1, fix="pass a whole-number seed >= 0")
    return n, eps, r, s


def run_demo(
    out: str | os.PathLike[str],
    *,
    partition: str | os.PathLike[str] | Partition | None = None,
    id_column: str | None = None,
    name_column: str | None = None,
    devices: int = 200_000,
    epsilon: float = 0.4,
    rounds: int = 6,
    seed: int = 0,
    quiet: bool = True,
    neighbours: Neighbours = "add_remove",
) -> DemoResult:
    """Run a monitored epoch and publish its outputs into ``out`` atomically.

    Parameters
    ----------
    out : path
        Output folder (created if missing). Its ``ledger.sqlite`` is the privacy
        ledger: each run charges a new epoch of it.
    partition : path or Partition, optional
        The report regions: any polygon layer (GeoPackage, GeoJSON, Shapefile)
        with ``id_column``; default the shipped 48 states.
    id_column : str, optional
        Region id column of the ``partition`` file.
    name_column : str, optional
        Column of ``partition`` with the regions' names (titles, labels, tooltips).
    devices : int
        Size of the simulated fleet.
    epsilon : float
        Privacy loss of each round's regional evaluation release (all metrics
        together); ``rounds x epsilon`` must fit the ledger's regional
        evaluation budget of an epoch (3.2) less the coverage release's 0.3 and
        the query-error grid's 0.5 (2.4).
    rounds : int
        Rounds in the epoch (the drift starts at round ``rounds // 2 + 1``).
    seed : int
        Seed of the SIMULATION (fleet, model errors, drop-outs). The cohort
        selection and every published number come from OS entropy.
    quiet : bool
        No progress bars (they are drawn on stderr only when it is a terminal).
    neighbours : {"add_remove", "replace"}, default "add_remove"
        The neighbouring relation of every release. ``"add_remove"`` (the
        default: the outputs are meant to be published) protects whether and
        where a device took part: cohorts, floors and coverage come from noised
        counts, and nothing exact about the fleet or the selection is written.
        ``"replace"`` protects each device's values only; participation is
        public and published exactly.

    Returns
    -------
    DemoResult

    Raises
    ------
    InvalidInput
        A bad argument or partition file, an unwritable folder; nothing is written
        or charged.
    BudgetExceeded, LedgerError
        The ledger refuses the epoch.
    """
    start = time.perf_counter()
    if not isinstance(out, (str, os.PathLike)) or not str(out).strip():
        raise fail("out", out, "is not a folder path", "pass a folder such as 'spatialdp-demo'")
    n, eps, n_rounds, seed = _check_args(devices, epsilon, rounds, seed)
    relation = check_neighbours(neighbours)
    part = (partition if isinstance(partition, Partition) or partition is None
            else load_partition(partition, id_column, name_column))
    _check_budget(SPLIT, eps, n_rounds)
    run_id = secrets.token_hex(4)
    progress = Progress(quiet=quiet)
    folder = Path(out)
    previous = _previous_files(folder) if folder.is_dir() else []
    # The ledger and SQLite's side files are never staged, moved or removed.
    keep = (LEDGER, *(LEDGER + side for side in ("-wal", "-shm", "-journal")))
    with StagedFolder(folder, markers=MARKERS, keep=keep, previous=previous,
                      late=(RUNS_FILE,)) as stage:
        runs = runs_table(stage.out)
        with progress.step("simulated fleet and strata"):
            world = build_world(part, n, seed, n_rounds)
        sim = np.random.default_rng([seed, 1])
        with progress.step("pilot fleet and clip bounds"):
            plan = plan_epoch(world, rounds=n_rounds, epsilon_per_round=eps, rng=sim,
                              neighbours=relation)
        path = stage.out / LEDGER
        new_ledger = not path.exists()
        with PrivacyLedger(path, epoch_budget=EPOCH_BUDGET,
                           split=SPLIT if new_ledger else None) as ledger:
            _check_budget(ledger.split, eps, n_rounds, ledger=os.fspath(path))
            epoch = max(ledger.epochs(), default=-1) + 1
            done = set(runs.loc[runs.status == "complete", "epoch"].astype(int))
            interrupted = _interrupted(ledger, done)
            with progress.step(f"epoch {epoch}: rounds", total=n_rounds, unit="round") as tick:
                result = run_epoch(world, plan, ledger, epoch, run_id=run_id, rng=sim,
                                   tick=tick)
            with progress.step("query-error audit (released grid)", total=3) as tick:
                audit = query_audit(world.partition, world.fleet, seed=seed, tick=tick,
                                    epsilon=AUDIT_GRID_EPSILON, target=ReleaseTarget(
                                        ledger, epoch, who=f"{WHO} run {run_id}",
                                        why="query-error audit: the grid it is measured "
                                            "against"))
            ledger_summary = ledger.summary(epoch)
        with progress.step("maps, dashboard, plots", total=6) as tick:
            files = draw_choropleths(result.reports[-1], stage.path)
            tick(1)
            smoothed, smoothing_notes = smooth_loss(world, plan, result.reports[-1])
            if smoothed is not None:
                files.append(draw_smoothed(result.reports[-1], smoothed, stage.path))
            tick(1)
            files.append(draw_significance(result.reports[-1], plan, result, stage.path))
            tick(1)
            files.append(draw_coverage(world, result, stage.path))
            tick(1)
            files.append(draw_dashboard(world, result, stage.path))
            tick(1)
            files.append(draw_query_error(audit, stage.path))
            files.append(write_interactive_map(result.reports[-1], stage.path))
            tick(1)
        with progress.step("reports and model card"):
            result.reports[-1].write(stage.path)
            alerts = alerts_table(world, plan, result)
            alerts.to_csv(stage.path / "alerts.csv", index=False)
            _write_card(stage.path, stage.out / LEDGER, world, plan, result, audit, epoch, seed,
                        monitoring=_monitoring(plan, alerts), smoothed=smoothed,
                        notes=smoothing_notes)
        seconds = time.perf_counter() - start
        new_runs = pd.concat([runs, pd.DataFrame([{
            "epoch": epoch, "run_id": run_id,
            "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "status": "complete", "devices": n, "rounds": n_rounds, "seed": seed}])],
            ignore_index=True) if len(runs) else pd.DataFrame([{
                "epoch": epoch, "run_id": run_id,
                "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                "status": "complete", "devices": n, "rounds": n_rounds, "seed": seed}])
        new_runs.to_csv(stage.path / RUNS_FILE, index=False, quoting=csv.QUOTE_MINIMAL)
        _stamp_manifest(stage, run_id, epoch, seconds)
        with progress.step("publish"):
            published = stage.publish()
    seconds = time.perf_counter() - start
    summary = _summary(folder, world, plan, result, audit, epoch, run_id, interrupted,
                       ledger_summary, alerts, seconds)
    return DemoResult(out=Path(os.path.abspath(folder)), files=published, summary=summary,
                      seconds=seconds, epoch=epoch, run_id=run_id, timings=progress.seconds,
                      world=world, plan=plan, epoch_result=result, audit=audit)


def _check_budget(split: BudgetSplit, epsilon: float, rounds: int,
                  ledger: str | None = None) -> None:
    """Refuse, before anything runs or is charged, an epoch its ledger's caps cannot pay."""
    caps = split.allocate(EPOCH_BUDGET)
    needs = {"evaluation.regional": rounds * epsilon + AUDIT_GRID_EPSILON + COVERAGE_EPSILON,
             "evaluation.global": NATIONAL_EPSILON,
             "training": min(PARTICIPATION_CAP, rounds) * TRAINING_EPSILON_PER_ROUND}
    where = f" of the ledger {ledger}" if ledger else ""
    for item, need in needs.items():
        cap = float(caps[item])
        if need > cap + 1e-12:
            if item != "evaluation.regional":
                raise fail("ledger", ledger, f"has a {item} cap of {cap:g} per epoch, below the "
                           f"demo's {need:g}", "use a new output folder (a new ledger)")
            room = (cap - need + rounds * epsilon) / rounds
            raise fail("epsilon", epsilon, f"x {rounds} rounds plus the epoch's other "
                       f"releases = {need:g} exceeds the regional evaluation budget of an "
                       f"epoch{where} ({cap:g} of {EPOCH_BUDGET:g})",
                       f"lower --epsilon to at most {room:.4g} or run fewer rounds")


def _coverage_line(plan: EpochPlan, result: EpochResult) -> str:
    """Return the summary's coverage (released counts) and, under replace-one, the merges."""
    cov = result.coverage
    cells = "" if cov.cells is None else (
        f"; H3 cells confirmed reached: {cov.cells.n_confirmed:,} of {len(cov.cells.frame):,}")
    line = (f"coverage (released, epsilon {cov.epsilon:g}): regions confirmed reached "
            f"{cov.regions.n_confirmed} of {len(cov.regions.frame)}{cells}")
    if plan.neighbours == "add_remove":
        return line + "; merges decided on exact pools are not published"
    merges = list(result.state.merges)
    shown = [f"{'+'.join(m.members)} into {'+'.join(m.into)} (round {m.round_index})"
             for m in merges[:MAX_MERGES_SHOWN] if len(m.members) + len(m.into) <= 6]
    text = "; ".join(shown) or "none"
    if len(merges) > len(shown):
        text += f"; {len(merges) - len(shown)} more in strata.json"
    return f"{line}; merges: {text}"


def _interrupted(ledger: PrivacyLedger, done: set[int]) -> list[int]:
    """Return the epochs charged by demo runs that never published (not in ``done``)."""
    audit = ledger.audit()
    if audit.empty:
        return []
    demo = audit[audit.who.astype(str).str.startswith(WHO)]
    return sorted({int(e) for e in demo.epoch} - done)


def _monitoring(plan: EpochPlan, alerts: pd.DataFrame) -> dict[str, Any]:
    """Return the card's alerts and drift (released values only), each with its rounds."""
    window = drift_window(plan.rounds)
    first = plan.rounds - window + 1
    tests = [
        ("round-to-round: each region's ratio against the previous round, rounds 2 to "
         f"{plan.rounds} (family-wise alpha {FAMILY_ALPHA:g} per round over all regions)"
         if plan.rounds >= 2 else "round-to-round: not run (one round)"),
        (f"drift: a trend in each region's ratio over rounds {first} to {plan.rounds}"
         if plan.rounds >= MIN_DRIFT_ROUNDS else
         f"drift: not run (it needs at least {MIN_DRIFT_ROUNDS} rounds; this run has "
         f"{plan.rounds})"),
    ]
    drift = alerts.test != "round-to-round"
    events = alerts.assign(first_round=np.where(drift, first, alerts["round"] - 1))
    return {"metric": "ratio", "alpha": plan.alpha, "tests": tests,
            "events": events[["test", "region_id", "round", "first_round", "statistic",
                              "threshold"]]}


def _write_card(folder: Path, ledger: Path, world: World, plan: EpochPlan,
                result: EpochResult, audit: QueryAudit, epoch: int, seed: int, *,
                monitoring: dict[str, Any], smoothed: Any = None,
                notes: Sequence[str] = ()) -> None:
    """Write the run-folder artefacts the card reads, then the card itself."""
    from spatialdp.cards import ModelCard, write_run_folder

    # The card reads the ledger at RUN_DIR/ledger.sqlite: the live one, linked while the
    # card is built (the link is dropped at publication; the ledger is never moved).
    link = folder / LEDGER
    link.symlink_to(ledger)
    table = audit.reports["flat (clamped)"]
    released = plan.neighbours == "add_remove"
    limitations = [
        f"The fleet, the model's errors and the drift in {world.drifting} (from round "
        f"{world.drift_start}) are simulated (seed {seed}).",
        "The query-error table simulates releases against the released count grid, used as "
        "a plug-in truth: its relative errors and clamping bias are those of that grid, not "
        "of the truth (docs/queries.md).",
        # Under replace-one the card adds its own statement: participation is public.
        *(["Neighbouring relation: add/remove. Whether and where a device took part is "
           "protected: cohorts, floors and coverage are noised counts; the selection's "
           "merges and exact records are not published."] if released else []),
        "The server is trusted: every device's evaluation report reaches the aggregator in "
        "the clear (no secure aggregation), which runs this code (clipping checks, noise "
        "once, the ledger); the guarantee covers what is published, not what the server "
        "sees. A malicious server and timing side channels are out of scope "
        "(docs/threat_model.md).",
        "Clipping bounds every device's influence and biases values near the clip bounds "
        "(the ratio pinned at its clip is flagged as an incident).",
        *(["loss_smoothed.png and the card's small-area section are model-based estimates "
           "(post-processing of the published loss, no epsilon charged): regions labelled "
           "modelled have no published value, and their estimate is a prediction from the "
           "regions' centroids and their neighbours."] if smoothed is not None else []),
        *notes,
    ]
    details = {
        "model_details": {
            "name": "simulated positioning model (spatialdp demo)",
            "description": "A simulated positioning model evaluated by private federated "
                           "regional metrics over one epoch of stratified cohorts.",
        },
        "intended_use": {
            "primary_uses": ["demonstrate a monitored private evaluation epoch"],
            "out_of_scope": ["decisions about real devices: the fleet and model are simulated"],
        },
        "limitations": limitations,
    }
    write_run_folder(
        folder, partition=world.partition, specs=plan.specs, strata=world.strata,
        coverage=result.coverage, merges=[] if released else list(result.state.merges),
        cohort_sizes=None if released else cohort_sizes(result), reports=result.reports,
        query_error=table, epsilon=plan.epsilons, rounds=plan.rounds,
        seeds={"fleet": seed, "model": seed}, epochs=[epoch], alpha=0.05, monitoring=monitoring,
        min_cohort=plan.min_cohort,
        simulated={"fleet": True, "model": True, "selection": False, "noise": False},
        title=f"Model card: simulated positioning model on {world.partition.key}",
        figures={"coverage_map": "coverage_map.png", "ratio_choropleth": "ratio_choropleth.png",
                 "loss_significance": "loss_significance.png",
                 "ratio_timeseries": "ratio_timeseries.png", "query_error": "query_error.png",
                 **({"loss_smoothed": "loss_smoothed.png"} if smoothed is not None else {})},
        details=details, small_area=smoothed)
    ModelCard.from_run(folder).write(folder)


def _stamp_manifest(stage: StagedFolder, run_id: str, epoch: int, seconds: float) -> None:
    """Add the demo's own record to ``run.json``: run id, epoch and every file published."""
    import json

    path = stage.path / "run.json"
    manifest = json.loads(path.read_text(encoding="utf-8"))
    files = stage.staged_files()  # without the kept files (the ledger)
    manifest["demo"] = {"run_id": run_id, "epoch": epoch, "seconds_before_publish":
                        round(seconds, 1), "files": files}
    path.write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def _summary(out: Path, world: World, plan: EpochPlan, result: EpochResult,
             audit: QueryAudit, epoch: int, run_id: str, interrupted: list[int],
             ledger_summary: pd.DataFrame, alerts: pd.DataFrame, seconds: float) -> str:
    rr = alerts[alerts.test == "round-to-round"]
    early = rr[rr.before_drift.astype(bool)]
    fired = ", ".join(f"{r} (round {k})" for r, k in zip(rr.region_id, rr["round"],
                                                          strict=True)) or "none"
    trend = alerts[alerts.test != "round-to-round"]
    coverage = _coverage_line(plan, result)
    last = result.reports[-1]
    flat = audit.reports["flat (clamped)"]
    big = flat.iloc[-1]
    led = ledger_summary
    lines = [
        f"spatialdp demo: epoch {epoch} (run {run_id}) on {world.partition.key} "
        f"({world.partition.n_regions} regions), {len(world.fleet):,} simulated devices, "
        f"{plan.rounds} rounds",
        f"  simulation path (seed {world.seed}): fleet, model errors (worse in "
        f"{', '.join(world.worse)}), sideways drift in {world.drifting} from round "
        f"{world.drift_start}, drop-outs",
        "  release path (OS entropy, charged to the ledger before any noise): cohort "
        "selection and every published number",
        f"  neighbouring relation: {NEIGHBOUR_TEXT[plan.neighbours]}",
        f"  cohorts: {plan.cohort:,} devices/round, sqrt allocation over "
        f"{world.strata.n_strata} strata, at most {plan.participation_cap} rounds per device; "
        + coverage,
        f"  regional metrics per round: epsilon {plan.epsilon_per_round:g} "
        f"({', '.join(f'{k} {v:g}' for k, v in plan.epsilons.items())}), floor "
        f"{plan.min_cohort} clients "
        f"({'on noised counts' if plan.neighbours == 'add_remove' else 'exact cohorts'}), "
        f"suppressed regions in the last round: {last.suppressed_regions}",
        f"  alerts (alpha {FAMILY_ALPHA:g} per round over all regions): {fired}; before the "
        f"drift started: {len(early)}",
        "  drift test over the epoch: " + (", ".join(
            f"{r} slope {s:+.2f}/round" for r, s in zip(trend.region_id, trend.statistic,
                                                        strict=True)) or "no region"),
        f"  query-error audit (against the grid released at epsilon {audit.epsilon:g}): "
        f"{audit.n_queries} real polygons on "
        f"{audit.n_cells:,} H3 r{audit.resolution} cells; largest ({big['mean_cells']:.0f} "
        f"cells) RMS {big['rms']:.0f} devices flat vs "
        f"{audit.reports['hierarchical (4 levels)'].iloc[-1]['rms']:.0f} hierarchical",
        f"  ledger {out / LEDGER}, epoch {epoch}: "
        + ", ".join(f"{item} {spent:g} of {cap:g}" for item, spent, cap in zip(
            led.index, led["spent"].astype(float), led["cap"].astype(float), strict=True)
            if item in ("training", "evaluation.regional", "total")),
    ]
    if interrupted:
        lines.append(f"  note: ledger epoch(s) {interrupted} were charged by runs that never "
                     "published (interrupted); their charges stand and are not reused")
    lines.append(f"  done in {seconds:.1f} s")
    return "\n".join(lines)
