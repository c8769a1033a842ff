# `zerotrain plan`: memory arithmetic, FLOPs per token, collective volumes, and the
# field report's 4/8/16-B300 table reproduced within 10% (tests/unit/test_plan.c).
add_executable(test_plan ${ZT_TEST_DIR}/unit/test_plan.c ${CMAKE_SOURCE_DIR}/ops/plan.c)
target_link_libraries(test_plan PRIVATE zt_train)
target_compile_definitions(test_plan PRIVATE ZT_TEST_DIR="${ZT_TEST_DIR}" ZT_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
add_test(NAME plan_model COMMAND test_plan)

# The CLI: the field comparison names full sharding as consistent; bad input is refused clearly.
zt_expect_test(plan_cli_field EXIT 0
  PASS "consistent with the field table \\(every size within 10% and fits in memory\\): full"
  COMMAND ${ZT_EXE} plan --field --model ${CMAKE_SOURCE_DIR}/examples/qwen3-32b/config.json)
zt_expect_test(plan_cli_small_model EXIT 0
  PASS "tok/s per GPU"
  COMMAND ${ZT_EXE} plan --model ${CMAKE_SOURCE_DIR}/examples/qwen3-0.6b --gpu H100
         --world 8 --worlds 1,2,4,8,16)
zt_expect_test(plan_cli_bad_gpu EXIT 2
  PASS "--gpu X999: not a preset \\(presets: B300"
  COMMAND ${ZT_EXE} plan --field --gpu X999)
zt_expect_test(plan_cli_bad_world EXIT 2
  PASS "world size 12 spans nodes of 8 GPUs"
  COMMAND ${ZT_EXE} plan --field --world 12)
zt_expect_test(plan_cli_no_model EXIT 2
  PASS "no model: give --model"
  COMMAND ${ZT_EXE} plan)
# A GPU file's numbers are range-checked: 1e400 (inf to cJSON) is refused, naming the file and the key.
zt_expect_test(plan_cli_gpu_file_range EXIT 2
  PASS "gpu_inf\\.json: field \"peak_flops\" is inf, out of range: it must be a finite number in \\[1e\\+09, 1e\\+18\\] FLOP/s"
  COMMAND ${ZT_EXE} plan --field --gpu-file ${ZT_TEST_DIR}/data/plan/gpu_inf.json)
# The checkpoint lines (cli/cmd_plan.c print_checkpoint): Qwen3-32B = 32.76 B parameters x 12 bytes =
# 393.1 GB; at W = 16 a GPU's share 24.6 GB (the --async-save snapshot), 8 GPUs a node 196.6 GB;
# 393.1 GB / (4 GB/s x 2 nodes) = 49.1 s.
zt_expect_test(plan_cli_checkpoint EXIT 0
  PASS "size \\(whole job\\) +393\\.1\n  --async-save host snapshot per GPU +24\\.6   \\(196\\.6 GB of host memory for the 8 GPUs of a node\\)\n  write time \\(s\\) +49\\.14[0-9] +at 4 GB/s per node x 2 nodes"
  COMMAND ${ZT_EXE} plan --field --model ${CMAKE_SOURCE_DIR}/examples/qwen3-32b/config.json
         --world 16 --shard full --ckpt-gbps 4)

# --context-parallel C (docs/plan.md "Context parallelism"): Qwen3-32B on 2 x 8 B300 at 32k with
# recompute, C = 8: 2 data-parallel ranks, 4096 tokens of each block per GPU, the per-layer K/V
# all-gathers over NVLink, both attention paths' scratch (GEMM 12 g Sq S + ...: 13.2 GB); the global
# batch divides among W / C ranks; C must divide the shard group and be at most seq_len.
zt_expect_test(plan_cli_context_parallel EXIT 0
  PASS "context parallel 8: 2 data-parallel ranks x micro-batch 1 x grad-accum 8 x seq 32768 = 524288 tokens per step, 32768 per GPU \\(its 1/8 of each block\\).*activations \\(recompute\\) +7\\.1 .*context K/V \\(gathered K, V \\+ block dK, dV\\) +0\\.4 .*attention scratch, GEMM path \\(today's\\) +13\\.2 .*counted.*attention scratch, tiled path +0\\.1 .*context K/V all-gather +NVLink +8 +1024 .*context dK/dV reduce-scatter +NVLink +8 +512 .*\n +4 +- +\\(context parallel 8 does not divide 4 GPUs\\)"
  COMMAND ${ZT_EXE} plan --model ${CMAKE_SOURCE_DIR}/examples/qwen3-32b --gpu B300
         --world 16 --seq-len 32768 --recompute --context-parallel 8 --shard full)
zt_expect_test(plan_cli_context_parallel_batch EXIT 0
  PASS "2 data-parallel ranks x micro-batch 1 x grad-accum 16 x seq 32768 = 1048576 tokens per step.*attention scratch, GEMM path \\(today's\\) +13\\.2 +\\(12 g Sq S \\+ 8 g S D \\+ 4 g Sq; not counted: --attention tiled\\)"
  COMMAND ${ZT_EXE} plan --model ${CMAKE_SOURCE_DIR}/examples/qwen3-32b
         --world 16 --seq-len 32768 --context-parallel 8 --shard full --global-batch 1048576 --attention tiled)
zt_expect_test(plan_cli_context_parallel_divide EXIT 2
  PASS "error: --context-parallel 16 does not divide the hsdp shard group of 8 ranks"
  COMMAND ${ZT_EXE} plan --model ${CMAKE_SOURCE_DIR}/examples/qwen3-32b
         --world 16 --shard hsdp --context-parallel 16)
zt_expect_test(plan_cli_context_parallel_seq EXIT 2
  PASS "error: --context-parallel 8: blocks of 4 tokens cannot be split into 2 x 8 chunks"
  COMMAND ${ZT_EXE} plan --model ${CMAKE_SOURCE_DIR}/examples/qwen3-32b
         --world 16 --shard full --seq-len 4 --context-parallel 8)

# Qwen3.5 (docs/plan.md "Qwen3.5"): each layer kind's saved activations against the CPU model's own
# allocations, the 27B's memory terms and FLOPs against a hand count and the family's, the compute
# split, context parallelism planned (C = 2) and refused where C does not divide the key heads (C = 3);
# the 27B's plan on 2 x 8 B300s at 8k with recompute.
add_executable(test_plan_qwen3_5 ${ZT_TEST_DIR}/unit/test_plan_qwen3_5.c ${CMAKE_SOURCE_DIR}/ops/plan.c)
target_link_libraries(test_plan_qwen3_5 PRIVATE zt_train)
target_compile_definitions(test_plan_qwen3_5 PRIVATE ZT_TEST_DIR="${ZT_TEST_DIR}" ZT_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
add_test(NAME plan_qwen3_5 COMMAND test_plan_qwen3_5)
zt_expect_test(plan_cli_qwen3_5 EXIT 0
  PASS "model: Qwen3\\.5 \\([^)]*\\): 64 layers \\(48 linear attention \\(Gated DeltaNet, heads 16/48 x 128/128\\) \\+ 16 full attention \\(gated, heads 24/4 x 256\\)\\).*parameters 26895998464 .*FLOPs per token at seq 8192: 169\\.4 G = 6 N \\+ 12 L_attn S hidden, L_attn = the 16 layers.*activations \\(recompute\\) +18\\.2 +\\(without recompute 168\\.2, with 18\\.2\\)\n  total +76\\.4 .*fits.*step +21\\.790 "
  COMMAND ${ZT_EXE} plan --model ${CMAKE_SOURCE_DIR}/examples/qwen3.5-27b --gpu B300
         --world 16 --seq-len 8192 --recompute --shard full)
# Qwen3.5 with --context-parallel (issue 50 item 4; docs/design.md "GPU head sharding"): the 27B at 64k on
# 2 x 8 B300, C = 8 (examples/qwen3.5-27b-64k.yaml's job): 8,192 tokens per GPU, the 48 linear layers'
# head sharding (12.7 GB of split buffers; per layer 2 S Wp = 1,367.3 MB gathered, 4 S Vd = 1,610.6 MB
# reduce-scattered in forward, 805.3 and 2,709.5 MB in backward; 48 x 8 micro-batches x 3 passes with
# recompute = 1,152 of each), the 16 full layers' K/V exchange, the GEMM attention's scratch counted
# (39.5 GB; the example takes the tiled one: 90.2 GB in all); it fits (first strategy, full shard).
zt_expect_test(plan_cli_qwen3_5_context_parallel EXIT 0
  PASS "context parallel 8: 2 data-parallel ranks x micro-batch 1 x grad-accum 8 x seq 65536 = 1048576 tokens per step, 65536 per GPU \\(its 1/8 of each block\\).*activations \\(recompute\\) +18\\.2 .*context K/V \\(gathered K, V \\+ block dK, dV\\) +0\\.8 .*context heads \\(block rows, my heads' state\\) +12\\.7 .*attention scratch, GEMM path \\(today's\\) +39\\.5 .*total +129\\.4 +of 265\\.0 usable: fits.*head sharding: in each of the 48 layers that shard their heads, per micro-batch the 8 ranks all-gather the projected rows \\(1367\\.3 MB gathered\\) and reduce-scatter the output \\(1610\\.6 MB in, fp32\\) in forward \\(and again with recompute\\), all-gather its gradient \\(805\\.3 MB\\) and reduce-scatter the rows' gradients \\(2709\\.5 MB in, fp32\\).*context heads all-gather +NVLink +8 +1152 .*context heads reduce-scatter +NVLink +8 +1152 "
  COMMAND ${ZT_EXE} plan --model ${CMAKE_SOURCE_DIR}/examples/qwen3.5-27b --gpu B300
         --world 16 --seq-len 65536 --recompute --context-parallel 8)
# ... refused with the rule and the numbers: C not dividing the shard group, C above the 48 value heads,
# C not dividing the 16 key heads (the GPU passes' rule).
zt_expect_test(plan_cli_qwen3_5_context_parallel_divide EXIT 2
  PASS "error: --context-parallel 3 does not divide the full shard group of 16 ranks"
  COMMAND ${ZT_EXE} plan --model ${CMAKE_SOURCE_DIR}/examples/qwen3.5-27b --gpu B300
         --world 16 --seq-len 65536 --recompute --context-parallel 3 --shard full)
zt_expect_test(plan_cli_qwen3_5_context_parallel_value_heads EXIT 2
  PASS "error: --context-parallel 64: Qwen3\\.5's Gated DeltaNet layers split their 48 value heads \\(linear_num_value_heads\\) over the context group, each rank running whole blocks for a contiguous range of them, so C must be at most 48"
  COMMAND ${ZT_EXE} plan --model ${CMAKE_SOURCE_DIR}/examples/qwen3.5-27b --gpu B300
         --world 64 --seq-len 65536 --recompute --context-parallel 64 --shard full)
zt_expect_test(plan_cli_qwen3_5_context_parallel_key_heads EXIT 2
  PASS "error: --context-parallel 3: Qwen3\\.5's GPU passes give each rank of the context group whole key heads of its Gated DeltaNet layers \\(16 key heads, linear_num_key_heads, each read by 3 of the 48 value heads\\), so C must divide 16"
  COMMAND ${ZT_EXE} plan --model ${CMAKE_SOURCE_DIR}/examples/qwen3.5-27b --gpu B300
         --world 24 --seq-len 65536 --recompute --context-parallel 3 --shard full)

# `plan --device cpu` prints, part by part, the bytes per rank that `train --device cpu` allocates and
# writes to run.json (Qwen3 at W = 1, 2, keep-gathered, context parallel 2 and 3 on uneven blocks,
# hybrid 2 x 2 with C = 2; Qwen3.5 at W = 1, 2 and C = 2) (tests/cli/plan_cpu_memory.sh).
add_test(NAME plan_cli_cpu_memory
         COMMAND bash ${ZT_TEST_DIR}/cli/plan_cpu_memory.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                 ${CMAKE_BINARY_DIR}/test-work/plan_cpu_memory)
set_tests_properties(plan_cli_cpu_memory PROPERTIES TIMEOUT 300 PROCESSORS 2)
