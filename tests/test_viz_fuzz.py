"""Junk-argument fuzzing of the map and file API added for the analyst's maps.

Same contract as ``tests/test_fuzz.py`` (whose ``FUZZ`` table can take :data:`VIZ_FUZZ`
as it is): any input either works and keeps the result's promises, or is refused with
a SpatialDPError; never a bare TypeError, KeyError or a stray warning.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pandas as pd
import pytest
from hypothesis import strategies as st

from spatialdp import viz
from spatialdp.federated import HistogramSpec, MetricSpec
from tests.test_fuzz_support import (
    Call,
    arg,
    base_regional,
    flag,
    fuzz_only_spatialdp_errors,
    maybe,
    mutated,
    number,
)

TMP = tempfile.mkdtemp(prefix="spatialdp-fuzz-viz-")
metrics = arg(st.sampled_from(["loss", "err", "ratio"]), "nope", ["loss"])
schemes = arg(st.sampled_from(["quantiles", "separable", "equal_interval", "user_defined"]),
              "jenks", "")


def _frame() -> pd.DataFrame:
    return base_regional()["loss"]


def _call(name_: str, fn: Callable[..., Any], *args: Any,
          check: Callable[[Any], None] | None = None, **kwargs: Any) -> Call:
    return Call(name_, fn, args, kwargs, check)


@st.composite
def classify_calls(draw: st.DrawFn) -> Call:
    def check(out: Any) -> None:
        assert int(out.counts.sum()) == int((out.yb >= 0).sum())
        grades = out.separability.separability.dropna()
        assert ((grades >= 0) & (grades <= 1)).all()

    return _call("classify_report", viz.classify_report,
                 draw(arg(mutated(_frame(), protect=("geometry",)))),
                 column=draw(arg(st.sampled_from(["value", "ci_low"]), "reliability", "nope")),
                 scheme=draw(schemes), k=draw(arg(number(2, 6, integer=True), 1, 0, 10**9)),
                 classification_kwds=draw(maybe(arg(st.sampled_from(
                     [{"bins": [0.5, 1.0]}, {"min_size": 1}]), {"bins": "x"}, {3: 1},
                     {"min_size": -1}))), check=check)


@st.composite
def significance_calls(draw: st.DrawFn) -> Call:
    def check(out: pd.DataFrame) -> None:
        assert set(out.verdict) <= {"above", "below", "not different", "suppressed"}

    return _call("significance_table", viz.significance_table,
                 draw(arg(mutated(_frame(), protect=("geometry",)))),
                 draw(arg(number(0, 3))), alpha=draw(arg(number(0.001, 0.5))),
                 national_error_bar=draw(maybe(arg(number(0, 1)))),
                 sampling_sd=draw(arg(number(0, 1))),
                 adjust=draw(maybe(arg(st.just("bonferroni"), "holm"))), check=check)


@st.composite
def plot_significance_calls(draw: st.DrawFn) -> Call:
    return _call("plot_significance", viz.plot_significance,
                 draw(arg(mutated(_frame(), protect=("geometry",)))),
                 draw(arg(number(0, 3))), alpha=draw(arg(number(0.001, 0.5))),
                 projection=draw(arg(st.sampled_from(["auto", None]), "nope")),
                 legend=draw(flag()), title=draw(maybe(arg(st.just("t")))),
                 figsize=draw(arg(st.just((4.0, 3.0)), (0, 1))))


@st.composite
def moe_calls(draw: st.DrawFn) -> Call:
    return _call("plot_moe_companion", viz.plot_moe_companion,
                 draw(arg(mutated(_frame(), protect=("geometry",)))),
                 cmap=draw(arg(st.just("viridis"), "nope")),
                 moe_cmap=draw(arg(st.just("Oranges"), "nope")),
                 figsize=draw(arg(st.just((8.0, 3.0)), (0, 1), (1e6, 1))),
                 value_kwds=draw(maybe(arg(st.just({"scheme": "quantiles"}), {"nope": 1}))))


@st.composite
def bivariate_calls(draw: st.DrawFn) -> Call:
    return _call("plot_bivariate", viz.plot_bivariate,
                 draw(arg(mutated(_frame(), protect=("geometry",)))),
                 scheme=draw(schemes), k=draw(arg(number(2, 4, integer=True), 1, 12)),
                 cmap=draw(arg(st.just("viridis"), "nope")), legend=draw(flag()),
                 figsize=draw(arg(st.just((5.0, 3.0)), (0, 1))))


@st.composite
def plotting_crs_calls(draw: st.DrawFn) -> Call:
    return _call("plotting_crs", viz.plotting_crs,
                 draw(arg(mutated(_frame(), protect=("geometry",)))),
                 projection=draw(arg(st.sampled_from(["auto", None, "EPSG:3857"]), "nope",
                                     4326)))


@st.composite
def report_plot_calls(draw: st.DrawFn) -> Call:
    report = base_regional()
    return _call("RegionalReport.plot", report.plot, draw(metrics),
                 draw(arg(st.sampled_from(["value", "error_bar"]), "nope")),
                 kind=draw(arg(st.sampled_from(["map", "moe", "bivariate"]), "bars")),
                 **({"scheme": draw(schemes)} if draw(st.booleans()) else {}))


@st.composite
def report_explore_calls(draw: st.DrawFn) -> Call:
    return _call("RegionalReport.explore", base_regional().explore, draw(metrics),
                 draw(arg(st.sampled_from(["value", "cohort"]), "nope")))


@st.composite
def report_to_long_calls(draw: st.DrawFn) -> Call:
    def check(out: pd.DataFrame) -> None:
        assert list(out.columns[:4]) == ["region_id", "metric", "statistic", "estimate"]

    report = draw(st.just(base_regional()))
    return _call("RegionalReport.to_long", report.to_long, check=check)


@st.composite
def report_column_names_calls(draw: st.DrawFn) -> Call:
    def check(out: dict[str, str]) -> None:
        assert len(set(out.values())) == len(out)

    return _call("RegionalReport.column_names", base_regional().column_names,
                 draw(arg(st.sampled_from(["sql", "dotted"]), "camel")), check=check)


@st.composite
def report_write_calls(draw: st.DrawFn) -> Call:
    return _call("RegionalReport.write", base_regional().write, TMP,
                 draw(arg(st.sampled_from(["r", "s1"]))),
                 names=draw(arg(st.sampled_from(["sql", "dotted"]), "camel")),
                 layout=draw(arg(st.sampled_from(["wide", "long"]), "pivot")))


@st.composite
def describe_calls(draw: st.DrawFn) -> Call:
    spec = draw(st.sampled_from([MetricSpec("loss", 0.0, 1.0, label="l", unit="m"),
                                 HistogramSpec("h", (1.0, 2.0), label="e", unit="m")]))
    name = ("MetricSpec.describe" if isinstance(spec, MetricSpec)
            else "HistogramSpec.describe")
    return _call(name, spec.describe, check=lambda out: out["name"] and None)


@st.composite
def spec_label_calls(draw: st.DrawFn) -> Call:
    return _call("MetricSpec", MetricSpec, "loss", 0.0, 1.0,
                 label=draw(maybe(arg(st.just("loss"), "", 3, b"x"))),
                 unit=draw(maybe(arg(st.just("m"), "", np.nan))))


#: Entries for ``tests/test_fuzz.py``'s ``FUZZ`` table: name -> (strategy, examples).
VIZ_FUZZ: dict[str, tuple[Callable[[], st.SearchStrategy[Call]], int]] = {
    "classify_report": (classify_calls, 25),
    "significance_table": (significance_calls, 20),
    "plot_significance": (plot_significance_calls, 10),
    "plot_moe_companion": (moe_calls, 8),
    "plotting_crs": (plotting_crs_calls, 15),
    "plot_bivariate": (bivariate_calls, 12),
    "RegionalReport.plot": (report_plot_calls, 10),
    "RegionalReport.explore": (report_explore_calls, 6),
    "RegionalReport.to_long": (report_to_long_calls, 2),
    "RegionalReport.column_names": (report_column_names_calls, 8),
    "RegionalReport.write": (report_write_calls, 8),
    "MetricSpec.describe": (describe_calls, 2),
    "HistogramSpec.describe": (describe_calls, 2),
    "MetricSpec": (spec_label_calls, 10),
}


@pytest.mark.slow  # a long fuzz run (hypothesis, every public callable)
@pytest.mark.parametrize("name", sorted(VIZ_FUZZ))
def test_only_spatialdp_errors(name: str) -> None:
    fuzz_only_spatialdp_errors(*VIZ_FUZZ[name])


