"""The model card as Markdown for people: figures by relative path, tables, provenance.

Rendered from the card's JSON content only, so the Markdown and the JSON never
disagree. Every section heading carries its provenance in brackets
(``[release]``, ``[simulation]``, ``[bookkeeping]``...), and a card holding any
simulation says so at the top.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from spatialdp.cards._sections import blind_text, card_relations

__all__ = ["render_markdown"]

_TAG = {"release": "release: noised, charged to the ledger",
        "simulation": "SIMULATION: not a release",
        "unaccounted": "UNACCOUNTED: noised, charged to no ledger",
        "bookkeeping": "bookkeeping: exact public parameters and records, no noise"}


def _fmt(value: Any, digits: int = 4) -> str:
    """Format a number for a table (``-`` for missing)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return _cell(str(value))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_fmt(v) if not isinstance(v, str) else _cell(v) for v in row)
            + " |" for row in rows]
    return [*out, ""]


def _heading(level: int, text: str, provenance: str | None = None) -> list[str]:
    tag = f" [{_TAG[provenance]}]" if provenance else ""
    return [f"{'#' * level} {text}{tag}", ""]


def _bullets(items: Sequence[str]) -> list[str]:
    return [*(f"- {i}" for i in items), ""] if items else ["- none", ""]


def _details(c: Mapping[str, Any]) -> list[str]:
    d = c["model_details"]
    out = _heading(2, "Model details")
    out.append(f"- **Name:** {d.get('name')}")
    out.append(f"- **Overview:** {d.get('overview')}")
    for key, label in (("version", "Version"), ("license", "License"),
                       ("documentation", "Documentation")):
        if d.get(key):
            out.append(f"- **{label}:** {d[key]}")
    if d.get("owners"):
        out.append(f"- **Owners:** {', '.join(d['owners'])}")
    for ref in d.get("references", []):
        out.append(f"- **Reference:** {ref}")
    known = {"name", "overview", "version", "license", "documentation", "owners", "references"}
    for key, value in d.items():
        if key not in known and value not in (None, "", []):
            out.append(f"- **{key}:** {value}")
    out.append(f"- **Written by:** spatialdp {c['spatialdp_version']}, {c['created']}")
    return [*out, ""]


def _considerations(c: Mapping[str, Any]) -> list[str]:
    k = c["considerations"]
    out = _heading(2, "Intended use")
    out += ["**Primary uses**", "", *_bullets(k["primary_uses"])]
    out += ["**Primary users**", "", *_bullets(k["primary_users"])]
    out += ["**Out of scope**", "", *_bullets(k["out_of_scope"])]
    out += _heading(2, "Limitations") + _bullets(k["limitations"])
    out += _heading(2, "Ethical considerations") + _bullets(k["ethical_considerations"])
    return out


def _provenance(c: Mapping[str, Any]) -> list[str]:
    p = c["provenance"]
    rounds = c["quantitative_analysis"]["rounds"]
    out: list[str] = []
    simulated = [k for k, v in p["simulated"].items() if v]
    sim_rounds = [("unnumbered" if r["round_index"] is None else str(r["round_index"]))
                  for r in rounds if r["provenance"] == "simulation"]
    if sim_rounds:
        out += [f"> **SIMULATION.** Rounds {', '.join(sim_rounds)} are seeded simulations: "
                "not releases; never publish their numbers as results.", ""]
    if simulated:
        out += [f"> **SIMULATED INPUTS** ({', '.join(simulated)}): the numbers describe a "
                "simulation, not real devices. Rounds marked *release* were still noised "
                "and charged to the ledger as real releases are.", ""]
    out += _heading(2, "Where the numbers come from")
    out += [f"- **{k}**: {v}" for k, v in p["legend"].items()]
    out.append("")
    if p["simulated"]:
        out += _table(["input", "simulated", "seed"],
                      [[k, "yes" if v else "no", _fmt(p["seeds"].get(k))]
                       for k, v in p["simulated"].items()])
    elif p["seeds"]:
        out += _table(["input", "seed"], [[k, _fmt(v)] for k, v in p["seeds"].items()])
    return out


