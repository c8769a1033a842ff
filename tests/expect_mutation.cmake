# zt_expect_test checks the exit code and the output together (tests/support/expect.cmake). This
# keeps it honest: a sample of such tests, one per expected exit code and kind of command, must
# fail when their program prints its usual output and then exits with another code or is killed
# by SIGSEGV (tests/support/exit_preload.c, LD_PRELOAD'ed). The whole set:
#   python3 tests/support/mutate_exit.py build build/libzt_exit_preload.so
add_library(zt_exit_preload MODULE ${ZT_TEST_DIR}/support/exit_preload.c)
set_target_properties(zt_exit_preload PROPERTIES PREFIX "lib")
find_program(ZT_PYTHON3_EXPECT python3)
if(ZT_PYTHON3_EXPECT)
  add_test(NAME expect_mutations
           COMMAND ${ZT_PYTHON3_EXPECT} ${ZT_TEST_DIR}/support/mutate_exit.py ${CMAKE_BINARY_DIR}
                   $<TARGET_FILE:zt_exit_preload>
                   "^(plan_cli_small_model|plan_cli_bad_gpu|preflight_flags_alias|pack_flags_range|train_flags_help)$")
  set_tests_properties(expect_mutations PROPERTIES
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" TIMEOUT 300)
endif()
