// `zerotrain plan`'s model: parameter count and FLOPs of Qwen3-32B, bytes per
// parameter per sharding choice, the collective volumes, and the field report's
// 4/8/16-B300 table reproduced within 10% by full sharding.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ops/plan.h"
#include "engine/rank_memory.h"
#include "model/qwen3.h"
#include "base/common.h"
#include "tests/support/test_util.h"

static zt_plan_job job(int world, zt_shard_choice ch) {
    return (zt_plan_job){.world = world, .micro_batch = 1, .grad_accum = 8, .seq_len = 2048, .choice = ch,
                         .reduce_bytes = 4};
}

static void test_configs(zt_model_config *c32) {
    zt_model_config f, b;
    CHECK(zt_model_config_load(&f, ZT_SOURCE_DIR "/examples/qwen3-32b/config.json") == 0, "%s", zt_errmsg());
    zt_qwen3_32b_config(&b);
    CHECK(zt_model_param_count(&f) == 32762123264LL, "Qwen3-32B parameters %lld", (long long)zt_model_param_count(&f));
    CHECK(f.vocab_size == b.vocab_size && f.hidden_size == b.hidden_size && f.intermediate_size == b.intermediate_size &&
              f.num_layers == b.num_layers && f.num_heads == b.num_heads && f.num_kv_heads == b.num_kv_heads &&
              f.head_dim == b.head_dim && f.tie_word_embeddings == b.tie_word_embeddings &&
              f.rope_theta == b.rope_theta && f.max_position_embeddings == b.max_position_embeddings &&
              f.bos_token_id == b.bos_token_id && f.eos_token_id == b.eos_token_id,
          "the built-in Qwen3-32B config differs from examples/qwen3-32b/config.json");
    // 487,598,336 per layer x 64 + 2 x 777,912,320 + 5,120 (QWEN3.md)
    zt_model_layout lay;
    zt_model_layout_init(&lay, &f);
    CHECK(lay.units[1].numel == 487598336LL, "layer unit %lld", (long long)lay.units[1].numel);
    CHECK(lay.units[0].numel == 777912320LL, "embedding unit %lld", (long long)lay.units[0].numel);
    CHECK(lay.units[65].numel == 777912320LL + 5120, "head unit %lld", (long long)lay.units[65].numel);
    zt_model_layout_free(&lay);
    zt_model_config s;
    CHECK(zt_model_config_load(&s, ZT_SOURCE_DIR "/examples/qwen3-0.6b/config.json") == 0, "%s", zt_errmsg());
    CHECK(zt_model_param_count(&s) == 596049920LL && s.tie_word_embeddings, "Qwen3-0.6B parameters %lld (tied %d)",
          (long long)zt_model_param_count(&s), s.tie_word_embeddings);
    *c32 = f;
}

static void test_flops(const zt_model_config *c) {
    double f = zt_plan_flops_per_token(c, 2048);
    // 6 * 32,762,123,264 + 12 * 64 * 2048 * 5120 = 204,625,803,264
    CHECK(f == 204625803264.0, "FLOPs per token %.0f", f);
    CHECK(fabs(f / 1e9 - 204.6) < 0.05, "field convention gives %.2f GFLOP, not 204.6", f / 1e9);
    // The executed count: 6 * (matmul params without the embedding lookup) + 6 L S H D
    double e = zt_plan_flops_per_token_exact(c, 2048);
    double mm = 64.0 * (2 * 8192.0 * 5120 + 2 * 1024.0 * 5120 + 3 * 25600.0 * 5120) + 151936.0 * 5120;
    CHECK(fabs(e - (6 * mm + 6.0 * 64 * 2048 * 8192)) < 1, "exact FLOPs %.0f", e);
    // ~30% MFU at the field's throughput (3,313-3,350 tok/s per GPU on 2.25 PFLOP/s)
    CHECK(fabs(3350 * f / 2.25e15 - 0.305) < 0.002, "field MFU %.4f", 3350 * f / 2.25e15);
}

