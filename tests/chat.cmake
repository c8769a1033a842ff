# pack --input chat: the Qwen3 chat template in C (data/chat.c) against Hugging Face
# transformers on the golden conversations of tests/golden/chat (text, ids, and the
# assistant / last / all loss masks token by token), then the CLI (tests/cli/chat_cli.sh).
find_package(ZLIB REQUIRED)
zt_add_test(test_chat ${ZT_TEST_DIR}/unit/test_chat.c zt_data ZLIB::ZLIB)

# CLI (tests/cli/chat_cli.sh), one case per test, on examples/sft/conversations.jsonl
foreach(case pack_verify per_rank train_on_last too_long bad_lines skip_bad field wrong_template flags deep_template deep_line)
  add_test(NAME chat_cli_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/chat_cli.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/chat_cli ${case})
endforeach()
add_test(NAME chat_cli_help COMMAND ${ZT_EXE} pack --help)
set_tests_properties(chat_cli_help PROPERTIES PASS_REGULAR_EXPRESSION
  "--input KIND.*chat +JSON Lines of conversations.*--field NAME.*chat: the array of messages.*--train-on RULE.*assistant.*last.*all")
