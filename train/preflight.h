// The pre-launch invariant gate: six checks that take seconds and catch what cost
// the field run hours (uneven per-rank data, a full checkpoint disk, a stale GPU
// process, a wrong network interface). Run by `zerotrain preflight` and at the start
// of `zerotrain train`.
// defines: zt_preflight_opts, zt_preflight_run, zt_shard_group_resolve
#ifndef ZT_PREFLIGHT_H
#define ZT_PREFLIGHT_H
#include <stdint.h>
#include <stdio.h>

#include "engine/comm.h"
#include "model/config.h"

typedef struct {
    const char *data;          // dataset directory (required)
    const char *model;         // config.json / HF dir (for vocab and checkpoint size; optional)
    const zt_model_config *cfg;  // the config as train settled it (an --init head that unties it); NULL:
                                 // read from `model`
    const char *run_dir;       // checkpoint filesystem is the one holding this path (optional)
    int world;                 // ranks the job will run with (0: the comm's world)
    int micro_batch, grad_accum;
    const char *shard_group;   // NULL: full shard; "node" or G: checked against the world and the node layout
    int reshard_after_forward; // 0 (keep-gathered): the memory the planner's formula gives
    int context_parallel;      // C: checked against the shard group, the world, the blocks and the device
                               // (engine/rank_memory.h) must fit the device's, else the gate refuses
                               // before its six checks (only with a model)
    int64_t assume_device_bytes;   // > 0: the device's memory (cpu: the host's available memory) for tests
    int evenfix;               // 0: per-rank spread > 0 fails the gate
    int64_t expect_tokens;     // 0: skip check 2
    int keep_last;             // checkpoints kept; disk must hold keep_last + 1
    int64_t assume_free_bytes; // > 0: use instead of statvfs (tests)
    const char *device;        // "cpu" or "cuda"
    const char *ifname;        // interface to check (default: $NCCL_SOCKET_IFNAME); NULL/empty: skip
    int port;                  // rendezvous port to check free on every node (0: $MASTER_PORT or skip)
    int probe_bandwidth;       // check 6 runs only when asked
    double min_bus_gbps;       // probe threshold (GB/s); 0: report only
    int verify_crc;            // check 1 recomputes crc32c (default 1)
    int allow_long_seq;        // check 1 passes a seq_len beyond the model's max_position_embeddings
} zt_preflight_opts;

void zt_preflight_defaults(zt_preflight_opts *o);
// Collective over comm. Prints one line per check on rank 0 (to out) and returns
// 0 when every check passed or was skipped, -1 (with zt_err) otherwise, on every rank.
int zt_preflight_run(zt_comm *comm, const zt_preflight_opts *o, FILE *out);

// --shard-group SPEC for a job of `world` ranks: NULL or "" -> world (full shard); "node" -> the
// ranks per node of comm's layout (every node must hold the same count, its ranks consecutive);
// a number -> it, which must divide world. Collective over comm (the node layout is agreed).
// 0 and *G, or -1 + the same zt_err on every rank.
int zt_shard_group_resolve(zt_comm *comm, const char *spec, int world, int *G);
#endif
