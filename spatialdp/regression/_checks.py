"""Validation shared by the regression modules (features, labels, directions)."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from spatialdp._validation import check_finite_array, fail
from spatialdp.exceptions import InvalidInput

__all__ = ["ORTHONORMAL_TOLERANCE", "check_directions", "check_features", "check_labels"]

#: Largest entry of ``V V^T - I`` accepted for "orthonormal" directions.
ORTHONORMAL_TOLERANCE = 1e-8


def check_features(X: Any, name: str = "X") -> NDArray[np.float64]:
    """Return ``X`` as a finite float64 ``(n_clients, n_features)`` array, or refuse it.

    Examples
    --------
    >>> check_features([[1.0, 2.0]]).shape
    (1, 2)
    >>> check_features([[1.0, float("nan")]])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: X has 1 NaN or infinite values ...
    """
    return check_finite_array(X, name, ndim=(2,))


def check_labels(y: Any, n_clients: int, name: str = "y") -> NDArray[np.float64]:
    """Return ``y`` as a finite float64 vector of one label per client, or refuse it.

    Examples
    --------
    >>> check_labels([1, 2], 2).tolist()
    [1.0, 2.0]
    """
    arr = check_finite_array(y, name, ndim=(1,))
    if arr.shape[0] != n_clients:
        raise InvalidInput(f"{name} has {arr.shape[0]} labels for {n_clients} clients; "
                           "give one label per row of X")
    return arr


def check_directions(directions: Any, n_features: int) -> NDArray[np.float64]:
    """Return ``m x d`` orthonormal modulation directions (one per row), or refuse them.

    Examples
    --------
    >>> check_directions(np.eye(3)[:2], 3).shape
    (2, 3)
    >>> check_directions([[1.0, 1.0]], 2)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: directions=... are not orthonormal ...
    """
    V = check_finite_array(directions, "directions", ndim=(1, 2))
    if V.ndim == 1:
        V = V[None, :]
    m, d = V.shape
    if d != n_features:
        raise fail("directions", V.shape, f"have {d} columns for {n_features} features",
                   "give one direction per row, each of length n_features")
    if m > n_features:
        raise fail("n_directions", m, f"exceeds n_features={n_features}: at most d "
                   "orthonormal directions exist in R^d", "use n_directions <= n_features")
    gram = V @ V.T
    worst = float(np.max(np.abs(gram - np.eye(m))))
    if worst > ORTHONORMAL_TOLERANCE:
        raise fail("directions", V.round(3).tolist(), f"are not orthonormal (largest entry of "
                   f"V V^T - I is {worst:.3g})", "orthonormalise them, e.g. with "
                   "random_directions() or numpy.linalg.qr")
    return V
