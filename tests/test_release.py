"""Tests of the release random path (spatialdp.privacy.release) under adversarial input.

OpenDP's float release is slow: inputs here are kept to a few entries.
"""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import pytest
import scipy.sparse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import spatialdp.privacy
from spatialdp.exceptions import InvalidInput, SpatialDPError
from spatialdp.privacy import release
from spatialdp.privacy.noise import GaussianMechanism, LaplaceMechanism
from spatialdp.privacy.release import (
    release_discrete_gaussian,
    release_discrete_laplace,
    release_gaussian,
    release_laplace,
)

RELEASERS = [release_laplace, release_gaussian, release_discrete_laplace,
             release_discrete_gaussian]

any_float = st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True)
scalars = st.one_of(
    any_float,
    st.integers(min_value=-(2**80), max_value=2**80),
    st.booleans(),
    st.none(),
    st.sampled_from(["1.0", "", b"1"]),
    st.complex_numbers(max_magnitude=10),
    st.floats(width=32).map(np.float32),
    st.integers(min_value=-(2**63), max_value=2**63 - 1).map(np.int64),
    st.booleans().map(np.bool_),
    st.decimals(allow_nan=True, places=2),
    st.fractions(max_denominator=10),
)
small_arrays = st.one_of(
    hnp.arrays(
        st.sampled_from([np.float64, np.int64, np.uint64, np.bool_, np.complex128, np.str_]),
        hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3),
    ),
    st.lists(scalars, max_size=3),
    st.lists(st.lists(st.floats(allow_nan=False), max_size=2), max_size=2),
    st.just(np.array([1.0, None], dtype=object)),
    st.just(scipy.sparse.csr_array(np.eye(2))),
)
scale_strategy = st.one_of(
    scalars,
    st.floats(min_value=1e-300, max_value=2e15),
    st.sampled_from([5e-324, 1e15, 1e16, -1.0, 0.0]),
)


def _assert_finite_like(out: Any, values: Any) -> None:
    arr = np.asarray(out, dtype=np.float64)
    assert np.isfinite(arr).all()
    if isinstance(values, np.ndarray):
        assert arr.shape == values.shape


@pytest.mark.parametrize("fn", RELEASERS)
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=st.one_of(scalars, small_arrays), scale=scale_strategy)
def test_releasers_raise_only_spatialdp_errors(fn: Any, values: Any, scale: Any) -> None:
    try:
        out = fn(values, scale)
    except SpatialDPError:
        return
    _assert_finite_like(out, values)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    budget=st.one_of(scalars, st.floats(min_value=1e-12, max_value=1e6)),
    sensitivity=st.one_of(scalars, st.floats(min_value=1e-300, max_value=1e300)),
    discrete=st.one_of(st.booleans(), st.integers(0, 1), st.none()),
    values=st.one_of(scalars, small_arrays),
)
def test_mechanisms_raise_only_spatialdp_errors(budget: Any, sensitivity: Any, discrete: Any,
                                                values: Any) -> None:
    for cls in (LaplaceMechanism, GaussianMechanism):
        try:
            mech = cls(budget, sensitivity, discrete)
        except SpatialDPError:
            continue
        assert 0 < mech.scale <= 1e15
        for path in ("release", "simulate"):
            try:
                out = mech.release(values) if path == "release" else mech.simulate(values, rng=0)
            except SpatialDPError:
                continue
            _assert_finite_like(out, values)


@pytest.mark.parametrize("fn", RELEASERS)
def test_releasers_refuse_seeds_and_bad_values(fn: Any) -> None:
    params = inspect.signature(fn).parameters
    assert list(params) == [next(iter(params)), "sigma" if "gaussian" in fn.__name__ else "scale"]
    with pytest.raises(TypeError):
        fn([1], 1.0, rng=0)
    with pytest.raises(InvalidInput, match="is a bool"):
        fn(True, 1.0)
    with pytest.raises(InvalidInput, match="is a string"):
        fn("12", 1.0)
    with pytest.raises(InvalidInput, match="dtype object"):
        fn(np.array([1, None], dtype=object), 1.0)
    with pytest.raises(InvalidInput, match="ragged"):
        fn([[1], [2, 3]], 1.0)
    with pytest.raises(InvalidInput, match="complex"):
        fn(np.array([1j]), 1.0)


def test_release_limits() -> None:
    with pytest.raises(InvalidInput, match=r"values must be at most 1e\+300 in magnitude"):
        release_laplace([1e301], 1.0)
    with pytest.raises(InvalidInput, match=r"sigma=1e\+16 is above the limit <= 1e\+15"):
        release_gaussian([0.0], 1e16)
    assert release_discrete_laplace(np.zeros((0, 2), dtype=np.int64), 1.0).shape == (0, 2)
    out = release_discrete_gaussian(np.array(3), 1e-300)  # 0-d in, 0-d out, no noise
    assert isinstance(out, np.ndarray)
    assert out.shape == ()
    assert int(out) == 3


def test_release_module_is_the_home_of_the_release_functions() -> None:
    for name in release.__all__:
        obj = getattr(spatialdp.privacy, name)
        assert obj is getattr(release, name)
        assert obj.__module__ == "spatialdp.privacy.release"
