// The process-group checks every backend must pass, written once: tests/unit/test_comm.c runs
// them on the MPI backend (host buffers), tests/unit/test_comm_nccl.c on the NCCL backend
// (device buffers, on a GPU or the CUDA emulator). A backend supplies how its buffers
// are allocated and filled (zt_comm_suite_mem); each test keeps its own checks beside.
// A header, not a .c: the checks count into test_util.h's per-file counters.
// defines: zt_comm_suite_mem, zt_comm_suite_init, zt_comm_suite_info, zt_comm_suite_allgather,
//          zt_comm_suite_reduce_scatter, zt_comm_suite_allreduce, zt_comm_suite_broadcast,
//          zt_comm_suite_barrier, zt_comm_suite_async, zt_comm_suite_large, zt_comm_suite_errors,
//          zt_comm_suite_alltoall
#ifndef ZT_TEST_COMM_SUITE_H
#define ZT_TEST_COMM_SUITE_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/bf16.h"
#include "engine/comm.h"
#include "base/common.h"
#include "tests/support/test_util.h"

// Buffers the backend's collectives read and write.
typedef struct {
    void *(*alloc)(size_t bytes);                               // never NULL (exits on failure)
    void (*release)(void *buf);
    void (*up)(void *buf, const void *host, size_t bytes);      // host -> buffer, usable on return
    void (*down)(void *host, const void *buf, size_t bytes);    // buffer -> host, after zt_wait
    int bf16_reduce;  // the backend reduces bf16 (NCCL); MPI refuses (tests/unit/test_comm.c checks that)
} zt_comm_suite_mem;

static struct {
    zt_comm *c;
    zt_comm_info I;
    const zt_comm_suite_mem *m;
} zt_cs;

