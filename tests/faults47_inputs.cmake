# Issue 47, items 1 and 3 (tests/cli/faults47_inputs.sh): ranks that read different files at the
# same path (a mount namespace per rank, MPMD) are refused at start: a model config, an --init
# weight set, a dataset; copies that agree and a per-rank dataset layout train. Skipped (77) only
# where mount namespaces are unavailable.
foreach(case inputs_model_config inputs_init_weights inputs_data inputs_data_per_rank inputs_preflight)
  add_test(NAME faults47_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/faults47_inputs.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/faults47_inputs ${case})
  set_tests_properties(faults47_${case} PROPERTIES
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" PROCESSORS 2 TIMEOUT 300
    SKIP_RETURN_CODE 77)
endforeach()
