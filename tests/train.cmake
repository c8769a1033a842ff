# `zerotrain train` end to end and its bad-input errors (tests/cli/train_cli.sh).
set(ZT_TRAIN_CLI_CASES loss_falls init_roundtrip run_dir_exists truncated_safetensors corrupt_header
    wrong_shapes missing_shard token_out_of_range truncated_blocks missing_dataset_json bad_config bad_flag device nonfinite)
foreach(case ${ZT_TRAIN_CLI_CASES})
  add_test(NAME train_cli_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/train_cli.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/train_cli ${case})
endforeach()
