# ZeRO-3 engine: equivalence with the single-process trainer at W = 1..4, overlap, memory.
zt_add_test_exe(test_fsdp ${ZT_TEST_DIR}/unit/test_fsdp.c zt_train zt_test_support)
foreach(w 1 2 3 4)
  foreach(case tiny_untied_gqa tiny_tied)
    zt_add_mpi_test(fsdp_equiv_w${w}_${case} ${w} $<TARGET_FILE:test_fsdp> ${ZT_GOLDEN_DIR}/${case} 5)
  endforeach()
endforeach()
# Supervised data: loss masks, isolated packed documents, a block with nothing to train, evaluation
foreach(w 1 2 3)
  zt_add_mpi_test(fsdp_sft_w${w} ${w} $<TARGET_FILE:test_fsdp> ${ZT_GOLDEN_DIR}/tiny_untied_gqa 5 sft)
endforeach()
# Hybrid sharding (shards over groups of G ranks, replicated W/G times) and keep-gathered
# (--reshard-after-forward false), against the reference trainer, a companion engine (full shard:
# the same grad norm; resharding: bit-identical results with fewer gathered bytes) and the 1/G memory.
foreach(spec "2;1" "2;2" "3;1" "3;3" "4;2")
  list(GET spec 0 w)
  list(GET spec 1 g)
  zt_add_mpi_test(fsdp_hsdp_w${w}_g${g} ${w} $<TARGET_FILE:test_fsdp> ${ZT_GOLDEN_DIR}/tiny_untied_gqa 5 plain group=${g})
endforeach()
zt_add_mpi_test(fsdp_hsdp_w4_g2_tied 4 $<TARGET_FILE:test_fsdp> ${ZT_GOLDEN_DIR}/tiny_tied 5 plain group=2)
zt_add_mpi_test(fsdp_keep_w2 2 $<TARGET_FILE:test_fsdp> ${ZT_GOLDEN_DIR}/tiny_untied_gqa 5 plain keep)
zt_add_mpi_test(fsdp_keep_w3_tied 3 $<TARGET_FILE:test_fsdp> ${ZT_GOLDEN_DIR}/tiny_tied 5 plain keep)
zt_add_mpi_test(fsdp_hsdp_keep_w4_g2 4 $<TARGET_FILE:test_fsdp> ${ZT_GOLDEN_DIR}/tiny_untied_gqa 5 plain group=2 keep)
zt_add_mpi_test(fsdp_hsdp_sft_w4_g2 4 $<TARGET_FILE:test_fsdp> ${ZT_GOLDEN_DIR}/tiny_untied_gqa 5 sft group=2)
