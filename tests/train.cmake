# `zerotrain train` end to end and its bad-input errors (tests/cli/train_cli.sh).
set(ZT_TRAIN_CLI_CASES loss_falls init_roundtrip run_dir_exists truncated_safetensors corrupt_header
    wrong_shapes missing_shard token_out_of_range truncated_blocks missing_dataset_json bad_config bad_flag cpu_gemm_env device nonfinite
    tensorboard progress yarn)
foreach(case ${ZT_TRAIN_CLI_CASES})
  add_test(NAME train_cli_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/train_cli.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/train_cli ${case})
  set_tests_properties(train_cli_${case} PROPERTIES SKIP_RETURN_CODE 77)
endforeach()

# Supervised fine-tuning data end to end (tests/cli/sft_cli.sh): masks, isolation, evaluation,
# ZeRO-3 at W = 1..3, resume.
foreach(case train world resume eval_no_disturb v1_isolated eval_errors nothing_trained)
  add_test(NAME sft_cli_${case}
           COMMAND bash ${ZT_TEST_DIR}/cli/sft_cli.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                   ${CMAKE_BINARY_DIR}/test-work/sft_cli ${case})
  set_tests_properties(sft_cli_${case} PROPERTIES LABELS "sft" TIMEOUT 600)
endforeach()

# A stand-in libnvidia-ml.so.1 (tests/fakenvml): the trainer's NVML power sampler, its
# power.csv, the TensorBoard power tags and the report's power picture on a machine with no
# NVIDIA driver (train_cli_fake_nvml).
add_library(fake_nvml SHARED ${ZT_TEST_DIR}/fakenvml/fake_nvml.c)
set_target_properties(fake_nvml PROPERTIES OUTPUT_NAME nvidia-ml PREFIX lib SUFFIX .so.1
                      LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fakenvml)
add_test(NAME train_cli_fake_nvml
         COMMAND bash ${ZT_TEST_DIR}/cli/train_cli.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                 ${CMAKE_BINARY_DIR}/test-work/train_cli fake_nvml)
set_tests_properties(train_cli_fake_nvml PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300
                     ENVIRONMENT "ZT_FAKE_NVML_DIR=${CMAKE_BINARY_DIR}/fakenvml")