static void test_bytes_per_param(const zt_model_config *c) {
    CHECK(zt_plan_state_bytes_per_param(ZT_SHARD_FULL, 16, 0) == 18.0 / 16, "full");
    CHECK(zt_plan_state_bytes_per_param(ZT_SHARD_NOSYNC, 16, 0) == 18.0 / 16 + 4, "nosync");
    CHECK(zt_plan_state_bytes_per_param(ZT_SHARD_HSDP, 16, 8) == 18.0 / 8, "hsdp");
    zt_gpu_spec g;
    zt_gpu_preset("B300", &g);
    zt_plan_assumptions a;
    zt_plan_assumptions_default(&a);
    const double n = 32762123264.0;
    const int worlds[] = {1, 4, 8, 16, 64};
    for (int i = 0; i < 5; i++)
        for (int ch = 0; ch < ZT_SHARD_NCHOICES; ch++) {
            const int W = worlds[i];
            zt_plan_result r;
            CHECK(zt_plan_predict(c, &g, &a, &(zt_plan_job){.world = W, .micro_batch = 1, .grad_accum = 8,
                                                          .seq_len = 2048, .choice = ch, .reduce_bytes = 4},
                                  &r) == 0,
                  "%s", zt_errmsg());
            const int G = ch == ZT_SHARD_HSDP ? (W < 8 ? W : 8) : W;
            CHECK(r.shard_group == G && r.replicas == W / G, "W %d %s: group %d x %d", W, zt_shard_names[ch],
                  r.shard_group, r.replicas);
            double per = (r.mem.params + r.mem.grads + r.mem.optimizer) / n;
            double want = zt_plan_state_bytes_per_param(ch, W, G);
            // padding each of the 66 units to a multiple of G x 16 elements adds at most 66 G 16 elements
            const double pad = 66.0 * G * 16 / n;
            CHECK(fabs(per / want - 1) <= pad, "W %d %s: %.6f bytes/param, want %.6f", W, zt_shard_names[ch], per,
                  want);
            CHECK(fabs(r.mem.params / n * G / 6 - 1) <= pad && fabs(r.mem.optimizer / n * G / 8 - 1) <= pad,
                  "W %d %s: params %.4f, optimizer %.4f bytes/param x G", W, zt_shard_names[ch], r.mem.params / n * G,
                  r.mem.optimizer / n * G);
            // gathered-unit pool: 3 bf16 + 4 fp32 slots of the largest unit (embedding/lm_head), none for nosync grads
            double unit = 777912320.0 + 5120;
            double pool = 3 * unit * 2 + (ch == ZT_SHARD_NOSYNC ? 0 : 4 * unit * 4);
            CHECK(fabs(r.mem.buffers / pool - 1) < 1e-3, "W %d %s: buffers %.3g, want %.3g", W, zt_shard_names[ch],
                  r.mem.buffers, pool);
            CHECK(r.mem.total == r.mem.params + r.mem.grads + r.mem.optimizer + r.mem.buffers + r.mem.activations,
                  "total adds up");
        }
}

static void test_volumes(const zt_model_config *c) {
    zt_gpu_spec g;
    zt_gpu_preset("H100", &g);
    zt_plan_assumptions a;
    zt_plan_assumptions_default(&a);
    const double n = 32762123264.0;
    zt_plan_result r;
    // full shard, 8 GPUs: per micro-batch the forward gathers all 66 units, the backward the 64 layers again,
    // and every unit's gradient is reduce-scattered (fp32); each GPU sends 7/8 of the full size.
    CHECK(zt_plan_predict(c, &g, &a, &(zt_plan_job){.world = 8, .micro_batch = 1, .grad_accum = 8, .seq_len = 2048,
                                                     .choice = ZT_SHARD_FULL, .reduce_bytes = 4},
                          &r) == 0,
          "%s", zt_errmsg());
    const double layers = 64 * 487598336.0;
    CHECK(r.coll[ZT_COLL_AG_FWD].count == 8 * 66 && r.coll[ZT_COLL_AG_BWD].count == 8 * 64 &&
              r.coll[ZT_COLL_RS].count == 8 * 66,
          "collective counts %d %d %d", r.coll[ZT_COLL_AG_FWD].count, r.coll[ZT_COLL_AG_BWD].count,
          r.coll[ZT_COLL_RS].count);
    CHECK(fabs(r.coll[ZT_COLL_AG_FWD].bytes / (8 * 2 * n * 7 / 8) - 1) < 1e-6, "forward all-gather bytes %.4g",
          r.coll[ZT_COLL_AG_FWD].bytes);
    CHECK(fabs(r.coll[ZT_COLL_AG_BWD].bytes / (8 * 2 * layers * 7 / 8) - 1) < 1e-6, "backward all-gather bytes");
    CHECK(fabs(r.coll[ZT_COLL_RS].bytes / (8 * 4 * n * 7 / 8) - 1) < 1e-6, "reduce-scatter bytes");
    // ring time: (n-1) alpha + (n-1)/n S / busbw per collective, summed
    double busbw = g.nvlink_bw * a.nvlink_eff;
    double want = 8 * 66 * 7 * a.alpha_nvlink + 8 * 2 * n * 7 / 8 / busbw;
    CHECK(fabs(r.coll[ZT_COLL_AG_FWD].time / want - 1) < 1e-6, "forward all-gather time %.4f, want %.4f",
          r.coll[ZT_COLL_AG_FWD].time, want);
    double exposed = 0;
    for (int k = 0; k < ZT_COLL_NKINDS; k++) {
        CHECK(r.coll[k].exposed <= r.coll[k].time + 1e-9, "%s exposes more than it takes", zt_coll_names[k]);
        exposed += r.coll[k].exposed;
    }
    CHECK(fabs(exposed - r.t_exposed_comm) < 1e-6, "exposed time attributed %.6f of %.6f", exposed, r.t_exposed_comm);
    CHECK(fabs(r.t_step - (r.t_compute + r.t_exposed_comm + r.t_optimizer)) < 1e-9, "step = compute + exposed + opt");
    // nosync: one reduce-scatter per unit per step, gathers unchanged
    CHECK(zt_plan_predict(c, &g, &a, &(zt_plan_job){.world = 8, .micro_batch = 1, .grad_accum = 8, .seq_len = 2048,
                                                     .choice = ZT_SHARD_NOSYNC, .reduce_bytes = 4},
                          &r) == 0,
          "%s", zt_errmsg());
    CHECK(r.coll[ZT_COLL_RS].count == 66 && fabs(r.coll[ZT_COLL_RS].bytes / (4 * n * 7 / 8) - 1) < 1e-6,
          "nosync reduce-scatter %d, %.4g bytes", r.coll[ZT_COLL_RS].count, r.coll[ZT_COLL_RS].bytes);
    // hsdp on 32 GPUs: gathers inside the node, one all-reduce of each unit's shard across 4 replicas per step
    CHECK(zt_plan_predict(c, &g, &a, &(zt_plan_job){.world = 32, .micro_batch = 1, .grad_accum = 8, .seq_len = 2048,
                                                     .choice = ZT_SHARD_HSDP, .reduce_bytes = 4},
                          &r) == 0,
          "%s", zt_errmsg());
    CHECK(!r.coll[ZT_COLL_AG_FWD].over_network && r.coll[ZT_COLL_AR_REPLICA].over_network &&
              r.coll[ZT_COLL_AR_REPLICA].count == 66,
          "hsdp links");
    CHECK(fabs(r.coll[ZT_COLL_AR_REPLICA].bytes / (2.0 * 3 / 4 * 4 * n / 8) - 1) < 1e-5, "hsdp all-reduce bytes %.4g",
          r.coll[ZT_COLL_AR_REPLICA].bytes);
    // one GPU: no communication at all
    CHECK(zt_plan_predict(c, &g, &a, &(zt_plan_job){.world = 1, .micro_batch = 1, .grad_accum = 1, .seq_len = 2048,
                                                     .choice = ZT_SHARD_FULL, .reduce_bytes = 4},
                          &r) == 0,
          "%s", zt_errmsg());
    CHECK(r.t_exposed_comm == 0 && r.coll[ZT_COLL_AG_FWD].time == 0, "W=1 communicates");
}

