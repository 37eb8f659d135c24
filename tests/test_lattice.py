"""Tests of the exact table-inversion sampler and the real-valued lattice release.

The sampler (spatialdp.privacy.exact) decides every draw by comparing a lazily
revealed uniform with BRACKETS of irrational thresholds; these tests check the
brackets against high-precision decimal arithmetic, force the rare deeper paths
(16 bits undecided, 64 bits undecided) and test the distributions they produce.
The lattice release (spatialdp.privacy.exact) is tested for the exact privacy
inequality ``(Delta + d step) / b <= epsilon`` and for its noise distribution.
"""

from __future__ import annotations

import math
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy import stats

from spatialdp.exceptions import InvalidInput
from spatialdp.privacy import exact
from spatialdp.privacy.calibration import decimal_value
from spatialdp.privacy.noise import LaplaceMechanism, release_laplace

P_MIN = 1e-6  # goodness-of-fit tests fail only below this p-value
B = exact._BASE


def exp_neg_decimal(x: Fraction, digits: int = 120) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = digits
        return (-(Decimal(x.numerator) / Decimal(x.denominator))).exp()


def scaled(value: Decimal, prec: int) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 200
        return value * (Decimal(2) ** prec)


def chi2_p(observed: np.ndarray, probs: np.ndarray) -> float:
    """Chi-square p-value; bins with expected count below 5 are pooled into one."""
    n = observed.sum()
    expected = probs * n
    keep = expected >= 5
    chi2 = float((((observed - expected) ** 2 / expected)[keep]).sum())
    rest_e, rest_o = expected[~keep].sum(), observed[~keep].sum()
    dof = int(keep.sum()) - 1
    if rest_e > 0 or rest_o > 0:
        chi2 += float((rest_o - rest_e) ** 2 / max(rest_e, 1e-12))
        dof += 1
    return float(stats.chi2.sf(chi2, max(dof, 1)))


def digit_probs(d: exact._Digit) -> np.ndarray:
    """Exact-enough probabilities of the B values of one part (float64)."""
    x = float(d.x)
    k = np.arange(B, dtype=np.float64)
    if d.kind == "truncated":
        w = np.exp(-k * x)
        return w / w.sum()
    if d.kind == "abs":  # |Z|: P(0) = (1 - r) / (1 + r), P(k) = 2 (1 - r) r**k / (1 + r)
        r = math.exp(-x)
        p = 2 * (1 - r) / (1 + r) * np.exp(-k * x)
        p[0] = (1 - r) / (1 + r)
        p[-1] = 2 * math.exp(-(B - 1) * x) / (1 + r)  # the tail bucket: |Z| >= B - 1
        return p
    p = -math.expm1(-x) * np.exp(-k * x)
    p[-1] = math.exp(-(B - 1) * x)  # the tail bucket: G >= B - 1
    return p


def true_threshold(d: exact._Digit, j: int) -> Decimal:
    r_j, r_b, r = (exp_neg_decimal(m * d.x) for m in (j, B, 1))
    with localcontext() as ctx:
        ctx.prec = 120
        if d.kind == "truncated":
            return (r_j - r_b) / (1 - r_b)
        return 2 * r_j / (1 + r) if d.kind == "abs" else r_j


# ---------------------------------------------------------------------------
# brackets
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("x", [Fraction(0), Fraction(1, 2**60), Fraction(1, 3), Fraction(1),
                               Fraction(5, 2), Fraction(400), Fraction(2**20, 7),
                               Fraction(123456789, 2**55)])
@pytest.mark.parametrize("prec", [20, 64, 150])
def test_exp_neg_bounds_bracket_the_true_value(x: Fraction, prec: int) -> None:
    lo, hi = exact._exp_neg_bounds(x, prec)
    true = scaled(exp_neg_decimal(x), prec)
    assert Decimal(lo) <= true <= Decimal(hi)
    assert 0 <= hi - lo <= 4


def parts(plan: exact._Plan) -> tuple[exact._Digit, ...]:
    return (*([] if plan.first is None else [plan.first]), *plan.digits, plan.top)


