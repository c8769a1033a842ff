// Process-group tests, run at 1..4 ranks: every collective against values computed
// locally, async handles waited in any order, node layout, the flight recorder read
// live by another rank, and (--deadline) the mismatched-collective abort.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/comm.h"
#include "runtime/comm_mpi.h"
#include "runtime/common.h"
#include "runtime/flight.h"
#include "tests/test_util.h"

static zt_comm *C;
static zt_comm_info I;

#define MUST(x)                                                                                              \
    do {                                                                                                     \
        if ((x) < 0) {                                                                                       \
            fprintf(stderr, "rank %d: %s:%d: %s failed: %s\n", I.rank, __FILE__, __LINE__, #x, zt_errmsg()); \
            exit(2);                                                                                         \
        }                                                                                                    \
    } while (0)

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

// Small integers: sums over ranks stay exact in f32, so SUM compares with ==.
static double val(int r, size_t i) { return (double)((int)((r * 31 + i * 17) % 23) - 11); }

static void test_info(void) {
    CHECK(I.world >= 1 && I.rank >= 0 && I.rank < I.world, "rank %d world %d", I.rank, I.world);
    CHECK(I.local_rank >= 0 && I.local_rank < I.local_world, "local %d/%d", I.local_rank, I.local_world);
    CHECK(I.node >= 0 && I.node < I.nnodes, "node %d/%d", I.node, I.nnodes);
    // Everyone's view, gathered: local ranks unique per node, local_world = ranks on
    // the node, nodes numbered by their lowest rank.
    int32_t mine[5] = {I.rank, I.local_rank, I.local_world, I.node, I.nnodes};
    int32_t *all = zt_xcalloc((size_t)I.world * 5, sizeof *all);
    MUST(zt_allgather(C, mine, all, 5, ZT_DT_I32, "node info"));
    char host[64] = {0}, *hosts = zt_xcalloc((size_t)I.world, 64);
    gethostname(host, sizeof host - 1);
    MUST(zt_allgather(C, host, hosts, 64, ZT_DT_U8, "host names"));
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
}

static void test_allgather(void) {
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
    MUST(zt_allgather(C, sf, rf, n, ZT_DT_F32, "ag f32"));
    MUST(zt_allgather(C, si, ri, n, ZT_DT_I64, "ag i64"));
    MUST(zt_allgather(C, sb, rb, n, ZT_DT_BF16, "ag bf16"));
    MUST(zt_allgather(C, su, ru, n, ZT_DT_U8, "ag u8"));
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
    MUST(zt_allgather(C, rf + (size_t)I.rank * n, rf, n, ZT_DT_F32, "ag in place"));
    bad = 0;
    for (size_t r = 0; r < W; r++)
        for (size_t i = 0; i < n; i++) bad += rf[r * n + i] != (float)(r * 1000 + i) + 0.5f;
    CHECK(bad == 0, "allgather in place: %d wrong elements", bad);
    MUST(zt_allgather(C, NULL, NULL, 0, ZT_DT_F32, "ag empty"));
    free(sf), free(rf), free(si), free(ri), free(sb), free(rb), free(su), free(ru);
}

static void test_reduce_scatter(void) {
    const size_t n = 5;
    size_t W = (size_t)I.world;
    float *sf = zt_xmalloc(W * n * 4), rf[5], ef[5], af[5];
    double *sd = zt_xmalloc(W * n * 8), rd[5], ad[5];
    int64_t *si = zt_xmalloc(W * n * 8), ri[5], mi[5];
    for (size_t j = 0; j < W * n; j++) {
        sf[j] = (float)val(I.rank, j);
        sd[j] = val(I.rank, j) + 0.25;
        si[j] = (int64_t)val(I.rank, j) * 1000000007LL;
    }
    MUST(zt_reduce_scatter(C, sf, rf, n, ZT_DT_F32, ZT_RED_SUM, "rs f32 sum"));
    MUST(zt_reduce_scatter(C, sf, af, n, ZT_DT_F32, ZT_RED_AVG, "rs f32 avg"));
    MUST(zt_reduce_scatter(C, sd, rd, n, ZT_DT_F64, ZT_RED_SUM, "rs f64 sum"));
    MUST(zt_reduce_scatter(C, sd, ad, n, ZT_DT_F64, ZT_RED_AVG, "rs f64 avg"));
    MUST(zt_reduce_scatter(C, si, ri, n, ZT_DT_I64, ZT_RED_SUM, "rs i64 sum"));
    MUST(zt_reduce_scatter(C, si, mi, n, ZT_DT_I64, ZT_RED_MAX, "rs i64 max"));
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = (size_t)I.rank * n + i;
        double s = 0, mx = -1e300;
        for (int r = 0; r < I.world; r++) {
            s += val(r, j);
            if (val(r, j) > mx) mx = val(r, j);
        }
        ef[i] = (float)s;
        bad += rf[i] != ef[i];
        bad += rd[i] != s + 0.25 * I.world;
        bad += fabs(ad[i] - (s + 0.25 * I.world) / I.world) > 1e-12;
        bad += ri[i] != (int64_t)s * 1000000007LL;
        bad += mi[i] != (int64_t)mx * 1000000007LL;
        af[i] *= (float)I.world;  // compare avg * world against the sum
    }
    CHECK(bad == 0, "reduce_scatter: %d wrong elements", bad);
    CHECK_CLOSE("reduce_scatter f32 avg", af, ef, (int64_t)n, 1e-6);
    free(sf), free(sd), free(si);
}

