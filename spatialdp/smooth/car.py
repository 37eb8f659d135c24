"""The CAR area effect: a proper conditional autoregression on the binary neighbour graph.

A proper CAR (Besag 1974; Cressie 1993) gives the area effects of all areas
the precision ``Q(rho) / s2u`` with ``Q(rho) = D_w - rho C``: ``C`` the binary
adjacency of the neighbour graph (symmetric) and ``D_w`` its degrees. Given
its neighbours, an area's effect has mean ``rho`` times their average and
variance ``s2u / deg``. ``Q`` is positive definite for ``|rho| < 1`` (the
eigenvalues of ``D_w^-1/2 C D_w^-1/2`` lie in ``[-1, 1]``). Unlike the SAR
effect, ``rho = 0`` does not give Fay-Herriot: the effects are then
independent with variances ``s2u / deg``.

An area without a neighbour has no CAR effect (degree 0): the model refuses
such a graph.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from spatialdp.exceptions import InvalidInput

__all__ = ["car_adjacency"]


def car_adjacency(W: sparse.csr_array) -> sparse.csr_array:
    """Return the binary, symmetric adjacency ``C`` behind a (row-standardised) weights matrix.

    Raises
    ------
    InvalidInput
        When the graph is not symmetric (a CAR needs ``i ~ j`` iff ``j ~ i``)
        or an area has no neighbour.

    Examples
    --------
    >>> W = sparse.csr_array(np.array([[0, 1, 0], [.5, 0, .5], [0, 1, 0]]))
    >>> car_adjacency(W).toarray().tolist()
    [[0.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]
    """
    C = sparse.csr_array(W, dtype=np.float64)
    C.data[:] = 1.0
    C.eliminate_zeros()
    if (C != C.T).nnz:
        raise InvalidInput("the neighbour graph is not symmetric; the CAR model needs "
                           "symmetric neighbours (give the partition or a symmetric W)")
    lonely = int((np.asarray(C.sum(axis=1)).ravel() == 0).sum())
    if lonely:
        raise InvalidInput(f"{lonely} region(s) have no neighbour; the CAR model needs every "
                           "region to have one (use model='sfh' or join islands to the graph)")
    return C
