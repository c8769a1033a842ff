# GPU tests and benchmarks (tests/gpu/). Included from tests/CMakeLists.txt in the
# normal build and from tests/gpu/gpu_only.cmake with ZT_GPU_ONLY=ON. A program
# exits 77 when there is no CUDA device, which ctest reports as skipped.
if(ZT_CUDA)
  set(ZT_GPU_DIR ${CMAKE_SOURCE_DIR}/tests/gpu)

  # A decoder layer (and the whole tiny model) built from the zt_cuda ops.
  add_library(zt_gpu_layer STATIC ${ZT_GPU_DIR}/gpu_layer.c)
  target_link_libraries(zt_gpu_layer PUBLIC zt_cuda)

  add_executable(test_cuda_ops ${ZT_GPU_DIR}/test_cuda_ops.c ${ZT_GPU_DIR}/gpu_test_util.c)
  target_link_libraries(test_cuda_ops PRIVATE zt_cuda zt_kernels)
  add_test(NAME gpu_cuda_ops COMMAND test_cuda_ops)
  set_tests_properties(gpu_cuda_ops PROPERTIES SKIP_RETURN_CODE 77)

  # Tiny Qwen3 (tests/golden/tiny_untied_gqa shapes): 20 steps on GPU and CPU.
  add_executable(train_tiny ${ZT_GPU_DIR}/train_tiny.c ${ZT_GPU_DIR}/gpu_test_util.c
                 ${CMAKE_SOURCE_DIR}/model/layout.c ${CMAKE_SOURCE_DIR}/model/qwen3.c)
  target_link_libraries(train_tiny PRIVATE zt_gpu_layer zt_kernels)
  add_test(NAME gpu_train_tiny COMMAND train_tiny)
  set_tests_properties(gpu_train_tiny PROPERTIES SKIP_RETURN_CODE 77)

  # Benchmark (not a ctest: minutes of GPU time): tests/gpu/run.sh runs it.
  add_executable(bench_layer ${ZT_GPU_DIR}/bench_layer.c ${ZT_GPU_DIR}/gpu_test_util.c)
  target_link_libraries(bench_layer PRIVATE zt_gpu_layer)
  # A small layer, two iterations: proves the benchmark runs end to end.
  add_test(NAME gpu_bench_layer_smoke COMMAND bench_layer --smoke)
  set_tests_properties(gpu_bench_layer_smoke PROPERTIES SKIP_RETURN_CODE 77)

  # The same place in both configurations: tests/gpu/run.sh looks in <build>/tests.
  set_target_properties(test_cuda_ops train_tiny bench_layer PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                        ${CMAKE_BINARY_DIR}/tests)
endif()
