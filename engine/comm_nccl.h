// NCCL entry points of the process group (engine/comm.h on device buffers). Like
// comm_mpi.h this is the only header that shows MPI types; define ZT_NCCL_NO_MPI=1
// (a GPU machine without MPI) to get the world-1 entry point alone.
// defines: zt_comm_init_nccl, zt_comm_init_nccl_single, zt_comm_nccl_stream,
//          zt_comm_nccl_device
#ifndef ZT_COMM_NCCL_H
#define ZT_COMM_NCCL_H

#if !defined(ZT_NCCL_NO_MPI) || !ZT_NCCL_NO_MPI
#include <mpi.h>
#endif

#include "engine/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

// Every buffer handed to the collectives of a comm made here is DEVICE memory on the
// comm's GPU. Collectives are enqueued on the channel's own non-blocking CUDA stream
// (one for DATA, one for CTRL, each with its own NCCL communicator: the same rule as
// the MPI backend) and a timing-free event is recorded after each; zt_wait / zt_test
// poll that event and ncclCommGetAsyncError, and the common layer's deadline applies.
// bf16 (ZT_DT_BF16) is a real type here: all-gather, broadcast and reductions (NCCL
// reduces bf16 pairwise with a bf16 rounding per step, so gradients should be
// reduce-scattered in f32). AVG is ncclAvg (floating types only, as comm.h says).
// Input written by other streams must be ordered before the collective by the caller
// (cudaStreamWaitEvent on zt_comm_nccl_stream, or a synchronize).

#if !defined(ZT_NCCL_NO_MPI) || !ZT_NCCL_NO_MPI
// Collective over `base` (usually MPI_COMM_WORLD; MPI initialised by the caller):
// rank, world and the node layout as zt_comm_init_mpi computes them; the GPU is
// `device` when >= 0, else the node-local rank (more ranks on a node than visible
// GPUs is an error). Rank 0 creates the two ncclUniqueIds and MPI_Bcasts them; then
// cudaSetDevice and ncclCommInitRank for both channels. base == MPI_COMM_NULL means
// a world of 1 without MPI (same as zt_comm_init_nccl_single). Blocking and not
// deadline-guarded, like zt_comm_init_mpi. opts may be NULL. 0, or -1 + zt_err.
int zt_comm_init_nccl(zt_comm **out, MPI_Comm base, int device, const zt_comm_opts *opts);
#endif

// A world of 1 on one GPU (device < 0: device 0) with no MPI at all: runs without
// mpirun and links without MPI when built with ZT_NCCL_NO_MPI=1.
int zt_comm_init_nccl_single(zt_comm **out, int device, const zt_comm_opts *opts);

// The cudaStream_t (as void *) that collectives of channel `chan` (ZT_CHAN_DATA or
// ZT_CHAN_CTRL) run on, so compute streams can wait on it with events and producers
// can enqueue on it. NULL if c is not an NCCL comm or chan is not a channel.
void *zt_comm_nccl_stream(zt_comm *c, int chan);
// The CUDA device of an NCCL comm, or -1 if c is not one.
int zt_comm_nccl_device(const zt_comm *c);

#ifdef __cplusplus
}
#endif
#endif
