"""The modulated-learning comparison on real data, every row one client (reusable core).

``benchmarks/reproduce_modulated.py`` runs it in full (three targets, five budgets,
20 seeds) and writes the figures and tables of ``docs/modulated.md``; the notebook
``notebooks/modulated_regression.ipynb`` runs a reduced version. Both call
:func:`compare_estimators` and :func:`reproduction_findings`.

Per seed: a random 60/20/20 split into train / validation / test; features and label
standardised with the TRAIN split's statistics (taken as public, for every estimator
alike). Each train row is one client with one sample. Hyper-parameters are chosen on the
validation split, never the test split; the chosen configuration is refitted with fresh
noise (a lucky validation draw is not carried to the test split) and scored on test. The
privacy cost of tuning is not charged, for any estimator: every fit is a seeded
``Simulation``.

Estimators (test MSE on the standardised label, so predicting the mean scores about 1),
with what each protects (:data:`PROTECTS`): ``zero`` (predict the train mean), ``ols``
(non-private least squares), ``nss`` (noisy sufficient statistics: the one-shot estimator
with ``lambda = 0``) and ``one_shot`` (modulated, ``lambda = 1, omega = 1``), which protect
the features only (the label is sent in the clear, as in the paper); their label-private
variants ``nss_label_private`` and ``one_shot_label_private``, which clip the label to
``[-B, B]`` and noise it too, at the SAME total rho (split by
:func:`label_budget_split`); ``iterative`` (modulated, disjoint round groups; features
only); ``dpsgd_local`` (DP-SGD FedAvg, each client noises its clipped gradient: features
AND label) and ``dpsgd_central`` (noise on the average: a REFERENCE with a trusted
aggregator).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from spatialdp._validation import check_finite_array, check_integer, check_positive, fail
from spatialdp.privacy import Simulation
from spatialdp.privacy.pipeline import exact_total
from spatialdp.regression.accounting import rho_for_epsilon
from spatialdp.regression.client import transform_clients
from spatialdp.regression.dpsgd import fit_dpsgd
from spatialdp.regression.iterative import fit_iterative
from spatialdp.regression.lattice_gaussian import headroom_sigma
from spatialdp.regression.modulation import Modulation, clip_rows
from spatialdp.regression.oneshot import fit_one_shot
from spatialdp.regression.planner import plan_regression
from spatialdp.regression.regularization import noise_variances

__all__ = [
    "EPSILONS",
    "ESTIMATORS",
    "LABEL_PRIVATE",
    "LABEL_PUBLIC",
    "LOCAL_ESTIMATORS",
    "PROTECTS",
    "REPRODUCTION_DATASETS",
    "compare_estimators",
    "label_budget_split",
    "load_reproduction_data",
    "reproduction_findings",
    "standardised_split",
]

#: The per-client budgets of the full reproduction (delta = :data:`DELTA`).
EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)
DELTA = 1e-6
RADII = (1.0, 2.0, 4.0)
#: Label clipping bounds ``B`` tried (on the standardised label) by the label-private fits.
LABEL_BOUNDS = (1.0, 2.0, 4.0)
ITER_ROUNDS = (5, 10)
DPSGD_CLIPS = (0.3, 1.0, 3.0)
DPSGD_STEPS = (0.1, 0.3, 1.0)
DPSGD_ROUNDS = (5, 20)
PLAN_RADIUS = 2.0
#: The R^2 assumed (public, no data) when splitting rho between features and labels.
SPLIT_R_SQUARED = 0.3
#: Below this OLS R^2 (train split, non-private) a target has little to learn.
LEARNABLE_R2 = 0.1
#: Every estimator compared, in table order.
ESTIMATORS = ("zero", "ols", "nss", "one_shot", "iterative", "nss_label_private",
              "one_shot_label_private", "dpsgd_local", "dpsgd_central")
#: What each estimator protects with differential privacy.
PROTECTS = {
    "zero": "nothing released (train mean of y)",
    "ols": "nothing (non-private)",
    "nss": "x only (y public)",
    "one_shot": "x only (y public)",
    "iterative": "x only (y public)",
    "nss_label_private": "x and y",
    "one_shot_label_private": "x and y",
    "dpsgd_local": "x and y",
    "dpsgd_central": "x and y (trusted aggregator)",
}
#: The estimators whose noise is added on the device (local differential privacy).
LOCAL_ESTIMATORS = ("nss", "one_shot", "iterative", "nss_label_private",
                    "one_shot_label_private", "dpsgd_local")
#: Local-DP estimators that protect the features only (the label is sent in the clear).
LABEL_PUBLIC = ("nss", "one_shot", "iterative")
#: Local-DP estimators that protect features and label: compare these with each other.
LABEL_PRIVATE = ("nss_label_private", "one_shot_label_private", "dpsgd_local")
#: The data sets :func:`load_reproduction_data` reads (statsmodels; data set and target).
REPRODUCTION_DATASETS = ("fair_affairs", "fair_yrs_married", "modechoice")
_FAIR_TARGETS = {"fair_affairs": "affairs", "fair_yrs_married": "yrs_married"}

Split = dict[str, tuple[np.ndarray, np.ndarray]]
Fitter = Callable[[dict[str, Any], int], Any]


def load_reproduction_data(name: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Return features, label and feature names of a data set of the reproduction.

    ``fair_affairs`` and ``fair_yrs_married`` are Fair's affairs data (6,366 rows) with
    target ``affairs`` (little to learn: OLS R^2 about 0.05) or ``yrs_married`` (OLS R^2
    about 0.8); the features are the other 8 columns. ``modechoice`` is travel mode choice
    (840 rows, 210 travellers x 4 modes; target ``invt``, the in-vehicle time; features
    ``ttme, invc, gc, hinc, psize`` and three mode dummies). Both ship with statsmodels
    (read offline; install it with ``pip install 'spatialdp[notebooks]'``).

    Parameters
    ----------
    name : {"fair_affairs", "fair_yrs_married", "modechoice"}
        The data set and target.

    Returns
    -------
    tuple of (ndarray, ndarray, list of str)
        Features ``(n, d)``, label ``(n,)`` and the ``d`` feature names.

    Examples
    --------
    >>> X, y, names = load_reproduction_data("modechoice")
    >>> X.shape, names[-1]
    ((840, 8), 'mode_bus')
    >>> X, y, names = load_reproduction_data("fair_yrs_married")
    >>> X.shape, "affairs" in names, "yrs_married" in names
    ((6366, 8), True, False)
    """
    if name not in REPRODUCTION_DATASETS:
        raise fail("name", name, "is not a data set of the reproduction",
                   f"pass one of {list(REPRODUCTION_DATASETS)}")
    import statsmodels.api as sm

    if name in _FAIR_TARGETS:
        df = sm.datasets.fair.load_pandas().data
        target = _FAIR_TARGETS[name]
        cols = [c for c in df.columns if c != target]
        return df[cols].to_numpy(float), df[target].to_numpy(float), cols
    df = sm.datasets.modechoice.load_pandas().data
    cols = ["ttme", "invc", "gc", "hinc", "psize"]
    dummies = (df["mode"].to_numpy()[:, None] == np.array([1, 2, 3])).astype(float)
    X = np.column_stack([df[cols].to_numpy(float), dummies])
    return X, df["invt"].to_numpy(float), [*cols, "mode_air", "mode_train", "mode_bus"]


