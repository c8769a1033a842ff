# A run as a file, and its efficiency as a number (issue 27): the YAML run configuration of the
# flag tables (tests/unit/test_flags_config.c), MFU's FLOP count against the reference
# trainer's matmul shapes and the peak table against plan's presets (tests/unit/test_flops.c),
# and end to end (tests/cli/config_cli.sh): --print-config round trip through run.json, the
# config's origin, MFU in every sink, run.json's backend on cpu and on the CPU execution of
# CUDA, `plan --from-run` on a real CPU run.
add_executable(test_flags_config ${ZT_TEST_DIR}/unit/test_flags_config.c ${CMAKE_SOURCE_DIR}/cli/flags.c
               ${CMAKE_SOURCE_DIR}/cli/args.c ${CMAKE_SOURCE_DIR}/cli/cmd_train.c
               ${CMAKE_SOURCE_DIR}/cli/cmd_preflight.c)
target_link_libraries(test_flags_config PRIVATE zt_ops zt_train PkgConfig::YAML)
add_test(NAME config_flags COMMAND test_flags_config)

add_executable(test_flops ${ZT_TEST_DIR}/unit/test_flops.c)
target_link_libraries(test_flops PRIVATE zt_test_support zt_ops)
target_compile_definitions(test_flops PRIVATE ZT_TEST_DIR="${ZT_TEST_DIR}")
add_test(NAME flops_count COMMAND test_flops)
add_test(NAME flops_peak_presets COMMAND test_flops peak)

# run.json "libraries": MPI and HDF5, and the CUDA libraries the build found once loaded
add_executable(test_device_info ${ZT_TEST_DIR}/unit/test_device_info.c)
target_link_libraries(test_device_info PRIVATE zt_train ${CMAKE_DL_LIBS})
set(ZT_LIBS_FOUND)
if(ZT_CUDA)
  list(APPEND ZT_LIBS_FOUND $<TARGET_FILE:CUDA::cublasLt>)
  foreach(lib ZT_NCCL_LIB ZT_CUDNN_LIB)
    if(${lib})
      list(APPEND ZT_LIBS_FOUND ${${lib}})
    endif()
  endforeach()
endif()
add_test(NAME config_runjson_libraries COMMAND test_device_info ${ZT_LIBS_FOUND})

# backend_cudaemu runs the zerotrain_cudaemu binary of tests/cudaemu.cmake (skipped, exit 77,
# in a build configured without that fragment)
set(ZT_CONFIG_EMU ${CMAKE_BINARY_DIR}/tests/cudaemu/zerotrain_cudaemu)
foreach(case print_roundtrip origin override bad_file examples mfu_cpu mfu_isolated_w2 plan_from_run sbatch_config
             backend_cudaemu)
  add_test(NAME config_cli_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/config_cli.sh ${ZT_EXE} ${ZT_CONFIG_EMU} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/config_cli ${case})
  set_tests_properties(config_cli_${case} PROPERTIES ENVIRONMENT
                       "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1;OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"
                       TIMEOUT 300 PROCESSORS 2 SKIP_RETURN_CODE 77)
endforeach()
