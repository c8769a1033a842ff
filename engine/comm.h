// Process group: rank/node layout and the collectives FSDP needs (all-gather,
// reduce-scatter, all-reduce, broadcast, barrier; all-to-all for context parallelism), each
// async with a deadline-guarded wait, plus a watchdog thread that puts the same deadline on host waits outside the
// comm layer. Backend-neutral: MPI (host buffers), NCCL (device buffers).
// defines: zt_comm, zt_req, zt_comm_opts, zt_comm_info, zt_iallgather, zt_ireduce_scatter,
//          zt_iallreduce, zt_ibroadcast, zt_ibarrier, zt_ialltoall, zt_wait, zt_test, blocking wrappers,
//          zt_comm_watch_begin/end, zt_comm_split, zt_comm_backend (for implementations)
#ifndef ZT_COMM_H
#define ZT_COMM_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "engine/coll.h"

#ifdef __cplusplus
extern "C" {
#endif

// The vocabulary (zt_dtype, zt_red, zt_coll_op, zt_chan and their names): engine/coll.h.

// A zt_comm and its requests are used from one thread (MPI_THREAD_FUNNELED). The
// comm's own watchdog thread (below) only reads atomics until it aborts the job.
typedef struct zt_comm zt_comm;
typedef struct zt_req zt_req;

typedef struct {
    // Deadline for every wait once warm. 0 -> 300 s; INFINITY disables (debugger only).
    double timeout_s;
    // Deadline until zt_comm_mark_warm() (first step: allocation, first touch, NCCL
    // setup, slow first checkpoint load). 0 -> 1800 s or timeout_s if longer; a value given
    // is used as it is, also when shorter than timeout_s.
    double first_timeout_s;
    // Run directory: the flight recorder lives in RUN/ranks/rank-NNNNN.flight and the
    // abort dump in RUN/ranks/rank-NNNNN.flight.json. NULL: memory only, dumps to stderr.
    const char *run_dir;
    int flight_capacity;  // records in the ring; 0 -> 256
} zt_comm_opts;

// The deadlines' defaults (seconds); the train and preflight flags show the same values
// (train/train_defaults.h names them).
#define ZT_COMM_DEFAULT_TIMEOUT 300.0        // a rank stuck longer in one collective aborts the job
#define ZT_COMM_DEFAULT_FIRST_TIMEOUT 1800.0 // the same until the first step has finished
zt_comm_opts zt_comm_opts_default(void);

typedef struct {
    int rank, world;              // in the base communicator
    int local_rank, local_world;  // among ranks sharing this node's memory
    int node, nnodes;             // node index (ordered by lowest rank on it), node count
} zt_comm_info;

// ---- lifetime --------------------------------------------------------------
// Creation is backend-specific (engine/comm_mpi.h: zt_comm_init_mpi); it also starts
// the comm's watchdog thread (see "watched host waits"). Finalize is collective: every
// rank calls it. It stops and joins the watchdog, frees the communicators and unmaps
// the flight file (which stays on disk, marked finalized). It does not finalize MPI.
// Returns -1 (after still freeing everything) if collectives were left in flight.
int zt_comm_finalize(zt_comm *c);

void zt_comm_get_info(const zt_comm *c, zt_comm_info *out);
const char *zt_comm_backend_name(const zt_comm *c);
// Printed with any deadline report and stored in the flight records.
void zt_comm_set_context(zt_comm *c, int64_t step, int64_t epoch, int micro);
// The first step is done: later collectives use timeout_s instead of first_timeout_s.
void zt_comm_mark_warm(zt_comm *c);
// Change timeout_s for collectives issued and host waits watched from now on (e.g.
// around a slow save); returns the previous value.
double zt_comm_set_timeout(zt_comm *c, double timeout_s);

// ---- sub-groups --------------------------------------------------------------
// Collective over c: every rank calls it, and the ranks passing the same color form one
// new comm, ordered by key (then by rank in c) -- MPI_Comm_split's rule. The child is a
// comm like any other (both channels, its own deadline and watchdog) on the same backend:
// MPI sub-communicators, or per-group NCCL communicators bootstrapped over MPI. Its
// zt_comm_info is the child's (rank and world inside the group; the node layout of its
// members). Its deadlines follow the parent's (timeout_s, first_timeout_s, warm, and a
// zt_comm_set_timeout on the parent). Its flight recorder lives in memory (no file under
// RUN/ranks, where a group rank would collide with a world rank; a deadline report prints the
// child's own ring, `name` heading it): zt_comm_split_group below puts it on disk. The child
// must be finalized (zt_comm_finalize, collective over the child) before the parent.
// Blocking and not deadline-guarded, like the comm's creation. 0, or -1 + zt_err.
int zt_comm_split(zt_comm *c, int color, int key, const char *name, zt_comm **out);

// What a sub-comm stands for (the process-group mesh, engine/mesh.h, names every group it makes).
// With it, and a parent that has a run directory, the child's flight recorder is a file too:
// RUN/groups/ID/ranks/rank-NNNNN.flight (NNNNN: the rank inside the group; for a parent whose
// rings live elsewhere, e.g. the NCCL comm's RUN/nccl, under that: RUN/nccl/groups/ID), and the
// group's rank 0 writes RUN/groups/ID/group.json {"id", "title", "ranks": [world ranks in group
// rank order]} so a reader (zerotrain watch) can name the group and its members by world rank.
// A deadline report of the child names the group by its title and prints every rank by its
// world rank. Otherwise zt_comm_split's rules.
typedef struct {
    const char *id;     // directory name under RUN/groups: [A-Za-z0-9_-]+, e.g. "shard-1"
    const char *title;  // for people: "shard group 1 (ranks 2-3)"
    const int *ranks;   // the members' world ranks, in the order of their rank inside the group
    int nranks;
} zt_comm_group;
int zt_comm_split_group(zt_comm *c, int color, int key, const zt_comm_group *g, zt_comm **out);
// The title of a group made by zt_comm_split_group ("" for any other comm).
const char *zt_comm_title(const zt_comm *c);

// ---- watched host waits (the watchdog thread) --------------------------------
// A rank can block outside the comm layer on something that depends on a collective:
// cudaStreamSynchronize or a device-to-host copy queued behind an NCCL kernel whose
// peers never arrive, HDF5's internal MPI barriers in a collective checkpoint write.
// zt_wait's deadline cannot see those, so the main thread brackets them:
//
//     zt_comm_watch_begin(c, "checkpoint save (HDF5 collective write)");
//     ... the blocking call ...
//     zt_comm_watch_end(c);
//
// The comm's watchdog thread (started by zt_comm_create, joined by zt_comm_finalize)
// wakes every 100 ms (ZT_WATCHDOG_PERIOD_MS overrides it, 1..60000). A region open
// longer than its deadline gets the same treatment as a collective past its deadline
// in zt_wait: the report on stderr
//     zerotrain: rank R: collective deadline exceeded after T s: stuck in "LABEL" (host
//         wait outside the comm layer), started X s ago at TIME; step S epoch E micro M
// then the rule that fired, this rank's collectives in flight, the last completed ones,
// every rank's flight-recorder summary, the flight dump (RUN/ranks/rank-N.flight.json),
// and the backend abort with exit code 3 after the same grace period (1-10 s).
// The deadline is the one a collective issued at zt_comm_watch_begin would get
// (first_timeout_s before zt_comm_mark_warm, timeout_s after), fixed at begin: the
// whole region must finish within it, so raise it with zt_comm_set_timeout first for
// a region that legitimately runs longer (a large checkpoint write).
// Regions do not nest: a begin while one is open replaces it (new label, new start).
// Both calls are cheap enough for every step: a clock read and a few atomic stores
// (a seqlock the watchdog reads), no lock and no syscall. Main thread only, like the
// rest of zt_comm. The label's first 95 bytes are kept.
//
// Every period the watchdog also asks the backend for asynchronous errors
// (zt_comm_backend.async_error; NCCL: ncclCommGetAsyncError on each communicator) and
// turns one into the same report and abort, headed by the backend's message, e.g.
//     zerotrain: rank R: NCCL asynchronous error on the data channel: ...; step ...
void zt_comm_watch_begin(zt_comm *c, const char *label);
void zt_comm_watch_end(zt_comm *c);

// The job's owner (the trainer) is told of an abort before it happens, so that what it shows an
// outside watcher (RUN/heartbeat.json) says the job stopped and why: fn is called once per process,
// by whichever abort path runs first (a collective past its deadline, a watched host wait, an
// asynchronous error; the main or the watchdog thread), after the report and the flight dump and
// before the grace period, with this process's world rank and the report's headline. It runs in a
// dying process: no comm or MPI call, no lock the main thread may hold. NULL: none. Process-wide.
typedef void (*zt_comm_abort_hook)(void *ctx, int world_rank, const char *headline);
void zt_comm_set_abort_hook(zt_comm_abort_hook fn, void *ctx);

// ---- collectives -----------------------------------------------------------
// The i* forms start a collective and return a handle (NULL + zt_err on bad
// arguments or a backend error). Every handle is released by exactly one zt_wait,
// even after zt_test reported it done. Buffers must stay untouched until then.
// Labels ("unit 17 grads", "epoch-end save") name the call site in diagnostics; the
// first 47 bytes are kept.
//
// all-gather: send holds count_per_rank elements; recv gets world * count_per_rank,
// rank r's block at offset r * count_per_rank. send == recv + rank * count_per_rank
// (the shard already in place) is allowed.
zt_req *zt_iallgather(zt_comm *c, const void *send, void *recv, size_t count_per_rank, zt_dtype dt, const char *label);
// reduce-scatter: send holds world * count_per_rank elements; rank r receives the
// reduction of block r (count_per_rank elements). send and recv must not overlap.
zt_req *zt_ireduce_scatter(zt_comm *c, const void *send, void *recv, size_t count_per_rank, zt_dtype dt, zt_red red,
                           const char *label);
// all-reduce over count elements; send == recv reduces in place.
zt_req *zt_iallreduce(zt_comm *c, const void *send, void *recv, size_t count, zt_dtype dt, zt_red red,
                      const char *label);
zt_req *zt_ibroadcast(zt_comm *c, void *buf, size_t count, zt_dtype dt, int root, const char *label);
zt_req *zt_ibarrier(zt_comm *c, const char *label);
// all-to-all with per-rank counts (MPI_Alltoallv's exchange, blocks packed in rank order): send
// holds send_counts[r] elements for each rank r, rank r's block at offset send_counts[0] + ... +
// send_counts[r - 1]; recv gets recv_counts[r] elements from each rank r, likewise packed. Every
// pair must agree (rank a's send_counts[b] == rank b's recv_counts[a]): a mismatch is the
// backend's error or a hang past the deadline. Both arrays hold world entries and are copied
// (they may change once this returns). send and recv must not overlap. The data channel; the
// flight record's count is the elements this rank sends (its own block included). The NCCL
// backend refuses it (no grouped send/receive there yet).
zt_req *zt_ialltoall(zt_comm *c, const void *send, const size_t *send_counts, void *recv, const size_t *recv_counts,
                     zt_dtype dt, const char *label);

// Wait for r and free it: 0 when done, -1 + zt_err if the backend reported an error.
// Past the deadline it never returns: it prints what this rank is stuck in (and what
// its peers' flight recorders say), writes the flight dump and aborts the whole job
// (MPI_Abort(MPI_COMM_WORLD, 3) on the MPI backend). A waiting rank sleeps with
// backoff (up to ~1 ms) instead of spinning a core.
int zt_wait(zt_comm *c, zt_req *r);
// Poll without blocking: *done = 1 once complete (r still needs zt_wait). Also
// enforces the deadline, so a loop over zt_test cannot hang silently either.
int zt_test(zt_comm *c, zt_req *r, int *done);
// Drive progress of outstanding collectives (MPI makes progress only inside MPI
// calls); cheap, call it between pieces of compute to overlap on the CPU.
void zt_comm_progress(zt_comm *c);

// Blocking forms: i* + zt_wait. 0 or -1 + zt_err.
int zt_allgather(zt_comm *c, const void *send, void *recv, size_t count_per_rank, zt_dtype dt, const char *label);
int zt_reduce_scatter(zt_comm *c, const void *send, void *recv, size_t count_per_rank, zt_dtype dt, zt_red red,
                      const char *label);
int zt_allreduce(zt_comm *c, const void *send, void *recv, size_t count, zt_dtype dt, zt_red red, const char *label);
int zt_broadcast(zt_comm *c, void *buf, size_t count, zt_dtype dt, int root, const char *label);
int zt_barrier(zt_comm *c, const char *label);
int zt_alltoall(zt_comm *c, const void *send, const size_t *send_counts, void *recv, const size_t *recv_counts,
                zt_dtype dt, const char *label);

// ---- flight recorder ---------------------------------------------------------
// JSON dump of this rank's ring (most recent last); the same format as the
// .flight.json written on abort. Reading other ranks' files: engine/flight.h.
int zt_comm_dump_flight(zt_comm *c, FILE *out);
// Path of the binary ring (RUN/ranks/rank-NNNNN.flight) or NULL without run_dir.
const char *zt_comm_flight_path(const zt_comm *c);

// ---- backend interface (for implementations, not callers) -----------------
// A backend starts and polls collectives; the common layer (engine/comm.c) owns
// argument checks, handles, the flight recorder, deadlines and diagnostics.
typedef struct {
    zt_coll_op op;
    zt_chan chan;
    zt_dtype dt;
    zt_red red;
    const void *send;
    void *recv;    // broadcast: the buffer; barrier: NULL
    size_t count;  // per rank for all-gather / reduce-scatter, sent elements for all-to-all, total otherwise
    int root;      // broadcast only, -1 otherwise
    // all-to-all only (NULL otherwise): [world] elements to / from each rank, blocks packed in rank order
    const size_t *send_counts, *recv_counts;
} zt_coll;

typedef struct {
    const char *name;
    // Start the collective; *handle is handed back to test. 0, or -1 + zt_err.
    int (*start)(void *self, const zt_coll *op, void **handle);
    // Poll. On completion: finish (e.g. AVG scaling), release the handle, *done = 1.
    int (*test)(void *self, const zt_coll *op, void *handle, int *done);
    // Kill the whole job with a non-zero exit; must not return.
    void (*abort)(void *self, int code);
    // Free the backend's communicators and self (collective). Called after the
    // watchdog thread has been joined.
    void (*destroy)(void *self);
    // Optional (NULL: none). Called from the watchdog thread every period, concurrently
    // with the main thread's start/test: must be thread-safe against them and must not
    // block. Non-zero = the backend saw an asynchronous failure the main thread may
    // never see (it is blocked outside the comm layer); msg (n bytes) says what, e.g.
    // "NCCL asynchronous error on the data channel: ...". The watchdog then reports and
    // calls abort() from its own thread, so abort() must work from any thread.
    int (*async_error)(void *self, char *msg, size_t n);
    // Optional (NULL: zt_comm_split refuses). Collective over the parent: make the color's
    // sub-group and wrap it with zt_comm_create(out, ..., opts) (opts as given). 0 or -1 + zt_err.
    int (*split)(void *self, int color, int key, const char *name, const zt_comm_opts *opts, zt_comm **out);
} zt_comm_backend;

// The backend's `self` of c (for the backend's own accessors).
void *zt_comm_backend_self(const zt_comm *c);

// Used by backend init functions: wraps `self` (owned from now on, destroyed by
// zt_comm_finalize or on failure here) into a zt_comm. 0, or -1 + zt_err.
int zt_comm_create(zt_comm **out, const zt_comm_backend *be, void *self, const zt_comm_info *info,
                   const zt_comm_opts *opts);

#ifdef __cplusplus
}
#endif
#endif
