"""Allocation rules: exact integer seats, fractional shares, ordering, refusals."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spatialdp.exceptions import InvalidInput
from spatialdp.sampling import MODES, allocate, allocation_table, largest_remainder
from spatialdp.sampling.simulation import SEED_POPULATIONS

populations_st = st.lists(st.integers(0, 10**6), min_size=1, max_size=40).filter(
    lambda xs: sum(xs) > 0)


@settings(max_examples=60, deadline=None)
@given(pops=populations_st, data=st.data())
def test_every_mode_sums_to_the_cohort_exactly(pops: list[int], data: st.DataObject) -> None:
    cohort = data.draw(st.integers(1, sum(pops)))
    named = {f"s{i}": n for i, n in enumerate(pops)}
    sigma = {k: data.draw(st.floats(0.01, 100.0)) for k in named}
    for mode in MODES:
        result = allocate(named, cohort, mode=mode, sigma=sigma)
        assert int(result.seats.sum()) == cohort
        assert (result.seats >= 0).all()
        # Largest remainder: never more than one seat from the fractional share.
        assert (np.abs(result.seats - result.shares) < 1).all()
        assert result.shares.sum() == pytest.approx(cohort)


@settings(max_examples=60, deadline=None)
@given(pops=st.lists(st.integers(1, 10**6), min_size=2, max_size=40), data=st.data())
def test_sqrt_lies_between_proportional_and_equal(pops: list[int], data: st.DataObject) -> None:
    cohort = data.draw(st.integers(1, sum(pops)))
    named = {f"s{i}": n for i, n in enumerate(pops)}
    prop, sqrt, equal = (allocate(named, cohort, mode=m) for m in ("proportional", "sqrt",
                                                                    "equal"))
    small, large = np.argmin(pops), np.argmax(pops)
    tol = 1e-9 * cohort
    # Exactly, for the fractional shares ...
    assert prop.shares.iloc[small] - tol <= sqrt.shares.iloc[small] <= equal.shares.iloc[
        small] + tol
    assert prop.shares.iloc[large] + tol >= sqrt.shares.iloc[large] >= equal.shares.iloc[
        large] - tol
    # ... and within one seat of rounding for the whole seats.
    assert prop.seats.iloc[small] - 1 <= sqrt.seats.iloc[small] <= equal.seats.iloc[small] + 1
    assert prop.seats.iloc[large] + 1 >= sqrt.seats.iloc[large] >= equal.seats.iloc[large] - 1


def test_the_seed_chart_values_are_the_fractional_shares() -> None:
    pops = pd.Series(SEED_POPULATIONS)
    table = allocation_table(SEED_POPULATIONS, 80)
    np.testing.assert_allclose(table[("proportional", "share")], 80 * pops / pops.sum())
    np.testing.assert_allclose(table[("sqrt", "share")],
                               80 * np.sqrt(pops) / np.sqrt(pops).sum())
    # The chart's printed values (one decimal) agree with the formulas.
    chart = {"proportional": [38.5, 23.8, 11.0, 5.0, 1.6], "sqrt": [27.7, 21.8, 14.8, 10.0, 5.7],
             "equal": [16.0] * 5}
    for mode, values in chart.items():
        np.testing.assert_allclose(table[(mode, "share")].round(1), values)


def test_the_seed_table_rural_column_is_corrected() -> None:
    # The seed's table gives 1.4 (proportional) and 6.8 (sqrt) for the smallest stratum;
    # its own chart and the formulas give 1.65 and 5.73 (see docs/sampling.md).
    shares = {m: allocate(SEED_POPULATIONS, 80, mode=m).shares["remote"]
              for m in ("proportional", "sqrt", "equal")}
    assert shares["proportional"] == pytest.approx(80 * 18 / 873)
    assert abs(shares["proportional"] - 1.4) > 0.2
    assert abs(shares["sqrt"] - 6.8) > 1.0
    # "called every ... rounds" under a cap of one is pool / seats per round.
    assert 18 / shares["sqrt"] == pytest.approx(3.14, abs=0.01)


def test_largest_remainder_breaks_ties_by_position() -> None:
    assert largest_remainder(np.array([1.5, 1.5, 1.5, 1.5]), 6).tolist() == [2, 2, 1, 1]


def test_equal_mode_gives_no_seat_to_an_empty_stratum() -> None:
    result = allocate({"a": 10, "b": 0, "c": 10}, 4, mode="equal")
    assert result.seats.tolist() == [2, 0, 2]


def test_neyman_puts_seats_where_sigma_is() -> None:
    pops = {"a": 100, "b": 100}
    result = allocate(pops, 30, mode="neyman", sigma={"a": 1.0, "b": 2.0})
    assert result.seats.tolist() == [10, 20]


def test_refuses_an_unknown_mode() -> None:
    with pytest.raises(InvalidInput, match="mode='random' is not one of"):
        allocate(SEED_POPULATIONS, 80, mode="random")


def test_refuses_neyman_without_sigma() -> None:
    with pytest.raises(InvalidInput, match="neyman' needs a per-stratum sigma"):
        allocate(SEED_POPULATIONS, 80, mode="neyman")


def test_refuses_sigma_missing_a_stratum() -> None:
    with pytest.raises(InvalidInput, match="has no value for strata"):
        allocate({"a": 5, "b": 5}, 4, mode="neyman", sigma={"a": 1.0})


def test_refuses_negative_sigma() -> None:
    with pytest.raises(InvalidInput, match="negative, NaN or infinite"):
        allocate({"a": 5, "b": 5}, 4, mode="neyman", sigma={"a": 1.0, "b": -1.0})


def test_refuses_a_cohort_larger_than_the_population() -> None:
    with pytest.raises(InvalidInput, match="exceeds the 873 clients"):
        allocate(SEED_POPULATIONS, 874)


@pytest.mark.parametrize(("populations", "match"), [
    ({}, "has no strata"),
    ({"a": -1}, "below the limit"),
    ({"a": 0}, "are all zero"),
    ([1, 2], "not a mapping"),
    ({"a": 2.5}, "not a whole number"),
])
def test_refuses_bad_populations(populations: object, match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        allocate(populations, 1)  # type: ignore[arg-type]


def test_refuses_a_zero_cohort() -> None:
    with pytest.raises(InvalidInput, match="cohort=0 is below the limit"):
        allocate(SEED_POPULATIONS, 0)


def test_largest_remainder_refuses_shares_that_do_not_sum_to_the_total() -> None:
    with pytest.raises(InvalidInput, match="are not non-negative numbers summing to total=3"):
        largest_remainder(np.array([1.0, 1.0]), 3)
