// The comm watchdog thread (engine/comm.c: zt_comm_watch_begin/end, async_error).
//   --unit DIR      world 1, no MPI, an in-process fake backend: 50 create/finalize
//                   cycles at a 10 ms period (the thread is joined: the thread count
//                   returns to 1 and the backend is no longer polled), a bad
//                   ZT_WATCHDOG_PERIOD_MS, regions that end in time (also replaced
//                   ones), and in forked children the abort paths: a watched region
//                   past timeout_s, the first-step allowance, an asynchronous backend
//                   error (exit code 3, the report, the flight dump).
//   --cycles N      only the create/finalize cycles (run under valgrind by ctest).
//   --mpi-hang sleep|mpi --run-dir DIR [--timeout S]
//                   2+ ranks, MPI backend: rank 1 opens a watched region and blocks in
//                   it (sleep: a simulated d2h copy; mpi: an MPI_Barrier nobody else
//                   enters, like HDF5's inside a collective write). The job must abort;
//                   tests/cli/comm_watchdog.sh checks the report. Exit 0 = it did not.
//   --mpi-ok --run-dir DIR
//                   watched regions that end within a 1 s deadline never abort.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/comm.h"
#include "base/common.h"
#include "engine/flight.h"
#include "tests/support/test_util.h"

#ifdef ZT_WATCHDOG_TEST_MPI
#include "engine/comm_mpi.h"
#endif

#define MUST(x)                                                                                  \
    do {                                                                                         \
        if ((x) < 0) {                                                                           \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #x, zt_errmsg());      \
            exit(2);                                                                             \
        }                                                                                        \
    } while (0)

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

// ---- the fake backend: collectives complete when told, errors when told ---------------
static atomic_int fake_polls;       // async_error calls (watchdog periods)
static atomic_int fake_error_at;    // async_error reports an error from this poll on (0: never)
static atomic_int fake_destroyed;   // destroy calls
static int fake_complete = 1;       // test() completes collectives

static int fake_start(void *self, const zt_coll *op, void **handle) {
    *handle = (void *)1;
    return 0;
}
static int fake_test(void *self, const zt_coll *op, void *handle, int *done) {
    *done = fake_complete;
    return 0;
}
static void fake_abort(void *self, int code) {
    fflush(stdout);
    fflush(stderr);
    _exit(code);
}
static void fake_destroy(void *self) {
    atomic_fetch_add(&fake_destroyed, 1);
    free(self);
}
static int fake_async_error(void *self, char *msg, size_t n) {
    int k = atomic_fetch_add(&fake_polls, 1) + 1, at = atomic_load(&fake_error_at);
    if (!at || k < at) return 0;
    snprintf(msg, n, "fake asynchronous error on the data channel: injected at poll %d", k);
    return 1;
}
static const zt_comm_backend fake_backend = {
    "fake", fake_start, fake_test, fake_abort, fake_destroy, fake_async_error, NULL,  // no split
};

static zt_comm *fake_comm(const char *run_dir, double timeout, double first) {
    zt_comm_info info = {0, 1, 0, 1, 0, 1};
    zt_comm_opts o = zt_comm_opts_default();
    o.run_dir = run_dir;
    o.timeout_s = timeout;
    o.first_timeout_s = first;
    zt_comm *c = NULL;
    MUST(zt_comm_create(&c, &fake_backend, zt_xcalloc(1, 16), &info, &o));
    return c;
}

static int thread_count(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    int n = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "Threads: %d", &n) == 1) break;
    fclose(f);
    return n;
}

