"""The closed-form tail of Laplace sums plus a normal (spatialdp.privacy.laplace_sum).

Checked two independent ways: against the characteristic-function inversion by
QUADPACK (another algorithm) and against simulation (the quantile's exceedance
rate is alpha within binomial standard errors).
"""

from __future__ import annotations

import numpy as np
import pytest

from spatialdp.exceptions import InvalidInput
from spatialdp.privacy.combined_noise import _sum_tail, noise_sum_quantile, noise_sum_quantiles
from spatialdp.privacy.laplace_sum import laplace_sum_tail, well_separated


def _random_rows(rng: np.random.Generator, n: int) -> list[tuple[np.ndarray, float]]:
    rows = []
    for i in range(n):
        k = int(rng.integers(1, 5))
        scales = rng.uniform(0.05, 3.0, size=k)
        normal = (0.0, float(rng.uniform(0.0, 3.0)), float(rng.uniform(5.0, 20.0)))[i % 3]
        rows.append((scales, normal))
    return rows


def test_the_closed_form_tail_equals_the_numerical_inversion() -> None:
    rng = np.random.default_rng(3)
    checked = 0
    for scales, normal in _random_rows(rng, 60):
        if not well_separated(scales[None, :])[0]:
            continue
        for t in (0.05, 0.7, 2.5, 9.0, 30.0):
            closed = laplace_sum_tail(np.array([t]), scales[None, :], np.array([normal]))[0]
            if closed > 0.5:  # the inversion is inaccurate there (next test); quantiles never are
                continue
            assert closed == pytest.approx(_sum_tail(t, scales, normal), abs=1e-8)
            checked += 1
    assert checked > 100


def test_where_a_wide_normal_dominates_the_closed_form_is_right_and_the_inversion_is_not() -> None:
    # P(|S| > 0.05) with a normal part of sd 18.8: the QUADPACK inversion is off by 6.6e-4.
    scales, normal, t = np.array([1.468, 0.325]), 18.82, 0.05
    closed = laplace_sum_tail(np.array([t]), scales[None, :], np.array([normal]))[0]
    rng = np.random.default_rng(0)
    n = 2_000_000
    draws = rng.laplace(size=(n, 2)) @ scales + normal * rng.normal(size=n)
    rate = float(np.mean(np.abs(draws) > t))
    se = np.sqrt(closed * (1 - closed) / n)
    assert abs(rate - closed) < 5 * se
    assert abs(_sum_tail(t, scales, normal) - closed) > 20 * se


def test_coinciding_scales_fall_back_to_the_inversion_and_agree_across_the_seam() -> None:
    assert not well_separated(np.array([[1.0, 1.0]]))[0]
    exact = noise_sum_quantile([1.0, 1.0], 0.0, 0.01)
    assert exact == pytest.approx(5.990_2, abs=1e-4)
    # Just separated enough for the closed form: continuous with the inversion.
    near = noise_sum_quantiles([[1.0, 1.02]], 0.0, 0.01)[0]
    assert well_separated(np.array([[1.0, 1.02]]))[0]
    from spatialdp.privacy.combined_noise import _unit_quantile
    inverted = 2.02 * _unit_quantile((1.0 / 2.02, 1.02 / 2.02), 0.0, 0.01)
    assert near == pytest.approx(inverted, rel=1e-7)
    assert exact < near < noise_sum_quantile([1.02, 1.02], 0.0, 0.01)


def test_vectorised_quantiles_equal_the_scalar_ones_row_by_row() -> None:
    rows = [[0.3, 0.1, 0.0], [1.0, 1.0, 0.0], [0.2, 0.5, 0.9], [0.0, 0.0, 0.0]]
    normal = [0.0, 0.4, 1.0, 2.0]
    many = noise_sum_quantiles(rows, normal, 0.05)
    one = [noise_sum_quantile([x for x in r if x > 0], s, 0.05) for r, s in zip(rows, normal,
                                                                                strict=True)]
    np.testing.assert_allclose(many, one, rtol=1e-9)


@pytest.mark.parametrize(("scales", "normal"), [([0.7, 0.2, 1.3], 0.0), ([0.4, 0.9], 0.6),
                                                ([1.0], 2.0)])
def test_the_quantile_is_exceeded_alpha_of_the_time_by_simulation(scales: list[float],
                                                                  normal: float) -> None:
    alpha, n = 0.05, 400_000
    q = noise_sum_quantiles([scales], normal, alpha)[0]
    rng = np.random.default_rng(11)
    draws = rng.laplace(size=(n, len(scales))) @ np.asarray(scales) + normal * rng.normal(size=n)
    rate = float(np.mean(np.abs(draws) > q))
    se = np.sqrt(alpha * (1 - alpha) / n)
    assert abs(rate - alpha) < 5 * se


def test_bad_rows_are_refused() -> None:
    with pytest.raises(InvalidInput, match="must be positive"):
        noise_sum_quantiles([[0.0, 0.0]], 0.0)
    with pytest.raises(InvalidInput, match="finite, non-negative"):
        noise_sum_quantiles([[1.0, np.nan]], 0.0)
    with pytest.raises(InvalidInput, match="one row of scales per value"):
        noise_sum_quantiles([[1.0]], [0.0, 1.0])
