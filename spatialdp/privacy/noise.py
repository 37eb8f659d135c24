"""Mechanisms: a privacy parameter and a sensitivity calibrated into noise.

:class:`LaplaceMechanism` (pure epsilon-DP, L1 sensitivity) and
:class:`GaussianMechanism` (rho-zCDP, L2 sensitivity) are the release API. Each
holds read-only ``sensitivity``, ``scale``, ``kind``, ``discrete`` and
``privacy_loss`` (plus ``epsilon`` or ``rho``), with the scale from
:mod:`spatialdp.privacy.calibration`: exactly
``laplace_scale(sensitivity, epsilon)`` or ``gaussian_sigma(sensitivity, rho)``,
computed against the decimal value of the privacy parameter that the ledger
charges. Each has the two random paths as methods:

* ``release(values)`` - noise for publication, from OS entropy, no seed
  (:mod:`spatialdp.privacy.release`);
* ``simulate(values, rng=...)`` - the same distribution from a seeded numpy
  Generator, for measuring error only (:mod:`spatialdp.privacy.simulate`);

and accuracy figures from :mod:`spatialdp.privacy.accuracy` (``std``,
``mean_abs_error``, ``error_bar``, ``accuracy``).

Values may be a scalar, an array of any shape (one release vector of ``n`` or
``n x k`` entries: ``sensitivity`` bounds one client's influence on ALL of it)
or a ``scipy.sparse`` array over a public domain (densified, every entry noised).

Real-valued Laplace releases are exact discrete Laplace noise on a fixed-point
lattice (:mod:`spatialdp.privacy.exact`): rounding ``d`` values to a lattice
of step ``2**e`` can add ``d * 2**e`` to the L1 sensitivity, so
:class:`LaplaceMechanism` calibrates its real-valued scale with a relative
headroom of ``2**-24`` and, at release time, takes the largest step with
``(sensitivity + d * step) / scale <= epsilon`` exactly: the charged epsilon is
never exceeded, and ``scale`` is the scale the noise really has.

The ``release_*`` and ``simulate_*`` functions are re-exported here for
compatibility; their home is :mod:`spatialdp.privacy.release` and
:mod:`spatialdp.privacy.simulate`.

Examples
--------
>>> mech = LaplaceMechanism(epsilon=0.5, sensitivity=2.0)
>>> mech.scale, mech.kind  # 2 / 0.5, with 2**-24 of headroom for the lattice
(4.000000238418579, 'laplace')
>>> LaplaceMechanism(epsilon=0.5, sensitivity=2.0, discrete=True).scale
4.0
>>> mech.simulate(np.zeros((2, 3)), rng=0).shape
(2, 3)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, overload

import numpy as np
from numpy.typing import ArrayLike, NDArray

from spatialdp._random import RandomLike
from spatialdp._validation import check_alpha, check_count, check_flag, check_number, fail
from spatialdp.exceptions import InvalidInput
from spatialdp.privacy import accuracy as _acc
from spatialdp.privacy._noise_input import as_values, float_out
from spatialdp.privacy.calibration import gaussian_sigma, headroom_scale, laplace_scale
from spatialdp.privacy.exact import lattice_laplace, mechanism_exponent, rational_scale
from spatialdp.privacy.release import (
    RELEASE_BY_KIND,
    release_discrete_gaussian,
    release_discrete_laplace,
    release_gaussian,
    release_laplace,
)
from spatialdp.privacy.simulate import (
    SIMULATE_BY_KIND,
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
        if not isinstance(self.kind, str) or self.kind not in ("pure", "zcdp"):
            raise fail("PrivacyLoss kind", self.kind, "is not supported",
                       "use 'pure' (epsilon) or 'zcdp' (rho)")
        v = check_number(self.value, "PrivacyLoss value", low=0.0,
                         fix="pass the epsilon or rho of the release, finite and >= 0")
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
        """Return the same loss as zCDP (pure epsilon-DP implies epsilon**2/2-zCDP).

        Examples
        --------
        >>> PrivacyLoss("pure", 1.0).as_zcdp()
        PrivacyLoss(kind='zcdp', value=0.5)
        """
        return PrivacyLoss("zcdp", self.rho)


class _Mechanism:
    """What Laplace and Gaussian mechanisms share: read-only set-up, release, accuracy.

    A subclass names its privacy parameter, the loss kind and the noise family,
    and validates and calibrates in its ``__init__`` before calling
    :meth:`_setup`. Attributes are read-only properties over slots; there is no
    ``__eq__`` (two mechanisms are the same only if they are the same object).
    """

    __slots__ = ("_budget", "_discrete", "_kind", "_scale", "_sensitivity")

    _param: ClassVar[str]  # "epsilon" or "rho"
    _loss_kind: ClassVar[Literal["pure", "zcdp"]]
    _family: ClassVar[str]  # "laplace" or "gaussian"

    def _setup(self, budget: float, sensitivity: float, scale: float, discrete: Any) -> None:
        self._discrete = check_flag(
            discrete, "discrete",
            fix="pass discrete=True for integer counts or False for real values")
        self._budget = budget
        self._sensitivity = sensitivity
        self._scale = scale
        self._kind = f"discrete_{self._family}" if self._discrete else self._family

    @property
    def sensitivity(self) -> float:
        """The sensitivity the noise is calibrated to (L1 for Laplace, L2 for Gaussian)."""
        return self._sensitivity

    @property
    def scale(self) -> float:
        """The noise scale: ``b`` for Laplace, ``sigma`` for Gaussian."""
        return self._scale

    @property
    def kind(self) -> str:
        """The noise kind of :mod:`spatialdp.privacy.accuracy` (e.g. ``"discrete_laplace"``)."""
        return self._kind

    @property
    def discrete(self) -> bool:
        """Whether the noise is integer (for counts) rather than real."""
        return self._discrete

    @property
    def privacy_loss(self) -> PrivacyLoss:
        """The loss of one release: ``PrivacyLoss("pure", epsilon)`` or ``("zcdp", rho)``."""
        return PrivacyLoss(self._loss_kind, self._budget)

    @overload
    def std(self, m: int | np.integer[Any] = 1) -> float: ...
    @overload
    def std(self, m: ArrayLike) -> NDArray[np.float64]: ...
    def std(self, m: ArrayLike = 1) -> float | NDArray[np.float64]:
        """Return the standard deviation of the sum of ``m`` noisy values.

        See :func:`spatialdp.privacy.accuracy.noise_std`.
        """
        return _acc.noise_std(self.kind, self.scale, m)

    @overload
    def mean_abs_error(self, m: int | np.integer[Any] = 1) -> float: ...
    @overload
    def mean_abs_error(self, m: ArrayLike) -> NDArray[np.float64]: ...
    def mean_abs_error(self, m: ArrayLike = 1) -> float | NDArray[np.float64]:
        """Return the mean absolute error of the sum of ``m`` noisy values."""
        return _acc.mean_abs_error(self.kind, self.scale, m)

    @overload
    def error_bar(self, m: int | np.integer[Any] = 1, alpha: float = 0.05) -> float: ...
    @overload
    def error_bar(self, m: ArrayLike, alpha: float = 0.05) -> NDArray[np.float64]: ...
    def error_bar(self, m: ArrayLike = 1, alpha: float = 0.05) -> float | NDArray[np.float64]:
        """Return ``h`` with ``P(|noise of the sum of m| <= h) >= 1 - alpha``.

        Integer-valued for discrete mechanisms; ``alpha`` strictly between 0
        and 1. See :func:`spatialdp.privacy.accuracy.half_width`.
        """
        return _acc.half_width(self.kind, self.scale, m, check_alpha(alpha))

    def accuracy(self, m: ArrayLike = 1, alpha: float = 0.05) -> _acc.Accuracy:
        """Return all three error figures as an :class:`~spatialdp.privacy.accuracy.Accuracy`."""
        return _acc.accuracy(self.kind, self.scale, m, check_alpha(alpha))

    def release(self, x: Any) -> Any:
        """Return ``x`` noised for publication (OS entropy; no seed accepted).

        ``x`` is a scalar, an array of any shape (e.g. ``(n,)`` or ``(n, k)``)
        or a scipy.sparse array; the output has its shape (int64 when discrete).
        """
        return RELEASE_BY_KIND[self.kind](x, self.scale)

    def simulate(self, x: Any, *, rng: RandomLike = None) -> Any:
        """Return ``x`` noised from a seeded numpy generator - for simulation only."""
        return SIMULATE_BY_KIND[self.kind](x, self.scale, rng=rng)

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
        Privacy parameter (finite, > 0, at most 1e6).
    sensitivity : float, default 1.0
        L1 sensitivity (finite, > 0).
    discrete : bool, default False
        Integer (discrete Laplace) noise for counts instead of real noise.

    Attributes
    ----------
    epsilon, sensitivity : float
        As given (Python floats).
    scale : float
        Integer noise (``discrete=True``): ``b =``
        :func:`~spatialdp.privacy.calibration.laplace_scale` ``(sensitivity,
        epsilon)``, the smallest float with ``b * Decimal(repr(epsilon)) >=
        sensitivity``, so the loss never exceeds the epsilon the ledger charges.
        Real noise: the smallest float with ``b * Decimal(repr(epsilon)) >=
        sensitivity * (1 + 2**-24)``; the headroom pays for rounding the values
        to the release lattice (see :meth:`lattice_step`), so the loss is still
        at most epsilon, exactly.
    privacy_loss : PrivacyLoss
        ``PrivacyLoss("pure", epsilon)``.
    kind : str
        ``"laplace"`` or ``"discrete_laplace"`` (the accuracy noise kind).

    Raises
    ------
    InvalidInput
        For a bad epsilon or sensitivity, or a scale above ``1e15``.

    Examples
    --------
    >>> mech = LaplaceMechanism(epsilon=0.5, sensitivity=2.0, discrete=True)
    >>> mech.scale, mech.privacy_loss
    (4.0, PrivacyLoss(kind='pure', value=0.5))
    >>> mech.release([10, 20]).dtype
    dtype('int64')
    >>> round(LaplaceMechanism(1.0).error_bar(alpha=0.05), 4)  # b * ln(1 / alpha)
    2.9957
    >>> LaplaceMechanism(1.0).scale  # real noise: 1 + 2**-24 of headroom for the lattice
    1.0000000596046448
    """

    __slots__ = ()
    _param = "epsilon"
    _loss_kind = "pure"
    _family = "laplace"

    def __init__(self, epsilon: float, sensitivity: float = 1.0, discrete: bool = False) -> None:
        integer = isinstance(discrete, (bool, np.bool_)) and bool(discrete)
        scale = (laplace_scale if integer else headroom_scale)(sensitivity, epsilon)  # validates
        self._setup(float(epsilon), float(sensitivity), scale, discrete)

    @property
    def epsilon(self) -> float:
        """The pure-DP epsilon of one release."""
        return self._budget

    def lattice_step(self, size: int) -> float:
        """Return the lattice step of a real-valued release of ``size`` values.

        The largest power of two ``step`` with ``(sensitivity + size * step) /
        scale <= epsilon`` exactly (epsilon as the decimal the ledger charges):
        each value is rounded to a multiple of ``step`` before the noise, which
        can move one client's influence by ``size * step`` more in L1. Public
        parameters only, so a pipeline can call it before charging the ledger.

        Raises
        ------
        InvalidInput
            If the noise would exceed ``2**56`` lattice units (more than about
            ``2**31 * epsilon`` values in one release), or the mechanism is
            discrete (integer noise has no lattice).

        Examples
        --------
        >>> LaplaceMechanism(1.0).lattice_step(1000)
        5.820766091346741e-11
        """
        if self._discrete:
            raise InvalidInput(f"{self!r} adds integer noise to integer counts: there is no "
                               "lattice step; use a real-valued mechanism (discrete=False)")
        size = check_count(size, "size")
        return math.ldexp(1.0, mechanism_exponent(self.scale, self.sensitivity, self.epsilon,
                                                  size))

    def release(self, x: Any) -> Any:
        """Return ``x`` noised for publication (OS entropy; no seed accepted).

        ``x`` is a scalar, an array of any shape (e.g. ``(n,)`` or ``(n, k)``)
        or a scipy.sparse array; the output has its shape (int64 when discrete).
        Real values are rounded to the lattice of :meth:`lattice_step` and get
        exact discrete Laplace noise of ``scale`` (in lattice units
        ``scale / step``); the release is epsilon-DP exactly. Pass the whole
        vector that ``sensitivity`` covers in ONE call: the step is chosen for
        its size, and each further call of a split vector would add its own
        rounding to the sensitivity.
        """
        if self._discrete:
            return super().release(x)
        arr = as_values(x)
        e = mechanism_exponent(self.scale, self.sensitivity, self.epsilon, arr.size)
        return float_out(lattice_laplace(arr, self.scale, e), x)


