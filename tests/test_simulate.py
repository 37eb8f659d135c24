"""Tests of the simulation random path (spatialdp.privacy.simulate, spatialdp._random)."""

from __future__ import annotations

import inspect
import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
import scipy.sparse
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from spatialdp._random import as_generator
from spatialdp.exceptions import InvalidInput, SpatialDPError
from spatialdp.privacy import simulate
from spatialdp.privacy.simulate import (
    simulate_discrete_gaussian,
    simulate_discrete_laplace,
    simulate_gaussian,
    simulate_laplace,
)
from tests._timeouts import time_limit as no_hang

SIMULATORS = [simulate_laplace, simulate_gaussian, simulate_discrete_laplace,
              simulate_discrete_gaussian]


# ---------------------------------------------------------------------------
# one strict as_generator
# ---------------------------------------------------------------------------


def test_as_generator_accepts_generators_seeds_and_none() -> None:
    gen = np.random.default_rng(0)
    assert as_generator(gen) is gen
    for seed in (0, 7, np.int64(7), np.uint8(7), 2**70):
        assert isinstance(as_generator(seed), np.random.Generator)
    assert as_generator(np.int32(7)).integers(1000) == as_generator(7).integers(1000)
    assert isinstance(as_generator(None), np.random.Generator)


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        (True, "rng=True is a bool"),
        (np.bool_(True), "is a bool"),
        (3.0, "rng=3.0 is a float"),
        (np.float64(3.0), "is a float64"),
        ("3", "rng='3' is a str"),
        (-1, "rng=-1 is a negative seed"),
        (np.random.RandomState(1), "legacy RandomState"),
        (np.random.SeedSequence(1), "is a SeedSequence"),
        ([1, 2], "is a list"),
    ],
)
def test_as_generator_refuses(bad: Any, match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        as_generator(bad)


def test_one_as_generator() -> None:
    """The private copy in privacy/_noise_input.py is gone; simulate uses spatialdp._random."""
    from spatialdp.privacy import _noise_input

    assert not hasattr(_noise_input, "as_generator")
    assert simulate.as_generator is as_generator


@pytest.mark.parametrize("fn", SIMULATORS)
def test_simulators_take_rng_keyword_only(fn: Any) -> None:
    params = inspect.signature(fn).parameters
    assert params["rng"].kind is inspect.Parameter.KEYWORD_ONLY
    assert "seed" not in params


# ---------------------------------------------------------------------------
# no hangs at extreme scales
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("sigma", [1e-300, 5e-324, 1e-160, 1e15])
def test_discrete_gaussian_extreme_sigma_finishes(sigma: float) -> None:
    """Regression: at sigma = 1e-300, sigma**2 underflowed and every draw was rejected."""
    with no_hang():
        out = simulate_discrete_gaussian([1, 2], sigma, rng=0)
    assert out.dtype == np.int64
    if sigma < 1:
        assert out.tolist() == [1, 2]


@pytest.mark.parametrize("scale", [5e-324, 1e-300, 1e-3, 1e15])
def test_discrete_laplace_extreme_scale_finishes(scale: float) -> None:
    with no_hang():
        sim = simulate_discrete_laplace(np.zeros(1000, dtype=np.int64), scale, rng=1)
        from spatialdp.privacy.release import release_discrete_laplace

        rel = release_discrete_laplace(np.zeros(1000, dtype=np.int64), scale)
    if scale < 1e-2:
        assert not sim.any()
        assert not rel.any()
    else:
        assert np.abs(sim).max() < 60 * scale


# ---------------------------------------------------------------------------
# adversarial inputs: only spatialdp errors, finite results
# ---------------------------------------------------------------------------

finite_floats = st.floats(allow_nan=False, allow_infinity=False)
any_float = st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True)
scalars = st.one_of(
    any_float,
    st.integers(min_value=-(2**80), max_value=2**80),
    st.booleans(),
    st.none(),
    st.text(max_size=4),
    st.sampled_from(["1.0", "nan", "", b"1"]),
    st.complex_numbers(max_magnitude=10),
    any_float.map(np.float64),
    st.floats(width=32).map(np.float32),
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(np.int64),
    st.integers(min_value=0, max_value=255).map(np.uint8),
    st.booleans().map(np.bool_),
    st.decimals(allow_nan=True, places=3),
    st.fractions(max_denominator=100),
)
arrays = st.one_of(
    hnp.arrays(
        st.sampled_from([np.float64, np.float32, np.int64, np.int8, np.uint64, np.bool_,
                         np.complex128, np.str_]),
        hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
    ),
    st.lists(scalars, max_size=4),
    st.lists(st.lists(finite_floats, max_size=3), max_size=3),  # possibly ragged
    st.just(np.array([1, None], dtype=object)),
    st.just(scipy.sparse.csr_array(np.eye(3))),
)
values_strategy = st.one_of(scalars, arrays)
scale_strategy = st.one_of(
    scalars,
    st.floats(min_value=1e-300, max_value=2e15),
    st.sampled_from([5e-324, 1e15, 1e16, 1e308, -1.0, 0.0]),
)
rng_strategy = st.one_of(
    st.none(), st.integers(min_value=-5, max_value=2**64), st.booleans(), st.floats(),
    st.just(np.random.default_rng(0)), st.text(max_size=2),
)


def _assert_finite_like(out: Any, values: Any) -> None:
    arr = np.asarray(out)
    assert np.isfinite(arr.astype(np.float64)).all()
    if isinstance(values, np.ndarray):
        assert arr.shape == values.shape
    if isinstance(out, np.ndarray):
        assert out.dtype in (np.float64, np.int64)


@pytest.mark.parametrize("fn", SIMULATORS)
@settings(max_examples=300, deadline=None)
@given(values=values_strategy, scale=scale_strategy, rng=rng_strategy)
def test_simulators_raise_only_spatialdp_errors(fn: Any, values: Any, scale: Any, rng: Any
                                                ) -> None:
    try:
        with no_hang():
            out = fn(values, scale, rng=rng)
    except SpatialDPError:
        return
    _assert_finite_like(out, values)


def test_accepted_exotic_numbers() -> None:
    assert isinstance(simulate_laplace(Fraction(1, 2), Decimal("0.5"), rng=0), float)
    assert simulate_discrete_laplace(np.int64(3), np.float32(1e-3), rng=0) == 3
    assert simulate_gaussian(np.array(2.0), 1.0, rng=0).shape == ()  # 0-d in, 0-d out
    assert simulate_laplace(np.zeros((0, 3)), 1.0, rng=0).shape == (0, 3)  # empty in, empty out
    assert math.isfinite(simulate_gaussian(1e300, 1e15, rng=0))
