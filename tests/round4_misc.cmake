# Issue 47 (round four), items 5, 6, 7, 11, 12, 13: tests/cli/round4_misc.sh, one case per test
# (tokens per step under context parallelism and `plan --from-run`; --allow-new-schedule below the
# checkpoint's step; the MPI start-up deadline; packs with no block; the 2C <= seq_len rule in every
# caller; context refusals that leave no RUN; the help's families; the heartbeat and `watch` after a
# deadline abort).
foreach(case tokens_per_step schedule_below_checkpoint mpi_start_deadline pack_no_blocks context_seq_rule
        context_refused_clean help_families abort_heartbeat)
  add_test(NAME round4_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/round4_misc.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/round4_misc ${case})
  set_tests_properties(round4_${case} PROPERTIES
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" PROCESSORS 2 TIMEOUT 180)
endforeach()
