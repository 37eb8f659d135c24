"""Mechanisms: a privacy parameter and a sensitivity calibrated into noise (private).

Re-exported by :mod:`spatialdp.privacy.noise`. :class:`LaplaceMechanism` (pure
epsilon-DP, L1 sensitivity) and :class:`GaussianMechanism` (rho-zCDP, L2
sensitivity) give a noise scale, a :class:`PrivacyLoss`, release and simulation
through the samplers, and accuracy figures from :mod:`spatialdp.privacy.accuracy`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar, Literal, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from spatialdp.exceptions import InvalidInput
from spatialdp.privacy import accuracy as _acc
from spatialdp.privacy._exact import MAX_DISCRETE_SCALE
from spatialdp.privacy._noise_input import MAX_GAUSS_SIGMA, SeedLike, check_positive
from spatialdp.privacy._release import RELEASE_BY_KIND
from spatialdp.privacy._simulate import SIMULATE_BY_KIND

__all__ = ["GaussianMechanism", "LaplaceMechanism", "PrivacyLoss"]


@dataclass(frozen=True)
class PrivacyLoss:
    """The privacy loss of one release.

    Parameters
    ----------
    kind : {"pure", "zcdp"}
        ``"pure"``: ``value`` is epsilon of epsilon-DP. ``"zcdp"``: ``value``
        is rho of rho-zero-concentrated DP.
    value : float
        Finite and >= 0.

    Examples
    --------
    >>> PrivacyLoss("pure", 0.5).rho
    0.125
    >>> PrivacyLoss("zcdp", 0.125).as_zcdp() == PrivacyLoss("zcdp", 0.125)
    True
    """

    kind: Literal["pure", "zcdp"]
    value: float

    def __post_init__(self) -> None:
        if self.kind not in ("pure", "zcdp"):
            raise InvalidInput(
                f"PrivacyLoss kind={self.kind!r} is not supported; use 'pure' (epsilon) "
                "or 'zcdp' (rho)"
            )
        v = float(self.value)
        if not math.isfinite(v) or v < 0:
            raise InvalidInput(
                f"PrivacyLoss value={self.value!r} must be finite and >= 0; pass the "
                "epsilon or rho of the release"
            )
        object.__setattr__(self, "value", v)

    @property
    def rho(self) -> float:
        """The zCDP parameter: rho itself, or epsilon**2 / 2 for pure DP."""
        return self.value if self.kind == "zcdp" else self.value**2 / 2

    @property
    def epsilon(self) -> float | None:
        """Pure-DP epsilon, or ``None`` for a zCDP loss (no finite pure epsilon)."""
        return self.value if self.kind == "pure" else None

    def as_zcdp(self) -> PrivacyLoss:
        """The same loss as zCDP (pure epsilon-DP implies epsilon**2/2-zCDP)."""
        return PrivacyLoss("zcdp", self.rho)


def _up(x: float) -> float:
    return math.nextafter(x, math.inf)


class _Mechanism:
    """What Laplace and Gaussian mechanisms share: set-up, release, accuracy.

    A subclass validates its privacy parameter, stores it under ``_param`` and
    passes it to ``__init__``; it names the loss kind, the sensitivity norm and
    the noise family, and turns the parameters into a noise scale in
    :meth:`_calibrate`.
    """

    _param: ClassVar[str]  # "epsilon" or "rho"
    _loss_kind: ClassVar[Literal["pure", "zcdp"]]
    _norm: ClassVar[str]  # "L1" or "L2"
    _family: ClassVar[str]  # "laplace" or "gaussian"

    kind: str
    scale: float
    sensitivity: float
    discrete: bool

    def __init__(self, budget: float, sensitivity: float, discrete: bool) -> None:
        self._budget = budget
        self.sensitivity = check_positive(
            sensitivity,
            "sensitivity",
            f"pass the {self._norm} bound of one client's influence, e.g. 1.0",
        )
        self.discrete = bool(discrete)
        self.scale = self._calibrate()
        self.kind = f"discrete_{self._family}" if discrete else self._family

    def _calibrate(self) -> float:  # pragma: no cover - overridden
        raise NotImplementedError

    @property
    def privacy_loss(self) -> PrivacyLoss:
        """The loss of one release: ``PrivacyLoss("pure", epsilon)`` or ``("zcdp", rho)``."""
        return PrivacyLoss(self._loss_kind, self._budget)

    @overload
    def std(self, m: int | np.integer[Any] = 1) -> float: ...
    @overload
    def std(self, m: ArrayLike) -> NDArray[np.float64]: ...
    def std(self, m: ArrayLike = 1) -> float | NDArray[np.float64]:
        """Standard deviation of the sum of ``m`` noisy values.

        See :func:`spatialdp.privacy.accuracy.noise_std`.
        """
        return _acc.noise_std(self.kind, self.scale, m)

    @overload
    def mean_abs_error(self, m: int | np.integer[Any] = 1) -> float: ...
    @overload
    def mean_abs_error(self, m: ArrayLike) -> NDArray[np.float64]: ...
    def mean_abs_error(self, m: ArrayLike = 1) -> float | NDArray[np.float64]:
        """Mean absolute error of the sum of ``m`` noisy values."""
        return _acc.mean_abs_error(self.kind, self.scale, m)

    @overload
    def error_bar(self, m: int | np.integer[Any] = 1, alpha: float = 0.05) -> float: ...
    @overload
    def error_bar(self, m: ArrayLike, alpha: float = 0.05) -> NDArray[np.float64]: ...
    def error_bar(self, m: ArrayLike = 1, alpha: float = 0.05) -> float | NDArray[np.float64]:
        """Half-width ``h`` with ``P(|noise of the sum of m| <= h) >= 1 - alpha``.

        Integer-valued for discrete mechanisms. See
        :func:`spatialdp.privacy.accuracy.half_width`.
        """
        return _acc.half_width(self.kind, self.scale, m, alpha)

    def accuracy(self, m: ArrayLike = 1, alpha: float = 0.05) -> _acc.Accuracy:
        """All three error figures as an :class:`~spatialdp.privacy.accuracy.Accuracy`."""
        return _acc.accuracy(self.kind, self.scale, m, alpha)

    def release(self, x: Any) -> Any:
        """Noisy ``x`` for publication (OS entropy; no seed accepted)."""
        return RELEASE_BY_KIND[self.kind](x, self.scale)

    def simulate(self, x: Any, rng: SeedLike = None) -> Any:
        """Noisy ``x`` from a seeded numpy generator - for simulation only."""
        return SIMULATE_BY_KIND[self.kind](x, self.scale, rng)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self._param}={self._budget!r}, "
            f"sensitivity={self.sensitivity!r}, discrete={self.discrete!r})"
        )


class LaplaceMechanism(_Mechanism):
    """Laplace noise calibrated to an epsilon and an L1 sensitivity (pure DP).

    ``sensitivity`` is the largest L1 change one client can make to the WHOLE
    released vector: a histogram's buckets or a grid's cells are one release
    at full epsilon, not one release per cell.

    Parameters
    ----------
    epsilon : float
        Privacy parameter (finite, > 0).
    sensitivity : float, default 1.0
        L1 sensitivity (finite, > 0).
    discrete : bool, default False
        Integer (discrete Laplace) noise for counts instead of real noise.

    Attributes
    ----------
    scale : float
        ``b = sensitivity / epsilon``, rounded up by at most one ulp so the
        loss never exceeds ``epsilon``.
    privacy_loss : PrivacyLoss
        ``PrivacyLoss("pure", epsilon)``.
    kind : str
        ``"laplace"`` or ``"discrete_laplace"`` (the accuracy noise kind).

    Examples
    --------
    >>> mech = LaplaceMechanism(epsilon=0.5, sensitivity=2.0, discrete=True)
    >>> mech.scale, mech.privacy_loss
    (4.0, PrivacyLoss(kind='pure', value=0.5))
    >>> mech.release([10, 20]).dtype
    dtype('int64')
    >>> round(LaplaceMechanism(1.0).error_bar(alpha=0.05), 4)  # b * ln(1 / alpha)
    2.9957
    """

    _param = "epsilon"
    _loss_kind = "pure"
    _norm = "L1"
    _family = "laplace"

    def __init__(self, epsilon: float, sensitivity: float = 1.0, discrete: bool = False) -> None:
        self.epsilon = check_positive(epsilon, "epsilon", "pass a privacy parameter such as 1.0")
        super().__init__(self.epsilon, sensitivity, discrete)

    def _calibrate(self) -> float:
        b = self.sensitivity / self.epsilon
        if Fraction(b) < Fraction(self.sensitivity) / Fraction(self.epsilon):
            b = _up(b)
        if self.discrete and b > MAX_DISCRETE_SCALE:
            raise InvalidInput(
                f"sensitivity / epsilon = {b:g} exceeds the discrete sampler's maximum "
                f"scale {MAX_DISCRETE_SCALE:g}; raise epsilon or rescale the counts"
            )
        return b


class GaussianMechanism(_Mechanism):
    """Gaussian noise calibrated to a zCDP rho and an L2 sensitivity.

    ``sensitivity`` is the largest L2 change one client can make to the whole
    released vector (all cells of a grid are one release).

    Parameters
    ----------
    rho : float
        zCDP parameter (finite, > 0).
    sensitivity : float, default 1.0
        L2 sensitivity (finite, > 0).
    discrete : bool, default False
        Integer (discrete Gaussian) noise for counts instead of real noise.

    Attributes
    ----------
    scale : float
        ``sigma = sensitivity / sqrt(2 rho)`` (rounded up to the next float if
        needed so the loss never exceeds ``rho``).
    privacy_loss : PrivacyLoss
        ``PrivacyLoss("zcdp", rho)``.
    kind : str
        ``"gaussian"`` or ``"discrete_gaussian"``.

    Examples
    --------
    >>> mech = GaussianMechanism(rho=0.5, sensitivity=3.0)
    >>> mech.scale, mech.privacy_loss.kind
    (3.0, 'zcdp')
    >>> round(mech.error_bar(m=4), 3)  # 1.96 * 3 * sqrt(4)
    11.76
    """

    _param = "rho"
    _loss_kind = "zcdp"
    _norm = "L2"
    _family = "gaussian"

    def __init__(self, rho: float, sensitivity: float = 1.0, discrete: bool = False) -> None:
        self.rho = check_positive(rho, "rho", "pass a zCDP parameter such as 0.5")
        super().__init__(self.rho, sensitivity, discrete)

    def _calibrate(self) -> float:
        sigma = self.sensitivity / math.sqrt(2 * self.rho)
        target = Fraction(self.sensitivity) ** 2
        while Fraction(sigma) ** 2 * 2 * Fraction(self.rho) < target:
            sigma = _up(sigma)
        if sigma > MAX_GAUSS_SIGMA:
            raise InvalidInput(
                f"sensitivity / sqrt(2 rho) = {sigma:g} exceeds the supported maximum "
                f"{MAX_GAUSS_SIGMA:g}; raise rho or rescale the values"
            )
        return sigma
