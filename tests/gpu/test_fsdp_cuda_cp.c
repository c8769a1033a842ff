// Context parallelism on the GPU FSDP engine (--context-parallel C: model/qwen3_cuda_context.c,
// the exchange in engine/fsdp_cuda.c) against the single-process CPU reference trainer
// (tests/support/trainer.c, fp32) at the same global batch: W ranks under mpirun, C consecutive
// ranks sharing each block (zig-zag chunks), data parallelism over W / C groups. Cases:
//   - plain blocks of 19 tokens (chunks 4, 5, 5, 5: one rank holds a padding token), untied,
//     tiled attention: step-1 loss 1e-2, every step 3e-2, step-1 grad norm 3e-2 (the GPU engine
//     tests' tolerances), parameters 25% of their movement, the context bytes of every step exactly
//     the exchange's (bf16 gathers, fp32 reduce-scatters), recompute bit-identical, and the GEMM
//     attention under the split at the same tolerances;
//   - supervised data (version-2 words: loss-masked prompts, packed documents isolated, starting
//     anywhere, so documents cross the chunks and the ranks), evaluation before training, the same
//     tolerances and exact target counts;
//   - cuDNN attention refused under the split, naming why;
//   - the buffers the split adds at Qwen3-32B shapes and S = 32,768 (reported, linear in S);
//   - every collective handle retired (the comms finalize cleanly).
// usage: test_fsdp_cuda_cp [--context C] (under mpirun -n W; W divisible by C). Exit 77 without a device.
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "base/common.h"
#include "data/dataset.h"
#include "engine/comm_mpi.h"
#include "engine/comm_nccl.h"
#include "engine/fsdp.h"
#include "engine/fsdp_internal.h"
#include "kernels/ops.h"
#include "model/qwen3.h"
#include "model/qwen3_cuda_layer.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/engine_check.h"
#include "tests/support/attention_test.h"
#include "tests/support/trainer.h"

#define MB 2
#define GA 2
#define SEQ 19
#define STEPS 8
#define TOL_STEP1 1e-2
#define TOL_LOSS 3e-2
#define TOL_GNORM1 3e-2
#define TOL_PARAM 0.25

static int failures, g_rank, g_world = 1, g_C = 2;
static void check(int ok, const char *what) {
    if (g_rank == 0 || !ok) printf("%s%s: %s\n", g_world > 1 && !ok ? "rank " : "", ok ? "ok  " : "FAIL", what);
    if (!ok) failures++;
}
static void sum_ranks(double *x, int n) { MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); }

static zt_model_config tiny(void) {
    zt_model_config cfg = {.family = &zt_qwen3_family, .vocab_size = 96, .hidden_size = 48, .intermediate_size = 80,
                           .num_layers = 2, .num_heads = 4, .num_kv_heads = 2, .head_dim = 16, .rms_norm_eps = 1e-6,
                           .rope_theta = 10000.0, .initializer_range = 0.1, .max_position_embeddings = 64,
                           .bos_token_id = 1, .eos_token_id = 2};
    return cfg;
}

static zt_hparams hparams(void) {
    zt_hparams hp = {.lr = 5e-3, .min_lr_ratio = 0.1, .warmup = 2, .total_steps = STEPS, .schedule = ZT_SCHED_COSINE,
                     .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .clip = 1.0};
    return hp;
}


// The global batch of step s: D = W / C groups x MB x GA blocks. Plain: ids of 4 fixed batches in
// turn. sft: version-2 words, a document starting at the block's start and then with probability
// 1/4 per token (so documents cross the chunks of 4-5 tokens), its first two tokens NO_LOSS.
static void make_blocks(uint32_t *buf, const uint32_t **blocks, int n, uint64_t seed, int64_t V, int sft) {
    zt_rng r;
    zt_rng_seed(&r, seed);
    for (int b = 0; b < n; b++) {
        int since = 0;
        for (int t = 0; t < SEQ; t++) {
            uint32_t w = (sft ? 3 : 0) + (uint32_t)zt_rng_below(&r, (uint64_t)V - (sft ? 3 : 0));
            if (sft && (t == 0 || zt_rng_below(&r, 4) == 0)) w |= ZT_TOK_DOC_START, since = 0;
            if (sft && since++ < 2) w |= ZT_TOK_NO_LOSS;
            buf[b * SEQ + t] = w;
        }
        blocks[b] = buf + b * SEQ;
    }
}

