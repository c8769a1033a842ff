// ZeRO-3 engine under mpirun: (1) equivalence with the single-process trainer on the
// same global batch (loss, grad norm per step and final parameters to 1e-5 relative,
// fp32, >= 5 steps, grad accumulation 2, clipping active), for any world size,
// including odd ones whose units need padding; (2) the overlap schedule, read from the
// engine's event log; (3) per-rank state memory ~ 1/W.
// (4) with group=G (hybrid sharding: shards over groups of G ranks, replicated W/G times) and/or
// keep (parameters kept gathered from forward to backward): the same equivalence with the
// reference, the grad norm equal to a full-shard engine's on the same data to fp32 rounding (not
// sqrt(W/G) times it: each shard counted once), keep-gathered bit-identical to resharding with
// fewer gathered bytes, and per-rank state ~ 1/G.
// (5) with context=C (context parallelism: C consecutive ranks share each block, each holding an
// early and a late chunk of it; K/V all-gathered over the group): the same equivalence with the
// reference at the same global batch (W / C data-parallel ranks), on plain blocks and (sft) on
// packed documents crossing the chunks, and per-rank state still ~ 1/G (C adds none).
// The model is the golden case's config.json (its weights are not read: both sides start from the
// seed): Qwen3 (tiny_*), or Qwen3.5 (q35_*), whose reference runs through the family's CPU passes.
// usage: test_fsdp GOLDEN_CASE_DIR [steps] [sft|plain] [group=G] [keep] [context=C]
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "engine/comm_mpi.h"
#include "base/common.h"
#include "data/dataset.h"
#include "engine/fsdp.h"
#include "engine/fsdp_internal.h"  // the engine's struct: pools, event log, test knobs
#include "tests/support/trainer.h"
#include "tests/support/fsdp_schedule.h"
#include "tests/support/test_util.h"

// The schedule the design promises, checked on the last step's event log (tests/support/fsdp_schedule.h).
static void report(int ok, const char *message) { CHECK(ok, "%s", message); }

// An evaluation source that fails or asks to stop where told (zt_fsdp_eval_from's agreement).
typedef struct {
    const uint32_t **blocks;  // one block per micro-batch (micro_batch 1)
    int rank, world, stop_at, fail_at, asked;
} eval_probe;
static int probe_fetch(void *ctx, int m, const uint32_t **out) {
    const eval_probe *p = ctx;
    if (p->rank == 0 && m == p->fail_at) return zt_err("probe: micro-batch %d unreadable", m);
    out[0] = p->blocks[m];
    return 0;
}
static int probe_stop(void *ctx) {
    eval_probe *p = ctx;
    const int m = p->asked++;
    return p->rank == p->world - 1 && m == p->stop_at;
}
static void check_overlap(const zt_fsdp *f) { zt_check_fsdp_schedule(f, report); }

// The reference's forward (+ backward at scale 0: nothing accumulates) on one block: the summed
// loss; *ntargets its trained targets. Qwen3 through its own passes, any other family (Qwen3.5)
// through its table's.
static double ref_block_loss(zt_trainer *ref, const uint32_t *block, int64_t S, int64_t *ntargets) {
    if (!ref->fm) {
        const double loss = zt_qwen3_fwd_bwd(&ref->model, ref->params, ref->grads, block, 0.0f);
        *ntargets = ref->model.ntargets;
        return loss;
    }
    return zt_family_fwd_bwd(ref->fam, ref->fm, &ref->flay, ref->params, ref->grads, block, 1, S, ref->isolated, 0.0f,
                             ntargets, NULL);
}

