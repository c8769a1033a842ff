# Dealing blocks to ranks and the evenfix stop, without MPI (tests/unit/test_train_deal.c),
# and the train/preflight flag tables (cli/flags.c): alias, range errors, help.
add_executable(test_train_deal ${ZT_TEST_DIR}/unit/test_train_deal.c)
target_link_libraries(test_train_deal PRIVATE zt_train)
add_test(NAME train_deal COMMAND test_train_deal)

add_test(NAME train_flags_help COMMAND ${ZT_EXE} train --help)
set_tests_properties(train_flags_help PROPERTIES PASS_REGULAR_EXPRESSION
  "--no-verify-crc.*also accepted as --no-verify-data.*--lr X +peak learning rate \\(default 0.0001\\).*--first-collective-timeout S +the same until the first step has finished \\(default 1800\\)")
add_test(NAME train_flags_range COMMAND ${ZT_EXE} train --model x --data y --run-dir z --micro-batch 0)
set_tests_properties(train_flags_range PROPERTIES PASS_REGULAR_EXPRESSION
  "zerotrain train: error: --micro-batch: 0 is out of range \\[1, 1048576\\]")
add_test(NAME preflight_flags_range COMMAND ${ZT_EXE} preflight --data y --grad-accum -1)
set_tests_properties(preflight_flags_range PROPERTIES PASS_REGULAR_EXPRESSION
  "zerotrain preflight: error: --grad-accum: -1 is out of range \\[1, 1048576\\]")
add_test(NAME preflight_flags_enum COMMAND ${ZT_EXE} preflight --data y --device tpu)
set_tests_properties(preflight_flags_enum PROPERTIES PASS_REGULAR_EXPRESSION "--device tpu: expected cpu, cuda or auto")
# the alias is parsed (the run then fails on the missing dataset, not on the flag)
add_test(NAME preflight_flags_alias COMMAND ${ZT_EXE} preflight --data /nonexistent-zt-data --no-verify-data)
set_tests_properties(preflight_flags_alias PROPERTIES PASS_REGULAR_EXPRESSION "nonexistent-zt-data"
  FAIL_REGULAR_EXPRESSION "unrecognized option" ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
