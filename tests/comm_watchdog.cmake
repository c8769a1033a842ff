# The comm watchdog thread (engine/comm.c: zt_comm_watch_begin/end and the backends'
# async_error hook): host waits outside the comm layer that outlive the collective
# deadline, and asynchronous backend errors, become the deadline report and a job abort.
#   comm_watchdog_unit      world 1, no MPI, a fake backend: create/finalize cycles join
#                           the thread, bad ZT_WATCHDOG_PERIOD_MS, regions that end in
#                           time, and (forked children) the abort paths with exit code 3
#   comm_watchdog_valgrind  50 create/finalize cycles at a 10 ms period under valgrind
#   comm_watchdog_hang      2 ranks: rank 1 sleeps in a watched region past a 2 s deadline
#   comm_watchdog_hang_mpi  the same blocked inside MPI (an HDF5-style barrier)
#   comm_watchdog_ok        2 ranks: watched regions that end within a 1 s deadline
# Like tests/comm.cmake, the comm sources are compiled in directly.
set(ZT_WD_WORK ${CMAKE_CURRENT_BINARY_DIR}/comm_watchdog)

add_executable(test_comm_watchdog_unit ${ZT_TEST_DIR}/unit/test_comm_watchdog.c ${CMAKE_SOURCE_DIR}/engine/comm.c
                                       ${CMAKE_SOURCE_DIR}/engine/flight.c)
target_link_libraries(test_comm_watchdog_unit PRIVATE zt_base Threads::Threads m)
add_test(NAME comm_watchdog_unit COMMAND test_comm_watchdog_unit --unit ${ZT_WD_WORK}/unit)
set_tests_properties(comm_watchdog_unit PROPERTIES TIMEOUT 120)

find_program(ZT_VALGRIND valgrind)
if(ZT_VALGRIND)
  add_test(NAME comm_watchdog_valgrind
           COMMAND ${ZT_VALGRIND} --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,possible
                   $<TARGET_FILE:test_comm_watchdog_unit> --cycles 50)
  set_tests_properties(comm_watchdog_valgrind PROPERTIES TIMEOUT 300)
endif()

add_executable(test_comm_watchdog ${ZT_TEST_DIR}/unit/test_comm_watchdog.c ${CMAKE_SOURCE_DIR}/engine/comm.c
                                  ${CMAKE_SOURCE_DIR}/engine/comm_mpi.c ${CMAKE_SOURCE_DIR}/engine/flight.c)
target_compile_definitions(test_comm_watchdog PRIVATE ZT_WATCHDOG_TEST_MPI=1)
target_link_libraries(test_comm_watchdog PRIVATE zt_base MPI::MPI_C Threads::Threads m)

# zt_add_mpi_test and ZT_MPIEXEC are defined after the fragments are included.
function(zt_comm_watchdog_mpi_tests)
  foreach(mode sleep mpi)
    set(name comm_watchdog_hang)
    if(mode STREQUAL "mpi")
      set(name comm_watchdog_hang_mpi)
    endif()
    add_test(NAME ${name}
             COMMAND sh ${ZT_TEST_DIR}/cli/comm_watchdog.sh ${ZT_WD_WORK}/${name} ${mode}
                     ${ZT_MPIEXEC} ${MPIEXEC_NUMPROC_FLAG} 2 $<TARGET_FILE:test_comm_watchdog>)
    set_tests_properties(${name} PROPERTIES TIMEOUT 90 PROCESSORS 2)
  endforeach()
  zt_add_mpi_test(comm_watchdog_ok 2 $<TARGET_FILE:test_comm_watchdog> --mpi-ok --run-dir ${ZT_WD_WORK}/ok)
  set_tests_properties(comm_watchdog_ok PROPERTIES TIMEOUT 60)
endfunction()
cmake_language(DEFER CALL zt_comm_watchdog_mpi_tests)
