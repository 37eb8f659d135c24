"""Client reports for tests: per-client values tagged as the device module tags them.

Tests of the server side need reports with given per-client values (a Dirichlet
histogram, a lognormal ratio) that no example frame produces directly; they get
the same provenance columns ``device_report`` writes (see spatialdp.federated.client_reports).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from spatialdp.federated.client_reports import DEVICE_SPECS, PARTITION_VERSION, REGION_ID, spec_tag
from spatialdp.federated.metrics import HistogramSpec, MetricSpec
from spatialdp.geo.partition import Partition


def tagged(columns: Mapping[str, object], specs: Sequence[MetricSpec | HistogramSpec], *,
           partition: Partition | None = None, region_id: object = None,
           client_ids: object = None) -> pd.DataFrame:
    frame = pd.DataFrame(dict(columns))
    frame.index = pd.Index(np.arange(len(frame)) if client_ids is None else client_ids,
                           name="client_id")
    frame[DEVICE_SPECS] = spec_tag(specs)
    if partition is not None:
        frame[REGION_ID] = np.asarray(region_id)
        frame[PARTITION_VERSION] = partition.version
    return frame


def histogram_columns(spec: HistogramSpec, hists: np.ndarray) -> dict[str, np.ndarray]:
    return {col: hists[:, b] for b, col in enumerate(spec.columns)}
