"""Empirical privacy auditing: a statistical lower bound on the epsilon a release achieves.

:func:`audit` runs a spatialdp release on neighbouring inputs many times and
audits everything it publishes (its result object, numeric and non-numeric
columns, warnings, log records and written files: :func:`capture`,
:func:`read_files`), by default with seeded noise, one release per draw; the
``"tap"`` path audits the noise alone (vectorised, fast) and the ``"release"``
path the real release (OS entropy). It picks an output event on part of the
draws, bounds its probability ratio on the rest with exact Clopper-Pearson
bounds, and reports the claimed epsilon (or rho) next to the measured lower
bound, its alpha, the path and the event (:class:`AuditResult`).
:func:`audit_sampler` audits your own vectorised sampler;
:mod:`spatialdp.audit.neighbours` builds neighbours under the library's privacy
model (replace one client; add or remove one); :mod:`spatialdp.audit.bounds`
has the bounds.
Names resolve on first use (:mod:`spatialdp._lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spatialdp._lazy import attach

if TYPE_CHECKING:  # the public names, imported on first use (spatialdp._lazy)
    from spatialdp.audit.auditor import AuditResult, PairAudit, audit, audit_sampler
    from spatialdp.audit.bounds import (
        bernoulli_renyi,
        clopper_pearson,
        epsilon_lower_bound,
        rho_lower_bound,
    )
    from spatialdp.audit.events import Event, select_event
    from spatialdp.audit.neighbours import (
        add_client,
        drop_device,
        extreme_pairs,
        remove_client,
        replace_client,
        status_pair,
    )
    from spatialdp.audit.published import Publication, capture, publication, read_files
    from spatialdp.audit.tap import NoiseTap, tapped

__getattr__, __dir__ = attach(__name__, __file__)

__all__ = [
    "AuditResult",
    "Event",
    "NoiseTap",
    "PairAudit",
    "Publication",
    "add_client",
    "audit",
    "audit_sampler",
    "bernoulli_renyi",
    "capture",
    "clopper_pearson",
    "drop_device",
    "epsilon_lower_bound",
    "extreme_pairs",
    "publication",
    "read_files",
    "remove_client",
    "replace_client",
    "rho_lower_bound",
    "select_event",
    "status_pair",
    "tapped",
]
