# engine/comm (process group) and engine/flight (flight recorder): collectives at
# 1-4 ranks against local expectations, the live flight-recorder read, and the
# deadline abort on a mismatched collective (tests/cli/comm_deadline.sh).
# The sources are compiled into the test directly so these tests do not depend on the
# rest of zt_train.
set(ZT_COMM_SRC ${CMAKE_SOURCE_DIR}/engine/comm.c ${CMAKE_SOURCE_DIR}/engine/comm_mpi.c
                ${CMAKE_SOURCE_DIR}/engine/flight.c)
add_executable(test_comm ${ZT_TEST_DIR}/unit/test_comm.c ${ZT_COMM_SRC})
target_link_libraries(test_comm PRIVATE zt_base MPI::MPI_C Threads::Threads m)  # comm.c: the watchdog thread
set(ZT_COMM_WORK ${CMAKE_CURRENT_BINARY_DIR}/comm)

# World 1 runs without mpirun (singleton MPI init).
add_test(NAME comm_w1 COMMAND test_comm --run-dir ${ZT_COMM_WORK}/w1)

# zt_add_mpi_test and ZT_MPIEXEC are defined after the fragments are included, so the
# MPI tests are registered at the end of this directory's processing.
function(zt_comm_mpi_tests)
  foreach(n 2 3 4)
    zt_add_mpi_test(comm_w${n} ${n} $<TARGET_FILE:test_comm> --run-dir ${ZT_COMM_WORK}/w${n})
  endforeach()
  add_test(NAME comm_deadline
           COMMAND sh ${ZT_TEST_DIR}/cli/comm_deadline.sh ${ZT_COMM_WORK}/deadline 3
                   ${ZT_MPIEXEC} ${MPIEXEC_NUMPROC_FLAG} 3 $<TARGET_FILE:test_comm>)
  set_tests_properties(comm_deadline PROPERTIES TIMEOUT 90 PROCESSORS 3)
  # --first-collective-timeout shorter than --collective-timeout is honoured (issue 35)
  add_test(NAME comm_first_deadline_shorter
           COMMAND bash ${ZT_TEST_DIR}/cli/comm_first_deadline.sh ${ZT_COMM_WORK}/first_deadline
                   ${ZT_MPIEXEC} ${MPIEXEC_NUMPROC_FLAG} 2 $<TARGET_FILE:test_comm>)
  set_tests_properties(comm_first_deadline_shorter PROPERTIES TIMEOUT 120 PROCESSORS 2)
endfunction()
cmake_language(DEFER CALL zt_comm_mpi_tests)
