# Behaviour held fixed across refactors (tests/cli/behaviour_golden.sh): fixed runs reduced to
# run.json settings, losses, checkpoint dataset bytes and exported safetensors, compared with
# tests/golden/behaviour.txt. Re-record only for an intended change of results:
#   bash tests/cli/behaviour_golden.sh record build/zerotrain build/tests/cudaemu/zerotrain_cudaemu . /tmp/bg tests/golden/behaviour.txt
# (the cudaemu binary where tests/cudaemu.cmake builds it; the script skips that run without it)
set(ZT_BEHAVIOUR_EMU ${CMAKE_BINARY_DIR}/tests/cudaemu/zerotrain_cudaemu)
add_test(NAME behaviour_golden
         COMMAND bash ${ZT_TEST_DIR}/cli/behaviour_golden.sh check ${ZT_EXE} ${ZT_BEHAVIOUR_EMU} ${CMAKE_SOURCE_DIR}
                 ${CMAKE_BINARY_DIR}/test-work ${ZT_GOLDEN_DIR}/behaviour.txt)
set_tests_properties(behaviour_golden PROPERTIES
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" PROCESSORS 2 TIMEOUT 900)
