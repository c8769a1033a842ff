// CUDA backend entry point. The full backend (bf16 kernels, cuBLASLt, NCCL) is
// a later issue; for now this reports whether a usable device exists.
#include <cuda_runtime.h>
extern "C" int zt_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
    return n;
}
