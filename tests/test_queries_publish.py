"""What is published about query error depends only on released data (issue 21).

The demo's query-error audit releases its count grid through the ledger and
measures against that grid; its tables, card section and figure must be the
same for any two truths that released the same grid. Tables measured against
the truth (or a simulated grid) are internal: the publishing helpers refuse them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.image as mpimg
import numpy as np
import pandas as pd
import pytest
from numpy.typing import NDArray

from spatialdp.cards._sections import query_error_section
from spatialdp.datasets import load_us_states, synthetic_fleet
from spatialdp.demo.audit import QueryAudit, query_audit
from spatialdp.demo.outputs import draw_query_error
from spatialdp.exceptions import BudgetExceeded, InvalidInput
from spatialdp.geo import Partition
from spatialdp.privacy import PrivacyLedger, ReleaseTarget, Simulation
from spatialdp.queries import truth_grid

DEVICES = 10_000


class FixedRelease(ReleaseTarget):
    """A real, charged release whose noise happens to land every truth on one grid.

    Under discrete Laplace noise every integer grid can be released from every
    truth; this target draws that one outcome whatever the truth, so two truths
    release the same grid. The charge goes through the pipeline as for any release.
    """

    def add_noise(self, mechanism: Any, values: NDArray[Any]) -> NDArray[Any]:
        return np.random.default_rng(0).integers(-2, 30, np.shape(values))


@pytest.fixture(scope="module")
def partition() -> Partition:
    states = load_us_states().query("state in ['CT', 'RI']")
    return Partition.from_geodataframe(states, id_column="state", name="ct-ri")


def _fleet(partition: Partition, seed: int) -> pd.DataFrame:
    return synthetic_fleet(DEVICES, rng=seed, partition=partition)


def test_published_audit_depends_only_on_the_released_grid(partition: Partition,
                                                            tmp_path: Path) -> None:
    fleets = [_fleet(partition, seed) for seed in (1, 2)]
    audits: list[QueryAudit] = []
    with PrivacyLedger(":memory:", epoch_budget=10.0) as ledger:
        for fleet in fleets:
            audits.append(query_audit(partition, fleet, target=FixedRelease(ledger, 0),
                                      epsilon=1.0, seed=3, draws=20))
        audit = ledger.audit(0)
    assert list(audit.charged) == pytest.approx([1.0, 1.0])  # each grid charged once
    first, second = audits
    np.testing.assert_array_equal(first.grid.values, second.grid.values)
    # The truths differ (so a table measured against them would too) ...
    truths = [truth_grid(first.grid.cells, lon=f.lon.to_numpy(), lat=f.lat.to_numpy(),
                         device_ids=f.device_id.to_numpy()) for f in fleets]
    assert (truths[0].counts != truths[1].counts).sum() > 100
    # ... but every published table, card section and figure is the same.
    for label in first.reports:
        pd.testing.assert_frame_equal(first.reports[label], second.reports[label])
        assert first.reports[label].attrs == second.reports[label].attrs
        assert first.reports[label].attrs["internal"] is False
    assert (query_error_section(first.reports["flat (clamped)"])
            == query_error_section(second.reports["flat (clamped)"]))
    images = []
    for i, result in enumerate(audits):
        (tmp_path / str(i)).mkdir()
        images.append(mpimg.imread(draw_query_error(result, tmp_path / str(i))))
    np.testing.assert_array_equal(images[0], images[1])


def test_demo_outputs_refuse_an_internal_audit(partition: Partition, tmp_path: Path) -> None:
    fleet = _fleet(partition, 1)
    simulated = query_audit(partition, fleet, target=Simulation(rng=0), epsilon=1.0, seed=3,
                            draws=5)
    assert simulated.grid.simulated
    with pytest.raises(InvalidInput, match=r"reports\['flat \(clamped\)'\]='INTERNAL: query "
                                           "error measured against a SIMULATION of the grid"):
        draw_query_error(simulated, tmp_path)
    # A table measured against the truth, put in an audit by hand: refused as well.
    from spatialdp.queries import measure_query_error, query_corpus

    cells = Partition.from_h3_cover(partition.regions, simulated.resolution,
                                    containment="overlap")
    truth = truth_grid(cells, lon=fleet.lon.to_numpy(), lat=fleet.lat.to_numpy(),
                       device_ids=fleet.device_id.to_numpy())
    table = measure_query_error(truth, query_corpus(cells, partition.regions), epsilon=1.0,
                                draws=5, rng=0)
    internal = QueryAudit(reports={"flat": table}, resolution=simulated.resolution,
                          n_cells=cells.n_regions, n_queries=2, epsilon=1.0, draws=5,
                          grid=simulated.grid)
    with pytest.raises(InvalidInput, match=r"reports\['flat'\]='INTERNAL: query error measured "
                                           "against the truth grid.*release a grid first"):
        draw_query_error(internal, tmp_path)
    assert not list(tmp_path.iterdir())  # nothing drawn


def test_plot_error_vs_cells_labels_internal_figures_and_refuses_them_for_publication(
        partition: Partition) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from spatialdp.queries.figures import plot_error_vs_cells

    fleet = _fleet(partition, 1)
    with PrivacyLedger(":memory:", epoch_budget=10.0) as ledger:
        published = query_audit(partition, fleet, target=ReleaseTarget(ledger, 0),
                                epsilon=1.0, seed=3, draws=5)
    ax = plot_error_vs_cells(published.reports, publishable=True)
    assert ax.get_title() == ("Answer error vs polygon size (epsilon = 1, simulated releases "
                              "vs the released grid)")
    plt.close(ax.figure)
    simulated = query_audit(partition, fleet, target=Simulation(rng=0), epsilon=1.0, seed=3,
                            draws=5)
    ax = plot_error_vs_cells(simulated.reports)
    assert ax.get_title().startswith("INTERNAL: answer error vs polygon size")
    plt.close(ax.figure)
    with pytest.raises(InvalidInput, match=r"reports\['hierarchical \(4 levels\)'\]="
                                           "'INTERNAL"):
        plot_error_vs_cells({"hierarchical (4 levels)":
                             simulated.reports["hierarchical (4 levels)"]}, publishable=True)
    with pytest.raises(InvalidInput, match="publishable='yes' is a str, not a bool"):
        plot_error_vs_cells(published.reports, publishable="yes")  # type: ignore[arg-type]


def test_only_a_grid_that_records_a_release_makes_a_publishable_table() -> None:
    import dataclasses

    from scipy import sparse

    from spatialdp.geo import CellIncidence
    from spatialdp.privacy import Unaccounted
    from spatialdp.queries import measure_query_error, release_flat, require_publishable

    truth = truth_grid(["85283473fffffff", "85283477fffffff"], lon=[-121.9764],
                       lat=[37.3458], device_ids=[1])
    both = CellIncidence(sparse.csr_array(np.ones((1, 2), np.int8)), np.zeros(1, np.int64),
                         "center", truth.partition_version)
    unaccounted = release_flat(truth, epsilon=1.0, target=Unaccounted("public test data"))
    table = measure_query_error(unaccounted, both, epsilon=1.0, draws=5, rng=0)
    assert require_publishable(table)["reference_accounting"] == "unaccounted"
    assert table.attrs["title"].endswith("[UNACCOUNTED: public test data]")
    assert query_error_section(table)["provenance"] == "unaccounted"
    # A grid rebuilt by hand without its release metadata (e.g. the truth's counts as
    # "values") is not a release: its table is internal.
    bare = dataclasses.replace(unaccounted, values=truth.counts, accounting={})
    with pytest.raises(InvalidInput, match="grid whose metadata records no release"):
        require_publishable(measure_query_error(bare, both, epsilon=1.0, draws=5, rng=0))


def test_query_audit_refuses_bad_arguments_before_the_grid_is_charged(
        partition: Partition) -> None:
    fleet = _fleet(partition, 1)
    with PrivacyLedger(":memory:", epoch_budget=10.0) as ledger:
        for kwargs, message in (({"draws": 0}, "draws=0"), ({"seed": -1}, "seed=-1"),
                                ({"epsilon": 0.0}, "epsilon=0")):
            args: dict[str, Any] = {"epsilon": 1.0, "seed": 3, "draws": 5, **kwargs}
            with pytest.raises(InvalidInput, match=message):
                query_audit(partition, fleet, target=ReleaseTarget(ledger, 0), **args)
        with pytest.raises(BudgetExceeded, match="exceeds its cap"):
            query_audit(partition, fleet, target=ReleaseTarget(ledger, 0), epsilon=3.0,
                        seed=3, draws=5)
        assert ledger.audit(0).empty  # nothing charged


def test_the_audit_refuses_its_settings_before_the_grid_is_charged() -> None:
    import geopandas as gpd
    import shapely

    # A continent-wide layer: 10,000 devices give a grid at resolution 2, too coarse
    # for the audit's 4 hierarchy levels (at most 3).
    wide = gpd.GeoDataFrame({"id": ["w", "e"]}, crs=4326, geometry=[
        shapely.box(-170, -60, -110, 20), shapely.box(-110, -60, -50, 20)])
    layer = Partition.from_geodataframe(wide, "id", name="wide")
    rng = np.random.default_rng(0)
    fleet = pd.DataFrame({"device_id": np.arange(DEVICES),
                          "lon": rng.uniform(-169, -51, DEVICES),
                          "lat": rng.uniform(-59, 19, DEVICES)})
    with PrivacyLedger(":memory:", epoch_budget=10.0) as ledger:
        with pytest.raises(InvalidInput, match="levels=4 is above the limit <= 3"):
            query_audit(layer, fleet, target=ReleaseTarget(ledger, 0), epsilon=0.5, seed=0)
        assert ledger.audit(0).empty  # 34d6ca8 charged 0.5, then refused
    with pytest.raises(InvalidInput, match="draws=0 is below the limit"):
        query_audit(layer, fleet, target=Simulation(rng=0), epsilon=0.5, seed=0, draws=0)
