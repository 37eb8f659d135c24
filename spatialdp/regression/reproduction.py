"""The modulated-learning comparison on real data, every row one client (reusable core).

``benchmarks/reproduce_modulated.py`` runs it in full (both data sets, five budgets,
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

Estimators (test MSE on the standardised label, so predicting the mean scores about 1):
``zero`` (predict the train mean), ``ols`` (non-private least squares), ``nss`` (noisy
sufficient statistics: the one-shot estimator with ``lambda = 0``), ``one_shot``
(modulated, ``lambda = 1, omega = 1``), ``iterative`` (modulated, disjoint round groups),
``dpsgd_local`` (DP-SGD FedAvg, each client noises its clipped gradient) and
``dpsgd_central`` (noise on the average: a REFERENCE with a trusted aggregator).
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
from spatialdp.regression.accounting import rho_for_epsilon
from spatialdp.regression.client import transform_clients
from spatialdp.regression.dpsgd import fit_dpsgd
from spatialdp.regression.iterative import fit_iterative
from spatialdp.regression.modulation import Modulation, clip_rows
from spatialdp.regression.oneshot import fit_one_shot
from spatialdp.regression.planner import plan_regression

__all__ = [
    "EPSILONS",
    "ESTIMATORS",
    "LOCAL_ESTIMATORS",
    "REPRODUCTION_DATASETS",
    "compare_estimators",
    "load_reproduction_data",
    "reproduction_findings",
    "standardised_split",
]

#: The per-client budgets of the full reproduction (delta = :data:`DELTA`).
EPSILONS = (0.5, 1.0, 2.0, 4.0, 8.0)
DELTA = 1e-6
RADII = (1.0, 2.0, 4.0)
ITER_ROUNDS = (5, 10)
DPSGD_CLIPS = (0.3, 1.0, 3.0)
DPSGD_STEPS = (0.1, 0.3, 1.0)
DPSGD_ROUNDS = (5, 20)
PLAN_RADIUS = 2.0
#: Every estimator compared, in table order.
ESTIMATORS = ("zero", "ols", "nss", "one_shot", "iterative", "dpsgd_local", "dpsgd_central")
#: The estimators whose noise is added on the device (local differential privacy).
LOCAL_ESTIMATORS = ("nss", "one_shot", "iterative", "dpsgd_local")
#: The statsmodels data sets :func:`load_reproduction_data` reads.
REPRODUCTION_DATASETS = ("fair", "modechoice")

Split = dict[str, tuple[np.ndarray, np.ndarray]]
Fitter = Callable[[dict[str, Any], int], Any]


def load_reproduction_data(name: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Return features, label and feature names of a data set of the reproduction.

    ``fair`` is Fair's affairs data (6,366 rows; target ``affairs``, 8 features);
    ``modechoice`` is travel mode choice (840 rows, 210 travellers x 4 modes; target
    ``invt``, the in-vehicle time; features ``ttme, invc, gc, hinc, psize`` and three
    mode dummies). Both ship with statsmodels (read offline; install it with
    ``pip install 'spatialdp[notebooks]'``).

    Parameters
    ----------
    name : {"fair", "modechoice"}
        The data set.

    Returns
    -------
    tuple of (ndarray, ndarray, list of str)
        Features ``(n, d)``, label ``(n,)`` and the ``d`` feature names.

    Examples
    --------
    >>> X, y, names = load_reproduction_data("modechoice")
    >>> X.shape, names[-1]
    ((840, 8), 'mode_bus')
    """
    if name not in REPRODUCTION_DATASETS:
        raise fail("name", name, "is not a data set of the reproduction",
                   f"pass one of {list(REPRODUCTION_DATASETS)}")
    import statsmodels.api as sm

    if name == "fair":
        df = sm.datasets.fair.load_pandas().data
        cols = [c for c in df.columns if c != "affairs"]
        return df[cols].to_numpy(float), df["affairs"].to_numpy(float), cols
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
    """Choose on validation, refit with fresh noise, return (test MSE, chosen params)."""
    Xv, yv = data["val"]
    scores = [_mse(fitter(params, 10_000 * seed + j).predict(Xv), yv)
              for j, params in enumerate(grid)]
    best = grid[int(np.nanargmin(np.where(np.isfinite(scores), scores, np.inf)))]
    final = fitter(best, 10_000 * seed + 9_999)
    Xt, yt = data["test"]
    return _mse(final.predict(Xt), yt), best


