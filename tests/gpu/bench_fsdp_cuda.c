// The GPU FSDP engine end to end on one GPU (NCCL world 1, no MPI): a Qwen3-32B-shaped
// model cut to L decoder layers (vocab 151,936, d 5120, ffn 25600, heads 64/8,
// head_dim 128, untied), micro-batch 1 x seq 2048, full optimizer steps (gathers,
// forward, fused lm_head + loss, backward, reduce-scatters, grad norm, AdamW).
// Reference in the same run: the same work with no engine around it — on preallocated
// buffers, back to back on one stream, no collectives: the gradient zeroing the engine
// does (the step's shard memset and one gradient-slot memset per unit), embedding
// forward, the layers, final norm, fused lm_head + loss, their backward, embedding
// backward, the per-unit sums of squares and AdamW over every parameter (run unit by
// unit on buffers the size of the largest unit: the same bytes as the engine's update).
// The ratio engine / compute-only is what the engine costs on top of that work (at
// world 1 the collectives are device copies); the optimizer and embedding parts are
// also printed on their own lines.
//   bench_fsdp_cuda [--layers L] [--seq S] [--steps N] [--warmup N] [--attn gemm|tiled|cudnn] [--tiny]
// --tiny: a tiny model (vocab 96, d 48): a smoke run of the program (the CPU execution
// of the CUDA model runs it in CI), not a benchmark.
// Step times are host wall times (each step ends with the engine's host read);
// compute-only times are CUDA-event times. Medians. Exit 77 without a device.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "kernels/cuda/zt_cuda_check.h"
#include "kernels/cuda/zt_cudnn_attention.h"
#include "model/qwen3_cuda_layer.h"
#include "engine/comm_nccl.h"
#include "base/common.h"
#include "engine/fsdp.h"
#include "model/qwen3.h"
#include "engine/fsdp_internal.h"  // the engine's struct: pools, event log, test knobs
#include "engine/device_peak.h"     // the peak a run's MFU is measured against
#include "model/flops.h"            // the trainer's FLOP count (train/run_log.c)
#include "tests/gpu/gpu_test_util.h"

