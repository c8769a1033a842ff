// The collective vocabulary: element types, reductions, ops and channels, with their
// names. Shared by the process group (engine/comm.h), which issues collectives, and
// the flight recorder (engine/flight.h), which stores them: both include this, and
// the recorder needs nothing from the process group.
// defines: zt_dtype, zt_red, zt_coll_op, zt_chan, zt_dtype_size, zt_dtype_name,
//          zt_red_name, zt_op_name
#ifndef ZT_COLL_H
#define ZT_COLL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// The numeric values of these enums are stored in flight-recorder files: append only.
// Element types. BF16 is moved as raw 2-byte words: all-gather and broadcast only on
// the MPI backend (MPI has no bf16 arithmetic); reductions on it are refused.
typedef enum { ZT_DT_F32 = 0, ZT_DT_F64, ZT_DT_I64, ZT_DT_I32, ZT_DT_U8, ZT_DT_BF16, ZT_DT_COUNT_ } zt_dtype;
// AVG = SUM then scale by 1/world; floating-point types only.
typedef enum { ZT_RED_SUM = 0, ZT_RED_MIN, ZT_RED_MAX, ZT_RED_AVG, ZT_RED_COUNT_ } zt_red;
typedef enum {
    ZT_OP_ALLGATHER = 1,
    ZT_OP_REDUCE_SCATTER,
    ZT_OP_ALLREDUCE,
    ZT_OP_BROADCAST,
    ZT_OP_BARRIER,
    ZT_OP_ALLTOALL,
} zt_coll_op;

// Channels. A collective's channel is fixed by its op, not chosen by the caller:
//   DATA: all-gather, reduce-scatter, all-to-all (the bulk FSDP and context-parallel traffic)
//   CTRL: all-reduce, broadcast, barrier (small control traffic: evenfix counts,
//         grad norm, checkpoint barriers, bootstrap ids)
// Each channel is its own communicator. A rank that skips a reduce-scatter and enters
// a barrier then genuinely hangs (and the deadline reports it) instead of having MPI
// match two different collective types on one communicator, which is undefined.
// Ordering rule for callers: collectives on ONE channel must be issued in the same
// order on every rank; order across the two channels may differ.
typedef enum { ZT_CHAN_DATA = 0, ZT_CHAN_CTRL = 1 } zt_chan;

static inline size_t zt_dtype_size(zt_dtype dt) {
    static const size_t sz[ZT_DT_COUNT_] = {4, 8, 8, 4, 1, 2};
    return (unsigned)dt < ZT_DT_COUNT_ ? sz[dt] : 0;
}

static inline const char *zt_dtype_name(zt_dtype dt) {
    static const char *n[ZT_DT_COUNT_] = {"f32", "f64", "i64", "i32", "u8", "bf16"};
    return (unsigned)dt < ZT_DT_COUNT_ ? n[dt] : "?";
}

static inline const char *zt_red_name(zt_red red) {
    static const char *n[ZT_RED_COUNT_] = {"sum", "min", "max", "avg"};
    return (unsigned)red < ZT_RED_COUNT_ ? n[red] : "?";
}

// "allgather", "reduce_scatter", ...
static inline const char *zt_op_name(zt_coll_op op) {
    switch (op) {
    case ZT_OP_ALLGATHER: return "allgather";
    case ZT_OP_REDUCE_SCATTER: return "reduce_scatter";
    case ZT_OP_ALLREDUCE: return "allreduce";
    case ZT_OP_BROADCAST: return "broadcast";
    case ZT_OP_BARRIER: return "barrier";
    case ZT_OP_ALLTOALL: return "alltoall";
    }
    return "?";
}

#ifdef __cplusplus
}
#endif
#endif
