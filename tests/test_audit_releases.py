"""The audit suite over every release path: each passes at its claim, each broken variant is caught.

Every case is audited twice at its claim: on what it publishes (the default
``"published"`` path: its result object's every column, warnings, logs and,
for the file case, the written files; one seeded release per draw, so
hundreds to a few thousand draws) and on the noise at the tap (60,000
vectorised draws: the sharp check of the noise itself). Broken variants run on
their own path (:data:`spatialdp.audit.cases.VARIANTS`): the noise and input
variants at the tap, the variants that act after the noise on the published
path (the tap cannot see them: the last test shows it), the seeded one on the
real release path. The lower bounds fail with probability alpha = 1e-6, so a pass
test fails by chance with probability below 1e-6, and the seeds make each run
reproducible. Broken variants are built in spatialdp.audit.cases, never by
editing library code.
"""

from __future__ import annotations

import pytest

from spatialdp.audit.cases import CASES, VARIANTS, run_case
from spatialdp.exceptions import InvalidInput
from spatialdp.privacy.pipeline import NEIGHBOURS

TAP_DRAWS = 60_000
#: Published-path draws per input: one release per draw, so fewer where a release is slow
#: (the regional report runs 4 pairs; the file case writes a GeoPackage, a CSV, a JSON and
#: a model card per draw).
PUBLISHED_DRAWS = {"regional_report": 500, "regional_report.write": 150,
                   "release_coverage": 1_000, "release_hierarchical": 1_000,
                   "regional_report (add/remove)": 500, "release_coverage (add/remove)": 1_000,
                   "round_health (add/remove)": 1_000, "aggregate_histogram (add/remove)": 1_000,
                   "aggregate_ratio (add/remove)": 1_000}
PUBLISHED_DEFAULT = 2_000
#: A deterministic difference needs few draws: with 105 counted draws per input (of 150) it
#: bounds epsilon by log(105 / ln(8e6)) = 1.9 over four pairs (by 1.5 with 70 of 100).
AFTER_NOISE_DRAWS = {"regional_report.write": 120}
AFTER_NOISE_DEFAULT = 150
#: How much of the claim a correct release must reach on the published path, so that the
#: audit is seen to read the noisy published values (the sharp check of the noise is the
#: tap's). With 1,400 counted draws of one pair, one Laplace value shows about 0.6 of its
#: epsilon, a ratio or a histogram (two noisy values) about 0.2-0.35.
PUBLISHED_FLOOR = 0.15
#: Published values that mix several noises (coverage counts of one client's four regions,
#: least-squares consistent hierarchy levels), the four-pair regional report and the file
#: case: a few thousand draws bound them weakly, so their test asks only that the event
#: reads a published value that moves.
WEAK_ON_PUBLISHED = {"release_coverage", "release_hierarchical", "regional_report",
                     "regional_report.write", *(name for name in CASES if "add/remove" in name)}
#: Where each post-noise variant must be caught: the published output it corrupts.
CAUGHT_IN = {
    "unnoised_region": "result.frames.loss.",
    "exact_count": "result.frames.loss.clients_at_clip[CO]",
    "private_warning": "warning UninformativeReleaseWarning#0",
    "exact_in_file": "result.file regional_report.SIMULATION.csv.loss_sum",
    "outcome_unnoised": "result.clients",
    "exact_floor": "output token 'result.frames.loss.suppressed[CO]",
}

CORRECT = list(CASES)
TAP = [name for name, case in CASES.items() if "tap" in case.paths]
BROKEN = [(name, v) for name, case in CASES.items() for v in case.variants if v != "correct"]


@pytest.mark.slow  # a long audit run (many releases per input)
@pytest.mark.parametrize("name", CORRECT)
def test_what_a_release_publishes_passes_at_its_claim(name: str) -> None:
    case = CASES[name]
    result = run_case(name, draws=PUBLISHED_DRAWS.get(name, PUBLISHED_DEFAULT), rng=11)
    assert result.path.startswith("published"), result.path
    assert result.neighbours == case.neighbours
    assert result.passed, result.summary()
    assert result.alpha == 1e-6
    if case.claimed == 0:  # nothing private is published: no output differs at all
        assert result.measured == 0.0, result.summary()
    elif name in WEAK_ON_PUBLISHED:
        assert result.worst.event.statistic != "none", result.summary()
    else:
        assert result.measured >= PUBLISHED_FLOOR * result.claimed, result.summary()


@pytest.mark.slow  # a long audit run (many releases per input)
@pytest.mark.parametrize("name", TAP)
def test_the_noise_at_the_tap_passes_at_its_claim(name: str) -> None:
    result = run_case(name, path="tap", draws=TAP_DRAWS, rng=11)
    assert result.path.startswith("tap"), result.path
    assert result.passed, result.summary()
    # Not vacuous: the chosen event gets most of the way to the claim.
    assert result.measured >= 0.5 * result.claimed, result.summary()


@pytest.mark.slow  # a long audit run (many releases per input)
def test_modulated_transform_release_path_passes() -> None:
    """The real lattice-Gaussian release (OS entropy), drawn as rows of one client."""
    result = run_case("transform_clients", path="release", draws=TAP_DRAWS)
    assert result.path == "release (rows)"
    assert result.passed, result.summary()
    assert result.measured >= 0.4 * result.claimed, result.summary()


