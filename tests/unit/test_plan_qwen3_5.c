// `zerotrain plan` and the memory formula on Qwen3.5 (docs/plan.md "Qwen3.5"): each layer kind's
// saved activations against what the CPU model allocates (its act_bytes counts every buffer), the
// 27B's terms against a hand count, its parameters and FLOPs against the family's, the compute split
// and the refusals; and the layer kinds' FLOPs summing to the family's count for Qwen3 too.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/common.h"
#include "engine/rank_memory.h"
#include "kernels/ops.h"
#include "model/family.h"
#include "model/flops.h"
#include "model/hf_config.h"
#include "ops/plan.h"
#include "model/qwen3_5.h"
#include "tests/support/test_util.h"

static int close_rel(double a, double b, double tol) { return fabs(a - b) <= tol * fmax(fabs(a), fabs(b)); }

// Bytes the CPU model allocates for B rows of S tokens (act_bytes: activations and workspaces).
static double cpu_bytes(const zt_model_config *c, int64_t B, int64_t S) {
    void *m = c->family->cpu->create(c, &zt_cpu_ops, B, S, NULL);
    CHECK(m != NULL, "create: %s", zt_errmsg());
    if (!m) return 0;
    const double n = (double)c->family->cpu->act_bytes(m);
    c->family->cpu->destroy(m);
    return n;
}

// The formula's counts of one layer of `kind` in fp32 (the CPU engine's dtype for values and statistics
// alike), + what the CPU keeps beyond them: its softmax keeps two floats per head and token (max and
// 1/sum) where the plan counts a flash kernel's log-sum-exp (one).
static double cpu_layer(const zt_model_config *c, int kind, int64_t B, int64_t S) {
    zt_layer_plan p;
    zt_model_layer_plan(c, kind, S, &p);
    const double N = (double)B * S;
    return 4.0 * (N * (p.values + p.stats) + B * p.row_stats) + (p.attention ? 4.0 * N * c->num_heads : 0.0);
}

static zt_model_config with_layers(const zt_model_config *c, int L, int linear_mask) {
    zt_model_config x = *c;
    x.num_layers = L;
    for (int l = 0; l < L; l++) zt_q35_set(&x)->layer_linear[l] = (unsigned char)((linear_mask >> l) & 1);
    return x;
}

// (a) The tiny mixed model (tests/golden/q35_mix: 3 linear + 1 full layer) on the CPU.
static void test_cpu_counts(void) {
    zt_model_config c;
    CHECK(zt_model_config_load(&c, ZT_SOURCE_DIR "/tests/golden/q35_mix/config.json") == 0, "%s", zt_errmsg());
    const int64_t B = 2, S = 70;  // 2 delta-rule chunks per row (64 + 6)
    const double N = (double)B * S, d = (double)c.hidden_size, F = (double)c.intermediate_size;
    const int kl = c.family->layer_kind(&c, 0), kf = c.family->layer_kind(&c, 2);
    CHECK(zt_q35(&c)->layer_linear[0] && !zt_q35(&c)->layer_linear[2] && kl != kf, "q35_mix: layers 0 linear, 2 full (kinds %d, %d)", kl,
          kf);
    int n[ZT_LAYER_KINDS];
    CHECK(zt_model_layer_kinds(&c, n) == 2 && n[kl] == 3 && n[kf] == 1, "kinds: %d linear, %d full", n[kl], n[kf]);

    // One more layer of each kind adds exactly that kind's bytes (both kinds present: the workspaces stay).
    const double base = cpu_bytes(&c, B, S);
    for (int lin = 0; lin <= 1; lin++) {
        zt_model_config x = c;
        x.num_layers = c.num_layers + 1;
        zt_q35_set(&x)->layer_linear[c.num_layers] = (unsigned char)lin;
        const int k = lin ? kl : kf;
        const double got = cpu_bytes(&x, B, S) - base, want = cpu_layer(&c, k, B, S);
        CHECK(got == want, "one more %s layer: the CPU model allocates %.0f bytes, the formula counts %.0f",
              lin ? "linear" : "full", got, want);
    }

    // The whole model: the layers, the last residual buffer x[L], the head's norm output and rstd, the
    // RoPE table (S rd), the (1 + w) buffer max(d, D), and the backward workspace: one kind's alone, or
    // with both kinds both kinds' own sharing the MLP's (3 F + 3 d).
    zt_layer_plan pl, pf;
    zt_model_layer_plan(&c, kl, S, &pl);
    zt_model_layer_plan(&c, kf, S, &pf);
    const double fixed = 4.0 * (N * d + N * d + N + (double)S * c.rotary_dim + fmax(d, (double)c.head_dim));
    const struct { const char *what; int mask; double work; } cases[] = {
        {"3 linear + 1 full (q35_mix)", 0xb, pl.work + pf.work - (3 * F + 3 * d)},
        {"4 linear", 0xf, pl.work},
        {"4 full", 0x0, pf.work},
    };
    for (int i = 0; i < 3; i++) {
        const zt_model_config x = with_layers(&c, 4, cases[i].mask);
        double want = fixed + 4.0 * N * cases[i].work;
        for (int l = 0; l < 4; l++) want += cpu_layer(&x, zt_q35(&x)->layer_linear[l] ? kl : kf, B, S);
        const double got = cpu_bytes(&x, B, S);
        CHECK(got == want, "%s: the CPU model allocates %.0f bytes, the formula's fp32 count %.0f", cases[i].what,
              got, want);
    }

    // The delta rule's saved states: ceil(S / 64) chunk starts of Hv Dk Dv floats per row.
    CHECK(pl.row_stats == 2.0 * zt_q35(&c)->lin_value_heads * zt_q35(&c)->lin_key_dim * zt_q35(&c)->lin_value_dim, "row states %.0f",
          pl.row_stats);
    CHECK(!pl.attention && pf.attention && pf.row_stats == 0, "attention flags");

    // The GPU plan over the same shapes: bf16 values, fp32 statistics and states.
    const zt_rank_memory_job j = {.shard_group = 1, .micro_batch = (int)B, .seq_len = S, .reduce_bytes = 4};
    zt_rank_memory m;
    CHECK(zt_rank_memory_predict(&c, &j, &m) == 0, "%s", zt_errmsg());
    const double lin = N * (2 * pl.values + 4 * pl.stats) + 4.0 * B * pl.row_stats;
    const double full = N * (2 * pf.values + 4 * pf.stats);
    const double head = N * (2 * d + 4.0 * c.vocab_size), work = 2 * N * fmax(pl.work, pf.work);
    CHECK(close_rel(m.act_no_recompute, 3 * lin + full + head + work, 1e-15), "q35_mix activations %.0f",
          m.act_no_recompute);
    CHECK(close_rel(m.act_recompute, 4 * N * d * 2 + fmax(lin, full) + head + work, 1e-15),
          "q35_mix recompute %.0f", m.act_recompute);
}

