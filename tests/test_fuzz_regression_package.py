"""Every public callable of :mod:`spatialdp.regression`, fuzzed (the contract of ``test_fuzz.py``).

The registry :data:`FUZZ` maps each public callable of ``spatialdp.regression``
(its ``__all__`` and the public methods of its classes) to a hypothesis strategy
of calls mixing valid arguments with junk. Each call must return (and its
result pass its invariants) or raise a :class:`~spatialdp.exceptions.SpatialDPError`,
within the time limit, warning only with spatialdp's own warnings
(:func:`tests.test_fuzz_support.run`; ``FeasibilityWarning`` is spatialdp's own).

:func:`test_every_public_callable_is_fuzzed` fails when a public callable has
neither an entry nor a reasoned place in :data:`SKIP`.
:func:`test_refused_releases_leave_the_ledger_untouched` holds the entry points
that charge a ledger (``transform_clients``, ``fit_iterative``, ``fit_dpsgd``,
``ModulatedRegression.fit``) to "a refusal charges nothing".

Defects found in ``spatialdp/regression`` (its author's files) are not fixed
here: each is listed in :data:`OPEN` with an exact reproduction, pinned by
:func:`test_open_defect_reproduces` with ``xfail(strict=True)`` (the suite turns
red when the owner fixes one: then delete its entry); the fuzz tolerates exactly
those (callable, exception, message) triples meanwhile.

Hunt for new defects with ``SPATIALDP_FUZZ_RANDOM=1 SPATIALDP_FUZZ_SCALE=10``.
"""

from __future__ import annotations

import functools
import math
import numbers
import shutil
import tempfile
import warnings
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spatialdp.exceptions import SpatialDPError
from spatialdp.privacy import ReleaseTarget, Simulation
from spatialdp.regression import (
    ClientReports,
    FeasibilityWarning,
    LatticeGaussianMechanism,
    Modulation,
    RegressionFit,
    clip_rows,
    debiased_covariance,
    debiased_cross_moment,
    fit_dpsgd,
    fit_iterative,
    fit_one_shot,
    modulate,
    optimal_ridge,
    plan_regression,
    project_ball,
    project_psd,
    random_directions,
    reconstruction_bound,
    reconstruction_table,
    resolve_rho,
    rho_for_epsilon,
    transform_clients,
    tune_dpsgd,
    unbiased_gradient,
)
from spatialdp.regression import ModulatedRegression as _MR
from spatialdp.regression import fit_geodataframe as _fit_gdf
from spatialdp.regression import spatial_features as _spatial_features
from tests._timeouts import time_limit
from tests.test_fuzz_support import (
    _CLEAN,
    Call,
    Open,
    arg,
    boxes,
    check_census,
    flag,
    fresh_ledger,
    fuzz_only_spatialdp_errors,
    fuzz_settings,
    ledger_targets,
    maybe,
    mixed,
    mutated,
    number,
    public_callables,
    run,
    strict,
    targets,
    working_directory,
)

PACKAGE = "spatialdp.regression"
ModulatedRegression = _MR
fit_geodataframe = _fit_gdf
spatial_features = _spatial_features

_SKLEARN = "inherited from scikit-learn's BaseEstimator (sklearn's own contract, not spatialdp's)"

#: Public names that are not fuzzed, each with the reason.
SKIP: dict[str, str] = {
    "FeasibilityWarning": "warning class",
    # The reproduction study: each call fits 7 estimators over 47 configurations per seed
    # and budget (seconds); its refusals are tested in tests/test_regression_reproduction.py.
    "compare_estimators": "a study taking seconds per call; refusals tested on their own",
    "load_reproduction_data": "reads statsmodels' data; its one refusal is tested",
    "reproduction_findings": "reads a compare_estimators table; tested on real tables",
    "NotFitted": "exception class",
    # Result records: built by the library and returned; their methods are fuzzed on
    # real instances.
    "ClientReports": "result record (built by transform_clients)",
    "RegressionFit": "result record (built by the fits; .predict is fuzzed)",
    "RegressionPlan": "result record (built by plan_regression; .predicted is fuzzed)",
    "Regularization": "result record (built by the fits' automatic ridge)",
    "LatticeGaussianMechanism.lattice_step": "no argument: called on every mechanism (check)",
    "ClientReports.summary": "no argument: checked on real reports in tests/test_results.py",
    "RegressionFit.summary": "no argument: checked on real fits in tests/test_results.py",
    "RegressionFit.headline": "no argument: checked on real fits in tests/test_fit_uncertainty.py",
    "ModulatedRegression.get_params": _SKLEARN,
    "ModulatedRegression.set_params": _SKLEARN,
    "ModulatedRegression.get_metadata_routing": _SKLEARN,
    "ModulatedRegression.set_score_request": _SKLEARN,
}


