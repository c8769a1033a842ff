# Long blocks end to end (issue 37): pack + pack --verify at --seq-len 131072 (ZT_SEQ_LEN_MAX)
# for ids, bytes, tokenized JSON Lines and chat; a longer block refused; the gate refusing a
# dataset longer than the model's YaRN range (tests/cli/pack_long.sh, one case per test).
foreach(case ids bytes jsonl chat refuse yarn_gate)
  add_test(NAME pack_long_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/pack_long.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/pack_long ${case})
  set_tests_properties(pack_long_${case} PROPERTIES TIMEOUT 300)
endforeach()