// ---- unit: lifetime ---------------------------------------------------------------------
static void test_cycles(int cycles) {
    setenv("ZT_WATCHDOG_PERIOD_MS", "10", 1);
    atomic_store(&fake_error_at, 0);
    int destroyed0 = atomic_load(&fake_destroyed), threads0 = thread_count();
    double t0 = zt_now(), worst = 0;
    for (int i = 0; i < cycles; i++) {
        zt_comm *c = fake_comm(NULL, 5, 5);
        zt_comm_watch_begin(c, "cycle");
        if (i % 10 == 0) sleep_s(0.03);  // let some periods pass
        zt_comm_watch_end(c);
        MUST(zt_barrier(c, "cycle barrier"));
        double f0 = zt_now();
        CHECK(zt_comm_finalize(c) == 0, "finalize: %s", zt_errmsg());
        worst = fmax(worst, zt_now() - f0);
    }
    double total = zt_now() - t0;
    int polls = atomic_load(&fake_polls);
    CHECK(polls >= 5, "the watchdog polled the backend %d times over %d cycles (period 10 ms)", polls, cycles);
    sleep_s(0.05);
    CHECK(atomic_load(&fake_polls) == polls, "the backend was polled after finalize (%d -> %d): thread not joined",
          polls, atomic_load(&fake_polls));
    CHECK(atomic_load(&fake_destroyed) - destroyed0 == cycles, "destroy called %d times for %d cycles",
          atomic_load(&fake_destroyed) - destroyed0, cycles);
    // A joined thread leaves the count a moment after pthread_join returns.
    for (int i = 0; i < 100 && thread_count() != threads0; i++) sleep_s(0.01);
    CHECK(thread_count() == threads0, "threads: %d before the cycles, %d after", threads0, thread_count());
    // finalize wakes the watchdog instead of waiting out its period
    CHECK(worst < 0.2, "slowest finalize %.3f s", worst);
    printf("  %d create/finalize cycles in %.2f s (slowest finalize %.1f ms), %d watchdog polls, threads %d\n", cycles,
           total, worst * 1e3, polls, thread_count());
    unsetenv("ZT_WATCHDOG_PERIOD_MS");
}

static void test_bad_period(void) {
    const char *bad[] = {"abc", "0", "-5", "10ms", "600000"};
    for (int i = 0; i < 5; i++) {
        setenv("ZT_WATCHDOG_PERIOD_MS", bad[i], 1);
        int d0 = atomic_load(&fake_destroyed);
        zt_comm_info info = {0, 1, 0, 1, 0, 1};
        zt_comm *c = (zt_comm *)1;
        int rc = zt_comm_create(&c, &fake_backend, zt_xcalloc(1, 16), &info, NULL);
        CHECK(rc < 0 && !c && strstr(zt_errmsg(), "ZT_WATCHDOG_PERIOD_MS") && strstr(zt_errmsg(), "rank 0") &&
                  strstr(zt_errmsg(), bad[i]),
              "ZT_WATCHDOG_PERIOD_MS=%s: rc %d, %s", bad[i], rc, zt_errmsg());
        CHECK(atomic_load(&fake_destroyed) == d0 + 1, "the backend was not destroyed on the refused create");
    }
    unsetenv("ZT_WATCHDOG_PERIOD_MS");
}

// Regions that end in time, including a replaced one whose two parts together exceed
// the deadline: nothing fires (the parent survives to check).
static void test_in_time(void) {
    setenv("ZT_WATCHDOG_PERIOD_MS", "20", 1);
    zt_comm *c = fake_comm(NULL, 1, 1);
    zt_comm_mark_warm(c);
    zt_comm_watch_begin(c, "d2h copy that finishes");
    sleep_s(0.3);
    zt_comm_watch_end(c);
    zt_comm_watch_begin(c, "first half");
    sleep_s(0.6);
    zt_comm_watch_begin(c, "second half replaces it");
    sleep_s(0.6);
    zt_comm_watch_end(c);
    // An ended region stays ended, however long ago it began.
    sleep_s(1.2);
    zt_comm_watch_end(c);  // an end without a region is harmless
    zt_comm_watch_begin(NULL, "no comm");
    zt_comm_watch_end(NULL);
    CHECK(zt_comm_finalize(c) == 0, "finalize: %s", zt_errmsg());
    printf("  watched regions within the deadline (0.3 s, 0.6 s + 0.6 s replaced, at 1 s): no abort\n");
    unsetenv("ZT_WATCHDOG_PERIOD_MS");
}

// ---- unit: abort paths in forked children -------------------------------------------------
typedef struct {
    int status;
    double secs;
    char *err;  // the child's stderr
} child_result;