def _geography(c: Mapping[str, Any]) -> list[str]:
    g = c["geography"]
    part = g["partition"]
    out = _heading(2, "Geography and metric specs", g["provenance"])
    res = "" if part.get("resolution") is None else f", H3 resolution {part['resolution']}"
    out += [f"Partition **{part['name']}**, version `{part['version']}` "
            f"({part['kind']}, {_fmt(part.get('n_regions'))} regions{res}). Results of "
            "another partition version are not comparable with these.", ""]
    rows = []
    for s in g["specs"]:
        if s["kind"] == "histogram":
            bounds = "edges " + ", ".join(f"{e:g}" for e in s.get("edges", []))
            bounds += f"; mass cap {s.get('mass_cap', 1.0):g}"
        else:
            bounds = f"[{s.get('clip_low', 0.0):g}, {s.get('clip_high', 0.0):g}]"
            if s.get("present"):
                bounds += f" (ratio, present: {s['present']})"
        rows.append([_title(s), s["kind"], f"`{s['key']}`", s["version"],
                     f"`{s['fingerprint']}`", bounds, s.get("sensitivity"),
                     s.get("sensitivity_add_remove")])
    if rows:
        out += ["Histogram edge versions are the spec version plus the digest of the edges "
                "in the key (`name@version:digest`).", ""]
        out += _table(["metric", "kind", "key", "version", "fingerprint", "clip range / edges",
                       "sensitivity (replace-one)", "sensitivity (add/remove)"], rows)
    return out


def _title(spec: Mapping[str, Any]) -> str:
    """Return ``label (unit)`` of a spec entry, or its name."""
    head = spec.get("label") or spec["name"]
    return f"{head} ({spec['unit']})" if spec.get("unit") else str(head)


def _merges_table(merges: Sequence[Mapping[str, Any]]) -> list[str]:
    if not merges:
        return ["No merges.", ""]
    return _table(["members", "merged into", "round", "reason"],
                  [["+".join(m["members"]), "+".join(m["into"]), _fmt(m.get("round_index")),
                    m["reason"]] for m in merges])


def _sampling(c: Mapping[str, Any]) -> list[str]:
    s = c["sampling"]
    if s is None:
        return []
    out = _heading(2, "Strata and merges", s["provenance"])
    st = s["strata"]
    if st:
        out += [f"Strata `{st.get('key')}` (basis {st.get('basis')}, "
                f"{_fmt(st.get('n_strata'))} strata, version `{st.get('version')}`).", ""]
    if card_relations(c["quantitative_analysis"]["rounds"], c.get("privacy")) == ["add_remove"]:
        return [*out, "Merges of strata are decided on exact pool sizes: under add/remove "
                "neighbours they stay on the server and are not published.", ""]
    out += ["Every merge with its reason (exact: under replace-one neighbours participation "
            "is public; the floor is public):", ""]
    return out + _merges_table(s["merges"])


def _share(value: Any) -> str:
    return "-" if value is None else f"{value:.0%}"


