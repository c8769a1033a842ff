# Packed, isolated conversations on Qwen3.5 at W = 2 (tests/cli/qwen3_5_chat.sh): one step at lr 0
# equals transformers on each conversation alone (tests/golden/q35_chat:
# tests/reference/make_qwen3_5_chat_golden.py).
add_test(NAME qwen3_5_chat_isolated
         COMMAND bash ${ZT_TEST_DIR}/cli/qwen3_5_chat.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/test-work)
set_tests_properties(qwen3_5_chat_isolated PROPERTIES LABELS "sft" TIMEOUT 300 PROCESSORS 2
                     ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
