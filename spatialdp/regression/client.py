"""Device side: clip, modulate and noise one sample per client (vectorised over clients).

What leaves a device is a release: with a :class:`~spatialdp.privacy.target.ReleaseTarget`
or :class:`~spatialdp.privacy.target.Unaccounted` target the noise is exact
discrete Gaussian noise on a fine lattice from OS entropy
(:mod:`spatialdp.regression.lattice_gaussian`); with
:class:`~spatialdp.privacy.target.Simulation` it is seeded continuous Gaussian
noise, for experiments only.

Order, as in every release (:mod:`spatialdp.privacy.pipeline`): validate ->
charge -> clip, modulate and noise (in row blocks of 32,768 clients: the same
result, computed in cache).

Examples
--------
>>> from spatialdp.privacy import Simulation
>>> rng = np.random.default_rng(0)
>>> X, y = rng.normal(size=(1000, 3)), rng.normal(size=1000)
>>> rep = transform_clients(X, y, modulation=Modulation(lam=0.5, radius=2.0), rho=0.5,
...                         target=Simulation(rng=1))
>>> rep.features.shape, round(rep.sigma, 3)
((1000, 3), 5.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from spatialdp._results import Result
from spatialdp._validation import check_epsilon, check_instance, check_number, fail
from spatialdp.privacy.budget import Disjoint
from spatialdp.privacy.pipeline import ReleasePlan, exact_total, run_release
from spatialdp.privacy.target import Accounting, Simulation, check_target
from spatialdp.regression._blocks import BLOCK, single_blas
from spatialdp.regression._checks import check_directions, check_features, check_labels
from spatialdp.regression.accounting import LINE_ITEM, resolve_rho
from spatialdp.regression.lattice_gaussian import LatticeGaussianMechanism
from spatialdp.regression.modulation import (
    Modulation,
    _clip_rows,
    modulate,
    random_directions,
)

__all__ = ["ClientReports", "DeviceTransform", "plan_transform", "transform_clients"]


@dataclass(frozen=True, repr=False)
class ClientReports(Result):
    """What the server receives: one noisy modulated vector (and label) per client.

    Attributes
    ----------
    features : ndarray (K, d)
        ``g~``: clipped, modulated, noised features.
    labels : ndarray (K,)
        The labels (public), or clipped and noised labels.
    directions : ndarray (m, d)
        The public modulation directions.
    modulation : Modulation
    sigma : float
        Standard deviation of the feature noise.
    label_sigma : float
        Standard deviation of the label noise (0 for public labels).
    rho : float
        zCDP loss of each client (features plus labels).
    accounting : dict
        The target's accounting record.
    label_bound : float
        The public clipping bound ``B`` of noised labels (``|y| <= B`` before the noise;
        ``inf`` for public labels): the server's cap on the label second moment.
    """

    features: NDArray[np.float64]
    labels: NDArray[np.float64]
    directions: NDArray[np.float64]
    modulation: Modulation
    sigma: float
    label_sigma: float
    rho: float
    accounting: dict[str, Any] = field(default_factory=dict)
    label_bound: float = math.inf

    @property
    def n_clients(self) -> int:
        """K, the number of reports."""
        return int(self.features.shape[0])

    @property
    def n_features(self) -> int:
        """d, the feature dimension."""
        return int(self.features.shape[1])

    def summary(self) -> str:
        """Return one line: how many reports, their size and noise, the privacy loss."""
        labels = "public labels" if self.label_sigma == 0 else f"label sigma {self.label_sigma:.4g}"
        return (f"{self.n_clients} client reports, d={self.n_features}, sigma {self.sigma:.4g}, "
                f"{labels}, rho {self.rho:.4g} per client{self.accounting_note}")


def _phases(target: Accounting, shape: tuple[int, int]) -> NDArray[np.float64]:
    # The phases are not part of the DP guarantee (it holds for every phase); a release
    # still draws them from fresh OS entropy so that they are never reproducible.
    gen = target.rng if isinstance(target, Simulation) else np.random.default_rng()
    return gen.uniform(0.0, 2.0 * math.pi, size=shape)


def _device_blocks(Xa: NDArray[np.float64], V: NDArray[np.float64], modulation: Modulation,
                   phases: NDArray[np.float64], target: Accounting, mech: LatticeGaussianMechanism,
                   noisy: NDArray[np.float64]) -> None:
    """Clip, modulate and noise each row block of ``Xa`` into ``noisy``."""
    for start in range(0, Xa.shape[0], BLOCK):
        rows = slice(start, start + BLOCK)
        g = modulate(_clip_rows(Xa[rows], modulation.radius), V, modulation, phases[rows])
        if isinstance(target, Simulation):  # mech.simulate's draw, written in place
            block = noisy[rows]
            target.rng.standard_normal(out=block)
            block *= mech.scale
            block += g
        else:
            noisy[rows] = target.add_noise(mech, g)


@dataclass(frozen=True)
class DeviceTransform:
    """A checked on-device transform, ready to draw: what every client will release.

    Built by :func:`plan_transform` (validation only, nothing drawn);
    :meth:`draw` runs the devices' side after the pipeline has charged
    :attr:`rho` (:func:`transform_clients`, or a protocol's own plan).
    """

    features: NDArray[np.float64]
    labels: NDArray[np.float64]
    directions: NDArray[np.float64]
    modulation: Modulation
    mechanism: LatticeGaussianMechanism
    label_mechanism: LatticeGaussianMechanism | None
    label_bound: float = math.inf

    @property
    def rho(self) -> float:
        """ZCDP loss of each client: features plus labels."""
        if self.label_mechanism is None:
            return self.mechanism.rho
        return exact_total([self.mechanism.rho, self.label_mechanism.rho])

    def draw(self, target: Accounting) -> ClientReports:
        """Clip, modulate and noise each client's vector in row blocks (after the charge)."""
        Xa, modulation = self.features, self.modulation
        phases = _phases(target, (Xa.shape[0], modulation.n_directions))
        noisy = np.empty(Xa.shape)  # C order: row blocks are contiguous
        with single_blas():
            _device_blocks(Xa, self.directions, modulation, phases, target, self.mechanism, noisy)
        labels = (self.labels if self.label_mechanism is None
                  else target.add_noise(self.label_mechanism, self.labels[:, None])[:, 0])
        return ClientReports(features=noisy, labels=labels, directions=self.directions,
                             modulation=modulation, sigma=self.mechanism.scale,
                             label_sigma=(0.0 if self.label_mechanism is None
                                          else self.label_mechanism.scale),
                             rho=self.rho, accounting=target.metadata(),
                             label_bound=self.label_bound)

    def plan(self) -> ReleasePlan[ClientReports]:
        """Return the release plan of this transform (its noise drawn in blocks)."""
        return ReleasePlan(None, [], lambda drawn: drawn[0], rho=self.rho,
                           sample=lambda target: [self.draw(target)])


def plan_transform(X: Any, y: Any, *, modulation: Modulation, target: Accounting,
                   directions: Any = None, rho: Any = None, epsilon: Any = None,
                   delta: Any = None, label_bound: Any = None,
                   label_rho: Any = None) -> DeviceTransform:
    """Check the arguments of :func:`transform_clients` and return the transform (nothing drawn)."""
    check_instance(modulation, "modulation", Modulation,
                   "pass a Modulation(alpha=..., lam=..., omega=..., radius=...)")
    Xa = check_features(X)
    K, d = Xa.shape
    ya = check_labels(y, K)
    rho_x = resolve_rho(rho, epsilon, delta)
    if directions is None:
        gen = target.rng if isinstance(target, Simulation) else None
        V = random_directions(d, modulation.n_directions, rng=gen)
    else:
        V = check_directions(directions, d)
        if V.shape[0] != modulation.n_directions:
            raise fail("directions", f"{V.shape[0]} rows", f"do not match the modulation's "
                       f"n_directions={modulation.n_directions}",
                       f"pass {modulation.n_directions} orthonormal directions, or a "
                       "Modulation with as many directions as you pass")
    mech = LatticeGaussianMechanism(rho_x, modulation.sensitivity, d)
    label_mech, bound = None, math.inf
    if label_bound is not None:
        bound = check_number(label_bound, "label_bound", low=0.0, low_open=True,
                             fix="pass the bound B on |y|")
        if label_rho is None:
            raise fail("label_rho", None, f"is missing while label_bound={bound:g} is given "
                       "(the noised labels are a release of their own)",
                       "pass label_rho= (zCDP) as well, or drop label_bound to keep the "
                       "labels public")
        label_mech = LatticeGaussianMechanism(check_epsilon(label_rho, "label_rho"),
                                              2.0 * bound, 1)
        ya = np.clip(ya, -bound, bound)
    elif label_rho is not None:
        raise fail("label_rho", label_rho, "needs label_bound (the clipping bound of the labels)",
                   "pass label_bound=B as well, or drop label_rho")
    return DeviceTransform(Xa, ya, V, modulation, mech, label_mech, bound)


def transform_clients(
    X: Any,
    y: Any,
    *,
    modulation: Modulation,
    target: Accounting,
    directions: Any = None,
    rho: Any = None,
    epsilon: Any = None,
    delta: Any = None,
    label_bound: Any = None,
    label_rho: Any = None,
    round_index: int | None = None,
) -> ClientReports:
    """Return each client's noisy modulated vector: the on-device transform, vectorised.

    Parameters
    ----------
    X : array_like (K, d)
        One private feature vector per client (clipped here to ``modulation.radius``).
    y : array_like (K,)
        One label per client; public unless ``label_bound`` is given.
    modulation : Modulation
        alpha, lambda, omega, m and the clipping radius R.
    target : ReleaseTarget, Unaccounted or Simulation
        Where the release is charged and how the noise is drawn.
    directions : array_like (m, d), optional
        Orthonormal directions chosen by the server (random ones by default).
    rho : float, optional
        zCDP loss of the feature release; or give ``epsilon`` and ``delta``.
    label_bound : float, optional
        Clip labels to ``[-B, B]`` and noise them (for private labels); needs
        ``label_rho``. The label release has L2 sensitivity ``2 B``.
    label_rho : float, optional
        zCDP loss of the label release (added to ``rho`` in the charge).
    round_index : int, optional
        Recorded with the charge.

    Returns
    -------
    ClientReports

    Raises
    ------
    InvalidInput
        NaN features, ``alpha = 1``, non-orthonormal directions, ``m > d``.
    BudgetExceeded
        The ledger cannot cover the charge (nothing is charged).

    Notes
    -----
    The neighbouring relation is ``"replace"``: each client's report reaches
    the server with its sender (there is no secure sum to hide in), so the
    guarantee protects the client's features (and clipped label), not the fact
    that it took part.
    """
    target = check_target(target)
    transform = plan_transform(X, y, modulation=modulation, target=target, directions=directions,
                               rho=rho, epsilon=epsilon, delta=delta, label_bound=label_bound,
                               label_rho=label_rho)
    (reports,) = run_release(
        [transform.plan()], target=target, default_line_item=LINE_ITEM,
        structure=Disjoint("modulated-regression:clients", transform.features.shape[0]),
        what="modulated features" + (" and labels" if label_bound is not None else ""),
        round_index=round_index)
    return reports
