// MPI entry points of the process group: the only header that shows MPI types, so
// callers of engine/comm.h stay backend-neutral.
// defines: zt_comm_init_mpi, zt_comm_init_world, zt_comm_mpi_base, zt_mpi_node_layout, zt_mpi_init_once, zt_mpi_init_threads, zt_mpi_finalize_once,
//          zt_mpi_start_deadline, zt_mpi_init_guarded, zt_mpi_env_rank, zt_mpi_env_world
#ifndef ZT_COMM_MPI_H
#define ZT_COMM_MPI_H

#include <mpi.h>

#include "engine/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

// Collective over `base` (usually MPI_COMM_WORLD): duplicates it into the data and
// ctrl communicators, splits it by shared memory for the node layout, and opens this
// rank's flight recorder. Blocking and not deadline-guarded (MPI has no non-blocking
// split). opts may be NULL (defaults). 0, or -1 + zt_err.
int zt_comm_init_mpi(zt_comm **out, MPI_Comm base, const zt_comm_opts *opts);

// The MPI communicator a comm made by zt_comm_init_mpi was built over (`base`, as given: the
// world's MPI_COMM_WORLD), for MPI users outside the process group that need the same ranks
// (HDF5's collective checkpoint I/O, the settings agreement); MPI_COMM_NULL for a sub-group or a
// comm of another backend. Collectives on it must not overlap the comm's own.
MPI_Comm zt_comm_mpi_base(const zt_comm *c);

// The world's process group: zt_comm_init_mpi over MPI_COMM_WORLD.
int zt_comm_init_world(zt_comm **out, const zt_comm_opts *opts);

// Rank, world and node layout (local rank and size by shared memory; node index = the order
// of the nodes' lowest ranks) over `base`: the one computation both process groups use.
// Collective. 0, or -1 + zt_err.
int zt_mpi_node_layout(MPI_Comm base, zt_comm_info *info);

// MPI_Init_thread(MPI_THREAD_FUNNELED) unless MPI is already initialised; works
// without mpirun (a singleton world of 1). zt_mpi_finalize_once finalizes only what
// zt_mpi_init_once initialised. 0, or -1 + zt_err.
int zt_mpi_init_once(void);
// The same asking for thread level `level` (MPI_THREAD_MULTIPLE for --async-save); less
// than FUNNELED provided is an error, less than asked is left to the caller (MPI_Query_thread).
int zt_mpi_init_threads(int level);
int zt_mpi_finalize_once(void);

// The start-up deadline. MPI_Init_thread returns only once every rank of the job has started MPI
// (Open MPI's start-up exchange), so a rank that stalls or dies before it (a slow node, a stuck
// file system, a launcher that never started it) holds every other rank inside MPI_Init_thread,
// before any collective and its deadline exist. With a deadline, zt_mpi_init_guarded arms a
// thread first: if MPI_Init_thread has not returned within deadline_s it prints that this rank
// waited that long and a rank never joined (the rank from the launcher's environment:
// OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK or SLURM_PROCID), calls on_expiry (given at most 5 s:
// what the job's owner writes, e.g. its heartbeat) and exits with the collective deadline's code 3;
// the launcher then ends the job. deadline_s <= 0 or d NULL: no deadline (zt_mpi_init_threads).
typedef struct {
    double deadline_s;
    const char *source;  // what set it, for the message ("--first-collective-timeout")
    void (*on_expiry)(void *ctx, int rank, int world, const char *message);  // rank, world: -1 when unknown
    void *ctx;
} zt_mpi_start_deadline;
int zt_mpi_init_guarded(int level, const zt_mpi_start_deadline *d);
// This process's rank and the job's size from the launcher's environment, before MPI is up
// (-1: no launcher variable says).
int zt_mpi_env_rank(void);
int zt_mpi_env_world(void);

#ifdef __cplusplus
}
#endif
#endif