#define CS_MUST(x)                                                                                             \
    do {                                                                                                       \
        if ((x) < 0) {                                                                                         \
            fprintf(stderr, "rank %d: %s:%d: %s failed: %s\n", zt_cs.I.rank, __FILE__, __LINE__, #x, zt_errmsg()); \
            exit(2);                                                                                           \
        }                                                                                                      \
    } while (0)

static inline void zt_comm_suite_init(zt_comm *c, const zt_comm_suite_mem *m) {
    zt_cs.c = c;
    zt_cs.m = m;
    zt_comm_get_info(c, &zt_cs.I);
}

static inline void cs_sleep(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

// A buffer holding a copy of host[0, bytes) (host NULL: uninitialised).
static inline void *cs_buf(const void *host, size_t bytes) {
    void *b = zt_cs.m->alloc(bytes);
    if (host && bytes) zt_cs.m->up(b, host, bytes);
    return b;
}
static inline void cs_down(void *host, const void *buf, size_t bytes) {
    if (bytes) zt_cs.m->down(host, buf, bytes);
}
static inline void cs_free(void *b) { zt_cs.m->release(b); }

// Small integers: sums over ranks stay exact in f32 and bf16 (|sum| <= 11 W), so SUM compares with ==.
static inline double cs_val(int r, size_t i) { return (double)((int)((r * 31 + i * 17) % 23) - 11); }

// ---- layout -----------------------------------------------------------------------------
static inline void zt_comm_suite_info(void) {
    const zt_comm_info I = zt_cs.I;
    CHECK(I.world >= 1 && I.rank >= 0 && I.rank < I.world, "rank %d world %d", I.rank, I.world);
    CHECK(I.local_rank >= 0 && I.local_rank < I.local_world, "local %d/%d", I.local_rank, I.local_world);
    CHECK(I.node >= 0 && I.node < I.nnodes, "node %d/%d", I.node, I.nnodes);
    // Everyone's view, gathered: local ranks unique per node, local_world = ranks on
    // the node, nodes numbered by their lowest rank.
    int32_t mine[5] = {I.rank, I.local_rank, I.local_world, I.node, I.nnodes};
    int32_t *all = zt_xcalloc((size_t)I.world * 5, sizeof *all);
    void *dmine = cs_buf(mine, sizeof mine), *dall = cs_buf(NULL, (size_t)I.world * 5 * 4);
    CS_MUST(zt_allgather(zt_cs.c, dmine, dall, 5, ZT_DT_I32, "node info"));
    cs_down(all, dall, (size_t)I.world * 5 * 4);
    char host[64] = {0}, *hosts = zt_xcalloc((size_t)I.world, 64);
    gethostname(host, sizeof host - 1);
    void *dhost = cs_buf(host, 64), *dhosts = cs_buf(NULL, (size_t)I.world * 64);
    CS_MUST(zt_allgather(zt_cs.c, dhost, dhosts, 64, ZT_DT_U8, "host names"));
    cs_down(hosts, dhosts, (size_t)I.world * 64);
    int one_host = 1, next_node = 0;
    for (int r = 0; r < I.world; r++) {
        const int32_t *v = &all[r * 5];
        CHECK(v[0] == r && v[4] == I.nnodes, "rank %d reports rank %d nnodes %d", r, v[0], v[4]);
        if (strcmp(hosts + 64 * r, host) != 0) one_host = 0;
        int on_node = 0, seen_local = 0;
        for (int q = 0; q < I.world; q++)
            if (all[q * 5 + 3] == v[3]) {
                on_node++;
                if (all[q * 5 + 1] == v[1]) seen_local++;
            }
        CHECK(on_node == v[2] && seen_local == 1, "rank %d: node %d has %d ranks, local_world %d", r, v[3], on_node,
              v[2]);
        if (v[3] == next_node) next_node++;  // first appearance in rank order
        CHECK(v[3] < next_node, "rank %d: node %d numbered out of rank order", r, v[3]);
    }
    if (one_host)
        CHECK(I.nnodes == 1 && I.node == 0 && I.local_world == I.world && I.local_rank == I.rank,
              "one host: node %d/%d local %d/%d", I.node, I.nnodes, I.local_rank, I.local_world);
    free(all);
    free(hosts);
    cs_free(dmine), cs_free(dall), cs_free(dhost), cs_free(dhosts);
}

// ---- all-gather -------------------------------------------------------------------------
static inline void zt_comm_suite_allgather(void) {
    const zt_comm_info I = zt_cs.I;
    const size_t n = 7;  // odd on purpose
    size_t W = (size_t)I.world;
    float *sf = zt_xmalloc(n * 4), *rf = zt_xmalloc(W * n * 4);
    int64_t *si = zt_xmalloc(n * 8), *ri = zt_xmalloc(W * n * 8);
    uint16_t *sb = zt_xmalloc(n * 2), *rb = zt_xmalloc(W * n * 2);
    uint8_t *su = zt_xmalloc(n), *ru = zt_xmalloc(W * n);
    for (size_t i = 0; i < n; i++) {
        sf[i] = (float)(I.rank * 1000 + i);
        si[i] = (int64_t)I.rank << 40 | (int64_t)i;
        sb[i] = (uint16_t)(0x3f80 + I.rank * 16 + i);  // arbitrary bf16 bit patterns
        su[i] = (uint8_t)(I.rank * 7 + i);
    }
    void *dsf = cs_buf(sf, n * 4), *drf = cs_buf(NULL, W * n * 4), *dsi = cs_buf(si, n * 8), *dri = cs_buf(NULL, W * n * 8);
    void *dsb = cs_buf(sb, n * 2), *drb = cs_buf(NULL, W * n * 2), *dsu = cs_buf(su, n), *dru = cs_buf(NULL, W * n);
    CS_MUST(zt_allgather(zt_cs.c, dsf, drf, n, ZT_DT_F32, "ag f32"));
    CS_MUST(zt_allgather(zt_cs.c, dsi, dri, n, ZT_DT_I64, "ag i64"));
    CS_MUST(zt_allgather(zt_cs.c, dsb, drb, n, ZT_DT_BF16, "ag bf16"));
    CS_MUST(zt_allgather(zt_cs.c, dsu, dru, n, ZT_DT_U8, "ag u8"));
    cs_down(rf, drf, W * n * 4), cs_down(ri, dri, W * n * 8), cs_down(rb, drb, W * n * 2), cs_down(ru, dru, W * n);
    int bad = 0;
    for (size_t r = 0; r < W; r++)
        for (size_t i = 0; i < n; i++) {
            bad += rf[r * n + i] != (float)(r * 1000 + i);
            bad += ri[r * n + i] != ((int64_t)r << 40 | (int64_t)i);
            bad += rb[r * n + i] != (uint16_t)(0x3f80 + r * 16 + i);
            bad += ru[r * n + i] != (uint8_t)(r * 7 + i);
        }
    CHECK(bad == 0, "allgather: %d wrong elements", bad);
    // In place: the shard already sits at its offset in the full buffer (the FSDP case).
    for (size_t i = 0; i < W * n; i++) rf[i] = -1;
    for (size_t i = 0; i < n; i++) rf[(size_t)I.rank * n + i] = (float)(I.rank * 1000 + i) + 0.5f;
    zt_cs.m->up(drf, rf, W * n * 4);
    CS_MUST(zt_allgather(zt_cs.c, (float *)drf + (size_t)I.rank * n, drf, n, ZT_DT_F32, "ag in place"));
    cs_down(rf, drf, W * n * 4);
    bad = 0;
    for (size_t r = 0; r < W; r++)
        for (size_t i = 0; i < n; i++) bad += rf[r * n + i] != (float)(r * 1000 + i) + 0.5f;
    CHECK(bad == 0, "allgather in place: %d wrong elements", bad);
    CS_MUST(zt_allgather(zt_cs.c, NULL, NULL, 0, ZT_DT_F32, "ag empty"));
    free(sf), free(rf), free(si), free(ri), free(sb), free(rb), free(su), free(ru);
    cs_free(dsf), cs_free(drf), cs_free(dsi), cs_free(dri), cs_free(dsb), cs_free(drb), cs_free(dsu), cs_free(dru);
}

// ---- all-to-all ---------------------------------------------------------------------------
// Uneven counts (zeros among them) from every rank to every rank, against a naive reference: every
// rank's whole send buffer all-gathered, each rank cutting out the blocks meant for it. Then the
// flight recorder's record of it (op "alltoall", the data channel, count = the elements sent).
static inline size_t cs_a2a_count(int from, int to) { return (size_t)((from * 3 + to * 5 + 1) % 7); }

static inline void zt_comm_suite_alltoall(void) {
    const zt_comm_info I = zt_cs.I;
    const int W = I.world;
    size_t *sc = zt_xcalloc((size_t)W * 2, sizeof(size_t)), *rc = sc + W, ns = 0, nr = 0, most = 0;
    for (int r = 0; r < W; r++) {
        sc[r] = cs_a2a_count(I.rank, r), rc[r] = cs_a2a_count(r, I.rank), ns += sc[r], nr += rc[r];
        for (int q = 0; q < W; q++) {
            size_t t = 0;
            for (int k = 0; k < W; k++) t += cs_a2a_count(q, k);
            most = t > most ? t : most;
        }
    }
    float *send = zt_xcalloc(most + 1, 4), *recv = zt_xcalloc(nr + 1, 4), *all = zt_xcalloc((size_t)W * most + 1, 4);
    for (size_t i = 0; i < ns; i++) send[i] = (float)(I.rank * 1000 + (int)i) + 0.25f;
    void *ds = cs_buf(send, (most + 1) * 4), *dr = cs_buf(NULL, (nr + 1) * 4);
    void *da = cs_buf(NULL, ((size_t)W * most + 1) * 4);
    CS_MUST(zt_alltoall(zt_cs.c, ds, sc, dr, rc, ZT_DT_F32, "a2a f32"));
    char *js = NULL;
    size_t jn = 0;
    FILE *m = open_memstream(&js, &jn);
    CS_MUST(zt_comm_dump_flight(zt_cs.c, m));
    fclose(m);
    char want[160];
    snprintf(want, sizeof want, "%s", "\"op\": \"alltoall\", \"label\": \"a2a f32\", \"state\": \"done\", "
                                      "\"channel\": \"data\"");
    char cnt[64];
    snprintf(cnt, sizeof cnt, "\"count\": %zu, \"bytes\": %zu", ns, ns * 4);
    const char *at = strstr(js, want);
    CHECK(at && strstr(at, cnt) && strstr(at, cnt) < strstr(at, "}"), "alltoall's flight record (want %s, %s): %.300s",
          want, cnt, at ? at : js);
    free(js);
    cs_down(recv, dr, nr * 4);
    // the naive reference: every rank's whole send buffer, then rank s's block for me at sum_{k < me} count(s, k)
    CS_MUST(zt_allgather(zt_cs.c, ds, da, most, ZT_DT_F32, "a2a reference"));
    cs_down(all, da, (size_t)W * most * 4);
    int bad = 0;
    size_t at_r = 0;
    for (int s = 0; s < W; s++) {
        size_t off = 0;
        for (int k = 0; k < I.rank; k++) off += cs_a2a_count(s, k);
        for (size_t i = 0; i < rc[s]; i++) bad += recv[at_r + i] != all[(size_t)s * most + off + i];
        at_r += rc[s];
    }
    CHECK(bad == 0 && at_r == nr, "alltoall: %d of %zu elements differ from the reference", bad, nr);
    // i64 (whole words moved), and refusals: overlapping buffers, NULL counts
    int64_t *si = zt_xcalloc(ns + 1, 8), *ri = zt_xcalloc(nr + 1, 8);
    for (size_t i = 0; i < ns; i++) si[i] = (int64_t)I.rank << 40 | (int64_t)i;
    void *dsi = cs_buf(si, (ns + 1) * 8), *dri = cs_buf(NULL, (nr + 1) * 8);
    CS_MUST(zt_alltoall(zt_cs.c, dsi, sc, dri, rc, ZT_DT_I64, "a2a i64"));
    cs_down(ri, dri, nr * 8);
    bad = 0, at_r = 0;
    for (int s = 0; s < W; s++) {
        size_t off = 0;
        for (int k = 0; k < I.rank; k++) off += cs_a2a_count(s, k);
        for (size_t i = 0; i < rc[s]; i++) bad += ri[at_r + i] != ((int64_t)s << 40 | (int64_t)(off + i));
        at_r += rc[s];
    }
    CHECK(bad == 0, "alltoall i64: %d wrong elements", bad);
    if (ns && nr)
        CHECK(!zt_ialltoall(zt_cs.c, ds, sc, ds, rc, ZT_DT_F32, "a2a overlap") && strstr(zt_errmsg(), "overlap"),
              "overlapping alltoall: %s", zt_errmsg());
    CHECK(!zt_ialltoall(zt_cs.c, ds, NULL, dr, rc, ZT_DT_F32, "a2a no counts") && strstr(zt_errmsg(), "NULL counts"),
          "alltoall without counts: %s", zt_errmsg());
    free(send), free(recv), free(all), free(sc), free(si), free(ri);
    cs_free(ds), cs_free(dr), cs_free(da), cs_free(dsi), cs_free(dri);
}

// ---- reduce-scatter ---------------------------------------------------------------------
static inline void zt_comm_suite_reduce_scatter(void) {
    const zt_comm_info I = zt_cs.I;
    zt_comm *C = zt_cs.c;
    const size_t n = 5;
    size_t W = (size_t)I.world;
    float *sf = zt_xmalloc(W * n * 4), rf[5], ef[5], af[5];
    double *sd = zt_xmalloc(W * n * 8), rd[5], ad[5];
    int64_t *si = zt_xmalloc(W * n * 8), ri[5], mi[5];
    uint16_t *sb = zt_xmalloc(W * n * 2), rb[5];
    for (size_t j = 0; j < W * n; j++) {
        sf[j] = (float)cs_val(I.rank, j);
        sd[j] = cs_val(I.rank, j) + 0.25;
        si[j] = (int64_t)cs_val(I.rank, j) * 1000000007LL;
        sb[j] = zt_f32_to_bf16((float)cs_val(I.rank, j));
    }
    void *dsf = cs_buf(sf, W * n * 4), *dsd = cs_buf(sd, W * n * 8), *dsi = cs_buf(si, W * n * 8);
    void *drf = cs_buf(NULL, n * 4), *daf = cs_buf(NULL, n * 4), *drd = cs_buf(NULL, n * 8), *dad = cs_buf(NULL, n * 8);
    void *dri = cs_buf(NULL, n * 8), *dmi = cs_buf(NULL, n * 8);
    CS_MUST(zt_reduce_scatter(C, dsf, drf, n, ZT_DT_F32, ZT_RED_SUM, "rs f32 sum"));
    CS_MUST(zt_reduce_scatter(C, dsf, daf, n, ZT_DT_F32, ZT_RED_AVG, "rs f32 avg"));
    CS_MUST(zt_reduce_scatter(C, dsd, drd, n, ZT_DT_F64, ZT_RED_SUM, "rs f64 sum"));
    CS_MUST(zt_reduce_scatter(C, dsd, dad, n, ZT_DT_F64, ZT_RED_AVG, "rs f64 avg"));
    CS_MUST(zt_reduce_scatter(C, dsi, dri, n, ZT_DT_I64, ZT_RED_SUM, "rs i64 sum"));
    CS_MUST(zt_reduce_scatter(C, dsi, dmi, n, ZT_DT_I64, ZT_RED_MAX, "rs i64 max"));
    void *dsb = NULL, *drb = NULL;
    if (zt_cs.m->bf16_reduce) {
        dsb = cs_buf(sb, W * n * 2), drb = cs_buf(NULL, n * 2);
        CS_MUST(zt_reduce_scatter(C, dsb, drb, n, ZT_DT_BF16, ZT_RED_SUM, "rs bf16 sum"));
        cs_down(rb, drb, n * 2);
    }
    cs_down(rf, drf, n * 4), cs_down(af, daf, n * 4), cs_down(rd, drd, n * 8), cs_down(ad, dad, n * 8);
    cs_down(ri, dri, n * 8), cs_down(mi, dmi, n * 8);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = (size_t)I.rank * n + i;
        double s = 0, mx = -1e300;
        for (int r = 0; r < I.world; r++) {
            s += cs_val(r, j);
            if (cs_val(r, j) > mx) mx = cs_val(r, j);
        }
        ef[i] = (float)s;
        bad += rf[i] != ef[i];
        bad += rd[i] != s + 0.25 * I.world;
        bad += fabs(ad[i] - (s + 0.25 * I.world) / I.world) > 1e-12;
        bad += ri[i] != (int64_t)s * 1000000007LL;
        bad += mi[i] != (int64_t)mx * 1000000007LL;
        if (zt_cs.m->bf16_reduce) bad += zt_bf16_to_f32(rb[i]) != (float)s;
        af[i] *= (float)I.world;  // compare avg * world against the sum
    }
    CHECK(bad == 0, "reduce_scatter: %d wrong elements", bad);
    CHECK_CLOSE("reduce_scatter f32 avg", af, ef, (int64_t)n, 1e-6);
    free(sf), free(sd), free(si), free(sb);
    cs_free(dsf), cs_free(dsd), cs_free(dsi), cs_free(drf), cs_free(daf), cs_free(drd), cs_free(dad), cs_free(dri),
        cs_free(dmi);
    if (dsb) cs_free(dsb), cs_free(drb);
}

// ---- all-reduce -------------------------------------------------------------------------
// Every reduction on f32, f64 and i64, half of them in place, then avg.
static inline void cs_allreduce_grid(void) {
    const zt_comm_info I = zt_cs.I;
    enum { N = 13 };
    typedef union {
        float f[N];
        double d[N];
        int64_t i[N];
    } buf;
    const zt_red reds[] = {ZT_RED_SUM, ZT_RED_MIN, ZT_RED_MAX};
    const zt_dtype dts[] = {ZT_DT_F32, ZT_DT_F64, ZT_DT_I64};
    void *dsend = cs_buf(NULL, sizeof(buf)), *drecv = cs_buf(NULL, sizeof(buf));
    int bad = 0;
    for (int k = 0; k < 3; k++)
        for (int t = 0; t < 3; t++) {
            buf send, got_buf;
            double expect[N];
            for (int i = 0; i < N; i++) {
                double e = k == 1 ? 1e300 : k == 2 ? -1e300 : 0;
                for (int r = 0; r < I.world; r++) {
                    double v = cs_val(r, (size_t)i);
                    e = k == 0 ? e + v : k == 1 ? (v < e ? v : e) : (v > e ? v : e);
                }
                expect[i] = e;
                double v = cs_val(I.rank, (size_t)i);
                if (dts[t] == ZT_DT_F32) send.f[i] = (float)v;
                if (dts[t] == ZT_DT_F64) send.d[i] = v;
                if (dts[t] == ZT_DT_I64) send.i[i] = (int64_t)v;
            }
            const size_t bytes = N * zt_dtype_size(dts[t]);  // the union's bytes in use
            zt_cs.m->up(dsend, &send, bytes);
            int in_place = (k + t) % 2;  // half the cases reduce in place
            void *out = in_place ? dsend : drecv;
            char label[48];
            snprintf(label, sizeof label, "ar %s %s%s", zt_dtype_name(dts[t]), zt_red_name(reds[k]),
                     in_place ? " in place" : "");
            CS_MUST(zt_allreduce(zt_cs.c, dsend, out, N, dts[t], reds[k], label));
            cs_down(&got_buf, out, bytes);
            for (int i = 0; i < N; i++) {
                double got = dts[t] == ZT_DT_F32   ? (double)got_buf.f[i]
                             : dts[t] == ZT_DT_F64 ? got_buf.d[i]
                                                   : (double)got_buf.i[i];
                if (got != expect[i] && bad++ < 5)
                    fprintf(stderr, "rank %d %s [%d]: %g != %g\n", I.rank, label, i, got, expect[i]);
            }
        }
    CHECK(bad == 0, "allreduce sum/min/max: %d wrong elements", bad);
    float a[N], e[N];
    for (int i = 0; i < N; i++) {
        a[i] = (float)cs_val(I.rank, (size_t)i);
        double s = 0;
        for (int r = 0; r < I.world; r++) s += cs_val(r, (size_t)i);
        e[i] = (float)(s / I.world);
    }
    zt_cs.m->up(dsend, a, sizeof a);
    CS_MUST(zt_allreduce(zt_cs.c, dsend, dsend, N, ZT_DT_F32, ZT_RED_AVG, "ar f32 avg"));
    cs_down(a, dsend, sizeof a);
    CHECK_CLOSE("allreduce f32 avg", a, e, N, 1e-6);
    cs_free(dsend), cs_free(drecv);
}

// The other dtypes (i32, u8) and f64 avg in place, each into its own output.
static inline void cs_allreduce_mixed(void) {
    const zt_comm_info I = zt_cs.I;
    zt_comm *C = zt_cs.c;
    enum { N = 13 };
    float f[N], fs[N], fmn[N], fmx[N];
    int32_t i32[N], i32s[N];
    int64_t i64[N], i64mn[N];
    uint8_t u8[N], u8mx[N];
    double d[N], davg[N];
    for (int i = 0; i < N; i++) {
        f[i] = (float)cs_val(I.rank, (size_t)i);
        i32[i] = (int32_t)cs_val(I.rank, (size_t)i) * 1000;
        i64[i] = (int64_t)cs_val(I.rank, (size_t)i) << 33;
        u8[i] = (uint8_t)(cs_val(I.rank, (size_t)i) + 11);
        d[i] = cs_val(I.rank, (size_t)i) * 0.5;
    }
    void *df = cs_buf(f, sizeof f), *dfs = cs_buf(NULL, sizeof f), *dfmn = cs_buf(NULL, sizeof f),
         *dfmx = cs_buf(NULL, sizeof f), *di32 = cs_buf(i32, sizeof i32), *di64 = cs_buf(i64, sizeof i64),
         *di64mn = cs_buf(NULL, sizeof i64), *du8 = cs_buf(u8, sizeof u8), *du8mx = cs_buf(NULL, sizeof u8),
         *dd = cs_buf(d, sizeof d);
    CS_MUST(zt_allreduce(C, df, dfs, N, ZT_DT_F32, ZT_RED_SUM, "ar f32 sum"));
    CS_MUST(zt_allreduce(C, df, dfmn, N, ZT_DT_F32, ZT_RED_MIN, "ar f32 min"));
    CS_MUST(zt_allreduce(C, df, dfmx, N, ZT_DT_F32, ZT_RED_MAX, "ar f32 max"));
    CS_MUST(zt_allreduce(C, di32, di32, N, ZT_DT_I32, ZT_RED_SUM, "ar i32 sum in place"));
    CS_MUST(zt_allreduce(C, di64, di64mn, N, ZT_DT_I64, ZT_RED_MIN, "ar i64 min"));
    CS_MUST(zt_allreduce(C, du8, du8mx, N, ZT_DT_U8, ZT_RED_MAX, "ar u8 max"));
    CS_MUST(zt_allreduce(C, dd, dd, N, ZT_DT_F64, ZT_RED_AVG, "ar f64 avg in place"));
    cs_down(fs, dfs, sizeof fs), cs_down(fmn, dfmn, sizeof fmn), cs_down(fmx, dfmx, sizeof fmx);
    cs_down(i32s, di32, sizeof i32s), cs_down(i64mn, di64mn, sizeof i64mn), cs_down(u8mx, du8mx, sizeof u8mx);
    cs_down(davg, dd, sizeof davg);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        double s = 0, mn = 1e300, mx = -1e300;
        for (int r = 0; r < I.world; r++) {
            double v = cs_val(r, (size_t)i);
            s += v;
            if (v < mn) mn = v;
            if (v > mx) mx = v;
        }
        bad += fs[i] != (float)s;
        bad += fmn[i] != (float)mn;
        bad += fmx[i] != (float)mx;
        bad += i32s[i] != (int32_t)s * 1000;
        bad += i64mn[i] != (int64_t)mn * ((int64_t)1 << 33);
        bad += u8mx[i] != (uint8_t)(mx + 11);
        bad += fabs(davg[i] - s * 0.5 / I.world) > 1e-12;
    }
    CHECK(bad == 0, "allreduce: %d wrong elements", bad);
    cs_free(df), cs_free(dfs), cs_free(dfmn), cs_free(dfmx), cs_free(di32), cs_free(di64), cs_free(di64mn),
        cs_free(du8), cs_free(du8mx), cs_free(dd);
}

