"""The wire format: evaluation instructions out, bounded reports back, as Flower Scalars.

Flower carries per-client evaluation results as a ``dict[str, Scalar]`` (bool,
bytes, float, int or str). The server sends its instructions (the specs the
devices must clip under) in :class:`flwr.common.EvaluateIns` ``config`` under
:data:`KEY_SPECS`; a device answers with one bounded report, the row that
:func:`spatialdp.federated.device_report` computes for it, flattened into such a
dict: the provenance under ``spatialdp/`` keys and the metric columns under
``spatialdp/m/``. Nothing in this module imports Flower.

On the server, :func:`decode_reports` reads the replies of one round into the
client-report frame of :func:`spatialdp.federated.regional_report`, keeping only
the columns the released specs name (any other key a client sends is dropped,
never stored) and dropping, one by one, the replies that could not have come
from the device module under these specs: missing keys, another partition
version or spec fingerprint, a region that is not the one the client
registered, non-finite or out-of-bound values. The drop counts are returned.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from spatialdp._validation import check_instance, fail
from spatialdp.exceptions import InvalidInput, InvalidSpec
from spatialdp.federated.client_reports import (
    DEVICE_SPECS,
    PARTITION_VERSION,
    REGION_ID,
    constant_tag,
)
from spatialdp.federated.metrics import HistogramSpec, MetricSpec, Spec, check_specs
from spatialdp.geo.partition import Partition

__all__ = [
    "KEY_DEVICE_MODULE",
    "KEY_DEVICE_SPECS",
    "KEY_PARTITION",
    "KEY_REGION",
    "KEY_ROUND",
    "KEY_SPECS",
    "METRIC_PREFIX",
    "decode_reports",
    "encode_report",
    "report_columns",
    "specs_from_config",
    "specs_to_config",
]


#: Config key of the released specs (JSON), sent in every EvaluateIns.
KEY_SPECS = "spatialdp/specs"
#: Config key of the federated round the instructions are for.
KEY_ROUND = "spatialdp/round"
#: Report (and registration property) key of the client's region id.
KEY_REGION = "spatialdp/region_id"
#: Report (and registration property) key of the partition version.
KEY_PARTITION = "spatialdp/partition_version"
#: Report key of the ``device_specs`` tag (``name=fingerprint;...``).
KEY_DEVICE_SPECS = "spatialdp/device_specs"
#: Report key of the device module's version.
KEY_DEVICE_MODULE = "spatialdp/device_module_version"
#: Prefix of the bounded metric columns in a report.
METRIC_PREFIX = "spatialdp/m/"

#: Relative slack of the bound checks (a device's float rounding, never more).
_SLACK = 1e-9


# --------------------------------------------------------------------------- specs


def _spec_dict(spec: Spec) -> dict[str, Any]:
    if isinstance(spec, HistogramSpec):
        return {"kind": "histogram", "name": spec.name, "edges": list(spec.edges),
                "mass_cap": spec.mass_cap, "version": spec.version,
                "fingerprint": spec.fingerprint}
    return {"kind": "metric", "name": spec.name, "clip_low": spec.clip_low,
            "clip_high": spec.clip_high, "version": spec.version, "present": spec.present,
            "fingerprint": spec.fingerprint}


def specs_to_config(specs: Sequence[Spec]) -> str:
    """Return the specs as the JSON text sent under :data:`KEY_SPECS`.

    Examples
    --------
    >>> text = specs_to_config([MetricSpec("loss", 0.0, 4.0)])
    >>> specs_from_config({KEY_SPECS: text})[0] == MetricSpec("loss", 0.0, 4.0)
    True
    """
    return json.dumps([_spec_dict(s) for s in check_specs(specs)], sort_keys=True)


def specs_from_config(config: Mapping[str, Any]) -> list[Spec]:
    """Return the specs a server's evaluation instructions ask for.

    Raises
    ------
    InvalidInput
        The config carries no spatialdp instructions, or they do not parse.
    InvalidSpec
        A spec whose fields do not reproduce its fingerprint (edited in transit).

    Examples
    --------
    >>> specs_from_config({})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: config has no 'spatialdp/specs' ...
    """
    if not isinstance(config, Mapping) or KEY_SPECS not in config:
        raise InvalidInput(
            f"config has no {KEY_SPECS!r} entry: these evaluation instructions do not come "
            "from SpatialDPStrategy; evaluate under the wrapper, or build the report with "
            "spatialdp.federated.device_report yourself")
    try:
        items = json.loads(str(config[KEY_SPECS]))
        specs: list[Spec] = []
        for item in items:
            if item["kind"] == "histogram":
                spec: Spec = HistogramSpec(item["name"], tuple(item["edges"]),
                                           mass_cap=item["mass_cap"], version=item["version"])
            else:
                spec = MetricSpec(item["name"], item["clip_low"], item["clip_high"],
                                  version=item["version"], present=item["present"])
            if spec.fingerprint != item["fingerprint"]:
                raise InvalidSpec(
                    f"spec {spec.name!r} does not match its fingerprint {item['fingerprint']}; "
                    "the instructions were altered: refuse to report under them")
            specs.append(spec)
    except InvalidSpec:
        raise
    except (ValueError, KeyError, TypeError) as err:
        raise InvalidInput(f"config[{KEY_SPECS!r}] does not parse ({err}); the instructions "
                           "must come from specs_to_config") from None
    return check_specs(specs)


def report_columns(specs: Sequence[Spec]) -> list[str]:
    """Return the report columns the specs need: values, buckets and presence flags.

    Examples
    --------
    >>> report_columns([MetricSpec("ratio", 0, 10, present="track_present"),
    ...                 HistogramSpec("err", edges=(1.0,))])
    ['ratio', 'track_present', 'err_0', 'err_1']
    """
    columns: list[str] = []
    for spec in specs:
        if isinstance(spec, HistogramSpec):
            columns.extend(spec.columns)
        else:
            columns.append(spec.name)
            if spec.present is not None:
                columns.append(spec.present)
    return columns


# --------------------------------------------------------------------------- device side


def encode_report(report: pd.DataFrame, specs: Sequence[Spec]) -> dict[str, bool | bytes |
                                                                       float | int | str]:
    """Flatten ONE client's bounded report into Flower metrics, only the asked-for columns.

    Parameters
    ----------
    report : DataFrame
        One row of :func:`spatialdp.federated.device_report` output, made with
        ``partition=`` (so it carries ``region_id`` and ``partition_version``).
    specs : sequence of MetricSpec / HistogramSpec
        The specs the server asked for; only their columns leave the device.

    Returns
    -------
    dict of str -> Flower Scalar
    """
    if not isinstance(report, pd.DataFrame) or len(report) != 1:
        raise InvalidInput("report must be the one-row DataFrame device_report returns for "
                           "this client")
    for column in (REGION_ID, PARTITION_VERSION, DEVICE_SPECS):
        if column not in report.columns:
            raise InvalidInput(f"the report has no {column!r} column; run device_report with "
                               "partition= and the examples' region_id")
    row = report.iloc[0]
    out: dict[str, bool | bytes | float | int | str] = {
        KEY_REGION: str(row[REGION_ID]),
        KEY_PARTITION: str(row[PARTITION_VERSION]),
        KEY_DEVICE_SPECS: str(row[DEVICE_SPECS]),
        KEY_DEVICE_MODULE: str(report.attrs.get("device_module_version", "")),
    }
    for column in report_columns(check_specs(specs)):
        if column not in report.columns:
            raise InvalidInput(f"the report lacks column {column!r} that the server asked for; "
                               "give the device the inputs of that metric")
        out[METRIC_PREFIX + column] = float(row[column])
    return out


# --------------------------------------------------------------------------- server side


def _column(metrics: list[Mapping[str, Any]], key: str) -> NDArray[np.float64]:
    """Each reply's numeric ``key`` as float64; missing or non-numeric values are NaN."""
    raw = [m.get(key) for m in metrics]
    return np.array([float(v) if isinstance(v, (int, float)) and not isinstance(v, bool)
                     else np.nan for v in raw], dtype=np.float64)


