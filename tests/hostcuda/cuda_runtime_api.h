// A stand-in for <cuda_runtime_api.h> that lets runtime/fsdp_cuda.c and
// model/qwen3_cuda_layer.c run on the CPU (tests/hostcuda/hostcuda.c): device memory
// is host memory, streams execute at once (every op has finished when its call
// returns), events and stream waits are no-ops. It exercises the GPU engine's host
// logic — unit offsets, pools, the collective calls (bf16 all-gather, fp32
// reduce-scatter, float64 all-reduce) over the MPI backend, the optimizer ranges —
// but not the ordering that events give on a real GPU. Only the calls those two
// files make are declared.
#ifndef ZT_HOSTCUDA_RUNTIME_API_H
#define ZT_HOSTCUDA_RUNTIME_API_H
#include <stddef.h>

typedef enum { cudaSuccess = 0, cudaErrorNotReady = 600, cudaErrorUnknown = 999 } cudaError_t;
typedef void *cudaStream_t;
typedef void *cudaEvent_t;
typedef enum {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3
} cudaMemcpyKind;
#define cudaStreamNonBlocking 0x01
#define cudaEventDisableTiming 0x02
#define cudaHostRegisterDefault 0x00

cudaError_t cudaSetDevice(int device);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaHostRegister(void *p, size_t bytes, unsigned int flags);
cudaError_t cudaHostUnregister(void *p);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorName(cudaError_t e);
const char *cudaGetErrorString(cudaError_t e);
#endif