static inline void zt_comm_suite_allreduce(void) {
    cs_allreduce_grid();
    cs_allreduce_mixed();
}

// ---- broadcast --------------------------------------------------------------------------
static inline void zt_comm_suite_broadcast(void) {
    const zt_comm_info I = zt_cs.I;
    // f64 and bf16 words from the last rank and from rank 1 (0 at a world of 1).
    int roots[2] = {I.world - 1, 1 % I.world};
    void *dd = cs_buf(NULL, 9 * 8), *db = cs_buf(NULL, 3 * 2);
    for (int k = 0; k < 2; k++) {
        int root = roots[k];
        double d[9];
        uint16_t b[3];
        for (int i = 0; i < 9; i++) d[i] = I.rank == root ? 100.0 * root + i : -1;
        for (int i = 0; i < 3; i++) b[i] = I.rank == root ? (uint16_t)(0x4000 + root + i) : 0;
        zt_cs.m->up(dd, d, sizeof d), zt_cs.m->up(db, b, sizeof b);
        CS_MUST(zt_broadcast(zt_cs.c, dd, 9, ZT_DT_F64, root, "bcast f64"));
        CS_MUST(zt_broadcast(zt_cs.c, db, 3, ZT_DT_BF16, root, "bcast bf16"));
        cs_down(d, dd, sizeof d), cs_down(b, db, sizeof b);
        int bad = 0;
        for (int i = 0; i < 9; i++) bad += d[i] != 100.0 * root + i;
        for (int i = 0; i < 3; i++) bad += b[i] != (uint16_t)(0x4000 + root + i);
        CHECK(bad == 0, "broadcast from root %d: %d wrong", root, bad);
    }
    cs_free(dd), cs_free(db);
    // f32 and u8 from every root, every rank starting with its own values.
    enum { N = 9 };
    void *df = cs_buf(NULL, N * 4), *du = cs_buf(NULL, N);
    for (int root = 0; root < I.world; root++) {
        float f[N];
        uint8_t u[N];
        for (int i = 0; i < N; i++) {
            f[i] = (float)(I.rank * 100 + i);  // every rank has its own values; root's must win
            u[i] = (uint8_t)(I.rank * 10 + i);
        }
        zt_cs.m->up(df, f, sizeof f), zt_cs.m->up(du, u, sizeof u);
        CS_MUST(zt_broadcast(zt_cs.c, df, N, ZT_DT_F32, root, "bcast f32"));
        CS_MUST(zt_broadcast(zt_cs.c, du, N, ZT_DT_U8, root, "bcast u8"));
        cs_down(f, df, sizeof f), cs_down(u, du, sizeof u);
        int bad = 0;
        for (int i = 0; i < N; i++) bad += f[i] != (float)(root * 100 + i) || u[i] != (uint8_t)(root * 10 + i);
        CHECK(bad == 0, "broadcast from root %d: %d wrong elements", root, bad);
    }
    cs_free(df), cs_free(du);
}

