# fp32 -> bf16 rounding (base/bf16.h) against a reference on doubles: ties, subnormals,
# overflow to inf, NaN (tests/unit/test_bf16.c).
zt_add_test(test_bf16 ${ZT_TEST_DIR}/unit/test_bf16.c m)