static void test_allreduce(void) {
    enum { N = 13 };
    typedef union {
        float f[N];
        double d[N];
        int64_t i[N];
    } buf;
    const zt_red reds[] = {ZT_RED_SUM, ZT_RED_MIN, ZT_RED_MAX};
    const zt_dtype dts[] = {ZT_DT_F32, ZT_DT_F64, ZT_DT_I64};
    int bad = 0;
    for (int k = 0; k < 3; k++)
        for (int t = 0; t < 3; t++) {
            buf send, recv;
            double expect[N];
            for (int i = 0; i < N; i++) {
                double e = k == 1 ? 1e300 : k == 2 ? -1e300 : 0;
                for (int r = 0; r < I.world; r++) {
                    double v = val(r, (size_t)i);
                    e = k == 0 ? e + v : k == 1 ? (v < e ? v : e) : (v > e ? v : e);
                }
                expect[i] = e;
                double v = val(I.rank, (size_t)i);
                if (dts[t] == ZT_DT_F32) send.f[i] = (float)v;
                if (dts[t] == ZT_DT_F64) send.d[i] = v;
                if (dts[t] == ZT_DT_I64) send.i[i] = (int64_t)v;
            }
            int in_place = (k + t) % 2;  // half the cases reduce in place
            buf *out = in_place ? &send : &recv;
            char label[48];
            snprintf(label, sizeof label, "ar %s %s%s", zt_dtype_name(dts[t]), zt_red_name(reds[k]),
                     in_place ? " in place" : "");
            MUST(zt_allreduce(C, &send, out, N, dts[t], reds[k], label));
            for (int i = 0; i < N; i++) {
                double got = dts[t] == ZT_DT_F32   ? (double)out->f[i]
                             : dts[t] == ZT_DT_F64 ? out->d[i]
                                                   : (double)out->i[i];
                if (got != expect[i] && bad++ < 5)
                    fprintf(stderr, "rank %d %s [%d]: %g != %g\n", I.rank, label, i, got, expect[i]);
            }
        }
    CHECK(bad == 0, "allreduce sum/min/max: %d wrong elements", bad);
    float a[N], e[N];
    for (int i = 0; i < N; i++) {
        a[i] = (float)val(I.rank, (size_t)i);
        double s = 0;
        for (int r = 0; r < I.world; r++) s += val(r, (size_t)i);
        e[i] = (float)(s / I.world);
    }
    MUST(zt_allreduce(C, a, a, N, ZT_DT_F32, ZT_RED_AVG, "ar f32 avg"));
    CHECK_CLOSE("allreduce f32 avg", a, e, N, 1e-6);
}

