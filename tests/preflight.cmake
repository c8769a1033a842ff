# `zerotrain preflight`: every check passing and failing (tests/cli/preflight_cli.sh).
add_executable(hold_port ${ZT_TEST_DIR}/support/hold_port.c)
foreach(case all_pass corrupt_file uneven_no_evenfix uneven_evenfix balance_for_world token_total small_disk
        busy_port missing_interface cuda_without_gpu probe long_seq bad_master_port shard_group
        keep_memory keep_memory_qwen3_5)
  add_test(NAME preflight_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/preflight_cli.sh ${ZT_EXE} $<TARGET_FILE:hold_port> ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/preflight ${case})
  set_tests_properties(preflight_${case} PROPERTIES SKIP_RETURN_CODE 77
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
endforeach()
