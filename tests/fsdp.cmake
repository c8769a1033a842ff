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
# Context parallelism (C consecutive ranks share each block, zig-zag chunks, K/V all-gathered over
# the group): the reference at the same global batch, plain blocks and packed documents crossing
# the chunks, with and without hybrid sharding. W;C;G (0: full shard)
foreach(spec "2;2;0" "4;2;0" "3;3;0" "6;3;0" "4;4;0" "6;2;0" "4;2;2" "6;3;3" "6;2;2")
  list(GET spec 0 w)
  list(GET spec 1 c)
  list(GET spec 2 g)
  set(tag fsdp_cp_w${w}_c${c})
  if(NOT g EQUAL 0)
    set(tag ${tag}_g${g})
  endif()
  zt_add_mpi_test(${tag} ${w} $<TARGET_FILE:test_fsdp> ${ZT_GOLDEN_DIR}/tiny_untied_gqa 5 plain group=${g} context=${c})
  zt_add_mpi_test(${tag}_sft ${w} $<TARGET_FILE:test_fsdp> ${ZT_GOLDEN_DIR}/tiny_untied_gqa 5 sft group=${g} context=${c})
endforeach()
zt_add_mpi_test(fsdp_cp_w4_c2_tied 4 $<TARGET_FILE:test_fsdp> ${ZT_GOLDEN_DIR}/tiny_tied 5 plain context=2)
zt_add_mpi_test(fsdp_cp_w4_c2_g2_keep 4 $<TARGET_FILE:test_fsdp> ${ZT_GOLDEN_DIR}/tiny_untied_gqa 5 plain group=2 keep context=2)
# Qwen3.5 (tests/golden/q35_mix: Gated DeltaNet and full-attention layers, untied; q35_tied): the
# same equivalence with the reference trainer (through the family's CPU passes) at W = 1..3, on
# supervised data, hybrid 2 x 2 and keep-gathered.
# (The tied model's hybrid 2 x 2 step never clips at this batch, which the test requires.)
foreach(w 1 2 3)
  zt_add_mpi_test(fsdp_q35_w${w} ${w} $<TARGET_FILE:test_fsdp> ${ZT_GOLDEN_DIR}/q35_mix 5)
  zt_add_mpi_test(fsdp_q35_sft_w${w} ${w} $<TARGET_FILE:test_fsdp> ${ZT_GOLDEN_DIR}/q35_mix 5 sft)
endforeach()
zt_add_mpi_test(fsdp_q35_tied_w2 2 $<TARGET_FILE:test_fsdp> ${ZT_GOLDEN_DIR}/q35_tied 5)
zt_add_mpi_test(fsdp_q35_hsdp_w4_g2 4 $<TARGET_FILE:test_fsdp> ${ZT_GOLDEN_DIR}/q35_mix 5 plain group=2)
zt_add_mpi_test(fsdp_q35_hsdp_sft_w4_g2 4 $<TARGET_FILE:test_fsdp> ${ZT_GOLDEN_DIR}/q35_mix 5 sft group=2)
zt_add_mpi_test(fsdp_q35_keep_w3_tied 3 $<TARGET_FILE:test_fsdp> ${ZT_GOLDEN_DIR}/q35_tied 5 plain keep)
zt_add_mpi_test(fsdp_q35_hsdp_keep_w4_g2 4 $<TARGET_FILE:test_fsdp> ${ZT_GOLDEN_DIR}/q35_mix 5 plain group=2 keep)
# Qwen3.5 with context parallelism (model/qwen3_5_context.c: the Gated DeltaNet's value heads over the
# context group, q35_mix's 4 (2 key heads): at C = 3 split 1/1/2, at C = 4 one each, a key head shared
# by two ranks; q35_tied's 2, so C <= 2 there (the family's rule); its full-attention
# layer through the K/V exchange): the reference at the same global batch, plain blocks and packed
# documents crossing the chunks and the ranks, full shard and hybrid, untied and tied. W;C;G;case;data
foreach(spec "3;3;0;q35_mix;plain" "6;3;3;q35_mix;sft" "4;4;0;q35_mix;sft" "2;2;0;q35_tied;sft"
        "4;2;2;q35_tied;plain")
  list(GET spec 0 w)
  list(GET spec 1 c)
  list(GET spec 2 g)
  list(GET spec 3 case)
  list(GET spec 4 data)
  set(tag fsdp_${case}_cp_w${w}_c${c})
  if(NOT g EQUAL 0)
    set(tag ${tag}_g${g})
  endif()
  zt_add_mpi_test(${tag}_${data} ${w} $<TARGET_FILE:test_fsdp> ${ZT_GOLDEN_DIR}/${case} 5 ${data} group=${g} context=${c})
endforeach()
