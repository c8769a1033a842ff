# engine/comm_nccl (the NCCL process group on device buffers): every collective
# against host-computed values at a world of 1 without MPI (comm_nccl_w1), under
# mpirun with one rank per visible GPU (comm_nccl_mpi), the deadline abort of a
# collective held back on its stream (comm_nccl_deadline), and the watchdog abort of
# a host blocked in cudaStreamSynchronize behind it (comm_nccl_watch). Without a GPU
# they all exit 77 and ctest reports them skipped. Only configured when the top-level
# CMakeLists found NCCL (ZT_HAVE_NCCL). Like tests/comm.cmake, the comm sources are
# compiled into the test directly. Without MPI (e.g. a ZT_GPU_ONLY build that finds
# NCCL and includes this file) the test is built with ZT_NCCL_NO_MPI=1: world 1 only.
if(NOT ZT_HAVE_NCCL)
  return()
endif()
add_executable(test_comm_nccl ${CMAKE_CURRENT_LIST_DIR}/unit/test_comm_nccl.c ${CMAKE_SOURCE_DIR}/engine/comm.c
                              ${CMAKE_SOURCE_DIR}/engine/comm_nccl.c ${CMAKE_SOURCE_DIR}/engine/flight.c)
target_include_directories(test_comm_nccl PRIVATE ${ZT_NCCL_INCLUDE})
target_link_libraries(test_comm_nccl PRIVATE zt_base CUDA::cudart_static ${ZT_NCCL_LIB} Threads::Threads m)
if(TARGET MPI::MPI_C)
  # the node layout comes from the MPI process group's one function (engine/comm_mpi.c)
  target_sources(test_comm_nccl PRIVATE ${CMAKE_SOURCE_DIR}/engine/comm_mpi.c)
  target_link_libraries(test_comm_nccl PRIVATE MPI::MPI_C)
else()
  target_compile_definitions(test_comm_nccl PRIVATE ZT_NCCL_NO_MPI=1)
endif()
set(ZT_COMM_NCCL_WORK ${CMAKE_CURRENT_BINARY_DIR}/comm_nccl)

add_test(NAME comm_nccl_w1 COMMAND test_comm_nccl --run-dir ${ZT_COMM_NCCL_WORK}/w1)
set_tests_properties(comm_nccl_w1 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)

# A collective queued behind a host function that sleeps 8 s, deadline 1 s: the job
# must die with code 3 and the deadline report.
add_test(NAME comm_nccl_deadline
         COMMAND sh -c [[out=$("$0" --deadline --run-dir "$1" 2>&1); rc=$?; echo "$out"
[ "$rc" = 77 ] && exit 77
if [ "$rc" = 3 ] && echo "$out" | grep -q "collective deadline exceeded"; then exit 0; fi
echo "expected exit 3 with a deadline report, got exit $rc"; exit 1]]
                 $<TARGET_FILE:test_comm_nccl> ${ZT_COMM_NCCL_WORK}/deadline)
set_tests_properties(comm_nccl_deadline PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)

# The same held-back collective, with the host blocked in cudaStreamSynchronize inside
# a watched region: the watchdog thread must report the host wait and abort (code 3).
add_test(NAME comm_nccl_watch
         COMMAND sh -c [[out=$("$0" --watch --run-dir "$1" 2>&1); rc=$?; echo "$out"
[ "$rc" = 77 ] && exit 77
if [ "$rc" = 3 ] && echo "$out" | grep -q 'stuck in "cudaStreamSynchronize after step" (host wait outside the comm layer)' &&
   [ -s "$1/ranks/rank-00000.flight.json" ]; then exit 0; fi
echo "expected exit 3 with a host-wait report and a flight dump, got exit $rc"; exit 1]]
                 $<TARGET_FILE:test_comm_nccl> ${ZT_COMM_NCCL_WORK}/watch)
set_tests_properties(comm_nccl_watch PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)

# Ranks = visible GPUs, counted at test time by the binary itself (77: none).
if(TARGET MPI::MPI_C AND ZT_MPIEXEC)
  add_test(NAME comm_nccl_mpi
           COMMAND sh -c [[bin=$0; dir=$1; shift
n=$("$bin" --count-devices) || { rc=$?; echo "$n"; exit $rc; }
echo "mpirun with $n rank(s), one per GPU"
exec "$@" "$n" "$bin" --mpi --run-dir "$dir"]]
                   $<TARGET_FILE:test_comm_nccl> ${ZT_COMM_NCCL_WORK}/mpi ${ZT_MPIEXEC} ${MPIEXEC_NUMPROC_FLAG})
  set_tests_properties(comm_nccl_mpi PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