def _coverage(c: Mapping[str, Any]) -> list[str]:
    cov = c["coverage"]
    if cov is None:  # said, not left out: a reader must not take silence for full coverage
        return [*_heading(2, "Coverage"),
                "Not recorded for this run: it selected no cohorts (e.g. a report of client "
                "reports selected elsewhere), or no coverage was given to the card. The card "
                "cannot say which strata, regions or cells were reached; the card of the run "
                "that selected the cohorts can.", ""]
    if cov["provenance"] == "release":
        return _released_coverage(cov)
    out = _heading(2, "Coverage", cov["provenance"])
    if cov.get("map"):
        out += [f"![Coverage map: clients sampled per stratum; blind spots hatched; merged "
                f"strata outlined]({cov['map']})", ""]
    out.append(f"- Epoch {_fmt(cov.get('epoch'))}, strata `{cov.get('strata')}`")
    out.append(f"- Share of strata with any sampled client: "
               f"**{_share(cov['share_strata_sampled'])}**")
    if cov.get("share_regions_sampled") is not None:
        out.append(f"- Share of report regions with any sampled client: "
                   f"**{_share(cov['share_regions_sampled'])}** of "
                   f"{_fmt(cov.get('n_regions'))}")
    # One denominator for the cells: those with clients when the card knows them (an
    # empty cell can be neither reached nor blind; the coverage map counts the same).
    if cov.get("share_populated_cells_sampled") is not None:
        out.append(f"- Share of H3 cells with clients that had a sampled client: "
                   f"**{_share(cov['share_populated_cells_sampled'])}** "
                   f"({_fmt(cov.get('populated_cells_sampled'))} of "
                   f"{_fmt(cov.get('cells_with_clients'))} cells with clients; cells with "
                   "no client are neither reached nor blind)")
    elif cov.get("share_cells_sampled") is not None:
        out.append(f"- Share of H3 cells with any sampled client: "
                   f"**{_share(cov['share_cells_sampled'])}** ({_fmt(cov.get('cells_sampled'))}"
                   f" of {_fmt(cov.get('n_cells'))} cells of the partition, cells with no "
                   "client included: the card has no per-cell client counts)")
    if cov.get("epsilon_per_client") is not None:
        out.append(f"- Per-client epsilon of the epoch's selection policy: "
                   f"{_fmt(cov['epsilon_per_client'])}")
    out += _blind_overview(cov)
    out += _blind_spots("**Blind spots** (strata with no sampled client this epoch):",
                        cov["blind_spots"], cov, "devices, none sampled")
    if cov.get("regions_table") is not None:
        out += ["**Blind regions** (report regions with clients but none sampled):", ""]
        out += _bullets(cov.get("blind_regions", []))
    hist = cov["score_history"]
    if hist:
        out += ["**Coverage score history** (1.0: seats match the square-root allocation):",
                ""]
        out += _table(["epoch", "round", "score"],
                      [[_fmt(h.get("epoch")), _fmt(h["round_index"]), f"{h['score']:.3f}"]
                       for h in hist])
    if cov.get("alerts"):
        out += ["**Alerts**", ""]
        out += _table(["kind", "where", "what to check"],
                      [[a["kind"], a.get("region_id") or "-", a.get("hint", "")]
                       for a in cov["alerts"]])
    if cov.get("strata_table"):
        out += ["**Per stratum** (clients sampled this epoch, exact):", ""]
        out += _table(["stratum", "group", "clients sampled", "blind spot"],
                      [[r["stratum"], r.get("group", r["stratum"]), r["clients_sampled"],
                        "yes" if r["blind_spot"] else "no"] for r in cov["strata_table"]])
    return out


def _blind_overview(cov: Mapping[str, Any]) -> list[str]:
    """Return one line with the blind spots of every level, each over its one denominator."""
    text = blind_text(cov.get("blind_summary"))
    if not text:
        return []
    return ["", f"**Blind spots at every level** (the coverage map counts the same): {text}.",
            ""]


def _blind_spots(title: str, blind: Sequence[str], cov: Mapping[str, Any], what: str
                 ) -> list[str]:
    """Return the blind strata or regions under ``title``, then the section's blind cells."""
    return ["", title, "", *_bullets(blind), *_blind_cells(cov.get("blind_cells") or [], what)]


def _blind_cells(cells: Sequence[str], what: str) -> list[str]:
    if not cells:
        return []
    shown = ", ".join(f"`{c}`" for c in cells[:30])
    more = f" and {len(cells) - 30:,} more (all in the JSON card)" if len(cells) > 30 else ""
    return [f"**Blind H3 cells** ({what}): {shown}{more}", ""]


