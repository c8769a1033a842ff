// Board power and utilisation of this rank's GPU, sampled by a side thread through NVML
// (train/power.h): RUN/ranks/rank-N.power.csv, and the latest sample for the run log's
// TensorBoard points. Health is judged by board power, not utilisation (docs/operations.md).
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"
#include "base/out_file.h"
#include "train/nvml.h"
#include "train/power.h"

struct zt_power_sampler {
    FILE *f;
    int gpu;
    double interval_s;
    atomic_int stop;
    pthread_t thread;
    pthread_mutex_t mu;     // guards the latest sample
    double last_w, last_util;
};

double zt_power_last(zt_power_sampler *p, double *util_pct) {
    if (!p) return -1;
    pthread_mutex_lock(&p->mu);
    const double w = p->last_w;
    if (util_pct) *util_pct = p->last_util;
    pthread_mutex_unlock(&p->mu);
    return w;
}

static void *power_main(void *arg) {
    zt_power_sampler *p = arg;
    while (!atomic_load(&p->stop)) {
        double w, u, mem;
        if (zt_nvml_sample(p->gpu, &w, &u, &mem) == 0) {
            fprintf(p->f, "%.3f,%d,%.1f,%.0f,%.0f\n", zt_wall_now(), p->gpu, w, u, mem);
            fflush(p->f);
            pthread_mutex_lock(&p->mu);
            p->last_w = w;
            p->last_util = u;
            pthread_mutex_unlock(&p->mu);
        }
        for (double slept = 0; slept < p->interval_s && !atomic_load(&p->stop); slept += 0.05) usleep(50000);
    }
    return NULL;
}

zt_power_sampler *zt_power_start(const char *run_dir, int rank, int gpu, double interval_s) {
    double w, u, mem;
    if (zt_nvml_open() != 0 || zt_nvml_sample(gpu, &w, &u, &mem) != 0) return NULL;
    char path[4200];
    snprintf(path, sizeof path, "%s/ranks/rank-%05d.power.csv", run_dir, rank);
    FILE *f = zt_out_fopen(path, ZT_OUT_TRUNC);  // a link there is refused, never written through
    if (!f) return NULL;
    fprintf(f, "time,gpu,power_w,util_pct,mem_used_mib\n");
    zt_power_sampler *p = zt_xcalloc(1, sizeof *p);
    p->f = f;
    p->gpu = gpu;
    p->interval_s = interval_s > 0 ? interval_s : 1.0;
    p->last_w = -1;
    pthread_mutex_init(&p->mu, NULL);
    atomic_init(&p->stop, 0);
    if (pthread_create(&p->thread, NULL, power_main, p) != 0) {
        fclose(f);
        free(p);
        zt_err("rank %d: cannot start the power sampler thread", rank);
        return NULL;
    }
    return p;
}

void zt_power_stop(zt_power_sampler *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    pthread_join(p->thread, NULL);
    fclose(p->f);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
