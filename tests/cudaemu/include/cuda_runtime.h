// cudaemu: <cuda_runtime.h>. From C it is the runtime API; from C++ (a .cu file compiled
// for the host) it adds the device side: qualifiers, built-in variables, vector types,
// warp and block intrinsics, atomics and the kernel launch (ZT_LAUNCH), executed by
// tests/cudaemu/kernel.cpp with CUDA's rules (cooperative threads per block, real
// barriers, warps of 32, launch checks). Semantics and limits: docs/cudaemu.md.
#ifndef ZT_CUDAEMU_RUNTIME_H
#define ZT_CUDAEMU_RUNTIME_H
#include "cuda_runtime_api.h"

#ifdef __cplusplus
#include "cudaemu_device.h"
#endif
#endif