def _released_coverage(cov: Mapping[str, Any]) -> list[str]:
    """Render the coverage of an add/remove run: released noised counts of clients sampled."""
    out = _heading(2, "Coverage", cov["provenance"])
    if cov.get("map"):
        out += [f"![Coverage map: noised count of clients sampled per region and per H3 cell; "
                f"not confirmed reached hatched]({cov['map']})", ""]
    out += [f"Epoch {_fmt(cov.get('epoch'))}: the number of distinct clients sampled per "
            f"region and per H3 cell, released with epsilon {_fmt(cov['epsilon'])} "
            f"({cov['neighbours']} neighbours). A region or cell is *confirmed reached* when "
            "its noised count clears its error bar; below it, few clients and none look "
            "alike, so it is *not confirmed*, never 'empty'.", ""]
    out.append(f"- Report regions confirmed reached: **{cov['regions_confirmed']}** of "
               f"{cov['n_regions']} (each count ± {_fmt(cov.get('region_error_bar'))})")
    if cov.get("n_cells") is not None:
        out.append(f"- H3 cells confirmed reached: **{_fmt(cov.get('cells_confirmed'))}** of "
                   f"{_fmt(cov['n_cells'])} (each count ± {_fmt(cov.get('cell_error_bar'))})")
    out += _blind_overview(cov)
    out += _blind_spots("**Regions not confirmed reached:**", cov["blind_regions"], cov,
                        "not confirmed reached")
    out += ["**Per region** (noised count of clients sampled this epoch):", ""]
    out += _table(["region", "clients sampled (noised)", "confirmed reached"],
                  [[r["region_id"], r["clients_sampled"], "yes" if r["covered"] else "no"]
                   for r in cov["regions_table"]])
    return out


def _cohorts(c: Mapping[str, Any]) -> list[str]:
    co = c["cohort_sizes"]
    if co is None:
        return []
    noised = co["neighbours"] == "add_remove"
    out = _heading(2, f"Cohort sizes per region ({'noised' if noised else 'exact'})",
                   co["provenance"])
    out += [f"Source: {co['source']}. "
            + ("Noised counts of the clients who reported (add/remove neighbours)."
               if noised else "Exact: under replace-one neighbours participation is public."),
            ""]
    regions = co["regions"]
    width = 4
    rows = []
    for i in range(0, len(regions), width):
        chunk = regions[i:i + width]
        row: list[Any] = []
        for r in chunk:
            row += [r["region_id"], r["cohort"]]
        row += [""] * (2 * width - len(row))
        rows.append(row)
    return out + _table(["region", "cohort"] * width, rows)


def _privacy(c: Mapping[str, Any]) -> list[str]:
    p = c["privacy"]
    if p is None:
        return []
    out = _heading(2, "Privacy ledger", p["provenance"])
    unit = p["unit"]
    split = p.get("split") or {}
    out.append(f"Accounting **{p['accounting']}** (amounts in {unit}), epoch budget "
               f"{_fmt(p['epoch_budget'])} per client"
               + (f", split {1 - split['evaluation_share']:.0%}/"
                  f"{split['evaluation_share']:.0%} training/evaluation, "
                  f"{split['global_share']:.0%} of evaluation global"
                  if split else "") + ".")
    if p["accounting"] == "zcdp":
        out.append(f"Per-client epsilon converted from rho at delta = {_fmt(p.get('delta'))}.")
    if p.get("participation"):
        relations = ", ".join(p.get("neighbours") or []) or "none"
        out += ["", f"**Neighbouring relation** ({relations}): {p['participation']}"]
    out += ["The ledger holds the worst-case loss of any single client: 'per-client epsilon' "
            "is what one client can lose in the epoch.", ""]
    for e in p["epochs"]:
        out += _heading(3, f"Epoch {e['epoch']}: per-client epsilon "
                        f"{_fmt(e['epsilon_per_client'])}")
        out += _table(["line item", "cap", "spent", "remaining", "charges",
                       "per-client epsilon"],
                      [[li["line_item"], li["cap"], li["spent"], li["remaining"],
                        li["n_charges"], li["epsilon_per_client"]] for li in e["line_items"]])
    return out


def _training(c: Mapping[str, Any]) -> list[str]:
    t = c.get("training")
    if t is None:
        return []
    out = _heading(2, "Training privacy", t["provenance"])
    out += [f"**{_cell(t['statement'])}**.", ""]
    if t["private"]:
        out += _table(["mechanism", "noise multiplier z", "clipping norm C", "clipping",
                       "participation cap", "rho per round", "rho per client", "neighbours"],
                      [[t.get("mechanism"), t.get("noise_multiplier"), t.get("clipping_norm"),
                        t.get("clipping"), t.get("participation_cap"), t.get("rho_per_round"),
                        t.get("rho"), t.get("neighbours")]])
    return out


