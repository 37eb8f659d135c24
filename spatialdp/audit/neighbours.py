"""Neighbouring inputs under spatialdp's privacy model, for audits.

The federated releases protect each client's contribution under *replace one
client's values, participation fixed*: who reports, and in which region, is
public; what a client reports is private. :func:`replace_client` builds such a
neighbour of a client-report frame, and :func:`extreme_pairs` the worst-case
pairs of a metric (the client at one end of its clip range, then at the other;
a histogram's whole mass cap in the first bucket, then in the last), one pair
per region by default so that a region whose noise is missing cannot hide.
:func:`status_pair` does the same for round-health statuses, and
:func:`drop_device` builds the add/remove-one-device neighbour that count grids
(:mod:`spatialdp.queries`) are calibrated to.

Examples
--------
>>> from spatialdp.federated import MetricSpec
>>> reports = pd.DataFrame({"loss": [1.0, 2.0], "region_id": ["a", "b"]},
...                        index=pd.Index([7, 8], name="client_id"))
>>> replace_client(reports, 7, loss=0.0).loss.tolist()
[0.0, 2.0]
>>> [(a.loss.tolist(), b.loss.tolist())
...  for a, b in extreme_pairs(reports, MetricSpec("loss", 0.0, 4.0), clients=[8])]
[([1.0, 0.0], [1.0, 4.0])]
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp._validation import check_instance, fail
from spatialdp.federated.metrics import HistogramSpec, MetricSpec

__all__ = ["drop_device", "extreme_pairs", "replace_client", "status_pair"]

#: Columns that describe participation (public) and provenance, never replaced.
PUBLIC_COLUMNS = ("region_id", "partition_version", "device_specs")


def replace_client(reports: pd.DataFrame, client_id: Any, **values: Any) -> pd.DataFrame:
    """Return a copy of ``reports`` with one client's metric values replaced.

    Participation stays fixed: the client keeps its row, region and provenance
    columns; only the named value columns change.

    Parameters
    ----------
    reports : DataFrame
        Client reports, indexed by ``client_id`` (as :func:`~spatialdp.federated.device_report`
        returns them).
    client_id
        The client whose values change.
    **values
        ``column=value`` for each value column to replace.

    Raises
    ------
    InvalidInput
        An unknown client or column, or a participation/provenance column.
    """
    check_instance(reports, "reports", pd.DataFrame, "pass the client-report frame")
    if client_id not in reports.index:
        raise fail("client_id", client_id, "is not in the reports' index",
                   "pick a client that reported (participation is fixed)")
    if not values:
        raise fail("values", values, "is empty", "name at least one value column to replace")
    for column in values:
        if column in PUBLIC_COLUMNS:
            raise fail("column", column, "is participation or provenance, which neighbours "
                       "share", "replace only metric value columns")
        if column not in reports.columns:
            raise fail("column", column, "is not a column of the reports",
                       f"use one of {list(reports.columns)[:8]}")
    out = reports.copy()
    for column, value in values.items():
        out.loc[client_id, column] = value
    return out


def _one_per_region(reports: pd.DataFrame) -> list[Any]:
    if "region_id" not in reports.columns:
        return [reports.index[0]]
    first = ~reports["region_id"].duplicated()
    return list(reports.index[first.to_numpy()])


def _extremes(spec: MetricSpec | HistogramSpec) -> tuple[dict[str, float], dict[str, float]]:
    if isinstance(spec, MetricSpec):
        return {spec.name: spec.clip_low}, {spec.name: spec.clip_high}
    cols = list(spec.columns)
    low = dict.fromkeys(cols, 0.0)
    high = dict.fromkeys(cols, 0.0)
    low[cols[0]] = spec.mass_cap
    high[cols[-1]] = spec.mass_cap
    return low, high


def extreme_pairs(reports: pd.DataFrame, spec: MetricSpec | HistogramSpec, *,
                  clients: Sequence[Any] | None = None
                  ) -> Iterator[tuple[pd.DataFrame, pd.DataFrame]]:
    """Yield worst-case neighbouring pairs of one metric, one per chosen client.

    For a :class:`~spatialdp.federated.MetricSpec` the client reports
    ``clip_low`` in one input and ``clip_high`` in the other (a change of the
    whole sensitivity); for a :class:`~spatialdp.federated.HistogramSpec` its
    whole ``mass_cap`` sits in the first bucket, then in the last (L1 change
    ``2 * mass_cap``). ``clients`` defaults to the first client of each region.
    """
    check_instance(spec, "spec", (MetricSpec, HistogramSpec), "pass the released spec")
    low, high = _extremes(spec)
    for client in (_one_per_region(reports) if clients is None else clients):
        yield replace_client(reports, client, **low), replace_client(reports, client, **high)


def status_pair(status: Any, position: int, *, first: str = "returned",
                second: str = "dropped") -> tuple[NDArray[Any], NDArray[Any]]:
    """Return two status arrays that differ in one selected client's outcome.

    Round health (:func:`~spatialdp.federated.round_health`) protects what
    became of each selected client; selection and region are fixed.

    Examples
    --------
    >>> a, b = status_pair(["returned", "returned"], 1)
    >>> a.tolist(), b.tolist()
    (['returned', 'returned'], ['returned', 'dropped'])
    """
    base = np.asarray(status, dtype=object).copy()
    if not 0 <= int(position) < base.size:
        raise fail("position", position, f"is outside the {base.size} selected clients",
                   "pass the index of a selected client")
    a, b = base.copy(), base.copy()
    a[int(position)], b[int(position)] = first, second
    return a, b


def drop_device(frame: pd.DataFrame, device_id: Any, column: str = "device_id") -> pd.DataFrame:
    """Return ``frame`` without the rows of one device (the add/remove neighbour of a grid).

    Examples
    --------
    >>> pings = pd.DataFrame({"device_id": [1, 1, 2], "lon": [0.0, 0.1, 0.2]})
    >>> drop_device(pings, 1).device_id.tolist()
    [2]
    """
    check_instance(frame, "frame", pd.DataFrame, "pass the point frame")
    if column not in frame.columns:
        raise fail("column", column, "is not a column of the frame", "name the device id column")
    keep = frame[column].to_numpy() != device_id
    if keep.all():
        raise fail("device_id", device_id, "has no rows", "pick a device that is present")
    return frame.loc[keep]
