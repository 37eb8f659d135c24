"""The figure defects of issue 23: coverage labels over the land, separate colour scales,
staircase marks off their axis, a key entry for a line off the chart, and the sqrt(m)
plot's hidden analytic line and missing Monte Carlo error bars."""

from __future__ import annotations

from typing import Any

import h3
import matplotlib
import numpy as np
import pytest
import shapely
from scipy import sparse

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.container import ErrorbarContainer
from matplotlib.text import Annotation

from spatialdp.geo import CellIncidence
from spatialdp.privacy.target import Simulation
from spatialdp.queries import TruthGrid, grid_version, measure_query_error
from spatialdp.queries.figures import flat_cell_sd, plot_error_vs_cells
from spatialdp.sampling import (
    SEED_POPULATIONS,
    ParticipationPolicy,
    StratifiedSampler,
    epoch_coverage,
    row_strata,
    simulate_rounds,
)
from spatialdp.sampling.plots import (
    plot_allocation,
    plot_coverage_map,
    plot_coverage_maps,
    plot_staircase,
)
from spatialdp.viz.projection import project_layer


@pytest.fixture(autouse=True)
def _close_figures() -> None:
    yield
    plt.close("all")


def coverage(cohort: int, populations: dict[str, int] | None = None) -> Any:
    strata, fleet = row_strata(populations or {"a": 300, "b": 40, "c": 3, "d": 2})
    policy = ParticipationPolicy(participation_cap=1, epsilon_per_round=0.1,
                                 rounds_per_epoch=1)
    sampler = StratifiedSampler(strata, cohort=cohort, policy=policy)
    state = sampler.new_state(fleet, target=Simulation(rng=0))
    sampler.select(state, 0)
    return epoch_coverage(sampler, state)


# ------------------------------------------------------------------ coverage maps
def _display_box(ax: plt.Axes, artist: Any) -> Any:
    """The artist's box on screen, in the map's data coordinates, as a shapely box."""
    renderer = ax.figure.canvas.get_renderer()
    (x0, y0), (x1, y1) = ax.transData.inverted().transform(
        artist.get_window_extent(renderer).get_points())
    return shapely.box(min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))


def test_merge_labels_never_cross_the_map() -> None:
    cov = coverage(20)
    ax = plot_coverage_map(cov)
    ax.figure.canvas.draw()
    drawn = project_layer(cov.to_geodataframe())
    land = shapely.union_all(drawn.geometry.values)
    groups = drawn[drawn.merged.astype(bool)].dissolve(by="group")
    assert len(groups) >= 1
    # No leader lines at all (the old labels' lines crossed the country) ...
    assert not [t for t in ax.texts if isinstance(t, Annotation) and t.arrow_patch is not None]
    # ... the key naming the groups is beside the map, not over the land ...
    key = ax.get_legend()
    named = [t.get_text() for t in key.get_texts() if t.get_text().startswith("merged: ")]
    assert named == [f"merged: {g}" for g in groups.index]
    assert not _display_box(ax, key).intersects(land)
    # ... and each group's number sits inside its own outline.
    for name, geom in zip(groups.index, groups.geometry, strict=True):
        (badge,) = [t for t in ax.texts if t.get_gid() == f"merge:{name}"]
        assert geom.contains(shapely.Point(badge.get_position()))


def test_side_by_side_coverage_maps_share_one_colour_scale() -> None:
    small, large = coverage(20), coverage(200)
    fig = plot_coverage_maps([small, large], titles=["cohort 20", "cohort 200"])
    panels = [ax for ax in fig.axes if str(ax.get_gid()).startswith("coverage:")]
    assert len(panels) == 2
    norms = [c.norm for ax in panels for c in ax.collections if c.get_array() is not None]
    assert len(norms) == 2
    assert norms[0] is norms[1]  # one normalisation object: equal colours, equal counts
    top = max(float(cov.table.clients_sampled.max()) for cov in (small, large))
    assert norms[0].vmax == top
    bars = [ax for ax in fig.axes if ax.get_gid() == "colorbar:coverage"]
    assert len(bars) == 1
    assert "one scale for all panels" in bars[0].get_xlabel()
    # Both panels are in the same equal-area CRS, named on each.
    names = {t.get_text() for ax in panels for t in ax.texts if t.get_gid() == "crs"}
    assert len(names) == 1


def test_coverage_maps_refuse_what_is_not_a_panel() -> None:
    from spatialdp.exceptions import CRSError, InvalidInput

    cov = coverage(20)
    with pytest.raises(InvalidInput, match="panels=.* is not a non-empty list"):
        plot_coverage_maps([])
    with pytest.raises(InvalidInput, match="panels=.* holds 3, not a Coverage panel"):
        plot_coverage_maps([cov, 3])
    with pytest.raises(InvalidInput, match="level='county' is not one of"):
        plot_coverage_maps([(cov, "county")])
    with pytest.raises(InvalidInput, match=r"titles=\['one'\] is not one title per panel"):
        plot_coverage_maps([cov, cov], titles=["one"])
    with pytest.raises(InvalidInput, match="figsize='big' is not a .width, height. pair"):
        plot_coverage_maps([cov], figsize="big")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput,
                       match=r"figsize=0.0 is below the limit > 0; pass \(width, height\)"):
        plot_coverage_maps([cov], figsize=(0.0, 4.0))
    with pytest.raises(CRSError, match="projection='EPSG:99999' is not a CRS pyproj knows"):
        plot_coverage_map(cov, projection="EPSG:99999")