def standardised_split(X: np.ndarray, y: np.ndarray, seed: int) -> Split:
    """Split 60/20/20 into train / val / test, standardised with the train statistics.

    Parameters
    ----------
    X, y : ndarray
        Features ``(n, d)`` and label ``(n,)``.
    seed : int
        Seed of the permutation.

    Returns
    -------
    dict
        ``{"train": (X, y), "val": (X, y), "test": (X, y)}``.

    Examples
    --------
    >>> X = np.arange(20.0).reshape(10, 2); y = np.arange(10.0)
    >>> parts = standardised_split(X, y, 0)
    >>> [len(parts[k][1]) for k in ("train", "val", "test")]
    [6, 2, 2]
    >>> bool(np.allclose(parts["train"][0].mean(0), 0))
    True
    """
    perm = np.random.default_rng(seed).permutation(len(y))
    a, b = int(0.6 * len(y)), int(0.8 * len(y))
    parts = {"train": perm[:a], "val": perm[a:b], "test": perm[b:]}
    mu, sd = X[parts["train"]].mean(0), X[parts["train"]].std(0)
    sd[sd == 0] = 1.0
    ym, ys = y[parts["train"]].mean(), y[parts["train"]].std()
    return {k: ((X[i] - mu) / sd, (y[i] - ym) / ys) for k, i in parts.items()}