// The exchange's bytes of one step on this rank: per micro-batch and layer a bf16 K|V all-gather
// in the forward and again in the backward (received), an fp32 dK|dV reduce-scatter (sent). With
// --recompute the re-run forward gathers and its backward uses those K|V in place: still two.
static int64_t expected_context_bytes(const zt_fsdp *f, const zt_model_config *cfg, int recompute) {
    (void)recompute;
    const int64_t n = (int64_t)MB * f->seq_local * cfg->num_kv_heads * cfg->head_dim * 2;  // K|V elements
    const int64_t per_layer = (int64_t)(g_C - 1) * n * (2 * 2 + 4);
    return per_layer * cfg->num_layers * GA;
}

// The reference's evaluation: summed cross-entropy over the targets of n micro-batches of MB
// blocks (words, isolated documents) from its fp32 logits, and their count.
static void ref_eval(zt_trainer *ref, const uint32_t *words, int n, double *loss, int64_t *targets) {
    const int64_t N = MB * SEQ, V = ref->model.lay.cfg.vocab_size;
    float *logits = zt_xmalloc((size_t)(N * V) * sizeof(float));
    for (int mb = 0; mb < n; mb++) {
        zt_qwen3_logits(&ref->model, ref->params, words + (size_t)mb * N, logits);
        *loss += zt_logits_loss_sum(logits, ref->model.targets, N, V);
        *targets += ref->model.ntargets;
    }
    free(logits);
}

typedef struct {
    double rel1, max_rel, gn_rel1, prel;
    double losses[STEPS];
    int targets_ok, bytes_ok;
} run_result;

