# The parsers under libFuzzer (tests/fuzz): a separate clang + ASan + UBSan build in
# build/fuzz (fixture fuzz_build), then each harness for ZT_FUZZ_SECONDS on its seed
# corpus; any crash, sanitizer report or violated property fails the test and names
# the saved input (build/fuzz/findings). Long runs: tests/fuzz/README.
set(ZT_FUZZ_SECONDS 30 CACHE STRING "seconds each fuzz target runs under ctest")
set(ZT_FUZZ_ENV "ZT_FUZZ_BUILD=${CMAKE_BINARY_DIR}/fuzz")
add_test(NAME fuzz_build COMMAND bash ${ZT_TEST_DIR}/fuzz/run.sh --build-only)
set_tests_properties(fuzz_build PROPERTIES FIXTURES_SETUP fuzz_bin TIMEOUT 900 ENVIRONMENT "${ZT_FUZZ_ENV}")
foreach(t safetensors dataset config tokenizer jsonl ckpt_meta)
  add_test(NAME fuzz_${t} COMMAND bash ${ZT_TEST_DIR}/fuzz/run.sh --seconds ${ZT_FUZZ_SECONDS} --seed 1 ${t})
  math(EXPR limit "${ZT_FUZZ_SECONDS} + 180")
  set_tests_properties(fuzz_${t} PROPERTIES FIXTURES_REQUIRED fuzz_bin TIMEOUT ${limit} ENVIRONMENT "${ZT_FUZZ_ENV}")
endforeach()
