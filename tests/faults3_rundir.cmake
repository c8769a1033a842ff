# The third fault battery (issue 35), the run directory's share: tests/cli/faults3_rundir.sh,
# one case per test. Links planted where the trainer, pack, export, watch and report write;
# RUN/lock removed under a running job; a disk full for a moment under the metrics files.
foreach(case link_lock link_metrics link_rank_metrics link_heartbeat link_run_json link_rank_files
        link_checkpoints link_final link_pack link_export link_watch_report lock_removed lock_removed_file_only
        metrics_disk_full)
  add_test(NAME faults3_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/faults3_rundir.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/faults3_rundir ${case})
  set_tests_properties(faults3_${case} PROPERTIES
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" PROCESSORS 2 TIMEOUT 600
    SKIP_RETURN_CODE 77)
endforeach()
# base/out_file.c and train/line_file.c on their own: every kind of thing at an output's name
# refused, and a record cut part-way by a full file system (RLIMIT_FSIZE) cut back and counted.
add_executable(test_out_files ${ZT_TEST_DIR}/unit/test_out_files.c)
target_link_libraries(test_out_files PRIVATE zt_train)
add_test(NAME faults3_out_files COMMAND test_out_files)
