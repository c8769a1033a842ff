# The parsers under libFuzzer (tests/fuzz): a separate clang + ASan + UBSan build in
# build/fuzz (fixture fuzz_build), then each harness for ZT_FUZZ_SECONDS on its seed
# corpus; any crash, sanitizer report or violated property fails the test and names
# the saved input (build/fuzz/findings). Long runs: tests/fuzz/README.
# Under ctest each target runs a fixed number of executions from seed 1 (about 20 s each
# on an idle 2-core machine), not a fixed time: a time budget makes the inputs tried depend
# on the machine's load, so CI would test different inputs on every run. ZT_FUZZ_SECONDS
# only caps a slow machine.
set(ZT_FUZZ_SECONDS 120 CACHE STRING "at most this many seconds per fuzz target under ctest")
set(ZT_FUZZ_RUNS_safetensors 400000)
set(ZT_FUZZ_RUNS_dataset 300000)
set(ZT_FUZZ_RUNS_config 500000)
set(ZT_FUZZ_RUNS_tokenizer 200000)
set(ZT_FUZZ_RUNS_tokenizer_split 20000)
set(ZT_FUZZ_RUNS_jsonl 80000)
set(ZT_FUZZ_RUNS_ckpt_meta 30000)
set(ZT_FUZZ_RUNS_flight 80000)
set(ZT_FUZZ_RUNS_watch 40000)
set(ZT_FUZZ_RUNS_jinja_parse 2500)
set(ZT_FUZZ_RUNS_jinja_render 2500)
set(ZT_FUZZ_ENV "ZT_FUZZ_BUILD=${CMAKE_BINARY_DIR}/fuzz")
add_test(NAME fuzz_build COMMAND bash ${ZT_TEST_DIR}/fuzz/run.sh --build-only)
set_tests_properties(fuzz_build PROPERTIES FIXTURES_SETUP fuzz_bin TIMEOUT 900 ENVIRONMENT "${ZT_FUZZ_ENV}")
foreach(t safetensors dataset config tokenizer tokenizer_split jsonl ckpt_meta flight watch jinja_parse jinja_render)
  add_test(NAME fuzz_${t} COMMAND bash ${ZT_TEST_DIR}/fuzz/run.sh --fresh --runs ${ZT_FUZZ_RUNS_${t}}
                                  --seconds ${ZT_FUZZ_SECONDS} --seed 1 ${t})
  math(EXPR limit "${ZT_FUZZ_SECONDS} + 180")
  set_tests_properties(fuzz_${t} PROPERTIES FIXTURES_REQUIRED fuzz_bin TIMEOUT ${limit} ENVIRONMENT "${ZT_FUZZ_ENV}")
endforeach()
