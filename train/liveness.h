// Liveness and progress signals an external watcher reads while the job runs:
// each rank's side thread rewrites RUN/ranks/rank-NNNNN.alive every few seconds
// (even while the main thread is blocked in a collective), and rank 0 rewrites
// RUN/heartbeat.json after every step. Both are replaced atomically (tmp + rename).
// defines: zt_liveness_start, zt_liveness_set_step, zt_liveness_stop, zt_heartbeat, zt_heartbeat_write
#ifndef ZT_LIVENESS_H
#define ZT_LIVENESS_H
#include <stdint.h>

typedef struct zt_liveness zt_liveness;

// Starts the tick thread (interval_s > 0). NULL + zt_err on failure.
zt_liveness *zt_liveness_start(const char *run_dir, int rank, double interval_s);
void zt_liveness_set_step(zt_liveness *l, int64_t step);
// Writes a last tick with state "done" or "failed" and joins the thread.
void zt_liveness_stop(zt_liveness *l, const char *state);

typedef struct {
    const char *run_id, *state;  // state: running | stopped | complete | failed
    int64_t step, total_steps, epoch, tokens;
    double elapsed_s, step_time_s, tok_per_s, loss;
    int world_size;
    double gpu_hours, gpu_hours_per_epoch, gpu_hours_at_risk;  // rank-hours on the CPU backend
    const char *error;       // state failed: the error (NULL: none); numbers that are not finite are null
    int64_t ckpt_writing;    // --async-save: the step whose checkpoint is being written in the background
                             // (0: none; then the member is left out)
    double ckpt_writing_s;   // for how long
    int64_t records_lost;    // records of RUN/metrics.jsonl a full disk (an I/O error) refused so far
                             // (0: the member is left out)
} zt_heartbeat;

// RUN/heartbeat.json, replaced atomically (no fsync: it is rewritten every step); a link or
// special file there is refused (base/out_file.h).
int zt_heartbeat_write(const char *run_dir, const zt_heartbeat *h);

#endif