def _mse(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean((pred - y) ** 2))


def _tune(data: Split, grid: Sequence[dict[str, Any]], fitter: Fitter,
          seed: int) -> tuple[float, dict[str, Any]]:
    """Choose on validation, refit with fresh noise, return (test MSE, chosen params).

    A fit trained on features clipped at radius ``R`` predicts from features clipped
    at ``R`` too (the device's own transform): it never saw, and cannot extrapolate
    to, longer feature vectors.
    """
    Xv, yv = data["val"]
    scores = [_mse(fitter(params, 10_000 * seed + j).predict(_as_trained(Xv, params)), yv)
              for j, params in enumerate(grid)]
    best = grid[int(np.nanargmin(np.where(np.isfinite(scores), scores, np.inf)))]
    final = fitter(best, 10_000 * seed + 9_999)
    Xt, yt = data["test"]
    return _mse(final.predict(_as_trained(Xt, best)), yt), best


def _as_trained(X: np.ndarray, params: dict[str, Any]) -> np.ndarray:
    """Return ``X`` clipped as the fit's training features were (rows at norm ``radius``)."""
    return clip_rows(X, params["radius"]) if "radius" in params else X


def label_budget_split(rho: float, *, n_clients: int, n_features: int, modulation: Modulation,
                       label_bound: float, r_squared: float = SPLIT_R_SQUARED,
                       ) -> tuple[float, float]:
    """Return ``(feature rho, label rho)`` summing to ``rho``: the split the noise model favours.

    Minimises the first-order noise per coefficient of the moment solve,
    ``N = v_b + v_S B2`` (:func:`~spatialdp.regression.regularization.noise_variances`,
    with the label-noise variance ``tau^2 = (2 B)^2 / (2 rho_y)`` in ``v_b``), over feature
    shares of 1% to 99%. Only public quantities enter: ``K``, ``d``, the modulation, ``B``
    and assumptions in place of data: standardised features clipped at ``R``
    (``s = min(R^2, d) / d``), a label second moment ``min(1, B^2)`` and ``r_squared``
    (``B2 = r_squared E y^2 / s``).

    Parameters
    ----------
    rho : float
        The total zCDP budget of each client.
    n_clients, n_features : int
        ``K`` and ``d``.
    modulation : Modulation
        Of the feature release (its sensitivity sets the feature noise).
    label_bound : float
        ``B``: labels are clipped to ``[-B, B]`` (sensitivity ``2 B``).
    r_squared : float, default :data:`SPLIT_R_SQUARED`
        The assumed share of the label variance a linear model explains.

    Returns
    -------
    tuple of float
        ``(rho_x, rho_y)``.

    Examples
    --------
    >>> from spatialdp.privacy.pipeline import exact_total
    >>> rx, ry = label_budget_split(0.5, n_clients=3819, n_features=8,
    ...                             modulation=Modulation(lam=0.0, radius=2.0), label_bound=2.0)
    >>> exact_total([rx, ry]) <= 0.5, round(rx + ry, 12), 0.0 < ry < rx
    (True, 0.5, True)
    """
    R, d = modulation.radius, n_features
    s = min(R * R, float(d)) / d
    y2 = min(1.0, label_bound**2)
    b2 = r_squared * y2 / s
    shares = np.linspace(0.01, 0.99, 99)
    noise = []
    for f in shares:
        tau = headroom_sigma(2.0 * label_bound, (1.0 - f) * rho)
        v_S, v_b = noise_variances(n_clients, d, sigma=headroom_sigma(modulation.sensitivity,
                                                                      f * rho),
                                   alpha=modulation.alpha, lam=modulation.lam,
                                   feature_scale=s, label_second_moment=y2, label_sigma=tau)
        noise.append(v_b + v_S * b2)
    rho_x = float(shares[int(np.argmin(noise))]) * rho
    rho_y = rho - rho_x
    while exact_total([rho_x, rho_y]) > rho:  # the charge never exceeds the total
        rho_y = float(np.nextafter(rho_y, 0.0))
    return rho_x, rho_y


