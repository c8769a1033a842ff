// Process-group tests on the MPI backend, run at 1..4 ranks: the checks every backend
// passes (tests/support/comm_suite.h: every collective against values computed locally, async
// handles waited in any order, node layout, refused calls) on host buffers, then what
// is MPI's own: a waiting rank sleeps, bf16 reductions are refused, the flight recorder
// read live by another rank, and (--deadline) the mismatched-collective abort.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine/comm.h"
#include "engine/comm_mpi.h"
#include "base/common.h"
#include "base/out_file.h"
#include "engine/flight.h"
#include "tests/support/comm_suite.h"
#include "tests/support/test_util.h"

static zt_comm *C;
static zt_comm_info I;

#define MUST(x)                                                                                              \
    do {                                                                                                     \
        if ((x) < 0) {                                                                                       \
            fprintf(stderr, "rank %d: %s:%d: %s failed: %s\n", I.rank, __FILE__, __LINE__, #x, zt_errmsg()); \
            exit(2);                                                                                         \
        }                                                                                                    \
    } while (0)

// The suite's buffers: host memory.
static void *host_alloc(size_t bytes) { return zt_xmalloc(bytes ? bytes : 1); }
static void host_up(void *buf, const void *host, size_t bytes) { memcpy(buf, host, bytes); }
static void host_down(void *host, const void *buf, size_t bytes) { memcpy(host, buf, bytes); }
static const zt_comm_suite_mem host_mem = {host_alloc, free, host_up, host_down, 0};

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
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

// MPI has no bf16 arithmetic: the backend refuses a bf16 reduction (after the common
// layer recorded it: test_flight expects it FAILED in the ring).
static void test_errors_mpi(void) {
    uint16_t b[4] = {0};
    zt_req *r = zt_iallreduce(C, b, b, 4, ZT_DT_BF16, ZT_RED_SUM, "bf16 sum");
    CHECK(!r && strstr(zt_errmsg(), "bf16"), "bf16 allreduce: %s", zt_errmsg());
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

// zt_comm_split: sub-groups by color, ordered by key (here: odd and even ranks, each in reverse
// rank order), both channels working inside the child, the child's own info, and finalize.
static void test_split(void) {
    zt_comm *sub = NULL;
    MUST(zt_comm_split(C, I.rank % 2, -I.rank, "parity", &sub));
    zt_comm_info si;
    zt_comm_get_info(sub, &si);
    int members[64], n = 0;
    for (int r = I.world - 1; r >= 0; r--)
        if (r % 2 == I.rank % 2 && n < 64) members[n++] = r;  // the key: descending rank
    int pos = -1;
    for (int k = 0; k < n; k++)
        if (members[k] == I.rank) pos = k;
    CHECK(si.world == n && si.rank == pos, "rank %d: split rank %d of %d, expected %d of %d", I.rank, si.rank, si.world,
          pos, n);
    int64_t mine = I.rank, got[64] = {0};
    MUST(zt_allgather(sub, &mine, got, 1, ZT_DT_I64, "split: ranks"));  // the data channel
    for (int k = 0; k < n; k++)
        CHECK(got[k] == members[k], "rank %d: sub-group member %d is world rank %lld, expected %d", I.rank, k,
              (long long)got[k], members[k]);
    double sum = I.rank;
    MUST(zt_allreduce(sub, &sum, &sum, 1, ZT_DT_F64, ZT_RED_SUM, "split: sum"));  // the ctrl channel
    double want = 0;
    for (int k = 0; k < n; k++) want += members[k];
    CHECK(sum == want, "rank %d: sum over the sub-group %.0f, expected %.0f", I.rank, sum, want);
    CHECK(strcmp(zt_comm_backend_name(sub), "mpi") == 0, "sub-group backend %s", zt_comm_backend_name(sub));
    CHECK(zt_comm_flight_path(sub) == NULL, "a sub-group's flight recorder must not take a rank file");
    CHECK(zt_comm_finalize(sub) == 0, "finalize of the sub-group: %s", zt_errmsg());
    MUST(zt_barrier(C, "after split"));  // the parent still works
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
    zt_comm_suite_init(C, &host_mem);
    zt_comm_suite_info();
    zt_comm_suite_allgather();
    zt_comm_suite_reduce_scatter();
    zt_comm_suite_allreduce();
    zt_comm_suite_broadcast();
    zt_comm_suite_alltoall();
    test_barrier_sleeps();
    zt_comm_suite_barrier();
    zt_comm_suite_async();
    zt_comm_suite_large();
    zt_comm_suite_errors();
    test_errors_mpi();
    test_flight(run_dir, capacity);
    test_split();
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
