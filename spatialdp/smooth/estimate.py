"""Small-area estimates of a regional report: EBLUPs that borrow strength, free of epsilon.

:func:`small_area_estimates` fits an area-level model (Fay-Herriot, or its
spatial SAR version on the partition's neighbour graph) to one metric of a
:class:`~spatialdp.federated.RegionalReport` and returns, per region, the
EBLUP, its estimated MSE, an interval, the shrinkage weight and a label. It
reads the report's published values and public parameters only
(:data:`~spatialdp.smooth.direct.READ_COLUMNS`) plus public covariates: it is
post-processing, and charges no epsilon.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import geopandas as gpd
import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy import linalg, sparse, stats

from spatialdp._blas import single_blas
from spatialdp._random import RandomLike, as_generator
from spatialdp._results import Result
from spatialdp._validation import check_alpha, check_choice, check_count, check_flag, fail
from spatialdp.exceptions import InvalidInput
from spatialdp.federated.regional import RegionalReport
from spatialdp.geo.partition import Partition
from spatialdp.schema import reliability_class
from spatialdp.smooth.bootstrap import bootstrap_mse
from spatialdp.smooth.covariates import design_matrix
from spatialdp.smooth.diagnostics import (
    CHECK_LEVEL,
    MoranTest,
    SmallAreaModelWarning,
    morans_i,
    outlier_bound,
)
from spatialdp.smooth.direct import DirectEstimates, read_direct
from spatialdp.smooth.fay_herriot import AreaFit, fay_herriot_predict, fh_grid, fit_fay_herriot
from spatialdp.smooth.intervals import interval_factor
from spatialdp.smooth.laplace import laplace_predict, mixture_laplace_mean
from spatialdp.smooth.mixture import PosteriorMixture, fh_mixture, sar_mixture
from spatialdp.smooth.sparse_spatial import SparseAreaModel, fit_sparse, sparse_predict
from spatialdp.smooth.spatial import (
    DENSE_LIMIT,
    SarModel,
    fit_sar,
    sar_grid,
    sar_predict,
)
from spatialdp.smooth.weights import spatial_weights

__all__ = ["DIRECT_WEIGHT", "SmallAreaEstimates", "small_area_estimates"]

FloatArray = NDArray[np.float64]

#: A published region whose own direct estimate gets at least this weight is labelled ``direct``.
DIRECT_WEIGHT = 0.95

#: What a smoothed result records about its accounting.
POST_PROCESSING = "small-area model of published values: post-processing, no epsilon charged"

MODELS = {"fh": "Fay-Herriot", "sfh": "spatial Fay-Herriot (SAR)",
          "car": "spatial Fay-Herriot (CAR)"}
#: The spatial models (a ``rho`` on the neighbour graph).
SPATIAL = ("sfh", "car")
#: How the analytic MSE of each model is computed (as ``sae::mseFH`` and ``sae::mseSFH``).
ANALYTIC_MSE = {"fh": "analytic: Prasad-Rao / Datta-Lahiri second-order approximation",
                "sfh": "analytic: Singh, Steel & Salvati (2005) second-order approximation",
                "sparse": "analytic: g1 + g2 on sparse matrices (variance parameters taken as "
                          "known; no second-order terms)"}
#: Fewest bootstrap replicates accepted (below, the MSE is itself too noisy to use).
MIN_REPLICATES = 20
#: How the observed areas are predicted: the linear EBLUP, or the posterior mean under the
#: exact Laplace-plus-normal likelihood of their published value (:mod:`.laplace`), at the
#: fitted variance parameters or averaged over their posterior (the intervals' mixture).
PREDICTORS = ("linear", "laplace", "laplace-mixture")
#: What ``mse_method`` adds for the Laplace-aware predictor.
LAPLACE_MSE = ("; published regions: Laplace-aware predictor, g1 + g2 replaced by its expected "
               "posterior variance")
#: What a smoothed map's title calls each model.
SHORT_NAMES = {"fh": "Fay-Herriot", "sfh": "spatial Fay-Herriot",
               "car": "spatial Fay-Herriot (CAR)"}


@dataclass(frozen=True)
class SpatialTest:
    """The likelihood-ratio test of the spatial term (``rho = 0``), chi-squared with 1 df."""

    statistic: float
    p_value: float


@dataclass(repr=False)
class SmallAreaEstimates(Result):
    """Per-region small-area estimates of one metric, and the fitted model.

    Attributes
    ----------
    frame : GeoDataFrame or DataFrame
        Indexed by region id like the report (joinable, with its geometry when
        the report had one). Columns: ``direct`` (the published value),
        ``direct_variance`` (noise + sampling), ``eblup``, ``mse``, ``rmse``,
        ``ci_low``/``ci_high`` (the ``1 - alpha`` interval), ``shrinkage`` (the
        weight of the region's own direct estimate), ``synthetic`` (the
        regression part), ``label`` (``direct``, ``composite``, ``modelled``
        or ``suppressed`` where no estimate was asked for), and the map columns
        ``value`` (= ``eblup``), ``error_bar``, ``cohort``, ``cv``,
        ``reliability`` and ``suppressed``, so that the maps of
        :mod:`spatialdp.viz` draw it as they draw a report.
    model : {"fh", "sfh", "car"}
    method : {"REML", "ML"}
    metric : str
    coefficients : DataFrame
        ``beta`` and its standard error per covariate.
    sigma2_u, sigma2_u_se : float
        The area-effect variance and its standard error.
    rho, rho_se : float
        The spatial parameter (0 and NaN for Fay-Herriot).
    loglik : float
        The (RE)ML log-likelihood at the estimate.
    spatial_test : SpatialTest or None
        The likelihood-ratio test of ``rho = 0`` (spatial model only).
    moran : MoranTest or None
        Moran's I of the whitened residuals (when weights are known).
    sampling : str
        How the sampling variance of each direct estimate was obtained.
    alpha : float
    accounting : dict
        The report's accounting, plus ``post_processing`` (no epsilon is charged).
    mse_method : str
        How the MSE was estimated (see :data:`ANALYTIC_MSE`).
    mixture : PosteriorMixture or None
        The posterior mixture the intervals come from (``interval="mixture"``;
        see :mod:`spatialdp.smooth.mixture`), or None for plug-in intervals.
    predictor : {"linear", "laplace", "laplace-mixture"}
        How the published regions were predicted (see :func:`small_area_estimates`).
    """

    frame: pd.DataFrame
    model: str
    method: str
    metric: str
    coefficients: pd.DataFrame
    sigma2_u: float
    sigma2_u_se: float
    rho: float
    rho_se: float
    loglik: float
    spatial_test: SpatialTest | None
    moran: MoranTest | None
    sampling: str
    alpha: float
    accounting: dict[str, Any] = field(default_factory=dict)
    laplace_share: FloatArray = field(default_factory=lambda: np.zeros(0), repr=False)
    mse_method: str = ""
    mixture: PosteriorMixture | None = field(default=None, repr=False)
    predictor: str = "linear"

    @property
    def modelled_share(self) -> float:
        """The share of suppressed regions given a (modelled) estimate."""
        hidden = self.frame["label"].isin(["modelled", "suppressed"])
        return float((self.frame["label"] == "modelled").sum() / max(int(hidden.sum()), 1))

    def conf_int(self, alpha: float | None = None) -> pd.DataFrame:
        """Return per-region ``(1 - alpha)`` intervals (Laplace-aware, see :mod:`.intervals`)."""
        level = self.alpha if alpha is None else check_alpha(alpha)
        eblup = self.frame["eblup"].to_numpy()
        if self.mixture is not None:
            low, high = self.mixture.interval(level)
            hide = np.where(np.isfinite(eblup), 1.0, np.nan)
            return pd.DataFrame({"ci_low": low * hide, "ci_high": high * hide},
                                index=self.frame.index)
        half = interval_factor(self.laplace_share, level) * self.frame["rmse"].to_numpy()
        return pd.DataFrame({"ci_low": eblup - half, "ci_high": eblup + half},
                            index=self.frame.index)

    def summary(self) -> str:
        """Return a short plain-text summary."""
        labels = self.frame["label"].value_counts()
        lines = [
            f"{MODELS[self.model]} small-area estimates of {self.metric!r} ({self.method}), "
            f"{len(self.frame)} regions: "
            + ", ".join(f"{k}={int(labels.get(k, 0))}" for k in
                        ("direct", "composite", "modelled", "suppressed")),
            f"  area-effect variance {self.sigma2_u:.4g} (se {self.sigma2_u_se:.2g})"
            + (f", rho {self.rho:.3f} (se {self.rho_se:.2g})" if self.model in SPATIAL
               else ""),
            "  coefficients: " + ", ".join(
                f"{name} {row.beta:.4g} ({row.se:.2g})"
                for name, row in self.coefficients.iterrows()),
            f"  sampling variance: {self.sampling}",
        ]
        if self.spatial_test is not None:
            lines.append(f"  spatial term: LR {self.spatial_test.statistic:.3g}, "
                         f"p {self.spatial_test.p_value:.3g}")
        if self.moran is not None:
            lines.append(f"  Moran's I of whitened residuals {self.moran.statistic:.3f} "
                         f"(p {self.moran.p_value:.3g})")
        lines.append(f"  {POST_PROCESSING}{self.accounting_note}")
        return "\n".join(lines)

    def _html_table(self) -> tuple[pd.DataFrame | None, str]:
        columns = ["direct", "eblup", "rmse", "ci_low", "ci_high", "shrinkage", "label"]
        return pd.DataFrame(self.frame[columns]), "per region"


def small_area_estimates(
    report: RegionalReport | pd.DataFrame,
    metric: str | None = None,
    *,
    covariates: pd.DataFrame | None = None,
    model: str = "fh",
    weights: Any = None,
    method: str = "REML",
    client_variance: float | str = "bound",
    include_suppressed: bool = False,
    alpha: float = 0.05,
    intercept: bool = True,
    mse: str = "analytic",
    replicates: int = 200,
    rng: RandomLike = None,
    interval: str | None = None,
    predictor: str = "linear",
) -> SmallAreaEstimates:
    """Smooth one metric of a regional report with an area-level small-area model.

    Each region's published value is combined with a regression on public
    covariates (and, for ``model="sfh"``, with its neighbours through a
    spatially autocorrelated area effect), weighted by how precise the value
    is: precise regions keep their direct estimate, noisy ones borrow strength.
    Post-processing of published values: no epsilon is charged.

    Parameters
    ----------
    report : RegionalReport or DataFrame
        The report (give ``metric`` when it has several), or one metric's frame.
    metric : str, optional
        The metric to smooth.
    covariates : DataFrame, optional
        Public covariates indexed by region id (area, density class, a
        previous round's published value...). Columns the report produced from
        private data (cohort, error bar, reliability...) are refused.
    model : {"fh", "sfh", "car"}
        Fay-Herriot (independent area effects; any number of regions, O(n)),
        the spatial Fay-Herriot model with a SAR(1) area effect on ``weights``
        (dense up to :data:`~spatialdp.smooth.spatial.DENSE_LIMIT` regions,
        beyond on sparse matrices, :mod:`spatialdp.smooth.sparse_spatial`),
        or with a proper CAR area effect (:mod:`spatialdp.smooth.car`; sparse,
        any number of regions). The sparse fits' MSE omits the second-order
        terms of the variance parameters (``mse_method`` says so).
    weights : Partition, libpysal W or square matrix, optional
        The neighbour graph (row-standardised here). Required for ``"sfh"``;
        with ``"fh"`` it only serves the Moran's I check of the residuals.
    method : {"REML", "ML"}
        How the variance parameters are estimated.
    client_variance : "bound" or float
        The sampling variance of each direct estimate: ``"bound"`` (clip range
        squared over ``4 n``, conservative) or the public variance of one
        client's value (then ``client_variance / n``).
    include_suppressed : bool
        Give suppressed regions a modelled estimate (synthetic, plus the
        spatial prediction under ``"sfh"``), always labelled ``modelled``.
    alpha : float
        The intervals are ``1 - alpha``.
    intercept : bool
        Add a constant to the covariates.
    mse : {"analytic", "bootstrap"}
        How the MSE (and so the intervals) is estimated: the second-order
        analytic approximation (``sae::mseFH`` / ``sae::mseSFH``; fast, but it
        underestimates with few areas), or a parametric bootstrap from the
        fitted model with the release's Laplace noise
        (:mod:`spatialdp.smooth.bootstrap`; ``replicates`` refits; dense
        models only).
    replicates : int
        Bootstrap replicates (``mse="bootstrap"`` only), at least
        :data:`MIN_REPLICATES`.
    rng : numpy Generator, int or None
        Seed of the bootstrap (post-processing of public values: a seed is
        fine); ``None`` draws fresh entropy.
    interval : {"mixture", "plug-in"}, optional
        How the intervals are built (default: ``"plug-in"`` with
        ``mse="bootstrap"``, whose MSE they then use, else ``"mixture"``):
        from the posterior of each area's value mixed over the uncertainty of
        the variance parameters (flat priors, REML-likelihood weights on a
        grid; :mod:`spatialdp.smooth.mixture`), or ``eblup +/- q sqrt(mse)``
        with the estimated parameters plugged in (``q`` the Laplace-plus-normal
        quantile). Plug-in intervals undercover noisy regions when there are
        few areas; the mixture's cover.
    predictor : {"linear", "laplace", "laplace-mixture"}
        How published regions are predicted: the linear EBLUP, or the
        posterior mean of each region's value under the **exact** likelihood
        of its published value (normal sampling error plus the release's
        Laplace noise, whose scale is public) and the fitted model's prior
        given the other regions (:mod:`spatialdp.smooth.laplace`). Laplace
        noise has heavy tails, so the best predictor is not linear in the
        value: ``"laplace"`` lowers the MSE where the noise dominates (a few
        percent at most, near the cohort floor at small epsilon) and equals
        the EBLUP when the noise vanishes. Its ``mse`` is the expected
        posterior variance (plus the linear model's second-order terms);
        the mixture intervals and the shrinkage weights stay the linear
        model's; suppressed regions keep the linear prediction.
        ``"laplace-mixture"`` averages the Laplace-aware predictions over the
        posterior of the variance parameters that the mixture intervals
        integrate over (the estimate then is the mean of the same posterior
        as the intervals; needs ``interval="mixture"`` and ``"fh"`` or a dense
        ``"sfh"``); its ``mse`` is the ``"laplace"`` one.

    Returns
    -------
    SmallAreaEstimates

    Raises
    ------
    InvalidInput
        A bad argument, a private covariate, too few published regions, a
        bootstrap MSE of a sparse fit or of the Laplace-aware predictor, or a
        CAR on an asymmetric graph or one with islands.
    PartitionMismatch
        ``weights`` is a partition other than the report's.

    Warns
    -----
    SmallAreaModelWarning
        When the model visibly fails: an outlying whitened residual, or a
        significant Moran's I of the residuals (1% level each).

    Examples
    --------
    >>> from spatialdp.datasets import synthetic_fleet, us_states_partition
    >>> from spatialdp.federated import MetricSpec, device_report, regional_report
    >>> from spatialdp.privacy import Simulation
    >>> states = us_states_partition()
    >>> fleet = synthetic_fleet(20_000, rng=0)
    >>> rng = np.random.default_rng(1)       # not the noise's seed
    >>> examples = pd.DataFrame({"client_id": fleet.device_id, "region_id": fleet.region_id,
    ...                          "loss": rng.uniform(0, 2, len(fleet))})
    >>> spec = MetricSpec("loss", 0.0, 4.0)
    >>> clients = device_report(examples, loss_spec=spec, partition=states)
    >>> report = regional_report(clients, states, [spec], epsilon=0.5,
    ...                          target=Simulation(rng=0), min_cohort=100)
    >>> smooth = small_area_estimates(report, "loss", client_variance=1 / 3)
    >>> shown = smooth.frame[smooth.frame.label != "suppressed"]
    >>> bool((shown.mse / shown.direct_variance).median() < 1)    # borrowed strength
    True
    >>> smooth.simulated, smooth.frame.loc["VT", "label"]
    (True, 'suppressed')
    """
    frame, accounting, version, name = _frame_of(report, metric)
    kind = check_choice(model, "model", tuple(MODELS))
    how = check_choice(method, "method", ("REML", "ML"))
    level = check_alpha(alpha)
    fill = check_flag(include_suppressed, "include_suppressed")
    direct = read_direct(frame, client_variance)
    X, names = design_matrix(covariates, frame, check_flag(intercept, "intercept"))
    if int(direct.observed.sum()) <= X.shape[1] + 1:
        raise InvalidInput(
            f"{int(direct.observed.sum())} published region(s) for {X.shape[1]} coefficients "
            "and the area-effect variance; the model needs more published regions than that")
    W = _weights(weights, frame.index, version, kind)
    how_mse = check_choice(mse, "mse", ("analytic", "bootstrap"))
    draws = check_count(replicates, "replicates", low=MIN_REPLICATES)
    generator = as_generator(rng) if how_mse == "bootstrap" else None
    how_interval = check_choice(
        interval or ("plug-in" if how_mse == "bootstrap" else "mixture"), "interval",
        ("mixture", "plug-in"))
    sparse_fit = kind == "car" or (kind == "sfh" and frame.shape[0] > DENSE_LIMIT)
    how_predict = check_choice(predictor, "predictor", PREDICTORS)
    if how_predict == "laplace-mixture" and (how_interval != "mixture" or sparse_fit
                                             or kind == "car"):
        raise fail("predictor", predictor, "needs the posterior mixture of the variance "
                   "parameters (interval='mixture' with model='fh' or a dense 'sfh')",
                   "use predictor='laplace'")
    if generator is not None and how_predict != "linear":
        raise fail("mse", mse, "is the linear EBLUP's (the bootstrap refits it), not the "
                   "Laplace-aware predictor's", "use mse='analytic' with predictor='laplace'")
    if generator is not None and sparse_fit:
        raise fail("mse", mse, f"is only available for the dense models (model='fh', or "
                   f"'sfh' up to {DENSE_LIMIT} regions)", "use mse='analytic'")
    fit, eblup, mse_values, gamma, synthetic, resid = _fit(kind, how, direct, X, W,
                                                           sparse_fit)
    if how_predict != "linear":
        eblup, mse_values = _laplace_aware(kind, direct, X, W, fit, sparse_fit, eblup,
                                           mse_values)
    if generator is not None:
        dense = W.toarray() if kind == "sfh" and W is not None else None
        with single_blas():
            mse_values = bootstrap_mse(kind, how, direct, X, dense, fit, draws, generator)
    test = _spatial_test(how, direct, X, W, fit, kind) if kind in SPATIAL else None
    moran = _check_residuals(resid, None if sparse_fit else W, direct.observed)
    share = np.where(direct.observed, gamma**2 * direct.noise_variance / mse_values, 0.0)
    mixture = _mixture(kind, direct, X, W) if how_interval == "mixture" else None
    if how_predict == "laplace-mixture" and mixture is not None:
        eblup = _mixture_laplace(mixture, direct, eblup)
    bounds = mixture.interval(level) if mixture is not None else None
    out = _output(frame, direct, eblup, mse_values, gamma, synthetic, share, level, fill,
                  bounds)
    out.attrs["spatialdp"] = _map_metadata(frame, kind, level)
    se = fit.parameter_se
    coefficients = pd.DataFrame({"beta": fit.beta, "se": np.sqrt(np.diag(fit.beta_cov))},
                                index=pd.Index(names, name="covariate"))
    return SmallAreaEstimates(
        frame=out, model=kind, method=how, metric=name, coefficients=coefficients,
        sigma2_u=fit.s2u, sigma2_u_se=float(se[0]), rho=fit.rho,
        rho_se=float(se[1]) if kind in SPATIAL else math.nan, loglik=fit.loglik,
        spatial_test=test, moran=moran, sampling=direct.sampling, alpha=level,
        accounting={**accounting, "post_processing": POST_PROCESSING},
        laplace_share=np.clip(np.nan_to_num(share), 0.0, 1.0),
        mse_method=(ANALYTIC_MSE["sparse" if sparse_fit else kind] if generator is None else
                    f"parametric bootstrap: {draws} replicates with the release's Laplace "
                    "noise") + (LAPLACE_MSE if how_predict != "linear" else ""),
        mixture=mixture, predictor=how_predict)


def _map_metadata(frame: pd.DataFrame, kind: str, alpha: float) -> dict[str, Any]:
    """Return the smoothed frame's ``attrs["spatialdp"]``: the report's, marked smoothed.

    The maps read it: the title keeps the accounting label, the epsilon the
    report was charged and the metric's label, and says it is smoothed
    (post-processing); ``alpha`` is the level of the smoothed intervals.
    """
    meta = frame.attrs.get("spatialdp", {})
    meta = dict(meta) if isinstance(meta, dict) else {}
    for key in ("suppressed_regions", "format"):  # the report's, not the smoothed frame's
        meta.pop(key, None)
    return {**meta, "alpha": alpha, "smoothed": SHORT_NAMES[kind],
            "post_processing": POST_PROCESSING}


def _frame_of(report: Any, metric: str | None
              ) -> tuple[pd.DataFrame, dict[str, Any], str | None, str]:
    """Return the metric's frame, the accounting, the partition version and the metric name."""
    if isinstance(report, RegionalReport):
        if metric is None:
            if len(report) != 1:
                raise fail("metric", metric, "is needed: the report has several metrics",
                           f"pass one of {sorted(report.frames)}")
            metric = next(iter(report))
        return report[metric], dict(report.accounting), report.partition_version, str(metric)
    if isinstance(report, pd.DataFrame):
        meta = report.attrs.get("spatialdp", {})
        accounting = {k: meta[k] for k in ("accounting", "simulated", "reason", "ledger",
                                           "epoch") if k in meta}
        return (report, accounting, meta.get("partition_version"),
                str(metric or meta.get("metric", "value")))
    raise fail("report", report, "is not a RegionalReport or a report frame",
               "pass the report (and metric=) or report[metric]")


def _weights(weights: Any, index: pd.Index, version: str | None, kind: str
             ) -> sparse.csr_array | None:
    """Return the row-standardised weights, checking the partition against the report's."""
    if weights is None:
        if kind in SPATIAL:
            raise fail("weights", None, "is needed by the spatial model",
                       "pass the report's Partition (or a libpysal W)")
        return None
    if isinstance(weights, Partition) and version is not None:
        weights.require_version(version, "the report")
    return spatial_weights(weights, index)


def _fit(kind: str, method: str, direct: DirectEstimates, X: FloatArray,
         W: sparse.csr_array | None, sparse_fit: bool
         ) -> tuple[AreaFit, FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """Fit the model; return the fit, per-region predictions and the standardised residuals.

    The dense models' residuals are whitened (``L^-1 r``, ``V = L L'``); a
    sparse fit's are ``(V^-1 r)_i / sqrt((V^-1)_ii)``.
    """
    obs = direct.observed
    y, d = direct.value[obs], direct.variance[obs]
    if kind == "fh":
        fit = fit_fay_herriot(y, X[obs], d, method)
        eblup, mse, gamma, synthetic = fay_herriot_predict(fit, direct.value, X,
                                                           direct.variance, obs)
        resid = (y - X[obs] @ fit.beta) / np.sqrt(fit.s2u + d)
        return fit, eblup, mse, gamma, synthetic, resid
    assert W is not None
    if sparse_fit:
        model = SparseAreaModel(y, X, d, W, obs, "car" if kind == "car" else "sar")
        fit = fit_sparse(model, method)
        eblup, mse, gamma, synthetic, resid = sparse_predict(model, fit)
        return fit, eblup, mse, gamma, synthetic, resid
    sar = SarModel(y, X, d, W.toarray(), obs)
    with single_blas():
        fit = fit_sar(sar, method)
        eblup, mse, gamma, synthetic = sar_predict(sar, fit)
        V = fit.s2u * sar.structure(fit.rho)[np.ix_(obs, obs)] + np.diag(d)
        resid = linalg.solve_triangular(np.linalg.cholesky(V), y - X[obs] @ fit.beta,
                                        lower=True)
    return fit, eblup, mse, gamma, synthetic, resid


def _laplace_aware(kind: str, direct: DirectEstimates, X: FloatArray,
                   W: sparse.csr_array | None, fit: AreaFit, sparse_fit: bool,
                   eblup: FloatArray, mse: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Return the predictions and MSEs with the observed areas' exact Laplace likelihood.

    The linear BLUP and its ``g1 + g2`` at the fitted parameters give each
    observed area's leave-one-out prior; :func:`.laplace.laplace_predict`
    replaces the BLUP by the posterior mean and ``g1 + g2`` by its expected
    posterior variance. The MSE keeps the linear model's second-order terms
    (its MSE minus ``g1 + g2``). Unobserved areas keep the linear prediction.
    """
    obs = direct.observed
    blup, variance = _conditional_blup(kind, direct, X, W, fit, sparse_fit, eblup, mse)
    prediction, risk = laplace_predict(blup[obs], variance[obs], direct.value[obs],
                                       direct.sampling_variance[obs],
                                       direct.noise_variance[obs])
    eblup, mse = eblup.copy(), mse.copy()
    eblup[obs] = prediction
    mse[obs] = risk + np.maximum(mse[obs] - variance[obs], 0.0)
    return eblup, mse


def _mixture_laplace(mixture: PosteriorMixture, direct: DirectEstimates, eblup: FloatArray
                     ) -> FloatArray:
    """Return the observed areas' Laplace-aware predictions averaged over the mixture's grid."""
    obs = direct.observed
    variance = 2.0 * mixture.laplace[:, obs] ** 2 + mixture.normal[:, obs] ** 2
    out = eblup.copy()
    out[obs] = mixture_laplace_mean(mixture.weight, mixture.mean[:, obs], variance,
                                    direct.value[obs], direct.sampling_variance[obs],
                                    direct.noise_variance[obs])
    return out


def _conditional_blup(kind: str, direct: DirectEstimates, X: FloatArray,
                      W: sparse.csr_array | None, fit: AreaFit, sparse_fit: bool,
                      eblup: FloatArray, mse: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Return the BLUP and its ``g1 + g2`` at the fitted parameters (``beta`` by GLS)."""
    if sparse_fit:  # the sparse MSE is g1 + g2
        return eblup, mse
    obs, s2u = direct.observed, np.array([fit.s2u])
    if kind == "fh":
        _, blup, variance, _ = fh_grid(direct.value, X, direct.variance, obs, s2u)
    else:
        assert W is not None
        with single_blas():
            _, blup, variance, _ = sar_grid(SarModel(direct.value[obs], X,
                                                     direct.variance[obs], W.toarray(), obs),
                                            fit.rho, s2u)
    return blup[0], variance[0]


def _mixture(kind: str, direct: DirectEstimates, X: FloatArray, W: sparse.csr_array | None
             ) -> PosteriorMixture | None:
    """Return the posterior mixture of every area's value (see :mod:`.mixture`).

    None (plug-in intervals) for a model the mixture does not cover: only the
    Fay-Herriot and the dense spatial model have a grid evaluator.
    """
    obs = direct.observed
    if kind == "fh":
        return fh_mixture(direct.value, X, direct.variance, obs, direct.noise_variance)
    if kind != "sfh" or W is None or obs.size > DENSE_LIMIT:
        return None
    with single_blas():
        return sar_mixture(SarModel(direct.value[obs], X, direct.variance[obs], W.toarray(),
                                    obs), np.where(obs, direct.noise_variance, 0.0))


def _spatial_test(method: str, direct: DirectEstimates, X: FloatArray,
                  W: sparse.csr_array | None, fit: AreaFit, kind: str) -> SpatialTest:
    """Return the likelihood-ratio test of ``rho = 0``.

    The SAR at ``rho = 0`` is Fay-Herriot; the CAR at ``rho = 0`` has
    independent effects of variances ``s2u / deg``, refitted with ``rho`` fixed.
    """
    obs = direct.observed
    y, d = direct.value[obs], direct.variance[obs]
    if kind == "car":
        assert W is not None
        plain = fit_sparse(SparseAreaModel(y, X, d, W, obs, "car"), method, rho=0.0)
    else:
        plain = fit_fay_herriot(y, X[obs], d, method)
    stat = max(2.0 * (fit.loglik - plain.loglik), 0.0)
    return SpatialTest(stat, float(stats.chi2.sf(stat, 1)))


def _check_residuals(resid: FloatArray, W: sparse.csr_array | None,
                     observed: NDArray[np.bool_]) -> MoranTest | None:
    """Warn when the whitened residuals show outliers or spatial autocorrelation."""
    bound = outlier_bound(resid.size)
    worst = float(np.abs(resid).max())
    if worst > bound:
        warnings.warn(SmallAreaModelWarning(
            f"a whitened residual of {worst:.3g} exceeds the bound {bound:.3g} (1% family-wise "
            "under the model): an outlying region or a missing covariate"), stacklevel=3)
    if W is None:
        return None
    sub = sparse.csr_array(W[observed][:, observed])
    if sub.nnz == 0:
        return None
    test = morans_i(resid, sub)
    if test.p_value < CHECK_LEVEL:
        warnings.warn(SmallAreaModelWarning(
            f"Moran's I of the whitened residuals is {test.statistic:.3f} (p "
            f"{test.p_value:.2g}): spatial pattern left; try model='sfh' or a spatial "
            "covariate"), stacklevel=3)
    return test


def _output(frame: pd.DataFrame, direct: DirectEstimates, eblup: FloatArray, mse: FloatArray,
            gamma: FloatArray, synthetic: FloatArray, share: FloatArray, alpha: float,
            fill: bool, bounds: tuple[FloatArray, FloatArray] | None = None) -> pd.DataFrame:
    """Return the per-region table (a GeoDataFrame when the report frame has geometry).

    The intervals are ``bounds`` when given (the mixture's), else plug-in.
    """
    obs = direct.observed
    shown = obs | fill
    label = np.where(~obs, "modelled", np.where(gamma >= DIRECT_WEIGHT, "direct", "composite"))
    label = np.where(shown, label, "suppressed")
    hide = np.where(shown, 1.0, np.nan)
    eblup, mse, synthetic = eblup * hide, mse * hide, synthetic * hide
    rmse = np.sqrt(mse)
    half = interval_factor(np.clip(np.nan_to_num(share), 0.0, 1.0), alpha) * rmse
    low, high = (eblup - half, eblup + half) if bounds is None else (
        bounds[0] * hide, bounds[1] * hide)
    half = (high - low) / 2.0
    with np.errstate(divide="ignore", invalid="ignore"):
        cv = rmse / np.abs(eblup)
    cohort = frame["cohort"] if "cohort" in frame.columns else pd.NA
    columns = {
        "direct": direct.value, "direct_variance": direct.variance,
        "eblup": eblup, "mse": mse, "rmse": rmse, "ci_low": low, "ci_high": high,
        "shrinkage": np.where(shown, gamma, np.nan),
        "synthetic": synthetic, "label": label, "value": eblup, "error_bar": half,
        "cohort": cohort, "cv": cv,
        "reliability": reliability_class(np.nan_to_num(cv, nan=np.inf), ~shown),
        "suppressed": ~shown,
    }
    table = pd.DataFrame(columns, index=frame.index)
    if isinstance(frame, gpd.GeoDataFrame) and frame.geometry.name in frame.columns:
        return gpd.GeoDataFrame(table, geometry=frame.geometry.array, crs=frame.crs)
    return table