static void test_broadcast(void) {
    int roots[2] = {I.world - 1, 1 % I.world};
    for (int k = 0; k < 2; k++) {
        int root = roots[k];
        double d[9];
        uint16_t b[3];
        for (int i = 0; i < 9; i++) d[i] = I.rank == root ? 100.0 * root + i : -1;
        for (int i = 0; i < 3; i++) b[i] = I.rank == root ? (uint16_t)(0x4000 + root + i) : 0;
        MUST(zt_broadcast(C, d, 9, ZT_DT_F64, root, "bcast f64"));
        MUST(zt_broadcast(C, b, 3, ZT_DT_BF16, root, "bcast bf16"));
        int bad = 0;
        for (int i = 0; i < 9; i++) bad += d[i] != 100.0 * root + i;
        for (int i = 0; i < 3; i++) bad += b[i] != (uint16_t)(0x4000 + root + i);
        CHECK(bad == 0, "broadcast from root %d: %d wrong", root, bad);
    }
}

// A rank waiting on a slow peer must sleep, not spin (ranks are judged by power).
static void test_barrier_sleeps(void) {
    MUST(zt_barrier(C, "barrier"));
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    double t0 = zt_now();
    if (I.rank == 0) sleep_s(0.6);
    MUST(zt_barrier(C, "barrier after sleep"));
    double wall = zt_now() - t0;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double cpu = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
    if (I.rank != 0 && I.world > 1) {
        CHECK(wall > 0.5, "barrier returned after %.3f s before rank 0 joined", wall);
        CHECK(cpu < 0.25 * wall, "waiting in a barrier used %.3f s CPU in %.3f s", cpu, wall);
        if (getenv("ZT_TEST_VERBOSE")) printf("  rank %d: barrier wait %.3f s, cpu %.3f s\n", I.rank, wall, cpu);
    }
}

// Several collectives in flight on both channels at once, waited in a different
// order on each rank.
static void test_async(void) {
    const size_t n = 11;
    size_t W = (size_t)I.world;
    float *ag_s = zt_xmalloc(n * 4), *ag_r = zt_xmalloc(W * n * 4), *rs_s = zt_xmalloc(W * n * 4), rs_r[11];
    double ar[3] = {I.rank, 1, -I.rank};
    int64_t bc[4];
    float *ag2_r = zt_xmalloc(W * n * 4);
    for (size_t i = 0; i < n; i++) ag_s[i] = (float)(I.rank + 10 * i);
    for (size_t j = 0; j < W * n; j++) rs_s[j] = (float)(j + I.rank);
    for (int i = 0; i < 4; i++) bc[i] = I.rank == 0 ? 77 + i : 0;
    zt_req *q[6];
    q[0] = zt_iallgather(C, ag_s, ag_r, n, ZT_DT_F32, "async ag");
    q[1] = zt_ireduce_scatter(C, rs_s, rs_r, n, ZT_DT_F32, ZT_RED_SUM, "async rs");
    q[2] = zt_iallreduce(C, ar, ar, 3, ZT_DT_F64, ZT_RED_SUM, "async ar");
    q[3] = zt_ibroadcast(C, bc, 4, ZT_DT_I64, 0, "async bcast");
    q[4] = zt_ibarrier(C, "async barrier");
    q[5] = zt_iallgather(C, ag_s, ag2_r, n, ZT_DT_F32, "async ag 2");
    for (int i = 0; i < 6; i++) CHECK(q[i] != NULL, "async issue %d: %s", i, zt_errmsg());
    // Rank-dependent wait orders: forward, reverse, and interleaved.
    static const int orders[3][6] = {{0, 1, 2, 3, 4, 5}, {5, 4, 3, 2, 1, 0}, {3, 0, 5, 1, 4, 2}};
    const int *ord = orders[I.rank % 3];
    // One of them polled with zt_test first (overlap-style), the rest just waited.
    int done = 0;
    for (int spins = 0; !done && spins < 10000000; spins++) {
        MUST(zt_test(C, q[ord[0]], &done));
        zt_comm_progress(C);
    }
    CHECK(done, "zt_test never reported completion");
    for (int i = 0; i < 6; i++) MUST(zt_wait(C, q[ord[i]]));
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
}

