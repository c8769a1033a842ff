// MFU's FLOP count (model/flops.h) against an independent one: the reference trainer
// (tests/support/trainer.c) runs a real optimizer step through an op table that counts the
// shapes of every matmul it is asked for (2 M K N per product, forward and both backward
// products, the fused lm_head too) and the query-key pairs every attention call covers (from its
// own arguments: query i sees keys i - pos[i] .. i), on two configs: an untied GQA model on
// plain blocks (full attention) and a tied model on packed documents kept apart (isolated).
// The model's count is what the trainer logs (train/flops_acct.c: zt_batch_words, then
// zt_doc_sq_sum); its attention term is the planner's convention, n^2/2 pairs per
// document, so the executed causal pairs n(n+1)/2 exceed it by exactly the diagonal, n/2 per
// document: 6 L H D per token. Then the peak table (engine/device_peak.h) against every
// `zerotrain plan` preset, by the device names the CUDA runtime reports.
#include <stdio.h>
#include <string.h>

#include "base/common.h"
#include "data/batch.h"
#include "data/dataset.h"
#include "engine/device_peak.h"
#include "kernels/ops.h"
#include "model/config.h"
#include "model/flops.h"
#include "ops/plan.h"
#include "tests/support/test_util.h"
#include "tests/support/trainer.h"

static double g_mm, g_att;

static void c_matmul_fwd(float *y, const float *x, const float *w, int64_t M, int64_t K, int64_t N) {
    g_mm += 2.0 * M * K * N;
    zt_cpu_ops.matmul_fwd(y, x, w, M, K, N);
}
static void c_matmul_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, int64_t M, int64_t K,
                         int64_t N, int acc) {
    g_mm += (dx ? 2.0 * M * K * N : 0) + (dw ? 2.0 * M * K * N : 0);
    zt_cpu_ops.matmul_bwd(dx, dw, dy, x, w, M, K, N, acc);
}
static double c_lmhead(float *dx, float *dw, const float *x, const float *w, const int32_t *targets, int64_t N,
                       int64_t d, int64_t V, float scale) {
    g_mm += 2.0 * N * d * V * (1 + (dx != NULL) + (dw != NULL));  // logits; dx = dlogits W; dW = dlogits^T x
    return zt_cpu_ops.lmhead_xent(dx, dw, x, w, targets, N, d, V, scale);
}
// query-key pairs the call covers, by the op's own contract (kernels/ops.h)
static double pairs(const int32_t *pos, int64_t B, int64_t S) {
    double p = 0;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < S; i++) p += (pos ? pos[b * S + i] : i) + 1;
    return p;
}
static void c_att_fwd(float *o, float *stats, const float *q, const float *k, const float *v, const int32_t *pos,
                      int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    g_att += 4.0 * H * D * pairs(pos, B, S);  // q.k and p.v per pair, head and dimension
    zt_cpu_ops.attention_fwd(o, stats, q, k, v, pos, B, S, H, Hkv, D);
}
static void c_att_bwd(float *dq, float *dk, float *dv, const float *dout, const float *o, const float *stats, const float *q,
                      const float *k, const float *v, const int32_t *pos, int64_t B, int64_t S, int64_t H, int64_t Hkv,
                      int64_t D) {
    g_att += 8.0 * H * D * pairs(pos, B, S);  // dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q
    zt_cpu_ops.attention_bwd(dq, dk, dv, dout, o, stats, q, k, v, pos, B, S, H, Hkv, D);
}

// Blocks of S words; with docs, block b holds documents of the listed lengths (0 ends a list).
static void make_blocks(uint32_t *w, int nblocks, int64_t S, int64_t V, const int docs[][8]) {
    for (int b = 0; b < nblocks; b++) {
        int64_t t = 0;
        for (int k = 0; docs[b][k]; k++)
            for (int i = 0; i < docs[b][k]; i++, t++)
                w[b * S + t] = (uint32_t)((b * 31 + t * 7) % V) | (i == 0 ? ZT_TOK_DOC_START : 0);
        if (t != S) zt_fatal("block %d: documents sum to %lld, not %lld", b, (long long)t, (long long)S);
    }
}