def _one_shot(X: np.ndarray, y: np.ndarray, rho: float, lam: float) -> Fitter:
    def fit(p: dict[str, Any], s: int) -> Any:
        mod = Modulation(lam=lam, omega=1.0, radius=p["radius"])
        rep = transform_clients(X, y, modulation=mod, rho=rho, target=Simulation(rng=s))
        return fit_one_shot(rep)
    return fit


def _one_shot_label_private(X: np.ndarray, y: np.ndarray, rho: float, lam: float) -> Fitter:
    """Features and labels noised, at the same total ``rho`` (split by the noise model).

    The label mean is public in this study (the standardisation uses it), so the fit
    uses it (``fit_intercept=False`` on the standardised split) instead of estimating
    it from the noised labels, whose mean alone has variance ``tau^2 / K``.
    """
    def fit(p: dict[str, Any], s: int) -> Any:
        mod = Modulation(lam=lam, omega=1.0, radius=p["radius"])
        rho_x, rho_y = label_budget_split(rho, n_clients=len(y), n_features=X.shape[1],
                                          modulation=mod, label_bound=p["label_bound"])
        rep = transform_clients(X, y, modulation=mod, rho=rho_x, label_bound=p["label_bound"],
                                label_rho=rho_y, target=Simulation(rng=s))
        return fit_one_shot(rep, fit_intercept=False)
    return fit


def _iterative(X: np.ndarray, y: np.ndarray, rho: float) -> Fitter:
    def fit(p: dict[str, Any], s: int) -> Any:
        mod = Modulation(lam=1.0, omega=1.0, radius=p["radius"])
        return fit_iterative(X, y, modulation=mod, rho=rho, rounds=p["rounds"],
                             participation="once", target=Simulation(rng=s))
    return fit


def _dpsgd(X: np.ndarray, y: np.ndarray, rho: float, noise: str) -> Fitter:
    def fit(p: dict[str, Any], s: int) -> Any:
        return fit_dpsgd(X, y, rho=rho, noise=noise, target=Simulation(rng=s), **p)
    return fit


def _run_seed(data: Split, epsilon: float, seed: int) -> dict[str, tuple[float, dict[str, Any]]]:
    """Return ``{estimator: (test MSE, chosen params)}`` for one split and budget."""
    X, y = data["train"]
    Xt, yt = data["test"]
    rho = rho_for_epsilon(epsilon, DELTA)
    out: dict[str, tuple[float, dict[str, Any]]] = {}
    out["zero"] = (_mse(np.full_like(yt, y.mean()), yt), {})
    w = np.linalg.lstsq(np.column_stack([X, np.ones(len(y))]), y, rcond=None)[0]
    out["ols"] = (_mse(np.column_stack([Xt, np.ones(len(yt))]) @ w, yt), {})
    radii = [{"radius": r} for r in RADII]
    out["nss"] = _tune(data, radii, _one_shot(X, y, rho, 0.0), seed)
    out["one_shot"] = _tune(data, radii, _one_shot(X, y, rho, 1.0), seed)
    out["iterative"] = _tune(data, [{"radius": r, "rounds": t} for r in RADII
                                    for t in ITER_ROUNDS], _iterative(X, y, rho), seed)
    bounded = [{"radius": r, "label_bound": b} for r in RADII for b in LABEL_BOUNDS]
    for name, lam in (("nss", 0.0), ("one_shot", 1.0)):
        out[f"{name}_label_private"] = _tune(data, bounded,
                                             _one_shot_label_private(X, y, rho, lam), seed)
    grid = [{"clip": c, "step": st, "rounds": t} for c in DPSGD_CLIPS for st in DPSGD_STEPS
            for t in DPSGD_ROUNDS]
    for noise in ("local", "central"):
        out[f"dpsgd_{noise}"] = _tune(data, grid, _dpsgd(X, y, rho, noise), seed)
    return {est: out[est] for est in ESTIMATORS}


