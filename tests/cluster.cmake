# The two-node test cluster on one machine (tests/cluster/): network namespaces node0,
# node1 and login on 127.77.0.0/24 (loopback range only), each test script with one
# cluster of its own. Root only; where namespaces, Slurm or munge are unavailable the
# test exits 77 with the reason (SKIP). Run them alone with `ctest -L cluster`.
set(ZT_CLUSTER_ENV "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
set(ZT_CLUSTER_WORK ${CMAKE_BINARY_DIR}/test-work/cluster)
add_test(NAME cluster_setup COMMAND bash ${ZT_TEST_DIR}/cluster/setup_test.sh $<TARGET_FILE:hold_port>
                                    ${CMAKE_SOURCE_DIR} ${ZT_CLUSTER_WORK}/setup)
add_test(NAME cluster_mpirun COMMAND bash ${ZT_TEST_DIR}/cluster/mpi_test.sh ${ZT_EXE} $<TARGET_FILE:hold_port>
                                     ${CMAKE_SOURCE_DIR} ${ZT_CLUSTER_WORK}/mpirun)
add_test(NAME cluster_slurm COMMAND bash ${ZT_TEST_DIR}/cluster/slurm_test.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                                    ${ZT_CLUSTER_WORK}/slurm)
add_test(NAME cluster_faults COMMAND bash ${ZT_TEST_DIR}/cluster/faults_test.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                                     ${ZT_CLUSTER_WORK}/faults)
add_test(NAME cluster_scaling COMMAND bash ${ZT_TEST_DIR}/cluster/scaling_test.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                                      ${ZT_CLUSTER_WORK}/scaling)
set_tests_properties(cluster_setup PROPERTIES TIMEOUT 60)
set_tests_properties(cluster_mpirun cluster_slurm PROPERTIES TIMEOUT 180)
set_tests_properties(cluster_faults PROPERTIES TIMEOUT 240)
set_tests_properties(cluster_scaling PROPERTIES TIMEOUT 300)
# RUN_SERIAL: each builds its own cluster and oversubscribes both cores
set_tests_properties(cluster_setup cluster_mpirun cluster_slurm cluster_faults cluster_scaling PROPERTIES
  LABELS cluster SKIP_RETURN_CODE 77 RUN_SERIAL TRUE ENVIRONMENT "${ZT_CLUSTER_ENV}")
# Hybrid sharding across the two nodes: node-link bytes per step and losses per strategy
add_test(NAME cluster_hsdp COMMAND bash ${ZT_TEST_DIR}/cluster/hsdp_test.sh ${ZT_EXE} ${CMAKE_SOURCE_DIR}
                                   ${ZT_CLUSTER_WORK}/hsdp)
set_tests_properties(cluster_hsdp PROPERTIES TIMEOUT 900 LABELS cluster SKIP_RETURN_CODE 77 RUN_SERIAL TRUE
  ENVIRONMENT "${ZT_CLUSTER_ENV}")
