# GPU tests and benchmarks (tests/gpu/). Included from tests/CMakeLists.txt in the
# normal build and from tests/gpu/gpu_only.cmake with ZT_GPU_ONLY=ON. A program
# exits 77 when there is no CUDA device, which ctest reports as skipped.
if(ZT_CUDA)
  set(ZT_GPU_DIR ${CMAKE_SOURCE_DIR}/tests/gpu)

  # A decoder layer built from the zt_cuda ops (defined by the top level in the full build).
  if(NOT TARGET zt_cuda_layer)
    file(GLOB ZT_MODEL_CUDA_SRC CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/model/*_cuda*.c)
    add_library(zt_cuda_layer STATIC ${ZT_MODEL_CUDA_SRC})
    target_link_libraries(zt_cuda_layer PUBLIC zt_cuda)
  endif()

  add_executable(test_cuda_ops ${ZT_GPU_DIR}/test_cuda_ops.c ${ZT_GPU_DIR}/gpu_test_util.c)
  target_link_libraries(test_cuda_ops PRIVATE zt_cuda zt_kernels)
  add_test(NAME gpu_cuda_ops COMMAND test_cuda_ops)
  set_tests_properties(gpu_cuda_ops PROPERTIES SKIP_RETURN_CODE 77)

  # Tiny Qwen3 (tests/golden/tiny_untied_gqa shapes): 20 steps on GPU and CPU.
  add_executable(train_tiny ${ZT_GPU_DIR}/train_tiny.c ${ZT_GPU_DIR}/gpu_test_util.c
                 ${CMAKE_SOURCE_DIR}/model/layout.c ${CMAKE_SOURCE_DIR}/model/qwen3.c ${CMAKE_SOURCE_DIR}/model/qwen3_context.c ${CMAKE_SOURCE_DIR}/model/blocks.c ${CMAKE_SOURCE_DIR}/model/context.c ${CMAKE_SOURCE_DIR}/model/qwen3_5_context.c
                   ${CMAKE_SOURCE_DIR}/model/family.c ${CMAKE_SOURCE_DIR}/model/qwen3_5.c ${CMAKE_SOURCE_DIR}/model/flops.c ${CMAKE_SOURCE_DIR}/data/batch.c)
  target_link_libraries(train_tiny PRIVATE zt_cuda_layer zt_kernels)
  add_test(NAME gpu_train_tiny COMMAND train_tiny)
  set_tests_properties(gpu_train_tiny PROPERTIES SKIP_RETURN_CODE 77)

  # Qwen3.5's GPU kernels against the CPU ops, and its GPU passes unit by unit against its CPU
  # passes (tests/cudaemu.cmake runs both on the CPU execution of CUDA in CI).
  add_executable(test_cuda_ops_qwen3_5 ${ZT_GPU_DIR}/test_cuda_ops_qwen3_5.c ${ZT_GPU_DIR}/gpu_test_util.c)
  target_link_libraries(test_cuda_ops_qwen3_5 PRIVATE zt_cuda zt_kernels)
  add_test(NAME gpu_cuda_ops_qwen3_5 COMMAND test_cuda_ops_qwen3_5)
  set_tests_properties(gpu_cuda_ops_qwen3_5 PROPERTIES SKIP_RETURN_CODE 77)
  add_executable(test_qwen3_5_cuda ${ZT_GPU_DIR}/test_qwen3_5_cuda.c ${ZT_GPU_DIR}/gpu_test_util.c
                 ${CMAKE_SOURCE_DIR}/model/layout.c ${CMAKE_SOURCE_DIR}/model/qwen3.c ${CMAKE_SOURCE_DIR}/model/qwen3_context.c ${CMAKE_SOURCE_DIR}/model/blocks.c ${CMAKE_SOURCE_DIR}/model/context.c ${CMAKE_SOURCE_DIR}/model/qwen3_5_context.c
                 ${CMAKE_SOURCE_DIR}/model/family.c ${CMAKE_SOURCE_DIR}/model/qwen3_5.c ${CMAKE_SOURCE_DIR}/model/flops.c
                 ${CMAKE_SOURCE_DIR}/data/batch.c)
  target_link_libraries(test_qwen3_5_cuda PRIVATE zt_cuda_layer zt_kernels)
  add_test(NAME gpu_qwen3_5_cuda COMMAND test_qwen3_5_cuda)
  set_tests_properties(gpu_qwen3_5_cuda PROPERTIES SKIP_RETURN_CODE 77)

  # The delta rule at the 27B's linear-layer shape, fp32 vs tensor-core chunked kernels (not a ctest:
  # tests/gpu/run.sh's step delta_tc runs it beside fla; emu_bench_delta_smoke runs its code path).
  add_executable(bench_delta ${ZT_GPU_DIR}/bench_delta.c ${ZT_GPU_DIR}/gpu_test_util.c)
  target_link_libraries(bench_delta PRIVATE zt_cuda zt_kernels)

  # Benchmark (not a ctest: minutes of GPU time): tests/gpu/run.sh runs it.
  add_executable(bench_layer ${ZT_GPU_DIR}/bench_layer.c ${ZT_GPU_DIR}/gpu_test_util.c)
  target_link_libraries(bench_layer PRIVATE zt_cuda_layer)
  target_sources(bench_layer PRIVATE ${CMAKE_SOURCE_DIR}/tests/support/attention_test.c)  # --attn tiled-scalar
  # A small layer, two iterations: proves the benchmark runs end to end.
  add_test(NAME gpu_bench_layer_smoke COMMAND bench_layer --smoke)
  set_tests_properties(gpu_bench_layer_smoke PROPERTIES SKIP_RETURN_CODE 77)

  # The GPU FSDP engine at world 1 (NCCL without MPI) against the CPU reference trainer.
  # Its sources are compiled in directly (as the comm tests do), so the same target
  # builds in the full build and in the ZT_GPU_ONLY one.
  if(ZT_HAVE_NCCL)
    set(ZT_R ${CMAKE_SOURCE_DIR}/engine)
    add_executable(test_fsdp_cuda ${ZT_GPU_DIR}/test_fsdp_cuda.c ${ZT_GPU_DIR}/gpu_test_util.c ${ZT_R}/fsdp.c ${ZT_R}/fsdp_stage.c ${ZT_R}/fsdp_cpu.c ${ZT_R}/cuda_module.c
                   ${ZT_R}/fsdp_cuda.c ${ZT_R}/optim.c ${CMAKE_SOURCE_DIR}/tests/support/trainer.c ${ZT_R}/comm.c ${ZT_R}/mesh.c ${ZT_R}/job_shape.c ${ZT_R}/flight.c
                   ${ZT_R}/comm_nccl.c ${CMAKE_SOURCE_DIR}/model/layout.c ${CMAKE_SOURCE_DIR}/model/qwen3.c ${CMAKE_SOURCE_DIR}/model/qwen3_context.c ${CMAKE_SOURCE_DIR}/model/blocks.c ${CMAKE_SOURCE_DIR}/model/context.c ${CMAKE_SOURCE_DIR}/model/qwen3_5_context.c
                   ${CMAKE_SOURCE_DIR}/model/family.c ${CMAKE_SOURCE_DIR}/model/qwen3_5.c ${CMAKE_SOURCE_DIR}/model/flops.c ${CMAKE_SOURCE_DIR}/data/batch.c)
    target_compile_definitions(test_fsdp_cuda PRIVATE ZT_NCCL_NO_MPI=1)
    target_include_directories(test_fsdp_cuda PRIVATE ${ZT_NCCL_INCLUDE})
    # test-only attention choices (cuDNN selected in a build without it)
    target_sources(test_fsdp_cuda PRIVATE ${CMAKE_SOURCE_DIR}/tests/support/attention_test.c)
    target_link_libraries(test_fsdp_cuda PRIVATE zt_cuda_layer zt_kernels ${ZT_NCCL_LIB} Threads::Threads m)
    add_test(NAME gpu_fsdp_cuda COMMAND test_fsdp_cuda)
    set_tests_properties(gpu_fsdp_cuda PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
    # The same at W = one rank per visible GPU (needs >= 2; skipped otherwise), NCCL
    # bootstrapped over MPI. Only in the full build (MPI found).
    if(TARGET MPI::MPI_C AND ZT_MPIEXEC)
      # The GPU engine with the real NCCL comm over MPI: what both multi-GPU tests link.
      function(zt_gpu_engine_mpi_test name)
        add_executable(${name} ${ARGN} ${ZT_GPU_DIR}/gpu_test_util.c ${ZT_R}/fsdp.c ${ZT_R}/fsdp_stage.c ${ZT_R}/fsdp_cpu.c ${ZT_R}/cuda_module.c ${ZT_R}/fsdp_cuda.c
                       ${ZT_R}/optim.c ${ZT_R}/comm.c ${ZT_R}/mesh.c ${ZT_R}/job_shape.c ${ZT_R}/flight.c ${ZT_R}/comm_nccl.c
                       ${CMAKE_SOURCE_DIR}/model/layout.c ${CMAKE_SOURCE_DIR}/model/qwen3.c ${CMAKE_SOURCE_DIR}/model/qwen3_context.c ${CMAKE_SOURCE_DIR}/model/blocks.c ${CMAKE_SOURCE_DIR}/model/context.c ${CMAKE_SOURCE_DIR}/model/qwen3_5_context.c
                   ${CMAKE_SOURCE_DIR}/model/family.c ${CMAKE_SOURCE_DIR}/model/qwen3_5.c ${CMAKE_SOURCE_DIR}/model/flops.c ${CMAKE_SOURCE_DIR}/data/batch.c)
        target_include_directories(${name} PRIVATE ${ZT_NCCL_INCLUDE})
        target_sources(${name} PRIVATE ${CMAKE_SOURCE_DIR}/tests/support/attention_test.c)
        target_link_libraries(${name} PRIVATE zt_cuda_layer zt_kernels ${ZT_NCCL_LIB} MPI::MPI_C Threads::Threads m)
      endfunction()
      zt_gpu_engine_mpi_test(test_fsdp_cuda_mpi ${ZT_GPU_DIR}/test_fsdp_cuda.c ${CMAKE_SOURCE_DIR}/tests/support/trainer.c ${ZT_R}/comm_mpi.c)
      add_test(NAME gpu_fsdp_cuda_mpi
               COMMAND sh -c [[bin=$0; shift
n=$("$bin" --count-devices) || { rc=$?; echo "fewer than 2 GPUs visible ($n): skipped"; exit $rc; }
echo "mpirun with $n ranks, one per GPU"
exec "$@" "$n" "$bin" --mpi]]
                       $<TARGET_FILE:test_fsdp_cuda_mpi> ${ZT_MPIEXEC}
                       ${MPIEXEC_NUMPROC_FLAG})
      set_tests_properties(gpu_fsdp_cuda_mpi PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
      # The engine at W vs itself at W = 1 and the fp32 CPU engine, one rank per GPU
      # (tests/cudaemu.cmake runs the same program at W = 1..3 on the CPU execution).
      zt_gpu_engine_mpi_test(test_fsdp_cuda_vs ${ZT_GPU_DIR}/test_fsdp_cuda_vs.c ${ZT_R}/comm_mpi.c)
      add_test(NAME gpu_fsdp_cuda_vs
               COMMAND sh -c [[bin=$0; probe=$1; shift 2
n=$("$probe" --count-devices); rc=$?; [ "$n" -ge 1 ] 2>/dev/null || { echo "no CUDA device: skipped"; exit 77; }
exec "$@" "$n" "$bin"]]
                       $<TARGET_FILE:test_fsdp_cuda_vs> $<TARGET_FILE:test_fsdp_cuda_mpi> ${ZT_MPIEXEC}
                       ${MPIEXEC_NUMPROC_FLAG})
      set_tests_properties(gpu_fsdp_cuda_vs PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
      # Context parallelism C = 2 on an even count of GPUs (>= 2), vs the CPU reference trainer
      # (tests/cudaemu.cmake runs it at W = 2 and 4 on the CPU execution of CUDA).
      zt_gpu_engine_mpi_test(test_fsdp_cuda_cp ${ZT_GPU_DIR}/test_fsdp_cuda_cp.c
                             ${CMAKE_SOURCE_DIR}/tests/support/trainer.c ${ZT_R}/comm_mpi.c)
      add_test(NAME gpu_fsdp_cuda_cp
               COMMAND sh -c [[bin=$0; probe=$1; shift 2
n=$("$probe" --count-devices) || { rc=$?; echo "fewer than 2 GPUs visible ($n): skipped"; exit $rc; }
exec "$@" $((n / 2 * 2)) "$bin" --context 2]]
                       $<TARGET_FILE:test_fsdp_cuda_cp> $<TARGET_FILE:test_fsdp_cuda_mpi> ${ZT_MPIEXEC}
                       ${MPIEXEC_NUMPROC_FLAG})
      set_tests_properties(gpu_fsdp_cuda_cp PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
    endif()

    # The engine end to end at Qwen3-32B shapes (L layers) vs the same ops without it
    # (not a ctest: ~80 GB of device memory; tests/gpu/run.sh runs it).
    add_executable(bench_fsdp_cuda ${ZT_GPU_DIR}/bench_fsdp_cuda.c ${ZT_GPU_DIR}/gpu_test_util.c ${ZT_R}/fsdp.c ${ZT_R}/fsdp_stage.c ${ZT_R}/fsdp_cpu.c ${ZT_R}/cuda_module.c
                   ${ZT_R}/fsdp_cuda.c ${ZT_R}/optim.c ${ZT_R}/comm.c ${ZT_R}/mesh.c ${ZT_R}/job_shape.c ${ZT_R}/flight.c ${ZT_R}/comm_nccl.c
                   ${ZT_R}/device_peak.c
                   ${CMAKE_SOURCE_DIR}/model/layout.c ${CMAKE_SOURCE_DIR}/model/qwen3.c ${CMAKE_SOURCE_DIR}/model/qwen3_context.c ${CMAKE_SOURCE_DIR}/model/blocks.c ${CMAKE_SOURCE_DIR}/model/context.c ${CMAKE_SOURCE_DIR}/model/qwen3_5_context.c
                   ${CMAKE_SOURCE_DIR}/model/family.c ${CMAKE_SOURCE_DIR}/model/qwen3_5.c ${CMAKE_SOURCE_DIR}/model/flops.c ${CMAKE_SOURCE_DIR}/data/batch.c)
    target_compile_definitions(bench_fsdp_cuda PRIVATE ZT_NCCL_NO_MPI=1)
    target_include_directories(bench_fsdp_cuda PRIVATE ${ZT_NCCL_INCLUDE})
    target_link_libraries(bench_fsdp_cuda PRIVATE zt_cuda_layer zt_kernels ${ZT_NCCL_LIB} Threads::Threads m)
    set_target_properties(test_fsdp_cuda bench_fsdp_cuda PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  endif()

  # The same place in both configurations: tests/gpu/run.sh looks in <build>/tests.
  set_target_properties(test_cuda_ops train_tiny bench_layer test_cuda_ops_qwen3_5 test_qwen3_5_cuda PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                        ${CMAKE_BINARY_DIR}/tests)
endif()
