"""Noise for differential privacy: release samplers, simulation samplers, mechanisms.

There are two deliberately separate paths.

**Release** functions (``release_*``) produce values that get published. They
draw from operating-system entropy (never a seeded numpy generator: an
attacker who knows a few true cells could reconstruct a PCG64 state from the
released values and subtract the noise everywhere), take no seed argument, and
are floating-point safe:

* :func:`release_discrete_laplace` - exact integer (two-sided geometric) noise
  from our vectorised Canonne-Kamath-Steinke sampler with integer arithmetic
  (about a million cells in well under a second);
* :func:`release_laplace`, :func:`release_gaussian` - real-valued noise through
  OpenDP's floating-point-safe measurements;
* :func:`release_discrete_gaussian` - exact integer Gaussian noise through
  OpenDP.

**Simulation** functions (``simulate_*``) are for measuring error, tests and
synthetic runs. They take ``rng`` (a :class:`numpy.random.Generator`, a seed or
``None``) and use fast numpy floating-point samplers. Never publish their output.

**Mechanisms** (:class:`LaplaceMechanism`, :class:`GaussianMechanism`) bundle a
privacy parameter and a sensitivity into a noise scale, a :class:`PrivacyLoss`
and accuracy figures from :mod:`spatialdp.privacy.accuracy`.

Sparse input
------------
Every function accepts a ``scipy.sparse`` matrix or array over a *public*
domain (all H3 cells of a region, all buckets of a histogram) and returns a
dense array of the same shape. Noise is added to EVERY entry of the domain,
zeros included: noising only the stored non-zeros would publish the support,
i.e. exactly which cells had any data, with no privacy at all.

Layout
------
This module is the public entry point; the code lives in private modules:
``_release`` (release samplers), ``_simulate`` (simulation samplers),
``_mechanisms`` (mechanisms and :class:`PrivacyLoss`), ``_noise_input``
(input checks) and ``_exact`` (the exact OS-entropy samplers).
"""

from __future__ import annotations

from spatialdp.privacy._exact import rational_scale
from spatialdp.privacy._mechanisms import GaussianMechanism, LaplaceMechanism, PrivacyLoss
from spatialdp.privacy._release import (
    release_discrete_gaussian,
    release_discrete_laplace,
    release_gaussian,
    release_laplace,
)
from spatialdp.privacy._simulate import (
    simulate_discrete_gaussian,
    simulate_discrete_laplace,
    simulate_gaussian,
    simulate_laplace,
)

__all__ = [
    "GaussianMechanism",
    "LaplaceMechanism",
    "PrivacyLoss",
    "rational_scale",
    "release_discrete_gaussian",
    "release_discrete_laplace",
    "release_gaussian",
    "release_laplace",
    "simulate_discrete_gaussian",
    "simulate_discrete_laplace",
    "simulate_gaussian",
    "simulate_laplace",
]
