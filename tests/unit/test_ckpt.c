// Checkpoint tests. Canonical per-unit vectors (master, Adam m, v) are generated from
// (seed, step, unit, dataset), identical on every rank, sliced with the FSDP padding
// rule for the current world, saved and loaded, and compared bit for bit.
// usage: test_ckpt unit
//        test_ckpt save WORK            (mpirun -n 4: saves WORK/run and WORK/run_tied)
//        test_ckpt load WORK            (any world size: reshard)
//        test_ckpt corrupt WORK         (mpirun -n 2: bit flips, truncation, latest, .partial)
//        test_ckpt fulldisk DIR tmpfs|inject   (mpirun -n 2)
//        test_ckpt saveio WORK          (mpirun -n 3: --save-io direct, posix, mpiio and the O_DIRECT
//                                        fallback give the same datasets)
//        test_ckpt export WORK          (serial: HF export round trip)
#define _GNU_SOURCE
#include <dirent.h>
#include <stdarg.h>
#include <errno.h>
#include <hdf5.h>
#include <math.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/ckpt.h"
#include "checkpoint/safetensors.h"
#include "base/crc32c.h"
#include "model/qwen3.h"
#include "base/common.h"
#include "tests/support/test_util.h"
#include "checkpoint/hf.h"
#include "model/qwen3_5.h"

#define ALIGN 16  // engine/fsdp.h ZT_FSDP_ALIGN
static int g_rank = 0, g_world = 1;

// ---- fixtures -----------------------------------------------------------------------

typedef struct {
    zt_model_layout lay;
    float **full[3];  // [ds][unit] canonical vectors
    zt_ckpt_shards sh;
} model_state;

static void gen_full(const zt_model_layout *lay, int64_t step, float **full[3]) {
    for (int k = 0; k < 3; k++) {
        if (!full[k]) full[k] = zt_xcalloc((size_t)lay->nunits, sizeof(float *));
        for (int u = 0; u < lay->nunits; u++) {
            int64_t n = lay->units[u].numel;
            if (!full[k][u]) full[k][u] = zt_xmalloc((size_t)n * sizeof(float));
            zt_rng r;
            zt_rng_seed(&r, 0x5eed ^ ((uint64_t)step << 20) ^ ((uint64_t)u << 8) ^ (uint64_t)k);
            for (int64_t i = 0; i < n; i++)
                full[k][u][i] = k == 0 ? (float)(0.1 * zt_rng_normal(&r))
                                : k == 1 ? (float)(0.01 * zt_rng_normal(&r))
                                         : (float)(1e-4 * zt_rng_uniform(&r));
        }
    }
}

// The FSDP slicing of engine/fsdp.c for (rank, world).
static void make_shards(const zt_model_layout *lay, int rank, int world, zt_ckpt_shards *sh) {
    sh->nunits = lay->nunits;
    sh->unit = zt_xcalloc((size_t)lay->nunits, sizeof *sh->unit);
    for (int u = 0; u < lay->nunits; u++) {
        zt_ckpt_slice *s = &sh->unit[u];
        const int64_t q = (int64_t)world * ALIGN, numel = lay->units[u].numel;
        int64_t padded = (numel + q - 1) / q * q, shard = padded / world, lo = rank * shard, v = numel - lo;
        s->numel = numel;
        s->lo = lo;
        s->valid = v < 0 ? 0 : v > shard ? shard : v;
        s->master = zt_xmalloc((size_t)shard * sizeof(float));
        s->m = zt_xmalloc((size_t)shard * sizeof(float));
        s->v = zt_xmalloc((size_t)shard * sizeof(float));
    }
}

static float *slice_buf(zt_ckpt_slice *s, int k) { return k == 0 ? s->master : k == 1 ? s->m : s->v; }

static void fill_shards(zt_ckpt_shards *sh, float **full[3]) {
    for (int u = 0; u < sh->nunits; u++)
        for (int k = 0; k < 3; k++)
            memcpy(slice_buf(&sh->unit[u], k), full[k][u] + sh->unit[u].lo, (size_t)sh->unit[u].valid * 4);
}

static void poison_shards(zt_ckpt_shards *sh) {
    for (int u = 0; u < sh->nunits; u++)
        for (int k = 0; k < 3; k++)
            for (int64_t i = 0; i < sh->unit[u].valid; i++) slice_buf(&sh->unit[u], k)[i] = NAN;
}

// Bit-exact comparison of this rank's slices with the canonical vectors of `step`.
static int shards_match(const zt_ckpt_shards *sh, float **full[3]) {
    for (int u = 0; u < sh->nunits; u++)
        for (int k = 0; k < 3; k++) {
            const zt_ckpt_slice *s = &sh->unit[u];
            if (memcmp(slice_buf((zt_ckpt_slice *)s, k), full[k][u] + s->lo, (size_t)s->valid * 4) != 0) {
                fprintf(stderr, "rank %d: unit %d ds %d [%lld, +%lld) differs\n", g_rank, u, k, (long long)s->lo,
                        (long long)s->valid);
                return 0;
            }
        }
    return 1;
}

static void state_init(model_state *st, const char *golden_case) {
    memset(st, 0, sizeof *st);
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", ZT_GOLDEN_DIR, golden_case);
    zt_model_config cfg;
    if (zt_model_config_load(&cfg, p) != 0) zt_die_on_err();
    zt_model_layout_init(&st->lay, &cfg);
    make_shards(&st->lay, g_rank, g_world, &st->sh);
}

static void meta_for(zt_ckpt_meta *m, int64_t step) {
    memset(m, 0, sizeof *m);
    m->step = step;
    m->epoch = step / 7;
    m->epoch_step = step % 7;
    m->epoch_blocks = (step % 7) * 8;
    m->tokens_seen = step * 4096;
    m->seed = 1234;
    for (int i = 0; i < 4; i++) m->rng_state[i] = 0x0123456789abcdefULL * (uint64_t)(i + 1) + (uint64_t)step;
    snprintf(m->run_id, sizeof m->run_id, "test-run-%lld", (long long)step);
    m->lr_last = 1e-3 / (double)(step + 1);
    m->final = step == 30;
}

static const char *TRAIN_JSON = "{\"lr\":0.001,\"micro_batch\":2,\"grad_accum\":4,\"seq_len\":16}";

