"""Client reports carry their provenance in the data: who, where, under which specs.

A client report is one row per client. Its provenance lives in columns (not in
``DataFrame.attrs``, which ``pd.concat`` drops), so it survives concatenation,
Parquet and CSV:

==========================  =================================================
index ``client_id``         the client, unique per release
``region_id``               the client's region in the partition (with one)
``partition_version``       the version of that partition
``device_specs``            ``name=fingerprint`` of every spec the device
                            clipped under, ``;``-separated
==========================  =================================================

The server reads a report only through :func:`read_reports`, which refuses a
report that lacks any of them, repeats a client, mixes id types (an int ``7``
and a str ``"7"`` would be two clients: :func:`~spatialdp._clients.id_kind`),
mixes partition versions, or was clipped under another spec than the one being
released.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp._clients import id_kind
from spatialdp._validation import check_ids
from spatialdp.exceptions import InvalidInput, PartitionMismatch
from spatialdp.federated._checks import _refuse_rows
from spatialdp.federated.metrics import HistogramSpec, MetricSpec, Spec

if TYPE_CHECKING:
    from spatialdp.geo.partition import Partition

__all__ = ["CLIENT_ID", "DEVICE_SPECS", "PARTITION_VERSION", "REGION_ID", "ClientTable",
           "client_regions", "constant_tag", "read_reports",
           "refuse_non_finite", "spec_tag"]

CLIENT_ID = "client_id"
REGION_ID = "region_id"
PARTITION_VERSION = "partition_version"
DEVICE_SPECS = "device_specs"



def spec_tag(specs: Iterable[Spec]) -> str:
    """Return the ``device_specs`` value for reports clipped under ``specs``.

    Examples
    --------
    >>> spec_tag([MetricSpec("loss", 0, 2)]).startswith("loss=")
    True
    """
    return ";".join(sorted(f"{s.name}={s.fingerprint}" for s in specs))


def constant_tag(value: str, n: int) -> pd.Categorical[str]:
    """Return ``value`` repeated ``n`` times as a one-category column (no list of n strings).

    Examples
    --------
    >>> constant_tag("us48@ab12", 3).tolist()
    ['us48@ab12', 'us48@ab12', 'us48@ab12']
    """
    return pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), categories=pd.Index([value]))


def _parse(tag: str) -> dict[str, str]:
    pairs = (item.split("=", 1) for item in str(tag).split(";") if "=" in item)
    return {name: fp for name, fp in pairs}


@dataclass(frozen=True)
class ClientTable:
    """A validated client report: ids (and their kind), optional region positions, the frame."""

    frame: pd.DataFrame
    client_ids: pd.Index
    positions: NDArray[np.integer] | None
    id_kind: str | None = None

    def values(self, spec: Spec) -> NDArray[np.float64]:
        """Return the spec's column(s) as float64: (n,) for a metric, (n, k) for a histogram."""
        cols = spec.columns if isinstance(spec, HistogramSpec) else [spec.name]
        data = self._numeric(cols, spec.key)
        return data if isinstance(spec, HistogramSpec) else data[:, 0]

    def presence(self, spec: MetricSpec) -> NDArray[np.float64] | None:
        """Return the 0/1 presence column of a metric that has one."""
        if spec.present is None:
            return None
        flags = self._numeric([spec.present], spec.key)[:, 0]
        bad = (flags != 0) & (flags != 1)
        if bad.any():
            raise InvalidInput(
                f"column {spec.present!r} has {int(bad.sum())} values other than 0 and 1; it "
                "says whether a client has the metric: the device writes 0 or 1")
        return flags

    def _numeric(self, cols: Sequence[str], key: str) -> NDArray[np.float64]:
        missing = [c for c in cols if c not in self.frame.columns]
        if missing:
            raise InvalidInput(
                f"the client reports lack columns {missing} for metric {key}; run the device "
                "module with this spec")
        try:
            # A float block comes back as a column-major view: no copy, and each
            # column is contiguous for the per-column sums of the secure sum. One
            # column is read as a Series: no intermediate frame.
            if len(cols) == 1:
                data = self.frame[cols[0]].to_numpy(dtype=np.float64)[:, None]
            else:
                data = self.frame[list(cols)].to_numpy(dtype=np.float64)
        except (TypeError, ValueError):
            raise InvalidInput(f"columns {list(cols)} of {key} are not numeric") from None
        return data


