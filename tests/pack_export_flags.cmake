# The flag tables of `pack` and `export` (cli/cmd_pack.c, cli/cmd_export.c on cli/flags.c):
# a usage error (unknown flag, missing value, bad or out-of-range value, missing operand or
# -o, flags that do not go together) exits 2 naming the flag; a failing pack, --verify or
# export still exits 1; --help lists every flag with its default.
set(ZT_PACK_FLAGS_WORK ${CMAKE_BINARY_DIR}/test-work/pack_flags)
# zt_pack_flags_test(NAME REGEX ARGS...): REGEX ends with "exit CODE", the exit code `zerotrain ARGS...`
# must have (tests/support/expect.cmake appends that line to the output it matches).
function(zt_pack_flags_test name regex)
  if(NOT regex MATCHES "exit ([0-9]+)$")
    message(FATAL_ERROR "${name}: the pattern must end with the exit code")
  endif()
  zt_expect_test(${name} EXIT ${CMAKE_MATCH_1} PASS "${regex}" COMMAND ${ZT_EXE} ${ARGN})
endfunction()

zt_pack_flags_test(pack_flags_help
  "-i, --input KIND +what INPUT files hold \\(default ids\\):.*--field NAME.*--train-on RULE.*--skip-bad.*-j, --threads N.*-s, --seq-len N +tokens per block \\(default 2048; at least 2, at most 131072:.*-V, --vocab-size V.*-e, --eos ID\\|none.*-r, --per-rank W.*-t, --tokenizer ARG.*-o, --output OUT_DIR.*-q, --quiet.*--verify DIR.*--model-vocab V.*-h, --help.*examples:.*exit 0"
  pack --help)
zt_pack_flags_test(pack_flags_unknown
  "unrecognized option '--bogus'\nusage: zerotrain pack .*exit 2" pack --bogus in.txt -o out)
zt_pack_flags_test(pack_flags_missing_value
  "option '--output' requires an argument\nusage: zerotrain pack .*exit 2" pack -V 100 in.txt --output)
zt_pack_flags_test(pack_flags_range
  "zerotrain pack: error: --seq-len: 1 is out of range \\[2, 1073741824\\]\nexit 2"
  pack --seq-len 1 -V 100 in.txt -o out)
zt_pack_flags_test(pack_flags_range_per_rank
  "zerotrain pack: error: --per-rank: 100000 is out of range \\[1, 99999\\]\nexit 2"
  pack -r 100000 -V 100 in.txt -o out)
zt_pack_flags_test(pack_flags_not_a_number
  "zerotrain pack: error: --vocab-size: '12k' is not an integer\nexit 2" pack --vocab-size 12k in.txt -o out)
zt_pack_flags_test(pack_flags_eos_range
  "zerotrain pack: error: --eos: 4294967296 is out of range \\[0, 4294967295\\]\nexit 2"
  pack --eos 4294967296 -V 100 in.txt -o out)
zt_pack_flags_test(pack_flags_input_choice
  "zerotrain pack: error: --input chatml: expected ids, u32, bytes, jsonl, text, lines or chat\nexit 2"
  pack --input chatml in.jsonl -o out)
zt_pack_flags_test(pack_flags_train_on_choice
  "zerotrain pack: error: --train-on everything: expected assistant, last or all\nexit 2"
  pack --input chat --train-on everything in.jsonl -o out)
zt_pack_flags_test(pack_flags_no_input
  "zerotrain: error: no INPUT files given\n\nusage: zerotrain pack .*exit 2" pack -V 100 -o out)
zt_pack_flags_test(pack_flags_no_output
  "zerotrain: error: no output directory: add -o OUT_DIR\n\nusage: zerotrain pack .*exit 2" pack -V 100 in.txt)
zt_pack_flags_test(pack_flags_text_only
  "zerotrain: error: --field, --skip-bad and --threads apply to text input.*exit 2" pack -j 2 -V 100 in.txt -o out)
zt_pack_flags_test(pack_flags_vocab_required
  "zerotrain: error: --vocab-size is required with --input u32.*exit 2" pack --input u32 in.u32 -o out)
zt_pack_flags_test(pack_flags_verify_model_vocab
  "zerotrain pack: error: --model-vocab: 0 is out of range \\[1, 4294967296\\]\nexit 2"
  pack --verify data --model-vocab 0)
zt_pack_flags_test(pack_flags_verify_operand
  "zerotrain: error: --verify DIR checks an existing dataset; it takes no INPUT or -o\nexit 2"
  pack --verify data in.txt)
# not usage errors: exit 1 as before
zt_pack_flags_test(pack_flags_failing_pack
  "zerotrain: error: [^\n]*no-such-input.txt: cannot open input.*exit 1"
  pack -V 100 ${ZT_PACK_FLAGS_WORK}/no-such-input.txt -o ${ZT_PACK_FLAGS_WORK}/out-missing)
zt_pack_flags_test(pack_flags_failing_verify
  "zerotrain: error: [^\n]*no-such-dataset: dataset directory does not exist.*exit 1"
  pack --verify ${ZT_PACK_FLAGS_WORK}/no-such-dataset)

zt_pack_flags_test(export_flags_help
  "usage: zerotrain export \\[options\\] CKPT OUT_DIR.*-d, --dtype bf16\\|fp32 +tensor dtype in the safetensors files \\(default bf16,.*-s, --max-shard-size SIZE +largest safetensors file, e.g. 5GB \\(default\\).*-h, --help.*example:.*exit 0"
  export --help)
zt_pack_flags_test(export_flags_unknown
  "unrecognized option '--bogus'\nusage: zerotrain export .*exit 2" export --bogus ckpt out)
zt_pack_flags_test(export_flags_missing_value
  "option '--dtype' requires an argument\nusage: zerotrain export .*exit 2" export ckpt out --dtype)
zt_pack_flags_test(export_flags_dtype_choice
  "zerotrain export: error: --dtype fp16: expected bf16, bfloat16, fp32, float32 or f32\nexit 2"
  export --dtype fp16 ckpt out)
zt_pack_flags_test(export_flags_size
  "zerotrain: error: --max-shard-size: '0' is not a size \\(a positive number with an optional unit[^\n]*\nexit 2"
  export --max-shard-size 0 ckpt out)
zt_pack_flags_test(export_flags_operands
  "zerotrain: error: export needs CKPT and OUT_DIR \\(got 1 argument\\)\n\nusage: zerotrain export .*exit 2"
  export ckpt)
# not a usage error: exit 1 as before
zt_pack_flags_test(export_flags_failing_export
  "zerotrain: error: [^\n]*no-such-run: no such checkpoint, checkpoints or run directory\nexit 1"
  export ${ZT_PACK_FLAGS_WORK}/no-such-run ${ZT_PACK_FLAGS_WORK}/export-out)