def _ols_r2(X: np.ndarray, y: np.ndarray) -> float:
    """In-sample R^2 of non-private least squares with an intercept."""
    Z = np.column_stack([X, np.ones(len(y))])
    return float(1 - np.var(y - Z @ np.linalg.lstsq(Z, y, rcond=None)[0]) / np.var(y))


def _planner_row(X: np.ndarray, y: np.ndarray, epsilon: float) -> dict[str, float]:
    """Return the planner's predicted test MSE per estimator (standardised label).

    The planner does not model label noise: NaN for the label-private estimators.
    """
    r2 = _ols_r2(X, y)
    ex2 = float(np.mean(np.sum(clip_rows(X, PLAN_RADIUS) ** 2, axis=1)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = plan_regression(len(y), X.shape[1], epsilon=epsilon, delta=DELTA,
                               modulation=Modulation(lam=1.0, omega=1.0, radius=PLAN_RADIUS),
                               feature_second_moment=ex2, label_second_moment=1.0,
                               r_squared=float(min(max(r2, 1e-3), 0.999)), rounds=10,
                               dpsgd_rounds=20, dpsgd_clip=1.0, dpsgd_step=0.3)
    return {e: math.nan if e.endswith("_label_private")
            else plan.predicted(e) for e in ESTIMATORS}


def _per_seed(datasets: Mapping[str, tuple[np.ndarray, np.ndarray]], seeds: int,
              epsilons: Sequence[float], progress: bool) -> pd.DataFrame:
    rows = []
    for name, (X_all, y_all) in datasets.items():
        splits = [standardised_split(X_all, y_all, s) for s in range(seeds)]
        r2 = [_ols_r2(*split["train"]) for split in splits]
        for eps in epsilons:
            t0 = time.perf_counter()
            plan = _planner_row(*splits[0]["train"], eps)
            for s in range(seeds):
                for est, (mse, params) in _run_seed(splits[s], eps, s).items():
                    rows.append({"dataset": name, "n_clients": len(splits[s]["train"][1]),
                                 "ols_r2": r2[s], "epsilon": eps, "seed": s,
                                 "estimator": est, "protects": PROTECTS[est], "mse": mse,
                                 "planner": plan[est], "params": str(params)})
            if progress:
                print(f"  {name} epsilon={eps}: {time.perf_counter() - t0:.1f} s", flush=True)
    return pd.DataFrame(rows)


def _summarise(per_seed: pd.DataFrame) -> pd.DataFrame:
    """Mean, SE over seeds, planner prediction and the most chosen parameters per cell."""
    keys = ["dataset", "n_clients", "epsilon", "estimator", "protects"]
    g = per_seed.groupby(keys, sort=False)
    table = g.agg(mse=("mse", "mean"), se=("mse", "sem"), planner=("planner", "first"),
                  seeds=("seed", "nunique"),
                  typical_params=("params", lambda p: p.mode().iloc[0])).reset_index()
    r2 = per_seed.groupby("dataset", sort=False)["ols_r2"].mean()
    table.insert(2, "ols_r2", table["dataset"].map(r2))
    return table


#: Fewest rows of a data set: a 60/20/20 split leaves at least 5 rows to test on.
MIN_ROWS = 25


def _checked(name: Any, pair: Any) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(X, y)`` of a data set given by the caller, checked."""
    if not isinstance(pair, tuple) or len(pair) != 2:
        raise fail(f"datasets[{name!r}]", pair, "is not a pair (X, y)",
                   "map each name to (features of shape (n, d), labels of shape (n,))")
    X = check_finite_array(pair[0], f"datasets[{name!r}] X", ndim=(2,))
    y = check_finite_array(pair[1], f"datasets[{name!r}] y")
    if len(y) != len(X) or len(y) < MIN_ROWS:
        raise fail(f"datasets[{name!r}]", f"{len(X)} feature rows, {len(y)} labels",
                   f"do not match or are fewer than {MIN_ROWS}",
                   f"give one label per feature row, at least {MIN_ROWS} rows")
    return X, y


def compare_estimators(datasets: Sequence[str] | Mapping[str, tuple[np.ndarray, np.ndarray]],
                       *, seeds: int = 20, epsilons: Sequence[float] = EPSILONS,
                       progress: bool = False) -> pd.DataFrame:
    """Compare every estimator on real data, every row one client (a seeded simulation).

    Parameters
    ----------
    datasets : sequence of str, or mapping of name to (X, y)
        Names of :data:`REPRODUCTION_DATASETS` (read with :func:`load_reproduction_data`),
        or your own features and labels by name.
    seeds : int, default 20
        Number of random splits (at least 2: the table gives standard errors).
    epsilons : sequence of float, default :data:`EPSILONS`
        Per-client budgets; delta is 1e-6, converted exactly to zCDP rho.
    progress : bool, default False
        Print the time each (data set, epsilon) took.

    Returns
    -------
    DataFrame
        One row per (dataset, epsilon, estimator): ``n_clients``, ``ols_r2`` (in-sample
        R^2 of non-private least squares on the standardised train split, mean over the
        seeds: how much there is to learn), ``protects`` (:data:`PROTECTS`: what the
        estimator keeps private), ``mse`` (mean test MSE on the standardised label),
        ``se`` (its standard error over the seeds), ``planner``
        (:func:`~spatialdp.regression.plan_regression`'s prediction; NaN for the
        label-private estimators, which it does not model), ``seeds`` and
        ``typical_params`` (the configuration chosen most often). The per-seed rows are
        in ``.attrs["per_seed"]`` (for paired comparisons).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 3)); y = X @ [1.0, -0.5, 0.2] + rng.normal(size=300)
    >>> table = compare_estimators({"toy": (X, y)}, seeds=2, epsilons=[8.0])
    >>> list(table["estimator"]) == list(ESTIMATORS)
    True
    >>> mse = table.set_index("estimator")["mse"]
    >>> bool(mse["ols"] < mse["zero"])   # least squares beats predicting the mean
    True
    """
    seeds = check_integer(seeds, "seeds", low=2,
                          fix="pass at least 2 seeds (the table gives standard errors)")
    epsilons = [check_positive(e, "epsilons") for e in epsilons]
    if not epsilons:
        raise fail("epsilons", epsilons, "is empty", "pass at least one per-client epsilon")
    if isinstance(datasets, Mapping):
        data = {str(name): _checked(name, pair) for name, pair in datasets.items()}
    else:
        data = {name: load_reproduction_data(name)[:2] for name in datasets}
    per_seed = _per_seed(data, seeds, epsilons, progress)
    table = _summarise(per_seed)
    table.attrs["per_seed"] = per_seed
    return table


def _paired(per_seed: pd.DataFrame, eps: float, a: str, b: str) -> tuple[float, float]:
    """Mean and SE of the per-seed difference MSE(a) - MSE(b) (same splits, paired)."""
    t = per_seed[per_seed["epsilon"] == eps].pivot(index="seed", columns="estimator",
                                                    values="mse")
    diff = t[a] - t[b]
    return float(diff.mean()), float(diff.std(ddof=1) / math.sqrt(len(diff)))


def _verdict(mean: float, se: float) -> str:
    """'better' / 'worse' / 'tie' for a paired difference (first minus second), at 2 SE."""
    if mean < -2 * se:
        return "better"
    if mean > 2 * se:
        return "worse"
    return "tie"


def _gain_text(t: pd.DataFrame, e: float, group: Sequence[str]) -> tuple[bool, str]:
    """Whether some estimator of ``group`` beats the mean at ``e``, and the best gain."""
    gains = {b: _paired(t, e, b, "zero") for b in group}
    beats = any(_verdict(*g) == "better" for g in gains.values())
    best, (m, se) = min(gains.items(), key=lambda kv: kv[1][0])
    zero_mse = float(t[(t["estimator"] == "zero") & (t["epsilon"] == e)]["mse"].mean())
    return beats, f"{e:g}: {best} {-m:+.3f} +/- {se:.3f} ({-m / zero_mse:+.1%})"


def _learnable(name: str, t: pd.DataFrame) -> tuple[str, bool]:
    """How much there is to learn on this target: OLS R^2 and OLS's paired gain."""
    r2 = float(t["ols_r2"].mean())
    m, se = _paired(t, float(t["epsilon"].iloc[0]), "ols", "zero")
    learnable = r2 >= LEARNABLE_R2
    verdict = ("there is signal to learn" if learnable else
               f"LITTLE TO LEARN (R^2 below {LEARNABLE_R2:g}): a private estimator tying "
               "with predicting the mean says nothing about the estimator, and no "
               "comparison between them is drawn on this target")
    return (f"- **{name}**: OLS R^2 = {r2:.3f} (train split, non-private); OLS minus "
            f"predicting the mean on test: {m:+.3f} +/- {se:.3f}: {verdict}.", learnable)


