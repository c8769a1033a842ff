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