def _text(metrics: list[Mapping[str, Any]], key: str) -> NDArray[np.object_]:
    return np.array([v if isinstance(v := m.get(key), str) else None for m in metrics],
                    dtype=object)


def _tags_ok(tags: NDArray[np.object_], specs: Sequence[Spec]) -> NDArray[np.bool_]:
    """Return, per reply, whether its device_specs tag names every released fingerprint."""
    ok = np.zeros(tags.size, dtype=bool)
    wanted = {s.name: s.fingerprint for s in specs}
    present = np.array([t is not None for t in tags], dtype=bool)
    for tag in pd.unique(tags[present]):  # a loop over distinct tags
        pairs = dict(item.split("=", 1) for item in str(tag).split(";") if "=" in item)
        if all(pairs.get(name) == fp for name, fp in wanted.items()):
            ok |= tags == tag
    return ok


def decode_reports(
    replies: Mapping[str, Mapping[str, Any]],
    specs: Sequence[Spec],
    partition: Partition,
    *,
    regions: Mapping[str, str] | None = None,
) -> tuple[pd.DataFrame, dict[str, int]]:
    """Read one round's replies into a client-report frame; drop the ones that cannot be.

    Parameters
    ----------
    replies : mapping client id -> metrics dict
        Each client's evaluation metrics as Flower delivered them.
    specs : sequence of MetricSpec / HistogramSpec
        The released specs.
    partition : Partition
        The release's geography.
    regions : mapping client id -> region id, optional
        The regions the clients registered (frozen): a reply from another region
        is dropped.

    Returns
    -------
    frame : DataFrame
        Indexed by ``client_id``: the spec columns, ``region_id``,
        ``partition_version``, ``device_specs``; only valid replies.
    dropped : dict of str -> int
        Replies dropped, by reason (reasons with no drop are left out).

    Examples
    --------
    >>> from spatialdp.datasets import us_states_partition
    >>> from spatialdp.federated.client_reports import spec_tag
    >>> states, spec = us_states_partition(), MetricSpec("loss", 0.0, 4.0)
    >>> good = {KEY_REGION: "CA", KEY_PARTITION: states.version,
    ...         KEY_DEVICE_SPECS: spec_tag([spec]), METRIC_PREFIX + "loss": 1.5}
    >>> frame, dropped = decode_reports({"a": good, "b": {**good, METRIC_PREFIX + "loss": 9.0}},
    ...                                 [spec], states)
    >>> frame.loss.to_dict(), dropped
    ({'a': 1.5}, {'out of bounds': 1})
    """
    specs = check_specs(specs)
    check_instance(partition, "partition", Partition, "pass the release's Partition")
    if not isinstance(replies, Mapping):
        raise fail("replies", replies, "is not a mapping", "pass {client_id: metrics dict}")
    ids = [str(k) for k in replies]
    metrics = [m if isinstance(m, Mapping) else {} for m in replies.values()]
    n = len(ids)
    reasons: dict[str, NDArray[np.bool_]] = {}

    def drop(reason: str, bad: NDArray[np.bool_]) -> None:
        bad = bad & ~np.logical_or.reduce([*reasons.values(), np.zeros(n, dtype=bool)])
        if bad.any():
            reasons[reason] = bad

    id_index = pd.Index(ids)
    drop("repeated client id", np.asarray(id_index.duplicated(keep=False)))
    region = _text(metrics, KEY_REGION)
    version = _text(metrics, KEY_PARTITION)
    tags = _text(metrics, KEY_DEVICE_SPECS)
    absent = np.array([r is None or v is None or t is None
                       for r, v, t in zip(region, version, tags, strict=True)], dtype=bool)
    drop("no spatialdp report", absent)
    drop("partition version", version != partition.version)
    known = partition.region_ids.get_indexer(pd.Index(region.astype(str))) >= 0
    drop("unknown region", ~known)
    if regions is not None:
        registered = np.array([regions.get(c) for c in ids], dtype=object)
        drop("region differs from registration", registered != region)
    drop("spec fingerprint", ~_tags_ok(tags, specs))
    columns: dict[str, NDArray[np.float64]] = {}
    bad_value = np.zeros(n, dtype=bool)
    out_of_bounds = np.zeros(n, dtype=bool)
    for spec in specs:
        if isinstance(spec, HistogramSpec):
            block = np.column_stack([_column(metrics, METRIC_PREFIX + c) for c in spec.columns])
            bad_value |= ~np.isfinite(block).all(axis=1)
            cap = spec.mass_cap * (1 + _SLACK)
            with np.errstate(invalid="ignore"):
                out_of_bounds |= (block < 0).any(axis=1) | (block.sum(axis=1) > cap)
            columns.update(zip(spec.columns, block.T, strict=True))
            continue
        values = _column(metrics, METRIC_PREFIX + spec.name)
        bad_value |= ~np.isfinite(values)
        slack = _SLACK * max(1.0, abs(spec.clip_low), abs(spec.clip_high))
        with np.errstate(invalid="ignore"):
            out_of_bounds |= (values < spec.clip_low - slack) | (values > spec.clip_high + slack)
        columns[spec.name] = np.clip(values, spec.clip_low, spec.clip_high)
        if spec.present is not None:
            flags = _column(metrics, METRIC_PREFIX + spec.present)
            bad_value |= ~np.isfinite(flags)
            out_of_bounds |= np.isfinite(flags) & (flags != 0) & (flags != 1)
            columns[spec.present] = flags
    drop("missing or non-finite value", bad_value)
    drop("out of bounds", out_of_bounds)
    keep = ~np.logical_or.reduce([*reasons.values(), np.zeros(n, dtype=bool)])
    frame = pd.DataFrame({name: values[keep] for name, values in columns.items()},
                         index=pd.Index(np.asarray(ids, dtype=object)[keep], name="client_id"))
    frame[REGION_ID] = region[keep]
    frame[PARTITION_VERSION] = constant_tag(partition.version, int(keep.sum()))
    frame[DEVICE_SPECS] = pd.Categorical(tags[keep])
    return frame, {reason: int(bad.sum()) for reason, bad in reasons.items()}

