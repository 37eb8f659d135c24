"""Shared fixtures: the shipped states and partitions are loaded once per session."""

from __future__ import annotations

import geopandas as gpd
import pytest

from spatialdp.datasets import load_us_states, us_states_partition
from spatialdp.geo.partition import Partition

# A subprocess worker, not a test module: importing it in the test process is pointless.
collect_ignore = ["_ledger_worker.py"]


@pytest.fixture(scope="session")
def states() -> gpd.GeoDataFrame:
    return load_us_states()


@pytest.fixture(scope="session")
def states_partition() -> Partition:
    return us_states_partition()


@pytest.fixture(scope="session")
def colorado_h3(states: gpd.GeoDataFrame) -> Partition:
    colorado = states[states.state == "CO"]
    return Partition.from_h3_cover(colorado, 5, containment="overlap", name="co-r5")


#: Tests marked ``slow`` here rather than in their modules (so that the quick inner loop,
#: ``pytest -m "not slow"``, stays under 90 s on 2 cores): ``module::function`` -> why.
#: Measured with ``--durations`` on a loaded machine; each took over ~1 s of CPU.
SLOW: dict[str, str] = {
    **{f"test_cli_commands.py::{name}": "runs the demo" for name in (
        "test_demo_on_a_users_polygon_layer",
        "test_demo_under_replace_one_publishes_participation_but_no_cell_locations",
        "test_query_error_reopens_a_ledger_with_its_own_budget_and_refuses_ledger_flags")},
    "test_flower_ray.py::test_run_simulation_on_ray_publishes_bars_displays_and_keeps_instructions":
        "starts a local Ray cluster (Flower's simulation engine)",
    **{f"test_card_complete.py::{name}": "runs the demo" for name in (
        "test_the_demo_folder_holds_nothing_but_its_outputs",
        "test_the_demo_card_lists_its_alerts_and_drift_with_rounds",
        "test_the_demo_card_counts_blind_spots_as_its_coverage_map_does")},
    **{f"{module}::{name}": "a Monte Carlo check (many simulated releases)" for module, name in (
        ("test_accuracy.py", "test_many_polygons_vectorised"),
        ("test_fit_uncertainty.py", "test_95_percent_intervals_cover_95_plus_or_minus_1_percent"),
        ("test_fit_uncertainty.py", "test_standard_errors_match_the_monte_carlo_spread"),
        ("test_fit_uncertainty.py",
         "test_without_intercept_and_with_noised_labels_the_intervals_still_cover"),
        ("test_accuracy.py", "test_accuracy_figures_are_finite_over_the_whole_range"),
        ("test_accuracy.py", "test_against_monte_carlo"),
        ("test_aggregate.py", "test_histogram_is_unbiased_and_one_release"),
        ("test_aggregate.py", "test_conf_int_is_exact_for_any_alpha"),
        ("test_aggregate.py", "test_aggregation_is_unbiased"),
        ("test_aggregate.py", "test_error_bar_shrinks_as_one_over_n_not_root_n"),
        ("test_health.py", "test_round_health_counts_within_error_bar"),
        ("test_monitor.py", "test_false_alarm_rate_equals_alpha_for_the_same_clients"),
        ("test_monitor.py", "test_the_default_null_is_valid_for_fresh_cohorts"),
        ("test_neighbours.py",
         "test_ratio_estimates_are_compared_and_trended_at_their_false_alarm_rate"),
        ("test_neighbours.py",
         "test_round_health_and_coverage_halve_their_sensitivity_under_add_remove"),
        ("test_neighbours.py", "test_significance_of_ratio_estimates_flags_equal_regions_at_alpha"),
        ("test_regional.py", "test_regional_coverage_and_unbiasedness"),
        ("test_flower_strategy.py",
         "test_sqrt_selection_beats_flower_uniform_sampling_on_a_skewed_fleet"),
        ("test_geo_grid.py", "test_random_polygons_match_shapely"),
        ("test_h3grid.py", "test_partition_assign_builds_the_raster_once_and_stays_exact"),
        ("test_smooth_recovery.py", "test_spatial_fay_herriot_recovers_rho_and_the_area_variance"),
        ("test_smooth_recovery.py", "test_intervals_cover_and_mse_matches_the_empirical_error"),
        ("test_smooth_recovery.py",
         "test_normal_intervals_undercover_where_laplace_noise_dominates"),
    )},
    **{f"{module}::{name}": "a long fuzz run (hypothesis)" for module, name in (
        ("test_accuracy.py", "test_accuracy_functions_raise_only_spatialdp_errors"),
        ("test_fuzz_ledger.py", "test_refused_releases_leave_the_ledger_untouched"),
        ("test_fuzz_ledger.py", "test_refused_ledger_writes_leave_nothing"),
    )},
    **{f"{module}::{name}": "a subprocess, a browser or a whole example run" for module, name in (
        ("test_cli.py", "test_console_script_runs"),
        ("test_ledger.py", "test_concurrent_processes_keep_the_ledger_invariants"),
        ("test_flower_example.py", "test_example_runs_small"),
        ("test_flower_example.py", "test_import_spatialdp_does_not_import_flower"),
        ("test_flower_training.py",
         "test_a_strategy_without_noise_is_not_private_and_charges_nothing"),
        ("test_viz_browser.py", "test_folium_map_renders_with_its_reliability_key"),
        ("test_cards.py", "test_from_run_rebuilds_the_card_from_the_folder_alone"),
        ("test_flower_strategy.py", "test_history_records_exactly_the_published_values"),
        ("test_neighbours.py", "test_flower_evaluation_releases_under_add_remove"),
        ("test_flower_training.py", "test_a_run_inside_the_server_side_wrapper"),
        ("test_flower_training.py", "test_client_side_clipping_is_checked_on_the_server"),
        ("test_ledger.py",
         "test_process_killed_inside_a_write_transaction_leaves_a_consistent_ledger"),
        ("test_scale_local.py", "test_in_memory_paths_never_import_dask"),
        ("test_dask_scheduler.py",
         "test_a_scheduler_and_two_workers_run_the_report_from_relative_paths"),
        ("test_cluster_configs.py", "test_the_helm_shims_run_the_dask_commands"),
    )},
    "test_docs.py::test_page_runs": "runs the worked examples of every docs page (~1 s each)",
    "test_geo_properties.py::test_timer_stops_a_hang": "waits for a 1 s timer to fire",
    "test_sklearn_real_use.py::test_grid_search_in_two_worker_processes_charges_the_same_file":
        "starts two joblib (loky) worker processes",
    **{f"{module}::{name}": "walks the AST of every module" for module, name in (
        ("test_release_path.py", "test_only_the_pipeline_charges_a_target"),
        ("test_release_path.py", "test_only_the_pipelines_target_calls_the_ledgers_spend"),
        ("test_release_path.py",
         "test_every_target_parameter_is_typed_by_the_accounting_protocol"),
        ("test_release_path.py",
         "test_no_module_reaches_a_targets_ledger_outside_the_privacy_package"),
    )},
    **{f"{module}::{name}": "a simulation or an audit run (many releases)" for module, name in (
        ("test_regression_estimators.py", "test_one_shot_error_falls_at_the_planners_rate"),
        ("test_regression_unbiased.py", "test_debiased_moments_and_gradient_are_unbiased"),
        ("test_ridge_rule.py",
         "test_tuned_one_shot_beats_predicting_the_mean_on_modechoice_at_epsilon_8"),
        ("test_ridge_rule.py", "test_auto_ridge_keeps_half_the_oracle_gain_over_the_mean"),
        ("test_ridge_rule.py",
         "test_centred_covariance_is_unbiased_along_the_modulation_directions"),
        ("test_regional.py", "test_ratio_estimator_for_a_metric_some_clients_lack"),
        ("test_queries_publish.py", "test_published_audit_depends_only_on_the_released_grid"),
        ("test_audit_releases.py", "test_the_tap_is_blind_to_what_happens_after_the_noise"),
        ("test_audit_core.py", "test_float_low_bits_are_not_mistaken_for_leakage"),
        ("test_audit_core.py", "test_a_correct_release_passes_on_the_published_path"),
        ("test_sampling_coverage.py", "test_sampling_on_density_while_reporting_on_states"),
        ("test_device.py", "test_results_do_not_depend_on_row_order"),
        ("test_regional_files.py", "test_plot_and_explore_hand_off_to_viz"),
    )},
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the :data:`SLOW` tests; a listed test that no longer exists is an error."""
    seen: set[str] = set()
    modules: set[str] = set()
    for item in items:
        module = item.path.name
        modules.add(module)
        key = f"{module}::{getattr(item, 'originalname', item.name)}"
        if key in SLOW:
            item.add_marker(pytest.mark.slow)
            seen.add(key)
    gone = [key for key in SLOW if key.split("::")[0] in modules and key not in seen]
    if gone and not config.option.keyword:  # -k may deselect before this hook: then no check
        raise pytest.UsageError(f"tests/conftest.py SLOW lists tests that do not exist: {gone}")
