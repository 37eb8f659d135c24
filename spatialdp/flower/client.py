"""The client side: local predictions in, one bounded report out; nothing raw leaves.

A Flower client answers the wrapper's evaluation instructions with
:func:`bounded_evaluate_result` (or :func:`bounded_report` for the metrics
alone) from its ``NumPyClient.evaluate``. The device module
(:func:`spatialdp.federated.device_report`) computes the report on the device:
every example's loss clipped into the spec before the mean, the error
histogram capped at the spec's mass, the along/across ratio clipped, and only
the columns the server asked for are sent. The loss and example count Flower's
``EvaluateRes`` also carries are sent as ``0.0`` and ``0`` (the exact count of a
small client fingerprints it; the report's ``count_bucket`` is the bounded
alternative). Nothing here imports Flower.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from spatialdp._validation import check_instance, check_text, fail
from spatialdp.exceptions import InvalidInput
from spatialdp.federated.client_reports import REGION_ID
from spatialdp.federated.device import device_report
from spatialdp.federated.metrics import HistogramSpec, MetricSpec
from spatialdp.flower.codec import (
    KEY_DEVICE_SPECS,
    KEY_PARTITION,
    KEY_REGION,
    encode_report,
    specs_from_config,
)
from spatialdp.geo.partition import Partition

__all__ = ["bounded_evaluate_result", "bounded_report", "evaluation_specs",
           "registration_properties"]

Scalar = bool | bytes | float | int | str

#: Metrics the device module derives from other inputs than the ``loss`` column.
_DERIVED = ("ratio", "count_bucket", "coverage_cells", "along_rmse", "across_rmse")


def evaluation_specs(config: Mapping[str, Any]) -> list[MetricSpec | HistogramSpec]:
    """Return the specs the server's evaluation instructions ask the device to clip under.

    Examples
    --------
    >>> from spatialdp.flower.codec import KEY_SPECS, specs_to_config
    >>> config = {KEY_SPECS: specs_to_config([MetricSpec("loss", 0, 4)])}
    >>> [s.key for s in evaluation_specs(config)]
    ['loss@1']
    """
    return specs_from_config(config)


def registration_properties(region_id: str, partition: Partition) -> dict[str, Scalar]:
    """Return what a client reports once, at registration: its region and the partition.

    Return it from ``NumPyClient.get_properties``; the wrapper reads it the first
    time it sees the client and freezes it (strata and regional releases use it;
    a later report from another region is dropped).

    Examples
    --------
    >>> from spatialdp.datasets import us_states_partition
    >>> states = us_states_partition()
    >>> registration_properties("CA", states)["spatialdp/region_id"]
    'CA'
    """
    check_instance(partition, "partition", Partition, "pass the shipped or agreed Partition")
    region = check_text(region_id, "region_id")
    if partition.region_ids.get_indexer(pd.Index([region]))[0] < 0:
        raise fail("region_id", region_id, f"is not a region of {partition.key!r}",
                   "locate the device with partition.assign()")
    return {KEY_REGION: region, KEY_PARTITION: partition.version}


def _device_arguments(specs: list[MetricSpec | HistogramSpec]) -> dict[str, Any]:
    """Map the asked-for specs onto device_report's arguments (one loss, one histogram)."""
    plain = [s for s in specs if isinstance(s, MetricSpec) and s.name not in _DERIVED
             and not s.name.startswith("cal_gap_")]
    hists = [s for s in specs if isinstance(s, HistogramSpec)]
    if len(plain) > 1 or len(hists) > 1:
        raise InvalidInput(
            f"the instructions ask for {[s.name for s in plain]} and {[s.name for s in hists]}; "
            "the device module computes one loss metric (from the 'loss' column) and one "
            "histogram (from the 'error' column) per report")
    out: dict[str, Any] = {"loss_spec": plain[0] if plain else None,
                           "hist_spec": hists[0] if hists else None}
    ratio = [s for s in specs if s.name == "ratio" and isinstance(s, MetricSpec)]
    if ratio:
        out["ratio_clip"] = ratio[0].clip_high
    cal = [s for s in specs if s.name.startswith("cal_gap_")]
    if cal:
        out["calibration_buckets"] = len(cal)
    return out


