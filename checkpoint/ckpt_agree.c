// Agreement across ranks: every failure of a collective save or load is agreed, so that all
// ranks return -1 with the same message; and before a load, that every rank resolved the same
// file.
// defines: zt_ckpt_wait_quietly, zt_ckpt_agree, zt_ckpt_agree_step, zt_ckpt_agree_same_file
#define _GNU_SOURCE
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "checkpoint/ckpt_internal.h"
#include "base/common.h"

// Wait for a request without keeping a core busy: the MPI library's blocking calls poll
// without pause, which takes a core from the training ranks while an --async-save writer
// waits for a slower peer (every unit ends in an agreement). Test, yield a few times, then
// sleep in growing steps up to 1 ms.
void zt_ckpt_wait_quietly(MPI_Request *rq) {
    long ns = 0;
    for (int spins = 0;; spins++) {
        int done = 0;
        MPI_Test(rq, &done, MPI_STATUS_IGNORE);
        if (done) return;
        if (spins < 50) {
            sched_yield();
            continue;
        }
        ns = ns == 0 ? 20000 : ns >= 500000 ? 1000000 : 2 * ns;
        struct timespec ts = {0, ns};
        nanosleep(&ts, NULL);
    }
}

// Collective: 0 when every rank is ok; otherwise every rank gets the message of the
// lowest failing rank ("rank R: ...", plus how many others failed) and -1.
int zt_ckpt_agree(MPI_Comm comm, int ok) {
    int rank, world;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &world);
    int mine[2] = {ok ? INT_MAX : rank, ok ? 0 : 1}, red[2];
    MPI_Request rq[2];
    MPI_Iallreduce(&mine[0], &red[0], 1, MPI_INT, MPI_MIN, comm, &rq[0]);
    MPI_Iallreduce(&mine[1], &red[1], 1, MPI_INT, MPI_SUM, comm, &rq[1]);
    zt_ckpt_wait_quietly(&rq[0]);
    zt_ckpt_wait_quietly(&rq[1]);
    if (red[0] == INT_MAX) return 0;
    char msg[ZT_ERR_MAX];
    if (rank == red[0]) snprintf(msg, sizeof msg, "%s", zt_errmsg());
    MPI_Bcast(msg, sizeof msg, MPI_CHAR, red[0], comm);
    if (world == 1 || red[1] == world)  // every rank failed: they all say the same
        zt_err("%s", msg);
    else if (red[1] > 1)
        zt_err("rank %d (and %d other rank%s): %.1900s", red[0], red[1] - 1, red[1] > 2 ? "s" : "", msg);
    else
        zt_err("rank %d: %.1950s", red[0], msg);
    return -1;
}

int zt_ckpt_agree_step(zt_ckpt_agreement *a, int *ok) {
    if (!a->failed && zt_ckpt_agree(a->comm, *ok) != 0) a->failed = 1;
    if (a->failed) *ok = 0;
    return a->failed ? -1 : 0;
}

// What identifies the file a rank is about to load: its size and modification time (the
// same file seen from every node of a shared file system has both; another checkpoint, or a
// stale copy of one, does not).
typedef struct {
    int64_t size, mtime_s, mtime_ns;
} file_ident;

// " (step N)" for a step-NNNNNNNN directory, "" otherwise.
static void step_of(const char *dir, char *out, size_t n) {
    const char *base = strrchr(dir, '/');
    int64_t step;
    out[0] = 0;
    if (zt_ckpt_is_step_name(base ? base + 1 : dir, &step)) snprintf(out, n, " (step %lld)", (long long)step);
}

// Collective, after every rank resolved `dir`: 0 when every rank's ckpt.h5 is the same file
// (size and modification time); else ZT_CKPT_LOAD_DIFFERENT + the same zt_err on every rank,
// naming each distinct checkpoint and the ranks that resolved it. A collective open of
// different files would mix them: HDF5 reads the metadata on one rank and broadcasts it, so the
// other ranks' data meets another file's checksums (reported as corruption) or a later
// collective write splits between two directories and hangs.
int zt_ckpt_agree_same_file(MPI_Comm comm, const char *dir, const char *file) {
    int rank, world;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &world);
    struct stat st;
    file_ident me = {-1, 0, 0};
    if (stat(file, &st) == 0) me = (file_ident){(int64_t)st.st_size, (int64_t)st.st_mtim.tv_sec, st.st_mtim.tv_nsec};
    int64_t mine[3] = {me.size, me.mtime_s, me.mtime_ns}, lo[3], hi[3];
    MPI_Allreduce(mine, lo, 3, MPI_INT64_T, MPI_MIN, comm);
    MPI_Allreduce(mine, hi, 3, MPI_INT64_T, MPI_MAX, comm);
    if (!memcmp(lo, hi, sizeof lo)) return 0;
    // they differ: every rank's identity and directory, for a message that names them all
    enum { PATH = 512 };
    int64_t *ids = zt_xmalloc((size_t)world * 3 * sizeof(int64_t));
    char *paths = zt_xmalloc((size_t)world * PATH), here[PATH];
    snprintf(here, sizeof here, "%.*s", PATH - 1, dir);  // a longer path is shown cut
    MPI_Allgather(mine, 3, MPI_INT64_T, ids, 3, MPI_INT64_T, comm);
    MPI_Allgather(here, PATH, MPI_CHAR, paths, PATH, MPI_CHAR, comm);
    char msg[ZT_ERR_MAX - 512];
    size_t used = (size_t)snprintf(msg, sizeof msg, "the ranks resolved different checkpoints:");
    int *group = zt_xmalloc((size_t)world * sizeof(int)), ngroups = 0;
    for (int r = 0; r < world; r++) group[r] = -1;
    for (int r = 0; r < world && used < sizeof msg; r++) {
        if (group[r] >= 0) continue;
        int count = 0;
        char ranks[256] = "";
        size_t rl = 0;
        for (int q = r; q < world; q++) {
            if (group[q] >= 0 || memcmp(ids + 3 * q, ids + 3 * r, 3 * sizeof(int64_t))) continue;
            group[q] = ngroups;
            if (count++ < 8 && rl < sizeof ranks)  // at most eight ranks named per checkpoint, then a count
                rl += (size_t)snprintf(ranks + rl, sizeof ranks - rl, "%s%d", count > 1 ? ", " : "", q);
        }
        if (count > 8) snprintf(ranks + rl, sizeof ranks - rl, " and %d more", count - 8);
        char step[48], what[96] = "missing";
        const char *pr = paths + (size_t)r * PATH;
        step_of(pr, step, sizeof step);
        const int64_t *id = ids + 3 * r;
        if (id[0] >= 0) {
            struct tm tm;
            time_t t = (time_t)id[1];
            gmtime_r(&t, &tm);
            char day[32];
            strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
            snprintf(what, sizeof what, "%lld bytes, modified %s.%09lldZ", (long long)id[0], day, (long long)id[2]);
        }
        used += (size_t)snprintf(msg + used, sizeof msg - used, "%s rank%s %s: %s%s (%s: %s)", ngroups ? ";" : "",
                                 count == 1 ? "" : "s", ranks, pr, step, ZT_CKPT_FILE, what);
        ngroups++;
    }
    free(group);
    free(ids);
    free(paths);
    zt_err("%.3000s. Every rank must load the same checkpoint: their views of the run directory differ (a node "
           "with its own or a stale copy of it?) or latest moved while they read it; nothing was loaded. The "
           "checkpoints themselves are not known to be damaged",
           msg);
    return ZT_CKPT_LOAD_DIFFERENT;
}
