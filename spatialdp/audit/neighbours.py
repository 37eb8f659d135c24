"""Neighbouring inputs under spatialdp's privacy model, for audits.

Every neighbour built here is a valid input under the model: each value a
client reports lies inside its metric's clip range, and a histogram's mass
within its cap. A value outside is refused, not clipped: an audit of a
neighbour no correct device can send would measure a device bug, not the
release (the suite's broken-device variants build such reports by hand, in
:mod:`spatialdp.audit.cases`, and say so). The ranges come from ``spec=`` or,
by default, from what :func:`~spatialdp.federated.device_report` records in
the frame (``attrs["bounds"]`` and ``attrs["specs"]``).

The two neighbouring relations of :mod:`spatialdp.privacy.pipeline`:

- ``"replace"``: *replace one client's values, participation fixed*: who
  reports, and in which region, is public; what a client reports is private.
  :func:`replace_client` builds such a neighbour of a client-report frame,
  :func:`extreme_pairs` the worst-case pairs of a metric (the client at one end
  of its clip range, then at the other; a histogram's whole mass cap in the
  first bucket, then in the last), one pair per region by default so that a
  region whose noise is missing cannot hide. :func:`status_pair` does the same
  for round-health statuses.
- ``"add_remove"``: *add or remove one client*: participation itself is
  protected. :func:`add_client` and :func:`remove_client` build such
  neighbours of a client-report frame, ``extreme_pairs(...,
  neighbours="add_remove")`` the worst-case ones (a client absent, then
  present at the clip end farther from 0), and :func:`drop_device` the
  add/remove-one-device neighbour that count grids (:mod:`spatialdp.queries`)
  are calibrated to.

Examples
--------
>>> from spatialdp.federated import MetricSpec
>>> spec = MetricSpec("loss", 0.0, 4.0)
>>> reports = pd.DataFrame({"loss": [1.0, 2.0], "region_id": ["a", "b"]},
...                        index=pd.Index([7, 8], name="client_id"))
>>> replace_client(reports, 7, spec=spec, loss=0.0).loss.tolist()
[0.0, 2.0]
>>> [(a.loss.tolist(), b.loss.tolist())
...  for a, b in extreme_pairs(reports, spec, clients=[8])]
[([1.0, 0.0], [1.0, 4.0])]
>>> add_client(reports, 9, spec=spec, region_id="a", loss=4.0).loss.tolist()
[1.0, 2.0, 4.0]
>>> remove_client(reports, 7).index.tolist()
[8]
>>> replace_client(reports, 7, spec=spec, loss=50.0)
Traceback (most recent call last):
...
spatialdp.exceptions.InvalidInput: loss=50.0 is outside the clip range [0, 4] of column 'loss'; a neighbour must be a report a correct device can send: pass a value inside the range (a device that skips clipping is a broken variant: build its report by hand)
"""  # noqa: E501

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp._validation import check_instance, check_number, fail
from spatialdp.federated.metrics import HistogramSpec, MetricSpec
from spatialdp.privacy.budget import check_neighbours

__all__ = ["add_client", "drop_device", "extreme_pairs", "remove_client", "replace_client",
           "status_pair"]

#: Columns that describe participation (public) and provenance, never replaced.
PUBLIC_COLUMNS = ("region_id", "partition_version", "device_specs")

#: Specs a neighbour builder takes: one, or several.
Specs = MetricSpec | HistogramSpec | Sequence[MetricSpec | HistogramSpec] | None

_OUTSIDE_FIX = ("a neighbour must be a report a correct device can send: pass a value inside "
                "the range (a device that skips clipping is a broken variant: build its report "
                "by hand)")


