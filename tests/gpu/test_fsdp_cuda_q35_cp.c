// Qwen3.5 under context parallelism on the GPU FSDP engine (model/qwen3_5_cuda_context.c: the Gated
// DeltaNet's value heads over the context group; the full-attention layers' K/V exchange,
// model/qwen3_cuda_context.c) at W = 2, C = 2 (one context group), against two independent runs of the
// same global batch (MB x GA blocks per step) and seed:
//   - the same GPU engine without the split (W = 2 data-parallel ranks, each MB blocks, grad-accum
//     GA / 2): every step's loss within 1e-3 relative and grad norm within 1e-2 (the same bf16 kernels
//     on the same rows; what differs is the order of the sums over ranks, micro-batches and tokens:
//     step 1's loss is bit-identical, later steps part by ~1e-4 on the CPU execution of CUDA);
//   - the fp32 CPU engine at the same split (model/qwen3_5_context.c): every step's loss within 3e-2,
//     step 1 within 1e-2 (the GPU engine tests' bf16-vs-fp32 tolerances);
// on plain blocks (q35_mix: DeltaNet, DeltaNet, full attention, DeltaNet; Hv = 2 Hk) and on supervised
// data (version-2 words: packed documents starting anywhere, so they cross the zig-zag chunks and the
// ranks: the conv window and the state restart at each start), and the tied config with Hv = 3 Hk on
// plain blocks (against the CPU engine only); --recompute under the split gives bit-identical losses; the context bytes of a step are
// the exchange's (counted below); C = 4 on q35_mix (2 key heads) is refused with the GPU rule.
// Exit 77 without a device. usage: mpirun -n 2 test_fsdp_cuda_q35_cp
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "data/dataset.h"
#include "engine/comm_mpi.h"
#include "engine/comm_nccl.h"
#include "engine/fsdp.h"
#include "engine/fsdp_internal.h"
#include "engine/job_shape.h"
#include "kernels/ops.h"
#include "model/qwen3_5.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/q35_tiny.h"

#define MB 1
#define GA 2
#define SEQ 23
#define STEPS 3
#define TOL_NOCP 1e-3
#define TOL_NOCP_GN 1e-2
#define TOL_NOCP_PARAM 0.06
#define TOL_STEP1 1e-3
#define TOL_LOSS 3e-3

static int failures, g_rank, g_world = 1;
static void check(int ok, const char *what) {
    if (g_rank == 0 || !ok) printf("%s%s: %s\n", g_world > 1 && !ok ? "rank " : "", ok ? "ok  " : "FAIL", what);
    if (!ok) failures++;
}

static zt_hparams hparams(void) {
    zt_hparams hp = {.lr = 5e-3, .min_lr_ratio = 0.1, .warmup = 1, .total_steps = STEPS, .schedule = ZT_SCHED_COSINE,
                     .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .clip = 1.0};
    return hp;
}

