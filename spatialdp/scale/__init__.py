"""Scale out on Dask: the regional report, truth grids and query error on a cluster.

The heavy, data-sized work runs on Dask workers (reading Parquet partition by
partition, the device module per client, per-region and per-cell sums, noise
draws of a simulation); the driver receives only bounded sums and adds the
release's noise once, through the same pipeline and ledger as the in-memory
path. Dask is optional: ``import spatialdp`` never imports it, and nothing here
does until a name is used. See ``docs/scale.md``. Names resolve on first use
(:mod:`spatialdp._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spatialdp._lazy import attach

if TYPE_CHECKING:  # the public names, imported on first use (spatialdp._lazy)
    from spatialdp.scale.frames import (
        active_client,
        compute,
        is_dask,
        read_parquet,
        worker_environment,
    )
    from spatialdp.scale.query_error import measure_query_error
    from spatialdp.scale.report import RegionTotals, device_report, regional_report
    from spatialdp.scale.truth import truth_grid

__getattr__, __dir__ = attach(__name__, __file__)

__all__ = [
    "RegionTotals",
    "active_client",
    "compute",
    "device_report",
    "is_dask",
    "measure_query_error",
    "read_parquet",
    "regional_report",
    "truth_grid",
    "worker_environment",
]
