# The fuzz build (-DZT_FUZZ=ON with clang): each parser's sources compiled once with
# libFuzzer coverage, AddressSanitizer and UndefinedBehaviorSanitizer (every UB check
# fatal), and one harness per parser. System libraries (cJSON, utf8proc, HDF5) are not
# instrumented; their use by our code is.
if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "ZT_FUZZ needs clang (CC=clang cmake -DZT_FUZZ=ON ...); this is ${CMAKE_C_COMPILER_ID}")
endif()
set(ZT_SAN -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
set(ZT_FUZZ_SRC
    base/common.c base/out_file.c base/env.c data/chat.c data/chat_read.c data/chat_template.c data/json_dumps.c base/crc32c.c
    data/chat_jinja.c data/jinja_lex.c data/jinja_parse.c data/jinja_eval.c data/jinja_builtin.c data/jinja_value.c
    data/dataset.c data/pack.c data/pack_text.c
    data/tokenizer.c data/tokenizer_cache.c data/unicode.c data/unicode_tables.c model/config.c model/layout.c model/hf_config.c
    model/qwen3_codec.c model/qwen3_5_codec.c
    model/family.c model/qwen3.c model/qwen3_5.c model/qwen3_context.c model/blocks.c model/context.c model/qwen3_5_context.c model/flops.c data/batch.c kernels/cpu/rope.c
    kernels/cpu/delta.c
    checkpoint/safetensors.c checkpoint/ckpt_h5.c engine/flight.c ops/watch.c ops/report.c ops/triage.c
    ops/power_view.c ops/svg.c ops/fmt.c)
list(TRANSFORM ZT_FUZZ_SRC PREPEND ${CMAKE_SOURCE_DIR}/)
# pack_text.c is compiled into the JSONL harness itself (it reaches the file's statics).
list(REMOVE_ITEM ZT_FUZZ_SRC ${CMAKE_SOURCE_DIR}/data/pack_text.c)
add_library(zt_fuzzlib STATIC ${ZT_FUZZ_SRC})
target_compile_options(zt_fuzzlib PUBLIC ${ZT_SAN} -fsanitize=fuzzer-no-link -g -O1)
target_link_options(zt_fuzzlib PUBLIC ${ZT_SAN})
target_include_directories(zt_fuzzlib PUBLIC ${HDF5_C_INCLUDE_DIRS})
target_link_libraries(zt_fuzzlib PUBLIC ${ZT_CJSON} PkgConfig::UTF8PROC PkgConfig::PCRE2 OpenMP::OpenMP_C MPI::MPI_C
                      ${HDF5_C_LIBRARIES} m)

set(ZT_FUZZ_TARGETS safetensors dataset config tokenizer tokenizer_split tokenizer_cache jsonl ckpt_meta flight watch jinja_parse
                    jinja_render)
foreach(t ${ZT_FUZZ_TARGETS})
  add_executable(fuzz_${t} ${CMAKE_SOURCE_DIR}/tests/fuzz/fuzz_${t}.c)
  target_compile_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
  target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
  target_link_libraries(fuzz_${t} PRIVATE zt_fuzzlib)
  target_compile_definitions(fuzz_${t} PRIVATE
    ZT_FUZZ_TOKENIZER="${CMAKE_SOURCE_DIR}/assets/qwen3-tokenizer/tokenizer.json"
    ZT_FUZZ_SMALL_TOKENIZER="${CMAKE_SOURCE_DIR}/tests/data/tokenizer/small/tokenizer.json")
endforeach()
