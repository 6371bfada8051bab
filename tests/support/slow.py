"""The ``slow`` marker: which tests ``./dev.sh test -m "not slow"`` (the developer loop) leaves out.

Slow are the tests that start real processes a browser or a worker needs (``worker``, ``browser``
markers), and those listed below: each took 2-3 s or more in a full run (``pytest --durations``, 2 shared
cores; the figures in the comments). ``./dev.sh test`` (CI) runs everything. A new long test gets
``@pytest.mark.slow`` where it is defined, or a line here.
"""

from __future__ import annotations

import pytest

#: ``path::function`` (every parametrization) -> seconds of its slowest case in the measured run
SLOW_TESTS = {
    "tests/integrations/test_harness_adapters.py::test_run_lm_eval_session_and_coreset": 50.2,
    "tests/auth/test_cross_team_walk.py::test_every_write_to_another_teams_public_resources_is_403": 26.2,
    "tests/client/test_client_auth.py::test_operator_cli_and_clients_carry_tokens": 25.4,
    "tests/kit/test_observability.py::test_serve_with_two_workers_answers_metrics": 16.2,
    "tests/deploy/test_serve_workers.py::test_slowly_starting_workers_are_not_killed": 15.5,
    "tests/core/backtest/test_core_backtest.py::test_rows_for_every_method": 15.0,
    "tests/sessions/test_api_torch_free.py::test_sessions_never_import_torch": 14.9,
    "tests/core/backtest/test_core_backtest.py::test_cli_backtest_prints_table": 13.7,
    "tests/jobs/test_faults.py::test_unreachable_database_gives_fast_503s_and_health_answers": 13.4,
    "tests/sessions/test_api_sessions.py::test_session_runs_to_its_stopping_rule_matching_a_local_replay": 13.2,
    "tests/sessions/test_api_sessions.py::test_restart_mid_session_changes_nothing": 11.7,
    "tests/core/backtest/test_core_backtest.py::test_cli_backtest_suite_prints_per_benchmark_and_overall": 11.1,
    "tests/ui/test_ui_docs.py::test_redoc_renders_offline": 8.4,
    "tests/deploy/test_embedded_server.py::test_embedded_server_coreset_journey": 8.2,
    "tests/ui/test_ui_pages.py::test_every_page_renders": 7.3,
    "tests/coresets/test_api_score_coresets.py::test_every_score_method_selects_and_predicts": 7.2,
    "tests/core/coresets/test_core_predictors.py::test_pooled_interval_covers_the_mean_of_benchmarks_iid": 6.9,
    "tests/coresets/test_api_score_coresets.py::test_every_predictor_gives_a_sane_estimate": 6.4,
    "tests/ui/test_ui_docs.py::test_swagger_ui_renders_offline": 6.2,
    "tests/client/test_client.py::test_cli_session_commands": 6.1,
    "tests/client/test_client.py::test_item_responses_after_an_lm_eval_import": 5.9,
    "tests/kit/test_concurrency.py::test_large_uploads_sharing_new_models_in_different_orders": 5.6,
    "tests/auth/test_team_deletion.py::test_delete_team_removes_everything_it_owns": 5.3,
    "tests/auth/test_cross_team_walk.py::test_every_route_hides_another_teams_private_resources": 5.1,
    "tests/kit/test_idempotency_reliability.py::test_retry_right_after_the_answer_replays": 5.1,
    "tests/core/test_core_sequential_refgp_v3.py::test_coverage_on_a_synthetic_replay_is_near_nominal": 4.9,
    "tests/kit/test_observability.py::test_metrics_of_several_processes_are_summed": 4.7,
    "tests/integrations/test_harness_adapters.py::test_wandb_sink_offline": 4.7,
    "tests/sessions/test_api_sessions_multi.py::test_multi_restart_mid_session_changes_nothing": 4.4,
    "tests/sessions/test_api_sessions.py::test_concurrent_posts_lose_and_double_nothing": 3.7,
    "tests/client/test_client.py::test_run_session_reaches_the_stopping_rule": 3.5,
    "tests/auth/test_team_deletion.py::test_delete_team_is_409_while_others_depend_and_nothing_is_deleted": 3.2,
    "tests/imports/test_api_harness_imports.py::test_lighteval_details_split_goes_into_the_id": 3.2,
    "tests/core/test_core_sequential_refgp_v2.py::test_coverage_on_a_synthetic_replay_is_near_nominal": 3.2,
    # 2 s or more in the "not slow" run of 2026-12-05 (372 s serially; 210 s with -n 2 before these)
    "tests/core/test_core_sequential_active_design.py::test_coverage_at_a_precision_stop": 13.5,
    "tests/kit/test_idempotency_lease.py::test_the_client_retries_an_in_progress_key_until_the_crashed_lease_expires":
        13.1,
    "tests/jobs/test_faults.py::test_kill_9_of_the_api_mid_keyed_request_then_the_retry_works": 7.1,
    "tests/auth/test_published_coresets_across_teams.py::"
    "test_team_beta_uses_alphas_published_coreset_while_the_benchmark_stays_private": 6.9,
    "tests/core/test_core_sequential_active_design.py::test_a_wrong_working_model_still_covers_and_intervals_never_grow":
        5.2,
    "tests/sessions/test_api_sessions.py::test_a_batch_that_crosses_the_stopping_rule_is_kept_but_not_used": 5.1,
    "tests/kit/test_slow_bodies.py::test_slow_senders_hold_no_database_connection": 4.8,
    "tests/kit/test_slow_bodies.py::test_concurrent_bodies_per_client_are_limited": 4.1,
    "tests/kit/test_names.py::test_coreset_names_hold_no_slash_or_at": 3.7,
    "tests/imports/test_import_round_trip.py::test_helm_round_trip": 3.4,
    "tests/core/test_core_sequential_refgp_dr.py::test_interval_covers_a_target_above_every_reference": 3.2,
    "tests/db/test_migrations.py::test_round_trip_on_fresh_postgresql": 3.1,
    "tests/jobs/test_worker.py::test_db_upgrade_on_a_fresh_sqlite_file": 3.1,
    "tests/integrations/test_harness_adapters.py::test_inspect_sample_source_runs_exactly_the_session": 2.9,
    "tests/core/irt/test_core_irt.py::test_svi_fit_recovers_the_items_and_is_deterministic": 2.6,
    "tests/kit/test_idempotency_lease.py::test_a_running_keyed_request_keeps_its_key_past_the_lease": 2.5,
    "tests/benchmarks/test_bulk_statement_timeout.py::"
    "test_bulk_write_raises_the_statement_timeout_for_its_transaction_only": 2.5,
    "tests/benchmarks/test_score_bulk_write.py::test_a_write_cancelled_late_stores_nothing": 2.2,
    "tests/core/test_core_stopping.py::test_without_a_rule_bayesame_keeps_the_papers_rule": 2.2,
    # 3 s or more in the same loop with -n 2 (179 s)
    "tests/benchmarks/test_csv_formula_injection.py::test_score_and_coreset_csv_exports_neutralise_formula_cells": 4.0,
    "tests/imports/test_api_harness_imports.py::test_inspect_eval_log_imports_every_sample": 3.5,
    "tests/coresets/test_api_score_coresets.py::test_get_ships_no_fitted_state_and_predict_refits_from_it": 3.3,
    "tests/coresets/test_api_coresets.py::test_facility_location_end_to_end": 3.1,
    "tests/integrations/test_harness_adapters.py::test_mlflow_sink_logs_the_trajectory_and_predictions": 3.0,
}
#: markers whose tests are slow by nature (a real worker process, a real browser)
SLOW_MARKERS = ("worker", "browser")


def mark_slow(items: list[pytest.Item]) -> None:
    """Add ``slow`` to the listed tests and to those with a ``SLOW_MARKERS`` marker."""
    for item in items:
        key = item.nodeid.split("[", 1)[0]
        if key in SLOW_TESTS or any(item.get_closest_marker(name) for name in SLOW_MARKERS):
            item.add_marker(pytest.mark.slow)
