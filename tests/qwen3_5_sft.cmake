# Qwen3.5 fine-tuning end to end (tests/cli/qwen3_5_sft.sh): pack with the Qwen3.5 tokenizer.json and
# trl's qwen3_5_think_training.jinja, ids and masks equal to apply_chat_template's, then one step at
# lr 0 at W = 2 of a tiny Qwen3.5 over the 248,320 vocabulary equals transformers on each
# conversation alone (tests/golden/q35_sft: tests/reference/make_qwen3_5_sft_golden.py).
zt_expect_test(qwen3_5_sft_end_to_end EXIT 0 PASS "ok \\[qwen3_5_sft\\]"
  COMMAND bash ${ZT_TEST_DIR}/cli/qwen3_5_sft.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/test-work)
set_tests_properties(qwen3_5_sft_end_to_end PROPERTIES LABELS "sft" TIMEOUT 300 PROCESSORS 2
                     ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
# A chat dataset rendered with another template than the model directory's is refused at start
# naming both digests, by the preflight gate and by train itself (tests/cli/template_digest.sh).
zt_expect_test(qwen3_5_sft_template_digest EXIT 0 PASS "ok \\[template_digest\\]"
  COMMAND bash ${ZT_TEST_DIR}/cli/template_digest.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/test-work)
# Per conversation: the engine at W = 2 evaluates each conversation alone (the other rank a filler),
# its summed loss and target count against transformers on that conversation (tests/unit/test_q35_doc_loss.c)
zt_add_test_exe(test_q35_doc_loss ${ZT_TEST_DIR}/unit/test_q35_doc_loss.c zt_train ZLIB::ZLIB)
zt_add_mpi_test(qwen3_5_sft_per_conversation 2 $<TARGET_FILE:test_q35_doc_loss> ${ZT_GOLDEN_DIR}/q35_sft
                ${CMAKE_BINARY_DIR}/test-work/q35_doc_loss)
set_tests_properties(qwen3_5_sft_per_conversation PROPERTIES LABELS "sft" TIMEOUT 300
                     ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
