"""The result of a private regression fit: coefficients, their uncertainty, what it cost.

A one-shot fit carries the sandwich covariance of ``(intercept, coef)``
(:mod:`spatialdp.regression.covariance`), so it offers statsmodels' face:
:attr:`RegressionFit.bse`, :meth:`RegressionFit.conf_int` and a
:meth:`RegressionFit.summary` table. Rows are ordered ``intercept`` first, then the
features (as statsmodels lists ``const`` first after ``add_constant``), named
from :attr:`RegressionFit.feature_names` (``x1..xd`` when unknown). Where no
honest standard error exists (a binding norm cap or PSD projection, the
iterative protocol, DP-SGD) the values are NaN and the summary says why.

Examples
--------
>>> fit = RegressionFit(coef=np.array([1.0, 2.0]), intercept=0.5, method="one_shot",
...                     rho=0.1, n_clients=100, ridge=0.0, norm_cap=np.inf,
...                     covariance=np.diag([0.01, 0.04, 0.09]))
>>> fit.predict(np.array([[1.0, 1.0]])).tolist()
[3.5]
>>> fit.bse.round(2).tolist()
[0.1, 0.2, 0.3]
>>> fit.conf_int(alpha=0.05).round(2)
           ci_low  ci_high
intercept    0.30     0.70
x1           0.61     1.39
x2           1.41     2.59
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from spatialdp._results import Result
from spatialdp._validation import check_alpha, fail
from spatialdp.regression._checks import check_features

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RegressionFit"]

#: Why a method has no standard errors (``inference`` left empty by the fit).
NO_INFERENCE = {
    "iterative": ("no standard errors for the iterative protocol: its tail-averaged iterates "
                  "depend on the start, the step and the per-round ridge, and no variance "
                  "formula is derived for them (use fit_one_shot for intervals)"),
    "dpsgd_local": ("no standard errors for DP-SGD: gradient clipping biases the iterates by "
                    "an unknown amount, so no interval would cover"),
    "dpsgd_central": ("no standard errors for DP-SGD: gradient clipping biases the iterates by "
                      "an unknown amount, so no interval would cover"),
}

#: What each method keeps private (``protects`` left empty by the fit).
PROTECTS = {
    "one_shot": "features (clipped, modulated and noised on the device); labels public",
    "iterative": "features (clipped, modulated and noised on the device); labels public",
    "dpsgd_local": "features and labels (clipped gradients noised on the device)",
    "dpsgd_central": ("features and labels (the average clipped gradient, noised by a "
                      "trusted aggregator)"),
}

#: What a modulated fit on noised labels keeps private.
LABEL_PRIVATE = ("features (clipped, modulated and noised on the device) and labels (clipped, "
                 "noised)")

_RULE = "=" * 78


def _wrap(text: str) -> str:
    """Return ``text`` wrapped to the summary's width, continuation lines indented."""
    return textwrap.fill(text, width=len(_RULE), subsequent_indent="  ", break_on_hyphens=False)