def _one_shot(X: np.ndarray, y: np.ndarray, rho: float, lam: float) -> Fitter:
    def fit(p: dict[str, Any], s: int) -> Any:
        mod = Modulation(lam=lam, omega=1.0, radius=p["radius"])
        rep = transform_clients(X, y, modulation=mod, rho=rho, target=Simulation(rng=s))
        return fit_one_shot(rep)
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
    grid = [{"clip": c, "step": st, "rounds": t} for c in DPSGD_CLIPS for st in DPSGD_STEPS
            for t in DPSGD_ROUNDS]
    for noise in ("local", "central"):
        out[f"dpsgd_{noise}"] = _tune(data, grid, _dpsgd(X, y, rho, noise), seed)
    return out


def _planner_row(X: np.ndarray, y: np.ndarray, epsilon: float) -> dict[str, float]:
    """Return the planner's predicted test MSE per estimator (standardised label)."""
    Z = np.column_stack([X, np.ones(len(y))])
    r2 = 1 - np.var(y - Z @ np.linalg.lstsq(Z, y, rcond=None)[0]) / np.var(y)
    ex2 = float(np.mean(np.sum(clip_rows(X, PLAN_RADIUS) ** 2, axis=1)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = plan_regression(len(y), X.shape[1], epsilon=epsilon, delta=DELTA,
                               modulation=Modulation(lam=1.0, omega=1.0, radius=PLAN_RADIUS),
                               feature_second_moment=ex2, label_second_moment=1.0,
                               r_squared=float(min(max(r2, 1e-3), 0.999)), rounds=10,
                               dpsgd_rounds=20, dpsgd_clip=1.0, dpsgd_step=0.3)
    return {e: plan.predicted(e) for e in ESTIMATORS}


def _per_seed(datasets: Mapping[str, tuple[np.ndarray, np.ndarray]], seeds: int,
              epsilons: Sequence[float], progress: bool) -> pd.DataFrame:
    rows = []
    for name, (X_all, y_all) in datasets.items():
        splits = [standardised_split(X_all, y_all, s) for s in range(seeds)]
        for eps in epsilons:
            t0 = time.perf_counter()
            plan = _planner_row(*splits[0]["train"], eps)
            for s in range(seeds):
                for est, (mse, params) in _run_seed(splits[s], eps, s).items():
                    rows.append({"dataset": name, "n_clients": len(splits[s]["train"][1]),
                                 "epsilon": eps, "seed": s, "estimator": est, "mse": mse,
                                 "planner": plan[est], "params": str(params)})
            if progress:
                print(f"  {name} epsilon={eps}: {time.perf_counter() - t0:.1f} s", flush=True)
    return pd.DataFrame(rows)


def _summarise(per_seed: pd.DataFrame) -> pd.DataFrame:
    """Mean, SE over seeds, planner prediction and the most chosen parameters per cell."""
    keys = ["dataset", "n_clients", "epsilon", "estimator"]
    g = per_seed.groupby(keys, sort=False)
    return g.agg(mse=("mse", "mean"), se=("mse", "sem"), planner=("planner", "first"),
                 seeds=("seed", "nunique"),
                 typical_params=("params", lambda p: p.mode().iloc[0])).reset_index()


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
        One row per (dataset, epsilon, estimator): ``n_clients``, ``mse`` (mean test MSE
        on the standardised label), ``se`` (its standard error over the seeds),
        ``planner`` (:func:`~spatialdp.regression.plan_regression`'s prediction),
        ``seeds`` and ``typical_params`` (the configuration chosen most often). The
        per-seed rows are in ``.attrs["per_seed"]`` (for paired comparisons).

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


def _beats_the_mean(name: str, t: pd.DataFrame, eps: list[float]) -> tuple[str, list[float]]:
    gains = {e: {b: _paired(t, e, b, "zero") for b in LOCAL_ESTIMATORS} for e in eps}
    useful = [e for e in eps if any(_verdict(*g) == "better" for g in gains[e].values())]
    best = {e: min(gains[e].items(), key=lambda kv: kv[1][0]) for e in eps}
    zero_mse = t[t["estimator"] == "zero"]["mse"].mean()
    line = (f"- **{name}**: a local-DP estimator beats predicting the mean (paired, "
            f"2 SE) at epsilon in {[float(e) for e in useful] or 'none'}; the best "
            "gain per budget: " + "; ".join(
                f"{e:g}: {b} {-g[0]:.3f} ({-g[0] / zero_mse:.1%})"
                for e, (b, g) in best.items()) + ".")
    return line, useful


def _one_shot_best(name: str, t: pd.DataFrame, eps: list[float], useful: list[float]) -> str:
    tight = [e for e in eps if e <= 1.0]
    parts = []
    verdicts = []
    for e in tight:
        for other in ("iterative", "dpsgd_local", "nss"):
            m, se = _paired(t, e, "one_shot", other)
            v = _verdict(m, se)
            if other != "nss":
                verdicts.append(v)
            parts.append(f"{other} at eps={e:g}: {m:+.3f} +/- {se:.3f} ({v})")
    if all(v == "better" for v in verdicts):
        word = "HOLDS"
    elif any(v == "worse" for v in verdicts):
        word = "DOES NOT HOLD"
    elif any(v == "better" for v in verdicts):
        word = "HOLDS IN PART (never worse, better than some, tied with the rest)"
    else:
        word = "NOT SUPPORTED (no significant difference"
        word += "; nothing beats the mean here)" if not any(e in useful for e in tight) \
            else ")"
    return (f"- **{name}**, one-shot best at tight budgets: {word}. One-shot minus "
            "each other: " + "; ".join(parts) + ".")


def _iterative_catches_up(name: str, t: pd.DataFrame, lo: float, hi: float) -> str:
    m_lo, se_lo = _paired(t, lo, "iterative", "one_shot")
    m_hi, se_hi = _paired(t, hi, "iterative", "one_shot")
    caught = _verdict(m_hi, se_hi) != "worse" and m_hi < m_lo
    if _verdict(m_hi, se_hi) == "tie" and _verdict(m_lo, se_lo) == "tie":
        word = "NOT SUPPORTED (the two tie at every budget)"
    else:
        word = "HOLDS" if caught else "DOES NOT HOLD"
    return (f"- **{name}**, iterative catching up at larger epsilon: {word}. Iterative "
            f"minus one-shot: {m_lo:+.3f} +/- {se_lo:.3f} at eps={lo:g}, "
            f"{m_hi:+.3f} +/- {se_hi:.3f} at eps={hi:g}.")


def _dpsgd_suffers(name: str, t: pd.DataFrame, eps: list[float]) -> str:
    vs = [(e, *_paired(t, e, "dpsgd_local", "one_shot")) for e in eps]
    worse = [e for e, m, se in vs if _verdict(m, se) == "worse"]
    better = [e for e, m, se in vs if _verdict(m, se) == "better"]
    word = ("HOLDS" if len(worse) == len(eps) else "DOES NOT HOLD" if not worse
            else "HOLDS ONLY IN PART")
    return (f"- **{name}**, DP-SGD (local noise) suffering in this regime: {word}. "
            f"Worse than one-shot at eps in {[float(e) for e in worse]}, better at "
            f"{[float(e) for e in better]} (" + "; ".join(
                f"{e:g}: {m:+.3f} +/- {se:.3f}" for e, m, se in vs) + ").")


def reproduction_findings(table: pd.DataFrame) -> list[str]:
    """State which of the paper's findings hold on each data set (paired, 2 SE).

    Parameters
    ----------
    table : DataFrame
        A :func:`compare_estimators` result (it reads ``.attrs["per_seed"]``).

    Returns
    -------
    list of str
        Markdown bullets, five per data set: beating the mean, one-shot best at tight
        budgets, iterative catching up, DP-SGD (local) suffering, NSS vs one-shot.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 3)); y = X @ [1.0, -0.5, 0.2] + rng.normal(size=300)
    >>> lines = reproduction_findings(compare_estimators({"toy": (X, y)}, seeds=2,
    ...                                                  epsilons=[1.0, 8.0]))
    >>> len(lines), lines[0][:8]
    (5, '- **toy*')
    """
    per_seed: pd.DataFrame = table.attrs["per_seed"]
    lines = []
    for name, t in per_seed.groupby("dataset", sort=False):
        eps = sorted(t["epsilon"].unique())
        beats, useful = _beats_the_mean(str(name), t, eps)
        lines += [beats, _one_shot_best(str(name), t, eps, useful),
                  _iterative_catches_up(str(name), t, eps[0], eps[-1]),
                  _dpsgd_suffers(str(name), t, eps)]
        nss = [(e, *_paired(t, e, "nss", "one_shot")) for e in eps]
        lines.append(f"- **{name}**, noisy sufficient statistics (lambda = 0) vs modulated "
                     "one-shot: NSS minus one-shot " + "; ".join(
                         f"{e:g}: {m:+.3f} +/- {se:.3f}" for e, m, se in nss) + ".")
    return lines
