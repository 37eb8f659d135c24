"""How wrong are the answers? Error per bucket of a query corpus, next to its expectation.

:func:`measure_query_error` simulates the release many times (seeded: this is
the simulation path, nothing is published or charged) against the truth grid
and reports, per bucket of the corpus (by cell count or by area): mean and p95
absolute error, mean and p95 relative error on queries whose true answer is at
least ``report_floor``, the signed bias, the RMS, and next to each the
analytic expectation (exact for a flat release; for a hierarchical one the RMS
is exact on every query and the mean absolute error and p95 come from the
exact laws of up to 12 evenly spaced queries per bucket, see
:mod:`~spatialdp.queries.weighted_sum`).

The flat simulation is exact per query and fast (:mod:`~spatialdp.queries.sampling`):
one pair of negative binomial draws per query and draw for the cells clamping
cannot touch, cell-by-cell draws only for sparse cells.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from spatialdp._random import RandomLike, as_generator
from spatialdp._validation import (
    check_choice,
    check_epsilon,
    check_flag,
    check_instance,
    check_integer,
    fail,
)
from spatialdp.exceptions import PartitionMismatch
from spatialdp.geo import CellIncidence
from spatialdp.privacy import LaplaceMechanism
from spatialdp.queries import expectations as ex
from spatialdp.queries.corpus import QueryCorpus, corpus_from_incidence
from spatialdp.queries.sampling import flat_query_errors
from spatialdp.queries.truth import TruthGrid

__all__ = ["DEFAULT_CELL_BUCKETS", "measure_query_error"]

#: Default bucket edges by cell count: powers of 4 (1, 4, 16, ... cells).
DEFAULT_CELL_BUCKETS = tuple(4**i for i in range(13))

COLUMNS = ["bucket", "n_queries", "mean_cells", "mean_abs_error", "expected_mean_abs_error",
           "p95_abs_error", "expected_p95_abs_error", "rms", "expected_rms", "bias",
           "expected_bias", "n_above_floor", "mean_rel_error", "expected_mean_rel_error",
           "p95_rel_error"]


def _corpus(truth: TruthGrid, queries: Any) -> QueryCorpus:
    if isinstance(queries, CellIncidence):
        queries = corpus_from_incidence(queries)
    if not isinstance(queries, QueryCorpus):
        raise fail("queries", queries, "is not a QueryCorpus or CellIncidence",
                   "convert polygons with query_corpus(partition, frame)")
    if queries.partition_version != truth.partition_version:
        raise PartitionMismatch(
            f"the queries were converted on partition version {queries.partition_version!r}, "
            f"but the truth grid is {truth.partition_key!r}; convert them on the truth's "
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
    truth: TruthGrid,
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
    engine: Literal["memory", "dask"] = "memory",
) -> pd.DataFrame:
    """Measure the error of a query corpus's answers against the truth, per bucket.

    Parameters
    ----------
    truth : TruthGrid
        The unprotected clipped counts (the reference).
    queries : QueryCorpus or CellIncidence
        The corpus, converted on the truth's partition.
    epsilon : float
        Privacy loss of the release being measured (the whole grid).
    method : {"flat", "hierarchical"}
    levels, split
        Of the hierarchical release (see :func:`release_hierarchical`).
    draws : int, default 200
        Simulated releases.
    report_floor : float, default 25
        Relative errors are reported only on queries whose true answer is at
        least this (relative error on a handful of devices means nothing).
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
    engine : {"memory", "dask"}, default "memory"
        ``"dask"`` splits the draws across the workers of the active
        ``distributed.Client`` (or dask's local scheduler):
        :func:`spatialdp.scale.measure_query_error`, identical in distribution,
        seeded from ``rng`` through spawned seed sequences.

    Returns
    -------
    pandas.DataFrame
        One row per non-empty bucket: ``bucket``, ``n_queries``, ``mean_cells``,
        ``mean_abs_error``, ``p95_abs_error``, ``rms``, ``bias`` (mean signed error),
        ``n_above_floor``, ``mean_rel_error``, ``p95_rel_error``, and the
        ``expected_*`` figures next to them. ``attrs`` records the settings.

    Raises
    ------
    InvalidInput
        Bad arguments; an area bucketing without polygon areas.
    PartitionMismatch
        Queries of another partition version.

    Examples
    --------
    >>> import geopandas as gpd, shapely
    >>> from spatialdp.geo import Partition
    >>> from spatialdp.queries import query_corpus, truth_grid
    >>> area = gpd.GeoDataFrame(geometry=[shapely.box(-100, 40, -99, 41)], crs=4326)
    >>> part = Partition.from_h3_cover(area, 6)
    >>> lon, lat = np.linspace(-99.9, -99.1, 500), np.linspace(40.1, 40.9, 500)
    >>> truth = truth_grid(part, lon=lon, lat=lat, device_ids=np.arange(500))
    >>> corpus = query_corpus(part, gpd.GeoSeries([shapely.box(-99.8, 40.2, -99.2, 40.8)],
    ...                                          crs=4326))
    >>> report = measure_query_error(truth, corpus, epsilon=1.0, clamp_negative=False, rng=0)
    >>> int(report.n_queries.sum()), report.expected_bias.tolist()
    (1, [0.0])
    """
    if engine != "memory":
        check_choice(engine, "engine", ("memory", "dask"))
        from spatialdp.scale.query_error import measure_query_error as on_dask

        return on_dask(truth, queries, epsilon=epsilon, method=method, levels=levels,
                       split=split, draws=draws, report_floor=report_floor,
                       clamp_negative=clamp_negative, buckets=buckets, bucket_by=bucket_by,
                       expected=expected, rng=rng)
    setup = _setup(truth, queries, epsilon=epsilon, method=method, levels=levels, split=split,
                   draws=draws, report_floor=report_floor, clamp_negative=clamp_negative,
                   buckets=buckets, bucket_by=bucket_by)
    gen = as_generator(rng)
    return _summarise(setup, _simulate(setup, setup.n_draws, gen), expected)


@dataclass
class _Setup:
    """Everything a measurement needs before its draws (validated; no randomness)."""

    corpus: QueryCorpus
    eps: float
    method: str
    n_draws: int
    floor: float
    clamp: bool
    by: str
    m: NDArray[np.int64]
    labels: pd.Categorical
    counts: NDArray[np.int64]
    true_answer: NDArray[np.float64]
    scale: float
    sensitivity: int
    partition_key: str
    n_cells: int
    model: Any


def _setup(truth: TruthGrid, queries: Any, *, epsilon: float, method: str, levels: int,
           split: Any, draws: int, report_floor: float, clamp_negative: bool,
           buckets: ArrayLike, bucket_by: str) -> _Setup:
    """Validate the arguments and compute what every draw shares."""
    truth = check_instance(truth, "truth", TruthGrid, "build it with truth_grid(...)")
    corpus = _corpus(truth, queries)
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
    counts = truth.counts
    true_answer = np.asarray(corpus.incidence.matrix @ counts, dtype=np.float64)
    scale = LaplaceMechanism(eps, float(truth.sensitivity), discrete=True).scale
    model: Any = None
    if method == "hierarchical":
        from spatialdp.queries.hierarchy import HierarchyModel

        model = HierarchyModel.build(truth, eps, levels=levels, split=split)
    return _Setup(corpus, eps, method, n_draws, floor, clamp, by, m, labels, counts,
                  true_answer, scale, truth.sensitivity, truth.partition_key, truth.n_cells,
                  model)


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


def _summarise(setup: _Setup, errors: NDArray[np.float64], expected: bool) -> pd.DataFrame:
    """Return the per-bucket table of simulated errors (and their expectations)."""
    labels, m, true_answer, floor = setup.labels, setup.m, setup.true_answer, setup.floor
    counts, corpus, scale, clamp, model = (setup.counts, setup.corpus, setup.scale,
                                           setup.clamp, setup.model)
    rows = []
    for label in labels.categories:
        sel = np.flatnonzero(np.asarray(labels == label))
        if sel.size == 0:
            continue
        err = errors[sel]
        above = sel[true_answer[sel] >= floor]
        rel = np.abs(errors[above]) / true_answer[above, None]
        row: dict[str, Any] = {
            "bucket": str(label), "n_queries": int(sel.size), "mean_cells": float(m[sel].mean()),
            "mean_abs_error": float(np.abs(err).mean()),
            "p95_abs_error": _pooled_quantile(np.abs(err).ravel()),
            "rms": float(np.sqrt((err**2).mean())), "bias": float(err.mean()),
            "n_above_floor": int(above.size),
            "mean_rel_error": float(rel.mean()) if rel.size else float("nan"),
            "p95_rel_error": _pooled_quantile(rel.ravel()),
        }
        if expected:
            row.update(ex.bucket_expectations(
                scale, m[sel], counts, corpus.incidence.matrix[sel], true_answer[sel], floor,
                clamp=clamp, model=model))
        rows.append(row)
    frame = pd.DataFrame(rows).reindex(columns=COLUMNS if expected else
                                       [c for c in COLUMNS if not c.startswith("expected")])
    frame.attrs.update(method=setup.method, epsilon=setup.eps, draws=int(errors.shape[1]),
                       report_floor=floor, clamp_negative=clamp, bucket_by=setup.by,
                       scale=scale, sensitivity=setup.sensitivity,
                       partition=setup.partition_key, simulated=True)
    return frame