def refuse_non_finite(values: NDArray[np.float64], key: str) -> None:
    """Refuse clients' NaN or infinite values, naming the metric and the count.

    Called when a per-group sum came out non-finite: a NaN or infinity in any
    value makes its group's sum non-finite, so finiteness is checked on the few
    sums and the n values are scanned only to explain a failure.
    """
    bad = ~np.isfinite(values)
    count = int(bad.reshape(len(values), -1).any(axis=1).sum())
    if count:
        raise InvalidInput(
            f"{key}: {count} clients sent NaN or infinite values; devices send clipped "
            "finite numbers: find the device build that does not")
    raise InvalidInput(
        f"{key}: the per-region sums overflow; devices send clipped values, so some "
        "client's value is far beyond the spec's bounds")


def _client_ids(frame: pd.DataFrame) -> tuple[pd.Index, str | None]:
    """Return the validated ids (present, unique) and their one kind (integer or string)."""
    if CLIENT_ID in frame.columns:
        ids: object = frame[CLIENT_ID].to_numpy()
    elif frame.index.name == CLIENT_ID:
        ids = frame.index  # an Index caches its uniqueness: no copy, no rehash
    else:
        raise InvalidInput(
            "the client reports have no client_id (neither an index of that name nor a "
            "column); one client, one row needs the ids: use device_report's output")
    kind = id_kind(ids, CLIENT_ID)  # before the repeat check: 7 and "7" are no repeat
    return check_ids(ids, CLIENT_ID), kind


