# The second fault battery (issue 22): tests/cli/faults_cli.sh, one case per test. The data
# cases change files under running jobs; the lock cases start two jobs on one run directory.
foreach(case pack_self_input pack_partial_names lock_ab lock_ba lock_joiner lock_stale data_truncated_rank0
        data_truncated_rank1 data_rewritten eval_truncated stop_in_eval eval_no_targets eval_empty first_error
        auto_corrupt_newest metrics_nul prune_removing stopped_heartbeat signal_at_startup)
  add_test(NAME faults_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/faults_cli.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/faults ${case})
  set_tests_properties(faults_${case} PROPERTIES
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" PROCESSORS 2 TIMEOUT 600)
endforeach()
