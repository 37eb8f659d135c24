"""The interactive coverage map (``GeoDataFrame.explore``; optional extra: ``folium``).

Same encoding as :func:`~spatialdp.sampling.plots.plot_coverage_map`: colour is
the clients sampled this epoch; blind spots are white with red stripes and say
so in their tooltip (never a colour at the bottom of the scale); merged strata
get one orange outline per group and name their group in the tooltip.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from spatialdp._validation import fail
from spatialdp.sampling.coverage import Coverage

if TYPE_CHECKING:
    import folium

__all__ = ["explore_coverage"]


def explore_coverage(coverage: Coverage, **kwargs: Any) -> folium.Map:
    """Return an interactive folium map of a :class:`Coverage`, by stratum.

    Parameters
    ----------
    coverage : Coverage
    **kwargs
        Passed to :meth:`geopandas.GeoDataFrame.explore` (``tiles``, ``cmap``, ``m``...).

    Returns
    -------
    folium.Map

    Examples
    --------
    >>> from spatialdp.privacy.target import Simulation
    >>> from spatialdp.sampling import (ParticipationPolicy, StratifiedSampler,
    ...                                 epoch_coverage, row_strata)
    >>> strata, fleet = row_strata({"a": 300, "b": 40, "c": 3})
    >>> policy = ParticipationPolicy(participation_cap=1, epsilon_per_round=0.1,
    ...                              rounds_per_epoch=1)
    >>> sampler = StratifiedSampler(strata, cohort=20, policy=policy)
    >>> state = sampler.new_state(fleet, target=Simulation(rng=0))
    >>> _ = sampler.select(state, 0)
    >>> m = explore_coverage(epoch_coverage(sampler, state))
    >>> "merged: b+c" in m.get_root().render()
    True
    """
    if not isinstance(coverage, Coverage):
        raise fail("coverage", coverage, f"is a {type(coverage).__name__}, not a Coverage",
                   "pass epoch_coverage(sampler, state)")
    import folium
    from folium.plugins import StripePattern

    frame = coverage.to_geodataframe()
    blind = frame.blind_spot.astype(bool).to_numpy() & (frame.population.to_numpy() > 0)
    shown = frame.copy()
    shown["stratum"] = [str(i) for i in shown.index]
    shown["coverage"] = np.where(
        blind, "BLIND SPOT: clients, none sampled this epoch",
        np.where(frame.population.to_numpy() == 0, "no clients in the fleet", "sampled"))
    shown["merge"] = np.where(frame.merged.astype(bool), "merged: " + frame.group.astype(str),
                              "")
    shown["sampled"] = shown.clients_sampled.where(~blind & (frame.population > 0))
    fields = ["stratum", "coverage", "clients_sampled", "selections", "population", "merge"]
    options: dict[str, Any] = {
        "column": "sampled", "cmap": "viridis", "tooltip": fields,
        "style_kwds": {"color": "#555555", "weight": 1},
        "missing_kwds": {"color": "#ffffff", "label": "blind spot / no clients"},
        "legend_kwds": {"caption": f"clients sampled in epoch {coverage.epoch} (>= 1)"},
    }
    options.update(kwargs)
    m = shown[[*fields, "sampled", shown.geometry.name]].explore(**options)
    if blind.any():
        stripes = StripePattern(angle=45, color="#c0392b", space_color="#ffffff",
                                opacity=0.9, space_opacity=0.9, weight=2, space_weight=3)
        stripes.add_to(m)
        folium.GeoJson(shown[blind][[shown.geometry.name]].to_json(), name="blind spots",
                       style_function=lambda _f: {"fillPattern": stripes, "color": "#c0392b",
                                                  "weight": 1, "fillOpacity": 1.0},
                       interactive=False).add_to(m)
    merged = shown[shown.merged.astype(bool)]
    if len(merged):
        groups = merged.dissolve(by="group")
        groups["merge"] = ["merged: " + str(g) for g in groups.index]
        folium.GeoJson(groups[["merge", groups.geometry.name]].to_json(), name="merged strata",
                       style_function=lambda _f: {"color": "#ff7f0e", "weight": 4,
                                                  "fillOpacity": 0.0},
                       tooltip=folium.GeoJsonTooltip(fields=["merge"])).add_to(m)
    return m
