"""The device-side release: lattice discrete Gaussian noise, ledger charges, refusals."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from spatialdp.exceptions import BudgetExceeded, InvalidInput, LedgerError
from spatialdp.privacy import PrivacyLedger, ReleaseTarget, Simulation, Unaccounted
from spatialdp.privacy.budget import rho_to_epsilon
from spatialdp.regression import (
    LatticeGaussianMechanism,
    Modulation,
    clip_rows,
    fit_iterative,
    modulate,
    random_directions,
    resolve_rho,
    rho_for_epsilon,
    transform_clients,
)
from spatialdp.regression.lattice_gaussian import (
    _decide_exactly,
    discrete_gaussian_noise,
    gaussian_exponent,
    headroom_sigma,
)


def _pmf(sigma: float, support: np.ndarray) -> np.ndarray:
    full = np.arange(-60 * math.ceil(sigma), 60 * math.ceil(sigma) + 1)
    w = np.exp(-full.astype(float) ** 2 / (2 * sigma**2))
    w /= w.sum()
    return w[np.searchsorted(full, support)]


@pytest.mark.parametrize("sigma", [Fraction(1, 2), Fraction(3), Fraction(41, 4)])
def test_discrete_gaussian_matches_its_pmf(sigma):
    z = discrete_gaussian_noise(100_000, sigma)  # release noise: OS entropy, no seed
    wide = np.arange(-60 * math.ceil(sigma), 60 * math.ceil(sigma) + 1)
    p = _pmf(float(sigma), wide)
    # Every bin expects at least 5 draws (the chi-square approximation's rule): the
    # values beyond the last such value pool into the two edge bins. A tail bin
    # expecting 0.001 draws would fail once in ~700 runs, not at alpha = 1e-6.
    inner = wide[p * z.size >= 5]
    low, high = int(inner.min()), int(inner.max())
    expected = np.array([p[wide <= low].sum(), *p[(wide > low) & (wide < high)],
                         p[wide >= high].sum()]) * z.size
    clipped = np.clip(z, low, high) - low
    observed = np.bincount(clipped.astype(np.int64), minlength=high - low + 1)
    chi2 = ((observed - expected) ** 2 / expected).sum()
    assert stats.chi2.sf(chi2, df=expected.size - 1) > 1e-6


def test_exact_bernoulli_decision_has_the_right_frequency():
    u = np.frombuffer(np.random.default_rng(0).bytes(4 * 4000), dtype=np.uint32)
    hits = np.mean([_decide_exactly(int(v), Fraction(1, 3)) for v in u])
    p = math.exp(-1 / 3)
    assert abs(hits - p) < 5 * math.sqrt(p * (1 - p) / u.size)


@pytest.mark.parametrize("d", [1, 7, 20])
@pytest.mark.parametrize("rho", [0.001, 0.3, 5.0])
def test_lattice_rounding_never_exceeds_the_charged_rho(d, rho):
    sens = 2.7
    sigma = headroom_sigma(sens, rho)
    e = gaussian_exponent(sigma, sens, rho, d)
    step = Fraction(2) ** e
    # (Delta + sqrt(d) step)^2 / (2 sigma^2) <= rho, checked with sqrt(d) rounded up
    root = Fraction(math.isqrt(d) + (0 if math.isqrt(d) ** 2 == d else 1))
    assert (Fraction(sens) + root * step) ** 2 <= Fraction(sigma) ** 2 * 2 * Fraction(str(rho))
    assert sigma <= sens / math.sqrt(2 * rho) * (1 + 2**-22)


def test_release_is_on_the_lattice_with_the_right_spread():
    mech = LatticeGaussianMechanism(rho=0.5, sensitivity=2.0, size=5)
    values = np.full((20_000, 5), 0.123456789)
    out = mech.release(values)
    units = out / mech.lattice_step()
    assert np.all(units == np.round(units))
    noise = out - values
    assert abs(noise.mean()) < 5 * mech.scale / math.sqrt(out.size)
    assert abs(noise.std() / mech.scale - 1) < 5 * math.sqrt(0.5 / out.size)


def test_rho_for_epsilon_inverts_the_exact_conversion():
    for eps in (0.5, 1.0, 8.0):
        rho = rho_for_epsilon(eps, 1e-6)
        assert rho_to_epsilon(rho, 1e-6) <= eps
        assert rho_to_epsilon(rho * 1.001, 1e-6) > eps


def _ledger(budget: float = 1.0) -> PrivacyLedger:
    return PrivacyLedger(":memory:", epoch_budget=budget, accounting="zcdp")


def _data(K: int = 200, d: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.normal(size=(K, d)), rng.normal(size=K)


def test_release_charges_the_ledger_once_with_labels_added():
    X, y = _data()
    with _ledger() as ledger:
        before = ledger.remaining(0, "training")
        rep = transform_clients(X, y, modulation=Modulation(lam=1.0), rho=0.1,
                                label_bound=2.0, label_rho=0.05,
                                target=ReleaseTarget(ledger, epoch=0, why="test"))
        assert before - ledger.remaining(0, "training") == pytest.approx(0.15)
    assert rep.accounting["accounting"] == "ledger"
    assert rep.label_sigma > 0
    assert not np.array_equal(rep.labels, np.clip(y, -2, 2))


def test_unaccounted_release_uses_the_lattice_and_says_so():
    X, y = _data()
    rep = transform_clients(X, y, modulation=Modulation(), rho=0.5,
                            target=Unaccounted("synthetic test data"))
    assert rep.accounting["accounting"] == "unaccounted"
    mech = LatticeGaussianMechanism(0.5, Modulation().sensitivity, 3)
    units = rep.features / mech.lattice_step()
    assert np.all(units == np.round(units))


@pytest.mark.parametrize("how", ["once", "every"])
def test_iterative_protocol_is_charged_rho_in_total(how):
    X, y = _data(400)
    with _ledger() as ledger:
        fit_iterative(X, y, modulation=Modulation(radius=2.0), rho=0.2, rounds=4,
                      participation=how, target=ReleaseTarget(ledger, epoch=0))
        assert ledger.remaining(0, "training") == pytest.approx(0.7 - 0.2)
        charges = ledger.summary(0).loc["training", "n_charges"]
    assert charges == (1 if how == "once" else 4)


# ----------------------------------------------------------------------------- refusals


@pytest.mark.parametrize("how", ["one_shot", "once", "every"])
def test_budget_the_ledger_cannot_cover_is_refused_and_nothing_is_charged(how):
    X, y = _data(400)
    with _ledger(1.0) as ledger:
        before = ledger.remaining(0, "training")
        target = ReleaseTarget(ledger, epoch=0)
        if how == "one_shot":
            with pytest.raises(BudgetExceeded, match="nothing was charged"):
                transform_clients(X, y, modulation=Modulation(), rho=5.0, target=target)
        else:
            with pytest.raises(BudgetExceeded, match="nothing was charged"):
                fit_iterative(X, y, modulation=Modulation(), rho=5.0, rounds=4,
                              participation=how, target=target)
        assert ledger.remaining(0, "training") == before


def test_pure_ledger_is_refused_before_any_charge():
    X, y = _data()
    with PrivacyLedger(":memory:", epoch_budget=1.0, accounting="pure") as ledger:
        with pytest.raises(LedgerError, match="accounting='zcdp'"):
            transform_clients(X, y, modulation=Modulation(), rho=0.1,
                              target=ReleaseTarget(ledger, epoch=0))
        assert ledger.remaining(0, "training") == pytest.approx(0.7)


def test_alpha_one_is_refused():
    with pytest.raises(InvalidInput, match=r"alpha=1.0 is above the limit < 1"):
        Modulation(alpha=1.0)


def test_non_orthonormal_directions_are_refused():
    X, y = _data()
    with pytest.raises(InvalidInput, match="are not orthonormal"):
        transform_clients(X, y, modulation=Modulation(lam=1.0), rho=0.1,
                          directions=[[1.0, 1.0, 0.0]], target=Simulation(rng=0))


def test_more_directions_than_features_are_refused():
    X, y = _data(d=3)
    with pytest.raises(InvalidInput, match="n_directions=4 exceeds n_features=3"):
        transform_clients(X, y, modulation=Modulation(lam=1.0, n_directions=4), rho=0.1,
                          directions=np.eye(4)[:, :3], target=Simulation(rng=0))
    with pytest.raises(InvalidInput, match="n_directions=4 exceeds n_features=3"):
        random_directions(3, 4, rng=0)


def test_nan_features_are_refused_before_any_charge():
    X, y = _data()
    X[5, 1] = np.nan
    with _ledger() as ledger:
        with pytest.raises(InvalidInput, match="X has 1 NaN or infinite values"):
            transform_clients(X, y, modulation=Modulation(), rho=0.1,
                              target=ReleaseTarget(ledger, epoch=0))
        assert ledger.remaining(0, "training") == pytest.approx(0.7)


def test_label_count_mismatch_and_missing_delta_are_refused():
    X, y = _data()
    with pytest.raises(InvalidInput, match="199 labels for 200 clients"):
        transform_clients(X, y[:-1], modulation=Modulation(), rho=0.1, target=Simulation())
    with pytest.raises(InvalidInput, match="delta=None is missing"):
        resolve_rho(epsilon=1.0)
    with pytest.raises(InvalidInput, match="rho=1.0 and epsilon=1.0 were both given"):
        resolve_rho(rho=1.0, epsilon=1.0)


def test_too_many_rounds_for_disjoint_groups_are_refused():
    X, y = _data(10)
    with pytest.raises(InvalidInput, match="fewer than 2 clients per group with 10 sample"):
        fit_iterative(X, y, modulation=Modulation(), rho=1.0, rounds=6, target=Simulation())


def test_every_round_protocol_can_spend_exactly_the_remaining_budget():
    X, y = _data(300)
    with _ledger() as ledger:
        left = ledger.remaining(0, "training")
        fit_iterative(X, y, modulation=Modulation(), rho=left, rounds=7, participation="every",
                      target=ReleaseTarget(ledger, epoch=0))
        assert ledger.remaining(0, "training") == pytest.approx(0.0, abs=1e-12)
        assert ledger.summary(0).loc["training", "n_charges"] == 7


@settings(max_examples=25, deadline=None)
@given(alpha=st.floats(0.0, 0.99), lam=st.floats(0.0, 5.0), omega=st.floats(0.0, 10.0),
       radius=st.floats(0.1, 10.0), d=st.integers(1, 6), data=st.data())
def test_sensitivity_bounds_random_pairs_for_any_parameters(alpha, lam, omega, radius, d, data):
    m = data.draw(st.integers(1, d))
    mod = Modulation(alpha=alpha, lam=lam, omega=omega, n_directions=m, radius=radius)
    assert mod.sensitivity <= mod.lipschitz_sensitivity * (1 + 1e-12)
    rng = np.random.default_rng(0)
    V = random_directions(d, m, rng=1)
    x1 = clip_rows(rng.normal(size=(2000, d)) * 3 * radius, radius)
    x2 = clip_rows(rng.normal(size=(2000, d)) * 3 * radius, radius)
    ph = rng.uniform(0, 2 * np.pi, (2000, m))
    gap = np.linalg.norm(modulate(x1, V, mod, ph) - modulate(x2, V, mod, ph), axis=1)
    assert gap.max() <= mod.sensitivity * (1 + 1e-9)


def test_rho_for_epsilon_refuses_a_budget_too_small_to_convert():
    # It used to search for ever: the bracket's lower end underflowed to 0 and doubled 0.
    with pytest.raises(InvalidInput, match=r"epsilon=1e-300 is below 1e-06.*give rho="):
        rho_for_epsilon(1e-300, 1e-6)
    rho = rho_for_epsilon(1e-3, 1e-6)  # small but convertible: the inversion still holds
    assert 0 < rho
    assert rho_to_epsilon(rho, 1e-6) <= 1e-3
    tiny_delta = rho_for_epsilon(1.0, 5e-324)  # 1 / a subnormal delta is inf: no hang
    assert 0 < tiny_delta
    assert rho_to_epsilon(tiny_delta, 5e-324) <= 1.0


def test_lattice_mechanism_refuses_junk_values():
    from spatialdp.exceptions import InvalidInput
    from spatialdp.regression import LatticeGaussianMechanism

    mech = LatticeGaussianMechanism(1.0, 2.0, 3)
    with pytest.raises(InvalidInput, match="values has dtype <U1"):
        mech.release(["a", "a", "a"])
    with pytest.raises(InvalidInput, match="too large for the release lattice"):
        mech.release([1e308] * 3)
    with pytest.raises(InvalidInput, match="values has 3 NaN"):
        mech.simulate([np.nan] * 3, rng=0)
    with pytest.raises(InvalidInput, match=r"values have shape \(2,\)"):
        mech.simulate(np.zeros(2), rng=0)
    assert mech.simulate(np.zeros((0, 3)), rng=0).shape == (0, 3)
