# Operations tools (ops/triage.c, ops/watch.c and their subcommands): triage on
# synthetic field-table traces in the three log formats, malformed inputs, band files,
# calibration, the watcher's rules on run directories written by the test; the CLI
# (tests/cli/ops_cli.sh); the Slurm batch script on a real one-node Slurm
# (tests/cli/slurm_test.sh, skipped with a reason where Slurm cannot run).
add_executable(test_triage ${ZT_TEST_DIR}/unit/test_triage.c ${CMAKE_SOURCE_DIR}/ops/triage.c
               ${CMAKE_SOURCE_DIR}/ops/watch.c ${CMAKE_SOURCE_DIR}/ops/fmt.c ${CMAKE_SOURCE_DIR}/engine/flight.c
               ${CMAKE_SOURCE_DIR}/engine/comm.c)
target_link_libraries(test_triage PRIVATE zt_base ${ZT_CJSON} Threads::Threads m)
target_compile_definitions(test_triage PRIVATE ZT_TEST_DIR="${ZT_TEST_DIR}")
foreach(part triage errors bands calibrate watch)
  add_test(NAME ops_${part} COMMAND test_triage ${CMAKE_CURRENT_BINARY_DIR}/ops/${part} ${part})
endforeach()

foreach(case triage_samples triage_errors calibrate watch_once watch_loop train_complete train_hang train_kill9 train_sigstop launch_2node)
  add_test(NAME ops_cli_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/ops_cli.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/ops_cli ${case})
  set_tests_properties(ops_cli_${case} PROPERTIES TIMEOUT 180
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
endforeach()
set_tests_properties(ops_cli_train_complete ops_cli_train_hang ops_cli_train_kill9 ops_cli_train_sigstop ops_cli_launch_2node PROPERTIES PROCESSORS 2)

# A hang inside a shard group under hybrid sharding (4 ranks, --shard-group 2): the watcher's
# diagnosis and the deadline report name the group (the mesh's flight recorders in RUN/groups)
# and its ranks by world rank (tests/cli/mesh_hang.sh).
add_test(NAME watch_deadline_shard_group_hang
         COMMAND bash ${ZT_TEST_DIR}/cli/mesh_hang.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                 ${CMAKE_BINARY_DIR}/test-work/mesh_hang)
set_tests_properties(watch_deadline_shard_group_hang PROPERTIES TIMEOUT 180 PROCESSORS 2
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")

# The Slurm batch script on a real one-node Slurm (exit 77 = skipped, with the reason).
add_test(NAME ops_slurm COMMAND bash ${ZT_TEST_DIR}/cli/slurm_test.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                                ${CMAKE_BINARY_DIR}/test-work/ops_slurm)
set_tests_properties(ops_slurm PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900 RUN_SERIAL TRUE)

# TensorBoard event files (train/tboard.c): bytes equal to TensorBoard's own writer, CRCs,
# the resume truncation. The end-to-end read back by TensorBoard's reader is train_cli_tensorboard.
zt_add_test(test_tboard ${ZT_TEST_DIR}/unit/test_tboard.c zt_train)

# `zerotrain report` and `zerotrain triage --html` (ops/report.c, ops/power_view.c,
# ops/svg.c): pages of real training runs made by the test (a clean 2-rank run with
# evaluation and checkpoints; the --no-evenfix field deadlock aborted at the collective
# deadline), plots counted against the run's files, missing pieces, errors; `browser`
# renders those pages in headless Chromium and checks the screenshot's pixels and the
# rendered DOM (tests/cli/report_check.py); `hostile` makes every string of those runs'
# files markup and checks the raw and rendered page against the clean one
# (tests/cli/report_hostile.py); `bad_lines`: damaged JSONL lines skipped, not the rest;
# `no_heartbeat`: GPU-hours from metrics.jsonl, no nan/inf; exit 77 = skipped (no
# chromium), with the reason.
foreach(case run hang triage_html errors browser hostile bad_lines no_heartbeat)
  add_test(NAME report_cli_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/report_cli.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/report_cli ${case})
  set_tests_properties(report_cli_${case} PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
endforeach()
set_tests_properties(report_cli_run report_cli_hang PROPERTIES PROCESSORS 2)
set_tests_properties(report_cli_run PROPERTIES FIXTURES_SETUP report_run_page)
set_tests_properties(report_cli_hang PROPERTIES FIXTURES_SETUP report_hang_page)
set_tests_properties(report_cli_triage_html PROPERTIES FIXTURES_SETUP report_triage_page)
set_tests_properties(report_cli_browser PROPERTIES
  FIXTURES_REQUIRED "report_run_page;report_hang_page;report_triage_page")
set_tests_properties(report_cli_hostile PROPERTIES FIXTURES_REQUIRED "report_run_page;report_hang_page")