// Bytes over the node link per step, two 8-GPU nodes, grad-accum 4 (the case): full shard's
// rings cross the link with every gather and reduce-scatter of every micro-batch; hybrid's only with the
// replica all-reduce, once per step, on 8 rings (one per local rank) of 2 replicas.
static void test_node_link(const zt_model_config *c) {
    zt_gpu_spec g;
    zt_gpu_preset("B300", &g);
    zt_plan_assumptions a;
    zt_plan_assumptions_default(&a);
    const double n = 32762123264.0, layers = 64 * 487598336.0;
    zt_plan_result full, hsdp, one;
    zt_plan_job j = {.world = 16, .micro_batch = 1, .grad_accum = 4, .seq_len = 2048, .choice = ZT_SHARD_FULL,
                     .reduce_bytes = 4};
    CHECK(zt_plan_predict(c, &g, &a, &j, &full) == 0, "%s", zt_errmsg());
    j.choice = ZT_SHARD_HSDP;
    CHECK(zt_plan_predict(c, &g, &a, &j, &hsdp) == 0, "%s", zt_errmsg());
    j.world = 8;
    CHECK(zt_plan_predict(c, &g, &a, &j, &one) == 0, "%s", zt_errmsg());
    // full: per micro-batch 15/16 of (2 n bf16 forward + 2 layers bf16 backward + 4 n fp32 scatter), + 24 control bytes
    const double want_full = 4 * 15.0 / 16 * (2 * n + 2 * layers + 4 * n) + 24;
    // hybrid: 8 rings x 2 (R-1)/R x the fp32 shard (n / 8) = 8 x n / 8 x 4 bytes
    const double want_hsdp = 8 * (2.0 * 1 / 2 * 4 * n / 8) + 24;
    printf("node link per step: full %.1f GB (formula %.1f), hsdp %.1f GB (formula %.1f), ratio %.1f\n",
           full.node_link_bytes / 1e9, want_full / 1e9, hsdp.node_link_bytes / 1e9, want_hsdp / 1e9,
           full.node_link_bytes / hsdp.node_link_bytes);
    CHECK(fabs(full.node_link_bytes / want_full - 1) < 1e-4, "full shard node link %.6g, formula %.6g",
          full.node_link_bytes, want_full);
    CHECK(fabs(hsdp.node_link_bytes / want_hsdp - 1) < 1e-4, "hsdp node link %.6g, formula %.6g", hsdp.node_link_bytes,
          want_hsdp);
    CHECK(full.node_link_bytes >= 4 * hsdp.node_link_bytes, "hsdp saves less than 4x on the node link at grad-accum 4");
    CHECK(one.node_link_bytes == 0, "one node: %.4g bytes over a node link", one.node_link_bytes);
}