static void test_large(void) {
    const size_t n = 1 << 18;  // 1 MiB of f32 per rank
    size_t W = (size_t)I.world;
    float *shard = zt_xmalloc(n * 4), *full = zt_xmalloc(W * n * 4), *back = zt_xmalloc(n * 4);
    for (size_t i = 0; i < n; i++) shard[i] = (float)((i * 7 + (size_t)I.rank) % 1000);
    zt_req *g = zt_iallgather(C, shard, full, n, ZT_DT_F32, "large ag");
    MUST(zt_wait(C, g));
    zt_req *s = zt_ireduce_scatter(C, full, back, n, ZT_DT_F32, ZT_RED_AVG, "large rs avg");
    MUST(zt_wait(C, s));
    // Every rank gathered the same full vector, so the average of block r is block r.
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad += fabsf(back[i] - shard[i]) > 1e-3f * (1 + fabsf(shard[i]));
    CHECK(bad == 0, "large allgather -> reduce_scatter avg: %d wrong", bad);
    free(shard), free(full), free(back);
}

static void test_errors(void) {
    int64_t x[4] = {0};
    float f[8];
    uint16_t b[4] = {0};
    zt_req *r = zt_iallreduce(C, x, x, 4, ZT_DT_I64, ZT_RED_AVG, "avg of ints");
    CHECK(!r && strstr(zt_errmsg(), "avg needs a floating-point dtype"), "avg on i64: %s", zt_errmsg());
    r = zt_ibroadcast(C, x, 4, ZT_DT_I64, I.world, "bad root");
    CHECK(!r && strstr(zt_errmsg(), "root"), "root == world: %s", zt_errmsg());
    r = zt_iallreduce(C, b, b, 4, ZT_DT_BF16, ZT_RED_SUM, "bf16 sum");
    CHECK(!r && strstr(zt_errmsg(), "bf16"), "bf16 allreduce: %s", zt_errmsg());
    if (I.world > 1) {
        r = zt_ireduce_scatter(C, f, f + 1, 1, ZT_DT_F32, ZT_RED_SUM, "overlap");
        CHECK(!r && strstr(zt_errmsg(), "overlap"), "overlapping reduce_scatter: %s", zt_errmsg());
    }
    CHECK(zt_wait(C, NULL) < 0 && strstr(zt_errmsg(), "NULL request"), "zt_wait(NULL): %s", zt_errmsg());
}

static const zt_flight_rec *find_label(const zt_flight_rec *recs, int n, const char *label) {
    for (int i = n - 1; i >= 0; i--)
        if (strcmp(recs[i].label, label) == 0) return &recs[i];
    return NULL;
}

