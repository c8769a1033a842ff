# The third fault battery (issue 35), run files and mixtures: tests/cli/faults3_yaml.sh, one case
# per test. A run file's bounds (alias bomb, nesting, length), where its bad bytes are, the
# --print-config round trip of paths YAML must escape, /proc files; mixture weights at a
# double's extremes, a file named PATH:WEIGHT, a mixture with no block.
foreach(case config_alias_bomb config_deep_nesting config_error_lines config_print_hostile config_proc_file
        config_too_long mix_huge_weights mix_colon_file mix_no_block)
  add_test(NAME faults3_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/faults3_yaml.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/faults3_yaml ${case})
  set_tests_properties(faults3_${case} PROPERTIES
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1" TIMEOUT 300)
endforeach()