// The cluster test's job (tests/cluster/hsdp_test.sh): the tiny untied model (50,992 parameters: embedding
// 4,608, two layers of 20,864, head 4,656) at 2 x 2 CPU ranks, fp32 gathers and reductions over Open MPI's
// libnbc algorithms, grad-accum 4, counted by hand. Padded to 4 x 16: 4,608 + 2 x 20,864 + 4,672 = 51,008.
static void test_node_link_mpi(void) {
    zt_model_config t;
    CHECK(zt_model_config_load(&t, ZT_SOURCE_DIR "/tests/golden/tiny_untied_gqa/config.json") == 0, "%s", zt_errmsg());
    CHECK(zt_model_param_count(&t) == 50992, "tiny parameters %lld", (long long)zt_model_param_count(&t));
    zt_gpu_spec g;
    zt_gpu_preset("H100", &g);
    g.gpus_per_node = 2;
    zt_plan_assumptions a;
    zt_plan_assumptions_default(&a);
    zt_plan_job j = {.world = 4, .micro_batch = 1, .grad_accum = 4, .seq_len = 16, .choice = ZT_SHARD_FULL,
                     .reduce_bytes = 4, .param_bytes = 4, .colls = ZT_COLLS_MPI};
    zt_plan_result r;
    CHECK(zt_plan_predict(&t, &g, &a, &j, &r) == 0, "%s", zt_errmsg());
    const double full = 4.0 * 51008, layers = 4.0 * 2 * 20864;
    // linear all-gather: 4 ranks x the 2 on the other node x a quarter = 2 x the gathered size; reduce-scatter:
    // the tree edge 2 -> 0 carries it all, rank 0 scatters a quarter to each of ranks 2 and 3 = 1.5 x;
    // the control all-reduce's tree edge 2 -> 0, up and down, 24 bytes each way
    const double ag = 2 * full, ag_bwd = 2 * layers, rs = 1.5 * full, ctrl = 2 * 24;
    double want = 4 * (ag + ag_bwd + rs) + ctrl;
    printf("tiny 2 x 2 MPI node link per step: full %.0f (hand %.0f)", r.node_link_total, want);
    CHECK(fabs(r.node_link_total - want) < 0.5, "full shard, MPI: %.0f bytes, hand count %.0f", r.node_link_total, want);
    CHECK(fabs(r.node_link_bytes - want / 2) < 0.5, "per node: %.0f", r.node_link_bytes);
    j.keep_gathered = 1;  // no backward gathers
    CHECK(zt_plan_predict(&t, &g, &a, &j, &r) == 0, "%s", zt_errmsg());
    want = 4 * (ag + rs) + ctrl;
    printf(", keep-gathered %.0f (hand %.0f)", r.node_link_total, want);
    CHECK(fabs(r.node_link_total - want) < 0.5, "keep-gathered, MPI: %.0f bytes, hand count %.0f", r.node_link_total,
          want);
    CHECK(r.coll[ZT_COLL_AG_BWD].count == 0 && r.coll[ZT_COLL_AG_FWD].count == 4 * 4, "keep-gathered gathers %d + %d",
          r.coll[ZT_COLL_AG_FWD].count, r.coll[ZT_COLL_AG_BWD].count);
    // keep-gathered memory: 4 resident fp32 units of the largest (a layer) instead of 3, + 4 gradient slots;
    // the parameters are the fp32 master only
    CHECK(fabs(r.mem.buffers - (4 * 20864 * 4.0 + 4 * 20864 * 4.0)) < 0.5, "keep-gathered buffers %.0f", r.mem.buffers);
    CHECK(fabs(r.mem.params - 4.0 * 51008 / 4) < 0.5, "fp32 parameters %.0f", r.mem.params);
    // hybrid, shard group = the node: only the replica all-reduce crosses, one per local rank, each the
    // binomial edge 1 -> 0 up and down with that rank's fp32 shard (a half of 51,008 padded to 2 x 16)
    j.choice = ZT_SHARD_HSDP;
    for (int keep = 0; keep <= 1; keep++) {
        j.keep_gathered = keep;
        CHECK(zt_plan_predict(&t, &g, &a, &j, &r) == 0, "%s", zt_errmsg());
        want = 2 * (2 * 4.0 * 51008 / 2) + ctrl;
        printf(", hsdp%s %.0f (hand %.0f)", keep ? " + keep" : "", r.node_link_total, want);
        CHECK(fabs(r.node_link_total - want) < 0.5, "hsdp (keep %d), MPI: %.0f bytes, hand count %.0f", keep,
              r.node_link_total, want);
    }
    // the same full-shard job over NCCL rings: the ring 0-1-2-3-0 leaves each node once, carrying 3/4
    j = (zt_plan_job){.world = 4, .micro_batch = 1, .grad_accum = 4, .seq_len = 16, .choice = ZT_SHARD_FULL,
                      .reduce_bytes = 4, .param_bytes = 4, .colls = ZT_COLLS_NCCL};
    CHECK(zt_plan_predict(&t, &g, &a, &j, &r) == 0, "%s", zt_errmsg());
    want = 2 * (4 * 0.75 * (full + layers + full) + 2 * 0.75 * 24);
    printf(", full over rings %.0f (hand %.0f)\n", r.node_link_total, want);
    CHECK(fabs(r.node_link_total - want) < 0.5, "full shard, rings: %.0f bytes, hand count %.0f", r.node_link_total,
          want);
    j.param_bytes = 3;
    CHECK(zt_plan_predict(&t, &g, &a, &j, &r) != 0 && strstr(zt_errmsg(), "parameter dtype"), "3-byte parameters: %s",
          zt_errmsg());
    zt_err_clear();
}

