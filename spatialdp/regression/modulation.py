"""The cosine modulation of one client's features, its parameters and its L2 sensitivity.

A client holding ``x`` (clipped to ``||x|| <= R``) computes, for ``m``
orthonormal directions ``v_1..v_m`` and independent phases ``phi_j ~ U[0, 2 pi)``,

    ``g = (1 - alpha) x + (lambda / sqrt(m)) sum_j cos(omega <x, v_j> + phi_j) v_j``

(``m = 1`` is the single-vector variant). Because ``E cos = 0`` and ``E cos^2 =
1/2`` over the phase, ``E g g^T = (1 - alpha)^2 x x^T + (lambda^2 / (2m)) sum_j
v_j v_j^T``: the server subtracts the known second term.

L2 sensitivity (local DP: two neighbours are any two points of the ball).
The Jacobian of ``x -> g`` has eigenvalues ``(1 - alpha) - (lambda omega /
sqrt(m)) sin(.)`` along the ``v_j`` and ``1 - alpha`` elsewhere, so its
Lipschitz constant is ``|1 - alpha| + lambda omega / sqrt(m)`` and
``Delta <= 2 R (|1 - alpha| + lambda omega / sqrt(m))`` (the paper's bound).
The cosine term is also bounded: per direction ``|cos(omega <x, v_j> + phi) -
cos(omega <x', v_j> + phi)| <= min(2, omega |<x - x', v_j>|)``, so the cosine
part moves by at most ``(lambda / sqrt(m)) sqrt(sum_j min(4, omega^2 <x - x', v_j>^2))
<= lambda min(2, 2 R omega / sqrt(m))`` and by the triangle inequality

    ``Delta = 2 R |1 - alpha| + 2 lambda min(1, R omega / sqrt(m))``

which is never larger and is what :attr:`Modulation.sensitivity` returns
(:attr:`Modulation.lipschitz_sensitivity` keeps the paper's bound).

Examples
--------
>>> mod = Modulation(alpha=0.5, lam=1.0, omega=0.5, n_directions=4, radius=1.0)
>>> mod.sensitivity, mod.lipschitz_sensitivity
(1.5, 1.5)
>>> Modulation(alpha=0.5, lam=1.0, omega=4.0, radius=1.0).sensitivity  # cos bounded: 1 + 2
3.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from spatialdp._random import RandomLike, as_generator
from spatialdp._validation import (
    check_count,
    check_finite_array,
    check_instance,
    check_integer,
    check_number,
    check_positive,
    fail,
)
from spatialdp.regression._blocks import row_matmul
from spatialdp.regression._checks import check_directions

__all__ = ["MAX_FEATURES", "Modulation", "clip_rows", "modulate", "random_directions"]

#: Largest number of features accepted by :func:`random_directions` (a d x m Gaussian draw).
MAX_FEATURES = 10**7


@dataclass(frozen=True)
class Modulation:
    """The public parameters of the client transform.

    Parameters
    ----------
    alpha : float, default 0.0
        Shrinkage of the signal, ``0 <= alpha < 1`` (``alpha = 1`` would send
        no signal and the server would divide by zero).
    lam : float, default 0.0
        Amplitude ``lambda >= 0`` of the cosine term (``lambda = 0``: no
        modulation, the noisy-sufficient-statistics special case).
    omega : float, default 1.0
        Frequency ``omega >= 0`` of the cosine term.
    n_directions : int, default 1
        ``m``: 1 for the single-vector variant, more for the multi-vector one.
    radius : float, default 1.0
        Clipping bound ``R > 0`` on ``||x||``.

    Examples
    --------
    >>> Modulation(alpha=0.0, lam=0.0, radius=2.0).sensitivity  # plain Gaussian: 2 R
    4.0
    >>> Modulation(alpha=1.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: alpha=1.0 is above the limit < 1; ...
    """

    alpha: float = 0.0
    lam: float = 0.0
    omega: float = 1.0
    n_directions: int = 1
    radius: float = 1.0

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "alpha", check_number(
            self.alpha, "alpha", low=0.0, high=1.0, high_open=True,
            fix="pass 0 <= alpha < 1: alpha = 1 removes the signal and the debiasing "
            "divides by 1 - alpha"))
        set_(self, "lam", check_number(self.lam, "lam", low=0.0, high=1e6,
                                       fix="pass an amplitude lambda >= 0"))
        set_(self, "omega", check_number(self.omega, "omega", low=0.0, high=1e6,
                                         fix="pass a frequency omega >= 0"))
        set_(self, "n_directions", check_count(self.n_directions, "n_directions", low=1,
                                               high=10**6))
        set_(self, "radius", check_number(self.radius, "radius", low=0.0, low_open=True,
                                          high=1e12, fix="pass the clipping bound R > 0"))

    @property
    def lipschitz_sensitivity(self) -> float:
        """The paper's bound ``2 R (|1 - alpha| + lambda omega / sqrt(m))``."""
        m = self.n_directions
        return 2.0 * self.radius * (abs(1.0 - self.alpha) + self.lam * self.omega / math.sqrt(m))

    @property
    def sensitivity(self) -> float:
        """The L2 sensitivity ``2 R |1 - alpha| + 2 lambda min(1, R omega / sqrt(m))``.

        Never above :attr:`lipschitz_sensitivity`; used to calibrate the noise.
        """
        cos_part = 2.0 * self.lam * min(1.0, self.radius * self.omega
                                        / math.sqrt(self.n_directions))
        return 2.0 * self.radius * abs(1.0 - self.alpha) + cos_part

    @property
    def modulation_variance(self) -> float:
        """``lambda^2 / (2 m)``: the second moment the cosine adds along each direction."""
        return self.lam**2 / (2.0 * self.n_directions)


def random_directions(n_features: int, n_directions: int = 1, *, rng: RandomLike = None,
                      orthogonal_to: Any = None) -> NDArray[np.float64]:
    """Return ``m`` random orthonormal directions (rows), optionally orthogonal to a vector.

    QR of a Gaussian matrix (Haar-distributed). With ``orthogonal_to=beta`` the
    directions are also orthogonal to ``beta`` (the iterative protocol's
    ``v_t``), which needs ``m <= d - 1`` when ``beta != 0``.

    Examples
    --------
    >>> V = random_directions(5, 2, rng=0, orthogonal_to=[1, 0, 0, 0, 0])
    >>> bool(np.allclose(V @ V.T, np.eye(2))), bool(np.allclose(V[:, 0], 0))
    (True, True)
    """
    d = check_integer(n_features, "n_features", low=1, high=MAX_FEATURES,
                      fix=f"pass a whole number of features between 1 and {MAX_FEATURES}")
    m = check_count(n_directions, "n_directions", low=1)
    if m > d:
        raise fail("n_directions", m, f"exceeds n_features={d}",
                   "use n_directions <= n_features")
    gen = as_generator(rng)
    basis = np.zeros((d, 0))
    if orthogonal_to is not None:
        b = check_finite_array(orthogonal_to, "orthogonal_to", ndim=(1,))
        if b.shape != (d,):
            raise fail("orthogonal_to", b.shape, f"has length {b.shape[0]} for "
                       f"n_features={d}", "pass a vector of length n_features (or None)")
        big = float(np.max(np.abs(b)))
        b = b / big if big > 0 else b  # scaled first: a 1e308 entry must not overflow
        norm = float(np.linalg.norm(b))
        if norm > 0:
            if m > d - 1:
                raise fail("n_directions", m, f"leaves no room orthogonal to beta in d={d}",
                           "use n_directions <= n_features - 1")
            basis = (b / norm)[:, None]
    k = basis.shape[1]
    q, r = np.linalg.qr(np.hstack([basis, gen.standard_normal((d, m))]))
    q = q * np.where(np.diag(r) < 0, -1.0, 1.0)  # Haar: fix the signs of the QR
    return np.ascontiguousarray(q[:, k:k + m].T)


def clip_rows(X: NDArray[np.float64], radius: float) -> NDArray[np.float64]:
    """Return ``X`` with every row scaled down to norm at most ``radius`` (device side).

    Examples
    --------
    >>> clip_rows(np.array([[3.0, 4.0], [0.3, 0.4]]), 1.0).tolist()
    [[0.6000000000000001, 0.8], [0.3, 0.4]]
    """
    Xa = check_finite_array(X, "X", ndim=(2,), allow_empty=True)
    r = check_positive(radius, "radius", fix="pass the clipping bound R, a positive finite "
                       "number such as 1.0")
    # Norms computed on rows scaled by their largest entry: a 1e308 row must not overflow.
    big = np.max(np.abs(Xa), axis=1) if Xa.shape[1] else np.zeros(Xa.shape[0])
    safe = np.where(big > 0.0, big, 1.0)
    unit = Xa / safe[:, None]
    norms = np.sqrt(np.einsum("ij,ij->i", unit, unit))
    with np.errstate(over="ignore"):  # r / tiny = inf: such a row is inside the ball
        scale = np.minimum(1.0, (r / safe) / np.where(big > 0.0, norms, 1.0))
    return Xa * scale[:, None]


def _clip_rows(X: NDArray[np.float64], radius: float) -> NDArray[np.float64]:
    """:func:`clip_rows` without the checks (inner loops, inputs already validated)."""
    norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    scale = radius / np.maximum(norms, radius)
    return X * scale[:, None]


def modulate(X: NDArray[np.float64], directions: Any, modulation: Modulation,
             phases: NDArray[np.float64]) -> NDArray[np.float64]:
    """Return the modulated features ``g`` (before noise) of clipped rows ``X``.

    Parameters
    ----------
    X : ndarray, shape (K, d)
        Clipped features.
    directions : ndarray, shape (m, d)
        Orthonormal directions (checked).
    modulation : Modulation
    phases : ndarray, shape (K, m)
        One phase per client and direction, uniform on ``[0, 2 pi)``.

    Examples
    --------
    >>> mod = Modulation(alpha=0.5, lam=1.0, omega=1.0)
    >>> modulate(np.array([[0.0, 1.0]]), np.array([[1.0, 0.0]]), mod, np.zeros((1, 1))).tolist()
    [[1.0, 0.5]]
    """
    Xa = check_finite_array(X, "X", ndim=(2,), allow_empty=True)
    check_instance(modulation, "modulation", Modulation,
                   "pass a Modulation(alpha=..., lam=..., omega=..., radius=...)")
    V = check_directions(directions, Xa.shape[1])
    P = check_finite_array(phases, "phases", ndim=(2,), allow_empty=True)
    if P.shape != (Xa.shape[0], V.shape[0]):
        raise fail("phases", P.shape, f"is not ({Xa.shape[0]}, {V.shape[0]}) (one phase per "
                   "client and direction)", "pass an array of shape (len(X), n_directions)")
    X, phases = Xa, P
    if V.shape[0] != modulation.n_directions:
        raise fail("directions", V.shape, f"has {V.shape[0]} rows for n_directions="
                   f"{modulation.n_directions}", "give exactly n_directions directions")
    out = X * (1.0 - modulation.alpha)
    if modulation.lam > 0.0:
        arg = row_matmul(X, V.T)
        arg *= modulation.omega
        arg += phases
        np.cos(arg, out=arg)
        arg *= modulation.lam / math.sqrt(modulation.n_directions)
        out += row_matmul(arg, V)
    return out
