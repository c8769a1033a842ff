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

# zerotrain itself on the emulation: `train --device cuda` runs the GPU engine (host
# emulated) through the real training loop, checkpoints and resume
# (tests/cli/hostcuda_cli.sh). Test-only binary; never installed.
file(GLOB ZT_HC_RUNTIME CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/runtime/*.c)
list(REMOVE_ITEM ZT_HC_RUNTIME ${ZT_R}/common.c ${ZT_R}/comm_nccl.c)
file(GLOB ZT_HC_LAUNCH CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/launch/*.c)
add_executable(zerotrain_hostcuda ${ZT_HC_LAUNCH} ${ZT_HC_RUNTIME} ${CMAKE_SOURCE_DIR}/model/qwen3_cuda_layer.c
               ${ZT_TEST_DIR}/hostcuda/hostcuda.c)
target_include_directories(zerotrain_hostcuda BEFORE PRIVATE ${ZT_TEST_DIR}/hostcuda)
target_compile_definitions(zerotrain_hostcuda PRIVATE ZT_HAVE_CUDA_FSDP=1 ZT_HAVE_NCCL=1 ZT_HOSTCUDA=1
  ZT_DEFAULT_TOKENIZER="${CMAKE_SOURCE_DIR}/assets/qwen3-tokenizer/tokenizer.json")
target_link_libraries(zerotrain_hostcuda PRIVATE zt_model zt_data zt_kernels zt_checkpoint zt_common ${ZT_CJSON}
                      MPI::MPI_C Threads::Threads ${CMAKE_DL_LIBS})
foreach(case w1_matches_cpu w2_matches_w1 resume_exact)
  add_test(NAME hostcuda_cli_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/hostcuda_cli.sh $<TARGET_FILE:zerotrain_hostcuda> ${ZT_EXE}
                   ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/test-work/hostcuda_cli ${case})
  set_tests_properties(hostcuda_cli_${case} PROPERTIES
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1" PROCESSORS 2)
endforeach()