static int save_step(model_state *st, const char *run, int64_t step, int keep, char *out, size_t n) {
    gen_full(&st->lay, step, st->full);
    fill_shards(&st->sh, st->full);
    zt_ckpt_meta m;
    meta_for(&m, step);
    return zt_ckpt_save(MPI_COMM_WORLD, run, &m, &st->lay, TRAIN_JSON, &st->sh, keep, out, n);
}

static int exists(const char *fmt, const char *a, const char *b) {
    char p[4400];
    snprintf(p, sizeof p, fmt, a, b);
    struct stat s;
    return stat(p, &s) == 0;
}

static void read_latest(const char *run, char *out, size_t n) {
    char p[4200];
    snprintf(p, sizeof p, "%s/checkpoints/latest", run);
    char *s = zt_read_file(p, NULL);
    snprintf(out, n, "%s", s ? s : "(missing)");
    char *nl = strchr(out, '\n');
    if (nl) *nl = 0;
    free(s);
}

static int count_partial(const char *run) {
    char p[4200];
    snprintf(p, sizeof p, "%s/checkpoints", run);
    DIR *d = opendir(p);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) n += strstr(e->d_name, ".partial") != NULL;
    if (d) closedir(d);
    return n;
}

static void sh_run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh_run(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    if (system(cmd) != 0) zt_fatal("command failed: %s", cmd);
}

#define ALL_FAIL(rc, ...)                                                            \
    do {                                                                             \
        int _f = (rc) != 0, _all;                                                    \
        MPI_Allreduce(&_f, &_all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);              \
        CHECK(_all == g_world, "expected failure on all %d ranks, got %d: %s", g_world, _all, __VA_ARGS__); \
    } while (0)

static int has(const char *msg, const char *needle) {
    if (strstr(msg, needle)) return 1;
    fprintf(stderr, "rank %d: message lacks \"%s\": %s\n", g_rank, needle, msg);
    return 0;
}

// ---- unit (serial) ----------------------------------------------------------------------

static void test_unit(const char *work) {
    // crc32c combination against the straight crc of the concatenation
    zt_rng r;
    zt_rng_seed(&r, 7);
    uint8_t buf[5000];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)zt_rng_u64(&r);
    size_t cuts[] = {0, 1, 3, 4, 999, 1000, 2048, 4999, 5000};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        size_t c = cuts[i];
        uint32_t whole = zt_crc32c(0, buf, sizeof buf);
        uint32_t comb = zt_crc32c_combine(zt_crc32c(0, buf, c), zt_crc32c(0, buf + c, sizeof buf - c), sizeof buf - c);
        CHECK(whole == comb, "crc32c_combine at cut %zu: 0x%08x vs 0x%08x", c, comb, whole);
    }
    // config diff names every differing field
    zt_model_config a, b;
    char p[4096], msg[2048];
    snprintf(p, sizeof p, "%s/tiny_untied_gqa", ZT_GOLDEN_DIR);
    if (zt_model_config_load(&a, p) != 0) zt_die_on_err();
    b = a;
    CHECK(zt_ckpt_config_diff(&a, &b, msg, sizeof msg) == 0, "identical configs differ: %s", msg);
    b.hidden_size = 64;
    b.rope_theta = 1e6;
    b.tie_word_embeddings = 1;
    b.initializer_range = 0.5;  // not compared
    int nd = zt_ckpt_config_diff(&a, &b, msg, sizeof msg);
    CHECK(nd == 3, "3 differing fields, got %d: %s", nd, msg);
    CHECK(has(msg, "checkpoint has hidden_size 48, the run has 64") && has(msg, "rope_theta") &&
              has(msg, "checkpoint has tie_word_embeddings false, the run has true"),
          "%s", msg);
    // a Qwen3.5 checkpoint also agrees on what its family adds (zt_family.config_diff), and the start
    // line's layer mix is the family's (zt_family.layer_mix)
    zt_model_config qa, qb;
    snprintf(p, sizeof p, "%s/q35_tied", ZT_GOLDEN_DIR);
    if (zt_model_config_load(&qa, p) != 0) zt_die_on_err();
    qb = qa;
    CHECK(zt_ckpt_config_diff(&qa, &qb, msg, sizeof msg) == 0, "identical Qwen3.5 configs differ: %s", msg);
    char mix[96];
    CHECK(qa.family && qa.family->layer_mix, "Qwen3.5 has a layer mix");
    qa.family->layer_mix(&qa, mix, sizeof mix);
    int nlin = 0;
    for (int l = 0; l < qa.num_layers; l++) nlin += zt_q35(&qa)->layer_linear[l] != 0;
    char want[96];
    snprintf(want, sizeof want, " (%d linear + %d full)", nlin, qa.num_layers - nlin);
    CHECK(nlin > 0 && nlin < qa.num_layers && strcmp(mix, want) == 0, "layer mix '%s', expected '%s'", mix, want);
    zt_q35_set(&qb)->lin_key_heads += 1;
    zt_q35_set(&qb)->layer_linear[1] = !zt_q35(&qb)->layer_linear[1];
    qb.hidden_size += 8;
    nd = zt_ckpt_config_diff(&qa, &qb, msg, sizeof msg);
    snprintf(want, sizeof want, "checkpoint has layer 1 as %s, the run as %s",
             zt_q35(&qa)->layer_linear[1] ? "linear_attention" : "full_attention", zt_q35(&qb)->layer_linear[1] ? "linear_attention" : "full_attention");
    CHECK(nd == 3 && has(msg, "checkpoint has hidden_size") && has(msg, "; checkpoint has linear_num_key_heads") &&
              has(msg, want),
          "3 differing Qwen3.5 fields, got %d: %s", nd, msg);
    CHECK(zt_ckpt_config_diff(&a, &qa, msg, sizeof msg) >= 1 && has(msg, "checkpoint has model family qwen3, the run has qwen3_5"),
          "another family: %s", msg);
    // training settings
    const char *ign[] = {"steps", NULL};
    CHECK(zt_ckpt_check_train_json("{\"lr\":1,\"steps\":5}", "{\"lr\":1,\"steps\":9}", ign) == 0, "%s", zt_errmsg());
    CHECK(zt_ckpt_check_train_json("{\"lr\":1,\"mb\":2}", "{\"lr\":2,\"seq\":4}", ign) != 0 &&
              has(zt_errmsg(), "checkpoint has lr 1, the run has 2") && has(zt_errmsg(), "mb is set only in the checkpoint") &&
              has(zt_errmsg(), "seq is set only in the run"),
          "train json diff");
    // a key twice is named as such (found by tests/fuzz/fuzz_ckpt_meta), not as a difference
    CHECK(zt_ckpt_check_train_json("{\"lr\":1,\"lr\":2}", "{\"lr\":1}", NULL) != 0 &&
              has(zt_errmsg(), "\"lr\" appears twice in the checkpoint's JSON"),
          "duplicate key: %s", zt_errmsg());
    CHECK(zt_ckpt_check_train_json("{\"lr\":1,\"eps\":1e999}", "{\"lr\":1,\"eps\":1e999}", NULL) != 0 &&
              has(zt_errmsg(), "a number (\"eps\") in the checkpoint's JSON is not finite"),
          "infinite number: %s", zt_errmsg());
    // resolution without HDF5: fake directories
    char run[2048], out[4096];
    snprintf(run, sizeof run, "%s/resolve", work);
    sh_run("rm -rf '%s' && mkdir -p '%s/checkpoints/step-00000005' '%s/checkpoints/step-00000009.partial' "
           "'%s/checkpoints/step-00000007' && touch '%s/checkpoints/step-00000005/ckpt.h5' "
           "'%s/checkpoints/step-00000009.partial/ckpt.h5'",
           run, run, run, run, run, run);
    CHECK(zt_ckpt_resolve(run, out, sizeof out) != 0 && has(zt_errmsg(), "latest is missing") &&
              has(zt_errmsg(), "step-00000005") && !strstr(zt_errmsg(), "step-00000007"),
          "missing latest: %s", zt_errmsg());
    sh_run("echo step-00000005 > '%s/checkpoints/latest'", run);
    CHECK(zt_ckpt_resolve(run, out, sizeof out) == 0 && strstr(out, "checkpoints/step-00000005"), "resolve: %s",
          zt_errmsg());
    snprintf(p, sizeof p, "%s/checkpoints", run);
    CHECK(zt_ckpt_resolve(p, out, sizeof out) == 0 && strstr(out, "step-00000005"), "checkpoints dir: %s",
          zt_errmsg());
    sh_run("echo step-00000007 > '%s/checkpoints/latest'", run);
    CHECK(zt_ckpt_resolve(run, out, sizeof out) != 0 && has(zt_errmsg(), "dangling"), "dangling: %s", zt_errmsg());
    sh_run("echo step-00000009.partial > '%s/checkpoints/latest'", run);
    CHECK(zt_ckpt_resolve(run, out, sizeof out) != 0 && has(zt_errmsg(), ".partial"), "latest->partial: %s",
          zt_errmsg());
    snprintf(p, sizeof p, "%s/checkpoints/step-00000009.partial", run);
    CHECK(zt_ckpt_resolve(p, out, sizeof out) != 0 && has(zt_errmsg(), "incomplete checkpoint"), "partial: %s",
          zt_errmsg());
    snprintf(p, sizeof p, "%s/checkpoints/step-00000009.partial/ckpt.h5", run);
    CHECK(zt_ckpt_resolve(p, out, sizeof out) != 0 && has(zt_errmsg(), "incomplete checkpoint"), "partial file: %s",
          zt_errmsg());
    snprintf(p, sizeof p, "%s/checkpoints/step-00000007", run);
    CHECK(zt_ckpt_resolve(p, out, sizeof out) != 0 && has(zt_errmsg(), "ckpt.h5 does not exist"), "empty step: %s",
          zt_errmsg());
    snprintf(p, sizeof p, "%s/nope", run);
    CHECK(zt_ckpt_resolve(p, out, sizeof out) != 0 && has(zt_errmsg(), "no such"), "missing: %s", zt_errmsg());
    // a file that is not HDF5
    snprintf(p, sizeof p, "%s/checkpoints/step-00000005", run);
    zt_ckpt_meta m;
    CHECK(zt_ckpt_open_meta(p, &m, NULL, NULL) != 0 && has(zt_errmsg(), "cannot open as HDF5"), "not hdf5: %s",
          zt_errmsg());
}

