// Liveness and progress signals an external watcher reads while the job runs:
// each rank's side thread rewrites RUN/ranks/rank-NNNNN.alive every few seconds
// (even while the main thread is blocked in a collective), and rank 0 rewrites
// RUN/heartbeat.json after every step. Both are replaced atomically (tmp + rename).
// defines: zt_liveness_start, zt_liveness_set_step, zt_liveness_stop, zt_heartbeat, zt_heartbeat_write,
//          zt_heartbeat_end, zt_heartbeat_mark, zt_liveness_not_ticking
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

// The job ended in a way that skips the trainer's own last heartbeat (a rank's collective deadline
// took it down with exit 3, or MPI never started): RUN/heartbeat.json's state becomes e->state
// ("aborted", "failed") with the error, the time of this record (state_time), the rank that wrote it
// (stopped_by_rank) and the ranks whose liveness tick had stopped by then (ranks_not_ticking), every
// other member kept as the last heartbeat had it ("time" stays the last step's; none yet: a minimal
// one with step 0, e->run_id and world_size e->world when > 0).
// Atomic like every heartbeat; any rank may call it. A heartbeat that already says e->state is kept
// as it is (the first rank to abort is the one named, not a later one). 0, or -1 + zt_err.
typedef struct {
    const char *state, *error;
    int stopped_by_rank;     // -1: not recorded
    const char *run_id;      // for a heartbeat written before the first step (NULL: "")
    int world;               // the same (0: not written)
    const int *not_ticking;  // ranks whose tick had stopped (NULL / 0: none recorded)
    int n_not_ticking;
    double ticks_older_than_s;  // what "stopped" meant: a tick older than this
} zt_heartbeat_end;
int zt_heartbeat_mark(const char *run_dir, const zt_heartbeat_end *e);

// The ranks of 0..world-1 whose RUN/ranks/rank-N.alive says its last tick is older than older_than_s
// (a missing or unreadable tick is not counted: it says nothing of when it stopped), into out
// (world entries); returns how many.
int zt_liveness_not_ticking(const char *run_dir, int world, double older_than_s, int *out);

#endif
