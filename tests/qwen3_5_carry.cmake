# Tensors the model does not train carried from --init to export and RUN/final, on the released
# Qwen3.5 layouts (tests/golden/qwen3_5_vlm, qwen3_5_text_mtp: tests/reference/make_qwen3_5_fixtures.py):
# byte-identical exports after one step at lr 0; a resume keeps RUN/carry; a damaged one is refused.
foreach(case vlm text_mtp resume)
  add_test(NAME qwen3_5_carry_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/qwen3_5_carry.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/test-work
                   ${case})
  set_tests_properties(qwen3_5_carry_${case} PROPERTIES SKIP_RETURN_CODE 77
                       ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
endforeach()
