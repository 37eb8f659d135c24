"""Tests of the noise calibration (spatialdp.privacy.calibration) and the mechanisms."""

from __future__ import annotations

import math
from decimal import Context, Decimal, Inexact, localcontext
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import spatialdp.privacy
from spatialdp.exceptions import InvalidInput
from spatialdp.privacy import accuracy
from spatialdp.privacy.calibration import MAX_SCALE, gaussian_sigma, headroom_scale, laplace_scale
from spatialdp.privacy.noise import GaussianMechanism, LaplaceMechanism, PrivacyLoss
from tests._timeouts import time_limit as no_hang


def exact_product(a: float, b: Decimal) -> Decimal:
    """``Decimal(a) * b`` with no rounding at all (Inexact is trapped)."""
    with localcontext(Context(prec=3000, traps=[Inexact])):
        return Decimal(a) * b


sensitivities = st.floats(min_value=5e-324, max_value=1e300, allow_nan=False)
epsilons = st.floats(min_value=1e-12, max_value=1e6, allow_nan=False)


# ---------------------------------------------------------------------------
# calibration
# ---------------------------------------------------------------------------


@settings(max_examples=600, deadline=None)
@given(sensitivity=sensitivities, epsilon=epsilons)
@example(sensitivity=1.0, epsilon=1.1)  # float 1.1 > decimal 1.1: binary calibration undercuts
@example(sensitivity=7.0, epsilon=0.9)
@example(sensitivity=1.0, epsilon=0.1)
@example(sensitivity=5e-324, epsilon=1e6)
def test_laplace_scale_is_the_smallest_float_covering_the_decimal_epsilon(
    sensitivity: float, epsilon: float
) -> None:
    eps = Decimal(repr(epsilon))  # what the ledger charges
    exact = Fraction(sensitivity) / Fraction(eps)
    if exact > MAX_SCALE:
        with pytest.raises(InvalidInput, match="exceeds the largest supported noise scale"):
            laplace_scale(sensitivity, epsilon)
        return
    scale = laplace_scale(sensitivity, epsilon)
    assert exact_product(scale, eps) >= Decimal(sensitivity)
    below = math.nextafter(scale, 0.0)
    assert below == 0.0 or exact_product(below, eps) < Decimal(sensitivity)  # the smallest
    assert LaplaceMechanism(epsilon, sensitivity, discrete=True).scale == scale
    # real values: the same rule with 2**-24 of headroom for the release lattice
    headroom = Fraction(sensitivity) * (1 + Fraction(1, 2**24))
    if headroom / Fraction(eps) > MAX_SCALE:
        return
    real = LaplaceMechanism(epsilon, sensitivity).scale
    assert Fraction(real) * Fraction(eps) >= headroom
    below = math.nextafter(real, 0.0)
    assert below == 0.0 or Fraction(below) * Fraction(eps) < headroom
    assert real >= scale


@settings(max_examples=600, deadline=None)
@given(sensitivity=sensitivities, rho=epsilons)
@example(sensitivity=1.0, rho=0.3)
@example(sensitivity=1e-300, rho=1e6)  # sigma**2 underflows in floats
@example(sensitivity=5e-324, rho=1e6)
def test_gaussian_sigma_is_the_smallest_float_covering_the_decimal_rho(
    sensitivity: float, rho: float
) -> None:
    r = Fraction(Decimal(repr(rho)))
    target = Fraction(sensitivity) ** 2 / (2 * r)
    if target > Fraction(MAX_SCALE) ** 2:
        with pytest.raises(InvalidInput, match="exceeds the largest supported noise scale"):
            gaussian_sigma(sensitivity, rho)
        return
    sigma = gaussian_sigma(sensitivity, rho)
    assert Fraction(sigma) ** 2 >= target
    below = math.nextafter(sigma, 0.0)
    assert below == 0.0 or Fraction(below) ** 2 < target
    assert GaussianMechanism(rho, sensitivity).scale == sigma


def test_old_binary_calibration_undercut_the_charge() -> None:
    """Regression: sensitivity / float(1.1), rounded against the float, is below 1 / 1.1."""
    binary = 1.0 / 1.1
    assert Fraction(binary) >= Fraction(1) / Fraction(1.1)  # fine against the float ...
    assert Fraction(binary) * Fraction(Decimal("1.1")) < 1  # ... too small for the charge
    scale = LaplaceMechanism(1.1, 1.0, discrete=True).scale
    assert scale == math.nextafter(binary, math.inf)
    assert Fraction(scale) * Fraction(Decimal("1.1")) >= 1


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: laplace_scale(True, 1.0), "sensitivity=True is a bool"),
        (lambda: laplace_scale(1.0, "0.5"), "epsilon='0.5' is a string"),
        (lambda: laplace_scale(1.0, math.nan), "epsilon=nan is not finite"),
        (lambda: laplace_scale(math.inf, 1.0), "sensitivity=inf is not finite"),
        (lambda: laplace_scale(1.0, 1e308), r"epsilon=1e\+308 is above the limit"),
        (lambda: laplace_scale(1e300, 1.0), "exceeds the largest supported noise scale"),
        (lambda: gaussian_sigma(1.0, 0), "rho=0 is below the limit"),
        (lambda: gaussian_sigma(1.0, 1e308), r"rho=1e\+308 is above the limit"),
        (lambda: gaussian_sigma(1e300, 1e-300), "exceeds the largest supported noise scale"),
    ],
)
def test_calibration_refusals(call, match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        call()


def test_calibration_accepts_numpy_scalars() -> None:
    assert laplace_scale(np.float32(2.0), np.int64(4)) == 0.5
    assert gaussian_sigma(np.int32(1), np.float64(0.125)) == 2.0
    assert spatialdp.privacy.laplace_scale is laplace_scale


# ---------------------------------------------------------------------------
# hangs
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: GaussianMechanism(1e308), r"rho=1e\+308 is above the limit"),
        (lambda: GaussianMechanism(1e300, 1.0, discrete=True), "rho="),
        (lambda: LaplaceMechanism(1e308), r"epsilon=1e\+308 is above the limit"),
        (lambda: GaussianMechanism(1e-300), "exceeds the largest supported noise scale"),
    ],
)
def test_extreme_parameters_are_refused_quickly(call, match: str) -> None:
    """Regression: GaussianMechanism(1e308) stepped sigma up from 0 one ulp at a time."""
    with no_hang(), pytest.raises(InvalidInput, match=match):
        call()