// ---- save (W = 4) -----------------------------------------------------------------------

static void test_save(const char *work) {
    char run[4096], out[4300], latest[256], p[4400];
    model_state st;
    const char *cases[2][2] = {{"tiny_untied_gqa", "run"}, {"tiny_tied", "run_tied"}};
    for (int c = 0; c < 2; c++) {
        state_init(&st, cases[c][0]);
        snprintf(run, sizeof run, "%s/%s", work, cases[c][1]);
        if (g_rank == 0) sh_run("rm -rf '%s'", run);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = zt_now();
        for (int64_t step = 10; step <= 30; step += 10) {
            int rc = save_step(&st, run, step, 2, out, sizeof out);
            CHECK(rc == 0, "save step %lld: %s", (long long)step, zt_errmsg());
            snprintf(p, sizeof p, "%s/checkpoints/step-%08lld", run, (long long)step);
            CHECK(!strcmp(out, p), "out_path %s, expected %s", out, p);
            MPI_Barrier(MPI_COMM_WORLD);
            read_latest(run, latest, sizeof latest);
            snprintf(p, sizeof p, "step-%08lld", (long long)step);
            CHECK(!strcmp(latest, p), "latest = %s after saving step %lld", latest, (long long)step);
            CHECK(count_partial(run) == 0, "a .partial directory is left after step %lld", (long long)step);
        }
        if (g_rank == 0)
            printf("%s: 3 saves at W=%d in %.3f s\n", cases[c][0], g_world, zt_now() - t0);
        // keep_last = 2: step 10 pruned after 30 was complete
        CHECK(!exists("%s/checkpoints/%s", run, "step-00000010"), "step-00000010 should be pruned (keep_last 2)");
        CHECK(exists("%s/checkpoints/%s/ckpt.h5", run, "step-00000020"), "step-00000020 kept");
        CHECK(exists("%s/checkpoints/%s/meta.json", run, "step-00000030"), "meta.json written");
        // saving the same step again replaces it cleanly
        CHECK(save_step(&st, run, 30, 2, out, sizeof out) == 0, "re-save step 30: %s", zt_errmsg());
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK(exists("%s/checkpoints/%s/ckpt.h5", run, "step-00000020") && !exists("%s/checkpoints/%s", run, "step-00000030.replaced"),
              "re-save keeps step 20, no leftovers");
        // meta round trip
        zt_ckpt_meta m, want;
        zt_model_config cfg;
        char *tj = NULL;
        meta_for(&want, 30);
        CHECK(zt_ckpt_open_meta(run, &m, &cfg, &tj) == 0, "open_meta: %s", zt_errmsg());
        CHECK(m.step == 30 && m.epoch == want.epoch && m.epoch_step == want.epoch_step &&
                  m.epoch_blocks == want.epoch_blocks && m.tokens_seen == want.tokens_seen && m.seed == want.seed &&
                  !memcmp(m.rng_state, want.rng_state, sizeof m.rng_state) && m.world_size == g_world &&
                  !strcmp(m.run_id, want.run_id) && m.lr_last == want.lr_last && m.final == 1,
              "meta round trip");
        char diff[1024];
        CHECK(zt_ckpt_config_diff(&cfg, &st.lay.cfg, diff, sizeof diff) == 0, "config round trip: %s", diff);
        CHECK(tj && !strcmp(tj, TRAIN_JSON), "train_json round trip: %s", tj ? tj : "(null)");
        free(tj);
    }
    // Slices that do not tile a unit: refused before anything is created, on every rank.
    snprintf(run, sizeof run, "%s/run", work);
    read_latest(run, latest, sizeof latest);
    if (g_rank == 1) st.sh.unit[1].lo -= 16;  // overlaps rank 0's slice
    int rc = save_step(&st, run, 40, 2, out, sizeof out);
    ALL_FAIL(rc, "overlapping slices");
    if (g_world > 1)
        CHECK(rc != 0 && has(zt_errmsg(), "unit 1: elements from") && has(zt_errmsg(), "held by both"), "%s",
              zt_errmsg());
    if (g_rank == 1) st.sh.unit[1].lo += 16;
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(!exists("%s/checkpoints/%s", run, "step-00000040.partial") && !exists("%s/checkpoints/%s", run, "step-00000040"),
          "nothing created for a refused save");
    char l2[256];
    read_latest(run, l2, sizeof l2);
    CHECK(!strcmp(latest, l2), "latest unchanged by a refused save");
}

