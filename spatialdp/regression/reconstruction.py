"""The Cramér-Rao bound on reconstructing a client's features from its one report.

An attacker sees one report ``g~ = f(x, phi) + xi``, ``xi ~ N(0, sigma^2 I)``,
and not the phases. If it also saw the phases, the Fisher information about
``x`` would be ``J^T J / sigma^2`` with ``J = (1 - alpha) I - (lambda omega / sqrt(m))
sum_j sin(omega <x, v_j> + phi_j) v_j v_j^T`` (diagonal in a basis containing
the ``v_j``). The phases carry no information about ``x``, so by the chain rule
the information of the report alone is at most the phase-average of that:
``E_phi[J^T J] / sigma^2``, whose diagonal is ``(1 - alpha)^2`` off the
directions and ``(1 - alpha)^2 + lambda^2 omega^2 / (2m)`` along each. Hence
for every unbiased attacker

    ``E||x^ - x||^2 >= sigma^2 [ (d - m) / (1 - alpha)^2``
    ``                           + m / ((1 - alpha)^2 + lambda^2 omega^2 / (2m)) ]``

(the formula of the working notes: correct, but a LOWER bound that gets weaker
as ``lambda omega`` grows; it does not by itself show that modulation makes
reconstruction harder). At ``lambda = 0`` it is attained by ``x^ = g~ / (1 - alpha)``.
At a fixed epsilon, ``sigma`` is set by the sensitivity
(:attr:`~spatialdp.regression.modulation.Modulation.sensitivity`), so the bound is
reported next to epsilon by :func:`reconstruction_table`.

Examples
--------
>>> from spatialdp.regression.modulation import Modulation
>>> reconstruction_bound(Modulation(), sigma=1.0, n_features=4)
4.0
>>> reconstruction_bound(Modulation(lam=2.0, omega=1.0), sigma=1.0, n_features=4)
3.3333333333333335
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pandas as pd

from spatialdp._validation import check_count, check_instance, check_positive, fail
from spatialdp.regression.accounting import rho_for_epsilon
from spatialdp.regression.lattice_gaussian import headroom_sigma
from spatialdp.regression.modulation import Modulation

__all__ = ["reconstruction_bound", "reconstruction_table"]


def reconstruction_bound(modulation: Modulation, *, sigma: float, n_features: int) -> float:
    """Return the Cramér-Rao lower bound on ``E||x^ - x||^2`` for an unbiased attacker."""
    check_instance(modulation, "modulation", Modulation,
                   "pass a Modulation(alpha=..., lam=..., omega=..., radius=...)")
    s = check_positive(sigma, "sigma")
    d = check_count(n_features, "n_features", low=modulation.n_directions)
    m = modulation.n_directions
    a = (1.0 - modulation.alpha) ** 2
    along = a + modulation.lam**2 * modulation.omega**2 / (2.0 * m)
    return s * s * ((d - m) / a + m / along)


def reconstruction_table(modulation: Modulation, n_features: int,
                         epsilons: Sequence[float] = (0.5, 1.0, 2.0, 4.0, 8.0),
                         delta: float = 1e-6) -> pd.DataFrame:
    """Return epsilon, rho, sigma and the bound (absolute and relative to ``R^2``) per epsilon.

    Examples
    --------
    >>> t = reconstruction_table(Modulation(radius=1.0), 4, epsilons=(1.0,))
    >>> list(t.columns)
    ['epsilon', 'delta', 'rho', 'sigma', 'crb', 'crb_over_R2']
    """
    check_instance(modulation, "modulation", Modulation,
                   "pass a Modulation(alpha=..., lam=..., omega=..., radius=...)")
    if isinstance(epsilons, (str, bytes)) or not isinstance(epsilons, Iterable):
        raise fail("epsilons", epsilons, f"is a {type(epsilons).__name__}, not a sequence of "
                   "numbers", "pass e.g. epsilons=(1.0,) for one value")
    grid = list(epsilons)
    if not grid:
        raise fail("epsilons", epsilons, "is empty", "pass at least one epsilon, e.g. (1.0,)")
    rows = []
    for eps in grid:
        rho = rho_for_epsilon(eps, delta)
        sigma = headroom_sigma(modulation.sensitivity, rho)
        crb = reconstruction_bound(modulation, sigma=sigma, n_features=n_features)
        rows.append({"epsilon": eps, "delta": delta, "rho": rho, "sigma": sigma, "crb": crb,
                     "crb_over_R2": crb / modulation.radius**2})
    return pd.DataFrame(rows)