// The ring as another process sees it, while this job still runs.
static void test_flight(const char *run_dir, int capacity) {
    const char *own = zt_comm_flight_path(C);
    if (!run_dir) {
        CHECK(own == NULL, "no run dir but a flight path %s", own);
        return;
    }
    zt_flight_hdr h;
    zt_flight_rec *recs;
    int n;
    MUST(zt_flight_read(own, &h, &recs, &n));
    CHECK(h.rank == I.rank && h.world == I.world && h.capacity == capacity && h.status == ZT_FL_RUNNING,
          "own header: rank %d world %d capacity %d status %u", h.rank, h.world, h.capacity, h.status);
    CHECK(h.issued > (uint64_t)capacity && n == capacity, "ring wrapped: issued %llu, %d records",
          (unsigned long long)h.issued, n);
    int ordered = n > 0 && recs[n - 1].seq == h.issued;
    for (int i = 0; i < n; i++) {
        // test_errors' bf16 all-reduce is refused by the backend after it was recorded
        int state_ok =
            recs[i].state == ZT_FL_DONE || (recs[i].state == ZT_FL_FAILED && !strcmp(recs[i].label, "bf16 sum"));
        ordered &= (i == 0 || recs[i].seq == recs[i - 1].seq + 1) && state_ok;
    }
    CHECK(ordered, "own ring: records not consecutive / done");
    free(recs);

    zt_comm_set_context(C, 41, 2, 5);
    MUST(zt_barrier(C, "flight probe"));
    MUST(zt_barrier(C, "flight probe 2"));
    // Every peer has now issued "flight probe 2", so its "flight probe" is done.
    if (I.rank == 0) {
        MUST(zt_flight_read(own, &h, &recs, &n));
        const zt_flight_rec *mine = find_label(recs, n, "flight probe");
        uint64_t my_seq = mine ? mine->seq : 0;
        free(recs);
        int peer = I.world - 1;
        char path[4096];
        snprintf(path, sizeof path, "%s/ranks/rank-%05d.flight", run_dir, peer);
        MUST(zt_flight_read(path, &h, &recs, &n));
        CHECK(h.rank == peer && h.world == I.world && h.status == ZT_FL_RUNNING && h.step == 41 && h.epoch == 2 &&
                  h.micro == 5,
              "peer header: rank %d world %d status %u step %lld", h.rank, h.world, h.status, (long long)h.step);
        const zt_flight_rec *p = find_label(recs, n, "flight probe");
        CHECK(p && p->op == ZT_OP_BARRIER && p->state == ZT_FL_DONE && p->seq == my_seq && p->step == 41 &&
                  p->t_end_ns >= p->t_start_ns && p->chan == ZT_CHAN_CTRL,
              "peer's \"flight probe\": op %d state %d seq %llu (mine %llu)", p ? (int)p->op : -1,
              p ? (int)p->state : -1, p ? (unsigned long long)p->seq : 0ULL, (unsigned long long)my_seq);
        const zt_flight_rec *p2 = find_label(recs, n, "flight probe 2");
        CHECK(p2 && p2->seq == my_seq + 1 && p2->op == ZT_OP_BARRIER, "peer's \"flight probe 2\": seq %llu",
              p2 ? (unsigned long long)p2->seq : 0ULL);
        // The peer may already sit in the next barrier, which cannot finish before we join:
        // then the reader sees it in flight.
        const zt_flight_rec *last = n ? &recs[n - 1] : NULL;
        int last_ok = last && (last == p2 || (!strcmp(last->label, "flight read done") && last->seq == my_seq + 2 &&
                                              (last->state == ZT_FL_ISSUED || last->state == ZT_FL_WAITING) &&
                                              last->t_end_ns == 0 && zt_flight_current(recs, n) == last));
        CHECK(last_ok, "peer's newest record: \"%s\" seq %llu state %s", last ? last->label : "(none)",
              last ? (unsigned long long)last->seq : 0ULL, last ? zt_flight_state_name(last->state) : "-");
        if (getenv("ZT_TEST_VERBOSE") && last)
            printf("  rank 0 read rank %d live: newest %s(\"%s\") seq %llu %s\n", peer, zt_op_name(last->op),
                   last->label, (unsigned long long)last->seq, zt_flight_state_name(last->state));
        free(recs);

        // Bad files are refused with the rule they broke.
        char bad[4096];
        snprintf(bad, sizeof bad, "%s/not-a-flight", run_dir);
        char junk[300] = "definitely not a flight recorder";
        MUST(zt_write_file_atomic(bad, junk, sizeof junk));
        CHECK(zt_flight_read(bad, &h, &recs, &n) < 0 && strstr(zt_errmsg(), "not a zerotrain flight recorder"),
              "junk file: %s", zt_errmsg());
        char *whole = zt_read_file(own, NULL);
        MUST(zt_write_file_atomic(bad, whole, 128 + 128 * 3));  // header promises more records
        free(whole);
        CHECK(zt_flight_read(bad, &h, &recs, &n) < 0 && strstr(zt_errmsg(), "header says"), "truncated file: %s",
              zt_errmsg());
    }
    char *js = NULL;
    size_t jn = 0;
    FILE *m = open_memstream(&js, &jn);
    MUST(zt_comm_dump_flight(C, m));
    fclose(m);
    CHECK(strstr(js, "\"format\": \"zerotrain-flight\"") && strstr(js, "\"label\": \"flight probe 2\"") &&
              strstr(js, "\"op\": \"barrier\""),
          "flight JSON lacks the probe: %.200s", js);
    free(js);
    MUST(zt_barrier(C, "flight read done"));  // keep peers running until rank 0 has read
}

