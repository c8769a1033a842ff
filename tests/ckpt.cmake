# Checkpoints (checkpoint/ckpt*.c): collective HDF5 save at W=4, reshard-load at W=1..4,
# corruption, full disk, keep-last, config mismatch, HF export, `zerotrain inspect/export`.
zt_add_test_exe(test_ckpt ${ZT_TEST_DIR}/unit/test_ckpt.c zt_model zt_checkpoint zt_data)
set(ZT_CKPT_WORK ${CMAKE_BINARY_DIR}/test-work/ckpt)

add_test(NAME ckpt_unit COMMAND test_ckpt unit ${ZT_CKPT_WORK}/unit)
zt_add_mpi_test(ckpt_save_w4 4 $<TARGET_FILE:test_ckpt> save ${ZT_CKPT_WORK})
set_tests_properties(ckpt_save_w4 PROPERTIES FIXTURES_SETUP ckpt_saved)
foreach(w 1 2 3 4)
  zt_add_mpi_test(ckpt_load_w${w} ${w} $<TARGET_FILE:test_ckpt> load ${ZT_CKPT_WORK})
  set_tests_properties(ckpt_load_w${w} PROPERTIES FIXTURES_REQUIRED ckpt_saved)
endforeach()
zt_add_mpi_test(ckpt_save_io_w3 3 $<TARGET_FILE:test_ckpt> saveio ${ZT_CKPT_WORK}/saveio)
zt_add_mpi_test(ckpt_corrupt 2 $<TARGET_FILE:test_ckpt> corrupt ${ZT_CKPT_WORK})
zt_add_mpi_test(ckpt_fulldisk_inject 2 $<TARGET_FILE:test_ckpt> fulldisk ${ZT_CKPT_WORK}/fulldisk_inject inject)
add_test(NAME ckpt_export COMMAND test_ckpt export ${ZT_CKPT_WORK})
set_tests_properties(ckpt_corrupt ckpt_export PROPERTIES FIXTURES_REQUIRED ckpt_saved)

# A real full disk: a 1 MiB tmpfs when this process may mount one (skipped otherwise;
# ckpt_fulldisk_inject covers the failure path everywhere).
add_test(NAME ckpt_fulldisk_tmpfs
         COMMAND bash ${ZT_TEST_DIR}/cli/ckpt_cli.sh ${ZT_EXE} ${ZT_CKPT_WORK} fulldisk_tmpfs
                 $<TARGET_FILE:test_ckpt> ${ZT_MPIEXEC} ${MPIEXEC_NUMPROC_FLAG} 2)
set_tests_properties(ckpt_fulldisk_tmpfs PROPERTIES SKIP_RETURN_CODE 77 PROCESSORS 2
                     ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")

# A full disk at start (a 256 KiB tmpfs filled up): a clear error at 1 and 2 ranks, no SIGBUS.
add_test(NAME ckpt_fulldisk_start
         COMMAND bash ${ZT_TEST_DIR}/cli/ckpt_cli.sh ${ZT_EXE} ${ZT_CKPT_WORK} fulldisk_start ${ZT_MPIEXEC}
                 ${MPIEXEC_NUMPROC_FLAG})
set_tests_properties(ckpt_fulldisk_start PROPERTIES SKIP_RETURN_CODE 77 PROCESSORS 2
                     ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1;OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")

# The CLI on the checkpoints saved above (tests/cli/ckpt_cli.sh).
foreach(case inspect inspect_corrupt export export_bad transformers)
  add_test(NAME ckpt_cli_${case} COMMAND bash ${ZT_TEST_DIR}/cli/ckpt_cli.sh ${ZT_EXE} ${ZT_CKPT_WORK} ${case})
  set_tests_properties(ckpt_cli_${case} PROPERTIES FIXTURES_REQUIRED ckpt_saved SKIP_RETURN_CODE 77)
endforeach()

# A hang in a collective save or load must fail the test, not stall CI.
get_property(ZT_CKPT_TESTS DIRECTORY PROPERTY TESTS)
list(FILTER ZT_CKPT_TESTS INCLUDE REGEX "^ckpt_")
set_tests_properties(${ZT_CKPT_TESTS} PROPERTIES TIMEOUT 180)

# Every single-byte flip over a checkpoint's metadata (the first 8 KiB of ckpt.h5: the
# superblock, the root group's attributes, the unit groups' headers) is harmless or refused
# with a named cause, never a crash (tests/support/ckpt_flip.c; a double free once crashed 146 of them).
zt_add_test_exe(ckpt_flip ${ZT_TEST_DIR}/support/ckpt_flip.c zt_checkpoint zt_model zt_base)
add_test(NAME ckpt_flip_sweep
         COMMAND sh -c [[d=$1/flip; rm -rf "$d" && mkdir -p "$d" && cp -a "$1/run/checkpoints/$(cat "$1/run/checkpoints/latest")" "$d/step-00000030" && exec "$0" "$d/step-00000030" 0 8192]]
                 $<TARGET_FILE:ckpt_flip> ${ZT_CKPT_WORK})
set_tests_properties(ckpt_flip_sweep PROPERTIES FIXTURES_REQUIRED ckpt_saved TIMEOUT 600)