static void count_config(const char *name, const char *model_dir, int isolated) {
    zt_model_config cfg;
    char path[512];
    snprintf(path, sizeof path, "%s/golden/%s", ZT_TEST_DIR, model_dir);
    if (zt_model_config_load(&cfg, path) != 0) zt_die_on_err();
    const int B = 2, G = 2;
    const int64_t S = 16;
    static const int docs[4][8] = {{5, 7, 4}, {16}, {1, 15}, {3, 3, 3, 3, 4}};
    const int64_t known_sq[4] = {25 + 49 + 16, 256, 1 + 225, 9 * 4 + 16};
    uint32_t words[4 * 16];
    make_blocks(words, 4, S, cfg.vocab_size, docs);
    const uint32_t *blocks[4] = {words, words + S, words + 2 * S, words + 3 * S};

    zt_ops counting = zt_cpu_ops;
    counting.matmul_fwd = c_matmul_fwd;
    counting.matmul_bwd = c_matmul_bwd;
    counting.lmhead_xent = c_lmhead;
    counting.attention_fwd = c_att_fwd;
    counting.attention_bwd = c_att_bwd;
    zt_hparams hp = {.lr = 1e-3, .min_lr_ratio = 0.1, .schedule = ZT_SCHED_CONSTANT, .beta1 = 0.9, .beta2 = 0.95,
                     .eps = 1e-8, .weight_decay = 0.1, .clip = 1.0, .total_steps = 1};
    zt_trainer t;
    if (zt_trainer_init(&t, &cfg, &counting, B, G, S, &hp, 7) != 0) zt_die_on_err();
    t.model.isolated = isolated;
    g_mm = g_att = 0;
    zt_step_stats st;
    zt_trainer_step(&t, blocks, &st);

    // the model's count, as the trainer logs it: document lengths from the decoded words
    double sq = 0;
    uint32_t ids[16];
    int32_t tg[16], pos[16];
    for (int b = 0; b < B * G; b++) {
        zt_batch_words(blocks[b], 1, S, isolated, ids, tg, pos);
        const double s = zt_doc_sq_sum(isolated ? pos : NULL, S);
        CHECK(s == (isolated ? (double)known_sq[b] : (double)(S * S)), "%s block %d: sum of squared lengths %g", name,
              b, s);
        sq += s;
    }
    const double tokens = (double)B * G * S;
    const double model = zt_model_train_flops(&cfg, tokens, sq);
    const double model_mm = zt_model_flops_matmul_per_token(&cfg) * tokens;
    const double model_att = zt_qwen3_flops_attention(&cfg, sq);
    const double diagonal = 6.0 * cfg.num_layers * cfg.num_heads * cfg.head_dim * tokens;
    CHECK(model == model_mm + model_att, "%s: total = matmul + attention", name);
    CHECK(g_mm == model_mm, "%s: matmul FLOPs counted %.0f, model %.0f", name, g_mm, model_mm);
    CHECK(g_att == model_att + diagonal, "%s: attention FLOPs counted %.0f, model %.0f + diagonal %.0f", name, g_att,
          model_att, diagonal);
    printf("%s: %.0f model FLOPs per step (matmul %.0f, attention %.0f); counted from the reference trainer's calls: "
           "matmul %.0f, attention %.0f (= model + the diagonal %.0f)\n",
           name, model, model_mm, model_att, g_mm, g_att, diagonal);
    zt_trainer_free(&t);
}

// The planner's exact FLOPs per token are the model's count of a one-document block.
static void planner_uses_the_model(void) {
    zt_model_config c;
    zt_qwen3_32b_config(&c);
    const double S = 2048;
    CHECK(zt_plan_flops_per_token_exact(&c, 2048) == zt_model_train_flops(&c, S, S * S) / S, "plan exact = model");
}

static void peak_table(void) {
    char names[128];
    zt_gpu_preset_names(names, sizeof names);
    int n = 0;
    for (char *tok = strtok(names, ", "); tok; tok = strtok(NULL, ", "), n++) {
        zt_gpu_spec g;
        CHECK(zt_gpu_preset(tok, &g) == 0, "preset %s", tok);
        const char *forms[3] = {"NVIDIA %s", "NVIDIA %s 80GB HBM3", "nvidia %s-SXM5-141GB"};
        for (int k = 0; k < 3; k++) {
            char dev[96];
            snprintf(dev, sizeof dev, forms[k], tok);
            const char *preset = NULL;
            double peak = 0;
            CHECK(zt_device_peak(dev, &preset, &peak) == 1 && preset && !strcmp(preset, tok) &&
                      peak == g.peak_flops,
                  "'%s' -> %s %g, plan's %s %g", dev, preset ? preset : "none", peak, tok, g.peak_flops);
        }
        printf("peak: %s -> %.4g TFLOP/s dense bf16, as plan's preset\n", tok, g.peak_flops / 1e12);
    }
    CHECK(n == 4, "4 presets, got %d", n);
    // other GPUs (another peak) and the emulation match nothing: MFU then needs --peak-tflops
    const char *none[] = {"NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA GH200 480GB", "NVIDIA GB200",
                          "Tesla V100-SXM2-16GB", "NVIDIA A100-SXM4-80GB", "NVIDIA H1000",
                          "cudaemu 0 (CPU execution of the CUDA model, sm_90 limits)", ""};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++)
        CHECK(zt_device_peak(none[i], NULL, NULL) == 0, "'%s' must match no preset", none[i]);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "peak")) {
        peak_table();
    } else {
        count_config("dense (untied, GQA, full attention)", "tiny_untied_gqa", 0);
        count_config("isolated (tied, packed documents)", "tiny_tied", 1);
        planner_uses_the_model();
    }
    printf("%d checks, %d failures\n", zt_test_checks, zt_test_failures);
    return zt_test_failures ? 1 : 0;
}
