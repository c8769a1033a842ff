# The third fault battery (issue 35), data and resume cases: tests/cli/faults3_data.sh, one case
# per test. A data file rewritten in place under paused ranks (out-of-range and in-range ids; a
# per-rank file at rank 0 and rank 1, and the shared file), --resume auto past a truncated, empty
# or zeroed ckpt.h5, and ranks whose views of the run directory name different checkpoints.
foreach(case inplace_oob_rank0 inplace_oob_rank1 inplace_oob_shared inplace_inrange_rank0 inplace_inrange_rank1
        inplace_inrange_shared auto_truncated auto_empty auto_zeroed ranks_different_checkpoints)
  add_test(NAME faults3_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/faults3_data.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/faults3_data ${case})
  set_tests_properties(faults3_${case} PROPERTIES
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" PROCESSORS 2 TIMEOUT 600)
endforeach()
