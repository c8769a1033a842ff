// The process-group mesh: the world's ranks laid out on named dimensions (replicate x shard, and
// inside a shard group the context groups of context parallelism),
// one communicator per group of each dimension, made once and asked for by name, so no caller
// carries communicators of its own making. Backend-neutral (engine/comm.h); it owns every
// comm it makes, and the world comms handed to it when told to.
// defines: zt_mesh, zt_mesh_dim, zt_mesh_dims, zt_mesh_create, zt_mesh_attach_device, zt_mesh_group,
//          zt_mesh_device_group, zt_mesh_size, zt_mesh_rank, zt_mesh_index, zt_mesh_title, zt_mesh_free
#ifndef ZT_MESH_H
#define ZT_MESH_H

#include "engine/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

// The names a caller asks for. The dimensions, outermost first, are the enumerators after
// ZT_MESH_WORLD in this order; rank order is row-major, consecutive ranks innermost:
//
//     rank = replica * G + shard_rank,   shard_rank = data * C + context      (R x G = W, C | G)
//
// so a shard group is G consecutive ranks (rank r is position r mod G of group r / G), a
// replica group is the R ranks at the same position of every shard group, and a context group
// is C consecutive ranks inside a shard group (rank r is position r mod C of group r / C). The
// shard group is the FSDP group of torchtitan's dp_shard x cp: parameters, gradients and AdamW
// state are sharded over all G ranks, context ranks included, so C adds no per-rank state. The
// context group is innermost because its ranks exchange K/V in every layer (the nearest ranks:
// one node). Data parallelism is over the W / C context groups (data rank = rank / C).
// A dimension added later goes where it belongs in this list and in engine/mesh.c's table (one
// row), with its size in zt_mesh_dims.
typedef enum {
    ZT_MESH_WORLD = 0,  // all W ranks: agreement, the step's control all-reduce
    ZT_MESH_REPLICATE,  // the R = W / G ranks holding the same shard (hybrid sharding's gradient all-reduce)
    ZT_MESH_SHARD,      // the G consecutive ranks that shard the parameters and optimizer state
    ZT_MESH_CONTEXT,    // the C consecutive ranks that share each block (context parallelism's K/V exchange)
    ZT_MESH_NDIMS_
} zt_mesh_dim;

typedef struct {
    int shard;    // G; 0 = W (full shard). Must divide W. replicate is what W leaves: W / G
    int context;  // C; 0 or 1 = none. Must divide G (engine/job_shape.h zt_context_check)
} zt_mesh_dims;

typedef struct zt_mesh zt_mesh;

// Collective over `world`: the groups of every dimension of size n < W (but replicate of size 1), each a
// zt_comm_split_group of world named "<dim> group <i> (ranks ...)" (flight recorders in
// RUN/groups/<dim>-<i>/ when world has a run directory; deadlines follow world's). own_world:
// zt_mesh_free finalizes world too. Blocking and not deadline-guarded, like a split.
// 0, or -1 + zt_err (nothing kept, world not finalized).
int zt_mesh_create(zt_comm *world, const zt_mesh_dims *dims, int own_world, zt_mesh **out);

// A second set of the same groups on device buffers (the NCCL comm of the GPU engine): dworld
// has the mesh's rank and world; its groups are split the same way (their flight recorders
// under dworld's run directory, RUN/nccl/groups/...). dworld == the world comm: the host groups
// serve as they are. own: zt_mesh_free finalizes dworld. Collective. 0 or -1 + zt_err.
int zt_mesh_attach_device(zt_mesh *m, zt_comm *dworld, int own);

// The comm of this rank's group of `dim`: the world comm for ZT_MESH_WORLD and for a dimension
// of size W; for ZT_MESH_REPLICATE and ZT_MESH_CONTEXT of size 1, NULL (a group of one rank has nothing to
// exchange); a shard group of one (G = 1) is a comm of its own (the engine's unit collectives
// run on it as copies).
zt_comm *zt_mesh_group(const zt_mesh *m, zt_mesh_dim dim);
// The same on device buffers (NULL before zt_mesh_attach_device).
zt_comm *zt_mesh_device_group(const zt_mesh *m, zt_mesh_dim dim);
int zt_mesh_size(const zt_mesh *m, zt_mesh_dim dim);   // ranks in the group (WORLD: W)
int zt_mesh_rank(const zt_mesh *m, zt_mesh_dim dim);   // this rank's position in it (WORLD: its rank)
int zt_mesh_index(const zt_mesh *m, zt_mesh_dim dim);  // which group of the dimension it is (WORLD: 0)
// "shard group 1 (ranks 2-3)"; "world (ranks 0-3)".
const char *zt_mesh_title(const zt_mesh *m, zt_mesh_dim dim);

// Collective: finalizes the groups (device first), then the world comms it owns. Every
// engine using the groups must be freed before. NULL is a no-op. 0, or -1 + zt_err (after
// still freeing everything) when a comm was finalized with collectives in flight.
int zt_mesh_free(zt_mesh *m);

#ifdef __cplusplus
}
#endif
#endif