// Rank W-1 skips the reduce-scatter everyone else enters and goes to a barrier, as in
// the field report. Expected: every rank aborts within timeout + grace.
static int run_deadline(const char *run_dir, double timeout, double first, double warmup_sleep) {
    zt_comm_opts o = zt_comm_opts_default();
    o.timeout_s = timeout;
    o.first_timeout_s = first;
    o.run_dir = run_dir;
    MUST(zt_comm_init_mpi(&C, MPI_COMM_WORLD, &o));
    zt_comm_get_info(C, &I);
    zt_comm_set_context(C, 0, 0, 0);
    // Slower than timeout but within first_timeout: the first-step allowance must hold.
    if (I.rank == I.world - 1) sleep_s(warmup_sleep);
    MUST(zt_barrier(C, "warm-up"));
    zt_comm_mark_warm(C);
    zt_comm_set_context(C, 3850, 0, 3);
    size_t n = 1 << 20;
    float *shard = zt_xcalloc(n, 4), *full = zt_xcalloc((size_t)I.world * n, 4);
    MUST(zt_allgather(C, shard, full, n, ZT_DT_F32, "unit 17 params"));
    if (I.rank == I.world - 1)
        MUST(zt_barrier(C, "epoch-end save"));
    else
        MUST(zt_reduce_scatter(C, full, shard, n, ZT_DT_F32, ZT_RED_SUM, "unit 17 grads"));
    printf("rank %d: the mismatched collective completed; the deadline did not fire\n", I.rank);
    zt_comm_finalize(C);
    zt_mpi_finalize_once();
    return 0;  // the driver treats exit 0 as failure
}

int main(int argc, char **argv) {
    const char *run_dir = NULL;
    int deadline = 0;
    double timeout = 2, first = 30, warmup = 3;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--run-dir") && i + 1 < argc)
            run_dir = argv[++i];
        else if (!strcmp(argv[i], "--deadline"))
            deadline = 1;
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
            timeout = atof(argv[++i]);
        else if (!strcmp(argv[i], "--first-timeout") && i + 1 < argc)
            first = atof(argv[++i]);
        else if (!strcmp(argv[i], "--warmup-sleep") && i + 1 < argc)
            warmup = atof(argv[++i]);
        else if (!strcmp(argv[i], "--summarize") && i + 2 < argc) {
            // Post-mortem decode of a run's binary rings, as a watcher would.
            int k = zt_flight_summarize_dir(argv[i + 1], atoi(argv[i + 2]), stdout, "");
            if (k < 0) fprintf(stderr, "%s\n", zt_errmsg());
            return k < 0;
        } else {
            fprintf(stderr,
                    "usage: test_comm [--run-dir DIR] [--deadline [--timeout S] [--first-timeout S] "
                    "[--warmup-sleep S]] | --summarize RUN_DIR WORLD\n");
            return 2;
        }
    }
    MUST(zt_mpi_init_once());
    if (deadline) return run_deadline(run_dir, timeout, first, warmup);

    const int capacity = 16;  // small, so the tests wrap the ring
    zt_comm_opts o = zt_comm_opts_default();
    o.run_dir = run_dir;
    o.flight_capacity = capacity;
    MUST(zt_comm_init_mpi(&C, MPI_COMM_WORLD, &o));
    zt_comm_get_info(C, &I);
    CHECK(strcmp(zt_comm_backend_name(C), "mpi") == 0, "backend %s", zt_comm_backend_name(C));
    double t0 = zt_now();
    test_info();
    test_allgather();
    test_reduce_scatter();
    test_allreduce();
    test_broadcast();
    test_barrier_sleeps();
    test_async();
    test_large();
    test_errors();
    test_flight(run_dir, capacity);
    int fin = zt_comm_finalize(C);
    CHECK(fin == 0, "finalize: %s", zt_errmsg());
    if (run_dir) {
        zt_flight_hdr h;
        zt_flight_rec *recs;
        int n;
        char path[4096];
        snprintf(path, sizeof path, "%s/ranks/rank-%05d.flight", run_dir, I.rank);
        MUST(zt_flight_read(path, &h, &recs, &n));
        CHECK(h.status == ZT_FL_FINALIZED, "after finalize the ring says status %u", h.status);
        free(recs);
    }
    // Gather the verdict so that rank 0 reports every rank's failures.
    int fails = zt_test_failures, total = 0;
    MPI_Allreduce(&fails, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (I.rank == 0) printf("world %d: %.2f s; ", I.world, zt_now() - t0);
    zt_mpi_finalize_once();
    if (I.rank != 0) return fails ? 1 : 0;
    if (total && !fails) zt_test_failures = total;
    TEST_END();
}
