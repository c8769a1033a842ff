# --async-save: background checkpoint writes (tests/cli/async_cli.sh; st_compare from resume.cmake).
foreach(case identical resume_same_world resume_reshard wait_logged stop_during_write kill_rank kill_all enospc_inject
        enospc_tmpfs stall memory hsdp)
  add_test(NAME async_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/async_cli.sh ${ZT_EXE} $<TARGET_FILE:st_compare> ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/async ${case})
  set_tests_properties(async_${case} PROPERTIES
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" PROCESSORS 2 TIMEOUT 600
    SKIP_RETURN_CODE 77)
endforeach()
