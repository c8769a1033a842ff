# Tokenizer: exact ids against Hugging Face tokenizers on the committed golden corpus.
find_package(ZLIB REQUIRED)
zt_add_test(test_tokenizer ${ZT_TEST_DIR}/test_tokenizer.c zt_data ZLIB::ZLIB)