static void test_field(const zt_model_config *c) {
    zt_gpu_spec g;
    zt_gpu_preset("b300", &g);
    zt_plan_assumptions a;
    zt_plan_assumptions_default(&a);
    for (int i = 0; i < ZT_FIELD_ROWS; i++) {
        const zt_field_row *f = &zt_field_table[i];
        zt_plan_result r;
        CHECK(zt_plan_predict(c, &g, &a, &(zt_plan_job){.world = f->world, .micro_batch = 1, .grad_accum = 8,
                                                         .seq_len = 2048, .choice = ZT_SHARD_FULL, .reduce_bytes = 4},
                              &r) == 0,
              "%s", zt_errmsg());
        double err = r.tok_per_s_per_gpu / f->tok_per_s_per_gpu - 1;
        double gpuh = ZT_FIELD_EPOCH_TOKENS / r.tok_per_s_per_gpu / 3600;
        printf("  %2d B300s, full shard: %.0f tok/s per GPU (field %.0f, %+.1f%%), %.1f GPU-h per epoch (field %.1f), "
               "%.1f GB per GPU\n",
               f->world, r.tok_per_s_per_gpu, f->tok_per_s_per_gpu, 100 * err, gpuh, f->gpu_h_per_epoch,
               r.mem.total / 1e9);
        CHECK(fabs(err) <= 0.10, "%d GPUs: %.0f tok/s per GPU is %+.1f%% from the field's %.0f", f->world,
              r.tok_per_s_per_gpu, 100 * err, f->tok_per_s_per_gpu);
        CHECK(fabs(gpuh / f->gpu_h_per_epoch - 1) <= 0.10, "%d GPUs: %.1f GPU-h vs %.1f", f->world, gpuh,
              f->gpu_h_per_epoch);
        CHECK(r.mem.fits, "%d GPUs: full shard should fit (%.0f GB)", f->world, r.mem.total / 1e9);
        // the field table's own arithmetic: GPU-h = epoch tokens / (tok/s per GPU) / 3600
        CHECK(fabs(ZT_FIELD_EPOCH_TOKENS / f->tok_per_s_per_gpu / 3600 - f->gpu_h_per_epoch) < 0.06, "field row %d",
              f->world);
    }
    // gradient accumulation without per-micro-batch reduce-scatter needs an unsharded fp32 gradient: it cannot
    // have been the field's setup at 4 GPUs
    zt_plan_result r;
    zt_plan_predict(c, &g, &a, &(zt_plan_job){.world = 4, .micro_batch = 1, .grad_accum = 8, .seq_len = 2048,
                                               .choice = ZT_SHARD_NOSYNC, .reduce_bytes = 4},
                    &r);
    CHECK(!r.mem.fits, "nosync at 4 B300s should not fit (%.0f GB)", r.mem.total / 1e9);
    // ... with a bf16 accumulator (2 bytes per parameter instead of 4) it would
    zt_plan_result r2;
    zt_plan_predict(c, &g, &a, &(zt_plan_job){.world = 4, .micro_batch = 1, .grad_accum = 8, .seq_len = 2048,
                                               .choice = ZT_SHARD_NOSYNC, .reduce_bytes = 4, .accum_bytes = 2},
                    &r2);
    CHECK(fabs(r.mem.grads - r2.mem.grads - 2 * 32762123264.0) < 1 && r2.mem.fits,
          "bf16 accumulator: %.1f GB of gradients, fits %d", r2.mem.grads / 1e9, r2.mem.fits);
    // at 1,024 GPUs the ring latency of full sharding dominates; HSDP keeps the gathers inside a node
    zt_plan_result full, hsdp;
    zt_plan_predict(c, &g, &a, &(zt_plan_job){.world = 1024, .micro_batch = 1, .grad_accum = 8, .seq_len = 2048,
                                               .choice = ZT_SHARD_FULL, .reduce_bytes = 4},
                    &full);
    zt_plan_predict(c, &g, &a, &(zt_plan_job){.world = 1024, .micro_batch = 1, .grad_accum = 8, .seq_len = 2048,
                                               .choice = ZT_SHARD_HSDP, .reduce_bytes = 4},
                    &hsdp);
    CHECK(hsdp.tok_per_s_per_gpu > full.tok_per_s_per_gpu, "1,024 GPUs: hsdp %.0f vs full %.0f",
          hsdp.tok_per_s_per_gpu, full.tok_per_s_per_gpu);
    // recomputation costs one more forward of every layer
    zt_plan_job j = job(16, ZT_SHARD_FULL);
    zt_plan_result base, rec;
    zt_plan_predict(c, &g, &a, &j, &base);
    j.recompute = 1;
    zt_plan_predict(c, &g, &a, &j, &rec);
    CHECK(rec.t_compute > 1.3 * base.t_compute && rec.t_compute < 1.34 * base.t_compute &&
              rec.mem.activations < 0.2 * base.mem.activations,
          "recompute: compute x%.3f, activations x%.3f", rec.t_compute / base.t_compute,
          rec.mem.activations / base.mem.activations);
}