@dataclass(frozen=True)
class _Model:
    """What a correct device can report: a range per column, a mass cap per histogram."""

    bounds: dict[str, tuple[float, float]]
    histograms: list[tuple[tuple[str, ...], float]] = field(default_factory=list)

    @classmethod
    def of(cls, reports: pd.DataFrame, spec: Specs) -> _Model:
        """Return the model of ``reports``: ``spec`` where given, else the frame's attrs."""
        recorded = reports.attrs.get("bounds", {})
        bounds = {str(c): (float(lo), float(hi)) for c, (lo, hi) in
                  (recorded.items() if isinstance(recorded, Mapping) else [])}
        histograms: dict[tuple[str, ...], float] = {}
        names = reports.attrs.get("specs", {})
        for name in (names if isinstance(names, Mapping) else []):
            cols = tuple(c for c in bounds if re.fullmatch(rf"{re.escape(str(name))}_\d+", c))
            if cols:  # device_report's histogram buckets: <name>_0 .. <name>_k, cap = high
                histograms[cols] = max(bounds[c][1] for c in cols)
        for one in _spec_list(spec):
            if isinstance(one, MetricSpec):
                bounds[one.name] = one.value_range
            else:
                bounds.update(dict.fromkeys(one.columns, one.value_range))
                histograms[tuple(one.columns)] = one.mass_cap
        return cls(bounds, list(histograms.items()))

    def check(self, row: Mapping[str, Any], changed: Sequence[str]) -> None:
        """Refuse a client's row whose ``changed`` values a correct device cannot report."""
        for column in changed:
            value = row[column]
            if column not in self.bounds:
                raise fail("column", column, "has no recorded clip range",
                           "pass spec= (the spec the devices clipped under) or build the "
                           "reports with device_report, which records the ranges")
            low, high = self.bounds[column]
            number = _real(value, column)
            if not low <= number <= high:
                raise fail(column, value, f"is outside the clip range [{low:g}, {high:g}] of "
                           f"column {column!r}", _OUTSIDE_FIX)
        for cols, cap in self.histograms:
            if set(cols) & set(changed):
                mass = math.fsum(_real(row[c], c) for c in cols)
                if mass > cap * (1.0 + 1e-12):
                    raise fail("histogram mass", mass, f"of columns {list(cols)} is above the "
                               f"mass cap {cap:g}", _OUTSIDE_FIX.replace("a value inside the "
                                                                         "range", "masses "
                                                                         "within the cap"))


def _spec_list(spec: Specs) -> list[MetricSpec | HistogramSpec]:
    if spec is None:
        return []
    many = [spec] if isinstance(spec, (MetricSpec, HistogramSpec)) else spec
    if isinstance(many, (str, bytes)) or not isinstance(many, Sequence):
        raise fail("spec", spec, "is not a spec or a list of specs",
                   "pass the MetricSpec / HistogramSpec the devices clipped under")
    for one in many:
        check_instance(one, "spec", (MetricSpec, HistogramSpec),
                       "pass the MetricSpec / HistogramSpec the devices clipped under")
    return list(many)


def _real(value: Any, column: str) -> float:
    return check_number(value, column, fix="pass a finite number inside its range")


def _value_columns(reports: pd.DataFrame, values: Mapping[str, Any]) -> None:
    for column in values:
        if column in PUBLIC_COLUMNS:
            raise fail("column", column, "is participation or provenance, which neighbours "
                       "share", "replace only metric value columns")
        if column not in reports.columns:
            raise fail("column", column, "is not a column of the reports",
                       f"use one of {list(reports.columns)[:8]}")


def _client(reports: pd.DataFrame, client_id: Any) -> None:
    check_instance(reports, "reports", pd.DataFrame, "pass the client-report frame")
    if client_id not in reports.index:
        raise fail("client_id", client_id, "is not in the reports' index",
                   "pick a client that reported")


