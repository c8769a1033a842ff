// The start-up deadline of MPI_Init_thread (engine/comm_mpi.h zt_mpi_init_guarded): the one wait
// of a job that comes before any collective, so before the comm layer's deadlines exist.
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"
#include "engine/comm_mpi.h"

#define ZT_START_ABORT_CODE 3        // the collective deadline's (engine/comm.c)
#define ZT_START_EXPIRY_GRACE_S 5.0  // what on_expiry is given before the exit

// The launcher's variables, first found wins: Open MPI's mpirun, PMIx launchers, MPICH's
// Hydra (PMI), Slurm's srun.
static int env_int(const char *const *names) {
    for (int i = 0; names[i]; i++) {
        const char *v = getenv(names[i]);
        char *end;
        if (!v || !*v) continue;
        long x = strtol(v, &end, 10);
        if (!*end && x >= 0 && x < (1L << 30)) return (int)x;
    }
    return -1;
}

int zt_mpi_env_rank(void) {
    static const char *const names[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", NULL};
    return env_int(names);
}

int zt_mpi_env_world(void) {
    static const char *const names[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", NULL};
    return env_int(names);
}

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;  // CLOCK_MONOTONIC
    int done;           // MPI_Init_thread returned (under mu)
    int marked;         // on_expiry returned (under mu)
    zt_mpi_start_deadline d;
    char msg[1024];
    int rank, world;
} start_guard;

// Waits on g->cv until *flag or the monotonic time `until`; returns *flag.
static int wait_flag(start_guard *g, const int *flag, double until) {
    struct timespec ts = {(time_t)until, (long)((until - (double)(time_t)until) * 1e9)};
    pthread_mutex_lock(&g->mu);
    int rc = 0;
    while (!*flag && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    const int v = *flag;
    pthread_mutex_unlock(&g->mu);
    return v;
}

static void *expiry_main(void *arg) {
    start_guard *g = arg;
    g->d.on_expiry(g->d.ctx, g->rank, g->world, g->msg);
    pthread_mutex_lock(&g->mu);
    g->marked = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

static void *guard_main(void *arg) {
    start_guard *g = arg;
    if (wait_flag(g, &g->done, zt_now() + g->d.deadline_s)) return NULL;
    char who[32] = "?", ranks[48] = "the other ranks";
    if (g->rank >= 0) snprintf(who, sizeof who, "%d", g->rank);
    if (g->world > 0) snprintf(ranks, sizeof ranks, "the %d ranks", g->world);
    snprintf(g->msg, sizeof g->msg,
             "rank %s: MPI did not initialise within %.3g s (%s): a rank of the job never joined (MPI_Init_thread "
             "returns once every one of %s has started MPI; one stalled or failed before it: a slow or stuck node, "
             "a hung file system, a launcher that never started it); the job is aborted with exit code %d",
             who, g->d.deadline_s, g->d.source ? g->d.source : "the start-up deadline", ranks, ZT_START_ABORT_CODE);
    fprintf(stderr, "zerotrain: %s\n", g->msg);
    fflush(stderr);
    pthread_t t;
    if (g->d.on_expiry && pthread_create(&t, NULL, expiry_main, g) == 0) {
        pthread_detach(t);  // a write that blocks (a hung file system) must not hold the exit
        wait_flag(g, &g->marked, zt_now() + ZT_START_EXPIRY_GRACE_S);
    }
    _exit(ZT_START_ABORT_CODE);  // MPI is not up: no MPI_Abort; the launcher ends the others
}

int zt_mpi_init_guarded(int level, const zt_mpi_start_deadline *d) {
    if (!d || !(d->deadline_s > 0)) return zt_mpi_init_threads(level);
    int inited = 0;
    MPI_Initialized(&inited);
    if (inited) return 0;
    start_guard *g = zt_xcalloc(1, sizeof *g);
    g->d = *d;
    g->rank = zt_mpi_env_rank();
    g->world = zt_mpi_env_world();
    pthread_mutex_init(&g->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);  // zt_now()'s clock
    pthread_cond_init(&g->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_t t;
    const int armed = pthread_create(&t, NULL, guard_main, g) == 0;
    if (!armed) fprintf(stderr, "zerotrain: warning: no thread for the MPI start-up deadline: MPI_Init_thread runs "
                                "without one\n");
    const int rc = zt_mpi_init_threads(level);
    pthread_mutex_lock(&g->mu);
    g->done = 1;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
    if (armed) pthread_join(t, NULL);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
    return rc;
}