// ---- barrier ----------------------------------------------------------------------------
static inline void zt_comm_suite_barrier(void) {
    for (int k = 0; k < 3; k++) {
        if (zt_cs.I.rank == k % zt_cs.I.world) cs_sleep(0.05);  // a late rank: the others wait for it
        CS_MUST(zt_barrier(zt_cs.c, "barrier"));
    }
    CHECK(1, "barriers returned");
}

// ---- async ------------------------------------------------------------------------------
// Several collectives in flight on both channels at once, waited in a different order
// on each rank, one polled with zt_test first (overlap-style).
static inline void cs_async_mixed(void) {
    const zt_comm_info I = zt_cs.I;
    zt_comm *C = zt_cs.c;
    const size_t n = 11;
    size_t W = (size_t)I.world;
    float *ag_s = zt_xmalloc(n * 4), *ag_r = zt_xmalloc(W * n * 4), *rs_s = zt_xmalloc(W * n * 4), rs_r[11];
    double ar[3] = {I.rank, 1, -I.rank};
    int64_t bc[4];
    float *ag2_r = zt_xmalloc(W * n * 4);
    for (size_t i = 0; i < n; i++) ag_s[i] = (float)(I.rank + 10 * i);
    for (size_t j = 0; j < W * n; j++) rs_s[j] = (float)(j + I.rank);
    for (int i = 0; i < 4; i++) bc[i] = I.rank == 0 ? 77 + i : 0;
    void *dag_s = cs_buf(ag_s, n * 4), *dag_r = cs_buf(NULL, W * n * 4), *drs_s = cs_buf(rs_s, W * n * 4),
         *drs_r = cs_buf(NULL, n * 4), *dar = cs_buf(ar, sizeof ar), *dbc = cs_buf(bc, sizeof bc),
         *dag2_r = cs_buf(NULL, W * n * 4);
    zt_req *q[6];
    q[0] = zt_iallgather(C, dag_s, dag_r, n, ZT_DT_F32, "async ag");
    q[1] = zt_ireduce_scatter(C, drs_s, drs_r, n, ZT_DT_F32, ZT_RED_SUM, "async rs");
    q[2] = zt_iallreduce(C, dar, dar, 3, ZT_DT_F64, ZT_RED_SUM, "async ar");
    q[3] = zt_ibroadcast(C, dbc, 4, ZT_DT_I64, 0, "async bcast");
    q[4] = zt_ibarrier(C, "async barrier");
    q[5] = zt_iallgather(C, dag_s, dag2_r, n, ZT_DT_F32, "async ag 2");
    for (int i = 0; i < 6; i++) CHECK(q[i] != NULL, "async issue %d: %s", i, zt_errmsg());
    // Rank-dependent wait orders: forward, reverse, and interleaved.
    static const int orders[3][6] = {{0, 1, 2, 3, 4, 5}, {5, 4, 3, 2, 1, 0}, {3, 0, 5, 1, 4, 2}};
    const int *ord = orders[I.rank % 3];
    int done = 0;
    for (int spins = 0; !done && spins < 10000000; spins++) {
        CS_MUST(zt_test(C, q[ord[0]], &done));
        zt_comm_progress(C);
    }
    CHECK(done, "zt_test never reported completion");
    for (int i = 0; i < 6; i++) CS_MUST(zt_wait(C, q[ord[i]]));
    cs_down(ag_r, dag_r, W * n * 4), cs_down(ag2_r, dag2_r, W * n * 4), cs_down(rs_r, drs_r, n * 4);
    cs_down(ar, dar, sizeof ar), cs_down(bc, dbc, sizeof bc);
    int bad = 0;
    for (size_t r = 0; r < W; r++)
        for (size_t i = 0; i < n; i++) {
            bad += ag_r[r * n + i] != (float)(r + 10 * i);
            bad += ag2_r[r * n + i] != (float)(r + 10 * i);
        }
    for (size_t i = 0; i < n; i++) {
        double s = 0;
        for (size_t r = 0; r < W; r++) s += (double)((size_t)I.rank * n + i + r);
        bad += rs_r[i] != (float)s;
    }
    double sr = (double)(W * (W - 1)) / 2;
    bad += ar[0] != sr || ar[1] != (double)W || ar[2] != -sr;
    for (int i = 0; i < 4; i++) bad += bc[i] != 77 + i;
    CHECK(bad == 0, "async: %d wrong", bad);
    free(ag_s), free(ag_r), free(rs_s), free(ag2_r);
    cs_free(dag_s), cs_free(dag_r), cs_free(drs_s), cs_free(drs_r), cs_free(dar), cs_free(dbc), cs_free(dag2_r);
}