// Step s's global batch of MB GA blocks of SEQ = 23 tokens (zig-zag chunks of 6, 6, 6, 5: rank 1 holds a
// padding row); sft: version-2 words, a document at the block's start and then with probability 1/4 per
// token (documents cross the chunks and the ranks), its first two NO_LOSS.
static void make_blocks(uint32_t *buf, const uint32_t **blocks, int s, int64_t V, int sft) {
    zt_rng r;
    zt_rng_seed(&r, (sft ? 2000 : 1000) + (uint64_t)s);
    for (int b = 0; b < MB * GA; b++) {
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

typedef struct {
    double loss[STEPS], gnorm[STEPS];
    int64_t ctx_bytes[STEPS];
    int nunits;
    float **init, **last;  // every unit's full parameters before the first step and after the last
} traj;

static float **full_params(zt_fsdp *f) {
    if (zt_fsdp_to_host(f) != 0) zt_die_on_err();  // the GPU engine's masters to their host copies
    float **p = zt_xcalloc((size_t)f->nunits, sizeof(float *));
    for (int u = 0; u < f->nunits; u++) p[u] = zt_xmalloc((size_t)f->units[u].numel * sizeof(float));
    if (zt_fsdp_gather_full(f, p) != 0) zt_die_on_err();
    return p;
}
static void free_params(float **p, int n) {
    for (int u = 0; p && u < n; u++) free(p[u]);
    free(p);
}
static void free_traj(traj *t) { free_params(t->init, t->nunits), free_params(t->last, t->nunits); }

// |a - b| / |b - init| over every parameter: how far two runs' parameters are apart, relative to how
// far training moved them (Adam moves even a parameter with a tiny gradient by ~lr: a wrong gradient
// shows here when the losses barely move).
static double param_rel(const traj *a, const traj *b, const zt_fsdp_unit *units) {
    double d = 0, m = 0;
    for (int u = 0; u < a->nunits; u++)
        for (int64_t j = 0; j < units[u].numel; j++) {
            const double x = a->last[u][j], y = b->last[u][j], i0 = b->init[u][j];
            d += (x - y) * (x - y), m += (y - i0) * (y - i0);
        }
    return sqrt(d) / sqrt(m);
}
static zt_fsdp_unit *g_units;  // the last run's unit table (numel), for param_rel

typedef enum { GPU_CP, GPU_NOCP, CPU_CP } engine_kind;

// The exchange's bytes of one step on this rank at C = 2 (engine/fsdp_cuda.c counts a gather's bytes
// received, a scatter's bytes sent: (C - 1) / C of the full size): per micro-batch, once, the positions
// (int32); per linear layer qkv | b | a (Wp bf16 words a token) and the output's gradient (Vd bf16)
// gathered, the output (Vd fp32) and the rows' gradients (Wq fp32) reduce-scattered; per full layer K|V
// gathered twice (forward, backward) and dK|dV reduce-scattered. With recompute each forward's twice.
static int64_t expected_ctx_bytes(const zt_model_config *c, int64_t Sl, int recompute) {
    const zt_qwen3_5_fields *q = zt_q35(c);
    const int64_t Nl = MB * Sl, Cch = 2 * q->lin_key_heads * q->lin_key_dim + q->lin_value_heads * q->lin_value_dim;
    const int64_t Vd = q->lin_value_heads * q->lin_value_dim, Hv = q->lin_value_heads;
    const int64_t Wp = (Cch + 4 * Hv + 1) / 2 * 2, Wq = (Cch + 2 * Hv + 1) / 2 * 2;
    const int64_t kv = Nl * c->num_kv_heads * c->head_dim * 2;
    int64_t b = Nl * 4;  // positions: 2 Nl bf16 words
    for (int l = 0; l < c->num_layers; l++)
        if (q->layer_linear[l])
            b += (recompute ? 2 : 1) * (Nl * Wp * 2 + Nl * Vd * 4) + Nl * Vd * 2 + Nl * Wq * 4;
        else
            b += 2 * kv * 2 + kv * 4;
    return b * GA;
}

static void run(zt_comm *hc, zt_comm *dc, zt_mesh *mcp, zt_mesh *mdp, engine_kind kind, const zt_model_config *cfg,
                int sft, int recompute, traj *t) {
    const zt_hparams hp = hparams();
    const int cp = kind != GPU_NOCP;
    const int ga = cp ? GA : GA / 2;  // without the split each rank takes MB (GA / 2) of the MB GA blocks
    const zt_fsdp_opts o = {.mesh = cp ? mcp : mdp, .context = cp ? 2 : 1, .recompute = recompute};
    zt_fsdp f;
    const int rc = kind == CPU_CP ? zt_fsdp_init_opts(&f, hc, cfg, &zt_cpu_ops, MB, ga, SEQ, &hp, 99, &o)
                                  : zt_fsdp_init_cuda(&f, hc, dc, cfg, MB, ga, SEQ, &hp, 99, &o);
    if (rc != 0) zt_die_on_err();
    if (sft && zt_fsdp_set_data(&f, 1, 1) != 0) zt_die_on_err();
    uint32_t buf[MB * GA * SEQ];
    const uint32_t *blocks[MB * GA];
    memset(t, 0, sizeof *t);
    t->nunits = f.nunits;
    t->init = full_params(&f);
    for (int s = 0; s < STEPS; s++) {
        make_blocks(buf, blocks, s, cfg->vocab_size, sft);
        zt_fsdp_stats gs;
        if (zt_fsdp_step(&f, cp ? blocks : blocks + g_rank * MB * ga, 0, &gs) != 0) zt_die_on_err();
        t->loss[s] = gs.loss, t->gnorm[s] = gs.grad_norm, t->ctx_bytes[s] = gs.bytes_context;
    }
    t->last = full_params(&f);
    free(g_units);
    g_units = zt_xcalloc((size_t)f.nunits, sizeof *g_units);
    for (int u = 0; u < f.nunits; u++) g_units[u].numel = f.units[u].numel;
    if (kind == GPU_CP) {
        char what[200];
        int ok = 1;
        const int64_t want = expected_ctx_bytes(cfg, f.seq_local, recompute);
        for (int s = 0; s < STEPS; s++) ok &= t->ctx_bytes[s] == want;
        snprintf(what, sizeof what, "every step's context bytes %lld == the exchange's %lld (recompute %d)",
                 (long long)t->ctx_bytes[0], (long long)want, recompute);
        check(ok, what);
    }
    zt_fsdp_free(&f);
}

static double rel(double a, double b) { return fabs(a - b) / fabs(b); }

// with_nocp 0: against the CPU engine only (the suite's time: each emulated GPU run costs ~1.5 s)
static void compare(const char *name, const zt_model_config *cfg, int sft, int with_nocp, zt_comm *hc, zt_comm *dc,
                    zt_mesh *mcp, zt_mesh *mdp, traj *gcp) {
    traj nocp, cpu;
    run(hc, dc, mcp, mdp, GPU_CP, cfg, sft, 0, gcp);
    if (with_nocp)
        run(hc, dc, mcp, mdp, GPU_NOCP, cfg, sft, 0, &nocp);
    else
        nocp = *gcp, nocp.init = nocp.last = NULL;  // (compared with itself: the C = 1 checks pass trivially)
    run(hc, dc, mcp, mdp, CPU_CP, cfg, sft, 0, &cpu);
    double mx_n = 0, mx_g = 0, mx_c = 0;
    if (g_rank == 0) printf("%4s %12s %12s %12s %10s %10s %10s\n", "step", "gpu C=2", "gpu C=1", "cpu C=2", "rel C=1",
                            "gnorm rel", "rel cpu");
    for (int s = 0; s < STEPS; s++) {
        const double rn = rel(gcp->loss[s], nocp.loss[s]), rg = rel(gcp->gnorm[s], nocp.gnorm[s]);
        const double rc = rel(gcp->loss[s], cpu.loss[s]);
        if (g_rank == 0)
            printf("%4d %12.6f %12.6f %12.6f %10.2e %10.2e %10.2e\n", s + 1, gcp->loss[s], nocp.loss[s], cpu.loss[s], rn,
                   rg, rc);
        mx_n = fmax(mx_n, isfinite(rn) ? rn : INFINITY), mx_g = fmax(mx_g, isfinite(rg) ? rg : INFINITY);
        mx_c = fmax(mx_c, isfinite(rc) ? rc : INFINITY);
    }
    char what[300];
    const double pr = with_nocp ? param_rel(gcp, &nocp, g_units) : 0;
    snprintf(what, sizeof what, "%s: GPU C = 2 vs GPU without the split, max loss rel %.2e <= %.0e, grad norm rel "
             "%.2e <= %.0e over %d steps, parameters |C=2 - C=1| / |C=1 - init| %.3f <= %.2f", name, mx_n, TOL_NOCP,
             mx_g, TOL_NOCP_GN, STEPS, pr, TOL_NOCP_PARAM);
    if (with_nocp) check(mx_n <= TOL_NOCP && mx_g <= TOL_NOCP_GN && pr <= TOL_NOCP_PARAM, what);
    snprintf(what, sizeof what, "%s: GPU C = 2 vs the fp32 CPU engine at C = 2, step 1 rel %.2e <= %.0e, max %.2e <= "
             "%.0e", name, rel(gcp->loss[0], cpu.loss[0]), TOL_STEP1, mx_c, TOL_LOSS);
    check(rel(gcp->loss[0], cpu.loss[0]) <= TOL_STEP1 && mx_c <= TOL_LOSS, what);
    if (g_rank == 0)
        printf("RESULT q35_cp_%s nocp_max_rel=%.3e gnorm_rel=%.3e param_rel=%.3e cpu_max_rel=%.3e\n", name, mx_n, mx_g,
               pr, mx_c);
    free_traj(&nocp), free_traj(&cpu);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world);
    if (zt_cuda_device_count() < 1) {
        if (g_rank == 0) printf("SKIPPED: no CUDA device\n");
        MPI_Finalize();
        return 77;
    }
    if (g_world != 2) zt_fatal("test_fsdp_cuda_q35_cp: run under mpirun -n 2 (W = %d)", g_world);
    zt_comm_opts co = zt_comm_opts_default();
    co.timeout_s = 120;
    zt_comm *dc = NULL, *hc = NULL;
    if (zt_comm_init_nccl(&dc, MPI_COMM_WORLD, -1, &co) != 0) zt_die_on_err();
    if (zt_comm_init_mpi(&hc, MPI_COMM_WORLD, &co) != 0) zt_die_on_err();
    zt_mesh *mcp = NULL, *mdp = NULL;
    if (zt_mesh_create(hc, &(zt_mesh_dims){.context = 2}, 0, &mcp) != 0 || zt_mesh_attach_device(mcp, dc, 0) != 0 ||
        zt_mesh_create(hc, &(zt_mesh_dims){.context = 1}, 0, &mdp) != 0 || zt_mesh_attach_device(mdp, dc, 0) != 0)
        zt_die_on_err();
    const zt_model_config mix = zt_q35_tiny(0), tied = zt_q35_tiny(1);
    traj a, b;
    if (g_rank == 0) printf("---- q35_mix, plain blocks of %d tokens\n", SEQ);
    compare("plain", &mix, 0, 1, hc, dc, mcp, mdp, &a);
    run(hc, dc, mcp, mdp, GPU_CP, &mix, 0, 1, &b);
    check(!memcmp(a.loss, b.loss, sizeof a.loss), "--recompute under the split: bit-identical losses");
    free_traj(&a), free_traj(&b);
    if (g_rank == 0) printf("---- q35_mix, supervised data: packed documents across the chunks and the ranks\n");
    compare("sft", &mix, 1, 1, hc, dc, mcp, mdp, &a);
    free_traj(&a);
    if (g_rank == 0) printf("---- q35_tied (Hv = 3 Hk, tied), plain blocks: against the CPU engine\n");
    compare("tied", &tied, 0, 0, hc, dc, mcp, mdp, &a);
    free_traj(&a);
    {  // the GPU rule: C = 4 does not divide q35_mix's 2 key heads (the job check refuses it first in the engine)
        const int rc = zt_context_check(&(zt_context_job){.context = 4, .family = mix.family, .config = &mix, .gpu = 1});
        char what[400];
        snprintf(what, sizeof what, "C = 4 on the GPU refused: %s", rc ? zt_errmsg() : "accepted");
        check(rc != 0 && strstr(zt_errmsg(), "so C must divide 2"), what);
    }
    check(zt_mesh_free(mcp) == 0 && zt_mesh_free(mdp) == 0, "the meshes' groups finalized");
    check(zt_comm_finalize(dc) == 0, "NCCL comm finalize: every collective handle retired");
    check(zt_comm_finalize(hc) == 0, "host comm finalize: every collective handle retired");
    double bad = failures;
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) printf("%s\n", bad ? "FAILED" : "all checks passed");
    MPI_Finalize();
    return bad ? 1 : 0;
}
