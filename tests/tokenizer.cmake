# Tokenizer: exact ids against Hugging Face tokenizers on the committed golden
# corpus, and the split matcher against PCRE2 running the regex itself.
find_package(ZLIB REQUIRED)
zt_add_test(test_tokenizer ${ZT_TEST_DIR}/test_tokenizer.c zt_data ZLIB::ZLIB)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
zt_add_test(test_tokenizer_regex ${ZT_TEST_DIR}/test_tokenizer_regex.c zt_data PkgConfig::PCRE2)
# pack on text (JSON Lines, lines, files; single and per-rank) against a Python packer
zt_add_test(test_pack_text ${ZT_TEST_DIR}/test_pack_text.c zt_data ZLIB::ZLIB)