// Many all-gathers and reduce-scatters outstanding on the data channel with an
// all-reduce and a barrier on the ctrl channel; the newest polled, the rest waited in
// reverse order.
static inline void cs_async_many(void) {
    const zt_comm_info I = zt_cs.I;
    zt_comm *C = zt_cs.c;
    enum { K = 6, RS = 3, N = 1000 };
    size_t W = (size_t)I.world;
    float *hs = zt_xmalloc(K * N * 4), *hr = zt_xmalloc(W * N * 4), *hg = zt_xmalloc(W * N * 4);
    void *ds[K], *dr[K], *dg[RS], *dq[RS];
    zt_req *ag[K], *rs[RS];
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < N; i++) hs[k * N + i] = (float)(k * 100000 + I.rank * 1000 + i);
        ds[k] = cs_buf(hs + k * N, N * 4), dr[k] = cs_buf(NULL, W * N * 4);
    }
    for (int k = 0; k < RS; k++) {
        for (size_t j = 0; j < W * N; j++) hg[j] = (float)cs_val(I.rank + k, j);
        dg[k] = cs_buf(hg, W * N * 4), dq[k] = cs_buf(NULL, N * 4);
    }
    int32_t one = I.rank + 1;
    void *dsum = cs_buf(&one, 4);
    for (int k = 0; k < K; k++) {
        char label[32];
        snprintf(label, sizeof label, "async ag %d", k);
        ag[k] = zt_iallgather(C, ds[k], dr[k], N, ZT_DT_F32, label);
        if (!ag[k]) CS_MUST(-1);
        if (k < RS) {
            snprintf(label, sizeof label, "async rs %d", k);
            rs[k] = zt_ireduce_scatter(C, dg[k], dq[k], N, ZT_DT_F32, ZT_RED_SUM, label);
            if (!rs[k]) CS_MUST(-1);
        }
    }
    zt_req *ar = zt_iallreduce(C, dsum, dsum, 1, ZT_DT_I32, ZT_RED_SUM, "async ar");
    zt_req *bar = zt_ibarrier(C, "async barrier");
    if (!ar || !bar) CS_MUST(-1);
    int done = 0;
    double t0 = zt_now();
    while (!done && zt_now() - t0 < 60) {
        CS_MUST(zt_test(C, ag[K - 1], &done));
        zt_comm_progress(C);
    }
    CHECK(done, "zt_test never saw the last all-gather complete");
    CS_MUST(zt_wait(C, bar));
    CS_MUST(zt_wait(C, ar));
    for (int k = RS - 1; k >= 0; k--) CS_MUST(zt_wait(C, rs[k]));
    for (int k = K - 1; k >= 0; k--) CS_MUST(zt_wait(C, ag[k]));
    int bad = 0;
    for (int k = 0; k < K; k++) {
        cs_down(hr, dr[k], W * N * 4);
        for (size_t r = 0; r < W; r++)
            for (int i = 0; i < N; i++) bad += hr[r * N + i] != (float)(k * 100000 + r * 1000 + i);
    }
    for (int k = 0; k < RS; k++) {
        cs_down(hr, dq[k], N * 4);
        for (int i = 0; i < N; i++) {
            size_t j = (size_t)I.rank * N + i;
            double s = 0;
            for (int r = 0; r < I.world; r++) s += cs_val(r + k, j);
            bad += hr[i] != (float)s;
        }
    }
    int32_t sum = 0;
    cs_down(&sum, dsum, 4);
    bad += sum != I.world * (I.world + 1) / 2;
    CHECK(bad == 0, "async: %d wrong elements", bad);
    for (int k = 0; k < K; k++) cs_free(ds[k]), cs_free(dr[k]);
    for (int k = 0; k < RS; k++) cs_free(dg[k]), cs_free(dq[k]);
    cs_free(dsum);
    free(hs), free(hr), free(hg);
}

