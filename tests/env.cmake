# The ZT_* environment variables (base/env.h): the table, its documentation in docs/design.md,
# the accessors (tests/unit/test_env.c); and that no product file but base/env.c reads one.
zt_add_test(test_env ${ZT_TEST_DIR}/unit/test_env.c zt_base)
add_test(NAME env_one_reader
         COMMAND sh -c "cd '${CMAKE_SOURCE_DIR}' && ! grep -rn 'getenv(\"ZT_' base kernels model data checkpoint engine train ops cli | grep -v '^base/env[.][ch]:'")