@pytest.mark.parametrize(("scale", "level", "kind"),
                         [(0.05, 0, "abs"), (0.05, 1, "geometric"), (2.5, 0, "abs"),
                          (2.5, 1, "geometric"), (47.5, 0, "abs"), (250.0, 1, "geometric"),
                          (1e4, 0, "truncated"), (1e4, 1, "geometric"),
                          (2.0**40, 2, "truncated")])
def test_table_brackets_contain_the_thresholds(scale: float, level: int, kind: str) -> None:
    d = parts(exact._plan(Fraction(scale)))[level]
    assert d.kind == kind
    assert np.all(d.lo <= d.hi)
    assert np.all(np.diff(d.lo.astype(object)) >= 0)
    assert np.all(np.diff(d.hi.astype(object)) >= 0)
    for j in (1, 2, 3, 17, 100, 511, B - 2, B - 1):
        i = B - 1 - j  # ascending index of c_j
        lo, hi = exact._threshold_bounds(d.x, d.kind, j, 64)
        assert int(d.lo[i]) <= hi
        assert lo <= int(d.hi[i])
        assert int(d.hi[i]) - int(d.lo[i]) <= 8
        true = scaled(true_threshold(d, j), 64)
        assert Decimal(int(d.lo[i])) <= true <= Decimal(int(d.hi[i]))
        assert Decimal(lo) <= true <= Decimal(hi)


@pytest.mark.parametrize(("scale", "level"), [(47.5, 1), (1e4, 0)])
def test_lookup_table_agrees_with_the_brackets(scale: float, level: int) -> None:
    d = parts(exact._plan(Fraction(scale)))[level]
    w = np.arange(1 << 16, dtype=np.uint64) << np.uint64(48)
    for edge in (w, w | np.uint64(2**48 - 1)):  # both ends of every 16-bit interval
        n_lo = np.searchsorted(d.lo, edge, side="right")
        n_hi = np.searchsorted(d.hi, edge, side="right")
        decided = d.lut != exact._UNDECIDED
        assert np.all((n_lo == n_hi)[decided])
        assert np.array_equal(d.lut[decided], (d.lo.size - n_lo)[decided])
    assert 0 < np.mean(d.lut == exact._UNDECIDED) < 0.02



def searched_lookup_table(lo: np.ndarray, hi: np.ndarray, bits: int) -> np.ndarray:
    """The lookup table by its definition: a binary search at both ends of every prefix."""
    start = np.arange(1 << bits, dtype=np.uint64) << np.uint64(64 - bits)
    last = start | np.uint64((1 << (64 - bits)) - 1)
    n_lo = np.searchsorted(lo, last, side="right")
    n_hi = np.searchsorted(hi, start, side="right")
    return np.where(n_lo == n_hi, (lo.size - n_lo).astype(np.uint16), exact._UNDECIDED)


@pytest.mark.parametrize("scale", [0.05, 2.5, 47.5, 250.0, 1e4, 2.0**40, 2.0**56])
@pytest.mark.parametrize("bits", [15, 16])
def test_lookup_table_is_the_search_over_the_brackets(scale: float, bits: int) -> None:
    # the histogram construction gives exactly the table of the binary search, also
    # for brackets on the prefix edges and next to 2**64 (widened ones)
    digits = [*parts(exact._plan(Fraction(scale))), exact._split_plan(Fraction(2**30), 20).top]
    for d in digits:
        for lo, hi in ((d.lo, d.hi), (widened(d, 2**47).lo, widened(d, 2**47).hi)):
            assert np.array_equal(exact._lookup_table(lo, hi, bits),
                                  searched_lookup_table(lo, hi, bits))
    edges = np.array([0, 2**48 - 1, 2**48, 2**63, 2**64 - 2**48, 2**64 - 1], dtype=np.uint64)
    for lo, hi in ((edges, edges), (edges[:-1], edges[1:])):
        assert np.array_equal(exact._lookup_table(lo, hi, bits),
                              searched_lookup_table(lo, hi, bits))

