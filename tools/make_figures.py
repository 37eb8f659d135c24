"""Regenerate every figure in ``docs/figures`` with the current drawing code: one command.

Run from the repository root, in an environment with the test extra installed::

    python tools/make_figures.py                      # every figure (several minutes)
    python tools/make_figures.py --only maps sampling # some groups
    python tools/make_figures.py --out /tmp/figures   # somewhere else, to compare

Each group below names the page that shows its figures and the scenario the page
describes. Simulated scenarios are seeded; the demo and the Flower example publish
real releases (noise from OS entropy), so their figures differ from run to run. The
modulated group reruns ``benchmarks/reproduce_modulated.py`` in full (it also rewrites
``modulated_results*.csv`` and ``modulated_results.md``; seeded, so the numbers stay);
``--quick`` runs it with 3 seeds into a temporary folder instead and keeps the shipped
figures. ``audit_table.md`` is not a figure: ``benchmarks/audit_full.py`` writes it.
``maps_explore.png`` needs ``chromium`` and Debian's ``libjs-leaflet`` (as
``tests/test_viz_browser.py``); without them it is left as it is, and the run says so.
"""

from __future__ import annotations

import argparse
import itertools
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DPI = 110
LEAFLET = Path("/usr/share/javascript/leaflet")
JQUERY = Path("/usr/share/javascript/jquery/jquery.min.js")


def save(figure: Any, path: Path) -> str:
    """Write a figure (or the figure of an Axes) and close it; return the file name."""
    from spatialdp.viz import save_figure

    figure = getattr(figure, "figure", figure)
    save_figure(figure, path, dpi=DPI)
    plt.close(figure)
    return path.name


def maps_report(devices: int = 200_000) -> tuple[Any, Any]:
    """Return docs/maps.md's round (the demo's model, CO drifting, ε = 0.4) and a national."""
    from spatialdp.datasets import synthetic_fleet, us_states_partition
    from spatialdp.demo.world import DRIFT_STEP, US_DRIFTING, US_WORSE
    from spatialdp.federated import (
        HistogramSpec,
        MetricSpec,
        aggregate_metric,
        device_report,
        regional_report,
    )
    from spatialdp.privacy import Simulation
    from spatialdp.simulation import positioning_predictions

    states = us_states_partition()
    fleet = synthetic_fleet(devices, rng=0, partition=states, progress=False)
    loss = MetricSpec("loss", 0.0, 12.4, label="mean squared position error", unit="m²")
    hist = HistogramSpec("abs_error_m", edges=(0.25, 0.5, 1, 2, 4, 8),
                         label="position error", unit="m")
    examples = positioning_predictions(fleet, rng=0, region_error_factor=US_WORSE,
                                       sideways_drift={US_DRIFTING: 1.0 + 3 * DRIFT_STEP})
    clients = device_report(examples, loss_spec=loss, hist_spec=hist, partition=states)
    report = regional_report(clients, states, [loss, hist], epsilon=0.4, min_cohort=300,
                             target=Simulation(rng=1))
    national = aggregate_metric(clients, loss, epsilon=0.4, target=Simulation(rng=2))
    return report, national


def maps(out: Path) -> list[str]:
    """docs/maps.md: before/after, classes, margin of error, significance, histogram, folium."""
    report, national = maps_report()
    # "Before": the former default colour range, the full one (Colorado washes the map
    # out); the former labels and doubled title are not drawn by any current code.
    names = [save(report.plot("loss", robust=False), out / "maps_before_loss.png"),
             save(report.plot("loss"), out / "maps_after_loss.png"),
             save(report.plot("loss", scheme="quantiles", k=5, projection=None),
                  out / "maps_quantiles_lonlat.png"),
             save(report.plot("loss", scheme="separable", k=5), out / "maps_separable.png"),
             save(report.plot("loss", kind="moe"), out / "maps_moe.png"),
             save(report.plot("loss", kind="significance", national=national),
                  out / "maps_significance.png"),
             save(report.plot("abs_error_m"), out / "maps_histogram_tail.png")]
    return names + explore_screenshot(report, out / "maps_explore.png")


