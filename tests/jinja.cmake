# The Jinja engine for chat templates (data/jinja*.c) against transformers' apply_chat_template
# on every trl 1.16.0 template (tests/golden/chat_templates, made by
# tests/reference/make_chat_templates_golden.py): text, raise_exception messages, generation
# spans, Qwen3 ids and the assistant mask.
find_package(ZLIB REQUIRED)
zt_add_test(test_jinja_templates ${ZT_TEST_DIR}/unit/test_jinja_templates.c zt_data ZLIB::ZLIB)
