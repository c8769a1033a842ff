# Dealing blocks to ranks and the evenfix stop, without MPI (tests/unit/test_train_deal.c),
# and the train/preflight flag tables (cli/flags.c): alias, range errors, help.
add_executable(test_train_deal ${ZT_TEST_DIR}/unit/test_train_deal.c)
target_link_libraries(test_train_deal PRIVATE zt_train)
add_test(NAME train_deal COMMAND test_train_deal)

zt_expect_test(train_flags_help EXIT 0
  PASS "--no-verify-crc.*also accepted as --no-verify-data.*--lr X +peak learning rate \\(default 0.0001\\).*--first-collective-timeout S +the same until the first step has finished \\(default 1800\\)"
  COMMAND ${ZT_EXE} train --help)
zt_expect_test(train_flags_range EXIT 2
  PASS "zerotrain train: error: --micro-batch: 0 is out of range \\[1, 1048576\\]"
  COMMAND ${ZT_EXE} train --model x --data y --run-dir z --micro-batch 0)
zt_expect_test(preflight_flags_range EXIT 2
  PASS "zerotrain preflight: error: --grad-accum: -1 is out of range \\[1, 1048576\\]"
  COMMAND ${ZT_EXE} preflight --data y --grad-accum -1)
zt_expect_test(preflight_flags_enum EXIT 2
  PASS "--device tpu: expected cpu, cuda or auto"
  COMMAND ${ZT_EXE} preflight --data y --device tpu)
# the alias is parsed (the run then fails on the missing dataset, not on the flag)
zt_expect_test(preflight_flags_alias EXIT 1
  PASS "nonexistent-zt-data"
  FAIL "unrecognized option"
  COMMAND ${ZT_EXE} preflight --data /nonexistent-zt-data --no-verify-data)
set_tests_properties(preflight_flags_alias PROPERTIES ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
