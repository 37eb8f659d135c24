"""The result of a private regression fit: coefficients, how they were regularised, what it cost.

Examples
--------
>>> fit = RegressionFit(coef=np.array([1.0, 2.0]), intercept=0.5, method="one_shot",
...                     rho=0.1, n_clients=100, ridge=0.0, norm_cap=np.inf)
>>> fit.predict(np.array([[1.0, 1.0]])).tolist()
[3.5]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from spatialdp._results import Result
from spatialdp._validation import fail
from spatialdp.regression._checks import check_features

__all__ = ["RegressionFit"]


@dataclass(frozen=True)
class RegressionFit(Result):
    """Coefficients of a private linear regression and the record of how they were obtained.

    Attributes
    ----------
    coef : ndarray (d,)
    intercept : float
    method : str
        ``"one_shot"``, ``"iterative"``, ``"dpsgd_local"`` or ``"dpsgd_central"``.
    rho : float
        zCDP loss of each client.
    n_clients : int
    ridge, norm_cap : float
        The regularisation used (``norm_cap = inf``: none).
    sigma : float
        Noise standard deviation of one report (per round for iterative fits).
    history : list of ndarray
        Iterates of an iterative fit.
    accounting : dict
        Accounting record of the release(s) (simulation, ledger, ...).
    """

    coef: NDArray[np.float64]
    intercept: float
    method: str
    rho: float
    n_clients: int
    ridge: float
    norm_cap: float
    sigma: float = 0.0
    history: list[NDArray[np.float64]] = field(default_factory=list)
    accounting: dict[str, Any] = field(default_factory=dict)

    def predict(self, X: Any) -> NDArray[np.float64]:
        """Return ``X @ coef + intercept``."""
        Xa = check_features(X)
        if Xa.shape[1] != self.coef.size:
            raise fail("X", Xa.shape, f"has {Xa.shape[1]} columns for a fit on "
                       f"{self.coef.size} features", "pass the columns the model was fitted on")
        return Xa @ self.coef + self.intercept

    def summary(self) -> str:
        """Return one line: the method, size, privacy loss and regularisation."""
        return (f"method={self.method!r}, d={self.coef.size}, rho={self.rho:.4g}, "
                f"n_clients={self.n_clients}, ridge={self.ridge:.3g}, "
                f"norm_cap={self.norm_cap:.3g}{self.accounting_note}")

    def __repr__(self) -> str:
        return f"RegressionFit({self.summary()})"