// STEPS steps of the engine against the reference; nsteps < STEPS: only the losses (determinism).
static void run(zt_comm *hc, zt_comm *dc, const zt_mesh *mesh, int sft, int attention, int recompute, int nsteps,
                run_result *res) {
    const zt_model_config cfg = tiny();
    const zt_hparams hp = hparams();
    const uint64_t seed = sft ? 777 : 4242;
    const int D = g_world / g_C, drank = g_rank / g_C;
    memset(res, 0, sizeof *res);
    res->targets_ok = res->bytes_ok = 1;
    zt_trainer ref;
    if (zt_trainer_init(&ref, &cfg, &zt_cpu_ops, MB, GA * D, SEQ, &hp, seed) != 0) zt_die_on_err();
    ref.model.isolated = sft;
    const zt_fsdp_opts o = {.mesh = mesh, .context = g_C, .attention = attention, .recompute = recompute};
    zt_fsdp f;
    if (zt_fsdp_init_cuda(&f, hc, dc, &cfg, MB, GA, SEQ, &hp, seed, &o) != 0) zt_die_on_err();
    if (sft && zt_fsdp_set_data(&f, 1, 1) != 0) zt_die_on_err();
    const int U = f.nunits;
    float **init = zt_xcalloc((size_t)U, sizeof(float *));
    for (int u = 0; u < U; u++) {
        init[u] = zt_xmalloc((size_t)f.units[u].numel * 4);
        memcpy(init[u], ref.params[u], (size_t)f.units[u].numel * 4);
    }
    const int nb = D * MB * GA;
    uint32_t *buf = zt_xmalloc((size_t)nb * SEQ * sizeof(uint32_t));
    const uint32_t **blocks = zt_xcalloc((size_t)nb, sizeof *blocks);
    const uint32_t *const *mine = blocks + (size_t)drank * MB * GA;  // every rank of a group: the same blocks
    char what[200];
    if (sft && nsteps == STEPS) {  // evaluation before training: 2 micro-batches per group vs the reference's forward
        const int ne = D * 2 * MB;
        uint32_t *ebuf = zt_xmalloc((size_t)ne * SEQ * sizeof(uint32_t));
        const uint32_t **eblk = zt_xcalloc((size_t)ne, sizeof *eblk);
        make_blocks(ebuf, eblk, ne, 3000, cfg.vocab_size, 1);
        double rl = 0, gl = 0;
        int64_t rt = 0, gt = 0;
        ref_eval(&ref, ebuf, D * 2, &rl, &rt);
        if (zt_fsdp_eval(&f, eblk + (size_t)drank * 2 * MB, 2, &gl, &gt) != 0) zt_die_on_err();
        const double rel = fabs(gl - rl) / fabs(rl);
        snprintf(what, sizeof what, "eval before training: loss sum %.6f vs reference %.6f (rel %.2e <= %.0e), targets "
                 "%lld == %lld", gl, rl, rel, TOL_STEP1, (long long)gt, (long long)rt);
        check(rel <= TOL_STEP1 && gt == rt, what);
        if (g_rank == 0) printf("RESULT fsdp_cuda_cp_eval_rel=%.3e\n", rel);
        free(ebuf);
        free(eblk);
    }
    if (g_rank == 0 && nsteps == STEPS)
        printf("%4s %8s %12s %12s %10s %12s %12s %12s\n", "step", "targets", "loss cpu", "loss gpu", "rel", "gnorm cpu",
               "gnorm gpu", "context B");
    for (int s = 0; s < nsteps; s++) {
        make_blocks(buf, blocks, nb, (sft ? 2000 : 1000) + (uint64_t)(s % 4), cfg.vocab_size, sft);
        zt_step_stats rs;
        zt_trainer_step(&ref, blocks, &rs);
        zt_fsdp_stats gs;
        if (zt_fsdp_step(&f, mine, 0, &gs) != 0) zt_die_on_err();
        res->losses[s] = gs.loss;
        if (gs.targets != rs.targets) res->targets_ok = 0;
        if (gs.bytes_context != expected_context_bytes(&f, &cfg, recompute)) res->bytes_ok = 0;
        const double rel = isfinite(gs.loss) ? fabs(gs.loss - rs.loss) / fabs(rs.loss) : INFINITY;
        if (g_rank == 0 && nsteps == STEPS)
            printf("%4d %8lld %12.6f %12.6f %10.2e %12.6f %12.6f %12lld\n", s + 1, (long long)gs.targets, rs.loss,
                   gs.loss, rel, rs.grad_norm, gs.grad_norm, (long long)gs.bytes_context);
        if (s == 0) res->rel1 = rel, res->gn_rel1 = fabs(gs.grad_norm - rs.grad_norm) / rs.grad_norm;
        if (!(rel <= res->max_rel)) res->max_rel = rel;
    }
    if (nsteps == STEPS) res->prel = zt_engine_param_rel(&f, &ref, init, sum_ranks);
    zt_fsdp_free(&f);
    zt_trainer_free(&ref);
    for (int u = 0; u < U; u++) free(init[u]);
    free(init);
    free(buf);
    free(blocks);
}

