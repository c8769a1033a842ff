# The CUDA attention's --attention auto policy (kernels/cuda/attention/policy.c, pure C, in
# zt_kernels) against the old trainer's rule: a table of every branch and a sweep (CPU, < 1 s).
zt_add_test_exe(test_attn_policy ${ZT_TEST_DIR}/unit/test_attn_policy.c zt_kernels zt_base)
zt_expect_test(attn_policy_table EXIT 0 PASS "sweep: [0-9]+ of [0-9]+ cases the same kind, [0-9]+ the same cuDNN questions\n[0-9]+ checks, 0 failed\n"
               COMMAND $<TARGET_FILE:test_attn_policy>)
