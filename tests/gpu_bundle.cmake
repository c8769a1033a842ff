# The lent GPU machine's bundle (tests/gpu/bundle.sh, tests/gpu/README.md) and run.sh's trainer
# steps, proven on this CPU machine before a lease is spent on them.
#
# gpu_bundle_hidden: a bundle gathered from this build (its code path; the sm_90/sm_100 build of
# bundle.sh only matters on the GPU) and unpacked as it travels, inside a mount namespace with this
# machine's Open MPI, PMIx, HDF5 and every other bundled library hidden: ldd resolves everything to
# the bundle and glibc, zerotrain trains, stops, resumes under the bundle's `mpirun -n 1` to the same
# losses and exports, and the CUDA module loads from it (tests/gpu/bundle_check.sh). 77 without
# mount namespaces.
add_test(NAME gpu_bundle_hidden
         COMMAND bash ${ZT_TEST_DIR}/gpu/bundle_check.sh ${CMAKE_BINARY_DIR} ${CMAKE_SOURCE_DIR}
                 ${CMAKE_BINARY_DIR}/test-work/gpu_bundle)
set_tests_properties(gpu_bundle_hidden PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300 PROCESSORS 2 LABELS gpu_prep
                     ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")

# gpu_run_trainer_*: run.sh's trainer steps (tests/gpu/trainer.sh: the tiny run's train / stop /
# resume with --async-save / export / transformers' eval / power checks; the 32B and Qwen3.5 speed
# runs' data, weights, plan fit, kill after the measured steps; the PyTorch scripts; the summary)
# through run.sh itself, on the CPU execution of CUDA at tiny sizes (zerotrain_cudaemu, the stand-in
# NVML). 77 without python3's torch and transformers.
if(TARGET zerotrain_cudaemu)  # tests/cudaemu.cmake (before this file); fakenvml: tests/train.cmake
  foreach(part "tiny:trainer" "q3:trainer_32b,torch_32b" "q35:trainer_q35,torch_q35")
    string(REPLACE ":" ";" pp "${part}")
    list(GET pp 0 tag)
    list(GET pp 1 steps)
    add_test(NAME gpu_run_trainer_${tag}
             COMMAND bash ${ZT_TEST_DIR}/gpu/test_trainer_steps.sh $<TARGET_FILE:zerotrain_cudaemu>
                     ${CMAKE_BINARY_DIR}/fakenvml ${CMAKE_BINARY_DIR}/test-work/gpu_run_trainer_${tag} ${steps})
    set_tests_properties(gpu_run_trainer_${tag} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS gpu_prep)
  endforeach()
endif()
