# data/: crc32c, pack and dataset open. The C test covers the library; the CLI
# tests run `zerotrain pack` on datasets made at test time by data/pack_cli_fixtures.cmake.
zt_add_test(test_data ${ZT_TEST_DIR}/unit/test_data.c zt_data)

set(ZT_DATA_CLI ${CMAKE_CURRENT_BINARY_DIR}/data_cli)
add_test(NAME data_cli_fixtures
         COMMAND ${CMAKE_COMMAND} -DZT_EXE=${ZT_EXE} -DWORK=${ZT_DATA_CLI}
                 -P ${ZT_TEST_DIR}/data/pack_cli_fixtures.cmake)
set_tests_properties(data_cli_fixtures PROPERTIES FIXTURES_SETUP data_cli)

# zt_data_cli_test(NAME CODE REGEX ARGS...): `zerotrain ARGS...` must exit with CODE (0; 1 for a
# failed pack or verify; 2 for a usage error) and print what REGEX matches.
function(zt_data_cli_test name code regex)
  zt_expect_test(${name} EXIT ${code} PASS "${regex}" COMMAND ${ZT_EXE} ${ARGN})
  set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED data_cli)
endfunction()

zt_data_cli_test(data_cli_help 0
  "--input.*--seq-len.*--vocab-size.*--eos.*--per-rank.*--tokenizer.*--output.*--quiet.*--verify.*--model-vocab.*--help"
  pack --help)
zt_data_cli_test(data_cli_pack_summary 0
  "packed 3 documents .*: 18 tokens -> 4 blocks of 4 in 1 file, 2 tokens dropped"
  pack --vocab-size 100 --eos 99 --seq-len 4 --quiet ${ZT_DATA_CLI}/ids.txt -o ${ZT_DATA_CLI}/summary)
zt_data_cli_test(data_cli_verify_good 0
  "data.u32: 4 blocks, 16 tokens, 64 bytes, crc32c 0x[0-9a-f]+ ok.*ok: 4 blocks"
  pack --verify ${ZT_DATA_CLI}/good)
zt_data_cli_test(data_cli_verify_uneven 0
  "rank-00000.u32: 3 blocks.*rank-00001.u32: 1 blocks.*uneven: rank-00001.u32 has 1 blocks"
  pack --verify ${ZT_DATA_CLI}/ranks)
zt_data_cli_test(data_cli_verify_crc 1
  "zerotrain: error: [^\n]*crc/data.u32: crc32c mismatch: dataset.json says 0xdeadbeef, file has 0x"
  pack --verify ${ZT_DATA_CLI}/crc)
zt_data_cli_test(data_cli_verify_truncated 1
  "zerotrain: error: [^\n]*trunc/data.u32: truncated: 67 bytes [^\n]*last block has 3 bytes"
  pack --verify ${ZT_DATA_CLI}/trunc)
zt_data_cli_test(data_cli_verify_nojson 1
  "zerotrain: error: [^\n]*nojson/dataset.json: not found[^\n]*zerotrain pack"
  pack --verify ${ZT_DATA_CLI}/nojson)
zt_data_cli_test(data_cli_missing_input 1
  "zerotrain: error: [^\n]*no-such-file.txt: cannot open input"
  pack --vocab-size 100 ${ZT_DATA_CLI}/no-such-file.txt -o ${ZT_DATA_CLI}/out-missing)
zt_data_cli_test(data_cli_bad_token 1
  "zerotrain: error: [^\n]*bad.txt:2:5: \"12x\" is not a decimal token id"
  pack --vocab-size 100 ${ZT_DATA_CLI}/bad.txt -o ${ZT_DATA_CLI}/out-bad)
zt_data_cli_test(data_cli_refuse_existing 1
  "zerotrain: error: [^\n]*good/dataset.json already exists"
  pack --vocab-size 100 ${ZT_DATA_CLI}/ids.txt -o ${ZT_DATA_CLI}/good)
zt_data_cli_test(data_cli_vocab_required 2
  "zerotrain: error: --vocab-size is required"
  pack ${ZT_DATA_CLI}/ids.txt -o ${ZT_DATA_CLI}/out-novocab)
zt_data_cli_test(data_cli_bad_flag_value 2
  "zerotrain pack: error: --seq-len: 1 is out of range \\[2, 1073741824\\]"
  pack --seq-len 1 --vocab-size 100 ${ZT_DATA_CLI}/ids.txt -o ${ZT_DATA_CLI}/out-seq)