def replace_client(reports: pd.DataFrame, client_id: Any, *, spec: Specs = None,
                   **values: Any) -> pd.DataFrame:
    """Return a copy of ``reports`` with one client's metric values replaced.

    Participation stays fixed: the client keeps its row, region and provenance
    columns; only the named value columns change (the ``"replace"`` relation).

    Parameters
    ----------
    reports : DataFrame
        Client reports, indexed by ``client_id`` (as :func:`~spatialdp.federated.device_report`
        returns them).
    client_id
        The client whose values change.
    spec : MetricSpec, HistogramSpec or sequence of them, optional
        The specs the devices clipped under: the ranges the new values must lie
        in (default: the ranges ``device_report`` recorded in ``reports.attrs``).
    **values
        ``column=value`` for each value column to replace.

    Raises
    ------
    InvalidInput
        An unknown client or column, a participation/provenance column, or a
        value no correct device can report (outside its clip range, a
        histogram's mass above its cap, a column without a known range).

    Examples
    --------
    >>> reports = pd.DataFrame({"loss": [1.0, 2.0], "region_id": ["a", "b"]},
    ...                        index=pd.Index([7, 8], name="client_id"))
    >>> replace_client(reports, 7, spec=MetricSpec("loss", 0.0, 4.0), loss=4.0).loss.tolist()
    [4.0, 2.0]
    """
    _client(reports, client_id)
    if not values:
        raise fail("values", values, "is empty", "name at least one value column to replace")
    _value_columns(reports, values)
    row = {**reports.loc[client_id].to_dict(), **values}
    _Model.of(reports, spec).check(row, list(values))
    return _with_values(reports, client_id, values)


def _with_values(reports: pd.DataFrame, client_id: Any, values: Mapping[str, Any]
                ) -> pd.DataFrame:
    """Return a copy of ``reports`` with ``values`` in one client's row, unchecked.

    The writing half of :func:`replace_client`, without its checks: the audit
    suite's broken-device variants (:mod:`spatialdp.audit.cases`) build reports
    no correct device sends with it.
    """
    out = reports.copy()
    for column, value in values.items():
        out.loc[client_id, column] = value
    return out


def remove_client(reports: pd.DataFrame, client_id: Any) -> pd.DataFrame:
    """Return ``reports`` without one client's row (the ``"add_remove"`` relation).

    Parameters
    ----------
    reports : DataFrame
        Client reports, indexed by ``client_id``.
    client_id
        The client that takes no part in the neighbouring dataset.

    Raises
    ------
    InvalidInput
        An unknown client, or the only client.

    Examples
    --------
    >>> reports = pd.DataFrame({"loss": [1.0, 2.0]}, index=pd.Index([7, 8], name="client_id"))
    >>> remove_client(reports, 7).index.tolist()
    [8]
    """
    _client(reports, client_id)
    if len(reports) == 1:
        raise fail("client_id", client_id, "is the only client",
                   "audit a frame with at least two clients")
    return reports.drop(index=[client_id])


def add_client(reports: pd.DataFrame, client_id: Any, *, spec: Specs = None,
               region_id: Any = None, **values: Any) -> pd.DataFrame:
    """Return ``reports`` with one more client (the ``"add_remove"`` relation).

    The new client reports every value column (each inside its clip range),
    sits in ``region_id`` (required when the frame has regions) and carries
    the same provenance (``partition_version``, ``device_specs``) as the others.

    Parameters
    ----------
    reports : DataFrame
        Client reports, indexed by ``client_id``.
    client_id
        A new id, of the same kind (integer or text) as the frame's.
    spec : MetricSpec, HistogramSpec or sequence of them, optional
        As in :func:`replace_client`.
    region_id : optional
        The new client's region.
    **values
        ``column=value`` for every value column of the frame.

    Raises
    ------
    InvalidInput
        An id already present or of another kind, a missing or unknown value
        column, a missing region, or a value outside its range.

    Examples
    --------
    >>> reports = pd.DataFrame({"loss": [1.0, 2.0], "region_id": ["a", "b"]},
    ...                        index=pd.Index([7, 8], name="client_id"))
    >>> bigger = add_client(reports, 9, spec=MetricSpec("loss", 0.0, 4.0), region_id="a",
    ...                     loss=4.0)
    >>> bigger.loss.tolist(), bigger.region_id.tolist()
    ([1.0, 2.0, 4.0], ['a', 'b', 'a'])
    """
    check_instance(reports, "reports", pd.DataFrame, "pass the client-report frame")
    if client_id in reports.index:
        raise fail("client_id", client_id, "already reports", "add a client with a new id")
    if len(reports) and _id_kind(client_id) != _id_kind(reports.index[0]):
        raise fail("client_id", client_id, f"is not of the kind of the frame's ids (e.g. "
                   f"{reports.index[0]!r})", "use ids of one kind: integers or text")
    _value_columns(reports, values)
    needed = [c for c in reports.columns if c not in PUBLIC_COLUMNS]
    missing = [c for c in needed if c not in values]
    if missing:
        raise fail("values", sorted(values), f"miss the value columns {missing}",
                   "give the new client a value for every metric column")
    has_regions = "region_id" in reports.columns
    if has_regions == (region_id is None):
        raise fail("region_id", region_id, "is missing" if has_regions else
                   "is given but the reports have no regions",
                   "pass the new client's region" if has_regions else "drop region_id")
    _Model.of(reports, spec).check(values, needed)
    row = {c: reports[c].iloc[0] for c in PUBLIC_COLUMNS if c in reports.columns}
    if has_regions:
        row["region_id"] = region_id
    out = reports.copy()
    out.loc[client_id] = pd.Series({**row, **values})
    return out