static void report_case(const char *name, const run_result *r) {
    char what[200];
    snprintf(what, sizeof what, "%s: step-1 loss relative difference %.2e <= %.0e", name, r->rel1, TOL_STEP1);
    check(r->rel1 <= TOL_STEP1, what);
    snprintf(what, sizeof what, "%s: max loss relative difference over %d steps %.2e <= %.0e", name, STEPS, r->max_rel,
             TOL_LOSS);
    check(r->max_rel <= TOL_LOSS, what);
    snprintf(what, sizeof what, "%s: step-1 grad norm relative difference %.2e <= %.0e", name, r->gn_rel1, TOL_GNORM1);
    check(r->gn_rel1 <= TOL_GNORM1, what);
    snprintf(what, sizeof what, "%s: parameters after %d steps: |gpu - cpu| / |cpu - init| = %.3f <= %.2f", name, STEPS,
             r->prel, TOL_PARAM);
    check(r->prel <= TOL_PARAM, what);
    snprintf(what, sizeof what, "%s: every step's trained targets == the reference's", name);
    check(r->targets_ok, what);
    snprintf(what, sizeof what, "%s: every step's context bytes == the exchange's (bf16 K|V gathers, fp32 dK|dV "
             "reduce-scatters)", name);
    check(r->bytes_ok, what);
    if (g_rank == 0)
        printf("RESULT fsdp_cuda_cp_%s_step1_rel=%.3e max_rel=%.3e gnorm1_rel=%.3e param_rel=%.3e\n", name, r->rel1,
               r->max_rel, r->gn_rel1, r->prel);
}