static inline void zt_comm_suite_async(void) {
    cs_async_mixed();
    cs_async_many();
}

// ---- large buffers ----------------------------------------------------------------------
static inline void zt_comm_suite_large(void) {
    const zt_comm_info I = zt_cs.I;
    zt_comm *C = zt_cs.c;
    size_t W = (size_t)I.world;
    {  // all-gather then reduce-scatter avg of 1 MiB of f32 per rank, async
        const size_t n = 1 << 18;
        float *shard = zt_xmalloc(n * 4), *back = zt_xmalloc(n * 4);
        for (size_t i = 0; i < n; i++) shard[i] = (float)((i * 7 + (size_t)I.rank) % 1000);
        void *dshard = cs_buf(shard, n * 4), *dfull = cs_buf(NULL, W * n * 4), *dback = cs_buf(NULL, n * 4);
        zt_req *g = zt_iallgather(C, dshard, dfull, n, ZT_DT_F32, "large ag");
        CS_MUST(zt_wait(C, g));
        zt_req *s = zt_ireduce_scatter(C, dfull, dback, n, ZT_DT_F32, ZT_RED_AVG, "large rs avg");
        CS_MUST(zt_wait(C, s));
        cs_down(back, dback, n * 4);
        // Every rank gathered the same full vector, so the average of block r is block r.
        int bad = 0;
        for (size_t i = 0; i < n; i++) bad += fabsf(back[i] - shard[i]) > 1e-3f * (1 + fabsf(shard[i]));
        CHECK(bad == 0, "large allgather -> reduce_scatter avg: %d wrong", bad);
        free(shard), free(back);
        cs_free(dshard), cs_free(dfull), cs_free(dback);
    }
    // Big enough that NCCL uses its real pipelines (several chunks per channel); odd sizes.
    size_t n = ((size_t)1 << 20) + 3;
    uint16_t *sb = zt_xmalloc(n * 2), *rb = zt_xmalloc(W * n * 2);
    for (size_t i = 0; i < n; i++) sb[i] = (uint16_t)((I.rank * 40503u + i * 2654435761u) >> 7);
    void *dsb = cs_buf(sb, n * 2), *drb = cs_buf(NULL, W * n * 2);
    CS_MUST(zt_allgather(C, dsb, drb, n, ZT_DT_BF16, "large ag bf16"));
    cs_down(rb, drb, W * n * 2);
    size_t bad = 0;
    for (size_t r = 0; r < W; r++)
        for (size_t i = 0; i < n; i++) bad += rb[r * n + i] != (uint16_t)((r * 40503u + i * 2654435761u) >> 7);
    CHECK(bad == 0, "large allgather bf16: %zu wrong elements", bad);
    free(sb), free(rb), cs_free(dsb), cs_free(drb);

    size_t m = ((size_t)1 << 20) + 1;
    float *sf = zt_xmalloc(W * m * 4), *rf = zt_xmalloc(m * 4);
    for (size_t j = 0; j < W * m; j++) sf[j] = (float)cs_val(I.rank, j);
    void *dsf = cs_buf(sf, W * m * 4), *drf = cs_buf(NULL, m * 4);
    CS_MUST(zt_reduce_scatter(C, dsf, drf, m, ZT_DT_F32, ZT_RED_SUM, "large rs f32"));
    cs_down(rf, drf, m * 4);
    bad = 0;
    for (size_t i = 0; i < m; i++) {
        size_t j = (size_t)I.rank * m + i;
        double s = 0;
        for (int r = 0; r < I.world; r++) s += cs_val(r, j);
        bad += rf[i] != (float)s;
    }
    CHECK(bad == 0, "large reduce_scatter f32: %zu wrong elements", bad);
    free(sf), free(rf), cs_free(dsf), cs_free(drf);
}

