"""Sparse Cholesky factorisations of symmetric positive definite matrices: log-det and solves.

The spatial small-area models factor matrices of one sparsity pattern many
times (every likelihood evaluation, new values, same graph). Two backends:

* ``"cholmod"``: CHOLMOD's supernodal Cholesky (SuiteSparse) through
  ``cvxopt`` (``pip install 'spatialdp[sparse]'``). The fill-reducing
  ordering and the symbolic analysis are done once per pattern and cached;
  each new matrix costs only the numeric factorisation. About 15 ms for the
  30,772-cell H3 CAR precision on this machine, 15x faster than SuperLU.
  **Licence:** cvxopt and CHOLMOD's supernodal module are GPL; spatialdp
  (Apache-2.0) only imports cvxopt when it is installed, which is why it is
  an optional extra and not a dependency.
* ``"superlu"``: SciPy's SuperLU in symmetric mode (COLAMD ordering, no
  pivoting), always available.

:func:`sparse_cholesky` picks CHOLMOD when cvxopt is importable; pass
``backend=`` to choose.

Examples
--------
>>> import numpy as np
>>> from scipy import sparse
>>> A = sparse.csc_array(np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]]))
>>> f = sparse_cholesky(A, backend="superlu")
>>> round(f.logdet, 10) == round(float(np.linalg.slogdet(A.toarray())[1]), 10)
True
>>> np.allclose(A @ f.solve(np.ones(3)), 1.0)
True
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.sparse import linalg as sla

from spatialdp._validation import fail

__all__ = ["BACKENDS", "NotPositiveDefinite", "SparseFactor", "default_backend",
           "sparse_cholesky"]

FloatArray = NDArray[np.float64]

#: The factorisation backends, fastest first.
BACKENDS = ("cholmod", "superlu")


class NotPositiveDefinite(ArithmeticError):
    """The matrix has a non-positive pivot: it is not positive definite."""


class SparseFactor(Protocol):
    """A factorisation of a symmetric positive definite matrix ``A``."""

    @property
    def logdet(self) -> float:
        """``log det A``."""

    def solve(self, rhs: FloatArray) -> FloatArray:
        """Return ``A^-1 rhs`` (``rhs`` a vector or a matrix of columns)."""

    def inverse_root(self, normals: FloatArray) -> FloatArray:
        """Return ``T normals`` for a ``T`` with ``T T' = A^-1``.

        Standard normal columns become draws of ``N(0, A^-1)``, one
        triangular solve each.
        """


def default_backend() -> str:
    """Return ``"cholmod"`` when cvxopt is installed, else ``"superlu"``.

    Examples
    --------
    >>> default_backend() in BACKENDS
    True
    """
    return "cholmod" if importlib.util.find_spec("cvxopt") is not None else "superlu"


def sparse_cholesky(matrix: sparse.sparray | sparse.spmatrix, backend: str | None = None
                    ) -> SparseFactor:
    """Factor the symmetric positive definite ``matrix``.

    Raises :class:`NotPositiveDefinite` when a pivot is not positive.

    Examples
    --------
    >>> from scipy import sparse
    >>> sparse_cholesky(sparse.diags_array([2.0, 8.0]), backend="superlu").logdet
    2.772588722239781
    """
    chosen = default_backend() if backend is None else backend
    if chosen not in BACKENDS:
        raise fail("backend", backend, f"is not one of {BACKENDS}",
                   "pass 'cholmod' (needs cvxopt: spatialdp[sparse]), 'superlu' or None")
    csc = sparse.csc_array(matrix)
    if not csc.data[_off_diagonal(csc)].any():
        return _DiagonalFactor(csc.diagonal())
    if chosen == "cholmod":
        return _CholmodFactor(csc)
    return _SuperLUFactor(csc)


def _off_diagonal(matrix: sparse.csc_array) -> NDArray[np.bool_]:
    """Return which stored entries of ``matrix`` lie off its diagonal."""
    cols = np.repeat(np.arange(matrix.shape[1]), np.diff(matrix.indptr))
    return np.asarray(matrix.indices != cols)


class _DiagonalFactor:
    """A diagonal matrix (e.g. a spatial precision at ``rho = 0``): no factorisation needed."""

    def __init__(self, diagonal: FloatArray) -> None:
        if not (diagonal > 0).all():
            raise NotPositiveDefinite("a diagonal entry is not positive")
        self._diagonal = np.asarray(diagonal, dtype=np.float64)

    @property
    def logdet(self) -> float:
        return float(np.log(self._diagonal).sum())

    def solve(self, rhs: FloatArray) -> FloatArray:
        array = np.asarray(rhs, dtype=np.float64)
        return array / self._diagonal.reshape((-1,) + (1,) * (array.ndim - 1))

    def inverse_root(self, normals: FloatArray) -> FloatArray:
        array = np.asarray(normals, dtype=np.float64)
        return array / np.sqrt(self._diagonal).reshape((-1,) + (1,) * (array.ndim - 1))


class _SuperLUFactor:
    """SuperLU in symmetric mode: ``A = L U`` with the pivots on ``U``'s diagonal."""

    def __init__(self, matrix: sparse.csc_array) -> None:
        self._lu = sla.splu(sparse.csc_matrix(matrix), permc_spec="COLAMD",
                            diag_pivot_thresh=0.0, options={"SymmetricMode": True})
        pivots = self._lu.U.diagonal()
        if not (pivots > 0).all():
            raise NotPositiveDefinite("a pivot of the LU is not positive")
        self._logdet = float(np.log(pivots).sum())

    @property
    def logdet(self) -> float:
        return self._logdet

    def solve(self, rhs: FloatArray) -> FloatArray:
        return np.asarray(self._lu.solve(np.asarray(rhs, dtype=np.float64)), dtype=np.float64)

    def inverse_root(self, normals: FloatArray) -> FloatArray:
        # Symmetric mode, no pivoting: Pr = Pc', U = D L', A = Pc (L D L') Pc', so
        # T = Pc U^-1 D^(1/2) has T T' = Pc (L D L')^-1 Pc' = A^-1.
        U = sparse.csr_array(self._lu.U)
        scaled = np.asarray(normals, dtype=np.float64) * np.sqrt(U.diagonal()).reshape(
            (-1,) + (1,) * (np.ndim(normals) - 1))
        inner = sla.spsolve_triangular(U, scaled, lower=False)
        return np.asarray(inner[self._lu.perm_c], dtype=np.float64)


