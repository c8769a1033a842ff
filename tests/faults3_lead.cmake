# The third fault battery (issue 35), the trainer's settings: tests/cli/faults3_lead.sh, one
# case per test (ranks that disagree, MPMD; extending a run; --shard-group 0).
foreach(case agree_lr agree_seed agree_steps agree_shard_group agree_threads agree_preflight extend_run shard_group_zero)
  add_test(NAME faults3_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/faults3_lead.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/faults3_lead ${case})
  set_tests_properties(faults3_${case} PROPERTIES
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" PROCESSORS 2 TIMEOUT 300)
endforeach()
