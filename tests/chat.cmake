# pack --input chat: the Qwen3 chat template in C (data/chat_template.c) against Hugging Face
# transformers on the golden conversations of tests/golden/chat and, with tools in the
# messages, OpenAI and ShareGPT forms, tests/golden/chat_tools (text, ids, and the assistant /
# last / all loss masks token by token), mixtures, then the CLI (tests/cli/chat_cli.sh).
find_package(ZLIB REQUIRED)
zt_add_test(test_chat ${ZT_TEST_DIR}/unit/test_chat.c zt_data ZLIB::ZLIB)

# CLI (tests/cli/chat_cli.sh), one case per test, on examples/sft/conversations.jsonl
foreach(case pack_verify per_rank train_on_last too_long bad_lines skip_bad field wrong_template flags deep_template deep_line)
  add_test(NAME chat_cli_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/chat_cli.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/chat_cli ${case})
endforeach()
zt_expect_test(chat_cli_help EXIT 0
  PASS "--input KIND.*chat +JSON Lines of conversations.*--field NAME.*chat: the array of messages.*--train-on RULE.*assistant.*last.*all"
  COMMAND ${ZT_EXE} pack --help)

# Tools, the OpenAI and ShareGPT formats, mixtures (tests/cli/sft_tools_cli.sh), on
# examples/sft/tools_{messages,openai,sharegpt}.jsonl; train_world trains the packed tools data
# at W = 1 and 2 (MPI).
foreach(case formats bad_lines flags mixture_chat mixture_text train_world)
  add_test(NAME sft_tools_cli_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/sft_tools_cli.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/sft_tools_cli ${case})
  set_tests_properties(sft_tools_cli_${case} PROPERTIES LABELS "sft" TIMEOUT 300)
endforeach()
