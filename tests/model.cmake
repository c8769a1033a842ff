# Model and op tests: finite differences per op, Hugging Face golden files.
zt_add_test(test_ops ${ZT_TEST_DIR}/unit/test_ops.c zt_kernels)
# Gated DeltaNet's ops (conv1d+SiLU, l2norm, gated RMSNorm, the gated delta rule): naive double
# forwards, finite differences, packed documents, transformers' torch code (tests/golden/delta_ops).
zt_add_test(test_delta_ops ${ZT_TEST_DIR}/unit/test_delta_ops.c zt_kernels zt_checkpoint)
# cpu_sgemm bit for bit against its defining loop, every kernel this CPU runs
zt_add_test(test_gemm ${ZT_TEST_DIR}/unit/test_gemm.c zt_kernels)
target_compile_options(test_gemm PRIVATE -ffp-contract=off)
# attention's elementwise passes (exp, softmax step, dS, sigmoid): every kernel's bits = the portable C's
zt_add_test(test_att_rows ${ZT_TEST_DIR}/unit/test_att_rows.c zt_kernels)
target_compile_options(test_att_rows PRIVATE -ffp-contract=off)
zt_add_test(test_model_golden ${ZT_TEST_DIR}/unit/test_model_golden.c zt_train zt_test_support)
zt_add_test(test_hf_io ${ZT_TEST_DIR}/unit/test_hf_io.c zt_checkpoint)
# A unit of 300 tensors (an MoE layer's size) through the layout, the optimizer spans, the HF load and the checkpoint
zt_add_test(test_unit_many ${ZT_TEST_DIR}/unit/test_unit_many.c zt_engine zt_checkpoint)
# Config ranges: values that would wrap or truncate are refused by name (tests/unit/test_config.c).
zt_add_test(test_config ${ZT_TEST_DIR}/unit/test_config.c zt_model)
# Qwen3.5's text model against transformers' Qwen3_5ForCausalLM (tests/reference/make_qwen3_5_golden.py)
zt_add_test(test_qwen3_5_golden ${ZT_TEST_DIR}/unit/test_qwen3_5_golden.c zt_train zt_test_support)
# The CPU blocks both families compose (model/blocks.c): a decoder layer in Qwen3's and in Qwen3.5's
# options against a naive double layer, forward and finite differences (tests/unit/test_blocks.c)
zt_add_test(test_blocks ${ZT_TEST_DIR}/unit/test_blocks.c zt_model)