def _metrics(c: Mapping[str, Any]) -> list[str]:
    rounds = c["quantitative_analysis"]["rounds"]
    if not rounds:
        return []
    out = _heading(2, "Regional metrics")
    out += ["Values are per-region estimates; the error bar is the half-width of the "
            "(1 - alpha) interval of the noise. Suppressed regions (cohort below the floor) "
            "are not published. Under add/remove neighbours the cohort, the floor and the "
            "suppression come from noised counts.", ""]
    summary = []
    for r in rounds:
        bars = "; ".join(f"{m['name']} {_fmt(m.get('median_error_bar'))}" for m in r["metrics"])
        summary.append([_fmt(r["round_index"]), _TAG[r["provenance"]], _fmt(r.get("epoch")),
                        _fmt(r["epsilon_total"]), r["neighbours"], f"{1 - r['alpha']:.0%}",
                        _fmt(r["min_cohort"]), r["suppressed_regions"], bars])
    out += _table(["round", "provenance", "epoch", "epsilon per client", "neighbours",
                   "level", "cohort floor", "suppressed regions", "median error bar"], summary)
    last = rounds[-1]
    out += _heading(3, f"Round {_fmt(last['round_index'])}, per region", last["provenance"])
    out.append(f"Partition version `{last['partition_version']}`; suppressed regions: "
               f"**{last['suppressed_regions']}**.")
    out.append("")
    level = f"{1 - last['alpha']:.0%}"
    specs = {s["name"]: s for s in c["geography"]["specs"]}
    for m in last["metrics"]:
        spec = specs.get(m["name"])
        name = m["name"] if spec is None or not (spec.get("label") or spec.get("unit")) \
            else f"{_title(spec)}, {m['name']}"
        histogram = spec is not None and spec["kind"] == "histogram"
        estimator = "" if histogram else f", {m.get('estimator')}"
        out += _heading(4, f"{name} (`{m['key']}`{estimator}, epsilon "
                        f"{_fmt(m.get('epsilon'))} of the round's {_fmt(last['epsilon_total'])})")
        if m.get("value_is"):
            out += [f"The value is the {m['value_is']}.", ""]
        elif spec is not None and histogram and spec.get("labels"):
            out += [f"The value is the share in the top bucket ({spec['labels'][-1]}), the "
                    "tail of the histogram (not a mean).", ""]
        out += _metric_flags(m)
        rows = []
        for r in m["regions"]:
            if r["suppressed"]:
                rows.append([r["region_id"], "suppressed", "-", "-", "suppressed", "suppressed"])
            else:
                rows.append([r["region_id"], _fmt(r["value"]), f"± {_fmt(r['error_bar'])}",
                             f"[{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]",
                             r.get("reliability", "-"), r["cohort"]])
        cohort = "cohort (noised)" if last["neighbours"] == "add_remove" else "cohort"
        out += _table(["region", "value", f"error bar ({level})", "interval", "reliability",
                       cohort], rows)
    return out


def _metric_flags(m: Mapping[str, Any]) -> list[str]:
    """Return the warnings a metric's flags call for (uninformative, values out of range)."""
    out = []
    if m.get("uninformative"):
        n = m.get("published") or 0
        out += ["> **Uninformative at this budget:** " + (
            "no region is published." if not n else
            f"{m.get('low_reliability')} of {n} published regions have low reliability "
            "(noise sd above 40% of the value): the differences between regions are "
            "mostly noise."), ""]
    if m.get("outside_range"):
        low, high = m["value_range"]
        out += [f"> **{m['outside_range']} values lie outside [{low:g}, {high:g}]**, the range "
                "a client can report (e.g. negative shares): they are unbiased noisy values, "
                "deliberately not clamped; clamping would bias them.", ""]
    return out


def _monitoring(c: Mapping[str, Any]) -> list[str]:
    mon = c.get("monitoring")
    if mon is None:
        return []
    out = _heading(2, "Alerts and drift", mon["provenance"])
    alpha = "" if mon.get("alpha") is None else f" at alpha {_fmt(mon['alpha'])}"
    out += [f"Tests on the released `{mon['metric']}` values{alpha} (post-processing of the "
            "releases: no further charge):", ""]
    out += _bullets(mon["tests"])
    if not mon["events"]:
        return [*out, "No alert fired and no region drifted.", ""]
    out += _table(["test", "region", "round", "from round", "statistic", "threshold"],
                  [[e["test"], e["region_id"], _fmt(e.get("round")),
                    _fmt(e.get("first_round")), _fmt(e.get("statistic")),
                    _fmt(e.get("threshold"))] for e in mon["events"]])
    return out