def quiet(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with FeasibilityWarning (spatialdp's own) ignored: run() errors on the rest."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FeasibilityWarning)
            return fn(*args, **kwargs)

    return wrapper


def call(label: str, fn: Callable[..., Any], /, *args: Any,
         check: Callable[[Any], None] | None = None, **kwargs: Any) -> Call:
    return Call(label, quiet(fn), args, kwargs, None if check is None else strict(check))


TMP = tempfile.mkdtemp(prefix="spatialdp-fuzz-regression-")


@pytest.fixture(autouse=True, scope="module")
def _in_a_scratch_folder() -> Any:
    with working_directory(TMP):
        yield


def teardown_module() -> None:
    shutil.rmtree(TMP, ignore_errors=True)


# --------------------------------------------------------------------------- open defects


# --------------------------------------------------------------------------- valid inputs

K, D = 200, 3


@functools.cache
def data(k: int = K, d: int = D, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(k, d))
    y = X @ np.linspace(0.5, -0.5, d) + 0.3 * rng.normal(size=k)
    return X, y


MOD = Modulation(alpha=0.2, lam=0.5, omega=1.0, n_directions=1, radius=2.0)


@functools.cache
def reports() -> ClientReports:
    X, y = data()
    return transform_clients(X, y, modulation=MOD, rho=2.0, target=Simulation(rng=0))


@functools.cache
def a_fit() -> RegressionFit:
    return fit_one_shot(reports())


@functools.cache
def a_plan() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FeasibilityWarning)
        return plan_regression(10_000, 3, rho=1.0)


@functools.cache
def fitted_model() -> Any:
    X, y = data()
    return ModulatedRegression(rho=2.0, radius=2.0, target=Simulation(rng=0)).fit(X, y)


def features(d: int = D) -> st.SearchStrategy[Any]:
    X, _ = data(d=d)
    return arg(st.sampled_from([X, X[:20], X.astype(np.float32), X.tolist()]),
               X[:, :1], X[:0], X[0], np.where(np.eye(K, D, dtype=bool), np.nan, X),
               np.full((K, D), 1e308), X.astype(object), [[1.0, "a"]], [[1], [1, 2]],
               pd.DataFrame(X))


def labels() -> st.SearchStrategy[Any]:
    _, y = data()
    return arg(st.sampled_from([y, pd.Series(y), y.astype(np.float32)]),
               y[:5], y[:, None], np.r_[y[:-1], np.nan], y.astype(str), np.full(K, 1e308))


rhos = arg(number(0.05, 5), 1e7, -1.0)
deltas = arg(st.sampled_from([1e-6, 1e-5, 0.01]), 1.0, 0.0, 1.5)
modulations = arg(st.sampled_from([MOD, Modulation(), Modulation(lam=1.0, omega=3.0,
                                                                  n_directions=2)]),
                  Modulation(n_directions=5), {"alpha": 0.1})


@st.composite
def privacy_kwargs(draw: st.DrawFn) -> dict[str, Any]:
    """Either rho, or epsilon and delta (sometimes both, rho with delta, or neither: refused)."""
    kinds = ["rho", "eps"] if _CLEAN[0] else ["rho", "rho", "eps", "both", "neither",
                                               "eps_only", "rho_delta"]
    kind = draw(st.sampled_from(kinds))
    if kind == "rho":
        return {"rho": draw(rhos)}
    if kind == "eps":
        return {"epsilon": draw(rhos), "delta": draw(deltas)}
    if kind == "both":
        return {"rho": draw(rhos), "epsilon": draw(rhos), "delta": draw(deltas)}
    if kind == "eps_only":
        return {"epsilon": draw(rhos)}
    if kind == "rho_delta":
        return {"rho": draw(rhos), "delta": draw(deltas)}
    return {}


def check_fit(d: int = D) -> Callable[[Any], None]:
    def check(fit: RegressionFit) -> None:
        assert fit.coef.shape == (d,)
        assert np.isfinite(fit.coef).all()
        assert math.isfinite(fit.intercept)
        X, _ = data(d=d)
        assert np.isfinite(fit.predict(X[:5])).all()

    return check


# --------------------------------------------------------------------------- strategies


@st.composite
def modulation_calls(draw: st.DrawFn) -> Call:
    def check(m: Modulation) -> None:
        assert 0 < m.sensitivity < math.inf
        assert m.sensitivity <= m.lipschitz_sensitivity + 1e-12
        assert math.isfinite(m.modulation_variance)

    return call("Modulation", Modulation, alpha=draw(arg(number(0, 0.9))),
                lam=draw(arg(number(0, 2))), omega=draw(arg(number(0, 5))),
                n_directions=draw(arg(number(1, 3, integer=True))),
                radius=draw(arg(number(0.1, 5))), check=check)


@st.composite
def lattice_calls(draw: st.DrawFn) -> Call:
    def check(mech: LatticeGaussianMechanism) -> None:
        step = mech.lattice_step()
        assert 0 < step < math.inf
        assert 0 < mech.scale < math.inf

    return call("LatticeGaussianMechanism", LatticeGaussianMechanism, draw(rhos),
                draw(arg(number(0.1, 10))), draw(arg(number(1, 5, integer=True))), check=check)


@st.composite
def lattice_method_calls(draw: st.DrawFn, method: str) -> Call:
    mech = LatticeGaussianMechanism(1.0, 2.0, 3)
    x = draw(arg(st.sampled_from([np.zeros(3), np.ones((4, 3)), [0.5, 0.5, 0.5]]),
                 np.zeros(2), np.full(3, math.nan), np.full(3, 1e308), ["a"] * 3,
                 np.zeros((2, 2)), np.zeros((0, 3))))

    def check(out: np.ndarray) -> None:
        assert out.shape == np.shape(x)
        assert np.isfinite(out).all()

    if method == "release":
        return call("LatticeGaussianMechanism.release", mech.release, x, check=check)
    return call("LatticeGaussianMechanism.simulate", mech.simulate, x,
                rng=draw(arg(st.integers(0, 9))), check=check)


@st.composite
def transform_calls(draw: st.DrawFn, target_strategy: Any = None) -> Call:
    X, y = data()
    rows = draw(st.sampled_from([K, 20]))
    label_bound = draw(maybe(arg(number(0.5, 3))))
    label_rho = draw(maybe(rhos)) if label_bound is not None or draw(st.booleans()) else None
    mod = draw(modulations)

    def check(rep: ClientReports) -> None:
        assert rep.features.shape == (rows, D)
        assert np.isfinite(rep.features).all()
        assert np.isfinite(rep.labels).all()
        assert rep.sigma > 0
        assert rep.rho > 0

    return call("transform_clients", transform_clients,
                draw(arg(st.just(X[:rows]), X[:, :1], np.full((rows, D), np.nan), X.tolist())),
                draw(arg(st.just(y[:rows]), y[:3], y.astype(str)[:rows])),
                modulation=mod,
                target=draw(targets() if target_strategy is None else target_strategy),
                directions=draw(maybe(arg(st.just(np.eye(D)[:1]), np.ones((1, D)),
                                          np.eye(D)[:, :2], np.eye(4)))),
                **draw(privacy_kwargs()), label_bound=label_bound, label_rho=label_rho,
                round_index=draw(maybe(arg(number(0, 5, integer=True)))), check=check)


@st.composite
def server_calls(draw: st.DrawFn, name: str) -> Call:
    rep = draw(arg(st.just(reports()), reports().features, {"features": 1}))
    if name == "debiased_covariance":
        def check(S: np.ndarray) -> None:
            assert S.shape == (D, D)
            assert np.isfinite(S).all()

        return call(name, debiased_covariance, rep, modulation_correction=draw(flag()),
                    second=draw(maybe(arg(st.just(np.eye(D)), np.eye(2), np.full((D, D),
                                                                                math.nan)))),
                    check=check)
    if name == "debiased_cross_moment":
        return call(name, debiased_cross_moment, rep,
                    cross=draw(maybe(arg(st.just(np.ones(D)), np.ones(2), [math.nan] * D))),
                    check=lambda v: None if np.isfinite(v).all() else _fail(v))
    beta = draw(arg(st.just(np.zeros(D)), np.ones(2), np.full(D, math.inf), ["a"] * D))
    return call(name, unbiased_gradient, rep, beta,
                check=lambda g: None if g.shape == (D,) and np.isfinite(g).all() else _fail(g))


def _fail(value: Any) -> None:
    raise AssertionError(f"broken result: {value!r}"[:300])


@st.composite
def one_shot_calls(draw: st.DrawFn) -> Call:
    return call("fit_one_shot", fit_one_shot,
                draw(arg(st.just(reports()), reports().features)),
                ridge=draw(arg(st.sampled_from(["auto", 0.0, 0.1, np.float32(1.0)]), "nope")),
                norm_cap=draw(arg(st.sampled_from(["auto", math.inf, 1.0]), "nope")),
                psd=draw(flag()), fit_intercept=draw(flag()), check=check_fit())


@st.composite
def iterative_calls(draw: st.DrawFn, target_strategy: Any = None) -> Call:
    X, y = data()
    rows = draw(st.sampled_from([K, 30]))
    return call("fit_iterative", fit_iterative,
                draw(arg(st.just(X[:rows]), np.full((rows, D), np.nan))),
                draw(arg(st.just(y[:rows]), y[:3])),
                modulation=draw(modulations),
                target=draw(targets() if target_strategy is None else target_strategy),
                **draw(privacy_kwargs()),
                rounds=draw(arg(number(1, 4, integer=True), 10**6)),
                participation=draw(arg(st.sampled_from(["once", "every"]), "nope")),
                step=draw(arg(number(0.1, 2))),
                ridge=draw(arg(st.sampled_from(["auto", 0.0, 0.5]), "nope")),
                norm_cap=draw(arg(st.sampled_from(["auto", 2.0]), "nope")),
                fit_intercept=draw(flag()), check=check_fit())


@st.composite
def dpsgd_calls(draw: st.DrawFn, target_strategy: Any = None) -> Call:
    X, y = data()
    rows = draw(st.sampled_from([K, 30]))
    return call("fit_dpsgd", fit_dpsgd,
                draw(arg(st.just(X[:rows]), np.full((rows, D), np.nan))),
                draw(arg(st.just(y[:rows]), y[:3])),
                target=draw(targets() if target_strategy is None else target_strategy),
                **draw(privacy_kwargs()),
                noise=draw(arg(st.sampled_from(["local", "central"]), "nope")),
                rounds=draw(arg(number(1, 5, integer=True), 10**6)),
                clip=draw(arg(number(0.1, 3))), step=draw(arg(number(0.05, 1))),
                fit_intercept=draw(flag()), check=check_fit())


@st.composite
def tune_calls(draw: st.DrawFn) -> Call:
    X, y = data()
    factory = draw(arg(st.just(lambda: Simulation(rng=0)), Simulation(rng=0), None,
                       lambda: None, lambda: ReleaseTarget(fresh_ledger(), epoch=0)))

    def check(out: tuple[dict[str, float], RegressionFit]) -> None:
        best, fit = out
        assert set(best) >= {"clip", "step"}
        check_fit()(fit)

    return call("tune_dpsgd", tune_dpsgd, X[:100], y[:100],
                draw(arg(st.just(X[100:]), X[100:, :1])), draw(arg(st.just(y[100:]), y[:3])),
                rho=draw(rhos), noise=draw(arg(st.sampled_from(["local", "central"]))),
                target_factory=factory,
                clips=draw(arg(st.just((0.5, 1.0)), (), (math.nan,), "ab")),
                steps=draw(arg(st.just((0.3,)), (), (-1.0,))),
                rounds=draw(arg(st.just((3,)), (), (0,), (10**6,))), check=check)


@st.composite
def plan_calls(draw: st.DrawFn) -> Call:
    def check(plan: Any) -> None:
        assert len(plan.table) >= 1
        assert math.isfinite(plan.zero_mse)

    return call("plan_regression", plan_regression,
                draw(arg(number(10, 10**6, integer=True), 2**70)),
                draw(arg(number(1, 10, integer=True), 10**6)),
                **draw(privacy_kwargs()), radius=draw(arg(number(0.1, 5))),
                modulation=draw(maybe(modulations)),
                feature_second_moment=draw(maybe(arg(number(0.1, 10)))),
                label_second_moment=draw(arg(number(0.1, 10))),
                r_squared=draw(arg(number(0.05, 0.95), 0.0, 1.0)),
                rounds=draw(arg(number(1, 20, integer=True))),
                participation=draw(arg(st.sampled_from(["once", "every"]), "nope")),
                dpsgd_rounds=draw(arg(number(1, 30, integer=True))),
                dpsgd_clip=draw(arg(number(0.1, 3))), dpsgd_step=draw(arg(number(0.05, 1))),
                margin=draw(arg(number(0, 0.5))), warn=draw(flag()), check=check)


@st.composite
def plan_predicted_calls(draw: st.DrawFn) -> Call:
    plan = a_plan()
    names = list(plan.table.index) if len(plan.table.index) else ["one_shot"]
    return call("RegressionPlan.predicted", plan.predicted,
                draw(arg(st.sampled_from([str(n) for n in names]), "nope", "")),
                check=lambda v: None if math.isfinite(v) and v >= 0 else _fail(v))


@st.composite
def plan_upper_calls(draw: st.DrawFn) -> Call:
    plan = a_plan()
    names = list(plan.table.index) if len(plan.table.index) else ["one_shot"]
    return call("RegressionPlan.upper", plan.upper,
                draw(arg(st.sampled_from([str(n) for n in names]), "nope", "")),
                check=lambda v: None if math.isfinite(v) and v >= 0 else _fail(v))


@st.composite
def fit_predict_calls(draw: st.DrawFn) -> Call:
    fit = a_fit()
    return call("RegressionFit.predict", fit.predict, draw(features()),
                check=lambda p: None if np.isfinite(p).all() else _fail(p))


@st.composite
def fit_interval_calls(draw: st.DrawFn, name: str) -> Call:
    fit = a_fit()

    def check(out: pd.DataFrame) -> None:
        assert list(out.index) == fit.names
        assert out.shape[0] == fit.coef.size + 1

    return call(f"RegressionFit.{name}", getattr(fit, name),
                draw(arg(number(0.0, 1.0, exclude_low=True), 1.0, 0.0, -0.1, "0.05")),
                check=check)


@st.composite
def small_function_calls(draw: st.DrawFn, name: str) -> Call:
    if name == "clip_rows":
        radius = draw(arg(number(0.1, 5)))

        def check(out: np.ndarray) -> None:
            # Decimal and Fraction are numbers to spatialdp's checks (_validation.py)
            assert isinstance(radius, (numbers.Real, Decimal)), f"radius={radius!r} accepted"
            assert not isinstance(radius, (bool, np.bool_)), f"radius={radius!r} accepted"
            rows = np.asarray(out, dtype=float)
            assert np.isfinite(rows).all()
            assert (np.linalg.norm(rows, axis=1) <= float(radius) * (1 + 1e-6)).all()

        return call(name, clip_rows, draw(features()), radius, check=check)
    if name == "modulate":
        X, _ = data()
        n = draw(st.sampled_from([K, 4]))
        return call(name, modulate, draw(arg(st.just(X[:n]), X[:n, :1])),
                    draw(arg(st.just(np.eye(D)[:1]), np.ones((1, D)), np.eye(D)[:2])),
                    draw(modulations),
                    draw(arg(st.just(np.zeros((n, 1))), np.zeros((n, 2)), np.zeros(n),
                             np.full((n, 1), math.nan))),
                    check=lambda g: None if np.isfinite(g).all() else _fail(g))
    if name == "optimal_ridge":
        return call(name, optimal_ridge, draw(arg(number(1, 10, integer=True))),
                    draw(arg(number(0, 5))), draw(arg(number(0, 5))), draw(arg(number(0, 5))),
                    check=lambda r: None if isinstance(r, (float, np.floating))
                    and math.isfinite(r) and r >= 0 else _fail(r))
    if name == "project_ball":
        radius = draw(arg(number(0, 5), math.inf))
        return call(name, project_ball,
                    draw(arg(st.just(np.array([3.0, 4.0])), np.zeros(0), [math.nan, 1.0])),
                    radius,
                    check=lambda b: None if np.isfinite(b).all() and np.linalg.norm(b)
                    <= float(radius) * (1 + 1e-12) else _fail(b))
    if name == "project_psd":
        return call(name, project_psd,
                    draw(arg(st.just(np.array([[1.0, 2.0], [2.0, 1.0]])), np.zeros((2, 3)),
                             np.full((2, 2), math.nan), np.zeros((0, 0)))),
                    draw(arg(number(0, 1))),
                    check=lambda S: None if np.isfinite(S).all()
                    and np.linalg.eigvalsh(S).min() >= -1e-9 else _fail(S))
    if name == "random_directions":
        d = draw(arg(number(1, 5, integer=True), 10**5))
        m = draw(arg(number(1, 3, integer=True)))

        def check(V: np.ndarray) -> None:
            assert V.shape == (int(m), int(d))
            assert np.allclose(V @ V.T, np.eye(int(m)))

        return call(name, random_directions, d, m, rng=draw(arg(st.integers(0, 9))),
                    orthogonal_to=draw(maybe(arg(st.just(np.ones(3)), np.zeros(3), np.ones(2),
                                                 [math.nan] * 3))), check=check)
    if name == "reconstruction_bound":
        return call(name, reconstruction_bound, draw(modulations),
                    sigma=draw(arg(number(0.1, 10))),
                    n_features=draw(arg(number(1, 10, integer=True))),
                    check=lambda b: None if b >= 0 else _fail(b))
    if name == "reconstruction_table":
        return call(name, reconstruction_table, draw(modulations),
                    draw(arg(number(1, 10, integer=True))),
                    draw(arg(st.just((0.5, 1.0)), (), (math.nan,), ("a",), 1.0)),
                    draw(deltas))
    if name == "resolve_rho":
        kwargs = draw(privacy_kwargs())
        return call(name, resolve_rho, **kwargs,
                    check=lambda r: None if 0 < r < math.inf else _fail(r))
    assert name == "rho_for_epsilon"
    return call(name, rho_for_epsilon, draw(rhos), draw(deltas),
                check=lambda r: None if 0 < r < math.inf else _fail(r))


def estimator_kwargs(draw: st.DrawFn) -> dict[str, Any]:
    return {**draw(privacy_kwargs()), "radius": draw(arg(number(0.5, 3))),
            "alpha": draw(arg(number(0, 0.5))), "lam": draw(arg(number(0, 1))),
            "n_directions": draw(arg(number(1, 2, integer=True))),
            "method": draw(arg(st.sampled_from(["one_shot", "iterative"]), "nope")),
            "rounds": draw(arg(number(1, 3, integer=True))),
            "participation": draw(arg(st.sampled_from(["once", "every"]), "nope")),
            "fit_intercept": draw(flag())}


@st.composite
def estimator_calls(draw: st.DrawFn) -> Call:
    kwargs = estimator_kwargs(draw)
    return call("ModulatedRegression", ModulatedRegression, **kwargs,
                target=draw(targets()))


@st.composite
def estimator_fit_calls(draw: st.DrawFn, target_strategy: Any = None) -> Call:
    kwargs = estimator_kwargs(draw)
    target = draw(targets() if target_strategy is None else target_strategy)
    model = ModulatedRegression(**kwargs, target=target)
    X, y = data()
    rows = draw(st.sampled_from([K, 30]))

    def check(out: Any) -> None:
        assert out is model
        assert np.isfinite(out.coef_).all()
        assert np.isfinite(out.predict(X[:5])).all()

    return call("ModulatedRegression.fit", model.fit,
                draw(arg(st.just(X[:rows]), np.full((rows, D), np.nan), X[:rows].tolist())),
                draw(arg(st.just(y[:rows]), y[:3])), check=check)


@st.composite
def estimator_use_calls(draw: st.DrawFn, method: str) -> Call:
    model = draw(st.one_of(st.builds(fitted_model), st.builds(lambda: ModulatedRegression(
        rho=1.0))))
    if method == "predict":
        return call("ModulatedRegression.predict", model.predict, draw(features()),
                    check=lambda p: None if np.isfinite(p).all() else _fail(p))
    return call("ModulatedRegression.score", model.score, draw(features()), draw(labels()),
                sample_weight=draw(maybe(arg(st.just(np.ones(K)), np.ones(3)))),
                check=lambda s: None if math.isfinite(s) else _fail(s))


@functools.cache
def geo_points() -> gpd.GeoDataFrame:
    rng = np.random.default_rng(1)
    n = 120
    return gpd.GeoDataFrame({"speed": rng.normal(size=n), "y": rng.normal(size=n)}, crs=4326,
                            geometry=gpd.points_from_xy(rng.uniform(0.05, 2.95, n),
                                                        rng.uniform(0.05, 0.95, n)))


REGION_FEATURES = pd.DataFrame({"density": [1.0, 2.0, 3.0], "road": [0.5, 0.1, 0.9]},
                               index=pd.Index(["a", "b", "c"], name="region_id"))


@st.composite
def spatial_calls(draw: st.DrawFn, name: str) -> Call:
    pts = draw(arg(mutated(geo_points(), protect=("geometry",)), geo_points().to_crs(3857)))
    kwargs = {
        "partition": draw(arg(st.just(boxes()), REGION_FEATURES)),
        "region_features": draw(arg(mutated(REGION_FEATURES), REGION_FEATURES.iloc[:2])),
        "point_columns": draw(arg(st.sampled_from([(), ("speed",), ["speed"]]), ("nope",),
                                  "speed", ("geometry",))),
        "unassigned": draw(arg(st.sampled_from(["raise", "drop"]))),
    }
    if name == "spatial_features":
        return call(name, spatial_features, pts, **kwargs,
                    check=lambda f: None if np.isfinite(f.to_numpy(dtype=float)).all()
                    else _fail(f))
    estimator = draw(arg(st.builds(lambda: ModulatedRegression(rho=2.0, radius=2.0,
                                                               target=Simulation(rng=0))),
                         "model", None))
    return call(name, fit_geodataframe, pts, estimator, **kwargs,
                label=draw(arg(st.just("y"), "nope", "speed")))


# --------------------------------------------------------------------------- registry


def strategy(factory: Callable[..., st.SearchStrategy[Call]], *args: Any
             ) -> Callable[[], st.SearchStrategy[Call]]:
    return lambda: factory(*args)


#: Public callable -> (strategy of calls, number of examples).
FUZZ: dict[str, tuple[Callable[[], st.SearchStrategy[Call]], int]] = {
    "Modulation": (modulation_calls, 30),
    "LatticeGaussianMechanism": (lattice_calls, 25),
    "LatticeGaussianMechanism.release": (strategy(lattice_method_calls, "release"), 15),
    "LatticeGaussianMechanism.simulate": (strategy(lattice_method_calls, "simulate"), 15),
    "transform_clients": (transform_calls, 30),
    **{name: (strategy(server_calls, name), 15) for name in (
        "debiased_covariance", "debiased_cross_moment", "unbiased_gradient")},
    "fit_one_shot": (one_shot_calls, 20),
    "fit_iterative": (iterative_calls, 20),
    "fit_dpsgd": (dpsgd_calls, 20),
    "tune_dpsgd": (tune_calls, 10),
    "plan_regression": (plan_calls, 20),
    "RegressionPlan.predicted": (plan_predicted_calls, 10),
    "RegressionPlan.upper": (plan_upper_calls, 10),
    "RegressionFit.predict": (fit_predict_calls, 15),
    **{f"RegressionFit.{name}": (strategy(fit_interval_calls, name), 10) for name in (
        "conf_int", "coefficient_table")},
    **{name: (strategy(small_function_calls, name), 20) for name in (
        "clip_rows", "modulate", "optimal_ridge", "project_ball", "project_psd",
        "random_directions", "reconstruction_bound", "reconstruction_table", "resolve_rho",
        "rho_for_epsilon")},
    "ModulatedRegression": (estimator_calls, 15),
    "ModulatedRegression.fit": (estimator_fit_calls, 20),
    "ModulatedRegression.predict": (strategy(estimator_use_calls, "predict"), 15),
    "ModulatedRegression.score": (strategy(estimator_use_calls, "score"), 15),
    "spatial_features": (strategy(spatial_calls, "spatial_features"), 20),
    "fit_geodataframe": (strategy(spatial_calls, "fit_geodataframe"), 15),
}

_VALUES = (ValueError, TypeError, AttributeError, IndexError, ZeroDivisionError,
           RuntimeWarning, np.linalg.LinAlgError)
_SERVER = "spatialdp/regression/server.py"
_MODULATION = "spatialdp/regression/modulation.py"

#: Open defects (spatialdp/regression is its author's; see the module docstring).
OPEN: tuple[Open, ...] = (
)


# --------------------------------------------------------------------------- tests


def test_every_public_callable_is_fuzzed() -> None:
    check_census(public_callables(PACKAGE), FUZZ, SKIP, OPEN)


@pytest.mark.slow  # a long fuzz run (hypothesis, every public callable)
@pytest.mark.parametrize("name", sorted(FUZZ))
def test_only_spatialdp_errors(name: str) -> None:
    fuzz_only_spatialdp_errors(*FUZZ[name], OPEN)


@pytest.mark.parametrize("defect", [
    pytest.param(d, id=f"{d.callable}-{i}",
                 marks=pytest.mark.xfail(strict=True, raises=d.kind, reason=d.reason))
    for i, d in enumerate(OPEN) if d.pinned])
def test_open_defect_reproduces(defect: Open) -> None:
    """Each open defect, on its exact input: XFAIL now; XPASS (a failure) once fixed."""
    one = defect.reproduce()
    if defect.skip is None:
        run(one)
        return
    with time_limit(1):  # a hang: a short alarm instead of the fuzz's time limit
        try:
            one.fn(*one.args, **one.kwargs)
        except SpatialDPError:
            pass


# --------------------------------------------------------------------------- the ledger

EPOCHS = (0, 1, 2)


def fuzz_targets() -> st.SearchStrategy[ReleaseTarget]:
    """A ReleaseTarget on a fresh in-memory ledger (zCDP mostly: these releases are Gaussian)."""
    return ledger_targets(budgets=(0.05, 1.0, 50.0), accountings=("zcdp", "zcdp", "pure"),
                          items=(None, None, "training", "evaluation.global", "marketing"),
                          epochs=EPOCHS)


RELEASES: dict[str, Callable[..., st.SearchStrategy[Call]]] = {
    "transform_clients": transform_calls,
    "fit_iterative": iterative_calls,
    "fit_dpsgd": dpsgd_calls,
    "ModulatedRegression.fit": estimator_fit_calls,
}


def _target_of(one: Call) -> ReleaseTarget:
    if "target" in one.kwargs:
        return one.kwargs["target"]  # type: ignore[no-any-return]
    return one.fn.__wrapped__.__self__.target  # type: ignore[attr-defined,no-any-return]


@pytest.mark.parametrize("name", sorted(RELEASES))
def test_refused_releases_leave_the_ledger_untouched(name: str) -> None:
    """A refused release charges nothing; a release that returns charged something."""

    @fuzz_settings(25)
    @given(mixed(RELEASES[name](fuzz_targets())))
    def fuzz(one: Call) -> None:
        target = _target_of(one)
        ledger = target.ledger
        if any(d.skip is not None and d.callable == one.name and d.skip(one) for d in OPEN):
            return
        try:
            result, refusal = run(one)
        except Exception as err:
            if not any(d.matches(one.name, err) for d in OPEN):
                raise
            refusal = err
        if refusal is not None:
            assert all(ledger.spent(e) == 0 for e in EPOCHS), "a refusal was charged"
            assert len(ledger.audit()) == 0, "a refusal left an audit row"
            return
        assert len(ledger.audit()) >= 1, "a release charged nothing"
        assert ledger.spent(target.epoch) > 0
        if name == "transform_clients" and len(ledger.audit()):
            kw = one.kwargs
            rho = resolve_rho(kw.get("rho"), kw.get("epsilon"), kw.get("delta"))
            if kw.get("label_bound") is not None:
                rho += resolve_rho(kw["label_rho"])
            assert len(ledger.audit()) == 1, "one release, one charge"
            assert ledger.spent(target.epoch) == pytest.approx(rho, rel=1e-9)
        assert result is not None

    fuzz()



def test_tiny_epsilon_is_refused_at_once() -> None:
    """rho_for_epsilon(1e-300, 1e-6) never returned (found here, fixed by 342fcc2)."""
    from spatialdp.exceptions import InvalidInput

    with time_limit(2), pytest.raises(InvalidInput, match="epsilon"):
        rho_for_epsilon(1e-300, 1e-6)


def test_subnormal_delta_returns() -> None:
    """rho_for_epsilon(0.5, 5e-324) never returned (found here, fixed by 61cd056)."""
    with time_limit(5):
        rho = rho_for_epsilon(0.5, 5e-324)
    assert 0 < rho < 0.5