def _draws(name: str, variant: str) -> int | None:
    path = VARIANTS[variant].path
    if path == "tap":
        return TAP_DRAWS
    if path == "published" and name != "published_composition":
        return AFTER_NOISE_DRAWS.get(name, AFTER_NOISE_DEFAULT)
    return None  # the release path and the composition: the case's own small sample


@pytest.mark.slow  # a long audit run (many releases per input)
@pytest.mark.parametrize(("name", "variant"), BROKEN)
def test_broken_variant_is_caught(name: str, variant: str) -> None:
    result = run_case(name, variant, draws=_draws(name, variant), rng=12)
    assert result.path.startswith(VARIANTS[variant].path), result.path
    assert not result.passed, result.summary()
    # Decisive, not marginal: at least 1.25x the claim (or clearly above a 0 claim).
    assert result.measured >= max(1.25 * result.claimed, 1.0), result.summary()
    if variant in CAUGHT_IN:  # caught in the output it corrupts, in the region that leaks
        assert result.event.startswith(CAUGHT_IN[variant]), result.summary()
        assert result.worst.index == 0, result.summary()  # regional: pair 0 is region CO


def test_the_tap_is_blind_to_what_happens_after_the_noise() -> None:
    """Why the published path is the default (issue 21): a regional report with one region
    published without its noise passed the noise-tap audit, which reads the noise before
    the release publishes anything."""
    result = run_case("regional_report", "unnoised_region", path="tap", draws=TAP_DRAWS,
                      rng=13)
    assert result.path == "tap"
    assert result.passed, result.summary()


def test_every_post_noise_variant_of_issue_21_is_in_the_suite() -> None:
    after = {name for name, v in VARIANTS.items() if v.stage == "after the noise"}
    assert {"unnoised_region", "exact_count", "private_warning", "exact_in_file"} <= after
    assert all(VARIANTS[v].path == "published" for v in after)
    used = {v for case in CASES.values() for v in case.variants}
    assert after <= used


def test_every_case_declares_its_neighbouring_relation() -> None:
    assert all(case.neighbours in NEIGHBOURS for case in CASES.values())
    added = {name for name, case in CASES.items() if case.neighbours == "add_remove"}
    # The grids (devices added or removed) and every release path that offers add/remove.
    assert added == {"release_flat", "release_hierarchical", "regional_report (add/remove)",
                     "aggregate_histogram (add/remove)", "aggregate_ratio (add/remove)",
                     "round_health (add/remove)", "release_coverage (add/remove)"}


def test_the_floor_on_exact_counts_under_add_remove_is_in_the_suite() -> None:
    assert "exact_floor" in CASES["regional_report (add/remove)"].variants
    assert VARIANTS["exact_floor"].stage == "after the noise"


def test_every_release_path_has_a_broken_variant() -> None:
    assert all(len(case.variants) >= 2 for case in CASES.values())
    assert all(v in VARIANTS for case in CASES.values() for v in case.variants)
    kinds = {v for case in CASES.values() for v in case.variants}
    assert {"half_scale", "skip_region", "skip_cell", "unclipped_device", "cap_ignored",
            "split_wrong", "seeded"} <= kinds


def test_paths_are_reported() -> None:
    assert run_case("published_composition").path == "published"
    assert run_case("aggregate_metric", draws=300, rng=0).path == "published"
    assert run_case("aggregate_metric", path="tap", draws=2_000, rng=0).path == "tap"
    assert run_case("aggregate_metric", "seeded").path == "release"


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"name": "nope"}, "is not an audit case"),
    ({"name": "release_flat", "variant": "skip_region"}, "is not a variant of release_flat"),
    ({"name": "published_composition", "path": "tap"}, "is not a path of"),
    ({"name": "regional_report.write", "path": "tap"}, "is not a path of"),
])
def test_run_case_refusals(kwargs: dict[str, str], match: str) -> None:
    with pytest.raises(InvalidInput, match=match):
        run_case(**kwargs)


def test_the_ratio_warning_publishes_no_private_count() -> None:
    """The real leak of issue 21, found by the published path (the tap cannot see warnings):
    20 of 240 clients have the ratio and the warning fires; one client more or less moves
    the 'predicted error bar' in its text."""
    from spatialdp.audit import audit, replace_client
    from spatialdp.audit.cases import _ratio_reports
    from spatialdp.federated import aggregate_metric

    spec, reports = _ratio_reports()
    few = reports.copy()
    few.loc[few.index[20:], ["ratio", "track_present"]] = [0.0, 0]
    pair = (replace_client(few, 0, ratio=0.0, track_present=0),
            replace_client(few, 0, ratio=10.0, track_present=1))

    def release(frame: object, target: object) -> object:
        return aggregate_metric(frame, spec, epsilon=0.2, target=target,  # type: ignore[arg-type]
                                min_cohort=5)

    result = audit(release, pair, epsilon=0.2, draws=300, rng=0, neighbours="replace")
    assert result.passed, result.summary()