def _beats_the_mean(name: str, t: pd.DataFrame, eps: list[float]) -> str:
    parts = []
    for label, group in (("x only (y public)", LABEL_PUBLIC), ("x and y", LABEL_PRIVATE)):
        found = [_gain_text(t, e, group) for e in eps]
        useful = [float(e) for e, (beats, _) in zip(eps, found, strict=True) if beats]
        parts.append(f"protecting {label}, at epsilon in {useful or 'none'} (best gain per "
                     "budget: " + "; ".join(text for _, text in found) + ")")
    return (f"- **{name}**, a local-DP estimator beats predicting the mean (paired, 2 SE): "
            + "; ".join(parts) + ".")


def _compare(t: pd.DataFrame, eps: list[float], a: str, b: str) -> tuple[list[str], str]:
    """Per-budget paired verdicts of ``a`` against ``b`` and their text."""
    rows = [(e, *_paired(t, e, a, b)) for e in eps]
    verdicts = [_verdict(m, se) for _, m, se in rows]
    text = "; ".join(f"{e:g}: {m:+.3f} +/- {se:.3f} ({v})"
                     for (e, m, se), v in zip(rows, verdicts, strict=True))
    return verdicts, text


def _summary_word(verdicts: list[str]) -> str:
    if all(v == "better" for v in verdicts):
        return "HOLDS"
    if all(v == "tie" for v in verdicts):
        return "NOT SUPPORTED (no significant difference)"
    if not any(v == "better" for v in verdicts):
        return "DOES NOT HOLD"
    if any(v == "worse" for v in verdicts):
        return "MIXED (better at some budgets, worse at others)"
    return "HOLDS IN PART (never worse, better at some budgets)"


