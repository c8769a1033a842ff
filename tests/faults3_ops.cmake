# The third fault battery (issue 35), the operations tools: tests/cli/faults3_ops.sh, one case
# per test. Run files whose fields cannot be true (a flight recorder header, a heartbeat's or
# run.json's world size, a power file's rank) bound the work they cause and are named; a
# directory given for a file is said to be one; plan checks every argument before printing.
foreach(case watch_flight_issued_max watch_flight_odd_locks report_crashed_issued_max watch_world_huge
        power_file_rank_huge read_directory plan_args_first)
  add_test(NAME faults3_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/faults3_ops.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/faults3_ops ${case})
  set_tests_properties(faults3_${case} PROPERTIES
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" PROCESSORS 2 TIMEOUT 300)
endforeach()