// (b) The 27B (examples/qwen3.5-27b): its counts by hand, the plan's parameters and FLOPs = the family's.
static void test_27b(void) {
    zt_model_config c;
    CHECK(zt_model_config_load(&c, ZT_SOURCE_DIR "/examples/qwen3.5-27b/config.json") == 0, "%s", zt_errmsg());
    CHECK(zt_model_param_count(&c) == 26895998464LL, "27B parameters %lld", (long long)zt_model_param_count(&c));
    const int kl = c.family->layer_kind(&c, 0), kf = c.family->layer_kind(&c, 3);
    int n[ZT_LAYER_KINDS];
    zt_model_layer_kinds(&c, n);
    CHECK(n[kl] == 48 && n[kf] == 16, "27B: %d linear, %d full layers", n[kl], n[kf]);
    CHECK(zt_plan_attention_layers(&c) == 16, "attention layers %d", zt_plan_attention_layers(&c));

    // Per token, d 5120, F 17408, C = 2 x 16 x 128 + 48 x 128 = 10240, Kd 2048, Vd 6144, Hv 48, Hk 16:
    // linear values 4d + 3F + 3C + 4Kd + 4Vd + 2Hv = 20480 + 52224 + 30720 + 8192 + 24576 + 96 = 136288,
    // fp32 2 + 2Hk + 3Hv = 178; per row at S = 8192: 128 chunk states of 48 x 128 x 128 = 100,663,296;
    // workspace 3F + 3d + 4Vd + 4Kd + 4Hv + 2C = 121024. Full (H 24, Hkv 4, D 256, rd 64): values
    // 4d + 3F + 7HD + 3HkvD = 118784, fp32 2 + 2H + Hkv = 54, workspace 3F + 3d + 7HD + 3HkvD + H rd = 115200.
    const int64_t S = 8192;
    zt_layer_plan pl, pf;
    zt_model_layer_plan(&c, kl, S, &pl);
    zt_model_layer_plan(&c, kf, S, &pf);
    CHECK(pl.values == 136288 && pl.stats == 178 && pl.row_stats == 100663296.0 && pl.work == 121024,
          "linear: %.0f %.0f %.0f %.0f", pl.values, pl.stats, pl.row_stats, pl.work);
    CHECK(pf.values == 118784 && pf.stats == 54 && pf.row_stats == 0 && pf.work == 115200,
          "full: %.0f %.0f %.0f %.0f", pf.values, pf.stats, pf.row_stats, pf.work);

    // The layers' FLOPs + the lm_head's 6 V d per token = the family's count (what a run's MFU uses).
    const double tr = zt_model_train_flops(&c, (double)S, (double)S * S);
    const double sum = 48 * pl.flops + 16 * pf.flops + 6.0 * c.vocab_size * c.hidden_size * S;
    CHECK(close_rel(sum, tr, 1e-12), "layer kinds' FLOPs %.6g, the family's %.6g", sum, tr);
    CHECK(zt_plan_flops_per_token_exact(&c, S) == tr / S, "plan's executed FLOPs are the family's");
    const double field = 6.0 * 26895998464.0 + 12.0 * 16 * S * 5120;  // L_attn = 16
    CHECK(zt_plan_flops_per_token(&c, S) == field, "field convention %.0f, want %.0f", zt_plan_flops_per_token(&c, S),
          field);

    // Memory on 16 GPUs, micro-batch 1, S 8192: by hand from the counts above.
    const double T = 8192, d = 5120, V = 248320;
    const double lin = T * (2 * 136288.0 + 4 * 178.0) + 4 * 100663296.0, full = T * (2 * 118784.0 + 4 * 54.0);
    const double head = T * (2 * d + 4 * V), work = T * 2 * 121024.0;
    zt_rank_memory_job j = {.shard_group = 16, .micro_batch = 1, .seq_len = S, .reduce_bytes = 4, .recompute = 1};
    zt_rank_memory m;
    CHECK(zt_rank_memory_predict(&c, &j, &m) == 0, "%s", zt_errmsg());
    CHECK(m.act_no_recompute == 48 * lin + 16 * full + head + work, "activations %.0f", m.act_no_recompute);
    CHECK(m.act_recompute == 64 * T * d * 2 + lin + head + work, "recompute %.0f", m.act_recompute);
    // the largest unit: the head (lm_head + final norm, 1,271,403,520 elements, a multiple of 16 x 16):
    // 3 bf16 parameter buffers + 4 fp32 gradient buffers
    const double U = 248320.0 * 5120 + 5120;
    CHECK(m.buffers == 3 * 2 * U + 4 * 4 * U, "buffers %.0f, want %.0f", m.buffers, 22 * U);
    CHECK(m.attention == 0 && m.attn_gemm == 0, "no scratch without --context-parallel");
    // --context-parallel 1: one full-attention layer's scratch (g = 24 / 4 = 6, D 256); a linear layer has none
    j.context_parallel = 1;
    j.attention = ZT_ATTN_SCRATCH_GEMM;
    CHECK(zt_rank_memory_predict(&c, &j, &m) == 0, "%s", zt_errmsg());
    CHECK(m.attn_gemm == 12.0 * 6 * T * T + 8.0 * 6 * T * 256 + 4.0 * 6 * T &&
              m.attn_tiled == 6 * T * (6.0 * 256 + 8) + 8.0 * T * 256 && m.attention == m.attn_gemm && m.cp_kv == 0,
          "scratch gemm %.0f tiled %.0f", m.attn_gemm, m.attn_tiled);
    printf("27B, 16 GPUs, S 8192, mb 1, recompute: params %.2f grads %.2f optimizer %.2f buffers %.2f activations "
           "%.2f (without recompute %.2f) GB\n", m.params / 1e9, m.grads / 1e9, m.optimizer / 1e9, m.buffers / 1e9,
           m.act_recompute / 1e9, m.act_no_recompute / 1e9);

    // The step's compute: the field convention's FLOPs at MFU x peak (+ the embedding's memory-bound row
    // gather and scatter); --recompute adds a third of the layers' share, which the family's count sets.
    zt_gpu_spec g;
    zt_gpu_preset("B300", &g);
    zt_plan_assumptions a;
    zt_plan_assumptions_default(&a);
    for (int rc = 0; rc <= 1; rc++) {
        zt_plan_result r;
        const zt_plan_job pj = {.world = 16, .micro_batch = 1, .grad_accum = 8, .seq_len = S,
                                .choice = ZT_SHARD_FULL, .reduce_bytes = 4, .recompute = rc};
        CHECK(zt_plan_predict(&c, &g, &a, &pj, &r) == 0, "%s", zt_errmsg());
        const double t_micro = T * field / (g.peak_flops * a.mfu), emb = T * d * 6.0 / (g.hbm_bw * a.hbm_eff);
        const double layers = (tr / S - 6.0 * V * d) / (tr / S);
        const double want = 8 * (t_micro + 2 * emb + (rc ? t_micro * layers / 3 : 0));
        CHECK(close_rel(r.t_compute, want, 1e-12), "compute%s %.6f s, want %.6f", rc ? " (recompute)" : "",
              r.t_compute, want);
        CHECK(r.flops_per_token == field, "plan's FLOPs per token");
        if (rc)
            printf("27B full shard: compute %.3f s, exposed comm %.3f s, step %.3f s, %.0f tok/s per GPU, memory "
                   "%.1f GB\n", r.t_compute, r.t_exposed_comm, r.t_step, r.tok_per_s_per_gpu, r.mem.total / 1e9);
    }

    // Context parallelism (the GPU passes' head sharding, model/qwen3_5_cuda_context.c): C = 2 planned, its
    // linear layers' split buffers and collectives counted; C = 3 refused by the GPU rule (C divides the 16
    // key heads); 1 is not a split.
    zt_plan_result r;
    zt_plan_job pj = {.world = 16, .micro_batch = 1, .grad_accum = 8, .seq_len = S, .choice = ZT_SHARD_FULL,
                      .reduce_bytes = 4, .context_parallel = 2};
    CHECK(zt_plan_predict(&c, &g, &a, &pj, &r) == 0 && r.cp_heads_layers == 48 && r.mem.cp_heads > 0 &&
              r.coll[ZT_COLL_CP_HEADS_AG].count > 0 && r.coll[ZT_COLL_CP_HEADS_RS].count > 0,
          "context parallel 2 planned with 48 head-sharded layers: %s", zt_errmsg());
    zt_err_clear();
    pj.world = 24, pj.context_parallel = 3;
    CHECK(zt_plan_predict(&c, &g, &a, &pj, &r) != 0 && strstr(zt_errmsg(), "so C must divide 16"),
          "context parallel 3 must be refused on the GPU: %s", zt_errmsg());
    zt_err_clear();
    pj.world = 16, pj.context_parallel = 1;
    CHECK(zt_plan_predict(&c, &g, &a, &pj, &r) == 0, "%s", zt_errmsg());

    // The keep-gathered gate's estimate (train/preflight.c: the same formula, the GPU's bf16 gathers):
    // every one of the 66 units kept, sized for the largest.
    const zt_rank_memory_job kg = {.shard_group = 16, .micro_batch = 1, .seq_len = S, .reduce_bytes = 4,
                                   .param_bytes = 2, .keep_gathered = 1};
    CHECK(zt_rank_memory_predict(&c, &kg, &m) == 0 && m.buffers == 66 * 2 * U + 4 * 4 * U, "keep-gathered buffers %.0f",
          m.buffers);
}