// ---- load at the current world ---------------------------------------------------------

static void test_load(const char *work) {
    char run[4096], p[4400];
    model_state st;
    const char *cases[2][2] = {{"tiny_untied_gqa", "run"}, {"tiny_tied", "run_tied"}};
    for (int c = 0; c < 2; c++) {
        state_init(&st, cases[c][0]);
        snprintf(run, sizeof run, "%s/%s", work, cases[c][1]);
        zt_ckpt_meta m;
        double t0 = zt_now();
        poison_shards(&st.sh);
        int rc = zt_ckpt_load(MPI_COMM_WORLD, run, &st.lay, &m, &st.sh);
        CHECK(rc == 0, "load %s at W=%d: %s", run, g_world, zt_errmsg());
        gen_full(&st.lay, 30, st.full);
        CHECK(rc == 0 && shards_match(&st.sh, st.full), "%s: W=4 -> W=%d slices bit-exact (step 30)", cases[c][0],
              g_world);
        CHECK(m.step == 30 && m.world_size == 4 && m.final == 1, "meta step %lld world %d", (long long)m.step,
              m.world_size);
        if (g_rank == 0) printf("%s: loaded step 30 (saved at W=4) at W=%d in %.3f s\n", cases[c][0], g_world, zt_now() - t0);
        snprintf(p, sizeof p, "%s/checkpoints/step-00000020", run);
        poison_shards(&st.sh);
        rc = zt_ckpt_load(MPI_COMM_WORLD, p, &st.lay, &m, &st.sh);
        gen_full(&st.lay, 20, st.full);
        CHECK(rc == 0 && shards_match(&st.sh, st.full) && m.step == 20, "%s: explicit step-00000020: %s",
              cases[c][0], rc ? zt_errmsg() : "");
    }
    // A run with another model config is refused, naming every differing field.
    snprintf(run, sizeof run, "%s/run", work);
    zt_model_config other = st.lay.cfg;  // tiny_tied's config, checkpoint is tiny_untied_gqa
    model_state o;
    memset(&o, 0, sizeof o);
    zt_model_layout_init(&o.lay, &other);
    make_shards(&o.lay, g_rank, g_world, &o.sh);
    int rc = zt_ckpt_load(MPI_COMM_WORLD, run, &o.lay, NULL, &o.sh);
    ALL_FAIL(rc, "config mismatch");
    CHECK(rc != 0 && has(zt_errmsg(), "was saved for a different model") &&
              has(zt_errmsg(), "checkpoint has hidden_size 48, the run has 32") &&
              has(zt_errmsg(), "checkpoint has num_key_value_heads 2, the run has 1") &&
              has(zt_errmsg(), "checkpoint has tie_word_embeddings false, the run has true") &&
              has(zt_errmsg(), "vocab_size") && has(zt_errmsg(), "rope_theta"),
          "config mismatch message: %s", zt_errmsg());
    if (g_rank == 0) printf("config mismatch refused: %s\n", zt_errmsg());
    // same shapes, one scalar differs
    state_init(&o, "tiny_untied_gqa");
    o.lay.cfg.rms_norm_eps = 1e-5;
    o.lay.cfg.num_layers = 2;
    rc = zt_ckpt_load(MPI_COMM_WORLD, run, &o.lay, NULL, &o.sh);
    ALL_FAIL(rc, "eps mismatch");
    CHECK(rc != 0 && has(zt_errmsg(), "checkpoint has rms_norm_eps 9.9999999999999995e-07, the run has "
                                      "1.0000000000000001e-05"),
          "%s", zt_errmsg());
}

// ---- corruption (W = 2) ------------------------------------------------------------------