static void test_errors(const zt_model_config *c) {
    zt_gpu_spec g;
    CHECK(zt_gpu_preset("X999", &g) != 0 && strstr(zt_errmsg(), "B300"), "unknown preset: %s", zt_errmsg());
    zt_gpu_preset("H200", &g);
    zt_plan_assumptions a;
    zt_plan_assumptions_default(&a);
    zt_plan_result r;
    CHECK(zt_plan_predict(c, &g, &a, &(zt_plan_job){.world = 12, .micro_batch = 1, .grad_accum = 1, .seq_len = 2048,
                                                     .reduce_bytes = 4},
                          &r) != 0 &&
              strstr(zt_errmsg(), "multiple of 8"),
          "12 GPUs on 8-GPU nodes: %s", zt_errmsg());
    CHECK(zt_plan_predict(c, &g, &a, &(zt_plan_job){.world = 16, .micro_batch = 1, .grad_accum = 1, .seq_len = 2048,
                                                     .choice = ZT_SHARD_HSDP, .shard_group = 6, .reduce_bytes = 4},
                          &r) != 0 &&
              strstr(zt_errmsg(), "must divide"),
          "shard group 6 of 16: %s", zt_errmsg());
    // a GPU described in a file: the B300 preset's numbers give the B300 prediction
    const char *path = "/tmp/zt_test_plan_gpu.json";
    FILE *f = fopen(path, "w");
    fprintf(f, "{\"name\": \"my-b300\", \"peak_flops\": 2.25e15, \"hbm_bytes\": 288e9, \"hbm_bw\": 8e12, "
               "\"nvlink_bw\": 900e9, \"net_bw\": 100e9, \"gpus_per_node\": 8}");
    fclose(f);
    zt_gpu_spec fg, pg;
    CHECK(zt_gpu_spec_load(path, &fg) == 0 && !strcmp(fg.name, "my-b300") && fg.gpus_per_node == 8, "%s",
          zt_errmsg());
    zt_gpu_preset("B300", &pg);
    zt_plan_result r1, r2;
    zt_plan_job j = job(16, ZT_SHARD_FULL);
    zt_plan_predict(c, &fg, &a, &j, &r1);
    zt_plan_predict(c, &pg, &a, &j, &r2);
    CHECK(r1.t_step == r2.t_step && r1.mem.total == r2.mem.total, "file vs preset: %.4f vs %.4f s", r1.t_step,
          r2.t_step);
    f = fopen(path, "w");
    fprintf(f, "{\"peak_flops\": 1e15, \"hbm_bytes\": 80e9, \"hbm_bw\": 3e12, \"nvlink_bw\": -1, \"net_bw\": 5e10}");
    fclose(f);
    CHECK(zt_gpu_spec_load(path, &fg) != 0 && strstr(zt_errmsg(), "\"nvlink_bw\" must be a positive number"), "%s",
          zt_errmsg());
    // every number range-checked, naming the file and the key: cJSON reads 1e400 as inf
    // (which printed "inf TFLOP/s ... fits"), and 1e30 bytes of HBM is no GPU
    const char *keys[] = {"peak_flops", "hbm_bytes", "hbm_bw", "nvlink_bw", "net_bw", "gpus_per_node"};
    const char *bad[] = {"1e400", "1e30", "1e-3"};
    for (int k = 0; k < 6; k++)
        for (int b = 0; b < 3; b++) {
            f = fopen(path, "w");
            fprintf(f, "{\"peak_flops\": %s, \"hbm_bytes\": %s, \"hbm_bw\": %s, \"nvlink_bw\": %s, \"net_bw\": %s, "
                       "\"gpus_per_node\": %s}",
                    k == 0 ? bad[b] : "1e15", k == 1 ? bad[b] : "80e9", k == 2 ? bad[b] : "3e12",
                    k == 3 ? bad[b] : "450e9", k == 4 ? bad[b] : "50e9", k == 5 ? bad[b] : "8");
            fclose(f);
            char want[64];
            snprintf(want, sizeof want, "field \"%s\" is ", keys[k]);
            const int rc = zt_gpu_spec_load(path, &fg);
            CHECK(rc != 0 && strstr(zt_errmsg(), path) && strstr(zt_errmsg(), want) &&
                      strstr(zt_errmsg(), "out of range: it must be a finite number in ["),
                  "%s = %s: rc %d, %s", keys[k], bad[b], rc, rc ? zt_errmsg() : "accepted");
        }
    // nested past cJSON's limit: said as such, not "not a JSON object"
    f = fopen(path, "w");
    fputs("{\"peak_flops\": ", f);
    for (int k = 0; k < 1100; k++) fputc('[', f);
    for (int k = 0; k < 1100; k++) fputc(']', f);
    fputs("}", f);
    fclose(f);
    CHECK(zt_gpu_spec_load(path, &fg) != 0 && strstr(zt_errmsg(), path) &&
              strstr(zt_errmsg(), "nested deeper than 1000 levels (cJSON's limit CJSON_NESTING_LIMIT) at column 1015"),
          "a GPU file nested 1100 deep: %s", zt_errmsg());
    remove(path);
    CHECK(zt_gpu_spec_load(ZT_SOURCE_DIR "/examples/qwen3-32b/config.json", &g) != 0 &&
              strstr(zt_errmsg(), "peak_flops"),
          "a config.json is not a GPU file: %s", zt_errmsg());
}