// ---- refused calls ----------------------------------------------------------------------
// Argument errors the common layer refuses before any backend sees them.
static inline void zt_comm_suite_errors(void) {
    const zt_comm_info I = zt_cs.I;
    zt_comm *C = zt_cs.c;
    void *d = cs_buf(NULL, 64 * 8 * (size_t)I.world);
    zt_req *r = zt_iallreduce(C, d, d, 4, ZT_DT_I64, ZT_RED_AVG, "avg of ints");
    CHECK(!r && strstr(zt_errmsg(), "avg needs a floating-point dtype"), "avg on i64: %s", zt_errmsg());
    CHECK(!zt_iallreduce(C, d, d, 4, ZT_DT_I32, ZT_RED_AVG, "int avg") && strstr(zt_errmsg(), "avg"), "int avg: %s",
          zt_errmsg());
    r = zt_ibroadcast(C, d, 4, ZT_DT_I64, I.world, "bad root");
    CHECK(!r && strstr(zt_errmsg(), "root"), "root == world: %s", zt_errmsg());
    CHECK(!zt_ibroadcast(C, d, 4, ZT_DT_F32, I.world, "bad root") && strstr(zt_errmsg(), "root"), "bad root: %s",
          zt_errmsg());
    CHECK(!zt_ireduce_scatter(C, d, d, 4, ZT_DT_F32, ZT_RED_SUM, "rs overlap") && strstr(zt_errmsg(), "overlap"),
          "overlapping reduce_scatter: %s", zt_errmsg());
    if (I.world > 1) {
        r = zt_ireduce_scatter(C, d, (float *)d + 1, 1, ZT_DT_F32, ZT_RED_SUM, "overlap");
        CHECK(!r && strstr(zt_errmsg(), "overlap"), "overlapping reduce_scatter: %s", zt_errmsg());
    }
    CHECK(zt_wait(C, NULL) < 0 && strstr(zt_errmsg(), "NULL request"), "zt_wait(NULL): %s", zt_errmsg());
    CS_MUST(zt_barrier(C, "after refused calls"));  // refused calls left every rank in step
    cs_free(d);
}
#endif