static int64_t dataset_offset(const char *file, const char *ds) {
    hid_t f = H5Fopen(file, H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t d = H5Dopen2(f, ds, H5P_DEFAULT);
    int64_t off = (int64_t)H5Dget_offset(d);
    H5Dclose(d);
    H5Fclose(f);
    return off;
}

// Rewrite one int64 or double attribute of a group (the kind of damage a byte flip
// cannot aim at): a file that is valid HDF5 carrying a value no config.json could.
static void set_attr(const char *file, const char *group, const char *name, int is_f64, double v) {
    hid_t fid = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t g = H5Gopen2(fid, group, H5P_DEFAULT);
    if (fid < 0 || g < 0) zt_fatal("set_attr: cannot open %s %s", file, group);
    H5Adelete(g, name);
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(g, name, is_f64 ? H5T_IEEE_F64LE : H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    int64_t i = (int64_t)v;
    H5Awrite(a, is_f64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64, is_f64 ? (const void *)&v : (const void *)&i);
    H5Aclose(a);
    H5Sclose(sp);
    H5Gclose(g);
    H5Fclose(fid);
}

static void flip_byte(const char *file, int64_t off) {
    FILE *f = fopen(file, "r+b");
    if (!f) zt_fatal("%s: %s", file, strerror(errno));
    fseek(f, off, SEEK_SET);
    int c = fgetc(f);
    fseek(f, off, SEEK_SET);
    fputc(c ^ 0x10, f);
    fclose(f);
}

// ---- --save-io: the three ways the data bytes reach the file --------------------------

// The bytes of every dataset of CKPT/ckpt.h5 (serial HDF5, rank 0): H5Dget_offset + pread, not
// through the loader, so a save that wrote correct values to the wrong place is not forgiven.
static unsigned char *dataset_bytes(const char *ckpt, const zt_model_layout *lay, size_t *n) {
    char f[4400];
    snprintf(f, sizeof f, "%s/ckpt.h5", ckpt);
    hid_t fid = H5Fopen(f, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (fid < 0) return NULL;
    size_t total = 0;
    for (int u = 0; u < lay->nunits; u++) total += (size_t)lay->units[u].numel * 4 * 3;
    unsigned char *out = zt_xmalloc(total), *p = out;
    FILE *fp = fopen(f, "rb");
    for (int u = 0; u < lay->nunits && fp; u++)
        for (int k = 0; k < 3; k++) {
            char ds[64];
            snprintf(ds, sizeof ds, "/units/%03d/%s", u, k == 0 ? "master" : k == 1 ? "adam_m" : "adam_v");
            hid_t d = H5Dopen2(fid, ds, H5P_DEFAULT);
            const haddr_t off = d >= 0 ? H5Dget_offset(d) : HADDR_UNDEF;
            if (d >= 0) H5Dclose(d);
            const size_t len = (size_t)lay->units[u].numel * 4;
            if (off == HADDR_UNDEF || fseeko(fp, (off_t)off, SEEK_SET) != 0 || fread(p, 1, len, fp) != len) memset(p, 0xee, len);
            p += len;
        }
    if (fp) fclose(fp);
    H5Fclose(fid);
    *n = total;
    return out;
}

static void test_save_io(const char *work) {
    // A model big enough that every rank's slice holds whole 4 KiB blocks, at W = 3 so that
    // slices start and end off the 4 KiB grid (O_DIRECT for the middle, pwrite for the ends).
    model_state st;
    state_init(&st, "tiny_untied_gqa");
    zt_model_config cfg = st.lay.cfg;
    cfg.vocab_size = 1000, cfg.hidden_size = 96, cfg.intermediate_size = 200;
    memset(&st, 0, sizeof st);
    zt_model_layout_init(&st.lay, &cfg);
    make_shards(&st.lay, g_rank, g_world, &st.sh);
    const char *names[4] = {"direct", "posix", "mpiio", "direct-fallback"};
    const int modes[4] = {ZT_SAVE_IO_DIRECT, ZT_SAVE_IO_POSIX, ZT_SAVE_IO_MPIIO, ZT_SAVE_IO_DIRECT};
    unsigned char *ref = NULL;
    size_t nref = 0;
    for (int i = 0; i < 4; i++) {
        char run[4096], out[4300];
        snprintf(run, sizeof run, "%s/io-%s", work, names[i]);
        if (g_rank == 0) sh_run("rm -rf '%s'", run);
        MPI_Barrier(MPI_COMM_WORLD);
        zt_ckpt_set_save_io(modes[i]);
        if (i == 3) setenv("ZT_CKPT_DEBUG_NO_ODIRECT", "1", 1);
        int rc = save_step(&st, run, 10, 0, out, sizeof out);
        unsetenv("ZT_CKPT_DEBUG_NO_ODIRECT");
        CHECK(rc == 0, "save with --save-io %s: %s", names[i], zt_errmsg());
        int64_t direct, buffered, mine = 0;
        zt_ckpt_last_save_io(&direct, &buffered);
        for (int u = 0; u < st.sh.nunits; u++) mine += st.sh.unit[u].valid * 4 * 3;
        if (i == 0)
            CHECK(direct > mine / 2 && direct + buffered == mine, "direct: %lld bytes with O_DIRECT, %lld with pwrite, "
                  "of %lld (the whole blocks should go direct)", (long long)direct, (long long)buffered, (long long)mine);
        else if (i == 2)
            CHECK(direct == 0 && buffered == 0, "mpiio: %lld / %lld bytes outside HDF5", (long long)direct,
                  (long long)buffered);
        else
            CHECK(direct == 0 && buffered == mine, "%s: %lld bytes with O_DIRECT, %lld with pwrite, of %lld", names[i],
                  (long long)direct, (long long)buffered, (long long)mine);
        poison_shards(&st.sh);
        zt_ckpt_meta m;
        rc = zt_ckpt_load(MPI_COMM_WORLD, out, &st.lay, &m, &st.sh);  // checks every crc32c chunk
        CHECK(rc == 0 && shards_match(&st.sh, st.full), "%s: loads bit-exact: %s", names[i], rc ? zt_errmsg() : "");
        MPI_Barrier(MPI_COMM_WORLD);
        if (g_rank == 0) {
            size_t n;
            unsigned char *b = dataset_bytes(out, &st.lay, &n);
            CHECK(b != NULL, "%s: cannot read the datasets back", names[i]);
            if (!ref) {
                ref = b, nref = n;
                // the comparison can fail: the bytes are the canonical values, not a constant
                size_t expect = 0;
                for (int u = 0; u < st.lay.nunits; u++) expect += (size_t)st.lay.units[u].numel * 4;
                CHECK(b && memcmp(b, st.full[0][0], 4 * (size_t)st.lay.units[0].numel) == 0 && n == expect * 3,
                      "direct: unit 0's master bytes are the saved values");
            } else {
                CHECK(b && n == nref && memcmp(b, ref, n) == 0, "%s: datasets byte-identical to --save-io direct",
                      names[i]);
                free(b);
            }
        }
    }
    free(ref);
    zt_ckpt_set_save_io(ZT_SAVE_IO_DIRECT);
}

static void test_corrupt(const char *work) {
    char run[2048], dir[2048], file[4200];
    model_state st;
    state_init(&st, "tiny_untied_gqa");
    snprintf(run, sizeof run, "%s/run", work);
    char cdir[1024];
    snprintf(cdir, sizeof cdir, "%s/corrupt", work);
    // Two flips in /units/002/adam_v (20864 elements, crc chunks of 1000): element 1500
    // is verified by rank 0 from its own slice; element 10500 lies in rank 1's slice
    // but in chunk 10, which starts in rank 0's slice, so rank 0 verifies it by reading
    // across the slice boundary.
    const int64_t elems[2] = {1500, 10500}, chunk_of[2] = {1, 10};
    for (int i = 0; i < 2; i++) {
        snprintf(dir, sizeof dir, "%s/flip%d", cdir, i);
        snprintf(file, sizeof file, "%s/ckpt.h5", dir);
        if (g_rank == 0) {
            sh_run("rm -rf '%s' && mkdir -p '%s' && cp -r '%s/checkpoints/step-00000030' '%s'", dir, cdir, run, dir);
            int64_t off = dataset_offset(file, "/units/002/adam_v");
            CHECK(off > 0, "dataset offset");
            flip_byte(file, off + elems[i] * 4 + 2);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        int rc = zt_ckpt_load(MPI_COMM_WORLD, dir, &st.lay, NULL, &st.sh);
        ALL_FAIL(rc, "bit flip");
        char want[64];
        snprintf(want, sizeof want, "crc32c mismatch in chunk %lld", (long long)chunk_of[i]);
        CHECK(rc != 0 && has(zt_errmsg(), "/units/002/adam_v") && has(zt_errmsg(), "unit 2, decoder layer 1") &&
                  has(zt_errmsg(), want) && has(zt_errmsg(), "corrupt"),
              "flip %d: %s", i, zt_errmsg());
        if (g_rank == 0) {
            printf("flip at element %lld refused: %s\n", (long long)elems[i], zt_errmsg());
            FILE *devnull = fopen("/dev/null", "w");
            CHECK(zt_ckpt_inspect(dir, devnull) != 0 && has(zt_errmsg(), "checksum verification failed"),
                  "inspect must report the flip");
            fclose(devnull);
            char out[4200];
            snprintf(out, sizeof out, "%s/export", cdir);
            sh_run("rm -rf '%s'", out);
            // export reads only master, so corrupt master too
            int64_t off = dataset_offset(file, "/units/000/master");
            flip_byte(file, off + 8);
            CHECK(zt_ckpt_export_hf(dir, out, ZT_ST_F32, 0) != 0 && has(zt_errmsg(), "/units/000/master") &&
                      has(zt_errmsg(), "crc32c mismatch"),
                  "export refuses corrupt master: %s", zt_errmsg());
        }
    }
    // Damaged HDF5 metadata (superblock, then an object header): HDF5's own checksums.
    const int64_t meta_off[2] = {40, 2000};
    for (int i = 0; i < 2; i++) {
        snprintf(dir, sizeof dir, "%s/meta%d", cdir, i);
        snprintf(file, sizeof file, "%s/ckpt.h5", dir);
        if (g_rank == 0) {
            sh_run("rm -rf '%s' && cp -r '%s/checkpoints/step-00000030' '%s'", dir, run, dir);
            flip_byte(file, meta_off[i]);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        int rc = zt_ckpt_load(MPI_COMM_WORLD, dir, &st.lay, NULL, &st.sh);
        ALL_FAIL(rc, "metadata flip");
        CHECK(rc != 0 && has(zt_errmsg(), "checksum"), "metadata flip at %lld: %s", (long long)meta_off[i],
              zt_errmsg());
        if (g_rank == 0) printf("metadata flip at byte %lld refused: %s\n", (long long)meta_off[i], zt_errmsg());
    }
    // A model config no config.json could carry (found by tests/fuzz/fuzz_ckpt_meta: 0 kv
    // heads was read and would divide by zero): held to config.json's rules, named.
    const struct { const char *name; int f64; double v; const char *says; } bad_cfg[] = {
        {"num_key_value_heads", 0, 0, "\"num_key_value_heads\" = 0 is outside the range"},
        {"num_hidden_layers", 0, -3, "\"num_hidden_layers\" = -3 is outside the range"},
        {"num_attention_heads", 0, 4294967300.0, "\"num_attention_heads\" = 4294967300 is outside the range"},
        {"rms_norm_eps", 1, -1e-6, "rms_norm_eps must be a finite number > 0"},
        {"tie_word_embeddings", 0, 7, "tie_word_embeddings = 7 must be 0 or 1"},
    };
    for (int i = 0; i < 5; i++) {
        snprintf(dir, sizeof dir, "%s/cfg%d", cdir, i);
        snprintf(file, sizeof file, "%s/ckpt.h5", dir);
        if (g_rank == 0) {
            sh_run("rm -rf '%s' && cp -r '%s/checkpoints/step-00000030' '%s'", dir, run, dir);
            set_attr(file, "model_config", bad_cfg[i].name, bad_cfg[i].f64, bad_cfg[i].v);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        zt_ckpt_meta m;
        zt_model_config c;
        CHECK(zt_ckpt_open_meta(dir, &m, &c, NULL) != 0 && has(zt_errmsg(), "group /model_config") &&
                  has(zt_errmsg(), bad_cfg[i].says),
              "checkpoint config %s = %g: %s", bad_cfg[i].name, bad_cfg[i].v, zt_errmsg());
        if (g_rank == 0 && i == 0) printf("bad model config refused: %s\n", zt_errmsg());
    }
    // Truncated file
    snprintf(dir, sizeof dir, "%s/trunc", cdir);
    snprintf(file, sizeof file, "%s/ckpt.h5", dir);
    if (g_rank == 0) {
        sh_run("rm -rf '%s' && cp -r '%s/checkpoints/step-00000030' '%s'", dir, run, dir);
        struct stat s;
        stat(file, &s);
        if (truncate(file, s.st_size / 2) != 0) zt_fatal("truncate: %s", strerror(errno));
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int rc = zt_ckpt_load(MPI_COMM_WORLD, dir, &st.lay, NULL, &st.sh);
    ALL_FAIL(rc, "truncated");
    CHECK(rc != 0 && has(zt_errmsg(), "truncated"), "truncated: %s", zt_errmsg());
    if (g_rank == 0) printf("truncated file refused: %s\n", zt_errmsg());
    zt_ckpt_meta m;
    CHECK(zt_ckpt_open_meta(dir, &m, NULL, NULL) != 0 && has(zt_errmsg(), "truncated"), "open_meta truncated");
    // latest deleted or dangling, .partial
    char r2[1536];
    snprintf(r2, sizeof r2, "%s/run2", cdir);
    if (g_rank == 0)
        sh_run("rm -rf '%s' && mkdir -p '%s/checkpoints' && cp -r '%s/checkpoints/step-00000030' "
               "'%s/checkpoints/step-00000030' && cp -r '%s/checkpoints/step-00000030' "
               "'%s/checkpoints/step-00000040.partial' && echo step-00000050 > '%s/checkpoints/latest'",
               r2, r2, run, r2, run, r2, r2);
    MPI_Barrier(MPI_COMM_WORLD);
    rc = zt_ckpt_load(MPI_COMM_WORLD, r2, &st.lay, NULL, &st.sh);
    ALL_FAIL(rc, "dangling");
    CHECK(rc != 0 && has(zt_errmsg(), "dangling latest") && has(zt_errmsg(), "step-00000030"), "dangling: %s",
          zt_errmsg());
    if (g_rank == 0) sh_run("rm '%s/checkpoints/latest'", r2);
    MPI_Barrier(MPI_COMM_WORLD);
    rc = zt_ckpt_load(MPI_COMM_WORLD, r2, &st.lay, NULL, &st.sh);
    ALL_FAIL(rc, "missing latest");
    CHECK(rc != 0 && has(zt_errmsg(), "latest is missing") && has(zt_errmsg(), "step-00000030") &&
              !strstr(zt_errmsg(), "step-00000040"),
          "missing latest: %s", zt_errmsg());
    snprintf(dir, sizeof dir, "%s/checkpoints/step-00000040.partial", r2);
    rc = zt_ckpt_load(MPI_COMM_WORLD, dir, &st.lay, NULL, &st.sh);
    ALL_FAIL(rc, "partial");
    CHECK(rc != 0 && has(zt_errmsg(), "incomplete checkpoint (.partial"), ".partial: %s", zt_errmsg());
    if (g_rank == 0) sh_run("echo step-00000040.partial > '%s/checkpoints/latest'", r2);
    MPI_Barrier(MPI_COMM_WORLD);
    rc = zt_ckpt_load(MPI_COMM_WORLD, r2, &st.lay, NULL, &st.sh);
    ALL_FAIL(rc, "latest names partial");
    CHECK(rc != 0 && has(zt_errmsg(), "never loaded"), "latest -> .partial: %s", zt_errmsg());
    // the intact copy still loads
    snprintf(dir, sizeof dir, "%s/checkpoints/step-00000030", r2);
    poison_shards(&st.sh);
    rc = zt_ckpt_load(MPI_COMM_WORLD, dir, &st.lay, NULL, &st.sh);
    gen_full(&st.lay, 30, st.full);
    CHECK(rc == 0 && shards_match(&st.sh, st.full), "intact copy loads: %s", rc ? zt_errmsg() : "");
}

// ---- full disk (W = 2) -------------------------------------------------------------------

static void expect_failed_save(model_state *st, const char *run, int64_t step, const char *why, const char *needle) {
    char out[4300], latest[256];
    int rc = save_step(st, run, step, 0, out, sizeof out);
    ALL_FAIL(rc, why);
    CHECK(rc != 0 && has(zt_errmsg(), needle) && has(zt_errmsg(), "the previous checkpoint step-00000001 is untouched"),
          "%s: %s", why, zt_errmsg());
    if (g_rank == 0) printf("%s: save refused on all ranks: %s\n", why, zt_errmsg());
    CHECK(count_partial(run) == 0, "%s: a .partial directory is left", why);
    read_latest(run, latest, sizeof latest);
    CHECK(!strcmp(latest, "step-00000001"), "%s: latest = %s", why, latest);
    poison_shards(&st->sh);
    rc = zt_ckpt_load(MPI_COMM_WORLD, run, &st->lay, NULL, &st->sh);
    gen_full(&st->lay, 1, st->full);
    CHECK(rc == 0 && shards_match(&st->sh, st->full), "%s: the previous checkpoint still loads: %s", why,
          rc ? zt_errmsg() : "");
}

static void test_fulldisk(const char *dir, const char *mode) {
    char run[4096], out[4300];
    model_state st;
    state_init(&st, "tiny_untied_gqa");
    snprintf(run, sizeof run, "%s/run", dir);
    if (g_rank == 0) sh_run("rm -rf '%s'", run);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(save_step(&st, run, 1, 0, out, sizeof out) == 0, "first save: %s", zt_errmsg());
    if (!strcmp(mode, "tmpfs")) {
        if (g_rank == 0) printf("full disk: a 1 MiB tmpfs mounted at %s\n", dir);
        expect_failed_save(&st, run, 2, "tmpfs, free-space check", "No space left on device");
        setenv("ZT_CKPT_NO_SPACE_CHECK", "1", 1);  // now reserving the file's blocks hits ENOSPC
        expect_failed_save(&st, run, 2, "tmpfs, ENOSPC from the block reservation", "No space left on device");
        setenv("ZT_CKPT_NO_RESERVE", "1", 1);  // and without it, the MPI-IO writes themselves
        expect_failed_save(&st, run, 2, "tmpfs, ENOSPC from the MPI-IO writes", "No space left on device");
        unsetenv("ZT_CKPT_NO_SPACE_CHECK");
        unsetenv("ZT_CKPT_NO_RESERVE");
    } else {
        if (g_rank == 0) printf("full disk: injected write failure (ZT_CKPT_FAIL_AFTER_BYTES) on rank 1 only\n");
        if (g_rank == 1 || g_world == 1) setenv("ZT_CKPT_FAIL_AFTER_BYTES", "30000", 1);
        expect_failed_save(&st, run, 2, "injected ENOSPC on one rank", "No space left on device (injected");
        if (g_world > 1) CHECK(has(zt_errmsg(), "rank 1:"), "names the failing rank: %s", zt_errmsg());
        unsetenv("ZT_CKPT_FAIL_AFTER_BYTES");
        // and once the disk has space again, saving works and prunes
        CHECK(save_step(&st, run, 2, 1, out, sizeof out) == 0, "save after failure: %s", zt_errmsg());
        MPI_Barrier(MPI_COMM_WORLD);
        CHECK(!exists("%s/checkpoints/%s", run, "step-00000001"), "keep_last 1 prunes step 1 after step 2 is complete");
    }
}

// ---- export (serial) ---------------------------------------------------------------------

static int count_files(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d))) n += !strncmp(e->d_name, prefix, strlen(prefix));
    if (d) closedir(d);
    return n;
}

static void test_export(const char *work) {
    const char *cases[2][2] = {{"tiny_untied_gqa", "run"}, {"tiny_tied", "run_tied"}};
    for (int c = 0; c < 2; c++) {
        model_state st;
        state_init(&st, cases[c][0]);
        gen_full(&st.lay, 30, st.full);
        char run[4096], out[4200], p[4400];
        snprintf(run, sizeof run, "%s/%s", work, cases[c][1]);
        float **got = zt_xcalloc((size_t)st.lay.nunits, sizeof(float *));
        for (int u = 0; u < st.lay.nunits; u++) got[u] = zt_xmalloc((size_t)st.lay.units[u].numel * 4);
        // fp32, forced small shards
        snprintf(out, sizeof out, "%s/export_%s_fp32", work, cases[c][0]);
        sh_run("rm -rf '%s'", out);
        double t0 = zt_now();
        CHECK(zt_ckpt_export_hf(run, out, ZT_ST_F32, 20000) == 0, "export fp32: %s", zt_errmsg());
        int nfiles = count_files(out, "model-");
        printf("%s: fp32 export in %.3f s: %d shard files\n", cases[c][0], zt_now() - t0, nfiles);
        CHECK(nfiles >= 2, "a 20 kB limit must give several files, got %d", nfiles);
        CHECK(exists("%s/%s", out, "model.safetensors.index.json") && exists("%s/%s", out, "config.json") &&
                  !exists("%s/%s", out, "model.safetensors"),
              "index.json + config.json");
        CHECK(zt_hf_load(&st.lay, out, got) == 0, "load_hf: %s", zt_errmsg());
        for (int u = 0; u < st.lay.nunits; u++)
            CHECK(!memcmp(got[u], st.full[0][u], (size_t)st.lay.units[u].numel * 4), "fp32 unit %d exact", u);
        zt_model_config cfg;
        char diff[1024];
        CHECK(zt_model_config_load(&cfg, out) == 0 && zt_ckpt_config_diff(&cfg, &st.lay.cfg, diff, sizeof diff) == 0,
              "exported config.json: %s", diff);
        // bf16, default limit: one file
        snprintf(out, sizeof out, "%s/export_%s_bf16", work, cases[c][0]);
        sh_run("rm -rf '%s'", out);
        CHECK(zt_ckpt_export_hf(run, out, ZT_ST_BF16, 0) == 0, "export bf16: %s", zt_errmsg());
        CHECK(exists("%s/%s", out, "model.safetensors") && !exists("%s/%s", out, "model.safetensors.index.json"),
              "single bf16 file");
        CHECK(zt_hf_load(&st.lay, out, got) == 0, "load_hf bf16: %s", zt_errmsg());
        for (int u = 0; u < st.lay.nunits; u++) {
            int64_t bad = 0;
            for (int64_t i = 0; i < st.lay.units[u].numel; i++)
                bad += got[u][i] != zt_bf16_to_f32(zt_f32_to_bf16(st.full[0][u][i]));
            CHECK(bad == 0, "bf16 unit %d: %lld values differ from round-to-nearest-even", u, (long long)bad);
        }
        // a non-empty output directory is refused
        CHECK(zt_ckpt_export_hf(run, out, ZT_ST_BF16, 0) != 0 && has(zt_errmsg(), "not empty"), "non-empty out");
        snprintf(p, sizeof p, "%s/config.json", out);
        for (int u = 0; u < st.lay.nunits; u++) free(got[u]);
        free(got);
    }
}

int main(int argc, char **argv) {
    if (argc < 2) zt_fatal("usage: test_ckpt unit|save|load|corrupt|fulldisk|export WORK [mode]");
    const char *mode = argv[1];
    const char *work = argc > 2 ? argv[2] : ".";
    setenv("ZT_CKPT_CRC_CHUNK", "1000", 1);  // several crc chunks per dataset, crossing slice boundaries
    if (!strcmp(mode, "unit") || !strcmp(mode, "export")) {
        if (zt_mkdirs(work) != 0) zt_die_on_err();
        if (!strcmp(mode, "unit"))
            test_unit(work);
        else
            test_export(work);
        TEST_END();
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_world);
    if (g_rank == 0 && zt_mkdirs(work) != 0) zt_die_on_err();
    MPI_Barrier(MPI_COMM_WORLD);
    if (!strcmp(mode, "save"))
        test_save(work);
    else if (!strcmp(mode, "load"))
        test_load(work);
    else if (!strcmp(mode, "corrupt"))
        test_corrupt(work);
    else if (!strcmp(mode, "saveio"))
        test_save_io(work);
    else if (!strcmp(mode, "fulldisk"))
        test_fulldisk(work, argc > 3 ? argv[3] : "inject");
    else
        zt_fatal("unknown mode %s", mode);
    int fails = zt_test_failures, all;
    MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) printf("rank 0: %d checks, %d failed on this rank, %d on all ranks\n", zt_test_checks, fails, all);
    MPI_Finalize();
    return all ? 1 : 0;
}