static child_result run_child(const char *work, const char *name, void (*fn)(const char *run_dir)) {
    char run_dir[1024], errpath[1100];
    snprintf(run_dir, sizeof run_dir, "%s/%s", work, name);
    snprintf(errpath, sizeof errpath, "%s/%s.stderr", work, name);
    child_result r = {0};
    double t0 = zt_now();
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || dup2(fd, 2) < 0) {
            perror(errpath);
            _exit(2);
        }
        alarm(30);  // a broken watchdog must not hang the test
        fn(run_dir);
        fprintf(stderr, "child %s: returned; the watchdog did not fire\n", name);
        _exit(0);
    }
    waitpid(pid, &r.status, 0);
    r.secs = zt_now() - t0;
    size_t n = 0;
    r.err = zt_read_file(errpath, &n);
    if (!r.err) r.err = strdup("");
    return r;
}

static int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

static void child_watch_hang(const char *run_dir) {
    setenv("ZT_WATCHDOG_PERIOD_MS", "20", 1);
    zt_comm *c = fake_comm(run_dir, 0.5, 0.5);
    MUST(zt_barrier(c, "warm-up"));
    zt_comm_mark_warm(c);
    zt_comm_set_context(c, 41, 2, 3);
    MUST(zt_barrier(c, "before the copy"));
    zt_comm_watch_begin(c, "simulated hang in a d2h copy");
    sleep_s(20);
}

static void child_first_step(const char *run_dir) {
    setenv("ZT_WATCHDOG_PERIOD_MS", "20", 1);
    zt_comm *c = fake_comm(run_dir, 0.3, 2);
    zt_comm_watch_begin(c, "first-step wait");  // 0.6 s > timeout_s, < first_timeout_s
    sleep_s(0.6);
    zt_comm_watch_end(c);
    fprintf(stderr, "child: the first-step allowance held\n");
    zt_comm_mark_warm(c);
    zt_comm_watch_begin(c, "warm wait");
    sleep_s(20);
}

static void child_async_error(const char *run_dir) {
    setenv("ZT_WATCHDOG_PERIOD_MS", "20", 1);
    zt_comm *c = fake_comm(run_dir, 5, 5);  // grace: max(1 s, 10% of the deadline)
    atomic_store(&fake_polls, 0);
    atomic_store(&fake_error_at, 5);
    fake_complete = 0;  // the all-gather stays in flight: the report must list it
    static float buf[8];
    zt_req *r = zt_iallgather(c, buf, buf, 8, ZT_DT_F32, "pending gather");
    (void)r;
    sleep_s(20);  // blocked "outside the comm layer", e.g. in cudaStreamSynchronize
}

static void expect(const char *what, const char *text, const char *needle) {
    CHECK(strstr(text, needle) != NULL, "%s: no \"%s\" in:\n%s", what, needle, text);
}

static void check_dump(const char *work, const char *name, const char *needle) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s/ranks/rank-00000.flight.json", work, name);
    size_t n = 0;
    char *js = zt_read_file(path, &n);
    CHECK(js != NULL, "%s: no flight dump %s", name, path);
    if (!js) return;
    expect(name, js, "\"status\": \"aborted\"");
    expect(name, js, needle);
    free(js);
}