def test_signed_table_is_the_magnitude_table_with_a_sign_bit() -> None:
    d = exact._plan(Fraction(2.5)).first
    assert d is not None
    assert d.kind == "abs"
    mags = exact._lookup_table(d.lo, d.hi, 15)
    assert d.lut.dtype == np.int16
    undecided = mags == exact._UNDECIDED
    assert np.all(d.lut[: 1 << 15][undecided] == exact._SIGNED_UNDECIDED)
    assert np.all(d.lut[1 << 15 :][undecided] == exact._SIGNED_UNDECIDED)
    assert np.array_equal(d.lut[: 1 << 15][~undecided], mags[~undecided].astype(np.int16))
    assert np.array_equal(d.lut[1 << 15 :][~undecided], -mags[~undecided].astype(np.int16))


def widened(d: exact._Digit, by: int) -> exact._Digit:
    """The same part with every bracket widened by ``by`` units of 2**-64 (still valid)."""
    lo = np.array([max(0, int(v) - by) for v in d.lo], dtype=np.uint64)
    hi = np.array([min(2**64 - 1, int(v) + by) for v in d.hi], dtype=np.uint64)
    assert int(d.hi[-1]) + by < 2**64  # a clipped bracket would no longer be valid
    if d.kind != "abs":
        return exact._Digit(d.x, d.kind, lo, hi, exact._lookup_table(lo, hi, 16))
    mags = exact._lookup_table(lo, hi, 15)
    signed = np.where(mags == exact._UNDECIDED, exact._SIGNED_UNDECIDED,
                      mags.astype(np.int16)).astype(np.int16)
    negative = np.where(mags == exact._UNDECIDED, exact._SIGNED_UNDECIDED,
                        -mags.astype(np.int16)).astype(np.int16)
    return exact._Digit(d.x, d.kind, lo, hi, np.concatenate([signed, negative]))


@pytest.mark.parametrize(("scale", "level", "by"),
                         [(2.5, 0, 2**50), (2.5, 1, 2**50), (300.0, 1, 2**46),
                          (250.0, 0, 2**46), (1e4, 0, 2**46), (1e4, 1, 2**46)])
