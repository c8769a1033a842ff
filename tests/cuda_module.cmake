# The CUDA backend as a module loaded on demand (engine/cuda_module.h): zerotrain links no
# CUDA library (cuda_module_link), --help's peak RSS stays small and what loading the module
# costs is measured (cuda_module_rss), watch / triage / plan / preflight / pack and a CPU
# training run start with every CUDA library hidden in a private mount namespace
# (cuda_module_hidden, root), and a missing or broken module is a clear error (cuda_module_missing).
# Where it is looked for: never in the build directory by a copy of zerotrain (cuda_module_build_dir,
# LD_DEBUG=files); a FIFO, a directory (cuda_module_fifo), an ELF file for another machine
# (cuda_module_wrong_arch) are refused by name before dlopen; a relative $ZT_CUDA_MODULE is the
# file in the current directory (cuda_module_relative).
add_executable(maxrss ${ZT_TEST_DIR}/support/maxrss.c)
add_library(fake_cuda_module MODULE ${ZT_TEST_DIR}/support/fake_cuda_module.c)
foreach(case link rss hidden missing build_dir fifo wrong_arch relative auto_why)
  add_test(NAME cuda_module_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/cuda_module.sh ${ZT_EXE} $<TARGET_FILE:maxrss> ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/cuda_module ${case} $<TARGET_FILE:fake_cuda_module>)
  set_tests_properties(cuda_module_${case} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endforeach()
