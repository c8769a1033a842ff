# safetensors reader/writer: Python-written fixture, round trip, corrupt files.
zt_add_test(test_safetensors ${ZT_TEST_DIR}/unit/test_safetensors.c zt_checkpoint)
