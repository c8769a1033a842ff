# Tokenizer: exact ids against Hugging Face tokenizers on the committed golden
# corpus, and the split matcher against PCRE2 running the regex itself.
find_package(ZLIB REQUIRED)
zt_add_test(test_tokenizer ${ZT_TEST_DIR}/unit/test_tokenizer.c zt_data ZLIB::ZLIB)
zt_add_test(test_tokenizer_regex ${ZT_TEST_DIR}/unit/test_tokenizer_regex.c zt_data PkgConfig::PCRE2)
# Qwen3.5's tokenizer.json (hand matcher with \p{M}) and a regex only PCRE2 runs (GPT-2's on
# Qwen3's vocabulary), ids against tokenizers (tests/reference/make_tokenizer_golden_more.py)
zt_add_test_exe(test_tokenizer_more ${ZT_TEST_DIR}/unit/test_tokenizer_more.c zt_data ZLIB::ZLIB)
add_test(NAME test_tokenizer_qwen3_5 COMMAND test_tokenizer_more qwen3_5)
add_test(NAME test_tokenizer_pcre2 COMMAND test_tokenizer_more pcre2)
# The binary cache of the parsed tokenizer.json: the cached Qwen3 tokenizer against tokenizers'
# goldens; corrupt, truncated, forged and stale cache files ignored and rewritten; an unwritable
# directory and ZT_TOKENIZER_CACHE=off parse the JSON (data/tokenizer_cache.c)
zt_add_test(test_tokenizer_cache ${ZT_TEST_DIR}/unit/test_tokenizer_cache.c zt_data ZLIB::ZLIB)
# pack on text (JSON Lines, lines, files; single and per-rank) against a Python packer
zt_add_test(test_pack_text ${ZT_TEST_DIR}/unit/test_pack_text.c zt_data ZLIB::ZLIB)

# CLI: pack --input jsonl/lines/text and tokenize, on the small files in data/tokenizer/cli
# (32 tokens in the 4 good documents of sample.jsonl, by tokenizers; line 3 is broken).
set(ZT_TOK_CLI ${CMAKE_CURRENT_BINARY_DIR}/tok_cli)
set(ZT_TOK_DATA ${ZT_TEST_DIR}/data/tokenizer/cli)
add_test(NAME tok_cli_setup COMMAND ${CMAKE_COMMAND} -E rm -rf ${ZT_TOK_CLI})
set_tests_properties(tok_cli_setup PROPERTIES FIXTURES_SETUP tok_cli)
# zt_tok_cli_test(NAME CODE REGEX ARGS...): `zerotrain ARGS...` exits with CODE and prints REGEX's match.
function(zt_tok_cli_test name code regex)
  zt_expect_test(${name} EXIT ${code} PASS "${regex}" COMMAND ${ZT_EXE} ${ARGN})
  set_tests_properties(${name} PROPERTIES FIXTURES_REQUIRED tok_cli)
endfunction()

zt_tok_cli_test(tok_cli_pack_help 0 "--input.*jsonl.*lines.*--field.*--skip-bad.*--threads.*--tokenizer ARG" pack --help)
zt_tok_cli_test(tok_cli_pack_jsonl 0
  "packed 4 documents .*: 32 tokens -> 4 blocks of 8 in 1 file, 0 tokens dropped.*1 bad document skipped"
  pack --input jsonl --seq-len 8 --skip-bad --threads 2 ${ZT_TOK_DATA}/sample.jsonl -o ${ZT_TOK_CLI}/jsonl)
zt_tok_cli_test(tok_cli_pack_jsonl_bad_line 1
  "zerotrain: error: [^\n]*sample.jsonl:3: malformed JSON at column [0-9]+[^\n]*--skip-bad"
  pack --input jsonl --seq-len 8 ${ZT_TOK_DATA}/sample.jsonl -o ${ZT_TOK_CLI}/jsonl-bad)
zt_tok_cli_test(tok_cli_pack_field 0
  "packed 4 documents .*: 12 tokens -> 1 blocks of 8"
  pack --input jsonl --field body --seq-len 8 --skip-bad ${ZT_TOK_DATA}/sample.jsonl -o ${ZT_TOK_CLI}/field)