def _like_with_like(name: str, t: pd.DataFrame, eps: list[float]) -> list[str]:
    """Test the paper's claims, each between estimators that protect the same variables."""
    tight = [e for e in eps if e <= 1.0] or eps[:1]
    lines = []
    v1, text1 = _compare(t, tight, "one_shot", "iterative")
    v2, text2 = _compare(t, tight, "one_shot_label_private", "dpsgd_local")
    lines.append(f"- **{name}**, one-shot best at tight budgets (epsilon <= 1), like with "
                 f"like: {_summary_word(v1 + v2)}. One-shot minus iterative (both x only): "
                 f"{text1}. Label-private one-shot minus local DP-SGD (both x and y): "
                 f"{text2}.")
    v3, text3 = _compare(t, [eps[0], eps[-1]], "iterative", "one_shot")
    caught = v3[-1] != "worse" and _paired(t, eps[-1], "iterative", "one_shot")[0] < \
        _paired(t, eps[0], "iterative", "one_shot")[0]
    word = ("NOT SUPPORTED (the two tie)" if set(v3) == {"tie"} else
            "HOLDS" if caught else "DOES NOT HOLD")
    lines.append(f"- **{name}**, iterative catching up at larger epsilon (both x only): "
                 f"{word}. Iterative minus one-shot: {text3}.")
    for other in ("one_shot_label_private", "nss_label_private"):
        v4, text4 = _compare(t, eps, "dpsgd_local", other)
        worse = [float(e) for e, v in zip(eps, v4, strict=True) if v == "worse"]
        better = [float(e) for e, v in zip(eps, v4, strict=True) if v == "better"]
        word = ("HOLDS" if len(worse) == len(eps) else "DOES NOT HOLD" if not worse
                else "HOLDS ONLY IN PART")
        lines.append(f"- **{name}**, local DP-SGD suffering against {other} (both x and y): "
                     f"{word}. DP-SGD worse at epsilon in {worse}, better at {better} "
                     f"(DP-SGD minus {other}: {text4}).")
    return lines


