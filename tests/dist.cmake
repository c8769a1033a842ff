# Multi-rank `zerotrain train` under mpirun: evenfix, the reproduced deadlock, layout errors.
foreach(case evenfix_completes no_evenfix_deadlock preflight_catches_uneven per_rank_mismatch more_ranks_than_blocks w2_matches_w1 save_hang_watched)
  add_test(NAME dist_cli_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/dist_cli.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/dist_cli ${case})
  set_tests_properties(dist_cli_${case} PROPERTIES
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" PROCESSORS 2)
endforeach()
