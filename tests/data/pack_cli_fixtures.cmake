# Builds what the `zerotrain pack` CLI tests (tests/data.cmake) run on, at test time:
# small id inputs, good datasets, and damaged copies made with text edits only
# (a changed crc in dataset.json, bytes appended to a block file), so no binary
# fixtures live in the repository.  usage: cmake -DZT_EXE=... -DWORK=... -P this
if(NOT ZT_EXE OR NOT WORK)
  message(FATAL_ERROR "usage: cmake -DZT_EXE=<zerotrain> -DWORK=<dir> -P pack_cli_fixtures.cmake")
endif()
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
# 3 documents; with eos: 6 + 4 + 8 = 18 tokens -> 4 blocks of 4, 2 dropped.
file(WRITE "${WORK}/ids.txt" "1 2 3 4 5\n6 7 8\n9,10,11,12,13,14,15\n")
file(WRITE "${WORK}/bad.txt" "1 2 3\n4 5 12x 6\n")

function(zt_fixture_pack dir)
  execute_process(COMMAND "${ZT_EXE}" pack --vocab-size 100 --eos 99 --seq-len 4 --quiet ${ARGN}
                          "${WORK}/ids.txt" -o "${WORK}/${dir}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "fixture: zerotrain pack into ${dir} failed (${rc}):\n${out}${err}")
  endif()
endfunction()

zt_fixture_pack(good)
zt_fixture_pack(crc)
zt_fixture_pack(trunc)
zt_fixture_pack(nojson)
zt_fixture_pack(ranks --per-rank 2)

# crc: dataset.json now records a checksum the file does not have.
file(READ "${WORK}/crc/dataset.json" json)
string(REGEX REPLACE "\"crc32c\":([ \t]*)\"0x[0-9a-fA-F]+\"" "\"crc32c\":\\1\"0xdeadbeef\"" json "${json}")
file(WRITE "${WORK}/crc/dataset.json" "${json}")
# trunc: 64 bytes of blocks + 3 stray bytes.
file(APPEND "${WORK}/trunc/data.u32" "xyz")
# nojson: block files without the dataset.json that marks a finished pack.
file(REMOVE "${WORK}/nojson/dataset.json")
