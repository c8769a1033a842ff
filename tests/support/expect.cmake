# A command's exit code and its output, checked together (ctest's PASS_REGULAR_EXPRESSION alone
# ignores the exit code: a program that prints its line and then crashes would pass).
#   cmake -DZT_EXPECT_EXIT=CODE -DZT_EXPECT_FILE=F -P expect.cmake -- COMMAND ARGS...
# F sets ZT_EXPECT_PASS=REGEX and, optionally, ZT_EXPECT_FAIL=REGEX (zt_expect_test writes it).
# Passes when the command exits with exactly CODE (a signal never matches) and REGEX matches its
# output, stdout and stderr merged, followed by a line "exit RC" (so a pattern can also say where
# the output ends: "^9707 1879\nexit 0\n$" is exactly that line). FAIL, when given, must not
# match. The regex is CMake's, as PASS_REGULAR_EXPRESSION's is, so a converted test asserts what
# it asserted before.
# Mutation hook for tests/support/mutate_exit.py: ZT_EXPECT_PRELOAD=LIB runs the command (not this
# runner) with LD_PRELOAD=LIB; tests/support/exit_preload.c then makes it exit otherwise after it
# has printed everything.
cmake_minimum_required(VERSION 3.20)
set(cmd)
set(seen 0)
math(EXPR last "${CMAKE_ARGC} - 1")
foreach(i RANGE 1 ${last})
  if(seen)
    list(APPEND cmd "${CMAKE_ARGV${i}}")
  elseif("${CMAKE_ARGV${i}}" STREQUAL "--")
    set(seen 1)
  endif()
endforeach()
if(DEFINED ZT_EXPECT_FILE)
  include(${ZT_EXPECT_FILE})
endif()
if(NOT cmd OR NOT DEFINED ZT_EXPECT_EXIT OR NOT DEFINED ZT_EXPECT_PASS)
  message(FATAL_ERROR "usage: cmake -DZT_EXPECT_EXIT=CODE -DZT_EXPECT_FILE=F -P expect.cmake -- COMMAND ARGS...")
endif()
if(DEFINED ENV{ZT_EXPECT_PRELOAD} AND NOT "$ENV{ZT_EXPECT_PRELOAD}" STREQUAL "")
  # env(1) execs the command, so a signal that kills it reaches execute_process (cmake -E env
  # would report it as exit 1)
  list(PREPEND cmd env "LD_PRELOAD=$ENV{ZT_EXPECT_PRELOAD}")
endif()
execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT out STREQUAL "" AND NOT out MATCHES "\n$")
  string(APPEND out "\n")
endif()
string(APPEND out "exit ${rc}\n")
# the output first, as ctest shows a test's output
execute_process(COMMAND ${CMAKE_COMMAND} -E echo_append "${out}")
set(bad)
if(NOT "${rc}" STREQUAL "${ZT_EXPECT_EXIT}")
  list(APPEND bad "the command exited with '${rc}', expected ${ZT_EXPECT_EXIT}")
endif()
if(NOT out MATCHES "${ZT_EXPECT_PASS}")
  list(APPEND bad "the output does not match: ${ZT_EXPECT_PASS}")
endif()
if(DEFINED ZT_EXPECT_FAIL AND NOT "${ZT_EXPECT_FAIL}" STREQUAL "" AND out MATCHES "${ZT_EXPECT_FAIL}")
  list(APPEND bad "the output matches what it must not: ${ZT_EXPECT_FAIL}")
endif()
if(bad)
  string(REPLACE ";" "\n  " bad "${bad}")
  message(FATAL_ERROR "FAIL:\n  ${bad}")
endif()
message("ok: exit ${rc} and the output as expected")
