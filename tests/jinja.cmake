# The Jinja engine for chat templates (data/jinja*.c) against transformers' apply_chat_template
# on every trl 1.16.0 template (tests/golden/chat_templates, made by
# tests/reference/make_chat_templates_golden.py): text, raise_exception messages, generation
# spans, Qwen3 ids and the assistant mask; for the qwen3_5/3_6/3_8 templates also Qwen3.5 ids and masks
# (expected_qwen3_5.jsonl.gz: tests/reference/make_chat_templates_q35_golden.py).
find_package(ZLIB REQUIRED)
zt_add_test(test_jinja_templates ${ZT_TEST_DIR}/unit/test_jinja_templates.c zt_data ZLIB::ZLIB)
# --train-on assistant|last with templates without {% generation %} blocks (prefix mode): spans, ids
# and masks against transformers rendering prefix by prefix, 10 trl templates x 16 conversations x 2
# rules (tests/reference/make_chat_prefix_masks_golden.py)
zt_add_test(test_chat_prefix_masks ${ZT_TEST_DIR}/unit/test_chat_prefix_masks.c zt_data ZLIB::ZLIB)

# pack --input chat with a Jinja template from the command line (tests/cli/jinja_cli.sh)
foreach(case fastpath generation bad_template raise limits vars)
  add_test(NAME jinja_cli_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/jinja_cli.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/jinja_cli ${case})
  set_tests_properties(jinja_cli_${case} PROPERTIES TIMEOUT 120)
endforeach()
