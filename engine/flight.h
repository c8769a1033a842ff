// Flight recorder: each rank's ring of its most recent collectives, kept in an
// mmap'd file (RUN/ranks/rank-NNNNN.flight) so a watcher can read it while the job
// runs and after it dies. Writer for engine/comm.c, reader and JSON for tools.
// Depends on the collective vocabulary (engine/coll.h) only, not on the process group.
// defines: zt_flight, zt_flight_hdr, zt_flight_rec, zt_flight_open, zt_flight_read,
//          zt_flight_read_rank, zt_flight_json, zt_flight_summarize_dir
#ifndef ZT_FLIGHT_H
#define ZT_FLIGHT_H

#include <stdint.h>
#include <stdio.h>

#include "engine/coll.h"

#ifdef __cplusplus
extern "C" {
#endif

// Binary layout, version 1 (host byte order: little-endian on every target).
// File size = 128 + capacity * 128 bytes; created under a temporary name and renamed,
// so a reader never sees a half-written header.
//
// Header, 128 bytes:
//   0  char[8] magic "ZTFLIGHT"      8  u32 version (1)      12 u32 header bytes (128)
//   16 u32 record bytes (128)        20 u32 capacity          24 i32 rank
//   28 i32 world                     32 u64 issued: seq of the newest record (0: none);
//                                       the record of seq s sits in slot (s-1) % capacity
//   40 i64 step   48 i64 epoch   56 i32 micro   (the rank's current context)
//   60 i32 pid    64 i64 created (ns since the Unix epoch)
//   72 u32 status (0 running, 1 finalized cleanly, 2 aborted)   76 i32 node
//   80 char[48] host name, NUL-terminated
//
// Record, 128 bytes, at 128 + slot * 128:
//   0  u32 lock: a seqlock, odd while the writer updates the record; a reader copies
//      the record and retries unless lock was even and unchanged around the copy
//   4  u8 op (zt_coll_op)  5 u8 dtype (zt_dtype)  6 u8 red (zt_red)
//   7  u8 state (zt_flight_state)
//   8  u64 seq: per-rank count of collectives issued, from 1 (0: empty slot). Ranks
//      that run the same program give the same seq to the same collective, so
//      differing ops at one seq expose the divergence.
//   16 u64 bytes: whole-buffer size (all-gather: the gathered output; reduce-scatter:
//      the full input; others: the buffer)
//   24 u64 count: elements (per rank for all-gather / reduce-scatter)
//   32 i64 t_start   40 i64 t_end (ns since the Unix epoch; t_end 0 while in flight)
//   48 i64 step   56 i64 epoch   64 i32 micro   (context when issued)
//   68 i32 root (broadcast; -1 otherwise)   72 u8 channel (0 data, 1 ctrl)   73..79 0
//   80 char[48] label, NUL-terminated
#define ZT_FLIGHT_MAGIC "ZTFLIGHT"
#define ZT_FLIGHT_VERSION 1
#define ZT_FLIGHT_HDR_BYTES 128
#define ZT_FLIGHT_REC_BYTES 128
#define ZT_FLIGHT_LABEL 48

typedef enum {
    ZT_FL_EMPTY = 0,
    ZT_FL_ISSUED = 1,   // started, nobody waiting on it yet
    ZT_FL_WAITING = 2,  // the rank is blocked in zt_wait on it
    ZT_FL_DONE = 3,
    ZT_FL_TIMED_OUT = 4,  // the deadline fired on it; the rank aborted
    ZT_FL_FAILED = 5,     // the backend returned an error
} zt_flight_state;

enum { ZT_FL_RUNNING = 0, ZT_FL_FINALIZED = 1, ZT_FL_ABORTED = 2 };

typedef struct {
    int rank, world, capacity, node, pid;
    uint32_t status;
    uint64_t issued;
    int64_t step, epoch;
    int micro;
    int64_t created_ns;
    char host[48];
} zt_flight_hdr;

typedef struct {
    uint64_t seq;
    zt_coll_op op;
    zt_dtype dtype;
    zt_red red;
    zt_flight_state state;
    zt_chan chan;
    int root;
    uint64_t bytes, count;
    int64_t t_start_ns, t_end_ns;
    int64_t step, epoch;
    int micro;
    char label[ZT_FLIGHT_LABEL];
} zt_flight_rec;

// ---- writer (one per rank; not thread-safe, like the comm that owns it) ----------
typedef struct zt_flight zt_flight;
// run_dir NULL: the ring lives in anonymous memory (same code, nothing on disk).
int zt_flight_open(zt_flight **out, const char *run_dir, int rank, int world, int node, int capacity);
// Record a new collective (rec->seq is assigned and returned; t_start, state and the
// context are taken from rec as given).
uint64_t zt_flight_begin(zt_flight *f, zt_flight_rec *rec);
// Update the state (and t_end when t_end_ns != 0) of seq, if still in the ring.
void zt_flight_update(zt_flight *f, uint64_t seq, zt_flight_state state, int64_t t_end_ns);
void zt_flight_set_context(zt_flight *f, int64_t step, int64_t epoch, int micro);
void zt_flight_set_status(zt_flight *f, uint32_t status);  // also msyncs the file
const char *zt_flight_path(const zt_flight *f);            // NULL without run_dir
// Consistent copy of the ring: *recs (malloc'd, oldest first), *n records.
int zt_flight_snapshot(const zt_flight *f, zt_flight_hdr *hdr, zt_flight_rec **recs, int *n);
void zt_flight_close(zt_flight *f, uint32_t status);

// ---- reader ----------------------------------------------------------------------
// Decode a .flight file, live or dead: header plus the records still in the ring,
// oldest first (*recs malloc'd; free it). -1 + zt_err naming the file and the rule
// otherwise: bad magic, version, size, or a header no writer leaves (rank outside
// [0, world), a status other than 0-2, an `issued` the newest slot contradicts). The work
// is bounded by the file's size, whatever its header says.
int zt_flight_read(const char *path, zt_flight_hdr *hdr, zt_flight_rec **recs, int *n);
// zt_flight_read of RUN/ranks/rank-NNNNN.flight, whose header must name that rank.
int zt_flight_read_rank(const char *path, int rank, zt_flight_hdr *hdr, zt_flight_rec **recs, int *n);
// The record a rank is blocked on: the WAITING/TIMED_OUT one, else the oldest still
// in flight; NULL when the rank has nothing in flight.
const zt_flight_rec *zt_flight_current(const zt_flight_rec *recs, int n);
// JSON document for a decoded ring (records oldest first; "reason" may be NULL).
int zt_flight_json(FILE *out, const zt_flight_hdr *hdr, const zt_flight_rec *recs, int n, const char *reason);
// One line per rank of RUN/ranks/rank-*.flight for ranks 0..world-1 (what each is in
// or last finished), then a line per distinct collective the ranks are blocked in,
// with their rank lists: the culprit of a mismatch stands out. Lines start with
// `prefix`. Returns the number of distinct blocked-in collectives, -1 on error.
int zt_flight_summarize_dir(const char *run_dir, int world, FILE *out, const char *prefix);
// The same for a group's rings (DIR/ranks/rank-NNNNN.flight, NNNNN the rank inside the group)
// printed under other names: names[i] is what group rank i is called (its world rank); NULL:
// the ranks as they are.
int zt_flight_summarize_group(const char *dir, int world, const int *names, FILE *out, const char *prefix);

const char *zt_flight_state_name(zt_flight_state s);
// "12.5 MiB"-style size into buf.
const char *zt_flight_fmt_bytes(uint64_t bytes, char *buf, size_t n);
// "2025-11-29T13:45:01.123Z" into buf.
const char *zt_flight_fmt_time(int64_t ns, char *buf, size_t n);
int64_t zt_flight_wall_ns(void);

#ifdef __cplusplus
}
#endif
#endif