zt_tok_cli_test(tok_cli_pack_missing_field 1
  "sample.jsonl:1: no \"content\" member \\(the object has \"id\", \"text\", \"body\"; choose one with --field\\)"
  pack --input jsonl --field content ${ZT_TOK_DATA}/sample.jsonl -o ${ZT_TOK_CLI}/nofield)
zt_tok_cli_test(tok_cli_pack_text_per_rank 0
  "packed 2 documents .*: 6 tokens -> 2 blocks of 2 in 2 files"
  pack --input text --seq-len 2 --per-rank 2 ${ZT_TOK_DATA}/hello.txt ${ZT_TOK_DATA}/hello.txt -o ${ZT_TOK_CLI}/text)
zt_tok_cli_test(tok_cli_pack_verify_text 0
  "tokenizer \"crc32c:[0-9a-f]+\".*rank-00000.u32: 1 blocks.*ok: 2 blocks"
  pack --verify ${ZT_TOK_CLI}/text)
set_tests_properties(tok_cli_pack_verify_text PROPERTIES DEPENDS tok_cli_pack_text_per_rank)
zt_tok_cli_test(tok_cli_pack_bad_tokenizer 1
  "zerotrain: error: [^\n]*nonexistent/tokenizer.json[^\n]*\n  hint: --tokenizer PATH"
  pack --input lines --tokenizer /nonexistent ${ZT_TOK_DATA}/hello.txt -o ${ZT_TOK_CLI}/badtok)
zt_tok_cli_test(tok_cli_pack_flag_needs_text 2
  "--field, --skip-bad and --threads apply to text input"
  pack --skip-bad --vocab-size 100 ${ZT_TOK_DATA}/hello.txt -o ${ZT_TOK_CLI}/flag)
zt_tok_cli_test(tok_cli_tokenize 0 "^9707 1879\nexit 0\n$" tokenize ${ZT_TOK_DATA}/hello.txt)
zt_tok_cli_test(tok_cli_tokenize_count 0 "^2\nexit 0\n$" tokenize --count ${ZT_TOK_DATA}/hello.txt)

# JSON Lines with control characters: raw ones refused with FILE:LINE and column, the
# escaped \u0000 carried through with tokenizers' ids (tests/cli/jsonl_control.sh).
add_test(NAME tok_cli_jsonl_control
         COMMAND bash ${ZT_TEST_DIR}/cli/jsonl_control.sh ${ZT_EXE} ${ZT_TOK_DATA} ${CMAKE_CURRENT_BINARY_DIR}/jsonl_control)

# pack's progress lines: bytes of the total, documents, rate and the ETA (ZT_PROGRESS_INTERVAL=0
# prints one per batch instead of one a second).
add_test(NAME tok_cli_pack_progress COMMAND bash -c "
  set -e; d=${CMAKE_BINARY_DIR}/test-work/pack_progress; rm -rf $d; mkdir -p $d
  awk 'BEGIN{srand(1); for(i=0;i<30000;i++){ l=\"\"; for(j=0;j<12;j++) l=l \"word\" int(rand()*5000) \" \"; print l }}' >$d/in.txt
  ZT_PROGRESS_INTERVAL=0 ${ZT_EXE} pack --input lines $d/in.txt -o $d/out 2>$d/err.txt
  grep -E 'MB read of [0-9.]+ MB \\([0-9]+%\\), ETA [0-9]+ s .* documents' $d/err.txt || { cat $d/err.txt; exit 1; }")

# A dataset packed with another tokenizer than the --init directory's tokenizer.json is refused at
# start naming both digests; the matching one trains (tests/cli/tokenizer_digest.sh).
zt_expect_test(tok_cli_dataset_tokenizer_digest EXIT 0 PASS "ok \\[tokenizer_digest\\]"
  COMMAND bash ${ZT_TEST_DIR}/cli/tokenizer_digest.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/test-work)
set_tests_properties(tok_cli_dataset_tokenizer_digest PROPERTIES ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
