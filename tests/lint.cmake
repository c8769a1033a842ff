# Size rules of the product code (docs/design.md, "Size"): no function over 150 lines
# (tests/lint/function_size.sh, Universal Ctags); the mutation is the same script at a lower limit,
# which today's longest functions exceed, so the check is shown to fail where it should.
add_test(NAME lint_function_size COMMAND bash ${ZT_TEST_DIR}/lint/function_size.sh ${CMAKE_SOURCE_DIR} 150)
set_tests_properties(lint_function_size PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
zt_expect_test(lint_function_size_can_fail EXIT 1 PASS "FAIL: over 100 lines:\n  1[0-9][0-9] "
               COMMAND bash ${ZT_TEST_DIR}/lint/function_size.sh ${CMAKE_SOURCE_DIR} 100)