// rc must be an error whose message holds `what`
#define CHECK_ERR(rc, what) CHECK((rc) != 0 && strstr(zt_errmsg(), what), "want an error with \"%s\": %s", what, zt_errmsg())

// --context-parallel C (docs/plan.md "Context parallelism"), against a hand computation: Qwen3-32B on
// 16 B300 at S = 32768, recompute, full shard, C = 8: each rank holds 4096 tokens of each block.
static void test_context_parallel(const zt_model_config *c) {
    zt_gpu_spec g;
    zt_gpu_preset("B300", &g);
    zt_plan_assumptions a;
    zt_plan_assumptions_default(&a);
    zt_plan_job j = {.world = 16, .micro_batch = 1, .grad_accum = 8, .seq_len = 32768, .choice = ZT_SHARD_FULL,
                     .reduce_bytes = 4, .recompute = 1};
    zt_plan_result base, r, one;
    CHECK(zt_plan_predict(c, &g, &a, &j, &base) == 0, "%s", zt_errmsg());
    j.context_parallel = 8;
    CHECK(zt_plan_predict(c, &g, &a, &j, &r) == 0, "%s", zt_errmsg());
    // the sharded state and the engine's buffers do not change: sharded over shard x context ranks as before
    CHECK(r.mem.params == base.mem.params && r.mem.grads == base.mem.grads && r.mem.optimizer == base.mem.optimizer &&
              r.mem.buffers == base.mem.buffers,
          "context parallelism changed the sharded state");
    // 16 / 8 = 2 data-parallel ranks; per GPU 8 micro-batches x 32768 / 8 tokens; per step 2 x 8 x 32768
    CHECK(r.context == 8 && r.data_parallel == 2, "context %d, data-parallel %d", r.context, r.data_parallel);
    CHECK(r.tokens_per_gpu == 32768.0 && r.tokens_per_gpu * 16 == 524288.0, "tokens per GPU %.0f", r.tokens_per_gpu);
    // activations of T = 4096 tokens, recompute: L T 2d + one layer + head + backward workspace
    const double T = 4096, d = 5120, H = 64, Hkv = 8, D = 128, F = 25600, V = 151936, L = 64;
    const double act = L * T * 2 * d + T * (2 * (4 * d + 3 * H * D + 3 * Hkv * D + 3 * F) + 4 * (2 + 2 * H + Hkv)) +
                       T * (2 * d + 4 * V) + T * 2 * (2 * d + 2 * H * D + 2 * Hkv * D + 3 * F);
    CHECK(fabs(r.mem.activations / act - 1) < 1e-12, "activations %.0f, hand %.0f", r.mem.activations, act);
    CHECK(fabs(r.mem.activations * 8 / base.mem.activations - 1) < 1e-12, "activations are not 1/C");
    // gathered K, V (bf16) + the block's dK, dV (fp32): 12 x 32768 x 8 x 128
    CHECK(r.mem.cp_kv == 402653184.0, "context K/V %.0f", r.mem.cp_kv);
    // GEMM scratch, g = 8 query heads per KV head, 4096 queries x 32768 keys: 12 g Sq S + 8 g S D + 4 g Sq
    CHECK(r.mem.attn_gemm == 12884901888.0 + 268435456.0 + 131072.0, "GEMM scratch %.0f", r.mem.attn_gemm);
    // tiled: g Sq (6 D + 8) + 8 S D = 8 x 4096 x 776 + 8 x 32768 x 128
    CHECK(r.mem.attn_tiled == 25427968.0 + 33554432.0, "tiled scratch %.0f", r.mem.attn_tiled);
    CHECK(r.mem.attention == r.mem.attn_gemm, "the GEMM scratch is counted by default");
    CHECK(r.mem.total == r.mem.params + r.mem.grads + r.mem.optimizer + r.mem.buffers + r.mem.activations +
                             r.mem.cp_kv + r.mem.attn_gemm,
          "total %.0f", r.mem.total);
    // C = 1: the whole block; the GEMM term is kernels/cuda/attention.cu's scratch_layout at S = 32768
    // (every piece a multiple of 256 bytes there, so its rounding adds nothing): 12 g S^2 + 8 g S D + 4 g S
    j.context_parallel = 1;
    CHECK(zt_plan_predict(c, &g, &a, &j, &one) == 0, "%s", zt_errmsg());
    CHECK(one.mem.attn_gemm == 12.0 * 8 * 32768 * 32768 + 8.0 * 8 * 32768 * 128 + 4.0 * 8 * 32768 &&
              one.mem.cp_kv == 0 && one.mem.activations == base.mem.activations && one.data_parallel == 16 &&
              one.coll[ZT_COLL_CP_AG].count == 0,
          "C = 1: scratch %.0f, K/V %.0f", one.mem.attn_gemm, one.mem.cp_kv);
    CHECK(one.mem.total == base.mem.total + one.mem.attn_gemm, "C = 1 adds only the scratch");
    j.attention = ZT_ATTN_SCRATCH_TILED;
    CHECK(zt_plan_predict(c, &g, &a, &j, &one) == 0 && one.mem.total == base.mem.total + one.mem.attn_tiled,
          "--attention tiled counts the tiled scratch");
    j.attention = 0;
    // compute: 1/C of the block's work per rank (its tokens' matmuls and its queries' attention)
    CHECK(fabs(r.t_compute * 8 / base.t_compute - 1) < 1e-12, "compute %.6f vs %.6f / 8", r.t_compute,
          base.t_compute);
    // per micro-batch and layer: the K/V all-gather in forward and again in backward (recompute), one
    // dK/dV reduce-scatter; a layer's K and V: 32768 x 2 x 8 x 128 x 2 bytes, each GPU sends 7/8
    const double kv = 32768.0 * 2 * 8 * 128;
    CHECK(r.cp_kv_layer == kv * 2, "K/V per layer %.0f", r.cp_kv_layer);
    CHECK(r.coll[ZT_COLL_CP_AG].count == 8 * 64 * 2 && r.coll[ZT_COLL_CP_RS].count == 8 * 64, "counts %d %d",
          r.coll[ZT_COLL_CP_AG].count, r.coll[ZT_COLL_CP_RS].count);
    CHECK(fabs(r.coll[ZT_COLL_CP_AG].bytes / (1024 * kv * 2 * 7 / 8) - 1) < 1e-12 &&
              fabs(r.coll[ZT_COLL_CP_RS].bytes / (512 * kv * 4 * 7 / 8) - 1) < 1e-12,
          "bytes %.0f %.0f", r.coll[ZT_COLL_CP_AG].bytes, r.coll[ZT_COLL_CP_RS].bytes);
    const double bw = g.nvlink_bw * a.nvlink_eff;  // 8 consecutive ranks: one node
    CHECK(fabs(r.coll[ZT_COLL_CP_AG].time / (1024 * (7 * a.alpha_nvlink + kv * 2 * 7 / 8 / bw)) - 1) < 1e-9 &&
              !r.coll[ZT_COLL_CP_AG].over_network && r.coll[ZT_COLL_CP_AG].group == 8,
          "all-gather time %.6f", r.coll[ZT_COLL_CP_AG].time);
    // the K/V gathers and dK/dV reduce-scatters sit on the critical path (with recompute every one)
    double exposed = 0;
    for (int k = 0; k < ZT_COLL_NKINDS; k++) exposed += r.coll[k].exposed;
    CHECK(fabs(exposed - r.t_exposed_comm) < 1e-6 && r.t_exposed_comm >= r.coll[ZT_COLL_CP_RS].time - 1e-9,
          "exposed %.6f, reduce-scatters %.6f", r.t_exposed_comm, r.coll[ZT_COLL_CP_RS].time);
    CHECK(fabs(r.t_step - (r.t_compute + r.t_exposed_comm + r.t_optimizer)) < 1e-9, "step = compute + exposed + opt");
    // refusals, naming both numbers
    j.context_parallel = 3;
    CHECK_ERR(zt_plan_predict(c, &g, &a, &j, &r), "--context-parallel 3 does not divide the full shard group of 16");
    j.context_parallel = 8, j.choice = ZT_SHARD_HSDP, j.shard_group = 4;
    CHECK_ERR(zt_plan_predict(c, &g, &a, &j, &r), "--context-parallel 8 does not divide the hsdp shard group of 4");
    // 2C <= S, the rule train, preflight and `plan --device cpu|cuda` apply (engine/job_shape.h): 8 ranks
    // need 16 chunks of a block, so 10 tokens are refused as 4 are (issue 47: C <= S passed)
    j.choice = ZT_SHARD_FULL, j.shard_group = 0, j.seq_len = 4;
    CHECK_ERR(zt_plan_predict(c, &g, &a, &j, &r), "--context-parallel 8: blocks of 4 tokens cannot be split into 2 x 8");
    j.seq_len = 10;
    CHECK_ERR(zt_plan_predict(c, &g, &a, &j, &r), "--context-parallel 8: blocks of 10 tokens cannot be split into 2 x 8");
    j.seq_len = 16;  // the shortest block 8 ranks can share
    CHECK(zt_plan_predict(c, &g, &a, &j, &r) == 0, "C = 8 at seq 16: %s", zt_errmsg());
    j.seq_len = 32768, j.context_parallel = 0, j.attention = ZT_ATTN_SCRATCH_TILED;
    CHECK_ERR(zt_plan_predict(c, &g, &a, &j, &r), "give --context-parallel");
}

int main(void) {
    zt_model_config c;
    test_configs(&c);
    test_flops(&c);
    test_bytes_per_param(&c);
    test_volumes(&c);
    test_node_link(&c);
    test_node_link_mpi();
    test_field(&c);
    test_errors(&c);
    test_context_parallel(&c);
    TEST_END();
}
