"""spatialdp: differential privacy for federated spatial models, on GeoPandas and H3.

The flow a newcomer follows, one step per module:

1. **A fixed geography** (:class:`Partition`): H3 cells or polygons, versioned
   by content. Everything downstream is keyed by it::

       from spatialdp.datasets import us_states_partition
       states = us_states_partition()

2. **A cohort** (:mod:`spatialdp.sampling`): who takes part this round, chosen
   within fixed strata (square-root allocation by default, a participation cap
   whose per-client epsilon is charged, small strata merged with a neighbour),
   with coverage figures and maps for the model card.

3. **Device reports** (:func:`device_report`): bounded numbers computed and
   clipped on the device, one row per client, tagged with the client id, its
   ``region_id``, the partition version and the fingerprint of every spec it
   clipped under::

       clients = device_report(examples, loss_spec=loss, partition=states)

4. **A release** (:func:`regional_report`, :func:`aggregate_metric`): secure
   sum, then noise once per published value, in one order (validate, compute,
   charge, draw noise, publish). Every release names its ``target``: a
   :class:`ReleaseTarget` charged to a :class:`PrivacyLedger`, or a visible
   opt-out (:class:`Simulation`, :class:`Unaccounted`)::

       with PrivacyLedger("ledger.sqlite", epoch_budget=10.0) as ledger:
           report = regional_report(clients, states, [loss], epsilon=0.4,
                                    target=ReleaseTarget(ledger, epoch=0, why="weekly"))

5. **A GeoDataFrame** per metric (:class:`RegionalReport`): value, error bar,
   exact ``conf_int(alpha)``, cohort, reliability, suppressed regions, joined
   onto the region geometries.

6. **A map** (:func:`plot_uncertainty_choropleth`) whose uncertainty you can
   see, alerts that fire only beyond the error bars (``compare_reports``,
   ``drift``), and, later, the model card.

Every step that reads data-sized input (:func:`device_report`,
:func:`regional_report`, ``queries.truth_grid``) accepts a Dask DataFrame as
well as a pandas one, e.g. :func:`read_parquet` of a folder of files sorted by
client: the workers compute the bounded sums, this process charges and draws
the noise once (``docs/scale.md``; :func:`worker_environment` for the workers).

Beside this flow: :mod:`spatialdp.queries` (DP spatial count queries on H3 grids,
answered per polygon with exact error bars, and their error measured before
anyone relies on them) and :mod:`spatialdp.regression` (modulated regression for
clients that hold one sample each, with a feasibility planner and DP-SGD
baselines).

Release noise comes from OS entropy and takes no seed; simulations take
``rng=``. Every refusal is a :class:`SpatialDPError` naming the value, the
limit and the fix, and leaves nothing in the ledger.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spatialdp._lazy import attach
from spatialdp.exceptions import (
    BudgetExceeded,
    ClippingFailure,
    CohortTooSmall,
    CRSError,
    InvalidCells,
    InvalidInput,
    InvalidSpec,
    LedgerError,
    PartitionMismatch,
    SpatialDPError,
)

if TYPE_CHECKING:  # the public names, imported on first use (spatialdp._lazy)
    from spatialdp._dask_frames import read_parquet, worker_environment
    from spatialdp.federated import (
        HistogramSpec,
        MetricRelease,
        MetricSpec,
        RegionalReport,
        aggregate_histogram,
        aggregate_metric,
        device_report,
        read_report,
        regional_report,
    )
    from spatialdp.geo import Partition
    from spatialdp.privacy import (
        LaplaceMechanism,
        PrivacyLedger,
        ReleaseTarget,
        Simulation,
        Unaccounted,
    )
    from spatialdp.viz.maps import plot_uncertainty_choropleth

__getattr__, __dir__ = attach(__name__, __file__)

__version__ = "0.1.0"

__all__ = [
    "BudgetExceeded",
    "CRSError",
    "ClippingFailure",
    "CohortTooSmall",
    "HistogramSpec",
    "InvalidCells",
    "InvalidInput",
    "InvalidSpec",
    "LaplaceMechanism",
    "LedgerError",
    "MetricRelease",
    "MetricSpec",
    "Partition",
    "PartitionMismatch",
    "PrivacyLedger",
    "RegionalReport",
    "ReleaseTarget",
    "Simulation",
    "SpatialDPError",
    "Unaccounted",
    "__version__",
    "aggregate_histogram",
    "aggregate_metric",
    "device_report",
    "plot_uncertainty_choropleth",
    "read_parquet",
    "read_report",
    "regional_report",
    "worker_environment",
]
