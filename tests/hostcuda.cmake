# The GPU FSDP engine's host logic on the CPU (tests/hostcuda/): runtime/fsdp_cuda.c
# and model/qwen3_cuda_layer.c compiled against a host emulation of the CUDA layer and
# run over MPI at W = 1, 2, 3 against the same engine at W = 1 and the fp32 CPU engine.
# Built in every configuration (no CUDA needed): tests/hostcuda comes first on the
# include path so that <cuda_runtime_api.h> is the emulation's.
set(ZT_R ${CMAKE_SOURCE_DIR}/runtime)
add_executable(test_fsdp_hostcuda ${ZT_TEST_DIR}/hostcuda/test_fsdp_hostcuda.c ${ZT_TEST_DIR}/hostcuda/hostcuda.c
               ${ZT_R}/fsdp.c ${ZT_R}/fsdp_cuda.c ${ZT_R}/optim.c ${ZT_R}/comm.c ${ZT_R}/comm_mpi.c ${ZT_R}/flight.c
               ${CMAKE_SOURCE_DIR}/model/qwen3_cuda_layer.c ${CMAKE_SOURCE_DIR}/model/layout.c
               ${CMAKE_SOURCE_DIR}/model/qwen3.c)
target_include_directories(test_fsdp_hostcuda BEFORE PRIVATE ${ZT_TEST_DIR}/hostcuda)
target_compile_definitions(test_fsdp_hostcuda PRIVATE ZT_HAVE_CUDA_FSDP=1 ZT_NCCL_NO_MPI=1)
target_link_libraries(test_fsdp_hostcuda PRIVATE zt_kernels zt_common MPI::MPI_C Threads::Threads m)
foreach(w 1 2 3)
  zt_add_mpi_test(fsdp_hostcuda_w${w} ${w} $<TARGET_FILE:test_fsdp_hostcuda>)
endforeach()