int main(int argc, char **argv) {
    int L = 2, steps = 6, warmup = 2, attn = ZT_ATTN_GEMM, tiny = 0;  // GEMM: as the earlier GPU runs
    int64_t S = 2048;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--layers") && v) L = atoi(argv[++i]);
        else if (!strcmp(a, "--seq") && v) S = atoll(argv[++i]);
        else if (!strcmp(a, "--steps") && v) steps = atoi(argv[++i]);
        else if (!strcmp(a, "--warmup") && v) warmup = atoi(argv[++i]);
        else if (!strcmp(a, "--attn") && v) {
            const char *k = argv[++i];
            attn = !strcmp(k, "cudnn") ? ZT_ATTN_CUDNN : !strcmp(k, "tiled") ? ZT_ATTN_TILED : ZT_ATTN_GEMM;
        }
        else if (!strcmp(a, "--tiny")) tiny = 1;
        else zt_fatal("bench_fsdp_cuda: unknown argument '%s' (see the top of tests/gpu/bench_fsdp_cuda.c)", a);
    }
    if (L < 1 || steps < 1 || warmup < 0 || S < 2) zt_fatal("bench_fsdp_cuda: bad arguments");
    zt_skip_without_device();
    zt_model_config cfg = {.family = &zt_qwen3_family, .vocab_size = 151936, .hidden_size = 5120, .intermediate_size = 25600, .num_layers = L,
                           .num_heads = 64, .num_kv_heads = 8, .head_dim = 128, .rms_norm_eps = 1e-6,
                           .rope_theta = 1e6, .tie_word_embeddings = 0, .initializer_range = 0.02,
                           .max_position_embeddings = 40960, .bos_token_id = 151643, .eos_token_id = 151645};
    if (tiny) {
        cfg = (zt_model_config){.family = &zt_qwen3_family, .vocab_size = 96, .hidden_size = 48, .intermediate_size = 80, .num_layers = L,
                                .num_heads = 4, .num_kv_heads = 2, .head_dim = 16, .rms_norm_eps = 1e-6,
                                .rope_theta = 1e4, .tie_word_embeddings = 0, .initializer_range = 0.02,
                                .max_position_embeddings = 64, .bos_token_id = 1, .eos_token_id = 2};
        if (S > 64) S = 32;
    }
    zt_hparams hp = {.lr = 1e-5, .min_lr_ratio = 0.1, .warmup = 0, .total_steps = steps + warmup,
                     .schedule = ZT_SCHED_CONSTANT, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1,
                     .clip = 1.0};
    zt_comm_opts o = zt_comm_opts_default();
    zt_comm *dc = NULL;
    if (zt_comm_init_nccl_single(&dc, 0, &o) != 0) zt_die_on_err();
    char dev[128];
    zt_cuda_device_describe(dev, sizeof dev);
    printf("bench_fsdp_cuda: %s; %s shapes with %d layers, micro-batch 1 x seq %lld, %s attention\n", dev,
           tiny ? "tiny (smoke run, not a benchmark)" : "Qwen3-32B", L, (long long)S,
           attn == ZT_ATTN_CUDNN ? "cuDNN" : attn == ZT_ATTN_TILED ? "tiled" : "GEMM");
    double t0 = zt_now();
    zt_fsdp f;
    const zt_fsdp_opts eo = {.attention = attn, .bench_uniform = 0.02f};  // device-drawn parameters
    if (zt_fsdp_init_cuda(&f, dc, dc, &cfg, 1, 1, S, &hp, 7, &eo) != 0) zt_die_on_err();
    zt_fsdp_memory mem;
    zt_fsdp_memory_usage(&f, &mem);
    size_t freeb = 0, total = 0;
    cudaMemGetInfo(&freeb, &total);
    printf("engine built in %.1f s: params %.2f GB, grads %.2f GB, optimizer %.2f GB, buffers %.2f GB, "
           "activations %.2f GB; device %.1f of %.1f GB in use\n",
           zt_now() - t0, mem.params / 1e9, mem.grads / 1e9, mem.optimizer / 1e9, mem.buffers / 1e9,
           mem.activations / 1e9, (double)(total - freeb) / 1e9, (double)total / 1e9);

    uint32_t *tok = zt_xmalloc((size_t)S * 4);
    zt_rng r;
    zt_rng_seed(&r, 5);
    for (int64_t i = 0; i < S; i++) tok[i] = (uint32_t)zt_rng_below(&r, (uint64_t)cfg.vocab_size);
    const uint32_t *blocks[1] = {tok};
    double *st = zt_xmalloc((size_t)steps * sizeof(double));
    zt_fsdp_stats s;
    for (int i = 0; i < warmup + steps; i++) {
        double a = zt_now();
        if (zt_fsdp_step(&f, blocks, 0, &s) != 0) zt_die_on_err();
        double b = zt_now();
        if (i >= warmup) st[i - warmup] = b - a;
        printf("step %d: %.1f ms, loss %.4f, grad norm %.4f\n", i + 1, (b - a) * 1e3, s.loss, s.grad_norm);
        if (!isfinite(s.loss)) zt_fatal("non-finite loss");
    }
    const double t_engine = zt_median(st, steps);

    // compute only: the same ops on their own buffers (one set of layer parameters reused), with the
    // engine's attention (the layer's default is tiled: an H200 run compared a GEMM engine with tiled
    // compute and printed an overhead of x0.75)
    zt_qwen3_cuda_dims dm = {.B = 1, .S = S, .N = S, .d = cfg.hidden_size, .F = cfg.intermediate_size, .H = cfg.num_heads,
                         .Hkv = cfg.num_kv_heads, .D = cfg.head_dim, .eps = (float)cfg.rms_norm_eps,
                         .attention = (zt_attn_kind)attn};
    int64_t off[ZT_L_NTENSORS + 1];
    zt_qwen3_cuda_layer_offsets(&dm, off);
    const int64_t N = S, d = dm.d, V = cfg.vocab_size, P = off[ZT_L_NTENSORS];
    // the engine's units: embedding, L layers, final norm + lm_head; the largest sizes the optimizer buffers
    const int U = f.nunits;
    int64_t umax = 0, shard_total = 0;
    for (int u = 0; u < U; u++) {
        if (f.units[u].padded > umax) umax = f.units[u].padded;
        shard_total += f.units[u].shard;
    }
    cudaStream_t cs;
    ZT_CUDA_CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    zt_cuda_ctx *c = zt_cuda_ctx_create();
    zt_bf16 *p = zt_cuda_malloc((size_t)P * 2), *lm = zt_cuda_malloc((size_t)(V * d) * 2);
    zt_bf16 *emb = zt_cuda_malloc((size_t)(V * d) * 2), *nw = zt_cuda_malloc((size_t)d * 2);
    float *dp = zt_cuda_malloc((size_t)P * 4), *dlm = zt_cuda_malloc((size_t)(V * d) * 4);
    float *demb = zt_cuda_malloc((size_t)(V * d) * 4), *dnw = zt_cuda_malloc((size_t)d * 4);
    // One block holds the optimizer's master/grad/m/v (the largest unit's size each) and
    // doubles as the step's gradient shards that the engine zeroes every step (values do
    // not matter for timing; this keeps the reference within the device's memory at 32B).
    const int64_t oblk = 4 * umax > shard_total ? 4 * umax : shard_total;
    float *obuf = zt_cuda_malloc((size_t)oblk * 4);
    float *om = obuf, *og = obuf + umax, *omm = obuf + 2 * umax, *ov = obuf + 3 * umax, *gshard = obuf;
    zt_bf16 *ob = zt_cuda_malloc((size_t)umax * 2);
    zt_cuda_fill(obuf, 0.0f, oblk, NULL);  // the memsets below cover only shard_total of it
    double *sq = zt_cuda_malloc((size_t)U * sizeof(double));
    zt_cuda_fill_uniform(p, ZT_BF16, P, -0.02f, 0.02f, 1, cs);
    zt_cuda_fill_uniform(lm, ZT_BF16, V * d, -0.02f, 0.02f, 2, cs);
    zt_cuda_fill_uniform(emb, ZT_BF16, V * d, -0.02f, 0.02f, 4, cs);
    zt_cuda_fill_uniform(nw, ZT_BF16, d, 0.9f, 1.1f, 5, cs);
    zt_cuda_fill(dp, 0.0f, P, cs);
    zt_cuda_fill(dlm, 0.0f, V * d, cs);
    zt_bf16 **X = zt_xcalloc((size_t)L + 1, sizeof *X);
    for (int l = 0; l <= L; l++) X[l] = zt_cuda_malloc((size_t)(N * d) * 2);
    zt_bf16 *xf = zt_cuda_malloc((size_t)(N * d) * 2), *dln = zt_cuda_malloc((size_t)(N * d) * 2);
    float *hrstd = zt_cuda_malloc((size_t)N * 4);
    zt_qwen3_cuda_acts *acts = zt_xcalloc((size_t)L, sizeof *acts);
    for (int l = 0; l < L; l++) zt_qwen3_cuda_acts_alloc(&acts[l], &dm);
    zt_qwen3_cuda_work w;
    zt_qwen3_cuda_work_alloc(&w, &dm);
    zt_bf16 *dx = zt_cuda_malloc((size_t)(N * d) * 2);
    float *rc = zt_cuda_malloc((size_t)(S * dm.D / 2) * 4), *rs = zt_cuda_malloc((size_t)(S * dm.D / 2) * 4);
    zt_cuda_rope_table(cs, rc, rs, S, dm.D, cfg.rope_theta);
    int32_t *tg = zt_cuda_malloc((size_t)N * 4);
    uint32_t *tokd = zt_cuda_malloc((size_t)N * 4);
    int32_t *tgh = zt_xmalloc((size_t)N * 4);
    zt_qwen3_targets(tok, 1, S, tgh);
    ZT_CUDA_CHECK(cudaMemcpy(tg, tgh, (size_t)N * 4, cudaMemcpyHostToDevice));
    ZT_CUDA_CHECK(cudaMemcpy(tokd, tok, (size_t)N * 4, cudaMemcpyHostToDevice));
    ZT_CUDA_CHECK(cudaDeviceSynchronize());  // pageable copies on the legacy stream, cs is non-blocking
    double *loss = zt_cuda_malloc(sizeof(double));
    cudaEvent_t e0, e1, e2, e3, e4;
    ZT_CUDA_CHECK(cudaEventCreate(&e0));
    ZT_CUDA_CHECK(cudaEventCreate(&e1));
    ZT_CUDA_CHECK(cudaEventCreate(&e2));
    ZT_CUDA_CHECK(cudaEventCreate(&e3));
    ZT_CUDA_CHECK(cudaEventCreate(&e4));
    double *ct = zt_xmalloc((size_t)steps * sizeof(double)), *ot = zt_xmalloc((size_t)steps * sizeof(double));
    double *et = zt_xmalloc((size_t)steps * sizeof(double));
    for (int i = 0; i < warmup + steps; i++) {
        ZT_CUDA_CHECK(cudaEventRecord(e0, cs));
        ZT_CUDA_CHECK(cudaMemsetAsync(gshard, 0, (size_t)shard_total * 4, cs));
        zt_cuda_embedding_fwd(cs, X[0], emb, tokd, N, d, V);
        ZT_CUDA_CHECK(cudaEventRecord(e1, cs));
        for (int l = 0; l < L; l++) zt_qwen3_cuda_layer_fwd(c, cs, &dm, p, rc, rs, NULL, X[l], X[l + 1], &acts[l], NULL);
        ZT_CUDA_CHECK(cudaMemsetAsync(dlm, 0, (size_t)(V * d) * 4, cs));  // the head unit's gradient slot
        ZT_CUDA_CHECK(cudaMemsetAsync(dnw, 0, (size_t)d * 4, cs));
        zt_cuda_rmsnorm_fwd(cs, xf, hrstd, X[L], nw, N, d, (float)cfg.rms_norm_eps);
        zt_cuda_lmhead_xent(c, cs, loss, dln, dlm, ZT_F32, xf, lm, tg, N, d, V, 1.0f / (float)(S - 1));
        zt_cuda_rmsnorm_bwd(c, cs, dx, dnw, dln, X[L], nw, hrstd, N, d);
        for (int l = L - 1; l >= 0; l--) {
            ZT_CUDA_CHECK(cudaMemsetAsync(dp, 0, (size_t)P * 4, cs));  // the layer's gradient slot
            zt_qwen3_cuda_layer_bwd(c, cs, &dm, p, dp, rc, rs, NULL, X[l], &acts[l], &w, dx, NULL);
        }
        ZT_CUDA_CHECK(cudaEventRecord(e2, cs));
        ZT_CUDA_CHECK(cudaMemsetAsync(demb, 0, (size_t)(V * d) * 4, cs));
        zt_cuda_embedding_bwd(cs, demb, dx, tokd, N, d, V);
        ZT_CUDA_CHECK(cudaEventRecord(e3, cs));
        for (int u = 0; u < U; u++) zt_cuda_sumsq(c, cs, sq + u, og, f.units[u].valid);
        for (int u = 0; u < U; u++)
            zt_cuda_adamw(cs, om, ob, og, omm, ov, f.units[u].valid, 1e-5f, 0.9f, 0.95f, 1e-8f, 0.1f, i + 1);
        ZT_CUDA_CHECK(cudaEventRecord(e4, cs));
        ZT_CUDA_CHECK(cudaEventSynchronize(e4));
        float ms, ms_e1, ms_e2, ms_o;
        ZT_CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e4));
        ZT_CUDA_CHECK(cudaEventElapsedTime(&ms_e1, e0, e1));
        ZT_CUDA_CHECK(cudaEventElapsedTime(&ms_e2, e2, e3));
        ZT_CUDA_CHECK(cudaEventElapsedTime(&ms_o, e3, e4));
        if (i >= warmup) {
            ct[i - warmup] = ms * 1e-3;
            ot[i - warmup] = ms_o * 1e-3;
            et[i - warmup] = (ms_e1 + ms_e2) * 1e-3;
        }
    }
    const double t_compute = zt_median(ct, steps);
    const double flops = L * zt_qwen3_cuda_layer_flops(&dm) + 6.0 * (double)N * (double)d * (double)V;
    printf("engine step  %.2f ms  (%.1f TFLOP/s model FLOPs, %.0f tok/s)\n", t_engine * 1e3, flops / t_engine / 1e12,
           (double)S / t_engine);
    printf("compute only %.2f ms  (%.1f TFLOP/s)\n", t_compute * 1e3, flops / t_compute / 1e12);
    const double t_opt = zt_median(ot, steps), t_emb = zt_median(et, steps);
    printf("  of which: sums of squares + AdamW over %.3g params %.2f ms; embedding fwd + gradient zeroing + bwd "
           "%.2f ms\n",
           (double)(L * P + 2 * V * d + d), t_opt * 1e3, t_emb * 1e3);
    printf("RESULT fsdp_optimizer_ms=%.3f\n", t_opt * 1e3);
    printf("RESULT fsdp_embedding_ms=%.3f\n", t_emb * 1e3);
    printf("RESULT fsdp_step_ms=%.3f\n", t_engine * 1e3);
    printf("RESULT fsdp_compute_ms=%.3f\n", t_compute * 1e3);
    printf("RESULT fsdp_tflops=%.2f\n", flops / t_engine / 1e12);
    printf("RESULT fsdp_overhead=%.3f (engine step / compute only)\n", t_engine / t_compute);
    printf("RESULT fsdp_layers=%d\n", L);
    // MFU as `zerotrain train` reports it (train/run_log.c, train/device_info.c): the
    // model's training FLOPs of one block of S tokens (one document) over the step time,
    // against the dense bf16 peak of the preset the device name matches.
    const double tflop_trainer = zt_model_train_flops(&cfg, (double)S, (double)S * (double)S);
    const char *preset = NULL;
    double peak = 0;
    printf("RESULT fsdp_train_flops=%.6g (the trainer's count; this program's own %.6g)\n", tflop_trainer, flops);
    if (zt_device_peak(dev, &preset, &peak)) {
        printf("mfu (the trainer's formula): %.1f%% of the %s preset's %.0f TFLOP/s\n",
               100.0 * tflop_trainer / t_engine / peak, preset, peak / 1e12);
        printf("RESULT fsdp_mfu=%.4f (%s preset, %.0f TFLOP/s)\n", tflop_trainer / t_engine / peak, preset, peak / 1e12);
    } else {
        printf("RESULT fsdp_mfu=unknown (the device name '%s' matches no preset)\n", dev);
    }
    zt_fsdp_free(&f);
    zt_comm_finalize(dc);
    return 0;
}
