// The checked-call macros of every CUDA, cuBLASLt and NCCL call in zerotrain, for .cu
// and .c files alike: each failure names the call, the file and the line.
//   fatal (the op layer, the GPU engine, the GPU test programs): zt_cuda_die prints
//     "zerotrain: error: <call> failed at <file>:<line> (device N): <detail>" and a hint,
//     and exits with ZT_EXIT_CUDA (4)
//   recoverable (the NCCL process group returns errors to its caller): the _GOTO forms
//     call report(ctx, status, "<call>", __FILE__, __LINE__) (which sets zt_err) and
//     jump to the enclosing function's `fail:` label
// ZT_CUBLAS_CHECK and ZT_NCCL_CHECK_GOTO need cublasLt.h / nccl.h included by the user.
// defines: ZT_CUDA_CHECK, ZT_CUBLAS_CHECK, ZT_CUDA_CHECK_GOTO, ZT_NCCL_CHECK_GOTO,
//          zt_cuda_check_at, zt_cublas_check_at
#ifndef ZT_CUDA_CHECK_H
#define ZT_CUDA_CHECK_H
#include <cuda_runtime_api.h>

#include "kernels/cuda/zt_cuda.h"  // zt_cuda_die, ZT_EXIT_CUDA

#ifdef __cplusplus
extern "C" {
#endif
// Fatal unless e == cudaSuccess; detail: "<error string> (<error name>)".
void zt_cuda_check_at(cudaError_t e, const char *call, const char *file, int line);
// Fatal unless status == CUBLAS_STATUS_SUCCESS (0); detail: "cuBLAS status N (<string>)".
void zt_cublas_check_at(int status, const char *call, const char *file, int line);
#ifdef __cplusplus
}
#endif

#define ZT_CUDA_CHECK(call) zt_cuda_check_at((call), #call, __FILE__, __LINE__)
#define ZT_CUBLAS_CHECK(call) zt_cublas_check_at((int)(call), #call, __FILE__, __LINE__)

#define ZT_CUDA_CHECK_GOTO(call, report, ctx)                                                                     \
    do {                                                                                                          \
        cudaError_t zt_e_ = (call);                                                                               \
        if (zt_e_ != cudaSuccess) {                                                                               \
            report((ctx), zt_e_, #call, __FILE__, __LINE__);                                                      \
            goto fail;                                                                                            \
        }                                                                                                         \
    } while (0)
#define ZT_NCCL_CHECK_GOTO(call, report, ctx)                                                                     \
    do {                                                                                                          \
        ncclResult_t zt_r_ = (call);                                                                              \
        if (zt_r_ != ncclSuccess) {                                                                               \
            report((ctx), zt_r_, #call, __FILE__, __LINE__);                                                      \
            goto fail;                                                                                            \
        }                                                                                                         \
    } while (0)
#endif