class _CholmodFactor:
    """CHOLMOD's supernodal ``P A P' = L L'``, the symbolic analysis cached by pattern.

    Factors of one pattern share the cached symbolic object, which holds the
    numeric values of the last factorisation; a factor whose values were
    overwritten factors its own matrix again before it solves.
    """

    def __init__(self, matrix: sparse.csc_array) -> None:
        from cvxopt import cholmod

        matrix.sort_indices()
        self._n = matrix.shape[0]
        self._symbolic = _symbolic(self._n, matrix.indptr.tobytes(), matrix.indices.tobytes())
        self._lower = np.ascontiguousarray(matrix.data[self._symbolic.lower], dtype=np.float64)
        self._numeric()
        self._logdet = 2.0 * float(np.log(np.asarray(cholmod.diag(self._symbolic.factor))).sum())

    def _numeric(self) -> None:
        """Factor this matrix into the shared symbolic object."""
        import cvxopt
        from cvxopt import cholmod

        self._symbolic.matrix.V = cvxopt.matrix(self._lower)
        try:
            cholmod.numeric(self._symbolic.matrix, self._symbolic.factor)
        except ArithmeticError as error:
            self._symbolic.owner = None
            raise NotPositiveDefinite(f"CHOLMOD: not positive definite at column {error}") \
                from error
        self._symbolic.owner = self

    @property
    def logdet(self) -> float:
        return self._logdet

    def solve(self, rhs: FloatArray) -> FloatArray:
        return self._solve(rhs, (0,))

    def inverse_root(self, normals: FloatArray) -> FloatArray:
        # P A P' = L L': T = P' L'^-1 (sys 5 solves L' X = B, sys 8 solves P X = B).
        return self._solve(normals, (5, 8))

    def _solve(self, rhs: FloatArray, systems: tuple[int, ...]) -> FloatArray:
        """Apply CHOLMOD's solves ``systems`` in turn to the columns of ``rhs``."""
        import cvxopt
        from cvxopt import cholmod

        if self._symbolic.owner is not self:
            self._numeric()
        array = np.asarray(rhs, dtype=np.float64)
        block = cvxopt.matrix(np.asfortranarray(array.reshape(self._n, -1)))
        for system in systems:
            cholmod.solve(self._symbolic.factor, block, sys=system)
        return np.asarray(block, dtype=np.float64).reshape(array.shape)


class _Symbolic:
    """A pattern's lower triangle, CHOLMOD's symbolic factorisation of it, and its owner.

    ``lower`` picks the lower triangle's entries from the pattern's CSC data;
    ``matrix`` is a cvxopt matrix of that triangle whose values are replaced
    before each numeric factorisation; ``owner`` is the factor whose values
    ``factor`` holds.
    """

    def __init__(self, lower: NDArray[np.intp], matrix: Any, factor: Any) -> None:
        self.lower, self.matrix, self.factor = lower, matrix, factor
        self.owner: _CholmodFactor | None = None


@lru_cache(maxsize=8)
def _symbolic(n: int, indptr: bytes, indices: bytes) -> _Symbolic:
    """Return the symbolic factorisation (AMD ordering) of a CSC pattern's lower triangle."""
    import cvxopt
    from cvxopt import cholmod

    pointers = np.frombuffer(indptr, dtype=np.int32 if len(indptr) == 4 * (n + 1) else np.int64)
    rows = np.frombuffer(indices, dtype=pointers.dtype).astype(np.int64)
    cols = np.repeat(np.arange(n, dtype=np.int64), np.diff(pointers))
    lower = np.flatnonzero(rows >= cols)
    pattern = cvxopt.spmatrix(cvxopt.matrix(np.ones(lower.size)), cvxopt.matrix(rows[lower]),
                              cvxopt.matrix(cols[lower]), (n, n))
    return _Symbolic(lower, pattern, cholmod.symbolic(pattern, uplo="L"))