def _costs(name: str, t: pd.DataFrame, eps: list[float]) -> list[str]:
    """Return what protecting the label costs, and what the modulation costs."""
    _, label = _compare(t, eps, "nss_label_private", "nss")
    _, label_os = _compare(t, eps, "one_shot_label_private", "one_shot")
    _, mod = _compare(t, eps, "nss", "one_shot")
    return [f"- **{name}**, the price of protecting the label too (same total rho): "
            f"label-private minus label-public NSS {label}; one-shot {label_os}.",
            f"- **{name}**, noisy sufficient statistics (lambda = 0) vs modulated one-shot "
            f"(both x only): NSS minus one-shot {mod}."]


def reproduction_findings(table: pd.DataFrame) -> list[str]:
    """State, from the table, which of the paper's findings hold on each target (paired, 2 SE).

    Every comparison is between estimators that protect the same variables
    (:data:`PROTECTS`): the label-public moment estimators (x only) with each other, the
    label-private ones and local DP-SGD (x and y) with each other. A target whose
    non-private OLS R^2 is below :data:`LEARNABLE_R2` gets one line saying there is little
    to learn, and no comparison between private estimators (they all tie with the mean
    there, which says nothing about them).

    Parameters
    ----------
    table : DataFrame
        A :func:`compare_estimators` result (it reads ``.attrs["per_seed"]``).

    Returns
    -------
    list of str
        Markdown bullets per data set: what there is to learn (OLS R^2); then, if there
        is something, who beats the mean (per protection), one-shot best at tight
        budgets, iterative catching up, local DP-SGD against the label-private one-shot
        and NSS, the price of label privacy, and NSS against the modulated one-shot.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 3)); y = X @ [1.0, -0.5, 0.2] + rng.normal(size=300)
    >>> lines = reproduction_findings(compare_estimators({"toy": (X, y)}, seeds=2,
    ...                                                  epsilons=[1.0, 8.0]))
    >>> len(lines), lines[0][:8]
    (8, '- **toy*')
    """
    per_seed: pd.DataFrame = table.attrs["per_seed"]
    lines = []
    for name, t in per_seed.groupby("dataset", sort=False):
        eps = sorted(t["epsilon"].unique())
        what, learnable = _learnable(str(name), t)
        lines.append(what)
        if learnable:
            lines += [_beats_the_mean(str(name), t, eps), *_like_with_like(str(name), t, eps),
                      *_costs(str(name), t, eps)]
    return lines