def _id_kind(value: Any) -> str:
    if isinstance(value, str):
        return "text"
    if isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, bool):
        return "integer"
    return type(value).__name__


def _one_per_region(reports: pd.DataFrame) -> list[Any]:
    if "region_id" not in reports.columns:
        return [reports.index[0]]
    first = ~reports["region_id"].duplicated()
    return list(reports.index[first.to_numpy()])


def _extremes(spec: MetricSpec | HistogramSpec) -> tuple[dict[str, float], dict[str, float]]:
    """Return the values at the two ends of what one client can report."""
    if isinstance(spec, MetricSpec):
        return {spec.name: spec.clip_low}, {spec.name: spec.clip_high}
    cols = list(spec.columns)
    low = dict.fromkeys(cols, 0.0)
    high = dict.fromkeys(cols, 0.0)
    low[cols[0]] = spec.mass_cap
    high[cols[-1]] = spec.mass_cap
    return low, high


def extreme_pairs(reports: pd.DataFrame, spec: MetricSpec | HistogramSpec, *,
                  clients: Sequence[Any] | None = None, neighbours: str = "replace"
                  ) -> Iterator[tuple[pd.DataFrame, pd.DataFrame]]:
    """Yield worst-case neighbouring pairs of one metric, one per chosen client.

    ``neighbours="replace"``: for a :class:`~spatialdp.federated.MetricSpec`
    the client reports ``clip_low`` in one input and ``clip_high`` in the other
    (a change of the whole sensitivity); for a
    :class:`~spatialdp.federated.HistogramSpec` its whole ``mass_cap`` sits in
    the first bucket, then in the last (L1 change ``2 * mass_cap``).

    ``neighbours="add_remove"``: the client is absent from one input and
    present in the other with the value of largest magnitude (the clip end
    farther from 0; a histogram's whole ``mass_cap`` in its last bucket): the
    sum moves by ``max(|low|, |high|)`` (or ``mass_cap``) and the count by one.

    ``clients`` defaults to the first client of each region.

    Examples
    --------
    >>> spec = MetricSpec("loss", 0.0, 4.0)
    >>> reports = pd.DataFrame({"loss": [1.0, 2.0], "region_id": ["a", "b"]},
    ...                        index=pd.Index([7, 8], name="client_id"))
    >>> [(a.loss.tolist(), b.loss.tolist()) for a, b in
    ...  extreme_pairs(reports, spec, clients=[7], neighbours="add_remove")]
    [([2.0], [4.0, 2.0])]
    """
    check_instance(spec, "spec", (MetricSpec, HistogramSpec), "pass the released spec")
    relation = check_neighbours(neighbours)
    low, high = _extremes(spec)
    farther = high if _magnitude(high) >= _magnitude(low) else low
    for client in (_one_per_region(reports) if clients is None else clients):
        if relation == "add_remove":
            yield (remove_client(reports, client),
                   replace_client(reports, client, spec=spec, **farther))
        else:
            yield (replace_client(reports, client, spec=spec, **low),
                   replace_client(reports, client, spec=spec, **high))


def _magnitude(values: Mapping[str, float]) -> float:
    return math.fsum(abs(v) for v in values.values())


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
