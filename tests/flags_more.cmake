# The flag tables of watch, triage, plan, calibrate, inspect and tokenize (cli/flags.c):
# what the conversion added. tokenize's --threads is now a checked integer in [1, 4096]
# (it was atoi: "2x" ran with 2 threads) and still exits 1 on a usage error; calibrate's
# --healthy / --idle are the table's FILE... list flags, and an operand before either is
# refused with exit 2.
# zt_flags_more_test(NAME REGEX ARGS...): REGEX ends with "exit CODE", the exit code `zerotrain ARGS...`
# must have (tests/support/expect.cmake appends that line to the output it matches).
function(zt_flags_more_test name regex)
  if(NOT regex MATCHES "exit ([0-9]+)$")
    message(FATAL_ERROR "${name}: the pattern must end with the exit code")
  endif()
  zt_expect_test(${name} EXIT ${CMAKE_MATCH_1} PASS "${regex}" COMMAND ${ZT_EXE} ${ARGN})
endfunction()
zt_flags_more_test(tokenize_flags_threads_int
  "zerotrain tokenize: error: --threads: '2x' is not an integer.*exit 1" tokenize --threads 2x /dev/null)
zt_flags_more_test(tokenize_flags_threads_range
  "zerotrain tokenize: error: --threads: 5000 is out of range \\[1, 4096\\].*exit 1" tokenize -j 5000 /dev/null)
zt_flags_more_test(calibrate_flags_list
  "zerotrain calibrate: error: 'stray.csv': say whether it is --healthy or --idle.*exit 2"
  calibrate stray.csv --healthy a.csv --idle b.csv -o c.json)