def _small_area(c: Mapping[str, Any]) -> list[str]:
    sa = c.get("small_area")
    if sa is None:
        return []
    out = _heading(2, "Small-area estimates", sa["provenance"])
    labels = sa["labels"]
    rho = "" if sa["rho"] is None else f", spatial parameter rho {_fmt(sa['rho'])}"
    covariates = ", ".join(f"`{name}`" for name in sa["covariates"]) or "none (intercept only)"
    out += [f"**Post-processing of published values: no epsilon charged.** The "
            f"`{sa['metric']}` values were smoothed with the {sa['model_name']} model "
            f"({sa['method']}; area-effect variance {_fmt(sa['sigma2_u'])}{rho}).", ""]
    out += _bullets([
        f"public covariates: {covariates}",
        f"regions: {_fmt(sa['regions'])}: {labels['direct']} direct, {labels['composite']} "
        f"composite, {labels['modelled']} modelled (no published value; "
        f"{sa['modelled_share']:.0%} of all regions), {labels['suppressed']} left suppressed",
        f"MSE: {sa['mse']}; {1 - sa['alpha']:.0%} intervals",
        f"sampling variance: {sa['sampling']}",
    ])
    out += _table(["coefficient", "estimate", "standard error"],
                  [[row["name"], row["beta"], row["se"]] for row in sa["coefficients"]])
    return out


def _query_error(c: Mapping[str, Any]) -> list[str]:
    q = c["query_error"]
    if q is None:
        return []
    out = _heading(2, "Query error on real polygons", q["provenance"])
    settings = ", ".join(f"{k} {v}" for k, v in q["settings"].items())
    out += ["Simulated releases of the grid, answered for every query polygon and compared "
            "with the released grid used as a plug-in truth (measure_query_error): "
            "post-processing of that release, no further charge. Each figure sits next to "
            "its analytic expectation at the plug-in; the plug-in leaves the unclamped "
            "absolute errors unchanged and shifts the clamping bias and the relative error "
            "(docs/queries.md)." + (f" Settings: {settings}." if settings else ""), ""]
    cols = [col for col in q["columns"]]
    out += _table(cols, [[row.get(col) for col in cols] for row in q["rows"]])
    return out


def _figures(c: Mapping[str, Any]) -> list[str]:
    figures = {k: v for k, v in c["figures"].items() if k != "coverage_map"}
    if not figures:
        return []
    out = _heading(2, "Figures")
    for name, path in figures.items():
        out += [f"![{name}]({path})", ""]
    return out


def render_markdown(content: Mapping[str, Any]) -> str:
    """Return the Markdown of a card's content (``ModelCard.to_dict()``).

    Parameters
    ----------
    content : mapping
        A valid card's content.

    Returns
    -------
    str
    """
    part = content["geography"]["partition"]
    rounds = content["quantitative_analysis"]["rounds"]
    simulated = (any(content["provenance"]["simulated"].values())
                 or any(r["provenance"] == "simulation" for r in rounds))
    # Front matter, as Hugging Face cards carry it: the card identifies itself.
    lines = ["---", f"card_format: {content['card_format']}",
             f"schema_version: {content['schema_version']}",
             f"partition: {json.dumps(part['key'])}",
             f"rounds: {len(rounds)}", f"simulated: {'true' if simulated else 'false'}",
             f"digest: {content['digest']}", "---", "", f"# {content['title']}", ""]
    for part in (_provenance, _details, _considerations, _geography, _sampling, _coverage,
                 _cohorts, _privacy, _training, _metrics, _monitoring, _small_area,
                 _query_error,
                 _figures):
        lines += part(content)
    lines += ["---", "", f"Model card schema {content['schema_version']}; content digest "
              f"`{content['digest']}`.", ""]
    return "\n".join(lines)
