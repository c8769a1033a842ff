// The CUDA backend as a module loaded on demand. The zerotrain executable links no CUDA,
// cuDNN, cuBLASLt, NCCL or NVRTC library: everything that does (the GPU FSDP backend
// engine/fsdp_cuda.c, the NCCL process group engine/comm_nccl.c, the model families' GPU passes
// model/*_cuda*.c and kernels/cuda/) is built into libzerotrain_cuda.so, which `--device cuda`
// (or `auto` on a host with an NVIDIA driver) opens with dlopen. The module resolves the runtime's
// own functions (comm layer, flight recorder, model layout, errors) against the executable,
// which exports them. Programs that link the CUDA code statically (tests, benchmarks) get
// the same table without dlopen.
// Search order: $ZT_CUDA_MODULE alone when set (a regular file, or a symlink to one; a relative
// path is taken from the current directory), else libzerotrain_cuda.so beside the executable,
// then ../lib/zerotrain/ beside it. Never the build directory: a module's constructors run at
// dlopen, before its version is checked, so an installed zerotrain must not open its build tree's.
// defines: zt_cuda_module, zt_cuda_module_load, zt_cuda_module_loaded, zt_cuda_module_describe,
//          zt_cuda_driver_present, zt_cuda_module_find,
//          zt_cuda_module_register, zt_cuda_comm_init, zt_cuda_module_entry
#ifndef ZT_CUDA_MODULE_H
#define ZT_CUDA_MODULE_H
#include <stddef.h>

#include "engine/comm.h"
#include "engine/fsdp.h"

#ifdef __cplusplus
extern "C" {
#endif

struct zt_fsdp_opts;  // engine/fsdp_internal.h

// The module's interface version: bumped on any change of this table, of engine/fsdp_internal.h
// (the engine struct and the backend hooks the module implements), of model/family.h and
// model/family_cuda.h (the family tables), or of the zt_comm backend interface (engine/comm.h).
// The loader reads api_version first and nothing else of a table whose version differs.
#define ZT_CUDA_MODULE_API 8
#define ZT_CUDA_MODULE_FILE "libzerotrain_cuda.so"

typedef struct {
    int api_version;      // ZT_CUDA_MODULE_API of the module's build: the first member, checked first
    const char *version;  // ZT_VERSION of the module's build: must equal the executable's too
    int (*devices)(void);                                   // visible CUDA devices (0: none / no driver)
    void (*describe)(zt_comm *dcomm, char *buf, size_t n);  // the GPU of an NCCL comm, in words
    // The NCCL process group (engine/comm_nccl.h): mpi_comm points at an MPI_Comm (NULL: a
    // world of 1 without MPI); device < 0: the node-local rank.
    int (*comm_init)(zt_comm **out, void *mpi_comm, int device, const zt_comm_opts *o);
    int (*engine_init)(zt_fsdp *f, zt_comm *comm, zt_comm *dcomm, const zt_model_config *cfg, int micro_batch,
                       int grad_accum, int64_t seq_len, const zt_hparams *hp, uint64_t seed, const struct zt_fsdp_opts *o);
    int (*cudnn_built)(void);                               // the cuDNN attention path is built
    // The GPU passes of the model family named `name` (a const zt_family_cuda *, model/family_cuda.h),
    // or NULL when this module has none: what the engine runs, and what the trainer asks first.
    const void *(*family)(const char *name);
    // `plan --device cuda` (engine/rank_memory.h zt_rank_memory_cuda): the device bytes of the parts the
    // family and the op layer decide, as engine_init would allocate them for this job: activations (the
    // family's create + the staged ids, targets, positions and the step's reduction buffer), context,
    // scratch, workspace (zt_fsdp_memory's fields; the others are left as they are). S_local: the tokens
    // of a block a rank holds under a split of C ranks (S at C = 1); attention: ZT_ATTN_TILED or
    // ZT_ATTN_GEMM; max_shard: the largest unit's shard (elements: the gradient norm's partials).
    // 0, or -1 + zt_err (the module has no GPU passes for the family, or they refuse it).
    int (*memory_for)(const zt_model_config *cfg, int micro_batch, int grad_accum, int64_t seq_len, int64_t S_local,
                      int C, int recompute, int attention, int64_t max_shard, zt_fsdp_memory *out);
} zt_cuda_module;

// Defined by the module (engine/fsdp_cuda.c); the loader finds it with dlsym.
const zt_cuda_module *zt_cuda_module_entry(void);
// Called by the module's constructor: a program that links the CUDA code statically (tests,
// benchmarks) has the table without dlopen. (In a dlopen'd module it records the same table.)
void zt_cuda_module_register(const zt_cuda_module *m);

// The module, loaded on first call (then cached, also a failure): NULL + zt_err naming
// every path tried and why each failed (dlerror: a missing CUDA library says which; a FIFO,
// a directory, an ELF file for another machine are refused before dlopen, saying so).
const zt_cuda_module *zt_cuda_module_load(void);
int zt_cuda_module_loaded(void);  // loaded already (no attempt made here)
// Which module is loaded: "/abs/path/libzerotrain_cuda.so (zerotrain 0.1.0, API 5)" ("linked
// in (...)" for static programs) into buf, or NULL when none is.
const char *zt_cuda_module_describe(char *buf, size_t n);
// The file that zt_cuda_module_load would open first ("linked in" for static programs), or
// NULL when none exists. Nothing is loaded.
const char *zt_cuda_module_find(char *buf, size_t len);
// An NVIDIA kernel driver is present (/proc/driver/nvidia/version or /dev/nvidiactl):
// `--device auto` loads the module only then.
int zt_cuda_driver_present(void);
// The NCCL comm through the module; mpi_comm points at an MPI_Comm. 0, or -1 + zt_err.
int zt_cuda_comm_init(zt_comm **out, void *mpi_comm, int device, const zt_comm_opts *o);
#ifdef __cplusplus
}
#endif
#endif