// The buffers the split adds (model/qwen3_cuda_context.c) and the attention's scratch, at
// Qwen3-32B's attention shapes (H 64, Hkv 8, D 128), micro-batch 1, blocks of S = 32,768. The
// tiled attention runs the held rows in place (scratch at S_local rows): no whole-block Q, O, dO,
// dQ buffer, so it needs at least those four buffers (4 x 512 MiB) less than the GEMM path's
// split, which still has them; linear in S; under 0.75 GiB (0.69 GiB at C = 2, 0.55 GiB at C = 8
// by hand: gathered K|V bf16 (C + 1) x 2 x S/C x 1024 x 2 B, the block's K and V 128 MiB, fp32
// dK|dV (C + 1) x 2 x S/C x 1024 x 4 B, the maps and the 4 MiB / 1 MiB scratch).
static void check_scratch_32b(void) {
    char what[400];
    const int64_t H = 64, Hkv = 8, D = 128;
    for (int C = 2; C <= 8; C *= 4) {
        int64_t bytes[2], gemm = 0;
        for (int k = 0; k < 2; k++) {
            const int64_t S = 32768 << k;
            int32_t *index = NULL;
            const int64_t Sl = zt_context_split(S, C, &index);
            free(index);
            zt_qwen3_cuda_dims dm = {.B = 1, .S = Sl, .N = Sl, .d = 5120, .F = 25600, .H = H, .Hkv = Hkv, .D = D};
            bytes[k] = zt_qwen3_cuda_cx_bytes(&dm, C, S) + (int64_t)zt_cuda_attention_flash_scratch_bytes(Sl, H, Hkv, D);
            dm.attention = ZT_ATTN_GEMM;
            if (k == 0) gemm = zt_qwen3_cuda_cx_bytes(&dm, C, S);
        }
        const double qblk = 32768.0 * H * D * 2;  // one whole-block bf16 Q (O, dO, dQ) buffer
        snprintf(what, sizeof what, "context split C = %d at Qwen3-32B shapes, S = 32,768, tiled attention: %lld bytes "
                 "(%.2f GiB: the gathered K|V, the block's K and V, fp32 dK|dV, the held rows' scratch; no whole-block "
                 "Q/O/dO/dQ of %.0f MiB each: the GEMM path's split %.2f GiB without its scratch); O(S H D): %lld "
                 "bytes at S = 65,536 (%.3f x)", C, (long long)bytes[0], bytes[0] / 1073741824.0, qblk / 1048576.0,
                 gemm / 1073741824.0, (long long)bytes[1], (double)bytes[1] / (double)bytes[0]);
        check(bytes[1] <= 2 * bytes[0] + 65536 && bytes[0] + 4 * qblk <= gemm && bytes[0] < 0.75 * 1073741824.0, what);
        if (g_rank == 0)
            printf("RESULT cp_scratch_32b_C%d_S32768_bytes=%lld gemm_split_bytes=%lld\n", C, (long long)bytes[0],
                   (long long)gemm);
    }
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world);
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--context")) g_C = atoi(argv[i + 1]);
    if (zt_cuda_device_count() < 1) {
        if (g_rank == 0) printf("SKIPPED: no CUDA device\n");
        MPI_Finalize();
        return 77;
    }
    if (g_C < 2 || g_world % g_C) zt_fatal("test_fsdp_cuda_cp: --context %d must divide W = %d", g_C, g_world);
    zt_comm_opts co = zt_comm_opts_default();
    co.timeout_s = 120;
    zt_comm *dc = NULL, *hc = NULL;
    if (zt_comm_init_nccl(&dc, MPI_COMM_WORLD, -1, &co) != 0) zt_die_on_err();
    if (zt_comm_init_mpi(&hc, MPI_COMM_WORLD, &co) != 0) zt_die_on_err();
    zt_mesh *mesh = NULL;
    if (zt_mesh_create(hc, &(zt_mesh_dims){.context = g_C}, 0, &mesh) != 0 || zt_mesh_attach_device(mesh, dc, 0) != 0)
        zt_die_on_err();
    char dev[128];
    zt_cuda_device_describe(dev, sizeof dev);
    if (g_rank == 0)
        printf("test_fsdp_cuda_cp: %s, W = %d, context groups of %d, %d data-parallel groups, blocks of %d tokens\n",
               dev, g_world, g_C, g_world / g_C, SEQ);
    run_result r, r2;
    if (g_rank == 0) printf("---- plain blocks, tiled attention\n");
    run(hc, dc, mesh, 0, ZT_ATTN_TILED, 0, STEPS, &r);
    report_case("plain", &r);
    run(hc, dc, mesh, 0, ZT_ATTN_TILED, 1, 3, &r2);
    check(!memcmp(r.losses, r2.losses, 3 * sizeof(double)) && r2.bytes_ok,
          "recompute under the split: bit-identical losses for 3 steps (two K|V gathers per layer: the backward "
          "uses the re-run forward's)");
    if (g_rank == 0) printf("---- plain blocks, GEMM attention\n");
    run(hc, dc, mesh, 0, ZT_ATTN_GEMM, 0, STEPS, &r2);
    report_case("plain_gemm", &r2);
    if (g_rank == 0) printf("---- supervised data: packed documents across the chunks, isolated\n");
    run(hc, dc, mesh, 1, ZT_ATTN_TILED, 0, STEPS, &r);
    report_case("sft", &r);
    {  // the cuDNN attention cannot take positions: refused at the engine's construction
        const zt_model_config cfg = tiny();
        const zt_hparams hp = hparams();
        const zt_fsdp_opts o = {.mesh = mesh, .context = g_C, .attention = ZT_ATTN_CUDNN};
        zt_fsdp f;
        zt_attn_test_cudnn_unbuilt_ok(1);  // this build may lack cuDNN: the split's refusal comes first
        const int rc = zt_fsdp_init_cuda(&f, hc, dc, &cfg, MB, GA, SEQ, &hp, 1, &o);
        zt_attn_test_cudnn_unbuilt_ok(0);
        char what[400];
        snprintf(what, sizeof what, "cuDNN attention under the split refused: %s", rc ? zt_errmsg() : "accepted");
        check(rc != 0 && strstr(zt_errmsg(), "the cuDNN attention takes no positions"), what);
        zt_fsdp_free(&f);
    }
    check_scratch_32b();
    check(zt_mesh_free(mesh) == 0, "the mesh's groups finalized (every context collective retired)");
    const int fin = zt_comm_finalize(dc);
    check(fin == 0, fin == 0 ? "NCCL comm finalize: every collective handle retired" : zt_errmsg());
    const int hfin = zt_comm_finalize(hc);
    check(hfin == 0, hfin == 0 ? "host comm finalize: every collective handle retired" : zt_errmsg());
    double bad = failures;
    sum_ranks(&bad, 1);
    if (g_rank == 0) printf("%s\n", bad ? "FAILED" : "all checks passed");
    MPI_Finalize();
    return bad ? 1 : 0;
}