def bounded_report(examples: pd.DataFrame, config: Mapping[str, Any], *,
                   partition: Partition, region_id: str, **device_kwargs: Any
                   ) -> dict[str, Scalar]:
    """Compute this client's bounded report for the server's instructions, as Flower metrics.

    Parameters
    ----------
    examples : DataFrame
        The client's local evaluation examples, one row per example, with the
        columns :func:`spatialdp.federated.device_report` reads (``loss`` for a loss
        metric, ``error`` for a histogram, positions and ``heading_deg`` for the
        ratio, ``p_pred`` and ``outcome`` for calibration). No ``client_id`` is
        needed: every row is this client's.
    config : mapping
        ``EvaluateIns.config`` as received (the wrapper's instructions).
    partition : Partition
        The partition the wrapper releases on (its version is checked on the server).
    region_id : str
        This client's region, the one it registered.
    **device_kwargs
        Passed to :func:`~spatialdp.federated.device_report` (``roads=``,
        ``metric_crs=``, ``count_edges=``...).

    Returns
    -------
    dict of str -> Flower Scalar
        Only bounded numbers and their provenance; raw values stay here.

    Raises
    ------
    InvalidInput
        No instructions, inputs missing for an asked-for metric, or a report that
        would not carry every asked-for spec.

    Examples
    --------
    >>> from spatialdp.datasets import us_states_partition
    >>> from spatialdp.flower.codec import KEY_SPECS, specs_to_config
    >>> states = us_states_partition()
    >>> config = {KEY_SPECS: specs_to_config([MetricSpec("loss", 0.0, 2.0)])}
    >>> local = pd.DataFrame({"loss": [0.5, 40.0, 1.0]})      # one example is wild
    >>> report = bounded_report(local, config, partition=states, region_id="CO")
    >>> report["spatialdp/m/loss"], report["spatialdp/region_id"]
    (1.1666666666666667, 'CO')
    """
    if not isinstance(examples, pd.DataFrame):
        raise fail("examples", type(examples).__name__, "is not a DataFrame",
                   "pass the client's examples as a pandas DataFrame")
    specs = evaluation_specs(config)
    region = str(registration_properties(region_id, partition)[KEY_REGION])
    frame = examples.drop(columns=["client_id", REGION_ID], errors="ignore").assign(
        client_id="self", region_id=region)
    arguments = {**_device_arguments(specs), **device_kwargs}
    report = device_report(frame, partition=partition, **arguments)
    encoded = encode_report(report, specs)
    sent = dict(item.split("=", 1) for item in str(encoded[KEY_DEVICE_SPECS]).split(";"))
    missing = [s.name for s in specs if sent.get(s.name) != s.fingerprint]
    if missing:
        raise InvalidInput(f"the report does not carry {missing} under the asked-for specs; "
                           "give the device the inputs of those metrics")
    return encoded


def bounded_evaluate_result(examples: pd.DataFrame, config: Mapping[str, Any], *,
                            partition: Partition, region_id: str, **device_kwargs: Any
                            ) -> tuple[float, int, dict[str, Scalar]]:
    """Return ``(0.0, 0, bounded_report(...))``: what ``NumPyClient.evaluate`` returns.

    The loss and example count slots of Flower's ``EvaluateRes`` are filled with
    zeros so that no raw number travels; the wrapper publishes the loss from
    the bounded reports.

    Examples
    --------
    >>> from spatialdp.datasets import us_states_partition
    >>> from spatialdp.flower.codec import KEY_SPECS, specs_to_config
    >>> config = {KEY_SPECS: specs_to_config([MetricSpec("loss", 0.0, 2.0)])}
    >>> loss, n, metrics = bounded_evaluate_result(pd.DataFrame({"loss": [0.5]}), config,
    ...                                            partition=us_states_partition(),
    ...                                            region_id="CO")
    >>> loss, n, metrics["spatialdp/m/loss"]
    (0.0, 0, 0.5)
    """
    return 0.0, 0, bounded_report(examples, config, partition=partition, region_id=region_id,
                                  **device_kwargs)