# ------------------------------------------------------------------ staircase, allocation
def test_staircase_marks_shortfalls_on_the_quantity_its_axis_shows() -> None:
    strata, fleet = row_strata(SEED_POPULATIONS)
    table = simulate_rounds(strata, fleet, cohort=80, rounds=6, participation_cap=1,
                            modes=("sqrt", "equal"), min_stratum_cohort=0, rng=0)
    ax = plot_staircase(table, "remote")
    rows = table[table.group == "remote"]
    short_rows = rows[rows.shortfall > 0]
    assert (short_rows.filled != short_rows.eligible_remaining).any()  # old marks: elsewhere
    for mode, part in rows.groupby("mode"):
        short = part[part.shortfall > 0]
        assert len(short)  # the remote stratum runs dry under both modes
        (marks,) = [c for c in ax.collections if c.get_gid() == f"shortfall:{mode}"]
        xy = marks.get_offsets()
        np.testing.assert_array_equal(xy[:, 0], short.round_index + 1)
        np.testing.assert_array_equal(xy[:, 1], short.eligible_remaining)
        # On the pool line of that mode, where the step lands after the round.
        (line,) = [ln for ln in ax.get_lines() if ln.get_label() == f"{mode}: eligible"]
        steps = dict(zip(line.get_xdata(), line.get_ydata(), strict=True))
        assert all(steps[x] == y for x, y in xy)


def test_allocation_key_lists_only_what_is_on_the_chart() -> None:
    pools = {"city": 9_000, "town": 600, "farm": 300}
    ax = plot_allocation(pools, 80)
    _, top = ax.get_ylim()
    assert max(pools.values()) > top
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "stratum pool (clients)" not in labels  # every pool is above the axis
    assert [t.get_text() for t in ax.texts if t.get_text().startswith("pool")] == [
        "pool 9,000 ↑", "pool 600 ↑", "pool 300 ↑"]
    shown = plot_allocation(SEED_POPULATIONS, 80)
    assert "stratum pool (clients)" in [t.get_text() for t in shown.get_legend().get_texts()]
    (marks,) = [c for c in shown.collections if c.get_label() == "stratum pool (clients)"]
    assert (marks.get_offsets()[:, 1] <= shown.get_ylim()[1]).all()


# ------------------------------------------------------------------ the sqrt(m) plot
@pytest.fixture(scope="module")
def flat_measurement() -> tuple[TruthGrid, CellIncidence]:
    cells = np.array(sorted(h3.str_to_int(c) for c in h3.cell_to_children("85283473fffffff", 8)),
                     dtype=np.uint64)
    version = grid_version(cells)
    truth = TruthGrid(counts=np.full(cells.size, 400, dtype=np.int64), cells=cells,
                      resolution=8, partition_version=version, partition_key=f"t@{version}",
                      max_cells_per_device=1, n_points=400 * cells.size, n_unassigned=0,
                      n_devices=400 * cells.size, n_clipped_pairs=0, n_clipped_devices=0)
    gen = np.random.default_rng(7)
    rows = [gen.choice(cells.size, size=m, replace=False)
            for m in (1, 1, 2, 3, 5, 8, 13, 20, 30, 45) for _ in range(3)]
    matrix = sparse.csr_array((np.ones(sum(map(len, rows))),
                               (np.repeat(np.arange(len(rows)), [len(r) for r in rows]),
                                np.concatenate(rows))), shape=(len(rows), cells.size))
    inc = CellIncidence(matrix, np.zeros(len(rows), np.int64), "center", version)
    return truth, inc


def test_monte_carlo_standard_errors_match_the_spread_of_repeated_measurements(
        flat_measurement: tuple[TruthGrid, CellIncidence]) -> None:
    truth, inc = flat_measurement
    runs = [measure_query_error(truth, inc, epsilon=1.0, draws=40, rng=seed)
            for seed in range(60)]
    for column in ("rms", "mean_abs_error"):
        values = np.array([r[column].to_numpy() for r in runs])  # runs x buckets
        ses = np.array([r[f"{column}_se"].to_numpy() for r in runs])
        spread = values.std(axis=0, ddof=1)
        # The sd of 60 runs is within 1/sqrt(2 * 59) relative; four of those, per bucket.
        tolerance = 4 / np.sqrt(2 * 59)
        assert np.all(np.abs(ses.mean(axis=0) / spread - 1) < tolerance), column
    one = measure_query_error(truth, inc, epsilon=1.0, draws=1, rng=0)
    assert one.rms_se.isna().all()


def test_sqrt_m_plot_shows_the_analytic_line_and_monte_carlo_error_bars(
        flat_measurement: tuple[TruthGrid, CellIncidence]) -> None:
    truth, inc = flat_measurement
    table = measure_query_error(truth, inc, epsilon=1.0, draws=40, rng=0)
    ax = plot_error_vs_cells({"flat": table}, cell_sd=flat_cell_sd({"flat": table}))
    (analytic,) = [ln for ln in ax.get_lines() if ln.get_label() == "flat: analytic"]
    (reference,) = [ln for ln in ax.get_lines() if ln.get_label().startswith(r"$\sqrt{m}")]
    # The flat analytic line IS sqrt(m) sigma here: the key says so, and the dashed
    # reference is thin and on top of a wide line, so both stay visible.
    assert reference.get_label().endswith("= flat: analytic")
    assert reference.get_zorder() > analytic.get_zorder()
    assert analytic.get_linewidth() >= 3 * reference.get_linewidth()
    assert reference.get_linestyle() != "-"
    # Measured points carry +-2 Monte Carlo SE bars from the table's own draws.
    (bars,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert bars.get_label() == "flat: measured ± 2 Monte Carlo SE"
    segments = bars.lines[2][0].get_segments()
    half = np.array([(s[1, 1] - s[0, 1]) / 2 for s in segments])
    np.testing.assert_allclose(half, 2 * table.rms_se.to_numpy(), rtol=1e-9)
