"""Tests of spatialdp.privacy.budget: units, the split, release structures, their checks."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq, minimize_scalar

from spatialdp.exceptions import InvalidInput
from spatialdp.privacy.budget import (
    BudgetSplit,
    BudgetSplitWarning,
    Disjoint,
    LineItem,
    Overlapping,
    Single,
    epsilon_to_rho,
    rho_to_epsilon,
    rho_to_epsilon_classic,
)

# -- conversions ----------------------------------------------------------------------


def _cks_epsilon(rho: float, delta: float) -> float:
    """Canonne-Kamath-Steinke 2020 Prop. 12, solved numerically (independent of OpenDP)."""

    def log_delta(eps: float) -> float:
        def f(t: float) -> float:
            a = 1.0 + math.exp(t)
            return (a - 1) * (a * rho - eps) - math.log(a - 1) + a * math.log1p(-1 / a)

        res = minimize_scalar(f, bounds=(-30, 30), method="bounded", options={"xatol": 1e-12})
        return min(float(res.fun), 0.0)

    hi = rho_to_epsilon_classic(rho, delta) + 1
    return float(brentq(lambda e: log_delta(e) - math.log(delta), 0.0, hi, xtol=1e-14))


@pytest.mark.parametrize("rho", [1e-4, 0.01, 0.5, 10.0])
@pytest.mark.parametrize("delta", [1e-3, 1e-9])
def test_rho_to_epsilon_matches_cks_formula_and_beats_classic(rho: float, delta: float) -> None:
    eps = rho_to_epsilon(rho, delta)
    assert eps == pytest.approx(_cks_epsilon(rho, delta), rel=1e-9)
    assert eps < rho_to_epsilon_classic(rho, delta)


@settings(max_examples=25, deadline=None)
@given(st.floats(1e-6, 50.0), st.floats(1e-12, 0.1))
def test_rho_to_epsilon_is_never_above_the_classic_bound(rho: float, delta: float) -> None:
    assert 0.0 <= rho_to_epsilon(rho, delta) < rho_to_epsilon_classic(rho, delta)


def test_conversions_accept_numpy_scalars() -> None:
    assert epsilon_to_rho(np.float32(0.5)) == pytest.approx(0.125)
    assert rho_to_epsilon(np.float64(0.5), np.float64(1e-6)) == rho_to_epsilon(0.5, 1e-6)
    assert rho_to_epsilon(0.0, 1e-6) == 0.0


@pytest.mark.parametrize(
    ("call", "pattern"),
    [
        (lambda: rho_to_epsilon(0.5, 0), r"delta=0 is below the limit > 0; pass a small"),
        (lambda: rho_to_epsilon(0.5, 1.0), r"delta=1.0 is above the limit < 1"),
        (lambda: rho_to_epsilon(-1.0, 1e-6), r"rho=-1.0 is below the limit >= 0"),
        (lambda: rho_to_epsilon(math.nan, 1e-6), r"rho=nan is not finite"),
        (lambda: rho_to_epsilon_classic("0.5", 1e-6), r"rho='0.5' is a string"),
        (lambda: epsilon_to_rho(True), r"epsilon=True is a bool"),
        (lambda: epsilon_to_rho(math.inf), r"epsilon=inf is not finite"),
    ],
)
def test_conversions_refuse_bad_arguments(call: object, pattern: str) -> None:
    with pytest.raises(InvalidInput, match=pattern):
        call()  # type: ignore[operator]


# -- split ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("share", "pattern"),
    [(0.05, "evaluation_share=0.05 is below 10%"), (0.5, "evaluation_share=0.5 is above 40%")],
)
def test_evaluation_share_outside_10_40_warns(share: float, pattern: str) -> None:
    with pytest.warns(BudgetSplitWarning, match=pattern):
        BudgetSplit(evaluation_share=share)


@pytest.mark.parametrize("share", [0.1, 0.3, 0.4, np.float64(0.3)])
def test_evaluation_share_inside_10_40_is_quiet(share: float) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        split = BudgetSplit(evaluation_share=share)
    assert type(split.evaluation_share) is float


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"evaluation_share": 1.5}, r"evaluation_share=1.5 is above the limit <= 1; pass a share"),
        ({"global_share": -0.1}, r"global_share=-0.1 is below the limit >= 0"),
        ({"global_share": math.nan}, r"global_share=nan is not finite"),
        ({"evaluation_share": "0.3"}, r"evaluation_share='0.3' is a string"),
        ({"evaluation_share": True}, r"evaluation_share=True is a bool"),
    ],
)
def test_split_shares_must_be_fractions(kwargs: dict[str, object], pattern: str) -> None:
    with pytest.raises(InvalidInput, match=pattern):
        BudgetSplit(**kwargs)  # type: ignore[arg-type]


def test_allocate_checks_the_budget() -> None:
    assert BudgetSplit().allocate(np.float64(1.0))["training"] == pytest.approx(0.7)
    with pytest.raises(InvalidInput, match=r"epoch_budget=inf is not finite"):
        BudgetSplit().allocate(math.inf)


# -- structures and line items ----------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "pattern"),
    [
        (lambda: Overlapping("grid@v1", parts=3, max_parts_per_client=5),
         "max_parts_per_client=5 exceeds parts=3"),
        (lambda: Disjoint("grid@v1", parts=0), "parts=0 is below the limit >= 1"),
        (lambda: Disjoint("grid@v1", parts=2.5), "parts=2.5 is not a whole number"),
        (lambda: Disjoint("grid@v1", parts=True), "parts=True is a bool"),
        (lambda: Disjoint("", parts=3), "name='' is empty; name the partition"),
        (lambda: Single(None), "name=None is a NoneType, not a string"),
        (lambda: Overlapping("g", 3, 2, calibrated="yes"), "calibrated='yes' is a str, not a bool"),
    ],
)
def test_structures_validate_their_fields(build: object, pattern: str) -> None:
    with pytest.raises(InvalidInput, match=pattern):
        build()  # type: ignore[operator]


def test_structures_store_numpy_counts_as_python_ints() -> None:
    s = Overlapping("h3:res7@v2", parts=np.int64(900), max_parts_per_client=np.int32(3),
                    calibrated=np.bool_(False))
    assert (type(s.parts), type(s.max_parts_per_client), s.multiplier) == (int, int, 3)
    assert s.calibrated is False


@pytest.mark.parametrize("value", ["marketing", 3, None, "Training"])
def test_line_item_parse_refuses_unknown_items(value: object) -> None:
    with pytest.raises(InvalidInput, match=r"line_item=.* is not one of the ledger's line items;"):
        LineItem.parse(value)  # type: ignore[arg-type]