def test_deep_paths_draw_the_exact_distribution(scale: float, level: int, by: int,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Widened brackets send many draws to the 64-bit and arbitrary-precision comparisons."""
    d = widened(parts(exact._plan(Fraction(scale)))[level], by)
    calls = []
    deep = exact._deep

    def counting(*args: object) -> int:
        calls.append(1)
        return deep(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(exact, "_deep", counting)
    n = 200_000
    if d.kind == "abs":
        signed = exact._draw_signed(d, n).astype(np.int64)
        draws = np.abs(signed)
        positive, negative = np.sum(signed > 0), np.sum(signed < 0)
        assert abs(positive - negative) < 6 * math.sqrt(positive + negative)
    else:
        draws = exact._draw(d, n)
    assert len(calls) > 20  # the arbitrary-precision path ran
    observed = np.bincount(draws, minlength=B)
    assert chi2_p(observed, digit_probs(d)) > P_MIN


def test_deep_comparison_direct() -> None:
    d = exact._plan(Fraction(2.5)).top
    assert d.kind == "geometric"
    # V's 64-bit prefix sits inside the bracket of c_1 = exp(-0.4): only c_1 is undecided
    i = B - 2  # ascending index of c_1
    w = int(d.lo[i])
    counts = [exact._deep(d, w, i, i + 1) for _ in range(200)]
    assert set(counts) <= {0, 1}


# ---------------------------------------------------------------------------
# the geometric magnitude and the sign
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(("scale", "levels"), [(0.05, 0), (2.0, 0), (47.5, 0), (250.0, 0),
                                               (1e4, 1), (1e7, 2), (2.0**56, 5)])
def test_plan_levels(scale: float, levels: int) -> None:
    plan = exact._plan(Fraction(scale))
    assert len(plan.digits) == levels
    assert (plan.first is None) == (levels > 0)


@pytest.mark.parametrize("scale", [400.0, 1e4, 3e6])
def test_geometric_magnitude_matches(scale: float) -> None:
    """The digits and the memoryless tail combine into an exact geometric."""
    y = exact._geometric(exact._plan(Fraction(scale)), 200_000)
    # P(Y >= k) = exp(-k / scale): test in bins of equal probability
    edges = np.unique(np.floor(-scale * np.log(np.linspace(1, 0, 101)[1:-1])).astype(np.int64))
    tail = np.exp(-(edges + 1) / scale)  # P(Y > edge)
    probs = -np.diff(np.concatenate([[1.0], tail, [0.0]]))
    observed = np.bincount(np.searchsorted(edges, y, side="left"), minlength=probs.size)
    assert chi2_p(observed, probs) > P_MIN


def test_sampler_limits() -> None:
    with pytest.raises(ValueError, match="scale <= 2\\*\\*56"):
        exact.discrete_laplace_noise(3, Fraction(2**56 + 1))
    with pytest.raises(ValueError, match="0 < scale"):
        exact.discrete_laplace_noise(3, Fraction(0))
    assert exact.discrete_laplace_noise(0, Fraction(3)).shape == (0,)
    tiny = exact.discrete_laplace_noise(10_000, Fraction(1, 2**1074))
    assert not tiny.any()
    huge = exact.discrete_laplace_noise(10_000, Fraction(2**56))
    assert np.abs(huge).max() < 2**62


# ---------------------------------------------------------------------------
# the split sampler of large scales: uniform low bits with one exact rejection
# ---------------------------------------------------------------------------


def truncated_low_probs(scale: Fraction, k: int, bins: int) -> np.ndarray:
    """P(L in each of ``bins`` equal bins of [0, 2**k)); L is truncated geometric, exp(-1/S)."""
    x = 1 / float(scale)
    width = 2**k // bins
    starts = np.arange(bins, dtype=np.float64) * width
    mass = np.exp(-starts * x) * -np.expm1(-width * x)  # sum of a**l over the bin, times 1 - a
    return mass / mass.sum()


def split_low_draws(s: exact._Split, n: int) -> np.ndarray:
    k = s.low_bits
    bits = min(47 - k, exact._CHECK_BITS)
    words = exact._raw_bits(64, n) & np.uint64((1 << (k + bits)) - 1)
    return exact._accepted_low(s, words, bits)


@pytest.mark.parametrize(("scale", "k"), [(Fraction(5000), 12), (Fraction(2**20 + 7, 3), 16),
                                          (Fraction(2**45 + 1), 39)])
def test_split_low_part_is_the_truncated_geometric(scale: Fraction, k: int) -> None:
    """theta = 2**k / S up to 0.82: the rejection visibly tilts L, and must tilt it exactly."""
    s = exact._split_plan(scale, k)
    low = split_low_draws(s, 400_000)
    assert low.max() < 2**k
    bins = 64
    observed = np.bincount((low >> np.uint64(k - 6)).astype(np.int64), minlength=bins)
    assert chi2_p(observed, truncated_low_probs(scale, k, bins)) > P_MIN


def test_split_low_part_through_the_exact_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    """Float brackets widened to 50%: most candidates go to the exact integer comparison."""
    monkeypatch.setattr(exact, "_FLOAT_MARGIN", 0.5)
    calls = []
    exact_rejects = exact._exact_rejects

    def counting(*args: object) -> bool:
        calls.append(1)
        return exact_rejects(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(exact, "_exact_rejects", counting)
    scale, k = Fraction(5000), 12
    low = split_low_draws(exact._split_plan(scale, k), 30_000)
    assert len(calls) > 500
    observed = np.bincount((low >> np.uint64(k - 5)).astype(np.int64), minlength=32)
    assert chi2_p(observed, truncated_low_probs(scale, k, 32)) > P_MIN


@pytest.mark.parametrize("low", [0, 1, 17, 2**30 + 5, 2**39 - 1])
@pytest.mark.parametrize(("k", "factor_bits"), [(39, 0), (39, 20), (33, 8)])
def test_split_float_brackets_contain_one_minus_exp(low: int, k: int, factor_bits: int) -> None:
    # k = 39: t up to 2**39 / S = 0.82 (the series bound holds for any t < 1); k = 33:
    # t <= 2**-6 as the sampler chooses, where the bracket must also be narrow
    scale = Fraction(2**45 + 12345, 3)
    s = exact._split_plan(scale, k)
    low = min(low, 2**k - 1)
    factor = 2.0**factor_bits
    lo, hi = exact._one_minus_exp_brackets(s, np.array([low], dtype=np.uint64), factor)
    with localcontext() as ctx:
        ctx.prec = 120
        true = (1 - exp_neg_decimal(Fraction(low) / scale)) * Decimal(factor)
        assert Decimal(float(lo[0])) <= true <= Decimal(float(hi[0]))
        if k == 33:
            assert Decimal(float(hi[0])) - Decimal(float(lo[0])) <= true * Decimal(2.0**-19)


def test_split_exact_comparison_direct() -> None:
    scale = Fraction(5000)
    q = 1 - exp_neg_decimal(Fraction(100) / scale)  # about 0.0198
    w = int(q * 2**40)  # V's 40-bit prefix holds the threshold: more bits decide
    decisions = {exact._exact_rejects(1 / scale, 100, w, 40) for _ in range(200)}
    assert decisions == {False, True}
    assert exact._exact_rejects(1 / scale, 100, w - 1, 40) is True
    assert exact._exact_rejects(1 / scale, 100, w + 1, 40) is False


@pytest.mark.parametrize("scale", [2.0**20, 52226805432320.0, 2.0**49 + 2**30, 2.0**56])
def test_split_noise_low_bits_are_uniform_and_signs_fair(scale: float) -> None:
    """At a huge scale the low 8 bits of |Z| are uniform: a misplaced bit field would show."""
    z = exact.discrete_laplace_noise(200_000, Fraction(scale))
    observed = np.bincount(np.abs(z) & 255, minlength=256)
    assert chi2_p(observed, np.full(256, 1 / 256)) > P_MIN
    positive, negative = np.sum(z > 0), np.sum(z < 0)
    assert abs(positive - negative) < 6 * math.sqrt(positive + negative)
    assert lattice_noise_pvalue(z, scale) > P_MIN


@pytest.mark.parametrize(("scale", "k"), [(Fraction(5000), 12), (Fraction(2**20 + 7, 3), 16)])
def test_split_noise_is_discrete_laplace(scale: Fraction, k: int) -> None:
    z = exact._split_noise(exact._split_plan(scale, k), 400_000)
    assert lattice_noise_pvalue(z, float(scale), bins=400) > P_MIN
    half = int(scale / 20)  # the exact pmf near zero, where the rejection of -0 matters
    near = z[np.abs(z) < half]
    assert chi2_p(np.bincount(near + half - 1, minlength=2 * half - 1),
                  dlap_probs(float(scale), half)) > P_MIN


def dlap_probs(scale: float, half: int) -> np.ndarray:
    """P(Z = j | |Z| < half) for j = 1 - half .. half - 1."""
    p = np.exp(-np.abs(np.arange(1 - half, half)) / scale)
    return p / p.sum()


@pytest.mark.parametrize("exponent", [-40, -3, 0, 5, -1022, 960, -1074, 1023])
@pytest.mark.parametrize("spread", [1e3, 2.0**52, 2.0**61, 2.0**70])
def test_lattice_sum_equals_the_integer_path(exponent: int, spread: float) -> None:
    """Float sums (below 2**53), int64 sums (below 2**62) and big integers all agree."""
    rng = np.random.default_rng(3)
    step = 2.0**exponent
    with np.errstate(over="ignore", under="ignore"):
        values = np.concatenate([rng.uniform(-spread, spread, 5000) * step,
                                 [0.5 * step, -0.5 * step, 1.5 * step, -0.0, 0.0]])
    values = values[np.isfinite(values)]
    noise = rng.integers(-(2**40), 2**40, values.size)
    fast = exact._lattice_sum(values, noise, exponent)
    reference = exact._lattice_sum_in_integers(values, noise, exponent)
    assert np.array_equal(fast, reference)
    assert np.array_equal(np.signbit(fast), np.signbit(reference))


@pytest.mark.parametrize("exponent", [-40, -3, 0, 5, -1022, 960])
def test_small_lattice_sum_equals_the_integer_path(exponent: int) -> None:
    """Values below 2**52 lattice units and noise up to 2**52: no check needed, exact."""
    rng = np.random.default_rng(4)
    step = 2.0**exponent
    limit = 2.0**52
    units = np.concatenate([rng.uniform(-limit, limit, 5000), rng.uniform(-3, 3, 1000),
                            [0.5, -0.5, 1.5, -2.5, -0.0, 0.0, limit - 1, -(limit - 1)]])
    values = units * step  # exact: a power of two
    noise = np.concatenate([rng.integers(-(2**52), 2**52 + 1, values.size - 4),
                            [2**52, -(2**52), 0, 0]])
    assert np.all(np.abs(values) < 2.0 ** (52 + exponent))
    out = np.empty_like(values)
    fast = exact._small_lattice_sum(values, noise, exponent, out)
    assert fast is out
    reference = exact._lattice_sum_in_integers(values, noise, exponent)
    assert np.array_equal(fast, reference)
    assert np.array_equal(np.signbit(fast), np.signbit(reference))


def test_lattice_sum_near_the_float_limit() -> None:
    """Sums on both sides of 2**53 are exact (the float path declines what it cannot do)."""
    values = np.array([2.0**52, 2.0**52, 2.0**53 - 2, 0.0, -(2.0**52)])
    noise = np.array([2**52 - 1, 2**52 + 1, 3, 2**53 + 1, -(2**52) - 3], dtype=np.int64)
    out = exact._lattice_sum(values, noise, 0)
    expected = [float(int(v) + int(z)) for v, z in zip(values, noise, strict=True)]
    assert out.tolist() == expected
    assert out[0] == 2.0**53 - 1


def test_split_plan_refuses_bad_low_bits() -> None:
    with pytest.raises(ValueError, match="1 <= k <= 46"):
        exact._split_plan(Fraction(100), 8)
    with pytest.raises(ValueError, match="1 <= k <= 46"):
        exact._split_plan(Fraction(2**60), 47)


# ---------------------------------------------------------------------------
# the lattice: the exact privacy inequality
# ---------------------------------------------------------------------------


sensitivities = st.floats(min_value=1e-300, max_value=1e300, allow_nan=False)
epsilons = st.floats(min_value=1e-6, max_value=1e6, allow_nan=False)
sizes = st.integers(min_value=0, max_value=10**10)


@settings(max_examples=500, deadline=None)
@given(sensitivity=sensitivities, epsilon=epsilons, size=sizes)
@example(sensitivity=1.0, epsilon=0.5, size=1)
@example(sensitivity=19.0, epsilon=0.4, size=26_000)
@example(sensitivity=1.0, epsilon=1.1, size=1_000_000)  # float 1.1 > decimal 1.1
@example(sensitivity=5e-324, epsilon=1e6, size=1)
@example(sensitivity=1e-300, epsilon=1e-6, size=10**9)
def test_mechanism_lattice_never_exceeds_the_charge(sensitivity: float, epsilon: float,
                                                     size: int) -> None:
    try:
        mech = LaplaceMechanism(epsilon, sensitivity)
    except InvalidInput:
        return  # scale above 1e15
    b, delta, eps = Fraction(mech.scale), Fraction(sensitivity), decimal_value(epsilon)
    # the published scale: headroom 2**-24, rounded up to a float, never down
    assert b * eps >= delta * (1 + Fraction(1, 2**24))
    below = Fraction(math.nextafter(mech.scale, 0.0))  # ... and it is the smallest such float
    assert below * eps < delta * (1 + Fraction(1, 2**24))
    d = max(1, size)
    slack = b * eps - delta
    if 2 * b * d / slack > 2**56:  # the noise may exceed 2**56 lattice units: maybe refused
        try:
            e = exact.mechanism_exponent(mech.scale, sensitivity, epsilon, size)
        except InvalidInput:
            return
    else:  # never refused below that
        e = exact.mechanism_exponent(mech.scale, sensitivity, epsilon, size)
    step = Fraction(2) ** e
    assert (delta + d * step) / b <= eps  # THE inequality: the charge is never exceeded
    assert (delta + d * 2 * step) / b > eps  # and the step is the largest power of two
    assert b / step <= 2**56
    if e > -1074:
        assert mech.lattice_step(size) == math.ldexp(1.0, e)


@settings(max_examples=300, deadline=None)
@given(scale=st.floats(min_value=5e-324, max_value=1e15), size=st.integers(0, 2**31))
def test_standalone_lattice_adds_at_most_2_to_the_minus_24(scale: float, size: int) -> None:
    e = exact.standalone_exponent(scale, size)
    step, b, d = Fraction(2) ** e, Fraction(scale), max(1, size)
    assert d * step <= b / 2**24 < d * 2 * step  # loss <= Delta / b + 2**-24, largest step


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.floats(-1e12, 1e12), min_size=1, max_size=20),
       moves=st.lists(st.floats(-1.0, 1.0), min_size=20, max_size=20),
       delta=st.floats(1e-6, 1e6), e=st.integers(-60, 10))
def test_rounding_adds_at_most_one_step_per_coordinate(values: list[float], moves: list[float],
                                                       delta: float, e: int) -> None:
    """||round(v) - round(v')||_1 <= ||v - v'||_1 / step + d, as the privacy proof uses."""
    v = np.array(values)
    move = np.array(moves[: v.size])
    total = np.abs(move).sum()
    v2 = v + (move / total * delta if total > 0 else 0.0)
    n1 = np.rint(np.ldexp(v, -e))
    n2 = np.rint(np.ldexp(v2, -e))
    dist = sum(abs(Fraction(a) - Fraction(b)) for a, b in zip(n1, n2, strict=True))
    true = sum(abs(Fraction(a) - Fraction(b)) for a, b in zip(v, v2, strict=True))
    assert dist <= true / Fraction(2) ** e + v.size


def test_refusals() -> None:
    with pytest.raises(InvalidInput, match="above the limit 2\\*\\*56"):
        LaplaceMechanism(1e-6, 1.0).lattice_step(10**5)
    with pytest.raises(InvalidInput, match="no lattice step"):
        LaplaceMechanism(1.0, discrete=True).lattice_step(10)
    with pytest.raises(InvalidInput, match="size=-1 is below"):
        LaplaceMechanism(1.0).lattice_step(-1)
    with pytest.raises(InvalidInput, match="leaves no room"):
        exact.mechanism_exponent(2.0, 1.0, 0.5, 10)  # b = Delta / eps exactly: no headroom


# ---------------------------------------------------------------------------
# the lattice: distribution and exactness
# ---------------------------------------------------------------------------


def lattice_noise_pvalue(units: np.ndarray, scale_units: float, bins: int = 200) -> float:
    """Binned chi-square of integer noise against the discrete Laplace of that scale."""
    q = np.linspace(0, 1, bins + 1)[1:-1]
    quantiles = np.where(q < 0.5, scale_units * np.log(2 * q),
                         -scale_units * np.log(2 * (1 - q)))
    edges = np.unique(np.floor(quantiles))
    a = math.exp(-1 / scale_units)
    cdf = np.where(edges >= 0, 1 - np.exp(-(edges + 1) / scale_units) / (1 + a),
                   np.exp(edges / scale_units) / (1 + a))
    probs = np.diff(np.concatenate([[0.0], cdf, [1.0]]))
    observed = np.bincount(np.searchsorted(edges, units, side="left"), minlength=probs.size)
    return chi2_p(observed, probs)


@pytest.mark.parametrize(("epsilon", "sensitivity", "n", "spread"),
                         [(1.0, 1.0, 200_000, 0.0), (0.4, 19.0, 200_000, 1e3),
                          (0.1, 1.0, 100_000, 1e3), (2.0, 1e-3, 100_000, 0.1)])
def test_mechanism_release_is_discrete_laplace_on_the_lattice(
        epsilon: float, sensitivity: float, n: int, spread: float) -> None:
    mech = LaplaceMechanism(epsilon, sensitivity)
    rng = np.random.default_rng(0)
    values = rng.normal(0.0, spread, n) if spread else np.zeros(n)
    out = mech.release(values)
    step = mech.lattice_step(n)
    assert out.dtype == np.float64
    assert out.shape == values.shape
    lattice = out / step
    assert np.array_equal(lattice, np.round(lattice))  # exactly on the lattice
    units = lattice - np.rint(values / step)  # the integer noise, exactly
    scale_units = mech.scale / step
    assert scale_units == float(Fraction(mech.scale) / Fraction(step))
    assert lattice_noise_pvalue(units, scale_units) > P_MIN
    noise = out - values
    var = 2 * mech.scale**2
    assert abs(noise.mean()) < 6 * math.sqrt(var / n)
    assert abs(noise.var() / var - 1) < 6 * math.sqrt(5 / n)
    assert stats.kstest(noise, stats.laplace(scale=mech.scale).cdf).pvalue > P_MIN


def test_release_laplace_is_on_its_lattice() -> None:
    values = np.linspace(-5, 5, 50_001)
    out = release_laplace(values, 0.7)
    step = 2.0 ** exact.standalone_exponent(0.7, values.size)
    assert step == 2.0**-41  # 0.7 * 2**-24 / 50_001 = 2**-40.4
    units = out / step
    assert np.array_equal(units, np.round(units))
    noise_units = units - np.rint(values / step)
    assert lattice_noise_pvalue(noise_units, 0.7 / step) > P_MIN


def test_huge_values_take_the_exact_big_integer_path() -> None:
    mech = LaplaceMechanism(1.0, 1e-10)
    values = np.array([[1e300, 0.5], [-3e200, 1e-300]])
    out = mech.release(values)
    assert out.shape == (2, 2)
    step = mech.lattice_step(4)
    assert abs(Fraction(-3e200) / Fraction(step)) > 2**62  # the big-integer path ran for two
    assert out[0, 0] == 1e300  # the noise (~1e-10) vanishes in the float rounding
    assert out[1, 0] == -3e200
    assert abs(out[0, 1] - 0.5) < 1e-7
    assert out[0, 1] / step == round(out[0, 1] / step)
    tiny_scale = release_laplace(np.array([1e300, 1.0]), 5e-324)  # step 2**-1099
    assert tiny_scale.tolist() == [1e300, 1.0]


def test_release_shapes_and_types() -> None:
    mech = LaplaceMechanism(1.0, 2.0)
    assert isinstance(mech.release(3.0), float)
    zero_d = mech.release(np.array(3.0))
    assert isinstance(zero_d, np.ndarray)
    assert zero_d.shape == ()
    assert mech.release(np.zeros((0, 3))).shape == (0, 3)
    sparse = mech.release(scipy.sparse.csr_array(np.eye(3)))
    assert sparse.shape == (3, 3)
    assert np.all(sparse != np.eye(3))
    assert mech.release(np.arange(6.0).reshape(2, 3)).shape == (2, 3)


def test_error_bar_uses_the_scale_of_the_noise() -> None:
    mech = LaplaceMechanism(0.5, 2.0)
    assert mech.error_bar(1, 0.05) == pytest.approx(mech.scale * math.log(20), rel=1e-12)
    out = mech.release(np.zeros(200_000))
    coverage = np.mean(np.abs(out) <= mech.error_bar(1, 0.05))
    assert abs(coverage - 0.95) < 6 * math.sqrt(0.05 * 0.95 / out.size)
