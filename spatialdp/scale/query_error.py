"""Query-error measurement split across Dask workers by noise draws.

:func:`spatialdp.queries.measure_query_error` simulates ``draws`` releases;
the draws are independent, so they split into chunks. Each chunk runs on a
worker with its own generator, spawned from ``rng`` (:meth:`numpy.random.Generator.spawn`:
independent streams by construction), and returns its error matrix (queries x
chunk: bounded by the corpus and the chunk, not the data). The driver joins the
matrices and summarises them with the in-memory code, so every figure has the
same law as the single-machine measurement. The draws depend on ``rng`` and
``chunks`` only, never on the number of workers: the same seed and chunking
give the same table on 1 worker or 100.

The reference follows the same rule as in memory, decided by its type alone:
a released :class:`~spatialdp.queries.NoisyGrid` is a plug-in truth and the
table may be published; the :class:`~spatialdp.queries.TruthGrid` gives an
INTERNAL table (``attrs["internal"]``), refused by every publishing helper.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from spatialdp._random import RandomLike, as_generator
from spatialdp._validation import check_flag, check_integer
from spatialdp.queries.corpus import QueryCorpus
from spatialdp.queries.grids import NoisyGrid
from spatialdp.queries.measure import (
    DEFAULT_CELL_BUCKETS,
    _Setup,
    _setup,
    _simulate,
    _summarise,
)
from spatialdp.queries.truth import TruthGrid
from spatialdp.scale.frames import compute

__all__ = ["measure_query_error"]


def _chunk(setup: _Setup, n_draws: int, gen: np.random.Generator) -> NDArray[np.float64]:
    return _simulate(setup, n_draws, gen)


def measure_query_error(
    reference: TruthGrid | NoisyGrid,
    queries: QueryCorpus | Any,
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
    """Measure query error per bucket with the draws spread over Dask workers.

    Same arguments and table as :func:`spatialdp.queries.measure_query_error`
    (which calls this with ``engine="dask"``), the same reference rule (a
    released grid is a publishable plug-in truth, the truth grid gives an
    INTERNAL table); the figures are identical in distribution. Runs on the
    active ``distributed.Client`` or, without one, on dask's local scheduler.
    The reference's counts and the corpus are shipped to each worker once.

    Parameters
    ----------
    chunks : int, optional
        Number of chunks the draws are split into (default: 8, at most
        ``draws``). The result depends on ``rng`` and ``chunks``, not on the
        number of workers.
    progress : bool, default False
        Print a progress bar.

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
    >>> report = measure_query_error(grid, corpus, epsilon=1.0, rng=0, chunks=4)
    >>> int(report.n_queries.sum()), report.attrs["draws"], report.attrs["internal"]
    (1, 200, False)
    >>> measure_query_error(truth, corpus, epsilon=1.0, rng=0, chunks=4).attrs["internal"]
    True
    """
    setup = _setup(reference, queries, epsilon=epsilon, method=method, levels=levels, split=split,
                   draws=draws, report_floor=report_floor, clamp_negative=clamp_negative,
                   buckets=buckets, bucket_by=bucket_by)
    want = check_flag(expected, "expected")
    show = check_flag(progress, "progress")
    n_chunks = min(setup.n_draws, 8 if chunks is None else check_integer(
        chunks, "chunks", low=1, high=100_000, fix="pass a number of chunks, e.g. 8"))
    gens = as_generator(rng).spawn(n_chunks)
    sizes = np.diff(np.linspace(0, setup.n_draws, n_chunks + 1).round().astype(np.int64))
    from dask import delayed

    setup_d = delayed(setup, pure=True)
    parts = [delayed(_chunk, pure=False)(setup_d, int(size), gen)
             for size, gen in zip(sizes, gens, strict=True)]
    (errors,) = compute(delayed(np.hstack)(parts), progress=show)
    return _summarise(setup, np.asarray(errors, dtype=np.float64), want)