@pytest.mark.parametrize(("rho", "sensitivity"), [(1e6, 5e-324), (1e6, 1e-300), (1e-12, 1e-3)])
def test_extreme_but_valid_parameters_finish(rho: float, sensitivity: float) -> None:
    with no_hang():
        mech = GaussianMechanism(rho, sensitivity, discrete=True)
        assert mech.scale > 0
        assert mech.simulate(np.zeros(5, dtype=np.int64), rng=0).shape == (5,)
        assert mech.error_bar(10) >= 0


# ---------------------------------------------------------------------------
# the release API
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(4,), (3, 2)])
def test_mechanisms_release_and_simulate_float_arrays(shape: tuple[int, ...]) -> None:
    values = np.arange(math.prod(shape), dtype=np.float64).reshape(shape)
    for mech in (LaplaceMechanism(0.5, 2.0), GaussianMechanism(0.5, 1.0)):
        out = mech.release(values)
        assert out.shape == shape
        assert out.dtype == np.float64
        assert np.isfinite(out).all()
        sim = mech.simulate(values, rng=np.random.default_rng(1))
        assert sim.shape == shape
        assert np.array_equal(sim, mech.simulate(values, rng=np.random.default_rng(1)))


def test_mechanism_attributes_are_read_only() -> None:
    mech = LaplaceMechanism(0.1, 3.0)
    assert (mech.epsilon, mech.sensitivity, mech.kind) == (0.1, 3.0, "laplace")
    assert mech.scale == headroom_scale(3.0, 0.1)  # laplace_scale * (1 + 2**-24), rounded up
    assert LaplaceMechanism(0.1, 3.0, discrete=True).scale == laplace_scale(3.0, 0.1)
    assert mech.privacy_loss == PrivacyLoss("pure", 0.1)
    for name in ("epsilon", "sensitivity", "scale", "kind", "privacy_loss", "discrete"):
        with pytest.raises(AttributeError):
            setattr(mech, name, 1.0)
    with pytest.raises(AttributeError):
        mech.extra = 1  # type: ignore[attr-defined]
    gauss = GaussianMechanism(0.125, 1.0, discrete=True)
    assert (gauss.rho, gauss.scale, gauss.kind) == (0.125, 2.0, "discrete_gaussian")
    with pytest.raises(AttributeError):
        gauss.rho = 1.0  # type: ignore[misc]


def test_mechanisms_compare_by_identity() -> None:
    a, b = LaplaceMechanism(1.0), LaplaceMechanism(1.0)
    assert type(a).__eq__ is object.__eq__  # identity, not a field-by-field comparison
    assert a != b
    assert len({a, b}) == 2
    assert [a, b].index(b) == 1  # found by identity, not by its twin


def test_mechanism_attributes_are_python_floats() -> None:
    mech = LaplaceMechanism(np.float64(0.5), np.int64(2))
    assert type(mech.epsilon) is float
    assert type(mech.sensitivity) is float
    assert "epsilon=0.5" in repr(mech)


@pytest.mark.parametrize(
    ("bad", "match"),
    [(0, "alpha=0 is below"), (1.0, "alpha=1.0 is above"), (True, "alpha=True is a bool"),
     ("0.05", "alpha='0.05' is a string"), (math.nan, "alpha=nan is not finite")],
)
def test_error_bar_checks_alpha(bad: object, match: str) -> None:
    for mech in (LaplaceMechanism(1.0), GaussianMechanism(1.0, discrete=True)):
        with pytest.raises(InvalidInput, match=match):
            mech.error_bar(1, bad)  # type: ignore[call-overload]
        with pytest.raises(InvalidInput, match=match):
            mech.accuracy(1, bad)  # type: ignore[arg-type]


def test_error_bar_matches_accuracy_module() -> None:
    mech = LaplaceMechanism(0.3, 1.0, discrete=True)
    assert mech.error_bar(7, 0.1) == accuracy.half_width("discrete_laplace", mech.scale, 7, 0.1)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: LaplaceMechanism(1.0, discrete=1), "discrete=1 is a int, not a bool"),
        (lambda: LaplaceMechanism(1.0, discrete="yes"), "discrete='yes'"),
        (lambda: LaplaceMechanism(None), "epsilon=None is a NoneType"),
        (lambda: LaplaceMechanism(np.array([1.0, 2.0])), "epsilon=array"),
        (lambda: GaussianMechanism(1.0, 1 + 1j), "sensitivity=.* is a complex"),
        (lambda: PrivacyLoss("pure", True), "PrivacyLoss value=True is a bool"),
    ],
)
def test_mechanism_refusals(call, match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        call()