class GaussianMechanism(_Mechanism):
    """Gaussian noise calibrated to a zCDP rho and an L2 sensitivity.

    ``sensitivity`` is the largest L2 change one client can make to the whole
    released vector (all cells of a grid are one release).

    Parameters
    ----------
    rho : float
        zCDP parameter (finite, > 0, at most 1e6).
    sensitivity : float, default 1.0
        L2 sensitivity (finite, > 0).
    discrete : bool, default False
        Integer (discrete Gaussian) noise for counts instead of real noise.

    Attributes
    ----------
    rho, sensitivity : float
        As given (Python floats).
    scale : float
        ``sigma =`` :func:`~spatialdp.privacy.calibration.gaussian_sigma`
        ``(sensitivity, rho)``: the smallest float with ``sigma**2 * 2 *
        Decimal(repr(rho)) >= sensitivity**2``.
    privacy_loss : PrivacyLoss
        ``PrivacyLoss("zcdp", rho)``.
    kind : str
        ``"gaussian"`` or ``"discrete_gaussian"``.

    Raises
    ------
    InvalidInput
        For a bad rho or sensitivity, or a sigma above ``1e15``.

    Examples
    --------
    >>> mech = GaussianMechanism(rho=0.5, sensitivity=3.0)
    >>> mech.scale, mech.privacy_loss.kind
    (3.0, 'zcdp')
    >>> round(mech.error_bar(m=4), 3)  # 1.96 * 3 * sqrt(4)
    11.76
    """

    __slots__ = ()
    _param = "rho"
    _loss_kind = "zcdp"
    _family = "gaussian"

    def __init__(self, rho: float, sensitivity: float = 1.0, discrete: bool = False) -> None:
        sigma = gaussian_sigma(sensitivity, rho)  # validates both
        self._setup(float(rho), float(sensitivity), sigma, discrete)

    @property
    def rho(self) -> float:
        """The zCDP rho of one release."""
        return self._budget