// A model of linear layers only has no softmax attention: no attention term in the field convention and
// no scratch.
static void test_linear_only(void) {
    zt_model_config c;
    CHECK(zt_model_config_load(&c, ZT_SOURCE_DIR "/tests/golden/q35_mix/config.json") == 0, "%s", zt_errmsg());
    const zt_model_config x = with_layers(&c, 4, 0xf);
    CHECK(zt_plan_attention_layers(&x) == 0, "attention layers %d", zt_plan_attention_layers(&x));
    CHECK(zt_plan_flops_per_token(&x, 64) == 6.0 * zt_model_param_count(&x), "field convention");
    const zt_rank_memory_job j = {.shard_group = 2, .micro_batch = 1, .seq_len = 64, .reduce_bytes = 4,
                                  .context_parallel = 1, .attention = ZT_ATTN_SCRATCH_GEMM};
    zt_rank_memory m;
    CHECK(zt_rank_memory_predict(&x, &j, &m) == 0 && m.attention == 0 && m.attn_gemm == 0 && m.attn_tiled == 0,
          "no attention scratch: %.0f", m.attention);
}

// Qwen3's one kind: its layers' FLOPs + the lm_head's = the family's count too.
static void test_qwen3_kinds(void) {
    zt_model_config c;
    CHECK(zt_model_config_load(&c, ZT_SOURCE_DIR "/examples/qwen3-32b/config.json") == 0, "%s", zt_errmsg());
    int n[ZT_LAYER_KINDS];
    CHECK(zt_model_layer_kinds(&c, n) == 1 && n[0] == 64, "Qwen3-32B: one kind of 64 layers");
    zt_layer_plan p;
    zt_model_layer_plan(&c, 0, 2048, &p);
    const double tr = zt_model_train_flops(&c, 2048, 2048.0 * 2048);
    CHECK(close_rel(64 * p.flops + 6.0 * c.vocab_size * c.hidden_size * 2048, tr, 1e-12), "Qwen3 layer FLOPs");
    CHECK(p.attention && p.row_stats == 0 && zt_plan_attention_layers(&c) == 64, "Qwen3: attention in every layer");
}

int main(void) {
    test_cpu_counts();
    test_27b();
    test_linear_only();
    test_qwen3_kinds();
    TEST_END();
}
