# Benchmarks in CI-sized form. The strong-scaling command end to end on the real trainer
# (tiny model, 1/2/4 ranks, few steps) with --check: the table is produced and consistent
# (tokens add up to the same global batch, cost = ranks x threads x hours, efficiency and
# communication volume re-derived from the raw metrics). The PyTorch head-to-head runs where
# torch, transformers and numpy are installed and is skipped (exit 77) elsewhere.
string(JOIN " " ZT_BENCH_MPIRUN ${ZT_MPIEXEC})
add_test(NAME bench_strong_scaling
         COMMAND bash ${CMAKE_SOURCE_DIR}/benchmarks/strong_scaling.sh --zerotrain ${ZT_EXE}
                 --ranks "1 2 4" --global-batch 4 --seq-len 32 --steps 2 --warmup 1 --timeout 300
                 --mpirun "${ZT_BENCH_MPIRUN}" --work ${CMAKE_BINARY_DIR}/test-work/bench_strong_scaling --check)
set_tests_properties(bench_strong_scaling PROPERTIES
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" PROCESSORS 2 TIMEOUT 900)
zt_expect_test(bench_strong_scaling_uneven_batch EXIT 1
  PASS "--global-batch 4 blocks is not a multiple of 3 ranks"
  COMMAND bash ${CMAKE_SOURCE_DIR}/benchmarks/strong_scaling.sh --zerotrain ${ZT_EXE} --ranks "1 3"
          --global-batch 4 --work ${CMAKE_BINARY_DIR}/test-work/bench_strong_scaling_uneven)

find_program(ZT_PYTHON3 python3)
if(ZT_PYTHON3)
  add_test(NAME bench_pytorch_head_to_head
           COMMAND ${ZT_PYTHON3} ${CMAKE_SOURCE_DIR}/benchmarks/pytorch_head_to_head.py --zerotrain ${ZT_EXE}
                   --ranks 2 --global-batch 2 --steps 3 --warmup 1 --seq-len 32 --hidden 64 --ffn 128 --heads 2
                   --kv-heads 1 --head-dim 48 --threads 1 --mpirun "${ZT_BENCH_MPIRUN}"
                   --work ${CMAKE_BINARY_DIR}/test-work/bench_pytorch_head_to_head)
  set_tests_properties(bench_pytorch_head_to_head PROPERTIES SKIP_RETURN_CODE 77 PROCESSORS 2 TIMEOUT 900
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
  # The delta rule alone against transformers' torch_chunk_gated_delta_rule, CI-sized: the outputs
  # and gradients must agree (the speed ratio is printed, not judged; exit 77 without torch).
  add_test(NAME bench_delta_rule_vs_torch
           COMMAND ${ZT_PYTHON3} ${CMAKE_SOURCE_DIR}/benchmarks/delta_rule_vs_torch.py --bench $<TARGET_FILE:zt_delta_bench>
                   --S 150 --Hk 2 --Hv 6 --Dk 16 --Dv 72 --reps 1)
  set_tests_properties(bench_delta_rule_vs_torch PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
  # The CPU attention alone against PyTorch's scaled_dot_product_attention (causal, GQA), CI-sized and
  # off every block edge (S 300 = 3 blocks of 96 + 12, D 48): o, dq, dk, dv must agree to 1e-4 (the
  # speed ratio is printed, not judged; exit 77 without torch).
  add_test(NAME bench_attention_vs_torch
           COMMAND ${ZT_PYTHON3} ${CMAKE_SOURCE_DIR}/benchmarks/attention_vs_torch.py --bench $<TARGET_FILE:zt_attention_bench>
                   --S 300 --H 6 --Hkv 2 --D 48 --reps 1)
  set_tests_properties(bench_attention_vs_torch PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
  # One Qwen3.5 Gated DeltaNet decoder layer against transformers' Qwen3_5DecoderLayer, CI-sized:
  # every parameter gradient and d(input) must agree (the ratio is printed, not judged).
  add_test(NAME bench_deltanet_layer_vs_torch
           COMMAND ${ZT_PYTHON3} ${CMAKE_SOURCE_DIR}/benchmarks/deltanet_layer_vs_torch.py
                   --bench $<TARGET_FILE:zt_deltanet_layer_bench> --S 150 --hidden 64 --ffn 96 --Hk 2 --Hv 6
                   --Dk 16 --Dv 24 --reps 1)
  set_tests_properties(bench_deltanet_layer_vs_torch PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
  # Context parallelism's benchmark, CI-sized: C = 2 on 2 ranks against C = 1 on 1 rank on the same
  # global batch; the losses must agree to 1e-5 and plan --device cpu must equal each run's reported
  # bytes (the speed and memory ratios are printed, not judged).
  add_test(NAME bench_context_parallel
           COMMAND ${ZT_PYTHON3} ${CMAKE_SOURCE_DIR}/benchmarks/context_parallel.py --zerotrain ${ZT_EXE}
                   --seq-len 512 --steps 2 --warmup 1 --memory-seq "" --hidden 64 --ffn 128 --heads 4 --kv-heads 2
                   --head-dim 16 --mpirun "${ZT_BENCH_MPIRUN}" --work ${CMAKE_BINARY_DIR}/test-work/bench_context_parallel)
  set_tests_properties(bench_context_parallel PROPERTIES PROCESSORS 2 TIMEOUT 300
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
endif()

# The GEMM benchmark runs and prints its table (one repetition; the numbers are not judged here;
# the portable kernel, ~1 GFLOP/s on x86, is left to test_gemm).
zt_expect_test(bench_gemm EXIT 0 PASS "geometric mean of the ratios:"
  COMMAND $<TARGET_FILE:zt_gemm_bench> --reps 1 --kernels avx512,avx2)
set_tests_properties(bench_gemm PROPERTIES
  ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1" TIMEOUT 300)
