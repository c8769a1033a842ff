// Host helpers shared by the GPU test programs: bf16 rounding, random data,
// upload/download, error norms, the no-device skip.
// defines: zt_host_*, zt_dev_*, zt_relerr, zt_median, ZT_SKIP_NO_DEVICE
#ifndef ZT_GPU_TEST_UTIL_H
#define ZT_GPU_TEST_UTIL_H
#include <stdint.h>

#include "base/bf16.h"
#include "kernels/cuda/zt_cuda.h"

#define ZT_EXIT_SKIP 77  // ctest SKIP_RETURN_CODE

// bf16 rounding: zt_f32_to_bf16, zt_bf16_to_f32, zt_bf16_round (base/bf16.h).

// N(0, std) from a seeded generator, rounded to bf16 when round_bf16.
float *zt_host_normal(int64_t n, float std, uint64_t seed, int round_bf16);
float *zt_host_uniform(int64_t n, float lo, float hi, uint64_t seed, int round_bf16);

// Device copies (allocated here; free with zt_cuda_free).
zt_bf16 *zt_dev_bf16(const float *x, int64_t n);
float *zt_dev_f32(const float *x, int64_t n);
void zt_dev_get_bf16(float *dst, const zt_bf16 *src, int64_t n);
void zt_dev_get_f32(float *dst, const float *src, int64_t n);

// max |got - ref| / max |ref| (max-norm relative error). Any NaN or Inf in got
// (an unwritten, poisoned element) gives +inf.
double zt_relerr(const float *got, const float *ref, int64_t n);

// Median of v[0..n) (sorts v in place).
double zt_median(double *v, int n);

// Exit 77 with "SKIPPED: no CUDA device" when no device is visible.
void zt_skip_without_device(void);
#endif