static void test_abort_paths(const char *work) {
    child_result r = run_child(work, "watch_hang", child_watch_hang);
    CHECK(exit_code(r.status) == 3, "watch_hang: exit %d, want 3; stderr:\n%s", exit_code(r.status), r.err);
    // 0.5 s deadline + a 20 ms period + 1 s grace; generous for a loaded machine
    CHECK(r.secs >= 1.4 && r.secs < 4, "watch_hang: aborted after %.2f s, expected ~1.5 s", r.secs);
    expect("watch_hang", r.err,
           "zerotrain: rank 0: collective deadline exceeded after 0.5 s: stuck in \"simulated hang in a d2h copy\" "
           "(host wait outside the comm layer), started 0.");
    expect("watch_hang", r.err, "; step 41 epoch 2 micro 3\n");
    expect("watch_hang", r.err, "gets the collective deadline (timeout_s, 0.5 s)");
    expect("watch_hang", r.err, "recently done: barrier(\"before the copy\")");
    expect("watch_hang", r.err, "flight recorder dump: ");
    expect("watch_hang", r.err, "what every rank's flight recorder says:");
    expect("watch_hang", r.err, "aborting the job in 1 s (code 3)");
    CHECK(!strstr(r.err, "did not fire"), "watch_hang: the child returned");
    check_dump(work, "watch_hang", "in host wait \\\"simulated hang in a d2h copy\\\" (outside the comm layer)");
    printf("  watched region past 0.5 s: exit %d after %.2f s, report and flight dump\n", exit_code(r.status), r.secs);
    free(r.err);

    r = run_child(work, "first_step", child_first_step);
    CHECK(exit_code(r.status) == 3, "first_step: exit %d, want 3; stderr:\n%s", exit_code(r.status), r.err);
    expect("first_step", r.err, "the first-step allowance held");
    expect("first_step", r.err, "collective deadline exceeded after 0.3 s: stuck in \"warm wait\"");
    CHECK(!strstr(r.err, "stuck in \"first-step wait\""), "first_step: the allowance did not hold:\n%s", r.err);
    printf("  first-step allowance (2 s) held for a 0.6 s wait; after mark_warm 0.3 s fired: exit %d\n",
           exit_code(r.status));
    free(r.err);

    r = run_child(work, "async_error", child_async_error);
    CHECK(exit_code(r.status) == 3, "async_error: exit %d, want 3; stderr:\n%s", exit_code(r.status), r.err);
    CHECK(r.secs < 3, "async_error: aborted after %.2f s (5 polls at 20 ms + 1 s grace expected)", r.secs);
    expect("async_error", r.err,
           "zerotrain: rank 0: fake asynchronous error on the data channel: injected at poll 5; step 0 epoch 0 micro 0");
    expect("async_error", r.err, "zerotrain: rank 0: collective in flight: allgather(\"pending gather\") seq 1");
    check_dump(work, "async_error", "injected at poll 5");
    printf("  asynchronous backend error: exit %d after %.2f s, in-flight all-gather listed\n", exit_code(r.status),
           r.secs);
    free(r.err);
}

static void mkdir_p(const char *path) {
    char p[1024];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(p, 0755);
            *s = '/';
        }
    mkdir(p, 0755);
}

static int run_unit(const char *work) {
    mkdir_p(work);
    test_cycles(50);
    test_bad_period();
    test_in_time();
    test_abort_paths(work);
    TEST_END();
}

#ifdef ZT_WATCHDOG_TEST_MPI
// ---- MPI: the watchdog on a real job --------------------------------------------------------
static zt_comm *C;
static zt_comm_info I;

static void some_collectives(void) {
    float x[4] = {1, 2, 3, 4}, all[64];
    MUST(zt_allreduce(C, x, x, 4, ZT_DT_F32, ZT_RED_SUM, "grad norm"));
    MUST(zt_allgather(C, x, all, 4, ZT_DT_F32, "unit 3 params"));
}

static int run_mpi_hang(const char *run_dir, const char *how, double timeout) {
    zt_comm_opts o = zt_comm_opts_default();
    o.timeout_s = timeout;
    o.first_timeout_s = 30;
    o.run_dir = run_dir;
    MUST(zt_comm_init_mpi(&C, MPI_COMM_WORLD, &o));
    zt_comm_get_info(C, &I);
    MUST(zt_barrier(C, "warm-up"));
    zt_comm_mark_warm(C);
    zt_comm_set_context(C, 12, 0, 1);
    some_collectives();
    if (I.rank == 1) {
        if (!strcmp(how, "mpi")) {
            // HDF5's collective write blocks in MPI calls of its own; here a barrier on
            // MPI_COMM_WORLD that no other rank enters.
            zt_comm_watch_begin(C, "checkpoint save (HDF5 collective write)");
            MPI_Barrier(MPI_COMM_WORLD);
        } else {
            zt_comm_watch_begin(C, "simulated hang in a d2h copy");
            sleep_s(60);
        }
        zt_comm_watch_end(C);
    } else {
        // The others wait for rank 1 with a longer deadline, so that the report checked
        // is rank 1's watchdog and not their own zt_wait deadline.
        zt_comm_set_timeout(C, timeout + 4);
        MUST(zt_barrier(C, "after the d2h copy"));
    }
    printf("rank %d: the watched region ended; the watchdog did not fire\n", I.rank);
    zt_comm_finalize(C);
    zt_mpi_finalize_once();
    return 0;  // the driver treats exit 0 as failure
}