int main(int argc, char **argv) {
    if (argc < 2) zt_fatal("usage: test_fsdp GOLDEN_CASE_DIR [steps] [sft|plain] [group=G] [keep] [context=C]");
    const int steps = argc > 2 ? atoi(argv[2]) : 5;
    // sft: version-2 words (loss masks, several documents per block, isolated), one block
    // with no trained target at all, and the evaluation pass
    int sft = 0, group = 0, keep = 0, context = 1;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "sft"))
            sft = 1;
        else if (!strncmp(argv[i], "group=", 6))
            group = atoi(argv[i] + 6);
        else if (!strcmp(argv[i], "keep"))
            keep = 1;
        else if (!strncmp(argv[i], "context=", 8))
            context = atoi(argv[i] + 8);
        else if (strcmp(argv[i], "plain"))
            zt_fatal("test_fsdp: unknown argument \"%s\"", argv[i]);
    }
    if (zt_mpi_init_once() != 0) zt_die_on_err();
    zt_comm *comm;
    zt_comm_opts co = zt_comm_opts_default();
    co.timeout_s = 60;
    if (zt_comm_init_mpi(&comm, MPI_COMM_WORLD, &co) != 0) zt_die_on_err();
    zt_comm_info info;
    zt_comm_get_info(comm, &info);
    const int W = info.world, rank = info.rank;
    // data parallelism is over the W / C context groups; a group's ranks get the same blocks
    const int D = W / context, drank = rank / context;

    zt_model_config cfg;
    if (zt_model_config_load(&cfg, argv[1]) != 0) zt_die_on_err();
    const int B = 1, G = 2;
    const int64_t S = 12;
    // Conditioning: Adam turns gradient elements near the fp32 rounding floor into
    // full-size updates whose sign is noise (see tests/reference/README.md); eps 1e-4
    // keeps the comparison about the algorithm, not about summation order.
    zt_hparams hp = {.lr = 1e-2, .min_lr_ratio = 0.1, .warmup = 2, .total_steps = steps, .schedule = ZT_SCHED_COSINE,
                     .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-4, .weight_decay = 0.1, .clip = 1.0};
    const uint64_t seed = 99;
    zt_fsdp f;
    // The process groups of group=G: the mesh over this world (hybrid sharding takes its groups from it).
    zt_mesh *mesh = NULL;
    if (zt_mesh_create(comm, &(zt_mesh_dims){.shard = group, .context = context}, 0, &mesh) != 0) zt_die_on_err();
    const zt_fsdp_opts fo = {.shard_group = group, .mesh = mesh, .keep_gathered = keep, .context = context};
    if (zt_fsdp_init_opts(&f, comm, &cfg, &zt_cpu_ops, B, G, S, &hp, seed, &fo) != 0) zt_die_on_err();
    const int GS = f.shard_world;  // the shard group (W at full shard)
    // The companion engine on the same data: full shard with resharding when this one is hybrid
    // (the grad norm must be the same), the same group resharding when this one keeps gathered
    // (every value must be the same, bit for bit).
    const int companion = keep || GS < W;
    zt_fsdp c;
    const zt_fsdp_opts co_opts = {.shard_group = keep ? group : 0, .mesh = mesh, .keep_gathered = 0,
                                  .context = context};
    if (companion && zt_fsdp_init_opts(&c, comm, &cfg, &zt_cpu_ops, B, G, S, &hp, seed, &co_opts) != 0)
        zt_die_on_err();
    {  // no_seed_init (the trainer's --init, which then writes every value): no seeded draw, shards zero
        zt_fsdp z;
        zt_fsdp_opts zo = fo;
        zo.no_seed_init = 1;
        if (zt_fsdp_init_opts(&z, comm, &cfg, &zt_cpu_ops, B, G, S, &hp, seed, &zo) != 0) zt_die_on_err();
        long long drawn = 0, seeded = 0;
        for (int u = 0; u < z.nunits; u++)
            for (int64_t i = 0; i < z.units[u].shard; i++) drawn += z.units[u].master[i] != 0.0f;
        for (int u = 0; u < f.nunits; u++)
            for (int64_t i = 0; i < f.units[u].valid; i++) seeded += f.units[u].master[i] != 0.0f;
        CHECK(drawn == 0 && seeded > 0, "rank %d: no_seed_init left %lld master values drawn (the seeded engine: %lld)",
              rank, drawn, seeded);
        zt_fsdp_free(&z);
    }
    if (rank == 0)
        printf("W=%d: shard groups of %d x %d replicas, context groups of %d (%lld of %lld tokens per block "
               "each)%s%s\n", W, GS, f.replicas, context, (long long)f.seq_local, (long long)S,
               keep ? ", keep-gathered" : "",
               companion ? (keep ? "; companion: the same group, resharding" : "; companion: full shard") : "");

    // Global block order: step k consumes blocks [k*GB, (k+1)*GB); data rank d the slice [d*B*G, (d+1)*B*G).
    const int64_t GB = (int64_t)D * B * G, nblocks = steps * GB;
    uint32_t *data = zt_xmalloc((size_t)(nblocks * S) * sizeof(uint32_t));
    zt_rng rng;
    zt_rng_seed(&rng, 7);
    for (int64_t i = 0; i < nblocks * S; i++) data[i] = (uint32_t)zt_rng_below(&rng, (uint64_t)cfg.vocab_size);
    if (sft) {
        for (int64_t i = 0; i < nblocks * S; i++) {
            if (i % S == 0 || zt_rng_below(&rng, 5) == 0) data[i] |= ZT_TOK_DOC_START;
            if (zt_rng_below(&rng, 3) == 0) data[i] |= ZT_TOK_NO_LOSS;
        }
        for (int64_t t = 0; t < S; t++) data[S + t] |= ZT_TOK_NO_LOSS;  // block 1 trains nothing
        if (zt_fsdp_set_data(&f, 1, 1) != 0) zt_die_on_err();
        if (companion && zt_fsdp_set_data(&c, 1, 1) != 0) zt_die_on_err();
    }

    zt_trainer ref;
    if (rank == 0 && zt_trainer_init(&ref, &cfg, &zt_cpu_ops, B, D * G, S, &hp, seed) != 0) zt_die_on_err();
    if (rank == 0) ref.model.isolated = ref.isolated = sft;

    // Evaluation (sft): blocks 0..4 dealt round-robin, fillers where a rank runs out; equal to the
    // reference forward on the same (untrained, W-independent) parameters up to summation order.
    const int64_t neval = 5, nmicro_eval = (neval + D - 1) / D;
    const uint32_t **eval_blocks = zt_xcalloc((size_t)nmicro_eval, sizeof *eval_blocks);
    for (int64_t m = 0; m < nmicro_eval; m++)
        if (m * D + drank < neval) eval_blocks[m] = data + (m * D + drank) * S;
    if (sft) {
        double esum;
        int64_t etg;
        if (zt_fsdp_eval(&f, eval_blocks, (int)nmicro_eval, &esum, &etg) != 0) zt_die_on_err();
        if (rank == 0) {
            double rsum = 0;
            int64_t rtg = 0;
            for (int64_t i = 0; i < neval; i++) {
                int64_t nt;
                rsum += ref_block_loss(&ref, data + i * S, S, &nt);
                rtg += nt;
            }
            printf("W=%d eval before training: loss %.15f over %lld targets (reference %.15f over %lld)\n", W,
                   esum / (double)etg, (long long)etg, rsum / (double)rtg, (long long)rtg);
            CHECK(etg == rtg, "eval targets %lld, reference %lld", (long long)etg, (long long)rtg);
            CHECK(fabs(esum - rsum) <= 1e-12 * fabs(rsum), "eval loss sum %.17g vs reference %.17g", esum, rsum);
        }
    }

    const uint32_t **mine = zt_xmalloc((size_t)(B * G) * sizeof(uint32_t *));
    const uint32_t **all = zt_xmalloc((size_t)GB * sizeof(uint32_t *));
    if (sft) {
        // The trainer's ways out of a pass (a file changed under a rank, a stop signal):
        // (1) the last rank's input is bad: every rank learns it from the step's all-reduce and
        // none updates (parameters bit-identical; Adam state and step counter untouched, which
        // the reference comparison of the steps below then proves);
        float **before = zt_xmalloc((size_t)f.nunits * sizeof(float *)), **after = zt_xmalloc((size_t)f.nunits * sizeof(float *));
        for (int u = 0; u < f.nunits; u++) {
            before[u] = zt_xmalloc((size_t)f.units[u].numel * sizeof(float));
            after[u] = zt_xmalloc((size_t)f.units[u].numel * sizeof(float));
        }
        if (zt_fsdp_gather_full(&f, before) != 0) zt_die_on_err();
        for (int i = 0; i < B * G; i++) mine[i] = data + (drank * B * G + i) * S;
        zt_fsdp_stats st;
        const int64_t step0 = f.step;
        if (zt_fsdp_step(&f, mine, rank == W - 1 ? ZT_FSDP_INPUT_BAD : 0, &st) != 0) zt_die_on_err();
        CHECK(st.input_bad == 1 && st.stop_requested == 0, "rank %d: input_bad %d, stop %d", rank, st.input_bad,
              st.stop_requested);
        CHECK(f.step == step0, "rank %d: the step counter moved on a bad input (%lld -> %lld)", rank, (long long)step0,
              (long long)f.step);
        if (zt_fsdp_gather_full(&f, after) != 0) zt_die_on_err();
        for (int u = 0; u < f.nunits; u++)
            CHECK(!memcmp(before[u], after[u], (size_t)f.units[u].numel * sizeof(float)),
                  "rank %d: unit %d changed by a step with a bad input", rank, u);
        // (1b) the last rank's last block holds an id outside the vocabulary (a data file rewritten
        // under the trainer), flags clear: the engine's staging refuses it (no kernel reads the
        // id), names it, and no rank updates (before: an out-of-bounds embedding read)
        uint32_t *wild = zt_xmalloc((size_t)S * sizeof(uint32_t));
        memcpy(wild, mine[B * G - 1], (size_t)S * sizeof(uint32_t));
        wild[3] = (wild[3] & ~ZT_TOK_ID_MASK) | (uint32_t)(cfg.vocab_size + 7);
        if (rank == W - 1) mine[B * G - 1] = wild;
        zt_err_clear();
        if (zt_fsdp_step(&f, mine, 0, &st) != 0) zt_die_on_err();
        CHECK(st.input_bad == 1 && st.input_refused == (rank == W - 1), "rank %d: an id outside the vocabulary: "
              "input_bad %d, input_refused %d", rank, st.input_bad, st.input_refused);
        CHECK(rank != W - 1 || (strstr(zt_errmsg(), "position 3: token id") &&
                                strstr(zt_errmsg(), "is not below the model's vocab_size") &&
                                strstr(zt_errmsg(), "no kernel reads the id")),
              "rank %d: the refusal is named: '%s'", rank, zt_errmsg());
        CHECK(f.step == step0, "rank %d: the step counter moved on a refused block", rank);
        if (zt_fsdp_gather_full(&f, after) != 0) zt_die_on_err();
        for (int u = 0; u < f.nunits; u++)
            CHECK(!memcmp(before[u], after[u], (size_t)f.units[u].numel * sizeof(float)),
                  "rank %d: unit %d changed by a step with a refused block", rank, u);
        free(wild);
        for (int u = 0; u < f.nunits; u++) free(before[u]), free(after[u]);
        free(before), free(after);
        // (2) evaluation ends on every rank at the same micro-batch: a stop asked by the last
        // rank before micro-batch 1, and a fetch failing on rank 0 at micro-batch 0
        eval_probe ep = {eval_blocks, rank, W, -1, -1, 0};
        zt_fsdp_eval_source src = {.fetch = probe_fetch, .stop = probe_stop, .ctx = &ep};
        zt_fsdp_eval_result res;
        ep.stop_at = 1, ep.fail_at = -1, ep.asked = 0;
        if (zt_fsdp_eval_from(&f, (int)nmicro_eval, &src, &res) != 0) zt_die_on_err();
        CHECK(res.stopped == 1 && res.bad == 0 && res.micro_done == 1 && res.targets == 0,
              "rank %d: a stop before micro-batch 1: stopped %d, bad %d, done %d", rank, res.stopped, res.bad,
              res.micro_done);
        ep.stop_at = -1, ep.fail_at = 0, ep.asked = 0;
        zt_err_clear();
        if (zt_fsdp_eval_from(&f, (int)nmicro_eval, &src, &res) != 0) zt_die_on_err();
        CHECK(res.bad == 1 && res.stopped == 0 && res.micro_done == 0, "rank %d: a bad fetch: bad %d, done %d", rank,
              res.bad, res.micro_done);
        CHECK(rank != 0 || strstr(zt_errmsg(), "probe: micro-batch 0 unreadable"), "rank 0's reason kept: '%s'",
              zt_errmsg());
        // an id outside the vocabulary in the last rank's first evaluation block: refused before
        // staging, agreed like a bad fetch
        uint32_t *wild_e = zt_xmalloc((size_t)S * sizeof(uint32_t));
        memset(wild_e, 0, (size_t)S * sizeof(uint32_t));
        wild_e[S - 1] = (uint32_t)cfg.vocab_size;
        const uint32_t *first_eval = eval_blocks[0];
        if (rank == W - 1) eval_blocks[0] = wild_e;
        ep.stop_at = -1, ep.fail_at = -1, ep.asked = 0;
        zt_err_clear();
        if (zt_fsdp_eval_from(&f, (int)nmicro_eval, &src, &res) != 0) zt_die_on_err();
        CHECK(res.bad == 1 && res.micro_done == 0, "rank %d: an evaluation block outside the vocabulary: bad %d, "
              "done %d", rank, res.bad, res.micro_done);
        CHECK(rank != W - 1 || strstr(zt_errmsg(), "is not below the model's vocab_size"), "the refusal named: '%s'",
              zt_errmsg());
        eval_blocks[0] = first_eval;
        free(wild_e);
    }
    for (int k = 0; k < steps; k++) {
        for (int i = 0; i < B * G; i++) mine[i] = data + (k * GB + drank * B * G + i) * S;
        zt_fsdp_stats st, sc;
        if (zt_fsdp_step(&f, mine, 0, &st) != 0) zt_die_on_err();
        if (companion) {
            if (zt_fsdp_step(&c, mine, 0, &sc) != 0) zt_die_on_err();
            if (rank == 0)
                printf("W=%d step %d: companion loss %.9f grad norm %.9f (rel %.2e) gathered %lld B | this engine "
                       "gathered %lld B, scattered %lld B, replica all-reduce %lld B\n", W, k + 1, sc.loss,
                       sc.grad_norm, fabs(st.grad_norm - sc.grad_norm) / sc.grad_norm, (long long)sc.bytes_gathered,
                       (long long)st.bytes_gathered, (long long)st.bytes_scattered, (long long)st.bytes_replicated);
            if (keep) {  // the same arithmetic on the same gathered bits: identical
                CHECK(st.loss == sc.loss && st.grad_norm == sc.grad_norm, "step %d: keep-gathered loss %.17g norm "
                      "%.17g vs resharding %.17g %.17g", k + 1, st.loss, st.grad_norm, sc.loss, sc.grad_norm);
                CHECK(st.bytes_gathered < 0.6 * sc.bytes_gathered || GS == 1,
                      "step %d: keep-gathered gathered %lld B, resharding %lld B (expected about half)", k + 1,
                      (long long)st.bytes_gathered, (long long)sc.bytes_gathered);
            } else {  // the norm of the one full gradient, whatever the grouping: fp32 summation order only
                CHECK(fabs(st.grad_norm - sc.grad_norm) <= 1e-6 * sc.grad_norm,
                      "step %d: hybrid grad norm %.9f vs full shard %.9f (ratio %.6f)", k + 1, st.grad_norm,
                      sc.grad_norm, st.grad_norm / sc.grad_norm);
                CHECK(st.bytes_replicated > 0 && st.bytes_scattered < sc.bytes_scattered,
                      "step %d: replica all-reduce %lld B, group scatter %lld B vs full %lld B", k + 1,
                      (long long)st.bytes_replicated, (long long)st.bytes_scattered, (long long)sc.bytes_scattered);
            }
        }
        if (k == 0) zt_comm_mark_warm(comm);
        if (rank == 0) {
            for (int i = 0; i < GB; i++) all[i] = data + (k * GB + i) * S;
            zt_step_stats rs;
            zt_trainer_step(&ref, all, &rs);
            float a[2] = {(float)st.loss, (float)st.grad_norm}, b[2] = {(float)rs.loss, (float)rs.grad_norm};
            printf("W=%d step %d: loss %.7f (ref %.7f, rel %.2e) grad norm %.6f (ref %.6f, rel %.2e) clip %.3f | "
                   "wait %.3f s, gathered %lld B, scattered %lld B, context %lld B\n",
                   W, k + 1, st.loss, rs.loss, fabs(st.loss - rs.loss) / fabs(rs.loss), st.grad_norm, rs.grad_norm,
                   fabs(st.grad_norm - rs.grad_norm) / rs.grad_norm, st.clip_coef, st.t_comm_wait,
                   (long long)st.bytes_gathered, (long long)st.bytes_scattered, (long long)st.bytes_context);
            CHECK(context == 1 ? st.bytes_context == 0 : st.bytes_context > 0, "step %d: context bytes %lld at C = %d",
                  k + 1, (long long)st.bytes_context, context);
            CHECK(st.tokens == rs.tokens, "step %d: tokens %lld, reference %lld", k + 1, (long long)st.tokens,
                  (long long)rs.tokens);
            CHECK_CLOSE("step loss", &a[0], &b[0], 1, 1e-5);
            CHECK_CLOSE("step grad norm", &a[1], &b[1], 1, 1e-5);
            CHECK(st.clip_coef < 1.0, "clipping must be active (coef %.3f)", st.clip_coef);
            CHECK(st.targets == rs.targets, "step trained targets %lld, reference %lld", (long long)st.targets,
                  (long long)rs.targets);
            CHECK(sft ? st.targets < GB * (S - 1) : st.targets == GB * (S - 1), "step %d: %lld trained targets", k + 1,
                  (long long)st.targets);
        }
    }
    // Final parameters, assembled from every rank's shards.
    float **full = zt_xmalloc((size_t)f.nunits * sizeof(float *));
    for (int u = 0; u < f.nunits; u++) full[u] = zt_xmalloc((size_t)f.units[u].numel * sizeof(float));
    if (zt_fsdp_gather_full(&f, full) != 0) zt_die_on_err();
    if (rank == 0) {
        for (int u = 0; u < f.nunits; u++) {
            char name[64];
            snprintf(name, sizeof name, "final params unit %d", u);
            CHECK_CLOSE(name, full[u], ref.params[u], f.units[u].numel, 1e-5);
        }
    }
    if (companion) {  // keep-gathered: identical final parameters; hybrid: the same to fp32 tolerance
        float **cf = zt_xmalloc((size_t)c.nunits * sizeof(float *));
        for (int u = 0; u < c.nunits; u++) cf[u] = zt_xmalloc((size_t)c.units[u].numel * sizeof(float));
        if (zt_fsdp_gather_full(&c, cf) != 0) zt_die_on_err();
        for (int u = 0; u < f.nunits && rank == 0; u++) {
            if (keep) {
                CHECK(!memcmp(full[u], cf[u], (size_t)f.units[u].numel * sizeof(float)),
                      "unit %d: keep-gathered parameters differ from resharding's", u);
            } else {
                char name[64];
                snprintf(name, sizeof name, "hybrid vs full shard, unit %d", u);
                CHECK_CLOSE(name, full[u], cf[u], f.units[u].numel, 1e-5);
            }
        }
        for (int u = 0; u < c.nunits; u++) free(cf[u]);
        free(cf);
    }
    if (keep && rank == 0) {  // no gather after the head in any micro-batch: the backward uses the kept units
        for (int mb = 0; mb < G; mb++) {
            const int head_bwd = zt_sched_find(&f, 0, ZT_EV_BWD_START, f.nunits - 1, mb);
            int regather = -1;
            for (int i = head_bwd; i >= 0 && i < f.nevents; i++)
                if (f.events[i].kind == ZT_EV_AG_ISSUE && f.events[i].micro == mb) regather = f.events[i].unit;
            CHECK(head_bwd >= 0 && regather < 0, "micro %d: keep-gathered re-gathered unit %d for the backward", mb,
                  regather);
        }
    }
    if (GS > 1 && !keep) check_overlap(&f);
    if (sft) {  // after training: the same parameters to 1e-5, so the same evaluation to ~1e-5
        double esum;
        int64_t etg;
        if (zt_fsdp_eval(&f, eval_blocks, (int)nmicro_eval, &esum, &etg) != 0) zt_die_on_err();
        if (rank == 0) {
            double rsum = 0;
            for (int64_t i = 0; i < neval; i++) {
                int64_t nt;
                rsum += ref_block_loss(&ref, data + i * S, S, &nt);
            }
            float a = (float)esum, b = (float)rsum;
            printf("W=%d eval after training: loss sum %.9f (reference %.9f)\n", W, esum, rsum);
            CHECK_CLOSE("eval after training", &a, &b, 1, 1e-5);
        }
    }
    free(eval_blocks);

    // Memory: params + grads + optimizer per rank against the W = 1 total / W.
    zt_fsdp_memory mem;
    zt_fsdp_memory_usage(&f, &mem);
    const double state = (double)(mem.params + mem.grads + mem.optimizer);
    const double w1 = 4.0 * sizeof(float) * (double)f.lay.total_numel;
    const double ratio = state / (w1 / GS);
    if (rank == 0)
        printf("W=%d memory per rank: params %lld, grads %lld, optimizer %lld, buffers %lld, activations %lld bytes; "
               "state / (W=1 state / G) = %.4f\n",
               W, (long long)mem.params, (long long)mem.grads, (long long)mem.optimizer, (long long)mem.buffers,
               (long long)mem.activations, ratio);
    CHECK(ratio >= 1.0 && ratio < 1.03, "rank %d: per-rank state %.0f bytes vs %.0f expected (ratio %.4f)", rank,
          state, w1 / GS, ratio);

    int failed = zt_test_failures;
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (int u = 0; u < f.nunits; u++) free(full[u]);
    free(full), free(mine), free(all), free(data);
    zt_fsdp_free(&f);
    if (companion) zt_fsdp_free(&c);
    if (zt_mesh_free(mesh) != 0) zt_die_on_err();
    if (rank == 0) zt_trainer_free(&ref);
    zt_comm_finalize(comm);
    zt_mpi_finalize_once();
    if (rank == 0) printf("%d checks, %d failed (all ranks)\n", zt_test_checks, failed);
    return failed ? 1 : 0;
}
