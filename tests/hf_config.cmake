# config.json files that contradict themselves, read as transformers 5 reads them, and what a
# checkpoint holds never dropped without a word (issue 47, items 2, 4, 8, 9, 10, 13):
# tests/unit/test_hf_config_facts.c against tests/golden/hf_config/facts.json
# (tests/reference/make_hf_config_facts.py), and end to end tests/cli/hf_config_cli.sh.
zt_add_test_exe(test_hf_config_facts ${ZT_TEST_DIR}/unit/test_hf_config_facts.c zt_model)
foreach(case rope tie q35_yarn yarn_range)
  add_test(NAME hf_config_${case} COMMAND test_hf_config_facts ${case})
endforeach()
foreach(case tie_vlm_untied tie_vlm_tied tie_distinct tie_transformers rope_disagree nonfinite_first mtp_layers)
  add_test(NAME hf_config_cli_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/hf_config_cli.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/test-work
                   ${case})
  set_tests_properties(hf_config_cli_${case} PROPERTIES SKIP_RETURN_CODE 77
                       ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
endforeach()
