// The external watcher's core: reads a run directory (heartbeat.json, complete.json,
// ranks/rank-NNNNN.{alive,flight,power.csv}, metrics.jsonl) and decides whether the
// job is starting, running, complete, crashed, failed or hung; on a bad outcome it
// names the culprit from the flight recorders. The CLI loop is cli/cmd_watch.c.
// defines: zt_watch, zt_watch_opts, zt_watch_state, zt_watch_poll, zt_watch_diagnose,
//          zt_watch_world, zt_watch_read_heartbeat, zt_watch_write_json, zt_watch_status_line
#ifndef ZT_WATCH_H
#define ZT_WATCH_H

#include <stddef.h>

#include "ops/triage.h"

typedef enum {
    ZT_WS_STARTING = 0,  // no heartbeat and no liveness tick yet
    ZT_WS_RUNNING,
    ZT_WS_COMPLETE,      // RUN/complete.json exists
    ZT_WS_CRASHED,       // a rank's liveness tick stopped, no complete.json
    ZT_WS_HUNG,          // ticks fresh, but the step stalled or the deadlock power signature; or a
                         // rank's collective deadline aborted the job (heartbeat.json "aborted")
    ZT_WS_FAILED,        // the trainer reported "failed" (heartbeat or a rank's tick)
    ZT_WS_STOPPED,       // the trainer stopped on SIGUSR1/SIGTERM after committing a checkpoint (resumable)
} zt_watch_state;

// Exit codes of `zerotrain watch` (also 1: error, 2: usage).
enum {
    ZT_WATCH_EXIT_COMPLETE = 0,
    ZT_WATCH_EXIT_CRASHED = 3,
    ZT_WATCH_EXIT_HUNG = 4,
    ZT_WATCH_EXIT_FAILED = 5,
    ZT_WATCH_EXIT_RUNNING = 6,  // --once and the run is starting or running
    ZT_WATCH_EXIT_STOPPED = 7,  // stopped gracefully by a signal; continue with train --resume
};

const char *zt_watch_state_name(zt_watch_state s);  // "RUNNING", ...
int zt_watch_exit_code(zt_watch_state s);
int zt_watch_state_final(zt_watch_state s);

// The watcher's defaults, used by zt_watch_opts_default and `zerotrain watch`'s flag table;
// the alive interval is the trainer's own (ZT_DEF_ALIVE_INTERVAL, train/train_defaults.h).
#define ZT_WATCH_DEF_INTERVAL 10.0        // seconds between polls
#define ZT_WATCH_DEF_STALL_FACTOR 10.0    // stall bound in median step times
#define ZT_WATCH_DEF_MIN_STALL 600.0      // smallest stall bound, seconds
#define ZT_WATCH_DEF_STARTUP_GRACE 1800.0 // bound before the first step and the first tick
#define ZT_WATCH_DEF_POWER_SAMPLES 2      // consecutive deadlock snapshots that mean HUNG

typedef struct {
    double alive_interval;  // the trainer's --alive-interval (5 s)
    double stall_factor;    // 10
    double min_stall;       // 600 s
    double startup_grace;   // 1800 s: bound before the first step and before the first tick
    int power_samples;      // consecutive deadlock snapshots that mean HUNG (2; 0: off)
    zt_bands bands;         // B300 unless --bands
} zt_watch_opts;

void zt_watch_opts_default(zt_watch_opts *o);
// A rank's tick is stale after max(3 x alive_interval, 15 s).
double zt_watch_stale_after(const zt_watch_opts *o);

typedef struct {
    int have;
    char run_id[80], state[16];
    char error[600];  // state failed or aborted: the trainer's error, when it recorded one ("" otherwise)
    int stopped_by_rank;  // state aborted: the rank whose deadline took the job down (-1: not recorded)
    int not_ticking_n;    // state aborted: how many ranks' ticks had stopped then (-1: not recorded)
    char not_ticking[256];  // ... as a rank list ("1", "4-7")
    double ticks_older_than_s;
    double state_time;    // state aborted or failed as marked (train/liveness.h): when (0: not recorded)
    long long step, total_steps, epoch, tokens;
    double time, elapsed_s, step_time_s, tok_per_s, loss;
    double world_size;        // as written (NAN: absent); zt_watch_world decides what is used
    long long ckpt_writing;   // --async-save: a checkpoint of this step is being written (0: none)
    double ckpt_writing_s;
} zt_watch_hb;

typedef struct {
    int seen;        // the .alive file has been read at least once
    int present;     // it exists now
    double value;    // its "time" field when last read
    double since;    // watcher time from which its age counts
    double age;      // seconds since the tick last changed (see docs/operations.md)
    int pid;
    long long step;
    char host[64], state[16];
} zt_watch_rank;

typedef struct {
    char *run_dir;
    zt_watch_opts o;
    int polls;
    double t_start;
    zt_watch_hb hb;
    long long step_seen;
    double step_since;
    int world;
    zt_watch_rank *ranks;
    int ranks_cap;
    // from the last poll
    zt_watch_state state;
    double stall_s, stall_bound_s, median_step_s;
    int nstale;
    zt_gpu_state power_state;  // newest complete power snapshot (UNKNOWN: none)
    int power_n;               // power files read
    char reason[1024];
    char diagnosis[2048];
    char *details;             // multi-line flight summary (malloc'd) after zt_watch_diagnose
    char warnings[1024];
    char complete_final[512];
} zt_watch;

// The world size to judge run_dir by, given `claimed` (world_size of the file `src`:
// heartbeat.json, run.json; NAN when it has none). Every rank creates its flight recorder
// and liveness tick in RUN/ranks before the first step, and rank 0's recorder holds the
// job's world, so a claim is refused when it is not a whole number >= 1, when a rank below
// it has no rank-N.alive/.flight file, or when it differs from rank 0's recorder although
// `src` was written after it (by the same job). Refused: the world the files show is
// returned (rank 0's recorder's, when every rank below it has a file, else the ranks
// 0..k-1 that all have one, at least 1) and `why` names src, the field, the value and
// the evidence; accepted: `claimed`, why[0] = 0 (so the result differs from the claim
// exactly when why says why). Unclaimed: the highest rank with a file + 1. File names
// beyond rank 2^20 - 1 are no rank's. The work is one directory listing and one recorder
// read, whatever the claim.
int zt_watch_world(const char *run_dir, const char *src, double claimed, char *why, size_t whylen);
int zt_watch_init(zt_watch *w, const char *run_dir, const zt_watch_opts *o);
void zt_watch_free(zt_watch *w);
// Evaluate the run directory at wall-clock time `now` (Unix seconds). Ages count on
// the watcher's clock from the first time it saw a value; the first sight of a value
// is dated by the time written inside it (so --once works on the files alone).
zt_watch_state zt_watch_poll(zt_watch *w, double now);
// Reads RUN/heartbeat.json into w->hb (zt_watch_poll does it each poll; for a diagnosis without a
// poll: `report`). An absent or unreadable one leaves w->hb as it was.
void zt_watch_read_heartbeat(zt_watch *w);
// Fill w->diagnosis (one line) and w->details from the flight recorders and ticks.
void zt_watch_diagnose(zt_watch *w, double now);
// RUN/watch.json, atomically. 0 or -1 + zt_err.
int zt_watch_write_json(const zt_watch *w, double now);
// One status line for the loop: step/total, tok/s, ETA, loss, heartbeat age, ticks.
void zt_watch_status_line(const zt_watch *w, double now, char *buf, size_t n);
#endif
