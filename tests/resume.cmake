# Kill-and-resume through the trainer (tests/cli/resume_cli.sh).
zt_add_test_exe(st_compare ${ZT_TEST_DIR}/support/st_compare.c zt_checkpoint)
foreach(case same_world reshard_4_to_2 reshard_2_to_3 external_signal resume_auto auto_damaged_latest auto_all_damaged
        fresh_guard new_data config_mismatch hsdp_same hsdp_cross hsdp_replica_mismatch keep_gathered
        context_parallel context_refusals qwen3_5 qwen3_5_context_parallel qwen3_5_context_refusals)
  add_test(NAME resume_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/resume_cli.sh ${ZT_EXE} $<TARGET_FILE:st_compare> ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/resume ${case})
  set_tests_properties(resume_${case} PROPERTIES
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" PROCESSORS 2)
endforeach()
