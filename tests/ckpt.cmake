# Checkpoints (checkpoint/ckpt*.c): collective HDF5 save at W=4, reshard-load at W=1..4,
# corruption, full disk, keep-last, config mismatch, HF export, `zerotrain inspect/export`.
zt_add_test_exe(test_ckpt ${ZT_TEST_DIR}/test_ckpt.c zt_model zt_checkpoint zt_data)
set(ZT_CKPT_WORK ${CMAKE_BINARY_DIR}/test-work/ckpt)

add_test(NAME ckpt_unit COMMAND test_ckpt unit ${ZT_CKPT_WORK}/unit)
zt_add_mpi_test(ckpt_save_w4 4 $<TARGET_FILE:test_ckpt> save ${ZT_CKPT_WORK})
set_tests_properties(ckpt_save_w4 PROPERTIES FIXTURES_SETUP ckpt_saved)
foreach(w 1 2 3 4)
  zt_add_mpi_test(ckpt_load_w${w} ${w} $<TARGET_FILE:test_ckpt> load ${ZT_CKPT_WORK})
  set_tests_properties(ckpt_load_w${w} PROPERTIES FIXTURES_REQUIRED ckpt_saved)
endforeach()
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

# The CLI on the checkpoints saved above (tests/cli/ckpt_cli.sh).
foreach(case inspect inspect_corrupt export export_bad transformers)
  add_test(NAME ckpt_cli_${case} COMMAND bash ${ZT_TEST_DIR}/cli/ckpt_cli.sh ${ZT_EXE} ${ZT_CKPT_WORK} ${case})
  set_tests_properties(ckpt_cli_${case} PROPERTIES FIXTURES_REQUIRED ckpt_saved SKIP_RETURN_CODE 77)
endforeach()

# A hang in a collective save or load must fail the test, not stall CI.
get_property(ZT_CKPT_TESTS DIRECTORY PROPERTY TESTS)
list(FILTER ZT_CKPT_TESTS INCLUDE REGEX "^ckpt_")
set_tests_properties(${ZT_CKPT_TESTS} PROPERTIES TIMEOUT 180)