_THIN = "-" * 78


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
    covariance : ndarray (d+1, d+1), callable or None
        Covariance of ``(intercept, coef_1, ..., coef_d)``; NaN (or None) where no
        honest one exists. The intercept's row is NaN when it was not fitted. A
        zero-argument callable defers it: it is called on first use of
        :attr:`cov_params` (so of :attr:`bse`, :meth:`conf_int`, :meth:`summary`)
        and its array then replaces it (a one-shot fit defers its pass over the
        reports this way).
    inference : str
        What the intervals cover, or why there are none (a default per method).
    feature_names : tuple of str, optional
        Names of the features (``x1..xd`` when None).
    fit_intercept : bool
        Whether the intercept was estimated (else it is 0).
    protects : str
        What the method keeps private (a default per method).
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
    covariance: NDArray[np.float64] | Callable[[], NDArray[np.float64]] | None = field(
        default=None, repr=False)
    inference: str = ""
    feature_names: tuple[str, ...] | None = None
    fit_intercept: bool = True
    protects: str = ""

    def predict(self, X: Any) -> NDArray[np.float64]:
        """Return ``X @ coef + intercept``."""
        Xa = check_features(X)
        if Xa.shape[1] != self.coef.size:
            raise fail("X", Xa.shape, f"has {Xa.shape[1]} columns for a fit on "
                       f"{self.coef.size} features", "pass the columns the model was fitted on")
        return Xa @ self.coef + self.intercept

    @property
    def names(self) -> list[str]:
        """Row names of the parameters: ``"intercept"``, then the features."""
        features = (list(self.feature_names) if self.feature_names is not None
                    else [f"x{j + 1}" for j in range(self.coef.size)])
        return ["intercept", *features]

    @property
    def params(self) -> NDArray[np.float64]:
        """``(intercept, coef_1, ..., coef_d)``, the order of :attr:`bse` and :meth:`conf_int`."""
        return np.concatenate([[self.intercept], self.coef])

    @property
    def cov_params(self) -> NDArray[np.float64]:
        """The ``(d+1) x (d+1)`` covariance of :attr:`params` (all NaN when none is derived)."""
        if callable(self.covariance):  # deferred: computed once, then kept in its place
            object.__setattr__(self, "covariance",
                               np.asarray(self.covariance(), dtype=np.float64))
        if self.covariance is None:
            return np.full((self.coef.size + 1,) * 2, np.nan)
        cov = np.array(self.covariance, dtype=np.float64)
        if not self.fit_intercept:
            cov[0, :] = cov[:, 0] = np.nan
        return cov

    @property
    def bse(self) -> NDArray[np.float64]:
        """Standard errors of :attr:`params` (``intercept`` first); NaN where none is honest."""
        with np.errstate(invalid="ignore"):
            return np.sqrt(np.diag(self.cov_params))

    @property
    def inference_note(self) -> str:
        """What the intervals cover, or why there are none."""
        return self.inference or NO_INFERENCE.get(
            self.method, "no standard errors were derived for this fit")

    @property
    def protection(self) -> str:
        """What the method keeps private."""
        return self.protects or PROTECTS.get(self.method, "see the method's documentation")

    def conf_int(self, alpha: float = 0.05) -> pd.DataFrame:
        """Return the ``(1 - alpha)`` normal intervals ``params -/+ z bse``.

        Parameters
        ----------
        alpha : float, default 0.05
            ``0 < alpha < 1``.

        Returns
        -------
        DataFrame
            ``(d+1) x 2``, columns ``ci_low`` and ``ci_high`` (as every
            ``conf_int`` of spatialdp), one row per parameter: ``intercept``
            first, then the features. NaN where there is no standard error
            (:attr:`inference_note` says why).
        """
        import pandas as pd

        half = NormalDist().inv_cdf(1.0 - check_alpha(alpha) / 2.0) * self.bse
        return pd.DataFrame({"ci_low": self.params - half, "ci_high": self.params + half},
                            index=self.names)

    def coefficient_table(self, alpha: float = 0.05) -> pd.DataFrame:
        """Return statsmodels' table: coef, std err, z, P>|z| and the ``(1 - alpha)`` interval."""
        import pandas as pd

        level = check_alpha(alpha)
        bse = self.bse
        with np.errstate(invalid="ignore", divide="ignore"):
            z = self.params / bse
        p = np.array([math.erfc(abs(v) / math.sqrt(2.0)) if np.isfinite(v) else np.nan
                      for v in z])
        ci = self.conf_int(level)
        return pd.DataFrame({"coef": self.params, "std err": bse, "z": z, "P>|z|": p,
                             f"[{level / 2:g}": ci["ci_low"].to_numpy(),
                             f"{1 - level / 2:g}]": ci["ci_high"].to_numpy()},
                            index=self.names)

    def headline(self) -> str:
        """Return one line: the method, size, privacy loss and regularisation."""
        return (f"method={self.method!r}, d={self.coef.size}, rho={self.rho:.4g}, "
                f"n_clients={self.n_clients}, ridge={self.ridge:.3g}, "
                f"norm_cap={self.norm_cap:.3g}{self.accounting_note}")

    def summary(self) -> str:
        """Return statsmodels' summary: the fit's record, the coefficient table and notes.

        The first line is :meth:`headline`; the table lists coef, std err, z,
        ``P>|z|`` and the 95% interval per parameter; the notes say what the
        method protects and what the intervals cover (or why there are none).
        """
        cap = "none" if self.norm_cap == np.inf else f"{self.norm_cap:.4g}"
        record = [
            f"{'Method:':<16}{self.method:<24}{'Clients (K):':<16}{self.n_clients}",
            f"{'rho (zCDP):':<16}{self.rho:<24.4g}{'Features (d):':<16}{self.coef.size}",
            f"{'Noise sigma:':<16}{self.sigma:<24.4g}{'Ridge:':<16}{self.ridge:.4g}",
            f"{'Norm cap:':<16}{cap:<24}{'Intercept:':<16}"
            f"{'fitted' if self.fit_intercept else 'fixed at 0'}",
        ]
        table = self.coefficient_table().to_string(
            float_format=lambda v: f"{v:.4g}", na_rep="nan")
        return "\n".join([self.headline(), _RULE, *record, _RULE, table, _THIN,
                          _wrap(f"Protects: {self.protection}"),
                          _wrap(f"Inference: {self.inference_note}"),
                          f"Accounting: {self.accounting.get('accounting', 'not recorded')}"
                          + self.accounting_note])

    def _html_table(self) -> tuple[pd.DataFrame | None, str]:
        return self.coefficient_table(), "coefficients (95% intervals)"

    def __repr__(self) -> str:
        return f"RegressionFit({self.headline()})"