static int run_mpi_ok(const char *run_dir) {
    zt_comm_opts o = zt_comm_opts_default();
    o.timeout_s = 1;
    o.first_timeout_s = 1;
    o.run_dir = run_dir;
    MUST(zt_comm_init_mpi(&C, MPI_COMM_WORLD, &o));
    zt_comm_get_info(C, &I);
    MUST(zt_barrier(C, "warm-up"));
    zt_comm_mark_warm(C);
    double t0 = zt_now();
    for (int i = 0; i < 4; i++) {  // 1.2 s watched in all: more than the deadline, each region less
        some_collectives();
        zt_comm_watch_begin(C, "d2h copy that finishes");
        sleep_s(0.3);
        zt_comm_watch_end(C);
        MUST(zt_barrier(C, "after the copy"));
    }
    // Unwatched time past the deadline after the last region ended: an end that did
    // not close the region would fire here.
    sleep_s(1.3);
    MUST(zt_barrier(C, "after unwatched compute"));
    double secs = zt_now() - t0;
    int fin = zt_comm_finalize(C);
    CHECK(fin == 0, "finalize: %s", zt_errmsg());
    char path[4096];
    snprintf(path, sizeof path, "%s/ranks/rank-%05d.flight", run_dir, I.rank);
    zt_flight_hdr h;
    zt_flight_rec *recs;
    int n;
    MUST(zt_flight_read(path, &h, &recs, &n));
    CHECK(h.status == ZT_FL_FINALIZED, "rank %d: the ring says status %u, not finalized", I.rank, h.status);
    free(recs);
    int fails = zt_test_failures, total = 0;
    MPI_Allreduce(&fails, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    zt_mpi_finalize_once();
    if (I.rank != 0) return fails ? 1 : 0;
    printf("world %d: 4 watched regions of 0.3 s under a 1 s deadline, then 1.3 s unwatched, in %.2f s: no abort; ",
           I.world, secs);
    if (total && !fails) zt_test_failures = total;
    TEST_END();
}
#endif

int main(int argc, char **argv) {
    const char *run_dir = NULL, *unit = NULL, *hang = NULL;
    int ok = 0, cycles = 0;
    double timeout = 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--unit") && i + 1 < argc)
            unit = argv[++i];
        else if (!strcmp(argv[i], "--cycles") && i + 1 < argc)
            cycles = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--run-dir") && i + 1 < argc)
            run_dir = argv[++i];
        else if (!strcmp(argv[i], "--mpi-hang") && i + 1 < argc)
            hang = argv[++i];
        else if (!strcmp(argv[i], "--mpi-ok"))
            ok = 1;
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
            timeout = atof(argv[++i]);
        else {
            fprintf(stderr,
                    "usage: test_comm_watchdog --unit WORK_DIR | --cycles N | --mpi-hang sleep|mpi --run-dir DIR "
                    "[--timeout S] | --mpi-ok --run-dir DIR\n");
            return 2;
        }
    }
    if (unit) return run_unit(unit);
    if (cycles > 0) {
        test_cycles(cycles);
        TEST_END();
    }
#ifdef ZT_WATCHDOG_TEST_MPI
    if ((hang || ok) && run_dir) {
        MUST(zt_mpi_init_once());
        return hang ? run_mpi_hang(run_dir, hang, timeout) : run_mpi_ok(run_dir);
    }
#else
    (void)run_dir, (void)hang, (void)ok, (void)timeout;
#endif
    fprintf(stderr, "test_comm_watchdog: nothing to do (the MPI modes need --run-dir and an MPI build)\n");
    return 2;
}