def _unique_tags(column: pd.Series) -> list[object]:
    """Return the distinct device_specs values (a categorical column's codes are read directly)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = column.cat.codes.to_numpy()
        cats = column.cat.categories
        if len(codes) and codes.min() == codes.max():  # the usual case: one tag for all
            used = codes[:1].astype(np.int64)
        else:  # bincount, not np.unique: no sort of n codes
            used = np.flatnonzero(np.bincount(codes.astype(np.int64) + 1)) - 1
        return [None if code < 0 else cats[code] for code in used]
    return list(pd.unique(column.to_numpy(dtype=object)))


def _check_device_specs(frame: pd.DataFrame, specs: Sequence[Spec]) -> None:
    if DEVICE_SPECS not in frame.columns:
        raise InvalidInput(
            "the client reports carry no device_specs column, so nothing shows which bounds "
            "the devices clipped to; produce them with device_report(..., specs)")
    column = frame[DEVICE_SPECS]
    for tag in _unique_tags(column):
        if tag is None or (isinstance(tag, float) and np.isnan(tag)):
            raise InvalidInput(
                f"{int(column.isna().sum())} client reports have no device_specs; every "
                "report must come from the device module")
        device = _parse(str(tag))
        for spec in specs:
            have = device.get(spec.name)
            if have != spec.fingerprint:
                rows = int((column == tag).sum())
                said = "no spec" if have is None else f"another spec ({have})"
                raise InvalidInput(
                    f"{rows} client reports were clipped under {said} for {spec.name!r}, not "
                    f"the released {spec.key} ({spec.fingerprint}); their bounds may differ, "
                    "so the noise would not cover them: re-run the device module with the "
                    "released spec")


def _positions(frame: pd.DataFrame, partition: object) -> NDArray[np.integer]:
    from spatialdp.geo.partition import Partition

    assert isinstance(partition, Partition)
    for column in (PARTITION_VERSION, REGION_ID):
        if column not in frame.columns:
            raise InvalidInput(
                f"the client reports have no {column!r} column; reports keyed by a region "
                "must say on which partition: pass partition= to device_report")
    versions = _unique_tags(frame[PARTITION_VERSION])
    wrong = [v for v in versions if v != partition.version]
    if wrong:
        raise PartitionMismatch(
            f"client reports were assigned on partition version(s) {wrong[:3]}, but the "
            f"release is on {partition.version!r}; reassign every client on one partition")
    fast = _arrow_positions(frame[REGION_ID], partition.region_ids)
    if fast is not None:
        return fast
    # Factorise once, then look the few distinct labels up in the partition: linear
    # in clients, no per-client lookup.
    codes, labels = _label_codes(frame[REGION_ID])
    if (codes < 0).any():
        raise InvalidInput(f"{int((codes < 0).sum())} client reports have no region_id")
    positions = partition.region_ids.get_indexer(labels).astype(np.int64)[codes]
    unknown = positions < 0
    if unknown.any():
        bad = list(labels[np.unique(codes[unknown])][:3])
        raise InvalidInput(
            f"{int(unknown.sum())} clients are in regions that are not in {partition.key!r} "
            f"(first: {bad}); assign them with partition.assign()")
    return positions


def _label_codes(column: pd.Series) -> tuple[NDArray[np.int64], pd.Index]:
    """Each row's label code (-1 for a missing label) and the labels.

    A categorical column is already factorised: its codes and categories are
    used as they are (the categories may include labels no row uses).
    """
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy().astype(np.int64), pd.Index(column.cat.categories)
    codes, labels = pd.factorize(column, use_na_sentinel=True)
    return codes.astype(np.int64), pd.Index(labels)


def _arrow_positions(column: pd.Series, region_ids: pd.Index) -> NDArray[np.int32] | None:
    """Each client's position in the partition, in one Arrow hash pass, or None.

    For Arrow-backed string ids (pandas' default string dtype) this skips the
    factorisation: ``pyarrow.compute.index_in`` looks every label up in the
    partition's ids directly. None (the caller takes the general path, which also
    words the errors) when the column is not Arrow strings or any label is
    missing or unknown.
    """
    if not (isinstance(column.dtype, pd.StringDtype) and column.dtype.storage == "pyarrow"
            and isinstance(region_ids.dtype, pd.StringDtype)):
        return None
    import pyarrow as pa
    import pyarrow.compute as pc

    found = pc.index_in(pa.array(column.array), value_set=pa.array(region_ids.array))
    if found.null_count:
        return None
    return np.asarray(found.to_numpy())  # int32, as Arrow gives it: no widening pass


def read_reports(reports: object, specs: Sequence[Spec], partition: object | None = None
                 ) -> ClientTable:
    """Validate client reports for a release of ``specs`` (on ``partition``, if given).

    Raises
    ------
    InvalidInput
        Not a DataFrame, empty, no, repeated or mixed-type client ids, untagged, or
        clipped under another spec.
    PartitionMismatch
        Tagged with another partition version.
    """
    if not isinstance(reports, pd.DataFrame):
        raise InvalidInput(
            f"client reports must be a DataFrame from device_report, got "
            f"{type(reports).__name__}")
    if len(reports) == 0:
        raise InvalidInput("the client reports are empty; there is nothing to release")
    ids, kind = _client_ids(reports)
    _check_device_specs(reports, specs)
    positions = None if partition is None else _positions(reports, partition)
    return ClientTable(reports, ids, positions, kind)


def client_regions(examples: pd.DataFrame, codes: NDArray[np.int64], n_clients: int,
                   partition: Partition) -> NDArray[np.object_]:
    """Each client's one region id, from the examples' ``region_id`` column.

    The labels are factorised once and every check runs on integer codes: one
    hash pass over the examples, then integer comparisons (no per-example
    object comparison), and the few distinct labels are looked up in the
    partition.
    """
    if REGION_ID not in examples.columns:
        raise InvalidInput(
            "partition= needs a 'region_id' column in the examples (each client's region, "
            "from the cohort selection or partition.assign)")
    labels, distinct = _label_codes(examples[REGION_ID])
    first = np.full(n_clients, -1, dtype=np.int64)
    first[codes[::-1]] = np.arange(codes.size)[::-1]
    chosen = labels[first]
    _refuse_rows(labels < 0, InvalidInput, lambda row: (
        f"client {examples.iloc[row][CLIENT_ID]!r} has an example without a region_id "
        f"(row {row}); assign every example with partition.assign()"))
    _refuse_rows(labels != chosen[codes], InvalidInput, lambda row: (
        f"client {examples.iloc[row][CLIENT_ID]!r} has examples in more than one region "
        f"(row {row}); a client reports from one region per round"))
    known = partition.region_ids.get_indexer(pd.Index(distinct)) >= 0
    _refuse_rows(~known[chosen], InvalidInput, lambda client: (
        f"region_id {distinct[chosen[client]]!r} is not in {partition.key!r}; assign "
        "clients with partition.assign()"))
    return np.asarray(distinct, dtype=object)[chosen]
