"""How wrong are the answers? Error per bucket of a query corpus, next to its expectation.

:func:`measure_query_error` simulates the release many times (seeded: this is
the simulation path, nothing is charged) against a *reference* grid and
reports, per bucket of the corpus (by cell count or by area): mean and p95
absolute error, mean and p95 relative error on queries whose reference answer
is at least ``report_floor``, the signed bias, the RMS, and next to each the
analytic expectation (exact for a flat release; for a hierarchical one the RMS
is exact on every query and the mean absolute error and p95 come from the
exact laws of up to 12 evenly spaced queries per bucket, see
:mod:`~spatialdp.queries.weighted_sum`).

The reference's type alone decides what the table may be used for:

* a released :class:`~spatialdp.queries.NoisyGrid` (``release_flat`` or
  ``release_hierarchical`` with a ``ReleaseTarget`` or ``Unaccounted``) is
  used as a *plug-in truth*: its values, rounded to whole counts and clamped
  at zero. The table is post-processing of that release (no further charge)
  and may be published: the model card, the demo and the CLI accept it. What
  the plug-in changes (nothing in the unclamped absolute errors; the clamping
  bias, the clamped RMS of sparse cells and the relative error) is in
  ``docs/queries.md``, each statement checked by simulation;
* the :class:`~spatialdp.queries.TruthGrid` (the private counts), or a grid
  released by a ``Simulation``, gives an INTERNAL table for planning: labelled
  so in its ``attrs`` (``internal``, ``title``) and in any figure drawn from
  it, and refused by every publishing helper (:func:`require_publishable`).

The flat simulation is exact per query and fast (:mod:`~spatialdp.queries.sampling`):
one pair of negative binomial draws per query and draw for the cells clamping
cannot touch, cell-by-cell draws only for sparse cells.

The draws are independent, so they split into ``chunks`` that Dask workers run,
each with its own generator spawned from ``rng``
(:meth:`numpy.random.Generator.spawn`: independent streams by construction);
each returns its error matrix (queries x chunk: bounded by the corpus, not the
data) and the table is summarised here from the joined matrices, so every
figure has the same law as the single-process measurement. The draws depend
on ``rng`` and ``chunks`` only, never on the number of workers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from spatialdp._dask_frames import compute
from spatialdp._random import RandomLike, as_generator
from spatialdp._validation import (
    check_choice,
    check_epsilon,
    check_flag,
    check_integer,
    fail,
)
from spatialdp.exceptions import PartitionMismatch
from spatialdp.geo import CellIncidence
from spatialdp.privacy import LaplaceMechanism
from spatialdp.queries import expectations as ex
from spatialdp.queries.corpus import QueryCorpus, corpus_from_incidence
from spatialdp.queries.grids import NoisyGrid
from spatialdp.queries.sampling import flat_query_errors
from spatialdp.queries.truth import TruthGrid

__all__ = ["DEFAULT_CELL_BUCKETS", "RELEASED", "TRUTH", "check_measure_settings",
           "measure_query_error", "plug_in_counts",
           "require_publishable"]

#: ``attrs["reference"]`` of a table measured against the truth grid (internal only).
TRUTH = "truth"
#: ``attrs["reference"]`` of a table measured against a released grid (the plug-in truth).
RELEASED = "released grid"

#: Accounting kinds of a real release (``NoisyGrid.accounting["accounting"]``).
RELEASE_KINDS = ("ledger", "unaccounted")

#: How to make a publishable table, in every refusal of an internal one.
PUBLISH_FIX = ("release a grid first (grid = release_flat(truth, epsilon=..., "
               "target=ReleaseTarget(ledger, epoch)), or release_hierarchical), then measure "
               "against it: measure_query_error(grid, queries, epsilon=...)")

#: Default bucket edges by cell count: powers of 4 (1, 4, 16, ... cells).
DEFAULT_CELL_BUCKETS = tuple(4**i for i in range(13))

COLUMNS = ["bucket", "n_queries", "mean_cells", "mean_abs_error", "expected_mean_abs_error",
           "p95_abs_error", "expected_p95_abs_error", "rms", "expected_rms", "bias",
           "expected_bias", "n_above_floor", "mean_rel_error", "expected_mean_rel_error",
           "p95_rel_error", "rms_se", "mean_abs_error_se"]


def plug_in_counts(grid: NoisyGrid) -> NDArray[np.int64]:
    """Return a released grid as the plug-in truth: its values as whole counts, at least 0.

    Counts are whole and never negative, so the released values are rounded
    and clamped at zero (post-processing of the release, free in privacy).

    Examples
    --------
    >>> from spatialdp.privacy import Simulation
    >>> from spatialdp.queries import release_flat, truth_grid
    >>> cells = ["85283473fffffff", "85283477fffffff"]
    >>> truth = truth_grid(cells, lon=[-121.9764], lat=[37.3458], device_ids=[7])
    >>> grid = release_flat(truth, epsilon=1.0, target=Simulation(rng=9))
    >>> grid.values.tolist(), plug_in_counts(grid).tolist()
    ([3, -1], [3, 0])
    """
    values = np.rint(np.asarray(grid.values, dtype=np.float64))
    return np.maximum(values, 0.0).astype(np.int64)


def _reference_settings(reference: TruthGrid | NoisyGrid) -> dict[str, Any]:
    """Return what the table records about its reference: kind, accounting, title."""
    if isinstance(reference, TruthGrid):
        return {"reference": TRUTH, "internal": True,
                "title": "INTERNAL: query error measured against the truth grid (never "
                         "publish)"}
    settings: dict[str, Any] = {f"reference_{k}": v for k, v in reference.accounting.items()}
    kind = str(reference.accounting.get("accounting"))
    released = kind in RELEASE_KINDS and not reference.simulated
    settings.update(reference=RELEASED, reference_method=reference.method,
                    reference_epsilon=float(reference.epsilon), internal=not released)
    if not released:
        settings["title"] = ("INTERNAL: query error measured against a SIMULATION of the grid "
                             "(never publish)" if kind == "simulation" else
                             "INTERNAL: query error measured against a grid that records no "
                             "release (never publish)")
        return settings
    label = {"unaccounted": f" [UNACCOUNTED: {reference.accounting.get('reason')}]"}.get(kind, "")
    settings["title"] = (f"Query error measured against the {reference.method} grid released "
                         f"at epsilon {reference.epsilon:g} (plug-in truth){label}")
    return settings


def _check_reference(reference: Any) -> TruthGrid | NoisyGrid:
    if isinstance(reference, (TruthGrid, NoisyGrid)):
        return reference
    raise fail("reference", reference,
               f"is a {type(reference).__name__}, not a NoisyGrid or TruthGrid", PUBLISH_FIX
               + "; pass the truth_grid(...) only for an internal measurement")


def _publication_problem(settings: Mapping[Any, Any]) -> str | None:
    """Return why a table with these settings may not be published, or None if it may."""
    reference = settings.get("reference")
    if reference == RELEASED and settings.get("internal") is False:
        return None
    if reference == TRUTH:
        return ("is an INTERNAL table: it was measured against the truth grid (the private "
                "counts), and publishing it would publish a function of them, uncharged")
    if reference == RELEASED and settings.get("reference_accounting") == "simulation":
        return ("is an INTERNAL table: it was measured against a SIMULATION of the grid "
                "(seeded noise on the truth, charged nowhere)")
    if reference == RELEASED:
        return ("is an INTERNAL table: it was measured against a grid whose metadata records "
                "no release (accounting neither 'ledger' nor 'unaccounted')")
    return ("does not say it was measured against a released grid (its settings have no "
            "reference: a table from before plug-in measurement, or not measure_query_error's)")


def require_publishable(table: pd.DataFrame | Mapping[Any, Any],
                        name: str = "query_error") -> dict[str, Any]:
    """Refuse a query-error table that may not be published; return its settings.

    A table may be published when it was measured against a released grid
    (:func:`measure_query_error` with a :class:`NoisyGrid` released with a
    ``ReleaseTarget`` or ``Unaccounted``): it is then post-processing of that
    release. A table measured against the truth grid, or against a grid from a
    ``Simulation``, is internal. The model card, the run folder, the demo's
    outputs, :func:`~spatialdp.queries.figures.plot_error_vs_cells` with
    ``publishable=True`` and ``spatialdp query-error --out`` call this.

    Parameters
    ----------
    table : DataFrame or mapping
        A :func:`measure_query_error` table (its ``attrs`` are read), or its
        settings (e.g. ``query_error.json`` of a run folder).
    name : str
        How the refusal names what was passed.

    Returns
    -------
    dict
        The table's settings.

    Raises
    ------
    InvalidInput
        An internal table, or one whose settings do not say what it was measured against.

    Examples
    --------
    >>> require_publishable({"reference": "truth", "title": "INTERNAL"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: query_error='INTERNAL' is an INTERNAL table: it was ...
    """
    given = table.attrs if isinstance(table, pd.DataFrame) else table
    settings = {str(k): v for k, v in given.items()} if isinstance(given, Mapping) else {}
    problem = _publication_problem(settings)
    if problem is None:
        return settings
    shown = settings.get("title", "a table without settings")
    raise fail(name, shown, problem, PUBLISH_FIX)


def _corpus(grid: TruthGrid | NoisyGrid, queries: Any) -> QueryCorpus:
    if isinstance(queries, CellIncidence):
        queries = corpus_from_incidence(queries)
    if not isinstance(queries, QueryCorpus):
        raise fail("queries", queries, "is not a QueryCorpus or CellIncidence",
                   "convert polygons with query_corpus(partition, frame)")
    if queries.partition_version != grid.partition_version:
        raise PartitionMismatch(
            f"the queries were converted on partition version {queries.partition_version!r}, "
            f"but the reference grid is {grid.partition_key!r}; convert them on its "
            "partition")
    return queries


def _bucket_labels(values: NDArray[np.float64], edges: ArrayLike) -> pd.Categorical:
    e = np.asarray(edges, dtype=np.float64)
    if e.ndim != 1 or e.size < 2 or not (np.diff(e) > 0).all():
        raise fail("buckets", edges, "are not increasing bucket edges",
                   "pass at least two increasing edges, e.g. (1, 16, 256, 4096)")
    top = np.append(e, np.inf) if values.max() >= e[-1] else e
    cut: Any = pd.cut  # the stubs do not cover array bins
    return cut(values, top, right=False)


def _pooled_quantile(x: NDArray[np.float64], q: float = 0.95) -> float:
    if x.size == 0:
        return float("nan")
    return float(np.quantile(x, q, method="inverted_cdf"))


def measure_query_error(
    reference: TruthGrid | NoisyGrid,
    queries: QueryCorpus | CellIncidence,
    *,
    epsilon: float,
    method: Literal["flat", "hierarchical"] = "flat",
    levels: int = 4,
    split: Any = "geometric",
    draws: int = 200,
    report_floor: float = 25.0,
    clamp_negative: bool = True,
    buckets: ArrayLike = DEFAULT_CELL_BUCKETS,
    bucket_by: Literal["cells", "area"] = "cells",
    expected: bool = True,
    rng: RandomLike = None,
    chunks: int | None = None,
    progress: bool = False,
) -> pd.DataFrame:
    """Measure the error of a query corpus's answers against a reference grid, per bucket.

    Parameters
    ----------
    reference : NoisyGrid or TruthGrid
        What the simulated answers are compared with. A released grid
        (:func:`release_flat` or :func:`release_hierarchical` with a
        ``ReleaseTarget`` or ``Unaccounted``) is a plug-in truth
        (:func:`plug_in_counts`): the table is post-processing of that release
        and may be published. The truth grid (or a grid from a ``Simulation``)
        gives an INTERNAL table for planning, refused by every publishing
        helper (:func:`require_publishable`). The type decides; there is no flag.
    queries : QueryCorpus or CellIncidence
        The corpus, converted on the reference's partition.
    epsilon : float
        Privacy loss of the release being measured (the whole grid); it need
        not be the reference's.
    method : {"flat", "hierarchical"}
    levels, split
        Of the hierarchical release (see :func:`release_hierarchical`).
    draws : int, default 200
        Simulated releases.
    report_floor : float, default 25
        Relative errors are reported only on queries whose reference answer is
        at least this (relative error on a handful of devices means nothing).
    clamp_negative : bool, default True
        Clamp each published cell at 0 before summing (post-processing; biased up).
    buckets : array-like
        Increasing bucket edges (cells or km², left-closed); a last open bucket is
        added for larger queries.
    bucket_by : {"cells", "area"}
        ``area`` needs a corpus built from polygons.
    expected : bool, default True
        Compute the analytic expectations (exact, a little slower on many sizes).
    rng : numpy.random.Generator, int or None
    chunks : int, optional
        Split the draws into this many chunks (at most ``draws``) and run them
        on Dask: the workers of the active ``distributed.Client``, or dask's
        local scheduler. Each chunk draws from its own generator spawned from
        ``rng``: the table is identical in distribution to one run in memory
        (the default, ``None``) and depends on ``rng`` and ``chunks``, never on
        the number of workers. The reference's counts and the corpus are
        shipped to each worker once.
    progress : bool, default False
        With ``chunks``, print a progress bar while the workers run.

    Returns
    -------
    pandas.DataFrame
        One row per non-empty bucket: ``bucket``, ``n_queries``, ``mean_cells``,
        ``mean_abs_error``, ``p95_abs_error``, ``rms``, ``bias`` (mean signed error),
        ``n_above_floor``, ``mean_rel_error``, ``p95_rel_error``, the
        ``expected_*`` figures next to them, and the Monte Carlo standard errors
        ``rms_se`` and ``mean_abs_error_se`` (from the spread over the draws;
        the error bars of the sqrt(m) plot). ``attrs`` records the settings:
        ``reference`` (``"released grid"`` or ``"truth"``), ``internal``,
        ``title``, the released grid's accounting (``reference_*``), epsilon,
        method, draws and the rest.

    Raises
    ------
    InvalidInput
        Bad arguments (a reference that is neither grid); an area bucketing
        without polygon areas.
    PartitionMismatch
        Queries of another partition version.

    Examples
    --------
    >>> import geopandas as gpd, shapely
    >>> from spatialdp.geo import Partition
    >>> from spatialdp.privacy import PrivacyLedger, ReleaseTarget
    >>> from spatialdp.queries import query_corpus, release_flat, truth_grid
    >>> area = gpd.GeoDataFrame(geometry=[shapely.box(-100, 40, -99, 41)], crs=4326)
    >>> part = Partition.from_h3_cover(area, 6)
    >>> lon, lat = np.linspace(-99.9, -99.1, 500), np.linspace(40.1, 40.9, 500)
    >>> truth = truth_grid(part, lon=lon, lat=lat, device_ids=np.arange(500))
    >>> corpus = query_corpus(part, gpd.GeoSeries([shapely.box(-99.8, 40.2, -99.2, 40.8)],
    ...                                          crs=4326))
    >>> with PrivacyLedger(":memory:", epoch_budget=5.0) as ledger:
    ...     grid = release_flat(truth, epsilon=1.0, target=ReleaseTarget(ledger, epoch=0))
    >>> report = measure_query_error(grid, corpus, epsilon=1.0, clamp_negative=False, rng=0)
    >>> int(report.n_queries.sum()), report.expected_bias.tolist(), report.attrs["internal"]
    (1, [0.0], False)
    >>> measure_query_error(truth, corpus, epsilon=1.0, rng=0).attrs["title"]  # planning only
    'INTERNAL: query error measured against the truth grid (never publish)'

    The draws split into 4 chunks run on Dask (here dask's local scheduler):

    >>> measure_query_error(grid, corpus, epsilon=1.0, rng=0, chunks=4).attrs["draws"]
    200
    """
    setup = _setup(reference, queries, epsilon=epsilon, method=method, levels=levels,
                   split=split, draws=draws, report_floor=report_floor,
                   clamp_negative=clamp_negative, buckets=buckets, bucket_by=bucket_by)
    want = check_flag(expected, "expected")
    show = check_flag(progress, "progress")
    if chunks is None:
        errors = _simulate(setup, setup.n_draws, as_generator(rng))
    else:
        errors = _simulate_on_dask(setup, as_generator(rng), chunks, show)
    return _summarise(setup, errors, want)


@dataclass(frozen=True)
class _Settings:
    """A measurement's validated settings (no counts read)."""

    grid: TruthGrid | NoisyGrid
    corpus: QueryCorpus
    eps: float
    method: str
    n_draws: int
    floor: float
    clamp: bool
    by: str
    m: NDArray[np.int64]
    labels: pd.Categorical


@dataclass(frozen=True)
class _Setup(_Settings):
    """Everything a measurement needs before its draws (validated; no randomness)."""

    counts: NDArray[np.int64]
    reference_answer: NDArray[np.float64]
    scale: float
    sensitivity: int
    partition_key: str
    n_cells: int
    model: Any
    reference: dict[str, Any]


def check_measure_settings(reference: TruthGrid | NoisyGrid,
                           queries: QueryCorpus | CellIncidence, *, epsilon: float,
                           method: Literal["flat", "hierarchical"] = "flat", levels: int = 4,
                           split: Any = "geometric", draws: int = 200,
                           report_floor: float = 25.0, clamp_negative: bool = True,
                           buckets: ArrayLike = DEFAULT_CELL_BUCKETS,
                           bucket_by: Literal["cells", "area"] = "cells") -> None:
    """Refuse what :func:`measure_query_error` would refuse, without reading any count.

    Call it with the truth grid before releasing the grid a measurement will be
    run against: the released grid has the truth's cells and partition, so
    settings that pass here pass there, and a refusal comes before the charge.

    Parameters
    ----------
    reference, queries, epsilon, method, levels, split, draws, report_floor, \
clamp_negative, buckets, bucket_by
        As in :func:`measure_query_error`.

    Raises
    ------
    InvalidInput, PartitionMismatch
        The refusals of :func:`measure_query_error`.

    Examples
    --------
    >>> import numpy as np
    >>> from spatialdp.geo import Partition
    >>> from spatialdp.queries import query_corpus, truth_grid
    >>> import geopandas as gpd, shapely
    >>> area = gpd.GeoDataFrame(geometry=[shapely.box(-105, 39, -104, 40)], crs=4326)
    >>> cells = Partition.from_h3_cover(area, 5, containment="overlap", name="h3r5")
    >>> truth = truth_grid(cells, lon=np.array([-104.5]), lat=np.array([39.5]),
    ...                    device_ids=np.array([1]))
    >>> corpus = query_corpus(cells, area)
    >>> check_measure_settings(truth, corpus, epsilon=1.0, method="hierarchical", levels=9)
    Traceback (most recent call last):
    ...
    spatialdp.exceptions.InvalidInput: levels=9 is above the limit <= 6; pass 1 to 6 levels \
(the grid is at resolution 5)
    """
    _settings(reference, queries, epsilon=epsilon, method=method, levels=levels, split=split,
              draws=draws, report_floor=report_floor, clamp_negative=clamp_negative,
              buckets=buckets, bucket_by=bucket_by)


def _settings(reference: Any, queries: Any, *, epsilon: float, method: str, levels: int,
              split: Any, draws: int, report_floor: float, clamp_negative: bool,
              buckets: ArrayLike, bucket_by: str) -> _Settings:
    grid = _check_reference(reference)
    corpus = _corpus(grid, queries)
    eps = check_epsilon(epsilon)
    method = check_choice(method, "method", ("flat", "hierarchical"))
    n_draws = check_integer(draws, "draws", low=1, high=100_000,
                            fix="pass a number of simulated releases, e.g. 200")
    floor = ex.check_floor(report_floor)
    clamp = check_flag(clamp_negative, "clamp_negative")
    by = check_choice(bucket_by, "bucket_by", ("cells", "area"))
    m = corpus.cells_per_query
    if by == "area":
        if corpus.polygon_area_km2 is None:
            raise fail("bucket_by", by, "needs polygon areas, which this corpus has not",
                       "build the corpus with query_corpus(partition, frame)")
        size = corpus.polygon_area_km2
    else:
        size = m.astype(np.float64)
    labels = _bucket_labels(size, buckets)
    if method == "hierarchical":
        from spatialdp.queries.hierarchy import check_levels

        check_levels(grid.resolution, eps, levels=levels, split=split)
    return _Settings(grid, corpus, eps, method, n_draws, floor, clamp, by, m, labels)


def _setup(reference: Any, queries: Any, *, epsilon: float, method: str, levels: int,
           split: Any, draws: int, report_floor: float, clamp_negative: bool,
           buckets: ArrayLike, bucket_by: str) -> _Setup:
    """Validate the arguments and compute what every draw shares.

    ``counts`` are the reference's: the truth's, or a released grid's plug-in counts.
    """
    s = _settings(reference, queries, epsilon=epsilon, method=method, levels=levels,
                  split=split, draws=draws, report_floor=report_floor,
                  clamp_negative=clamp_negative, buckets=buckets, bucket_by=bucket_by)
    grid = s.grid
    counts = grid.counts if isinstance(grid, TruthGrid) else plug_in_counts(grid)
    reference_answer = np.asarray(s.corpus.incidence.matrix @ counts, dtype=np.float64)
    scale = LaplaceMechanism(s.eps, float(grid.sensitivity), discrete=True).scale
    model: Any = None
    if s.method == "hierarchical":
        from spatialdp.queries.hierarchy import HierarchyModel

        model = HierarchyModel.build(grid, s.eps, levels=levels, split=split)
    return _Setup(**vars(s), counts=counts, reference_answer=reference_answer, scale=scale,
                  sensitivity=grid.sensitivity, partition_key=grid.partition_key,
                  n_cells=grid.n_cells, model=model, reference=_reference_settings(grid))


def _simulate(setup: _Setup, n_draws: int, gen: np.random.Generator) -> NDArray[np.float64]:
    """Return ``n_draws`` simulated errors per query, shape (n_queries, n_draws).

    The clamp-skip threshold is that of the whole measurement (``setup.n_draws``),
    so draws split into chunks follow the same law as one call.
    """
    matrix = setup.corpus.incidence.matrix
    if setup.method == "flat":
        skip = ex.clamp_skip_threshold(setup.scale, setup.n_cells * setup.n_draws)
        return flat_query_errors(matrix, setup.counts, setup.scale, n_draws,
                                 clamp_negative=setup.clamp, skip_from=skip, gen=gen)
    return np.asarray(setup.model.simulate_errors(matrix, n_draws, clamp_negative=setup.clamp,
                                                  gen=gen, truth=setup.counts))


def _simulate_on_dask(setup: _Setup, gen: np.random.Generator, chunks: int, progress: bool
                      ) -> NDArray[np.float64]:
    """Return the draws of :func:`_simulate` split into chunks on Dask, spawned generators."""
    n_chunks = min(setup.n_draws, check_integer(
        chunks, "chunks", low=1, high=100_000, fix="pass a number of chunks, e.g. 8"))
    sizes = np.diff(np.linspace(0, setup.n_draws, n_chunks + 1).round().astype(np.int64))
    from dask import delayed

    setup_d = delayed(setup, pure=True)
    parts = [delayed(_simulate, pure=False)(setup_d, int(size), g)
             for size, g in zip(sizes, gen.spawn(n_chunks), strict=True)]
    (errors,) = compute(delayed(np.hstack)(parts), progress=progress)
    return np.asarray(errors, dtype=np.float64)


def _monte_carlo_se(err: NDArray[np.float64]) -> dict[str, float]:
    """Monte Carlo standard errors of a bucket's RMS and mean |error|, from its draws.

    The draws (columns) are independent replicates: each gives the bucket's mean
    squared and mean absolute error; their spread over the draws, divided by
    sqrt(draws), is the standard error of the average (the RMS's by the delta
    method, ``se(MSE) / (2 RMS)``). NaN with a single draw.
    """
    draws = err.shape[1]
    if draws < 2:
        return {"rms_se": float("nan"), "mean_abs_error_se": float("nan")}
    mse = (err**2).mean(axis=0)
    mae = np.abs(err).mean(axis=0)
    rms = float(np.sqrt(mse.mean()))
    se_mse = float(mse.std(ddof=1) / np.sqrt(draws))
    return {"rms_se": se_mse / (2 * rms) if rms > 0 else 0.0,
            "mean_abs_error_se": float(mae.std(ddof=1) / np.sqrt(draws))}


def _summarise(setup: _Setup, errors: NDArray[np.float64], expected: bool) -> pd.DataFrame:
    """Return the per-bucket table of simulated errors (and their expectations)."""
    labels, m, answer, floor = setup.labels, setup.m, setup.reference_answer, setup.floor
    counts, corpus, scale, clamp, model = (setup.counts, setup.corpus, setup.scale,
                                           setup.clamp, setup.model)
    rows = []
    for label in labels.categories:
        sel = np.flatnonzero(np.asarray(labels == label))
        if sel.size == 0:
            continue
        err = errors[sel]
        above = sel[(answer[sel] >= floor) & (answer[sel] > 0)]  # a floor of 0: no 0/0
        rel = np.abs(errors[above]) / answer[above, None]
        row: dict[str, Any] = {
            "bucket": str(label), "n_queries": int(sel.size), "mean_cells": float(m[sel].mean()),
            "mean_abs_error": float(np.abs(err).mean()),
            "p95_abs_error": _pooled_quantile(np.abs(err).ravel()),
            "rms": float(np.sqrt((err**2).mean())), "bias": float(err.mean()),
            "n_above_floor": int(above.size),
            "mean_rel_error": float(rel.mean()) if rel.size else float("nan"),
            "p95_rel_error": _pooled_quantile(rel.ravel()),
            **_monte_carlo_se(err),
        }
        if expected:
            row.update(ex.bucket_expectations(
                scale, m[sel], counts, corpus.incidence.matrix[sel], answer[sel], floor,
                clamp=clamp, model=model))
        rows.append(row)
    frame = pd.DataFrame(rows).reindex(columns=COLUMNS if expected else
                                       [c for c in COLUMNS if not c.startswith("expected")])
    frame.attrs.update(method=setup.method, epsilon=setup.eps, draws=int(errors.shape[1]),
                       report_floor=floor, clamp_negative=clamp, bucket_by=setup.by,
                       scale=scale, sensitivity=setup.sensitivity,
                       partition=setup.partition_key, simulated=True, **setup.reference)
    return frame