def explore_screenshot(report: Any, path: Path) -> list[str]:
    """Render the folium map offline in headless Chromium (as tests/test_viz_browser.py)."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None or not (LEAFLET / "leaflet.js").exists():
        print(f"  {path.name}: left as it is (needs chromium and libjs-leaflet)")
        return []
    html = report.explore("loss", tiles=None).get_root().render()
    html = re.sub(r"https://cdn\.jsdelivr\.net/npm/leaflet@[^/]+/dist/leaflet\.(js|css)",
                  lambda m: (LEAFLET / f"leaflet.{m.group(1)}").as_uri(), html)
    if JQUERY.exists():
        html = re.sub(r"https://code\.jquery\.com/jquery-[0-9.]+\.min\.js", JQUERY.as_uri(),
                      html)
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "map.html"
        page.write_text(html)
        shot = Path(folder) / "map.png"
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                        f"--screenshot={shot}", "--window-size=1100,700",
                        "--virtual-time-budget=4000", page.as_uri()],
                       check=True, capture_output=True, timeout=120)
        shutil.copyfile(shot, path)
    return [path.name]


def georgia_grid_counties(cells: int = 14) -> Any:
    """About 157 grid 'counties' cut from Georgia (docs/maps.md, any partition)."""
    import geopandas as gpd
    import shapely

    from spatialdp.datasets import load_us_states
    from spatialdp.geo import Partition

    states = load_us_states()
    shape = states.loc[states.state == "GA", "geometry"].iloc[0]
    west, south, east, north = shape.bounds
    xs, ys = np.linspace(west, east, cells + 1), np.linspace(south, north, cells + 1)
    boxes = [shapely.box(x0, y0, x1, y1) for x0, x1 in itertools.pairwise(xs)
             for y0, y1 in itertools.pairwise(ys)]
    pieces = shapely.intersection(np.asarray(boxes, dtype=object), shape)
    keep = ~shapely.is_empty(pieces) & (shapely.area(pieces) > 1e-6)
    frame = gpd.GeoDataFrame({"county": [f"c{i:03d}" for i in range(int(keep.sum()))]},
                             geometry=list(pieces[keep]), crs=4326)
    return Partition.from_geodataframe(frame, "county", name="GA-grid-counties")


def georgia(out: Path) -> list[str]:
    """docs/maps.md: a report on Georgia grid counties (60,000 devices, ε = 1, floor 40)."""
    from spatialdp.datasets import synthetic_fleet
    from spatialdp.federated import MetricSpec, device_report, regional_report
    from spatialdp.privacy import Simulation
    from spatialdp.simulation import positioning_predictions

    counties = georgia_grid_counties()
    fleet = synthetic_fleet(60_000, rng=0, partition=counties, progress=False)
    loss = MetricSpec("loss", 0.0, 12.4, label="mean squared position error", unit="m²")
    clients = device_report(positioning_predictions(fleet, rng=0), loss_spec=loss,
                            partition=counties)
    report = regional_report(clients, counties, [loss], epsilon=1.0, min_cohort=40,
                             target=Simulation(rng=1))
    return [save(report.plot("loss", annotate_cohort=True, figsize=(7.0, 9.0)),
                 out / "maps_any_partition.png"),
            save(report.plot("loss", kind="bivariate", k=3), out / "maps_bivariate.png")]


def sampling(out: Path) -> list[str]:
    """docs/sampling.md: allocation chart, staircase, coverage by state and by H3 cell."""
    from spatialdp.datasets import synthetic_fleet, us_states_partition
    from spatialdp.privacy import Simulation
    from spatialdp.sampling import ParticipationPolicy, Strata, StratifiedSampler, density_strata
    from spatialdp.sampling.coverage import epoch_coverage
    from spatialdp.sampling.plots import (
        plot_allocation,
        plot_coverage_map,
        plot_coverage_maps,
        plot_staircase,
    )
    from spatialdp.sampling.simulation import SEED_POPULATIONS, row_strata, simulate_rounds

    names = [save(plot_allocation(SEED_POPULATIONS, 80, order=list(SEED_POPULATIONS)),
                  out / "sampling_allocation.png")]
    # The seed's staircase (sqrt allocation of 98, merges off), then an 80-client cohort
    # under the three allocations; the remote stratum (18 clients).
    row, fleet = row_strata(SEED_POPULATIONS)
    fig, axes = plt.subplots(1, 2, figsize=(15, 5))
    seed = simulate_rounds(row, fleet, cohort=98, rounds=8, participation_cap=1,
                           modes=("sqrt",), min_stratum_cohort=0, rng=0)
    plot_staircase(seed, "remote", ax=axes[0])
    axes[0].set_title("The seed's staircase: 18 remote clients, cap 1, 7 wanted per round\n"
                      "(sqrt allocation of a 98-client cohort, merges off)", fontsize=10)
    three = simulate_rounds(row, fleet, cohort=80, rounds=10, participation_cap=1,
                            min_stratum_cohort=0, rng=0)
    plot_staircase(three, "remote", ax=axes[1])
    axes[1].set_title("Remote stratum (18 clients), cap 1, 80-client cohort, three "
                      "allocations", fontsize=10)
    names.append(save(fig, out / "sampling_staircase.png"))

    # 30,000 devices on the 48 states: cohort 150, cap 1, 8 rounds, floor 110;
    # proportional (left) vs sqrt (right).
    states = us_states_partition()
    fleet = synthetic_fleet(30_000, rng=0, partition=states, progress=False)
    by_state = Strata(states, basis="administrative")
    positions = by_state.assign(lon=fleet.lon.to_numpy(), lat=fleet.lat.to_numpy())
    policy = ParticipationPolicy(participation_cap=1, epsilon_per_round=0.25,
                                 rounds_per_epoch=8)
    fig, axes = plt.subplots(1, 2, figsize=(16, 5))
    for ax, mode in zip(axes, ("proportional", "sqrt"), strict=True):
        sampler = StratifiedSampler(by_state, cohort=150, policy=policy, mode=mode,
                                    min_stratum_cohort=110)
        state = sampler.new_state(positions, target=Simulation(rng=0))
        for r in range(8):
            sampler.select(state, r)
        plot_coverage_map(epoch_coverage(sampler, state), ax=ax)
        ax.set_title(f"{mode}: {ax.get_title()}", fontsize=10)
    names.append(save(fig, out / "sampling_coverage_map.png"))

    # Density strata, 20,000 devices, sqrt, cohort 150, cap 1, 6 rounds: by cell, by state.
    strata = density_strata()
    fleet = synthetic_fleet(20_000, rng=0)
    lon, lat = fleet.lon.to_numpy(), fleet.lat.to_numpy()
    policy = ParticipationPolicy(participation_cap=1, epsilon_per_round=0.1,
                                 rounds_per_epoch=6)
    sampler = StratifiedSampler(strata, cohort=150, policy=policy, mode="sqrt")
    state = sampler.new_state(strata.assign(lon=lon, lat=lat), target=Simulation(rng=0))
    for r in range(6):
        sampler.select(state, r)
    coverage = epoch_coverage(
        sampler, state, report=states,
        client_regions=states.assign(lon=lon, lat=lat).positions,
        client_cells=strata.cell_partition.assign(lon=lon, lat=lat).positions)
    fig = plot_coverage_maps([(coverage, "cells"), (coverage, "report")],
                             cells=strata.cell_partition)
    names.append(save(fig, out / "sampling_coverage_cells.png"))
    return names


def queries(out: Path) -> list[str]:
    """docs/queries.md: the sqrt(m) plot, 117,649-cell grid, epsilon 1, 300 draws."""
    import h3
    from scipy import sparse

    from spatialdp.geo import CellIncidence, h3cells
    from spatialdp.privacy.accuracy import noise_std
    from spatialdp.queries import TruthGrid, grid_version, measure_query_error
    from spatialdp.queries.corpus import incidence_from_cell_lists
    from spatialdp.queries.figures import plot_error_vs_cells

    parent = h3.cell_to_parent("85283473fffffff", 2)
    cells = np.sort(np.asarray([h3.str_to_int(c) for c in h3.cell_to_children(parent, 8)],
                               dtype=np.uint64))
    version = grid_version(cells)
    counts = np.random.default_rng(0).poisson(20, cells.size).astype(np.int64)
    truth = TruthGrid(counts=counts, cells=cells, resolution=8, partition_version=version,
                      partition_key=f"sqrt-m@{version}", max_cells_per_device=1,
                      n_points=int(counts.sum()), n_unassigned=0,
                      n_devices=int(counts.sum()), n_clipped_pairs=0, n_clipped_devices=0)
    centre = h3cells.parse_cells([h3.cell_to_center_child(parent, 8)])
    ks = (0, 1, 3, 9, 25, 50, 100)  # discs of 1, 7, 37, 271, 1,951, 7,651, 30,301 cells
    rows = []
    for k in ks:
        offsets, disk = h3cells.grid_disk_lists(centre, k)
        rows.append(incidence_from_cell_lists(cells, version, offsets, disk).matrix)
    matrix = sparse.csr_array(sparse.vstack(rows), dtype=np.int8)
    incidence = CellIncidence(matrix, np.zeros(len(ks), np.int64), "center", version)
    sizes = [1 + 3 * k * (k + 1) for k in ks]
    edges = [*sizes, sizes[-1] + 1]
    flat = measure_query_error(truth, incidence, epsilon=1.0, draws=300, rng=1,
                               buckets=edges, clamp_negative=False)
    hier = measure_query_error(truth, incidence, epsilon=1.0, draws=300, rng=2,
                               buckets=edges, method="hierarchical", levels=4,
                               clamp_negative=False)
    ax = plot_error_vs_cells({"flat": flat, "hierarchical (4 levels)": hier},
                             cell_sd=float(noise_std("discrete_laplace", 1.0)))
    return [save(ax, out / "queries_sqrt_m.png")]


def run_script(arguments: list[str], folder: Path) -> None:
    """Run a Python script of this repository with this checkout first on the path."""
    import os

    env = dict(os.environ, MPLBACKEND="Agg",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                          if p))
    subprocess.run([sys.executable, *arguments], cwd=folder, env=env, check=True)


def copy(names: dict[str, str], source: Path, out: Path) -> list[str]:
    """Copy ``{written name: figure name}`` from ``source`` into ``out``."""
    for written, figure in names.items():
        shutil.copyfile(source / written, out / figure)
    return list(names.values())


#: What ``spatialdp demo`` writes that the docs show (as ``demo_<name>.png``).
DEMO_FIGURES = ("ratio_choropleth", "loss_choropleth", "loss_significance", "coverage_map",
                "ratio_timeseries", "query_error")
FLOWER_FIGURES = ("flower_choropleth.png", "flower_coverage_map.png",
                  "flower_coverage_score.png")


def demo(out: Path) -> list[str]:
    """docs/demo.md and the README: a full ``spatialdp demo`` run (add/remove, 200,000)."""
    with tempfile.TemporaryDirectory() as folder:
        run_script(["-c", "import sys; from spatialdp.cli import main; "
                          "sys.exit(main(['demo', '--out', 'run', '--quiet']))"], Path(folder))
        return copy({f"{n}.png": f"demo_{n}.png" for n in DEMO_FIGURES}, Path(folder) / "run",
                    out)


def flower(out: Path) -> list[str]:
    """docs/flower.md: examples/flower_simulation.py with its defaults."""
    with tempfile.TemporaryDirectory() as folder:
        run_script([str(ROOT / "examples" / "flower_simulation.py"), "--out", "figures",
                    "--ledger-dir", "ledger"], Path(folder))
        return copy({n: n for n in FLOWER_FIGURES}, Path(folder) / "figures", out)


def modulated(out: Path, quick: bool = False) -> list[str]:
    """docs/modulated.md: benchmarks/reproduce_modulated.py (20 seeds, both data sets)."""
    script = str(ROOT / "benchmarks" / "reproduce_modulated.py")
    names = ["modulated_mse.png", "modulated_relative.png"]
    if not quick:
        run_script([script, "--out", str(out.resolve())], ROOT)
        return names
    with tempfile.TemporaryDirectory() as folder:
        run_script([script, "--seeds", "3", "--out", folder], ROOT)
        print(f"  --quick: 3 seeds, written to a temporary folder; {names} left as they are")
    return []


GROUPS: dict[str, Callable[..., list[str]]] = {
    "maps": maps, "georgia": georgia, "sampling": sampling, "queries": queries,
    "demo": demo, "flower": flower, "modulated": modulated}
#: The figures each group draws (``tests/test_make_figures.py``: every PNG of docs/figures).
FIGURES: dict[str, tuple[str, ...]] = {
    "maps": ("maps_before_loss.png", "maps_after_loss.png", "maps_quantiles_lonlat.png",
             "maps_separable.png", "maps_moe.png", "maps_significance.png",
             "maps_histogram_tail.png", "maps_explore.png"),
    "georgia": ("maps_any_partition.png", "maps_bivariate.png"),
    "sampling": ("sampling_allocation.png", "sampling_staircase.png",
                 "sampling_coverage_map.png", "sampling_coverage_cells.png"),
    "queries": ("queries_sqrt_m.png",),
    "demo": tuple(f"demo_{n}.png" for n in DEMO_FIGURES),
    "flower": FLOWER_FIGURES,
    "modulated": ("modulated_mse.png", "modulated_relative.png"),
}


def main(argv: list[str] | None = None) -> int:
    """Regenerate the figures of the groups asked for (default: all); return 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "figures")
    parser.add_argument("--only", nargs="+", choices=sorted(GROUPS), default=list(GROUPS))
    parser.add_argument("--quick", action="store_true",
                        help="the modulated reproduction with 3 seeds, figures not kept")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.only:
        start = time.perf_counter()
        group = GROUPS[name]
        written = group(args.out, quick=args.quick) if name == "modulated" else group(args.out)
        assert set(written) <= set(FIGURES[name]), f"{name} drew {written}, not declared"
        print(f"{name}: {', '.join(written) or 'nothing'} "
              f"({time.perf_counter() - start:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
